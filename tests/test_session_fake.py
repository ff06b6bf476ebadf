"""Session logic (cells, probe batches, restarts, replays) with a fake kernel: no processes.
The scenarios the pack's `grade` shares (grader/kernel/driver.py) run through both in
tests/test_driver.py, on this fake; here, the rest, through the kernel's `Session`.

The fake kernel runs cells with `exec` in a dict and answers probe cells with the real probe
(`grader.kernel.inside.runtime.observe`). Student code simulates the faults a real kernel can suffer by
raising `KernelDies` (the process goes away) or `CellHangs` (the cell runs past its deadline).
Both are BaseExceptions, so the probe does not catch them, as it does not catch a real hang.
"""

from __future__ import annotations

import ast
import json

import pytest

from grader.kernel.client import CellRun
from grader.kernel.inside import runtime
from grader.kernel.protocol import Call, CallRequest, LookupRequest, Observation, PyScalar, ValueRequest
from grader.kernel.session import MAX_RESTARTS, Session, probe_code
from grader.submission import SourceCell, Submission


class KernelDies(BaseException):
    """Raised by 'student code' to make the fake kernel die (like os._exit)."""


class CellHangs(BaseException):
    """Raised by 'student code' to make the current cell time out (like `while True: pass`)."""


def _probe_call(code: str) -> ast.Call | None:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
        return None
    call = tree.body[0].value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Subscript)
            and ast.unparse(call.func).endswith("['serve']")):
        return None
    return call


def probe_requests(code: str) -> list[dict] | None:
    """The requests inside a probe cell made by session.probe_code, or None for a student cell."""
    call = _probe_call(code)
    return None if call is None else json.loads(ast.literal_eval(call.args[0]))


def probe_nonce(code: str) -> str:
    call = _probe_call(code)
    assert call is not None
    return next(ast.literal_eval(k.value) for k in call.keywords if k.arg == "nonce")


class FakeKernel:
    """Stands in for grader.kernel.client.Kernel: start(), run(code, timeout) -> CellRun, alive, close()."""

    def __init__(self, factory: FakeKernelFactory):
        self.factory = factory
        self.alive = False
        self.closed = False
        self.namespace: dict = {}
        self.ran: list[str] = []  # every code string run, probe cells included
        self.timeouts: list[float] = []

    def start(self) -> FakeKernel:
        self.alive = True
        self.namespace = {"KernelDies": KernelDies, "CellHangs": CellHangs}
        return self

    def stop_strays(self) -> int:
        return 0

    def run(self, code: str, timeout: float, *, observations: bool = False, quiet: float | None = None) -> CellRun:
        self.timeout = timeout
        self.ran.append(code)
        self.timeouts.append(timeout)
        if not self.alive:
            return CellRun(status="died", evalue="the kernel is not running")
        requests = probe_requests(code)
        if requests is None:
            return self._run_cell(code)
        assert observations, "a probe cell must ask for its observations"
        nonce = probe_nonce(code)
        observations: list[dict] = []
        try:
            for request in requests:
                observations.append({"nonce": nonce, "observation": runtime.observe(request, self.namespace)})
        except KernelDies:
            self.alive = False
            return CellRun(status="died", evalue="the kernel process died", observations=observations)
        except CellHangs:
            return self._timed_out(observations)
        return CellRun(status="ok", observations=observations)

    def _run_cell(self, code: str) -> CellRun:
        try:
            exec(code, self.namespace)
        except KernelDies:
            self.alive = False
            return CellRun(status="died", evalue="the kernel process died")
        except CellHangs:
            return self._timed_out([])
        except Exception as exc:
            return CellRun(status="error", ename=type(exc).__name__, evalue=str(exc))
        return CellRun(status="ok")

    def _timed_out(self, observations: list[dict]) -> CellRun:
        if not self.factory.interrupt_works:
            self.alive = False  # the real Kernel kills a kernel that ignores the interrupt
        return CellRun(status="timeout", evalue=f"still running after {self.timeout:g} s", observations=observations)

    def close(self) -> None:
        self.closed = True
        self.alive = False


class FakeKernelFactory:
    def __init__(self, *, interrupt_works: bool = True):
        self.interrupt_works = interrupt_works
        self.kernels: list[FakeKernel] = []

    def __call__(self) -> FakeKernel:
        kernel = FakeKernel(self)
        self.kernels.append(kernel)
        return kernel


def submission(*sources: str, kind: str = "notebook") -> Submission:
    return Submission(path=f"sub.{'ipynb' if kind == 'notebook' else 'py'}", kind=kind, sha256="0" * 64,
                      cells=[SourceCell(index=i, source=s, first_line=10 * i + 1) for i, s in enumerate(sources)])


