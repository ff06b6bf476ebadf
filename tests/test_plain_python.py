"""Plain Python judged as Python: `train_python_loop` is run eagerly in the kernel, the calls of
`step` it makes are counted, and the chapter's own calls (one buffer as w and b) are a floor.

Unit tests judge hand-built observations; the `kernel` ones grade whole submissions (the
reference with one exercise replaced by a fixture of tests/fixtures/submissions/).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from grader import GradeOptions, Report, assignment
from grader.assignment import Assignment
from grader.cases import Case
from grader.checks import Context, Planner, Seen, build
from grader.checks.eager import aliased_calls
from grader.course.mutation import honest_forms
from grader.course.mutation.families import derive_mutants
from grader.course.mutation.interface import FunctionUse, Interface, NameUse
from grader.course.mutation.introspect import FunctionFacts, Leaf, ReferenceFacts
from grader.errors import AssignmentBug
from grader.judging.local import LocalProber
from grader.judging.reveal import revealed
from grader.kernel.protocol import CallRequest, Observation, Raised, ValuesResult
from grader.spec import EagerCheck
from grader.values import to_wire

SEED = 5
X8 = [-0.9, -0.5, -0.2, 0.0, 0.1, 0.4, 0.7, 1.0]
Y8 = [2.33, 1.46, 0.88, 0.52, 0.27, -0.31, -0.93, -1.49]


@pytest.fixture(scope="module")
def ch2() -> Assignment:
    return assignment.load("ch2-jit")


def spec_of(ch2: Assignment, full_id: str) -> Any:
    exercise_id, check_id = full_id.split(".")
    exercise = next(e for e in ch2.spec.exercises if e.id == exercise_id)
    return next(c for c in exercise.checks if c.id == check_id)


def check_of(ch2: Assignment, full_id: str):
    return build(full_id.split(".")[0], spec_of(ch2, full_id), Context(assignment=ch2, seed=SEED, planner=Planner()))


def answered(check, values: list[Any], counts: list[int] | None = None) -> Seen:
    """The probe's answer to the check's one call request; a helper counted is taken to be used
    (what it returns changes the answer) whenever it was called."""
    (request,) = check.requests()
    uses = [count > 0 for count in counts] if counts is not None and request.perturb else None
    result = ValuesResult(op="call", values=[to_wire(v) for v in values], counts=counts, uses=uses)
    return Seen(observations={request.id: Observation(id=request.id, status="ok", result=result)})


def pairs(n: int) -> list[tuple[np.float32, np.float32]]:
    return [(np.float32(0.5), np.float32(-0.5))] * n


# ----------------------------------------------------------------------------- the spec


def test_python_loop_is_judged_eagerly_in_the_kernel_on_0_and_1_steps_too(ch2) -> None:
    spec = spec_of(ch2, "training.python_loop")
    assert ch2.spec.judged("train_python_loop") == "eager" and spec.hidden
    check = check_of(ch2, "training.python_loop")
    (request,) = check.requests()
    assert isinstance(request, CallRequest)  # a call, not an export: float(w) and print are fine
    steps = {int(case.args[5]) for case in check.cases}
    assert {0, 1} <= steps and max(steps) > 1


def test_the_step_count_check_counts_step_on_0_1_and_more_steps_with_one_buffer_for_w_and_b(ch2) -> None:
    check = check_of(ch2, "training.python_loop_calls_step")
    (request,) = check.requests()
    assert request.count_calls == "step"
    assert [int(c.args[5]) for c in check.cases][:2] == [0, 1]
    assert all(call.same_as[1].arg == 0 for call in request.calls)


@pytest.mark.parametrize("fields, why", [
    ({"counts": "step"}, "Extra inputs"),  # the calls a function makes are a `calls` check's
    ({"same_object": [[0]]}, "two or more"),
    ({"hidden": True}, "generator"),
    ({}, "needs a reference, at_least"),
])
def test_an_eager_check_needs_something_to_judge_and_well_formed_groups(fields, why) -> None:
    base = {"id": "e", "title": "t", "points": 1, "message": "m", "function": "f",
            "cases": {"rows": [[1.0, 1.0]], "types": ["py", "py"]}}
    if fields:
        base["reference"] = "f"
    with pytest.raises(ValidationError, match=why):
        EagerCheck(**base, **fields)


def test_one_object_for_two_arguments_needs_equal_values_in_the_case() -> None:
    assert aliased_calls([Case(args=(np.float32(0), np.float32(0)))], [[0, 1]], "x.e")[0].same_as[1].arg == 0
    with pytest.raises(AssignmentBug, match="differ"):
        aliased_calls([Case(args=(np.float32(0), np.float32(1)))], [[0, 1]], "x.e")


# ----------------------------------------------------------------------------- verdicts


def test_a_python_loop_that_calls_step_num_steps_times_passes(ch2) -> None:
    check = check_of(ch2, "training.python_loop_calls_step")
    steps = [int(c.args[5]) for c in check.cases]
    assert check.judge(answered(check, pairs(len(steps)), steps)).status == "passed"


def test_a_fori_loop_that_traces_step_once_fails_and_says_how_often_step_ran(ch2) -> None:
    check = check_of(ch2, "training.python_loop_calls_step")
    outcome = check.judge(answered(check, pairs(len(check.cases)), [1] * len(check.cases)))
    assert outcome.status == "failed"
    assert "called with 0 as argument 6, `train_python_loop` called `step` once" in outcome.message
    assert "fori_loop traces step once" in outcome.message and outcome.cause is None


def test_counts_missing_from_the_probe_s_answer_are_unreadable_not_a_pass(ch2) -> None:
    check = check_of(ch2, "training.python_loop_calls_step")
    assert check.judge(answered(check, pairs(len(check.cases)))).status == "error"


def test_the_chapter_call_compares_values_and_a_wrong_one_is_a_values_cause(ch2) -> None:
    check = check_of(ch2, "training.fori_chapter_call")
    right = check.reference_values
    assert check.judge(answered(check, right)).status == "passed"
    wrong = check.judge(answered(check, [(np.float32(9.0), np.float32(9.0))]))
    assert wrong.status == "failed" and wrong.cause == "values"


def test_a_function_that_cannot_take_one_buffer_twice_is_an_error_that_names_it(ch2) -> None:
    check = check_of(ch2, "training.fori_chapter_call")
    (request,) = check.requests()
    raised = Raised(ename="JaxRuntimeError", evalue="INVALID_ARGUMENT: Attempt to donate the same buffer twice")
    seen = Seen(observations={request.id: Observation(id=request.id, status="raised", raised=raised)})
    outcome = check.judge(seen)
    assert outcome.status == "error" and "do not donate them" in outcome.message


def test_what_a_hidden_eager_call_raised_reaches_the_student_as_its_kind_only(ch2) -> None:
    """Hidden values enter the kernel for a plain-Python function: what its code writes with them
    stays in the instructor's report."""
    spec = spec_of(ch2, "training.python_loop")
    check = check_of(ch2, "training.python_loop")
    (request,) = check.requests()
    raised = Raised(ename="ValueError", evalue="lr=0.0743251 num_steps=7", line=12)
    seen = Seen(observations={request.id: Observation(id=request.id, status="raised", raised=raised)})
    shown = revealed(check.judge(seen), spec)
    assert "0.0743251" not in shown.message and "line 12" not in shown.message
    assert "ValueError" in shown.message and "0.0743251" in (shown.counterexample or "")


