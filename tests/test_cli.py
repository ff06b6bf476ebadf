"""The `grade` command, run as a subprocess: output, report files, exit codes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.report import Report

CLI_TIMEOUT_S = 180


def grade_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=CLI_TIMEOUT_S)


def assert_one_line_error(out: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("grade: ")
    assert "Traceback" not in out.stderr + out.stdout
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert out.stdout == ""


# ----------------------------------------------------------------------------- bad input (no kernel)


def test_missing_file_exits_2(tmp_path: Path) -> None:
    assert_one_line_error(grade_cli("nope.ipynb", cwd=tmp_path), "nope.ipynb", "no such file")


def test_invalid_notebook_exits_2(tmp_path: Path) -> None:
    (tmp_path / "broken.ipynb").write_text("{ this is not json", encoding="utf-8")
    assert_one_line_error(grade_cli("broken.ipynb", cwd=tmp_path), "broken.ipynb", "not a valid Jupyter notebook")


def test_txt_file_exits_2(tmp_path: Path) -> None:
    (tmp_path / "answers.txt").write_text("x = 1\n", encoding="utf-8")
    assert_one_line_error(grade_cli("answers.txt", cwd=tmp_path), "answers.txt", ".ipynb", ".py")


def test_a_file_that_cannot_be_graded_boots_no_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`grade FILE` starts its first kernel before it reads the file; a file it will refuse
    gets its sentence without a JAX booted (and killed) for it."""
    from grader import cli
    from grader.kernel import launch
    from grader.submission import SUFFIXES

    assert set(cli.GRADED_SUFFIXES) == set(SUFFIXES)
    started: list[object] = []
    monkeypatch.setattr(launch, "LaunchedKernel", lambda *a: started.append(a))
    (tmp_path / "answers.txt").write_text("x = 1\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["answers.txt"]) == 2
    assert started == [] and "answers.txt" in capsys.readouterr().err


def test_unknown_assignment_exits_2(tmp_path: Path, repo_root: Path) -> None:
    shutil.copy(repo_root / "solutions" / "ch2-jit.py", tmp_path / "ch2-jit.py")
    assert_one_line_error(grade_cli("ch2-jit.py", "-a", "ch9-nope", cwd=tmp_path), "ch9-nope", "ch2-jit")


@pytest.mark.parametrize("args", [("--timeout", "0", "x.py"), ("--seed", "-1", "x.py"), ("--bogus", "x.py")])
def test_bad_usage_exits_2(tmp_path: Path, args: tuple[str, ...]) -> None:
    assert_one_line_error(grade_cli(*args, cwd=tmp_path))


def test_no_report_is_written_for_an_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "broken.ipynb").write_text("[]", encoding="utf-8")
    grade_cli("broken.ipynb", cwd=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.ipynb"]


# ----------------------------------------------------------------------------- grading


@pytest.mark.kernel
def test_reference_notebook_scores_100_and_writes_the_report_beside_it(tmp_path: Path, repo_root: Path) -> None:
    notebook = tmp_path / "ch2-jit.ipynb"
    shutil.copy(repo_root / "solutions" / "ch2-jit.ipynb", notebook)
    out = grade_cli(str(notebook), "--seed", "3", "--fail-under", "100", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "Total 100 / 100" in out.stdout
    assert "Traceback" not in out.stderr
    report_path = tmp_path / "ch2-jit.report.json"
    assert report_path.is_file()
    assert f"report: {report_path}" in out.stdout
    report = Report.model_validate_json(report_path.read_text(encoding="utf-8"))
    assert (report.score, report.max_score, report.seed, report.status) == (100, 100, 3, "graded")
    assert report.submission.kind == "notebook"
    assert not list(tmp_path.glob("*.tmp"))  # written atomically, nothing left behind


@pytest.mark.kernel
def test_json_dash_prints_only_the_report(tmp_path: Path, repo_root: Path) -> None:
    module = tmp_path / "ch2-jit.py"
    shutil.copy(repo_root / "solutions" / "ch2-jit.py", module)
    out = grade_cli(str(module), "--json", "-", "--seed", "4", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    report = Report.model_validate(json.loads(out.stdout))  # nothing but JSON on stdout
    assert report.score == 100 and report.seed == 4 and report.submission.kind == "module"
    assert report.schema_version == 1
    assert [e.id for e in report.exercises] == ["tax", "newton", "detective", "training"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ch2-jit.py"]  # no report file either


@pytest.mark.kernel
def test_json_file_option_writes_there(tmp_path: Path, repo_root: Path) -> None:
    notebook = tmp_path / "ch2-jit.ipynb"
    shutil.copy(repo_root / "student_template" / "ch2-jit.ipynb", notebook)
    target = tmp_path / "out" / "r.json"
    target.parent.mkdir()
    out = grade_cli(str(notebook), "--json", str(target), "--seed", "1", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert Report.model_validate_json(target.read_text(encoding="utf-8")).score == 0


@pytest.mark.kernel
def test_fail_under_on_the_template_exits_1(tmp_path: Path, repo_root: Path) -> None:
    notebook = tmp_path / "ch2-jit.ipynb"
    shutil.copy(repo_root / "student_template" / "ch2-jit.ipynb", notebook)
    out = grade_cli(str(notebook), "--fail-under", "100", "--seed", "1", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert "Total 0 / 100" in out.stdout
    assert "not answered yet" in out.stdout
    assert "Traceback" not in out.stderr
    assert (tmp_path / "ch2-jit.report.json").is_file()  # the report is written all the same


@pytest.mark.kernel
def test_same_seed_same_results_and_the_seed_is_recorded(submission_from_reference) -> None:
    """Hidden inputs come from the seed: same seed, same verdicts and messages; another seed, others."""
    path = submission_from_reference("setup", "tax", "newton", "detective", "training",
                                     "wrong_detective_and_tax_vectorized.py", name="ch2-jit")

    def run(seed: int) -> Report:
        out = grade_cli(str(path), "--json", "-", "--seed", str(seed), cwd=path.parent)
        assert out.returncode == 0, out.stderr
        return Report.model_validate_json(out.stdout)

    first, second, other = run(5), run(5), run(6)
    assert first.seed == second.seed == 5 and other.seed == 6

    def results(report: Report) -> list[tuple]:
        return [(c.id, c.status, c.score, c.message) for e in report.exercises for c in e.checks]

    assert results(first) == results(second)
    assert first.score == second.score == 69.5
    # the inputs are drawn from the seed, not fixed: the instructor's counterexample shows them
    hidden_message = {c.id: c.counterexample for e in first.exercises for c in e.checks}["tax.vectorized_hidden"]
    other_message = {c.id: c.counterexample for e in other.exercises for c in e.checks}["tax.vectorized_hidden"]
    assert hidden_message and hidden_message != other_message


def test_no_arguments_print_usage_subcommands_and_exit_codes(capsys) -> None:
    from grader.cli import run

    assert run([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: grade") and "grade validate" in err and "exit codes:" in err


@pytest.mark.parametrize(("argv", "suggestion"), [
    (["valdate"], "did you mean `grade validate`?"),
    (["schma"], "did you mean `grade schema`?"),
    (["x.py", "--jsn", "f"], "(did you mean --json?)"),
])
def test_a_mistyped_subcommand_or_flag_gets_did_you_mean(tmp_path, monkeypatch, argv, suggestion) -> None:
    from grader.cli import run
    from grader.errors import UsageError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=re.escape(suggestion)):
        run(argv)


def test_version_and_help(capsys) -> None:
    from grader.cli import run

    with pytest.raises(SystemExit) as done:
        run(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("grade (jax-course-grader) ")
    with pytest.raises(SystemExit):
        run(["--help"])
    out = capsys.readouterr().out
    assert "subcommands:" in out and "130, 143" in out


def test_a_long_grading_shows_what_it_does_on_a_terminal() -> None:
    """The stage line: silent off a terminal; on one, it names the stage once the grading has
    run for a while (here at once), and clears itself at the end."""
    import io
    import threading

    from grader.batch.progress import StageLine

    class Terminal(io.StringIO):
        drawn = threading.Event()

        def isatty(self) -> bool:
            return True

        def flush(self) -> None:
            if "grading: running cell 3" in self.getvalue():
                self.drawn.set()

    assert not StageLine(io.StringIO()).enabled
    screen = Terminal()
    line = StageLine(screen, after=0.0)
    line("running cell 3")
    assert screen.drawn.wait(10)  # a safety net for a stuck thread, not a speed requirement
    line.close()
    assert screen.getvalue().endswith("\r")


@pytest.mark.parametrize(("raised", "code", "said"), [
    (None, 0, ""),
    ("usage", 2, "grade: no such thing\n"),
    ("terminated", 143, "grade: terminated; stopped\n"),
    ("ctrl-c", 130, "grade: interrupted\n"),
    ("pipe", 141, ""),
    ("bug", 3, "grade: the grader failed (RuntimeError: oops), a bug: tell someone\n"),
])
def test_both_grades_end_through_one_mapping_of_errors_and_signals_to_exit_codes(raised, code, said, capsys,
                                                                                monkeypatch) -> None:
    """grader/cli.py's `main` and the student pack's (grader/selfgrade/cli.py) both end in `exit_status`."""
    import os

    from grader import interrupts
    from grader.errors import UsageError
    from grader.usage import exit_status

    monkeypatch.setattr(os, "dup2", lambda *fds: None)  # the 141 case would silence this process's stdout
    monkeypatch.setattr(os, "open", lambda *args: -1)
    monkeypatch.setattr(sys, "stdout", type("Out", (), {"fileno": lambda self: 1})())
    errors = {"usage": UsageError("no such thing"), "terminated": interrupts.Terminated(),
              "ctrl-c": KeyboardInterrupt(), "pipe": BrokenPipeError(), "bug": RuntimeError("oops")}

    def run() -> int:
        if raised is not None:
            raise errors[raised]
        return 0

    assert exit_status(run, terminated="terminated; stopped", bug="tell someone") == code
    assert capsys.readouterr().err == said
    if raised == "bug":
        with pytest.raises(RuntimeError):  # the instructor's `grade`: a bug's traceback is the maintainer's
            exit_status(run)