def session_for(sub: Submission, factory: FakeKernelFactory, *, submission_timeout: float = 60.0) -> Session:
    return Session(sub, cell_timeout=5.0, submission_timeout=submission_timeout, kernel_factory=factory)


def call(rid: str, target: str, *args) -> CallRequest:
    return CallRequest(id=rid, target=target, calls=[Call(args=[PyScalar(v=a) for a in args])])


def value_of(obs: Observation):
    assert obs.status == "ok", obs
    return obs.result.values[0].v


# ----------------------------------------------------------------------------- the fake is faithful


def test_probe_code_is_understood_by_the_fake() -> None:
    requests = [LookupRequest(id="a", name="f"), ValueRequest(id="b", name="x")]
    assert probe_requests(probe_code(requests)) == [r.model_dump(mode="json") for r in requests]
    assert probe_requests("x = 1") is None


# ----------------------------------------------------------------------------- student cells


def test_cells_run_in_order_in_one_kernel() -> None:
    factory = FakeKernelFactory()
    with session_for(submission("x = 1", "y = x + 1"), factory) as session:
        session.run_student_cells()
        assert session.problems == []
        assert factory.kernels[0].namespace["y"] == 2
    assert len(factory.kernels) == 1 and factory.kernels[0].closed


def test_a_raising_cell_does_not_stop_later_cells() -> None:
    factory = FakeKernelFactory()
    with session_for(submission("x = 1", "raise ValueError('boom')", "y = x + 1"), factory) as session:
        session.run_student_cells()
        assert factory.kernels[0].namespace["y"] == 2
        (problem,) = session.problems
    assert (problem.cell, problem.status, problem.where) == (1, "error", "cell 2")
    assert problem.message == "cell 2 raised ValueError: boom"


def test_module_problems_name_the_line() -> None:
    factory = FakeKernelFactory()
    with session_for(submission("x = 1", "1 / 0", kind="module"), factory) as session:
        session.run_student_cells()
        (problem,) = session.problems
    assert problem.where == "line 11"
    assert problem.message.startswith("line 11 raised ZeroDivisionError")


def test_a_hanging_cell_is_a_timeout_and_later_cells_run() -> None:
    factory = FakeKernelFactory()
    with session_for(submission("x = 1", "raise CellHangs", "y = x + 1"), factory) as session:
        session.run_student_cells()
        (problem,) = session.problems
        assert factory.kernels[-1].namespace["y"] == 2
    assert problem.status == "timeout" and problem.cell == 1
    assert "stopped after 5 s" in problem.message and "cells after it still ran" in problem.message
    assert len(factory.kernels) == 1  # the interrupt worked: same kernel


def test_a_hanging_cell_that_ignores_interrupts_costs_a_new_kernel() -> None:
    factory = FakeKernelFactory(interrupt_works=False)
    with session_for(submission("x = 1", "raise CellHangs", "y = x + 1"), factory) as session:
        session.run_student_cells()
        assert [p.status for p in session.problems] == ["timeout"]
        assert session.restarts == 1
    old, new = factory.kernels
    assert new.ran == ["x = 1", "y = x + 1"]  # completed cells replayed, the hanging one not
    assert new.namespace["y"] == 2 and old.closed


def test_cells_are_skipped_when_the_submission_time_is_up() -> None:
    factory = FakeKernelFactory()
    with session_for(submission("x = 1", "y = 2"), factory, submission_timeout=0) as session:
        session.run_student_cells()
        problems = session.problems
    assert [p.status for p in problems] == ["skipped", "skipped"]
    assert problems[0].message == "cell 1 was not run: the submission's time limit ran out"
    assert all(k.ran == [] for k in factory.kernels)


# ----------------------------------------------------------------------------- probe batches

STUDENT = """
def ok(x):
    return x + 1

def dies(x):
    raise KernelDies

def hangs(x):
    raise CellHangs

def raises(x):
    raise RuntimeError("nope")
"""


def test_probe_batch_answers_every_request() -> None:
    factory = FakeKernelFactory()
    with session_for(submission(STUDENT), factory) as session:
        session.run_student_cells()
        got = session.observe([call("a", "ok", 1), call("b", "raises", 1), LookupRequest(id="c", name="nope")], 5.0)
    assert value_of(got["a"]) == 2
    assert got["b"].status == "raised" and got["b"].raised.ename == "RuntimeError"
    assert got["c"].status == "missing"
    assert len(factory.kernels) == 1


