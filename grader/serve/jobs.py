"""The durable job table: every hand-in, from accepted to graded, in OUT's gradebook.

    hand_ins(id, seq, student, assignment, path, file_name, sha256, state, accepted_at, started_at,
             deadline_at, finished_at, worker, reason, superseded_by, attempts, score, max_score,
             report, reaped)

The same SQLite file as the batch's gradebook (grader/outputs/gradebook.py), so that one file is
the service's whole state, and a report recorded for a hand-in is recorded exactly as a batch
records one. The states:

    queued ──> running ──> graded        (its report is the student's row: the latest wins)
       │          └──────> not_graded    (the machine failed, not the student: no attempt spent)
       │          └──────> queued        (its worker died or overran its deadline, once; the
       │                                  service stopped or was killed while it ran)
       └─────> superseded                (the same student handed in again while it waited)

Each step is one statement or one transaction, so that a `kill -9` at any instant leaves a job
either still queued or running (queued again by the reaper when the service starts, and graded
then) or graded with its row recorded, never graded twice:

- accepting is one transaction: the student's queued hand-in becomes `superseded` by the new one,
  which is inserted `queued` (one live job per student: a running one finishes first);
- claiming is one UPDATE ... RETURNING of the oldest queued job whose student has none running;
- finishing is one transaction holding both the job's `graded` (only from `running`, and only by
  the service run that claimed it) and `Gradebook.record` of its report;
- the reaper, at start, puts back every job left `running` by a service run that is gone (OUT's
  lock says no other runs), its attempt not counted, and gives up on one that three runs took
  without finishing (`reaped`).

A job's report is kept with it (the student's row keeps only the latest), and `reason` is the
sentence a student reads when it was not graded (or, graded, why their file could not be).
"""

from __future__ import annotations

import secrets
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

from grader.outputs.connections import Connections
from grader.outputs.gradebook import Gradebook
from grader.report import Report
from grader.serve.models import Job

SCHEMA = """
CREATE TABLE IF NOT EXISTS hand_ins (
    id TEXT PRIMARY KEY, seq INTEGER NOT NULL UNIQUE, student TEXT NOT NULL, assignment TEXT NOT NULL,
    path TEXT NOT NULL, file_name TEXT NOT NULL, sha256 TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'graded', 'not_graded', 'superseded')),
    accepted_at TEXT NOT NULL, started_at TEXT, deadline_at TEXT, finished_at TEXT, worker TEXT,
    reason TEXT, superseded_by TEXT, attempts INTEGER NOT NULL DEFAULT 0,
    score REAL, max_score REAL, report TEXT, reaped INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS hand_ins_by_state ON hand_ins(state, seq);
CREATE INDEX IF NOT EXISTS hand_ins_by_student ON hand_ins(student, state);
"""

_COLUMNS = ("id, seq, student, assignment, path, file_name, sha256, state, accepted_at, started_at, deadline_at,"
            " finished_at, worker, reason, superseded_by, attempts, score, max_score")

RETRIES = 1
"""A job whose worker died or overran its deadline is queued again this many times, then not graded."""
REAPED = 3
"""A job left running by this many service runs that stopped (a crash, kill -9) is not taken again."""
MACHINE_FAILED = "the grading machine did not finish it"
FILE_GONE = "its file is no longer on the grading machine"
STOPPED_REPEATEDLY = "the grading service stopped while grading it, three times"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def new_id() -> str:
    """A job id: random, URL-safe, and saying nothing about other students' hand-ins."""
    return secrets.token_urlsafe(16)


def _job(row: sqlite3.Row | tuple) -> Job:
    return Job(**dict(zip([c.strip() for c in _COLUMNS.split(",")], row)))


class Accepted(Job):
    """A job just accepted, and what it did to the student's others."""

    superseded: str | None = None  # the student's queued hand-in it replaces
    behind: bool = False  # the student has one being graded: this one waits for it


