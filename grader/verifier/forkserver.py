"""Verifiers forked from a warm fork server instead of booted one by one (a batch worker's).

A fresh verifier costs about 1.2 CPU s, most of it importing JAX. A `ForkServer` is started
once per batch worker, in the sandbox a verifier gets, and imports JAX there (zygote.py); each
verifier is then a fork of it, about 0.4 CPU s (the backend's start and a warm-up compile).

Each forked verifier is isolated as a fresh one is, layer by layer:

    namespaces, user, seccomp, rlimits
                the server's own, inherited at fork (the same bwrap namespaces, unprivileged
                user, no_new_privs, system-call filter; RLIMIT_CPU counts from zero in a child).
                Only one child is alive at a time (a worker grades one submission at a time,
                and a child is killed before the next is forked), so no two students' verifiers
                ever share them at once; the server is non-dumpable, so no child can read or
                write its memory, and the filter refuses ptrace
    cgroups     its own memory and pids cgroups, with the policy's limits, which the grader
                moves it into before it sends it a job; killing it empties them, so whatever it
                started goes with it
    scratch     the server's scratch directory and private /tmp, emptied by the grader after
                each child is killed, before the next is forked

The server itself runs no module. If a child kills or stops it, the next fork fails within
FORK_TIMEOUT_S and a new server is started: that costs the next student time, never a verdict.
"""

from __future__ import annotations

import array
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from grader import lifetime
from grader.sandbox import VERIFIER_DIR, Sandbox, SandboxPolicy, available, create_cgroups, empty_and_remove
from grader.verifier.client import (
    MAX_LINE_BYTES,
    VerifierStartFailed,
    _environment,
    _Lines,
    _scratch_directory,
    _short,
    _write_all,
)

ZYGOTE = VERIFIER_DIR / "zygote.py"
FORK_TIMEOUT_S = 10.0
_MAX_REPLY = 200


def usable(policy: SandboxPolicy | None) -> bool:
    """Whether verifiers can be forked with every layer a fresh one would have: unsandboxed, or
    with the whole sandbox (a child's cgroups need root, and its pid is read through them)."""
    return policy is None or available().sandboxed


def _ns_pids(pid: int) -> tuple[list[int], int] | None:
    """(the process's pid in each of its namespaces, outermost first; its parent's pid as seen
    here), from /proc/PID/status."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    try:
        return [int(x) for x in fields["NSpid"].split()], int(fields["PPid"].split()[0])
    except (KeyError, ValueError, IndexError):
        return None


def _empty(directory: Path) -> None:
    """Remove what is inside a directory (never following a link out of it)."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)  # fd-based: links are unlinked
            else:
                os.unlink(entry.path)
        except OSError:
            pass


