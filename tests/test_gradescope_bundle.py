"""The Gradescope autograder bundle (`grade gradescope-bundle`): the zip's layout, and its
run_autograder run as Gradescope runs it, on a folder laid out as /autograder.

setup.sh is only parsed, not run: it installs a Python and the wheels from the network. The
interpreter running these tests stands in for its venv (GRADER_PYTHON), so the grading below is
the bundle's own assignment folder graded by this checkout's grader.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr

from grader.errors import UsageError
from grader.gradescope.bundle import build_bundle, cli_bundle
from grader.gradescope.run import GRADER_FAULT, isolation_note
from grader.report import Isolation

ASSIGNMENT_FILES = ("assignment.toml", "references.py", "checks.py", "notebook.toml")

# --------------------------------------------------------------- Gradescope's results.json, as documented
# gradescope/autograder_samples docs/specs.md ("Output format", "Controlling Test Case Visibility",
# "Test case status", "Output String Formatting"): every documented field, with its type.

Visibility = Literal["hidden", "after_due_date", "after_published", "visible"]
TextFormat = Literal["text", "html", "simple_format", "md", "ansi"]
Number = StrictInt | StrictFloat


class DocumentedTest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    score: Number | None = None
    max_score: Number | None = None
    status: Literal["passed", "failed"] | None = None
    name: StrictStr | None = None
    name_format: TextFormat | None = None
    number: StrictStr | None = None
    output: StrictStr | None = None
    output_format: TextFormat | None = None
    tags: list[StrictStr] | None = None
    visibility: Visibility | None = None
    extra_data: dict | None = None


class LeaderboardEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: StrictStr
    value: Number | StrictStr
    order: Literal["asc", "desc"] | None = None


class DocumentedResults(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    score: Number | None = None
    execution_time: Number | None = Field(default=None, ge=0)
    output: StrictStr | None = None
    output_format: TextFormat | None = None
    test_output_format: TextFormat | None = None
    test_name_format: TextFormat | None = None
    visibility: Visibility | None = None
    stdout_visibility: Visibility | None = None
    extra_data: dict | None = None
    tests: list[DocumentedTest] | None = None
    leaderboard: list[LeaderboardEntry] | None = None


def documented(path: Path) -> DocumentedResults:
    """results.json read as Gradescope would, checked against its documented fields, plus what
    the specification requires across them and what this grader promises (plain text, a score)."""
    results = DocumentedResults.model_validate_json(path.read_text(encoding="utf-8"))
    assert results.score is not None or all(t.score is not None for t in results.tests or [])
    assert results.output_format == "text"  # the top-level default renders HTML, and student text is in it
    assert results.stdout_visibility == "hidden"  # the log is the instructor's
    for test in results.tests or []:
        assert test.name and test.score is not None and test.max_score is not None
        assert 0 <= test.score <= test.max_score and test.visibility in ("visible", "after_published")
    return results


# --------------------------------------------------------------- the bundle, unzipped as Gradescope does


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_bundle("ch2-jit", tmp_path_factory.mktemp("bundle") / "autograder.zip")


def unzip(archive: Path, into: Path) -> None:
    """Extract with each entry's Unix mode, as Info-ZIP's unzip does (zipfile drops modes)."""
    with zipfile.ZipFile(archive) as z:
        for info in z.infolist():
            target = Path(z.extract(info, into))
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                target.chmod(mode)


@pytest.fixture
def autograder(bundle: Path, tmp_path: Path) -> Path:
    """A fresh /autograder: source/ is the unzipped bundle, submission/ is empty."""
    root = tmp_path / "autograder"
    unzip(bundle, root / "source")
    (root / "submission").mkdir()
    return root


def run_autograder(root: Path) -> DocumentedResults:
    env = {**os.environ, "GRADESCOPE_ROOT": str(root), "GRADER_PYTHON": sys.executable}
    done = subprocess.run([str(root / "source" / "run_autograder")], cwd=root, env=env, check=False,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return documented(root / "results" / "results.json")


# --------------------------------------------------------------- the zip


@pytest.mark.kernel
def test_the_zip_holds_gradescope_s_two_scripts_the_wheel_and_the_assignment_only(bundle: Path,
                                                                                  repo_root: Path) -> None:
    with zipfile.ZipFile(bundle) as z:
        infos = {i.filename: i for i in z.infolist()}
        contents = {name: z.read(name) for name in infos}
    (wheel,) = [n for n in infos if n.endswith(".whl")]
    assert wheel.startswith("jax_course_grader-") and "/" not in wheel
    folder = "assignments/ch2-jit/"
    assert set(infos) == {"setup.sh", "run_autograder", "bundle.env", "constraints.txt", wheel,
                          *(folder + f for f in ASSIGNMENT_FILES)}  # no mutants/, no solutions
    for f in ASSIGNMENT_FILES:
        assert contents[folder + f] == (repo_root / "assignments" / "ch2-jit" / f).read_bytes()
    for script in ("run_autograder", "setup.sh"):
        assert (infos[script].external_attr >> 16) & 0o777 == 0o755, script
        assert contents[script].startswith(b"#!/usr/bin/env bash\n")
    assert "jax==0.12.0.1" in contents["constraints.txt"].decode().splitlines()
    with zipfile.ZipFile(bundle) as z, z.open(wheel) as w, zipfile.ZipFile(w) as inner:
        names = inner.namelist()
        meta = inner.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "grader/gradescope/run.py" in names and not any(n.startswith("assignments/") for n in names)
    assert "Requires-Dist: jax==0.12.0.1" in meta


@pytest.mark.kernel
def test_both_scripts_parse_and_bundle_env_names_this_python_and_the_wheel(autograder: Path) -> None:
    source = autograder / "source"
    for script in ("setup.sh", "run_autograder"):
        done = subprocess.run(["bash", "-n", str(source / script)], check=False, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    assert os.access(source / "run_autograder", os.X_OK)
    done = subprocess.run(["bash", "-c", 'source "$1" && echo "$PYTHON_VERSION $GRADER_WHEEL"', "-", "bundle.env"],
                          cwd=source, capture_output=True, text=True, check=True)
    python, wheel = done.stdout.split()
    assert python == f"{sys.version_info.major}.{sys.version_info.minor}" and (source / wheel).is_file()


def test_bad_usage_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not end in .zip"):
        cli_bundle(["ch2-jit", "-o", str(tmp_path / "autograder.tar")])
    with pytest.raises(UsageError, match="no assignment 'nope' here"):
        cli_bundle(["nope", "-o", str(tmp_path / "autograder.zip")])
    with pytest.raises(UsageError, match="required: -o"):
        cli_bundle(["ch2-jit"])
    assert not list(tmp_path.iterdir())


# --------------------------------------------------------------- run_autograder, per submission


@pytest.mark.kernel
def test_the_reference_notebook_gets_full_marks(autograder: Path, repo_root: Path) -> None:
    shutil.copy(repo_root / "solutions" / "ch2-jit.ipynb", autograder / "submission")
    results = run_autograder(autograder)
    tests = results.tests or []
    assert results.score == sum(t.max_score for t in tests) == 100
    assert tests and all(t.status == "passed" and t.score == t.max_score for t in tests)
    assert any(t.visibility == "after_published" for t in tests)  # the hidden inputs' checks
    assert (results.output or "").startswith("ch2-jit: 100 / 100")


@pytest.mark.kernel
def test_one_wrong_function_scores_less_with_its_checks_failed(autograder: Path, submission_from_reference) -> None:
    wrong = submission_from_reference("setup", "tax", "tax_vectorized_one_wrong_rate.py", "newton", "detective",
                                      "training", suffix=".ipynb")
    shutil.copy(wrong, autograder / "submission" / "my work.ipynb")
    results = run_autograder(autograder)
    tests = results.tests or []
    failed = [t for t in tests if t.status == "failed"]
    assert 0 < (results.score or 0) < sum(t.max_score for t in tests) == 100
    assert failed and all((t.name or "").startswith("tax.vectorized") for t in failed)
    assert all(t.score < t.max_score for t in failed) and all(t.output for t in failed)


@pytest.mark.parametrize("files, expected", [
    ([], "has no notebook (.ipynb) or Python module (.py)"),
    (["ch2-jit.ipynb", "scratch/ch2-jit.py"], "has 2 notebooks or modules (ch2-jit.ipynb, scratch/ch2-jit.py)"),
], ids=["none", "two"])
@pytest.mark.kernel
def test_no_submission_or_two_score_zero_with_a_sentence(autograder: Path, files: list[str], expected: str) -> None:
    for name in files:
        (autograder / "submission" / name).parent.mkdir(exist_ok=True)
        (autograder / "submission" / name).write_text("x = 1\n", encoding="utf-8")
    (autograder / "submission" / ".ipynb_checkpoints").mkdir()
    (autograder / "submission" / ".ipynb_checkpoints" / "ch2-jit-checkpoint.ipynb").write_text("{}")
    results = run_autograder(autograder)
    assert results.score == 0 and expected in (results.output or "")
    assert (results.output or "").endswith(".") and "\n" not in (results.output or "")
    tests = results.tests or []
    assert sum(t.max_score for t in tests) == 100 and all(t.score == 0 for t in tests)  # Gradescope sees the points


@pytest.mark.kernel
def test_an_unreadable_notebook_is_the_student_s_error_not_the_grader_s(autograder: Path) -> None:
    (autograder / "submission" / "ch2-jit.ipynb").write_text("{ not json", encoding="utf-8")
    results = run_autograder(autograder)
    assert results.score == 0 and "ch2-jit.ipynb" in (results.output or "")
    assert "not a problem with your work" not in (results.output or "")


@pytest.mark.kernel
def test_a_broken_bundle_is_the_grader_s_fault_and_setup_sh_s_check_says_so(autograder: Path) -> None:
    env = {**os.environ, "GRADESCOPE_ROOT": str(autograder)}
    prepare = [sys.executable, "-m", "grader.gradescope.run", "--prepare"]
    done = subprocess.run(prepare, env=env, check=False, capture_output=True, text=True)
    assert done.returncode == 0 and "ch2-jit is ready to grade" in done.stdout, done.stderr
    assignments = autograder / "source" / "assignments"
    shutil.copytree(assignments / "ch2-jit", assignments / "another")
    assert subprocess.run(prepare, env=env, check=False, capture_output=True).returncode != 0  # the image build stops
    (autograder / "submission" / "ch2-jit.py").write_text("x = 1\n", encoding="utf-8")
    results = run_autograder(autograder)
    assert results.score == 0 and results.output == GRADER_FAULT and not results.tests


def test_each_missing_layer_is_said_with_what_it_costs() -> None:
    assert isolation_note(Isolation(sandboxed=True, layers=["namespaces"], missing={})) is None
    partial = Isolation(sandboxed=False, layers=["user", "rlimits"],
                        missing={"namespaces": "refused", "cgroups": "read-only"})
    note = isolation_note(partial) or ""
    assert "(user, rlimits)" in note
    assert "namespaces: the student's code shares the container's processes" in note
    assert "cgroups: memory and processes are capped per user by rlimits" in note
