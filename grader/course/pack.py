"""`grade pack ASSIGNMENT -o DIR`: what the instructor hands out, so a student can self-check anywhere.

DIR gets the assignment's wheel, the template notebook and STUDENTS.md. One distribution per
assignment, `jax-course-<id>` (import package `jax_course_<id>`, `-` and `.` as `_`), each
self-contained: a private copy of the grader's runtime the pack needs (its imports of `grader`
renamed to the pack's package, `rewrite_imports`) and the assignment's data. So a course's packs,
made at different times from different grader versions, install side by side in any order, and
none shadows the instructor's `grader` (or `grader` on the package index). They share only the
`grade` script, which is the same launcher in each (grader/selfgrade/packs.py): it finds the
installed packs by their entry points (`jax_course.packs`) and runs the notebook's.

The wheel holds the assignment's *public* part only:

- the spec, in which every check the self-check leaves to the hand-in (hidden, drawing its inputs
  from a generator, custom, an answer) is `reveal = "on_hand_in"` and holds only what the
  self-check reports of it: its id, title, points, requirements, message and hint (`deferred`);
  its inputs, their parameters, its reference and tolerances, a quiz's answers are not there;
- `expected.json`: the reference's values on the visible checks' literal inputs (those in the
  notebook), computed now; `references.py` only looks them up;
- no references module, no generator, no custom-check code (the detective's truth is measured by
  checks.py, which stays with the instructor), no solution.

The wheel depends on any JAX from JAX_MINIMUM and does not pin or replace the student's; it is
written directly (a zip with its metadata), so making a pack needs no build tools.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import io
import json
import shutil
import tokenize
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from grader import assignment as assignments
from grader.assignment import Assignment
from grader.cases import Case, materialize
from grader.errors import GraderError, UsageError
from grader.faults import instructor_code
from grader.selfgrade.packs import COURSE_FILE, GROUP
from grader.submission import pack_distribution, pack_package
from grader.values import to_wire

# measured: 0.6.2 (Python 3.10, 3.11, 3.13) and 0.12; 0.5.3 and older lack jax._src.lib._jax
JAX_MINIMUM = "0.6.2"
PYTHON_MINIMUM = "3.10"  # the pack reads its spec as JSON (no tomllib); measured with tests/test_pack.py
PACKED_ENTRIES = ["grader.selfcheck", "grader.selfgrade.cli", "grader.selfgrade.inside",
                  "grader.checks.custom", "grader.kernel.protocol", "grader.values"]
"""What the packed code imports: the self-check, the pack's `grade` command (and the child it
starts by path), and what the packed references.py and checks.py name. The wheel holds these
modules and all they can import (grader/course/imports.py), the wings' `inside/` folders whole
(loaded by path), and nothing else of the grader: under the pack's own package, never `grader/`."""
PACKED_MAIN = '''"""`python -m {package}`: the same command as `grade` (grader/selfgrade/cli.py), for when
`grade` is not on PATH or was removed with another pack."""

from {package}.selfgrade.cli import entry

entry()
'''
"""The pack's `__main__.py`."""
PACKED_INIT = '''"""The student pack of {assignment} ({distribution}): its self-check and its `grade`,
with the assignment's public part only. In a notebook, `from {package} import check` then `check("exercise")`;
in a terminal, `grade NOTEBOOK.ipynb` (or `python -m {package} NOTEBOOK.ipynb`).

Made by `grade pack` from the grader's runtime, its imports renamed to this package, so that a
course's packs install side by side. Every pack's root has `ASSIGNMENT`, `check` and `grade`, and
its wheel names it in the entry point group `{group}`: what every pack's `grade` command runs."""

ASSIGNMENT = {assignment!r}
DISTRIBUTION = {distribution!r}


def check(exercise, assignment=ASSIGNMENT, namespace=None, seed=None, timeout=None):
    """Print this exercise's verdict, check by check, for the code defined so far."""
    try:
        from {package}.selfcheck import check as self_check
    except Exception as exc:  # a pack that does not load in this Python: one sentence, never a traceback
        print(f"⚠️ The self-check of {{ASSIGNMENT}} does not load in this notebook's Python "
              f"({{type(exc).__name__}}: {{exc}}): run %pip install --force-reinstall --no-deps "
              "{package}-*.whl in a cell, restart the kernel, then run this cell again.")
        return
    self_check(exercise, assignment, namespace=namespace, seed=seed, timeout=timeout)


def grade(argv):
    """This pack's own `grade` on a command line's arguments (a list), its exit status: what the
    `grade` command of any pack runs for a notebook of {assignment}."""
    from {package}.selfgrade.cli import main

    return main(list(argv), dispatch=False)
'''
"""The pack's `__init__.py` (the instructor's `grader/__init__.py` is not packed)."""


