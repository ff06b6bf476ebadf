"""Constructs told apart as the chapter names them, on the module itself (issue 28, part 2).

`lax.while_loop`, `fori_loop` and `scan` all lower to a StableHLO `while`; a `switch` on a
constant index is a `case` as one on the income is. The verifier reads what each loop's stop and
each case's index depend on (grader/verifier/inside/constructs.py); the structure checks' `loop` and
`case_chooses_output` judge it. Each kind is shown on a real exported module, the reference's
and its look-alike's, then the check's verdict and sentence, then the mutants that must fail.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from grader import assignment
from grader.checks.structure import construct_problem, elements_per_step, follows_the_size
from grader.course.mutation.families import derive_mutants
from grader.course.mutation.interface import FunctionUse, Interface, StructureNeed
from grader.course.mutation.introspect import ReferenceFacts
from grader.errors import SpecInvalid
from grader.spec import StructureCheck
from grader.verifier.inside import runtime
from grader.verifier.protocol import CaseFacts, Constructs, LoopFacts

constructs = runtime.constructs
REPO = Path(__file__).resolve().parent.parent
F32 = jax.ShapeDtypeStruct((), jnp.float32)
I32 = jax.ShapeDtypeStruct((), jnp.int32)
DATA = jax.ShapeDtypeStruct((300,), jnp.float32)


@pytest.fixture(scope="module")
def solutions() -> dict:
    namespace: dict = {}
    exec(compile((REPO / "solutions" / "ch2-jit.py").read_text(), "ch2-jit", "exec"), namespace)  # noqa: S102
    exec(compile((REPO / "solutions" / "ch2-practice.py").read_text(), "ch2-practice", "exec"), namespace)  # noqa: S102
    return namespace


def analysed(fn, *args) -> Constructs:
    """The constructs the verifier reports for `fn`'s exported module (through inspect_module)."""
    exported = jax.export.export(fn if hasattr(fn, "lower") else jax.jit(fn))(*args)
    again = jax.export.deserialize(bytearray(exported.serialize()))
    return Constructs.model_validate(runtime.inspect_module(again)["constructs"])


def stops(found: Constructs) -> list[tuple[str, bool]]:
    return [(loop.stop, loop.feeds_output) for loop in found.loops]


def select_tax(income):
    conds = [income < 10000, income < 40000, income < 100000]
    choices = [jnp.zeros_like(income), (income - 10000) * 0.10, 3000 + (income - 40000) * 0.20]
    return jnp.select(conds, choices, default=15000 + (income - 100000) * 0.30)


def newton_fixed(by: str):
    """Newton's iteration for a fixed 100 steps, masked where the while_loop would stop."""

    def newton(a, tol):
        x0 = jnp.where(a < 1.0, 1.0, a)

        def step(state):
            x, x_prev, k = state
            go = jnp.abs(x - x_prev) >= tol
            return jnp.where(go, 0.5 * (x + a / x), x), jnp.where(go, x, x_prev), k + go

        if by == "scan":
            (x, _, k), _ = lax.scan(lambda s, _: (step(s), None), (x0, x0 + 1.0, 0), length=100)
        else:
            x, _, k = lax.fori_loop(0, 100, lambda i, s: step(s), (x0, x0 + 1.0, 0))
        return x, k

    return newton


# ----------------------------------------------------------------------------- the module read


def test_the_while_loops_stop_reads_the_values_it_computes(solutions) -> None:
    assert stops(analysed(solutions["newton_sqrt"], F32, F32)) == [("value_dependent", True)]


@pytest.mark.parametrize("by", ["fori_loop", "scan"])
def test_a_fixed_count_loop_is_counted_though_it_lowers_to_a_while(by) -> None:
    found = analysed(newton_fixed(by), F32, F32)
    assert stops(found) == [("counted_by_constant", True)]


def test_a_fori_loop_over_a_traced_count_is_counted_by_its_input(solutions) -> None:
    assert stops(analysed(solutions["train_fori"], F32, F32, DATA, DATA, 0.5, I32)) == [("counted_by_input", True)]
    assert stops(analysed(solutions["sum_first"], jax.ShapeDtypeStruct((10,), jnp.float32), I32)) == [
        ("counted_by_input", True)]


def test_a_scan_of_a_static_length_is_counted_by_a_constant(solutions) -> None:
    step = solutions["step"]

    def train_scan(w, b, x, y, lr, n):
        def body(wb, i):
            nw, nb = step(wb[0], wb[1], x, y, lr)
            return (jnp.where(i < n, nw, wb[0]), jnp.where(i < n, nb, wb[1])), None
        return lax.scan(body, (w, b), jnp.arange(1000))[0]

    assert stops(analysed(train_scan, F32, F32, DATA, DATA, 0.5, I32)) == [("counted_by_constant", True)]


