"""The digest of an assignment folder: everything a verdict depends on, in one sha256.

A stored result is current only while the assignment it was graded against is unchanged: the
spec (a tolerance, a point value, a case), the references, the custom checks and any data file
beside them. Loosening one check's tolerance therefore makes every stored result of that
assignment stale and the next run regrades them all. (Deciding which students a change could
not affect would need the old and new verdict of every check; regrading the assignment is the
rule an instructor can predict.) Hand-written mutants, caches and hidden files are left out:
they are the instructor's tests of the assignment, not part of it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

LEFT_OUT = {"mutants", "__pycache__"}


def _files(folder: Path) -> list[Path]:
    found: list[Path] = []
    for path in sorted(folder.rglob("*")):
        parts = path.relative_to(folder).parts
        if any(p in LEFT_OUT or p.startswith(".") for p in parts) or path.is_symlink() or not path.is_file():
            continue
        found.append(path)
    return found


def assignment_digest(folder: Path) -> str:
    """sha256 over each file's relative path and bytes, in sorted order (renaming a file changes
    it, as does changing one byte)."""
    digest = hashlib.sha256()
    for path in _files(folder):
        name = path.relative_to(folder).as_posix().encode()
        data = path.read_bytes()
        digest.update(len(name).to_bytes(8, "big") + name + len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()
