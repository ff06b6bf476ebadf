"""What a student's kernel can open: every path it can stat and every mount it has, listed from
inside a sandboxed kernel (fresh, and forked from a kernel server) and judged from the host.

Found by an attack: the store of programs compiled from the reference solution was bound
read-only into every kernel, so a submission read the reference's programs and handed them back
as its own exports (100 on every module check). Nothing derived from the answer key (the
reference's programs, the assignment folder with its references and hidden-input generators,
the solutions) may be reachable from a kernel: only the student's own scratch, the grader's
kernel-side code (grader/kernel/inside/), the course's Python environment, the system's own files
and the one library the kernel preloads (grader/sandbox/futex_shim.py, built from the grader's own
C source, bound at /run/grader/ and never at its place in the grader's home).

The allowed places are written here, not taken from `Sandbox`, so that the test does not pass
whatever the sandbox binds; and every readable file that has the size of a secret file is
compared with it byte for byte, so that a copy of the answer key in an allowed place (a
non-editable install that packs the assignments, say) is caught too.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

from grader.kernel.client import Kernel
from grader.kernel.server import KernelServer
from grader.sandbox import futex_shim
from grader.sandbox.layers import KERNEL_INSIDE, SandboxPolicy, _kernel_package_dirs, available

ROOT = Path(__file__).resolve().parent.parent
ISOLATION = available()
pytestmark = [pytest.mark.kernel,
              pytest.mark.skipif("namespaces" not in ISOLATION.layers,
                                 reason=f"needs bubblewrap's namespaces: {ISOLATION.missing.get('namespaces')}")]

SYSTEM = [Path(p) for p in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/proc", "/dev",
                            "/etc/ld.so.cache", "/etc/localtime", "/etc/passwd", "/etc/group",
                            "/etc/nsswitch.conf")]
SHIM = Path("/run/grader/libgrader-futex-private.so")  # the preloaded library, bound there alone

# Run in the kernel: every path it can lstat below /, without following a link or entering
# /proc and /dev (its own pid namespace and bwrap's minimal /dev), and its mount points.
WALK = r'''
import json, os, stat
entries = []
for top, dirs, files in os.walk("/", followlinks=False):
    if top == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "dev", "sys")]
    for name in dirs + files:
        path = os.path.join(top, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        entries.append([path, stat.S_ISREG(info.st_mode), info.st_size])
mounts = [line.split()[4] for line in open("/proc/self/mountinfo")]
with open(os.path.join(os.environ["HOME"], "reach.json"), "w") as f:
    json.dump({"entries": entries, "mounts": mounts}, f)
'''


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A compiled-program store as the grader's (one entry, named as JAX names them)."""
    path = tmp_path_factory.mktemp("store")
    path.chmod(0o755)
    entry = path / ("jit_newton_sqrt-" + "a" * 64 + "-cache")
    entry.write_bytes(b"the reference's compiled program " + os.urandom(64))
    entry.chmod(0o644)
    return path


def _allowed(scratch: Path) -> list[Path]:
    return [*SYSTEM, Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), KERNEL_INSIDE,
            *_kernel_package_dirs(), scratch.resolve(),
            *([SHIM] if futex_shim.library() is not None else [])]


def _secrets(store: Path) -> dict[int, list[Path]]:
    """Files derived from the answer key, by size: the assignments, the solutions, the store."""
    by_size: dict[int, list[Path]] = {}
    for folder in (ROOT / "assignments", ROOT / "solutions", store):
        for path in folder.rglob("*"):
            if path.is_file() and not path.is_symlink() and "__pycache__" not in path.parts:
                by_size.setdefault(path.stat().st_size, []).append(path)
    return by_size


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _reach(kernel: Kernel) -> dict:
    run = kernel.run(WALK, 300)
    assert run.status == "ok", (run.ename, run.evalue)
    return json.loads((kernel.scratch / "reach.json").read_text())


@pytest.fixture(scope="module", params=["fresh", "forked"])
def reach(request: pytest.FixtureRequest, store: Path) -> tuple[dict, Path]:
    """What one kernel of each kind reaches (one walk each, judged by both tests below)."""
    policy = SandboxPolicy(executables=store)
    if request.param == "fresh":
        with Kernel(sandbox=policy) as kernel:
            return _reach(kernel), kernel.scratch
    if not ISOLATION.sandboxed:
        pytest.skip(f"a kernel server needs the whole sandbox: {ISOLATION.missing}")
    server = KernelServer(policy).start()
    try:
        with Kernel(sandbox=policy, server=server) as kernel:
            return _reach(kernel), kernel.scratch
    finally:
        server.kill()


def _within(path: str, folder: Path) -> bool:
    """`path` is `folder` or below it (Path.parents, as strings: a walk lists 100,000 paths or more)."""
    top = str(folder)
    return path == top or path.startswith(top.rstrip("/") + "/")


def test_a_kernel_reaches_nothing_outside_its_files_the_probe_and_the_python_environment(
        reach: tuple[dict, Path]) -> None:
    found, scratch = reach
    allowed = _allowed(scratch)
    paths = [p for p, _, _ in found["entries"]]
    assert len(paths) > 1000  # it did walk: the interpreter and the venv are there
    # the private /tmp is the kernel's own, empty at start: what is below it must be the scratch
    # or a parent of an allowed place (bwrap makes them, empty, for a bind), never a bound host path
    outside = [p for p in paths
               if p != "/tmp" and not any(_within(p, a) for a in allowed)
               and not any(_within(str(a), Path(p)) for a in allowed)]
    assert outside == []
    # of the grader's own folder, only its kernel wing's inside/ (and the empty folders above it)
    seen_of_grader = [p for p in paths if _within(p, ROOT / "grader")]
    assert seen_of_grader and all(_within(p, KERNEL_INSIDE) or _within(str(KERNEL_INSIDE), Path(p))
                                  for p in seen_of_grader), seen_of_grader
    for mount in found["mounts"]:
        point = Path(mount)
        assert point in (Path("/"), Path("/tmp")) or any(point == a or a in point.parents for a in allowed), mount


def test_no_file_a_kernel_can_read_is_the_answer_key(reach: tuple[dict, Path], store: Path) -> None:
    found, _ = reach
    paths = [p for p, _, _ in found["entries"]]
    for forbidden in (ROOT / "assignments", ROOT / "solutions", store, ROOT / "grader" / "checks"):
        assert not any(_within(p, forbidden) for p in paths), forbidden
    secrets = _secrets(store)
    copies = []
    for path, regular, size in found["entries"]:
        if not regular or size not in secrets or size == 0:
            continue
        digest = _digest(Path(path))  # the kernel sees host paths at the same place
        copies += [(path, str(s)) for s in secrets[size] if digest is not None and digest == _digest(s)]
    assert copies == []


def test_the_kernel_is_told_of_no_store(store: Path) -> None:
    """JAX in the kernel is pointed at no compilation cache (it would look for the store)."""
    with Kernel(sandbox=SandboxPolicy(executables=store)) as kernel:
        run = kernel.run("import os\nassert 'JAX_COMPILATION_CACHE_DIR' not in os.environ, "
                         "os.environ['JAX_COMPILATION_CACHE_DIR']", 60)
    assert run.status == "ok", run.evalue
