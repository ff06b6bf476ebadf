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
import terminal_ctrl_c

from grader.batch.discovery import discover
from grader.batch.executors import SerialExecutor, Task, error_report
from grader.batch.run import grade_many
from grader.options import GradeOptions
from grader.outputs.exports import gradescope_results
from grader.report import Report
from grader.submission import claim_text

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
    # a hang that sleeps: timed out all the same, without burning the cell's limit in CPU seconds
    (folder / "dave.py").write_text(REFERENCE + "\n# %% [hang]\nimport time\ntime.sleep(600)\n", encoding="utf-8")
    (folder / "erin.py").write_text(REFERENCE + "\n# %% [crash]\nimport os\nos._exit(3)\n", encoding="utf-8")
    (folder / "readme.txt").write_text("hello")


@pytest.mark.kernel
def test_batch_outputs_agree_with_the_reports(tmp_path: Path, request) -> None:
    make_class(tmp_path / "subs")
    out = tmp_path / "out"
    result = grade_many([tmp_path / "subs"], out, OPTIONS, formats={"gradescope"})
    assert (result.found, result.graded, result.resumed, result.errors) == (5, 4, 0, 1)
    assert list(result.not_graded.values()) == [["carol"]] and result.died == ["erin"]
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
    # a feedback page per student to hand back: their code beside their verdicts
    assert sorted(p.name for p in (out / "feedback").iterdir()) == [f"{s}.html" for s in sorted(reports)]
    alice = (out / "feedback" / "alice.html").read_text()
    assert "def tax_switch" in alice and "100 / 100" in alice
    assert "Not graded: " in (out / "feedback" / "carol.html").read_text()

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


def recorded(out: Path, student: str) -> bool:
    """Whether the batch's staged gradebook holds the student's report already."""
    staged = out / ".staging" / "gradebook.sqlite"
    if not staged.exists():
        return False
    db = sqlite3.connect(f"file:{staged}?mode=ro", uri=True, timeout=5)
    try:
        return db.execute("SELECT count(*) FROM submissions WHERE student = ?", (student,)).fetchone() == (1,)
    except sqlite3.DatabaseError:  # still being created
        return False
    finally:
        db.close()


GRADE_WITH_A_TERMINALS_CTRL_C = terminal_ctrl_c.python_module("grader")  # tests/terminal_ctrl_c.py says why


@pytest.mark.kernel
def test_ctrl_c_keeps_what_is_done_and_a_rerun_grades_only_the_rest(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "a_first.py").write_text(REFERENCE, encoding="utf-8")
    (subs / "b_hangs.py").write_text("import time\ntime.sleep(600)\n", encoding="utf-8")  # hangs, using no CPU
    (subs / "c_last.py").write_text(REFERENCE, encoding="utf-8")
    out = tmp_path / "out"
    cmd = [*GRADE_WITH_A_TERMINALS_CTRL_C, str(subs), "-o", str(out), "-a", "ch2-jit", "--seed", "3",
           "--timeout", "60"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not recorded(out, "a_first") and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)  # polling for a condition (the first report recorded, not yet committed), bounded
    assert recorded(out, "a_first"), proc.communicate()
    assert not (out / "a_first.json").exists()  # outputs appear together, at the commit
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


def test_a_serial_batch_closes_the_warm_worker_it_made_and_keeps_the_caller_s(tmp_path: Path, monkeypatch) -> None:
    """`grade DIR -j 1` ends with nothing of its own left running; a warm worker the caller had
    already (a library user's, a test session's) outlives the batch, so the caller's next
    grading needs no new servers."""
    from concurrent.futures import ThreadPoolExecutor

    from grader.batch import warm_worker

    closed: list[object] = []
    monkeypatch.setattr(warm_worker.WarmWorker, "close", lambda self: closed.append(self))

    def graded(task: Task, warm: bool = False) -> Report:
        assert warm
        warm_worker.current()  # what grade_task grades with
        return error_report(task, "not graded in this test")

    monkeypatch.setattr("grader.batch.executors.grade_task", graded)
    task = Task(student="a", path=str(tmp_path / "a.py"), options=OPTIONS)

    def in_a_thread_of_its_own() -> tuple:  # thread-local: no warm worker from earlier tests
        list(SerialExecutor().map([task]))
        made, left = list(closed), warm_worker.existing()
        mine = warm_worker.current()
        list(SerialExecutor().map([task, task]))
        kept, closed_since = warm_worker.existing(), closed[len(made):]
        warm_worker.close_current()
        return made, left, mine, kept, closed_since

    with ThreadPoolExecutor(1) as pool:
        made, left, mine, kept, closed_since = pool.submit(in_a_thread_of_its_own).result()
    assert len(made) == 1 and left is None  # the batch made one, and closed it
    assert kept is mine and closed_since == []  # the caller's was used and left open


