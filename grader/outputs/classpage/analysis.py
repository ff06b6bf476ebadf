"""What the class got wrong: per check, the share of students who failed it, and the failures
grouped two ways, so that an instructor sees "31 students: a Python `if` on a traced value in
tax_switch" and opens one of them.

- **By message**: the message each student got, normalised. What differs from one student to the
  next is set aside: numbers (a line, a value, an element's index) and quoted text (a student's
  names and values: `...`, '...', "...", “...”). Students whose messages agree on the rest are one
  group; its `message` keeps what all of them got word for word and shows "…" where they differ.
- **By program**: the compiled program of the check's function (its fingerprint's digest, the
  normalised StableHLO the copied-work search compares: grader.verifier.inside.fingerprint), so
  students who wrote the same wrong program are one group; those without one (their function did
  not trace, or was not exported) are a group of their own.

Failed means judged and not passed (failed, raised, timed out) among the students who answered the
check's exercise (`summary.answered`), as the page's pass rates count them, and those whose answer
did not run (`tried`: a syntax error in its cell), who failed every check of it for that cell.

For the instructor only: it reads the reports and is shown on the class page and by `grade report`;
nothing of it goes into a student's report or feedback page. Pure: reports in, pydantic models out.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from grader.outputs.classpage.summary import answered, assignment_ids
from grader.report import CheckResult, ExerciseResult, ProgramFingerprint, Report
from grader.spec import (
    AssignmentSpec,
    CheckSpec,
    CompileLimitCheck,
    CustomCheck,
    EagerCheck,
    InterfaceCheck,
    NumericCheck,
    StructureCheck,
)

ANALYSIS_SCHEMA_VERSION = 1
FAILED = frozenset({"failed", "error", "timeout"})
DIFFERS = "…"  # where the messages of a group differ

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_VARIABLE = re.compile(
    r"`[^`\n]*`|(?<!\w)'[^'\n]*'(?!\w)|\"[^\"\n]*\"|“[^”\n]*”"  # quoted: a student's names and values
    + rf"|(?<![\w.]){_NUMBER}(?:[\s,]+{_NUMBER})*(?![\w.])"  # a number, or a run of them (an array)
    + r"|(?<!\w)(?:nan|-?inf)(?!\w)")
_BLANKS = re.compile(r"\s+")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WrongAnswer(_Model):
    """Students who failed one check the same way: the same message, or the same program."""

    students: list[str] = Field(description="sorted; every one of them failed the check")
    count: int = Field(ge=1, description="len(students)")
    example: str = Field(description="one of them, to open (the first by id)")
    example_feedback: str = Field(description="that student's feedback page, relative to the class page")
    message: str | None = Field(default=None, description=(
        "by message: the message they got, what differs between them shown as '…' (numbers, quoted "
        "names and values)"))
    program: str | None = Field(default=None, description=(
        "by program: the digest of their function's normalised program; None: no compiled program (the "
        "function did not trace, or no check exported it)"))
    reference: bool = Field(default=False, description="by program: it is the reference solution's program")


class CheckFailures(_Model):
    """One check: how many of the students it judged failed it, and how (most common first)."""

    id: str
    title: str
    exercise: str
    hidden: bool
    function: str | None = Field(description="the student's function the check calls, when it names one")
    judged: int = Field(ge=0, description="students who answered the exercise and whose check was judged")
    failed: int = Field(ge=0, description="of those, how many did not pass (failed, raised or timed out)")
    share: float = Field(ge=0, le=1, description="failed / judged (0 when none was judged)")
    statuses: dict[str, int] = Field(description="status -> count, among the failures")
    by_message: list[WrongAnswer]
    by_program: list[WrongAnswer]


class ClassAnalysis(_Model):
    """What the class got wrong (`grade report OUT --json`; the class page's "What the class got wrong")."""

    schema_version: Literal[1] = ANALYSIS_SCHEMA_VERSION
    assignments: list[str]
    students: int = Field(description="students with a report")
    graded: int = Field(description="of those, graded (the others ran no check)")
    checks: list[CheckFailures] = Field(description=(
        "every check judged at least once, the largest share failed first (ties in the spec's order)"))


def _parts(message: str) -> list[str]:
    """The message's first line, blanks collapsed, split into fixed text (even indices) and what
    may differ from one student to the next (odd indices)."""
    line = _BLANKS.sub(" ", message.strip().split("\n", 1)[0])
    out: list[str] = []
    start = 0
    for m in _VARIABLE.finditer(line):
        out += [line[start:m.start()], m.group()]
        start = m.end()
    return out + [line[start:]]


def message_key(message: str | None) -> str:
    """What groups messages: the first line with every number and quoted text set aside."""
    if not message:
        return ""
    parts = _parts(message)
    return "\x00".join(parts[0::2])


def merged_message(messages: Iterable[str | None]) -> str:
    """The group's message: the fixed text, and each part that may differ where every student got the
    same one, else "…". All `messages` have the same `message_key`."""
    split = [_parts(m) for m in messages if m]
    if not split:
        return "(no message)"
    first = split[0]
    return "".join(part if i % 2 == 0 or all(s[i] == part for s in split) else DIFFERS
                   for i, part in enumerate(first))


def _program_of(report: Report, exercise: str, function: str | None) -> str | None:
    """The digest of the student's program for this check: its function's, else (no function named)
    all the exercise's functions together; None when there is none."""
    prints = [p for p in report.programs if p.exercise == exercise]
    if function is not None:
        return next((p.digest for p in prints if p.function == function), None)
    if not prints:
        return None
    text = "\n".join(f"{p.function} {p.digest}" for p in sorted(prints, key=lambda p: p.function))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _group(students: list[str], feedback_file: Callable[[str], str], **fields: object) -> WrongAnswer:
    students = sorted(students)
    return WrongAnswer(students=students, count=len(students), example=students[0],
                       example_feedback=feedback_file(students[0]), **fields)


def _ordered(groups: list[WrongAnswer]) -> list[WrongAnswer]:
    return sorted(groups, key=lambda g: (-g.count, g.example))


def _failures(check: CheckResult, exercise: str, function: str | None,
              failing: list[tuple[str, Report, CheckResult]], judged: int,
              feedback_file: Callable[[str], str], reference: set[tuple[str, str, str]]) -> CheckFailures:
    by_key: dict[str, list[tuple[str, CheckResult]]] = {}
    for student, _, result in failing:
        by_key.setdefault(message_key(result.message), []).append((student, result))
    by_message = [_group([s for s, _ in members], feedback_file,
                         message=merged_message(r.message for _, r in members))
                  for members in by_key.values()]
    by_digest: dict[str | None, list[str]] = {}
    for student, report, _ in failing:
        by_digest.setdefault(_program_of(report, exercise, function), []).append(student)
    by_program = [_group(members, feedback_file, program=digest,
                         reference=digest is not None and function is not None
                         and (exercise, function, digest) in reference)
                  for digest, members in by_digest.items()]
    statuses: dict[str, int] = {}
    for _, _, result in failing:
        statuses[result.status] = statuses.get(result.status, 0) + 1
    return CheckFailures(id=check.id, title=check.title, exercise=exercise, hidden=check.hidden,
                         function=function, judged=judged, failed=len(failing),
                         share=len(failing) / judged if judged else 0.0,
                         statuses=dict(sorted(statuses.items())), by_message=_ordered(by_message),
                         by_program=_ordered(by_program))


def analyze(reports: dict[str, Report], *, feedback_file: Callable[[str], str],
            functions: dict[str, str] | None = None,
            reference: Iterable[ProgramFingerprint] | None = None) -> ClassAnalysis:
    """What the class got wrong. `reports` are keyed by student id; `feedback_file(student)` is the
    link to a student's feedback page; `functions` maps a check's id to the student function it
    calls (from the spec; a check without one is grouped on its exercise's whole program);
    `reference` are the reference solution's fingerprints (its programs are marked)."""
    functions = functions or {}
    mine = {(p.exercise, p.function, p.digest) for p in reference or ()}
    first: dict[str, tuple[CheckResult, str]] = {}  # check id -> (a result of it, its exercise)
    judged: dict[str, int] = {}
    failing: dict[str, list[tuple[str, Report, CheckResult]]] = {}
    for student in sorted(reports):
        report = reports[student]
        if report.status != "graded":
            continue  # a report in error ran no check
        for exercise in report.exercises:
            if not answered(report, exercise) and not tried(exercise):
                continue
            for check in exercise.checks:
                if check.status == "skipped":
                    continue
                first.setdefault(check.id, (check, exercise.id))
                judged[check.id] = judged.get(check.id, 0) + 1
                if check.status in FAILED:
                    failing.setdefault(check.id, []).append((student, report, check))
    checks = [_failures(check, exercise, functions.get(cid), failing.get(cid, []), judged[cid], feedback_file,
                        mine) for cid, (check, exercise) in first.items()]
    order = {cid: i for i, cid in enumerate(first)}  # ties in the reports' (the spec's) order
    return ClassAnalysis(assignments=assignment_ids(reports), students=len(reports),
                         graded=sum(r.status == "graded" for r in reports.values()),
                         checks=sorted(checks, key=lambda c: (-c.share, -c.failed, order[c.id])))


def tried(exercise: ExerciseResult) -> bool:
    """An answer that did not run: a cell that would have defined the exercise's names failed (a
    syntax error, an import), so nothing of it is defined, yet the student answered it. Counted
    among those judged, failed by that cell, as the student is told."""
    return any(c.not_answered is not None and c.not_answered.because for c in exercise.checks)


def _calls(check: CheckSpec) -> str | None:
    """The student's function a check calls: `function` of the checks that run one, `name` of an
    interface check, `call` of a custom one (its `function` is the instructor's)."""
    if isinstance(check, InterfaceCheck):
        return check.name
    if isinstance(check, CustomCheck):
        return check.call
    if isinstance(check, (NumericCheck, StructureCheck, CompileLimitCheck, EagerCheck)):
        return check.function
    return None


def check_functions(spec: AssignmentSpec) -> dict[str, str]:
    """check id ('<exercise>.<check>') -> the student's function it calls, for the checks that call one."""
    return {f"{exercise.id}.{check.id}": target for exercise in spec.exercises for check in exercise.checks
            if (target := _calls(check)) is not None}
