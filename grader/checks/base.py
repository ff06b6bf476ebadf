"""What every check is: requests to send to the probe, then a verdict from the observations.

A check never touches the kernel itself. It says what it needs to see (`requests`), and judges
(`judge`) in the grader's process once the observations are back, so the same check code serves
the authoritative grade (observations from a fresh kernel) and the notebook's self-check
(observations from the live namespace) through one probe interface.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeVar

from pydantic import BaseModel

from grader.assignment import Assignment
from grader.probe.protocol import Observation, Request
from grader.report import CheckStatus



class CheckOutcome(BaseModel):
    """A verdict: `message` is empty when the check passed. `judge_error` is set when the
    check's own code raised on this answer (kept for the instructor; the student sees `message`)."""

    status: CheckStatus
    message: str | None = None
    judge_error: str | None = None


PASSED = CheckOutcome(status="passed")


@dataclass(frozen=True)
class Context:
    """What a check may use besides its spec: the loaded assignment and the run's seed."""

    assignment: Assignment
    seed: int


class Check(Protocol):
    full_id: str

    def requests(self) -> list[Request]: ...

    def judge(self, observations: dict[str, Observation]) -> CheckOutcome: ...


def not_available(obs: Observation | None, subject: str, hint: str) -> CheckOutcome | None:
    """The outcome when an observation holds no result (missing name, exception, hang, crash)."""
    if obs is None:
        return CheckOutcome(status="error", message=f"{hint}: the grader got no answer about {subject}")
    if obs.status == "ok":
        return None
    if obs.status == "missing":
        return CheckOutcome(status="failed", message=f"Not answered yet: `{obs.detail}` is not defined.")
    if obs.status == "raised" and obs.raised is not None:
        return CheckOutcome(
            status="error", message=f"{hint}: {subject} raised {obs.raised.ename}: {obs.raised.evalue}"
        )
    if obs.status == "timeout":
        return CheckOutcome(status="timeout", message=f"{hint}: {subject} did not finish ({obs.detail})")
    return CheckOutcome(status="error", message=f"{hint}: {subject} could not be checked ({obs.detail})")


R = TypeVar("R")


def result_of(observations: dict[str, Observation], request_id: str, kind: type[R], subject: str,
              hint: str) -> R | CheckOutcome:
    """The typed result of one request, or the outcome that replaces it (missing name, raised,
    hang, crash, or an answer of the wrong shape, which only a tampered probe sends)."""
    obs = observations.get(request_id)
    problem = not_available(obs, subject, hint)
    if problem:
        return problem
    assert obs is not None
    if not isinstance(obs.result, kind):
        return CheckOutcome(status="error", message=f"{hint}: the probe's answer about {subject} was unreadable")
    return obs.result


def failed(hint: str, detail: str) -> CheckOutcome:
    return CheckOutcome(status="failed", message=f"{hint}: {detail}")
