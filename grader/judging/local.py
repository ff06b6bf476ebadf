"""The in-process prober and verifier: a self-check in the student's own notebook.

They speak the same protocol as a kernel session and the sandboxed verifier (requests in,
observations out; jobs in, results out), through the same runtime modules, so the checks that
judge a self-check are the ones that grade. Nothing here is a boundary: it is the student's
process checking the student's own work.
"""

from __future__ import annotations

import json
import runpy
from functools import cache
from typing import Any

from grader.kernel.inside import runtime
from grader.kernel.protocol import Observation, Request
from grader.verifier import INSIDE as VERIFIER_INSIDE  # noqa: E402
from grader.verifier.protocol import BadAnswer, VerifierJob, VerifierResult, job_line, parse_result

VERIFIER_RUNTIME = VERIFIER_INSIDE / "runtime.py"


class LocalProber:
    def __init__(self, namespace: dict[str, Any]):
        self.namespace = namespace

    def observe(self, requests: list[Request], timeout: float) -> dict[str, Observation]:
        """`timeout` is not enforced here: a self-check runs in the student's own kernel. One memo
        of abstract exports per batch, as in a kernel's probe cell."""
        out = {}
        runtime.begin_batch()
        for request in requests:
            raw = runtime.observe(request.model_dump(mode="json"), self.namespace)
            out[request.id] = Observation.model_validate(raw)
        return out


@cache
def _run_job() -> Any:
    return runpy.run_path(str(VERIFIER_RUNTIME))["run_job"]


class LocalVerifier:
    """Runs exported modules in this process, with the verifier's own runtime."""

    def launch(self) -> None:
        pass

    def run(self, jobs: list[VerifierJob], timeout: float) -> dict[str, VerifierResult]:
        run_job = _run_job()
        results = {}
        for job in jobs:  # the same lines, both ways, as with the sandboxed verifier
            answer = run_job(json.loads(job_line(job)))
            try:
                results[job.id] = parse_result(json.dumps(answer).encode("utf-8"), job)
            except BadAnswer as exc:
                results[job.id] = VerifierResult(id=job.id, status="crashed", detail=str(exc))
        return results

    def close(self) -> None:
        pass