def test_a_loop_whose_results_are_not_returned_does_not_feed_the_output(solutions) -> None:
    inner = solutions["newton_sqrt"].__wrapped__

    def root_beside_the_loop(a, tol):
        _, k = inner(a, tol)
        return jnp.sqrt(a), k  # the count comes out of the loop; the root does not

    assert stops(analysed(root_beside_the_loop, F32, F32)) == [("value_dependent", False)]


def test_a_loop_whose_stop_reads_nothing_it_computes_is_invariant() -> None:
    def never(a, tol):
        return lax.while_loop(lambda s: tol < 0, lambda s: 0.5 * (s + a / s), jnp.sqrt(a))

    assert stops(analysed(never, F32, F32)) == [("invariant", True)]


def test_the_switch_chooses_the_tax_from_the_income(solutions) -> None:
    cases = analysed(solutions["tax_switch"], F32).cases
    assert cases == [CaseFacts(index_from_input=True, feeds_output=True, branches_differ=True, returned=True)]
    assert analysed(solutions["conditional_double"], F32, F32).cases[0].index_from_input


@pytest.mark.parametrize("decoy", [lambda v: lax.switch(0, [lambda u: u, lambda u: 2 * u], v),
                                   lambda v: lax.cond(True, lambda u: u, lambda u: 2 * u, v)],
                         ids=["constant_index", "constant_predicate"])
def test_a_case_on_a_constant_beside_a_select_has_no_index_from_the_input(decoy) -> None:
    found = analysed(lambda income: select_tax(income) + 0 * decoy(income), F32)
    assert found.cases == [CaseFacts(index_from_input=False, feeds_output=True, branches_differ=True)]


def test_nested_conds_choose_from_the_income_as_a_switch_does() -> None:
    def nested(income):
        return lax.cond(income < 10000, lambda v: 0.0 * v, lambda v: lax.cond(
            v < 40000, lambda u: (u - 10000) * 0.1, lambda u: 3000 + (u - 40000) * 0.2, v), income)

    assert all(c.index_from_input and c.feeds_output for c in analysed(nested, F32).cases)


# ----------------------------------------------------------------------------- hostile modules


def test_a_module_too_large_to_follow_is_reported_not_crashed(solutions, monkeypatch) -> None:
    monkeypatch.setattr(constructs, "MAX_VALUES", 10)
    found = analysed(solutions["newton_sqrt"], F32, F32)
    assert found.loops == [] and found.unreadable and "more than 10" in found.unreadable


def test_the_walks_of_one_module_share_one_budget(solutions, monkeypatch) -> None:
    """Many loops whose stops each reach the whole program cannot make the analysis quadratic: the
    walks of a module stop together, and the module is reported as one that could not be followed."""
    monkeypatch.setattr(constructs, "MAX_WALK_STEPS", 40)
    found = analysed(solutions["train_fori"], F32, F32, DATA, DATA, 0.5, I32)
    assert found.loops == [] and found.unreadable
    monkeypatch.setattr(constructs, "MAX_WALK_STEPS", 4 * constructs.MAX_VALUES)
    assert analysed(solutions["train_fori"], F32, F32, DATA, DATA, 0.5, I32).loops


def test_a_module_without_main_is_unreadable_with_a_sentence() -> None:
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    with mlir.make_ir_context():
        module = ir.Module.parse("func.func private @other(%a: tensor<f32>) -> tensor<f32> {\n"
                                 "  return %a : tensor<f32>\n}")
        found = runtime._constructs(module)
    assert set(found) == {"unreadable"} and "main" in found["unreadable"]


def test_nested_loops_and_calls_are_followed_within_bounds() -> None:
    @jax.jit
    def helper(x, n):
        return lax.fori_loop(0, n, lambda i, v: v * 0.5 + 1.0, x)

    def outer(x, n):
        return lax.while_loop(lambda s: jnp.abs(s[0] - s[1]) > 1e-3,
                              lambda s: (helper(s[0], n), s[0]), (x, x + 1.0))[0]

    found = analysed(outer, F32, I32)
    assert sorted(stops(found)) == [("counted_by_input", True), ("value_dependent", True)]



# ----------------------------------------------------------------------------- does it do the work


def knocked(fn, args: list, *calls, tolerance: tuple[float, float] | None = None) -> list[tuple[str, bool | None]]:
    """Each construct's `does_work` as the verifier's job reports it, when it is asked (bit for
    bit, or within a check's (rtol, atol))."""
    import base64

    exported = jax.export.export(fn if hasattr(fn, "lower") else jax.jit(fn))(*args)
    wire = [[{"t": "py", "v": v} for v in call] for call in calls]
    job = {"id": "k", "module": base64.b64encode(exported.serialize()).decode(), "calls": wire,
           "knockouts": ["loop", "case"]}
    if tolerance is not None:
        job["tolerance"] = list(tolerance)
    result = runtime.run_job(job)
    assert result["status"] == "ok", result["detail"]
    found = Constructs.model_validate(result["facts"]["constructs"])
    return [("loop", loop.does_work) for loop in found.loops] + [("case", c.does_work) for c in found.cases]


