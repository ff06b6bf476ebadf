"""Mutants the grader derives itself, from an assignment's spec and its reference solution.

Hand-written mutants share their author's blind spots: the person who wrote the checks wrote
them. These are derived by rule instead, for every interface function and every construct the
spec requires, so a new assignment gets them from its spec and its reference alone:

- `interface`: what the spec's checks call and with what (grader side, no JAX needed);
- `introspect`: what the reference solution's functions are and return (run in a worker);
- `families`: the mutants, each a cell of code appended to the reference module;
- `snippets`: the code those cells are made of.

`grade validate` grades them all through the batch path and prints the kill matrix.
"""
