"""The verifier's runtime in a child process of the student's notebook: where a program that
never ends can be stopped.

A computation inside XLA cannot be interrupted: neither an alarm nor Ctrl-C reaches it until it
returns, and a `lax.while_loop` whose condition never turns false never returns. So the
self-check runs the exported programs in a child process (`grader/verifier/inside/runtime.py`,
the sandboxed verifier's own program, speaking the same job lines on stdin and stdout, without
a sandbox: it is the student's own program on the student's own machine), and kills it at the
exercise's limit or on Ctrl-C; the next self-check starts a fresh one.

Portable: `subprocess` with `sys.executable` (no fork), a reader thread instead of `select` on
a pipe (Windows has none), no signal but the child's own SIGINT disposition. The child
- imports what the notebook imports (its `sys.path`, passed along), and runs on the CPU;
- ignores SIGINT: Jupyter interrupts a kernel by signalling its whole process group, and an
  interrupt of another cell must not kill it (the parent kills it when a self-check is stopped);
- exits when its parent is gone (a kernel killed mid-job must not leave it running forever);
- writes nothing into the notebook (ipykernel shows the output of the kernel's file
  descriptors, which a child would inherit): its stderr goes to the null device.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time

from grader.verifier import INSIDE as VERIFIER_INSIDE
from grader.verifier.protocol import MAX_LINE_BYTES

RUNTIME = VERIFIER_INSIDE / "runtime.py"
PATH_VARIABLE = "GRADER_SELFCHECK_SYS_PATH"
_POLL_S = 0.05  # how often a wait comes back to Python, where an interrupt is raised

# Run with `python -I -B -c BOOTSTRAP RUNTIME`: the standard library only until the runtime runs.
BOOTSTRAP = r"""
import json, os, runpy, signal, sys, threading, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
sys.path[:] = json.loads(os.environ.pop("GRADER_SELFCHECK_SYS_PATH", "[]")) or sys.path

def _when_orphaned(parent):
    if os.name == "nt":
        import ctypes
        kernel32 = ctypes.windll.kernel32
        handle = kernel32.OpenProcess(0x00100000, False, parent)  # SYNCHRONIZE
        if handle:
            kernel32.WaitForSingleObject(handle, 0xFFFFFFFF)
            os._exit(0)
        return
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)

threading.Thread(target=_when_orphaned, args=(os.getppid(),), daemon=True).start()
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


class ChildDied(Exception):
    """The child's output closed: it exited, or was killed."""

    def __init__(self, status: str):
        super().__init__(status)
        self.status = status


class LineTooLong(Exception):
    """The child wrote a line over MAX_LINE_BYTES."""


def child_environment() -> dict[str, str]:
    """The notebook's environment, with its `sys.path` and JAX on the CPU (the verifier runs
    CPU programs only)."""
    env = dict(os.environ)
    env[PATH_VARIABLE] = json.dumps([p for p in sys.path if isinstance(p, str)])
    env["JAX_PLATFORMS"] = "cpu"
    return env


class VerifierChild:
    """One child process running the verifier's runtime; `kill()` ends it."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.ready_at: float | None = None
        self.jax_version: str | None = None
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self.popen = subprocess.Popen(
            [sys.executable, "-I", "-B", "-c", BOOTSTRAP, str(RUNTIME)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=child_environment())
        threading.Thread(target=self._read, name="selfcheck-verifier-reader", daemon=True).start()

    def _read(self) -> None:
        """Every line the child writes, in order; None at the end of its output."""
        assert self.popen.stdout is not None
        with self.popen.stdout as stdout:
            try:
                while line := stdout.readline(MAX_LINE_BYTES + 1):
                    self._lines.put(line)
            except (OSError, ValueError):
                pass
        self._lines.put(None)

    def alive(self) -> bool:
        return self.popen.poll() is None

    @property
    def ready(self) -> bool:
        return self.ready_at is not None

    def wait_ready(self, timeout: float) -> None:
        """Read the ready line (TimeoutError, ChildDied or ValueError when it does not come)."""
        if self.ready:
            return
        line = self.readline(self.started + timeout)
        ready = json.loads(line.decode("utf-8"))
        if not (isinstance(ready, dict) and ready.get("ready") is True):
            raise ValueError("the verifier's first line is not its ready line")
        self.ready_at = time.monotonic()
        self.jax_version = str(ready.get("jax"))

    def send(self, data: bytes) -> None:
        assert self.popen.stdin is not None
        try:
            self.popen.stdin.write(data)
            self.popen.stdin.flush()
        except (BrokenPipeError, ConnectionResetError, OSError, ValueError):
            raise ChildDied(self.exit_status()) from None

    def readline(self, deadline: float) -> bytes:
        """The next line (without its newline). Waits in short steps, so that an interrupt or an
        alarm of the notebook's main thread is raised here at once."""
        while True:
            left = deadline - time.monotonic()
            try:  # past the deadline, a line already read is still taken (a boot long done)
                line = self._lines.get(timeout=min(_POLL_S, left)) if left > 0 else self._lines.get_nowait()
            except queue.Empty:
                if left <= 0:
                    raise TimeoutError from None
                continue
            if line is None:
                self._lines.put(None)  # the end stays the end
                raise ChildDied(self.exit_status())
            if not line.endswith(b"\n"):
                raise LineTooLong
            return line[:-1]

    def exit_status(self) -> str:
        """How the child ended, in words (it is waited for a moment)."""
        try:
            code = self.popen.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "its output closed"
        return f"killed by signal {-code}" if code < 0 else f"exit status {code}"

    def kill(self) -> None:
        """Kill the child (idempotent). Its output is closed by the reader, at its end."""
        if self.popen.poll() is None:
            try:
                self.popen.kill()
            except OSError:
                pass
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        try:
            if self.popen.stdin is not None:
                self.popen.stdin.close()
        except OSError:
            pass