def packed_files(package: Path) -> list[Path]:
    """The grader's files the student pack holds (see PACKED_ENTRIES)."""
    from grader.course.imports import closure, import_graph, modules

    found = modules(package)
    wanted = closure(import_graph(package), PACKED_ENTRIES)
    files = {found[name] for name in wanted if name != package.name}  # the pack writes its own __init__
    for name in wanted:
        if name.endswith(".inside"):
            files.update(found[name].parent.glob("*.py"))
    return sorted(files)


def _names_the_grader(module: str | None) -> bool:
    return module is not None and (module == "grader" or module.startswith("grader."))


def rewrite_imports(source: str, package: str, where: str = "<source>") -> str:
    """`source` with every import of the grader naming `package` instead: `from grader.x import y`
    and `import grader.x as y` (those under `if TYPE_CHECKING:` too), changed at the very token
    the statement's module name starts with; docstrings, messages and everything else are left
    as they are. `import grader.x` without `as` would bind another name: refused."""
    tree = ast.parse(source, where)
    starts: dict[int, str] = {}  # line -> the kind of each import statement there that names the grader
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _names_the_grader(node.module):
            starts[node.lineno] = "from"
        elif isinstance(node, ast.Import) and any(_names_the_grader(a.name) for a in node.names):
            if any(_names_the_grader(a.name) and a.asname is None for a in node.names):
                raise GraderError(f"{where}, line {node.lineno}: `import grader...` without `as` cannot be "
                                  "packed; write `from grader... import ...`")
            starts[node.lineno] = "import"
    if not starts:
        return source
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int]] = []
    statement: str | None = None  # the import statement being read: "from" or "import"
    previous = None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            continue
        if token.type == tokenize.NAME and token.string in ("from", "import") and (
                previous is None or previous.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
                or previous.string in (";", ":")):
            statement = token.string
        elif token.type == tokenize.NEWLINE or token.string == ";":
            statement = None
        elif (token.type == tokenize.NAME and token.string == "grader" and statement is not None
              and previous is not None and token.start[0] in starts
              and previous.string in (("from",) if statement == "from" else ("import", ","))):
            edits.append(token.start)
        previous = token
    for row, col in reversed(edits):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + package + line[col + len("grader"):]
    rewritten = "".join(lines)
    left = [n.lineno for n in ast.walk(ast.parse(rewritten, where))
            if isinstance(n, ast.ImportFrom) and n.level == 0 and _names_the_grader(n.module)
            or isinstance(n, ast.Import) and any(_names_the_grader(a.name) for a in n.names)]
    if left:
        raise GraderError(f"{where}, line {left[0]}: an import of the grader the pack could not rename")
    return rewritten

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

The self-check of {assignment} is `{wheel}` (the pack `{distribution}`). It keeps the JAX you
have (from {jax_minimum} on, with Python {python_minimum}+). Install it into the Python your notebook
runs on; a self-check cell that says "not installed" runs on another one. One line per case:

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

The packs of the course's other assignments install beside this one, in any order, into the same
Python (`pip install` each wheel; `pip list` shows one `jax-course-...` line per pack). A newer
pack of {assignment} from your instructor installs over this one with the same line.

## Checking your work

- **In the notebook**: run each exercise's self-check cell, on the code defined so far.
- **The whole notebook, as the grader runs it**: `grade {template}` in a terminal (the `grade` of
  the environment you installed into, e.g. `.venv/bin/grade`). It runs every cell in a fresh
  Python, as the course's grader does, and prints the same report; `--html feedback.html` writes
  the feedback page. Every pack installs the same `grade`, which checks each notebook with the pack
  of its assignment, or says which pack to install. `python -m {package} {template}` is the same
  command, for when `grade` is missing (uninstalling any pack removes the `grade` they share:
  `pip install --force-reinstall --no-deps {wheel}` brings it back).

Either way you get:

- **checked now**: the checks on the inputs your notebook shows; a failure says which call and
  what was expected;
- **checked when you hand in**: the checks on hidden inputs, and your predictions and quiz
  answers. The self-check lists them; nothing here tells you their answers.

Your score is the one the grader gives when you hand in `{template}`. The course grades with JAX
{course_jax}; with another version, the self-check says so once.
"""

HANDING_IN = """
## Handing in

`grade {template} --hand-in` checks your notebook here, then hands it in to the course's hand-in
service ({url}) and prints your grade: every check, the hidden ones too, as the course's grader
gives it, usually within seconds. Your token (the course gives you one) goes in the file
`~/.config/jax-course/token` (or pass `--token-file FILE`, or set `GRADE_TOKEN`); `grade` never
prints it. You may hand in again: the last hand-in counts. The page {url}/ does the same from a
browser, a phone's too, and shows your earlier hand-ins.
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


