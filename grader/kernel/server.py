"""Kernels forked from a warm fork server instead of booted one by one (a batch worker's).

A fresh kernel costs about 1.2 CPU s, most of it importing IPython, ipykernel and JAX. A
`KernelServer` (grader/sandbox/forking.py: the kernel's sandbox, one child at a time, each in cgroups of
its own) imports them once (grader/kernel/inside/zygote.py), and each submission's kernel is a
fork of it: jupyter_client starts it as usual, except that its launch asks the server instead
of running a command, and the process it holds is a `ForkedKernel`, which polls, signals and
kills the child through its cgroups.

Only a whole sandbox forks kernels (`usable`): each child needs cgroups of its own, and the
environment and file system of a fresh kernel are the sandbox's, which the server has too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from grader.sandbox.forking import Child, ForkFailed, ForkServer
from grader.sandbox.layers import KERNEL_INSIDE, SandboxPolicy, available, kill_strays

ZYGOTE = KERNEL_INSIDE / "zygote.py"
LAUNCHER = ["-m", "ipykernel_launcher"]


def usable(policy: SandboxPolicy | None) -> bool:
    return policy is not None and available().sandboxed


def _boot() -> list[str]:
    """The server's command: like `python -m ipykernel_launcher`, the scratch directory first on
    sys.path (`-c` puts '' there), not the server's own directory."""
    return [sys.executable, "-c", f"import runpy; runpy.run_path({str(ZYGOTE)!r}, run_name='__main__')"]


class ForkedKernel:
    """The forked kernel as jupyter_client's provisioner holds it (the part of Popen it uses)."""

    def __init__(self, child: Child):
        self.child = child
        self.pid = child.pid
        self.returncode: int | None = None
        self.stdin = self.stdout = self.stderr = None

    def poll(self) -> int | None:
        if self.returncode is None and not self.child.alive():
            self.returncode = -signal.SIGKILL  # reaped by the server: its status is not ours to read
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.005
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("forked kernel", timeout or 0)
            time.sleep(delay)  # a killed process takes a moment to exit
            delay = min(delay * 2, 0.05)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.kill()

    def kill(self) -> None:
        self.child.kill()

    def stop_strays(self, timeout: float = 5.0) -> int:
        """Kill every process of its cgroups but the kernel (forks held off meanwhile); how many
        were killed."""
        return kill_strays(self.child.processes, {self.pid}, timeout, pids_group=self.child.groups.get("pids"))


class KernelServer(ForkServer):
    """The kernels' fork server."""

    def __init__(self, policy: SandboxPolicy, *, boot_timeout: float = 60.0):
        from grader.kernel.client import scratch_directory

        if not usable(policy):
            raise ValueError("kernels are forked only in the whole sandbox")
        super().__init__(_boot(), KERNEL_INSIDE, policy, name="kernel", boot_timeout=boot_timeout,
                         scratch=scratch_directory)

    def fork_kernel(self, command: list[str], connection_file: str) -> ForkedKernel:
        """Fork the kernel `command` would start (`python -m ipykernel_launcher ARGS`), reading
        `connection_file`, which is handed to the sandbox's user first. ForkFailed, with the
        server killed, when it cannot (the caller starts it again: the scratch changes)."""
        if command[1:3] != LAUNCHER:
            raise ForkFailed(f"not an ipykernel command: {command[:3]}")
        assert self.policy is not None
        os.chown(connection_file, self.policy.uid, self.policy.gid)
        try:
            return ForkedKernel(self.fork({"argv": command[3:]}, retry=False))
        except ForkFailed:
            self.kill()
            raise
