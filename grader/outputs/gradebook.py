"""The SQLite gradebook of a batch (OUT/gradebook.sqlite): a schema a person can query.

    students(id)
    submissions(student, assignment, path, sha256, grader_version, graded_at, status, error,
                score, max_score, seed, duration_s, report, assignment_digest, jax_version,
                submitted_at, final_score)                    -- one row per student: the latest
    exercise_scores(student, exercise, score, max_score)
    check_results(student, check_id, status, score, max_score, hidden, message)
    adjustments(student, points, reason, by, at)              -- grade changes by hand, kept
    settings(name, value)                                     -- the exports this batch keeps
    seeds(seed, drawn_at, redrawn)                            -- the batch's seed: the last row
    student_seeds(student, seed, drawn_at, redrawn)           -- per student: each one's last row
    removals(student, removed_at, by, reason, path, report)   -- students taken out (`grade remove`)
    similar_programs(exercise, group_id, student, ...)        -- copied work (grader.term.similarity)

For example: `SELECT check_id, avg(status = 'passed') FROM check_results GROUP BY check_id`.

`report` is the raw report as graded; `final_score` is the score after the late policy and the
adjustments, written when the outputs are rebuilt. A stored result is current (`is_current`)
only for the same submission bytes, assignment digest, grader version, JAX version and seed of
the hidden inputs: the resume key covers everything a verdict depends on. A gradebook from an
older grader gains the new columns and tables when opened; its rows, lacking a digest, are
regraded.

The batch keeps one seed for life (`seed`, grader/batch/seed.py): every grading into it draws
the hidden inputs from it, so two byte-identical notebooks meet the same inputs whenever each
was graded; a new one is drawn only when the instructor asks, and then every row is regraded
(its seed no longer matches). A batch started with `--seed-per-student` (settings' `seeds`:
`SeedSettings`) keeps a seed per student instead (`student_seeds`, grader/batch/student_seeds.py):
drawn at random at the student's first grading, never from their id, and reused by every
regrade of theirs; a redraw adds a row per student (`redrawn`), so the table is their history.
Each student's report records the seed it was graded with, as `submissions.seed` does. A student
removed (`remove`) leaves the current tables; the row in `removals` keeps who, when, why and the
raw report. Their adjustments stay, and apply again if they are graded again.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel

from grader.report import Adjustment, Report

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
CREATE TABLE IF NOT EXISTS adjustments (
    student TEXT NOT NULL, points REAL NOT NULL, reason TEXT NOT NULL, by TEXT NOT NULL, at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS seeds (seed INTEGER NOT NULL, drawn_at TEXT NOT NULL, redrawn INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS student_seeds (
    student TEXT NOT NULL, seed INTEGER NOT NULL, drawn_at TEXT NOT NULL, redrawn INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS removals (
    student TEXT NOT NULL, removed_at TEXT NOT NULL, by TEXT NOT NULL, reason TEXT NOT NULL, path TEXT,
    report TEXT
);
"""

ADDED_COLUMNS = {  # columns later graders added to `submissions`, with their types
    "assignment_digest": "TEXT", "jax_version": "TEXT", "submitted_at": "TEXT", "final_score": "REAL",
}


class Stored(BaseModel):
    """What the resume key compares: a result is reused only when all of it matches."""

    sha256: str | None
    assignment: str | None
    assignment_digest: str | None
    grader_version: str
    jax_version: str | None
    seed: int | None = None  # of the hidden inputs (None: any; a batch always gives its own)


class SeedDraw(BaseModel):
    """One draw of a batch's seed: the first, or one the instructor asked for (`redrawn`)."""

    seed: int
    drawn_at: str  # ISO 8601, UTC
    redrawn: bool = False


class StudentSeed(BaseModel):
    """One student's seed in a batch that draws hidden inputs per student."""

    student: str
    seed: int
    drawn_at: str  # ISO 8601, UTC
    redrawn: bool = False  # drawn by --new-seed, not at the student's first grading


class SeedSettings(BaseModel):
    """How a batch draws its hidden inputs, chosen at its first grading and kept for life."""

    per_student: bool = False  # a seed per student (`student_seeds`), not one for the batch (`seeds`)
    since: str | None = None  # when that was chosen (ISO 8601, UTC)


class Removal(BaseModel):
    """A student taken out of a batch (`grade remove`): who, when, by whom, why."""

    student: str
    removed_at: str  # ISO 8601, UTC
    by: str
    reason: str
    path: str | None = None  # the submission graded last


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class ExportSettings(BaseModel):
    """The exports a batch was asked for once and keeps up to date on every rebuild."""

    gradescope: bool = False
    canvas_roster: str | None = None
    canvas_column: str | None = None
    moodle: bool = False

    def merged(self, other: ExportSettings) -> ExportSettings:
        column = self.canvas_column if other.canvas_column is None else (other.canvas_column or None)
        return ExportSettings(gradescope=self.gradescope or other.gradescope,
                              canvas_roster=other.canvas_roster or self.canvas_roster,
                              canvas_column=column,  # "" given: found by id again
                              moodle=self.moodle or other.moodle)