class ForkedVerifier:
    """One verifier forked from the server: the interface of client.VerifierProcess."""

    def __init__(self, server: ForkServer, host_pid: int, groups: dict[str, Path],
                 stdin_fd: int, stdout_fd: int):
        self.server = server
        self.host_pid = host_pid
        self.groups = groups
        self.started = time.monotonic()
        self.ready_at: float | None = None
        self.jax_version: str | None = None
        self._stdin: int | None = stdin_fd
        self._stdout: int | None = stdout_fd
        os.set_blocking(stdin_fd, False)
        self.lines = _Lines(stdout_fd, MAX_LINE_BYTES)
        self._killed = False
        lifetime.track(self)

    @property
    def ready(self) -> bool:
        return self.ready_at is not None

    @property
    def boot_seconds(self) -> float | None:
        return None if self.ready_at is None else self.ready_at - self.started

    def alive(self) -> bool:
        if self._killed:
            return False
        try:
            state = Path(f"/proc/{self.host_pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X", "x")

    def wait_ready(self, timeout: float) -> None:
        if self.ready:
            return
        try:
            line = self.lines.readline(self.started + timeout)
            ready = json.loads(line.decode("utf-8"))
            if not (isinstance(ready, dict) and ready.get("ready") is True and isinstance(ready.get("jax"), str)):
                raise ValueError("not a ready line")
        except TimeoutError:
            why = f"a forked verifier was not ready after {timeout:g} s"
        except Exception as exc:  # noqa: BLE001 - dead, a long line, garbage: all the same here
            why = f"a forked verifier did not start ({type(exc).__name__})"
        else:
            self.ready_at = time.monotonic()
            self.jax_version = _short(ready["jax"], 40)
            return
        self.kill()
        raise VerifierStartFailed(why)

    def send(self, data: bytes, deadline: float) -> None:
        from grader.verifier.client import _Dead

        if self._stdin is None:
            raise _Dead
        _write_all(self._stdin, data, deadline)

    def readline(self, deadline: float) -> bytes:
        return self.lines.readline(deadline)

    def out_of_memory(self) -> bool:
        group = self.groups.get("memory")
        if group is None:
            return False
        try:
            control = (group / "memory.oom_control").read_text()
            failcnt = int((group / "memory.failcnt").read_text())
        except (OSError, ValueError):
            return False
        kills = [line.split()[1] for line in control.splitlines() if line.startswith("oom_kill ")]
        return failcnt > 0 or (bool(kills) and kills[0] != "0")

    def peak_memory_bytes(self) -> int | None:
        group = self.groups.get("memory")
        try:
            return int((group / "memory.max_usage_in_bytes").read_text()) if group else None
        except (OSError, ValueError):
            return None

    def death(self) -> str:
        if self.out_of_memory():
            limit = self.server.policy.memory_bytes if self.server.policy else None
            cap = f" of {limit / 2**30:.3g} GiB" if limit else ""
            return f"the verifier died at its memory limit{cap}"
        return "the verifier died"

    def kill(self) -> None:
        """Kill it and all it started, remove its cgroups, empty the server's scratch. Idempotent."""
        lifetime.untrack(self)
        if self._killed:
            return
        self._killed = True
        if self.groups:
            for group in self.groups.values():
                empty_and_remove(group)
        else:  # unsandboxed: its own session (zygote.py's setsid)
            for kill in (lambda: os.killpg(self.host_pid, signal.SIGKILL),
                         lambda: os.kill(self.host_pid, signal.SIGKILL)):
                try:
                    kill()
                except (ProcessLookupError, PermissionError):
                    pass
        for fd in (self._stdin, self._stdout):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._stdin = self._stdout = None
        self.server.child_gone()


