"""The grader's own import graph, read from its source: what the student pack copies (the
modules the self-check can import, and nothing else) and what tests/test_layout.py checks (no
cycle, no wing importing one above it).

Every import statement counts, those inside functions too; an `if TYPE_CHECKING:` block does not
(it never runs). Importing `a.b.c` imports the packages `a` and `a.b` as well.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its `__init__.py`)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = [package.name, *path.relative_to(package).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def runtime_imports(tree: ast.AST) -> list[str]:
    """Every module an import statement names (`from a import b` names `a` and `a.b`)."""
    names: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names.extend(f"{node.module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module's imports within the package (the root package's own `__init__` imports
    nothing when it runs, and is left out as a target)."""
    found = modules(package)
    graph = {}
    for name, path in found.items():
        edges = set()
        for imported in runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            while imported not in found and "." in imported:
                imported = imported.rsplit(".", 1)[0]
            if imported in found and imported not in (name, package.name):
                edges.add(imported)
        graph[name] = edges
    return graph


def closure(graph: dict[str, set[str]], starts: list[str]) -> set[str]:
    """The modules importing `starts` can load, their packages included."""
    seen: set[str] = set()
    todo = list(starts)
    while todo:
        parts = todo.pop().split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            if name in graph and name not in seen:
                seen.add(name)
                todo.extend(graph[name])
    return seen


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (its modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None
