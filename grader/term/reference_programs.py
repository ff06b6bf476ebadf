"""The reference solution's own program fingerprints, computed once, for the search for copied work.

Why: students who wrote the reference's program (the exercise dictates it) did not copy each other,
and what a student's program shares with the reference's is no evidence either
(grader.term.similarity). The fingerprints are made as a student's are: by grading the course's
reference solution (solutions/<id>.ipynb, else .py) and keeping its report's `programs`.

Grading takes seconds, so the batch does it once (`ensure`) and keeps the result in the grader's
cache, keyed by what decides the programs: the assignment's files, the solution, the code that runs
in the kernel and the verifier (it exports and fingerprints them) and the JAX version. Rebuilding a
batch's outputs (`grade export`, `grade adjust`) only reads it (`cached`): without it, the search
runs as before, on the students' programs alone.
"""

from __future__ import annotations

import hashlib
import json
from importlib import metadata
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from grader import runtime_paths
from grader.assignment import Assignment, reference_solution
from grader.errors import GraderError
from grader.options import GradeOptions
from grader.report import ProgramFingerprint, Report

__all__ = ["ReferencePrograms", "cache_file", "cached", "cached_for", "ensure"]

FOLDER = "reference-programs"


class ReferencePrograms(BaseModel):
    """What the cache keeps for one assignment's reference solution."""

    model_config = ConfigDict(extra="forbid")

    assignment: str
    solution: str
    programs: list[ProgramFingerprint]


def cache_file(assignment: Assignment, solution: Path) -> Path:
    """Where this reference's fingerprints are kept (a new key whenever what makes them changes)."""
    from grader.assignment.digest import assignment_digest
    from grader.kernel import INSIDE as KERNEL_INSIDE
    from grader.verifier import INSIDE as VERIFIER_INSIDE

    key = hashlib.sha256(assignment_digest(assignment.folder).encode() + solution.read_bytes())
    for runtime in sorted([*KERNEL_INSIDE.glob("*.py"), *VERIFIER_INSIDE.glob("*.py")]):
        key.update(runtime.read_bytes())
    try:
        key.update(metadata.version("jax").encode())
    except metadata.PackageNotFoundError:
        pass
    return runtime_paths.cache_dir() / FOLDER / f"{assignment.spec.id}-{key.hexdigest()[:16]}.json"


def _read(path: Path) -> list[ProgramFingerprint] | None:
    try:
        return ReferencePrograms.model_validate_json(path.read_bytes()).programs
    except (OSError, ValidationError, ValueError):
        return None


def cached(assignment_id: str) -> list[ProgramFingerprint] | None:
    """The reference's fingerprints if a batch computed them on this machine; never grades."""
    from grader.assignment import load

    try:
        assignment = load(assignment_id)
        solution = reference_solution(assignment)
        return None if solution is None else _read(cache_file(assignment, solution))
    except (GraderError, OSError):  # an unknown or broken assignment: no reference
        return None


def cached_for(reports: dict[str, Report]) -> list[ProgramFingerprint] | None:
    """`cached` for a batch's reports when they are of one assignment (else None)."""
    ids = {r.assignment for r in reports.values() if r.status == "graded"}
    return cached(ids.pop()) if len(ids) == 1 else None


def ensure(assignment: Assignment, options: GradeOptions) -> list[ProgramFingerprint] | None:
    """The reference's fingerprints, grading it (as the batch grades, seed 0) when they are not
    kept yet; None when there is no reference solution or it could not be graded. Never raises
    for a reference that fails: the search for copied work then runs without it."""
    from grader.atomic import write_atomic
    from grader.pipeline import grade_one

    solution = reference_solution(assignment)
    if solution is None:
        return None
    target = cache_file(assignment, solution)
    known = _read(target)
    if known is not None:
        return known
    mine = options.model_copy(update={"assignment": str(assignment.folder), "seed": 0, "student": None,
                                      "exercises": None})
    try:
        report = grade_one(solution, mine)
    except Exception:  # noqa: BLE001 - a lead for the instructor: the search goes on without it
        return None
    if report.status != "graded" or not report.programs:
        return None
    kept = ReferencePrograms(assignment=assignment.spec.id, solution=solution.name, programs=report.programs)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, json.dumps(kept.model_dump(mode="json")) + "\n")
    except OSError:  # a cache that cannot be written: computed again next time
        pass
    return report.programs