def zero_trip_newton(a, tol):
    root = jnp.sqrt(a)

    def body(state):
        x, _ = state
        return 0.5 * (x + a / x), x

    x, _ = lax.while_loop(lambda s: jnp.abs(s[0] - s[1]) >= tol, body, (root, root))
    return x


def test_a_loop_that_computes_the_root_does_the_work_one_started_at_it_does_not(solutions) -> None:
    calls = [(2.0, 1e-6), (9.0, 1e-6), (1e6, 1e-6)]
    assert knocked(solutions["newton_sqrt"], [F32, F32], *calls) == [("loop", True)]
    assert knocked(zero_trip_newton, [F32, F32], *calls) == [("loop", False)]


def test_a_case_whose_result_is_multiplied_by_zero_does_no_work(solutions) -> None:
    incomes = [(5_000.0,), (25_000.0,), (70_000.0,), (250_000.0,)]
    cases = lambda found: [work for kind, work in found if kind == "case"]  # noqa: E731 - searchsorted is a loop
    assert cases(knocked(solutions["tax_switch"], [F32], *incomes)) == [True]

    def times_zero(income):
        index = jnp.searchsorted(jnp.array([10000.0, 40000.0, 100000.0]), income, side="right")
        decoy = lax.switch(index, [lambda v: 0.0 * v, lambda v: 0.1 * v, lambda v: 0.2 * v, lambda v: 0.3 * v], income)
        return select_tax(income) + 0 * decoy

    assert cases(knocked(times_zero, [F32], *incomes)) == [False]


def guard_switch_beside_select(income):
    """A switch that only guards negative incomes, its second branch a jnp.select of every bracket
    (fourth red-team round: full marks, the switch forced to its first branch changing the tax)."""
    return lax.switch(jnp.where(income < 0, 0, 1), [jnp.zeros_like, select_tax], income)


def cond_that_always_holds(x, threshold):
    """A lax.cond on `threshold == threshold`, jnp.where doing the choice inside it."""
    return lax.cond(threshold == threshold, lambda: jnp.where(x > threshold, 2 * x, x), lambda: x)


def test_a_case_that_takes_one_branch_on_every_input_chooses_nothing(solutions) -> None:
    """Forced to its one branch, the module gives its own values on every call: it chooses nothing
    there, though the other branch changes them. The reference's switch and cond choose: each
    branch forced changes some call's tax or double."""
    incomes = [(5_000.0,), (25_000.0,), (70_000.0,), (250_000.0,)]
    cases = lambda found: [work for kind, work in found if kind == "case"]  # noqa: E731 - searchsorted is a loop
    assert cases(knocked(guard_switch_beside_select, [F32], *incomes)) == [False]
    assert cases(knocked(solutions["tax_switch"], [F32], *incomes)) == [True]
    pairs = [(5.0, 0.0), (-2.0, 0.0), (1.0, 10.0)]

    def honest(x, threshold):
        return lax.cond(x > threshold, lambda: 2 * x, lambda: x)

    assert cases(knocked(cond_that_always_holds, [F32, F32], *pairs)) == [False]
    assert cases(knocked(honest, [F32, F32], *pairs)) == [True]
    [found] = analysed(guard_switch_beside_select, F32).cases
    chooses = spec(contains=["case"], case_chooses_output=True)
    one = found.model_copy(update={"does_work": False, "always_one_branch": True})
    assert "takes the same branch for every input checked" in construct_problem(chooses, Constructs(cases=[one]))


def by_rate_tax(income):
    """The tax again, written from the rates (`income * 0.3 - 15000`): the same to within rounding."""
    conds = [income >= 100000, income >= 40000, income >= 10000]
    choices = [income * 0.30 - 15000, income * 0.20 - 5000, income * 0.10 - 1000]
    return jnp.select(conds, choices, default=jnp.zeros_like(income))


def every_branch_selects(income):
    """A switch whose every branch computes the whole tax, each its own way (the hand-written
    mutant `tax_switch_every_branch_selects`)."""
    index = jnp.searchsorted(jnp.array([10000.0, 40000.0, 100000.0]), income, side="right")
    return lax.switch(index, [select_tax, by_rate_tax, select_tax, by_rate_tax], income)