class Gradebook:
    def __init__(self, path: Path):
        self.path = path
        self._db = sqlite3.connect(path)
        self._db.executescript(SCHEMA)
        have = {row[1] for row in self._db.execute("PRAGMA table_info(submissions)")}
        for column, kind in ADDED_COLUMNS.items():
            if column not in have:
                self._db.execute(f"ALTER TABLE submissions ADD COLUMN {column} {kind}")
        self._db.commit()

    @property
    def connection(self) -> sqlite3.Connection:
        """For the class-level tools that keep their own tables here (copied work)."""
        return self._db

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def record(self, report: Report, *, assignment_digest: str | None = None,
               submitted_at: str | None = None) -> None:
        """Each report in one transaction, so an interrupted batch leaves whole rows only."""
        student = report.student
        assert student is not None, "batch reports carry their student id"
        raw = report.model_copy(update={"adjustments": [], "late": None, "final_score": None})
        with self._db:
            db = self._db
            db.execute("INSERT OR IGNORE INTO students(id) VALUES (?)", (student,))
            db.execute("DELETE FROM exercise_scores WHERE student = ?", (student,))
            db.execute("DELETE FROM check_results WHERE student = ?", (student,))
            db.execute(
                "INSERT OR REPLACE INTO submissions (student, assignment, path, sha256, grader_version, graded_at,"
                " status, error, score, max_score, seed, duration_s, report, assignment_digest, jax_version,"
                " submitted_at, final_score) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (student, report.assignment, report.submission.path, report.submission.sha256,
                 report.environment.grader, now(),
                 report.status, report.error, report.score, report.max_score, report.seed,
                 report.duration_s, raw.model_dump_json(), assignment_digest, report.environment.jax,
                 submitted_at, None),
            )
            db.executemany("INSERT INTO exercise_scores VALUES (?,?,?,?)",
                           [(student, e.id, e.score, e.max_score) for e in report.exercises])
            db.executemany("INSERT INTO check_results VALUES (?,?,?,?,?,?,?)",
                           [(student, c.id, c.status, c.score, c.max_score, int(c.hidden), c.message)
                            for e in report.exercises for c in e.checks])

    def is_current(self, student: str, key: Stored) -> bool:
        """A stored, graded result for exactly this file, assignment (id and digest), grader, JAX
        and seed."""
        row = self._db.execute(
            "SELECT sha256, assignment, assignment_digest, grader_version, jax_version, status, seed"
            " FROM submissions WHERE student = ?", (student,)).fetchone()
        if row is None or row[5] != "graded" or row[2] is None:
            return False
        stored = Stored(sha256=row[0], assignment=row[1], assignment_digest=row[2], grader_version=row[3],
                        jax_version=row[4], seed=row[6])
        return stored == key.model_copy(update={"assignment": key.assignment or stored.assignment,
                                                "seed": stored.seed if key.seed is None else key.seed})

    def seed(self) -> SeedDraw | None:
        """The batch's seed: the last one drawn (None before its first grading)."""
        row = self._db.execute("SELECT seed, drawn_at, redrawn FROM seeds ORDER BY rowid DESC LIMIT 1"
                               ).fetchone()
        return SeedDraw(seed=row[0], drawn_at=row[1], redrawn=bool(row[2])) if row is not None else None

    def seed_most_graded_with(self) -> SeedDraw | None:
        """For a gradebook from before seeds were kept: the seed most of its graded rows were
        graded with (adopted, they stay current), first used when the earliest of them was."""
        row = self._db.execute("SELECT seed, min(graded_at) FROM submissions WHERE status = 'graded'"
                               " GROUP BY seed ORDER BY count(*) DESC, min(graded_at) LIMIT 1").fetchone()
        return SeedDraw(seed=row[0], drawn_at=row[1]) if row is not None else None

    def record_seed(self, draw: SeedDraw) -> None:
        with self._db:
            self._db.execute("INSERT INTO seeds VALUES (?,?,?)",
                             (draw.seed, draw.drawn_at, int(draw.redrawn)))

    def graded_with_another_seed(self, seed: int | None) -> list[str]:
        """The students whose graded result drew its hidden inputs from another seed than `seed`,
        the batch's; None: than their own (a batch with a seed per student)."""
        if seed is not None:
            rows = self._db.execute("SELECT student FROM submissions WHERE status = 'graded' AND seed != ?"
                                    " ORDER BY student", (seed,))
        else:
            rows = self._db.execute(
                "SELECT s.student FROM submissions s LEFT JOIN student_seeds k ON k.rowid ="
                " (SELECT max(rowid) FROM student_seeds WHERE student = s.student)"
                " WHERE s.status = 'graded' AND (k.seed IS NULL OR k.seed != s.seed) ORDER BY s.student")
        return [row[0] for row in rows]

    def seed_settings(self) -> SeedSettings:
        row = self._db.execute("SELECT value FROM settings WHERE name = 'seeds'").fetchone()
        return SeedSettings.model_validate_json(row[0]) if row else SeedSettings()

    def save_seed_settings(self, settings: SeedSettings) -> None:
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO settings VALUES ('seeds', ?)", (settings.model_dump_json(),))

    def student_seeds(self) -> dict[str, StudentSeed]:
        """Each student's seed (the last drawn for them), in a batch with a seed per student."""
        rows = self._db.execute("SELECT student, seed, drawn_at, redrawn FROM student_seeds WHERE rowid IN"
                                " (SELECT max(rowid) FROM student_seeds GROUP BY student)")
        return {s: StudentSeed(student=s, seed=seed, drawn_at=at, redrawn=bool(again))
                for s, seed, at, again in rows.fetchall()}

    def record_student_seeds(self, drawn: list[StudentSeed]) -> None:
        """New seeds (first ones, or a redraw), all in one transaction; earlier rows stay as history."""
        with self._db:
            self._db.executemany("INSERT INTO student_seeds VALUES (?,?,?,?)",
                                 [(d.student, d.seed, d.drawn_at, int(d.redrawn)) for d in drawn])

    def last_student_redraw(self) -> str | None:
        """When every student's seed was last drawn again (--new-seed), or None."""
        row = self._db.execute("SELECT max(drawn_at) FROM student_seeds WHERE redrawn = 1").fetchone()
        return row[0] if row else None

    def remove(self, removal: Removal) -> None:
        """Take a student out of the batch's current tables, keeping the removal and their raw
        report in `removals` (one transaction)."""
        student = removal.student
        with self._db:
            db = self._db
            row = db.execute("SELECT path, report FROM submissions WHERE student = ?", (student,)).fetchone()
            db.execute("INSERT INTO removals VALUES (?,?,?,?,?,?)",
                       (student, removal.removed_at, removal.by, removal.reason,
                        row[0] if row else removal.path, row[1] if row else None))
            db.execute("DELETE FROM exercise_scores WHERE student = ?", (student,))
            db.execute("DELETE FROM check_results WHERE student = ?", (student,))
            db.execute("DELETE FROM submissions WHERE student = ?", (student,))
            db.execute("DELETE FROM students WHERE id = ?", (student,))

    def removals(self) -> list[Removal]:
        """Every removal, oldest first (a student removed, graded again and removed again: twice)."""
        rows = self._db.execute("SELECT student, removed_at, by, reason, path FROM removals ORDER BY rowid")
        return [Removal(student=s, removed_at=at, by=by, reason=reason, path=path)
                for s, at, by, reason, path in rows.fetchall()]

    def reports(self) -> dict[str, Report]:
        """Every student's raw report (as graded: no adjustment, no late penalty)."""
        rows = self._db.execute("SELECT student, report FROM submissions ORDER BY student").fetchall()
        return {student: Report.model_validate_json(text) for student, text in rows}

    def students(self) -> list[str]:
        return [row[0] for row in self._db.execute("SELECT student FROM submissions ORDER BY student")]

    def path_of(self, student: str) -> str | None:
        row = self._db.execute("SELECT path FROM submissions WHERE student = ?", (student,)).fetchone()
        return row[0] if row else None

    def student_at(self, path: str) -> str | None:
        """The student whose submission was graded from this path (a single-file regrade)."""
        row = self._db.execute("SELECT student FROM submissions WHERE path = ?", (path,)).fetchone()
        return row[0] if row else None

    def submitted_at(self) -> dict[str, str]:
        rows = self._db.execute("SELECT student, submitted_at FROM submissions WHERE submitted_at IS NOT NULL")
        return dict(rows.fetchall())

    def adjust(self, student: str, adjustment: Adjustment) -> None:
        with self._db:
            self._db.execute("INSERT INTO adjustments VALUES (?,?,?,?,?)",
                             (student, adjustment.points, adjustment.reason, adjustment.by, adjustment.at))

    def adjustments(self) -> dict[str, list[Adjustment]]:
        found: dict[str, list[Adjustment]] = {}
        for student, points, reason, by, at in self._db.execute(
                "SELECT student, points, reason, by, at FROM adjustments ORDER BY rowid"):
            found.setdefault(student, []).append(Adjustment(points=points, reason=reason, by=by, at=at))
        return found

    def export_settings(self) -> ExportSettings:
        row = self._db.execute("SELECT value FROM settings WHERE name = 'exports'").fetchone()
        return ExportSettings.model_validate_json(row[0]) if row else ExportSettings()

    def save_export_settings(self, settings: ExportSettings) -> None:
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO settings VALUES ('exports', ?)", (settings.model_dump_json(),))

    def set_final(self, finals: dict[str, float]) -> None:
        with self._db:
            self._db.executemany("UPDATE submissions SET final_score = ? WHERE student = ?",
                                 [(score, student) for student, score in finals.items()])
