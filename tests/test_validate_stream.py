"""`grade validate` streams: each row is handed on (and printed) the moment its item is judged,
a status line on a terminal says how far it is, and a reader that leaves (`| head`) ends the
run quietly. It also validates an instructor's own folder, given as a path."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import assignment as assignments
from grader.batch.executors import error_report
from grader.course import validate as validating
from grader.course.validate import Row, Status, validate_all
from grader.course.validation_outputs import Live
from grader.errors import UsageError

ASSIGNMENT = "ch2-practice"


def course_copy(root: Path, repo_root: Path, mutants: int | None = None) -> Path:
    """A course folder of one assignment copied from this repository (assignments/<id>/,
    solutions/<id>.py, student_template/<id>.ipynb); keeps the first `mutants` mutants."""
    folder = root / "course" / "assignments" / ASSIGNMENT
    shutil.copytree(repo_root / "assignments" / ASSIGNMENT, folder)
    for extra in sorted((folder / "mutants").glob("*.py"))[mutants:] if mutants is not None else []:
        extra.unlink()
    for part, suffix in (("solutions", ".py"), ("student_template", ".ipynb")):
        (root / "course" / part).mkdir()
        shutil.copy(repo_root / part / f"{ASSIGNMENT}{suffix}", root / "course" / part / f"{ASSIGNMENT}{suffix}")
    return folder


class BackwardsExecutor:
    """Grades nothing: yields an error report for each task, last task first, and logs it."""

    def __init__(self, log: list[tuple[str, object]], *args: object) -> None:
        self.log = log

    def map(self, tasks):
        for task in reversed(list(tasks)):
            self.log.append(("graded", task.student))
            yield task, error_report(task, "not graded in this test")


@pytest.mark.kernel
def test_rows_arrive_as_each_item_is_judged_and_the_result_keeps_the_items_order(
        tmp_path: Path, repo_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = course_copy(tmp_path, repo_root, mutants=3)
    monkeypatch.setenv(assignments.ENV, str(folder.parent))
    log: list[tuple[str, object]] = []
    monkeypatch.setattr("grader.batch.executors.SerialExecutor", lambda *a: BackwardsExecutor(log, *a))
    monkeypatch.setattr("grader.batch.executors.LocalExecutor", lambda *a: BackwardsExecutor(log, *a))
    monkeypatch.setattr(validating, "derived_mutants", lambda *a, **k: [])  # no JAX process here
    monkeypatch.setattr(validating.precompile, "ensure", lambda loaded: None)  # nothing here runs its programs

    validation = validate_all([ASSIGNMENT], workers=2, on_row=lambda r: log.append(("row", r.item)),
                              on_status=lambda s: log.append(("status", s)))
    log.append(("returned", None))

    graded = [key for event, key in log if event == "graded"]
    assert len(graded) == 5  # the solution, the template, three mutants
    for key in graded:  # its row comes right after its grading, before the next one is taken
        at = log.index(("graded", key))
        following = [e for e in log[at + 1:] if e[0] != "status"]
        assert following[0] == ("row", key), log
    assert log[-1] == ("returned", None)
    statuses = [s for event, s in log if event == "status" and isinstance(s, Status)]
    assert statuses[0] == Status(assignment=ASSIGNMENT)  # planning
    assert statuses[1] == Status(assignment=ASSIGNMENT, done=0, total=5, running=2)
    assert statuses[-1] == Status(assignment=ASSIGNMENT, done=5, total=5, running=0)
    # the result is in the items' order, whatever order the gradings finished in
    items = [r.item for r in validation.rows if r.item in graded]
    assert items == list(reversed(graded))
    assert [r.item for r in validation.rows][:2] == ["spec loads", "every requirement has a check"]
    assert validation.rows[-1].item == "every check can fail"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _row(item: str, ok: bool = True) -> Row:
    return Row(assignment=ASSIGNMENT, item=item, ok=ok, detail="why")


def test_on_a_terminal_the_status_line_is_redrawn_and_cleared_around_each_row() -> None:
    out, err = io.StringIO(), Terminal()
    live = Live(out, err)
    line = f"validate {ASSIGNMENT}: 37/123 items, 2 running"
    live.status(Status(assignment=ASSIGNMENT, done=37, total=123, running=2))
    assert err.getvalue() == "\r" + line
    live.row(_row("mutant x", ok=False))
    assert out.getvalue() == f"FAILED  {ASSIGNMENT}  mutant x  (why)\n"
    blank = "\r" + " " * len(line) + "\r"
    assert err.getvalue() == "\r" + line + blank + "\r" + line  # cleared before the row, then redrawn
    live.close()
    assert err.getvalue().endswith(line + blank)


def test_off_a_terminal_rows_only_and_no_carriage_return() -> None:
    out, err = io.StringIO(), io.StringIO()
    live = Live(out, err)
    live.status(Status(assignment=ASSIGNMENT))
    live.row(_row("spec loads"))
    live.close()
    assert out.getvalue() == f"ok      {ASSIGNMENT}  spec loads  (why)\n"
    assert err.getvalue() == ""


def test_a_closed_stdout_ends_any_command_quietly_with_141(tmp_path: Path) -> None:
    """`grade schema` into a pipe whose reader has already gone: no traceback, 141."""
    script = ("import os, sys\n"
              "read, write = os.pipe()\n"
              "os.close(read)\n"
              "os.dup2(write, 1)\n"
              "sys.argv = ['grade', 'schema']\n"
              "from grader.cli import entry\n"
              "entry()\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, check=False)
    assert done.returncode == 141, done.stderr
    assert done.stderr == ""


@pytest.mark.kernel
def test_validate_into_head_stops_without_a_traceback(tmp_path: Path) -> None:
    """The real pipe: head takes the first row and leaves while the gradings go on."""
    err = tmp_path / "stderr.txt"
    command = (f"{sys.executable} -m grader validate --family honest {ASSIGNMENT} -j 1 2>{err} | head -1; "
               "echo ${PIPESTATUS[0]}")
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False)
    first, status = done.stdout.splitlines()
    assert first == f"ok      {ASSIGNMENT}  spec loads  (32 checks)"
    assert "Traceback" not in err.read_text() and err.read_text() == "", err.read_text()
    assert status == "141"


def test_a_folder_to_validate_becomes_the_assignments_folder(tmp_path: Path, repo_root: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    folder = course_copy(tmp_path, repo_root)
    # set, not deleted: a variable that was not there is not recorded by delenv, and `select`
    # sets it; an empty value is unset to the grader, and is removed again after the test
    monkeypatch.setenv(assignments.ENV, "")
    assert assignments.select([str(folder)]) == [ASSIGNMENT]  # one assignment's folder
    assert os.environ[assignments.ENV] == str(folder.parent.resolve())
    monkeypatch.delenv(assignments.ENV)
    assert assignments.select([str(folder.parent)]) == [ASSIGNMENT]  # a folder of assignments
    assert assignments.select([ASSIGNMENT]) == [ASSIGNMENT]  # and then its ids
    with pytest.raises(UsageError, match="holds no assignment"):
        assignments.select([str(tmp_path)])


@pytest.mark.kernel
def test_validate_dir_validates_an_instructor_s_copy(tmp_path: Path, repo_root: Path) -> None:
    folder = course_copy(tmp_path, repo_root, mutants=1)
    kept = next((folder / "mutants").glob("*.py"))
    shutil.copy(kept, folder / "mutants" / "only_in_the_copy.py")
    env = {k: v for k, v in os.environ.items() if k != assignments.ENV}
    # lookalike: the family that derives fewest from ch2-practice (6 mutants; honest makes 20)
    done = subprocess.run([sys.executable, "-m", "grader", "validate", str(folder), "--family", "lookalike", "-j", "2",
                           "--json", str(tmp_path / "v.json")],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600, check=False)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stdout.splitlines()
    assert f"ok      {ASSIGNMENT}  solutions/{ASSIGNMENT}.py scores full marks  (100/100)" in lines
    assert any(line.startswith(f"ok      {ASSIGNMENT}  mutant only_in_the_copy") for line in lines), done.stdout
    assert f"kill matrix of {ASSIGNMENT}" in done.stdout
    assert not (folder.parent.parent / "solutions" / f"{ASSIGNMENT}.ipynb").exists()  # only what was copied
    # two mutants and a family cannot kill every check: a --family run does not judge it, and says so
    assert done.returncode == 0, done.stdout
    assert any(line.startswith(f"ok      {ASSIGNMENT}  every check can fail  (not judged: --family")
               for line in lines), done.stdout
