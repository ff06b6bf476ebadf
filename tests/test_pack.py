"""The student pack (`grade pack`): a wheel of the self-check without the answer key, installed
into a fresh venv that cannot see this repository, where it judges a notebook's visible checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from grader import assignment as assignments
from grader.cases import materialize
from grader.course.pack import build_pack


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pack")
    build_pack("ch2-jit", out)
    return out


def _student_venv(pack: Path, where: Path) -> tuple[Path, dict[str, str]]:
    """A fresh venv, outside this repository, with the pack and ipykernel installed; and the
    environment to run it in (none of this checkout's)."""
    venv = where / "student"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GRADER_ASSIGNMENTS", "VIRTUAL_ENV")}
    (wheel,) = pack.glob("*.whl")
    # --no-compile: pip's byte-compiling of every installed file (JAX's, IPython's) is more than
    # half the install's CPU (43 s -> 20 s here); what the checks import compiles as it is imported.
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-compile",
                           str(wheel), "ipykernel"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return venv, env


def _files(pack: Path) -> dict[str, str]:
    (wheel,) = pack.glob("jax_course_selfcheck-*-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as archive:
        return {n: archive.read(n).decode("utf-8", "replace") for n in archive.namelist()}


def test_the_pack_holds_the_public_part_only(pack: Path, repo_root: Path) -> None:
    files = _files(pack)
    assert sorted(p.name for p in pack.iterdir()) == ["STUDENTS.md", "ch2-jit.ipynb",
                                                       next(p.name for p in pack.glob("*.whl"))]
    folder = "grader/_assignments/ch2-jit/"
    assert {folder + f for f in ("assignment.json", "expected.json", "references.py", "checks.py")} <= set(files)
    assert not any(n.startswith(("assignments/", "solutions/")) for n in files)
    # no reference code, no generator, no custom-check code (the detective's truth is measured there)
    everything = "\n".join(files.values())
    assert "EDGES" not in everything and "def tax_scalars" not in everything and "def newton_inputs" not in everything
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
    assert "Name: jax-course-selfcheck" in metadata and "Requires-Dist: jax>=0.6.2" in metadata
    assert "jax==" not in metadata  # the student's JAX stays


def test_no_expected_value_of_a_hidden_input_is_in_the_pack(pack: Path) -> None:
    loaded = assignments.load("ch2-jit")
    table = json.loads(_files(pack)["grader/_assignments/ch2-jit/expected.json"])
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
            if min(abs(income - edge) for edge in (10_000, 40_000, 100_000)) <= 1:
                continue  # on and around the brackets' edges, as the notebook's own incomes are
            assert income not in numbers
            if tax > 0:  # below 10,000 every tax is 0, hidden or not
                assert tax not in numbers and float(np.float32(tax)) not in numbers


@pytest.mark.kernel
def test_the_pack_in_a_fresh_venv_self_checks_a_module_and_the_notebook_s_own_cells(pack: Path, repo_root: Path,
                                                                                   tmp_path: Path) -> None:
    """One venv for both ways a student runs the self-check (an install costs 40-50 s)."""
    venv, env = _student_venv(pack, tmp_path)
    _self_checks_a_module(venv, env, repo_root, tmp_path)
    _runs_the_notebook_s_self_check_cells_in_a_jupyter_kernel(venv, repo_root, tmp_path)


def _self_checks_a_module(venv: Path, env: dict[str, str], repo_root: Path, tmp_path: Path) -> None:
    python = venv / "bin" / "python"
    script = tmp_path / "selfcheck.py"
    script.write_text(  # as without ipykernel: the module path must not need what the venv holds for the notebook
        "import runpy, sys\n"
        "sys.modules.update(dict.fromkeys(('IPython', 'ipykernel', 'jupyter_client', 'zmq', 'tornado')))\n"
        "import grader\n"
        "assert 'site-packages' in grader.__file__, grader.__file__\n"
        "from grader.selfcheck import check\n"
        "ns = runpy.run_path(sys.argv[1])\n"
        "if len(sys.argv) > 2:\n"
        "    exec(sys.argv[2], ns)\n"
        "for exercise in ('tax', 'newton', 'detective', 'training'):\n"
        "    check(exercise, 'ch2-jit', namespace=ns, seed=1)\n"
        "import json, os\n"
        "packed = {m for m in sys.modules if m == 'grader' or m.startswith('grader.')}\n"
        "open(os.environ['LOADED'], 'w').write(json.dumps(sorted(packed)))\n")
    reference = str(repo_root / "solutions" / "ch2-jit.py")

    def selfcheck(*extra: str) -> str:
        run = subprocess.run([str(python), str(script), reference, *extra], capture_output=True, text=True,
                             cwd=tmp_path, env={**env, "LOADED": str(tmp_path / "loaded.json")})
        assert run.returncode == 0, run.stderr[-3000:]
        return run.stdout

    right = selfcheck()
    # the self-check loads only what the pack holds: the judging core, the checks, the models, the
    # wings' inside/ (no kernel client, sandbox, batch or class tool is in it, or needed)
    loaded = json.loads((tmp_path / "loaded.json").read_text())
    assert "grader.judging.verdicts" in loaded and "grader.verifier.protocol" in loaded
    assert not [m for m in loaded if m.startswith(("grader.sandbox", "grader.batch", "grader.kernel.client",
                                                   "grader.kernel.session", "grader.verifier.client",
                                                   "grader.pipeline", "grader.outputs", "grader.course"))], loaded
    assert "✗" not in right and "!" not in right.replace("⏳", ""), right
    assert right.count("⏳") == 4 and "8 checked when you hand in (20 pts)" in right  # the detective
    wrong = selfcheck("tax_vectorized = jax.jit(lambda income: income * 0.1)")
    assert "✗ tax.vectorized_visible" in wrong and "expected 0.0" in wrong
    assert "✗ newton" not in wrong and "! newton" not in wrong  # only the broken function's checks fail


def _runs_the_notebook_s_self_check_cells_in_a_jupyter_kernel(venv: Path, repo_root: Path, tmp_path: Path) -> None:
    """The cells Jupyter, JupyterLab, VS Code and Colab run: an ipykernel on the student's venv
    (with the pack, not this repository), executing the notebook top to bottom."""
    import nbformat
    from nbclient import NotebookClient

    spec_dir = tmp_path / "jupyter" / "kernels" / "student"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [str(venv / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "student", "language": "python"}))
    notebook = nbformat.read(repo_root / "solutions" / "ch2-jit.ipynb", as_version=4)
    # the kernel inherits this process's environment: a student's has neither the instructor's
    # assignments folder nor this repository on its path (another test of this worker may set them)
    kept = {name: os.environ.get(name) for name in ("JUPYTER_PATH", "GRADER_ASSIGNMENTS", "PYTHONPATH")}
    os.environ["JUPYTER_PATH"] = str(tmp_path / "jupyter")
    os.environ.pop("GRADER_ASSIGNMENTS", None)
    os.environ.pop("PYTHONPATH", None)
    try:
        NotebookClient(notebook, kernel_name="student", timeout=300, resources={"metadata": {"path": str(tmp_path)}},
                       ).execute()
    finally:
        for name, value in kept.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    shown = ["".join(o.get("text", "") for o in c.outputs) for c in notebook.cells
             if "selfcheck" in c.metadata.get("tags", [])]
    assert [s.splitlines()[0].rsplit(": ", 1)[-1] for s in shown] == ["18 / 25", "17 / 25", "0 / 20", "15 / 30"]
    assert all(s.startswith("⏳ ") and "✗" not in s for s in shown), shown
