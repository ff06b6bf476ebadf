"""The self-check's prober and verifier: a self-check in the student's own notebook.

They speak the same protocol as a kernel session and the sandboxed verifier (requests in,
observations out; jobs in, results out), through the same runtime modules, so the checks that
judge a self-check are the ones that grade. Nothing here is a boundary: it is the student's
process checking the student's own work. What can be stopped is kept where it can be stopped:

- `LocalProber` answers the requests in the notebook's process, where the functions live. The
  requests that run the student's compiled code on values (`RUNS_CODE`) can be held back until
  the exported programs have run in the child, so that a loop that never ends is met there first.
- `LocalVerifier` runs the exported programs in a child process (`child.py`), started once per
  notebook session and killed at the exercise's limit (`TimeUp`) or on Ctrl-C.
"""

from __future__ import annotations

import atexit
import json
import runpy
import time
from functools import cache
from typing import Any

from grader.judging.child import RUNTIME, ChildDied, LineTooLong, VerifierChild
from grader.kernel.inside import runtime
from grader.kernel.protocol import CallRequest, CompileCountRequest, Observation, Request
from grader.verifier.protocol import BadAnswer, VerifierJob, VerifierResult, job_line, parse_result

BOOT_TIMEOUT_S = 120.0
"""How long the child may take to import JAX; past that the programs run in the notebook's process."""
RUNS_CODE = (CallRequest, CompileCountRequest)
"""Requests that execute the student's (compiled) code on values in the notebook's process."""


class TimeUp(BaseException):
    """The exercise's time limit: a BaseException, so the student's code cannot catch it away
    with `except Exception` (as the probe lets KeyboardInterrupt through)."""


class LocalProber:
    def __init__(self, namespace: dict[str, Any], hold_runs: bool = False):
        """`hold_runs`: keep the `RUNS_CODE` requests for `observe_held`."""
        self.namespace = namespace
        self.hold_runs = hold_runs
        self.held: list[Request] = []
        self.current: Request | None = None  # the request being answered (what a stop interrupted)

    def observe(self, requests: list[Request], timeout: float) -> dict[str, Observation]:
        """`timeout` is not enforced here: a self-check runs in the student's own kernel. One memo
        of abstract exports per batch, as in a kernel's probe cell."""
        if self.hold_runs:
            self.held += [r for r in requests if isinstance(r, RUNS_CODE)]
            requests = [r for r in requests if not isinstance(r, RUNS_CODE)]
        return self._observe(requests)

    def observe_held(self) -> dict[str, Observation]:
        """The requests held back so far, answered now."""
        held, self.held = self.held, []
        return self._observe(held)

    def _observe(self, requests: list[Request]) -> dict[str, Observation]:
        out = {}
        wire = [request.model_dump(mode="json") for request in requests]
        runtime.begin_batch(wire)
        for request, asked in zip(requests, wire):
            self.current = request
            raw = runtime.observe(asked, self.namespace)
            out[request.id] = Observation.model_validate(raw)
        self.current = None
        return out


_child: VerifierChild | None = None
"""The notebook session's child, kept between self-check cells (importing JAX costs a second)."""
_no_child = False
"""A child could not start or boot in this session: the modules run here from then on."""


def _kill_child() -> None:
    global _child
    child, _child = _child, None
    if child is not None:
        child.kill()


atexit.register(_kill_child)


@cache
def _run_job_here() -> Any:
    return runpy.run_path(str(RUNTIME))["run_job"]


class LocalVerifier:
    """Runs exported modules with the verifier's own runtime, in the session's child process.

    `waited`: seconds `run` spent waiting for the child to boot, which are not the jobs' time;
    `running`: the module of the job that was stopped (by the limit or an interrupt), if one was.
    Where no child can start (no usable `sys.executable`, JAX not importable by it), the modules
    run in this process as they did before there was a child: checked, but not stoppable."""

    def __init__(self) -> None:
        self.waited = 0.0
        self.running: bytes | None = None

    def launch(self) -> None:
        """Start the session's child now, if there is none, and return at once: it imports JAX
        while the notebook's functions are traced."""
        global _child, _no_child
        if _child is not None and not _child.alive():
            _kill_child()
        if _child is None and not _no_child:
            try:
                _child = VerifierChild()
            except OSError:
                _no_child = True

    def _ready(self) -> VerifierChild | None:
        """The session's child, booted; None when none can be."""
        global _no_child
        self.launch()
        child = _child
        if child is None:
            return None
        started = time.monotonic()
        try:
            child.wait_ready(BOOT_TIMEOUT_S)
        except (TimeoutError, ChildDied, LineTooLong, ValueError):
            _kill_child()
            _no_child = True
            return None
        except BaseException:
            _kill_child()
            raise
        finally:
            self.waited += time.monotonic() - started
        return child

    def run(self, jobs: list[VerifierJob], timeout: float) -> dict[str, VerifierResult]:
        """Do the jobs in order. `timeout` > 0: the seconds all of them have, the child's boot not
        counted; when they are up, the child is killed and TimeUp raised. 0: no limit.
        KeyboardInterrupt kills the child too (the next run starts another)."""
        results: dict[str, VerifierResult] = {}
        end: float | None = None
        for job in jobs:
            child = self._ready()
            if child is None:
                results[job.id] = self._here(job)
                continue
            if end is None:
                end = time.monotonic() + timeout if timeout > 0 else float("inf")
            results[job.id] = self._do(child, job, end)
        return results

    def _do(self, child: VerifierChild, job: VerifierJob, end: float) -> VerifierResult:
        self.running = job.module
        try:
            child.send(job_line(job))
            line = child.readline(end)
        except TimeoutError:
            _kill_child()
            raise TimeUp() from None
        except ChildDied as died:
            _kill_child()
            return VerifierResult(id=job.id, status="crashed", detail=f"the verifier died ({died.status})")
        except LineTooLong:
            _kill_child()
            return VerifierResult(id=job.id, status="crashed", detail="the verifier sent a line too long")
        except BaseException:
            _kill_child()
            raise
        self.running = None
        try:
            return parse_result(line, job)
        except BadAnswer as exc:
            return VerifierResult(id=job.id, status="crashed", detail=str(exc))

    def _here(self, job: VerifierJob) -> VerifierResult:
        """The job run in this process (the same lines, both ways)."""
        answer = _run_job_here()(json.loads(job_line(job)))
        try:
            return parse_result(json.dumps(answer).encode("utf-8"), job)
        except BadAnswer as exc:
            return VerifierResult(id=job.id, status="crashed", detail=str(exc))

    def close(self) -> None:
        """Nothing: the child serves the session's next self-check."""
