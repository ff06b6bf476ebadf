"""Gradescope: the autograder zip an instructor uploads, and what it runs per submission."""
