"""The sandbox a kernel runs in, made of ordinary Linux parts (no Docker, no systemd).

Layers, each optional so that grading degrades honestly where one is missing:

    namespaces   bubblewrap: own pid, network, ipc and uts namespaces; a new root that holds only
                 /usr, the interpreter, the venv, the probe file and the kernel's scratch directory;
                 a private size-limited /tmp; the environment cleared; dies with the grader
    user         setpriv drops to an unprivileged uid/gid with no capabilities and no_new_privs
    seccomp      a system-call denylist (grader/sandbox/seccomp.py) that bubblewrap loads before it runs
                 the command: no key ring, file locks, inotify, mounts, namespaces, tracing, ...
    cgroups      memory and pids controllers (cgroup v1; v2 as root, or where a cgroup is delegated
                 to the grader): limits for the whole process tree, and a list of every process
                 to kill when grading ends
    cpu          cgroup v1 cpu and cpuacct controllers: an equal CPU share per sandbox (however many
                 processes it runs), and its CPU time, which tells a starved timeout from the
                 student's own (grader/sandbox/starvation.py)
    rlimits      prlimit: file size, CPU time, open files, no core dumps (clean errors)
    scratch      a size-limited tmpfs mounted as the scratch directory (disk cannot fill up)

The grader talks to the kernel over unix sockets (jupyter's ipc transport) inside the scratch
directory, which is the only host path the kernel can write.

An ordinary user (rootless) cannot mount on the host, so its sandbox is made one namespace
deeper: the wrapper shell enters a user and mount namespace of its own (`unshare`) and mounts
there two size-limited tmpfs, the scratch and /tmp, which bubblewrap binds into the sandbox; the
host's scratch folder (0700) is never bound, and holds only what the grader wrote (the connection
file, bound read-only, and one link per ipc socket to `/proc/<the wrapper>/root/...`, through
which the grader reaches the socket in the tmpfs). What the kernel writes is gone with its last
process. Its total memory is watched (grader/sandbox/memory_watch.py) where no cgroup bounds it.

From the grader's side, `stop_strays()` kills every process of the sandbox but the kernel (a
daemon that double-forked is out of the kernel's reach), and `cleanup()` kills them all.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from grader.atomic import write_atomic
from grader.kernel import INSIDE as KERNEL_INSIDE  # each inside/ is defined once, beside its wing
from grader.runtime_paths import SANDBOX_UID, remove_scratch, scratch_of, scratch_tag
from grader.sandbox import seccomp
from grader.sandbox.memory_watch import MemoryWatch
from grader.verifier import INSIDE as VERIFIER_INSIDE

if TYPE_CHECKING:
    from grader.report import Isolation

LAYERS = ("namespaces", "user", "seccomp", "cgroups", "cpu", "rlimits", "scratch")
CORE_LAYERS = ("namespaces", "seccomp")  # without them a batch of strangers' code is refused (--no-sandbox aside)
CGROUP_ROOT = Path("/sys/fs/cgroup")
ENV_PASSED = ("LANG", "LC_ALL", "TZ", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
# XLA's CPU runtime runs each program on the thread that calls it: a grading's programs are small,
# and the pool of threads each process had woke on every call (7-9 % of a batch's CPU at -j 2,
# the same verdicts); at -j N every sandbox has its core anyway. A student's own XLA_FLAGS, set
# before JAX's first use, replace these.
XLA_FLAGS = "--xla_cpu_multi_thread_eigen=false"
SECCOMP_FD = 9  # the privileged wrapper opens the filter on this fd for `bwrap --seccomp`
SHIM_INSIDE = Path("/run/grader/libgrader-futex-private.so")  # where a kernel sees the preloaded library:
# never at its host path, which would show the grader's home folder
ADDRESS_SPACE_FACTOR = 2  # without cgroups: JAX and the kernel map about twice what they use
BWRAP_LEVELS = 3  # bwrap processes above the kernel: 2 (the outer one, its pid-1 init); a bound
# Rootless: beside the host's scratch folder's own files, the mount points of the two tmpfs that
# the sandbox's own mount namespace puts there (or, where that is refused, the folder bound as the
# scratch); neither is ever the folder itself, which only the grader enters.
SCRATCH_BIND = ".scratch"
TMP_BIND = ".tmp"
TMPFS_INODES = 65536  # files a rootless tmpfs may hold: each costs kernel memory its size does not count


EXECUTABLES_NEVER_WRITE_SECONDS = "1e9"  # JAX writes only what took longer than this to compile


def sandbox_environment(path: Path, *, writable: bool) -> dict[str, str]:
    """What a sandboxed process's JAX is told of the compiled-program store (executables.py):
    where it is, and (read-only) never to write."""
    return {"JAX_COMPILATION_CACHE_DIR": str(path),
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0" if writable else EXECUTABLES_NEVER_WRITE_SECONDS,
            "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
            "JAX_COMPILATION_CACHE_MAX_SIZE": "-1"}  # no eviction: no file lock (seccomp refuses them)


@dataclass(frozen=True, kw_only=True)
class SandboxPolicy:
    """Limits of one kernel's sandbox; None means no limit of that kind. The grader's own
    setting, never read from a file: a plain dataclass, so that starting the first kernel of
    `grade FILE` needs no pydantic (grader/kernel/launch.py)."""

    memory_bytes: int | None = 4 * 2**30  # whole process tree (cgroup)
    pids: int | None = 512  # processes and threads of the tree (cgroup)
    # The tree's CPU (cgroup cpu): `cpu_shares`, the same for every sandbox, splits a busy machine
    # evenly between sandboxes however many processes each runs (two at -j 2: half each); unused
    # CPU still goes to whoever wants it. `cpu_cores` (a CFS quota) would cap a sandbox even on an
    # idle machine, which only slows a batch down: None, no cap.
    cpu_shares: int = 1024
    cpu_cores: float | None = None
    cpu_seconds: int | None = 900  # CPU time per process (rlimit)
    file_bytes: int | None = 256 * 2**20  # largest file it may write (rlimit)
    open_files: int = 1024
    tmp_bytes: int = 256 * 2**20  # size of the private /tmp
    scratch_bytes: int = 512 * 2**20  # size of the scratch tmpfs
    uid: int = SANDBOX_UID
    gid: int = SANDBOX_UID
    executables: Path | None = None  # compiled programs JAX may read (grader/sandbox/executables.py); read-only unless writable
    executables_writable: bool = False  # only to build them from a reference solution


@dataclass(frozen=True)
class Detected:
    """The layers this machine and user can have, and why each other one is missing (what a
    report records as its `Isolation`)."""

    layers: tuple[str, ...]
    missing: dict[str, str] = field(default_factory=dict)
    backend: str = "root"  # "root", "rootless" (an ordinary user's namespaces) or "none"


def launch_environment(scratch: Path) -> dict[str, str]:
    """What a sandboxed process (a verifier, a fork server) starts with; bwrap clears it and sets
    the same again inside the sandbox, so it is also all an unsandboxed one gets."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(scratch), "PYTHONDONTWRITEBYTECODE": "1",
           "JAX_PLATFORMS": "cpu", "XLA_FLAGS": XLA_FLAGS}
    env.update({name: os.environ[name] for name in ENV_PASSED if name in os.environ})
    return env


