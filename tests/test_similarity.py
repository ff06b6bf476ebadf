"""Copied work found on the compiled program: fingerprints made in the verifier, carried in the
report for the instructor only, and grouped per exercise (grader.term.similarity).

The programs are real: the reference solution, two copies of it with every name, comment and
blank changed (and a helper function renamed), and two correct solutions of the tax and Newton
exercises written independently, each graded end to end.
"""

from __future__ import annotations

import json
import sqlite3

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export
from warm_grading import grade_warm

from grader import GradeOptions, Report
from grader.views.page import page
from grader.outputs.exports import gradescope_results
from grader.views.terminal import summary
from grader.report import ProgramFingerprint
from grader.term.models import SimilarGroup
from grader.term.similarity import DEFAULT_THRESHOLD, MIN_SIZE, record_groups, similar_groups
from grader.verifier.inside import fingerprint, runtime
from grader.verifier.protocol import MAX_RESULT_NODES, BadAnswer, VerifierJob, parse_result

SEED = 5
STUDENTS = ("copy_a", "copy_b", "independent_a", "independent_b")

# The reference with every name, comment and blank changed: constants, lambdas' arguments, the
# while loop's functions, fori_loop's body.
COPY_A = '''# Chapter 2 homework -- my answers
# %% [setup]
from functools import partial
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

# %% [tax]
# bracket edges and their rates
EDGES = np.array([0.0, 10000.0, 40000.0, 100000.0], dtype=np.float32)
PCT   = np.array([0.0, 0.10, 0.20, 0.30], dtype=np.float32)
OWED  = np.concatenate([[0.0], np.cumsum(np.diff(EDGES) * PCT[:-1])]).astype(np.float32)

@jax.jit
def tax_switch(income):
    which = jnp.searchsorted(EDGES, income, side="right") - 1
    fns = [(lambda v, j=j: OWED[j] + (v - EDGES[j]) * PCT[j]) for j in range(4)]
    return lax.switch(which, fns, income)

@jax.jit
def tax_vectorized(income):
    tests = [income < 10000, income < 40000, income < 100000]
    values = [jnp.zeros_like(income), (income - 10000) * 0.10, 3000 + (income - 40000) * 0.20]
    return jnp.select(tests, values, default=15000 + (income - 100000) * 0.30)

# %% [newton]
@jax.jit
def newton_sqrt(a, tol):
    start = jnp.where(a < 1.0, 1.0, a)
    def keep_going(s):
        cur, prev, n = s
        return (jnp.abs(cur - prev) >= tol) & (n < 100)
    def update(s):
        cur, _, n = s
        return 0.5 * (cur + a / cur), cur, n + 1
    cur, _, n = lax.while_loop(keep_going, update, (start, start + 1.0, 0))
    return cur, n

# %% [detective]
predictions = [True, False, True, True, True, True, True, True]

# %% [training]
@jax.jit
def step(w, b, x, y, lr):
    residual = w * x + b - y
    return w - lr * jnp.mean(2 * residual * x), b - lr * jnp.mean(2 * residual)

def train_python_loop(w, b, x, y, lr, num_steps):
    for _ in range(num_steps):
        w, b = step(w, b, x, y, lr)
    return w, b

@jax.jit
def train_fori(w, b, x, y, lr, num_steps):
    def one(i, params):
        return step(params[0], params[1], x, y, lr)
    return lax.fori_loop(0, num_steps, one, (w, b))
'''

