"""Exports of a batch's results: summary.csv and Gradescope's results.json per student.

Both are rebuilt from the reports alone (the gradebook keeps them), so `grade export OUT`
can regenerate them without grading anything again.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from grader.report import Report


def write_summary_csv(reports: dict[str, Report], path: Path) -> Path:
    """One row per student: status, total, max, then each exercise's score (sorted by student)."""
    exercises: list[str] = []
    for report in reports.values():
        for e in report.exercises:
            if e.id not in exercises:
                exercises.append(e.id)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "assignment", "status", "score", "max_score", *exercises, "error"])
        for student in sorted(reports):
            r = reports[student]
            by_id = {e.id: e.score for e in r.exercises}
            writer.writerow([student, r.assignment, r.status, f"{r.score:g}", f"{r.max_score:g}",
                             *(f"{by_id[e]:g}" if e in by_id else "" for e in exercises), r.error or ""])
    tmp.replace(path)
    return path


def gradescope_results(report: Report) -> dict:
    """Gradescope's autograder format: hidden-input checks are shown after publication."""
    tests = [
        {
            "name": f"{c.id}: {c.title}",
            "score": c.score,
            "max_score": c.max_score,
            "status": "passed" if c.status == "passed" else "failed",
            "output": c.message or "",
            "visibility": "after_published" if c.hidden else "visible",
        }
        for e in report.exercises for c in e.checks
    ]
    output = report.error or f"{report.assignment}: {report.score:g} / {report.max_score:g}"
    return {"score": report.score, "execution_time": report.duration_s, "output": output, "tests": tests}


def write_gradescope(reports: dict[str, Report], out_dir: Path) -> Path:
    """OUT/gradescope/<student>/results.json for every student."""
    root = out_dir / "gradescope"
    for student, report in reports.items():
        folder = root / student
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "results.json").write_text(json.dumps(gradescope_results(report), indent=2) + "\n",
                                             encoding="utf-8")
    return root
