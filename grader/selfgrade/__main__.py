"""`python -m grader.selfgrade` is the student pack's `grade` (the pack's `python -m grader` too)."""

from grader.selfgrade.cli import entry

entry()