def test_timeout_marks_the_culprit_and_the_rest_are_answered() -> None:
    factory = FakeKernelFactory()
    requests = [call("first", "ok", 1), call("culprit", "hangs", 1), call("after", "ok", 2)]
    with session_for(submission(STUDENT), factory) as session:
        session.run_student_cells()
        got = session.observe(requests, 4.0)
    assert value_of(got["first"]) == 2
    assert got["culprit"].status == "timeout"
    assert got["culprit"].detail == "still running after 4 s"
    assert value_of(got["after"]) == 3


def test_timeout_with_a_killed_kernel_restarts_and_goes_on() -> None:
    factory = FakeKernelFactory(interrupt_works=False)
    requests = [call("culprit", "hangs", 1), call("after", "ok", 2)]
    with session_for(submission(STUDENT), factory) as session:
        session.run_student_cells()
        got = session.observe(requests, 4.0)
        assert session.restarts == 1
    assert got["culprit"].status == "timeout"
    assert value_of(got["after"]) == 3


def test_probe_timeout_is_capped_by_the_submission_deadline() -> None:
    factory = FakeKernelFactory()
    with session_for(submission(STUDENT), factory, submission_timeout=60.0) as session:
        session.run_student_cells()
        session.observe([call("a", "ok", 1)], timeout=1000.0)
    assert factory.kernels[0].timeouts[-1] <= 60.0


def test_probe_after_the_submission_deadline_times_out_without_running() -> None:
    factory = FakeKernelFactory()
    with session_for(submission(STUDENT), factory, submission_timeout=0) as session:
        got = session.observe([call("a", "ok", 1)], 5.0)
    assert got["a"].status == "timeout" and "time limit" in got["a"].detail
    assert all(k.ran == [] for k in factory.kernels)


def test_a_later_batch_after_a_death_in_an_earlier_batch_still_works() -> None:
    """A crash while checking one exercise costs that exercise only."""
    factory = FakeKernelFactory()
    with session_for(submission(STUDENT), factory) as session:
        session.run_student_cells()
        first = session.observe([call("e1", "dies", 1)], 5.0)
        second = session.observe([call("e2", "ok", 1)], 5.0)
    assert first["e1"].status == "crashed"
    assert value_of(second["e2"]) == 2


def test_every_request_hanging_in_one_batch_does_not_starve_later_batches() -> None:
    """An exercise whose function hangs on every call costs that exercise, not the next ones.

    (The real Kernel kills a kernel whose hang ignores the interrupt, e.g. an XLA while_loop.)
    """
    factory = FakeKernelFactory(interrupt_works=False)
    hanging = [call(f"newton/{i}", "hangs", 1) for i in range(MAX_RESTARTS + 2)]
    with session_for(submission(STUDENT), factory) as session:
        session.run_student_cells()
        first = session.observe(hanging, 5.0)
        later = session.observe([call("detective", "ok", 1)], 5.0)
    assert all(obs.status in ("timeout", "crashed") for obs in first.values())
    assert value_of(later["detective"]) == 2


def test_probe_that_stops_answering_without_hanging_marks_the_rest_crashed() -> None:
    class Mute(FakeKernel):
        def run(self, code: str, timeout: float, **kw) -> CellRun:
            if probe_requests(code) is not None:
                return CellRun(status="error", ename="NameError", evalue="name 'runpy' is not defined")
            return super().run(code, timeout, **kw)

    class MuteFactory(FakeKernelFactory):
        def __call__(self) -> FakeKernel:
            kernel = Mute(self)
            self.kernels.append(kernel)
            return kernel

    with session_for(submission(STUDENT), MuteFactory()) as session:
        session.run_student_cells()
        got = session.observe([call("a", "ok", 1), call("b", "ok", 2)], 5.0)
    assert {o.status for o in got.values()} == {"crashed"}
    assert "NameError" in got["a"].detail


def test_garbage_observations_are_ignored() -> None:
    class Liar(FakeKernel):
        def run(self, code: str, timeout: float, **kw) -> CellRun:
            run = super().run(code, timeout, **kw)
            if probe_requests(code) is None:
                return run
            nonce = probe_nonce(code)
            forged = [{"id": "a", "status": "ok", "result": {"op": "nonsense"}}, {"not": "an observation"},
                      {"nonce": nonce, "observation": {"id": "a", "status": "ok", "result": {"op": "nonsense"}}},
                      {"nonce": nonce, "observation": "a string"}, "not even a dict",
                      {"nonce": "guessed", "observation": {"id": "a", "status": "ok", "result": {
                          "op": "call", "values": [{"t": "py", "v": 999}]}}}]
            return run.model_copy(update={"observations": forged + run.observations})

    class LiarFactory(FakeKernelFactory):
        def __call__(self) -> FakeKernel:
            kernel = Liar(self)
            self.kernels.append(kernel)
            return kernel

    with session_for(submission(STUDENT), LiarFactory()) as session:
        session.run_student_cells()
        got = session.observe([call("a", "ok", 1)], 5.0)
    assert value_of(got["a"]) == 2


