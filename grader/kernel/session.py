"""Run one submission in a kernel and get observations out of it, surviving whatever it does.

The student's cells run once, each with its own deadline; a cell that raises does not stop the
others. Then the probe answers the grader's requests exercise by exercise. When a cell or a
request runs past its deadline or kills the kernel, the session starts a fresh kernel, replays
the cells that completed, and carries on with the requests that are left: a hang costs the
request that hung, not the exercises after it.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from grader.errors import MachineOverloaded
from grader.kernel import INSIDE as KERNEL_INSIDE
from grader.kernel.client import CellRun, Kernel
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
from grader.submission import SourceCell, Submission, file_statement

PROBE_PATH = KERNEL_INSIDE / "runtime.py"
MAX_RESTARTS = 4  # per phase: the student's cells, then each exercise's probe batch
MAX_CELL_PROBLEMS = 20
"""Cell problems kept in a report; the rest are counted (`Report.cell_problems_omitted`)."""
MAX_MESSAGE = 1_000
"""Characters of one cell problem's message (the student's exception text included)."""


def probe_code(requests: list[Request], nonce: str = "", probe_path: Path = PROBE_PATH) -> str:
    """The cell that asks the probe: load it fresh by path, answer in the user namespace.

    Fresh means a new namespace for every cell, never a module kept in `sys.modules` where the
    student's code could reach it between cells. Its code comes from the bytecode cached beside
    it when that is current (the grader's install compiles it; the sandbox binds it read-only),
    as an import would: compiling the probe's source costs 17 ms a cell, four cells a submission.

    The probe wraps each observation with `nonce`, fresh for each probe cell, so output that a
    thread of the student's earlier cells prints in the shape of an observation is not taken for
    one. (Code that the probe itself calls can still read the nonce: what it reports about itself
    is a claim, which docs/security.md says.)
    """
    payload = json.dumps([r.model_dump(mode="json") for r in requests])
    path = str(probe_path)
    return ("(lambda path, namespace: (exec(__import__('importlib.machinery').machinery.SourceFileLoader("
            "'grader_probe', path).get_code('grader_probe'), namespace), namespace)[1])"
            f"({path!r}, {{'__name__': 'grader_probe', '__file__': {path!r}}})['serve']"
            f"({payload!r}, globals(), nonce={nonce!r})")


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
    a result of another kind, or not one value per call, or a kernel death only the grader can see."""
    if obs.died:
        return "a kernel death, which only the grader reports"
    if obs.status != "ok":
        return None
    expected = {"lookup": "lookup", "value": "value", "call": "call", "trace": "trace",
                "compile_count": "compile_count", "export": "export"}[request.op]
    if obs.result is None or obs.result.op != expected:
        return f"a {obs.result.op if obs.result else 'missing'} result for a {request.op} request"
    values = getattr(obs.result, "values", None)
    if values is not None:
        wanted = len(request.calls) if isinstance(request, CallRequest) else 1
        if len(values) != wanted:
            return f"{len(values)} values for {wanted} calls"
    return None


def _own(run: CellRun, where: str) -> CellRun:
    """The run, unless it timed out while the machine kept the kernel from the CPU: that timeout
    is not the student's, so it is no verdict (MachineOverloaded: grade_one grades it again)."""
    if run.status == "timeout" and run.starved:
        raise MachineOverloaded(where, run.starved)
    return run


def _capped(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


_KERNEL_FOLDER = re.compile(r"/(?:[^\s'\"/]+/)*grade-\d+-[^\s'\"/]*/")
"""A kernel's working folder in a path (grader/runtime_paths.py names it `grade-<pid>-...`): where a
module's `__file__` lies (`file_statement`), the student's code's HOME too."""
ALONE = "the grader runs the submitted file alone (files beside it are not handed in)"


def as_handed_in(ename: str | None, evalue: str) -> str:
    """An exception's text as the student can read it: the paths it names without the kernel's
    temporary folder (a file beside the submission is 'data.csv', as the code names it), and a file
    not found told as what it is: not handed in."""
    said = _KERNEL_FOLDER.sub("", evalue)
    return f"{said}; {ALONE}" if ename == "FileNotFoundError" else said


def _where(submission: Submission, cell: SourceCell) -> str:
    if submission.kind == "module":
        return f"line {cell.first_line}"
    return f"cell {cell.number or cell.index + 1}"


class Session:
    """One submission's kernel (and its replacements)."""

    def __init__(
        self,
        submission: Submission,
        *,
        cell_timeout: float,
        submission_timeout: float,
        request_timeout: float | None = None,
        kernel_factory: Callable[[], Kernel] = Kernel,
    ):
        self.submission = submission
        self.cell_timeout = cell_timeout
        self.request_timeout = request_timeout  # one probe request; None: only the exercise's budget
        self.deadline = time.monotonic() + submission_timeout
        self._factory = kernel_factory
        self._kernel: Kernel | None = None
        self._completed: list[SourceCell] = []  # cells safe to replay in a fresh kernel
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
        """A fresh kernel with the completed cells run again; False when that is not possible.
        The replay spends the submission's time like everything else (its limit holds end to end)."""
        if self.restarts >= MAX_RESTARTS or self._remaining() <= 0:
            return False
        self.restarts += 1
        kernel = self._new_kernel()
        self._prepare(kernel)
        for cell in self._completed:
            budget = min(self.cell_timeout, self._remaining())
            if budget <= 0:
                return False
            if _own(kernel.run(cell.source, budget), "a replayed cell").status in ("timeout", "died"):
                return False
        return True

    def _problem(self, problem: CellProblem) -> None:
        if len(self.problems) < MAX_CELL_PROBLEMS:
            self.problems.append(problem.model_copy(update={"message": _capped(problem.message)}))
        else:
            self.problems_omitted += 1

    def _prepare(self, kernel: Kernel) -> None:
        """A module's namespace gets its `__file__` before its first statement runs (`file_statement`)."""
        statement = file_statement(self.submission)
        budget = min(self.cell_timeout, self._remaining())
        if statement is not None and budget > 0:
            _own(kernel.run(statement, budget), "setting the module's __file__")

    def run_student_cells(self) -> None:
        kernel = self._kernel.start() if self._kernel is not None else self._new_kernel()
        self._prepare(kernel)
        for cell in self.submission.cells:
            where = _where(self.submission, cell)
            self.on_stage(f"running {where}")
            if cell.notice:  # its self-check call left out: skipped, and said so whatever the cell does
                self._problem(CellProblem(cell=cell.index, where=where, status="skipped",
                                          message=f"{where} {cell.notice}"))
            budget = min(self.cell_timeout, self._remaining())
            if budget <= 0:
                self._problem(CellProblem(cell=cell.index, where=where, status="skipped",
                                          message=f"{where} was not run: the submission's time limit ran out"))
                continue
            if not kernel.alive:
                if not self._replay():
                    self._problem(CellProblem(cell=cell.index, where=where, status="skipped",
                                              message=f"{where} was not run: the kernel could not be restored"))
                    continue
                assert self._kernel is not None
                kernel = self._kernel
            budget = min(self.cell_timeout, self._remaining())
            run = _own(kernel.run(cell.source, budget), where)
            problem = self._describe(run, cell, where, budget)
            if problem:
                self._problem(problem)
            if run.status in ("ok", "error"):
                self._completed.append(cell)

    @staticmethod
    def _describe(run: CellRun, cell: SourceCell, where: str, budget: float) -> CellProblem | None:
        if run.status == "ok":
            return None
        if run.status == "error":
            evalue = as_handed_in(run.ename, run.evalue) if run.evalue else None
            msg = f"{where} raised {run.ename}: {evalue}" if evalue else f"{where} raised {run.ename}"
        elif run.status == "timeout":
            msg = f"{where} was stopped after {budget:g} s (an endless loop?); the cells after it still ran"
        elif run.evalue and "could not accept" in run.evalue:
            msg = f"{where}: {run.evalue}; the kernel was restarted without that cell"
        else:
            msg = f"{where} killed the Python kernel; it was restarted without that cell"
        if run.status == "error" and run.line is not None:
            at = f"line {cell.first_line + run.line - 1}" if where.startswith("line ") else f"{where}, line {run.line}"
            msg = msg.replace(f"{where} raised", f"{at} raised", 1)
        return CellProblem(cell=cell.index, where=where, status=run.status, message=msg, line=run.line,
                           ename=run.ename if run.status == "error" else None)

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
            kernel.stop_strays()
            budget = min(timeout, self._remaining())  # after stopping strays: that took time too
            if budget <= 0:
                continue  # the loop's top marks the rest as out of time
            nonce = secrets.token_hex(16)
            run = _own(kernel.run(probe_code(pending, nonce), budget, observations=True,
                                  quiet=self.request_timeout), "a check")
            ids = {r.id: r for r in pending}
            rejected: dict[str, Observation] = {}  # used only where no valid answer came
            for raw in run.observations:
                obs = self._accept(raw, nonce, ids)
                if obs is None or obs.id in results:
                    continue
                if obs.status == "crashed":
                    rejected.setdefault(obs.id, obs)
                else:
                    results[obs.id] = obs
            for rid, obs in rejected.items():
                results.setdefault(rid, obs)
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
                results[culprit.id] = Observation(id=culprit.id, status="crashed", died=True,
                                                  detail=_capped(f"the Python kernel died during this check "
                                                                 f"({run.evalue or 'no reason given'})"))
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

    def _accept(self, raw: Any, nonce: str, ids: dict[str, Request]) -> Observation | None:
        """One observation from the probe's output, bounded and validated; a bad one becomes
        that request's `crashed` observation, never an exception out of the grader."""
        if not isinstance(raw, dict) or raw.get("nonce") != nonce:
            return None  # not from this probe cell
        payload = raw.get("observation")
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
            if obs.raised is not None:  # told to the student: never the kernel's temporary folder
                evalue = as_handed_in(obs.raised.ename, obs.raised.evalue)
                obs = obs.model_copy(update={"raised": obs.raised.model_copy(update={"evalue": evalue})})
            return obs
        except TooLarge as exc:
            return Observation(id=rid, status="crashed", detail=f"its answer was too large to check ({exc})")
        except ValidationError as exc:
            first = exc.errors()[0] if exc.errors() else {"msg": "malformed"}
            return Observation(id=rid, status="crashed",
                               detail=_capped(f"its answer was malformed ({first.get('msg')})"))
