"""One fresh Jupyter kernel for one submission: start it, run cells with deadlines, kill it.

This is the only module that knows nbclient and jupyter_client. Their timeouts and dead-kernel
errors become a `CellRun` status here, so the rest of the grader sees plain results. Outputs are
not kept except errors and the probe's observations: a student cell that prints 50 MB costs
nothing but its own time, and stale or fake output can never reach a verdict.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from pydantic import BaseModel

from grader.errors import KernelStartFailed
from grader.probe.protocol import MIME_TYPE

STARTUP_TIMEOUT_S = 60


class CellRun(BaseModel):
    """What happened to one cell. `observations` are the probe's raw JSON payloads."""

    status: Literal["ok", "error", "timeout", "died"]
    ename: str | None = None
    evalue: str | None = None
    observations: list[dict[str, Any]] = []
    seconds: float = 0.0


class _QuietClient(NotebookClient):
    """Keeps only error outputs and probe observations; everything else is dropped on arrival."""

    def output(self, outs, msg, display_id, cell_index):  # noqa: D401 - nbclient hook
        msg_type = msg["msg_type"]
        if msg_type == "error":
            return super().output(outs, msg, None, cell_index)
        if msg_type == "display_data" and MIME_TYPE in msg["content"].get("data", {}):
            return super().output(outs, msg, None, cell_index)
        return None


class Kernel:
    """A kernel process in its own scratch directory; use as a context manager."""

    def __init__(self, *, kernel_name: str = "python3", scratch: Path | None = None):
        self._own_scratch = scratch is None
        self.scratch = scratch or Path(tempfile.mkdtemp(prefix="grade-"))
        self._kernel_name = kernel_name
        self._client: _QuietClient | None = None
        self._nb = nbformat.v4.new_notebook()
        self.alive = False

    def launch(self) -> Kernel:
        """Spawn the kernel process and return at once: it boots while the grader plans."""
        if self._client is not None:
            return self
        km = AsyncKernelManager(
            kernel_name=self._kernel_name, transport="ipc", ip=str(self.scratch / "kernel-ipc")
        )
        client = _QuietClient(
            self._nb,
            km=km,
            timeout=None,
            allow_errors=True,
            interrupt_on_timeout=False,
            record_timing=False,
            startup_timeout=STARTUP_TIMEOUT_S,
            shutdown_kernel="immediate",
            iopub_timeout=2,
        )
        try:
            client.start_new_kernel(cwd=str(self.scratch))
        except Exception as exc:  # jupyter_client raises many kinds here; all mean "no kernel"
            raise KernelStartFailed(f"{type(exc).__name__}: {exc}") from None
        self._client = client
        return self

    def start(self) -> Kernel:
        """Launch (if not yet) and wait until the kernel answers."""
        self.launch()
        assert self._client is not None
        try:
            self._client.start_new_kernel_client()
        except Exception as exc:
            self.kill()
            raise KernelStartFailed(f"{type(exc).__name__}: {exc}") from None
        self.alive = True
        return self

    def run(self, code: str, timeout: float) -> CellRun:
        """Run one cell. Never raises for what the code does; a hung kernel is killed."""
        if not self.alive or self._client is None:
            return CellRun(status="died", evalue="the kernel is not running")
        cell = nbformat.v4.new_code_cell(code)
        self._nb.cells = [cell]
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
        client, self._client, self.alive = self._client, None, False
        if client is not None and client.km is not None:
            try:
                client._cleanup_kernel()
            except Exception:
                pass

    def close(self) -> None:
        self.kill()
        if self._own_scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> Kernel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
