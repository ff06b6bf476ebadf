"""A fork server in a sandbox: a process that has imported what its children need, and forks one
child per request, each moved into cgroups of its own. The verifier's and the kernel's are this.

A fresh kernel or verifier spends most of its boot importing (IPython, ipykernel, JAX: about 1 of
1.2 CPU s). A server does that once per batch worker, in the sandbox a fresh process would get
(grader/sandbox/layers.py), *without starting a JAX backend* (a process that forks after XLA has started
its threads gives children that hang); each child is then a fork of it. The child is isolated as a
fresh process would be, layer by layer:

    namespaces, user, seccomp, rlimits
                the server's own, inherited at fork (the same bwrap namespaces, unprivileged
                user, no_new_privs, system-call filter; RLIMIT_CPU counts from zero in a child).
                Only one child is alive at a time: `fork` kills the last one first, and a batch
                worker grades one submission at a time, so no two students ever share them at
                once. What a namespace would keep after a child is gone is closed too: the
                filter refuses SysV IPC and POSIX message queues (grader/sandbox/seccomp.py), and the
                server is non-dumpable (so are its children), so no child can open its memory
                or another child's through /proc; ptrace is refused already
    cgroups     its own memory and pids cgroups with the policy's limits (and cpu and cpuacct ones:
                a CPU share of its own, where the machine has the cpu layer), which the grader moves
                it into as soon as the server answers, before it is handed any work; killing it
                empties them, so whatever it started goes with it
    scratch     the server's scratch directory and private /tmp, emptied by the grader after each
                child is killed, before the next is forked (at most MAX_LEFT_ENTRIES entries,
                MAX_LEFT_DEPTH deep), the scratch's owner, mode and xattrs reset

What a child could change on the server itself, which the next child would inherit (its limits,
priority, CPUs, I/O priority, the sockets of its network namespace), is compared after each child
with what it was when the server started; a server that differs, or whose scratch or /tmp
could not be emptied within those bounds, is replaced (`vacate`).

The server runs nothing of a student's. A child that kills or stops it only ends its own sandbox
(and itself): the next fork fails within FORK_TIMEOUT_S and a new server is started, which costs
the next student time, never a verdict.

The protocol, on the server's fd 0 (a unix socket): the server's first line is {"ready": true,
"pid": <its pid in its namespace>}; then each request is one message (a line of JSON, at most
MAX_REQUEST bytes, with file descriptors as SCM_RIGHTS if the child needs any) and each answer
one line, {"pid": <the child's pid in the server's namespace>}.
"""

from __future__ import annotations

import array
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from grader import runtime_paths
from grader.errors import KernelError
from grader.sandbox import lifetime
from grader.sandbox.layers import (
    Sandbox,
    SandboxPolicy,
    available,
    create_cgroups,
    empty_and_remove,
    launch_environment,
    out_of_memory,
    peak_memory_bytes,
)

FORK_TIMEOUT_S = 10.0
BOOT_TIMEOUT_S = 60.0
MAX_REQUEST = 64 * 1024
_MAX_REPLY = 300
_READ_CHUNK = 4096


class ForkFailed(KernelError):
    """No server could fork a child: the machine's fault, not a student's."""


def usable(policy: SandboxPolicy | None) -> bool:
    """Whether children can be forked with every layer a fresh process would have: unsandboxed,
    or with the whole sandbox (a child's cgroups need root, and its pid is found through them)."""
    return policy is None or available().sandboxed


