"""The hand-in service's parts that need no server and no kernel: the job table on a real SQLite
gradebook, the rate limit on a clock of the test's, tokens and rosters, the student's view of a
report, and the origin rules. tests/test_serve.py drives the whole service over HTTP."""

from __future__ import annotations

import contextlib
import csv
import io
import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.outputs.gradebook import Gradebook
from grader.report import Report
from grader.serve import jobs as job_states
from grader.serve.jobs import JobTable, new_id
from grader.serve.limits import Buckets, RateLimit, declared_too_large, retry_after
from grader.serve.roster import read_roster
from grader.serve.security import origin_of
from grader.serve.service import machine_reason
from grader.serve.student_view import page_policy, student_view
from grader.serve.tokens import Tokens, digest, issue
from grader.serve.uploads import Refused, shown_name, suffix_of

REPO = Path(__file__).resolve().parent.parent
REPORTS = REPO / "tests" / "fixtures" / "reports"
CANVAS = REPO / "tests" / "fixtures" / "canvas" / "gradebook_export.csv"


def _report(student: str, path: str, score: float = 100.0) -> Report:
    report = Report.model_validate_json((REPORTS / "written_before_verdict_fields.report.json").read_text())
    return report.model_copy(update={"student": student, "score": score,
                                     "submission": report.submission.model_copy(update={"path": path})})


@pytest.fixture
def table(tmp_path: Path) -> Iterator[JobTable]:
    jobs = JobTable(tmp_path / "gradebook.sqlite")
    yield jobs
    jobs.close()


def _accept(table: JobTable, student: str) -> job_states.Accepted:
    job_id = new_id()
    return table.accept(job_id=job_id, student=student, assignment="ch2-jit", path=f"/out/hand-ins/{student}/{job_id}.py",
                        file_name="mine.py", sha256="0" * 64)


# ----------------------------------------------------------------------------- the job table


def test_a_new_hand_in_supersedes_the_queued_one_and_waits_for_the_running_one(table: JobTable) -> None:
    first = _accept(table, "alice")
    assert first.superseded is None and not first.behind
    claimed = table.claim("run-1", 60)
    assert claimed is not None and claimed.id == first.id and claimed.attempts == 1
    second = _accept(table, "alice")
    assert second.behind and second.superseded is None
    third = _accept(table, "alice")
    assert third.superseded == second.id
    assert table.get(second.id).state == "superseded" and table.get(second.id).superseded_by == third.id
    assert table.claim("run-1", 60) is None  # alice has one running: hers wait, nobody else's is queued
    bob = _accept(table, "bob")
    assert table.position(table.get(third.id)) == 1  # her own, being graded
    assert table.position(table.get(bob.id)) == 1  # alice's queued one came first
    assert table.claim("run-1", 60).id == bob.id  # not alice's, whose first still runs


def test_claims_are_oldest_first_and_each_job_is_claimed_once(table: JobTable) -> None:
    accepted = [_accept(table, s) for s in ("a", "b", "c")]
    claimed = [table.claim("run-1", 60) for _ in range(4)]
    assert [c.id for c in claimed[:3]] == [a.id for a in accepted] and claimed[3] is None


def test_graded_and_recorded_are_one_transaction(table: JobTable) -> None:
    job = _accept(table, "alice")
    running = table.claim("run-1", 60)
    with Gradebook(table.path) as book:
        broken = _report("alice", job.path).model_copy(update={"student": None})  # record refuses it
        with pytest.raises(AssertionError):
            table.record_graded(book, running, "run-1", broken, assignment_digest="d")
        assert table.get(job.id).state == "running" and book.students() == []  # neither happened
        assert not table.record_graded(book, running, "run-2", _report("alice", job.path), assignment_digest="d")
        assert table.record_graded(book, running, "run-1", _report("alice", job.path), assignment_digest="d")
        assert not table.record_graded(book, running, "run-1", _report("alice", job.path), assignment_digest="d")
        assert book.students() == ["alice"]
    graded = table.get(job.id)
    assert graded.state == "graded" and graded.score == 100.0 and table.report(job.id).student == "alice"


