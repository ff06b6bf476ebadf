"""Exports of a batch's results: summary.csv and Gradescope's results.json per student.

Both are rebuilt from the reports alone (the gradebook keeps them), so `grade export OUT`
can regenerate them without grading anything again.

Both carry student text (ids from folder names, error messages), made inert by `grader.inert`:
in summary.csv every text cell is neutralised against formula injection (OWASP's CSV
Injection page) and quoted, while the grader's numbers stay unquoted numbers; in results.json
the `output` strings Gradescope shows keep their newlines and lose every other control.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from grader.atomic import atomic_file
from grader.inert import csv_cell, text
from grader.report import Report


class _Number(float):
    """A score in summary.csv: written unquoted and as `:g` writes it (12, 12.5, -2)."""

    def __repr__(self) -> str:  # the csv module writes a float's repr
        return format(float(self), "g")

    __str__ = __repr__


def _cells(row: list[object]) -> list[object]:
    return [cell if isinstance(cell, _Number) else csv_cell(cell) for cell in row]


def write_summary_csv(reports: dict[str, Report], path: Path) -> Path:
    """One row per student: status, raw total, max, each exercise's score, the late penalty, the
    sum of the adjustments and the final score (sorted by student).

    UTF-8, one header row. Text cells are quoted and `inert.csv_cell`-neutralised (a student id
    `=HYPERLINK(...)` is written `'=HYPERLINK(...)`, and a `;` inside it cannot start a cell in a
    spreadsheet that splits on `;`); scores are unquoted numbers, so a reader with
    `csv.QUOTE_NONNUMERIC` reads them back as floats. An exercise a report lacks is an empty cell.
    """
    exercises: list[str] = []
    for report in reports.values():
        for e in report.exercises:
            if e.id not in exercises:
                exercises.append(e.id)
    with atomic_file(path, text=True, newline="") as f:
        writer = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC)
        header = ["student", "assignment", "status", "score", "max_score", *exercises,
                  "late_penalty", "adjustment", "final_score", "error"]
        writer.writerow(_cells(header))
        for student in sorted(reports):
            r = reports[student]
            by_id = {e.id: e.score for e in r.exercises}
            writer.writerow(_cells([student, r.assignment, r.status, _Number(r.score), _Number(r.max_score),
                                    *(_Number(by_id[e]) if e in by_id else "" for e in exercises),
                                    _Number(r.late.points) if r.late else "",
                                    _Number(sum(a.points for a in r.adjustments)) if r.adjustments else "",
                                    _Number(r.final), r.error or ""]))
    return path


def gradescope_results(report: Report) -> dict:
    """Gradescope's autograder format: hidden-input checks are shown after publication.

    Gradescope shows `name` and `output` to the student as text: they keep their newlines and
    have every other control, escape and invisible character escaped (`inert.text`)."""
    tests = [
        {
            "name": text(f"{c.id}: {c.title}"),
            "score": c.score,
            "max_score": c.max_score,
            "status": "passed" if c.status == "passed" else "failed",
            "output": text("\n".join([c.message or ""] + ([f"The exercise asks: {r}" for r in c.requirements]
                                                             if c.status != "passed" else []))),
            "visibility": "after_published" if c.hidden or c.reveal == "on_hand_in" else "visible",
        }
        for e in report.exercises for c in e.checks
    ]
    notes = ([f"late: -{report.late.points:g} ({report.late.days_late} day(s) after {report.late.due})"]
             if report.late else []) + [f"adjusted {a.points:+g} by {a.by}: {a.reason}" for a in report.adjustments]
    output = text(report.error or "\n".join([f"{report.assignment}: {report.final:g} / {report.max_score:g}"
                                             + (f" (graded {report.score:g})" if report.final_score is not None else ""),
                                             *notes]))
    # Gradescope renders the top-level output as HTML unless told (its default, "simple_format"),
    # and student text is in it: every string here is plain text. stdout is the instructor's log.
    results = {"score": report.final, "output": output, "tests": tests,
               "output_format": "text", "test_output_format": "text", "test_name_format": "text",
               "visibility": "visible", "stdout_visibility": "hidden"}
    if not any(c.hidden for e in report.exercises for c in e.checks):
        # how long grading took depends on the hidden inputs where code ran on them (it can sleep
        # for lr seconds): the instructor's report keeps it, the student's results do not
        results["execution_time"] = report.duration_s
    return results


def write_gradescope(reports: dict[str, Report], out_dir: Path) -> Path:
    """OUT/gradescope/<student>/results.json for every student (<student>: discovery's
    student_file_stem, a safe folder name distinct per id; the id itself is inside)."""
    from grader.outputs.names import OutputFolder, gradescope_results_name

    for student, report in reports.items():
        path = out_dir / gradescope_results_name(student)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(gradescope_results(report), indent=2) + "\n", encoding="utf-8")
    return OutputFolder(out_dir).gradescope
