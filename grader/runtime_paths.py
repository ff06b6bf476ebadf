"""Where the grader keeps things on this machine, decided here once.

    cache     `$XDG_CACHE_HOME/jax-course-grader/` (`~/.cache/...` when it is unset): what outlives a
              run, per user and machine, such as the store of compiled programs (`executables/`,
              grader/sandbox/executables.py, which GRADER_EXECUTABLES moves or turns off)
    scratch   a fresh folder under TMPDIR (any writable directory: SLURM and CI runners set it) for
              each kernel, verifier, fork server and build of the store, mode 0700, named
              `grade-<pid>-[<kind>-]p<pid namespace>-XXXXXXXX` so that `grader.sandbox.layers.sweep(pid)`
              finds what a dead grader process left, and the next grader process the folders of
              every grader process of its pid namespace that is gone (`sweep_dead_scratch`: a
              grader killed outright, by the OOM killer or a power cut); under /tmp instead when
              TMPDIR's path is too long for the unix sockets inside it. `remove_scratch` removes
              one whatever modes its contents were given, and says what it could not remove

The standard library only: `grade FILE` starts its first kernel before anything heavy is imported
(grader/kernel/launch.py).
"""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterator
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


def _namespace_tag() -> str:
    """`p<inode of this process's pid namespace>-`: a pid names a process only in its namespace,
    and a grader in a container (its own pid namespace) may share the temporary folder."""
    try:
        return f"p{os.stat('/proc/self/ns/pid').st_ino}-"
    except OSError:
        return "p0-"


def _prefix(kind: str) -> str:
    return scratch_tag() + (f"{kind}-" if kind else "") + _namespace_tag()


def scratch_directory(kind: str = "", *, socket_room: int = 0, sweep: bool = True) -> Path:
    """A fresh scratch folder of this process, `grade-<pid>-<kind>-p<ns>-XXXXXXXX`, mode 0700.
    `socket_room`: the bytes a unix socket's path needs from the temporary folder on (the folder's
    own name included, less its namespace tag); where TMPDIR leaves less than that, the folder is
    made under /tmp. The first folder of a process first sweeps the dead graders' (`sweep=False`:
    the caller does it later, off the way of a kernel's boot)."""
    base = tempfile.gettempdir()
    if socket_room and len(os.fsencode(base)) + socket_room + len(_namespace_tag()) > SOCKET_PATH_MAX:
        base = SHORT_TEMPORARY
    if sweep:
        sweep_dead_scratch(once=True)
    return Path(tempfile.mkdtemp(prefix=_prefix(kind), dir=base))


def temporary_scratch(kind: str) -> tempfile.TemporaryDirectory[str]:
    """A scratch folder of this process that is removed when its `with` block ends."""
    return tempfile.TemporaryDirectory(prefix=_prefix(kind))


# ----------------------------------------------------------------------------- removal

REPORTED_FAILURES = 5
"""Of what a removal could not remove, how many entries are named (the rest are counted)."""


def remove_scratch(path: Path | str, *, say: bool = True) -> list[str]:
    """Remove a scratch folder and everything in it, whatever modes its contents were given: each
    folder is given back to its owner (u+rwx) before it is read, so a folder made enter-only
    (0311) or read-only cannot keep files behind; nothing is followed out of it (symbolic links
    are removed, not followed) and no more than one folder is open at a time, however deep the
    tree. Returns what could not be removed ("path: reason"), which is also said on stderr
    (unless `say` is false): nothing in it is silently left for the next user of the machine."""
    path = Path(path)
    failures: list[str] = []
    try:
        parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        if not isinstance(exc, FileNotFoundError):
            failures.append(f"{path}: {exc.strerror}")
        return _said(path, failures, say)
    try:
        _remove_entry(parent, path.name, path, failures)
    finally:
        os.close(parent)
    return _said(path, failures, say)


def _said(path: Path, failures: list[str], say: bool) -> list[str]:
    if failures and say:
        named = "; ".join(failures[:REPORTED_FAILURES])
        more = f" and {len(failures) - REPORTED_FAILURES} more" if len(failures) > REPORTED_FAILURES else ""
        print(f"grade: could not remove {len(failures)} entries of the scratch folder {path} ({named}{more}): "
              "remove them by hand", file=sys.stderr)
    return failures


def _take_back(parent: int, name: str) -> bool:
    """Whether `name` in `parent` is a folder (not a link to one); if so it is made u+rwx, so that
    its owner can list and empty it."""
    try:
        handle = os.open(name, os.O_PATH | os.O_NOFOLLOW, dir_fd=parent)
    except OSError:
        return False
    try:
        mode = os.fstat(handle).st_mode
        if not stat.S_ISDIR(mode):
            return False
        if mode & 0o700 != 0o700:
            os.chmod(f"/proc/self/fd/{handle}", stat.S_IMODE(mode) | 0o700)  # this folder, never a link's target
        return True
    except OSError:
        return True  # a folder whose mode could not be changed: opening it says why
    finally:
        os.close(handle)


