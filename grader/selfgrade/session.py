"""A notebook run in a child Python (`child.Child`) for the pack's `grade`: `NotebookProcess`, the
shared `Driver` (grader/kernel/driver.py, which drives the instructor's kernel `Session` too: the
cells, the probe's requests, restarts and replays, every sentence the student reads) over
`ChildProcess`, which sends sources and the probe's requests to the child and reads its answers
with deadlines.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from grader.kernel.driver import CellRun, Driver
from grader.kernel.protocol import Request
from grader.selfgrade.child import Child, Ended, TimedOut
from grader.submission import Submission, file_statement


class ChildProcess:
    """The `Process` of the pack's `grade`: child Pythons started in the notebook's folder."""

    noun = "the notebook's Python"

    def __init__(self, folder: Path, first: Child | None = None):
        self.folder = folder
        self._child: Child | None = None
        self._first = first  # started beforehand (it boots while the grader plans), adopted by `fresh()`

    @property
    def alive(self) -> bool:
        return self._child is not None and self._child.alive

    def fresh(self) -> None:
        if self._child is not None:
            self._child.kill()
        self._child, self._first = self._first or Child(self.folder), None
        self._child.wait_ready()

    def run(self, source: str, filename: str, budget: float) -> CellRun:
        child = self._child
        if child is None:
            return CellRun(status="died", evalue="Python is not running")
        try:
            child.send({"op": "cell", "source": source, "filename": filename})
            answer = child.receive(budget)
        except TimedOut:
            child.kill()
            return CellRun(status="timeout", evalue=f"still running after {budget:g} s")
        except Ended:
            return CellRun(status="died", evalue=child.ended())
        if answer.get("status") not in ("ok", "error"):  # not the protocol's answer: the child is not to be trusted
            child.kill()
            return CellRun(status="died", evalue="it answered out of turn")
        return CellRun(status=answer["status"], ename=_text(answer.get("ename")), evalue=_text(answer.get("evalue")),
                       line=answer.get("line") if type(answer.get("line")) is int else None)

    def probe(self, requests: list[Request], budget: float, request_timeout: float | None) -> CellRun:
        """The answers as they come, until the probe says it is done, or `request_timeout` passes
        without one, or `budget` runs out (the child is then killed), or the child dies."""
        child = self._child
        if child is None:
            return CellRun(status="died", evalue="Python is not running")
        observations: list[object] = []
        ends = time.monotonic() + budget
        try:
            child.send({"op": "probe", "requests": json.dumps([r.model_dump(mode="json") for r in requests])})
            while True:
                left = ends - time.monotonic()
                wait = left if request_timeout is None else min(request_timeout, left)
                try:
                    message = child.receive(wait)
                except TimedOut:
                    child.kill()
                    return CellRun(status="timeout", evalue=f"still running after {max(wait, 0):.3g} s",
                                   observations=observations)
                if message.get("done"):
                    if message.get("ename") is None:
                        return CellRun(status="ok", observations=observations)
                    return CellRun(status="error", ename=_text(message.get("ename")),
                                   evalue=_text(message.get("evalue")), observations=observations)
                observations.append(message.get("observation"))
        except Ended:
            return CellRun(status="died", evalue=child.ended(), observations=observations)

    @staticmethod
    def as_told(ename: str | None, evalue: str) -> str:
        return evalue  # the child runs in the notebook's own folder: its paths are the student's

    def stop_strays(self) -> None:
        """Nothing to do: what the cells start is killed with the child (its session)."""

    def close(self) -> None:
        for child in (self._first, self._child):
            if child is not None:
                child.kill()
        self._first = self._child = None


def _text(value: object) -> str | None:
    return None if value is None else str(value)


class NotebookProcess(Driver):
    """One submission's child process (and its replacements); a `Prober` for the judging core."""

    def __init__(self, submission: Submission, *, cell_timeout: float, request_timeout: float,
                 submission_timeout: float, first: Child | None = None):
        """`first`: a child already started in the notebook's folder (it boots while the grader
        imports and plans), adopted by the first run."""
        super().__init__(submission, ChildProcess(Path(submission.path).resolve().parent, first),
                         cell_timeout=cell_timeout, submission_timeout=submission_timeout,
                         request_timeout=request_timeout,
                         file_statement=file_statement(submission, here=True))  # `__file__` as Python gives it

    def __enter__(self) -> NotebookProcess:
        return self
