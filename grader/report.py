"""The JSON report (schema_version 1, docs/report-format.md), its models and its writer.

A leaf module: it imports nothing of the grader's execution layer (no kernel, sandbox or check
code), so reading or writing a report loads only pydantic, and the shapes a report carries
(`CellProblem`, `Isolation`, `CheckStatus`) are defined here, where a change to them is visibly a
change to the report's schema.

What a verdict means travels as fields, never only as a sentence: a check's `reason` (and the data
its sentence is made from: `not_answered`, `same_as`), a report's `fault` and `error_kind`. Readers
decide from those; `message` and `error` are sentences for people, never parsed back.
"""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

REPORT_SCHEMA_VERSION = 1

CheckStatus = Literal["passed", "failed", "error", "timeout", "skipped"]
# Why a check has its status, when the status alone does not say (`CheckResult.reason`):
#   not_answered  a name the exercise asks for is not defined, or holds no answer (`not_answered` says
#                 which): the verdict says nothing about the student's answer
#   same_cause    failed only for the root cause another check of the same function already shows
#                 (`same_as`): wrong values, or not traceable; or skipped, an answer not judged while
#                 its form check (`same_as`) fails (grader.checks.form)
#   on_hand_in    skipped: the self-check records it, `grade` judges it when the work is handed in
#   kernel_died   the Python kernel died while this check's question ran (the submission's code killed it)
Reason = Literal["not_answered", "same_cause", "on_hand_in", "kernel_died", "globals_unused"]
Fault = Literal["student", "grader", "machine", "internal"]  # whose fault an error report is (grader.faults)
ErrorKind = Literal["unreadable", "wrong_assignment", "overloaded", "grader_bug"]

NOT_ANSWERED = "Not answered yet"
CHECKED_ON_HAND_IN = "recorded; checked when you hand in"  # a skipped check's message at the self-check


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CellProblem(_Model):
    """A student cell that did not complete normally (reported to the student)."""

    cell: int
    where: str
    status: Literal["error", "timeout", "died", "skipped"]
    message: str
    line: int | None = Field(default=None, description="the line of the cell where it raised")
    ename: str | None = Field(default=None, description="the exception's type, when it raised")
    exercise: str | None = Field(default=None, description=(
        "the exercise whose names it would have defined (its checks say so; the note is not repeated)"))


class Isolation(_Model):
    """Which sandbox layers were in force for a report (recorded in it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sandboxed: bool = Field(description="every layer was in force")
    layers: list[str]
    missing: dict[str, str] = Field(default_factory=dict, description="layer -> why it is missing")
    backend: Literal["root", "rootless", "none"] | None = Field(default=None, description=(
        "how the layers were made: 'root' (the grader runs as root: setpriv to an unprivileged uid, "
        "cgroups, a tmpfs scratch), 'rootless' (an ordinary user: bubblewrap in an unprivileged user "
        "namespace, limits as rlimits counted in that namespace), 'none' (--no-sandbox, or not Linux); "
        "None: a report written before this field"))
    memory_bound: Literal["cgroup", "watcher", "per process"] | None = Field(default=None, description=(
        "what bounded the total memory of a sandbox's processes: its memory cgroup, the grader's watcher "
        "(no cgroup: it adds up what the processes of the sandbox's pid namespace hold and kills them past "
        "memory_bytes), or nothing but each process's address space; None: not sandboxed, or a report "
        "written before this field"))
    memory_bytes: int | None = Field(default=None, description="that bound, for the sandbox's processes together")
    scratch_bound: Literal["tmpfs", "file size"] | None = Field(default=None, description=(
        "what bounded the files a sandbox could write: size-limited tmpfs (the scratch and /tmp: on the "
        "host as root, in the sandbox's own mount namespace rootless), or only the size of each file "
        "(the file-size rlimit); None: not sandboxed, or a report written before this field"))
    scratch_bytes: int | None = Field(default=None, description="that bound, for all its files together")


class SubmissionRef(_Model):
    path: str
    sha256: str | None
    kind: Literal["notebook", "module"] | None


class Tally(_Model):
    """How many of a check's calls failed: for the instructor only (of a hidden check's inputs it
    tells where they lie, e.g. how many fall in the range a wrong branch covers)."""

    failed: int = Field(ge=0)
    calls: int = Field(ge=0)


class NotAnswered(_Model):
    """What a "Not answered yet" verdict is made from; `message` is the one sentence built from it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="the name the exercise asks for (as the check names it)")
    defined: bool = Field(default=False, description="`name` is defined, but holds no answer for `item`")
    item: str | int | None = Field(default=None, description=(
        "with `defined`: the answer it lacks (a dict key or a list index; None: the value itself)"))
    because: str | None = Field(default=None, description=(
        "the student cell that would have defined `name` and what it raised, hung or killed "
        "(grader.judging.attribution)"))
    used: bool = Field(default=False, description=(
        "`name` is not one the exercise asks for but a name the student's code uses (it raised NameError "
        "for it), which the failed cell of `because` would have bound: the message leads with that cell"))

    @property
    def message(self) -> str:
        if self.defined:
            return f"{NOT_ANSWERED}: `{self.name}` has no answer {self.item!r}."
        if self.used and self.because:
            return f"{self.because}, so `{self.name}` is not defined: fix that cell first"
        because = f", because {self.because}" if self.because else "."
        return f"{NOT_ANSWERED}: `{self.name}` is not defined{because}"


