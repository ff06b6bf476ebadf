"""Every exception the grader raises on purpose.

    GraderError                 base; `exit_code` is what the CLI exits with
    ├── UsageError              bad command line (exit 2)
    ├── SubmissionUnreadable    a file that cannot be read as a submission (exit 2)
    │   └── WrongAssignment     a notebook that names an assignment not graded here (exit 2)
    ├── SpecInvalid             an assignment folder whose spec does not load (exit 2)
    ├── AssignmentNotFound      no assignment folder with that id (exit 2)
    ├── AssignmentBug           the instructor's code (references, generators, checks.py) raised (exit 3)
    └── KernelError             the execution layer failed (never a student's fault)
        ├── KernelStartFailed   no kernel could be started at all (exit 3)
        └── MachineOverloaded   a timeout while others had the sandbox's CPU: regraded, then not graded

Student problems (a raising cell, a hang, a dead kernel, a hostile message) become statuses in
the report; only infrastructure faults and bad input reach the CLI as exceptions. Which is which
is decided in one place, `grader.faults`. Each class keeps its structured fields as attributes
and pickles with them, because batch workers send errors across processes.
"""

from __future__ import annotations


class GraderError(Exception):
    """Base of every deliberate grader error."""

    exit_code = 2

    def __reduce__(self):  # keep keyword fields through pickling
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls, args, state):
    obj = cls.__new__(cls)
    Exception.__init__(obj, *args)
    obj.__dict__.update(state)
    return obj


class UsageError(GraderError):
    """The command line does not make sense."""


class SubmissionUnreadable(GraderError):
    """The file is not a notebook or Python module we can grade."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class WrongAssignment(SubmissionUnreadable):
    """A notebook's `grader.assignment` is not an assignment here, or not the one being graded.

    The assignment is always the instructor's (-a, or the batch's): what a notebook names is only
    checked against it, never loaded. `claimed` is already safe to print (a capped repr when it is
    not a known id); `expected` is the assignment graded instead, None when the claim is unknown.
    """

    def __init__(self, path: str, claimed: str, expected: str | None = None, *,
                 graded: str = "this batch grades"):
        if expected is None:
            reason = f"this notebook says it is for {claimed}, which is not an assignment here"
        else:
            reason = f"this notebook says it is for {claimed}, but {graded} {expected}"
        super().__init__(path, reason)
        self.claimed = claimed
        self.expected = expected


class SpecInvalid(GraderError):
    """An assignment spec failed validation; `problems` holds one plain line per field."""

    def __init__(self, assignment: str, problems: list[str]):
        super().__init__(f"assignment {assignment!r} has an invalid spec: " + "; ".join(problems))
        self.assignment = assignment
        self.problems = problems


class AssignmentNotFound(GraderError):
    """No assignment folder by that id."""

    def __init__(self, assignment: str, known: list[str], *, message: str | None = None):
        hint = f" (known: {', '.join(known)})" if known else ""
        super().__init__(message or f"no assignment named {assignment!r}{hint}")
        self.assignment = assignment
        self.known = known


class AssignmentBug(GraderError):
    """Instructor code raised on the grader's own inputs, or a check raised on the reference
    solution: the assignment is broken, not the submission."""

    exit_code = 3

    def __init__(self, where: str, reason: str):
        super().__init__(f"the assignment is broken: {where}: {reason}")
        self.where = where
        self.reason = reason


class KernelError(GraderError):
    """The kernel layer failed."""

    exit_code = 3


class KernelStartFailed(KernelError):
    """A kernel could not be started: the grader's environment is broken, not the submission."""

    def __init__(self, reason: str):
        super().__init__(f"could not start a Python kernel: {reason}")
        self.reason = reason


class MachineOverloaded(KernelError):
    """A cell, check or verifier job timed out while the machine kept the sandbox's processes
    from the CPU (grader/sandbox/starvation.py): the timeout is not the student's. The submission is
    graded again; starved again, it is that student's error report saying so (grader.faults)."""

    def __init__(self, where: str, detail: str):
        super().__init__(f"the grading machine was overloaded, not this submission's code: {where} ran out "
                         f"of time while {detail}; grade it again when the machine is less busy")
        self.where = where
        self.detail = detail
