"""`python -m grader.selfgrade` is the student pack's `grade` (in a pack, `python -m jax_course_<id>`
and `python -m jax_course_<id>.selfgrade`)."""

from grader.selfgrade.cli import entry

entry()