# The same again, differently: module aliases, spacing, a docstring, and the jitted step is
# defined as `_sgd` (the helper in train_fori's program is `@_sgd`, its own module `@jit__sgd`).
COPY_B = '''# %% [setup]
import jax, numpy
import jax.numpy as J
from jax import lax as L


# %% [tax]
LO = numpy.array([0.0, 10000.0, 40000.0, 100000.0], dtype=numpy.float32)   # lower edges
R = numpy.array([0.0, 0.10, 0.20, 0.30], dtype=numpy.float32)              # rates
BEFORE = numpy.concatenate([[0.0], numpy.cumsum(numpy.diff(LO) * R[:-1])]).astype(numpy.float32)


@jax.jit
def tax_switch( income ):
    """Scalar tax via lax.switch."""
    b = J.searchsorted( LO, income, side = "right" ) - 1
    return L.switch( b, [ ( lambda t, q = q : BEFORE[q] + ( t - LO[q] ) * R[q] ) for q in range( 4 ) ], income )


@jax.jit
def tax_vectorized( income ):
    return J.select( [ income < 10000, income < 40000, income < 100000 ],
                     [ J.zeros_like( income ), ( income - 10000 ) * 0.10, 3000 + ( income - 40000 ) * 0.20 ],
                     default = 15000 + ( income - 100000 ) * 0.30 )


# %% [newton]
@jax.jit
def newton_sqrt( a, tol ):
    guess = J.where( a < 1.0, 1.0, a )
    def c( st ):
        g, old, it = st
        return ( J.abs( g - old ) >= tol ) & ( it < 100 )
    def b( st ):
        g, _, it = st
        return 0.5 * ( g + a / g ), g, it + 1
    g, _, it = L.while_loop( c, b, ( guess, guess + 1.0, 0 ) )
    return g, it


# %% [detective]
predictions = [ True, False, True, True, True, True, True, True ]


# %% [training]
@jax.jit
def _sgd( w, b, x, y, lr ):
    e = w * x + b - y
    return w - lr * J.mean( 2 * e * x ), b - lr * J.mean( 2 * e )
step = _sgd


def train_python_loop( w, b, x, y, lr, num_steps ):
    for _ in range( num_steps ):
        w, b = _sgd( w, b, x, y, lr )
    return w, b


@jax.jit
def train_fori( w, b, x, y, lr, num_steps ):
    return L.fori_loop( 0, num_steps, lambda k, wb: _sgd( wb[0], wb[1], x, y, lr ), ( w, b ) )
'''

# Written independently (correct): the bracket counted with a sum, nested jnp.where, and a Newton
# loop that carries the last step's size.
INDEPENDENT_A = '''# %% [tax]
LIMITS = jnp.array([10000.0, 40000.0, 100000.0])


def _no_tax(x):
    return 0.0 * x


@jax.jit
def tax_switch(income):
    k = jnp.sum(income >= LIMITS).astype(jnp.int32)  # how many bracket starts lie below the income
    return lax.switch(k, [_no_tax,
                          lambda x: 0.1 * (x - 10000.0),
                          lambda x: 3000.0 + 0.2 * (x - 40000.0),
                          lambda x: 15000.0 + 0.3 * (x - 100000.0)], income)


@jax.jit
def tax_vectorized(income):
    top = jnp.where(income >= 100000.0, 15000.0 + 0.3 * (income - 100000.0), 3000.0 + 0.2 * (income - 40000.0))
    mid = jnp.where(income >= 40000.0, top, 0.1 * (income - 10000.0))
    return jnp.where(income >= 10000.0, mid, jnp.zeros_like(income))


# %% [newton]
@jax.jit
def newton_sqrt(a, tol):
    def body(c):
        x, _, k = c
        x_new = 0.5 * (x + a / x)
        return x_new, jnp.abs(x_new - x), k + 1

    def cond(c):
        _, delta, k = c
        return jnp.logical_and(delta >= tol, k < 100)

    x0 = jnp.maximum(a, 1.0)
    x, _, k = lax.while_loop(cond, body, (x0, jnp.inf, 0))
    return x, k
'''

