"""The student packs (`grade pack`): one wheel per assignment, the self-check without the answer
key, installed side by side into a fresh venv that cannot see this repository, where each judges
its notebooks' visible checks and the shared `grade` runs the notebook's pack."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import sysconfig
import zipfile
from pathlib import Path

import numpy as np
import pytest
import terminal_ctrl_c

from grader import assignment as assignments
from grader.cases import materialize
from grader.course.pack import build_pack, rewrite_imports
from grader.submission import read_submission, selfcheck_not_installed


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pack")
    build_pack("ch2-jit", out)
    return out


@pytest.fixture(scope="module")
def practice_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The course's other assignment's pack, to install beside ch2-jit's."""
    out = tmp_path_factory.mktemp("practice")
    build_pack("ch2-practice", out)
    return out


@pytest.fixture(scope="module")
def scan_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The third assignment's pack (written from the docs alone), to install beside the other two."""
    out = tmp_path_factory.mktemp("scan")
    build_pack("ch2-scan", out)
    return out


STUDENT_UNSET = ("PYTHONPATH", "GRADER_ASSIGNMENTS", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE")
"""What a student's environment does not have of this test run's: the repository's paths, and the
bytecode switch (the venv's packages are installed with --no-compile, so with it set every process
there would compile JAX and IPython from source again, 3-5 s each, where a student's pip compiles once)."""


def _fresh_venv(where: Path) -> tuple[Path, dict[str, str]]:
    """A fresh venv, outside this repository, with nothing installed; and the environment to run
    it in (none of this checkout's). Without a pip of its own: venv's ensurepip installs and
    byte-compiles one (2 CPU s), where `_pip` runs this test's pip, already compiled, in the venv."""
    venv = where / "student"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv, {k: v for k, v in os.environ.items() if k not in STUDENT_UNSET}


def _pip(venv: Path, env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """pip in the venv's Python: this test's pip, run there as `pip --python` runs it (its
    __pip-runner__.py, which imports only pip from this test's site-packages), so it installs into
    the venv's site-packages and resolves against what is installed there, as the venv's own pip
    would; without `pip --python`'s first Python, which only starts this one."""
    import pip

    runner = Path(pip.__file__).parent / "__pip-runner__.py"
    return subprocess.run([str(venv / "bin" / "python"), str(runner), *args], capture_output=True, text=True,
                          env=env, check=check)


def _pip_install(venv: Path, env: dict[str, str], *what: str) -> None:
    # --no-compile: pip's byte-compiling of every installed file (JAX's, IPython's) is more than
    # half the install's CPU (43 s -> 20 s here); what the checks import compiles as it is imported.
    done = _pip(venv, env, "install", "--quiet", "--no-compile", *what, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def _files(pack: Path) -> dict[str, str]:
    (wheel,) = pack.glob("jax_course_*-*-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as archive:
        return {n: archive.read(n).decode("utf-8", "replace") for n in archive.namelist()}


def test_the_pack_holds_the_public_part_only(pack: Path, repo_root: Path) -> None:
    files = _files(pack)
    assert sorted(p.name for p in pack.iterdir()) == ["STUDENTS.md", "ch2-jit.ipynb",
                                                       next(p.name for p in pack.glob("*.whl"))]
    assert (pack / "STUDENTS.md").read_text().count("jax_course_ch2_jit-0.1.0+") >= 5  # the install lines
    folder = "jax_course_ch2_jit/_assignments/ch2-jit/"
    packed = ("assignment.json", "expected.json", "references.py", "checks.py")
    assert {folder + f for f in packed} <= set(files)
    # everything under the pack's own package: no `grader/` to shadow the instructor's, or another pack's
    info = next(n for n in files if ".dist-info/" in n).split("/")[0]
    assert {n.split("/")[0] for n in files} == {"jax_course_ch2_jit", info}
    for name, text in files.items():
        if name.endswith(".py"):  # every import of the grader renamed (the inside/ folders import none)
            imports = [n for n in ast.walk(ast.parse(text)) if isinstance(n, (ast.Import, ast.ImportFrom))]
            named = [getattr(n, "module", None) or "" for n in imports]
            named += [a.name for n in imports for a in n.names]
            assert not [m for m in named if m == "grader" or m.startswith("grader.")], name
    # no reference code, no generator, no custom-check code (the detective's truth is measured there)
    everything = "\n".join(files.values())
    assert "EDGES" not in everything and "def tax_scalars" not in everything
    assert "def newton_inputs" not in everything
    assert "detective_truth" not in everything and "def detective_call" not in everything
    reference = (repo_root / "solutions" / "ch2-jit.py").read_text()
    answer = next(line for line in reference.splitlines() if line.startswith("predictions = "))
    assert answer.split("= ", 1)[1] not in everything  # the detective's answers
    spec = json.loads(files[folder + "assignment.json"])
    for exercise in spec["exercises"]:
        for check in exercise["checks"]:
            if check.get("hidden") or check["kind"] == "custom":
                assert check["reveal"] == "on_hand_in", check["id"]
            assert "generator" not in (check.get("cases") or {}) or check["reveal"] == "on_hand_in"
    metadata = files[next(n for n in files if n.endswith("dist-info/METADATA"))]
    assert "Name: jax-course-ch2-jit\n" in metadata and "Requires-Dist: jax>=0.6.2" in metadata
    assert "jax==" not in metadata  # the student's JAX stays


DEFERRED_NEEDS = ("kind", "id", "title", "points", "verifies", "message", "hint", "hidden")
"""What the self-check reports of a check it leaves to the hand-in ("checked when you hand in"): its
title, points, requirements, and the words of its failure. It judges none of them, so it needs none
of their inputs, generators' parameters, references, tolerances or answers."""


def _leaves(value: object, path: tuple = ()) -> list[tuple[tuple, object]]:
    """Every value a JSON tree holds, with the path to it."""
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in _leaves(item, (*path, key))]
    if isinstance(value, list):
        return [leaf for i, item in enumerate(value) for leaf in _leaves(item, (*path, i))]
    return [(path, value)]


@pytest.mark.parametrize("assignment", ["ch2-jit", "ch2-practice", "ch2-scan"])
def test_the_wheel_holds_nothing_of_a_hidden_check_but_what_the_self_check_needs(
        request: pytest.FixtureRequest, assignment: str, repo_root: Path) -> None:
    """Every value the wheel holds for each check the self-check does not judge (hidden, custom, a
    prediction, a quiz answer), listed against what the self-check needs: the check's own words from
    the instructor's spec, the student's function or variable it calls (a name the notebook handed
    out shows), "on_hand_in" where the spec's model needs a field, and nothing else; and none of
    what those checks judge with (generators, their parameters, checks.py's functions) is in any
    file of the wheel."""
    import tomllib

    from grader.judging.reveal import judged_now

    folder = request.getfixturevalue({"ch2-jit": "pack", "ch2-practice": "practice_pack",
                                      "ch2-scan": "scan_pack"}[assignment])
    files = _files(folder)
    package = "jax_course_" + assignment.replace("-", "_")
    packed = json.loads(files[f"{package}/_assignments/{assignment}/assignment.json"])
    loaded = assignments.load(assignment)
    raw = tomllib.loads((loaded.folder / "assignment.toml").read_text(encoding="utf-8"))
    template = (repo_root / "student_template" / f"{assignment}.ipynb").read_text(encoding="utf-8")
    everything = "\n".join(files.values())
    deferred = 0
    for exercise, raw_exercise, packed_exercise in zip(loaded.spec.exercises, raw["exercises"],
                                                       packed["exercises"]):
        for spec, instructor, held in zip(exercise.checks, raw_exercise["checks"], packed_exercise["checks"]):
            if judged_now(spec, "self_check"):
                continue
            deferred += 1
            where = f"{exercise.id}.{spec.id}"
            for path, value in _leaves(held):
                field = path[0]
                if field in DEFERRED_NEEDS:
                    said = instructor.get(field, spec.kind if field == "kind" else None)
                    assert said == held[field], (where, path)
                elif field == "reveal":
                    assert value == "on_hand_in", (where, path)
                elif field in ("function", "name") and value != "on_hand_in":
                    assert path == (field,) and value == instructor[field], (where, path, value)
                    assert f"{value}" in template, (where, value)  # the notebook's own name
                else:
                    assert value == "on_hand_in", (where, path, value)
            # what the check judges with is in no file of the wheel
            for holder in (instructor.get("cases"), (instructor.get("returns") or {}).get("cases")):
                if holder and holder.get("generator"):
                    generator = holder["generator"]
                    assert not re.search(rf"\b{generator}\b", everything), (where, generator)
            if spec.kind == "custom":
                function = instructor["function"]
                assert not re.search(rf"\b{function}\b", everything), (where, function)
    assert deferred >= 4  # ch2-scan has 4 hidden checks; ch2-jit 17; ch2-practice 16


def test_no_expected_value_of_a_hidden_input_is_in_the_pack(pack: Path) -> None:
    loaded = assignments.load("ch2-jit")
    table = json.loads(_files(pack)["jax_course_ch2_jit/_assignments/ch2-jit/expected.json"])
    numbers: set[float] = set()

    def collect(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                collect(json.loads(key) if key.startswith("[") else None)
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            numbers.add(float(node))

    collect(table)
    spec = next(c for e in loaded.spec.exercises for c in e.checks if c.id == "switch_hidden")
    for seed in (0, 1, 2):  # whatever seed a grading would use
        hidden = materialize(spec.cases, loaded.references, seed, "tax.switch_hidden")
        for case in hidden:
            tax = float(np.asarray(loaded.references.tax(*case.args)))
            income = float(np.asarray(case.args[0]))
            if min(abs(income - edge) for edge in (10_000, 40_000, 100_000)) <= 1 or \
                    any(np.isclose(income, np.float32(edge * (1 + k))) for edge in (10_000, 40_000, 100_000)
                        for k in (-1e-2, -1e-3, -1e-4, 1e-4, 1e-3, 1e-2)):
                continue  # on and around the brackets' edges (the notebook's), not drawn: their taxes are round
            assert income not in numbers
            if tax > 0:  # below 10,000 every tax is 0, hidden or not
                assert tax not in numbers and float(np.float32(tax)) not in numbers


@pytest.mark.kernel
def test_the_packs_in_a_fresh_venv_self_check_modules_and_the_notebooks_own_cells_side_by_side(
        pack: Path, practice_pack: Path, repo_root: Path, tmp_path: Path) -> None:
    """One venv for every way a student runs the self-check (an install costs 40-50 s): the
    template's cells before the wheel is installed; then ch2-jit's pack and ch2-practice's beside
    it, and with both: the self-check of a module, the notebooks' own cells in a Jupyter kernel,
    and `grade` on each assignment's notebooks; a notebook whose pack is missing; and one pack
    uninstalled, the other's `python -m`."""
    venv, env = _fresh_venv(tmp_path)
    _pip_install(venv, env, "ipykernel")
    _without_the_wheel_each_self_check_cell_says_how_to_install_it(venv, repo_root, tmp_path)
    (wheel,) = pack.glob("*.whl")
    _pip_install(venv, env, str(wheel))
    (practice,) = practice_pack.glob("*.whl")
    _pip_install(venv, env, str(practice))  # a second pack: installed beside the first, which keeps working
    listed = _pip(venv, env, "list").stdout
    assert f"jax-course-ch2-jit {wheel.name.split('-')[1]}" in " ".join(listed.split())
    assert f"jax-course-ch2-practice {practice.name.split('-')[1]}" in " ".join(listed.split())
    _self_checks_a_module(venv, env, repo_root, tmp_path)
    in_cells = _runs_the_notebook_s_self_check_cells_in_a_jupyter_kernel(venv, repo_root, tmp_path)
    graded = _grade_gives_the_reference_every_visible_check(venv, env, repo_root, tmp_path)
    assert in_cells == _checked_here(graded)  # the same checks, told the same way
    practice_in_cells = _runs_the_notebook_s_self_check_cells_in_a_jupyter_kernel(
        venv, repo_root, tmp_path, "ch2-practice")
    practice_graded = _grade_gives_the_reference_every_visible_check(venv, env, repo_root, tmp_path,
                                                                     "ch2-practice")
    assert practice_in_cells == _checked_here(practice_graded)
    _grade_fails_a_wrong_notebook_where_the_instructor_s_grade_does(venv, env, repo_root, tmp_path)
    _a_notebook_whose_pack_is_missing_gets_one_sentence(venv, env, tmp_path)
    _uninstalled_one_pack_leaves_the_other_s_python_m(venv, env, tmp_path)


def _self_checks_a_module(venv: Path, env: dict[str, str], repo_root: Path, tmp_path: Path) -> None:
    python = venv / "bin" / "python"
    script = tmp_path / "selfcheck.py"
    # as without ipykernel: the module path must not need what the venv holds for the notebook
    script.write_text(
        "import runpy, sys\n"
        "sys.modules.update(dict.fromkeys(('IPython', 'ipykernel', 'jupyter_client', 'zmq', 'tornado')))\n"
        "import jax_course_ch2_jit\n"
        "assert 'site-packages' in jax_course_ch2_jit.__file__, jax_course_ch2_jit.__file__\n"
        "from jax_course_ch2_jit import check\n"
        "ns = runpy.run_path(sys.argv[1])\n"
        "def check_all():\n"
        "    for exercise in ('tax', 'newton', 'detective', 'training'):\n"
        "        check(exercise, 'ch2-jit', namespace=ns, seed=1)\n"
        "check_all()\n"
        "import json, os\n"
        "packed = {m for m in sys.modules if m.split('.')[0] in ('grader', 'jax_course_ch2_jit')}\n"
        "open(os.environ['LOADED'], 'w').write(json.dumps(sorted(packed)))\n"
        "print('=' * 20, 'REDEFINED', flush=True)\n"
        "exec(sys.argv[2], ns)\n"
        "check_all()\n")
    reference = str(repo_root / "solutions" / "ch2-jit.py")
    # one Python for both runs (each costs a JAX import and a child's start): the reference's
    # self-check, then, as a student redefines a function in the notebook and checks again, a
    # wrong tax_vectorized in the same namespace
    run = subprocess.run([str(python), str(script), reference,
                          "tax_vectorized = jax.jit(lambda income: income * 0.1)"], capture_output=True,
                         text=True, cwd=tmp_path, env={**env, "LOADED": str(tmp_path / "loaded.json")})
    assert run.returncode == 0, run.stderr[-3000:]
    right, wrong = run.stdout.split("=" * 20 + " REDEFINED\n")
    # the self-check loads only what the pack holds: the judging core, the checks, the models, the
    # wings' inside/ (no kernel client, sandbox, batch or class tool is in it, or needed), and
    # nothing of a `grader` package (there is none in this venv: nothing looks one up by name)
    loaded = json.loads((tmp_path / "loaded.json").read_text())
    assert {"jax_course_ch2_jit.judging.verdicts", "jax_course_ch2_jit.verifier.protocol"} <= set(loaded)
    assert not [m for m in loaded if m.split(".")[0] == "grader"], loaded
    assert not [m for m in loaded if m.startswith(tuple(f"jax_course_ch2_jit.{m}" for m in (
        "sandbox", "batch", "kernel.client", "kernel.session", "verifier.client", "pipeline", "outputs",
        "course")))], loaded
    assert "✗" not in right and "!" not in right.replace("⏳", ""), right
    assert right.count("⏳") == 4 and "8 checked when you hand in (20 pts)" in right  # the detective
    assert "✗ " in wrong and "expected 0.0" in wrong
    assert "✗ newton" not in wrong and "! newton" not in wrong  # only the broken function's checks fail


PRACTICE = ("sum_first", "conditional_double", "bucketing", "update_weights", "quiz")


def _execute_in_the_student_s_kernel(notebook: object, venv: Path, tmp_path: Path) -> None:
    """Run a notebook top to bottom in an ipykernel on the student's venv (what Jupyter,
    JupyterLab, VS Code and Colab run), in an environment without this repository."""
    from nbclient import NotebookClient

    spec_dir = tmp_path / "jupyter" / "kernels" / "student"
    if not spec_dir.is_dir():
        spec_dir.mkdir(parents=True)
        (spec_dir / "kernel.json").write_text(json.dumps({
            "argv": [str(venv / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "student", "language": "python"}))
    # the kernel inherits this process's environment: a student's has neither the instructor's
    # assignments folder nor this repository on its path (another test of this worker may set them)
    kept = {name: os.environ.get(name) for name in ("JUPYTER_PATH", *STUDENT_UNSET)}
    os.environ["JUPYTER_PATH"] = str(tmp_path / "jupyter")
    for name in STUDENT_UNSET:
        os.environ.pop(name, None)
    try:
        NotebookClient(notebook, kernel_name="student", timeout=300,
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        for name, value in kept.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _without_the_wheel_each_self_check_cell_says_how_to_install_it(venv: Path, repo_root: Path,
                                                                   tmp_path: Path) -> None:
    """A kernel whose Python lacks the wheel (a venv with ipykernel only): the template's
    self-check cells print the one sentence that says how to install it, never a traceback."""
    import nbformat

    template = nbformat.read(repo_root / "student_template" / "ch2-jit.ipynb", as_version=4)
    template.cells = [c for c in template.cells if "selfcheck" in c.metadata.get("tags", [])]
    _execute_in_the_student_s_kernel(template, venv, tmp_path)
    assert len(template.cells) == 4
    for cell in template.cells:
        assert [o.output_type for o in cell.outputs] == ["stream"], cell.outputs
        assert "".join(o.text for o in cell.outputs) == selfcheck_not_installed("ch2-jit") + "\n"
    assert "%pip install jax_course_ch2_jit-*.whl" in selfcheck_not_installed("ch2-jit")


def _without_version_note(said: str) -> str:
    """A self-check's output without its first line when that line is the note a student's other
    JAX gets ("note: you have JAX 0.12.1; the course grades with JAX 0.12.0.1 ..."): a fresh venv
    installs the newest JAX the registry has, which is a student's case, not this test's subject."""
    first, _, rest = said.partition("\n")
    return rest if first.startswith("note: you have JAX ") and "the course grades with JAX" in first else said


def _runs_the_notebook_s_self_check_cells_in_a_jupyter_kernel(venv: Path, repo_root: Path, tmp_path: Path,
                                                              assignment: str = "ch2-jit") -> list[str]:
    """The notebook's own self-check cells, in an ipykernel on the student's venv (with the pack,
    not this repository), executing the notebook top to bottom: each exercise's score."""
    import nbformat

    notebook = nbformat.read(repo_root / "solutions" / f"{assignment}.ipynb", as_version=4)
    _execute_in_the_student_s_kernel(notebook, venv, tmp_path)
    shown = [_without_version_note("".join(o.get("text", "") for o in c.outputs)) for c in notebook.cells
             if "selfcheck" in c.metadata.get("tags", [])]
    exercises = len(PRACTICE) if assignment == "ch2-practice" else 4
    assert len(shown) == exercises and all(s.startswith("⏳ ") and "✗" not in s for s in shown), shown
    return [s.splitlines()[0].rsplit(": ", 1)[-1] for s in shown]


# ----------------------------------------------------------------------------- the pack's `grade`

WRONG = ("newton_static_tol", "tax_vectorized_numpy", "training_step_wrong_on_8_points")
"""Hand-written mutants (assignments/ch2-jit/mutants): a compile check; values and structure; two
functions at once."""


def _visible(report: dict) -> dict[str, str]:
    """Status by check id, of the checks the pack judges now (not those left to the hand-in)."""
    return {c["id"]: c["status"] for e in report["exercises"] for c in e["checks"]
            if c.get("reason") != "on_hand_in"}


def _with_mutants(repo_root: Path, target: Path, *mutants: str) -> Path:
    """The reference notebook with each mutant's code appended to its exercise's answer cell."""
    import nbformat

    notebook = nbformat.read(repo_root / "solutions" / "ch2-jit.ipynb", as_version=4)
    cells = notebook.cells
    for mutant in mutants:
        exercise = mutant.split("_", 1)[0]
        code = (repo_root / "assignments" / "ch2-jit" / "mutants" / f"{mutant}.py").read_text(encoding="utf-8")
        answer = next(cells[i - 1] for i, c in enumerate(cells)
                      if "selfcheck" in c.metadata.get("tags", []) and f'check("{exercise}"' in c.source)
        answer.source += "\n\n" + code
    nbformat.write(notebook, target)
    return target


def _pack_grade(venv: Path, env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / "grade"), *args], capture_output=True, text=True, cwd=cwd,
                          env=env)


def _grade_gives_the_reference_every_visible_check(venv: Path, env: dict[str, str], repo_root: Path,
                                                   tmp_path: Path, assignment: str = "ch2-jit") -> dict:
    """`grade` (the script of whichever pack pip installed last) on the assignment's reference
    notebook, under a name that does not tell the assignment: its pack checks it."""
    work = tmp_path / "grade"
    work.mkdir(exist_ok=True)
    shutil.copy(repo_root / "solutions" / f"{assignment}.ipynb", work / f"submit-{assignment}.ipynb")
    done = _pack_grade(venv, env, work, f"submit-{assignment}.ipynb", "--html", f"{assignment}.html")
    assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]
    report = json.loads((work / f"submit-{assignment}.report.json").read_text())
    visible = _visible(report)
    assert len(visible) >= 10 and set(visible.values()) == {"passed"}, visible
    assert report["assignment"] == assignment and report["isolation"]["backend"] == "none"
    assert report["environment"]["grader"].startswith(f"jax-course-{assignment} 0.1.0+")
    later = [c for e in report["exercises"] for c in e["checks"] if c.get("reason") == "on_hand_in"]
    assert later and all(c["status"] == "skipped" for c in later)
    assert "checked when you hand in" in done.stdout and "Total" in done.stdout
    assert (work / f"{assignment}.html").read_text().count("<section") >= 4
    # `python -m jax_course_<id>` is the same command, and without a notebook says how to use it in a sentence
    package = "jax_course_" + assignment.replace("-", "_")
    main = subprocess.run([str(venv / "bin" / "python"), "-m", package], capture_output=True, text=True,
                          cwd=work, env=env)
    assert main.returncode == 2 and main.stderr.startswith("usage: grade") and "Traceback" not in main.stderr
    return report


def _a_notebook_whose_pack_is_missing_gets_one_sentence(venv: Path, env: dict[str, str],
                                                         tmp_path: Path) -> None:
    work = tmp_path / "grade"
    notebook = json.loads((work / "submit-ch2-jit.ipynb").read_text())
    notebook["metadata"]["grader"]["assignment"] = "ch3-vmap"
    (work / "vmap.ipynb").write_text(json.dumps(notebook))
    done = _pack_grade(venv, env, work, "vmap.ipynb")
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr == (
        "grade: vmap.ipynb: this notebook is for ch3-vmap, whose pack (jax-course-ch3-vmap) is not "
        "installed in this Python (installed: jax-course-ch2-jit, jax-course-ch2-practice); ask your "
        "instructor for the pack of ch3-vmap, then install it: pip install jax_course_ch3_vmap-*.whl\n")


def _uninstalled_one_pack_leaves_the_other_s_python_m(venv: Path, env: dict[str, str],
                                                      tmp_path: Path) -> None:
    """Uninstalling a pack removes the `grade` script every pack wrote (pip's record of each names
    it); `python -m` of the other pack still checks its notebooks, and says which pack the
    uninstalled one's notebooks need."""
    python = str(venv / "bin" / "python")
    _pip(venv, env, "uninstall", "--yes", "--quiet", "jax-course-ch2-jit")
    assert not (venv / "bin" / "grade").exists()  # what STUDENTS.md and the docs say
    work = tmp_path / "grade"
    practice = [python, "-m", "jax_course_ch2_practice"]
    done = subprocess.run([*practice, "submit-ch2-practice.ipynb", "--json", "-"], capture_output=True,
                          text=True, cwd=work, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["assignment"] == "ch2-practice"
    other = subprocess.run([*practice, "submit-ch2-jit.ipynb"], capture_output=True, text=True, cwd=work,
                           env=env)
    assert other.returncode == 2 and "Traceback" not in other.stderr
    assert "is for ch2-jit, whose pack (jax-course-ch2-jit) is not installed" in other.stderr, other.stderr
    assert "(installed: jax-course-ch2-practice)" in other.stderr


def _grade_fails_a_wrong_notebook_where_the_instructor_s_grade_does(venv: Path, env: dict[str, str],
                                                                   repo_root: Path, tmp_path: Path) -> None:
    from warm_grading import grade_warm

    from grader import GradeOptions

    work = tmp_path / "grade"
    # the three mutants, each in its own exercise (which is judged on its own), in one notebook:
    # one grading by each grader instead of three
    assert len({m.split("_", 1)[0] for m in WRONG}) == len(WRONG)
    notebook = _with_mutants(repo_root, work / "wrong.ipynb", *WRONG)
    done = _pack_grade(venv, env, work, notebook.name, "--json", "wrong.json")
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((work / "wrong.json").read_text())
    theirs = grade_warm(notebook, GradeOptions(assignment="ch2-jit", seed=5))
    ours = _visible(report)
    instructor = {c.id: c.status for e in theirs.exercises for c in e.checks if c.id in ours}
    assert sorted(i for i, s in ours.items() if s != "passed") == sorted(
        i for i, s in instructor.items() if s != "passed")
    for mutant in WRONG:  # and each mutant fails checks of its exercise, the same in both
        exercise = mutant.split("_", 1)[0]
        ours = _visible({"exercises": [e for e in report["exercises"] if e["id"] == exercise]})
        instructor = {c.id: c.status for e in theirs.exercises if e.id == exercise for c in e.checks
                      if c.id in ours}
        assert sorted(i for i, s in ours.items() if s != "passed") == sorted(
            i for i, s in instructor.items() if s != "passed") != [], mutant


def test_the_pack_s_grade_loads_no_kernel_sandbox_or_class_code() -> None:
    """What the pack holds is what `grade` in it can load: no Jupyter, no sandbox, no batch."""
    code = ("import json, sys\nimport grader.selfgrade.cli, grader.selfgrade.grading, grader.views.page\n"
            "print(json.dumps(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(done.stdout)
    assert "grader.selfgrade.session" in loaded and "grader.judging.verdicts" in loaded
    process = ("grader.sandbox", "grader.kernel.client", "grader.kernel.session", "grader.verifier.client",
               "grader.batch", "grader.pipeline", "grader.outputs", "grader.course", "jupyter_client",
               "nbclient", "ipykernel", "zmq")
    assert [m for m in loaded if m.startswith(process)] == []


def test_the_pack_holds_its_grade_command_and_python_m_of_its_package(pack: Path) -> None:
    files = _files(pack)
    entry_points = files[next(n for n in files if n.endswith("dist-info/entry_points.txt"))]
    assert entry_points == ("[console_scripts]\ngrade = jax_course_ch2_jit.selfgrade.cli:entry\n\n"
                            "[jax_course.packs]\nch2-jit = jax_course_ch2_jit\n")
    assert "from jax_course_ch2_jit.selfgrade.cli import entry" in files["jax_course_ch2_jit/__main__.py"]
    assert "ASSIGNMENT = 'ch2-jit'" in files["jax_course_ch2_jit/__init__.py"]
    assert {"jax_course_ch2_jit/selfgrade/cli.py", "jax_course_ch2_jit/selfgrade/packs.py",
            "jax_course_ch2_jit/selfgrade/inside/cells.py", "jax_course_ch2_jit/views/page.py"} <= set(files)
    record = files[next(n for n in files if n.endswith("dist-info/RECORD"))]
    assert "entry_points.txt,sha256=" in record and "jax_course_ch2_jit/__main__.py,sha256=" in record
    students = (pack / "STUDENTS.md").read_text()
    (wheel,) = pack.glob("*.whl")
    for case in ("python3 -m venv .venv", "externally-managed-environment", "Files pane", "conda activate",
                 f"%pip install {wheel.name}", f".venv/bin/pip install {wheel.name} jupyter",
                 "grade ch2-jit.ipynb", "python -m jax_course_ch2_jit ch2-jit.ipynb", "jax-course-ch2-jit"):
        assert case in students, case


def test_the_imports_of_the_grader_are_renamed_and_nothing_else() -> None:
    source = ('"""from grader import x: a docstring keeps its words."""\n'
              "from __future__ import annotations\n"
              "import json, grader.values as values\n"
              "from grader.kernel.protocol import (\n    Value,\n    measure,\n)\n"
              "from grader import assignment as assignments\n"
              "from somewhere import grader\n"
              "if TYPE_CHECKING:\n    from grader.report import Report\n"
              "def f():\n    from grader.values import to_wire; import grader.atomic as atomic\n"
              "    raise ValueError('grader.values') from None\n")
    renamed = rewrite_imports(source, "jax_course_ch2_jit")
    assert renamed == ('"""from grader import x: a docstring keeps its words."""\n'
                       "from __future__ import annotations\n"
                       "import json, jax_course_ch2_jit.values as values\n"
                       "from jax_course_ch2_jit.kernel.protocol import (\n    Value,\n    measure,\n)\n"
                       "from jax_course_ch2_jit import assignment as assignments\n"
                       "from somewhere import grader\n"
                       "if TYPE_CHECKING:\n    from jax_course_ch2_jit.report import Report\n"
                       "def f():\n    from jax_course_ch2_jit.values import to_wire; "
                       "import jax_course_ch2_jit.atomic as atomic\n"
                       "    raise ValueError('grader.values') from None\n")
    assert "from somewhere import grader\n" in renamed and "'grader.values'" in renamed
    with pytest.raises(Exception, match="without `as` cannot be packed"):
        rewrite_imports("import grader.values\n", "jax_course_ch2_jit")


LEGACY_GUARD = ("try:\n    from grader.selfcheck import check\nexcept ModuleNotFoundError:\n"
                "    check = lambda *args: print(\"⚠️ The course's self-check is not installed for this "
                "notebook: put the wheel from your handout beside the notebook (in Colab, upload it with the "
                "Files pane), run %pip install jax_course_selfcheck-*.whl in a cell, then run this cell "
                "again.\")\n")
"""The self-check cells of the notebooks handed out with the single `jax-course-selfcheck` pack."""


@pytest.mark.parametrize("guard", ["new", "legacy"])
def test_the_instructor_s_grade_leaves_out_the_template_s_guard_old_or_new(tmp_path: Path, repo_root: Path,
                                                                          guard: str) -> None:
    """What the instructor's `grade` runs of a notebook: the same code, whether its self-check cells
    import the assignment's own pack or, handed out before, `grader.selfcheck`."""
    notebook = json.loads((repo_root / "solutions" / "ch2-jit.ipynb").read_text(encoding="utf-8"))
    if guard == "legacy":
        for cell in notebook["cells"]:
            if "selfcheck" in cell["metadata"].get("tags", []):
                source = "".join(cell["source"])
                assert source.startswith("try:\n    from jax_course_ch2_jit import check\n")
                cell["source"] = LEGACY_GUARD + source.split("\n", 4)[4]
    (tmp_path / "submit.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    cells = read_submission(tmp_path / "submit.ipynb").cells
    reference = read_submission(repo_root / "solutions" / "ch2-jit.ipynb").cells
    assert [c.source for c in cells] == [c.source for c in reference] and not any(c.notice for c in cells)
    assert not any("check" in c.source and "import" in c.source and "selfcheck" in c.source for c in cells)


def _launcher_venv(where: Path, *wheels: Path) -> tuple[Path, dict[str, str]]:
    """A venv without pip that sees this test's Python's packages (JAX, NumPy, pydantic) through a
    .pth line but not the instructor's `grader` (the editable install's finder is not run), and the
    wheels installed into it, in this order, without their dependencies: seconds instead of a
    minute's install."""
    venv = where / "launcher"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "course-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in STUDENT_UNSET}
    for wheel in wheels:  # one at a time, as students get them
        pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps"]
        done = subprocess.run([*pip, "--no-compile", str(wheel)], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
    return venv, env


@pytest.mark.kernel
def test_grade_runs_the_notebook_s_pack_whichever_pack_installed_it_last(
        pack: Path, practice_pack: Path, tmp_path: Path) -> None:
    """The other order (ch2-practice's pack, then ch2-jit's): the `grade` script is ch2-jit's, and
    checks each notebook with its own assignment's pack; an assignment with no pack here, or
    `-a` naming one, is one sentence (exit 2)."""
    (jit,) = pack.glob("*.whl")
    (practice,) = practice_pack.glob("*.whl")
    venv, env = _launcher_venv(tmp_path, practice, jit)
    python = str(venv / "bin" / "python")
    no_grader = subprocess.run([python, "-c", "import grader"], capture_output=True, cwd=tmp_path, env=env)
    assert no_grader.returncode == 1  # the instructor's is not to be found here
    assert "from jax_course_ch2_jit.selfgrade.cli import entry" in (venv / "bin" / "grade").read_text()
    version = _pack_grade(venv, env, tmp_path, "--version")
    assert version.stdout == (f"grade (the student packs: jax-course-ch2-jit {jit.name.split('-')[1]}, "
                              f"jax-course-ch2-practice {practice.name.split('-')[1]})\n"), version

    def notebook(name: str, claim: str | None, code: str) -> str:
        cell = {"cell_type": "code", "metadata": {}, "source": code, "outputs": [], "execution_count": None}
        metadata = {} if claim is None else {"grader": {"assignment": claim}}
        (tmp_path / name).write_text(json.dumps({"cells": [cell], "metadata": metadata, "nbformat": 4,
                                                 "nbformat_minor": 5}))
        return name

    practice_nb = notebook("mine.ipynb", "ch2-practice", "import jax.numpy as jnp\nsum_first = 1\n")
    done = _pack_grade(venv, env, tmp_path, practice_nb, "--json", "-")
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["assignment"] == "ch2-practice"
    assert report["environment"]["grader"] == f"jax-course-ch2-practice {practice.name.split('-')[1]}"
    unnamed = notebook("ch2-jit.ipynb", None, "x = 1\n")  # no claim: the file's name
    named = json.loads(_pack_grade(venv, env, tmp_path, unnamed, "--json", "-").stdout)
    assert named["assignment"] == "ch2-jit"
    assert named["environment"]["grader"].startswith("jax-course-ch2-jit ")
    said = {
        notebook("vmap.ipynb", "ch3-vmap", "x = 1\n"): "vmap.ipynb: this notebook is for ch3-vmap, whose "
        "pack (jax-course-ch3-vmap) is not installed in this Python (installed: jax-course-ch2-jit, "
        "jax-course-ch2-practice); ask your instructor for the pack of ch3-vmap, then install it: "
        "pip install jax_course_ch3_vmap-*.whl",
        notebook("away.ipynb", "../x", "x = 1\n"): "away.ipynb: this notebook says it is for '../x', which "
        "is not an assignment of the course's packs (installed: jax-course-ch2-jit, jax-course-ch2-practice)",
        notebook("some.ipynb", None, "x = 1\n"): "cannot tell which assignment some.ipynb is for; pass -a "
        "(ch2-jit, ch2-practice)",
    }
    for name, sentence in said.items():
        done = _pack_grade(venv, env, tmp_path, name)
        assert (done.returncode, done.stdout, done.stderr) == (2, "", f"grade: {sentence}\n"), done.stderr
    asked = _pack_grade(venv, env, tmp_path, "-a", "ch3-vmap", "some.ipynb")
    assert asked.returncode == 2, asked
    assert asked.stderr.startswith("grade: -a ch3-vmap: the pack of ch3-vmap (jax-course-ch3-vmap) "), asked
    crossed = _pack_grade(venv, env, tmp_path, "-a", "ch2-jit", practice_nb)
    assert crossed.returncode == 2 and crossed.stderr == (
        "grade: mine.ipynb: this notebook says it is for ch2-practice, but -a asks for ch2-jit\n"), crossed
    # the self-check asked through another pack (a cell copied between notebooks): that pack's, if
    # installed, else the sentence naming the pack to install; never a `grader` module loaded
    code = ("import sys, jax_course_ch2_jit as jit\n"
            "jit.check('sum_first', 'ch2-practice', namespace={}, seed=1)\n"
            "jit.check('tax', 'ch3-vmap', namespace={})\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'grader'))\n")
    run = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert run.returncode == 0 and run.stderr == "", run.stderr[-3000:]
    practice_said, missing = run.stdout.split("⚠️ ")
    assert practice_said.startswith("❌ Exercise 1: ") and "define sum_first" in practice_said, run.stdout
    assert "⚠️ " + missing == (
        "⚠️ The pack of ch3-vmap (jax-course-ch3-vmap) is not installed in this Python (installed: "
        "jax-course-ch2-jit, jax-course-ch2-practice); ask your instructor for the pack of ch3-vmap, then "
        "install it: %pip install jax_course_ch3_vmap-*.whl\n[]\n"), run.stdout


@pytest.mark.kernel
def test_the_course_s_three_packs_install_side_by_side_and_each_checks_its_own_notebook(
        pack: Path, practice_pack: Path, scan_pack: Path, tmp_path: Path, repo_root: Path) -> None:
    """ch2-scan's pack, then ch2-practice's, then ch2-jit's, into one Python: each reference notebook
    is checked by its own pack, every visible check passing, with no `grader` module to be found."""
    wheels = [next(folder.glob("*.whl")) for folder in (scan_pack, practice_pack, pack)]
    venv, env = _launcher_venv(tmp_path, *wheels)
    version = _pack_grade(venv, env, tmp_path, "--version")
    assert all(f"jax-course-{a} " in version.stdout for a in ("ch2-jit", "ch2-practice", "ch2-scan")), version
    for assignment in ("ch2-scan", "ch2-practice", "ch2-jit"):
        shutil.copy(repo_root / "solutions" / f"{assignment}.ipynb", tmp_path / f"mine-{assignment}.ipynb")
        done = _pack_grade(venv, env, tmp_path, f"mine-{assignment}.ipynb", "--json", "-")
        assert done.returncode == 0, done.stderr[-3000:]
        report = json.loads(done.stdout)
        assert report["assignment"] == assignment
        assert report["environment"]["grader"].startswith(f"jax-course-{assignment} ")
        judged = [c for e in report["exercises"] for c in e["checks"] if c.get("reason") != "on_hand_in"]
        assert judged and all(c["status"] == "passed" for c in judged), [c["id"] for c in judged
                                                                         if c["status"] != "passed"]


def _checked_here(report: dict) -> list[str]:
    """Each exercise's points as the self-check tells them ("17 of the 17 points checked here")."""
    from grader.views.terminal import scored
    from grader.report import Report

    return [scored(e.score, e.max_score, e.checks) for e in Report.model_validate(report).exercises]


def _selfgrade(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The pack's `grade`, run from this checkout (it grades with the instructor's assignment
    folder here, at the self-check stage)."""
    return subprocess.run([sys.executable, "-m", "grader.selfgrade", *args], capture_output=True, text=True,
                          cwd=cwd)


@pytest.mark.parametrize(("args", "said"), [
    ((), "usage: grade"),
    (("pack", "ch2-jit"), "`grade pack` is the instructor's command"),
    (("missing.ipynb",), "missing.ipynb: no such file"),
    (("a.ipynb", "b.ipynb"), "one notebook at a time"),
    (("--timeout", "0", "x.ipynb"), "--timeout must be a positive number"),
])
def test_the_pack_s_grade_says_bad_usage_in_a_sentence_and_exits_2(tmp_path: Path, args: tuple[str, ...],
                                                                    said: str) -> None:
    done = _selfgrade(*args, cwd=tmp_path)
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.stdout == ""


@pytest.mark.kernel
def test_the_pack_s_grade_prints_the_instructor_s_view_and_json_and_exits_as_it(tmp_path: Path,
                                                                                 repo_root: Path) -> None:
    shutil.copy(repo_root / "solutions" / "ch2-jit.ipynb", tmp_path / "submit.ipynb")
    only_json = _selfgrade("submit.ipynb", "--json", "-", cwd=tmp_path)
    assert only_json.returncode == 0, only_json.stderr
    report = json.loads(only_json.stdout)  # nothing but the report on stdout
    assert report["assignment"] == "ch2-jit" and set(_visible(report).values()) == {"passed"}
    assert 0 < report["score"] < report["max_score"]  # what is left to the hand-in scores nothing yet
    below = _selfgrade("submit.ipynb", "--fail-under", "100", cwd=tmp_path)
    assert below.returncode == 1, below.stderr
    assert below.stdout.startswith("ch2-jit · submit.ipynb\n")
    assert "report: submit.report.json" in below.stdout
    assert "points are checked when you hand in" in below.stdout


@pytest.mark.kernel
def test_the_pack_s_grade_names_a_failing_cell_as_the_instructor_s_grade_does(
        submission_from_reference) -> None:
    """A cell that raises and one that kills Python: the same cell, line and error as `grade`,
    and every other exercise still checked."""
    from warm_grading import grade_warm

    from grader import GradeOptions

    notebook = submission_from_reference("setup", "tax", "kills_kernel_os_exit.py", "newton", "detective",
                                         "training", suffix=".ipynb")
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    nb.cells[1].source += "\n\nx = 1\nraise ValueError('no tax today')\n"  # the tax cell, at its end
    nbformat.write(nb, notebook)
    done = _selfgrade(notebook.name, "--json", "ours.json", cwd=notebook.parent)
    assert done.returncode == 0, done.stderr
    ours = json.loads((notebook.parent / "ours.json").read_text())
    theirs = grade_warm(notebook, GradeOptions(assignment="ch2-jit", seed=5))

    def problems(items: list) -> list[tuple]:
        return [(p["cell"], p["where"], p["status"], p["line"], p["ename"]) for p in items]

    assert problems(ours["cell_problems"]) == problems([p.model_dump() for p in theirs.cell_problems])
    raised, died = ours["cell_problems"]
    last_line = len(nb.cells[1].source.rstrip("\n").splitlines())
    assert (raised["where"], raised["line"], raised["ename"]) == ("cell 2", last_line, "ValueError")
    assert (died["where"], died["status"]) == ("cell 3", "died")
    newton = _visible({"exercises": [e for e in ours["exercises"] if e["id"] == "newton"]})
    assert newton and set(newton.values()) == {"passed"}  # the cells after the dead one still ran


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    children.setdefault(int(f.read().rsplit(b")", 1)[1].split()[1]), []).append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _running(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] != b"Z":
                    alive.append(pid)
        except OSError:
            continue
    return alive


@pytest.mark.kernel
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="counts processes in /proc")
def test_the_pack_s_grade_stops_an_endless_loop_at_the_limit_and_on_ctrl_c(submission_from_reference) -> None:
    """A `lax.while_loop` that never ends, in the notebook's Python and in the exported program:
    the limit stops it (the other exercises still checked), and Ctrl-C stops everything at once."""
    notebook = submission_from_reference("setup", "tax", "newton_never_terminates.py", "detective",
                                         "training", suffix=".ipynb")
    started = time.monotonic()
    done = _selfgrade(notebook.name, "--timeout", "3", "--json", "ours.json", cwd=notebook.parent)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    report = json.loads((notebook.parent / "ours.json").read_text())
    newton = {c["id"]: c["status"] for e in report["exercises"] if e["id"] == "newton" for c in e["checks"]}
    assert newton["newton.visible"] == "timeout" and "timeout" in done.stdout.replace("timed out", "timeout")
    tax = _visible({"exercises": [e for e in report["exercises"] if e["id"] == "tax"]})
    assert set(tax.values()) == {"passed"}
    assert took < 90, took

    # Ctrl-C once the loop runs: the same notebook, whose newton_sqrt writes, as JAX traces it, the
    # pid of the Python tracing it to a file; SIGINT goes when that Python has spent a second of CPU
    # since (compiling the loop takes a fraction of that: the rest is the loop, inside XLA); it is
    # not a fixed wait, which on a loaded machine ends before the loop starts or long after
    import nbformat

    marked = notebook.with_name("marked.ipynb")
    nb = nbformat.read(notebook, as_version=4)
    (cell,) = [c for c in nb.cells if "    def cond_fun(state):" in c.source]
    cell.source = cell.source.replace("    def cond_fun(state):", "    open('tracing', 'a').write("
                                      "f\"{__import__('os').getpid()}\\n\")\n    def cond_fun(state):", 1)
    nbformat.write(nb, marked)
    tracing = marked.parent / "tracing"
    grading = subprocess.Popen([*terminal_ctrl_c.python_module("grader.selfgrade"), marked.name],
                               cwd=marked.parent,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (tracing.exists() and tracing.read_text().endswith("\n")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert tracing.exists(), "newton_sqrt was never traced"
        tracer = int(tracing.read_text().split()[0])
        assert tracer in _descendants(grading.pid)  # the notebook's Python
        spent = terminal_ctrl_c.cpu_seconds(tracer) or 0.0
        while time.monotonic() < deadline:
            now = terminal_ctrl_c.cpu_seconds(tracer)
            if now is None or now - spent >= 1:  # None: stopped at the limit, the exported program's loop runs
                break
            time.sleep(0.1)
        started_children = _descendants(grading.pid)
        assert started_children and grading.poll() is None
        os.killpg(grading.pid, signal.SIGINT)  # what the terminal's Ctrl-C does to the foreground group
        started = time.monotonic()
        out, err = grading.communicate(timeout=30)
    finally:
        if grading.poll() is None:
            os.killpg(grading.pid, signal.SIGKILL)
            grading.wait()
    assert grading.returncode == 130 and time.monotonic() - started < 5, err
    assert "interrupted" in err and "Traceback" not in err
    time.sleep(1)
    assert _running(started_children) == []


def test_a_pack_written_over_a_file_is_one_sentence(tmp_path: Path) -> None:
    """`grade pack ... -o handout/STUDENTS.md` (an existing file; found by an author: a
    FileExistsError traceback) and a folder under a file: one sentence each, exit 2."""
    from grader.errors import UsageError

    taken = tmp_path / "STUDENTS.md"
    taken.write_text("the last handout\n")
    with pytest.raises(UsageError, match="is a file: the pack is a folder"):
        build_pack("ch2-scan", taken)
    with pytest.raises(UsageError, match="cannot make the folder"):
        build_pack("ch2-scan", taken / "handout")
    done = subprocess.run([sys.executable, "-m", "grader", "pack", "ch2-scan", "-o", str(taken)],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "is a file" in done.stderr
    assert taken.read_text() == "the last handout\n"