def test_a_failed_worker_is_retried_once_then_not_graded(table: JobTable) -> None:
    job = _accept(table, "alice")
    first = table.claim("run-1", 60)
    assert table.retry(first, "run-1", job_states.MACHINE_FAILED) == "queued"
    second = table.claim("run-1", 60)
    assert second.attempts == 2
    assert table.retry(second, "run-1", job_states.MACHINE_FAILED) == "not_graded"
    assert table.get(job.id).reason == job_states.MACHINE_FAILED
    assert table.retry(second, "run-1", job_states.MACHINE_FAILED) is None  # not running any more


def test_the_reaper_queues_again_what_a_gone_run_left_running(table: JobTable) -> None:
    kept, stopped = _accept(table, "alice"), _accept(table, "bob")
    for run in range(job_states.REAPED):  # runs that each took both and stopped (kill -9)
        assert {table.claim(f"gone-{run}", 60).id for _ in range(2)} == {kept.id, stopped.id}
        if run < job_states.REAPED - 1:
            assert table.reap("this-run") == (2, 0)
            assert {table.get(j.id).state for j in (kept, stopped)} == {"queued"}
    assert table.reap("this-run") == (0, 2)
    assert table.get(kept.id).state == "not_graded" and table.get(kept.id).reason == job_states.STOPPED_REPEATEDLY
    assert table.reap("this-run") == (0, 0)


def test_a_job_a_killed_run_left_still_has_its_retry(table: JobTable) -> None:
    """A run killed while grading spends none of the job's retries (found by a review: the reaper's
    count and the retries' were one, so after a kill -9 a worker's death was already its last)."""
    job = _accept(table, "alice")
    table.claim("gone", 60)
    assert table.reap("this-run") == (1, 0)
    again = table.claim("this-run", 60)
    assert again.attempts == 1
    assert table.retry(again, "this-run", job_states.MACHINE_FAILED) == "queued"
    assert table.get(job.id).state == "queued"


def test_an_earlier_out_s_job_table_gains_the_reaped_count(tmp_path: Path) -> None:
    book = tmp_path / "gradebook.sqlite"
    db = sqlite3.connect(book)
    db.executescript(job_states.SCHEMA.replace(", reaped INTEGER NOT NULL DEFAULT 0", ""))
    db.close()
    jobs = JobTable(book)
    try:
        job = _accept(jobs, "alice")
        jobs.claim("gone", 60)
        assert jobs.reap("this-run") == (1, 0) and jobs.get(job.id).state == "queued"
    finally:
        jobs.close()


def test_a_job_whose_file_is_gone_is_the_machine_s_failure_and_a_worker_refusing_a_job_queues_it_again(
        table: JobTable, tmp_path: Path) -> None:
    """A hand-in's file removed from OUT by hand is "not graded, hand in again" (costing no
    attempt), never the student's "no such file" grade; a job a worker would not take goes back to
    the queue even when writing that fails the first time."""
    from concurrent.futures import Future

    from grader.options import GradeOptions
    from grader.serve.service import Service

    class Backend:
        capacity = 1
        refuse = True

        def submit(self, task):
            if self.refuse:
                raise RuntimeError("no worker")
            return Future()

    gone = _accept(table, "alice")  # its path, /out/hand-ins/..., does not exist
    service = Service(jobs=table, backend=Backend(), publisher=None, options=GradeOptions(seed=1, assignment="ch2-jit"),
                      assignment_digest=None, deadline_s=60, worker="run-1")
    service._fill()
    assert table.get(gone.id).state == "not_graded" and table.get(gone.id).reason == job_states.FILE_GONE
    kept = tmp_path / "kept.py"
    kept.write_text("x = 1\n")
    job = table.accept(job_id=new_id(), student="bob", assignment="ch2-jit", path=str(kept), file_name="kept.py",
                       sha256="0" * 64)
    retry, failures = table.retry, []

    def flaky(*args):
        if not failures:
            failures.append(1)
            raise sqlite3.OperationalError("database is locked")
        return retry(*args)

    table.retry = flaky  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        service._fill()  # the worker refused it: it is to be queued again
    assert table.get(job.id).state == "running" and [j.id for j in service._unqueued] == [job.id]
    with pytest.raises(sqlite3.OperationalError):
        service._fill()  # queueing it again failed: it stays to be queued, not forgotten
    assert failures == [1] and [j.id for j in service._unqueued] == [job.id]
    Backend.refuse = False
    service._fill()  # queued again, then claimed and taken
    assert table.get(job.id).state == "running" and table.get(job.id).attempts == 2 and not service._unqueued


