"""The cell loop is one mechanism (grader/kernel/driver.py) under both `grade`s: each scenario runs
through the instructor's kernel `Session` and through the student pack's `NotebookProcess`, on one
fake student Python (tests/test_session_fake.py's `FakeKernel`), and must come out the same but
for the process's name. No processes.

`FakeChild` speaks the child's side of grader/selfgrade/inside/cells.py (a cell's answer, the
probe's observations one by one, then "done"; `TimedOut` and `Ended` as `Child` raises them) with a
`FakeKernel` doing the work; like the real `Kernel`, a kernel that times out is killed
(`interrupt_works=False`).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic import TypeAdapter
from test_session_fake import STUDENT, FakeKernel, FakeKernelFactory, call, probe_requests, submission, value_of

from grader.kernel.driver import MAX_CELL_PROBLEMS, MAX_MESSAGE, MAX_RESTARTS, Driver
from grader.kernel.protocol import LookupRequest, Request
from grader.kernel.session import Session, probe_code
from grader.selfgrade import session as selfgrade_session
from grader.selfgrade.child import Ended, TimedOut
from grader.selfgrade.session import NotebookProcess
from grader.submission import Submission

REQUESTS = TypeAdapter(list[Request])


class FakeChild:
    """Stands in for grader.selfgrade.child.Child, its cells and probe run by a FakeKernel."""

    def __init__(self, factory: FakeKernelFactory):
        self.kernel: FakeKernel = factory().start()
        self._asked: dict | None = None
        self._answers: list[dict | type[Exception]] = []

    def wait_ready(self) -> None:
        pass

    @property
    def alive(self) -> bool:
        return self.kernel.alive

    def send(self, message: dict) -> None:
        if not self.kernel.alive:
            raise Ended()
        self._asked = message

    def receive(self, timeout: float) -> dict:
        if self._asked is not None:  # the work is done when the answer is awaited, with its deadline
            message, self._asked = self._asked, None
            self._answers = self._work(message, timeout)
        answer = self._answers.pop(0)
        if isinstance(answer, dict):
            return answer
        raise answer()

    def _work(self, message: dict, timeout: float) -> list[dict | type[Exception]]:
        if message["op"] == "cell":
            run = self.kernel.run(message["source"], timeout)
            done: list[dict | type[Exception]] = [{"status": run.status, "ename": run.ename, "evalue": run.evalue}]
        else:
            nonce_code = probe_code(REQUESTS.validate_json(message["requests"]), "n")
            run = self.kernel.run(nonce_code, timeout, observations=True)
            done = [{"observation": o["observation"]} for o in run.observations]
            done.append({"done": True} if run.status == "ok" else
                        {"done": True, "ename": run.ename, "evalue": run.evalue})
        if run.status == "timeout":
            done[-1] = TimedOut
        elif run.status == "died":
            done[-1] = Ended
        return done

    def kill(self) -> None:
        self.kernel.close()

    def ended(self) -> str:
        return "it exited with status 1"


Make = Callable[..., Driver]


@pytest.fixture(params=["kernel", "child"])
def adapter(request, monkeypatch) -> tuple[Make, FakeKernelFactory, str]:
    """(a driver for a submission, the fake student Pythons it starts, the process's name)."""
    factory = FakeKernelFactory(interrupt_works=False)

    def make(sub: Submission, *, submission_timeout: float = 60.0) -> Driver:
        if request.param == "kernel":
            return Session(sub, cell_timeout=5.0, submission_timeout=submission_timeout, kernel_factory=factory)
        monkeypatch.setattr(selfgrade_session, "Child", lambda folder: FakeChild(factory))
        return NotebookProcess(sub, cell_timeout=5.0, request_timeout=5.0, submission_timeout=submission_timeout)

    return make, factory, "the Python kernel" if request.param == "kernel" else "the notebook's Python"


def test_both_grades_drive_their_process_with_the_one_loop() -> None:
    for adapted in (Session, NotebookProcess):
        assert issubclass(adapted, Driver)
        for step in ("run_student_cells", "observe", "_replay", "_describe", "_accept", "_skip_hung"):
            assert getattr(adapted, step) is getattr(Driver, step), (adapted, step)


def test_a_cell_that_kills_the_process_is_told_and_the_rest_runs_after_a_replay(adapter) -> None:
    make, factory, noun = adapter
    cells = ("x = 1", "raise ValueError('student bug')", "raise KernelDies", "y = x + 1")
    with make(submission(*cells)) as driver:
        driver.run_student_cells()
        problems = driver.problems
    assert [(p.cell, p.status) for p in problems] == [(1, "error"), (2, "died")]
    assert problems[0].message == "cell 2 raised ValueError: student bug"
    assert problems[1].message == f"cell 3 killed {noun}; it was restarted without that cell"
    first, second = factory.kernels
    assert first.closed
    # the raising cell completed (its effects before the raise count), the killer is not replayed
    assert second.ran == ["x = 1", "raise ValueError('student bug')", "y = x + 1"]
    assert second.namespace["y"] == 2


def test_cells_are_skipped_once_the_restarts_are_spent(adapter) -> None:
    make, factory, noun = adapter
    cells = ["raise KernelDies"] * (MAX_RESTARTS + 1) + ["x = 1"]
    with make(submission(*cells)) as driver:
        driver.run_student_cells()
        problems = driver.problems
    assert [p.status for p in problems] == ["died"] * (MAX_RESTARTS + 1) + ["skipped"]
    assert problems[-1].message == f"cell {MAX_RESTARTS + 2} was not run: {noun} could not be restarted"
    assert len(factory.kernels) == MAX_RESTARTS + 1


def test_cell_problems_are_capped_and_counted(adapter) -> None:
    make, _, _ = adapter
    cells = [f"raise ValueError('cell {i} ' + 'x' * 5000)" for i in range(60)]
    with make(submission(*cells)) as driver:
        driver.run_student_cells()
    assert len(driver.problems) == MAX_CELL_PROBLEMS == 20 and driver.problems_omitted == 40
    assert all(len(p.message) <= MAX_MESSAGE for p in driver.problems)


def test_a_death_during_a_check_marks_the_culprit_and_the_rest_is_answered_after_a_replay(adapter) -> None:
    make, factory, noun = adapter
    requests = [call("first", "ok", 1), call("culprit", "dies", 1), call("after", "ok", 10)]
    with make(submission("x = 5", STUDENT)) as driver:
        driver.run_student_cells()
        got = driver.observe(requests, 5.0)
        assert driver.restarts == 1
    assert set(got) == {"first", "culprit", "after"}
    assert value_of(got["first"]) == 2 and value_of(got["after"]) == 11
    assert got["culprit"].status == "crashed" and got["culprit"].died and not got["first"].died
    assert got["culprit"].detail.startswith(f"{noun} died during this check (")
    first, second = factory.kernels
    assert second.ran[:2] == ["x = 5", STUDENT]  # replayed before the rest of the batch
    assert [r["id"] for r in probe_requests(second.ran[2])] == ["after"]  # answered requests are not asked again


def test_a_function_that_hung_once_is_not_called_again_in_the_run(adapter) -> None:
    """A hanging newton_sqrt used to cost every check that calls it a full probe timeout."""
    make, factory, _ = adapter
    with make(submission(STUDENT)) as driver:
        driver.run_student_cells()
        first = driver.observe([call("h1", "hangs", 1), call("h2", "hangs", 2), call("ok1", "ok", 1)], 5.0)
        later = driver.observe([call("h3", "hangs", 3), LookupRequest(id="look", name="hangs")], 5.0)
    assert first["h1"].status == "timeout" and first["h1"].detail == "still running after 5 s"
    assert first["h2"].status == "timeout" and "not called again" in first["h2"].detail
    assert value_of(first["ok1"]) == 2
    assert later["h3"].status == "timeout" and "not called again" in later["h3"].detail
    assert later["look"].status == "ok"  # looking the name up does not call it
    probes = [[r["id"] for r in probe_requests(code)] for k in factory.kernels for code in k.ran
              if probe_requests(code)]
    assert probes[0] == ["h1", "h2", "ok1"]  # one batch: h1 hung before h2 ran
    assert all("h2" not in p and "h3" not in p for p in probes[1:])