def test_a_spare_kernel_serves_only_the_options_it_was_launched_for(monkeypatch) -> None:
    """Where no kernel server can fork (no sandbox, another kernel spec), a worker keeps a spare
    kernel booting for the next submission: one launched for other options (another sandbox
    policy, another kernel) is closed, never used."""
    from grader.batch import warm_worker
    from grader.sandbox.layers import SandboxPolicy

    made: list[FakeKernel] = []

    class FakeKernel:
        def __init__(self, *, kernel_name: str, sandbox: object, **_: object) -> None:
            self.made_for, self.closed = (kernel_name, sandbox), False
            made.append(self)

        def launch(self) -> FakeKernel:
            return self

        def close(self) -> None:
            self.closed = True

    monkeypatch.setattr(warm_worker, "Kernel", FakeKernel)
    monkeypatch.setattr("grader.kernel.server.usable", lambda policy: False)  # no fork server anywhere
    worker = warm_worker.WarmWorker()
    tight = SandboxPolicy(memory_bytes=2**30)
    first = worker.kernels(OPTIONS.model_copy(update={"sandbox": False}))()
    assert first.made_for == ("python3", None)
    spare = made[-1]
    assert spare is not first and spare.made_for == ("python3", None) and not spare.closed
    assert worker.kernels(OPTIONS.model_copy(update={"sandbox": False}))() is spare  # same options: the spare
    monkeypatch.setattr(warm_worker, "policy_for", lambda options: tight)
    next_spare = made[-1]
    other = worker.kernels(OPTIONS)()
    assert next_spare.closed and other is not next_spare and other.made_for == ("python3", tight)
    assert made[-1].made_for == ("python3", tight) and not made[-1].closed  # the spare for these options


@pytest.mark.kernel
def test_a_spare_kernel_killed_while_it_waited_is_replaced() -> None:
    """The spare kernel an unsandboxed worker keeps booting may die before the next submission
    takes it (the machine's OOM killer, a stray kill): that submission gets a fresh kernel and is
    graded, not "could not start a Python kernel"."""
    from grader.batch import warm_worker
    from grader.pipeline import grade_one

    options = OPTIONS.model_copy(update={"sandbox": False})
    worker = warm_worker.WarmWorker()  # one of its own: its spare is this test's to kill

    def graded() -> Report:  # as grade_task grades with a worker's kernels and verifier
        return grade_one(ROOT / "solutions" / "ch2-jit.py", options, kernel_factory=worker.kernels(options),
                         verifier=worker.verifier(options))

    try:
        first = graded()
        process = worker._spare[1]._km.provisioner.process
        process.kill()
        process.wait(timeout=10)
        after = graded()
    finally:
        worker.close()
    assert first.status == "graded" and first.score == 100, first.error
    assert after.status == "graded" and after.score == 100, after.error


