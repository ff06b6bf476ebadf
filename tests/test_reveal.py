"""What a student may see of a verdict (grader.judging.reveal): the policy per check and its defaults."""

from __future__ import annotations

import pytest

from grader.checks.base import CheckOutcome, not_answered
from grader.judging.reveal import judged_now, not_judged_yet, revealed
from grader.spec import AnswerCheck, CustomCheck, NumericCheck

ROWS = {"rows": [[1.0]], "types": ["py"]}


def numeric(**extra) -> NumericCheck:
    fields = {"id": "v", "title": "values", "points": 1, "message": "f(x) should be 2x", "function": "f",
              "reference": "f", "cases": {"generator": "g"} if extra.get("hidden") else ROWS}
    return NumericCheck(**{**fields, **extra})


def test_defaults_follow_what_a_failure_would_give_away() -> None:
    assert numeric().revealed == "details"
    assert numeric(hidden=True).revealed == "pass_fail"
    assert numeric(hidden=True, reveal="on_hand_in").revealed == "on_hand_in"  # the instructor may choose
    with pytest.raises(ValueError, match="would show the hidden inputs"):  # but never the hidden inputs
        numeric(hidden=True, reveal="details")
    predictions = CustomCheck(id="c1", title="call 1", points=1, message="m", function="judge", observe=["p"])
    assert predictions.revealed == "on_hand_in"
    quiz = AnswerCheck(id="q1", title="q1", points=1, message="m", name="quiz", key=1, accept=["B"])
    assert quiz.revealed == "on_hand_in"
    called = CustomCheck(id="c2", title="counts", points=1, message="m", function="judge", call="f",
                         cases={"generator": "g"}, hidden=True)
    assert called.revealed == "pass_fail"


def test_pass_fail_keeps_the_counterexample_for_the_instructor() -> None:
    spec = numeric(hidden=True, hint="look at the brackets above 100,000")
    outcome = CheckOutcome(status="failed", message="f(x) should be 2x: f(123.5) returned 1.0, expected 247.0",
                           tally=(2, 12))
    shown = revealed(outcome, spec)
    assert shown.message == "f(x) should be 2x; look at the brackets above 100,000"  # never how many
    assert shown.counterexample == outcome.message and shown.tally == (2, 12)
    missing = not_answered("f")
    assert revealed(missing, spec).message == missing.message == "Not answered yet: `f` is not defined."
    assert revealed(outcome, numeric()) == outcome  # a visible check teaches with the details


def test_the_self_check_leaves_hidden_and_hand_in_checks_to_the_hand_in() -> None:
    assert judged_now(numeric(), "self_check") and judged_now(numeric(hidden=True), "hand_in")
    assert not judged_now(numeric(hidden=True), "self_check")
    assert not judged_now(numeric(reveal="on_hand_in"), "self_check")
    assert not_judged_yet(numeric()).status == "skipped"
