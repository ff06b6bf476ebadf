"""Batch grading: discovery rules, gradebook and exports against the reports, resume, faults."""

from __future__ import annotations

import csv
import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.batch import SerialExecutor, Task, error_report
from grader.discovery import discover
from grader.exports import gradescope_results
from grader.grade_many import grade_many
from grader.options import GradeOptions
from grader.report import Report

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = (ROOT / "solutions" / "ch2-jit.py").read_text(encoding="utf-8")
TEMPLATE = ROOT / "student_template" / "ch2-jit.ipynb"
OPTIONS = GradeOptions(assignment="ch2-jit", seed=3, cell_timeout=5)


# ----------------------------------------------------------------------------- discovery


def test_discovery_rules(tmp_path: Path) -> None:
    (tmp_path / "alice.ipynb").write_text("{}")
    (tmp_path / "bob.py").write_text("x = 1\n")
    (tmp_path / "carol").mkdir()
    (tmp_path / "carol" / "work.ipynb").write_text("{}")
    (tmp_path / "dave").mkdir()
    (tmp_path / "dave" / "a.py").write_text("")
    (tmp_path / "dave" / "b.ipynb").write_text("{}")
    (tmp_path / "erin.py").write_text("")
    (tmp_path / "erin.ipynb").write_text("{}")
    (tmp_path / "notes.txt").write_text("not a submission")
    (tmp_path / "empty").mkdir()
    (tmp_path / ".ipynb_checkpoints").mkdir()
    found = discover([tmp_path])
    assert [(f.student, f.path.name) for f in found.submissions] == [
        ("alice", "alice.ipynb"), ("bob", "bob.py"), ("carol", "work.ipynb")]
    assert sorted(found.conflicts) == ["dave", "erin"]
    assert found.skipped == {str(tmp_path / "empty"): "a folder without a notebook or module",
                             str(tmp_path / "notes.txt"): "not a .ipynb notebook or .py module"}


def test_error_report_has_every_check_skipped_and_zero() -> None:
    report = error_report(Task(student="zed", path="zed.ipynb", options=OPTIONS), "not a valid notebook")
    assert report.status == "error" and report.error == "not a valid notebook" and report.score == 0
    assert report.max_score == 100 and report.student == "zed"
    assert {c.status for e in report.exercises for c in e.checks} == {"skipped"}


def test_gradescope_format(tmp_path: Path) -> None:
    report = error_report(Task(student="zed", path="zed.ipynb", options=OPTIONS), "unreadable")
    data = gradescope_results(report)
    assert data["score"] == 0 and data["output"] == "unreadable"
    first = data["tests"][0]
    assert set(first) == {"name", "score", "max_score", "status", "output", "visibility"}
    hidden = [t for t in data["tests"] if "hidden" in t["name"]]
    assert hidden and all(t["visibility"] == "after_published" for t in hidden)


# ----------------------------------------------------------------------------- whole batches


def make_class(folder: Path) -> None:
    folder.mkdir()
    (folder / "alice.py").write_text(REFERENCE, encoding="utf-8")
    (folder / "bob.ipynb").write_bytes(TEMPLATE.read_bytes())
    (folder / "carol.ipynb").write_text("{ not json", encoding="utf-8")
    (folder / "dave.py").write_text(REFERENCE + "\n# %% [hang]\nwhile True:\n    pass\n", encoding="utf-8")
    (folder / "erin.py").write_text(REFERENCE + "\n# %% [crash]\nimport os\nos._exit(3)\n", encoding="utf-8")
    (folder / "readme.txt").write_text("hello")