def test_cli_batch_needs_an_outdir(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    done = subprocess.run([sys.executable, "-m", "grader", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2 and "-o OUTDIR" in done.stderr and "Traceback" not in done.stderr


def test_cli_export_needs_a_gradebook(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "grader", "export", str(tmp_path), "--csv"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "gradebook.sqlite" in done.stderr


# ------------------------------------------------------------------------ which assignment a batch grades


import nbformat  # noqa: E402

from grader.errors import UsageError  # noqa: E402

NO_A = GradeOptions(seed=3, cell_timeout=5, sandbox=False)




def notebook(path: Path, assignment: object = "absent") -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1")]
    nb.cells[0]["id"] = "c0"
    if assignment != "absent":
        nb.metadata["grader"] = {"assignment": assignment}
    nbformat.write(nb, path)
    return path


def saved_reports(out: Path) -> dict[str, Report]:
    return {r.student: r for r in (Report.model_validate_json(p.read_text()) for p in out.glob("*.json"))}


def test_the_notebooks_decide_the_batch_and_grade_the_rest_as_it(tmp_path: Path, recorder) -> None:
    subs = tmp_path / "subs"
    subs.mkdir()
    marker = tmp_path / "EXECUTED"
    evil = subs / "evil"  # a folder in the submissions that looks like an assignment
    evil.mkdir()
    spec = ROOT / "assignments" / "ch2-jit" / "assignment.toml"
    (evil / "assignment.toml").write_bytes(spec.read_bytes())
    (evil / "checks.py").write_text(f"open({str(marker)!r}, 'w').write('executed')\n")
    for name in ("bob", "bea", "ben", "bill", "bo", "bud"):  # the class used the template
        notebook(subs / f"{name}.ipynb", "ch2-jit")
    notebook(subs / "dave.ipynb")
    (subs / "carol.py").write_text("x = 1\n")
    notebook(subs / "mallory.ipynb", str(evil))
    notebook(subs / "trudy.ipynb", "../evil")
    notebook(subs / "num.ipynb", 42)
    out = tmp_path / "out"
    result = grade_many([subs], out, NO_A)
    assert result.assignment == "ch2-jit"
    # evil/checks.py is only the submission of a student "evil": student code, run in a kernel
    assert sorted(t.student for t in recorder.tasks) == ["bea", "ben", "bill", "bo", "bob", "bud", "carol",
                                                         "dave", "evil"]
    assert {t.options.assignment for t in recorder.tasks} == {"ch2-jit"}
    reports = saved_reports(out)
    assert reports["mallory"].error == (f"{subs / 'mallory.ipynb'}: this notebook says it is for "
                                        f"{claim_text(str(evil))}, which is not an assignment here")
    assert reports["trudy"].error.endswith(
        "this notebook says it is for '../evil', which is not an assignment here")
    assert reports["num"].error.endswith("this notebook says it is for 42, which is not an assignment here")
    assert {r.assignment for r in reports.values()} == {"ch2-jit"}  # one class page, one assignment
    assert not marker.exists()


@pytest.mark.kernel
def test_a_notebook_of_another_assignment_is_an_error_naming_both(tmp_path: Path, recorder) -> None:
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "erin.ipynb").write_bytes((ROOT / "solutions" / "ch2-practice.ipynb").read_bytes())
    notebook(subs / "bob.ipynb", "ch2-jit")
    out = tmp_path / "out"
    result = grade_many([subs], out, OPTIONS)
    assert [t.student for t in recorder.tasks] == ["bob"]
    erin = saved_reports(out)["erin"]
    assert erin.status == "error" and erin.score == 0 and erin.assignment == "ch2-jit"
    assert erin.error == (f"{subs / 'erin.ipynb'}: this notebook says it is for ch2-practice, "
                          "but this batch grades ch2-jit")
    assert (result.graded, result.errors) == (1, 1)
    rows = list(csv.DictReader((out / "summary.csv").read_text().splitlines()))
    assert {r["assignment"] for r in rows} == {"ch2-jit"}


def test_notebooks_that_disagree_stop_the_batch_without_a(tmp_path: Path, recorder) -> None:
    subs = tmp_path / "subs"
    subs.mkdir()
    notebook(subs / "a.ipynb", "ch2-jit")
    notebook(subs / "b.ipynb", "ch2-jit")
    notebook(subs / "c.ipynb", "ch2-practice")
    notebook(subs / "d.ipynb", "ch2-practice")
    with pytest.raises(UsageError) as info:
        grade_many([subs], tmp_path / "out", NO_A)
    assert str(info.value) == ("the submissions do not agree on an assignment (2 for ch2-jit, "
                               "2 for ch2-practice): pass -a to say which one this batch grades")
    assert recorder.tasks == [] and not (tmp_path / "out").exists()
    grade_many([subs], tmp_path / "out", OPTIONS)  # with -a it grades, c and d get error reports
    assert [t.student for t in recorder.tasks] == ["a", "b"]


def test_one_notebook_cannot_choose_the_assignment_of_a_class_of_modules(tmp_path: Path, recorder) -> None:
    """The attack: two honest modules and one notebook naming ch2-practice, no -a. Graded as the
    notebook says, the modules scored 0. A minority claim decides nothing."""
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "alice.py").write_text("x = 1\n")
    (subs / "bob.py").write_text("x = 1\n")
    notebook(subs / "mallory.ipynb", "ch2-practice")
    with pytest.raises(UsageError, match=r"1 for ch2-practice, 2 naming none\): pass -a"):
        grade_many([subs], tmp_path / "out", NO_A)
    assert recorder.tasks == []
    notebook(subs / "x.ipynb", "ch2-practice")
    notebook(subs / "y.ipynb", "ch2-practice")  # now 3 of 5 name it: a majority decides
    assert grade_many([subs], tmp_path / "out", NO_A).assignment == "ch2-practice"


def test_modules_alone_need_a_unless_there_is_one_assignment(tmp_path: Path, recorder,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "alice.py").write_text("x = 1\n")
    with pytest.raises(UsageError, match=r"cannot tell which assignment this batch grades .*pass -a"):
        grade_many([subs], tmp_path / "out", NO_A)
    only = tmp_path / "assignments"
    shutil.copytree(ROOT / "assignments" / "ch2-jit", only / "ch2-jit")
    monkeypatch.setenv("GRADER_ASSIGNMENTS", str(only))
    assert grade_many([subs], tmp_path / "out", NO_A).assignment == "ch2-jit"
    assert [t.options.assignment for t in recorder.tasks] == ["ch2-jit"]


def test_a_given_as_a_folder_grades_as_that_folder(tmp_path: Path, recorder) -> None:
    subs = tmp_path / "subs"
    subs.mkdir()
    notebook(subs / "bob.ipynb", "ch2-jit")
    notebook(subs / "erin.ipynb", "ch2-practice")
    folder = str(ROOT / "assignments" / "ch2-jit")
    result = grade_many([subs], tmp_path / "out", NO_A.model_copy(update={"assignment": folder}))
    assert result.assignment == "ch2-jit"
    assert [(t.student, t.options.assignment) for t in recorder.tasks] == [("bob", folder)]
    assert saved_reports(tmp_path / "out")["erin"].error.endswith("but this batch grades ch2-jit")


@pytest.mark.kernel
def test_a_worker_that_dies_costs_only_its_own_submission(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker killed while grading one student (an OOM kill) used to hang the pool or give every
    student then pending "died twice". Only the culprit is retried, then reported; no hang."""
    import signal as signals

    import batch_workers

    from grader.batch.executors import LocalExecutor

    monkeypatch.setattr("grader.batch.executors._grade_in_worker", batch_workers.grade_or_die)
    # unsandboxed: the workers start no fork servers (grade_or_die grades nothing, so they would go unused)
    options = OPTIONS.model_copy(update={"sandbox": False})
    tasks = [Task(student=s, path=f"{s}.py", options=options) for s in ("ann", "killer", "bea", "cy", "dan")]

    def too_slow(*_: object) -> None:
        raise TimeoutError("the batch hung after a worker died")

    previous = signals.signal(signals.SIGALRM, too_slow)
    signals.alarm(120)
    try:
        results = {task.student: report for task, report in LocalExecutor(2).map(tasks)}
    finally:
        signals.alarm(0)
        signals.signal(signals.SIGALRM, previous)
    assert sorted(results) == ["ann", "bea", "cy", "dan", "killer"]
    assert results["killer"].status == "error" and "died twice" in results["killer"].error
    assert all(results[s].status == "graded" for s in ("ann", "bea", "cy", "dan"))


@pytest.mark.kernel
def test_a_batch_draws_one_seed_for_every_submission_and_says_which(tmp_path: Path) -> None:
    """Without --seed, a batch draws the hidden inputs once: the same code meets the same inputs,
    whichever worker grades it, and the line printed is the way to draw them again."""
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("amy", "ben", "cal"):
        (subs / f"{name}.py").write_text("x = 1\n", encoding="utf-8")
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "grader", str(subs), "-o", str(out), "-a", "ch2-jit", "-j", "2"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    seeds = {Report.model_validate_json((out / f"{n}.json").read_text()).seed for n in ("amy", "ben", "cal")}
    assert len(seeds) == 1
    seed = seeds.pop()
    assert f"hidden inputs drawn with seed {seed}, the same for every submission (--seed {seed} " in run.stdout
