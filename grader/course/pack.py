"""`grade pack ASSIGNMENT -o DIR`: what the instructor hands out, so a student can self-check anywhere.

DIR gets a wheel of the grader named `jax-course-selfcheck` (not `grader`, which is someone
else's on the package index) holding the assignment's *public* part only, the template notebook
and STUDENTS.md:

- the spec, in which every check that is hidden, draws its inputs from a generator or is a
  custom check is `reveal = "on_hand_in"`: its title and points are there, its inputs are not;
- `expected.json`: the reference's values on the visible checks' literal inputs (those in the
  notebook), computed now; `references.py` only looks them up;
- no references module, no generator, no custom-check code (the detective's truth is measured by
  checks.py, which stays with the instructor), no solution.

The wheel depends on any JAX from JAX_MINIMUM and does not pin or replace the student's; it is
written directly (a zip with its metadata), so making a pack needs no build tools.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from grader import assignment as assignments
from grader.assignment import Assignment
from grader.cases import Case, materialize
from grader.errors import GraderError
from grader.faults import instructor_code
from grader.values import to_wire

DISTRIBUTION = "jax-course-selfcheck"
# measured: 0.6.2 (Python 3.10, 3.11, 3.13) and 0.12; 0.5.3 and older lack jax._src.lib._jax
JAX_MINIMUM = "0.6.2"
PYTHON_MINIMUM = "3.10"  # the pack reads its spec as JSON (no tomllib); measured with tests/test_pack.py
PACKED_ENTRIES = ["grader.selfcheck", "grader.selfgrade.cli", "grader.selfgrade.inside",
                  "grader.checks.custom", "grader.kernel.protocol", "grader.values"]
"""What the packed code imports: the self-check, the pack's `grade` command (and the child it
starts by path), and what the packed references.py and checks.py name. The wheel holds these
modules and all they can import (grader/course/imports.py), the wings' `inside/` folders whole
(loaded by path), and nothing else of the grader."""
CONSOLE_SCRIPTS = {"grade": "grader.selfgrade.cli:entry"}
PACKED_MAIN = '''"""`python -m grader` in the student pack: its `grade` (grader/selfgrade/cli.py)."""

from grader.selfgrade.cli import entry

entry()
'''
"""The pack's `grader/__main__.py` (the instructor's starts the instructor's `grade`)."""


def packed_files(package: Path) -> list[Path]:
    """The grader's files the student pack holds (see PACKED_ENTRIES)."""
    from grader.course.imports import closure, import_graph, modules

    found = modules(package)
    wanted = closure(import_graph(package), PACKED_ENTRIES)
    files = {found[name] for name in wanted}
    for name in wanted:
        if name.endswith(".inside"):
            files.update(found[name].parent.glob("*.py"))
    return sorted(files)

REFERENCES = '''"""The public part of the references: the values of the visible checks' inputs (those in the
notebook), computed when the pack was made. No reference code, no hidden-input generator."""

import json
from pathlib import Path

from pydantic import TypeAdapter

from grader.kernel.protocol import Value
from grader.values import from_wire, to_wire

_TABLE = json.loads(Path(__file__).with_name("expected.json").read_text(encoding="utf-8"))
_VALUE = TypeAdapter(Value)


def _key(args):
    return json.dumps([to_wire(a).model_dump(mode="json") for a in args], sort_keys=True)


def _lookup(name):
    def reference(*args):
        found = _TABLE.get(name, {}).get(_key(args))
        if found is None:
            raise LookupError(f"{name}: checked when you hand in")
        return from_wire(_VALUE.validate_python(found))

    return reference


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _lookup(name)
'''

CHECKS = '''"""Custom checks are the instructor's: in the student pack they are checked when you hand in."""


def __getattr__(name):
    if name.startswith("__") or name == "prepare":
        raise AttributeError(name)

    def checked_on_hand_in(*args, **kwargs):
        raise LookupError("checked when you hand in")

    return checked_on_hand_in
'''