# ----------------------------------------------------------------------------- in the student's own process


def test_the_in_process_prober_counts_and_passes_one_object_twice() -> None:
    """The student pack's self-check speaks the same requests (grader/judging/local.py)."""
    namespace: dict[str, Any] = {}
    exec(  # noqa: S102 - a notebook's cell
        "def step(w, b):\n    return w + 1, b + 1\n"
        "def loop(w, b, n):\n    assert n == 0 or w is b\n    for _ in range(n):\n        w, b = step(w, b)\n"
        "    return w, b\n", namespace)
    calls = aliased_calls([Case(args=(np.float32(0), np.float32(0), n)) for n in (0, 3)], [[0, 1]], "x.e")
    request = CallRequest(id="c", target="loop", calls=calls, count_calls="step")
    observation = LocalProber(namespace).observe([request], timeout=10)["c"]
    assert observation.status == "ok", observation
    assert observation.result.counts == [0, 3]


# ----------------------------------------------------------------------------- honest forms


def _interface() -> tuple[Interface, ReferenceFacts]:
    loop = FunctionUse(name="train_python_loop", exercises=["training"], checks=["training.python_loop"],
                       judged="eager", arity=6)
    step = FunctionUse(name="step", exercises=["training"], checks=["training.step_visible"], arity=5)
    predictions = NameUse(name="predictions", exercises=["detective"], checks=["detective.call_1"])
    facts = ReferenceFacts(functions={n: FunctionFacts(name=n, jitted=n == "step", container="tuple",
                                                       leaves=[Leaf(kind="float", ndim=0)] * 2)
                                      for n in ("train_python_loop", "step")},
                           values={"predictions": "[True, False, True]"})
    return Interface(functions={"train_python_loop": loop, "step": step}, names={"predictions": predictions}), facts