def test_a_switch_whose_every_branch_computes_the_answer_chooses_nothing(solutions) -> None:
    """Why it passed: compared bit for bit, the branches' last bits (rounding, each written its
    own way) were taken for the choice doing the work. Within the check's tolerance (ch2-jit's
    tax: rtol 1e-5, atol 1e-2) the choice changes nothing; the reference's switch still does."""
    incomes = [(1.0,), (12_345.67,), (54_321.1,), (99_999.5,), (123_456.7,), (250_000.3,)]
    cases = lambda found: [work for kind, work in found if kind == "case"]  # noqa: E731 - searchsorted is a loop
    assert cases(knocked(every_branch_selects, [F32], *incomes)) == [True]  # bit for bit: a rounding "choice"
    tax = (1e-5, 1e-2)
    assert cases(knocked(every_branch_selects, [F32], *incomes, tolerance=tax)) == [False]
    assert cases(knocked(solutions["tax_switch"], [F32], *incomes, tolerance=tax)) == [True]
    [found] = analysed(every_branch_selects, F32).cases
    assert found.returned and found.index_from_input and found.branches_differ
    chooses = spec(contains=["case"], case_chooses_output=True)
    idle = found.model_copy(update={"does_work": False})
    assert "every branch computes the whole answer" in construct_problem(chooses, Constructs(cases=[idle]))
    beside = idle.model_copy(update={"returned": False})  # a switch times zero beside a select: its own sentence
    assert "something else computes it" in construct_problem(chooses, Constructs(cases=[beside]))


def test_knockouts_run_only_when_a_check_asks() -> None:
    import base64

    exported = jax.export.export(jax.jit(zero_trip_newton))(F32, F32)
    job = {"id": "k", "module": base64.b64encode(exported.serialize()).decode(),
           "calls": [[{"t": "py", "v": 2.0}, {"t": "py", "v": 1e-6}]]}
    assert runtime.run_job(job)["facts"]["constructs"]["loops"][0].get("does_work") is None
    cases_only = runtime.run_job({**job, "knockouts": ["case"]})  # a loop no check asks about: no compile
    assert cases_only["facts"]["constructs"]["loops"][0].get("does_work") is None
    loops = runtime.run_job({**job, "knockouts": ["loop"]})
    assert loops["facts"]["constructs"]["loops"][0]["does_work"] is False


def test_a_construct_that_does_no_work_fails_with_its_own_sentence() -> None:
    value = spec(contains=["while"], loop="value_dependent")
    idle = Constructs(loops=[LoopFacts(stop="value_dependent", feeds_output=True, does_work=False)])
    assert "runs no step" in construct_problem(value, idle)
    unmeasured = Constructs(loops=[LoopFacts(stop="value_dependent", feeds_output=True, does_work=None)])
    assert construct_problem(value, unmeasured) is None
    chooses = spec(contains=["case"], case_chooses_output=True)
    idle_case = CaseFacts(index_from_input=True, feeds_output=True, branches_differ=True, does_work=False)
    assert "whichever branch it takes" in construct_problem(chooses, Constructs(cases=[idle_case]))

# ----------------------------------------------------------------------------- the check's verdict


def spec(**options) -> StructureCheck:
    options.setdefault("cases", {"rows": [[1.0]], "types": ["py"]})
    return StructureCheck(id="s", title="s", points=1, message="m", function="f", **options)


def loops(*kinds: tuple[str, bool]) -> Constructs:
    return Constructs(loops=[LoopFacts(stop=stop, feeds_output=feeds) for stop, feeds in kinds])


def test_the_loop_option_passes_the_construct_named_and_says_why_the_look_alike_fails() -> None:
    value = spec(contains=["while"], loop="value_dependent")
    assert construct_problem(value, loops(("value_dependent", True))) is None
    assert "whether to go on depends on a traced value" in construct_problem(value, loops(("counted_by_constant", True)))
    assert "does not come out of it" in construct_problem(value, loops(("value_dependent", False),
                                                                       ("counted_by_constant", True)))
    counted = spec(contains=["while"], loop="counted_by_input")
    assert construct_problem(counted, loops(("counted_by_input", True))) is None
    assert "fixed when the function was traced" in construct_problem(counted, loops(("counted_by_constant", True)))
    assert "values the loop computes" in construct_problem(counted, loops(("value_dependent", True)))


def test_the_case_option_names_one_root_cause() -> None:
    chooses = spec(contains=["case"], case_chooses_output=True)
    good = CaseFacts(index_from_input=True, feeds_output=True, branches_differ=True)
    assert construct_problem(chooses, Constructs(cases=[good])) is None
    constant = good.model_copy(update={"index_from_input": False})
    assert "constant index or predicate" in construct_problem(chooses, Constructs(cases=[constant]))
    dead = good.model_copy(update={"feeds_output": False})
    assert "not what the function returns" in construct_problem(chooses, Constructs(cases=[dead]))
    assert "could not be followed: too big" in construct_problem(chooses, Constructs(unreadable="too big"))


def test_the_options_need_the_op_they_read() -> None:
    with pytest.raises(ValueError, match="contains must list"):
        spec(contains=["case"], loop="value_dependent")
    with pytest.raises(ValueError, match="contains must list"):
        spec(contains=["while"], case_chooses_output=True)


