"""Every check kind judged from hand-built observations and module runs: no kernel, no verifier.

A check asks a planner for requests (kernel) and module runs (verifier) and judges `Seen`; these
tests build `Seen` by hand: `observed(check, ...)` answers every kernel request with one
observation, and, for checks on the exported program, makes every export succeed and every
module run return the given answers (one per case, in the check's order).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
import pytest
from fake_modules import working

from grader import assignment
from grader.assignment import Assignment
from grader.checks import Check, CheckOutcome, Context, Planner, Seen, build
from grader.checks.base import ModuleFacts, RunOutcome
from grader.checks.interface import accepts
from grader.checks.numeric import mismatch
from grader.checks.program import ProgramCalls, StudentCalls
from grader.kernel.protocol import (
    CompileCountResult,
    ExportRequest,
    ExportResult,
    LookupResult,
    Observation,
    OpaqueValue,
    Parameter,
    Raised,
    Request,
    SeqValue,
    TraceResult,
    ValuesResult,
)
from grader.spec import StructureCheck
from grader.values import describe, to_wire

SEED = 1


@pytest.fixture(scope="module")
def ch2() -> Assignment:
    return assignment.load("ch2-jit")


@pytest.fixture
def ctx(ch2: Assignment) -> Context:
    return Context(assignment=ch2, seed=SEED, planner=Planner())


def make_check(ch2: Assignment, ctx: Context, full_id: str) -> Check:
    exercise_id, check_id = full_id.split(".")
    exercise = next(e for e in ch2.spec.exercises if e.id == exercise_id)
    spec = next(c for c in exercise.checks if c.id == check_id)
    return build(exercise_id, spec, ctx)


def programs(check: Check) -> list[ProgramCalls]:
    found = []
    for value in vars(check).values():
        if isinstance(value, ProgramCalls):
            found.append(value)
        elif isinstance(value, StudentCalls) and value.program is not None:
            found.append(value.program)
    return found


def _leaves(answer: Any) -> list[Any]:
    return [np.asarray(a) for a in answer] if isinstance(answer, (tuple, list)) else [np.asarray(answer)]


def _tree(answer: Any) -> str:
    if isinstance(answer, (tuple, list)):
        return "PyTreeDef((" + ", ".join("*" for _ in answer) + ("," if len(answer) == 1 else "") + "))"
    return "PyTreeDef(*)"


def observed(check: Check, kernel: Callable[[Request], Observation] | None = None, *,
             answers: list[Any] | None = None, ops: tuple[str, ...] = ("while", "case", "add"),
             inputs: int | None = None, export: Callable[[ExportRequest], Observation] | None = None,
             run: RunOutcome | None = None, out_tree: str | None = None, jitted: bool = True,
             judged: bool = True, beyond: Callable[[tuple], Any] | None = None) -> Seen:
    """The Seen of a check: `kernel` answers its kernel requests (exports too, unless `export`
    or `answers` say otherwise); module runs return `answers` or `run`, then `beyond(args)` for
    each case a structure or compile check adds beyond its own (`ProgramCalls.beyond`)."""
    seen = Seen()
    module_exports = {e.id for program in programs(check) for e in program.exports}
    for request in check.requests():
        if request.id in module_exports and export is not None:
            seen.observations[request.id] = export(request)  # type: ignore[arg-type]
        elif request.id in module_exports and (answers is not None or run is not None or kernel is None):
            tree = out_tree or (_tree(answers[0]) if answers else "PyTreeDef(*)")
            seen.observations[request.id] = Observation(id=request.id, status="ok", result=ExportResult(
                module="AA==", direct=jitted, jitted=jitted, out_tree=tree, fun_name="f"))
        elif kernel is not None:
            seen.observations[request.id] = kernel(request)
    for program in programs(check):
        per_run: dict[str, list] = {}
        for (export_id, _), answer in zip(program._where, answers or []):
            per_run.setdefault(export_id, []).append(_leaves(answer))
        for (export_id, _), case in zip(program._beyond_where, program.beyond if beyond else []):
            per_run.setdefault(export_id, []).append(_leaves(beyond(case.args)))
        for export_id, module_run in program._runs.items():
            facts = ModuleFacts(ops=list(ops), custom_calls=[], constructs=working(ops),
                                inputs=len(module_run.export.args) if inputs is None else inputs)
            seen.runs[id(module_run)] = run or RunOutcome(status="ok", facts=facts, values=per_run.get(export_id, []),
                                                          judged=judged)
    return seen


def values(request: Request, items: list[Any], op: str = "call") -> Observation:
    return Observation(id=request.id, status="ok", result=ValuesResult(op=op, values=[to_wire(v) for v in items]))


def missing(name: str) -> Callable[[Request], Observation]:
    return lambda r: Observation(id=r.id, status="missing", detail=name)


def raised(ename: str = "TypeError", evalue: str = "bad operand") -> Callable[[Request], Observation]:
    return lambda r: Observation(id=r.id, status="raised", raised=Raised(ename=ename, evalue=evalue))


def timed_out(r: Request) -> Observation:
    return Observation(id=r.id, status="timeout", detail="still running after 30 s")


def crashed(r: Request) -> Observation:
    return Observation(id=r.id, status="crashed", detail="the Python kernel died during this check")


def reference_values(check: Check, reference) -> list[Any]:
    return [reference(*case.args, **case.kwargs) for case in check.cases]


def assert_failed(outcome: CheckOutcome, *fragments: str) -> None:
    assert outcome.status == "failed", outcome
    for fragment in fragments:
        assert fragment in (outcome.message or ""), (fragment, outcome.message)


# ----------------------------------------------------------------------------- not available (any kind)

ONE_FUNCTION_CHECKS = {
    "tax.switch_visible": "`tax_switch`",
    "tax.switch_uses_cond": "`tax_switch`",
    "newton.compiles_once": "`newton_sqrt`",
    "detective.call_1": "`predictions`",
    "newton.jitted": "`newton_sqrt`",
}


@pytest.mark.parametrize("full_id", list(ONE_FUNCTION_CHECKS))
def test_missing_name_is_not_answered_yet(ch2, ctx, full_id) -> None:
    check = make_check(ch2, ctx, full_id)
    name = ONE_FUNCTION_CHECKS[full_id].strip("`")
    outcome = check.judge(observed(check, missing(name), export=missing(name)))
    assert outcome.status == "failed"
    assert outcome.message == f"Not answered yet: `{name}` is not defined."


@pytest.mark.parametrize("full_id", list(ONE_FUNCTION_CHECKS))
def test_raised_is_an_error_that_names_the_exception(ch2, ctx, full_id) -> None:
    check = make_check(ch2, ctx, full_id)
    outcome = check.judge(observed(check, raised(), export=raised()))
    # a compile limit fails instead: tracing with every argument abstract raises for a static one
    assert outcome.status == ("failed" if full_id == "newton.compiles_once" else "error")
    assert "TypeError" in outcome.message and "bad operand" in outcome.message
    assert ONE_FUNCTION_CHECKS[full_id] in outcome.message
    if outcome.cause == "trace" and outcome.status == "error":
        # JAX could not trace it: the property the check tests was never reached, so not its advice
        assert not outcome.message.startswith(check.spec.message)
        assert outcome.message.startswith(f"{ONE_FUNCTION_CHECKS[full_id]} could not be traced by jax.jit")
    else:
        assert outcome.message.startswith(check.spec.message)


@pytest.mark.parametrize("full_id", list(ONE_FUNCTION_CHECKS))
def test_timeout_is_a_timeout(ch2, ctx, full_id) -> None:
    check = make_check(ch2, ctx, full_id)
    outcome = check.judge(observed(check, timed_out, export=timed_out))
    assert outcome.status == "timeout"
    assert "did not finish" in outcome.message and "30 s" in outcome.message


@pytest.mark.parametrize("full_id", list(ONE_FUNCTION_CHECKS))
def test_crash_is_an_error(ch2, ctx, full_id) -> None:
    check = make_check(ch2, ctx, full_id)
    outcome = check.judge(observed(check, crashed, export=crashed))
    assert outcome.status == "error"
    assert "kernel died" in outcome.message


@pytest.mark.parametrize("full_id", list(ONE_FUNCTION_CHECKS))
def test_no_observation_at_all_is_an_error_not_a_pass(ch2, ctx, full_id) -> None:
    outcome = make_check(ch2, ctx, full_id).judge(Seen())
    assert outcome.status == "error"
    assert "no answer" in outcome.message


MODULE_CHECKS = ["tax.switch_visible", "tax.switch_uses_cond", "newton.returns_pair", "newton.iterations",
                 "training.fori_agrees", "newton.compiles_once"]


@pytest.mark.parametrize("full_id", MODULE_CHECKS)
def test_what_the_verifier_did_not_run_is_never_a_pass(ch2, ctx, full_id) -> None:
    """A module the verifier refused, that timed out, crashed it, or was never run."""
    check = make_check(ch2, ctx, full_id)
    lookup_ok = lambda r: lookup(r) if r.op == "lookup" else compiles(r, 1)  # noqa: E731
    for status, word in [("refused", "cannot be run"), ("timeout", "did not finish"), ("crashed", "failed"),
                         ("error", "failed")]:
        outcome = check.judge(observed(check, lookup_ok, run=RunOutcome(status=status, detail="why")))
        assert outcome.status in ("error", "timeout"), (status, outcome)
        assert word in outcome.message and "why" in outcome.message
    seen = observed(check, lookup_ok, answers=[])
    seen.runs.clear()
    assert check.judge(seen).status == "error"


def test_hidden_inputs_never_go_to_the_kernel(ch2, ctx) -> None:
    """The kernel is asked for exports with abstract arguments only; values go to the verifier."""
    check = make_check(ch2, ctx, "tax.switch_hidden")
    (request,) = check.requests()
    assert isinstance(request, ExportRequest)
    assert {a.t for a in request.args} == {"abstract"} and request.fallback == {}
    drawn = {float(c.args[0]) for c in check.cases}
    assert not any(str(v) in request.model_dump_json() for v in drawn)
    (run,) = check.runs()
    assert {float(call[0].data) for call in run.inputs} == drawn


def test_code_jax_cannot_trace_gets_a_verdict_that_teaches(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.visible")
    export = lambda r: Observation(id=r.id, status="raised", raised=Raised(  # noqa: E731
        ename="TracerBoolConversionError", evalue="Attempted boolean conversion", line=7))
    outcome = check.judge(observed(check, export=export))
    assert outcome.status == "error"
    assert "`newton_sqrt` could not be traced by jax.jit: TracerBoolConversionError at line 7 of its cell" \
        in outcome.message
    assert "lax.while_loop" in outcome.message


# ----------------------------------------------------------------------------- numeric


def test_numeric_passes_on_reference_values(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "tax.switch_visible")
    expected = reference_values(check, ch2.references.tax)
    outcome = check.judge(observed(check, answers=[np.float32(v) for v in expected]))
    assert outcome == CheckOutcome(status="passed")


def test_numeric_tolerates_float32_rounding_within_atol(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "tax.switch_visible")
    expected = reference_values(check, ch2.references.tax)
    assert check.judge(observed(check, answers=[np.float32(v) + np.float32(0.005) for v in expected])).status == "passed"


def test_numeric_fails_on_a_wrong_value_and_says_which_call(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "tax.switch_visible")
    got = reference_values(check, ch2.references.tax)
    got[7] = got[7] + 100.0  # income 55555
    outcome = check.judge(observed(check, answers=[np.float32(v) for v in got]))
    assert_failed(outcome, check.spec.message, "tax_switch(55555.0)", "expected 6111")


def test_numeric_fails_on_wrong_shape(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "tax.vectorized_keeps_shape")
    right = [np.asarray(v, np.float32) for v in reference_values(check, ch2.references.tax)]
    assert check.judge(observed(check, answers=right)).status == "passed"
    flattened = [v.ravel() for v in right]
    assert_failed(check.judge(observed(check, answers=flattened)), "returned shape (12,), expected shape (3, 4)")


def judged_eagerly(ch2: Assignment, function: str) -> Assignment:
    """ch2-jit with `function` judged as plain Python: its values are what the kernel reports."""
    exercises = [e.model_copy(update={"functions": [f.model_copy(update={"judged": "eager"}) if f.name == function
                                                    else f for f in e.functions]}) for e in ch2.spec.exercises]
    return dataclasses.replace(ch2, spec=ch2.spec.model_copy(update={"exercises": exercises}))


def test_numeric_from_the_kernel_fails_on_a_non_array(ch2) -> None:
    """A function judged eagerly: the values the kernel reports (here, a string)."""
    spec = next(c for e in ch2.spec.exercises if e.id == "tax" for c in e.checks if c.id == "vectorized_visible")
    check = build("tax", spec, Context(assignment=judged_eagerly(ch2, "tax_vectorized"), seed=SEED))
    opaque = lambda r: Observation(id=r.id, status="ok", result=ValuesResult(  # noqa: E731
        op="call", values=[OpaqueValue(type="str", repr="'lots of tax'")]))
    assert_failed(check.judge(observed(check, opaque)), "returned a str ('lots of tax')")
    short = lambda r: values(r, [])  # noqa: E731 - a tampered probe answering no call at all
    assert check.judge(observed(check, short)).status == "error"


def test_numeric_hidden_check_passes_and_fails_on_its_drawn_inputs(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "tax.switch_hidden")
    assert check.spec.hidden and len(check.cases) > 12
    expected = reference_values(check, ch2.references.tax)
    assert check.judge(observed(check, answers=[np.float32(v) for v in expected])).status == "passed"
    # right only on the notebook's 12 visible incomes: a hard-coded table fails the hidden inputs
    visible = set(ch2.references.VISIBLE_INCOMES)
    hard_coded = [np.float32(e if float(c.args[0]) in visible else 0.0) for c, e in zip(check.cases, expected)]
    assert check.judge(observed(check, answers=hard_coded)).status == "failed"


def test_numeric_hidden_inputs_depend_on_the_seed(ch2) -> None:
    def drawn(seed: int) -> list[float]:
        check = make_check(ch2, Context(assignment=ch2, seed=seed), "tax.switch_hidden")
        return [float(c.args[0]) for c in check.cases]

    assert drawn(1) == drawn(1)
    assert drawn(1) != drawn(2)


def test_numeric_output_selects_one_item(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.visible")
    pairs = [(np.float32(np.sqrt(c.args[0])), np.int32(5)) for c in check.cases]
    assert check.judge(observed(check, answers=pairs)).status == "passed"
    wrong = [(np.float32(c.args[0] / 2), np.int32(5)) for c in check.cases]
    assert_failed(check.judge(observed(check, answers=wrong)), "newton_sqrt(0.01, 1e-06)")
    not_a_pair = [np.float32(np.sqrt(c.args[0])) for c in check.cases]
    assert_failed(check.judge(observed(check, answers=not_a_pair)), "has no item 0")


def test_numeric_compares_with_the_reference_never_another_student_function(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "training.fori_agrees")
    assert {r.target for r in check.requests()} == {"train_fori"}
    truth = reference_values(check, ch2.references.train)
    assert check.judge(observed(check, answers=[(np.float32(w), np.float32(b)) for w, b in truth])).status == "passed"
    shifted = [(np.float32(w + 0.01), np.float32(b)) for w, b in truth]
    assert_failed(check.judge(observed(check, answers=shifted)), "item 0")


def test_numeric_generator_expected_values(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "training.fori_learns")
    truth = [c.expected for c in check.cases]
    near = [(np.float32(w + 0.03), np.float32(b - 0.03)) for w, b in truth]
    assert check.judge(observed(check, answers=near)).status == "passed"
    far = [(np.float32(w + 0.2), np.float32(b)) for w, b in truth]
    assert_failed(check.judge(observed(check, answers=far)), "item 0")


def test_public_arguments_may_be_baked_hidden_ones_never(ch2, ctx) -> None:
    """A loop's lr and num_steps (public) are offered to be baked in; the data (hidden) is not."""
    check = make_check(ch2, ctx, "training.fori_agrees")
    for request in check.requests():
        assert sorted(request.fallback) == [4, 5]
        assert all(a.t == "abstract" for a in request.args)


