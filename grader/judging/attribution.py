"""Why an exercise is "not answered": the cell that would have defined its names, and what it raised.

A cell that raised (or hung, or killed the kernel) defines nothing, so every check of the
exercise whose names it held says "`X` is not defined", which hides the real cause. This finds,
for each such name (a check's `not_answered`), the failed cell that assigns or defines it, and
says so in those checks (`not_answered.because`, and the message made from it), with the cell,
the line and the error; an ImportError also lists the packages the grading kernel has. The cell
problem is then marked with its exercise, so it is told once.
"""

from __future__ import annotations

import ast
import re
from importlib import metadata

from grader.report import CellProblem, ExerciseResult
from grader.submission import SourceCell

_DEFINES = re.compile(r"^(?:def|class)\s+([A-Za-z_]\w*)|^([A-Za-z_]\w*)\s*(?::[^=\n]*)?=(?!=)", re.MULTILINE)
COURSE_PACKAGES = ("jax", "jaxlib", "numpy", "scipy", "matplotlib", "pandas", "optax", "flax", "equinox", "chex")


def defined_names(source: str) -> set[str]:
    """Names a cell binds at its top level (assignments, def, class, imports)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # a cell that does not parse
        return {m.group(1) or m.group(2) for m in _DEFINES.finditer(source)}
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def grading_packages() -> str:
    """The course's packages the grading environment has, with their versions."""
    found = []
    for name in COURSE_PACKAGES:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(found) + " and Python's standard library"


def _cause(problem: CellProblem) -> str:
    cause = problem.message
    if problem.ename in ("ModuleNotFoundError", "ImportError"):
        cause += f" (the grading kernel has {grading_packages()}; nothing else can be imported)"
    return cause


def attribute(exercises: list[ExerciseResult], cells: list[SourceCell],
              problems: list[CellProblem]) -> tuple[list[ExerciseResult], list[CellProblem]]:
    """Exercises whose undefined names a failed cell would have defined say so; those cell
    problems are marked with the exercise."""
    failed_cells = {p.cell: p for p in problems if p.status in ("error", "timeout", "died")}
    if not failed_cells:
        return exercises, problems
    definers: dict[str, CellProblem] = {}
    for cell in cells:
        problem = failed_cells.get(cell.index)
        if problem is not None:
            for name in defined_names(cell.source):
                definers.setdefault(name, problem)
    told: dict[int, str] = {}
    out = []
    for exercise in exercises:
        checks = []
        for check in exercise.checks:
            missing = check.not_answered  # a name not defined, whose cause is not told yet
            untold = missing is not None and not missing.defined and missing.because is None
            problem = definers.get(missing.name) if missing is not None and untold else None
            if missing is not None and problem is not None:
                told.setdefault(problem.cell, exercise.id)
                missing = missing.model_copy(update={"because": _cause(problem)})
                check = check.model_copy(update={"message": missing.message, "not_answered": missing})
            checks.append(check)
        out.append(exercise.model_copy(update={"checks": checks}))
    marked = [p.model_copy(update={"exercise": told[p.cell]}) if p.cell in told else p for p in problems]
    return out, marked
