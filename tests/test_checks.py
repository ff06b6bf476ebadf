"""Every check kind judged from hand-built observations: no kernel, just the grader's side."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from grader import assignment
from grader.assignment import Assignment
from grader.checks import Check, CheckOutcome, Context, build
from grader.checks.interface import accepts
from grader.checks.numeric import mismatch
from grader.probe.protocol import (
    CompileCountResult,
    LookupResult,
    Observation,
    OpaqueValue,
    Parameter,
    Raised,
    SeqValue,
    TraceResult,
    ValuesResult,
)
from grader.spec import StructureCheck
from grader.values import to_wire

SEED = 1


@pytest.fixture(scope="module")
def ch2() -> Assignment:
    return assignment.load("ch2-jit")


@pytest.fixture(scope="module")
def ctx(ch2: Assignment) -> Context:
    return Context(assignment=ch2, seed=SEED)


def make_check(ch2: Assignment, ctx: Context, full_id: str) -> Check:
    exercise_id, check_id = full_id.split(".")
    exercise = next(e for e in ch2.spec.exercises if e.id == exercise_id)
    spec = next(c for c in exercise.checks if c.id == check_id)
    return build(exercise_id, spec, ctx)


def request_ids(check: Check) -> list[str]:
    ids = [r.id for r in check.requests()]
    assert len(ids) == len(set(ids))
    return ids


def values(request_id: str, items: list[Any], op: str = "call") -> Observation:
    return Observation(id=request_id, status="ok", result=ValuesResult(op=op, values=[to_wire(v) for v in items]))


def missing(request_id: str, name: str) -> Observation:
    return Observation(id=request_id, status="missing", detail=name)


def raised(request_id: str, ename: str = "TypeError", evalue: str = "bad operand") -> Observation:
    return Observation(id=request_id, status="raised", raised=Raised(ename=ename, evalue=evalue))


def timed_out(request_id: str) -> Observation:
    return Observation(id=request_id, status="timeout", detail="still running after 30 s")


def crashed(request_id: str) -> Observation:
    return Observation(id=request_id, status="crashed", detail="the Python kernel died during this check")


def reference_values(check: Check, reference) -> list[Any]:
    return [reference(*case.args, **case.kwargs) for case in check.cases]


def assert_failed(outcome: CheckOutcome, *fragments: str) -> None:
    assert outcome.status == "failed", outcome
    for fragment in fragments:
        assert fragment in (outcome.message or ""), (fragment, outcome.message)


# ----------------------------------------------------------------------------- not available (any kind)

ONE_REQUEST_CHECKS = {
    "tax.switch_visible": "`tax_switch`",
    "tax.switch_uses_cond": "`tax_switch`",
    "newton.compiles_once": "`newton_sqrt`",
    "detective.call_1": "`predictions`",
    "newton.jitted": "`newton_sqrt`",
}


@pytest.mark.parametrize("full_id", list(ONE_REQUEST_CHECKS))
def test_missing_name_is_not_answered_yet(ch2, ctx, full_id) -> None:
    check = make_check(ch2, ctx, full_id)
    name = ONE_REQUEST_CHECKS[full_id].strip("`")
    outcome = check.judge({rid: missing(rid, name) for rid in request_ids(check)})
    assert outcome.status == "failed"
    assert outcome.message == f"Not answered yet: `{name}` is not defined."


@pytest.mark.parametrize("full_id", list(ONE_REQUEST_CHECKS))
def test_raised_is_an_error_that_names_the_exception(ch2, ctx, full_id) -> None:
    check = make_check(ch2, ctx, full_id)
    outcome = check.judge({rid: raised(rid) for rid in request_ids(check)})
    assert outcome.status == "error"
    assert "TypeError: bad operand" in outcome.message
    assert ONE_REQUEST_CHECKS[full_id] in outcome.message
    assert outcome.message.startswith(check.spec.message)


@pytest.mark.parametrize("full_id", list(ONE_REQUEST_CHECKS))
def test_timeout_is_a_timeout(ch2, ctx, full_id) -> None:
    check = make_check(ch2, ctx, full_id)
    outcome = check.judge({rid: timed_out(rid) for rid in request_ids(check)})
    assert outcome.status == "timeout"
    assert "did not finish" in outcome.message and "30 s" in outcome.message


@pytest.mark.parametrize("full_id", list(ONE_REQUEST_CHECKS))
def test_crash_is_an_error(ch2, ctx, full_id) -> None:
    check = make_check(ch2, ctx, full_id)
    outcome = check.judge({rid: crashed(rid) for rid in request_ids(check)})
    assert outcome.status == "error"
    assert "kernel died" in outcome.message


@pytest.mark.parametrize("full_id", list(ONE_REQUEST_CHECKS))
def test_no_observation_at_all_is_an_error_not_a_pass(ch2, ctx, full_id) -> None:
    outcome = make_check(ch2, ctx, full_id).judge({})
    assert outcome.status == "error"
    assert "no answer" in outcome.message


# ----------------------------------------------------------------------------- numeric


def test_numeric_passes_on_reference_values(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "tax.switch_visible")
    (rid,) = request_ids(check)
    expected = reference_values(check, ch2.references.tax)
    outcome = check.judge({rid: values(rid, [np.float32(v) for v in expected])})
    assert outcome == CheckOutcome(status="passed")


def test_numeric_tolerates_float32_rounding_within_atol(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "tax.switch_visible")
    (rid,) = request_ids(check)
    expected = reference_values(check, ch2.references.tax)
    assert check.judge({rid: values(rid, [np.float32(v) + np.float32(0.005) for v in expected])}).status == "passed"


def test_numeric_fails_on_a_wrong_value_and_says_which_call(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "tax.switch_visible")
    (rid,) = request_ids(check)
    got = reference_values(check, ch2.references.tax)
    got[7] = got[7] + 100.0  # income 55555
    outcome = check.judge({rid: values(rid, [np.float32(v) for v in got])})
    assert_failed(outcome, check.spec.message, "tax_switch(55555.0)", "expected 6111")


def test_numeric_fails_on_wrong_shape(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "tax.vectorized_keeps_shape")
    (rid,) = request_ids(check)
    right = [np.asarray(v, np.float32) for v in reference_values(check, ch2.references.tax)]
    assert check.judge({rid: values(rid, right)}).status == "passed"
    flattened = [v.ravel() for v in right]
    assert_failed(check.judge({rid: values(rid, flattened)}), "returned shape (12,), expected shape (3, 4)")


def test_numeric_fails_on_a_non_array(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "tax.vectorized_visible")
    (rid,) = request_ids(check)
    opaque = Observation(id=rid, status="ok", result=ValuesResult(
        op="call", values=[OpaqueValue(type="str", repr="'lots of tax'")]))
    assert_failed(check.judge({rid: opaque}), "returned a str ('lots of tax')")


def test_numeric_hidden_check_passes_and_fails_on_its_drawn_inputs(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "tax.switch_hidden")
    assert check.spec.hidden and len(check.cases) > 12
    (rid,) = request_ids(check)
    expected = reference_values(check, ch2.references.tax)
    assert check.judge({rid: values(rid, [np.float32(v) for v in expected])}).status == "passed"
    # right only on the notebook's 12 visible incomes: a hard-coded table fails the hidden inputs
    visible = set(ch2.references.VISIBLE_INCOMES)
    hard_coded = [np.float32(e if float(c.args[0]) in visible else 0.0) for c, e in zip(check.cases, expected)]
    assert check.judge({rid: values(rid, hard_coded)}).status == "failed"


def test_numeric_hidden_inputs_depend_on_the_seed(ch2) -> None:
    def drawn(seed: int) -> list[float]:
        check = make_check(ch2, Context(assignment=ch2, seed=seed), "tax.switch_hidden")
        return [float(c.args[0]) for c in check.cases]

    assert drawn(1) == drawn(1)
    assert drawn(1) != drawn(2)


def test_numeric_output_selects_one_item(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.visible")
    (rid,) = request_ids(check)
    pairs = [(np.float32(np.sqrt(c.args[0])), np.int32(5)) for c in check.cases]
    assert check.judge({rid: values(rid, pairs)}).status == "passed"
    wrong = [(np.float32(c.args[0] / 2), np.int32(5)) for c in check.cases]
    assert_failed(check.judge({rid: values(rid, wrong)}), "newton_sqrt(0.01, 1e-06)")
    not_a_pair = [np.float32(np.sqrt(c.args[0])) for c in check.cases]
    assert_failed(check.judge({rid: values(rid, not_a_pair)}), "has no item 0")


def test_numeric_against_compares_two_student_functions(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "training.fori_agrees")
    actual, against = request_ids(check)
    assert actual.endswith("/actual") and against.endswith("/against")
    results = [(np.float32(0.5 + i), np.float32(-1.0)) for i in range(len(check.cases))]
    assert check.judge({actual: values(actual, results), against: values(against, results)}).status == "passed"
    shifted = [(w + np.float32(0.01), b) for w, b in results]
    assert_failed(check.judge({actual: values(actual, results), against: values(against, shifted)}), "item 0")
    # the function it is compared with is not defined: not answered yet, not a pass
    outcome = check.judge({actual: values(actual, results), against: missing(against, "train_python_loop")})
    assert outcome.message == "Not answered yet: `train_python_loop` is not defined."


def test_numeric_generator_expected_values(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "training.fori_learns")
    (rid,) = request_ids(check)
    truth = [c.expected for c in check.cases]
    near = [(np.float32(w + 0.03), np.float32(b - 0.03)) for w, b in truth]
    assert check.judge({rid: values(rid, near)}).status == "passed"
    far = [(np.float32(w + 0.2), np.float32(b)) for w, b in truth]
    assert_failed(check.judge({rid: values(rid, far)}), "item 0")


def test_numeric_under_jit_says_so(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "tax.vectorized_under_jit")
    (request,) = check.requests()
    assert request.jit is True
    outcome = check.judge({request.id: raised(request.id, "TracerBoolConversionError", "Attempted boolean conversion")})
    assert outcome.status == "error" and "under jax.jit" in outcome.message


# ----------------------------------------------------------------------------- mismatch


def test_mismatch_close_values() -> None:
    assert mismatch(np.asarray(1.0000001), 1.0, rtol=1e-5, atol=0.0) is None
    assert mismatch(np.asarray([1.0, 2.0]), np.array([1.0, 2.0]), rtol=0.0, atol=0.0) is None
    assert mismatch((np.asarray(1.0), np.asarray([2.0])), (1.0, np.array([2.0])), rtol=1e-5, atol=0.0) is None


def test_mismatch_scalar() -> None:
    assert mismatch(np.asarray(2.0), 1.0, rtol=1e-5, atol=0.0) == "returned 2.0, expected 1.0"


def test_mismatch_array_names_the_first_wrong_element() -> None:
    why = mismatch(np.asarray([1.0, 5.0, 7.0]), np.array([1.0, 2.0, 3.0]), rtol=1e-5, atol=0.0)
    assert why.startswith("element 1 is 5.0, expected 2.0")
    assert "(2 of 3 elements differ)" in why


def test_mismatch_2d_index() -> None:
    why = mismatch(np.asarray([[1.0, 2.0], [3.0, 9.0]]), np.array([[1.0, 2.0], [3.0, 4.0]]), rtol=0.0, atol=0.0)
    assert why.startswith("element (1, 1) is 9.0, expected 4.0")


def test_mismatch_shape() -> None:
    assert mismatch(np.zeros(3), np.zeros((3, 1)), 1e-5, 0.0) == "returned shape (3,), expected shape (3, 1)"
    assert mismatch(np.zeros(1), 0.0, 1e-5, 0.0) == "returned shape (1,), expected shape ()"


def test_mismatch_nan_is_never_close() -> None:
    assert mismatch(np.asarray(np.nan), 1.0, rtol=1.0, atol=1.0) is not None
    assert mismatch(np.asarray([np.nan]), np.array([np.nan]), rtol=1.0, atol=1.0) is not None


def test_mismatch_sequences_are_compared_item_by_item() -> None:
    why = mismatch((np.asarray(1.0), np.asarray(2.5)), (1.0, 2.0), rtol=1e-5, atol=0.0)
    assert why == "item 1 returned 2.5, expected 2.0"
    assert mismatch(np.asarray(1.0), (1.0, 2.0), 1e-5, 0.0).startswith("returned 1.0, expected 2 values")
    assert mismatch((np.asarray(1.0),), (1.0, 2.0), 1e-5, 0.0).startswith("returned (1.0), expected 2 values")


def test_mismatch_non_numbers() -> None:
    assert mismatch(OpaqueValue(type="str", repr="'x'"), 1.0, 1e-5, 0.0) == "returned a str ('x'), expected 1.0"
    assert mismatch(None, 1.0, 1e-5, 0.0) == "returned None, expected 1.0"
    assert mismatch(np.asarray(["x"]), np.array([1.0]), 1e-5, 0.0) == "returned dtype <U1, expected numbers"


def test_mismatch_booleans_and_integers_are_numbers() -> None:
    assert mismatch(np.asarray([True, False]), np.array([1.0, 0.0]), 0.0, 0.0) is None
    assert mismatch(np.asarray(3, dtype=np.int32), 3.0, 0.0, 0.0) is None


# ----------------------------------------------------------------------------- interface


def params(*specs: str) -> list[Parameter]:
    """'a' positional, 'a=' with default, '*a' var-positional, '**k', 'k!' keyword-only, 'k!=' with default."""
    out = []
    for s in specs:
        default = s.endswith("=")
        name = s.rstrip("=")
        if name.startswith("**"):
            out.append(Parameter(name=name[2:], kind="VAR_KEYWORD", has_default=False))
        elif name.startswith("*"):
            out.append(Parameter(name=name[1:], kind="VAR_POSITIONAL", has_default=False))
        elif name.endswith("!"):
            out.append(Parameter(name=name[:-1], kind="KEYWORD_ONLY", has_default=default))
        else:
            out.append(Parameter(name=name, kind="POSITIONAL_OR_KEYWORD", has_default=default))
    return out


@pytest.mark.parametrize(
    ("signature", "n", "ok"),
    [
        (("a", "tol"), 2, True),
        (("a", "tol"), 1, False),
        (("a", "tol"), 3, False),
        (("a", "tol="), 1, True),
        (("a", "tol="), 2, True),
        (("a", "tol="), 3, False),
        (("*args",), 0, True),
        (("*args",), 6, True),
        (("a", "*args"), 0, False),
        (("a", "**kw"), 1, True),
        (("a", "tol", "mode!"), 2, False),
        (("a", "tol", "mode!="), 2, True),
        ((), 0, True),
        ((), 1, False),
    ],
)
def test_accepts(signature, n, ok) -> None:
    assert accepts(params(*signature), n) is ok


def test_accepts_positional_only() -> None:
    ps = [Parameter(name="a", kind="POSITIONAL_ONLY", has_default=False),
          Parameter(name="b", kind="POSITIONAL_ONLY", has_default=True)]
    assert accepts(ps, 1) and accepts(ps, 2) and not accepts(ps, 0) and not accepts(ps, 3)


def lookup(request_id: str, *, callable_: bool = True, jitted: bool = True, parameters=None,
           type_name: str = "PjitFunction") -> Observation:
    return Observation(id=request_id, status="ok", result=LookupResult(
        type_name=type_name, is_callable=callable_, is_jitted=jitted,
        parameters=params("a", "tol") if parameters is None else parameters))


def test_interface_jitted_passes(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.jitted")
    (rid,) = request_ids(check)
    assert check.judge({rid: lookup(rid)}).status == "passed"


def test_interface_not_jitted(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.jitted")
    (rid,) = request_ids(check)
    assert_failed(check.judge({rid: lookup(rid, jitted=False, type_name="function")}), "not wrapped in jax.jit")


def test_interface_not_callable(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.jitted")
    (rid,) = request_ids(check)
    outcome = check.judge({rid: lookup(rid, callable_=False, jitted=False, type_name="float", parameters=[])})
    assert_failed(outcome, "`newton_sqrt` is a float, not a function")


def test_interface_wrong_arity(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.jitted")
    (rid,) = request_ids(check)
    assert_failed(check.judge({rid: lookup(rid, parameters=params("a"))}),
                  "`newton_sqrt(a)` cannot be called with 2 positional arguments")


def test_interface_unknown_signature_is_not_held_against_the_student(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.jitted")
    (rid,) = request_ids(check)
    obs = Observation(id=rid, status="ok", result=LookupResult(
        type_name="PjitFunction", is_callable=True, is_jitted=True, parameters=None))
    assert check.judge({rid: obs}).status == "passed"


def test_interface_returns_pair(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.returns_pair")
    look, ret = request_ids(check)
    assert look.endswith("/lookup") and ret.endswith("/returns")
    good = values(ret, [(np.float32(1.4142135), np.int32(5))])
    assert check.judge({look: lookup(look), ret: good}).status == "passed"
    single = values(ret, [np.float32(1.4142135)])
    assert_failed(check.judge({look: lookup(look), ret: single}), "returned 1.41421", "not a tuple of 2 values")
    float_count = values(ret, [(np.float32(1.4142135), np.float32(5.0))])
    assert_failed(check.judge({look: lookup(look), ret: float_count}), "item 1", "should be a scalar int",
                  "dtype float32")
    vector_root = values(ret, [(np.ones(2, np.float32), np.int32(5))])
    assert_failed(check.judge({look: lookup(look), ret: vector_root}), "item 0", "scalar float", "shape (2,)")


def test_interface_returns_when_the_call_raises(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.returns_pair")
    look, ret = request_ids(check)
    outcome = check.judge({look: lookup(look), ret: raised(ret, "ZeroDivisionError", "division by zero")})
    assert outcome.status == "error" and "ZeroDivisionError: division by zero" in outcome.message


# ----------------------------------------------------------------------------- structure


def trace(request_id: str, *primitives: str) -> Observation:
    return Observation(id=request_id, status="ok", result=TraceResult(primitives=sorted(primitives)))


def test_structure_contains(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "tax.switch_uses_cond")
    (rid,) = request_ids(check)
    assert check.judge({rid: trace(rid, "add", "cond", "mul")}).status == "passed"
    assert_failed(check.judge({rid: trace(rid, "add", "select_n")}), "its jaxpr has no cond", "(it has: add, select_n)")


def test_structure_lowered_wording(ctx) -> None:
    spec = StructureCheck(id="lowered_while", title="lowered while", points=1, message="loop on device",
                          function="f", representation="lowered", contains=["while"],
                          cases={"rows": [[1.0]], "types": ["py"]})
    check = build("extra", spec, ctx)
    (rid,) = request_ids(check)
    assert check.judge({rid: trace(rid, "while", "add")}).status == "passed"
    assert_failed(check.judge({rid: trace(rid, "add")}), "its lowered StableHLO has no while")


def test_training_loop_structure_is_judged_on_the_jaxpr(ch2, ctx) -> None:
    """Lowered text cannot tell a static fori_loop (scan, lowered to while) from a traced one."""
    check = make_check(ch2, ctx, "training.fori_uses_while")
    (rid,) = request_ids(check)
    assert check.judge({rid: trace(rid, "while", "add")}).status == "passed"
    assert_failed(check.judge({rid: trace(rid, "scan", "add")}), "its jaxpr has no while")


def test_structure_absent(ch2, ctx) -> None:
    spec = StructureCheck(id="no_loops", title="no loops", points=1, message="do not loop", function="f",
                          representation="jaxpr", absent=["while", "scan"],
                          cases={"rows": [[1.0]], "types": ["py"]})
    check = build("extra", spec, ctx)
    (rid,) = request_ids(check)
    assert check.judge({rid: trace(rid, "add")}).status == "passed"
    assert_failed(check.judge({rid: trace(rid, "add", "scan")}), "do not loop", "its jaxpr contains scan")


# ----------------------------------------------------------------------------- compile limit


def compiles(request_id: str, n: int) -> Observation:
    return Observation(id=request_id, status="ok",
                       result=CompileCountResult(compiles=n, names=["jit(newton_sqrt)"] * n))


def test_compile_limit(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.compiles_once")
    (rid,) = request_ids(check)
    assert check.judge({rid: compiles(rid, 1)}).status == "passed"
    assert check.judge({rid: compiles(rid, 0)}).status == "passed"
    assert_failed(check.judge({rid: compiles(rid, 3)}), "compiled 3 times over 3 calls (at most 1 allowed)")


def test_compile_limit_sends_the_whole_call_sequence(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "training.fori_compiles_once")
    (request,) = check.requests()
    assert request.target == "train_fori" and len(request.calls) == 3
    steps = [c.args[5].v for c in request.calls]
    assert all(type(n) is int for n in steps) and len(set(steps)) == 3  # num_steps varies, as a Python int
    other = make_check(ch2, Context(assignment=ch2, seed=ctx.seed + 1), "training.fori_compiles_once")
    assert [c.args[5].v for c in other.requests()[0].calls] != steps  # drawn per run: not in the notebook


# ----------------------------------------------------------------------------- custom


def test_custom_detective(ch2, ctx) -> None:
    truth = list(ch2.checks.detective_truth())
    assert len(truth) == 8
    for call in range(1, 9):
        check = make_check(ch2, ctx, f"detective.call_{call}")
        (rid,) = request_ids(check)
        assert check.judge({rid: values(rid, [truth], op="value")}).status == "passed", call
        flipped = list(truth)
        flipped[call - 1] = not flipped[call - 1]
        assert_failed(check.judge({rid: values(rid, [flipped], op="value")}), "you predicted that")
        others_flipped = [not t for t in truth]
        others_flipped[call - 1] = truth[call - 1]
        assert check.judge({rid: values(rid, [others_flipped], op="value")}).status == "passed", call


def test_custom_detective_wrong_shape_of_answer(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "detective.call_1")
    (rid,) = request_ids(check)
    assert_failed(check.judge({rid: values(rid, [[True] * 7], op="value")}), "list of 8", "(7 items)")
    assert_failed(check.judge({rid: values(rid, [7], op="value")}), "not a list")
    text_first = SeqValue(t="list", items=[OpaqueValue(type="str", repr="'yes'")] + [to_wire(True)] * 7)
    obs = Observation(id=rid, status="ok", result=ValuesResult(op="value", values=[text_first]))
    assert_failed(check.judge({rid: obs}), "item 1", "not True/False")


def _rule_counts(ch2, check) -> list[int]:
    return [ch2.checks.newton_reference_count(*c.args, np.float32) for c in check.cases]


def test_custom_iterations_follow_the_stopping_rule(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.iterations")
    (rid,) = request_ids(check)
    assert rid.endswith("/calls")
    counts = _rule_counts(ch2, check)
    roots = [np.float32(np.sqrt(c.args[0])) for c in check.cases]
    for shift in (-1, 0, 1):  # what correct solutions count differs by one
        answers = [(r, np.int32(k + shift)) for r, k in zip(roots, counts)]
        assert check.judge({rid: values(rid, answers)}).status == "passed", shift
    # a made-up count that grows as tol shrinks is not the rule's count
    made_up = [(r, np.int32(3 if c.args[1] > 1e-3 else 7)) for r, c in zip(roots, check.cases)]
    assert_failed(check.judge({rid: values(rid, made_up)}), "reports", "the stopping rule")
    two_off = [(r, np.int32(k + 2)) for r, k in zip(roots, counts)]
    assert_failed(check.judge({rid: values(rid, two_off)}), f"reports {counts[0] + 2} iterations", f"takes {counts[0]}")


@pytest.mark.parametrize(("count", "fragment"), [
    (np.float32("nan"), "nan"), (np.float32("inf"), "inf"), (np.float32(2.5), "2.5"), ("five", "five"),
])
def test_custom_iterations_odd_counts_get_a_sentence(ch2, ctx, count, fragment) -> None:
    check = make_check(ch2, ctx, "newton.iterations")
    (rid,) = request_ids(check)
    odd = [(np.float32(1.0), count) for _ in check.cases]
    assert_failed(check.judge({rid: values(rid, odd)}), "iteration count", "whole number", fragment)


def test_custom_iterations_a_dict_is_not_a_pair(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.iterations")
    (rid,) = request_ids(check)
    as_dict = [{"root": np.float32(1.0), "k": np.int32(5)} for _ in check.cases]
    assert_failed(check.judge({rid: values(rid, as_dict)}), "expected (root, iterations)")


def test_mismatch_compares_dicts_by_key() -> None:
    from grader.checks.numeric import mismatch

    want = {"w": np.array([1.0, 2.0]), "b": np.float64(0.5)}
    assert mismatch({"w": np.array([1.0, 2.0]), "b": np.asarray(0.5)}, want, 1e-6, 0.0) is None
    assert "item 'b'" in mismatch({"w": np.array([1.0, 2.0]), "b": np.asarray(0.7)}, want, 1e-6, 0.0)
    assert "keys" in mismatch({"w": np.array([1.0, 2.0])}, want, 1e-6, 0.0)


@pytest.mark.parametrize(("answers", "status", "fragment"), [
    ({1: "B"}, "passed", None),
    ({1: " b "}, "passed", None),
    ({1: "C"}, "failed", "answer 1 is 'C'"),
    ({1: ""}, "failed", "Not answered yet"),
    ({2: "B"}, "failed", "Not answered yet"),
    (["B", "C"], "failed", "answer 1 is 'C'"),  # a list is indexed from 0
])
def test_answer_check(ctx, answers, status, fragment) -> None:
    from grader.spec import AnswerCheck

    spec = AnswerCheck(id="q1", title="question 1", points=1, message="question 1 is wrong",
                       name="quiz_answers", key=1, accept=["B"])
    check = build("quiz", spec, ctx)
    (rid,) = request_ids(check)
    outcome = check.judge({rid: values(rid, [answers], op="value")})
    assert outcome.status == status, outcome
    if fragment:
        assert fragment in outcome.message


def test_an_answer_of_the_wrong_shape_is_an_error_not_a_crash(ch2, ctx) -> None:
    """Only a tampered probe sends it (a trace result where values were asked): the grader
    reports the check as an error instead of failing an assertion in its own process."""
    check = make_check(ch2, ctx, "tax.switch_visible")
    (rid,) = request_ids(check)
    outcome = check.judge({rid: trace(rid, "cond")})
    assert outcome.status == "error" and "unreadable" in outcome.message


def test_several_values_are_compared_by_their_leaves() -> None:
    """The rule of README "How answers are compared": what `w, b = f(...)` unpacks."""
    from grader.values import Tree

    want = (1.0, 2.0)
    assert mismatch(Tree(type="Params", leaves=(np.asarray(1.0), np.asarray(2.0))), want, 1e-6, 0.0) is None
    assert mismatch(np.array([1.0, 2.0], np.float32), want, 1e-6, 0.0) is None
    assert mismatch([np.asarray(1.0), np.asarray(2.0)], want, 1e-6, 0.0) is None
    assert "item 1" in mismatch(np.array([1.0, 2.5]), want, 1e-6, 0.0)
    assert "expected 2 values" in mismatch(np.array([1.0, 2.0, 3.0]), want, 1e-6, 0.0)
    assert "expected 2 values" in mismatch({"w": np.asarray(1.0), "b": np.asarray(2.0)}, want, 1e-6, 0.0)
    assert "expected 2 values" in mismatch(np.zeros((2, 1)), want, 1e-6, 0.0)  # only a 1-D array unpacks
    # an "against" function's pytree is compared by its leaves too
    assert mismatch((np.asarray(1.0), np.asarray(2.0)), Tree(type="P", leaves=(1.0, 2.0)), 1e-6, 0.0) is None


def test_non_finite_and_complex_values_get_a_sentence() -> None:
    assert "nan" in mismatch(np.asarray(np.nan), 1.0, 1e-6, 0.0)
    assert "complex" in mismatch(np.asarray(1 + 2j), 1.0, 1e-6, 0.0)
    assert mismatch(np.asarray(1 + 0j), 1.0, 1e-6, 0.0) is None