class JobTable:
    """The hand_ins table, one connection per thread (the web server's threads, the dispatcher)."""

    def __init__(self, gradebook: Path):
        self.path = gradebook
        self._connections = Connections(gradebook)
        db = self._db()
        db.executescript(SCHEMA)
        if "reaped" not in {row[1] for row in db.execute("PRAGMA table_info(hand_ins)")}:  # an earlier OUT's
            with db:
                db.execute("ALTER TABLE hand_ins ADD COLUMN reaped INTEGER NOT NULL DEFAULT 0")

    def _db(self) -> sqlite3.Connection:
        return self._connections.get()

    def close(self) -> None:
        """Close this thread's connection."""
        self._connections.close_mine()

    def close_all(self) -> None:
        """Close every thread's connection (the web server's threads too), once they are done."""
        self._connections.close_all()

    # ------------------------------------------------------------------ a student's side

    def accept(self, *, job_id: str, student: str, assignment: str, path: str, file_name: str,
               sha256: str) -> Accepted:
        """Queue a hand-in; the student's queued one, if any, is superseded by it (one transaction)."""
        db = self._db()
        at = now()
        with db:
            db.execute("BEGIN IMMEDIATE")
            waiting = [row[0] for row in db.execute(
                "SELECT id FROM hand_ins WHERE student = ? AND state = 'queued' ORDER BY seq", (student,))]
            db.execute("UPDATE hand_ins SET state = 'superseded', superseded_by = ?, finished_at = ?"
                       " WHERE student = ? AND state = 'queued'", (job_id, at, student))
            behind = db.execute("SELECT 1 FROM hand_ins WHERE student = ? AND state = 'running'",
                                (student,)).fetchone() is not None
            seq = db.execute("SELECT coalesce(max(seq), 0) + 1 FROM hand_ins").fetchone()[0]
            db.execute("INSERT INTO hand_ins (id, seq, student, assignment, path, file_name, sha256, state,"
                       " accepted_at) VALUES (?,?,?,?,?,?,?,'queued',?)",
                       (job_id, seq, student, assignment, path, file_name, sha256, at))
        job = self.get(job_id)
        assert job is not None
        return Accepted(**job.model_dump(), superseded=waiting[-1] if waiting else None, behind=behind)

    def get(self, job_id: str, student: str | None = None) -> Job | None:
        """The job, if it exists (and is `student`'s, when given)."""
        row = self._db().execute(f"SELECT {_COLUMNS} FROM hand_ins WHERE id = ?", (job_id,)).fetchone()
        job = _job(row) if row is not None else None
        if job is None or (student is not None and job.student != student):
            return None
        return job

    def report(self, job_id: str) -> Report | None:
        """The report a job was graded with (its raw report, as recorded)."""
        row = self._db().execute("SELECT report FROM hand_ins WHERE id = ?", (job_id,)).fetchone()
        return Report.model_validate_json(row[0]) if row is not None and row[0] else None

    def of_student(self, student: str, limit: int = 100) -> list[Job]:
        """The student's latest `limit` hand-ins, oldest first."""
        rows = self._db().execute(f"SELECT {_COLUMNS} FROM hand_ins WHERE student = ? ORDER BY seq DESC LIMIT ?",
                                  (student, limit)).fetchall()
        return [_job(row) for row in reversed(rows)]

    def position(self, job: Job) -> int:
        """How many hand-ins will be taken before this queued one: those queued before it, and the
        student's own one being graded."""
        db = self._db()
        ahead = db.execute("SELECT count(*) FROM hand_ins WHERE state = 'queued' AND seq < ?",
                           (job.seq,)).fetchone()[0]
        own = db.execute("SELECT count(*) FROM hand_ins WHERE state = 'running' AND student = ?",
                         (job.student,)).fetchone()[0]
        return int(ahead + own)

    # ------------------------------------------------------------------ the dispatcher's side

    def claim(self, worker: str, deadline_s: float) -> Job | None:
        """Take the oldest queued job whose student has none running (one atomic UPDATE)."""
        started = datetime.now(timezone.utc)
        deadline = (started + timedelta(seconds=deadline_s)).isoformat(timespec="milliseconds")
        db = self._db()
        with db:
            row = db.execute(
                f"UPDATE hand_ins SET state = 'running', worker = ?, started_at = ?, deadline_at = ?,"
                f" attempts = attempts + 1 WHERE id = (SELECT q.id FROM hand_ins q WHERE q.state = 'queued'"
                f" AND NOT EXISTS (SELECT 1 FROM hand_ins r WHERE r.student = q.student AND r.state = 'running')"
                f" ORDER BY q.seq LIMIT 1) RETURNING {_COLUMNS}",
                (worker, started.isoformat(timespec="milliseconds"), deadline)).fetchone()
        return _job(row) if row is not None else None

    def record_graded(self, book: Gradebook, job: Job, worker: str, report: Report, *,
                      assignment_digest: str | None) -> bool:
        """The job graded and its report the student's row, in ONE transaction (`book` is the
        dispatcher's gradebook, on the same file); False if the job is no longer this worker's."""
        db = book.connection
        try:
            db.execute("BEGIN IMMEDIATE")
            done = db.execute(
                "UPDATE hand_ins SET state = 'graded', finished_at = ?, score = ?, max_score = ?, report = ?,"
                " reason = ? WHERE id = ? AND state = 'running' AND worker = ?",
                (now(), report.score, report.max_score, report.model_dump_json(),
                 report.error if report.status == "error" else None, job.id, worker)).rowcount
            if done != 1:
                db.rollback()
                return False
            book.record(report, assignment_digest=assignment_digest, submitted_at=job.accepted_at)  # commits both
        except BaseException:
            if db.in_transaction:
                db.rollback()
            raise
        return True

    def not_graded(self, job: Job, worker: str, reason: str, report: Report | None = None) -> bool:
        """The machine failed it: `reason` is the student's sentence; the report, if any, is kept
        for the instructor. The student's row is not touched."""
        db = self._db()
        with db:
            return db.execute(
                "UPDATE hand_ins SET state = 'not_graded', finished_at = ?, reason = ?, report = ?"
                " WHERE id = ? AND state = 'running' AND worker = ?",
                (now(), reason, report.model_dump_json() if report else None, job.id, worker)).rowcount == 1

    def retry(self, job: Job, worker: str, reason: str) -> str | None:
        """Queue a job again after its worker failed it, RETRIES times; then it is not graded.
        Returns its new state (None: it was not this worker's any more)."""
        db = self._db()
        with db:
            again = db.execute(
                "UPDATE hand_ins SET state = 'queued', worker = NULL, started_at = NULL, deadline_at = NULL"
                " WHERE id = ? AND state = 'running' AND worker = ? AND attempts <= ?",
                (job.id, worker, RETRIES)).rowcount
        if again:
            return "queued"
        return "not_graded" if self.not_graded(job, worker, reason) else None

    def release(self, worker: str) -> int:
        """The service stops: its running jobs go back to the queue, the attempt not counted."""
        db = self._db()
        with db:
            return db.execute(
                "UPDATE hand_ins SET state = 'queued', worker = NULL, started_at = NULL, deadline_at = NULL,"
                " attempts = max(attempts - 1, 0) WHERE state = 'running' AND worker = ?", (worker,)).rowcount

    def reap(self, worker: str) -> tuple[int, int]:
        """At start: every job left running by another service run (gone: this one holds OUT's
        lock) is queued again, its attempt not counted (as `release` does: the service stopped,
        not the grading), or not graded once REAPED runs were stopped while grading it (`reaped`,
        a count of its own). Returns (queued, given up)."""
        db = self._db()
        with db:
            lost = db.execute(
                "UPDATE hand_ins SET state = 'not_graded', finished_at = ?, reason = ?, reaped = reaped + 1"
                " WHERE state = 'running' AND coalesce(worker, '') != ? AND reaped + 1 >= ?",
                (now(), STOPPED_REPEATEDLY, worker, REAPED)).rowcount
            again = db.execute(
                "UPDATE hand_ins SET state = 'queued', worker = NULL, started_at = NULL, deadline_at = NULL,"
                " attempts = max(attempts - 1, 0), reaped = reaped + 1"
                " WHERE state = 'running' AND coalesce(worker, '') != ?", (worker,)).rowcount
        return again, lost

    def counts(self) -> dict[str, int]:
        rows = self._db().execute("SELECT state, count(*) FROM hand_ins GROUP BY state").fetchall()
        return {state: int(n) for state, n in rows}