ON_HAND_IN = "on_hand_in"
"""What stands in a deferred check's spec for a field its kind requires but the self-check never
reads (a generator's name, a custom check's function, a quiz's accepted answers): `deferred`."""
DEFERRED_FIELDS = ("kind", "id", "title", "points", "verifies", "message", "hint", "hidden")
"""All the pack keeps of a check the self-check leaves to the hand-in, from the instructor's spec:
what the self-check reports of it ("checked when you hand in", its title, points and
requirements), and the words of its failure. Besides these: the student's own function or
variable it calls (`function`, `name`: the notebook's names) and ON_HAND_IN where the kind's
model requires a field."""
_STUDENT_NAME = {"numeric": "function", "eager": "function", "calls": "function", "pure": "function",
                 "structure": "function", "compile_limit": "function", "interface": "name", "form": "name",
                 "answer": "name"}
_REQUIRED: dict[str, dict[str, Any]] = {
    "numeric": {"cases": {"generator": ON_HAND_IN}}, "eager": {"cases": {"generator": ON_HAND_IN}},
    "calls": {"cases": {"generator": ON_HAND_IN}}, "pure": {"cases": {"generator": ON_HAND_IN}},
    "structure": {"cases": {"generator": ON_HAND_IN}, "absent": [ON_HAND_IN]},
    "compile_limit": {"cases": {"generator": ON_HAND_IN}, "max_compiles": 0},
    "custom": {"function": ON_HAND_IN, "observe": [ON_HAND_IN]},
    "answer": {"accept": [ON_HAND_IN]}, "form": {"items": "bool", "length": 1}, "interface": {},
}


def deferred(raw_check: dict[str, Any]) -> dict[str, Any]:
    """A check the self-check does not judge (hidden, custom, an answer, a generator it cannot draw),
    as the pack holds it: DEFERRED_FIELDS, the student's name it calls, placeholders, and `reveal =
    "on_hand_in"`. Nothing a hidden check uses to judge (its cases and generator, their parameters:
    the `num_steps` it calls with, how many runs; its reference, tolerances, output, public
    arguments, globals, a custom check's function and params, a quiz's answers) reaches the wheel:
    the self-check builds such a check from nothing (`grader.judging.plan.Deferred`)."""
    kind = raw_check.get("kind", "numeric")
    kept = {field: raw_check[field] for field in DEFERRED_FIELDS if field in raw_check}
    kept["kind"] = kind
    name = _STUDENT_NAME.get(kind)
    if name is not None:
        kept[name] = raw_check[name]
    kept.update(json.loads(json.dumps(_REQUIRED.get(kind, {}))))
    kept["reveal"] = "on_hand_in"
    return kept


def public_spec(loaded: Assignment, raw: dict[str, Any]) -> dict[str, Any]:
    """The spec students get: visible generators drawn into rows; every other check that needs
    the instructor's code or hidden inputs is checked when handed in, and kept as `deferred` says."""
    spec = json.loads(json.dumps(raw))
    for exercise, raw_exercise in zip(loaded.spec.exercises, spec["exercises"]):
        raw_exercise.pop("equivalent", None)
        raw_exercise.pop("domains", None)  # the hidden checks' ranges: the instructor's
        for index, (check, raw_check) in enumerate(zip(exercise.checks, raw_exercise["checks"])):
            if not raw_check.get("hidden") and raw_check.get("kind") != "custom":
                for field, holder in (("cases", raw_check), ("cases", raw_check.get("returns") or {})):
                    cases = holder.get(field)
                    if isinstance(cases, dict) and cases.get("generator"):
                        source = check.cases if holder is raw_check else check.returns.cases  # type: ignore[union-attr]
                        drawn = _as_rows(materialize(source, loaded.references, PACK_SEED,
                                                     f"{exercise.id}.{check.id}"))
                        if drawn is not None:
                            holder[field] = drawn
            if not _public(raw_check) or check.revealed == "on_hand_in":
                raw_exercise["checks"][index] = deferred(raw_check)
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


