"""An instructor's term: the resume key, regrades that agree, atomic commits, a batch that ends
with the truth, adjustments and the late policy."""

from __future__ import annotations

import csv
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from grader.batch.executors import Task, error_report
from grader.options import GradeOptions
from grader.outputs.gradebook import Gradebook, Stored
from grader.outputs.staging import MANIFEST, STAGING, Staging, recover
from grader.report import Adjustment, Report
from grader.term.final import finalize
from grader.term.late import LatePolicy, load_policy, load_times

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = (ROOT / "solutions" / "ch2-jit.py").read_text(encoding="utf-8")
OPTIONS = GradeOptions(assignment="ch2-jit", seed=3, cell_timeout=5)
GRADE = [sys.executable, "-m", "grader"]


def graded(student: str, score: float, path: str = "x.py") -> Report:
    report = error_report(Task(student=student, path=path, options=OPTIONS), "placeholder")
    return report.model_copy(update={"status": "graded", "error": None, "score": score})


# ----------------------------------------------------------------------------- late policy


def policy(**kw) -> LatePolicy:
    return LatePolicy.model_validate({"due": "2026-12-08T23:59:00+00:00", "percent_per_day": 10,
                                      "cap_percent": 30, "grace_minutes": 15, **kw})


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_late_policy_grace_per_day_and_cap() -> None:
    p = policy()
    assert p.penalty(at("2026-12-09T00:10:00+00:00"), "file", 100) is None  # within the grace
    one = p.penalty(at("2026-12-09T00:20:00+00:00"), "file", 100)
    assert one is not None and (one.days_late, one.points) == (1, 10.0)  # a part day is a day
    assert p.penalty(at("2026-12-11T01:00:00+00:00"), "file", 100).points == 30.0  # 3 days, at the cap
    assert p.penalty(at("2026-12-20T00:00:00+00:00"), "file", 50).points == 15.0  # capped at 30% of 50
    assert "10% of the points per day late" in one.rule and "at most 30%" in one.rule
    # a due time without a zone is UTC, not the machine's zone
    assert policy(due="2026-12-08T23:59:00").due.tzinfo is not None


def test_late_policy_file_and_times_csv(tmp_path: Path) -> None:
    (tmp_path / "late.toml").write_text('due = "2026-12-08T23:59:00Z"\npercent_per_day = 10\ntimes = "t.csv"\n')
    (tmp_path / "t.csv").write_text("student,submitted_at\nalice,2026-12-10T10:00:00Z\n")
    loaded = load_policy(tmp_path)
    assert loaded is not None and load_times(tmp_path, loaded)["alice"].day == 10
    (tmp_path / "late.toml").write_text('due = "soon"\npercent_per_day = 10\n')
    from grader.errors import UsageError

    with pytest.raises(UsageError, match="late.toml: due"):
        load_policy(tmp_path)


def test_final_score_keeps_the_raw_one_and_applies_penalty_then_adjustments() -> None:
    report = graded("alice", 80.0)
    bonus = Adjustment(points=5, reason="regrade request: the rounding was right", by="ta", at="2026-12-10T00:00:00Z")
    times = {"alice": at("2026-12-10T00:30:00+00:00")}  # 2 days late: -20 (cap 30)
    final = finalize(report, [bonus], policy(), times, recorded_at=None)
    assert (final.score, final.late.points, final.final) == (80.0, 20.0, 65.0)
    assert final.late.source == "times_csv"
    # the file's time when the CSV does not name the student
    assert finalize(report, [], policy(), {}, "2026-12-09T12:00:00+00:00").late.source == "file"
    on_time = finalize(report, [], policy(), {}, "2026-12-01T00:00:00+00:00")
    assert on_time.late is None and on_time.final_score is None and on_time.final == 80.0
    # a penalty cannot make a score negative
    assert finalize(graded("bob", 5.0), [], policy(), {"bob": at("2027-01-01T00:00:00+00:00")}, None).final == 0


# ----------------------------------------------------------------------------- atomic commits


