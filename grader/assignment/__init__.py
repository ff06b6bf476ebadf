"""Find and load an assignment folder: its spec, its references module, its custom checks.

Where assignments come from, first found wins:

1. `$GRADER_ASSIGNMENTS`: one folder of assignments, not a path list (an id must name one
   folder, and the course's `solutions/` and `student_template/` sit beside it). `grade
   --assignments DIR` sets it (`use()`), so the workers a run starts inherit it;
2. `./assignments/` in the working directory, when it holds an assignment;
3. the student pack's `grader/_assignments/`, or the source checkout's `assignments/` beside the
   package (an editable install), when it holds an assignment.

An installed grader (`pip install .`) has neither of 3., so an instructor names a folder with 1.
or runs `grade` in the course folder (2.). `-a PATH` still grades with any instructor's folder.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from pydantic import ValidationError

from grader.errors import AssignmentNotFound, SpecInvalid, UsageError
from grader.spec import SCHEMA_VERSION, AssignmentSpec, describe_errors

SPEC_FILE = "assignment.toml"
PACKED_SPEC_FILE = "assignment.json"  # the student pack's public spec (`grade pack`)
PACKED_DIR = Path(__file__).resolve().parent.parent / "_assignments"  # the package's root: grader/ or the pack's
CHECKOUT_DIR = Path(__file__).resolve().parent.parent.parent / "assignments"  # an editable install's
ENV = "GRADER_ASSIGNMENTS"
HOW_TO_CHOOSE = (f"pass --assignments DIR, set {ENV}=DIR, or run grade in a folder that has an "
                 "assignments/ subfolder")


def _spec_file(folder: Path) -> Path | None:
    for name in (SPEC_FILE, PACKED_SPEC_FILE):
        if (folder / name).is_file():
            return folder / name
    return None


def _holds_assignments(folder: Path) -> bool:
    """Only a folder with an assignment in it counts: an empty or unrelated `assignments/` (a
    student's, a site-packages neighbour's) must not hide the next place in the search order."""
    try:
        return folder.is_dir() and any(_spec_file(p) for p in folder.iterdir() if p.is_dir())
    except OSError:
        return False


def _fallbacks() -> list[Path]:
    """Where assignments are looked for when `$GRADER_ASSIGNMENTS` is not set, in order."""
    try:
        here = [Path.cwd() / "assignments"]
    except OSError:  # the working directory was removed
        here = []
    return here + [PACKED_DIR, CHECKOUT_DIR]


def assignments_dir() -> Path:
    """The folder of assignments (see the module docstring). `$GRADER_ASSIGNMENTS` is taken as
    given even when it holds nothing, so a wrong setting is an error, never a silent fallback;
    when nothing is found anywhere, the checkout's path, where `available()` lists nothing."""
    env = os.environ.get(ENV)
    if env:
        return Path(env)
    return next((folder for folder in _fallbacks() if _holds_assignments(folder)), CHECKOUT_DIR)


def available() -> list[str]:
    root = assignments_dir()
    try:
        return sorted(p.name for p in root.iterdir() if _spec_file(p)) if root.is_dir() else []
    except OSError:
        return []


def use(folder: str | Path) -> None:
    """`--assignments DIR`: this run's assignments, for this process and every process it starts
    (batch workers inherit the environment). A wrong folder is bad usage, said at once."""
    path = Path(folder)
    if _spec_file(path):
        raise UsageError(f"--assignments {folder} is one assignment's folder: pass the folder that holds it, "
                         f"{path.resolve().parent}")
    if not _holds_assignments(path):
        raise UsageError(f"--assignments {folder} is not a folder of assignments "
                         f"(folders with an {SPEC_FILE})")
    os.environ[ENV] = str(path.resolve())


def select(given: list[str]) -> list[str]:
    """`grade validate ARG...`: the ids to validate. An argument is an id here, or an instructor's
    folder: one assignment's (it holds assignment.toml) or a folder of them. A folder becomes this
    run's assignments folder (`use()`), so that planning, the grading workers and the notebooks'
    claims all see the same assignments; hence one run validates the assignments of one folder."""
    known = available()
    roots: set[Path] = set()
    names: list[str] = []
    for arg in given:
        path = Path(arg)
        if arg in known:
            roots.add(assignments_dir().resolve())
            names.append(arg)
        elif _spec_file(path):
            roots.add(path.resolve().parent)
            names.append(path.resolve().name)
        elif _holds_assignments(path):
            roots.add(path.resolve())
            names += sorted(p.name for p in path.iterdir() if _spec_file(p))
        elif path.is_dir():
            raise UsageError(f"{arg} holds no assignment: name a folder with an {SPEC_FILE}, or a folder of them")
        else:
            raise not_found(arg)
    if len(roots) > 1:
        raise UsageError("validate the assignments of one folder at a time; these are in "
                         + " and ".join(str(r) for r in sorted(roots)))
    if roots and roots != {assignments_dir().resolve()}:
        use(roots.pop())
    return list(dict.fromkeys(names))