def check_reason(reason: Reason | None, not_answered: NotAnswered | None, same_as: str | None) -> None:
    """A verdict's reason and the data it is made from go together (a check's outcome and its result)."""
    if (reason == "not_answered") != (not_answered is not None):
        raise ValueError("`not_answered` is set exactly when the reason is 'not_answered'")
    if (reason == "same_cause") != (same_as is not None):
        raise ValueError("`same_as` is set exactly when the reason is 'same_cause'")


class CheckResult(_Model):
    id: str
    title: str
    status: CheckStatus
    score: float
    max_score: float
    hidden: bool
    reveal: Literal["details", "pass_fail", "on_hand_in"] = "details"
    message: str | None
    requirements: list[str] = Field(
        default_factory=list, description="the sentences of the exercise this check verifies (shown beside a failure)")
    counterexample: str | None = Field(
        default=None, description="for the instructor only: the failure with the hidden input or expected value "
        "that `message` leaves out (reveal = 'pass_fail'); no student-facing output prints it")
    judge_error: str | None = Field(
        default=None, description="the check's own code raised on this answer (for the instructor): "
        "on the reference solution that is an assignment bug, which `grade validate` reports")
    tally: Tally | None = Field(
        default=None, description="for the instructor only: how many of the check's calls failed (of a hidden "
        "check, a count of hidden inputs, which `message` never names); no student-facing output prints it")
    reason: Reason | None = Field(default=None, description=(
        "why the check has its status, when the status alone does not say: 'not_answered', "
        "'same_cause', 'on_hand_in' or 'kernel_died' (see `Reason`); None: the status and `message` say "
        "it all (or a report written before this field)"))
    not_answered: NotAnswered | None = Field(
        default=None, description="with reason 'not_answered': the name not defined (or without an answer)")
    same_as: str | None = Field(
        default=None, description="with reason 'same_cause': the id of the check that shows the root cause")
    undefined: str | None = Field(default=None, description=(
        "the name the student's code raised NameError for during this check: when a cell that failed would "
        "have bound it, the check is told as not answered because of that cell (grader.judging.attribution)"))

    @model_validator(mode="after")
    def _reason_has_its_data(self) -> CheckResult:
        check_reason(self.reason, self.not_answered, self.same_as)
        return self


class ExerciseResult(_Model):
    id: str
    title: str
    score: float
    max_score: float
    checks: list[CheckResult]


class Environment(_Model):
    grader: str
    python: str
    jax: str | None


class Adjustment(_Model):
    """A grade changed by hand (`grade adjust`): kept across regrades, shown wherever the score is."""

    points: float
    reason: str = Field(max_length=500)
    by: str = Field(max_length=100)
    at: str = Field(description="when, ISO 8601 with its time zone")


class LatePenalty(_Model):
    """What the late policy took off, and from what it was computed."""

    submitted_at: str = Field(description="ISO 8601")
    source: Literal["file", "times_csv"] = Field(description="where the submission time came from")
    due: str
    days_late: int = Field(ge=0, description="days (or part days) past the due time and its grace")
    points: float = Field(ge=0, description="points taken off")
    rule: str = Field(description="the policy in words: '10% of the points per day late, at most 50%'")