def test_the_shipped_assignments_ask_for_the_constructs_their_texts_name() -> None:
    def option(name: str, full_id: str) -> object:
        loaded = assignment.load(name)
        exercise, check = full_id.split(".")
        found = next(c for e in loaded.spec.exercises if e.id == exercise for c in e.checks if c.id == check)
        return found.loop if found.contains == ["while"] else found.case_chooses_output

    assert option("ch2-jit", "newton.uses_while") == "value_dependent"
    assert option("ch2-jit", "training.fori_uses_while") == "counted_by_input"
    assert option("ch2-jit", "tax.switch_uses_cond") is True
    assert option("ch2-practice", "sum_first.uses_while") == "counted_by_input"
    assert option("ch2-practice", "conditional_double.uses_cond") is True


def test_the_schema_documents_the_options() -> None:
    import subprocess
    import sys

    schema = subprocess.run([sys.executable, "-m", "grader", "schema"], capture_output=True, text=True,
                            check=True, cwd=REPO).stdout
    assert "case_chooses_output" in schema and "value_dependent" in schema and "counted_by_input" in schema


# ----------------------------------------------------------------------------- the lookalike family


def test_lookalikes_are_derived_for_the_construct_each_check_names() -> None:
    def use(name: str, need: StructureNeed) -> FunctionUse:
        return FunctionUse(name=name, exercises=["e"], checks=[need.check], arity=2, largest_int=37, structure=[need])

    interface = Interface(functions={
        "newton": use("newton", StructureNeed(check="e.while", contains=["while"], constant_size=False,
                                              loop="value_dependent")),
        "train": use("train", StructureNeed(check="e.fori", contains=["while"], constant_size=False,
                                            loop="counted_by_input")),
        "tax": use("tax", StructureNeed(check="e.case", contains=["case"], constant_size=False,
                                        case_chooses_output=True)),
        "plain": use("plain", StructureNeed(check="e.plain", contains=["while"], constant_size=False)),
    })
    made = {m.name: m for m in derive_mutants("x = lax.switch\n", interface, ReferenceFacts())
            if "lookalike" in m.name}
    assert sorted(made) == ["newton.lookalike_fori_loop", "newton.lookalike_scan", "tax.lookalike_constant_case",
                            "tax.lookalike_guard_case", "tax.lookalike_nested_cond", "tax.lookalike_vmapped_case",
                            "train.lookalike_static_fori_loop", "train.lookalike_static_scan",
                            "train.lookalike_while_counter"]
    assert made["newton.lookalike_scan"].expected == ["e.while"] and made["newton.lookalike_scan"].family == "lookalike"
    assert "_jnp.arange(37)" in made["train.lookalike_static_scan"].submission
    assert made["train.lookalike_while_counter"].honest and made["tax.lookalike_nested_cond"].honest
    for mutant in made.values():
        compile(mutant.submission, mutant.name, "exec")


@pytest.mark.kernel
@pytest.mark.parametrize("name", ["newton_sqrt.lookalike_fori_loop", "tax_switch.lookalike_constant_case",
                                  "tax_switch.lookalike_guard_case", "train_fori.lookalike_static_scan"])
def test_each_lookalike_loses_only_its_structure_check(name, tmp_path) -> None:
    from warm_grading import grade_warm

    from grader import GradeOptions
    from grader.course.validate import derived_mutants

    made = derived_mutants(assignment.load("ch2-jit"), REPO / "solutions" / "ch2-jit.py", {"lookalike"})
    mutant = next(m for m in made if m.name == name)
    path = tmp_path / "lookalike.py"
    path.write_text(mutant.submission, encoding="utf-8")
    report = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=3))
    failed = {c.id for e in report.exercises for c in e.checks if c.status != "passed"}
    assert failed == set(mutant.expected), [(c.id, c.message) for e in report.exercises for c in e.checks
                                             if c.status != "passed"]


def test_a_spec_with_an_option_on_the_wrong_op_is_refused(tmp_path) -> None:
    folder = tmp_path / "bad"
    folder.mkdir()
    text = (REPO / "assignments" / "ch2-jit" / "assignment.toml").read_text()
    (folder / "assignment.toml").write_text(text.replace('loop = "value_dependent"', 'case_chooses_output = true'))
    for extra in ("references.py", "checks.py", "notebook.toml"):
        (folder / extra).write_text((REPO / "assignments" / "ch2-jit" / extra).read_text())
    with pytest.raises(SpecInvalid, match="case_chooses_output"):
        assignment.load(str(folder))


# ----------------------------------------------------------------------------- growth with the input


