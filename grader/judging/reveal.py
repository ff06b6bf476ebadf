"""What a student may see of a verdict: one place applies each check's `reveal` policy.

A check's message may quote the call it failed on and the value it expected. For a visible
check that teaches; for a hidden one it hands over the hidden input and the answer, and for a
prediction or a quiz, checked item by item before hand-in, it lets a student flip answers until
everything is green. So before any student-facing output (the terminal, the self-check, the
report's `message`, the feedback page, Gradescope's `output`) sees a verdict:

- `details`: the message as the check wrote it;
- `pass_fail`: a message built here from the spec's words and the verdict's typed facts alone
  (its status; for an exception, its class when Python or the chapter names it, the chapter's
  lesson and, for a visible check, its line), never from the check's text: that quotes hidden inputs, expected values,
  shapes and counts, and the student's own exception text, which code run on a baked hidden
  value can fill with it. The full message is kept as `counterexample` and the counts as
  `tally`, which only the instructor's report carries;
- `on_hand_in`: judged when handed in (`grade`); the self-check records it and says so.

The self-check also leaves hidden checks to the hand-in: run on demand with fresh inputs, their
pass/fail would be an oracle for the hidden inputs. What reveals nothing it judges like `grade`:
the form of the predictions and the quiz answers (`grader.checks.form`: how many values, of which
kind, never which), and the chapter's own self-check calls on the notebook's inputs.
"""

from __future__ import annotations

import builtins
from typing import Literal

from grader.checks.base import CheckOutcome, RaisedKind
from grader.checks.numeric import globals_unused
from grader.checks.program import HINTS, where_raised
from grader.report import CHECKED_ON_HAND_IN
from grader.spec import CheckSpec, NumericCheck

Stage = Literal["hand_in", "self_check"]

# exception classes a pass_fail message may name: a class of the student's own can be named after a value
_NAMED_ERRORS = frozenset(name for name, value in vars(builtins).items()
                          if isinstance(value, type) and issubclass(value, BaseException)) | frozenset(HINTS)


def judged_now(spec: CheckSpec, stage: Stage) -> bool:
    """Whether this check is judged at this stage (the self-check leaves some to the hand-in)."""
    return stage == "hand_in" or (spec.revealed != "on_hand_in" and not spec.hidden)


def revealed(outcome: CheckOutcome, spec: CheckSpec) -> CheckOutcome:
    """The outcome as a student may see it (the counterexample kept aside for the instructor)."""
    if spec.revealed != "pass_fail" or outcome.status == "passed":
        return outcome
    if outcome.reason == "same_cause":
        return outcome  # the grader's sentence naming another check (`judging.same_cause`); it kept the text
    if outcome.not_answered is not None:  # the name the student sees is one the spec gives
        missing = outcome.not_answered.model_copy(update={"name": _named(outcome.not_answered.name, spec)})
        return outcome.model_copy(update={"message": missing.message, "not_answered": missing,
                                          "counterexample": _instructor_text(outcome)})
    message = _pass_fail_message(outcome, spec)
    return outcome.model_copy(update={"message": message, "counterexample": _instructor_text(outcome)})


def _instructor_text(outcome: CheckOutcome) -> str | None:
    """The whole failure, for the instructor: the check's message, and what the code raised if
    that message taught with the chapter's words instead."""
    text = outcome.counterexample or outcome.message
    raised = outcome.raised
    if raised is not None and raised.evalue and raised.evalue not in (text or ""):
        text = f"{text} ({raised.ename}: {raised.evalue})"
    if raised is not None and raised.line and f"line {raised.line} " not in (text or ""):
        text = f"{text}, at line {raised.line} of its cell"
    return text


def _pass_fail_message(outcome: CheckOutcome, spec: CheckSpec) -> str:
    """A failure in the spec's words: what kind of failure, never which input, value or how many."""
    inputs = "a hidden input" if spec.hidden else "one of its inputs"
    if outcome.reason == "on_hand_in":
        return CHECKED_ON_HAND_IN
    if outcome.reason == "globals_unused" and isinstance(spec, NumericCheck):
        return globals_unused(spec)
    if outcome.raised is not None:
        return _raised(outcome.raised, outcome.cause == "trace", spec, inputs)
    if outcome.status == "timeout":
        return f"{spec.message}: it did not finish on {inputs}"
    if outcome.status == "failed":
        return spec.message + (f"; {spec.hint}" if spec.hint else "")
    return f"{spec.message}: it could not be checked on {inputs}"


def _raised(raised: RaisedKind, traced: bool, spec: CheckSpec, inputs: str) -> str:
    """The student's code raised: its class (if a name Python or the chapter gives), its line (of
    a visible check) and the chapter's lesson; never the exception's text, which their code wrote."""
    kind = raised.ename if raised.ename in _NAMED_ERRORS else "an exception"
    # a hidden check's line is the student's to choose: code run on a hidden value can raise from a
    # code object it compiled under a cell's file name, at a line that spells the value
    where = where_raised("", raised) if raised.line and not spec.hidden else ""
    lesson = f": {raised.teach}" if raised.teach else ""
    if traced:
        return f"{raised.subject} could not be traced by jax.jit on {inputs}: {kind}{where}{lesson}"
    return f"{spec.message}: {raised.subject} raised {kind}{where} on {inputs}{lesson}"


def _named(name: str, spec: CheckSpec) -> str:
    """The missing name, if it is one the spec names (a probe's report could carry anything)."""
    named = [getattr(spec, field, None) for field in ("call", "function", "name")]  # a custom check calls `call`
    if name in named or name in (getattr(spec, "observe", None) or []):
        return name
    return next((n for n in named if isinstance(n, str)), "a name")


def not_judged_yet(spec: CheckSpec) -> CheckOutcome:
    return CheckOutcome(status="skipped", reason="on_hand_in", message=CHECKED_ON_HAND_IN)