def _ns_pids(pid: int) -> tuple[list[int], int] | None:
    """(the process's pid in each of its namespaces, outermost first; its parent's pid here)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    try:
        return [int(x) for x in fields["NSpid"].split()], int(fields["PPid"].split()[0])
    except (KeyError, ValueError, IndexError):
        return None


MAX_LEFT_ENTRIES = 2_000  # what a child may leave for the grader to remove; more: a new server
MAX_LEFT_DEPTH = 16


def _empty(directory: Path, keep: Sequence[str] = ()) -> bool:
    """Remove what is inside a directory but `keep`, never following a link out of it, and
    never walking more than MAX_LEFT_ENTRIES entries or MAX_LEFT_DEPTH levels (a child can make
    millions of files, or a tree deeper than any path): True only if it is empty but `keep`
    afterwards. Past the bounds the caller replaces the server, whose tmpfs mounts go whole."""
    budget = [MAX_LEFT_ENTRIES]

    def remove_inside(fd: int, depth: int, skip: Sequence[str]) -> bool:
        with os.scandir(fd) as entries:
            for entry in entries:
                if entry.name in skip:
                    continue
                budget[0] -= 1
                if budget[0] < 0:
                    return False
                if entry.is_dir(follow_symlinks=False):
                    if depth >= MAX_LEFT_DEPTH:
                        return False
                    sub = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                    try:
                        if not remove_inside(sub, depth + 1, ()):
                            return False
                    finally:
                        os.close(sub)
                    os.rmdir(entry.name, dir_fd=fd)
                else:
                    os.unlink(entry.name, dir_fd=fd)
        return True

    try:
        top = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        if not remove_inside(top, 0, keep):
            return False
        with os.scandir(top) as left:
            return all(entry.name in keep for entry in left)
    except OSError:
        return False
    finally:
        os.close(top)


_SOCKSTAT_FIELDS = ("inuse", "tw")
"""Of /proc/<pid>/net/sockstat's counters, those of the network namespace itself (the others,
sockets allocated and memory, are the host's): sockets in use per protocol, TCP's in TIME_WAIT."""


def _sockets(pid: int) -> tuple[int, ...] | None:
    """How many sockets the network namespace of `pid` holds, per kind: a closed TCP connection
    stays there (TIME_WAIT) after its process is gone, visible to the next child. The namespace's
    own counters (sockstat, sockstat6) and the lines of its unix and packet tables: reading
    /proc/net/tcp instead walks the host's whole connection table, 10 ms a read."""
    counts: list[int] = []
    for kind in ("sockstat", "sockstat6"):
        try:
            text = Path(f"/proc/{pid}/net/{kind}").read_text()
        except OSError:
            counts.append(-1)
            continue
        for line in text.splitlines():
            words = line.split()
            counts += [int(value) for name, value in zip(words[1::2], words[2::2])
                       if name in _SOCKSTAT_FIELDS and value.isdigit()]
    for kind in ("unix", "packet"):
        try:
            counts.append(len(Path(f"/proc/{pid}/net/{kind}").read_text().splitlines()))
        except OSError:
            counts.append(-1)
    return tuple(counts)


def _ioprio(pid: int) -> int | None:
    """The I/O priority of a process (ioprio_get, as root), where the syscall is known."""
    import ctypes
    import platform

    number = {"x86_64": 252, "aarch64": 31}.get(platform.machine())
    if number is None:
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).syscall(number, 1, pid)  # IOPRIO_WHO_PROCESS
    except (OSError, AttributeError):
        return None


def _process_state(pid: int) -> tuple | None:
    """What a child inherits from the server at fork and another process of its user could
    change: the resource limits (prlimit), the scheduling priority, policy and nice value
    (setpriority, sched_setscheduler), the allowed CPUs and memory nodes (sched_setaffinity) and
    the I/O priority (ioprio_set)."""
    try:
        limits = Path(f"/proc/{pid}/limits").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
    except (OSError, IndexError):
        return None
    allowed = tuple(line for line in status if line.startswith(("Cpus_allowed_list", "Mems_allowed_list")))
    return limits, tuple(stat[i] for i in (15, 16, 37, 38)), allowed, _ioprio(pid)  # fields 18, 19, 40, 41


def _reset_directory(path: Path, uid: int, gid: int, mode: int) -> bool:
    """Give a scratch directory back its owner and mode and drop its extended attributes;
    False if that could not be done."""
    try:
        os.chown(path, uid, gid)  # the mount point on the host: the child cannot replace it
        os.chmod(path, mode)
        for name in os.listxattr(path, follow_symlinks=False):
            os.removexattr(path, name, follow_symlinks=False)
        return not os.listxattr(path, follow_symlinks=False)
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X", "x")


