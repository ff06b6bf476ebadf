"""Class-level tools for a term, around a batch's folder: the late policy and adjustments that
turn raw scores into final ones, the exports an LMS imports, the Gradescope autograder bundle,
and the search for copied work."""
