"""Honest answers in other shapes keep full marks; odd answers get a verdict, never a crash.

Each submission is the reference solution (100 points) with one exercise replaced by a fixture
from tests/fixtures/submissions/, graded end to end in a real kernel.
"""

from __future__ import annotations

import numpy as np
import pytest
from warm_grading import grade_warm

from grader import GradeOptions, Report

pytestmark = pytest.mark.kernel

SEED = 11


def grade(path, timeout: float | None = None, exercises: tuple[str, ...] | None = None) -> Report:
    """`exercises`: grade only those (a test that reads no other exercise's checks or score need
    not pay for them; the notebook's cells all still run)."""
    return grade_warm(path, GradeOptions(assignment="ch2-jit", seed=SEED, cell_timeout=timeout,
                                         exercises=exercises))


def checks_of(report: Report, exercise: str) -> dict:
    return {c.id: c for e in report.exercises if e.id == exercise for c in e.checks}


def not_passed(report: Report) -> dict[str, str]:
    return {c.id: f"{c.status}: {c.message}" for e in report.exercises for c in e.checks if c.status != "passed"}


@pytest.mark.parametrize("fixture", ["honest_training_namedtuple.py", "honest_training_array_pair.py"])
def test_training_answers_in_another_container_keep_full_marks(submission_from_reference, fixture) -> None:
    """JAX's own examples return NamedTuples; `w, b = step(...)` unpacks an array of shape (2,)."""
    path = submission_from_reference("setup", "tax", "newton", "detective", fixture)
    report = grade(path)
    assert not_passed(report) == {} and report.score == 100


def test_a_count_one_lower_by_its_reading_of_the_rule_keeps_full_marks(submission_from_reference) -> None:
    path = submission_from_reference("setup", "tax", "honest_newton_counts_before_the_stop.py", "detective",
                                     "training")
    report = grade(path)
    assert not_passed(report) == {} and report.score == 100


def test_a_dict_where_a_pair_is_expected_is_a_verdict_in_one_sentence(submission_from_reference) -> None:
    path = submission_from_reference("setup", "tax", "newton_sqrt_returns_a_dict.py", "detective", "training")
    report = grade(path, exercises=("tax", "newton"))  # newton's verdicts, and tax untouched by them
    newton = checks_of(report, "newton")
    assert report.status == "graded"
    for cid in ("newton.returns_pair", "newton.visible", "newton.hidden", "newton.iterations"):
        assert newton[cid].status == "failed", (cid, newton[cid].status, newton[cid].message)
        assert "\n" not in newton[cid].message and newton[cid].judge_error is None
    assert "{'iterations': 5, 'root'" in newton["newton.returns_pair"].message or \
        "'root'" in newton["newton.returns_pair"].message
    # a hidden check: the detail (with its hidden call) is the instructor's; the student reads pass/fail
    assert "expected (root, iterations)" in newton["newton.iterations"].counterexample
    assert "newton_sqrt(" not in newton["newton.iterations"].message
    assert {e.id: e.score for e in report.exercises}["tax"] == 25


def test_nan_and_infinite_answers_are_verdicts(submission_from_reference) -> None:
    path = submission_from_reference("setup", "tax", "newton_sqrt_returns_nan_count.py", "detective", "training")
    report = grade(path, exercises=("newton",))  # only newton's checks are read
    newton = checks_of(report, "newton")
    assert report.status == "graded"
    assert newton["newton.visible"].status == "failed" and "inf" in newton["newton.visible"].message
    assert newton["newton.iterations"].status == "failed" and "whole number" in newton["newton.iterations"].counterexample
    assert all(c.judge_error is None for c in newton.values())


# A hanging function costs one probe timeout: asserted in test_faults.py's
# test_newton_that_never_terminates_costs_only_the_newton_checks_that_call_it, which grades the same
# submission (reference + newton_never_terminates.py); grading it here too cost a second pair of hangs.


def test_observation_shaped_output_of_the_student_s_own_cells_is_ignored(submission_from_reference) -> None:
    path = submission_from_reference("setup", "forges_observations_from_a_thread.py", "newton", "detective",
                                     "training")
    report = grade(path, exercises=("tax", "newton"))  # the forged tax answer, and newton graded beside it
    tax = checks_of(report, "tax")
    assert report.status == "graded"
    assert tax["tax.switch_visible"].status == "failed", tax["tax.switch_visible"].message
    assert {e.id: e.score for e in report.exercises}["newton"] == 25