class LmsSubmission(_Model):
    """Who an LMS's download says handed the file in, and whether it marked it late: read from the
    file's or its folder's name (Canvas, Moodle) and Gradescope's submission_metadata.yml
    (grader/term/lms_names.py)."""

    lms: Literal["canvas", "moodle", "gradescope"]
    user_id: str | None = Field(default=None, description=(
        "Canvas's user id (the gradebook export's ID column); Moodle's participant number"))
    name: str | None = Field(default=None, description=(
        "as the LMS wrote it: Canvas's lower-cased sortable name without punctuation (anon_<id> when "
        "anonymous), Moodle's full name, Gradescope's submitter's name"))
    sid: str | None = Field(default=None, description="Gradescope's student id")
    email: str | None = Field(default=None, description="Gradescope's e-mail address")
    submission_id: str | None = Field(default=None, description=(
        "Canvas's attachment id, Gradescope's submission id: they change with every upload"))
    file_name: str | None = Field(default=None, description="the name the student uploaded the file under")
    late: bool | None = Field(description="Canvas's LATE mark; None where the download does not say")
    anonymous: bool = Field(default=False, description="Canvas's anonymous grading: no user id to match")
    submitted_at: str | None = Field(default=None, description="Gradescope's submission time, ISO 8601")
    group: list[str] = Field(default_factory=list, description=(
        "Gradescope: the other submitters of a group submission (e-mail, else sid, else name)"))


class ProgramFingerprint(_Model):
    """For the instructor: a normalised summary of one exported program (locations, names and
    the order of constants stripped), so that copied work can be found on the compiled program."""

    exercise: str
    function: str
    digest: str = Field(description="sha256 of the normalised module text: identical programs, identical digests")
    shingles: list[int] = Field(default_factory=list, max_length=4096,
                                description="hashes of the normalised text's op n-grams, for a similarity")


class Report(_Model):
    schema_version: Literal[1] = REPORT_SCHEMA_VERSION
    assignment: str
    submission: SubmissionRef
    student: str | None = None
    status: Literal["graded", "error"]
    error: str | None = None
    fault: Fault | None = Field(default=None, description=(
        "whose fault a report in error is, as grader.faults decides: 'student' (the file is no submission "
        "the grader can read), 'machine' (overloaded), 'internal' (a grader bug this submission revealed), "
        "'grader' (a broken spec or machine); None when graded, or when nobody decided (a grading process "
        "that died, a report written before this field)"))
    error_kind: ErrorKind | None = Field(default=None, description=(
        "why it was not graded: 'unreadable' (not a notebook or module the grader can read), "
        "'wrong_assignment' (a notebook for another assignment), 'overloaded' (timed out while the machine "
        "kept it from the CPU), 'grader_bug' (the grader raised); `error` is the sentence that says so"))
    score: float
    max_score: float
    exercises: list[ExerciseResult]
    seed: int
    duration_s: float
    environment: Environment
    cell_problems: list[CellProblem] = Field(
        default_factory=list, description="student cells that raised, hung or killed the kernel (the first 20)"
    )
    cell_problems_omitted: int = Field(default=0, ge=0, description="further cell problems, counted, not listed")
    isolation: Isolation = Field(description="the sandbox layers in force while grading")
    programs: list[ProgramFingerprint] = Field(
        default_factory=list, description="for the instructor: the exported programs' fingerprints (copied work)")
    adjustments: list[Adjustment] = Field(default_factory=list, description="grade changes by hand, with why")
    late: LatePenalty | None = Field(default=None, description="the late policy's penalty, when late")
    lms: LmsSubmission | None = Field(default=None, description=(
        "who the LMS's download says handed it in, and its late mark (None: not an LMS's name)"))
    final_score: float | None = Field(
        default=None, description="score after the late penalty and the adjustments (None when neither applies)")

    @property
    def final(self) -> float:
        """The score that goes to the gradebook and the LMS: `final_score`, else the raw `score`."""
        return self.score if self.final_score is None else self.final_score


class StudentReport(Report):
    """A report as the student who handed it in reads it from the hand-in service
    (grader/serve/student_view.py): without the seed of the class's hidden inputs (with the
    domains, which stay with the instructor, it draws every one of them) and without the time
    grading took (code run on a hidden value can sleep for it: a bit of that value per hand-in)."""

    seed: None = Field(default=None, description="withheld from a student")  # type: ignore[assignment]
    duration_s: None = Field(default=None, description="withheld from a student")  # type: ignore[assignment]


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def environment() -> Environment:
    return Environment(grader=_version("jax-course-grader") or "0+unknown",
                       python=platform.python_version(), jax=_version("jax"))


def write(report: Report, path: Path) -> None:
    """Write atomically: a reader never sees half a report."""
    from grader.atomic import write_atomic

    write_atomic(path, report.model_dump_json(indent=2) + "\n")
