"""Which exercises a hand-written mutant can change, read from the names its cell binds.

A hand-written mutant is a cell appended to the reference module: it runs after every reference
cell, so it changes an exercise only through a name that exercise's code reads when its checks
call it. `grade validate` grades a mutant on the exercises it declares failing and on every
exercise that can read a name its cell binds; the others would grade exactly as the reference
does, so probing and verifying them is work nobody reads.

What is read where comes from the reference module's cells, which a course names by exercise
(`# %% [tax]`, beside `# %% [setup]`): the names an exercise's cell defines, and every module-level
name those read, transitively. A mutant cell with any statement other than a definition, an
assignment to plain names or an import (an attribute set, a call for its effect, a loop) could
change anything, and so could a reference whose cells do not name its exercises: then None, and
the mutant is graded whole.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

_CELL = re.compile(r"^# %% \[([^\]\n]+)\][^\n]*\n", re.M)
_BINDING = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom, ast.Pass)


def exercises_reached(mutant_cell: str, reference: str, exercises: Iterable[str]) -> tuple[str, ...] | None:
    """The exercises (in the given order) whose code reads a name `mutant_cell` binds or may
    change; None when that cannot be told (the mutant is graded whole)."""
    order = list(exercises)
    try:
        mutant = ast.parse(mutant_cell)
        cells = _cells(reference)
    except SyntaxError:
        return None
    bound = _bound_names(mutant)
    if bound is None or not cells or not set(order) <= set(cells):
        return None
    reads = _reads_by_name(cells.values())
    touched = bound | _declared_global(mutant) | (_read(mutant) & _data_names(cells.values()))
    reached = []
    for exercise in order:
        seen: set[str] = set()
        todo = list(_defined(cells[exercise]))
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            todo.extend(reads.get(name, ()))
        if seen & touched:
            reached.append(exercise)
    return tuple(reached)


def _cells(reference: str) -> dict[str, ast.Module]:
    """The reference module's named cells, parsed; {} when a name repeats."""
    parts = _CELL.split(reference)
    names, bodies = parts[1::2], parts[2::2]
    if len(set(names)) != len(names):
        return {}
    return {name.strip(): ast.parse(body) for name, body in zip(names, bodies)}


def _plain_target(target: ast.expr) -> bool:
    """Names, or tuples and lists of them: nothing that sets an attribute or an item."""
    if isinstance(target, ast.Name):
        return True
    if isinstance(target, (ast.Tuple, ast.List)):
        return all(_plain_target(e) for e in target.elts)
    return isinstance(target, ast.Starred) and _plain_target(target.value)


def _bound_names(cell: ast.Module) -> set[str] | None:
    """The names a cell binds, or None if it does anything else at its top level (a definition's
    decorators and defaults and an assignment's value are taken to change nothing but it)."""
    bound: set[str] = set()
    for stmt in cell.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # a docstring or a bare constant
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if not all(_plain_target(t) for t in targets):
                return None  # an attribute or an item set: a change to a shared object
        elif not isinstance(stmt, _BINDING):
            return None
        bound |= _defined_by(stmt)
    return bound


def _declared_global(cell: ast.Module) -> set[str]:
    """Names its functions rebind at module level when called (`global losses`)."""
    return {name for node in ast.walk(cell) if isinstance(node, (ast.Global, ast.Nonlocal)) for name in node.names}


def _read(cell: ast.Module) -> set[str]:
    return {n.id for n in ast.walk(cell) if isinstance(n, ast.Name)}


def _data_names(cells: Iterable[ast.Module]) -> set[str]:
    """Module-level names the reference binds by assignment (data a mutant's code could change
    in place, `history.append(...)`), not by a definition or an import."""
    return {name for cell in cells for stmt in cell.body if isinstance(stmt, (ast.Assign, ast.AnnAssign,
                                                                              ast.AugAssign))
            for name in _defined_by(stmt)}


def _defined_by(stmt: ast.AST) -> set[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _defined(cell: ast.Module) -> set[str]:
    """The module-level names a cell defines (in its top-level `if`, `for`, `with`, `try` too)."""
    names: set[str] = set()
    todo: list[ast.AST] = list(cell.body)
    while todo:
        node = todo.pop()
        names |= _defined_by(node)
        if not isinstance(node, _SCOPES):
            todo.extend(n for n in ast.iter_child_nodes(node) if isinstance(n, ast.stmt))
    return names


def _reads_by_name(cells: Iterable[ast.Module]) -> dict[str, set[str]]:
    """For each module-level name the reference defines, the names its definition reads (a
    function's body, decorators and defaults; an assignment's value); a name defined twice reads
    what both definitions read."""
    reads: dict[str, set[str]] = {}
    for cell in cells:
        for stmt in cell.body:
            read = _read(ast.Module(body=[stmt], type_ignores=[]))
            for name in _defined(ast.Module(body=[stmt], type_ignores=[])):
                reads.setdefault(name, set()).update(read - {name})
    return reads
