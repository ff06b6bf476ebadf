"""The class page's numbers: pure functions of the reports, kept apart from the HTML so they are
tested as numbers.

Three decisions the page's readers rely on:

- **Not graded** (`StudentRow.status == "error"`) is a report in error, a student with no report
  at all (`not_graded`: student -> reason), and a submission that killed its kernel (a cell problem
  `died`, or a check whose reason is `kernel_died`). The last keeps the score its report has
  (the grader carried on in a fresh kernel) but is not shown as "graded": its score is partial.
- **Answered**: a student answered an exercise when their report was graded and at least one of
  its checks is neither `skipped` nor a "Not answered yet" verdict (reason `not_answered`: a name
  the exercise asks for is not defined, or holds no answer). Pass rates are among the students who
  answered, so blank submissions do not make a check look hard.
- **Scores** on the page are `Report.final` (after the late penalty and adjustments: what goes to
  the gradebook); the raw score is kept beside it. Exercise scores are raw (adjustments are not
  per exercise).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from statistics import median
from typing import Literal

from pydantic import BaseModel, ConfigDict, computed_field

from grader.report import Adjustment, CellProblem, CheckResult, ExerciseResult, LatePenalty, Report
from grader.term.models import SimilarGroup

BINS = 10  # histogram bins of percent: [0, 10), [10, 20), ... [90, 100]

State = Literal["missing", "error", "died", "graded"]
STATE_RANK = {"missing": 0, "error": 1, "died": 2, "graded": 3}  # the status sort: worst first


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Bin(_Model):
    lo: float
    hi: float
    count: int
    errors: int  # how many of `count` are not graded (a report in error scores 0)


class ExerciseStats(_Model):
    id: str
    title: str
    mean: float  # over every student; not graded or without the exercise counts 0
    max_score: float
    answered: int  # students who answered it (see the module's docstring)
    mean_answered: float | None  # mean score among them
    full: int  # of those, how many have full marks


class CheckStats(_Model):
    id: str
    title: str
    exercise: str
    hidden: bool
    passed: int
    total: int  # students who answered the exercise and whose check was judged (not skipped)
    statuses: dict[str, int]  # status -> count, among those `total`
    unanswered: int  # graded students who did not answer the exercise (left out of `total`)

    @computed_field
    @property
    def rate(self) -> float:
        return self.passed / self.total if self.total else 0.0


class StudentRow(_Model):
    student: str
    status: Literal["graded", "error"]  # "error": not graded (in full), and `error` says why
    state: State  # which kind: no report, a report in error, the kernel died, graded
    error: str | None
    score: float  # raw
    final: float  # after the late penalty and adjustments
    max_score: float
    percent: float  # of `final`
    exercises: dict[str, float | None]  # exercise id -> raw score; None when the report lacks it
    late: LatePenalty | None = None
    lms_late: str | None = None  # the LMS whose download marked the file late (Canvas's LATE), if one did
    adjustments: list[Adjustment] = []
    problems: list[CellProblem] = []
    problems_omitted: int = 0
    unanswered: list[str] = []  # exercises of a graded report that the student did not answer

    @computed_field
    @property
    def rank(self) -> int:
        """The status sort key, worst first: no report, error, kernel died, cell problems, clean."""
        return 2 * STATE_RANK[self.state] + (not self.problems)

    @property
    def changed(self) -> bool:
        """Whether a late penalty or an adjustment changed the score (the page shows both)."""
        return self.late is not None or bool(self.adjustments) or self.final != self.score


class ClassSummary(_Model):
    assignments: list[str]  # sorted; the "unknown" of reports in error is left out when others exist
    students: int
    graded: int
    errors: int  # not graded: reports in error, students without a report, kernels that died
    died: int
    missing: int
    mean_percent: float | None  # of final scores, over every student (0 for those without a report)
    median_percent: float | None
    histogram: list[Bin]
    exercises: list[ExerciseStats]
    checks: list[CheckStats]  # hardest first: lowest pass rate, then id
    rows: list[StudentRow]  # sorted by student id
    groups: list[SimilarGroup] = []  # by exercise, most alike first


def percent(score: float, max_score: float) -> float:
    return round(100.0 * score / max_score, 9) if max_score > 0 else 0.0


def bin_index(pct: float) -> int:
    """The histogram bin of a percent; a bin holds its lower edge, and the last bin also 100."""
    return min(max(int(pct // (100 / BINS)), 0), BINS - 1)


def unanswered(check: CheckResult) -> bool:
    """A check that says nothing about the student's answer: skipped, or "Not answered yet"."""
    return check.status == "skipped" or check.reason == "not_answered"


def answered(report: Report, exercise: ExerciseResult) -> bool:
    return report.status == "graded" and not all(unanswered(c) for c in exercise.checks)


def kernel_death(report: Report) -> str | None:
    """Why this report's kernel died, in the grader's words; None when it did not."""
    for problem in report.cell_problems:
        if problem.status == "died":
            return problem.message
    for ex in report.exercises:
        for c in ex.checks:
            if c.reason == "kernel_died":
                return f"{c.id}: {c.message}"
    return None