def test_a_stopping_service_releases_its_running_jobs_without_spending_an_attempt(table: JobTable) -> None:
    job = _accept(table, "alice")
    table.claim("run-1", 60)
    assert table.release("run-2") == 0 and table.release("run-1") == 1
    again = table.get(job.id)
    assert again.state == "queued" and again.attempts == 0 and again.worker is None


def test_the_job_table_lives_beside_the_batch_tables(table: JobTable) -> None:
    with Gradebook(table.path) as book:
        names = {row[0] for row in book.connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"hand_ins", "submissions", "seeds"} <= names


def test_only_the_students_own_report_is_theirs_to_keep() -> None:
    report = _report("alice", "/x.py")
    assert machine_reason(report) is None
    mine = report.model_copy(update={"status": "error", "fault": "student", "error_kind": "unreadable"})
    assert machine_reason(mine) is None
    busy = report.model_copy(update={"status": "error", "fault": "machine", "error_kind": "overloaded"})
    assert "too busy" in (machine_reason(busy) or "")
    bug = report.model_copy(update={"status": "error", "fault": "internal", "error_kind": "grader_bug"})
    assert "bug" in (machine_reason(bug) or "")


# ----------------------------------------------------------------------------- limits


def test_the_bucket_allows_a_burst_then_the_rate() -> None:
    now = [100.0]
    buckets = Buckets(RateLimit(per_minute=6, burst=3), clock=lambda: now[0])
    assert [buckets.take("alice") for _ in range(3)] == [0.0, 0.0, 0.0]
    wait = buckets.take("alice")
    assert wait == pytest.approx(10.0) and retry_after(wait) == 10
    assert buckets.take("bob") == 0.0  # a bucket per student
    now[0] += 5
    assert buckets.take("alice") == pytest.approx(5.0)
    now[0] += 5
    assert buckets.take("alice") == 0.0
    now[0] += 3600
    assert [buckets.take("alice") for _ in range(4)][-1] > 0  # refilled to the burst, not beyond


def test_a_declared_length_past_the_limit_is_refused_before_reading() -> None:
    assert declared_too_large(str(50 * 2**20)) and not declared_too_large("1000")
    assert not declared_too_large("nonsense") and not declared_too_large(None)


@pytest.mark.parametrize("name, shown", [("../../x.ipynb", "x.ipynb"), ("C:\\Users\\a\\hw.py", "hw.py"),
                                         ("a\nb.py", "a\\nb.py"), ("", "(no name)")])
def test_a_file_name_is_only_shown_never_used(name: str, shown: str) -> None:
    assert shown_name(name) == shown


def test_only_notebooks_and_modules_are_taken() -> None:
    assert suffix_of("HW.IPYNB") == ".ipynb" and suffix_of("../../a.py") == ".py"
    with pytest.raises(Refused) as refused:
        suffix_of("notes.txt")
    assert refused.value.status == 400 and "notes.txt is neither" in refused.value.sentence


# ----------------------------------------------------------------------------- tokens and rosters


def test_a_token_is_stored_hashed_and_found_in_constant_time(tmp_path: Path) -> None:
    with contextlib.closing(sqlite3.connect(tmp_path / "g.sqlite")) as db:
        _tokens_in(db)


def _tokens_in(db: sqlite3.Connection) -> None:
    issued = issue(db, ["alice", "bob"], [], "now")
    assert set(issued) == {"alice", "bob"} and all(t.startswith("gt_") for t in issued.values())
    stored = dict(db.execute("SELECT student, sha256 FROM tokens").fetchall())
    assert stored == {s: digest(t) for s, t in issued.items()}
    assert issued["alice"] not in str(stored)
    tokens = Tokens.load(db, ["alice", "bob"])
    assert tokens.student(issued["alice"]) == "alice" and tokens.student(issued["bob"]) == "bob"
    assert tokens.student("gt_nothing") is None and tokens.student("") is None and tokens.student("x" * 10_000) is None
    assert Tokens.load(db, ["bob"]).student(issued["alice"]) is None  # off the roster: let in no more
    assert issue(db, ["alice", "bob"], [], "later") == {}
    again = issue(db, ["alice", "bob"], ["bob"], "later")
    assert set(again) == {"bob"}
    tokens = Tokens.load(db, ["alice", "bob"])
    assert tokens.student(issued["bob"]) is None and tokens.student(again["bob"]) == "bob"


