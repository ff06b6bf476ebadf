"""Autograder for the JAX course: `grade submit.ipynb`, or `grade_one()` from Python."""

from grader.cases import Case
from grader.checks.custom import Verdict
from grader.options import GradeOptions
from grader.pipeline import grade_one
from grader.report import Report

__all__ = [
    "Case",
    "GradeOptions",
    "Report",
    "Verdict",
    "grade_one",
]
