"""Run one submission in a kernel and get observations out of it, surviving whatever it does.

The student's cells run once, each with its own deadline; a cell that raises does not stop the
others. Then the probe answers the grader's requests exercise by exercise. When a cell or a
request runs past its deadline or kills the kernel, the session starts a fresh kernel, replays
the cells that completed, and carries on with the requests that are left: a hang costs the
request that hung, not the exercises after it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable, Literal

from pydantic import BaseModel, ValidationError

from grader.kernel import CellRun, Kernel
from grader.probe.protocol import Observation, Request
from grader.submission import SourceCell, Submission

PROBE_PATH = Path(__file__).resolve().parent / "probe" / "runtime.py"
MAX_RESTARTS = 4  # per phase: the student's cells, then each exercise's probe batch


class CellProblem(BaseModel):
    """A student cell that did not complete normally (reported to the student)."""

    cell: int
    where: str
    status: Literal["error", "timeout", "died", "skipped"]
    message: str


def probe_code(requests: list[Request], probe_path: Path = PROBE_PATH) -> str:
    """The cell that asks the probe: load it fresh by path, answer in the user namespace."""
    payload = json.dumps([r.model_dump(mode="json") for r in requests])
    return f"__import__('runpy').run_path({str(probe_path)!r})['serve']({payload!r}, globals())"


def _where(submission: Submission, cell: SourceCell) -> str:
    if submission.kind == "module":
        return f"line {cell.first_line}"
    return f"cell {cell.index + 1}"


class Session:
    """One submission's kernel (and its replacements)."""

    def __init__(
        self,
        submission: Submission,
        *,
        cell_timeout: float,
        submission_timeout: float,
        kernel_factory: Callable[[], Kernel] = Kernel,
    ):
        self.submission = submission
        self.cell_timeout = cell_timeout
        self.deadline = time.monotonic() + submission_timeout
        self._factory = kernel_factory
        self._kernel: Kernel | None = None
        self._completed: list[SourceCell] = []  # cells safe to replay in a fresh kernel
        self.problems: list[CellProblem] = []
        self.restarts = 0

    # ------------------------------------------------------------------ lifecycle

    def _remaining(self) -> float:
        return self.deadline - time.monotonic()

    def launch(self) -> None:
        """Spawn the first kernel now, so that it boots while the grader does other work."""
        if self._kernel is None:
            self._kernel = self._factory().launch()

    def _new_kernel(self) -> Kernel:
        if self._kernel is not None:
            self._kernel.close()
        self._kernel = self._factory().start()
        return self._kernel

    def _replay(self) -> bool:
        """A fresh kernel with the completed cells run again; False when that is not possible."""
        if self.restarts >= MAX_RESTARTS:
            return False
        self.restarts += 1
        kernel = self._new_kernel()
        for cell in self._completed:
            if kernel.run(cell.source, self.cell_timeout).status in ("timeout", "died"):
                return False
        return True

    def run_student_cells(self) -> None:
        kernel = self._kernel.start() if self._kernel is not None else self._new_kernel()
        for cell in self.submission.cells:
            where = _where(self.submission, cell)
            budget = min(self.cell_timeout, self._remaining())
            if budget <= 0:
                self.problems.append(CellProblem(cell=cell.index, where=where, status="skipped",
                                                 message=f"{where} was not run: the submission's time limit ran out"))
                continue
            if not kernel.alive:
                if not self._replay():
                    self.problems.append(CellProblem(cell=cell.index, where=where, status="skipped",
                                                     message=f"{where} was not run: the kernel could not be restored"))
                    continue
                assert self._kernel is not None
                kernel = self._kernel
            run = kernel.run(cell.source, budget)
            problem = self._describe(run, cell, where, budget)
            if problem:
                self.problems.append(problem)
            if run.status in ("ok", "error"):
                self._completed.append(cell)

    @staticmethod
    def _describe(run: CellRun, cell: SourceCell, where: str, budget: float) -> CellProblem | None:
        if run.status == "ok":
            return None
        if run.status == "error":
            msg = f"{where} raised {run.ename}: {run.evalue}" if run.evalue else f"{where} raised {run.ename}"
        elif run.status == "timeout":
            msg = f"{where} was stopped after {budget:g} s (an endless loop?); the cells after it still ran"
        else:
            msg = f"{where} killed the Python kernel; it was restarted without that cell"
        return CellProblem(cell=cell.index, where=where, status=run.status, message=msg)

    def close(self) -> None:
        if self._kernel is not None:
            self._kernel.close()
            self._kernel = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ probe

    def observe(self, requests: list[Request], timeout: float) -> dict[str, Observation]:
        """Observations for every request; ones that hung or crashed are marked so, not lost."""
        self.restarts = 0  # each exercise gets its own restart budget
        results: dict[str, Observation] = {}
        pending = list(requests)
        while pending:
            budget = min(timeout, self._remaining())
            if budget <= 0:
                for r in pending:
                    results[r.id] = Observation(id=r.id, status="timeout", detail="the submission's time limit ran out")
                break
            kernel = self._kernel
            if kernel is None or not kernel.alive:
                if not self._replay():
                    for r in pending:
                        results[r.id] = Observation(id=r.id, status="crashed",
                                                    detail="the kernel could not be restarted")
                    break
                kernel = self._kernel
                assert kernel is not None
            run = kernel.run(probe_code(pending), budget)
            ids = {r.id for r in pending}
            for raw in run.observations:
                try:
                    obs = Observation.model_validate(raw)
                except ValidationError:
                    continue
                if obs.id in ids:
                    results[obs.id] = obs
            pending = [r for r in pending if r.id not in results]
            if not pending:
                break
            if run.status in ("ok", "error"):
                # The probe stopped answering without hanging: the student's code broke it.
                why = f"{run.ename}: {run.evalue}" if run.status == "error" else "no answer"
                for r in pending:
                    results[r.id] = Observation(id=r.id, status="crashed",
                                                detail=f"the probe could not run ({why})")
                break
            culprit = pending.pop(0)
            if run.status == "timeout":
                results[culprit.id] = Observation(id=culprit.id, status="timeout",
                                                  detail=f"still running after {budget:g} s")
            else:
                results[culprit.id] = Observation(id=culprit.id, status="crashed",
                                                  detail="the Python kernel died during this check")
        return results