def not_found(name: str) -> AssignmentNotFound:
    """The error for an unknown id, in one sentence: where it looked and the three ways to point
    elsewhere (an installed grader finds no assignments until it is told where they are)."""
    known = available()
    root = assignments_dir()
    if known:
        where = f"in {root} (known: {', '.join(known)}); to use another folder"
    elif os.environ.get(ENV):
        where = f"in {root} (${ENV}), which holds no assignment; to use another folder"
    else:
        where = "because no folder of assignments was found; to name one"
    return AssignmentNotFound(name, known, message=f"no assignment named {name!r} {where}, {HOW_TO_CHOOSE}")


@dataclass(frozen=True)
class Assignment:
    """A loaded assignment: the validated spec plus its optional Python modules."""

    folder: Path
    spec: AssignmentSpec
    references: ModuleType | None
    checks: ModuleType | None


def reference_solutions(assignment: Assignment) -> list[Path]:
    """The course's reference solutions of this assignment: solutions/<id>.ipynb and .py beside
    the assignments folder (a student's pack, or an assignment elsewhere, has none)."""
    folder = assignment.folder.parent.parent / "solutions"
    return [p for p in sorted(folder.glob(f"{assignment.spec.id}.*")) if p.suffix in (".py", ".ipynb")]


def reference_solution(assignment: Assignment) -> Path | None:
    """The one to build from: the notebook if there is one (what students hand in)."""
    found = reference_solutions(assignment)
    return next((p for p in found if p.suffix == ".ipynb"), found[0] if found else None)


def _load_module(path: Path, name: str) -> ModuleType | None:
    if not path.is_file():
        return None
    module_spec = importlib.util.spec_from_file_location(name, path)
    assert module_spec and module_spec.loader
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def resolve(name_or_path: str) -> Path:
    """An assignment's folder: an id of `available()` first (so a folder of that name in the
    working directory, e.g. a student's in the submissions folder, never stands in for it), else
    a path to a folder holding assignment.toml (only ever the instructor's: -a)."""
    if name_or_path in available():
        return assignments_dir() / name_or_path
    candidate = Path(name_or_path)
    if _spec_file(candidate):
        return candidate.resolve()
    raise not_found(name_or_path)


def read_spec(folder: Path) -> AssignmentSpec:
    """Parse and validate `assignment.toml`; every problem becomes one plain line."""
    name = folder.name
    path = _spec_file(folder) or folder / SPEC_FILE
    try:
        text = path.read_text(encoding="utf-8")
        if path.name == PACKED_SPEC_FILE:  # a student pack: JSON, so Python 3.10 (no tomllib) reads it
            raw = json.loads(text)
        else:
            import tomllib

            raw = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # tomllib.TOMLDecodeError is a ValueError
        raise SpecInvalid(name, [f"{path.name} is not readable {'JSON' if path.suffix == '.json' else 'TOML'}: "
                                 f"{exc}"]) from None
    version = raw.get("schema_version")
    if version != SCHEMA_VERSION:
        side = "the grader is too old for it" if isinstance(version, int) and version > SCHEMA_VERSION \
            else "the spec needs upgrading"
        raise SpecInvalid(name, [f"schema_version is {version!r}, this grader reads {SCHEMA_VERSION}: {side}"])
    try:
        return AssignmentSpec.model_validate(raw)
    except ValidationError as exc:
        raise SpecInvalid(name, describe_errors(exc.errors())) from None


def _missing_functions(spec: AssignmentSpec, references: ModuleType | None,
                       checks: ModuleType | None) -> list[str]:
    """Every function a spec names must exist in the module it belongs to."""
    problems = []

    def need(module: ModuleType | None, file: str, name: str | None, path: str) -> None:
        if name and not callable(getattr(module, name, None)):
            problems.append(f"{path}: {file} has no function {name!r}")

    for i, exercise in enumerate(spec.exercises):
        for j, check in enumerate(exercise.checks):
            path = f"exercises[{i}].checks[{j}]"
            for field in ("cases", "returns"):
                holder = getattr(check, field, None)
                cases = getattr(holder, "cases", holder)
                need(references, "references.py", getattr(cases, "generator", None), f"{path}.{field}.generator")
            need(references, "references.py", getattr(check, "reference", None), f"{path}.reference")
            if check.kind == "custom":
                need(checks, "checks.py", check.function, f"{path}.function")
    return problems


def load(name_or_path: str) -> Assignment:
    """Load (once per process while its files are unchanged: a batch worker grades many
    submissions, and checks.py may cache costly work such as measuring JAX)."""
    folder = resolve(name_or_path)
    stamp = tuple((folder / f).stat().st_mtime_ns if (folder / f).exists() else 0
                  for f in (SPEC_FILE, PACKED_SPEC_FILE, "references.py", "checks.py"))
    return _load(folder, stamp)


@functools.lru_cache(maxsize=16)
def _load(folder: Path, stamp: tuple[int, ...]) -> Assignment:
    spec = read_spec(folder)
    prefix = "grader_assignment_" + spec.id.replace("-", "_")
    try:
        references = _load_module(folder / "references.py", prefix + "_references")
        checks = _load_module(folder / "checks.py", prefix + "_checks")
    except (Exception, SystemExit) as exc:  # instructor code that does not import (a stray exit() too)
        raise SpecInvalid(spec.id, [f"its Python modules do not load: {type(exc).__name__}: {exc}"]) from None
    problems = _missing_functions(spec, references, checks)
    if problems:
        raise SpecInvalid(spec.id, problems)
    return Assignment(folder=folder, spec=spec, references=references, checks=checks)