def test_staged_files_appear_together_on_commit(tmp_path: Path) -> None:
    (tmp_path / "summary.csv").write_text("old\n")
    stage = Staging(tmp_path)
    stage.path("summary.csv").write_text("new\n")
    stage.path("feedback/alice.html").write_text("page\n")
    assert (tmp_path / "summary.csv").read_text() == "old\n"  # nothing visible before the commit
    stage.commit()
    assert (tmp_path / "summary.csv").read_text() == "new\n" and (tmp_path / "feedback/alice.html").is_file()
    assert not (tmp_path / STAGING).exists()


def test_a_crash_before_the_commit_point_leaves_the_old_state(tmp_path: Path) -> None:
    (tmp_path / "summary.csv").write_text("old\n")
    stage = Staging(tmp_path)
    stage.path("summary.csv").write_text("half")  # then the process dies: no COMMIT written
    assert recover(tmp_path) is False
    assert (tmp_path / "summary.csv").read_text() == "old\n" and not (tmp_path / STAGING).exists()


def test_a_crash_after_the_commit_point_is_finished_by_the_next_run(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("old a")
    (tmp_path / "b.json").write_text("old b")
    root = tmp_path / STAGING
    root.mkdir()
    (root / "b.json").write_text("new b")  # a.json was moved already when the process died
    (root / MANIFEST).write_text("a.json\nb.json\n")
    (tmp_path / "a.json").write_text("new a")
    assert recover(tmp_path) is True
    assert [(tmp_path / n).read_text() for n in ("a.json", "b.json")] == ["new a", "new b"]
    assert not root.exists()


# ----------------------------------------------------------------------------- the resume key


def test_the_resume_key_covers_digest_grader_and_jax(tmp_path: Path) -> None:
    with Gradebook(tmp_path / "g.sqlite") as book:
        report = graded("alice", 100.0).model_copy(update={"submission": graded("a", 1).submission.model_copy(
            update={"sha256": "abc"})})
        book.record(report, assignment_digest="d1")
        key = Stored(sha256="abc", assignment="ch2-jit", assignment_digest="d1",
                     grader_version=report.environment.grader, jax_version=report.environment.jax)
        assert book.is_current("alice", key)
        for change in ({"assignment_digest": "d2"}, {"sha256": "other"}, {"grader_version": "9"},
                       {"jax_version": "0.4.30"}):
            assert not book.is_current("alice", key.model_copy(update=change)), change


def test_an_older_gradebook_gains_the_columns_and_its_rows_are_regraded(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "g.sqlite")
    db.executescript("CREATE TABLE submissions (student TEXT PRIMARY KEY, assignment TEXT NOT NULL, path TEXT NOT "
                     "NULL, sha256 TEXT, grader_version TEXT NOT NULL, graded_at TEXT NOT NULL, status TEXT NOT "
                     "NULL, error TEXT, score REAL NOT NULL, max_score REAL NOT NULL, seed INTEGER NOT NULL, "
                     "duration_s REAL NOT NULL, report TEXT NOT NULL);"
                     "INSERT INTO submissions VALUES ('alice','ch2-jit','a.py','abc','1','t','graded',NULL,1,1,1,1,'{}');")
    db.commit()
    db.close()
    with Gradebook(tmp_path / "g.sqlite") as book:
        key = Stored(sha256="abc", assignment="ch2-jit", assignment_digest="d", grader_version="1", jax_version=None)
        assert not book.is_current("alice", key)  # no digest recorded: regraded


def test_the_digest_changes_with_any_file_a_verdict_depends_on(tmp_path: Path) -> None:
    from grader.assignment.digest import assignment_digest

    folder = tmp_path / "a"
    shutil.copytree(ROOT / "assignments" / "ch2-jit", folder, ignore=shutil.ignore_patterns("__pycache__"))
    before = assignment_digest(folder)
    (folder / "mutants" / "extra.py").write_text("# an instructor's test, not the assignment\n")
    assert assignment_digest(folder) == before
    spec = folder / "assignment.toml"
    spec.write_text(spec.read_text().replace("rtol = 1e-5", "rtol = 1e-4", 1))
    assert assignment_digest(folder) != before
    spec.write_text(spec.read_text().replace("rtol = 1e-4", "rtol = 1e-5", 1))
    assert assignment_digest(folder) == before
    (folder / "data.npz").write_bytes(b"x")
    assert assignment_digest(folder) != before


# ----------------------------------------------------------------------------- adjustments (no kernel)


def book_of(out: Path, reports: list[Report]) -> None:
    from grader.outputs.rebuild import update

    out.mkdir(exist_ok=True)
    with Gradebook(out / "gradebook.sqlite") as book:
        for report in reports:
            book.record(report)
    update(out)


def test_an_adjustment_reaches_every_output_with_who_when_and_why(tmp_path: Path) -> None:
    out = tmp_path / "out"
    book_of(out, [graded("alice", 80.0), graded("bob", 70.0)])
    bob_before = (out / "bob.json").read_bytes()
    done = subprocess.run([*GRADE, "adjust", str(out), "alice", "--points", "+2.5", "--reason",
                           "the <b>tolerance</b> was too strict", "--by", "prof"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "82.5 / 100" in done.stdout
    alice = Report.model_validate_json((out / "alice.json").read_text())
    assert (alice.score, alice.final) == (80.0, 82.5)
    assert alice.adjustments[0].by == "prof" and alice.adjustments[0].reason.startswith("the <b>")
    rows = {r["student"]: r for r in csv.DictReader((out / "summary.csv").read_text().splitlines())}
    assert (rows["alice"]["score"], rows["alice"]["adjustment"], rows["alice"]["final_score"]) == ("80", "2.5", "82.5")
    page = (out / "feedback" / "alice.html").read_text()
    assert "adjusted +2.5 by prof" in page and "&lt;b&gt;tolerance" in page and "<b>tolerance" not in page
    with Gradebook(out / "gradebook.sqlite") as book:
        assert book.adjustments()["alice"][0].points == 2.5
        assert book.connection.execute("SELECT final_score FROM submissions WHERE student='alice'").fetchone() == (82.5,)
    assert (out / "bob.json").read_bytes() == bob_before  # the others untouched
    assert "82.5" in (out / "index.html").read_text()
    # bad input: one sentence, exit 2
    for argv, says in ((["nobody", "--points", "1", "--reason", "x"], "no student 'nobody'"),
                       (["alice", "--points", "0", "--reason", "x"], "non-zero"),
                       (["alice", "--points", "1", "--reason", " "], "say why")):
        bad = subprocess.run([*GRADE, "adjust", str(out), *argv], capture_output=True, text=True)
        assert bad.returncode == 2 and says in bad.stderr and "Traceback" not in bad.stderr


def test_a_late_policy_beside_the_gradebook_applies_on_export(tmp_path: Path) -> None:
    out = tmp_path / "out"
    book_of(out, [graded("alice", 80.0), graded("bob", 70.0)])
    (out / "late.toml").write_text('due = "2026-12-08T23:59:00Z"\npercent_per_day = 10\ntimes = "times.csv"\n')
    (out / "times.csv").write_text("student,submitted_at\nalice,2026-12-09T10:00:00Z\nbob,2026-12-01T00:00:00Z\n")
    done = subprocess.run([*GRADE, "export", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    alice = Report.model_validate_json((out / "alice.json").read_text())
    bob = Report.model_validate_json((out / "bob.json").read_text())
    assert (alice.late.days_late, alice.final) == (1, 70.0) and bob.late is None and bob.final == 70.0
    rows = {r["student"]: r for r in csv.DictReader((out / "summary.csv").read_text().splitlines())}
    assert (rows["alice"]["score"], rows["alice"]["late_penalty"], rows["alice"]["final_score"]) == ("80", "10", "70")
    assert "day(s) late" in (out / "feedback" / "alice.html").read_text()


# ----------------------------------------------------------------------------- whole batches (kernels)


def make_class(folder: Path) -> None:
    folder.mkdir()
    for name in ("alice", "bob"):
        (folder / f"{name}.py").write_text(REFERENCE, encoding="utf-8")
    (folder / "carol.ipynb").write_text("{ not json", encoding="utf-8")
    (folder / "dave").mkdir()
    (folder / "dave" / "a.py").write_text("x = 1\n")
    (folder / "dave" / "b.py").write_text("x = 2\n")


def outputs_of(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and STAGING not in p.parts}


def grade_here(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str]:
    """`grade ARGV` in this process (grader.cli.main: the command line's exit codes and output),
    grading with this thread's warm worker: no interpreter, JAX import or kernel boot per command.
    Returns the exit code and what it printed on stdout."""
    from grader.batch import warm_worker
    from grader.cli import main

    warm_worker.current()  # kept by the caller: the batches below reuse its kernels, as a session's do
    capsys.readouterr()
    code = main(list(argv))
    said = capsys.readouterr()
    sys.stderr.write(said.err)  # shown with a failure, as a subprocess's stderr was
    return code, said.out


@pytest.mark.kernel
def test_a_batch_ends_with_the_truth_and_a_regrade_updates_everything_together(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    subs, out = tmp_path / "subs", tmp_path / "out"
    make_class(subs)
    cmd = [str(subs), "-o", str(out), "-a", "ch2-jit", "--seed", "3", "--no-sandbox"]
    code, stdout = grade_here(capsys, *cmd)
    assert code == 4, stdout  # some could not be graded
    assert "4 submission(s): 2 graded, 2 not graded, 0 unchanged" in stdout
    assert "carol" in stdout and "dave" in stdout
    assert "two submissions for one student (1): dave" in stdout
    code, rerun = grade_here(capsys, *cmd)
    assert "4 submission(s): 0 graded, 2 not graded, 2 unchanged" in rerun

    # the regrade of one student: her report, the gradebook, summary.csv, index.html, feedback agree
    assert grade_here(capsys, "adjust", str(out), "bob", "--points", "-5", "--reason", "late by a day",
                      "--by", "ta")[0] == 0
    (subs / "alice.py").write_text(REFERENCE.replace("return x, k", "return x, k + 1", 1), encoding="utf-8")
    before = outputs_of(out)
    code, one = grade_here(capsys, *cmd, "--only", "alice")
    assert code == 0, one  # only alice was asked for
    assert "1 submission(s): 1 graded, 0 not graded" in one
    after = outputs_of(out)
    alice = Report.model_validate_json(after["alice.json"])
    assert alice.score < 100
    assert after["bob.json"] == before["bob.json"] and after["feedback/bob.html"] == before["feedback/bob.html"]
    rows = {r["student"]: r for r in csv.DictReader(after["summary.csv"].decode().splitlines())}
    assert float(rows["alice"]["final_score"]) == alice.final and rows["bob"]["final_score"] == "95"
    assert after["feedback/alice.html"] != before["feedback/alice.html"]
    with Gradebook(out / "gradebook.sqlite") as book:
        assert book.reports()["alice"].score == alice.score and book.adjustments()["bob"][0].points == -5
    # one file graded into the batch's folder is a regrade of the student it was graded for
    (subs / "alice.py").write_text(REFERENCE, encoding="utf-8")
    code, single = grade_here(capsys, str(subs / "alice.py"), "-o", str(out), "-a", "ch2-jit", "--seed", "3",
                              "--no-sandbox")
    assert code == 0, single
    assert "Total 100 / 100" in single
    rows = {r["student"]: r for r in csv.DictReader((out / "summary.csv").read_text().splitlines())}
    assert rows["alice"]["score"] == "100" and sorted(rows) == ["alice", "bob", "carol", "dave"]


@pytest.mark.kernel
def test_a_tampered_then_fixed_tolerance_regrades_the_assignment(tmp_path: Path) -> None:
    folder = tmp_path / "ch2-jit"
    shutil.copytree(ROOT / "assignments" / "ch2-jit", folder, ignore=shutil.ignore_patterns("__pycache__", "mutants"))
    spec = folder / "assignment.toml"
    good = spec.read_text()
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    (subs / "alice.py").write_text(REFERENCE, encoding="utf-8")
    options = OPTIONS.model_copy(update={"assignment": str(folder), "sandbox": False})
    from grader.batch import warm_worker
    from grader.batch.run import grade_many

    warm_worker.current()  # one warm worker for the four batches (each would boot and close its own)
    assert grade_many([subs], out, options).graded == 1
    assert grade_many([subs], out, options).resumed == 1
    # tampered: the tax checks demand an exactness float32 cannot give
    spec.write_text(good.replace("atol = 1e-2", "atol = 0.0").replace("rtol = 1e-5", "rtol = 1e-12"))
    tampered = grade_many([subs], out, options)
    assert (tampered.graded, tampered.resumed) == (1, 0)
    assert Report.model_validate_json((out / "alice.json").read_text()).score < 100
    spec.write_text(good)  # fixed: regraded again, full marks again
    fixed = grade_many([subs], out, options)
    assert (fixed.graded, fixed.resumed) == (1, 0)
    assert Report.model_validate_json((out / "alice.json").read_text()).score == 100


@pytest.mark.kernel
def test_a_regrade_killed_midway_leaves_the_old_consistent_state(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture) -> None:
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    for name in ("alice", "bob"):
        (subs / f"{name}.py").write_text(REFERENCE, encoding="utf-8")
    args = [str(subs), "-o", str(out), "-a", "ch2-jit", "--seed", "3", "--no-sandbox"]
    base = [*GRADE, *args]
    assert grade_here(capsys, *args)[0] == 0  # the batch before, graded in this process
    before = outputs_of(out)
    (subs / "bob.py").write_text(REFERENCE + "\nimport time\ntime.sleep(600)\n", encoding="utf-8")
    proc = subprocess.Popen([*base, "--only", "bob", "--timeout", "300"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 120
    while not (out / STAGING / "gradebook.sqlite").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # polling for a condition (the staged gradebook), bounded
    assert (out / STAGING / "gradebook.sqlite").exists(), proc.communicate()
    os.killpg(proc.pid, signal.SIGKILL)  # the grader and its kernel, midway
    proc.communicate()
    assert outputs_of(out) == before  # nothing of the regrade is visible
    # the next run discards the staged half and grades again
    (subs / "bob.py").write_text(REFERENCE, encoding="utf-8")
    code, done = grade_here(capsys, *args, "--only", "bob")
    assert code == 0, done
    assert not (out / STAGING).exists()
    assert Report.model_validate_json((out / "bob.json").read_text()).score == 100


# ----------------------------------------------------------------------------- attacks that found something


def test_a_second_command_on_a_folder_being_updated_refuses_and_touches_nothing(tmp_path: Path) -> None:
    """It used to delete the running batch's staging folder (its regrade lost, a traceback)."""
    from grader.outputs.staging import locked

    out = tmp_path / "out"
    book_of(out, [graded("alice", 80.0)])
    with locked(out):
        stage_marker = out / STAGING / "in-progress"
        stage_marker.parent.mkdir()
        stage_marker.write_text("the first command's work")
        done = subprocess.run([*GRADE, "adjust", str(out), "alice", "--points", "1", "--reason", "x"],
                              capture_output=True, text=True)
        assert done.returncode == 2 and "another grade command is updating" in done.stderr
        assert "Traceback" not in done.stderr and stage_marker.read_text() == "the first command's work"
    shutil.rmtree(out / STAGING)
    assert subprocess.run([*GRADE, "adjust", str(out), "alice", "--points", "1", "--reason", "x"],
                          capture_output=True).returncode == 0


@pytest.mark.parametrize("policy_text, says", [
    ('due = 9999-12-31T23:59:59\npercent_per_day = 10\ngrace_minutes = 1440\n', "between 1971 and 9000"),
    ('due = "2026-12-08T00:00:00Z"\npercent_per_day = 10\ngrace_minutes = inf\n', "grace_minutes"),
    ('due = "2026-12-08T00:00:00Z"\npercent_per_day = 10\ngrace_minutes = 1e300\n', "grace_minutes"),
])
def test_a_late_policy_out_of_range_is_one_sentence(tmp_path: Path, policy_text: str, says: str) -> None:
    out = tmp_path / "out"
    book_of(out, [graded("alice", 80.0)])
    (out / "late.toml").write_text(policy_text)
    done = subprocess.run([*GRADE, "export", str(out)], capture_output=True, text=True)
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr


def test_a_due_date_without_a_time_is_midnight_utc(tmp_path: Path) -> None:
    (tmp_path / "late.toml").write_text("due = 2026-12-08\npercent_per_day = 10\n")
    assert load_policy(tmp_path).due.isoformat() == "2026-12-08T00:00:00+00:00"


def test_unreadable_submission_times_are_one_sentence(tmp_path: Path) -> None:
    from grader.errors import UsageError

    (tmp_path / "late.toml").write_text('due = "2026-12-08T00:00:00Z"\npercent_per_day = 10\ntimes = "t.csv"\n')
    (tmp_path / "t.csv").write_bytes(b"student,submitted_at\n\xff\xfe,2026\n")
    with pytest.raises(UsageError, match="not UTF-8"):
        load_times(tmp_path, load_policy(tmp_path))
    (tmp_path / "t.csv").write_text("student,submitted_at\n\"" + "x" * 200_000 + "\",2026\n")
    with pytest.raises(UsageError, match="not a readable CSV"):
        load_times(tmp_path, load_policy(tmp_path))


def test_an_adjustment_larger_than_the_assignment_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    book_of(out, [graded("alice", 80.0)])
    done = subprocess.run([*GRADE, "adjust", str(out), "alice", "--points", "1e308", "--reason", "x"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "more than the assignment's 100 points" in done.stderr


def test_a_failed_export_setting_is_not_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    book_of(out, [graded("alice", 80.0)])
    roster = ROOT / "tests" / "fixtures" / "canvas" / "gradebook_export.csv"
    bad = subprocess.run([*GRADE, "export", str(out), "--canvas", str(roster), "--canvas-column", "nope"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "canvas.csv was not written: 'nope' is not a column" in bad.stderr
    assert not (out / "canvas.csv").exists()
    again = subprocess.run([*GRADE, "export", str(out)], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr  # the bad column was not kept
    (out / "canvas.csv").write_text("x")
    own = subprocess.run([*GRADE, "export", str(out), "--canvas", str(out / "canvas.csv")],
                         capture_output=True, text=True)
    assert own.returncode == 2 and "is what this export writes" in own.stderr


CANVAS_EXPORT = ROOT / "tests" / "fixtures" / "canvas" / "gradebook_export.csv"


def canvas_batch(out: Path) -> None:
    """A batch graded from Canvas's download (no kernel): Alice, José (marked LATE) and a student
    the export does not have."""
    book_of(out, [graded("doealice_10001", 80.0, "/subs/doealice_10001_5550_ch2-jit.ipynb"),
                  graded("garcíajosé_10002", 70.0, "/subs/garcíajosé_LATE_10002_5551_ch2-jit.ipynb"),
                  graded("zedzoe_10077", 60.0, "/subs/zedzoe_10077_5599_ch2-jit.ipynb")])


def test_each_export_reports_its_own_outcome_and_nothing_is_swallowed(tmp_path: Path) -> None:
    """Canvas written with its unmatched student named, Gradescope written, Moodle refused (its
    import matches none of Canvas's ids): every outcome is said, the refused one is not written
    nor kept, and the others are kept for later rebuilds."""
    out = tmp_path / "out"
    canvas_batch(out)
    done = subprocess.run([*GRADE, "export", str(out), "--canvas", str(CANVAS_EXPORT), "--moodle",
                           "--gradescope"], capture_output=True, text=True)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the LMS export was not updated" not in done.stderr and "Traceback" not in done.stderr
    assert "2 scores in Chapter 2: jax.jit (ch2-jit) (123456)" in done.stdout
    assert str(out / "canvas.csv") in done.stdout and str(out / "gradescope") in done.stdout
    assert str(out / "moodle.csv") not in done.stdout
    assert ("grade: not matched: zedzoe_10077: not in the roster; looked for Canvas user id 10077 in the ID "
            "column") in done.stderr.splitlines()
    assert ("grade: moodle.csv was not written: 3 students are named as an LMS's download names them"
            in done.stderr)
    assert (out / "canvas.csv").is_file() and (out / "gradescope").is_dir()
    assert not (out / "moodle.csv").exists()
    # what was written is kept, what failed is not: a plain export rebuilds Canvas and Gradescope only
    again = subprocess.run([*GRADE, "export", str(out)], capture_output=True, text=True)
    assert again.returncode == 4, again.stdout + again.stderr  # zedzoe still matches no row
    assert "moodle.csv" not in again.stdout + again.stderr and "2 scores in" in again.stdout
    assert str(out / "gradescope") in again.stdout


def test_adjust_finds_the_near_name_as_only_and_remove_do(tmp_path: Path) -> None:
    """`grade adjust` with a name that is no student's suggests the one meant, by the rule `--only`
    and `grade remove` use (grader/term/remove.py `closest`); a name copied from a macOS file name
    (NFD) is the student it names."""
    import unicodedata

    from grader.term.remove import closest

    out = tmp_path / "out"
    canvas_batch(out)
    ids = ["doealice_10001", "garcíajosé_10002", "zedzoe_10077"]
    for typed, meant in (("alice", "doealice_10001"), ("García, José", "garcíajosé_10002"),
                         ("garciajose", "garcíajosé_10002"), ("Doealice_10001", "doealice_10001")):
        assert closest(typed, ids) == meant  # what --only and grade remove say
        done = subprocess.run([*GRADE, "adjust", str(out), typed, "--points", "1", "--reason", "r"],
                              capture_output=True, text=True)
        assert done.returncode == 2 and f"(did you mean {meant!r}?)" in done.stderr, (typed, done.stderr)
    assert closest("xyz", ids) is None
    nfd = unicodedata.normalize("NFD", "garcíajosé_10002")
    done = subprocess.run([*GRADE, "adjust", str(out), nfd, "--points", "1", "--reason", "r"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert Report.model_validate_json(next(out.glob("garc*.json")).read_text()).final == 71.0


def test_a_failed_export_leaves_no_half_written_folder(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from grader.outputs import exports
    from grader.outputs.gradebook import ExportSettings
    from grader.outputs.rebuild import update

    out = tmp_path / "out"
    book_of(out, [graded("alice", 80.0), graded("bob", 70.0)])
    real = exports.write_gradescope

    def halfway(reports: dict, root: Path) -> Path:
        real(dict(list(reports.items())[:1]), root)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(exports, "write_gradescope", halfway)
    rebuilt = update(out, ExportSettings(gradescope=True))
    assert rebuilt.warnings == ["gradescope was not written: [Errno 28] No space left on device"]
    assert not (out / "gradescope").exists() and (out / "summary.csv").is_file()
    monkeypatch.setattr(exports, "write_gradescope", real)
    assert update(out, ExportSettings(gradescope=True)).written == ["gradescope"]
    before = {p: p.read_bytes() for p in (out / "gradescope").rglob("*.json")}
    assert len(before) == 2
    monkeypatch.setattr(exports, "write_gradescope", halfway)
    with Gradebook(out / "gradebook.sqlite") as book:
        book.adjust("bob", Adjustment(points=1, reason="r", by="me", at="2026-01-01T00:00:00+00:00"))
    failed = update(out)
    assert failed.warnings == ["gradescope was not updated, gradescope stays as it was: [Errno 28] No space "
                               "left on device"]
    assert {p: p.read_bytes() for p in (out / "gradescope").rglob("*.json")} == before  # the last good one


def test_with_a_late_policy_the_canvas_export_does_not_say_no_points_are_taken_off(tmp_path: Path) -> None:
    out = tmp_path / "out"
    canvas_batch(out)
    plain = subprocess.run([*GRADE, "export", str(out), "--canvas", str(CANVAS_EXPORT)], capture_output=True,
                           text=True)
    assert "1 marked late by the LMS (no points taken off here" in plain.stdout, plain.stdout
    (out / "late.toml").write_text('due = "2026-12-08T23:59:00Z"\npercent_per_day = 10\n'
                                   'times = "times.csv"\n')
    (out / "times.csv").write_text("student,submitted_at\ngarcíajosé_10002,2026-12-09T10:00:00Z\n")
    late = subprocess.run([*GRADE, "export", str(out)], capture_output=True, text=True)
    assert late.returncode == 4, late.stdout + late.stderr  # zedzoe matches no row
    assert "no points taken off" not in late.stdout
    assert ("1 marked late by the LMS (OUT/late.toml takes points off by the submission times, not by this "
            "mark: 1 of them lost points): garcíajosé_10002") in late.stdout
    assert Report.model_validate_json(next(out.glob("garc*.json")).read_text()).final == 60.0


def test_a_mistyped_path_is_bad_usage_and_creates_nothing(tmp_path: Path) -> None:
    done = subprocess.run([*GRADE, str(tmp_path / "subz"), "-o", str(tmp_path / "out"), "--no-sandbox"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "does not exist" in done.stderr and not (tmp_path / "out").exists()


def test_an_assignment_inside_the_submissions_being_graded_is_refused(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    (subs / "assignments").mkdir(parents=True)
    shutil.copytree(ROOT / "assignments" / "ch2-jit", subs / "assignments" / "ch2-jit",
                    ignore=shutil.ignore_patterns("__pycache__", "mutants"))
    marker = tmp_path / "RAN"
    (subs / "assignments" / "ch2-jit" / "checks.py").write_text(f"open({str(marker)!r}, 'w')\n")
    (subs / "alice.py").write_text(REFERENCE, encoding="utf-8")
    done = subprocess.run([*GRADE, ".", "-o", str(tmp_path / "out"), "--no-sandbox"], capture_output=True,
                          text=True, cwd=subs, env={**os.environ, "GRADER_ASSIGNMENTS": ""})
    assert done.returncode == 2 and "is inside" in done.stderr, done.stdout + done.stderr
    assert not marker.exists()


def test_a_stray_exit_in_an_assignment_s_code_is_not_a_silent_success(tmp_path: Path) -> None:
    folder = tmp_path / "ch2-jit"
    shutil.copytree(ROOT / "assignments" / "ch2-jit", folder, ignore=shutil.ignore_patterns("__pycache__", "mutants"))
    with (folder / "checks.py").open("a") as f:
        f.write("\nraise SystemExit(0)\n")
    (tmp_path / "alice.py").write_text(REFERENCE, encoding="utf-8")
    done = subprocess.run([*GRADE, str(tmp_path / "alice.py"), "-a", str(folder), "--no-sandbox"],
                          capture_output=True, text=True)
    assert done.returncode != 0 and "do not load: SystemExit" in done.stderr


def test_a_bad_late_policy_stops_a_batch_before_it_grades(tmp_path: Path) -> None:
    """At the commit it would have discarded the whole batch's grading."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    (subs / "alice.py").write_text("x = 1\n")
    out.mkdir()
    (out / "late.toml").write_text('due = "2026-12-08T00:00:00Z"\npercent_per_day = 10\ntimes = "missing.csv"\n')
    done = subprocess.run([*GRADE, str(subs), "-o", str(out), "-a", "ch2-jit", "--no-sandbox"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "cannot read the submission times" in done.stderr
    assert not (out / "gradebook.sqlite").exists()
