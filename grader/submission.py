"""Read a submission (notebook or module) into the code cells the kernel will run.

Only code is taken from a notebook: saved outputs, stale results and fake reports in it are
never read. Cells tagged `selfcheck` (the template's self-check cells) are skipped: they are for
the student, and the grader runs the same checks itself. A module is split into its top-level
statements (or at `# %%` markers when it has them) so that one statement that raises does not stop
the rest, as with notebook cells.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path
from typing import Literal

import nbformat
from pydantic import BaseModel, ConfigDict

from grader.errors import SubmissionUnreadable

MAX_BYTES = 20 * 1024 * 1024
SKIP_TAG = "selfcheck"
SUFFIXES = {".ipynb": "notebook", ".py": "module"}


class SourceCell(BaseModel):
    model_config = ConfigDict(frozen=True)

    index: int
    source: str
    first_line: int = 1


class Submission(BaseModel):
    """What the pipeline grades; `cells` is everything that will run, in order."""

    model_config = ConfigDict(frozen=True)

    path: str
    kind: Literal["notebook", "module"]
    sha256: str
    cells: list[SourceCell]
    assignment_hint: str | None = None


def _notebook_cells(text: str, path: str) -> tuple[list[SourceCell], str | None]:
    try:
        nb = nbformat.reads(text, as_version=4)
    except Exception as exc:  # nbformat raises several unrelated types for bad JSON/schema
        raise SubmissionUnreadable(path, f"not a valid Jupyter notebook ({type(exc).__name__})") from None
    cells = []
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        if SKIP_TAG in (cell.get("metadata", {}).get("tags") or []):
            continue
        source = cell.get("source", "")
        if source.strip():
            cells.append(SourceCell(index=i, source=source))
    hint = (nb.get("metadata", {}).get("grader") or {}).get("assignment")
    return cells, hint if isinstance(hint, str) else None


def _statement_starts(tree: ast.Module) -> list[int]:
    starts = []
    for node in tree.body:
        decorators = getattr(node, "decorator_list", [])
        starts.append(min([node.lineno] + [d.lineno for d in decorators]))
    return starts


def _module_cells(text: str) -> list[SourceCell]:
    lines = text.splitlines(keepends=True)
    markers = [i + 1 for i, line in enumerate(lines) if line.startswith("# %%")]
    if markers:
        starts = [1] + markers if markers[0] != 1 else markers
    else:
        try:
            starts = _statement_starts(ast.parse(text))
        except SyntaxError:
            starts = [1]  # run as one cell: the kernel reports the syntax error where it is
        starts = starts or [1]
    bounds = list(zip(starts, starts[1:] + [len(lines) + 1]))
    cells = []
    for n, (lo, hi) in enumerate(bounds):
        source = "".join(lines[lo - 1 : hi - 1])
        if source.strip():
            cells.append(SourceCell(index=n, source=source, first_line=lo))
    return cells


def read_submission(path: str | Path) -> Submission:
    """Load a submission or raise SubmissionUnreadable with one plain reason."""
    p = Path(path)
    kind = SUFFIXES.get(p.suffix.lower())
    if kind is None:
        raise SubmissionUnreadable(str(path), "expected a .ipynb notebook or a .py module")
    try:
        if p.stat().st_size > MAX_BYTES:
            raise SubmissionUnreadable(str(path), f"larger than {MAX_BYTES // 2**20} MiB")
        data = p.read_bytes()
    except FileNotFoundError:
        raise SubmissionUnreadable(str(path), "no such file") from None
    except IsADirectoryError:
        raise SubmissionUnreadable(str(path), "is a directory") from None
    except OSError as exc:
        raise SubmissionUnreadable(str(path), f"cannot be read ({exc.strerror})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SubmissionUnreadable(str(path), "is not UTF-8 text") from None
    hint = None
    if kind == "notebook":
        cells, hint = _notebook_cells(text, str(path))
    else:
        if "\x00" in text:
            raise SubmissionUnreadable(str(path), "contains NUL bytes, so it is not Python source")
        cells = _module_cells(text)
    return Submission(
        path=str(path),
        kind=kind,
        sha256=hashlib.sha256(data).hexdigest(),
        cells=cells,
        assignment_hint=hint,
    )