STUDENTS = """# Self-checking {title}

## Installing

The self-check is `{wheel}`. It keeps the JAX you have (from {jax_minimum} on, with Python
{python_minimum}+). Install it into the Python your notebook runs on; a self-check cell that says
"not installed" runs on another one. One line per case:

- **A virtual environment** (any system): `python3 -m venv .venv && .venv/bin/pip install {wheel} jupyter`,
  then `.venv/bin/jupyter lab` (on Windows: `.venv\\Scripts\\pip` and `.venv\\Scripts\\jupyter`).
- **Debian or Ubuntu** (pip says "externally-managed-environment"): use a virtual environment as
  above (`sudo apt install python3-venv` first if `python3 -m venv` is missing), never
  `--break-system-packages`.
- **Colab**: upload `{wheel}` with the Files pane (the folder icon on the left), then run
  `!pip install {wheel}` in a cell.
- **conda**: `conda activate` your environment, then `pip install {wheel}` (its pip keeps conda's JAX).
- **From inside the notebook** (Jupyter, JupyterLab, VS Code): `%pip install {wheel}` in a cell,
  with the wheel beside the notebook, installs into the notebook's own Python.

## Checking your work

- **In the notebook**: run each exercise's self-check cell, on the code defined so far.
- **The whole notebook, as the grader runs it**: `grade {template}` in a terminal (the `grade` of
  the environment you installed into, e.g. `.venv/bin/grade`; `python -m grader {template}` is the
  same). It runs every cell in a fresh Python, as the course's grader does, and prints the same
  report; `--html feedback.html` writes the feedback page.

Either way you get:

- **checked now**: the checks on the inputs your notebook shows; a failure says which call and
  what was expected;
- **checked when you hand in**: the checks on hidden inputs, and your predictions and quiz
  answers. The self-check lists them; nothing here tells you their answers.

Your score is the one the grader gives when you hand in `{template}`. The course grades with JAX
{course_jax}; with another version, the self-check says so once.
"""


PACK_SEED = 0  # the draw of a visible check's generator, written into the pack as literal rows


def _public(check: dict[str, Any]) -> bool:
    """A check the pack can judge: visible, with inputs written in the spec (the notebook's)."""
    if check.get("hidden") or check.get("kind") == "custom":
        return False
    holders = [check.get("cases"), (check.get("returns") or {}).get("cases")]
    return all(h is None or "generator" not in h for h in holders)


def _literal(value: Any) -> tuple[Any, str] | None:
    """(JSON literal, spec type) of a case argument, or None when rows cannot carry it."""
    if type(value) in (bool, int, float):
        return value, "py"
    dtypes = ("float32", "float64", "int32", "int64", "bool")
    if isinstance(value, (np.ndarray, np.generic)) and str(np.asarray(value).dtype) in dtypes:
        return np.asarray(value).tolist(), str(np.asarray(value).dtype)
    return None


def _as_rows(cases: list[Case]) -> dict[str, Any] | None:
    """A visible generator's draw as literal rows (its inputs are not secret), or None."""
    rows, types = [], None
    for case in cases:
        if case.kwargs or case.expected is not None:
            return None
        pairs = [_literal(a) for a in case.args]
        if any(p is None for p in pairs):
            return None
        kinds = [p[1] for p in pairs]  # type: ignore[index]
        if types is not None and kinds != types:
            return None
        types = kinds
        rows.append([p[0] for p in pairs])  # type: ignore[index]
    return {"rows": rows, "types": types} if rows else None


def public_spec(loaded: Assignment, raw: dict[str, Any]) -> dict[str, Any]:
    """The spec students get: visible generators drawn into rows; every other check that needs
    the instructor's code or hidden inputs is checked when handed in."""
    spec = json.loads(json.dumps(raw))
    for exercise, raw_exercise in zip(loaded.spec.exercises, spec["exercises"]):
        raw_exercise.pop("equivalent", None)
        raw_exercise.pop("domains", None)  # the hidden checks' ranges: the instructor's
        for check, raw_check in zip(exercise.checks, raw_exercise["checks"]):
            if not raw_check.get("hidden") and raw_check.get("kind") != "custom":
                for field, holder in (("cases", raw_check), ("cases", raw_check.get("returns") or {})):
                    cases = holder.get(field)
                    if isinstance(cases, dict) and cases.get("generator"):
                        source = check.cases if holder is raw_check else check.returns.cases  # type: ignore[union-attr]
                        drawn = _as_rows(materialize(source, loaded.references, PACK_SEED,
                                                     f"{exercise.id}.{check.id}"))
                        if drawn is not None:
                            holder[field] = drawn
            if not _public(raw_check):
                raw_check["reveal"] = "on_hand_in"
    return spec


