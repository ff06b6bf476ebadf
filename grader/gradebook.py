"""The SQLite gradebook of a batch (OUT/gradebook.sqlite): a schema a person can query.

    students(id)
    submissions(student, assignment, path, sha256, grader_version, graded_at, status, error,
                score, max_score, seed, duration_s, report)   -- one row per student: the latest
    exercise_scores(student, exercise, score, max_score)
    check_results(student, check_id, status, score, max_score, hidden, message)

For example: `SELECT check_id, avg(status = 'passed') FROM check_results GROUP BY check_id`.
Each report is recorded in one transaction, so an interrupted batch leaves whole rows only.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from pathlib import Path

from grader.report import Report

SCHEMA = """
CREATE TABLE IF NOT EXISTS students (id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS submissions (
    student TEXT PRIMARY KEY REFERENCES students(id),
    assignment TEXT NOT NULL, path TEXT NOT NULL, sha256 TEXT, grader_version TEXT NOT NULL,
    graded_at TEXT NOT NULL, status TEXT NOT NULL, error TEXT,
    score REAL NOT NULL, max_score REAL NOT NULL, seed INTEGER NOT NULL, duration_s REAL NOT NULL,
    report TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS exercise_scores (
    student TEXT NOT NULL REFERENCES students(id), exercise TEXT NOT NULL,
    score REAL NOT NULL, max_score REAL NOT NULL, PRIMARY KEY (student, exercise)
);
CREATE TABLE IF NOT EXISTS check_results (
    student TEXT NOT NULL REFERENCES students(id), check_id TEXT NOT NULL, status TEXT NOT NULL,
    score REAL NOT NULL, max_score REAL NOT NULL, hidden INTEGER NOT NULL, message TEXT,
    PRIMARY KEY (student, check_id)
);
"""


class Gradebook:
    def __init__(self, path: Path):
        self.path = path
        self._db = sqlite3.connect(path)
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def record(self, report: Report) -> None:
        student = report.student
        assert student is not None, "batch reports carry their student id"
        with self._db:  # one transaction
            db = self._db
            db.execute("INSERT OR IGNORE INTO students(id) VALUES (?)", (student,))
            db.execute("DELETE FROM exercise_scores WHERE student = ?", (student,))
            db.execute("DELETE FROM check_results WHERE student = ?", (student,))
            db.execute(
                "INSERT OR REPLACE INTO submissions VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (student, report.assignment, report.submission.path, report.submission.sha256,
                 report.environment.grader, datetime.now(timezone.utc).isoformat(timespec="seconds"),
                 report.status, report.error, report.score, report.max_score, report.seed,
                 report.duration_s, report.model_dump_json()),
            )
            db.executemany("INSERT INTO exercise_scores VALUES (?,?,?,?)",
                           [(student, e.id, e.score, e.max_score) for e in report.exercises])
            db.executemany("INSERT INTO check_results VALUES (?,?,?,?,?,?,?)",
                           [(student, c.id, c.status, c.score, c.max_score, int(c.hidden), c.message)
                            for e in report.exercises for c in e.checks])

    def is_current(self, student: str, sha256: str, assignment: str | None, grader_version: str) -> bool:
        """A stored, graded result for exactly this file, assignment and grader version."""
        row = self._db.execute(
            "SELECT sha256, assignment, grader_version, status FROM submissions WHERE student = ?",
            (student,)).fetchone()
        return (row is not None and row[0] == sha256 and row[2] == grader_version and row[3] == "graded"
                and (assignment is None or row[1] == assignment))

    def reports(self) -> dict[str, Report]:
        rows = self._db.execute("SELECT student, report FROM submissions ORDER BY student").fetchall()
        return {student: Report.model_validate_json(text) for student, text in rows}
