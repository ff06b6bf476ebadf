"""Find and load an assignment folder: its spec, its references module, its custom checks."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from pydantic import ValidationError

from grader.errors import AssignmentNotFound, SpecInvalid
from grader.spec import SCHEMA_VERSION, AssignmentSpec, describe_errors

SPEC_FILE = "assignment.toml"
PACKED_SPEC_FILE = "assignment.json"  # the student pack's public spec (`grade pack`)
PACKED_DIR = Path(__file__).resolve().parent / "_assignments"


def assignments_dir() -> Path:
    """`$GRADER_ASSIGNMENTS`, else the public assignments of a student pack, else the
    `assignments/` folder beside the package (the instructor's clone)."""
    env = os.environ.get("GRADER_ASSIGNMENTS")
    if env:
        return Path(env)
    return PACKED_DIR if PACKED_DIR.is_dir() else Path(__file__).resolve().parent.parent / "assignments"


def _spec_file(folder: Path) -> Path | None:
    for name in (SPEC_FILE, PACKED_SPEC_FILE):
        if (folder / name).is_file():
            return folder / name
    return None


def available() -> list[str]:
    root = assignments_dir()
    return sorted(p.name for p in root.iterdir() if _spec_file(p)) if root.is_dir() else []


@dataclass(frozen=True)
class Assignment:
    """A loaded assignment: the validated spec plus its optional Python modules."""

    folder: Path
    spec: AssignmentSpec
    references: ModuleType | None
    checks: ModuleType | None


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
    raise AssignmentNotFound(name_or_path, available())


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
    except Exception as exc:  # instructor code that does not import is a broken spec
        raise SpecInvalid(spec.id, [f"its Python modules do not load: {type(exc).__name__}: {exc}"]) from None
    problems = _missing_functions(spec, references, checks)
    if problems:
        raise SpecInvalid(spec.id, problems)
    return Assignment(folder=folder, spec=spec, references=references, checks=checks)