def expected_values(loaded: Assignment, public: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The reference's values on every public check's literal inputs."""
    from grader.spec import ExerciseSpec

    table: dict[str, dict[str, Any]] = {}
    for raw_exercise in public["exercises"]:
        exercise = ExerciseSpec.model_validate(raw_exercise)
        for check, raw_check in zip(exercise.checks, raw_exercise["checks"]):
            reference = getattr(check, "reference", None)
            if not reference or not _public(raw_check):
                continue
            full_id = f"{exercise.id}.{check.id}"
            function = getattr(loaded.references, reference)
            for case in materialize(check.cases, loaded.references, 0, full_id):
                with instructor_code(f"{full_id}: reference {reference}"):
                    value = function(*case.args)
                key = json.dumps([to_wire(a).model_dump(mode="json") for a in case.args], sort_keys=True)
                table.setdefault(reference, {})[key] = to_wire(value).model_dump(mode="json")
    return table


def _course_jax() -> str:
    from importlib import metadata

    return metadata.version("jax")


def build_pack(name: str, out_dir: Path) -> Path:
    """Write the wheel, the template and STUDENTS.md into `out_dir`; returns the wheel's path."""
    loaded = assignments.load(name)
    root = assignments.assignments_dir().parent
    template = root / "student_template" / f"{loaded.spec.id}.ipynb"
    if not template.is_file():
        raise GraderError(f"no student_template/{loaded.spec.id}.ipynb to hand out")
    raw = tomllib.loads((loaded.folder / assignments.SPEC_FILE).read_text(encoding="utf-8"))
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = out_dir / f".pack-{loaded.spec.id}"
    shutil.rmtree(staging, ignore_errors=True)
    package = staging / "grader"
    source = Path(__file__).resolve().parent.parent
    for file in packed_files(source):
        target = package / file.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, target)
    folder = package / "_assignments" / loaded.spec.id
    folder.mkdir(parents=True)
    public = public_spec(loaded, raw)
    (folder / assignments.PACKED_SPEC_FILE).write_text(json.dumps(public, indent=1), encoding="utf-8")
    (folder / "expected.json").write_text(json.dumps(expected_values(loaded, public)), encoding="utf-8")
    (folder / "references.py").write_text(REFERENCES, encoding="utf-8")
    (folder / "checks.py").write_text(CHECKS, encoding="utf-8")
    course = json.dumps({"jax": _course_jax()})
    (package / "_assignments" / "course.json").write_text(course, encoding="utf-8")
    (package / "__main__.py").write_text(PACKED_MAIN, encoding="utf-8")
    version = _version()
    wheel = write_wheel(package, out_dir, version, loaded.spec.id)
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copy(template, out_dir / template.name)
    (out_dir / "STUDENTS.md").write_text(STUDENTS.format(
        title=loaded.spec.title, wheel=wheel.name, template=template.name, jax_minimum=JAX_MINIMUM,
        python_minimum=PYTHON_MINIMUM, course_jax=_course_jax()), encoding="utf-8")
    return wheel


def write_wheel(package: Path, out_dir: Path, version: str, assignment_id: str) -> Path:
    """A pure-Python wheel of `package` (PEP 427): the files, then METADATA, WHEEL and RECORD.
    Written directly: building needs no setuptools on the instructor's machine."""
    name = DISTRIBUTION.replace("-", "_")
    info = f"{name}-{version}.dist-info"
    metadata_text = "\n".join([
        "Metadata-Version: 2.1", f"Name: {DISTRIBUTION}", f"Version: {version}",
        f"Summary: Self-check for the JAX course's {assignment_id}: the public checks, in your notebook",
        f"Requires-Python: >={PYTHON_MINIMUM}", f"Requires-Dist: jax>={JAX_MINIMUM}",
        "Requires-Dist: numpy>=1.24", "Requires-Dist: pydantic>=2.5", "Requires-Dist: flatbuffers>=24",
        "", ""])
    files = {str(p.relative_to(package.parent)): p.read_bytes()
             for p in sorted(package.rglob("*")) if p.is_file()}
    files[f"{info}/METADATA"] = metadata_text.encode()
    files[f"{info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: grade pack\nRoot-Is-Purelib: true\n"
                              b"Tag: py3-none-any\n")
    files[f"{info}/top_level.txt"] = b"grader\n"
    scripts = "".join(f"{name} = {target}\n" for name, target in CONSOLE_SCRIPTS.items())
    files[f"{info}/entry_points.txt"] = f"[console_scripts]\n{scripts}".encode()
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    wheel = out_dir / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, data in files.items():
            archive.writestr(path, data)
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return wheel


def _version() -> str:
    from grader.report import environment

    return environment().grader.replace("+unknown", "")