# Written independently again (correct): the bracket summed from comparisons, a branch factory,
# clipped slices, and a loop that carries the last two iterates.
INDEPENDENT_B = '''# %% [tax]
@jax.jit
def tax_switch(income):
    idx = (income >= 10000.0).astype(jnp.int32) + (income >= 40000.0) + (income >= 100000.0)
    def bracket(lo, rate, before):
        return lambda v: before + rate * (v - lo)
    return lax.switch(idx, [bracket(0.0, 0.0, 0.0), bracket(10000.0, 0.1, 0.0),
                            bracket(40000.0, 0.2, 3000.0), bracket(100000.0, 0.3, 15000.0)], income)


@jax.jit
def tax_vectorized(income):
    parts = [jnp.clip(income - lo, 0.0, hi - lo) * r
             for lo, hi, r in [(10000.0, 40000.0, 0.1), (40000.0, 100000.0, 0.2)]]
    return parts[0] + parts[1] + jnp.where(income > 100000.0, (income - 100000.0) * 0.3, 0.0)


# %% [newton]
@jax.jit
def newton_sqrt(a, tol):
    a = jnp.asarray(a, jnp.float32)
    x = lax.select(a < 1.0, jnp.ones_like(a), a)
    first = (x + a / x) / 2

    def go_on(s):
        return (jnp.abs(s[1] - s[0]) >= tol) & (s[2] < 100)

    def advance(s):
        return s[1], (s[1] + a / s[1]) / 2, s[2] + 1

    _, x, n = lax.while_loop(go_on, advance, (x, first, jnp.int32(1)))
    return x, n
'''

# ============================================================================= the normaliser


S, F32 = jax.ShapeDtypeStruct, np.float32


@jax.jit
def helper(x):
    return jnp.sin(x) * 2.0


def program(x, y):
    return helper(x) + 3.0 * y, x - 1.5


@jax.jit
def another_name(v):  # the same helper, named and placed elsewhere
    return jnp.sin(v) * 2.0


def same_program(a, b):
    first = another_name(a) + 3.0 * b
    return first, a - 1.5


def text_of(fn) -> str:
    """The module's text as jax.export prints it: locations, names and all."""
    return export.export(jax.jit(fn))(S((3,), F32), S((3,), F32)).mlir_module()


def swap_first_constants(text: str) -> str:
    """The same module with its first two constants defined in the other order."""
    lines = text.split("\n")
    at = [i for i, line in enumerate(lines) if "stablehlo.constant" in line][:2]
    assert len(at) == 2, "the program has two constants"
    lines[at[0]], lines[at[1]] = lines[at[1]], lines[at[0]]
    return "\n".join(lines)


def test_locations_names_and_the_order_of_constants_are_stripped() -> None:
    text = text_of(program)
    again = swap_first_constants(text_of(same_program))
    assert text != again and "@helper" in text and "@another_name" in again
    assert fingerprint.fingerprint(again) == fingerprint.fingerprint(text)
    normalised, constants = fingerprint.normalise(text)
    for source in ("loc(", "#loc", "jax.result_info", "helper", "%arg", "jit_program", "test_similarity"):
        assert source not in normalised, source
    assert "@main" in normalised and "@f1" in normalised
    assert constants == sorted(constants) and len(constants) == 3


def test_a_changed_op_or_constant_changes_the_digest() -> None:
    base = fingerprint.fingerprint(text_of(program))

    @jax.jit
    def cos_helper(x):
        return jnp.cos(x) * 2.0

    changed_op = fingerprint.fingerprint(text_of(lambda x, y: (cos_helper(x) + 3.0 * y, x - 1.5)))
    changed_constant = fingerprint.fingerprint(text_of(lambda x, y: (helper(x) + 3.5 * y, x - 1.5)))
    assert changed_op["digest"] != base["digest"] and changed_op["shingles"] != base["shingles"]
    assert changed_constant["digest"] != base["digest"]
    assert changed_constant["shingles"] == base["shingles"]  # the ops, not their constants: still alike


