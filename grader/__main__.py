"""`python -m grader` is `grade`."""

from grader.cli import entry

entry()
