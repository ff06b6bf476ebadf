"""One place decides whose fault a failure is (grader.faults), and the report model is a leaf."""

from __future__ import annotations

import subprocess
import sys

import pytest

from grader.errors import (
    AssignmentBug,
    AssignmentNotFound,
    KernelStartFailed,
    SpecInvalid,
    SubmissionUnreadable,
    UsageError,
    WrongAssignment,
)
from grader.faults import INTERNAL_PREFIX, classify, grade_guarded, instructor_code, is_internal
from grader.report import Isolation, Report, SubmissionRef, environment


def _error_report(reason: str) -> Report:
    return Report(assignment="a", submission=SubmissionRef(path="p", sha256=None, kind=None), status="error",
                  error=reason, score=0, max_score=0, exercises=[], seed=0, duration_s=0,
                  environment=environment(), isolation=Isolation(sandboxed=False, layers=[]))


@pytest.mark.parametrize(("exc", "fault"), [
    (SubmissionUnreadable("x.py", "is not UTF-8 text"), "student"),
    (WrongAssignment("x.ipynb", "'../evil'"), "student"),
    (KernelStartFailed("no python3"), "grader"),
    (SpecInvalid("ch2-jit", ["points: < 0"]), "grader"),
    (AssignmentNotFound("nope", []), "grader"),
    (AssignmentBug("tax.hidden: generator", "ZeroDivisionError"), "grader"),
    (UsageError("bad"), "grader"),
    (RuntimeError("a grader bug"), "internal"),
    (RecursionError("deep"), "internal"),
])
def test_every_exception_has_one_owner(exc, fault) -> None:
    assert classify(exc) == fault


def test_a_student_failure_or_a_grader_bug_becomes_that_student_s_report() -> None:
    def unreadable() -> Report:
        raise SubmissionUnreadable("x.py", "is a FIFO")

    def buggy() -> Report:
        raise KeyError("oops\nsecond line")

    assert grade_guarded(unreadable, _error_report).error == "x.py: is a FIFO"
    internal = grade_guarded(buggy, _error_report)
    assert internal.error.startswith(INTERNAL_PREFIX) and "\n" not in internal.error and is_internal(internal)


def test_a_grader_fault_stops_the_run() -> None:
    def broken() -> Report:
        raise KernelStartFailed("no python3")

    with pytest.raises(KernelStartFailed):
        grade_guarded(broken, _error_report)


def test_instructor_code_that_raises_is_an_assignment_bug() -> None:
    with pytest.raises(AssignmentBug) as info:
        with instructor_code("tax.hidden: generator tax_scalars"):
            raise ZeroDivisionError("division by zero")
    assert info.value.exit_code == 3 and "tax_scalars" in str(info.value)


def test_reading_a_report_loads_no_execution_layer() -> None:
    """`import grader.report` used to load jupyter_client and zmq (0.95 s)."""
    code = ("import sys, grader.report; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'jupyter_client', 'zmq', 'nbclient', 'jax', 'grader'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['grader', 'grader.report']"
