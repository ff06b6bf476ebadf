"""The in-process prober: answers requests from a live namespace (the notebook's self-check).

It speaks the same protocol as a kernel session (requests in, observations out, through the
same runtime module), so the checks that judge a self-check are the ones that grade.
"""

from __future__ import annotations

from typing import Any

from grader.probe import runtime
from grader.probe.protocol import Observation, Request


class LocalProber:
    def __init__(self, namespace: dict[str, Any]):
        self.namespace = namespace

    def observe(self, requests: list[Request], timeout: float) -> dict[str, Observation]:
        """`timeout` is not enforced here: a self-check runs in the student's own kernel."""
        out = {}
        for request in requests:
            raw = runtime.observe(request.model_dump(mode="json"), self.namespace)
            out[request.id] = Observation.model_validate(raw)
        return out