def test_strings_in_locations_and_attributes_are_skipped_whole() -> None:
    """Parentheses, braces and `loc(` inside strings do not end (or start) what is stripped."""
    text = ('module @jit_x attributes {mhlo.frontend_attributes = {a = "}{ loc(", b = {c = "}"}}} {\n'
            '  func.func public @main(%arg0: tensor<f32> loc("a(b")) -> (tensor<f32> {jax.result_info = "r)}"}) {\n'
            '    return %arg0 : tensor<f32> loc(callsite("f(" at "g)"))\n  }\n}\n#loc1 = loc("x")\n')
    normalised, constants = fingerprint.normalise(text)
    assert normalised == ("module {\nfunc.func public @main(%v0: tensor<f32>) -> (tensor<f32>) {\n"
                          "return %v0 : tensor<f32>\n}\n}\n") and constants == []


def test_the_verifier_reports_the_fingerprint_of_what_it_deserialized() -> None:
    exported = export.export(jax.jit(program))(S((3,), F32), S((3,), F32))
    facts = runtime.inspect_module(export.deserialize(bytearray(exported.serialize())))
    assert facts["fingerprint"] == fingerprint.fingerprint(exported.mlir_module())
    assert 0 < len(facts["fingerprint"]["shingles"]) <= fingerprint.MAX_SHINGLES


FACTS = {"fun_name": "f", "platforms": ["cpu"], "in_avals": [], "out_avals": [], "in_tree": "t", "out_tree": "t",
         "nr_devices": 1, "ops": ["add"], "custom_calls": []}


def answer(printed: object) -> bytes:
    return json.dumps({"id": "j", "status": "ok", "facts": {**FACTS, "fingerprint": printed}, "values": [],
                       "detail": None}).encode()


@pytest.mark.parametrize("printed", [
    {"digest": "0" * 63, "shingles": []},
    {"digest": "X" * 64, "shingles": []},
    {"digest": "0" * 64, "shingles": [-1]},
    {"digest": "0" * 64, "shingles": [2**64]},
    {"digest": "0" * 64, "shingles": list(range(fingerprint.MAX_SHINGLES + 1))},
    {"digest": "0" * 64, "shingles": [], "extra": 1},
])
def test_the_grader_refuses_a_fingerprint_out_of_bounds(printed: dict) -> None:
    with pytest.raises(BadAnswer, match="fingerprint|too large"):
        parse_result(answer(printed), VerifierJob(id="j", module=b"x"))


def test_a_fingerprint_within_bounds_is_accepted() -> None:
    printed = {"digest": "a" * 64, "shingles": [0, 2**64 - 1]}
    assert MAX_RESULT_NODES > fingerprint.MAX_SHINGLES
    result = parse_result(answer(printed), VerifierJob(id="j", module=b"x"))
    assert result.facts.fingerprint.model_dump() == printed
    assert parse_result(answer(None), VerifierJob(id="j", module=b"x")).facts.fingerprint is None


# ============================================================================= grouping, no kernel


def printed(exercise: str, function: str, ops: range, digest: str | None = None) -> ProgramFingerprint:
    shingles = sorted(ops)
    return ProgramFingerprint(exercise=exercise, function=function, shingles=shingles,
                              digest=digest or f"{min(ops):032x}{max(ops):032x}")


def report_with(*programs: ProgramFingerprint) -> Report:
    return Report.model_validate({
        "assignment": "ch2-jit", "submission": {"path": "s.py", "sha256": None, "kind": "module"},
        "status": "graded", "score": 0, "max_score": 100, "exercises": [], "seed": 1, "duration_s": 1,
        "environment": {"grader": "0", "python": "3", "jax": None},
        "isolation": {"sandboxed": False, "layers": []}, "programs": [p.model_dump() for p in programs]})


def test_a_chain_of_copies_is_one_group_whose_similarity_says_so() -> None:
    """Single linkage: b copied a (0.9), c copied b (0.9); c is less like a than the threshold."""
    reports = {"a": report_with(printed("e", "f", range(100))),
               "b": report_with(printed("e", "f", range(5, 105))),
               "c": report_with(printed("e", "f", range(10, 110))),
               "d": report_with(printed("e", "f", range(500, 600))),
               "e": report_with()}  # exported nothing: left out
    [group] = similar_groups(reports, 0.85)
    assert group.students == ["a", "b", "c"] and not group.identical
    assert group.similarity == round(90 / 110, 4) < group.threshold == 0.85


