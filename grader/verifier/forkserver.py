"""Verifiers forked from a warm fork server instead of booted one by one (a batch worker's).

A fresh verifier costs about 1.2 CPU s, most of it importing JAX. A `VerifierServer` is started
once per batch worker (grader/sandbox/forking.py: the verifier's sandbox, one child at a time, each in
cgroups of its own) and imports JAX there (zygote.py); each verifier is then a fork of it, about
0.4 CPU s (the backend's start and a warm-up compile). The child gets the two ends of its pipes
as file descriptors and speaks the verifier's protocol on them, so `ForkedVerifier` has the
interface of client.VerifierProcess.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from grader.sandbox import lifetime
from grader.sandbox.forking import ForkFailed, ForkServer, usable
from grader.sandbox.layers import VERIFIER_INSIDE, SandboxPolicy
from grader.verifier.client import (
    Booting,
    VerifierStartFailed,
    _Dead,
    _Lines,
    _write_all,
    death_detail,
    ready_version,
)
from grader.verifier.protocol import MAX_LINE_BYTES

ZYGOTE = VERIFIER_INSIDE / "zygote.py"

__all__ = ["ForkedVerifier", "VerifierServer", "usable"]


class ForkedVerifier(Booting):
    """One verifier forked from the server: the interface of client.VerifierProcess."""

    def __init__(self, server: VerifierServer, child, stdin_fd: int, stdout_fd: int):
        self.server = server
        self.child = child
        self.host_pid = child.pid
        self.groups = child.groups
        self.started = time.monotonic()
        self.ready_at: float | None = None
        self.jax_version: str | None = None
        self._stdin: int | None = stdin_fd
        self._stdout: int | None = stdout_fd
        os.set_blocking(stdin_fd, False)
        self.lines = _Lines(stdout_fd, MAX_LINE_BYTES)
        lifetime.track(self)

    def alive(self) -> bool:
        return self.child.alive()

    def wait_ready(self, timeout: float) -> None:
        if self.ready:
            return
        try:
            version = ready_version(self.lines.readline(self.started + timeout))
        except TimeoutError:
            why = f"a forked verifier was not ready after {timeout:g} s"
        except Exception as exc:  # noqa: BLE001 - dead, a long line, garbage: all the same here
            why = f"a forked verifier did not start ({type(exc).__name__})"
        else:
            self.ready_at = time.monotonic()
            self.jax_version = version
            return
        self.kill()
        raise VerifierStartFailed(why)

    def send(self, data: bytes, deadline: float) -> None:
        if self._stdin is None:
            raise _Dead
        _write_all(self._stdin, data, deadline)

    def readline(self, deadline: float) -> bytes:
        return self.lines.readline(deadline)

    def out_of_memory(self) -> bool:
        return self.child.out_of_memory()

    def peak_memory_bytes(self) -> int | None:
        return self.child.peak_memory_bytes()

    def cpu_group(self) -> Path | None:
        """Its cpuacct cgroup (grader/sandbox/starvation.py)."""
        return self.child.cpu_group()

    def death(self) -> str:
        """Why it died (its exit status is the server's to reap, not ours to read)."""
        return death_detail(None, self.out_of_memory(), self.server.policy)

    def kill(self) -> None:
        """Kill it and all it started (grader/sandbox/forking.py's Child). Idempotent."""
        lifetime.untrack(self)
        self.child.kill()
        for fd in (self._stdin, self._stdout):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._stdin = self._stdout = None


class VerifierServer(ForkServer):
    """The verifiers' fork server; `fork()` gives a booting ForkedVerifier."""

    def __init__(self, policy: SandboxPolicy | None, *, boot_timeout: float = 60.0):
        super().__init__([sys.executable, "-I", "-B", str(ZYGOTE)], VERIFIER_INSIDE, policy,
                         name="verify", boot_timeout=boot_timeout)

    def fork(self) -> ForkedVerifier:  # type: ignore[override]
        job_r, job_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        try:
            child = super().fork({"verifier": True}, [job_r, out_w])
        except ForkFailed as exc:
            for fd in (job_w, out_r):
                os.close(fd)
            raise VerifierStartFailed(str(exc)) from None
        except BaseException:
            for fd in (job_w, out_r):
                os.close(fd)
            raise
        finally:
            for fd in (job_r, out_w):
                os.close(fd)
        return ForkedVerifier(self, child, job_w, out_r)