def test_grade_tokens_writes_a_file_only_its_owner_reads(tmp_path: Path) -> None:
    roster = tmp_path / "roster.txt"
    roster.write_text("student\nalice\n# a comment\n\nbob\n@SUM(1;2)\n", encoding="utf-8")
    out, csv_file = tmp_path / "out", tmp_path / "tokens.csv"
    done = subprocess.run([sys.executable, "-m", "grader", "tokens", str(out), "--roster", str(roster), "-o",
                           str(csv_file)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(os.stat(csv_file).st_mode) == 0o600
    rows = list(csv.reader(io.StringIO(csv_file.read_text(encoding="utf-8"))))
    assert rows[0] == ["student", "token"]
    # a spreadsheet reads the third id as text, not a formula (and its ';' starts no cell: quoted)
    assert [row[0] for row in rows[1:]] == ["alice", "bob", "'@SUM(1;2)"]
    assert all(line.startswith('"') for line in csv_file.read_text(encoding="utf-8").splitlines())
    again = subprocess.run([sys.executable, "-m", "grader", "tokens", str(out), "--roster", str(roster), "--reissue",
                            "carol"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert again.returncode == 2 and "carol is not on the roster" in again.stderr


def test_a_canvas_export_is_a_roster_by_login(tmp_path: Path) -> None:
    assert read_roster(CANVAS) == ["wchen", "alice@uni.edu", "jgarcia", "bnguyen@uni.edu", "mivanova"]
    twice = tmp_path / "twice.txt"
    twice.write_text("alice\nalice\n", encoding="utf-8")
    with pytest.raises(Exception, match="lists alice twice"):
        read_roster(twice)
    empty = tmp_path / "empty.txt"
    empty.write_text("student\n", encoding="utf-8")
    with pytest.raises(Exception, match="lists no student"):
        read_roster(empty)


# ----------------------------------------------------------------------------- what a student reads


def test_the_students_view_drops_what_only_the_instructor_reads() -> None:
    stored = "/srv/out/hand-ins/alice/abc.py"
    report = _report("alice", stored)
    report = report.model_copy(update={"error": f"{stored}: cannot be read", "programs": []})
    assert any(c.counterexample for e in report.exercises for c in e.checks)
    shown = student_view(report, stored, "mine.py")
    assert shown.submission.path == "mine.py" and shown.error == "mine.py: cannot be read"
    checks = [c for e in shown.exercises for c in e.checks]
    assert all(c.counterexample is None and c.tally is None and c.judge_error is None for c in checks)
    assert [c.message for c in checks] == [c.message for e in report.exercises for c in e.checks]
    assert stored not in shown.model_dump_json()
    # code run on a hidden value can sleep for it; the seed draws every hidden value with the domains
    assert report.seed is not None and report.duration_s is not None
    assert shown.seed is None and shown.duration_s is None
    assert '"seed":null' in shown.model_dump_json() and '"duration_s":null' in shown.model_dump_json()


def test_a_feedback_page_may_apply_its_own_style_and_nothing_else() -> None:
    policy = page_policy("<html><style>b{}</style><p>hi</p></html>")
    assert "style-src 'sha256-" in policy and "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy and "script-src" not in policy


@pytest.mark.parametrize("given, origin", [("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
                                           ("HTTPS://Grades.Example.edu:443/", "https://grades.example.edu"),
                                           ("http://[::1]:80", "http://[::1]"), ("null", None),
                                           ("file:///etc", None), ("http://x:99999", None)])
def test_origins_are_compared_in_one_form(given: str, origin: str | None) -> None:
    assert origin_of(given) == origin


def test_serving_on_the_network_needs_public() -> None:
    done = subprocess.run([sys.executable, "-m", "grader", "serve", "/nonexistent/out", "-a", "ch2-jit", "--roster",
                           "r.txt", "--host", "0.0.0.0"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 2
    assert "not a loopback address" in done.stderr and "--public" in done.stderr and "Traceback" not in done.stderr
    assert not Path("/nonexistent/out").exists()
    public = subprocess.run([sys.executable, "-m", "grader", "serve", "/nonexistent/out", "-a", "ch2-jit", "--roster",
                             "r.txt", "--host", "0.0.0.0", "--public"], capture_output=True, text=True, cwd=REPO,
                            timeout=120)
    assert public.returncode == 2 and "name the address students open with --origin" in public.stderr
    assert "Traceback" not in public.stderr and not Path("/nonexistent/out").exists()