def _own_cgroup(controller: str) -> Path | None:
    """The cgroup v1 directory this process is in for a controller, if it is writable."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            candidate = CGROUP_ROOT / controller / path.lstrip("/")
            if candidate.is_dir() and os.access(candidate, os.W_OK):
                return candidate
    return None


V2_PARENT = "jax-grader"  # a cgroup v2 host: <root or the delegated cgroup>/jax-grader/<sandbox>
V2_SELF = "jax-grader-self"  # a delegated cgroup v2: the grader's own processes, moved out of the way
V2_CONTROLLERS = ("memory", "pids", "cpu")


@functools.cache
def v2_parent() -> Path | None:
    """A cgroup v2 (unified) host: the cgroup whose children are the sandboxes, with the memory,
    pids and (where the host has it) cpu controllers enabled for them. As root, a cgroup below
    the root one; as anyone, a cgroup delegated to this process (`_delegated_v2_parent`). None
    where there is no unified hierarchy or none of it may be written (an ordinary user without
    delegation, a container's read-only cgroupfs)."""
    if not (CGROUP_ROOT / "cgroup.controllers").is_file():
        return None
    return _root_v2_parent() or _delegated_v2_parent()


def _root_v2_parent() -> Path | None:
    """Root: /sys/fs/cgroup/jax-grader. The root cgroup is exempt from "no internal processes",
    so enabling its controllers for its children works whoever else runs in it."""
    if os.geteuid() != 0:
        return None
    try:
        return _enable_below(CGROUP_ROOT, CGROUP_ROOT / V2_PARENT)
    except OSError:
        return None


def _delegated_v2_parent() -> Path | None:
    """The cgroup this process runs in, where it may write it: systemd's delegation (`systemd-run
    --user --scope -p Delegate=yes grade ...`), a container's own writable cgroup. cgroup v2
    lets a cgroup that holds processes hand no controller down ("no internal processes"), so
    its processes (this grader's) move first into a leaf of their own, `jax-grader-self`; a
    grader process started there (a batch's worker) finds the delegated cgroup above it."""
    own = _own_v2_cgroup()
    if own is None:
        return None
    if own.name == V2_SELF:
        own = own.parent
    needed = [own, own / "cgroup.procs", own / "cgroup.subtree_control"]
    if not all(os.access(path, os.W_OK) for path in needed):
        return None
    try:
        if not {"memory", "pids"} <= set((own / "cgroup.controllers").read_text().split()):
            return None
        if not {"memory", "pids"} <= set((own / "cgroup.subtree_control").read_text().split()):
            leaf = own / V2_SELF
            leaf.mkdir(mode=0o755, exist_ok=True)
            for pid in (own / "cgroup.procs").read_text().split():
                try:
                    (leaf / "cgroup.procs").write_text(pid)
                except ProcessLookupError:
                    continue  # it exited meanwhile
        return _enable_below(own, own / V2_PARENT)
    except OSError:
        return None


def _own_v2_cgroup() -> Path | None:
    """This process's cgroup in the unified hierarchy (/proc/self/cgroup's "0::" line)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            return CGROUP_ROOT / line[3:].strip().lstrip("/")
    return None


def _enable_below(top: Path, parent: Path) -> Path | None:
    """Enable the memory, pids (and cpu) controllers in `top` for its children and in `parent`
    (created below it) for the sandboxes; `parent`, or None where memory or pids will not go down."""
    available = set((top / "cgroup.controllers").read_text().split())
    if not {"memory", "pids"} <= available:
        return None
    wanted = [c for c in V2_CONTROLLERS if c in available]
    enabled = set((top / "cgroup.subtree_control").read_text().split())
    for controller in [c for c in wanted if c not in enabled]:
        try:
            (top / "cgroup.subtree_control").write_text(f"+{controller}")
        except OSError:
            if controller != "cpu":
                raise
            wanted.remove("cpu")  # refused (a realtime thread in a cgroup, say): the sandboxes go without it
    parent.mkdir(mode=0o755, exist_ok=True)
    (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
    if not {"memory", "pids"} <= set((parent / "cgroup.subtree_control").read_text().split()):
        return None
    return parent


def _v2_has(controller: str) -> bool:
    parent = v2_parent()
    try:
        return parent is not None and controller in (parent / "cgroup.subtree_control").read_text().split()
    except OSError:
        return False


@functools.cache
def detect() -> Detected:
    """Detect, once per process, which layers this machine and user can have."""
    missing: dict[str, str] = {}
    root = os.geteuid() == 0
    if not sys.platform.startswith("linux"):
        return Detected(layers=(), missing={layer: f"not Linux ({sys.platform})" for layer in LAYERS}, backend="none")
    if not root:
        return _rootless()
    if not shutil.which("bwrap"):
        missing["namespaces"] = "bubblewrap (bwrap) is not installed"
    elif why := _host_refusals().bwrap:
        missing["namespaces"] = why
    if not shutil.which("setpriv"):
        missing["user"] = "needs setpriv (util-linux)"
    elif "namespaces" in missing and (hidden := _unreachable_environment()):
        missing["user"] = f"the Python environment is not readable by an unprivileged user ({hidden})"
    if not (_own_cgroup("memory") and _own_cgroup("pids")) and v2_parent() is None:
        missing["cgroups"] = ("no writable cgroup here (cgroup v1 memory and pids, or a cgroup v2 root the "
                              "grader may write: a container's read-only cgroupfs): " + ROOT_LIMITS)
    if not (_own_cgroup("cpu") and _own_cgroup("cpuacct")) and not _v2_has("cpu"):
        missing["cpu"] = "no writable cgroup cpu controller here: " + NO_CPU_SHARE
    if not shutil.which("prlimit"):
        missing["rlimits"] = "prlimit is not installed"
    if why := _host_refusals().mount:
        missing["scratch"] = why
    why = seccomp.unavailable_reason()
    if why:
        missing["seccomp"] = why
    # Without bubblewrap, the user and seccomp layers are set up by the privileged wrapper itself
    # (setpriv; the filter loaded by grader/seccomp_exec.py): Gradescope's and Docker's
    # containers refuse namespaces but allow both.
    return Detected(layers=tuple(layer for layer in LAYERS if layer not in missing), missing=missing)


ROOT_LIMITS = ("memory is capped per process (address space; with bubblewrap's namespaces, the sandbox's processes "
               "together by the grader's watcher) and processes per sandbox user (uid 65534, every sandbox's "
               "together: rlimits), not for the whole tree")
ROOTLESS_LIMITS = ("memory is capped per process (address space) and, for the sandbox's processes together, by "
                   "the grader's watcher, which kills them past the limit; processes are counted in the "
                   "sandbox's own user namespace (rlimits)")
NO_CPU_SHARE = ("no equal CPU share per sandbox, so a timeout the machine caused cannot be told from the "
                "student's own")


def _rootless() -> Detected:
    """The layers an ordinary user gets: bubblewrap in an unprivileged user namespace (its own
    mount, pid, network, ipc and uts namespaces; uid 65534 inside, which is the grader's own
    uid outside), the seccomp filter, and rlimits applied inside the namespace (so the process
    count is the sandbox's alone); the cgroups where one is delegated to this process (cgroup v2).
    No tmpfs mount the grader could reach."""
    missing: dict[str, str] = {}
    if not shutil.which("bwrap"):
        missing["namespaces"] = "bubblewrap (bwrap) is not installed"
    elif why := _userns_refused():
        missing["namespaces"] = why
    if "namespaces" in missing:
        missing["user"] = "an ordinary user gets another uid only in a user namespace (bubblewrap), refused here"
    if v2_parent() is None:
        missing["cgroups"] = ("an ordinary user has no writable cgroup here (none delegated: on a systemd host, "
                              "run the grader under `systemd-run --user --scope -p Delegate=yes`): " + ROOTLESS_LIMITS)
    if not _v2_has("cpu"):
        missing["cpu"] = "an ordinary user has no writable cgroup cpu controller here: " + NO_CPU_SHARE
    if not shutil.which("prlimit"):
        missing["rlimits"] = "prlimit is not installed"
    if "namespaces" not in missing and (why := _namespace_tmpfs_refused()):
        missing["scratch"] = (f"no tmpfs in a mount namespace of the sandbox's own ({why}): the scratch is a "
                              "plain folder only the grader can enter, each file in it capped by the file-size "
                              "rlimit, not their total")
    elif "namespaces" in missing:
        missing["scratch"] = "an ordinary user mounts a tmpfs only in namespaces of its own, refused here"
    if why := seccomp.unavailable_reason():
        missing["seccomp"] = why
    elif "namespaces" in missing:
        missing["seccomp"] = "without bubblewrap, only a root grader loads the filter (its wrapper)"
    return Detected(layers=tuple(layer for layer in LAYERS if layer not in missing), missing=missing,
                    backend="rootless")


@functools.cache
def _userns_refused() -> str | None:
    """Why bubblewrap cannot make an unprivileged user namespace here, or None (tried once)."""
    try:
        done = subprocess.run(["bwrap", "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
                               "--unshare-uts", "--die-with-parent", "--ro-bind", "/", "/", "true"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not run ({type(exc).__name__})"
    if done.returncode == 0:
        return None
    said = " ".join(done.stderr.split())[:160] or f"exit status {done.returncode}"
    return f"unprivileged user namespaces are refused here ({said})"


@functools.cache
def _namespace_tmpfs_refused() -> str | None:
    """Why an ordinary user's sandbox cannot have its scratch and /tmp on a size-limited tmpfs in
    a user and mount namespace of its own, made by `unshare` around bubblewrap, or None (tried
    once, as `Sandbox.wrap` does it)."""
    if not shutil.which("unshare"):
        return "util-linux's unshare is not installed"
    try:
        done = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "/bin/sh", "-c",
                               'mount -t tmpfs -o size=4k,nr_inodes=16 tmpfs /tmp && exec "$@"', "grader-mounts",
                               "bwrap", "--unshare-user", "--uid", "65534", "--gid", "65534", "--unshare-pid",
                               "--die-with-parent", "--ro-bind", "/", "/", "--bind", "/tmp", "/tmp", "true"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare could not run ({type(exc).__name__})"
    if done.returncode == 0:
        return None
    return " ".join(done.stderr.split())[:160] or f"exit status {done.returncode}"


@dataclass(frozen=True)
class HostRefusals:
    """What this host refuses a root process, found by trying: bubblewrap's namespaces and a
    tmpfs mount (a container without CAP_SYS_ADMIN refuses both). None: allowed."""

    bwrap: str | None
    mount: str | None


def _host_refusals() -> HostRefusals:
    """Tried once per boot and environment (50 ms, on the way to every first kernel): kept in the
    seccomp filter's root-only folder under the boot id, the user, the mount namespace, the
    capabilities and bwrap's identity, and read back after."""
    import json

    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        tool = os.stat(shutil.which("bwrap") or "/nonexistent")
        status = Path("/proc/self/status").read_text()
        capabilities = next((line for line in status.splitlines() if line.startswith("CapEff:")), "")
        # a container (its own mount namespace, fewer capabilities) is another host
        key = "-".join([boot, str(os.geteuid()), os.readlink("/proc/self/ns/mnt"), capabilities.split()[-1],
                        str(tool.st_ino), str(tool.st_mtime_ns)])
        record = seccomp.private_directory() / "host-refusals.json"
    except OSError:
        return HostRefusals(bwrap=_bwrap_refused(), mount=_mount_refused())
    try:
        known = json.loads(record.read_text())
        if known.get("key") == key:
            return HostRefusals(bwrap=known["bwrap"], mount=known["mount"])
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    found = HostRefusals(bwrap=_bwrap_refused(), mount=_mount_refused())
    try:
        write_atomic(record, json.dumps({"key": key, "bwrap": found.bwrap, "mount": found.mount}))
    except OSError:
        pass
    return found


def _bwrap_refused() -> str | None:
    """Why bubblewrap cannot make its namespaces here, or None: a container (Docker's default,
    Gradescope's) has bwrap installed and refuses what it needs (no CAP_SYS_ADMIN, seccomp)."""
    try:
        done = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net",
                               "--unshare-ipc", "--unshare-uts", "--die-with-parent", "true"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not run ({type(exc).__name__})"
    if done.returncode == 0:
        return None
    said = " ".join(done.stderr.split())[:160] or f"exit status {done.returncode}"
    return f"bubblewrap cannot create namespaces here ({said})"


def _mount_refused() -> str | None:
    """Why a tmpfs cannot be mounted here (a container without CAP_SYS_ADMIN), or None."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix=f"{owner_tag()}mount-") as point:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", point],
                              capture_output=True, text=True)
        if done.returncode != 0:
            return "cannot mount a size-limited tmpfs here (refused: a container without CAP_SYS_ADMIN)"
        subprocess.run(["umount", "-l", point], capture_output=True)
    return None


def _unreachable_environment() -> str | None:
    """The first folder of the interpreter, the venv or the probe that an unprivileged user
    cannot enter or read, or None. Without bubblewrap nothing is bound for the sandbox's user:
    it reads what is readable by others, so the kernel could not even start."""
    for path in (Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), KERNEL_INSIDE):
        for folder in [*reversed(path.parents), path]:
            try:
                mode = folder.stat().st_mode
            except OSError:
                return str(folder)
            if not mode & 0o001 or (folder == path and not mode & 0o004):
                return str(folder)
    return None


@functools.cache
def available() -> Isolation:
    """What `detect()` found, as a report records it."""
    from grader.report import Isolation

    detected = detect()
    return Isolation(sandboxed=not detected.missing, layers=list(detected.layers), missing=dict(detected.missing),
                     backend=detected.backend, **bounds(detected.layers, SandboxPolicy()))


def bounds(layers: tuple[str, ...] | list[str], policy: SandboxPolicy) -> dict[str, object]:
    """What bounds a sandbox's total memory and total files on a host with these layers, as the
    report's isolation record says it: memory by the cgroup, by the grader's watcher (namespaces
    without a cgroup: memory_watch.py) or only per process (address space); files by a size-limited
    tmpfs (the scratch, and /tmp inside the namespaces) or only per file (the file-size rlimit)."""
    if "cgroups" in layers:
        memory = "cgroup"
    elif "namespaces" in layers:
        memory = "watcher"
    else:
        memory = "per process"
    if "scratch" in layers:
        files = "tmpfs"
        total = policy.scratch_bytes + (policy.tmp_bytes if "namespaces" in layers else 0)
    else:
        files, total = "file size", None
    return {"memory_bound": memory, "memory_bytes": policy.memory_bytes if memory != "per process" else None,
            "scratch_bound": files, "scratch_bytes": total}


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks since boot) of a process, from /proc/<pid>/stat."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[19])  # fields 4 and 22 of proc(5), after "pid (comm)"


def _exited(pid: int) -> bool:
    """Gone, or dead to its last thread. A zombie leader is not enough: a main thread that made
    the exit system call alone (not exit_group) is a zombie while the process's other threads
    run on (a daemon that beat through every probe batch this way)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    return all(_task_exited(pid, task) for task in tasks)


def _task_exited(pid: int, task: str) -> bool:
    try:
        state = Path(f"/proc/{pid}/task/{task}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X", "x")


def _socket_names(connection_file: str | None, scratch: Path) -> list[str]:
    """The names of the ipc sockets a connection file (the grader's own, not yet read by any
    kernel) puts in `scratch`: `kernel-ipc-1` ... (none for another transport or folder)."""
    if not connection_file:
        return []
    try:
        info = json.loads(Path(connection_file).read_text())
        ip = Path(info["ip"])
        names = [f"{ip.name}-{int(info[port])}" for port in
                 ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return names if info.get("transport") == "ipc" and ip.parent == scratch else []


def _file_id(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class Sandbox:
    """The sandbox of one kernel: prepare() before launch, wrap() its argv, cleanup() after."""

    def __init__(self, scratch: Path, policy: SandboxPolicy, isolation: Isolation | Detected, *,
                 runtime_dir: Path = KERNEL_INSIDE):
        self.scratch = scratch
        self.policy = policy
        self.isolation = isolation
        self.runtime_dir = runtime_dir  # bound read-only: the probe's (kernels) or the verifier's
        self._cgroups: list[Path] = []
        self._groups: dict[str, Path] = {}
        self._mounted = False
        # an ordinary user's sandbox (detect's "rootless" backend): its uid is made by bubblewrap's
        # user namespace, not setpriv, and its rlimits are set inside that namespace
        self.rootless = os.geteuid() != 0
        # rootless, the kernel never gets the host's scratch folder: a tmpfs of its own namespace
        # (the scratch layer), else a folder inside it (SCRATCH_BIND)
        self.inner_tmpfs = self.rootless and self.has("namespaces") and self.has("scratch")
        self.inner_folder = self.rootless and self.has("namespaces") and not self.has("scratch")
        self.watch: MemoryWatch | None = None
        self.memory_exceeded: int | None = None  # what the watcher found held when it killed the sandbox

    def has(self, layer: str) -> bool:
        return layer in self.isolation.layers

    # ------------------------------------------------------------------ set-up

    def prepare(self) -> None:
        """Mount the scratch tmpfs, hand it to the sandbox user, create the cgroups. Rootless: the
        scratch folder is the grader's alone (0700), with the mount points (or the folder) that
        the sandbox gets inside it."""
        if self.inner_tmpfs or self.inner_folder:
            os.chmod(self.scratch, 0o700)
            for name in (SCRATCH_BIND, TMP_BIND) if self.inner_tmpfs else (SCRATCH_BIND,):
                (self.scratch / name).mkdir(mode=0o700, exist_ok=True)
        elif self.has("scratch"):
            size = self.policy.scratch_bytes
            result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs",
                                     str(self.scratch)], capture_output=True)
            self._mounted = result.returncode == 0
        if self.has("user") and not self.rootless:
            os.chown(self.scratch, self.policy.uid, self.policy.gid)
        if self.has("cgroups"):
            self._groups = create_cgroups(self.policy, cpu=self.has("cpu"))
            self._cgroups = list(dict.fromkeys(self._groups.values()))  # cpu,cpuacct may be one

    def cgroup(self, controller: str) -> Path | None:
        """This sandbox's cgroup directory for `controller` ("memory", "pids", "cpu", "cpuacct")
        once prepared."""
        return self._groups.get(controller)

    def memory_bound_hit(self) -> bool:
        """Whether its memory bound stopped it: its memory cgroup's limit, or (without one) the
        watcher's kill. A process that dies of that is told so (it used too much memory), not
        just that it died."""
        watched = self.watch.exceeded if self.watch is not None else self.memory_exceeded
        return watched is not None or out_of_memory(self._groups.get("memory"))

    def wrap(self, argv: list[str], connection_file: str | None = None, *, pid1: bool = False) -> list[str]:
        """The command that starts `argv` (the kernel) inside every available layer; a process
        without a connection file (the verifier, which speaks over its stdin and stdout) has
        nothing handed over. `pid1`: `argv` is the namespace's first process instead of bwrap's
        reaper (a fork server: a child's kill(getppid(), SIGKILL) is then dropped, as every
        signal to a namespace's init from inside it whose handler is the default)."""
        p = self.policy
        cmd: list[str] = []
        inner = self.inner_tmpfs or self.inner_folder
        if self.has("cgroups") or self.has("user") or self.has("seccomp") or inner:
            # A shell, still privileged, joins the cgroups, hands over the connection file and
            # opens the seccomp filter (root's alone) on a fixed fd that bwrap reads and closes.
            script = "".join(f'echo $$ > "{g}/cgroup.procs"; ' for g in self._cgroups)
            if self.has("user") and connection_file and not self.rootless:
                script += f'chown {p.uid}:{p.gid} "$1"; '
            if inner:  # the grader's way to each ipc socket, which the kernel makes inside
                for name in _socket_names(connection_file, self.scratch):
                    source = self.scratch / SCRATCH_BIND / name
                    target = f"/proc/$$/root{shlex.quote(str(source))}" if self.inner_tmpfs else shlex.quote(
                        f"{SCRATCH_BIND}/{name}")
                    script += f"ln -sfn {target} {shlex.quote(str(self.scratch / name))}; "
            if self.has("seccomp"):
                script += f'exec {SECCOMP_FD}<"$2"; '
            script += 'shift 2; exec "$@"'
            # the verifier runs no code that makes system calls: the futex rule is for kernels
            shared = self.runtime_dir != KERNEL_INSIDE
            filter_path = (str(seccomp.filter_file(shared_futexes=shared, local_sockets_only=not self.has("namespaces")))
                           if self.has("seccomp") else "")
            cmd += ["/bin/sh", "-c", script, "grader-sandbox", connection_file or "", filter_path]
        inside = self.rootless and self.has("namespaces")  # rlimits counted in the sandbox's own namespace
        if self.has("rlimits") and not inside:
            cmd += ["prlimit", *self._rlimits(), "--"]
        if self.inner_tmpfs:
            # A user and mount namespace of the sandbox's own, where the scratch and /tmp are
            # size-limited tmpfs that bubblewrap binds in; `/proc/<this process>/root` shows them.
            options = [f"size={p.scratch_bytes},nr_inodes={TMPFS_INODES},mode=0700",
                       f"size={p.tmp_bytes},nr_inodes={TMPFS_INODES},mode=1777"]
            cmd += ["unshare", "--user", "--map-root-user", "--mount", "/bin/sh", "-c",
                    'mount -t tmpfs -o "$3" tmpfs "$1" && mount -t tmpfs -o "$4" tmpfs "$2" && shift 4 && exec "$@"',
                    "grader-mounts", str(self.scratch / SCRATCH_BIND), str(self.scratch / TMP_BIND), *options]
        if self.has("namespaces"):
            cmd += self._bwrap_args(connection_file)
            if pid1:
                cmd.insert(cmd.index("bwrap") + 1, "--as-pid-1")
            if self.has("rlimits") and inside:
                cmd += ["prlimit", *self._rlimits(), "--"]
        elif self.isolation.layers:
            if self.has("seccomp"):  # bwrap would load it: the wrapper's own loader does
                cmd += seccomp.loader_command(SECCOMP_FD)
            # bwrap would clear the environment: nothing of the grader's reaches the kernel
            environment = {**launch_environment(self.scratch), "MPLBACKEND": "Agg"}
            cmd += ["env", "-i", *(f"{name}={value}" for name, value in environment.items())]
        if self.has("user") and not self.rootless:
            cmd += ["setpriv", f"--reuid={p.uid}", f"--regid={p.gid}", "--clear-groups",
                    "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
        if not self.has("cgroups") and self.has("namespaces") and p.memory_bytes is not None:
            if self.watch is not None:
                self.watch.stop()
            self.watch = MemoryWatch(self.scratch, p.memory_bytes)  # finds the process started next, here
        return cmd + argv

    def _rlimits(self) -> list[str]:
        """prlimit's options. Without the cgroup layer, the address space and the number of
        processes of the sandbox's user are capped instead of the tree's memory and pids (looser:
        a mapping is not memory, and every process of that uid counts)."""
        p = self.policy
        limits = [f"--nofile={p.open_files}:{p.open_files}", "--core=0:0"]
        if p.file_bytes is not None:
            limits.append(f"--fsize={p.file_bytes}:{p.file_bytes}")
        if p.cpu_seconds is not None:
            limits.append(f"--cpu={p.cpu_seconds}:{p.cpu_seconds}")
        if not self.has("cgroups"):
            if p.memory_bytes is not None:
                space = ADDRESS_SPACE_FACTOR * p.memory_bytes
                limits.append(f"--as={space}:{space}")
            if p.pids is not None and self.has("user"):  # rootless: set inside its user namespace, its own count
                limits.append(f"--nproc={p.pids}:{p.pids}")
        return limits

    def _bwrap_args(self, connection_file: str | None = None) -> list[str]:
        args = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
                "--die-with-parent", "--new-session", "--clearenv"]
        if self.rootless:  # an unprivileged user namespace: uid 65534 inside (the grader's own uid outside)
            args += ["--unshare-user", "--uid", str(self.policy.uid), "--gid", str(self.policy.gid)]
        args += ["--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
                 "--setenv", "HOME", str(self.scratch),
                 "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
                 "--setenv", "MPLBACKEND", "Agg",
                 "--setenv", "XLA_FLAGS", XLA_FLAGS]
        if self.has("seccomp"):
            args += ["--seccomp", str(SECCOMP_FD)]  # loaded last, in bwrap's init too
        for name in ENV_PASSED:
            if name in os.environ:
                args += ["--setenv", name, os.environ[name]]
        args += ["--ro-bind", "/usr", "/usr"]
        for top in ("bin", "sbin", "lib", "lib32", "lib64"):
            path = Path("/") / top
            if path.is_symlink():
                args += ["--symlink", os.readlink(path), str(path)]
            elif path.is_dir():
                args += ["--ro-bind", str(path), str(path)]
        for etc in ("ld.so.cache", "localtime", "passwd", "group", "nsswitch.conf"):
            if (Path("/etc") / etc).exists():
                args += ["--ro-bind", f"/etc/{etc}", f"/etc/{etc}"]
        args += ["--proc", "/proc", "--dev", "/dev"]
        if self.inner_tmpfs:
            args += ["--bind", str(self.scratch / TMP_BIND), "/tmp"]  # its namespace's tmpfs
        else:
            args += ["--size", str(self.policy.tmp_bytes), "--perms", "1777", "--tmpfs", "/tmp"]
        created: set[Path] = {Path("/"), Path("/tmp"), Path("/usr")}
        readonly = self._readonly_paths()
        for source in readonly:
            for parent in reversed(source.parents):  # bwrap would copy a 0700 parent's mode
                if parent not in created:
                    args += ["--perms", "0755", "--dir", str(parent)]
                    created.add(parent)
            args += ["--ro-bind", str(source), str(source)]
            created.add(source)

        def parents_of(path: Path) -> list[str]:
            """The directories above a bind that no read-only bind already holds, made 0755."""
            made: list[str] = []
            for parent in reversed(path.parents):
                inside_readonly = any(parent == s or s in parent.parents for s in readonly)
                if parent not in created and not inside_readonly:
                    made += ["--perms", "0755", "--dir", str(parent)]
                    created.add(parent)
            return made

        args += parents_of(self.scratch)  # TMPDIR=/var/tmp/x: /var, /var/tmp, ...
        if (shim := self.futex_shim()) is not None:  # a kernel's std::future waits sleep (futex_shim.py)
            for parent in reversed(SHIM_INSIDE.parents):  # made 0755: bwrap would copy the host folder's mode
                if parent not in created:
                    args += ["--perms", "0755", "--dir", str(parent)]
                    created.add(parent)
            args += ["--ro-bind", str(shim), str(SHIM_INSIDE), "--setenv", "LD_PRELOAD", str(SHIM_INSIDE)]
        if (store := self.store()) is not None:
            args += parents_of(store)
            args += ["--bind" if self.policy.executables_writable else "--ro-bind", str(store), str(store)]
            for name, value in sandbox_environment(store, writable=self.policy.executables_writable).items():
                args += ["--setenv", name, value]
        if self.inner_tmpfs or self.inner_folder:
            args += ["--bind", str(self.scratch / SCRATCH_BIND), str(self.scratch)]
            if connection_file and Path(connection_file).parent == self.scratch:
                args += ["--ro-bind", connection_file, connection_file]
        else:
            args += ["--bind", str(self.scratch), str(self.scratch)]
        args += ["--chdir", str(self.scratch)]
        if self.rootless:
            # The new root, /etc and /dev are tmpfs of the sandbox's user: without a size, and
            # nothing needs to write there.
            args += ["--remount-ro", "/", "--remount-ro", "/dev"]
        return args

    def seen_scratch(self, root_pid: int) -> Path:
        """Where the grader sees the files the kernel writes in its scratch, `root_pid` being the
        sandbox's outermost process (a test's view: the grader reads none of them): the tmpfs
        in the sandbox's own mount namespace (rootless), the folder bound as the scratch, or the
        scratch itself."""
        if self.inner_tmpfs:
            return Path(f"/proc/{root_pid}/root{self.scratch / SCRATCH_BIND}")
        return self.scratch / SCRATCH_BIND if self.inner_folder else self.scratch

    def futex_shim(self) -> Path | None:
        """The library a kernel preloads so that its std::future waits sleep under the seccomp
        filter (grader/sandbox/futex_shim.py): a kernel's alone (the verifier's filter allows
        shared futexes), only with that filter, and only where bwrap binds it at SHIM_INSIDE
        (without namespaces the kernel's user could not read it in the grader's home)."""
        if self.runtime_dir != KERNEL_INSIDE or not self.has("seccomp") or not self.has("namespaces"):
            return None
        from grader.sandbox import futex_shim

        return futex_shim.library()

    def store(self) -> Path | None:
        """The compiled-program store this sandbox reads (grader/sandbox/executables.py): a verifier's
        only. The store is compiled from the reference solution, so a kernel, which runs the
        student's Python, never sees it: read from a kernel, its programs are the answer key."""
        return self.policy.executables if self.runtime_dir == VERIFIER_INSIDE else None

    def bound_paths(self) -> list[Path]:
        """Every host path bound into the sandbox: the read-only ones and the scratch."""
        store = [path] if (path := self.store()) is not None else []
        return [*self._readonly_paths(), *store, self.scratch]

    def _readonly_paths(self) -> list[Path]:
        """The interpreter, its virtual environment and the runtime directory (the probe's, or
        the verifier's): nothing else of the host."""
        paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), self.runtime_dir,
                 *_kernel_package_dirs()}
        inside_usr = [p for p in paths if p == Path("/usr") or Path("/usr") in p.parents]
        covered = [p for p in paths if any(q != p and q in p.parents for q in paths)]
        return sorted(p for p in paths if p not in inside_usr and p not in covered)

    # ------------------------------------------------------------------ stray processes

    def stop_strays(self, kernel_root_pid: int, timeout: float = 5.0) -> int:
        """Kill (SIGKILL, as root, from the grader) every process in the sandbox's cgroup but the
        chain that runs the kernel, wait until they are gone, and return how many were killed.

        The chain is `kernel_root_pid` (the provisioner's process: the wrapper shell that
        exec'd prlimit, then bwrap) and, with namespaces, bwrap's pid-1 init and the kernel
        below it: from the root downwards, while the process is bwrap, its earliest-started
        child. A double-forked daemon is a later child of that init, so it is not kept.
        Without the cgroup layer, bubblewrap's pid namespace keeps every process of the sandbox
        below its init, so the sandbox's processes are the descendants of `kernel_root_pid` (an
        ordinary user's sandbox: same uid, the grader may kill them); without either, 0."""
        group = self.cgroup("pids")
        if group is None:
            if not self.has("namespaces"):
                return 0

            def tree() -> list[int]:
                return [kernel_root_pid, *descendants(kernel_root_pid)]

            bwrap = _file_id(shutil.which("bwrap") or "bwrap")
            if bwrap is None or _file_id(f"/proc/{kernel_root_pid}/exe") != bwrap:
                return 0  # not a sandbox's bubblewrap: touch nothing
            keep = self._kernel_chain(kernel_root_pid, tree())
            return kill_strays(tree, keep, timeout)
        procs = self._procs(group)
        if kernel_root_pid not in procs:  # not this sandbox's kernel: touch nothing
            return 0
        keep = self._kernel_chain(kernel_root_pid, procs)
        return kill_strays(lambda: self._procs(group), keep, timeout, pids_group=group)

    @staticmethod
    def _procs(group: Path) -> list[int]:
        try:
            return [int(x) for x in (group / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def _kernel_chain(self, root: int, procs: list[int]) -> set[int]:
        chain = {root}
        if not self.has("namespaces"):
            return chain  # the wrapper exec'd into the kernel itself
        bwrap = _file_id(shutil.which("bwrap") or "bwrap")
        stats = {pid: stat for pid in procs if (stat := _stat(pid)) is not None}
        current = root
        for _ in range(BWRAP_LEVELS):
            if bwrap is None or _file_id(f"/proc/{current}/exe") != bwrap:
                break  # the kernel (bwrap's exe cannot be faked by renaming a process)
            children = [(start, pid) for pid, (ppid, start) in stats.items() if ppid == current]
            if not children:
                break
            current = min(children)[1]
            chain.add(current)
        return chain

    # ------------------------------------------------------------------ tear-down

    def cleanup(self) -> None:
        """Kill every process left in the kernel's cgroups, remove them, unmount the scratch.
        Rootless: stop the memory watch; the folder that was the scratch (where no tmpfs could
        be made) is removed whatever its contents' modes, and what is left is said."""
        if self.watch is not None:
            self.watch.stop()
            self.memory_exceeded = self.watch.exceeded
            self.watch = None
        if self.inner_folder and (self.scratch / SCRATCH_BIND).exists():
            remove_scratch(self.scratch / SCRATCH_BIND)
        for group in self._cgroups:
            empty_and_remove(group)
        self._cgroups = []
        self._groups = {}
        if self._mounted:
            subprocess.run(["umount", "-l", str(self.scratch)], capture_output=True)
            self._mounted = False


CONTROLLERS = ("memory", "cpu", "cpuacct", "pids")  # pids last: its group is the sandbox's list of processes


def create_cgroups(policy: SandboxPolicy, *, cpu: bool | None = None) -> dict[str, Path]:
    """A new memory and pids cgroup (cgroup v1) with the policy's limits, by controller, each a
    child of this process's own and tagged with its pid (`sweep` finds them if it dies); and a
    cpu and cpuacct one with the policy's CPU share when `cpu` (by default: where detect() found
    the cpu layer). Where cpu and cpuacct are mounted together, both name one directory."""
    name = f"{owner_tag()}{uuid.uuid4().hex[:12]}"
    cpu = "cpu" in detect().layers if cpu is None else cpu
    if _own_cgroup("memory") is None and (parent := v2_parent()) is not None:
        return _create_v2(parent / name, policy, cpu=cpu and _v2_has("cpu"))
    limits = {"memory": {"memory.limit_in_bytes": policy.memory_bytes},
              "cpu": {"cpu.shares": policy.cpu_shares, **_cfs_quota(policy)},
              "cpuacct": {},
              "pids": {"pids.max": policy.pids}}
    groups: dict[str, Path] = {}
    try:
        for controller in CONTROLLERS:
            if controller in ("cpu", "cpuacct") and not cpu:
                continue
            parent = _own_cgroup(controller)
            assert parent is not None
            group = parent / name
            same = [g for g in groups.values() if g.resolve() == group.resolve()] if group.exists() else []
            if not same:
                group.mkdir()
            groups[controller] = same[0] if same else group
            for file, value in limits[controller].items():
                if value is not None:
                    (group / file).write_text(str(value))
            if controller == "memory" and (group / "memory.memsw.limit_in_bytes").exists():
                try:  # no swapping around the limit, where swap accounting exists
                    (group / "memory.memsw.limit_in_bytes").write_text(str(policy.memory_bytes))
                except OSError:
                    pass
    except BaseException:
        for group in dict.fromkeys(groups.values()):
            empty_and_remove(group)
        raise
    return groups


def _create_v2(group: Path, policy: SandboxPolicy, *, cpu: bool) -> dict[str, Path]:
    """One cgroup v2 directory with the policy's limits, named for every controller it stands
    for (the same files' roles as v1's: memory.max, pids.max, an equal cpu.weight)."""
    group.mkdir()
    try:
        limits = {"memory.max": policy.memory_bytes, "memory.swap.max": 0 if policy.memory_bytes else None,
                  "pids.max": policy.pids}
        if cpu:
            limits["cpu.weight"] = 100  # the same for every sandbox: an equal share (v1's cpu.shares)
            if policy.cpu_cores is not None:
                limits["cpu.max"] = f"{max(1000, round(policy.cpu_cores * 100_000))} 100000"  # type: ignore[assignment]
        for file, value in limits.items():
            if value is not None and (group / file).exists():
                (group / file).write_text(str(value))
    except BaseException:
        empty_and_remove(group)
        raise
    controllers = ("memory", "pids", "cpu", "cpuacct") if cpu else ("memory", "pids")
    return dict.fromkeys(controllers, group)


def _cfs_quota(policy: SandboxPolicy) -> dict[str, int]:
    """The CFS quota that caps a sandbox at `policy.cpu_cores` cores (none by default)."""
    if policy.cpu_cores is None:
        return {}
    period = 100_000  # microseconds, the kernel's default period
    return {"cpu.cfs_period_us": period, "cpu.cfs_quota_us": max(1000, round(policy.cpu_cores * period))}


def kill_strays(processes: Callable[[], list[int]], keep: set[int], timeout: float, *,
                pids_group: Path | None = None) -> int:
    """SIGKILL every process `processes()` lists but `keep`, until none is left or `timeout`
    passes (a killed process takes a moment to exit); how many were killed. With the pids
    cgroup they are in, no process of it can fork meanwhile (`_no_forks`), so a daemon that
    hops from child to child cannot outrun the kill."""
    with _no_forks(pids_group):
        return _kill_until_gone(processes, keep, timeout)


@contextlib.contextmanager
def _no_forks(group: Path | None) -> Iterator[None]:
    """While it lasts, the pids cgroup `group` admits no new process or thread (pids.max 0,
    then its old value back)."""
    limit = group / "pids.max" if group is not None else None
    try:
        before = limit.read_text().strip() if limit is not None else None
        if limit is not None:
            limit.write_text("0")
    except OSError:
        before = None
    try:
        yield
    finally:
        if limit is not None and before is not None:
            try:
                limit.write_text(before)
            except OSError:
                pass


def _kill_until_gone(processes: Callable[[], list[int]], keep: set[int], timeout: float) -> int:
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        strays = [pid for pid in processes() if pid not in keep and not _exited(pid)]
        if not strays or time.monotonic() > deadline:
            return len(killed)
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


def become_subreaper() -> None:
    """Make this process the subreaper of its descendants (Linux): an orphan, a double-forked
    daemon included, is reparented to it instead of to init, so `descendants` still finds it
    where no cgroup lists a sandbox's processes."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def descendants(root: int) -> list[int]:
    """Every live process below `root`, from /proc (children's parent pids)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            parents.setdefault(stat[0], []).append(int(entry))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.append(child)
                todo.append(child)
    return found


def out_of_memory(group: Path | None) -> bool:
    """Whether a memory cgroup has killed a process or hit its limit."""
    if group is None:
        return False
    if (group / "memory.events").exists():  # cgroup v2: times at the limit, processes killed
        try:
            events = dict(line.split() for line in (group / "memory.events").read_text().splitlines())
            return int(events.get("max", 0)) > 0 or int(events.get("oom_kill", 0)) > 0
        except (OSError, ValueError):
            return False
    try:
        control = (group / "memory.oom_control").read_text()
        failcnt = int((group / "memory.failcnt").read_text())
    except (OSError, ValueError):
        return False
    kills = [line.split()[1] for line in control.splitlines() if line.startswith("oom_kill ")]
    return failcnt > 0 or (bool(kills) and kills[0] != "0")


def peak_memory_bytes(group: Path | None) -> int | None:
    """A memory cgroup's peak use (cgroup v1 memory.max_usage_in_bytes, v2 memory.peak)."""
    try:
        if group is not None and (group / "memory.peak").exists():
            return int((group / "memory.peak").read_text())
        return int((group / "memory.max_usage_in_bytes").read_text()) if group else None
    except (OSError, ValueError):
        return None


def empty_and_remove(group: Path, seconds: float = 5.0) -> None:
    """Kill every process of a cgroup and remove it (bounded: killed processes leave it
    asynchronously, and an emptied cgroup can be busy for a moment longer)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            pids = [int(x) for x in (group / "cgroup.procs").read_text().split()]
        except OSError:
            break
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)
    while True:
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.01)


def owner_tag(pid: int | None = None) -> str:
    """The tag of what a grader process makes (cgroups, scratch directories): `grader-<pid>-`,
    so that when a process dies without cleaning up, its parent can sweep what it left."""
    return f"grader-{os.getpid() if pid is None else pid}-"


def sweep(pid: int) -> int:
    """Remove what a dead grader process `pid` left: its sandboxes' cgroups (processes killed),
    scratch mounts and scratch folders. Returns how many things were removed."""
    removed = 0
    tag = owner_tag(pid)
    parents = {_own_cgroup(controller) for controller in CONTROLLERS} | {v2_parent()}
    for parent in parents - {None}:
        for group in parent.glob(tag + "*"):  # type: ignore[union-attr]
            empty_and_remove(group)
            removed += 1
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        mounts = []
    for line in mounts:
        fields = line.split()
        if len(fields) > 1 and Path(fields[1]).name.startswith(scratch_tag(pid)):
            subprocess.run(["umount", "-l", fields[1]], capture_output=True)
            removed += 1
    for folder in scratch_of(pid):  # its scratch folders, whatever their contents' modes
        remove_scratch(folder)
        removed += 1
    return removed


KERNEL_PACKAGES = ("ipykernel", "jax", "jaxlib", "numpy")


def _kernel_package_dirs() -> list[Path]:
    """The site-packages folders the kernel imports its packages from, when they are outside the
    interpreter's prefix (a venv that reaches them through a .pth file, a --user install): only
    those folders, never the rest of sys.path, which may hold the course's repository."""
    import importlib.util

    found = set()
    for name in KERNEL_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            found.add(Path(spec.origin).resolve().parent.parent)
    return sorted(found)
