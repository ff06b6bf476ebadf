"""One fresh Jupyter kernel for one submission: start it, run cells with deadlines, kill it.

This is the only module that knows nbclient and jupyter_client. Their timeouts and dead-kernel
errors become a `CellRun` status here, so the rest of the grader sees plain results. Outputs are
not kept except errors and the probe's observations: a student cell that prints 50 MB costs
nothing but its own time, and stale or fake output can never reach a verdict.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync
from pydantic import BaseModel

from grader.errors import KernelStartFailed
from grader.probe.protocol import MIME_TYPE
from grader.sandbox import Sandbox, SandboxPolicy, available

STARTUP_TIMEOUT_S = 60
KERNEL_ARGS = ["--HistoryManager.hist_file=:memory:"]  # no history database per kernel
# A warm kernel imports JAX while it boots, ahead of need; no name is left in the namespace.
WARM_ARGS = ["--IPKernelApp.exec_lines=__import__('jax.numpy')"]


class CellRun(BaseModel):
    """What happened to one cell. `observations` are the probe's raw JSON payloads."""

    status: Literal["ok", "error", "timeout", "died"]
    ename: str | None = None
    evalue: str | None = None
    observations: list[dict[str, Any]] = []
    seconds: float = 0.0


@functools.cache
def _client_class() -> type:
    """nbclient (and nbformat's validator) load only once a kernel is launched: they are slow
    to import, and the kernel boots meanwhile."""
    from nbclient import NotebookClient

    class QuietClient(NotebookClient):
        """Keeps only error outputs and probe observations; the rest is dropped on arrival."""

        def output(self, outs, msg, display_id, cell_index):
            msg_type = msg["msg_type"]
            if msg_type == "error":
                return super().output(outs, msg, None, cell_index)
            if msg_type == "display_data" and MIME_TYPE in msg["content"].get("data", {}):
                return super().output(outs, msg, None, cell_index)
            return None

    return QuietClient


def _code_cell(source: str) -> Any:
    from nbformat.v4 import new_code_cell

    return new_code_cell(source)


class _SandboxedKernelManager(AsyncKernelManager):
    """Starts the kernel command inside the sandbox's layers."""

    sandbox: Sandbox | None = None

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        cmd = super().format_kernel_cmd(extra_arguments)
        return self.sandbox.wrap(cmd, self.connection_file) if self.sandbox else cmd


class Kernel:
    """A kernel process in its own scratch directory (and sandbox); use as a context manager."""

    def __init__(self, *, kernel_name: str = "python3", sandbox: SandboxPolicy | None = None,
                 warm: bool = False):
        self.scratch = Path(tempfile.mkdtemp(prefix="grade-"))
        self._kernel_name = kernel_name
        self._args = KERNEL_ARGS + (WARM_ARGS if warm else [])
        self._sandbox = Sandbox(self.scratch, sandbox, available()) if sandbox else None
        self._km: AsyncKernelManager | None = None
        self._client: Any = None
        self.alive = False

    def launch(self) -> Kernel:
        """Spawn the kernel process and return at once: it boots while the grader plans."""
        if self._km is not None:
            return self
        km = _SandboxedKernelManager(
            kernel_name=self._kernel_name, transport="ipc", ip=str(self.scratch / "kernel-ipc")
        )
        km.connection_file = str(self.scratch / "connection.json")  # never in a shared runtime dir
        try:
            if self._sandbox:
                self._sandbox.prepare()
                km.sandbox = self._sandbox
            # The kernel's own stdout/stderr are not the student's output (that comes over
            # iopub): keep them off the grader's terminal.
            run_sync(km.start_kernel)(extra_arguments=self._args, cwd=str(self.scratch),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except Exception as exc:  # jupyter_client raises many kinds here; all mean "no kernel"
            if self._sandbox:
                self._sandbox.cleanup()
            raise KernelStartFailed(f"{type(exc).__name__}: {exc}") from None
        self._km = km
        return self

    def start(self) -> Kernel:
        """Launch (if not yet) and wait until the kernel answers."""
        if self.alive:
            return self
        self.launch()
        from nbformat.v4 import new_notebook

        client = _client_class()(
            new_notebook(),
            km=self._km,
            timeout=None,
            allow_errors=True,
            interrupt_on_timeout=False,
            record_timing=False,
            startup_timeout=STARTUP_TIMEOUT_S,
            shutdown_kernel="immediate",
            iopub_timeout=2,
        )
        self._client = client
        try:
            client.start_new_kernel_client()
        except Exception as exc:
            self.kill()
            raise KernelStartFailed(f"{type(exc).__name__}: {exc}") from None
        self.alive = True
        return self

    def run(self, code: str, timeout: float) -> CellRun:
        """Run one cell. Never raises for what the code does; a hung kernel is killed."""
        if not self.alive or self._client is None:
            return CellRun(status="died", evalue="the kernel is not running")
        from nbclient.exceptions import CellTimeoutError, DeadKernelError  # loaded by start()

        cell = _code_cell(code)
        self._client.nb.cells = [cell]
        self._client.timeout = max(1, round(timeout))
        started = time.monotonic()
        try:
            self._client.execute_cell(cell, 0)
        except CellTimeoutError:
            # Kill rather than interrupt: an interrupt can be ignored, and nbclient leaves the
            # timed-out cell's output reader running, which would swallow later cells' output.
            self.kill()
            return self._finish(CellRun(status="timeout", evalue=f"still running after {timeout:g} s"),
                                cell, started)
        except DeadKernelError:
            self.kill()  # release its channels; the process is already gone
            return self._finish(CellRun(status="died", evalue="the kernel process died"), cell, started)
        errors = [o for o in cell.outputs if o.get("output_type") == "error"]
        if errors:
            run = CellRun(status="error", ename=errors[0].get("ename"), evalue=errors[0].get("evalue"))
        else:
            run = CellRun(status="ok")
        return self._finish(run, cell, started)

    @staticmethod
    def _finish(run: CellRun, cell: Any, started: float) -> CellRun:
        observations = [
            dict(o["data"][MIME_TYPE])
            for o in cell.outputs
            if o.get("output_type") == "display_data" and MIME_TYPE in o.get("data", {})
        ]
        return run.model_copy(update={"observations": observations, "seconds": time.monotonic() - started})

    def kill(self) -> None:
        """Kill the kernel now (no graceful shutdown: nothing in it is worth waiting for)."""
        km, client = self._km, self._client
        self._km, self._client, self.alive = None, None, False
        if km is None:
            return
        process = getattr(getattr(km, "provisioner", None), "process", None)
        if process is not None and process.poll() is None:
            process.kill()  # SIGKILL: jupyter_client's shutdown would poll for a while first
            process.wait(timeout=10)
        try:
            if client is not None:
                client._cleanup_kernel()  # channels and connection files; the process is gone
            else:
                run_sync(km.cleanup_resources)()
        except Exception:
            pass
        if self._sandbox:
            self._sandbox.cleanup()  # whatever the kernel started, wherever it went

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> Kernel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class Prelaunched:
    """A kernel factory whose first kernel is already booting; later ones are started fresh."""

    def __init__(self, kernel_name: str = "python3", sandbox: SandboxPolicy | None = None):
        self._make = functools.partial(Kernel, kernel_name=kernel_name, sandbox=sandbox)
        self._first: Kernel | None = self._make().launch()

    def __call__(self) -> Kernel:
        first, self._first = self._first, None
        return first or self._make()

    def close(self) -> None:
        """Discard the first kernel if nobody took it (e.g. the submission was unreadable)."""
        if self._first is not None:
            self._first.close()
            self._first = None
