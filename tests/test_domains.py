"""Hidden inputs drawn from the domain each argument's text implies (`[[exercises.domains]]`).

The domain is declared once in the spec, handed to the generators that take `domains`, and
drawn with its edges, bounds and declared values always in; the shipped assignments draw tiny
and huge a, counts of 0 and 1 and above the notebook's, lr of 0 and outside the notebook's range,
incomes on every edge and far above the last; the chapter's own Newton loop (uncapped, float32)
stops and is accurate on every a drawn; and no hint names a number the exercise's text does not.
"""

from __future__ import annotations

import re
import types

import numpy as np
import pytest
from pydantic import ValidationError

from grader import Case
from grader import assignment as assignments
from grader.cases import materialize, rng_for
from grader.domains import describe, draw, fixed_points
from grader.spec import ArgumentDomain, AssignmentSpec

A = ArgumentDomain(argument="a", functions=["f"], position=0, low=1e-3, high=1e3, scale="log", edges=[1.0],
                   around=[-0.01, 0.01], why="test")
COUNT = ArgumentDomain(argument="n", functions=["f"], position=1, low=2, high=50, integer=True, values=[0, 1],
                       why="test")


# ----------------------------------------------------------------------------- the model and the draw


@pytest.mark.parametrize("fields, error", [
    ({"low": 0.0, "high": 1.0, "scale": "log"}, "log scale needs low > 0"),
    ({"low": 2.0, "high": 1.0}, "is above high"),
    ({"low": 0, "high": 10, "integer": True, "values": [0.5]}, "whole numbers"),
])
def test_a_domain_that_cannot_be_drawn_is_refused(fields, error) -> None:
    with pytest.raises(ValidationError, match=error):
        ArgumentDomain(argument="x", functions=["f"], position=0, why="test", **fields)


def test_a_draw_holds_every_edge_its_neighbours_both_bounds_and_the_declared_values() -> None:
    drawn = draw(A, np.random.default_rng(0), 12)
    assert drawn.size == 12
    # on a continuous domain, also 1e-4 to 1e-2 of the edge off on each side (a moved edge)
    near = {1.0 + sign * k for k in (1e-4, 1e-3) for sign in (-1, 1)}
    assert set(fixed_points(A)) == {0.99, 1.0, 1.01, 1e-3, 1e3} | near <= set(drawn.tolist())
    assert np.all((drawn >= 1e-3) & (drawn <= 1e3))
    counts = draw(COUNT, np.random.default_rng(0), 8)
    assert {0.0, 1.0, 2.0, 50.0} <= set(counts.tolist()) and np.all(counts == np.round(counts))
    # the fixed points are never dropped, even when they alone exceed the count
    assert set(draw(A, np.random.default_rng(0), 2).tolist()) == set(fixed_points(A))
    # the same generator state draws the same values (a regrade with the same seed)
    assert np.array_equal(draw(A, rng_for(3, "x.y"), 9), draw(A, rng_for(3, "x.y"), 9))
    assert describe(A) == "a in [0.001, 1000] (log), edges 1 (-0.01, +0.01) and 0.0001-0.01 of it off"


def _spec(domains: str) -> AssignmentSpec:
    import tomllib

    return AssignmentSpec.model_validate(tomllib.loads(f"""
schema_version = 1
id = "tiny"
title = "t"
[[exercises]]
id = "e"
title = "E"
points = 1
{domains}
[[exercises.checks]]
kind = "numeric"
id = "hidden"
title = "f on hidden a"
points = 1
message = "f(a)"
hint = "any a"
hidden = true
function = "f"
reference = "f"
cases.generator = "drawn"
"""))


def test_a_generator_that_takes_domains_draws_from_its_exercise_s() -> None:
    spec = _spec('[[exercises.domains]]\nargument = "a"\nfunctions = ["f"]\nposition = 0\n'
                 'low = 5.0\nhigh = 6.0\nwhy = "test"\n')
    refs = types.SimpleNamespace(
        drawn=lambda rng, domains: [Case(args=(float(v),)) for v in draw(domains["a"], rng, 4)],
        fixed=lambda rng: [Case(args=(1.0,))])
    cases = spec.exercises[0].checks[0].cases
    assert set(cases.domains) == {"a"}
    values = [c.args[0] for c in materialize(cases, refs, 1, "e.hidden")]
    assert len(values) == 4 and {5.0, 6.0} <= set(values) and all(5.0 <= v <= 6.0 for v in values)
    without = _spec("").exercises[0].checks[0].cases.model_copy(update={"generator": "fixed"})
    assert materialize(without, refs, 1, "e.hidden")[0].args == (1.0,)  # no `domains`: called as before