def test_a_loop_over_the_elements_shows_its_trip_count_and_searchsorted_does_not_grow(solutions) -> None:
    def per_element(incomes):
        return lax.fori_loop(0, incomes.shape[0], lambda i, out: out.at[i].set(select_tax(incomes[i])),
                             jnp.zeros_like(incomes))

    def searchsorted_tax(incomes):
        k = jnp.searchsorted(jnp.array([0.0, 1e4, 4e4, 1e5]), incomes, side="right") - 1
        return jnp.array([0.0, 0.0, 3000.0, 15000.0])[k] + (incomes - jnp.array([0.0, 1e4, 4e4, 1e5])[k]) * \
            jnp.array([0.0, 0.1, 0.2, 0.3])[k]

    bounds = [[loop.bound for loop in analysed(fn, jax.ShapeDtypeStruct((n,), jnp.float32)).loops]
              for fn in (per_element, searchsorted_tax) for n in (3, 12)]
    assert bounds[0] == [3] and bounds[1] == [12]  # one step per element: it grows
    assert bounds[2] == bounds[3]  # a binary search over the 4 edges: the same for any number of incomes


def test_constant_size_fails_a_loop_that_grows_with_the_input() -> None:
    """tax_vectorized as a fori_loop over the elements: as many operations for 3 incomes as for 12,
    but a loop of 3 steps, then 12."""
    import numpy as np
    from test_checks import make_check, observed, reference_values

    from grader.checks import Context

    loaded = assignment.load("ch2-jit")
    check = make_check(loaded, Context(assignment=loaded, seed=1), "tax.vectorized_handles_arrays")
    right = [np.asarray(value, np.float32) for value in reference_values(check, loaded.references.tax)]
    tax = lambda args: np.asarray(loaded.references.tax(*args), np.float32)  # noqa: E731

    def judged(bounds: list[int]):
        seen = observed(check, answers=right, ops=("while", "select", "add"), beyond=tax)
        for bound, outcome in zip(bounds, seen.runs.values()):
            assert outcome.facts is not None
            outcome.facts.constructs = Constructs(loops=[LoopFacts(stop="counted_by_constant", feeds_output=True,
                                                                   bound=bound)])
        return check.judge(seen)

    assert judged([2, 2, 2]).status == "passed"  # searchsorted's binary search: the same for any size
    assert judged([2, 3, 3]).status == "passed"  # a search one step longer for more elements: not growth
    verdict = judged([3, 12, 48])
    assert verdict.status == "failed" and "loops once per element: 3, 12 and 48 steps for 3, 12 and 48 elements" \
        in verdict.message


def test_growth_is_a_quantity_that_follows_the_size() -> None:
    """Strictly rising from each size to the next, and by at least one per extra element."""
    assert follows_the_size({3: 40, 12: 160, 48: 640})  # a Python loop unrolled: ~13 operations per element
    assert follows_the_size({3: 3, 12: 12, 48: 48})  # a fori_loop over the elements: one step per element
    assert not follows_the_size({3: 138, 12: 139, 48: 139})  # jnp.digitize + jnp.choose: a lowering detail
    assert not follows_the_size({3: 110, 12: 110, 48: 110})
    assert not follows_the_size({3: 2, 12: 4, 48: 6})  # a search that deepens with log(size): not per element
    assert not follows_the_size({3: 40, 12: 160, 48: 100})  # not rising at every size


def test_a_vectorized_digitize_and_choose_tax_does_not_grow() -> None:
    """The issue's program: 138 operations for 3 incomes, 139 for 12, 48 and 1000, and its only loop
    (the search's) as long for every size."""
    edges = jnp.array([0.0, 10000.0, 40000.0, 100000.0])

    def digitize_tax(income):
        k = jnp.digitize(income, edges[1:])
        return jnp.choose(k, [jnp.array([0.0, 0.0, 3000.0, 15000.0])[j] + (income - edges[j]) * (0.1 * j)
                              for j in range(4)], mode="clip")

    sizes = (3, 12, 48)
    modules = [jax.export.export(jax.jit(digitize_tax))(jax.ShapeDtypeStruct((n,), jnp.float32)) for n in sizes]
    facts = [runtime.inspect_module(jax.export.deserialize(bytearray(m.serialize()))) for m in modules]
    operations = {n: f["op_count"] for n, f in zip(sizes, facts)}
    steps = {n: sum(loop["bound"] or 0 for loop in f["constructs"]["loops"]) for n, f in zip(sizes, facts)}
    assert len(set(operations.values())) > 1  # it does differ: two sizes alone would call this growth
    assert not follows_the_size(operations) and not follows_the_size(steps)


DIGITIZE_TAX = """
# %% [tax, vectorized another way]
@jax.jit
def tax_vectorized(income):
    k = jnp.digitize(income, brackets[1:])  # the bracket of each income, 0..3, for the whole array at once
    return jnp.choose(k, [base_tax[j] + (income - brackets[j]) * rates[j] for j in range(4)], mode="clip")
"""


