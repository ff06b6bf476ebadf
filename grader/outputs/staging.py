"""Update a batch's folder all at once: every output is written to `OUT/.staging/` first, and a
commit moves them into place, so a crash midway leaves the old consistent state.

A batch's outputs are many files (the gradebook, each student's report and feedback page,
summary.csv, index.html, the exports) that must agree. No file system renames many files in one
step, so the commit is a write-ahead log of one line per file:

1. everything is written under `OUT/.staging/` (the gradebook as a copy, via SQLite's backup),
   and the files of OUT to delete (a removed student's) are listed in `OUT/.staging/DELETE`;
2. the list of staged files is written to `OUT/.staging/COMMIT`, atomically (tmp, fsync,
   rename): this is the commit point;
3. each staged file is renamed over its counterpart in OUT (each rename is atomic), each file
   to delete is deleted, then the staging folder is removed.

A crash before step 2 leaves OUT untouched (the next run discards `.staging`); a crash during
step 3 is finished by the next run (`recover`), which is what every command that writes OUT
calls first. Readers of OUT never see a half-written file.

One command at a time: `locked(out_dir)` holds an exclusive lock on `OUT/.lock` (flock, released
by the kernel when the process ends, also by SIGKILL) for as long as a command updates OUT, and a
second command refuses in one sentence rather than discard the first one's staging folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from grader.atomic import TEMPORARY_SUFFIX, atomic_file
from grader.errors import UsageError
from grader.outputs.names import DELETIONS, GRADEBOOK, LOCK, MANIFEST, STAGING

_held: dict[Path, int] = {}  # out folder -> how many `locked` blocks of this process hold it
SERVICE_HOLDER = "grade serve"  # how the service names itself in OUT/.lock
HOLDER_LIMIT = 200  # bytes of OUT/.lock read back: who holds it, in the holder's own words


def _holder(fd: int) -> str:
    """What the process holding OUT's lock wrote in it ("grade serve (pid 12)"), or ""."""
    try:
        said = os.pread(fd, HOLDER_LIMIT, 0).decode("utf-8", "replace")
    except OSError:
        return ""
    return "".join(ch for ch in said if ch.isprintable()).strip()


@contextlib.contextmanager
def locked(out_dir: Path, holder: str | None = None) -> Iterator[None]:
    """Hold OUT's lock (reentrant within a process); another process holding it: UsageError.
    `holder`, a long-lived command (the service), is written in the lock file so that a command
    refused meanwhile can say who holds OUT and what to do."""
    key = out_dir.resolve()
    if key in _held:
        _held[key] += 1
        try:
            yield
        finally:
            _held[key] = _held.get(key, 1) - 1
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(out_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held_by = _holder(fd)
            if held_by.startswith(SERVICE_HOLDER):
                raise UsageError(f"{held_by} is serving {out_dir}: stop it (Ctrl-C), run this command, then "
                                 "start it again (hand-ins wait in the gradebook meanwhile)") from None
            raise UsageError(f"another grade command is updating {out_dir} right now: "
                             "wait for it to finish, then run this one again") from None
        os.ftruncate(fd, 0)
        if holder:
            os.pwrite(fd, holder.encode("utf-8")[:HOLDER_LIMIT], 0)
        _held[key] = 1
        try:
            yield
        finally:
            _held.pop(key, None)  # never raises: this may run in a finalizer (a signal mid-enter)
    finally:
        os.close(fd)  # releases the lock


def recover(out_dir: Path) -> bool:
    """Finish a commit a crash interrupted, or discard an uncommitted staging folder (call it
    holding OUT's lock: another live command's staging is never touched). Returns whether a
    commit was finished."""
    root = out_dir / STAGING
    if (root / MANIFEST).is_file():
        _apply(out_dir)
        return True
    if root.exists():
        shutil.rmtree(root, ignore_errors=True)
    return False


def _apply(out_dir: Path) -> None:
    root = out_dir / STAGING
    for line in (root / MANIFEST).read_text(encoding="utf-8").splitlines():
        source, target = root / line, out_dir / line
        if source.is_file():  # moved already by the commit a crash interrupted
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)  # a move, not a write: the bytes were written and synced
    if (root / DELETIONS).is_file():
        for line in (root / DELETIONS).read_text(encoding="utf-8").splitlines():
            _delete(out_dir, line)
    (root / MANIFEST).unlink()
    shutil.rmtree(root, ignore_errors=True)


def _delete(out_dir: Path, relative: str) -> None:
    """Delete OUT/relative (gone already: a commit a crash interrupted), then the folders it
    leaves empty below OUT (`gradescope/<student>/`)."""
    parts = Path(relative).parts
    if not parts or Path(relative).is_absolute() or ".." in parts or parts[0] == STAGING:
        return  # never outside OUT, nor the staging folder: names come from outputs/names.py
    target = out_dir / relative
    target.unlink(missing_ok=True)
    for folder in target.parents:
        if folder == out_dir or out_dir not in folder.parents:
            break
        try:
            folder.rmdir()
        except OSError:  # not empty, or gone
            break


class Staging:
    """One update of OUT: `path(rel)` to write, `commit()` to publish, or drop it (`abort`).
    It holds OUT's lock from creation until commit or abort."""

    def __init__(self, out_dir: Path):
        self.out_dir = out_dir
        self._deleted: list[str] = []
        self._lock = locked(out_dir)
        self._lock.__enter__()
        try:
            recover(out_dir)
            self.root = out_dir / STAGING
            self.root.mkdir()
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise

    def path(self, relative: str | Path) -> Path:
        target = self.root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def write_if_changed(self, relative: str, content: bytes) -> bool:
        """Stage `content` unless OUT already holds exactly it (an unchanged page stays put)."""
        current = self.out_dir / relative
        try:
            if current.is_file() and current.read_bytes() == content:
                return False
        except OSError:
            pass
        self.path(relative).write_bytes(content)
        return True

    def delete(self, relative: str) -> None:
        """Delete OUT/relative at the commit (with every staged file, or not at all)."""
        if relative not in self._deleted:
            self._deleted.append(relative)

    def gradebook(self) -> Path:
        """A copy of OUT's gradebook to record into (a fresh one when there is none yet)."""
        staged = self.path(GRADEBOOK)
        current = self.out_dir / GRADEBOOK
        if current.is_file():
            source, copy = sqlite3.connect(current), sqlite3.connect(staged)
            try:
                source.backup(copy)
            finally:
                source.close()
                copy.close()
        return staged

    def commit(self) -> None:
        """Publish every staged file (the gradebook's connections must be closed by now)."""
        files = sorted(p.relative_to(self.root).as_posix() for p in self.root.rglob("*")
                       if p.is_file() and p.name != MANIFEST and not p.name.endswith(TEMPORARY_SUFFIX)
                       and p != self.root / DELETIONS)
        if self._deleted:  # before the commit point: a crash before it deletes nothing
            with atomic_file(self.root / DELETIONS, text=True) as f:
                f.write("".join(line + "\n" for line in self._deleted))
        with atomic_file(self.root / MANIFEST, text=True) as f:
            f.write("".join(line + "\n" for line in files))
        try:
            _apply(self.out_dir)
        finally:
            self._lock.__exit__(None, None, None)

    def abort(self) -> None:
        try:
            shutil.rmtree(self.root, ignore_errors=True)
        finally:
            self._lock.__exit__(None, None, None)