def test_one_domain_per_argument() -> None:
    one = '[[exercises.domains]]\nargument = "a"\nfunctions = ["f"]\nposition = 0\nlow = 1.0\nhigh = 2.0\nwhy = "t"\n'
    with pytest.raises(ValidationError, match="one domain per argument"):
        _spec(one + one)


# ----------------------------------------------------------------------------- the shipped assignments


def _drawn(assignment: str, check: str, seed: int = 1) -> list[Case]:
    loaded = assignments.load(assignment)
    exercise_id, check_id = check.split(".")
    exercise = next(e for e in loaded.spec.exercises if e.id == exercise_id)
    spec = next(c for c in exercise.checks if c.id == check_id)
    return materialize(spec.cases, loaded.references, seed, check)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ch2_jit_hidden_inputs_cover_the_domain_the_text_implies(seed) -> None:
    a = [c.args[0] for c in _drawn("ch2-jit", "newton.hidden", seed)]
    assert min(a) <= 1e-6 and max(a) >= 1e6 and {0.999, 1.0, 1.001} <= set(a)  # tiny, huge, x0's edge
    runs = _drawn("ch2-jit", "training.fori_agrees", seed)
    steps, lrs = [c.args[5] for c in runs], [c.args[4] for c in runs]
    assert {0, 1} <= set(steps) and max(steps) > 300  # the notebook's count is 300
    assert 0.0 in lrs and max(lrs) > 0.5 and min(lr for lr in lrs if lr > 0) < 0.05
    assert min(c.args[4] for c in _drawn("ch2-jit", "training.step_hidden", seed)) == 0.0
    incomes = {float(c.args[0]) for c in _drawn("ch2-jit", "tax.switch_hidden", seed)}
    for edge in (10_000.0, 40_000.0, 100_000.0):
        assert {edge - 1, edge - 0.5, edge, edge + 0.5, edge + 1} <= incomes
        # a bracket's start moved by more than 10 (100100) is wrong at one of these
        assert {float(np.float32(edge * (1 + k))) for k in (-1e-2, -1e-3, -1e-4, 1e-4, 1e-3, 1e-2)} <= incomes
    assert min(incomes) < 1.0 and max(incomes) >= 1e8  # the notebook's are 0 to 1e6
    assert len(incomes) == 48  # 33 fixed points, and random ones


def test_ch2_practice_hidden_inputs_cover_the_domain_the_text_implies() -> None:
    sums = _drawn("ch2-practice", "sum_first.hidden")
    assert {0, len(sums[0].args[0])} <= {c.args[1] for c in sums} and len(sums[0].args[0]) > 10
    lrs = [c.args[2] for c in _drawn("ch2-practice", "update_weights.hidden")]
    assert 0.0 in lrs and max(lrs) > 1000 and min(lr for lr in lrs if lr > 0) < 0.01
    doubled = _drawn("ch2-practice", "conditional_double.hidden")
    assert any(float(c.args[0]) == c.args[1] and c.args[1] != 0 for c in doubled)  # equal, and not 0


def _chapter_newton(a: float, tol: float) -> tuple[float, int] | None:
    """The chapter's loop as the text gives it, in float32 (a Python float is weakly typed), with
    no step cap: None when it does not stop within 10,000 updates."""
    a32, tol32 = np.float32(a), np.float32(tol)
    x = np.float32(1.0) if a32 < 1 else a32
    previous, k = x + np.float32(1.0), 0
    while abs(x - previous) >= tol32:
        if k == 10_000:
            return None
        x, previous, k = np.float32(0.5) * (x + a32 / x), x, k + 1
    return float(x), k