def test_a_probe_cannot_claim_that_the_kernel_died() -> None:
    """Only the grader sees a kernel die (`Observation.died`, which the class page reads): an
    answer that claims it is the probe's malformed answer."""
    class Claims(FakeKernel):
        def run(self, code: str, timeout: float, **kw) -> CellRun:
            run = super().run(code, timeout, **kw)
            if probe_requests(code) is None:
                return run
            claim = {"id": "a", "status": "crashed", "died": True, "detail": "the Python kernel died"}
            forged = [{"nonce": probe_nonce(code), "observation": claim}]
            return run.model_copy(update={"observations": forged})

    class ClaimsFactory(FakeKernelFactory):
        def __call__(self) -> FakeKernel:
            kernel = Claims(self)
            self.kernels.append(kernel)
            return kernel

    with session_for(submission(STUDENT), ClaimsFactory()) as session:
        session.run_student_cells()
        got = session.observe([call("a", "ok", 1)], 5.0)
    assert got["a"].status == "crashed" and not got["a"].died and "only the grader" in got["a"].detail


@pytest.mark.parametrize("interrupt_works", [True, False])
def test_restart_budget_exhausted_marks_the_rest_crashed(interrupt_works: bool) -> None:
    factory = FakeKernelFactory(interrupt_works=interrupt_works)
    requests = [call(f"d{i}", "dies", 1) for i in range(MAX_RESTARTS + 3)]
    with session_for(submission(STUDENT), factory) as session:
        session.run_student_cells()
        got = session.observe(requests, 5.0)
    assert set(got) == {r.id for r in requests}
    assert {o.status for o in got.values()} == {"crashed"}
    assert len(factory.kernels) <= MAX_RESTARTS + 1


# ----------------------------------------------------------------------------- hostile answers, bounds


def test_an_oversized_or_too_deep_answer_is_that_check_s_error() -> None:
    class Deep(FakeKernel):
        def run(self, code: str, timeout: float, **kw) -> CellRun:
            run = super().run(code, timeout, **kw)
            if probe_requests(code) is None:
                return run
            nonce = probe_nonce(code)
            deep: object = {"t": "py", "v": 1}
            for _ in range(200):
                deep = {"t": "list", "items": [deep]}
            huge = {"t": "list", "items": [{"t": "py", "v": 1}] * 500_000}
            giant_int = {"t": "py", "v": 10**400}
            structured = {"t": "array", "dtype": "(1000,1000)f8", "shape": [], "data": 0}
            lying_shape = {"t": "array", "dtype": "float64", "shape": [100000, 100000], "data": []}
            forged = [{"nonce": nonce, "observation": {"id": rid, "status": "ok",
                                                       "result": {"op": "call", "values": [v]}}}
                      for rid, v in [("a", deep), ("b", huge), ("c", giant_int), ("d", structured), ("e", lying_shape)]]
            return run.model_copy(update={"observations": forged})

    class DeepFactory(FakeKernelFactory):
        def __call__(self) -> FakeKernel:
            kernel = Deep(self)
            self.kernels.append(kernel)
            return kernel

    with session_for(submission(STUDENT), DeepFactory()) as session:
        session.run_student_cells()
        got = session.observe([call(rid, "ok", 1) for rid in "abcde"], 5.0)
    assert got["a"].status == "crashed" and "deeper" in got["a"].detail
    assert got["b"].status == "crashed" and "too large" in got["b"].detail
    assert got["c"].status == "crashed" and "integer" in got["c"].detail
    assert got["d"].status == "crashed" and "malformed" in got["d"].detail
    assert got["e"].status == "crashed" and "malformed" in got["e"].detail


def test_replays_spend_the_submission_time_limit() -> None:
    """A replay after a kernel death runs the completed cells within what is left of the limit."""
    factory = FakeKernelFactory()
    cells = ["x = 1", "y = 2", "raise KernelDies()", "z = 3"]
    with session_for(submission(*cells), factory, submission_timeout=7.0) as session:
        session.run_student_cells()
    replayed = factory.kernels[1].timeouts
    assert replayed and all(t <= 7.0 for t in replayed)
    assert all(t <= 7.0 for k in factory.kernels for t in k.timeouts)