def _row(student: str, r: Report, exercise_ids: Iterable[str]) -> StudentRow:
    died = kernel_death(r) if r.status == "graded" else None
    state: State = "error" if r.status == "error" else "died" if died else "graded"
    by_ex = {ex.id: ex.score for ex in r.exercises}
    return StudentRow(student=student, status="graded" if state == "graded" else "error", state=state,
                      error=r.error if state == "error" else died, score=r.score, final=r.final,
                      max_score=r.max_score, percent=percent(r.final, r.max_score),
                      exercises={e: by_ex.get(e) for e in exercise_ids}, late=r.late,
                      lms_late=r.lms.lms.capitalize() if r.lms is not None and r.lms.late else None,
                      adjustments=r.adjustments, problems=r.cell_problems,
                      problems_omitted=r.cell_problems_omitted,
                      unanswered=[ex.id for ex in r.exercises if r.status == "graded" and not answered(r, ex)])


def _missing_row(student: str, reason: str, max_score: float, exercise_ids: Iterable[str]) -> StudentRow:
    return StudentRow(student=student, status="error", state="missing", error=reason, score=0.0, final=0.0,
                      max_score=max_score, percent=0.0, exercises=dict.fromkeys(exercise_ids))


def _histogram(rows: list[StudentRow]) -> list[Bin]:
    counts, errs = [0] * BINS, [0] * BINS
    for row in rows:
        i = bin_index(row.percent)
        counts[i] += 1
        errs[i] += row.status == "error"
    width = 100 / BINS
    return [Bin(lo=i * width, hi=(i + 1) * width, count=counts[i], errors=errs[i]) for i in range(BINS)]


def _exercise_stats(reports: dict[str, Report], rows: list[StudentRow],
                    titles: dict[str, str], maxima: dict[str, float]) -> list[ExerciseStats]:
    stats = []
    for e, title in titles.items():
        got = [ex for r in reports.values() for ex in r.exercises if ex.id == e and answered(r, ex)]
        stats.append(ExerciseStats(
            id=e, title=title, max_score=maxima[e],
            mean=sum(row.exercises[e] or 0.0 for row in rows) / len(rows), answered=len(got),
            mean_answered=sum(ex.score for ex in got) / len(got) if got else None,
            full=sum(ex.max_score > 0 and ex.score >= ex.max_score for ex in got)))
    return stats


def _check_stats(reports: dict[str, Report]) -> list[CheckStats]:
    checks: dict[str, dict] = {}
    for r in reports.values():
        if r.status != "graded":
            continue  # a report in error ran no check
        for ex in r.exercises:
            counted = answered(r, ex)
            for c in ex.checks:
                entry = checks.setdefault(c.id, {"id": c.id, "title": c.title, "exercise": ex.id,
                                                 "hidden": c.hidden, "passed": 0, "total": 0,
                                                 "statuses": Counter(), "unanswered": 0})
                if not counted:
                    entry["unanswered"] += 1
                elif c.status != "skipped":
                    entry["total"] += 1
                    entry["passed"] += c.status == "passed"
                    entry["statuses"][c.status] += 1
    stats = [CheckStats(**{**v, "statuses": dict(sorted(v["statuses"].items()))}) for v in checks.values()]
    return sorted(stats, key=lambda c: (c.rate, c.id))


def assignment_ids(reports: dict[str, Report]) -> list[str]:
    """The reports' assignments, sorted; the "unknown" of reports in error left out when others exist."""
    ids = sorted({r.assignment for r in reports.values()})
    if len(ids) > 1 and "unknown" in ids:
        ids.remove("unknown")
    return ids


def summarize(reports: dict[str, Report], not_graded: dict[str, str] | None = None,
              groups: Iterable[SimilarGroup] = ()) -> ClassSummary:
    """The class in numbers. `not_graded` names students without any report (student -> reason);
    a student who has a report is described by it, whatever `not_graded` says."""
    titles: dict[str, str] = {}  # exercises in the order of the reports (the spec's), first student first
    maxima: dict[str, float] = {}
    for s in sorted(reports):
        for ex in reports[s].exercises:
            titles.setdefault(ex.id, ex.title)
            maxima[ex.id] = max(maxima.get(ex.id, 0.0), ex.max_score)
    full_marks = max((r.max_score for r in reports.values()), default=0.0)
    extra = {s: why for s, why in (not_graded or {}).items() if s not in reports}
    rows = sorted([_row(s, r, titles) for s, r in reports.items()]
                  + [_missing_row(s, why, full_marks, titles) for s, why in extra.items()],
                  key=lambda row: row.student)
    pcts = [row.percent for row in rows]
    return ClassSummary(
        assignments=assignment_ids(reports), students=len(rows),
        graded=sum(row.status == "graded" for row in rows), errors=sum(row.status == "error" for row in rows),
        died=sum(row.state == "died" for row in rows), missing=len(extra),
        mean_percent=sum(pcts) / len(pcts) if pcts else None, median_percent=median(pcts) if pcts else None,
        histogram=_histogram(rows), exercises=_exercise_stats(reports, rows, titles, maxima) if rows else [],
        checks=_check_stats(reports), rows=rows,
        groups=sorted(groups, key=lambda g: (g.exercise, -g.similarity, sorted(g.students))),
    )