class ForkServer:
    """A warm fork server for verifiers, in a sandbox of its own; `fork()` gives a verifier."""

    def __init__(self, policy: SandboxPolicy | None, *, boot_timeout: float = 60.0):
        if not usable(policy):
            raise ValueError("a fork server needs the whole sandbox or none")
        self.policy = policy
        self.boot_timeout = boot_timeout
        self.starts = 0  # servers started (more than one: a child or a fault ended one)
        self.forks = 0
        self._popen: subprocess.Popen | None = None
        self._control: socket.socket | None = None
        self._lines: _Lines | None = None
        self._sandbox: Sandbox | None = None
        self._scratch: Path | None = None
        self._pid: int | None = None  # the server's pid as seen here
        self._child: ForkedVerifier | None = None
        self._ready = False

    # ------------------------------------------------------------------ the server

    def start(self) -> ForkServer:
        """Start the server (it imports JAX meanwhile); no-op if it is running."""
        if self._popen is not None:
            return self
        self.starts += 1
        self._scratch = _scratch_directory()
        lifetime.track(self)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        command = [sys.executable, "-I", "-B", str(ZYGOTE)]
        try:
            if self.policy is not None:
                self._sandbox = Sandbox(self._scratch, self.policy, available(), runtime_dir=VERIFIER_DIR)
                self._sandbox.prepare()
                command = self._sandbox.wrap(command)
            self._popen = subprocess.Popen(
                command, stdin=theirs, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                cwd=self._scratch, env=_environment(self._scratch), start_new_session=True)
        except BaseException as exc:
            ours.close()
            self.kill()
            if not isinstance(exc, Exception):
                raise
            raise VerifierStartFailed(f"the fork server: {type(exc).__name__}: {exc}") from None
        finally:
            theirs.close()
        self._control = ours
        self._lines = _Lines(ours.fileno(), _MAX_REPLY)
        self._started_at = time.monotonic()
        return self

    def _wait_ready(self) -> None:
        assert self._lines is not None
        if self._ready:
            return
        try:
            line = self._lines.readline(self._started_at + self.boot_timeout)
            ready = json.loads(line.decode("utf-8"))
            if not (isinstance(ready, dict) and ready.get("ready") is True):
                raise ValueError("not a ready line")
        except Exception as exc:  # noqa: BLE001
            self.kill()
            raise VerifierStartFailed(f"the fork server did not start ({type(exc).__name__})") from None
        self._ready = True

    def child_gone(self) -> None:
        """A child was killed: empty the scratch and /tmp it shared with the server."""
        self._child = None
        if self._scratch is not None:
            _empty(self._scratch)
        if self._pid is not None and self.policy is not None:
            _empty(Path(f"/proc/{self._pid}/root/tmp"))

    def fork(self) -> ForkedVerifier:
        """A new verifier (booting: `wait_ready` on it). A server that does not answer is
        replaced once; VerifierStartFailed when no server can fork."""
        for attempt in (1, 2):
            if self._child is not None:
                self._child.kill()  # one child at a time
            self.start()
            try:
                self._wait_ready()
                return self._fork()
            except VerifierStartFailed:
                self.kill()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _fork(self) -> ForkedVerifier:
        from grader.verifier.client import _Dead, _LineTooLong

        assert self._control is not None and self._lines is not None
        deadline = time.monotonic() + FORK_TIMEOUT_S
        job_r, job_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        theirs = [job_r, out_w]
        groups: dict[str, Path] = {}
        try:
            fds = array.array("i", theirs)
            try:
                self._control.settimeout(FORK_TIMEOUT_S)
                self._control.sendmsg([b"F"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds.tobytes())])
                self._control.setblocking(False)
                reply = json.loads(self._lines.readline(deadline).decode("utf-8"))
            except (OSError, TimeoutError, _Dead, _LineTooLong, ValueError, UnicodeDecodeError) as exc:
                raise VerifierStartFailed(f"the fork server did not fork ({type(exc).__name__})") from None
            pid = reply.get("pid") if isinstance(reply, dict) else None
            if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
                raise VerifierStartFailed("the fork server did not fork")
            host_pid = self._host_pid(pid)
            if self.policy is not None:
                groups = create_cgroups(self.policy)
                for group in groups.values():
                    (group / "cgroup.procs").write_text(str(host_pid))
        except BaseException:
            for group in groups.values():
                empty_and_remove(group)
            for fd in (job_w, out_r):
                os.close(fd)
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        self.forks += 1
        self._child = ForkedVerifier(self, host_pid, groups, job_w, out_r)
        return self._child

    def _host_pid(self, ns_pid: int) -> int:
        """The child's pid here: the process of the server's sandbox whose own namespace calls
        it `ns_pid` (the server is trusted and the child has run nothing else yet)."""
        if self.policy is None:
            return ns_pid
        assert self._sandbox is not None
        group = self._sandbox.cgroup("pids")
        try:
            procs = [int(x) for x in (group / "cgroup.procs").read_text().split()] if group else []
        except OSError:
            procs = []
        for pid in procs:
            ids = _ns_pids(pid)
            if ids is not None and len(ids[0]) > 1 and ids[0][-1] == ns_pid:
                self._pid = ids[1]
                return pid
        raise VerifierStartFailed("the forked verifier is not in the fork server's sandbox")

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
        self._lines = None
        self._ready = False
        self._pid = None
        if self._sandbox is not None:
            self._sandbox.cleanup()
            self._sandbox = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    close = kill