def test_tiny_programs_and_the_reference_s_are_no_evidence() -> None:
    tiny = {s: report_with(printed("e", "f", range(MIN_SIZE - 1))) for s in "ab"}
    assert similar_groups(tiny) == []
    reference = printed("e", "f", range(50))
    reports = {s: report_with(reference, printed("e", "g", range(100, 100 + MIN_SIZE + k))) for s, k in
               (("a", 0), ("b", 1))}
    [group] = similar_groups(reports, reference=[reference])  # f is the reference's; g alike
    assert group.students == ["a", "b"] and group.similarity == round(MIN_SIZE / (MIN_SIZE + 1), 4)
    only_reference = {s: report_with(reference) for s in "ab"}
    assert [g.identical for g in similar_groups(only_reference)] == [True]
    assert similar_groups(only_reference, reference=[reference]) == []


def test_groups_are_kept_in_their_own_table_replaced_each_time() -> None:
    db = sqlite3.connect(":memory:")  # closed at the end (an unclosed connection warns)
    first = [SimilarGroup(exercise="tax", students=["a", "b"], similarity=1.0, threshold=0.7, identical=True),
             SimilarGroup(exercise="newton", students=["a", "c", "d"], similarity=0.75, threshold=0.7,
                          identical=False)]
    record_groups(db, first)
    rows = db.execute("SELECT exercise, group_id, student, similarity, threshold, identical FROM "
                      "similar_programs ORDER BY group_id, student").fetchall()
    assert rows == [("tax", 1, "a", 1.0, 0.7, 1), ("tax", 1, "b", 1.0, 0.7, 1), ("newton", 2, "a", 0.75, 0.7, 0),
                    ("newton", 2, "c", 0.75, 0.7, 0), ("newton", 2, "d", 0.75, 0.7, 0)]
    record_groups(db, first[1:])
    assert db.execute("SELECT count(*), min(group_id) FROM similar_programs").fetchone() == (3, 1)
    record_groups(db, [])
    assert db.execute("SELECT count(*) FROM similar_programs").fetchone() == (0,)
    db.close()


# ============================================================================= graded for real


def with_reference(sections: dict[str, str], own: str) -> str:
    """The reference's setup, detective and training around a student's own tax and newton."""
    return "\n\n".join([f"# %% [setup]\n{sections['setup']}", own, f"# %% [detective]\n{sections['detective']}",
                        f"# %% [training]\n{sections['training']}"])


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory, reference_sections: dict[str, str],
           reference_source: str) -> dict[str, Report]:
    """The reference, the two copies and the two independent solutions, each graded."""
    folder = tmp_path_factory.mktemp("similar")
    sources = {"reference": reference_source, "copy_a": COPY_A, "copy_b": COPY_B,
               "independent_a": with_reference(reference_sections, INDEPENDENT_A),
               "independent_b": with_reference(reference_sections, INDEPENDENT_B)}
    reports = {}
    for name, source in sources.items():
        path = folder / f"{name}.py"
        path.write_text(source, encoding="utf-8")
        reports[name] = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=SEED))
    return reports


def klass(graded: dict[str, Report]) -> dict[str, Report]:
    return {s: graded[s] for s in STUDENTS}


def groups_of(groups: list[SimilarGroup], exercise: str) -> list[SimilarGroup]:
    return [g for g in groups if g.exercise == exercise]


