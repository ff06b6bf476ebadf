"""Each function judged the way its text prescribes it (`[[exercises.functions]]`): traced, eager or
either; pure; the helpers it must call.

Unit tests build specs and ask the probe in this process; the `kernel` ones grade whole
submissions of ch2-practice and ch2-jit through a warm worker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from pydantic import ValidationError

from grader import GradeOptions, Report
from grader.checks import Context, Planner, Seen, build
from grader.checks.program import EagerFallback, StudentCalls
from grader.judging.plan import _untraced
from grader.kernel.inside import runtime
from grader.kernel.protocol import Observation, Raised
from grader.spec import AssignmentSpec

REPO = Path(__file__).resolve().parent.parent


def array(values, dtype="float32") -> dict:
    arr = np.asarray(values, dtype=dtype)
    return {"t": "array", "dtype": dtype, "shape": list(arr.shape), "data": arr.tolist()}


def observe(namespace: dict, target: str, calls: list[dict], **fields: Any) -> dict:
    raw = runtime.observe({"op": "call", "id": "r1", "target": target, "calls": calls, **fields}, namespace)
    Observation.model_validate(raw)  # the grader must be able to read every answer
    return raw


def spec(functions: list[dict], checks: list[dict]) -> AssignmentSpec:
    return AssignmentSpec.model_validate({
        "schema_version": 1, "id": "modes", "title": "modes",
        "exercises": [{"id": "one", "title": "one", "points": sum(c["points"] for c in checks),
                       "functions": functions, "checks": checks}]})


ROW = {"cases": {"rows": [[1.0]], "types": ["float32"]}}
VALUES = {"kind": "numeric", "id": "v", "title": "v", "points": 1, "message": "m", "function": "f",
          "reference": "f", **ROW}


# ----------------------------------------------------------------------------- the spec


def test_a_function_not_declared_loads_as_traced_but_validate_names_it() -> None:
    loaded = spec([], [VALUES])
    assert loaded.judged("f") == "traced"
    (said,) = loaded.undeclared()
    assert "one.v calls `f`" in said and "judged" in said


@pytest.mark.parametrize("judged", ["eager", "either"])
@pytest.mark.parametrize("check, why", [
    ({"kind": "structure", "contains": ["while"]}, "only a 'traced' function has a program"),
    ({"kind": "compile_limit", "max_compiles": 1}, "only a 'traced' function has a program"),
    ({"kind": "numeric", "public": [0]}, "remove `public`"),
])
def test_a_function_judged_without_a_trace_has_no_check_of_its_program(judged, check, why) -> None:
    with pytest.raises(ValidationError, match=why):
        spec([{"name": "f", "judged": judged, "why": "the text"}], [{**VALUES, **check}])


def test_a_jitted_interface_check_needs_a_traced_function() -> None:
    jitted = {"kind": "interface", "id": "j", "title": "j", "points": 1, "message": "m", "name": "f",
              "jitted": True, **ROW}
    spec([{"name": "f", "judged": "traced", "why": "wrapped in jax.jit"}], [jitted])
    with pytest.raises(ValidationError, match="program"):
        spec([{"name": "f", "judged": "either", "why": "it may be jitted"}], [jitted])


@pytest.mark.parametrize("judged", ["traced", "either"])
def test_a_python_int_is_asked_only_of_a_function_called_as_plain_python(judged) -> None:
    """Found by an author: `kinds = ["python_int"]` on a traced function loaded, and its reference
    then failed with "should return a plain Python int, got 9.0"."""
    asks = {"kind": "interface", "id": "i", "title": "i", "points": 1, "message": "m", "name": "f",
            "returns": {"kinds": ["python_int"], **ROW}}
    spec([{"name": "f", "judged": "eager", "why": "a plain Python int"}], [asks])
    with pytest.raises(ValidationError, match="only a function called as plain Python returns one"):
        spec([{"name": "f", "judged": judged, "why": "the text"}], [asks])


def test_a_count_argument_past_the_calls_arguments_is_refused_at_load() -> None:
    """Found by an author: `count_argument = 4` for a function of two arguments loaded, and grading
    then said "count_argument 4 of damp is not a whole number in cases [0, 1, 2, 3]"."""
    calls = {"kind": "calls", "id": "c", "title": "c", "points": 1, "message": "m", "function": "f",
             "cases": {"rows": [[1.0, 3]], "types": ["float32", "py"]}}
    f = {"name": "f", "judged": "eager", "why": "a Python loop"}
    spec([{**f, "calls": [{"name": "g", "count_argument": 1}]}], [calls])
    with pytest.raises(ValidationError, match="count_argument 4 for g names no argument of .*which pass 2"):
        spec([{**f, "calls": [{"name": "g", "count_argument": 4}]}], [calls])


def test_pure_and_calls_are_declared_with_the_check_that_verifies_them() -> None:
    pure = {"kind": "pure", "id": "p", "title": "p", "points": 1, "message": "m", "function": "f", **ROW}
    calls = {"kind": "calls", "id": "c", "title": "c", "points": 1, "message": "m", "function": "f", **ROW}
    f = {"name": "f", "judged": "either", "why": "the text"}
    spec([{**f, "pure": True, "calls": [{"name": "g"}]}], [VALUES, pure, calls])
    with pytest.raises(ValidationError, match="declared pure but no `pure` check"):
        spec([{**f, "pure": True}], [VALUES])
    with pytest.raises(ValidationError, match="not declared pure"):
        spec([f], [VALUES, pure])
    with pytest.raises(ValidationError, match="no `calls` check"):
        spec([{**f, "calls": [{"name": "g"}]}], [VALUES])
    with pytest.raises(ValidationError, match="declares no helpers"):
        spec([f], [VALUES, calls])
    with pytest.raises(ValidationError, match="declared twice"):
        AssignmentSpec.model_validate({"schema_version": 1, "id": "m", "title": "m", "exercises": [
            {"id": e, "title": e, "points": 1, "functions": [f], "checks": [{**VALUES, "id": e}]} for e in ("a", "b")]})


def test_every_function_of_the_course_s_assignments_is_declared() -> None:
    from grader import assignment

    for name in ("ch2-jit", "ch2-practice"):
        loaded = assignment.load(name)
        assert loaded.spec.undeclared() == [], name
    practice = assignment.load("ch2-practice").spec
    assert practice.judged("update_weights_explicit") == "either"
    assert practice.judged("bucket_size") == "eager"
    assert [rule.name for rule in practice.functions["mean_any_length"].calls] == ["bucket_size", "masked_mean"]


# ----------------------------------------------------------------------------- either: traced, else eager


def _either_calls() -> tuple[StudentCalls, Any]:
    from grader.cases import Case

    calls = StudentCalls(Planner(), "f", [Case(args=(np.float32(1.0),))], judged="either", public={0})
    return calls, calls.fallbacks()[0]


def test_either_asks_the_eager_call_only_when_the_export_raised() -> None:
    calls, fallback = _either_calls()
    assert isinstance(fallback, EagerFallback) and calls.program is not None and calls.program.exports[0].fallback == {}

    class Holder:
        def fallbacks(self):
            return [fallback]

    (export,) = fallback.exports
    traced = {export.id: Observation(id=export.id, status="ok")}
    raised = {export.id: Observation(id=export.id, status="raised", raised=Raised(ename="TypeError", evalue="x"))}
    assert _untraced(Holder(), traced) == [] and _untraced(Holder(), raised) == [fallback.call]


def test_either_judges_the_eager_answers_with_the_advice_of_its_mode() -> None:
    calls, fallback = _either_calls()
    (export,) = fallback.exports
    concretization = Raised(ename="ConcretizationTypeError", evalue="Abstract tracer value encountered", line=3)
    seen = Seen(observations={
        export.id: Observation(id=export.id, status="raised", raised=concretization),
        fallback.call.id: Observation(id=fallback.call.id, status="raised",
                                      raised=Raised(ename="AttributeError", evalue="a traced value has no attribute "
                                                    "bit_length", line=4, function="helper"))})
    outcome = calls.answers(seen, "f should ...")
    assert outcome.status == "error" and outcome.cause == "raised"
    assert "could not be traced" not in outcome.message
    assert "in `helper`, at line 4" in outcome.message and "does not ask for jax.jit" in outcome.message


# ----------------------------------------------------------------------------- pure: what a call changes


PURE_CELL = """
import jax, jax.numpy as jnp
import numpy as np
losses = []
counter = {"n": 0}
n_calls = 0
scale = 2.0

