"""What a student may see of a verdict: one place applies each check's `reveal` policy.

A check's message may quote the call it failed on and the value it expected. For a visible
check that teaches; for a hidden one it hands over the hidden input and the answer, and for a
prediction or a quiz, checked item by item before hand-in, it lets a student flip answers until
everything is green. So before any student-facing output (the terminal, the self-check, the
report's `message`, Gradescope's `output`) sees a verdict:

- `details`: the message as the check wrote it;
- `pass_fail`: the check's own message, how many of its calls failed, and the instructor's `hint`;
  the full message is kept as `counterexample`, which only the instructor's report carries;
- `on_hand_in`: judged when handed in (`grade`); the self-check records it and says so.

The self-check also leaves hidden checks to the hand-in: run on demand with fresh inputs, their
pass/fail would be an oracle for the hidden inputs.
"""

from __future__ import annotations

from typing import Literal

from grader.checks.base import CheckOutcome
from grader.report import CHECKED_ON_HAND_IN
from grader.spec import CheckSpec

Stage = Literal["hand_in", "self_check"]
NOT_ANSWERED = "Not answered yet"


def judged_now(spec: CheckSpec, stage: Stage) -> bool:
    """Whether this check is judged at this stage (the self-check leaves some to the hand-in)."""
    return stage == "hand_in" or (spec.revealed != "on_hand_in" and not spec.hidden)


def revealed(outcome: CheckOutcome, spec: CheckSpec) -> CheckOutcome:
    """The outcome as a student may see it (the counterexample kept aside for the instructor)."""
    if spec.revealed != "pass_fail" or outcome.status != "failed":
        return outcome  # errors and timeouts describe the program (traced with abstract values), not values
    if (outcome.message or "").startswith(NOT_ANSWERED) or outcome.cause in ("same_values", "same_trace"):
        return outcome  # names no value
    message = spec.message
    if outcome.tally is not None:
        wrong, calls = outcome.tally
        message += f" (wrong on {wrong} of {calls} hidden inputs)"
    if spec.hint:
        message += f"; {spec.hint}"
    return outcome.model_copy(update={"message": message, "counterexample": outcome.message})


def not_judged_yet(spec: CheckSpec) -> CheckOutcome:
    return CheckOutcome(status="skipped", message=CHECKED_ON_HAND_IN)