class Child:
    """A forked child as the grader sees it: its pid here and its cgroups."""

    def __init__(self, server: ForkServer, pid: int, groups: dict[str, Path]):
        self.server = server
        self.pid = pid
        self.groups = groups
        self.killed = False

    def alive(self) -> bool:
        """Running (in its own cgroup, where it has one: a pid alone could have been reused)."""
        if self.killed or not _alive(self.pid):
            return False
        return not self.groups or self.pid in self.processes()

    def processes(self) -> list[int]:
        """Every process of its cgroup (just itself without cgroups)."""
        group = self.groups.get("pids")
        if group is None:
            return [self.pid] if _alive(self.pid) else []
        try:
            return [int(x) for x in (group / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def out_of_memory(self) -> bool:
        return out_of_memory(self.groups.get("memory"))

    def cpu_group(self) -> Path | None:
        """Its cpuacct cgroup, whose CPU time tells a starved timeout (grader/sandbox/starvation.py)."""
        return self.groups.get("cpuacct")

    def peak_memory_bytes(self) -> int | None:
        return peak_memory_bytes(self.groups.get("memory"))

    def kill(self) -> None:
        """Kill it and all it started, remove its cgroups, empty the server's scratch. Idempotent."""
        if self.killed:
            return
        self.killed = True
        if self.groups:
            for group in dict.fromkeys(self.groups.values()):  # cpu and cpuacct may be one
                empty_and_remove(group)
        else:  # unsandboxed: its own session (the server's children call setsid)
            for kill in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, signal.SIGKILL)):
                try:
                    kill()
                except (ProcessLookupError, PermissionError):
                    pass
        self.server.child_gone(self)


