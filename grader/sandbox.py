"""The sandbox a kernel runs in, made of ordinary Linux parts (no Docker, no systemd).

Layers, each optional so that grading degrades honestly where one is missing:

    namespaces   bubblewrap: own pid, network, ipc and uts namespaces; a new root that holds only
                 /usr, the interpreter, the venv, the probe file and the kernel's scratch directory;
                 a private size-limited /tmp; the environment cleared; dies with the grader
    user         setpriv drops to an unprivileged uid/gid with no capabilities and no_new_privs
    cgroups      cgroup v1 memory and pids controllers: limits for the whole process tree, and
                 a list of every process to kill when grading ends
    rlimits      prlimit: file size, CPU time, open files, no core dumps (clean errors)
    scratch      a size-limited tmpfs mounted as the scratch directory (disk cannot fill up)

The grader talks to the kernel over unix sockets (jupyter's ipc transport) inside the scratch
directory, which is the only host path the kernel can write.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

LAYERS = ("namespaces", "user", "cgroups", "rlimits", "scratch")
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROBE_DIR = Path(__file__).resolve().parent / "probe"
ENV_PASSED = ("LANG", "LC_ALL", "TZ", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


class SandboxPolicy(BaseModel):
    """Limits of one kernel's sandbox; None means no limit of that kind."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_bytes: int | None = Field(default=4 * 2**30, description="whole process tree (cgroup)")
    pids: int | None = Field(default=512, description="processes and threads of the tree (cgroup)")
    cpu_seconds: int | None = Field(default=900, description="CPU time per process (rlimit)")
    file_bytes: int | None = Field(default=256 * 2**20, description="largest file it may write (rlimit)")
    open_files: int = 1024
    tmp_bytes: int = Field(default=256 * 2**20, description="size of the private /tmp")
    scratch_bytes: int = Field(default=512 * 2**20, description="size of the scratch tmpfs")
    uid: int = 65534
    gid: int = 65534


