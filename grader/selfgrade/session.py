"""A notebook run in a child process (`child.Child`) for the pack's `grade`, as a kernel
`Session` runs one for the instructor's: the cells once each, with their deadlines; then the
probe's requests, exercise by exercise, answered in the cells' namespace.

A cell or a request that runs past its deadline, or kills the process, costs itself only: the
child is killed, a fresh one runs the cells that completed again, and the rest goes on. A
function that hung is not called again. The sentences are the instructor's `grade`'s
(grader/kernel/session.py), so the student reads the same report either way.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from grader.kernel.protocol import (
    MAX_NODES,
    MAX_SUBMISSION_NODES,
    CallRequest,
    CompileCountRequest,
    ExportRequest,
    Observation,
    Request,
    TooLarge,
    TraceRequest,
    measure,
)
from grader.report import CellProblem
from grader.selfgrade.child import Child, Ended, TimedOut
from grader.submission import SourceCell, Submission, file_statement

MAX_RESTARTS = 4  # per phase: the cells, then each exercise's probe batch (as a kernel Session)
MAX_CELL_PROBLEMS = 20
MAX_MESSAGE = 1_000


def where(submission: Submission, cell: SourceCell) -> str:
    """A cell as the student finds it: "cell 3" (Jupyter's count), or a module's "line 12"."""
    if submission.kind == "module":
        return f"line {cell.first_line}"
    return f"cell {cell.number or cell.index + 1}"


def cell_file(submission: Submission, cell: SourceCell) -> str:
    """The name the cell's code is compiled under, the one a kernel's probe reads lines from."""
    return f"<ipython-input-{cell.number or cell.index + 1}-0>"


def _capped(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def _target(request: Request) -> str | None:
    if isinstance(request, (CallRequest, TraceRequest, CompileCountRequest, ExportRequest)):
        return request.target
    return None


def _runs(request: Request) -> bool:
    """Whether the request runs the function's program (a trace or an export only traces it)."""
    return isinstance(request, (CallRequest, CompileCountRequest))


class NotebookProcess:
    """One submission's child process (and its replacements); a `Prober` for the judging core."""

    def __init__(self, submission: Submission, *, cell_timeout: float, request_timeout: float,
                 submission_timeout: float, first: Child | None = None):
        """`first`: a child already started in the notebook's folder (it boots while the grader
        imports and plans), adopted by the first run."""
        self.submission = submission
        self.cell_timeout = cell_timeout
        self.request_timeout = request_timeout
        self.deadline = time.monotonic() + submission_timeout
        self.folder = Path(submission.path).resolve().parent
        self._child: Child | None = None
        self._first = first
        self._completed: list[SourceCell] = []
        self._hung: dict[str, tuple[str, bool]] = {}  # function -> (why, whether tracing it hung)
        self._nodes = 0
        self.problems: list[CellProblem] = []
        self.problems_omitted = 0
        self.restarts = 0

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    # ------------------------------------------------------------------ lifecycle

    def _fresh(self) -> Child:
        self.close()
        child, self._first = self._first or Child(self.folder), None
        self._child = child
        child.wait_ready()
        statement = file_statement(self.submission, here=True)  # a module's `__file__`, as Python gives it
        if statement is not None:
            try:
                child.send({"op": "cell", "source": statement, "filename": "<__file__>"})
                child.receive(min(self.cell_timeout, max(self.remaining(), 1.0)))
            except TimedOut:
                child.kill()  # the cells that follow restart it, as after a cell that hung
            except Ended:
                pass
        return child

    def close(self) -> None:
        if self._first is not None:
            self._first.kill()
            self._first = None
        if self._child is not None:
            self._child.kill()
            self._child = None

    def __enter__(self) -> NotebookProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, child: Child, cell: SourceCell, budget: float) -> dict:
        """One cell: the child's answer, or {"status": "timeout"} / {"status": "died"}."""
        try:
            child.send({"op": "cell", "source": cell.source, "filename": cell_file(self.submission, cell)})
            return child.receive(budget)
        except TimedOut:
            child.kill()
            return {"status": "timeout"}
        except Ended:
            return {"status": "died"}

    def _replay(self) -> bool:
        """A fresh child with the completed cells run again; False when that is not possible."""
        if self.restarts >= MAX_RESTARTS or self.remaining() <= 0:
            return False
        self.restarts += 1
        child = self._fresh()
        for cell in self._completed:
            budget = min(self.cell_timeout, self.remaining())
            if budget <= 0 or self._run(child, cell, budget)["status"] in ("timeout", "died"):
                return False
        return True

    def _problem(self, problem: CellProblem) -> None:
        if len(self.problems) < MAX_CELL_PROBLEMS:
            self.problems.append(problem.model_copy(update={"message": _capped(problem.message)}))
        else:
            self.problems_omitted += 1

    # ------------------------------------------------------------------ cells

    def run_student_cells(self) -> None:
        child = self._fresh()
        for cell in self.submission.cells:
            at = where(self.submission, cell)
            if cell.notice:
                self._problem(CellProblem(cell=cell.index, where=at, status="skipped",
                                          message=f"{at} {cell.notice}"))
            if self.remaining() <= 0:
                self._problem(CellProblem(cell=cell.index, where=at, status="skipped",
                                          message=f"{at} was not run: the submission's time limit ran out"))
                continue
            if not child.alive:
                if not self._replay():
                    self._problem(CellProblem(cell=cell.index, where=at, status="skipped",
                                              message=f"{at} was not run: Python could not be restarted"))
                    continue
                assert self._child is not None
                child = self._child
            budget = min(self.cell_timeout, self.remaining())
            answer = self._run(child, cell, budget)
            problem = _describe(answer, cell, at, budget)
            if problem is not None:
                self._problem(problem)
            if answer["status"] in ("ok", "error"):
                self._completed.append(cell)

    # ------------------------------------------------------------------ probe

    def observe(self, requests: list[Request], timeout: float) -> dict[str, Observation]:
        """Observations for every request; ones that hung or crashed are marked so, not lost."""
        self.restarts = 0  # each exercise gets its own restart budget
        results: dict[str, Observation] = {}
        pending = list(requests)
        ends = time.monotonic() + timeout
        while pending:
            pending = self._skip_hung(pending, results)
            budget = min(ends - time.monotonic(), self.remaining())
            if not pending:
                break
            if budget <= 0:
                for r in pending:
                    results[r.id] = Observation(id=r.id, status="timeout",
                                                detail="the submission's time limit ran out")
                break
            child = self._child
            if child is None or not child.alive:
                if not self._replay():
                    for r in pending:
                        results[r.id] = Observation(id=r.id, status="crashed",
                                                    detail="Python could not be restarted")
                    break
                child = self._child
                assert child is not None
            status, why = self._ask(child, pending, results, budget)
            pending = [r for r in pending if r.id not in results]
            if not pending:
                break
            if status == "done":  # the probe stopped answering without hanging: the student's code broke it
                detail = _capped(f"the probe could not run ({why or 'no answer'})")
                for r in pending:
                    results[r.id] = Observation(id=r.id, status="crashed", detail=detail)
                break
            culprit = pending.pop(0)
            if status == "timeout":
                detail = f"still running after {why} s"
                results[culprit.id] = Observation(id=culprit.id, status="timeout", detail=detail)
                target = _target(culprit)
                if target:
                    self._hung[target] = (detail, not _runs(culprit))
            else:
                results[culprit.id] = Observation(id=culprit.id, status="crashed", died=True,
                                                  detail="Python died during this check")
        return results

    def _ask(self, child: Child, pending: list[Request], results: dict[str, Observation],
             budget: float) -> tuple[str, str | None]:
        """Send the pending requests and take the answers as they come: ("done", why), or
        ("timeout", seconds) when one ran past the request's limit or the batch's (the child is
        killed), or ("died", None)."""
        ids = {r.id: r for r in pending}
        ends = time.monotonic() + budget
        try:
            child.send({"op": "probe", "requests": _requests_json(pending)})
            while True:
                wait = min(self.request_timeout, ends - time.monotonic())
                try:
                    message = child.receive(wait)
                except TimedOut:
                    child.kill()
                    return "timeout", f"{max(wait, 0):.3g}"
                if message.get("done"):
                    return "done", message.get("error")
                observation = self._accept(message.get("observation"), ids)
                if observation is not None and observation.id not in results:
                    results[observation.id] = observation
        except Ended:
            return "died", None

    def _skip_hung(self, pending: list[Request], results: dict[str, Observation]) -> list[Request]:
        left = []
        for r in pending:
            target = _target(r)
            hung = self._hung.get(target) if target else None
            if hung is not None and (hung[1] or _runs(r)):  # a hang when run spares its tracing
                results[r.id] = Observation(id=r.id, status="timeout",
                                            detail=f"{hung[0]} in an earlier check; not called again")
            else:
                left.append(r)
        return left

    def _accept(self, payload: Any, ids: dict[str, Request]) -> Observation | None:
        """One observation, bounded and validated; a bad one is its request's `crashed`."""
        rid = payload.get("id") if isinstance(payload, dict) else None
        if not isinstance(rid, str) or rid not in ids:
            return None
        try:
            nodes = measure(payload, max_nodes=MAX_NODES)
            if self._nodes + nodes > MAX_SUBMISSION_NODES:
                raise TooLarge(f"the submission's answers together are over {MAX_SUBMISSION_NODES:,} values")
            self._nodes += nodes
            return Observation.model_validate(payload)
        except TooLarge as exc:
            return Observation(id=rid, status="crashed", detail=f"its answer was too large to check ({exc})")
        except ValidationError as exc:
            first = exc.errors()[0] if exc.errors() else {"msg": "malformed"}
            return Observation(id=rid, status="crashed",
                               detail=_capped(f"its answer was malformed ({first.get('msg')})"))


def _requests_json(requests: list[Request]) -> str:
    return json.dumps([r.model_dump(mode="json") for r in requests])


def _describe(answer: dict, cell: SourceCell, at: str, budget: float) -> CellProblem | None:
    """A cell that did not complete, in the words of the instructor's report."""
    status = answer.get("status")
    if status == "ok":
        return None
    line = answer.get("line") if isinstance(answer.get("line"), int) else None
    ename, evalue = str(answer.get("ename") or "an exception"), str(answer.get("evalue") or "")
    if status == "error":
        said = at if line is None else (f"line {cell.first_line + line - 1}" if at.startswith("line ")
                                         else f"{at}, line {line}")
        message = f"{said} raised {ename}: {evalue}" if evalue else f"{said} raised {ename}"
        return CellProblem(cell=cell.index, where=at, status="error", message=message, line=line, ename=ename)
    if status == "timeout":
        return CellProblem(cell=cell.index, where=at, status="timeout", message=(
            f"{at} was stopped after {budget:g} s (an endless loop?); the cells after it still ran"))
    return CellProblem(cell=cell.index, where=at, status="died", message=(
        f"{at} killed the Python process running the notebook; it was restarted without that cell"))