@pytest.mark.kernel
def test_batch_outputs_agree_with_the_reports(tmp_path: Path, request) -> None:
    make_class(tmp_path / "subs")
    out = tmp_path / "out"
    result = grade_many([tmp_path / "subs"], out, OPTIONS, formats={"gradescope"})
    assert (result.graded, result.resumed, result.errors) == (5, 0, 1)
    assert result.skipped == {str(tmp_path / "subs" / "readme.txt"): "not a .ipynb notebook or .py module"}
    reports = {p.stem: Report.model_validate_json(p.read_text()) for p in out.glob("*.json")}
    assert sorted(reports) == ["alice", "bob", "carol", "dave", "erin"]
    assert reports["alice"].score == 100 and reports["bob"].score == 0
    assert reports["carol"].status == "error" and "not a valid Jupyter notebook" in reports["carol"].error
    assert reports["dave"].score == 100 and reports["dave"].cell_problems[0].status == "timeout"
    assert reports["erin"].score == 100 and reports["erin"].cell_problems[0].status == "died"
    assert all(r.student == s for s, r in reports.items())

    rows = list(csv.DictReader((out / "summary.csv").read_text().splitlines()))
    assert [r["student"] for r in rows] == ["alice", "bob", "carol", "dave", "erin"]
    for row in rows:
        report = reports[row["student"]]
        assert float(row["score"]) == report.score and row["status"] == report.status
        for e in report.exercises:
            assert float(row[e.id]) == e.score

    db = sqlite3.connect(out / "gradebook.sqlite")
    request.addfinalizer(db.close)
    assert db.execute("SELECT count(*) FROM students").fetchone() == (5,)
    for student, report in reports.items():
        sha, score = db.execute("SELECT sha256, score FROM submissions WHERE student=?", (student,)).fetchone()
        assert (sha, score) == (report.submission.sha256, report.score)
        checks = dict(db.execute("SELECT check_id, status FROM check_results WHERE student=?", (student,)))
        assert checks == {c.id: c.status for e in report.exercises for c in e.checks}
        exercises = dict(db.execute("SELECT exercise, score FROM exercise_scores WHERE student=?", (student,)))
        assert exercises == {e.id: e.score for e in report.exercises}

    for student, report in reports.items():
        data = json.loads((out / "gradescope" / student / "results.json").read_text())
        assert data["score"] == report.score
        assert sum(t["score"] for t in data["tests"]) == report.score
    assert (out / "index.html").is_file()

    # `grade export` rebuilds the same exports from the gradebook alone, grading nothing.
    saved = {p: p.read_bytes() for p in [out / "summary.csv", out / "index.html",
                                         *sorted((out / "gradescope").rglob("results.json"))]}
    for p in saved:
        p.unlink()
    done = subprocess.run([sys.executable, "-m", "grader", "export", str(out), "--csv", "--gradescope", "--html"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert {p: p.read_bytes() for p in saved} == saved


@pytest.mark.kernel
def test_rerun_resumes_and_force_regrades(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "alice.py").write_text(REFERENCE, encoding="utf-8")
    out = tmp_path / "out"
    first = grade_many([subs], out, OPTIONS)
    assert (first.graded, first.resumed) == (1, 0)
    stored = (out / "alice.json").read_text()
    (subs / "bob.ipynb").write_bytes(TEMPLATE.read_bytes())
    second = grade_many([subs], out, OPTIONS)
    assert (second.graded, second.resumed) == (1, 1)  # only the new one
    assert (out / "alice.json").read_text() == stored
    (subs / "alice.py").write_text(REFERENCE + "\nextra = 1\n", encoding="utf-8")  # changed file
    third = grade_many([subs], out, OPTIONS)
    assert (third.graded, third.resumed) == (1, 1)
    forced = grade_many([subs], out, OPTIONS, force=True)
    assert (forced.graded, forced.resumed) == (2, 0)


@pytest.mark.kernel
def test_ctrl_c_keeps_what_is_done_and_a_rerun_grades_only_the_rest(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "a_first.py").write_text(REFERENCE, encoding="utf-8")
    (subs / "b_hangs.py").write_text("while True:\n    pass\n", encoding="utf-8")
    (subs / "c_last.py").write_text(REFERENCE, encoding="utf-8")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "grader", str(subs), "-o", str(out), "-a", "ch2-jit", "--seed", "3",
           "--timeout", "60"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (out / "a_first.json").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)  # polling for a condition (the first report), bounded
    assert (out / "a_first.json").exists(), proc.communicate()
    proc.send_signal(signal.SIGINT)  # while b_hangs runs
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "rerun" in err and "Traceback" not in err
    assert sorted(p.name for p in out.glob("*.json")) == ["a_first.json"]
    first = (out / "a_first.json").read_text()
    rows = list(csv.DictReader((out / "summary.csv").read_text().splitlines()))
    assert [r["student"] for r in rows] == ["a_first"]

    rerun = grade_many([subs], out, OPTIONS.model_copy(update={"cell_timeout": 3}))
    assert (rerun.graded, rerun.resumed) == (2, 1)
    assert (out / "a_first.json").read_text() == first  # not graded twice
    assert sorted(p.name for p in out.glob("*.json")) == ["a_first.json", "b_hangs.json", "c_last.json"]


@pytest.mark.kernel
def test_completion_order_does_not_change_results(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("x", "y"):
        (subs / f"{name}.py").write_text(REFERENCE, encoding="utf-8")
    tasks = [Task(student=n, path=str(subs / f"{n}.py"), options=OPTIONS) for n in ("x", "y")]
    forward = {t.student: r for t, r in SerialExecutor().map(tasks)}
    backward = {t.student: r for t, r in SerialExecutor().map(list(reversed(tasks)))}
    for student in ("x", "y"):
        assert [(c.id, c.status) for e in forward[student].exercises for c in e.checks] == \
               [(c.id, c.status) for e in backward[student].exercises for c in e.checks]


def test_cli_batch_needs_an_outdir(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    done = subprocess.run([sys.executable, "-m", "grader", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2 and "-o OUTDIR" in done.stderr and "Traceback" not in done.stderr


def test_cli_export_needs_a_gradebook(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "grader", "export", str(tmp_path), "--csv"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "gradebook.sqlite" in done.stderr