class Isolation(BaseModel):
    """Which layers were in force for a report (recorded in it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sandboxed: bool = Field(description="every layer was in force")
    layers: list[str]
    missing: dict[str, str] = Field(default_factory=dict, description="layer -> why it is missing")


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


@functools.cache
def available() -> Isolation:
    """Detect, once per process, which layers this machine and user can have."""
    missing: dict[str, str] = {}
    root = os.geteuid() == 0
    if not sys.platform.startswith("linux"):
        missing = {layer: f"not Linux ({sys.platform})" for layer in LAYERS}
        return Isolation(sandboxed=False, layers=[], missing=missing)
    if not shutil.which("bwrap"):
        missing["namespaces"] = "bubblewrap (bwrap) is not installed"
    elif not root:
        missing["namespaces"] = "needs root (to drop to an unprivileged user inside)"
    if not (root and shutil.which("setpriv")):
        missing["user"] = "needs root and setpriv"
    if not (root and _own_cgroup("memory") and _own_cgroup("pids")):
        missing["cgroups"] = "needs root and writable cgroup v1 memory and pids controllers"
    if not shutil.which("prlimit"):
        missing["rlimits"] = "prlimit is not installed"
    if not root:
        missing["scratch"] = "needs root to mount a size-limited tmpfs"
    if "namespaces" in missing:  # the user layer runs inside bubblewrap
        missing.setdefault("user", "needs bubblewrap")
    layers = [layer for layer in LAYERS if layer not in missing]
    return Isolation(sandboxed=not missing, layers=layers, missing=missing)


class Sandbox:
    """The sandbox of one kernel: prepare() before launch, wrap() its argv, cleanup() after."""

    def __init__(self, scratch: Path, policy: SandboxPolicy, isolation: Isolation):
        self.scratch = scratch
        self.policy = policy
        self.isolation = isolation
        self._cgroups: list[Path] = []
        self._mounted = False

    def has(self, layer: str) -> bool:
        return layer in self.isolation.layers

    # ------------------------------------------------------------------ set-up

    def prepare(self) -> None:
        """Mount the scratch tmpfs, hand it to the sandbox user, create the cgroups."""
        if self.has("scratch"):
            size = self.policy.scratch_bytes
            result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs",
                                     str(self.scratch)], capture_output=True)
            self._mounted = result.returncode == 0
        if self.has("user"):
            os.chown(self.scratch, self.policy.uid, self.policy.gid)
        if self.has("cgroups"):
            name = f"grader-{uuid.uuid4().hex[:12]}"
            limits = {"memory": {"memory.limit_in_bytes": self.policy.memory_bytes},
                      "pids": {"pids.max": self.policy.pids}}
            for controller, files in limits.items():
                parent = _own_cgroup(controller)
                assert parent is not None
                group = parent / name
                group.mkdir()
                self._cgroups.append(group)
                for file, value in files.items():
                    if value is not None:
                        (group / file).write_text(str(value))
                if controller == "memory" and (group / "memory.memsw.limit_in_bytes").exists():
                    try:  # no swapping around the limit, where swap accounting exists
                        (group / "memory.memsw.limit_in_bytes").write_text(str(self.policy.memory_bytes))
                    except OSError:
                        pass

    def wrap(self, argv: list[str], connection_file: str) -> list[str]:
        """The command that starts `argv` (the kernel) inside every available layer."""
        p = self.policy
        cmd: list[str] = []
        if self.has("cgroups") or self.has("user"):
            # A shell, still privileged, joins the cgroups and hands over the connection file.
            script = "".join(f'echo $$ > "{g}/cgroup.procs"; ' for g in self._cgroups)
            if self.has("user"):
                script += f'chown {p.uid}:{p.gid} "$1"; '
            script += 'shift; exec "$@"'
            cmd += ["/bin/sh", "-c", script, "grader-sandbox", connection_file]
        if self.has("rlimits"):
            limits = [f"--nofile={p.open_files}:{p.open_files}", "--core=0:0"]
            if p.file_bytes is not None:
                limits.append(f"--fsize={p.file_bytes}:{p.file_bytes}")
            if p.cpu_seconds is not None:
                limits.append(f"--cpu={p.cpu_seconds}:{p.cpu_seconds}")
            cmd += ["prlimit", *limits, "--"]
        if self.has("namespaces"):
            cmd += self._bwrap_args()
        if self.has("user"):
            cmd += ["setpriv", f"--reuid={p.uid}", f"--regid={p.gid}", "--clear-groups",
                    "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
        return cmd + argv

    def _bwrap_args(self) -> list[str]:
        args = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
                "--die-with-parent", "--new-session", "--clearenv",
                "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
                "--setenv", "HOME", str(self.scratch),
                "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
                "--setenv", "MPLBACKEND", "Agg"]
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
        args += ["--proc", "/proc", "--dev", "/dev",
                 "--size", str(self.policy.tmp_bytes), "--perms", "1777", "--tmpfs", "/tmp"]
        created: set[Path] = {Path("/"), Path("/tmp"), Path("/usr")}
        for source in self._readonly_paths():
            for parent in reversed(source.parents):  # bwrap would copy a 0700 parent's mode
                if parent not in created:
                    args += ["--perms", "0755", "--dir", str(parent)]
                    created.add(parent)
            args += ["--ro-bind", str(source), str(source)]
            created.add(source)
        args += ["--bind", str(self.scratch), str(self.scratch), "--chdir", str(self.scratch)]
        return args

    @staticmethod
    def _readonly_paths() -> list[Path]:
        """The interpreter, its virtual environment and the probe: nothing else of the host."""
        paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), PROBE_DIR}
        inside_usr = [p for p in paths if p == Path("/usr") or Path("/usr") in p.parents]
        return sorted(p for p in paths if p not in inside_usr)

    # ------------------------------------------------------------------ tear-down

    def cleanup(self) -> None:
        """Kill every process left in the kernel's cgroups, remove them, unmount the scratch."""
        for group in self._cgroups:
            deadline = time.monotonic() + 5.0
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
                time.sleep(0.01)  # killed processes leave the cgroup asynchronously
            try:
                group.rmdir()
            except OSError:
                pass
        self._cgroups = []
        if self._mounted:
            subprocess.run(["umount", "-l", str(self.scratch)], capture_output=True)
            self._mounted = False
