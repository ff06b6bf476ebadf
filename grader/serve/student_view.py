"""A report as the student who handed it in may read it, and its feedback page.

The report a worker returns is the instructor's: besides the student-facing `message` of each
check (already built by grader/judging/reveal.py, which withholds hidden values and answers),
it carries what only the instructor reads: a check's `counterexample`, `tally` and `judge_error`,
the fingerprints of the student's programs (`programs`), the class's seed and the time grading
took (`StudentReport`). Those are dropped here, exactly the fields the feedback page
(grader/views/page.py) never shows. The path the file has on the grading
machine is replaced, wherever a sentence quotes it, by the name the student gave the file.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable
from pathlib import Path

from grader.report import CheckResult, ExerciseResult, Report, StudentReport
from grader.submission import display_path

_STYLE = re.compile(r"<style>(.*?)</style>", re.S)


def student_view(report: Report, stored: Path | str, file_name: str) -> StudentReport:
    """`report` without what only the instructor reads, its paths named as the student named the file."""
    paths = sorted({str(stored), display_path(stored), str(Path(stored).resolve())}, key=len, reverse=True)

    def named(value: str | None) -> str | None:
        if value is None:
            return None
        for path in paths:
            value = value.replace(path, file_name)
        return value

    exercises = [ExerciseResult(id=e.id, title=e.title, score=e.score, max_score=e.max_score,
                                checks=[_check(c, named) for c in e.checks]) for e in report.exercises]
    problems = [p.model_copy(update={"message": named(p.message), "where": named(p.where)})
                for p in report.cell_problems]
    shown = report.model_copy(update={
        "submission": report.submission.model_copy(update={"path": file_name}),
        "error": named(report.error), "exercises": exercises, "cell_problems": problems, "programs": [],
    })
    return StudentReport.model_validate({**dict(shown), "seed": None, "duration_s": None})


def _check(check: CheckResult, named: Callable[[str | None], str | None]) -> CheckResult:
    return check.model_copy(update={"counterexample": None, "tally": None, "judge_error": None,
                                    "message": named(check.message)})


def feedback_page(report: Report, stored: Path) -> str:
    """The feedback page of a student's view of a report, with the code of the kept file (none if
    it cannot be read any more). Blocking: it reads the file."""
    from grader.errors import GraderError
    from grader.submission import read_submission
    from grader.views.page import page

    try:
        cells = read_submission(stored).cells if report.status == "graded" else []
    except (GraderError, OSError):
        cells = []
    return page(report, cells)


def page_policy(html: str) -> str:
    """The Content-Security-Policy of a feedback page: nothing loads, nothing runs, it cannot be
    framed; its own inline style is let through by its hash, and no other style."""
    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(s.encode('utf-8')).digest()).decode()}'"
                      for s in _STYLE.findall(html))
    return (f"default-src 'none'; style-src {hashes or repr('none')}; base-uri 'none'; "
            "form-action 'none'; frame-ancestors 'none'")