def test_a_dict_where_values_are_expected_is_named(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.visible")
    answers = [(np.float32(1.0), np.int32(5)) for _ in check.cases]
    outcome = check.judge(observed(check, answers=answers, out_tree="PyTreeDef({'k': *, 'root': *})"))
    assert_failed(outcome, "dict")


# ----------------------------------------------------------------------------- mismatch


def test_mismatch_close_values() -> None:
    assert mismatch(np.asarray(1.0000001), 1.0, rtol=1e-5, atol=0.0) is None
    assert mismatch(np.asarray([1.0, 2.0]), np.array([1.0, 2.0]), rtol=0.0, atol=0.0) is None
    assert mismatch((np.asarray(1.0), np.asarray([2.0])), (1.0, np.array([2.0])), rtol=1e-5, atol=0.0) is None


def test_mismatch_scalar() -> None:
    assert mismatch(np.asarray(2.0), 1.0, rtol=1e-5, atol=0.0) == "returned 2.0, expected 1.0"


def test_mismatch_rounds_numbers_to_the_check_s_tolerance() -> None:
    # within atol 1e-2 + rtol 1e-5 of 39753.95 a check tells 0.4 apart: one decimal, no float noise
    assert mismatch(np.asarray(39760.1, np.float32), 39753.946874999994, 1e-5, 1e-2) == \
        "returned 39760.1, expected 39753.9"
    # a square root to rtol 1e-5 keeps the four decimals that tell it wrong
    assert mismatch(np.asarray(17.5, np.float32), 17.420548, 1e-5, 0.0) == "returned 17.5, expected 17.4205"
    # a looser check shows fewer, but always enough to read the two as different
    assert mismatch(np.asarray(18.5), 17.420548, 1e-2, 0.0) == "returned 18.5, expected 17.4"
    assert mismatch(np.asarray(1.26), 1.2, 1e-2, 0.0) == "returned 1.26, expected 1.2"
    assert mismatch(np.asarray([0.0, 3.14159]), np.array([0.0, 3.0]), 1e-3, 0.0).startswith(
        "element 1 is 3.142, expected 3.0")


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


def lookup(request: Request, *, callable_: bool = True, parameters=None, type_name: str = "PjitFunction") -> Observation:
    return Observation(id=request.id, status="ok", result=LookupResult(
        type_name=type_name, is_callable=callable_, is_jitted=True,
        parameters=params("a", "tol") if parameters is None else parameters))


def exported(request: Request, *, jitted: bool = True, refused: str | None = None) -> Observation:
    return Observation(id=request.id, status="ok", result=ExportResult(
        module="AA==", direct=jitted, jitted=jitted, out_tree="PyTreeDef((*, *))", fun_name="newton_sqrt",
        jit_refused=refused))


def test_interface_jitted_is_what_jax_export_accepts(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.jitted")
    assert check.judge(observed(check, lookup, export=exported)).status == "passed"
    refused = "Function to be exported must be the result of `jit` but is: <function newton_sqrt>"
    outcome = check.judge(observed(check, lookup, export=lambda r: exported(r, jitted=False, refused=refused)))
    assert_failed(outcome, "is not a jax.jit function", "must be the result of `jit`")


def test_interface_jitted_is_not_an_attribute(ch2, ctx) -> None:
    """`f.lower = some_jitted.lower` made `hasattr(f, "lower")` true; the lookup no longer decides."""
    check = make_check(ch2, ctx, "newton.jitted")
    look = lambda r: lookup(r, type_name="function")  # noqa: E731
    assert check.judge(observed(check, look, export=lambda r: exported(r, jitted=False))).status == "failed"


def test_interface_not_callable(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.jitted")
    look = lambda r: lookup(r, callable_=False, type_name="float", parameters=[])  # noqa: E731
    assert_failed(check.judge(observed(check, look, export=exported)), "`newton_sqrt` is a float, not a function")


def test_interface_wrong_arity(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.jitted")
    look = lambda r: lookup(r, parameters=params("a"))  # noqa: E731
    assert_failed(check.judge(observed(check, look, export=exported)),
                  "`newton_sqrt(a)` cannot be called with 2 positional arguments")


def test_interface_unknown_signature_is_not_held_against_the_student(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.jitted")
    look = lambda r: Observation(id=r.id, status="ok", result=LookupResult(  # noqa: E731
        type_name="PjitFunction", is_callable=True, is_jitted=True, parameters=None))
    assert check.judge(observed(check, look, export=exported)).status == "passed"


def test_interface_returns_pair(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.returns_pair")
    good = observed(check, lookup, answers=[(np.float32(1.4142135), np.int32(5))])
    assert check.judge(good).status == "passed"
    single = observed(check, lookup, answers=[np.float32(1.4142135)])
    assert_failed(check.judge(single), "returned 1.41421", "not a tuple of 2 values")
    float_count = observed(check, lookup, answers=[(np.float32(1.4142135), np.float32(5.0))])
    assert_failed(check.judge(float_count), "item 1", "should be a scalar int", "dtype float32")
    vector_root = observed(check, lookup, answers=[(np.ones(2, np.float32), np.int32(5))])
    assert_failed(check.judge(vector_root), "item 0", "scalar float", "shape (2,)")
    as_dict = observed(check, lookup, answers=[(np.float32(1.0), np.int32(5))],
                       out_tree="PyTreeDef({'iterations': *, 'root': *})")
    assert_failed(check.judge(as_dict), "dict", "not a tuple of 2 values")


def test_interface_returns_when_tracing_raises(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.returns_pair")
    outcome = check.judge(observed(check, lookup, export=raised("ZeroDivisionError", "division by zero")))
    assert outcome.status == "error" and "ZeroDivisionError" in outcome.message and "division by zero" in outcome.message


# ----------------------------------------------------------------------------- structure


def trace(request: Request, *primitives: str) -> Observation:
    return Observation(id=request.id, status="ok", result=TraceResult(primitives=sorted(primitives)))


def test_structure_reads_the_exported_program(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "tax.switch_uses_cond")
    right = [np.float32(v) for v in reference_values(check, ch2.references.tax)]
    tax = lambda args: np.float32(ch2.references.tax(*args))  # noqa: E731
    assert check.judge(observed(check, answers=right, ops=("add", "case", "multiply"), beyond=tax)).status == "passed"
    assert_failed(check.judge(observed(check, answers=right, ops=("add", "select"), beyond=tax)),
                  "its exported program has no lax.switch or lax.cond (it has a jnp.where or jnp.select)")
    unnamed = check.judge(observed(check, answers=right, ops=("add", "func.func", "broadcast_in_dim"), beyond=tax))
    assert_failed(unnamed, "has no lax.switch or lax.cond (it has no loop or branch)")
    assert "func.func" not in unnamed.message and "broadcast_in_dim" not in unnamed.message  # StableHLO's names


def test_structure_judges_the_program_whose_values_are_judged(ch2, ctx) -> None:
    """The structure check exports tax_switch for the same signature as the value checks (a
    float32 scalar): one module, so a function that takes its lax.switch branch only for another
    signature (a weakly typed 1.0) shows its jnp.select program to both."""
    structure = make_check(ch2, ctx, "tax.switch_uses_cond")
    values_check = make_check(ch2, ctx, "tax.switch_hidden")
    assert {r.id for r in structure.requests()} <= {r.id for r in values_check.requests()}


def test_structure_lowered_wording(ctx) -> None:
    spec = StructureCheck(id="lowered_while", title="lowered while", points=1, message="loop on device",
                          function="f", representation="lowered", contains=["while"],
                          cases={"rows": [[1.0]], "types": ["py"]})
    check = build("extra", spec, ctx)
    assert check.judge(observed(check, lambda r: trace(r, "while", "add"))).status == "passed"
    assert_failed(check.judge(observed(check, lambda r: trace(r, "add"))), "its lowered StableHLO has no loop (lax.while_loop, lax.fori_loop or lax.scan)")


def test_structure_absent(ctx) -> None:
    spec = StructureCheck(id="no_loops", title="no loops", points=1, message="do not loop", function="f",
                          absent=["while"], cases={"rows": [[1.0]], "types": ["py"]})
    check = build("extra", spec, ctx)
    assert check.judge(observed(check, ops=("add",))).status == "passed"
    assert_failed(check.judge(observed(check, ops=("add", "while"))), "do not loop",
                  "its exported program contains a loop (lax.while_loop, lax.fori_loop or lax.scan)")


def test_structure_constant_size_catches_a_loop_over_elements(ch2, ctx) -> None:
    """tax_vectorized as a Python loop over the array: right values, no lax.switch if the loop
    calls a scalar jnp.select, but its program grows with the input."""
    check = make_check(ch2, ctx, "tax.vectorized_handles_arrays")
    right = [np.asarray(value, np.float32) for value in reference_values(check, ch2.references.tax)]
    tax = lambda args: np.asarray(ch2.references.tax(*args), np.float32)  # noqa: E731
    seen = observed(check, answers=right, ops=("select", "add"), beyond=tax)
    assert check.judge(seen).status == "passed"

    def sized(counts: tuple[int, ...]) -> CheckOutcome:
        for count, outcome in zip(counts, seen.runs.values()):  # 3 incomes, then 12, then 48
            assert outcome.facts is not None
            outcome.facts.op_count = count
        return check.judge(seen)

    assert_failed(sized((40, 160, 640)), "grows with the input: 40, 160 and 640 operations for 3, 12 and 48 elements",
                  "Python loop over the elements")
    # jnp.digitize + jnp.choose lowers one operation longer from 12 incomes on: not growth
    assert sized((138, 139, 139)).status == "passed"
    assert sized((138, 139, 140)).status == "passed"  # rising, but by less than an operation per element
    assert_failed(check.judge(observed(check, answers=right, ops=("select", "case"), beyond=tax)), "contains a lax.switch or lax.cond")


# ----------------------------------------------------------------------------- compile limit


def compiles(request: Request, n: int) -> Observation:
    return Observation(id=request.id, status="ok",
                       result=CompileCountResult(compiles=n, names=["jit(newton_sqrt)"] * n))


def test_compile_limit_needs_the_module_s_evidence_and_the_count(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.compiles_once")
    once = lambda r: compiles(r, 1)  # noqa: E731
    roots = [(np.float32(np.sqrt(c.args[0])), np.int32(5)) for c in check.cases]
    assert check.judge(observed(check, once, answers=roots)).status == "passed"
    # a static tol: its program takes only a, so each tol compiles again, whatever the kernel says
    assert_failed(check.judge(observed(check, once, answers=roots, inputs=1)), "takes 1 of its 2 arguments")
    # why it recompiles: the numbers the calls vary, which a static argument turns into new programs
    tols = list(dict.fromkeys(c.args[1] for c in check.cases))
    assert_failed(check.judge(observed(check, once, answers=roots, inputs=1)),
                  f"argument 2 changes from {' to '.join(describe(t) for t in tols[:3])}",
                  "compiles again for each new value")
    # named when the kernel says which parameter jax.jit marks static (only the static one)
    named = lambda r: Observation(id=r.id, status="ok", result=CompileCountResult(  # noqa: E731
        compiles=1, names=["jit(newton_sqrt)"], arguments=["a", "tol"], static=["tol"]))
    outcome = check.judge(observed(check, named, answers=roots, inputs=1))
    assert_failed(outcome, "`tol` is static and changes from")
    assert "`a`" not in (outcome.message or "")
    # JAX's own cache-miss explanation, when it has one, is the reason given
    shapes = lambda r: Observation(id=r.id, status="ok", result=CompileCountResult(  # noqa: E731
        compiles=3, names=["jit(newton_sqrt)"] * 3, why=["at a, now f32[4] and before f32[]"] * 2))
    assert_failed(check.judge(observed(check, shapes, answers=roots)),
                  "compiled 3 times", "JAX explains the recompile: at a, now f32[4] and before f32[]")
    # tracing with tol abstract fails: tol is static
    static = lambda r: compiles(r, 0) if r.op == "compile_count" else Observation(  # noqa: E731
        id=r.id, status="raised", raised=Raised(ename="TypeError", evalue="'>=' not supported"))
    assert_failed(check.judge(observed(check, static)), "with every argument traced")
    # the module is fine, but the kernel saw a fresh jit compile on every call
    assert_failed(check.judge(observed(check, lambda r: compiles(r, 3), answers=roots)),
                  "compiled 3 times over 3 calls (at most 1 allowed)")
    # the very same call compiled again: a jit made anew at each call, not a static argument (found
    # by an attack: a fresh jax.jit per call was told "a static argument compiles again")
    fresh = lambda r: Observation(id=r.id, status="ok", result=CompileCountResult(  # noqa: E731
        compiles=3, names=["jit(newton_sqrt)"] * 3, arguments=["a", "tol"], again=1))
    outcome = check.judge(observed(check, fresh, answers=roots))
    assert_failed(outcome, "compiled again when called once more with the very same arguments",
                  "a jax.jit made anew at each call")
    assert "static" not in (outcome.message or "").split("(at most")[1]
    # a plain wrapper of a jitted function compiles once too: being jitted is the interface
    # check's to judge (one root cause, one message)
    assert check.judge(observed(check, once, answers=roots, jitted=False)).status == "passed"


@pytest.mark.parametrize("cell, again", [
    ("def f(x, d):\n    return jax.jit(lambda x: x * d)(x)\n", 1),  # a new jit at each call
    ("from functools import partial\n@partial(jax.jit, static_argnums=1)\ndef f(x, d):\n    return x * d\n", 0),
])
def test_the_probe_says_whether_the_very_same_call_compiles_again(cell, again) -> None:
    from grader.kernel.inside import runtime

    namespace: dict = {}
    exec("import jax, jax.numpy as jnp\n" + cell, namespace)  # noqa: S102 - a notebook's cell
    calls = [{"args": [{"t": "array", "dtype": "float32", "shape": [2], "data": [1.0, 2.0]}, {"t": "py", "v": d}]}
             for d in (0.5, 0.25, 0.125)]
    result = runtime.op_compile_count({"op": "compile_count", "target": "f", "calls": calls}, namespace)
    assert result["compiles"] == 3 and result["again"] == again


def test_compile_limit_sends_the_whole_call_sequence(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "training.fori_compiles_once")
    (request,) = [r for r in check.requests() if r.op == "compile_count"]
    assert request.target == "train_fori" and len(request.calls) == 3
    steps = [c.args[5].v for c in request.calls]
    assert all(type(n) is int for n in steps) and len(set(steps)) == 3  # num_steps varies, as a Python int
    other = make_check(ch2, Context(assignment=ch2, seed=ctx.seed + 1), "training.fori_compiles_once")
    other_steps = [c.args[5].v for r in other.requests() if r.op == "compile_count" for c in r.calls]
    assert other_steps != steps  # drawn per run: not in the notebook


# ----------------------------------------------------------------------------- custom


def test_custom_detective(ch2, ctx) -> None:
    truth = list(ch2.checks.detective_truth())
    assert len(truth) == 8
    for call in range(1, 9):
        check = make_check(ch2, ctx, f"detective.call_{call}")
        assert check.judge(observed(check, lambda r: values(r, [truth], op="value"))).status == "passed", call
        flipped = list(truth)
        flipped[call - 1] = not flipped[call - 1]
        assert_failed(check.judge(observed(check, lambda r: values(r, [flipped], op="value"))), "you predicted that")
        others_flipped = [not t for t in truth]
        others_flipped[call - 1] = truth[call - 1]
        assert check.judge(observed(check, lambda r: values(r, [others_flipped], op="value"))).status == "passed"


def test_custom_detective_wrong_shape_of_answer(ch2, ctx) -> None:
    """A wrong form is said once, by detective.form; the calls wait for it (grader.checks.form)."""
    check, form = make_check(ch2, ctx, "detective.call_1"), make_check(ch2, ctx, "detective.form")
    text_first = SeqValue(t="list", items=[OpaqueValue(type="str", repr="'yes'")] + [to_wire(True)] * 7)
    for given, fragments in (([[True] * 7], ("hold 8 values", "it holds 7")), ([7], ("it is a single value",)),
                             ([], ("item 1 is a str ('yes'), not True or False",))):
        obs = (lambda r, v=given: values(r, v, op="value")) if given else \
            (lambda r: Observation(id=r.id, status="ok", result=ValuesResult(op="value", values=[text_first])))
        assert_failed(form.judge(observed(form, obs)), *fragments)
        waiting = check.judge(observed(check, obs))
        assert (waiting.status, waiting.reason, waiting.same_as) == ("skipped", "same_cause", "detective.form")


def _rule_counts(ch2, check) -> list[int]:
    return [ch2.checks.newton_reference_count(*c.args, np.float32) for c in check.cases]


def test_custom_iterations_follow_the_stopping_rule(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.iterations")
    counts = _rule_counts(ch2, check)
    roots = [np.float32(np.sqrt(c.args[0])) for c in check.cases]
    for shift in (-1, 0):  # the updates made, or those before the one that meets the rule
        answers = [(r, np.int32(k + shift)) for r, k in zip(roots, counts)]
        assert check.judge(observed(check, answers=answers)).status == "passed", shift
    # one too many (a count started at 1, an extra update) is not the rule's count
    one_more = [(r, np.int32(k + 1)) for r, k in zip(roots, counts)]
    assert_failed(check.judge(observed(check, answers=one_more)), f"reports {counts[0] + 1} iterations")
    # a made-up count that grows as tol shrinks is not the rule's count
    made_up = [(r, np.int32(3 if c.args[1] > 1e-3 else 7)) for r, c in zip(roots, check.cases)]
    assert_failed(check.judge(observed(check, answers=made_up)), "reports", "the stopping rule")
    two_off = [(r, np.int32(k + 2)) for r, k in zip(roots, counts)]
    assert_failed(check.judge(observed(check, answers=two_off)), f"reports {counts[0] + 2} iterations",
                  f"takes {counts[0]}")


@pytest.mark.parametrize(("count", "fragment"), [
    (np.float32("nan"), "nan"), (np.float32("inf"), "inf"), (np.float32(2.5), "2.5"), ("five", "five"),
])
def test_custom_iterations_odd_counts_get_a_sentence(ch2, ctx, count, fragment) -> None:
    spec = next(c for e in ch2.spec.exercises if e.id == "newton" for c in e.checks if c.id == "iterations")
    check = build("newton", spec, Context(assignment=judged_eagerly(ch2, "newton_sqrt"), seed=SEED))  # a string
    odd = [(np.float32(1.0), count) for _ in check.cases]
    assert_failed(check.judge(observed(check, lambda r: values(r, odd))), "iteration count", "whole number", fragment)


def test_custom_iterations_a_dict_is_not_a_pair(ch2, ctx) -> None:
    check = make_check(ch2, ctx, "newton.iterations")
    answers = [(np.float32(1.0), np.int32(5)) for _ in check.cases]
    as_dict = observed(check, answers=answers, out_tree="PyTreeDef({'k': *, 'root': *})")
    assert_failed(check.judge(as_dict), "expected (root, iterations)")


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
    outcome = check.judge(observed(check, lambda r: values(r, [answers], op="value")))
    assert outcome.status == status, outcome
    if fragment:
        assert fragment in outcome.message


def test_an_answer_of_the_wrong_shape_is_an_error_not_a_crash(ch2, ctx) -> None:
    """Only a tampered probe sends it (a trace result where values were asked): the grader
    reports the check as an error instead of failing an assertion in its own process."""
    check = make_check(ch2, ctx, "tax.switch_visible")
    outcome = check.judge(observed(check, lambda r: trace(r, "cond"), export=lambda r: trace(r, "cond")))
    assert outcome.status == "error" and "unreadable" in outcome.message


def test_several_values_are_compared_by_their_leaves() -> None:
    """The rule of docs/writing-an-assignment.md, "How answers are compared": what `w, b = f(...)` unpacks."""
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



def test_a_module_only_inspected_must_prove_itself_correct(ch2, ctx) -> None:
    """A structure or compile check whose module no value check runs (a tampered probe answered
    its export with a program of its own) runs it on its cases against the reference, and so does
    one a value check also runs: a structure is evidence only of a program that is an attempt at
    the function (grader/checks/evidence.py): right on enough of its calls, the notebook's examples
    and the hidden draws, and not right only on the examples (a table of them)."""
    check = make_check(ch2, ctx, "tax.switch_uses_cond")
    right = [np.float32(v) for v in reference_values(check, ch2.references.tax)]
    wrong = [v + np.float32(100.0) for v in right]
    tax = lambda args: np.float32(ch2.references.tax(*args))  # noqa: E731
    off = lambda args: np.float32(ch2.references.tax(*args) + 100.0)  # noqa: E731
    examples = {float(np.float32(v)) for v in ch2.references.VISIBLE_INCOMES}
    table = lambda args: tax(args) if float(args[0]) in examples else np.float32(-1.0)  # noqa: E731
    assert check.judge(observed(check, answers=right, judged=False, beyond=tax)).status == "passed"
    # wrong on its one call, right on the notebook's examples and beyond: an attempt, one wrong bracket
    assert check.judge(observed(check, answers=wrong, judged=False, beyond=tax)).status == "passed"
    for judged in (False, True):
        assert_failed(check.judge(observed(check, answers=wrong, judged=judged, beyond=off)),
                      "computes the right values for too few inputs")
    assert_failed(check.judge(observed(check, answers=right, judged=False, beyond=table)),
                  "or only for the notebook's examples")
    compile_check = make_check(ch2, ctx, "newton.compiles_once")
    once = lambda r: compiles(r, 1)  # noqa: E731
    nonsense = [(np.float32(-7.0), np.int32(1)) for _ in compile_check.cases]
    assert_failed(compile_check.judge(observed(compile_check, once, answers=nonsense, judged=False)),
                  "computes the right values for too few inputs")


def test_a_plan_is_built_once_per_assignment_seed_and_stage(ch2) -> None:
    from grader.judging.plan import plan

    first, again = plan(ch2, 3), plan(ch2, 3)
    assert first is not again and [c for _, cs in first for c in cs] == [c for _, cs in again for c in cs]
    assert all(a is b for (_, xs), (_, ys) in zip(first, again) for a, b in zip(xs, ys))
    other_seed, other_stage = plan(ch2, 4), plan(ch2, 4, stage="self_check")
    assert not any(a is b for (_, xs), (_, ys) in zip(first, other_seed) for a, b in zip(xs, ys))
    assert not any(a is b for (_, xs), (_, ys) in zip(other_seed, other_stage) for a, b in zip(xs, ys))
    first.pop()  # a caller's list is its own
    assert len(plan(ch2, 3)) == len(again)


def test_a_custom_check_reused_across_submissions_gives_its_function_copies(ch2, ctx) -> None:
    """The assignment's function may change what it is given; the next submission judged by
    the same check (judging.plan keeps it) must see the cases and params as drawn."""
    check = make_check(ch2, ctx, "newton.iterations")
    counts = _rule_counts(ch2, check)
    roots = [np.float32(np.sqrt(c.args[0])) for c in check.cases]
    right = [(r, np.int32(k)) for r, k in zip(roots, counts)]
    drawn = [dict(c.kwargs) for c in check.cases]
    function = check.function

    def vandal(observed, **params):
        verdict = function(observed, **params)
        for case, _ in observed["calls"]:
            case.kwargs["spoiled"] = True  # a frozen Case, but its dict is not
        return verdict

    check.function = vandal
    assert check.judge(observed(check, answers=right)).status == "passed"
    assert [c.kwargs for c in check.cases] == drawn
    check.function = function
    assert check.judge(observed(check, answers=right)).status == "passed"