@pytest.mark.kernel
def test_every_solution_is_correct_and_every_exported_function_is_fingerprinted(graded) -> None:
    for name, report in graded.items():
        assert report.score == 100, (name, [(c.id, c.message) for e in report.exercises for c in e.checks
                                            if c.status != "passed"])
        # train_python_loop is judged as plain Python, run in the kernel: no program to fingerprint
        assert [(p.exercise, p.function) for p in report.programs] == [
            ("tax", "tax_switch"), ("tax", "tax_vectorized"), ("newton", "newton_sqrt"), ("training", "step"),
            ("training", "train_fori")], name


@pytest.mark.kernel
def test_renamed_and_reformatted_copies_are_identical_and_grouped(graded) -> None:
    digests = {name: [p.digest for p in graded[name].programs] for name in ("reference", "copy_a", "copy_b")}
    assert digests["copy_a"] == digests["copy_b"] == digests["reference"]
    groups = similar_groups(klass(graded))
    for exercise in ("tax", "newton"):
        [group] = groups_of(groups, exercise)
        assert group.students == ["copy_a", "copy_b"]
        assert group.identical and group.similarity == 1.0 >= group.threshold == DEFAULT_THRESHOLD


@pytest.mark.kernel
def test_independent_solutions_are_not_grouped(graded) -> None:
    for exercise in ("tax", "newton"):
        for name in ("independent_a", "independent_b"):
            own = {p.digest for p in graded[name].programs if p.exercise == exercise}
            assert own.isdisjoint(p.digest for p in graded["reference"].programs)
        for low in (DEFAULT_THRESHOLD, 0.5):  # well apart, not only just below the threshold
            for group in groups_of(similar_groups(klass(graded), low), exercise):
                assert group.students == ["copy_a", "copy_b"], (exercise, low, group)


@pytest.mark.kernel
def test_what_everyone_wrote_and_what_the_reference_is_are_no_evidence(graded) -> None:
    """Training's programs are the same for all four (the exercise dictates them): not grouped
    as copies unless asked (common_share=None), but listed apart, marked common (a ring of
    copies would look the same). With the reference's fingerprints, the copies (of the
    reference) are no evidence either."""
    training = groups_of(similar_groups(klass(graded)), "training")
    assert training and all(g.common for g in training)
    assert sorted({s for g in training for s in g.students}) == sorted(STUDENTS)
    [everyone] = groups_of(similar_groups(klass(graded), common_share=None), "training")
    assert everyone.students == sorted(STUDENTS) and everyone.identical and not everyone.common
    assert [g for g in similar_groups(klass(graded), reference=graded["reference"].programs) if not g.common] == []


@pytest.mark.kernel
def test_fingerprints_never_reach_what_the_student_sees(graded) -> None:
    report = graded["copy_a"]
    secrets = {p.digest for p in report.programs} | {str(s) for p in report.programs for s in p.shingles[:5]}
    seen = [summary(report), summary(report, verbose=True), json.dumps(gradescope_results(report)),
            page(report, [])]
    for text in seen:
        assert not any(secret in text for secret in secrets)


# ============================================================================= no-op operations folded

