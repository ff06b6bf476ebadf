"""Programs compiled once from an assignment's reference solution, which every sandboxed
verifier reads instead of compiling the same program again. No kernel reads them.

Once kernels and verifiers are forked, XLA's compiles are much of what a submission costs: the
verifier compiles each exported module it runs (14 for the ch2-jit reference). Many of those
programs are ones the reference solution compiles too: a correct answer written the reference's
way exports the same module (locations stripped), and the verifier's wrapper around it is the same
program. JAX's persistent compilation cache finds a program by a hash of the program itself (debug
locations stripped), the compile options, the XLA flags and the jaxlib and backend versions, so
what it finds is the executable a fresh compile would have produced.

Trust, the same as before it:
- Only the grader writes the store. `build()` grades the reference solution once, in a sandbox
  whose cache directory is a fresh writable one, and adopts what that run compiled: regular files
  with JAX's names, bounded in size and number. No student's program is ever compiled into it, so
  nothing a submission does can change what another submission runs.
- Every other verifier sees the store read-only (a bwrap bind), and JAX is told never to write
  there (a minimum compile time no compile reaches). Without the namespaces layer there is no
  read-only bind, and the store is not used.
- No kernel is given the store or told where it is: it is derived from the answer key, and a
  kernel runs the student's code (a submission that read it handed the reference's programs back
  as its own; `Sandbox.store()`, tests/test_kernel_reach.py). A kernel compiles what it runs.
- The store is per machine (`~/.cache/jax-course-grader/executables/<jaxlib>-<cpu>`): an
  executable is compiled for this CPU. `GRADER_EXECUTABLES=off` turns it off, `=DIR` moves it.

Batches, `grade validate` and a single `grade FILE` build the store for an assignment the first
time they need it, if its reference solution is on disk (`solutions/<id>.ipynb` or `.py` beside
the assignments folder); a student's pack has none and compiles everything, as before.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import re
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from grader.atomic import write_atomic
from grader.runtime_paths import cache_dir

if TYPE_CHECKING:
    from grader.assignment import Assignment
    from grader.sandbox.layers import SandboxPolicy

ENV = "GRADER_EXECUTABLES"
ENTRY = re.compile(r"[A-Za-z0-9_.\-]{1,200}-cache")  # JAX's file names: <module name>-<sha256>-cache
MAX_ENTRY_BYTES = 64 * 2**20
MAX_ENTRIES = 4096
MAX_STORE_BYTES = 256 * 2**20  # over it, emptied and rebuilt as assignments need it (ch2-jit: 0.5 MB)
BUILT = "built"  # one marker per assignment version built: <id>-<digest>.json
SUMS = "sums"  # the sha256 of each entry as adopted: JAX loads whatever bytes sit under a key


@functools.cache
def _platform_tag() -> str:
    """jaxlib's version and this CPU (model and instruction-set flags), as a directory name."""
    from importlib import metadata

    try:
        jaxlib = metadata.version("jaxlib")
    except metadata.PackageNotFoundError:
        jaxlib = "none"
    try:
        cpu = "\n".join(line for line in Path("/proc/cpuinfo").read_text().splitlines()
                        if line.startswith(("model name", "flags")))
    except OSError:
        cpu = platform.processor()
    digest = hashlib.sha256(f"{platform.machine()}\n{cpu}\n{sys.version}".encode()).hexdigest()[:12]
    return f"jaxlib-{jaxlib}-{platform.machine()}-{digest}"


def store() -> Path | None:
    """The store's directory, created (mode 0755, the grader's), or None when it is turned off
    or this machine cannot bind it read-only."""
    from grader.sandbox.layers import detect

    setting = os.environ.get(ENV, "")
    if setting.lower() in ("off", "0", "no", "false"):
        return None
    if "namespaces" not in detect().layers:
        return None
    if setting:
        root = Path(setting)
    else:
        root = cache_dir() / "executables"  # beside the detective's truth
    path = (root / _platform_tag()).absolute()
    try:
        for directory in (path, path / BUILT, path / SUMS):
            directory.mkdir(parents=True, exist_ok=True)
            os.chmod(directory, 0o755)
        _verify(path)
    except OSError:
        return None
    return path


@functools.cache
def _verify(path: Path) -> int:
    """Once per process: remove every entry whose bytes are not those adopted (another program's
    executable under this key would be loaded as this one's: a verifier that cannot start, or
    worse), and then every build marker, so that the next build puts back what is missing.
    Returns how many entries were removed."""
    removed = 0
    for entry in path.iterdir():
        if not ENTRY.fullmatch(entry.name):
            continue
        try:
            expected = (path / SUMS / entry.name).read_text().strip()
        except OSError:
            expected = ""
        if _sha256(entry) != expected:
            entry.unlink(missing_ok=True)
            (path / SUMS / entry.name).unlink(missing_ok=True)
            removed += 1
    if removed:
        for marker in (path / BUILT).iterdir():
            marker.unlink(missing_ok=True)
    return removed


def _sha256(file: Path) -> str | None:
    try:
        with open(file, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return None


def sandbox_policy(sandboxed: bool) -> SandboxPolicy | None:
    """The default sandbox of kernels and verifiers, with the store where there is one (which
    only a verifier's sandbox binds: `Sandbox.store()`)."""
    from grader.sandbox.layers import SandboxPolicy

    return SandboxPolicy(executables=store()) if sandboxed else None


def marker(path: Path, assignment: Assignment, solution: Path) -> Path:
    """Built for this assignment, this reference solution and this probe and verifier (the
    programs they compile)."""
    from grader.assignment.digest import assignment_digest
    from grader.sandbox.layers import KERNEL_INSIDE, VERIFIER_INSIDE

    key = hashlib.sha256(assignment_digest(assignment.folder).encode() + solution.read_bytes())
    for runtime in sorted([*KERNEL_INSIDE.glob("*.py"), *VERIFIER_INSIDE.glob("*.py")]):
        key.update(runtime.read_bytes())
    return path / BUILT / f"{assignment.spec.id}-{key.hexdigest()[:16]}.json"


def adopt(compiled: Path, path: Path) -> int:
    """Copy the entries a build wrote into the store: regular files with JAX's names and a
    bounded size, never following a link; each appears whole (a rename) or not at all."""
    added = 0
    try:
        names = sorted(os.listdir(compiled))[:MAX_ENTRIES]
    except OSError:
        return 0
    (path / SUMS).mkdir(mode=0o755, exist_ok=True)
    for name in names:
        if not ENTRY.fullmatch(name) or (path / name).exists():
            continue
        try:
            fd = os.open(compiled / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_ENTRY_BYTES:
            os.close(fd)
            continue
        with os.fdopen(fd, "rb") as file:
            data = file.read(MAX_ENTRY_BYTES + 1)
        if len(data) > MAX_ENTRY_BYTES:
            continue
        for target, content in ((path / SUMS / name, hashlib.sha256(data).hexdigest().encode()),
                                (path / name, data)):  # the sum first: an entry never lacks one
            write_atomic(target, content, mode=0o644)
        added += 1
    return added


def size(path: Path) -> int:
    return sum(entry.stat().st_size for entry in path.iterdir() if entry.is_file())


def empty(path: Path) -> None:
    for directory in (path, path / BUILT, path / SUMS):
        for entry in directory.iterdir():
            if entry.is_file():
                entry.unlink(missing_ok=True)
