"""A Ctrl-C that Python drops (raised inside a finalizer) still stops the command line's run.

Found by the suite itself: a batch's SIGINT landed in a `__del__` between two submissions,
Python printed "Exception ignored in: ..." and the batch went on to grade a submission that
hangs. The handlers of `interrupts.handled()` latch the request; `check()` raises it again.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from grader import interrupts
from grader.batch.executors import SerialExecutor, Task
from grader.options import GradeOptions


class _SignalsInFinalizer:
    """Sends SIGINT to this process from its finalizer, where Python cannot raise it."""

    def __init__(self, signum: int = signal.SIGINT):
        self.signum = signum

    def __del__(self) -> None:
        os.kill(os.getpid(), self.signum)
        for _ in range(1000):  # bytecode for the handler to run on, still inside __del__
            pass


def _swallowed(signum: int, monkeypatch: pytest.MonkeyPatch) -> list[BaseException]:
    dropped: list[BaseException] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: dropped.append(u.exc_value))
    _SignalsInFinalizer(signum)  # collected at once: its __del__ runs here
    return dropped


def test_a_ctrl_c_dropped_in_a_finalizer_is_raised_at_the_next_check(monkeypatch) -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (a runner may ignore it)
    with interrupts.handled():
        dropped = _swallowed(signal.SIGINT, monkeypatch)
        assert [type(e) for e in dropped] == [KeyboardInterrupt]  # Python did drop it
        with pytest.raises(KeyboardInterrupt):
            interrupts.check()
    interrupts.check()  # the latch goes with the run: nothing pending afterwards


def test_a_dropped_sigterm_is_raised_as_terminated(monkeypatch) -> None:
    with interrupts.handled():
        dropped = _swallowed(signal.SIGTERM, monkeypatch)
        assert [type(e) for e in dropped] == [interrupts.Terminated]
        with pytest.raises(interrupts.Terminated):
            interrupts.check()


def test_a_batch_grades_no_further_submission_after_a_dropped_ctrl_c(tmp_path: Path, monkeypatch) -> None:
    """The serial batch checks before each submission: nothing is graded (not even started)."""
    graded: list[str] = []
    monkeypatch.setattr("grader.batch.executors.grade_task", lambda task, warm=False: graded.append(task.student))
    task = Task(student="next", path=str(tmp_path / "next.py"), options=GradeOptions(assignment="ch2-jit"))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with interrupts.handled():
        _swallowed(signal.SIGINT, monkeypatch)
        with pytest.raises(KeyboardInterrupt):
            list(SerialExecutor().map([task]))
    assert graded == []


def test_an_ignored_ctrl_c_stays_ignored() -> None:
    """`grade DIR &` from a script: SIGINT is ignored, and the command line keeps it so."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupts.handled():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_library_use_never_latches(monkeypatch) -> None:
    """Outside the command line (a notebook, a test) Ctrl-C is Python's: nothing stays pending."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _swallowed(signal.SIGINT, monkeypatch)
    interrupts.check()
