"""Final scores: the raw score of a report, less the late penalty, plus the adjustments.

Applied whenever a batch's outputs are rebuilt, never stored in place of the raw report, so a
regrade keeps a student's adjustments and late penalty, and changing the policy or an
adjustment never needs a regrade. A final score is not below 0 nor above the maximum plus
what adjustments add on purpose (a bonus may exceed the maximum; a penalty cannot make it
negative). The LMS's identity of the submission (`lms`: whose it is, Canvas's late mark) is read
from its path here too, so every report of a batch says it, whenever it was graded.
"""

from __future__ import annotations

from datetime import datetime

from grader.report import Adjustment, Report
from grader.term.late import LatePolicy, parse_time
from grader.term.lms_names import identify


def finalize(report: Report, adjustments: list[Adjustment], policy: LatePolicy | None,
             times: dict[str, datetime], recorded_at: str | None) -> Report:
    """The report with its adjustments, late penalty, final score and LMS identity filled in."""
    lms = identify(report.submission.path, report.student)
    late = None
    if policy is not None and report.status == "graded":
        student = report.student or ""
        if student in times:
            late = policy.penalty(times[student], "times_csv", report.max_score)
        elif recorded_at:
            late = policy.penalty(parse_time(recorded_at), "file", report.max_score)
    if not adjustments and late is None:
        return report.model_copy(update={"adjustments": [], "late": None, "final_score": None, "lms": lms})
    final = report.score - (late.points if late else 0.0)
    final = max(0.0, final) + sum(a.points for a in adjustments)
    return report.model_copy(update={"adjustments": list(adjustments), "late": late, "lms": lms,
                                     "final_score": round(max(0.0, final), 6)})