@pytest.mark.kernel
@pytest.mark.parametrize("variant", ["digitize_and_choose", "loop_over_elements", "fori_over_elements"])
def test_growth_is_judged_on_graded_programs(variant, tmp_path) -> None:
    """A tax vectorized with jnp.digitize + jnp.choose, whose program is one operation longer for 12
    incomes than for 3, keeps every point of `tax`; a Python loop over the elements (the derived
    mutant) and a fori_loop over them (the hand-written one) still lose `vectorized_handles_arrays`."""
    from warm_grading import grade_warm

    from grader import GradeOptions
    from grader.course.validate import derived_mutants

    solution = (REPO / "solutions" / "ch2-jit.py").read_text(encoding="utf-8")
    if variant == "digitize_and_choose":
        source = solution + DIGITIZE_TAX
    elif variant == "loop_over_elements":
        made = derived_mutants(assignment.load("ch2-jit"), REPO / "solutions" / "ch2-jit.py", {"construct_removed"})
        mutant = next(m for m in made if m.name == "tax_vectorized.loop_over_elements")
        assert mutant.expected == ["tax.vectorized_handles_arrays"]
        source = mutant.submission
    else:
        mutants = REPO / "assignments" / "ch2-jit" / "mutants"
        source = solution + "\n\n# %%\n" + (mutants / "tax_vectorized_fori_over_elements.py").read_text(encoding="utf-8")
    path = tmp_path / f"{variant}.py"
    path.write_text(source, encoding="utf-8")
    report = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=3, exercises=("tax",)))
    lost = {c.id: c.message for e in report.exercises for c in e.checks if c.status != "passed"}
    if variant == "digitize_and_choose":
        assert lost == {} and report.score == 25
    else:
        assert list(lost) == ["tax.vectorized_handles_arrays"]
        grown = "grows with the input" if variant == "loop_over_elements" else "loops once per element"
        assert grown in lost["tax.vectorized_handles_arrays"] and "for 3, 12 and 48 elements" in \
            lost["tax.vectorized_handles_arrays"]


def test_constant_size_needs_three_input_sizes() -> None:
    base = {"id": "whole", "title": "whole arrays", "points": 1, "message": "no loop", "function": "f",
            "constant_size": True, "cases": {"types": ["float32"], "rows": [[[1.0, 2.0, 3.0]], [[1.0] * 12]]}}
    with pytest.raises(ValueError, match="at least 3 distinct input sizes.*these give 2 \\(3, 12\\)"):
        StructureCheck(**base)
    with pytest.raises(ValueError, match="these give 2"):  # a repeated size is not a third
        StructureCheck(**{**base, "cases": {"types": ["float32"], "rows": [[[1.0] * 3], [[2.0] * 3], [[1.0] * 12]]}})
    assert StructureCheck(**{**base, "cases": {"types": ["float32"], "rows": [[[1.0] * 3], [[1.0] * 12],
                                                                             [[1.0] * 48]]}}).constant_size


# ----------------------------------------------------------------------------- a scan over the input's elements


def ema_scan(xs, decay):
    def body(avg, x):
        avg = decay * avg + (1 - decay) * x
        return avg, avg

    return lax.scan(body, xs[0], xs)[1]


def ema_fixed_steps(xs, decay):  # a loop of 64 steps whatever the length, masked past its end
    def body(i, out):
        avg = jnp.where(i == 0, xs[0], decay * out[jnp.maximum(i - 1, 0)] + (1 - decay) * xs[jnp.minimum(i, xs.shape[0] - 1)])
        return out.at[jnp.minimum(i, xs.shape[0] - 1)].set(jnp.where(i < xs.shape[0], avg, out[xs.shape[0] - 1]))

    return lax.fori_loop(0, 64, body, jnp.zeros_like(xs))


def test_a_scan_over_the_input_runs_once_per_element_and_look_alikes_say_why_not() -> None:
    over = spec(contains=["while"], loop="over_input",
                cases={"rows": [[[1.0, 2.0, 3.0], 0.5], [[1.0, 2.0, 3.0, 4.0, 5.0], 0.5]], "types": ["float32", "py"]})
    for n in (3, 5):
        xs = jnp.arange(float(n))
        assert construct_problem(over, analysed(ema_scan, xs, 0.5), {n}) is None
        fixed = construct_problem(over, analysed(ema_fixed_steps, xs, 0.5), {n})
        assert fixed == f"has a loop of 64 steps for an input of {n} elements: lax.scan over the input runs once per element"
        assert "has no loop" in construct_problem(over, analysed(lambda x, d: jnp.cumsum(x) * d, xs, 0.5), {n})
    with pytest.raises(ValueError, match="two or more lengths"):
        spec(contains=["while"], loop="over_input", cases={"rows": [[[1.0, 2.0], 0.5]], "types": ["float32", "py"]})