def _honest_on(a: float, tol: float = 1e-6) -> bool:
    done = _chapter_newton(a, tol)
    return done is not None and done[1] >= 1 and abs(done[0] - np.sqrt(a)) <= 1e-5 * np.sqrt(a)


@pytest.mark.parametrize("seed", range(8))
def test_the_chapter_s_newton_loop_stops_and_is_accurate_on_every_a_drawn(seed) -> None:
    for check in ("newton.hidden", "newton.iterations"):
        for case in _drawn("ch2-jit", check, seed):
            assert _chapter_newton(*case.args) is not None, case.args
            if case.args[1] == 1e-6:
                assert _honest_on(case.args[0]), case.args


def test_the_domain_of_a_stops_where_the_chapter_s_loop_does() -> None:
    """Beyond the declared bounds the chapter's loop is wrong: the bounds are not arbitrary."""
    domain = next(d for e in assignments.load("ch2-jit").spec.exercises for d in e.domains if d.argument == "a")
    assert _honest_on(domain.low) and _honest_on(domain.high)
    assert not _honest_on(2.0 ** 25)  # x0 + 1 == x0 in float32: no update at all
    assert not _honest_on(1e-11)  # the absolute tol stops it early


# ----------------------------------------------------------------------------- hints


NUMBER = re.compile(r"\d+(?:[.,]\d+)*(?:e-?\d+)?")


def stray_numbers(hint: str, allowed: str) -> set[str]:
    """Numbers a hint names that the exercise's own words (its requirements, its title, the
    check's title) do not: a hidden value or range."""
    return set(NUMBER.findall(hint)) - set(NUMBER.findall(allowed))


def test_the_old_hints_name_hidden_values() -> None:
    allowed = "newton_sqrt(a, tol) returns the square root of a; start from x0 = a (x0 = 1 if a < 1)"
    assert stray_numbers("a runs from 0.001 to 10,000: is the start value x0 = 1 for a < 1?", allowed) == \
        {"0.001", "10,000"}
    assert stray_numbers("other w, b, lr, and num_steps of 5, 6 and 37", "") == {"5", "6", "37"}
    assert not stray_numbers("is the start value x0 = 1 for a < 1?", allowed)


@pytest.mark.parametrize("assignment", assignments.available())
def test_no_hidden_check_s_hint_names_a_number_the_exercise_does_not(assignment) -> None:
    """Every assignment of the course, as `grade validate` holds it (the row HINTS_ITEM)."""
    from grader.course.validate import hint_problems

    assert hint_problems(assignments.load(assignment).spec) == []


def test_validate_names_a_hint_that_names_a_hidden_range() -> None:
    from grader.course.validate import hint_problems

    spec = assignments.load("ch2-practice").spec
    exercise = spec.exercises[0]
    checks = [c.model_copy(update={"hint": "n from 0 to 37"}) if c.hidden else c for c in exercise.checks]
    leaky = spec.model_copy(update={"exercises": [exercise.model_copy(update={"checks": checks})]})
    assert [(e, c) for e, c, why in hint_problems(leaky) if "37" in why] == [("sum_first", "hidden")]


# ----------------------------------------------------------------------------- what students get


def test_the_packed_spec_does_not_carry_the_hidden_domains() -> None:
    import tomllib

    from grader.course.pack import public_spec

    loaded = assignments.load("ch2-jit")
    public = public_spec(loaded, tomllib.loads((loaded.folder / "assignment.toml").read_text(encoding="utf-8")))
    assert not any("domains" in e for e in public["exercises"])


def test_hidden_leaks_still_finds_the_hidden_scalars() -> None:
    """tests/test_hidden_leaks.py searches student-facing text for the hidden scalars it draws."""
    from test_hidden_leaks import hidden_floats

    secrets = hidden_floats(types.SimpleNamespace(assignment="ch2-jit", seed=5))
    assert len(secrets) > 10 and all(v != int(v) for v in secrets)


def test_a_domain_names_functions_its_exercise_calls() -> None:
    with pytest.raises(ValidationError, match="no check of the exercise calls: a -> g"):
        _spec('[[exercises.domains]]\nargument = "a"\nfunctions = ["g"]\nposition = 0\n'
              'low = 1.0\nhigh = 2.0\nwhy = "t"\n')