class ForkServer:
    """A fork server in a sandbox of its own. `fork(request, fds)` gives a `Child`."""

    def __init__(self, command: Sequence[str], runtime_dir: Path, policy: SandboxPolicy | None, *,
                 name: str, boot_timeout: float = BOOT_TIMEOUT_S,
                 scratch: Callable[[], Path] | None = None):
        """`command` starts the server (its fd 0 is the socket); `runtime_dir` is bound read-only
        in its sandbox; `scratch` makes the scratch directory (a fresh one under
        TMPDIR, tagged with this process's pid, by default)."""
        if not usable(policy):
            raise ValueError("a fork server needs the whole sandbox or none")
        self.command = list(command)
        self.runtime_dir = runtime_dir
        self.policy = policy
        self.name = name
        self.boot_timeout = boot_timeout
        self._make_scratch = scratch or (lambda: runtime_paths.scratch_directory(name))
        self.starts = 0  # servers started (more than one: a child or a fault ended one)
        self.forks = 0
        self.ready_info: dict = {}
        self.scratch: Path | None = None
        self._popen: subprocess.Popen | None = None
        self._control: socket.socket | None = None
        self._buffer = bytearray()
        self._sandbox: Sandbox | None = None
        self._pid: int | None = None  # the server's own pid here, once a child has named it
        self._child: Child | None = None
        self._ready = False
        self._started_at = 0.0
        self._baseline: tuple | None = None  # the server's limits, priority and CPUs when ready
        self._sockets: tuple[int, ...] | None = None  # and the sockets of its network namespace
        self._tainted = False  # a child changed what the next would inherit: replace the server
        self._scratch_mode = 0o700

    # ------------------------------------------------------------------ the server

    def start(self) -> ForkServer:
        """Start the server (it imports meanwhile); no-op if it is running."""
        if self._popen is not None:
            return self
        self.starts += 1
        self.scratch = self._make_scratch()  # tagged with our pid: sandbox.sweep finds it
        lifetime.track(self)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = launch_environment(self.scratch)
        command = self.command
        try:
            if self.policy is not None:
                self._sandbox = Sandbox(self.scratch, self.policy, available(), runtime_dir=self.runtime_dir)
                self._sandbox.prepare()
                command = self._sandbox.wrap(command, pid1=True)  # its children cannot signal it
            self._popen = subprocess.Popen(
                command, stdin=theirs, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                cwd=self.scratch, env=env, start_new_session=True)
        except BaseException as exc:
            ours.close()
            self.kill()
            if not isinstance(exc, Exception):
                raise
            raise ForkFailed(f"could not start the {self.name} fork server: {type(exc).__name__}: {exc}") from None
        finally:
            theirs.close()
        ours.setblocking(False)
        self._control = ours
        self._started_at = time.monotonic()
        return self

    def _line(self, deadline: float) -> dict:
        """The server's next line, as a JSON object (TimeoutError, ConnectionError, ValueError)."""
        assert self._control is not None
        while b"\n" not in self._buffer:
            if len(self._buffer) > _MAX_REPLY:
                raise ValueError("a line too long")
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            poll = select_poll(self._control.fileno())
            if not poll.poll(max(1, int(left * 1000))):
                continue
            try:
                chunk = self._control.recv(_READ_CHUNK)
            except BlockingIOError:
                continue
            if not chunk:
                raise ConnectionError("the server closed its socket")
            self._buffer += chunk
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        value = json.loads(line.decode("utf-8"))
        if not isinstance(value, dict):
            raise ValueError("not an object")
        return value

    def _wait_ready(self) -> None:
        if self._ready:
            return
        try:
            ready = self._line(self._started_at + self.boot_timeout)
            if ready.get("ready") is not True:
                raise ValueError("not a ready line")
        except (TimeoutError, ConnectionError, ValueError, UnicodeDecodeError, OSError) as exc:
            self.kill()
            raise ForkFailed(f"the {self.name} fork server did not start ({type(exc).__name__})") from None
        self.ready_info = ready
        self._ready = True
        if self.policy is not None:
            ns_pid = ready.get("pid")
            found = self._find(ns_pid) if isinstance(ns_pid, int) and not isinstance(ns_pid, bool) else None
            if found is None:
                self.kill()
                raise ForkFailed(f"the {self.name} fork server is not in its sandbox")
            self._pid = found[0]
            self._baseline = _process_state(self._pid)
            self._sockets = _sockets(self._pid)
            self._scratch_mode = os.stat(self.scratch).st_mode & 0o7777  # as the sandbox made it

    def alive(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def child_gone(self, child: Child) -> None:
        """A child was killed: put back what it shared with the server, the scratch directory
        (emptied, and its owner, mode and extended attributes reset) and /tmp (emptied); if it
        changed the server itself (its limits, priority, CPUs) or any of that cannot be undone,
        the server is killed, so the next child comes from a new one. So is one whose scratch or /tmp
        holds more than the grader will walk, or whose network namespace still lists a socket."""
        if self._child is child:
            self._child = None
        restored = True
        if self.scratch is not None:
            restored = _empty(self.scratch)
            if self.policy is not None:
                restored = _reset_directory(self.scratch, self.policy.uid, self.policy.gid, self._scratch_mode) and restored
        if self._pid is not None and self.policy is not None:
            if self._is_server(self._pid):  # never a recycled pid: its /tmp could be the host's
                restored = _empty(Path(f"/proc/{self._pid}/root/tmp"), self._tmp_keep()) and restored
                restored = restored and _sockets(self._pid) == self._sockets
            restored = restored and _process_state(self._pid) == self._baseline
        if not restored:
            self._tainted = True

    def _tmp_keep(self) -> tuple[str, ...]:
        """The sandbox's /tmp holds the directories bwrap made for the paths it binds there (the
        scratch mount, a venv or checkout under /tmp): root's, not the child's to write, and
        removing one from here would detach its mount in the sandbox."""
        bound = self._sandbox.bound_paths() if self._sandbox else []
        keep = []
        for path in bound:
            try:
                inside = path.relative_to("/tmp")
            except ValueError:
                continue
            if inside.parts:
                keep.append(inside.parts[0])
        return tuple(sorted(set(keep)))

    def vacate(self) -> None:
        """Kill the current child, if any, and empty what it shared (before the grader puts the
        next child's files in the scratch); a server the child changed is killed."""
        if self._child is not None:
            self._child.kill()
        if self._tainted:
            self.kill()

    def _is_server(self, pid: int) -> bool:
        """`pid` is still the server: alive, in the server's own sandbox cgroup."""
        group = self._sandbox.cgroup("pids") if self._sandbox else None
        try:
            members = (group / "cgroup.procs").read_text().split() if group else []
        except OSError:
            return False
        return self.alive() and str(pid) in members and _alive(pid)

    def _find(self, ns_pid: int) -> tuple[int, int] | None:
        """(pid here, parent's pid here) of the process of the server's sandbox whose own
        namespace calls it `ns_pid`."""
        group = self._sandbox.cgroup("pids") if self._sandbox else None
        try:
            procs = [int(x) for x in (group / "cgroup.procs").read_text().split()] if group else []
        except OSError:
            procs = []
        for pid in procs:
            ids = _ns_pids(pid)
            if ids is not None and len(ids[0]) > 1 and ids[0][-1] == ns_pid:
                return pid, ids[1]
        return None

    def fork(self, request: dict, fds: Sequence[int] = (), *, retry: bool = True) -> Child:
        """A new child (the last one is killed first). A server that does not answer is replaced
        once (`retry`); ForkFailed when no server can fork."""
        data = (json.dumps(request) + "\n").encode()
        if len(data) > MAX_REQUEST:
            raise ValueError("a fork request over MAX_REQUEST bytes")
        for attempt in (1, 2) if retry else (2,):
            self.vacate()  # one child at a time
            self.start()
            try:
                self._wait_ready()
                return self._fork(data, fds)
            except ForkFailed:
                self.kill()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _fork(self, data: bytes, fds: Sequence[int]) -> Child:
        assert self._control is not None
        deadline = time.monotonic() + FORK_TIMEOUT_S
        try:
            ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())] if fds else []
            self._send(data, ancillary, deadline)
            reply = self._line(deadline)
        except (OSError, TimeoutError, ValueError, UnicodeDecodeError) as exc:
            raise ForkFailed(f"the {self.name} fork server did not fork ({type(exc).__name__})") from None
        pid = reply.get("pid")
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            raise ForkFailed(f"the {self.name} fork server did not fork")
        host_pid = self._host_pid(pid)
        groups: dict[str, Path] = {}
        if self.policy is not None:
            try:
                groups = create_cgroups(self.policy)  # a CPU share of its own too (the cpu layer)
                for group in dict.fromkeys(groups.values()):
                    (group / "cgroup.procs").write_text(str(host_pid))
            except BaseException:
                for group in dict.fromkeys(groups.values()):
                    empty_and_remove(group)
                os.kill(host_pid, signal.SIGKILL)
                raise
        self.forks += 1
        self._child = Child(self, host_pid, groups)
        return self._child

    def _send(self, data: bytes, ancillary: list, deadline: float) -> None:
        assert self._control is not None
        poll = select_poll(self._control.fileno(), out=True)
        view = memoryview(data)
        first = True
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if not poll.poll(max(1, int(left * 1000))):
                continue
            try:
                sent = self._control.sendmsg([view], ancillary if first else [])
            except BlockingIOError:
                continue
            first = False
            view = view[sent:]

    def _host_pid(self, ns_pid: int) -> int:
        """The child's pid here: the process of the server's sandbox whose own namespace calls
        it `ns_pid` (the server is trusted and the child has run nothing of a student's yet)."""
        if self.policy is None:
            return ns_pid
        found = self._find(ns_pid)
        if found is not None and found[1] == self._pid:
            return found[0]
        raise ForkFailed(f"the forked child is not in the {self.name} fork server's sandbox")

    def kill(self) -> None:
        """Kill the server, its child and its sandbox. Idempotent; `start` may follow."""
        lifetime.untrack(self)
        if self._child is not None:
            self._child.kill()
        popen, self._popen = self._popen, None
        if popen is not None:
            try:
                os.killpg(popen.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            popen.kill()
            try:
                popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if self._control is not None:
            self._control.close()
            self._control = None
        self._buffer = bytearray()
        self._ready = False
        self._pid = None
        self._baseline = None
        self._tainted = False
        if self._sandbox is not None:
            self._sandbox.cleanup()
            self._sandbox = None
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    close = kill

    @property
    def sandbox(self) -> Sandbox | None:
        return self._sandbox

    @property
    def server_pid(self) -> int | None:
        """The server's pid here (known once it has forked in a sandbox)."""
        return self._pid


def select_poll(fd: int, out: bool = False) -> Any:
    poll = select.poll()
    poll.register(fd, (select.POLLOUT if out else select.POLLIN) | select.POLLHUP | select.POLLERR)
    return poll