@jax.jit
def pure(x):
    print("tracing", x)  # printing is not state
    return x * scale

@jax.jit
def appends(x):
    losses.append(x)
    return x * 2

def mutates_dict(x):
    counter["n"] += 1
    return x

def rebinds(x):
    global n_calls
    n_calls += 1
    return x

def binds(x):
    global fresh
    fresh = 1
    return x

def draws(x):
    return x + np.random.rand()

def writes_argument(x):
    x[0] = 5.0
    return x

def _factory():
    traces = 0

    @jax.jit
    def counts(x):
        nonlocal traces
        traces += 1
        return x
    return counts

counts = _factory()
"""


@pytest.fixture
def cell() -> dict:
    namespace: dict = {}
    exec(PURE_CELL, namespace)  # noqa: S102 - a notebook's cell
    return namespace


@pytest.mark.parametrize("target, told", [
    ("appends", "global `losses` (a list) grew from 0 to 1 items"),
    ("mutates_dict", "global `counter` (a dict) was changed in place"),
    ("rebinds", "global `n_calls` was rebound"),
    ("binds", "global `fresh` was bound"),
    ("draws", "NumPy's global random state changed"),
    ("counts", "`traces` of an enclosing function was rebound"),
])
def test_a_watched_call_reports_what_it_changed_outside_itself(cell, target, told) -> None:
    raw = observe(cell, target, [{"args": [array([1.0, 2.0])]}], watch=True)
    assert raw["status"] == "ok", raw
    assert any(told in said for said in raw["result"]["mutated"]), raw["result"]["mutated"]


def test_a_pure_jitted_function_that_prints_changes_nothing_even_traced_again(cell) -> None:
    raw = observe(cell, "pure", [{"args": [array([1.0])]}, {"args": [array([2.0])]}], watch=True)
    assert raw["status"] == "ok" and raw["result"]["mutated"] == []
    assert raw["result"]["values"][1]["data"] == [4.0]


def test_a_default_argument_list_and_a_numpy_argument_changed_in_place_are_reported(cell) -> None:
    exec("def keeps(x, seen=[]):\n    seen.append(x)\n    return x\n"  # noqa: S102 - a notebook's cell
         "def in_place(avg, x):\n    if isinstance(avg, np.ndarray):\n        avg *= 0.5\n        return avg\n"
         "    return avg * 0.5\n", cell)
    kept = observe(cell, "keeps", [{"args": [array([1.0])]}], watch=True)["result"]["mutated"]
    assert any("the default value of its argument `seen` (a list) grew" in m for m in kept), kept
    placed = observe(cell, "in_place", [{"args": [array([1.0]), array([2.0])]}], watch=True)["result"]
    assert "argument 1 (a NumPy array) was changed in place" in placed["mutated"], placed
    assert placed["values"][0]["data"] == [0.5]  # the answer is the call's with the JAX arrays


def test_a_compile_log_the_notebook_keeps_in_a_list_is_not_the_function_s_doing(cell) -> None:
    """The chapter's count_compiles appends JAX's compile logs to a list: a notebook that leaves
    such a handler on, with jax_log_compiles, must not make a pure jitted function impure."""
    import logging

    kept: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            kept.append(record.getMessage())

    handler, before = Keep(), jax.config.jax_log_compiles
    logging.getLogger("jax").addHandler(handler)
    jax.config.update("jax_log_compiles", True)
    cell["kept"] = kept
    try:
        raw = observe(cell, "pure", [{"args": [array([1.0])]}], watch=True)
    finally:
        jax.config.update("jax_log_compiles", before)
        logging.getLogger("jax").removeHandler(handler)
    assert raw["result"]["mutated"] == []


def test_an_argument_or_a_global_array_changed_in_place_is_reported(cell) -> None:
    arr = np.zeros(2)

    def takes(items):
        items.append(1.0)
        arr[0] = 5.0
        return jnp.asarray(items)

    cell["takes"], cell["arr"] = takes, arr
    listed = {"t": "list", "items": [{"t": "py", "v": 1.0}, {"t": "py", "v": 2.0}]}
    said = observe(cell, "takes", [{"args": [listed]}], watch=True)["result"]["mutated"]
    assert "argument 1 (a list) grew from 2 to 3 items" in said
    assert "global `arr` (a NumPy array) was changed in place" in said


def test_counting_clears_jax_s_caches_so_a_jitted_function_calls_its_helper_on_every_call() -> None:
    namespace: dict = {}
    exec("import jax, jax.numpy as jnp\n"  # noqa: S102 - a notebook's cell
         "@jax.jit\ndef helper(x):\n    return x + 1\n"
         "@jax.jit\ndef whole(x):\n    return helper(x) * 2\n", namespace)
    namespace["whole"](jnp.ones(3))  # a warm cache, as a notebook's earlier cell leaves it
    raw = observe(namespace, "whole", [{"args": [array([1.0, 2.0, 3.0])]}] * 2, count_calls="helper")
    assert raw["result"]["counts"] == [1, 1]


STEP_AND_LOOP = ("import jax, jax.numpy as jnp\n"
                 "@jax.jit\ndef step(w):\n    return w * 0.5\n"
                 "def loop(w, n):\n    for _ in range(n):\n        w = step(w)\n    return w\n")


def test_a_helper_whose_results_are_thrown_away_is_told_apart_from_one_that_does_the_work() -> None:
    namespace: dict = {}
    exec(STEP_AND_LOOP +  # noqa: S102 - a notebook's cell
         "def discards(w, n):\n    for _ in range(n):\n        step(w)\n    return w * 0.5 ** n\n"
         "@jax.jit\ndef traced(w):\n    return step(w) + 1\n", namespace)
    calls = [{"args": [array([1.0]), {"t": "py", "v": 0}]}, {"args": [array([1.0]), {"t": "py", "v": 3}]}]
    used = observe(namespace, "loop", calls, count_calls="step", perturb=True)["result"]
    thrown = observe(namespace, "discards", calls, count_calls="step", perturb=True)["result"]
    assert (used["counts"], used["uses"]) == ([0, 3], [False, True])  # no call, nothing to use
    assert (thrown["counts"], thrown["uses"]) == ([0, 3], [False, False])
    assert thrown["values"] == used["values"]  # the same answers: only the moved results tell them apart
    inside = observe(namespace, "traced", [{"args": [array([2.0])]}], count_calls="step", perturb=True)["result"]
    assert inside["uses"] == [True] and inside["values"][0]["data"] == [2.0]
    assert float(namespace["traced"](jnp.ones(1) * 2.0)[0]) == 2.0  # no trace with the moved step left behind


def test_every_moved_call_runs_after_the_calls_between_two_cache_clears(monkeypatch) -> None:
    """The moved runs of a `perturb` request come after all its calls, JAX's caches cleared once
    before them and once after (not twice a call: each clear made `step` trace again, 0.2 s of a
    hidden check's 0.3 s), besides the clear before the first counted call, and before each later
    one once `step` was called while JAX traced (from plain Python no trace holds a call of it:
    each clear made `step` trace and load its program again); each call is still told apart, and a
    jitted function traced with the moved helper leaves no trace behind."""
    namespace: dict = {}
    exec(STEP_AND_LOOP +  # noqa: S102 - a notebook's cell
         "def half(w, n):\n    for i in range(n):\n        v = step(w)\n        w = v if i % 2 else w * 0.5\n    return w\n"
         "@jax.jit\ndef traced(w):\n    return step(w) + 1\n", namespace)
    cleared = []
    real = jax.clear_caches
    monkeypatch.setattr(jax, "clear_caches", lambda: (cleared.append(1), real())[1])
    calls = [{"args": [array([1.0]), {"t": "py", "v": n}]} for n in (1, 2, 4, 3)]
    used = observe(namespace, "loop", calls, count_calls="step", perturb=True)["result"]
    assert (used["counts"], used["uses"]) == ([1, 2, 4, 3], [True, True, True, True])
    assert len(cleared) == 1 + 2  # before the first counted call, then before and after the moved ones
    once = observe(namespace, "half", calls, count_calls="step", perturb=True)["result"]
    assert once["uses"] == [False, True, True, True]  # n = 1 throws step's only result away
    cleared.clear()
    inside = observe(namespace, "traced", [{"args": [array([2.0])]}, {"args": [array([3.0])]}], count_calls="step",
                     perturb=True)["result"]
    assert len(cleared) == 2 + 2  # step is called while `traced` traces: before each call
    assert inside["uses"] == [True, True] and [v["data"] for v in inside["values"]] == [[2.0], [2.5]]
    assert float(namespace["traced"](jnp.ones(1) * 2.0)[0]) == 2.0  # no trace with the moved step left behind


def test_a_step_called_once_through_a_jitted_helper_and_then_eagerly_is_counted_on_every_call() -> None:
    """Found by an attack on the moved calls' change: the calls after the first reused the first
    one's trace of the jitted helper, so `step` inside it went uncounted (4 of 5, a wrong "called
    step 4 times" for an honest loop). JAX's caches are cleared before each counted call."""
    namespace: dict = {}
    exec("import jax, jax.numpy as jnp\n"  # noqa: S102 - a notebook's cell
         "def step(w):\n    return w * 0.5\n"
         "@jax.jit\ndef first(w):\n    return step(w)\n"
         "def loop(w, n):\n    w = first(w)\n    for _ in range(n - 1):\n        w = step(w)\n    return w\n",
         namespace)
    namespace["loop"](jnp.ones(1), 2)  # an earlier cell traced `first` for these shapes
    calls = [{"args": [array([1.0]), {"t": "py", "v": n}]} for n in (2, 5, 3)]
    counted = observe(namespace, "loop", calls, count_calls="step", perturb=True)["result"]
    assert (counted["counts"], counted["uses"]) == ([2, 5, 3], [True, True, True])


def test_a_step_called_through_a_jitted_helper_only_in_later_calls_is_counted_on_every_call() -> None:
    """The caches are cleared before the first counted call, and before each later one only once
    `step` was called while JAX traced: here the first call calls it from plain Python alone, the
    second through a jitted helper it traces, and the third must trace that helper again."""
    namespace: dict = {}
    exec("import jax, jax.numpy as jnp\n"  # noqa: S102 - a notebook's cell
         "def step(w):\n    return w * 0.5\n"
         "@jax.jit\ndef first(w):\n    return step(w)\n"
         "def loop(w, n):\n    if n > 2:\n        w = first(w)\n        n -= 1\n"
         "    for _ in range(n):\n        w = step(w)\n    return w\n", namespace)
    calls = [{"args": [array([1.0]), {"t": "py", "v": n}]} for n in (1, 4, 5)]
    counted = observe(namespace, "loop", calls, count_calls="step", perturb=True)["result"]
    assert (counted["counts"], counted["uses"]) == ([1, 4, 5], [True, True, True])


@pytest.mark.parametrize("held", [
    "def make(update):\n    def loop(w, n):\n        for _ in range(n):\n            w = update(w)\n        return w\n"
    "    return loop\nloop = make(step)\n",
    "def loop(w, n, update=step):\n    for _ in range(n):\n        w = update(w)\n    return w\n",
    "def make(update):\n    def inner(w):\n        return update(w)\n    def loop(w, n):\n"
    "        for _ in range(n):\n            w = inner(w)\n        return w\n    return loop\nloop = make(step)\n",
    "def make(fs):\n    def loop(w, n):\n        for _ in range(n):\n            w = fs[0](w)\n        return w\n"
    "    return loop\nloop = make([step])\n",
    "def make(fs):\n    def loop(w, n):\n        for _ in range(n):\n            w = fs['update'](w)\n"
    "        return w\n    return loop\nloop = make({'update': step})\n",
], ids=["closure", "default", "closure-of-a-closure", "list-in-a-closure", "dict-in-a-closure"])
def test_a_step_the_loop_holds_in_a_closure_or_a_default_is_counted_and_put_back(held) -> None:
    """A loop made by a factory that closes over `step` (`train_python_loop = make_loop(step)`),
    or given it as a default value, calls step where no namespace names it (found by an attack:
    "`train_python_loop` did not call `step`", 2 points off an honest loop); afterwards the loop
    holds the student's own step again."""
    namespace: dict = {}
    exec("def step(w):\n    return w * 0.5\n" + held, namespace)  # noqa: S102 - a notebook's cell
    calls = [{"args": [array([1.0]), {"t": "py", "v": n}]} for n in (1, 3)]
    counted = observe(namespace, "loop", calls, count_calls="step", perturb=True)["result"]
    assert (counted["counts"], counted["uses"]) == ([1, 3], [True, True])
    def held_by(fn: Any) -> list:
        return [c.cell_contents for c in fn.__closure__ or ()] + list(fn.__defaults__ or ())

    held_now = held_by(namespace["loop"])
    held_now += [f for g in held_now if callable(g) and hasattr(g, "__closure__") for f in held_by(g)]
    held_now += [f for g in held_now if type(g) in (list, dict) for f in (g.values() if isinstance(g, dict) else g)]
    steps = [f for f in held_now if getattr(f, "__name__", None) == "step"]  # a counting wrapper is named so too
    assert steps and all(f is namespace["step"] for f in steps)


def test_a_loop_that_answers_differently_when_its_inputs_repeat_is_not_taken_for_one_using_step() -> None:
    """A cheat that throws step's results away and adds 1 when a call repeats the previous one's
    inputs (as a moved run right after its own call would): the moved runs come after all the
    calls, so none of them follows its own call."""
    namespace: dict = {}
    exec(STEP_AND_LOOP +  # noqa: S102 - a notebook's cell
         "prev = [None]\n"
         "def cheat(w, n):\n    key = (tuple(w.tolist()), n)\n    again = prev[0] == key\n    prev[0] = key\n"
         "    for _ in range(n):\n        step(w)\n    return w * 0.5 ** n + (1.0 if again else 0.0)\n", namespace)
    calls = [{"args": [array([1.0]), {"t": "py", "v": n}]} for n in (1, 2, 4, 3)]
    caught = observe(namespace, "cheat", calls, count_calls="step", perturb=True)["result"]
    assert caught["counts"] == [1, 2, 4, 3] and caught["uses"] == [False, False, False, False]


def test_a_moved_result_is_the_eager_add_s_dtype_and_weak_type() -> None:
    leaves = (jnp.array([1, 127], dtype=jnp.int8), jnp.array([0.5], dtype=jnp.float16), jnp.asarray(1.0),
              jnp.array([True]), 2, 2.5)
    moved = runtime._perturbed(leaves)
    for before, after in zip(leaves, moved):
        expected = before if isinstance(before, bool) or getattr(getattr(before, "dtype", None), "kind", "") == "b" \
            else before + 1
        assert isinstance(after, jax.Array) == isinstance(expected, jax.Array)
        if isinstance(expected, jax.Array):
            assert (after.dtype, after.weak_type) == (expected.dtype, expected.weak_type)
            np.testing.assert_array_equal(np.asarray(after), np.asarray(expected))
        else:
            assert after == expected


# ----------------------------------------------------------------------------- whole submissions


def grade(path: Path, assignment: str, exercises: tuple[str, ...] | None = None) -> Report:
    """`exercises`: grade only those (a test that reads no other exercise's checks or score need
    not pay for them; the notebook's cells all still run)."""
    from warm_grading import grade_warm

    return grade_warm(path, GradeOptions(assignment=assignment, seed=7, exercises=exercises))


def not_passed(report: Report) -> dict[str, str]:
    return {c.id: f"{c.status}: {c.message}" for e in report.exercises for c in e.checks if c.status != "passed"}


def with_cell(tmp_path: Path, assignment: str, code: str) -> Path:
    path = tmp_path / "submission.py"
    path.write_text((REPO / "solutions" / f"{assignment}.py").read_text(encoding="utf-8") + "\n\n# %% [extra]\n" + code,
                    encoding="utf-8")
    return path


@pytest.mark.kernel
def test_functions_the_text_does_not_ask_to_jit_keep_full_marks_as_plain_python(tmp_path) -> None:
    """ch2-practice: `mean_any_length` padded on the host with NumPy, `update_weights_explicit` calling
    float(lr): neither text asks for jax.jit, so neither untraceable form costs a point."""
    report = grade(with_cell(tmp_path, "ch2-practice", (
        "def mean_any_length(x):\n"
        "    x = np.asarray(x)\n"
        "    padded = np.zeros(bucket_size(len(x)), dtype=np.float32)\n"
        "    padded[: len(x)] = x\n"
        "    return masked_mean(jnp.asarray(padded), len(x))\n\n"
        "def update_weights_explicit(params, grads, lr):\n"
        "    lr = float(lr)\n"
        "    return params - lr * grads\n")), "ch2-practice")
    assert not_passed(report) == {} and report.score == 100


@pytest.mark.kernel
def test_a_plain_python_function_that_was_jitted_is_told_it_need_not_be(tmp_path) -> None:
    report = grade(with_cell(tmp_path, "ch2-practice", (
        "@jax.jit\ndef bucket_size(n):\n    return max(8, 1 << (n - 1).bit_length())\n")), "ch2-practice",
        exercises=("bucketing",))  # bucketing's checks alone are read
    failed = not_passed(report)
    said = failed["bucketing.bucket_size"]
    assert "does not ask for jax.jit" in said and "could not be traced" not in said
    assert "same error as" in failed["bucketing.bucket_size_hidden"]


def test_the_advice_on_a_tracing_error_cites_the_assignment_s_own_sections() -> None:
    """Found by an author: a chapter-3 assignment's students were sent to "section 2.4". The
    advice cites what the spec's `sections` say, and nothing where it says nothing."""
    from grader.checks.program import could_not_trace
    from grader.kernel.protocol import Raised

    raised = Raised(ename="TracerBoolConversionError", evalue="Attempted boolean conversion of traced array")
    cited = could_not_trace("f", raised, "m", {"control_flow": "section 3.2"})
    assert cited.message.endswith("use lax.cond, lax.switch or lax.while_loop (section 3.2)")
    assert cited.raised is not None and cited.raised.teach.endswith("(section 3.2)")
    assert could_not_trace("f", raised, "m").message.endswith("lax.while_loop")
    declared = AssignmentSpec.model_validate({**spec([], [VALUES]).model_dump(), "sections": {"static_arguments": "2.5"}})
    assert declared.sections == {"static_arguments": "2.5"}
    with pytest.raises(ValidationError, match="sections"):
        AssignmentSpec.model_validate({**spec([], [VALUES]).model_dump(), "sections": {"vmap": "3.1"}})
    assert Planner({"control_flow": "section 2.4"}).sections == {"control_flow": "section 2.4"}