# The reference's tax and Newton with `+ 0.0`, `- 0`, `* 1.0`, `/ 1.0` after most operations
# (scalars and arrays, floats and ints, chained): the program it copied, once they are folded.
PADDED = '''# %% [tax]
brackets = np.array([0.0, 10000.0, 40000.0, 100000.0], dtype=np.float32)
rates = np.array([0.0, 0.10, 0.20, 0.30], dtype=np.float32)
base_tax = np.concatenate([[0.0], np.cumsum(np.diff(brackets) * rates[:-1])]).astype(np.float32)


@jax.jit
def tax_switch(income):
    idx = (jnp.searchsorted(brackets, income * 1.0, side="right") - 1) * 1 + 0
    branches = [(lambda inc, k=k: (base_tax[k] + ((inc - brackets[k]) * 1.0 + 0.0) * rates[k] - 0.0) / 1.0)
                for k in range(4)]
    return lax.switch(idx, branches, income + 0.0) * 1.0


@jax.jit
def tax_vectorized(income):
    income = income * 1.0 + 0.0
    conds = [income < 10000, income < 40000, income < 100000]
    choices = [jnp.zeros_like(income) + 0.0, (income - 10000) * 0.10 * 1.0, (3000 + (income - 40000) * 0.20) / 1.0]
    return jnp.select(conds, choices, default=15000 + (income - 100000 + 0.0) * 0.30 * 1.0) - 0.0


# %% [newton]
@jax.jit
def newton_sqrt(a, tol):
    x0 = jnp.where(a < 1.0, 1.0, a) * 1.0

    def cond_fun(state):
        x, x_prev, k = state
        return (jnp.abs(x - x_prev - 0.0) * 1.0 >= tol / 1.0) & (k + 0 < 100)

    def body_fun(state):
        x, _, k = state
        return ((0.5 * (x + a / x / 1.0) + 0.0) * 1.0) / 1.0, x + 0.0, (k + 1) * 1

    x, _, k = lax.while_loop(cond_fun, body_fun, (x0 * 1.0, x0 + 1.0, 0))
    return x * 1.0 - 0.0, k * 1
'''
SIGNATURES = {"tax_switch": ("tax", [S((), F32)]), "tax_vectorized": ("tax", [S((12,), F32)]),
              "newton_sqrt": ("newton", [S((), F32), S((), F32)])}


def fingerprints_of(source: str) -> list[ProgramFingerprint]:
    """Each tax and Newton function of `source`, exported and fingerprinted as the verifier does."""
    namespace: dict = {}
    exec(compile("import jax\nimport jax.numpy as jnp\nimport numpy as np\nfrom jax import lax\n" + source,  # noqa: S102
                 "student", "exec"), namespace)
    out = []
    for function, (exercise, avals) in SIGNATURES.items():
        exported = export.export(namespace[function])(*avals)
        made = runtime.inspect_module(export.deserialize(bytearray(exported.serialize())))["fingerprint"]
        out.append(ProgramFingerprint(exercise=exercise, function=function, **made))
    return out


def test_a_copy_padded_with_no_op_operations_is_the_program_it_copied(reference_sections) -> None:
    own = fingerprints_of(f"{reference_sections['tax']}\n{reference_sections['newton']}")
    padded = fingerprints_of(PADDED)
    honest = fingerprints_of(INDEPENDENT_A)
    assert [p.digest for p in padded] == [p.digest for p in own]  # every function: the very program
    reports = {"original": report_with(*own), "padded": report_with(*padded), "honest": report_with(*honest)}
    for low in (DEFAULT_THRESHOLD, 0.5):
        groups = [g for g in similar_groups(reports, low, common_share=None)]
        assert [(g.exercise, g.students, g.identical) for g in groups] == [
            ("tax", ["original", "padded"], True), ("newton", ["original", "padded"], True)], low


def test_only_operations_that_change_nothing_are_folded() -> None:
    """`x * 0`, `x + 1`, `0 - x`, `1 / x` and `x ** 1` stay; a 0 still used elsewhere stays too."""
    base = fingerprint.fingerprint(text_of(lambda x, y: (x * y, jnp.zeros_like(x))))
    for changed in (lambda x, y: (x * y * 0.0, jnp.zeros_like(x)), lambda x, y: (x * y + 1.0, jnp.zeros_like(x)),
                    lambda x, y: (0.0 - x * y, jnp.zeros_like(x)), lambda x, y: (1.0 / (x * y), jnp.zeros_like(x))):
        assert fingerprint.fingerprint(text_of(changed))["digest"] != base["digest"]
    same = fingerprint.fingerprint(text_of(lambda x, y: ((x + 0.0) * (y * 1.0) / 1.0, jnp.zeros_like(x) - 0.0)))
    assert same == base
    normalised, constants = fingerprint.normalise(text_of(lambda x, y: (x + 0.0 + y, jnp.zeros_like(x))))
    assert constants == ["dense<0.000000e+00> : tensor<f32>"] and normalised.count("stablehlo.add") == 1