def build_pack(name: str, out_dir: Path, *, hand_in_url: str | None = None) -> Path:
    """Write the wheel, the template and STUDENTS.md into `out_dir`; returns the wheel's path.
    `hand_in_url`: the course's hand-in service (`grade serve`), where the pack's `grade --hand-in`
    hands in (kept in the pack's course.json)."""
    if hand_in_url is not None:
        from grader.selfgrade.hand_in import address

        hand_in_url = address(hand_in_url, "--hand-in-url")
    loaded = assignments.load(name)
    root = assignments.assignments_dir().parent
    template = root / "student_template" / f"{loaded.spec.id}.ipynb"
    if not template.is_file():
        raise GraderError(f"no student_template/{loaded.spec.id}.ipynb to hand out")
    raw = tomllib.loads((loaded.folder / assignments.SPEC_FILE).read_text(encoding="utf-8"))
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"-o {out_dir} is a file: the pack is a folder (the wheel, the template and STUDENTS.md)")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"-o {out_dir}: cannot make the folder ({exc.strerror or exc})") from None
    assignment_id = loaded.spec.id
    name = pack_package(assignment_id)
    staging = out_dir / f".pack-{assignment_id}"
    shutil.rmtree(staging, ignore_errors=True)
    package = staging / name
    source = Path(__file__).resolve().parent.parent
    for file in packed_files(source):
        target = package / file.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = file.read_text(encoding="utf-8")
        target.write_text(rewrite_imports(text, name, str(file.relative_to(source.parent))), encoding="utf-8")
    folder = package / "_assignments" / assignment_id
    folder.mkdir(parents=True)
    public = public_spec(loaded, raw)
    (folder / assignments.PACKED_SPEC_FILE).write_text(json.dumps(public, indent=1), encoding="utf-8")
    (folder / "expected.json").write_text(json.dumps(expected_values(loaded, public)), encoding="utf-8")
    (folder / "references.py").write_text(rewrite_imports(REFERENCES, name), encoding="utf-8")
    (folder / "checks.py").write_text(CHECKS, encoding="utf-8")
    course = json.dumps({"jax": _course_jax(), **({"hand_in_url": hand_in_url} if hand_in_url else {})})
    (package / "_assignments" / COURSE_FILE).write_text(course, encoding="utf-8")
    names = {"assignment": assignment_id, "distribution": pack_distribution(assignment_id), "package": name,
             "group": GROUP}
    (package / "__init__.py").write_text(PACKED_INIT.format(**names), encoding="utf-8")
    (package / "__main__.py").write_text(PACKED_MAIN.format(**names), encoding="utf-8")
    for old in out_dir.glob(f"{name}-*-py3-none-any.whl"):  # this assignment's pack made before
        old.unlink()
    wheel = write_wheel(package, out_dir, pack_version(package), assignment_id)
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copy(template, out_dir / template.name)
    students = STUDENTS.format(title=loaded.spec.title, wheel=wheel.name, template=template.name,
                               jax_minimum=JAX_MINIMUM, python_minimum=PYTHON_MINIMUM, course_jax=_course_jax(),
                               **names)
    if hand_in_url:
        students += HANDING_IN.format(url=hand_in_url, template=template.name)
    (out_dir / "STUDENTS.md").write_text(students, encoding="utf-8")
    return wheel


def write_wheel(package: Path, out_dir: Path, version: str, assignment_id: str) -> Path:
    """A pure-Python wheel of `package` (PEP 427): the files, then METADATA, WHEEL and RECORD.
    Written directly: building needs no setuptools on the instructor's machine. Its entry points:
    the `grade` command (the same launcher in every pack) and the pack itself in `jax_course.packs`."""
    name = package.name  # pack_package(assignment_id): also the wheel's escaped distribution name
    distribution = pack_distribution(assignment_id)
    info = f"{name}-{version}.dist-info"
    metadata_text = "\n".join([
        "Metadata-Version: 2.1", f"Name: {distribution}", f"Version: {version}",
        f"Summary: Self-check for the JAX course's {assignment_id}: the public checks, in your notebook",
        f"Requires-Python: >={PYTHON_MINIMUM}", f"Requires-Dist: jax>={JAX_MINIMUM}",
        "Requires-Dist: numpy>=1.24", "Requires-Dist: pydantic>=2.5", "Requires-Dist: flatbuffers>=24",
        "", ""])
    files = {str(p.relative_to(package.parent)): p.read_bytes()
             for p in sorted(package.rglob("*")) if p.is_file()}
    files[f"{info}/METADATA"] = metadata_text.encode()
    files[f"{info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: grade pack\nRoot-Is-Purelib: true\n"
                              b"Tag: py3-none-any\n")
    files[f"{info}/top_level.txt"] = f"{name}\n".encode()
    files[f"{info}/entry_points.txt"] = (f"[console_scripts]\ngrade = {name}.selfgrade.cli:entry\n\n"
                                         f"[{GROUP}]\n{assignment_id} = {name}\n").encode()
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


def pack_version(package: Path) -> str:
    """The grader's version with the digest of what the pack holds as its local label
    (`0.1.0+3f2a9c1b`): a pack made again after the assignment or the grader changed installs over
    the one before with a plain `pip install`, and the same content gets the same version."""
    from grader.report import environment

    digest = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return f"{environment().grader.split('+')[0]}+{digest.hexdigest()[:8]}"
