"""Replace a file whole: a reader sees the old bytes or the new ones, never half of either.

The one place the grader replaces a file by renaming (tests/test_one_owner.py checks it). The new
bytes go to a temporary file beside the target, `.<name>.<pid>.tmp`: in the same folder, so the
rename is atomic; named after this process, so two graders writing one target (the store of
compiled programs, a seccomp filter) never share one; never followed if it is a link; and ending
in `.tmp`, so a staging folder's commit never publishes one (grader/outputs/staging.py). It is
flushed to disk (fsync) before the rename, so a crash after the rename cannot leave the target
empty. If anything fails before the rename, the temporary file is removed and the target is
untouched.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

TEMPORARY_SUFFIX = ".tmp"


def temporary_path(path: Path) -> Path:
    """Where the new bytes of `path` are written before they replace it."""
    return path.with_name(f".{path.name}.{os.getpid()}{TEMPORARY_SUFFIX}")


@contextmanager
def atomic_file(path: Path, *, text: bool = False, newline: str | None = None,
                mode: int | None = None) -> Iterator[IO[Any]]:
    """A file to write that replaces `path` when the block ends without an error (UTF-8 when
    `text`). `mode` sets the permissions exactly (the umask aside); without it they are a new
    file's."""
    tmp = temporary_path(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666 if mode is None else mode)
    try:
        with os.fdopen(fd, "w" if text else "wb", encoding="utf-8" if text else None,
                       newline=newline if text else None) as file:
            if mode is not None:
                os.fchmod(file.fileno(), mode)
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: Path, data: bytes | str, *, mode: int | None = None) -> Path:
    """Replace `path` with `data` (a str is written as UTF-8); see `atomic_file`."""
    with atomic_file(path, mode=mode) as file:
        file.write(data.encode("utf-8") if isinstance(data, str) else data)
    return path
