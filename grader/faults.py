"""Who is at fault: the one place that decides whether a failure is the student's or the grader's.

    the student's     SubmissionUnreadable (and its kinds): the file, its name, what it says it is.
                      -> that student's error report; a batch goes on.
    the grader's      KernelStartFailed, SpecInvalid, AssignmentNotFound, AssignmentBug, UsageError:
                      a broken machine, spec or instructor code, or a bad command line.
                      -> the run stops with one line (exit 3, or 2 for bad input of the instructor).
    the machine's     MachineOverloaded: a timeout while other processes had the sandbox's CPU,
                      still so after a regrade (grader/sandbox/starvation.py). -> that student's error
                      report saying the machine was overloaded, never a timeout verdict; the batch
                      goes on, and a rerun grades it again (an error report is never kept as done).
    nobody knows      any other exception while grading one submission: a grader bug that this
                      submission revealed. -> that student's error report saying so (the batch
                      goes on, no result is lost), counted as `internal`, and the run exits 3.

The decision lands in the error report's fields, `fault` (whose) and `error_kind` (why), which
readers use (`is_internal`); `error` is the sentence that says so, for people.

Every executor (serial, local worker processes, Dask workers) and `grade validate` grade through
`grade_guarded`; instructor code (references, generators, `prepare`) runs inside
`instructor_code`, so an exception there is an `AssignmentBug`, never a student's verdict.
Checks judge student values inside `judging` (see pipeline.judge): an exception there is that
check's `error`, kept for the instructor in `judge_error`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from grader.errors import (
    AssignmentBug,
    AssignmentNotFound,
    GraderError,
    KernelStartFailed,
    MachineOverloaded,
    SpecInvalid,
    SubmissionUnreadable,
    UsageError,
    WrongAssignment,
)
from grader.report import ErrorKind, Fault, Report

INTERNAL_PREFIX = "the grader failed on this submission (a grader bug; please report it): "
MAX_REASON = 500


def one_line(exc: BaseException, limit: int = MAX_REASON) -> str:
    """An exception as one bounded line: its type and the first line of its message, with what a
    line ending in ":" announces (the next line, and the indented ones under it), so that no
    sentence stops at its colon."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    text = lines[0].strip() if lines else ""
    for line in lines[1:]:
        if not (text.endswith(":") or line[:1].isspace()):
            break
        text += " " + line.strip()
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def classify(exc: BaseException) -> Fault:
    """Whose fault an exception raised while grading one submission is."""
    if isinstance(exc, SubmissionUnreadable):
        return "student"
    if isinstance(exc, MachineOverloaded):
        return "machine"
    if isinstance(exc, (KernelStartFailed, SpecInvalid, AssignmentNotFound, AssignmentBug, UsageError)):
        return "grader"
    if isinstance(exc, GraderError) and exc.exit_code == 3:
        return "grader"
    return "internal"


def error_kind(exc: BaseException) -> ErrorKind:
    """Why a failure that is not the grader's to stop on left the submission not graded."""
    if isinstance(exc, WrongAssignment):
        return "wrong_assignment"
    if isinstance(exc, SubmissionUnreadable):
        return "unreadable"
    if isinstance(exc, MachineOverloaded):
        return "overloaded"
    return "grader_bug"


def student_reason(exc: BaseException) -> str:
    """The sentence an error report carries for a failure that is not the grader's to stop on."""
    if isinstance(exc, (SubmissionUnreadable, MachineOverloaded)):
        return str(exc)
    return INTERNAL_PREFIX + one_line(exc)


def not_graded(exc: BaseException, error_report: Callable[[str], Report]) -> Report:
    """The error report of a failure that is not the grader's to stop on: whose fault it is and why
    in its fields (`fault`, `error_kind`), the sentence that says so in `error`."""
    report = error_report(student_reason(exc))
    return report.model_copy(update={"fault": classify(exc), "error_kind": error_kind(exc)})


def is_internal(report: Report) -> bool:
    """A report in error because of a grader bug (which the run's exit status reports)."""
    return report.status == "error" and report.fault == "internal"


def grade_guarded(grade: Callable[[], Report], error_report: Callable[[str], Report]) -> Report:
    """Run one grading; a student's failure or a grader bug becomes that student's error report,
    a broken grader, spec or assignment is raised to stop the run."""
    try:
        return grade()
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # noqa: BLE001 - this is the boundary: every exception is sorted here
        if classify(exc) == "grader":
            raise
        return not_graded(exc, error_report)


@contextlib.contextmanager
def instructor_code(where: str) -> Iterator[None]:
    """Run the assignment's own code (a reference, a generator, prepare()) on the grader's inputs:
    an exception there is the assignment's bug."""
    try:
        yield
    except GraderError:
        raise
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - whatever instructor code raises is its own bug
        raise AssignmentBug(where, one_line(exc)) from exc  # a stray exit() must not end the grader with 0
