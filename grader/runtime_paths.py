"""Where the grader keeps things on this machine, decided here once.

    cache     `$XDG_CACHE_HOME/jax-course-grader/` (`~/.cache/...` when it is unset): what outlives a
              run, per user and machine, such as the store of compiled programs (`executables/`,
              grader/sandbox/executables.py, which GRADER_EXECUTABLES moves or turns off)
    scratch   a fresh folder under TMPDIR (any writable directory: SLURM and CI runners set it) for
              each kernel, verifier, fork server and build of the store, named `grade-<pid>-...`
              so that `grader.sandbox.layers.sweep(pid)` finds what a dead grader process left;
              under /tmp instead when TMPDIR's path is too long for the unix sockets inside it

The standard library only: `grade FILE` starts its first kernel before anything heavy is imported
(grader/kernel/launch.py).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

CACHE_NAME = "jax-course-grader"
SOCKET_PATH_MAX = 107
"""Bytes of a unix socket path (sun_path, less its NUL)."""
SHORT_TEMPORARY = "/tmp"


def cache_dir() -> Path:
    """The grader's folder in the user's cache (not created here)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / CACHE_NAME


def scratch_tag(pid: int | None = None) -> str:
    """How the scratch folders of process `pid` (this one by default) begin."""
    return f"grade-{os.getpid() if pid is None else pid}-"


def _prefix(kind: str) -> str:
    return scratch_tag() + (f"{kind}-" if kind else "")


def scratch_directory(kind: str = "", *, socket_room: int = 0) -> Path:
    """A fresh scratch folder of this process, `grade-<pid>-<kind>-XXXXXXXX`. `socket_room`: the
    bytes a unix socket's path needs from the temporary folder on (the folder's own name
    included); where TMPDIR leaves less than that, the folder is made under /tmp."""
    base = tempfile.gettempdir()
    if socket_room and len(os.fsencode(base)) + socket_room > SOCKET_PATH_MAX:
        base = SHORT_TEMPORARY
    return Path(tempfile.mkdtemp(prefix=_prefix(kind), dir=base))


def temporary_scratch(kind: str) -> tempfile.TemporaryDirectory[str]:
    """A scratch folder of this process that is removed when its `with` block ends."""
    return tempfile.TemporaryDirectory(prefix=_prefix(kind))
