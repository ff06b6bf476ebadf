"""Every exception the grader raises on purpose.

    GraderError                 base; `exit_code` is what the CLI exits with
    ├── UsageError              bad command line (exit 2)
    ├── SubmissionUnreadable    a file that cannot be read as a submission (exit 2)
    ├── SpecInvalid             an assignment folder whose spec does not load (exit 2)
    ├── AssignmentNotFound      no assignment folder with that id (exit 2)
    └── KernelError             the execution layer failed (never a student's fault)
        ├── KernelStartFailed   no kernel could be started at all (exit 3)
        ├── KernelDied          the kernel process went away while running a cell
        └── CellTimedOut        a cell ran past its deadline

Student problems (a raising cell, a hang, a dead kernel) become statuses in the report; only
infrastructure faults and bad input reach the CLI as exceptions. Each class keeps its structured
fields as attributes and pickles with them, because batch workers send errors across processes.
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


class SpecInvalid(GraderError):
    """An assignment spec failed validation; `problems` holds one plain line per field."""

    def __init__(self, assignment: str, problems: list[str]):
        super().__init__(f"assignment {assignment!r} has an invalid spec: " + "; ".join(problems))
        self.assignment = assignment
        self.problems = problems


class AssignmentNotFound(GraderError):
    """No assignment folder by that id."""

    def __init__(self, assignment: str, known: list[str]):
        hint = f" (known: {', '.join(known)})" if known else ""
        super().__init__(f"no assignment named {assignment!r}{hint}")
        self.assignment = assignment
        self.known = known


class KernelError(GraderError):
    """The kernel layer failed."""

    exit_code = 3


class KernelStartFailed(KernelError):
    """A kernel could not be started: the grader's environment is broken, not the submission."""

    def __init__(self, reason: str):
        super().__init__(f"could not start a Python kernel: {reason}")
        self.reason = reason


class KernelDied(KernelError):
    """The kernel process exited while a cell was running."""

    def __init__(self, cell_index: int | None = None):
        super().__init__(f"the kernel died while running cell {cell_index}")
        self.cell_index = cell_index


class CellTimedOut(KernelError):
    """A cell ran past its deadline."""

    def __init__(self, cell_index: int | None, seconds: float):
        super().__init__(f"cell {cell_index} ran longer than {seconds:g} s")
        self.cell_index = cell_index
        self.seconds = seconds
