"""The grader installed anywhere: a wheel of this project (`pip install .`, not editable) in a
fresh venv that cannot see this checkout finds assignments only where it is told
(`--assignments DIR`, `$GRADER_ASSIGNMENTS`, `./assignments`), and when it finds none it says
those three ways in one sentence.

The venv borrows the test environment's packages (jax, nbclient, ...) through a .pth file
naming that site-packages, and not this checkout. Its kernels run with `--no-sandbox`: the
sandbox exposes only the interpreter's own prefixes to a kernel, not a folder a .pth adds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from grader import assignment as assignments
from grader.cli import _take_assignments
from grader.errors import UsageError

THREE_WAYS = ("--assignments DIR", "GRADER_ASSIGNMENTS=DIR", "assignments/ subfolder")


pytestmark = pytest.mark.kernel  # each test runs a grader installed in a venv of its own


def _run(*args: str | Path, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, check=False, **kwargs)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, repo_root: Path) -> Path:
    """A venv with the wheel installed (no deps); returns its bin folder. The wheel is built from
    a copy of the sources, so that building writes no build/ folder into the checkout."""
    root = tmp_path_factory.mktemp("installed")
    source = root / "source"
    shutil.copytree(repo_root / "grader", source / "grader",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "_assignments"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(repo_root / name, source / name)
    built = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", root / "wheels", source)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (root / "wheels").glob("jax_course_grader-*.whl")
    made = _run(sys.executable, "-m", "venv", "--without-pip", root / "venv")
    assert made.returncode == 0, made.stderr
    python = root / "venv" / "bin" / "python"
    purelib = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    ours = sysconfig.get_paths()["purelib"]
    assert not (Path(ours) / "grader").exists()  # the editable install there is a finder no path line runs
    (purelib / "test_environment.pth").write_text(ours + "\n")  # a path line: its own .pth files stay unread
    # -I: never uninstall the editable install that the borrowed site-packages holds
    installed = _run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "-I", wheel, env=_env())
    assert installed.returncode == 0, installed.stderr[-2000:]
    return python.parent


def _env(**extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", assignments.ENV, "VIRTUAL_ENV")}
    return {**keep, **extra}


@pytest.fixture
def cwd(tmp_path: Path, repo_root: Path) -> Path:
    """An empty working folder holding a copy of the reference solution."""
    folder = tmp_path / "work"
    folder.mkdir()
    shutil.copy(repo_root / "solutions" / "ch2-jit.py", folder / "ch2-jit.py")
    return folder


def test_the_installed_grader_is_the_wheel_not_this_checkout(venv: Path, cwd: Path, repo_root: Path) -> None:
    done = _run(venv / "python", "-c", "import json, sys, grader, jax; print(json.dumps([grader.__file__, sys.path]))",
                cwd=cwd, env=_env())
    assert done.returncode == 0, done.stderr
    where, path = json.loads(done.stdout)
    assert Path(where).is_relative_to(venv.parent), where
    assert not any((cwd / p).resolve() == repo_root for p in path), path  # "" is the cwd


def test_with_no_assignments_anywhere_the_error_says_the_three_ways(venv: Path, cwd: Path) -> None:
    (cwd / "x.py").write_text("x = 1\n")
    for command in (["-a", "ch2-jit", "x.py"], ["validate", "ch2-jit"]):
        done = _run(venv / "grade", *command, cwd=cwd, env=_env())
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("grade: no assignment named 'ch2-jit'"), lines
        assert all(way in lines[0] for way in THREE_WAYS), lines[0]


@pytest.mark.parametrize("way", ["--assignments", "GRADER_ASSIGNMENTS", "./assignments"])
def test_told_where_the_installed_grader_gives_the_reference_full_marks(way: str, venv: Path, cwd: Path,
                                                                         repo_root: Path) -> None:
    folder = repo_root / "assignments"
    args = ["-a", "ch2-jit", "ch2-jit.py", "--json", "-", "--no-sandbox"]
    env = _env()
    if way == "--assignments":
        args += ["--assignments", str(folder)]  # after the paths: it is a global option
    elif way == "GRADER_ASSIGNMENTS":
        env[assignments.ENV] = str(folder)
    else:
        shutil.copytree(folder / "ch2-jit", cwd / "assignments" / "ch2-jit")
    done = _run(venv / "grade", *args, cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert (report["status"], report["score"], report["max_score"]) == ("graded", 100.0, 100.0)


# ----------------------------------------------------------------------------- the global option, in-process


@pytest.fixture
def restored_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--assignments` sets $GRADER_ASSIGNMENTS for the workers; put it back after the test."""
    monkeypatch.delenv(assignments.ENV, raising=False)


@pytest.mark.usefixtures("restored_env")
@pytest.mark.parametrize("argv", [
    ["--assignments", "{dir}", "validate", "ch2-jit"],
    ["validate", "ch2-jit", "--assignments={dir}"],
    ["submit.py", "--assignments", "{dir}", "-a", "ch2-jit"],
])
def test_assignments_is_taken_wherever_it_stands(argv: list[str], repo_root: Path) -> None:
    folder = repo_root / "assignments"
    rest = _take_assignments([a.format(dir=folder) for a in argv])
    assert "--assignments" not in " ".join(rest) and len(rest) == len(argv) - (1 if "=" in " ".join(argv) else 2)
    assert os.environ[assignments.ENV] == str(folder.resolve())
    assert assignments.assignments_dir() == folder.resolve()


@pytest.mark.usefixtures("restored_env")
def test_assignments_after_a_double_dash_is_a_path_and_a_wrong_folder_is_one_sentence(tmp_path: Path) -> None:
    assert _take_assignments(["--", "--assignments", "x"]) == ["--", "--assignments", "x"]
    assert assignments.ENV not in os.environ
    for argv, words in ((["--assignments"], "needs a folder"),
                        (["--assignments", str(tmp_path)], "is not a folder of assignments")):
        with pytest.raises(UsageError, match=words):
            _take_assignments(argv)