def ema_blocks(xs, decay, k, trips):  # a fixed count of blocks of k elements: a look-alike of scan's unroll
    def body(i, carry):
        avg, out = carry
        for j in range(k):
            avg = decay * avg + (1 - decay) * xs[i * k + j]
            out = out.at[i * k + j].set(avg)
        return avg, out

    return lax.fori_loop(0, trips, body, (xs[0], jnp.zeros_like(xs)))[1]


@pytest.mark.parametrize("unroll", [2, 3, 4])
def test_a_scan_unrolled_k_steps_at_a_time_still_runs_over_the_input(unroll) -> None:
    """`lax.scan(..., unroll=k)`, a documented option that changes no value, loops n // k times
    over the input reshaped to (n // k, k) and makes the other n % k steps after the loop (found by
    an attack: "a loop of 2 steps for an input of 4 elements", 8 points off an honest scan); a
    loop that steps through a fixed number of blocks, whatever the length, still fails. Not
    covered: k at least the input's length, where JAX leaves no loop at all (as `unroll=True`)."""
    over = spec(contains=["while"], loop="over_input",
                cases={"rows": [[[1.0, 2.0, 3.0, 4.0], 0.5], [[1.0] * 7, 0.5]], "types": ["float32", "py"]})

    def unrolled(xs, decay):
        def body(avg, x):
            avg = decay * avg + (1 - decay) * x
            return avg, avg

        return lax.scan(body, xs[0], xs, unroll=unroll)[1]

    for n in (2 * unroll, 2 * unroll + 1, 4 * unroll - 1):  # a single block is no loop: JAX unrolls it whole
        xs = jnp.arange(float(n))
        facts = analysed(unrolled, xs, 0.5)
        assert [loop.blocks for loop in facts.loops] == [[unroll]] and facts.loops[0].bound == n // unroll
        assert construct_problem(over, facts, {n}) is None
    fixed = analysed(lambda xs, d: ema_blocks(xs, d, 2, 2), jnp.arange(7.0), 0.5)
    assert construct_problem(over, fixed, {7}) == ("has a loop of 2 steps for an input of 7 elements: lax.scan over the "
                                                   "input runs once per element")
    # a scan's block is the same for every length; two blocks of half the input each are not a scan
    # over it (found by re-attacking this change: each half by a formula, 8 points)
    assert [elements_per_step(analysed(unrolled, jnp.arange(float(n)), 0.5), {n}) for n in (8, 12)] == \
        [{unroll}, {unroll}]
    halves = [elements_per_step(analysed(ema_halves, jnp.arange(float(n)), 0.5), {n}) for n in (8, 12)]
    assert halves == [{4}, {6}] and not set.intersection(*halves)


def ema_halves(xs, decay):  # a fori_loop over the input's two halves, each by a formula
    blocks = xs.reshape(2, xs.shape[0] // 2)

    def body(i, carry):
        avg, out = carry
        block = blocks[i]
        powers = decay ** jnp.arange(1, block.shape[0] + 1)
        new = powers * avg + jnp.cumsum((1 - decay) * block * decay ** -jnp.arange(block.shape[0])) * (powers / decay)
        return new[-1], out.at[i].set(new)

    return lax.fori_loop(0, 2, body, (xs[0], jnp.zeros_like(blocks)))[1].reshape(-1)


@pytest.mark.kernel
def test_a_loop_over_the_input_s_two_halves_fails_uses_scan_on_the_notebook_s_two_lengths(repo_root, tmp_path) -> None:
    """The check reads every module it exported (series of 4 and of 6 elements): a step takes
    2 elements of one and 3 of the other, which no scan's unroll does."""
    from warm_grading import grade_warm

    from grader import GradeOptions

    source = (repo_root / "solutions" / "ch2-scan.py").read_text()
    start, end = source.index("@jax.jit\ndef ema(xs, decay):"), source.index("# %% [clip]")
    halves = ("@jax.jit\ndef ema(xs, decay):\n    blocks = xs.reshape(2, xs.shape[0] // 2)\n\n"
              "    def body(i, carry):\n        avg, out = carry\n        row = []\n"
              "        for j in range(blocks.shape[1]):\n            avg = ema_step(avg, blocks[i, j], decay)\n"
              "            row.append(avg)\n        return avg, out.at[i].set(jnp.stack(row))\n\n"
              "    return lax.fori_loop(0, 2, body, (xs[0], jnp.zeros_like(blocks)))[1].reshape(-1)\n\n\n")
    path = tmp_path / "halves.py"
    path.write_text(source[:start] + halves + source[end:])
    report = grade_warm(path, GradeOptions(assignment="ch2-scan", seed=1, exercises=("ema",)))
    checks = {c.id: c for e in report.exercises for c in e.checks}
    assert checks["ema.ema_visible"].status == "passed", checks["ema.ema_visible"].message
    assert checks["ema.uses_scan"].status == "failed"
    assert "whose size grows with its length (elements a step takes: 2 for 4, 3 for 6)" in checks["ema.uses_scan"].message