def test_answers_forged_to_the_probe_s_current_requests_without_its_nonce_are_ignored(
        submission_from_reference) -> None:
    """A thread of the student's cells reads each probe cell's requests (their current ids) from the
    message being answered and answers them itself, as that cell's output, bare and with a made-up
    nonce: the predictions the grader judges are still the notebook's own (wrong at call 1 only,
    right at the rest: the kernel was not stopped for the flood either)."""
    path = submission_from_reference("setup", "tax", "newton", "forges_the_probe_s_current_answers.py", "training")
    report = grade(path, exercises=("detective",))
    detective = checks_of(report, "detective")
    assert report.status == "graded"
    assert detective["detective.call_1"].status == "failed", detective["detective.call_1"].message
    assert all(detective[f"detective.call_{k}"].status == "passed" for k in range(2, 9)), [
        (k, c.status, c.message) for k, c in detective.items() if c.status != "passed"]


# ----------------------------------------------------------------------------- answers in every form the text allows


@pytest.mark.parametrize("form", [
    "predictions",  # the JAX bool array the fixture defines
    "np.asarray(predictions)",
    "tuple(np.bool_(v) for v in np.asarray(predictions))",
    "[int(v) for v in np.asarray(predictions)]",
])
def test_predictions_in_any_form_of_a_list_of_8_bools_keep_full_marks(submission_from_reference, tmp_path, form) -> None:
    path = submission_from_reference("setup", "tax", "newton", "predictions_in_other_forms.py", "training")
    path.write_text(path.read_text() + f"\n\n# %% [another form]\nimport numpy as np\npredictions = {form}\n")
    report = grade(path)
    assert not_passed(report) == {} and report.score == 100


def _predictions(value) -> dict:
    from grader.values import from_wire, to_wire

    return {"predictions": from_wire(to_wire(value))}


@pytest.mark.parametrize("value", [
    np.asarray([True, False, True, True, True, True, True, True]),
    (True, False, True, True, True, True, True, True),
    [np.bool_(True), np.bool_(False), *[np.bool_(True)] * 6],
    [1, 0, 1, 1, 1, 1, 1, 1],
])
def test_a_bool_like_sequence_of_8_is_judged_item_by_item(value) -> None:
    from grader.assignment import load

    checks = load("ch2-jit").checks
    assert all(checks.detective_call(_predictions(value), call).passed for call in range(1, 9))


@pytest.mark.parametrize("value, detail", [
    ([1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], "item 1 of predictions is not True/False"),  # a float is no bool
    ([2, 0, 1, 1, 1, 1, 1, 1], "item 1 of predictions is not True/False"),
    (["True", "False", "True", "True", "True", "True", "True", "True"], "item 1 of predictions is not True/False"),
    (np.ones((8, 1), dtype=bool), "not a list"),
    ([True] * 7, "7 items"),
    ({i: True for i in range(8)}, "not a list"),
])
def test_what_is_not_a_sequence_of_8_bool_likes_says_so(value, detail) -> None:
    from grader.assignment import load

    verdict = load("ch2-jit").checks.detective_call(_predictions(value), 1)
    assert not verdict.passed and detail in (verdict.detail or "")


@pytest.mark.parametrize("value, key, accept, passes", [
    (np.asarray([True, False]), 1, [False], True),  # an item of a NumPy bool array
    ((True, False), 0, [True], True),
    ([1, 0], 0, [True], True),  # 0 and 1 are bool-like
    ([1.0, 0.0], 0, [True], False),  # 1.0 is not
    ({"1": " b "}, 1, ["B"], True),  # strings: case and spaces aside
])
def test_answer_checks_take_every_form_of_a_sequence_and_of_a_bool(value, key, accept, passes) -> None:
    from grader.checks import Context, Planner, Seen
    from grader.checks.answer import AnswerCheckImpl
    from grader.kernel.protocol import Observation, ValuesResult
    from grader.spec import AnswerCheck
    from grader.values import to_wire

    spec = AnswerCheck(id="q", title="q", points=1, message="wrong", name="answers", key=key, accept=accept)
    check = AnswerCheckImpl("quiz.q", spec, Context(assignment=None, seed=0, planner=Planner()))  # type: ignore[arg-type]
    (request,) = check.requests()
    seen = Seen(observations={request.id: Observation(id=request.id, status="ok",
                                                      result=ValuesResult(op="value", values=[to_wire(value)]))})
    assert (check.judge(seen).status == "passed") is passes