def _remove_entry(parent: int, name: str, path: Path, failures: list[str]) -> None:
    """Remove `name` (at `path`) from the folder open as `parent`, depth first."""
    if not _take_back(parent, name):
        try:
            os.unlink(name, dir_fd=parent)
        except FileNotFoundError:
            pass
        except OSError as exc:
            failures.append(f"{path}: {exc.strerror}")
        return
    # Folders to visit, by level: (its name in its parent, the path, its subfolders still to
    # visit). Only the folder being read is open; the way back up is "..".
    try:
        here = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
    except OSError as exc:
        failures.append(f"{path}: {exc.strerror}")
        return
    levels = [(name, path, _empty_files(here, path, failures))]
    try:
        while levels:
            _, where, pending = levels[-1]
            if pending:
                child = pending.pop()
                try:
                    below = os.open(child, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=here)
                except OSError as exc:
                    failures.append(f"{where / child}: {exc.strerror}")
                    continue
                os.close(here)
                here = below
                levels.append((child, where / child, _empty_files(here, where / child, failures)))
                continue
            done, where, _ = levels.pop()
            up = parent if not levels else os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=here)
            os.close(here)
            here = up
            try:
                os.rmdir(done, dir_fd=here)
            except OSError as exc:
                if exc.errno != errno.ENOTEMPTY:  # not empty: what is left in it is named already
                    failures.append(f"{where}: {exc.strerror}")
    finally:
        if here != parent:
            os.close(here)


def _empty_files(folder: int, path: Path, failures: list[str]) -> list[str]:
    """Unlink every entry of the open folder that is not a folder; its subfolders, made u+rwx."""
    folders = []
    try:
        names = os.listdir(folder)
    except OSError as exc:
        failures.append(f"{path}: {exc.strerror}")
        return []
    for name in names:
        if _take_back(folder, name):
            folders.append(name)
            continue
        try:
            os.unlink(name, dir_fd=folder)
        except FileNotFoundError:
            pass
        except OSError as exc:
            failures.append(f"{path / name}: {exc.strerror}")
    return folders


# ----------------------------------------------------------------------------- dead graders' scratch

_SWEPT = False
SANDBOX_UID = 65534  # the user a root grader's sandboxes run as (nobody): their scratch is theirs
_SCRATCH_NAME = re.compile(r"grade-(\d+)-(?:[a-z]+-)?(p\d+-)[^/]{8}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _mount_points() -> set[str]:
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return set()
    return {line.split()[1].replace("\\040", " ") for line in lines if len(line.split()) > 1}


def _scratch_entries() -> Iterator[tuple[os.DirEntry, int]]:
    """The scratch folders of this pid namespace's graders in the temporary folders, with the pid
    of the process that made each."""
    tag = _namespace_tag()
    for base in dict.fromkeys([tempfile.gettempdir(), SHORT_TEMPORARY]):
        try:
            entries = list(os.scandir(base))
        except OSError:
            continue
        for entry in entries:
            match = _SCRATCH_NAME.fullmatch(entry.name)
            if match and match.group(2) == tag:
                yield entry, int(match.group(1))


def scratch_of(pid: int) -> list[Path]:
    """The scratch folders process `pid` of this pid namespace made that are still there."""
    return [Path(entry.path) for entry, maker in _scratch_entries() if maker == pid]


def _sweepable_owners() -> set[int]:
    """Whose folders this grader may take as its own: its user's, and as root also the sandbox
    user's (a root grader's scratch belongs to the kernel's user once the kernel ran)."""
    return {os.geteuid(), SANDBOX_UID} if os.geteuid() == 0 else {os.geteuid()}


def sweep_dead_scratch(*, once: bool = False) -> list[Path]:
    """Remove the scratch folders that grader processes of this pid namespace left when they were
    killed outright (the OOM killer, a power cut, SIGKILL): this user's `grade-<pid>-...p<ns>-`
    folders in the temporary folder (and /tmp) whose process is gone; a tmpfs left mounted on one
    is unmounted first (root). Folders of live processes, of other users and of other pid
    namespaces (a container's grader) are never touched. Returns the folders removed.
    `once`: only on a process's first call."""
    global _SWEPT
    if once and _SWEPT:
        return []
    _SWEPT = True
    removed: list[Path] = []
    mounts: set[str] | None = None
    for entry, maker in _scratch_entries():
        if maker == os.getpid() or _alive(maker):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid not in _sweepable_owners():
            continue
        if mounts is None:
            mounts = _mount_points()
        if entry.path in mounts:
            import subprocess

            if subprocess.run(["umount", "-l", entry.path], capture_output=True).returncode != 0:
                continue
        if not remove_scratch(entry.path):
            removed.append(Path(entry.path))
    return removed
