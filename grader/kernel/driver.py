"""One submission's cells and probe requests, driven through whichever process runs them.

The instructor's `grade` runs a submission in a sandboxed Jupyter kernel (grader/kernel/session.py);
the student pack's `grade` runs it in a child Python on the student's own machine
(grader/selfgrade/session.py). What happens around that process is the same for both, and lives
here once, so that a fix reaches both and the student reads the same report either way:

- the cells run once each, in order, each with its own deadline within the submission's; a cell
  that raises does not stop the others; every cell problem is told in one sentence (`describe`),
  the first MAX_CELL_PROBLEMS kept and the rest counted;
- then the probe answers the grader's requests exercise by exercise; every answer is bounded and
  validated (`Driver._accept`) before the grader believes it;
- a cell or a request that runs past its deadline or kills the process costs itself only: a
  fresh process runs the cells that completed again (at most MAX_RESTARTS times a phase) and the
  rest goes on; a function that hung is not called again.

The process is reached through `Process`, a small interface (as jupyter_client's provisioner is
for its kernel manager): start a fresh one, run a source with a budget, ask the probe with a
budget. Light on purpose: the student pack copies this module (no Jupyter, zmq, sandbox or batch).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Literal, Protocol

from pydantic import BaseModel, Field, ValidationError

from grader.errors import MachineOverloaded
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
from grader.submission import SourceCell, Submission

MAX_RESTARTS = 4  # per phase: the student's cells, then each exercise's probe batch
MAX_CELL_PROBLEMS = 20
"""Cell problems kept in a report; the rest are counted (`Report.cell_problems_omitted`)."""
MAX_MESSAGE = 1_000
"""Characters of one cell problem's message (the student's exception text included)."""


class CellRun(BaseModel):
    """What happened to one run of a source (a cell, or the probe's requests). `observations`
    are the probe's payloads as they came, unchecked (`Driver._accept` checks them)."""

    status: Literal["ok", "error", "timeout", "died"]
    ename: str | None = None
    evalue: str | None = None
    observations: list[Any] = []
    seconds: float = 0.0
    line: int | None = Field(default=None, description="the line of the cell where it raised, from the traceback")
    starved: str | None = Field(default=None, description=(
        "a timeout during which the machine kept the kernel's processes from the CPU, in words "
        "(grader/sandbox/starvation.py): not the student's timeout"))
    memory_limit_bytes: int | None = Field(default=None, description=(
        "a death at the sandbox's memory bound (its cgroup's, or the watcher's): that bound"))


class Process(Protocol):
    """What runs the student's code: one process at a time, replaced by `fresh()`."""

    noun: str
    """The process as a sentence names it: "cell 3 killed the Python kernel", "… died during this check"."""

    @property
    def alive(self) -> bool: ...

    def fresh(self) -> None:
        """A new process in place of the last one (killed); KernelStartFailed when none starts."""

    def run(self, source: str, filename: str, budget: float) -> CellRun:
        """Run one source in the process's namespace, compiled under `filename`. Never raises for
        what the code does; a run past `budget` seconds is stopped (`timeout`)."""

    def probe(self, requests: list[Request], budget: float, request_timeout: float | None) -> CellRun:
        """The probe's answers to `requests` (in `observations`) and how it ended: `ok` or `error`
        (it stopped answering), `timeout` (`budget` for them all, or `request_timeout` without an
        answer, ran out) or `died`."""

    def as_told(self, ename: str | None, evalue: str) -> str:
        """An exception's text as the student can read it (the process's own folders left out)."""

    def stop_strays(self) -> None:
        """Stop what the student's code left running beside the process (a no-op where nothing can be)."""

    def close(self) -> None: ...


def _gib(limit: int) -> str:
    return f"{limit / 2**30:.3g} GiB"


def where(submission: Submission, cell: SourceCell) -> str:
    """A cell as the student finds it: "cell 3" (Jupyter's count), or a module's "line 12"."""
    if submission.kind == "module":
        return f"line {cell.first_line}"
    return f"cell {cell.number or cell.index + 1}"


def cell_file(cell: SourceCell) -> str:
    """The name a cell's code is compiled under, as IPython names it (the probe reads lines from it)."""
    return f"<ipython-input-{cell.number or cell.index + 1}-0>"


def _capped(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def _target(request: Request) -> str | None:
    """The student function a request calls or traces, if any."""
    if isinstance(request, (CallRequest, TraceRequest, CompileCountRequest, ExportRequest)):
        return request.target
    return None


def _runs(request: Request) -> bool:
    """Whether the request runs the function's program (a trace or an export only traces it)."""
    return isinstance(request, (CallRequest, CompileCountRequest))


def _wrong_answer(request: Request, obs: Observation) -> str | None:
    """Why an observation cannot be the answer to its request (only a tampered probe sends one):
    a result of another kind, or not one value per call, or a death only the grader can see."""
    if obs.died:
        return "a kernel death, which only the grader reports"
    if obs.status != "ok":
        return None
    if obs.result is None or obs.result.op != request.op:
        return f"a {obs.result.op if obs.result else 'missing'} result for a {request.op} request"
    values = getattr(obs.result, "values", None)
    if values is not None:
        wanted = len(request.calls) if isinstance(request, CallRequest) else 1
        if len(values) != wanted:
            return f"{len(values)} values for {wanted} calls"
    return None


def _own(run: CellRun, where: str) -> CellRun:
    """The run, unless it timed out while the machine kept the process from the CPU: that timeout
    is not the student's, so it is no verdict (MachineOverloaded: grade_one grades it again)."""
    if run.status == "timeout" and run.starved:
        raise MachineOverloaded(where, run.starved)
    return run


class Driver:
    """One submission's process (and its replacements): its cells, then the probe's requests."""

    def __init__(self, submission: Submission, process: Process, *, cell_timeout: float,
                 submission_timeout: float, request_timeout: float | None = None,
                 file_statement: str | None = None):
        """`file_statement`: run first in every fresh process (a module's `__file__`)."""
        self.submission = submission
        self.process = process
        self.cell_timeout = cell_timeout
        self.request_timeout = request_timeout  # one probe request; None: only the exercise's budget
        self.deadline = time.monotonic() + submission_timeout
        self._statement = file_statement
        self._completed: list[SourceCell] = []  # cells safe to replay in a fresh process
        self.problems: list[CellProblem] = []
        self.on_stage: Callable[[str], None] = lambda stage: None  # what it does now (a progress line)
        self.problems_omitted = 0
        self.restarts = 0
        # function -> (why, whether tracing it hung): once it timed out, it is not run again
        self._hung: dict[str, tuple[str, bool]] = {}
        self._nodes = 0  # JSON nodes of every observation so far (bounded per submission)

    # ------------------------------------------------------------------ lifecycle

    def _remaining(self) -> float:
        return self.deadline - time.monotonic()

    def remaining(self) -> float:
        """Seconds left of the submission's time limit (the verifier spends them too)."""
        return max(0.0, self._remaining())

    def _fresh(self) -> None:
        """A fresh process; a module's namespace gets its `__file__` before its first statement runs."""
        self.process.fresh()
        budget = min(self.cell_timeout, self._remaining())
        if self._statement is not None and budget > 0:
            _own(self.process.run(self._statement, "<__file__>", budget), "setting the module's __file__")

    def _replay(self) -> bool:
        """A fresh process with the completed cells run again; False when that is not possible.
        The replay spends the submission's time like everything else (its limit holds end to end)."""
        if self.restarts >= MAX_RESTARTS or self._remaining() <= 0:
            return False
        self.restarts += 1
        self._fresh()
        for cell in self._completed:
            budget = min(self.cell_timeout, self._remaining())
            if budget <= 0:
                return False
            run = _own(self.process.run(cell.source, cell_file(cell), budget), "a replayed cell")
            if run.status in ("timeout", "died"):
                return False
        return True

    def close(self) -> None:
        self.process.close()

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ cells

    def _problem(self, problem: CellProblem) -> None:
        if len(self.problems) < MAX_CELL_PROBLEMS:
            self.problems.append(problem.model_copy(update={"message": _capped(problem.message)}))
        else:
            self.problems_omitted += 1

    def _skipped(self, cell: SourceCell, at: str, message: str) -> None:
        self._problem(CellProblem(cell=cell.index, where=at, status="skipped", message=message))

    def run_student_cells(self) -> None:
        self._fresh()
        for cell in self.submission.cells:
            at = where(self.submission, cell)
            self.on_stage(f"running {at}")
            if cell.notice:  # its self-check call left out: skipped, and said so whatever the cell does
                self._skipped(cell, at, f"{at} {cell.notice}")
            if self._remaining() <= 0:
                self._skipped(cell, at, f"{at} was not run: the submission's time limit ran out")
                continue
            if not self.process.alive and not self._replay():
                self._skipped(cell, at, f"{at} was not run: {self.process.noun} could not be restarted")
                continue
            budget = min(self.cell_timeout, self._remaining())
            run = _own(self.process.run(cell.source, cell_file(cell), budget), at)
            problem = self._describe(run, cell, at, budget)
            if problem:
                self._problem(problem)
            if run.status in ("ok", "error"):
                self._completed.append(cell)

    def _describe(self, run: CellRun, cell: SourceCell, at: str, budget: float) -> CellProblem | None:
        """A cell that did not complete, in one sentence."""
        if run.status == "ok":
            return None
        ename = run.ename or "an exception"
        if run.status == "error":
            evalue = self.process.as_told(run.ename, run.evalue) if run.evalue else None
            said = at if run.line is None else (
                f"line {cell.first_line + run.line - 1}" if at.startswith("line ") else f"{at}, line {run.line}")
            msg = f"{said} raised {ename}: {evalue}" if evalue else f"{said} raised {ename}"
        elif run.status == "timeout":
            msg = f"{at} was stopped after {budget:g} s (an endless loop?); the cells after it still ran"
        elif run.evalue and "could not accept" in run.evalue:
            msg = f"{at}: {run.evalue}; {self.process.noun} was restarted without that cell"
        elif run.memory_limit_bytes:
            msg = (f"{at} killed {self.process.noun}: it used more than the {_gib(run.memory_limit_bytes)} of memory "
                   "a grading may use; it was restarted without that cell")
        else:
            msg = f"{at} killed {self.process.noun}; it was restarted without that cell"
        return CellProblem(cell=cell.index, where=at, status=run.status, message=msg, line=run.line,
                           ename=run.ename if run.status == "error" else None)

    # ------------------------------------------------------------------ probe

    def observe(self, requests: list[Request], timeout: float) -> dict[str, Observation]:
        """Observations for every request; ones that hung or crashed are marked so, not lost.

        A function that hung once is not called again in this run: every later request that
        calls it is a `timeout` at once, with the same reason (a hanging function costs one
        probe timeout, not one per check).
        """
        self.restarts = 0  # each exercise gets its own restart budget
        results: dict[str, Observation] = {}
        pending = list(requests)
        while pending:
            pending = self._skip_hung(pending, results)
            if not pending:
                break
            if min(timeout, self._remaining()) <= 0:
                for r in pending:
                    results[r.id] = Observation(id=r.id, status="timeout", detail="the submission's time limit ran out")
                break
            if not self.process.alive and not self._replay():
                for r in pending:
                    results[r.id] = Observation(id=r.id, status="crashed",
                                                detail=f"{self.process.noun} could not be restarted")
                break
            self.process.stop_strays()
            budget = min(timeout, self._remaining())  # after stopping strays: that took time too
            if budget <= 0:
                continue  # the loop's top marks the rest as out of time
            run = _own(self.process.probe(pending, budget, self.request_timeout), "a check")
            self._take(run.observations, pending, results)
            pending = [r for r in pending if r.id not in results]
            if not pending:
                break
            if run.status in ("ok", "error"):
                # The probe stopped answering without hanging: the student's code broke it.
                why = f"{run.ename}: {run.evalue}" if run.status == "error" else "no answer"
                for r in pending:
                    results[r.id] = Observation(id=r.id, status="crashed",
                                                detail=_capped(f"the probe could not run ({why})"))
                break
            culprit = pending.pop(0)
            if run.status == "timeout":
                detail = run.evalue or f"still running after {budget:g} s"
                results[culprit.id] = Observation(id=culprit.id, status="timeout", detail=detail)
                target = _target(culprit)
                if target:
                    self._hung[target] = (detail, not _runs(culprit))
            else:
                results[culprit.id] = Observation(id=culprit.id, status="crashed", died=True, detail=_capped(
                    f"{self.process.noun} died during this check (" + (
                        f"it used more than the {_gib(run.memory_limit_bytes)} of memory a grading may use"
                        if run.memory_limit_bytes else run.evalue or "no reason given") + ")"))
        return results

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

    def _take(self, payloads: list[Any], pending: list[Request], results: dict[str, Observation]) -> None:
        """The answers of one probe run into `results`: the first valid one of each request, or
        else the first that was rejected (a forged answer cannot hide a real one that follows)."""
        ids = {r.id: r for r in pending}
        rejected: dict[str, Observation] = {}
        for payload in payloads:
            obs = self._accept(payload, ids)
            if obs is None or obs.id in results:
                continue
            if obs.status == "crashed":
                rejected.setdefault(obs.id, obs)
            else:
                results[obs.id] = obs
        for rid, obs in rejected.items():
            results.setdefault(rid, obs)

    def _accept(self, payload: Any, ids: dict[str, Request]) -> Observation | None:
        """One observation from the probe, bounded and validated; a bad one becomes that
        request's `crashed` observation, never an exception out of the grader."""
        rid = payload.get("id") if isinstance(payload, dict) else None
        if not isinstance(rid, str) or rid not in ids:
            return None
        try:
            nodes = measure(payload, max_nodes=MAX_NODES)
            if self._nodes + nodes > MAX_SUBMISSION_NODES:
                raise TooLarge(f"the submission's answers together are over {MAX_SUBMISSION_NODES:,} values")
            self._nodes += nodes
            obs = Observation.model_validate(payload)
            wrong = _wrong_answer(ids[rid], obs)
            if wrong:
                return Observation(id=rid, status="crashed", detail=f"its answer was malformed ({wrong})")
            if obs.raised is not None:  # told to the student: never the process's own folders
                evalue = self.process.as_told(obs.raised.ename, obs.raised.evalue)
                obs = obs.model_copy(update={"raised": obs.raised.model_copy(update={"evalue": evalue})})
            return obs
        except TooLarge as exc:
            return Observation(id=rid, status="crashed", detail=f"its answer was too large to check ({exc})")
        except ValidationError as exc:
            first = exc.errors()[0] if exc.errors() else {"msg": "malformed"}
            return Observation(id=rid, status="crashed",
                               detail=_capped(f"its answer was malformed ({first.get('msg')})"))