def test_honest_forms_are_derived_for_plain_python_and_lists_of_bools_only() -> None:
    interface, facts = _interface()
    made = {m.name: m for m in derive_mutants("x = 1\n", interface, facts) if m.honest}
    assert {"train_python_loop.logs_with_float", "train_python_loop.prints_every_step",
            "train_python_loop.returns_python_numbers", "predictions.as_numpy_bool_array",
            "predictions.as_tuple", "predictions.as_zero_one_ints"} <= set(made)
    assert not [n for n in made if n.startswith("step.") and ("float" in n or "print" in n or "python" in n)]
    assert made["train_python_loop.logs_with_float"].expected == []  # graded whole: the step count too
    assert "['step']" in made["train_python_loop.logs_with_float"].submission  # its steps are logged


def test_a_function_judged_from_its_program_is_not_plain_python() -> None:
    assert not honest_forms.plain_python(FunctionUse(name="f", checks=["e.a", "e.b"], judged="traced"))
    assert not honest_forms.plain_python(FunctionUse(name="f"))
    assert honest_forms.plain_python(FunctionUse(name="f", checks=["e.a"], judged="eager"))


def test_the_logging_variant_logs_each_step_and_keeps_the_probe_s_counter() -> None:
    interface, facts = _interface()
    made = {m.name: m for m in derive_mutants("", interface, facts)}
    namespace: dict[str, Any] = {}
    reference = ("import jax\nimport jax.numpy as jnp\n"
                 "@jax.jit\ndef step(w, b, x, y, lr):\n    return w - lr, b + lr\n"
                 "def train_python_loop(w, b, x, y, lr, num_steps):\n    for _ in range(num_steps):\n"
                 "        w, b = step(w, b, x, y, lr)\n    return w, b\n")
    variant = made["train_python_loop.logs_with_float"].submission
    exec(reference + variant, namespace)  # noqa: S102 - the instructor's reference and a derived cell
    calls = aliased_calls([Case(args=(np.float32(0), np.float32(0), np.float32(0), np.float32(0), 0.5, 4))],
                          [[0, 1]], "x.e")
    request = CallRequest(id="c", target="train_python_loop", calls=calls, count_calls="step")
    observation = LocalProber(namespace).observe([request], timeout=10)["c"]
    assert observation.status == "ok" and observation.result.counts == [4]
    assert namespace["_reported"] == [[-0.5, 0.5], [-1.0, 1.0], [-1.5, 1.5], [-2.0, 2.0], [-2.0, 2.0]]


# ----------------------------------------------------------------------------- end to end


def grade(path) -> Report:
    from warm_grading import grade_warm

    return grade_warm(path, GradeOptions(assignment="ch2-jit", seed=SEED))


def not_passed(report: Report) -> dict[str, str]:
    return {c.id: f"{c.status}: {c.message}" for e in report.exercises for c in e.checks if c.status != "passed"}


@pytest.mark.kernel
def test_an_honest_loop_that_logs_with_float_and_prints_keeps_full_marks(submission_from_reference) -> None:
    """float(w), a .item() history and a print per step cannot be traced by jax.jit: judged as the
    Python the text asks for, they cost nothing."""
    path = submission_from_reference("setup", "tax", "newton", "detective", "honest_python_loop_logs_each_step.py")
    report = grade(path)
    assert not_passed(report) == {} and report.score == 100


@pytest.mark.kernel
def test_an_unjitted_fori_loop_is_not_a_python_loop_calling_step(submission_from_reference) -> None:
    path = submission_from_reference("setup", "tax", "newton", "detective", "python_loop_is_an_unjitted_fori_loop.py")
    report = grade(path)
    calls = {"training.python_loop_calls_step", "training.python_loop_calls_step_hidden"}
    assert set(not_passed(report)) == calls
    assert report.score == 100 - sum(spec_of(assignment.load("ch2-jit"), c).points for c in calls)


@pytest.mark.kernel
def test_a_train_fori_the_chapter_s_own_cell_cannot_call_loses_points(submission_from_reference) -> None:
    """`train_fori(_w0, _b0, ...)` with `_w0 = _b0`: a train_fori that donates w and b fails the
    chapter's self-check, so it cannot keep full marks."""
    path = submission_from_reference("setup", "tax", "newton", "detective", "train_fori_donates_w_and_b.py")
    failing = not_passed(grade(path))
    assert set(failing) == {"training.fori_chapter_call"}
    assert "donate" in failing["training.fori_chapter_call"]
