"""The child Python process that runs a notebook for the pack's `grade` (`inside/cells.py`):
started in the notebook's folder, sent one message at a time, read with a deadline, killed.

It runs in a process group (a session) of its own, so the terminal's Ctrl-C reaches only
`grade`, which kills it with whatever it started: a cell that never ends costs its deadline, and
Ctrl-C stops everything at once.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from grader.errors import KernelStartFailed
from grader.kernel import INSIDE as KERNEL_INSIDE
from grader.selfgrade import INSIDE

CELLS = INSIDE / "cells.py"
PROBE = KERNEL_INSIDE / "runtime.py"
STARTUP_TIMEOUT_S = 120.0  # Python, NumPy and the probe (JAX comes with the notebook's first cell)
BOOT = ("import sys\nfrom importlib.machinery import SourceFileLoader\n"
        "namespace = {'__name__': 'grader_cells', '__file__': sys.argv[1]}\n"
        "exec(SourceFileLoader('grader_cells', sys.argv[1]).get_code('grader_cells'), namespace)\n"
        "namespace['main'](sys.argv[2])\n")
"""`python -c BOOT cells.py runtime.py`: `-c` puts the working folder first on `sys.path`, as a
kernel has it, so the notebook imports what lies beside it."""


class TimedOut(Exception):
    """No answer came before the deadline (the child is still running)."""


class Ended(Exception):
    """The child exited (or closed its end) before answering."""


class Child:
    """One child process, answering one message at a time."""

    def __init__(self, folder: Path):
        self._log: IO[bytes] = tempfile.TemporaryFile()  # its stderr until it is ready: why it did not start
        popen: dict[str, Any] = {"start_new_session": True} if os.name == "posix" else {
            "creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)}
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", BOOT, str(CELLS), str(PROBE)], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=self._log, cwd=folder,
                env={**os.environ, "MPLBACKEND": "Agg", "PYTHONIOENCODING": "utf-8"}, **popen)
        except OSError as exc:
            raise KernelStartFailed(f"{sys.executable} could not be started ({exc.strerror})") from None
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name="child-output", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT_S) -> None:
        """Until the child has loaded the probe; KernelStartFailed (exit 3) if it cannot."""
        try:
            self.receive(timeout)
            self._log.close()
        except (TimedOut, Ended) as exc:
            self.kill()
            self._log.seek(0)
            said = self._log.read().decode("utf-8", "replace").strip().splitlines()
            why = said[-1] if said else (f"no answer after {timeout:g} s" if isinstance(exc, TimedOut)
                                         else f"it exited with status {self._process.returncode}")
            raise KernelStartFailed(f"{sys.executable} could not run the notebook's cells: {why}") from None

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def ended(self) -> str:
        """How the child ended, in words (after `Ended`)."""
        code = self._process.poll()
        if code is None:
            return "it closed its end"
        if code < 0:
            try:
                return f"it was stopped by {signal.Signals(-code).name}"
            except ValueError:
                return f"it was stopped by signal {-code}"
        return f"it exited with status {code}"

    def send(self, message: dict) -> None:
        """Ended when the child is gone."""
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(json.dumps(message).encode("utf-8") + b"\n")
            self._process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise Ended() from None

    def receive(self, timeout: float) -> dict:
        """The child's next message within `timeout` seconds: TimedOut, or Ended when it exited."""
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            try:
                line = self._lines.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                raise TimedOut() from None
            if line is None:
                self._lines.put(None)  # every later read ends too
                self._process.wait()
                raise Ended()
            try:
                message = json.loads(line)
            except ValueError:
                continue  # not the protocol's: something of the student's wrote to it
            if isinstance(message, dict):
                return message

    def kill(self) -> None:
        """The child and everything it started in its session, now."""
        if os.name == "posix":
            try:
                os.killpg(self._process.pid, signal.SIGKILL)
            except OSError:
                pass
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()
        try:
            if self._process.stdin is not None:
                self._process.stdin.close()
        except OSError:
            pass
