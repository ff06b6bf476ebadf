"""Numeric checks: the student's values agree with a reference within rtol/atol, shapes included.

The expected values come from the grader's side only: a NumPy reference in references.py
evaluated here, or values a generator drew with the inputs; never another of the student's
functions. The student's values come from executing the exported program in the verifier (or,
for source "kernel", from the kernel).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from grader.cases import Case, materialize
from grader.checks.base import PASSED, CheckOutcome, Context, ModuleRun, Seen, failed, wrong_values
from grader.checks.program import EagerFallback, StudentCalls, public_positions
from grader.faults import instructor_code
from grader.kernel.protocol import OpaqueValue, Request
from grader.spec import NumericCheck
from grader.values import Tree, compared, describe, to_wire, unpack


def mismatch(actual: Any, expected: Any, rtol: float, atol: float, *, values: bool = True) -> str | None:
    """Why `actual` is not close to `expected`, or None when it is (recursing into containers).

    Several values are compared by their leaves (`values.unpack`): a NamedTuple, a list or a
    1-D array of two numbers is as good as a tuple of two, as `w, b = step(...)` shows. With
    `values=False` only the form is compared (how many values, shapes, numbers at all): what a
    check judges when another check of the same inputs already judged their values.
    """
    if isinstance(expected, Tree):  # "agrees with" another function that returned a pytree
        expected = expected.leaves
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or set(actual) != {str(k) for k in expected}:
            return f"returned {describe(actual)}, expected a dict with keys {sorted(map(str, expected))}"
        for key, want in expected.items():
            why = mismatch(actual[str(key)], want, rtol, atol, values=values)
            if why:
                return f"item {key!r} {why}"
        return None
    if isinstance(expected, (tuple, list)):
        items = unpack(actual, len(expected))
        if items is None:
            return f"returned {describe(actual)}, expected {len(expected)} values"
        for i, (a, e) in enumerate(zip(items, expected)):
            why = mismatch(a, e, rtol, atol, values=values)
            if why:
                return f"item {i} {why}"
        return None
    integral = _integers(expected)
    expected = np.asarray(expected, dtype=np.float64)
    if not isinstance(actual, np.ndarray):
        return f"returned {describe(actual)}, expected {describe(expected)}"
    if actual.shape != expected.shape:
        return f"returned shape {actual.shape}, expected shape {expected.shape}"
    if actual.dtype.kind == "c":
        if np.any(actual.imag != 0):
            return "returned complex numbers, expected real ones"
        actual = actual.real
    if actual.dtype.kind not in "biuf":
        return f"returned dtype {actual.dtype}, expected numbers"
    if not values:
        return None
    if integral is not None and actual.dtype.kind in "iu" and rtol == 0 and atol < 1:
        close = actual.astype(object) == integral.astype(object)  # counts beyond 2**53: exact, not float64
        close = np.asarray(close, dtype=bool).reshape(actual.shape)
        expected = integral
    else:
        got = actual.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            close = np.isclose(got, expected, rtol=rtol, atol=atol)
    if close.all():
        return None
    if expected.ndim == 0:
        shown, want = compared(actual.item(), expected.item(), rtol, atol)
        return f"returned {shown}, expected {want}"
    idx = tuple(int(i) for i in np.argwhere(~close)[0])
    shown, want = compared(actual[idx].item(), expected[idx].item(), rtol, atol)
    return (f"element {idx if len(idx) > 1 else idx[0]} is {shown}, expected {want} "
            f"({int((~close).sum())} of {close.size} elements differ)")


def _integers(expected: Any) -> np.ndarray | None:
    """The expected value as exact integers, when it is whole numbers (a count, a size: compared
    exactly, as Python compares ints, not in float64, where 2**53 + 1 == 2**53), else None."""
    if isinstance(expected, bool) or isinstance(expected, np.bool_):
        return None
    if isinstance(expected, int):
        return np.asarray(expected, dtype=object)
    arr = np.asarray(expected)
    return arr if arr.dtype.kind in "iu" else None


def expected_size(expected: Any) -> int:
    """How many numbers an expected answer holds (its leaves' elements)."""
    if isinstance(expected, Tree):
        expected = expected.leaves
    if isinstance(expected, dict):
        return sum(expected_size(v) for v in expected.values())
    if isinstance(expected, (tuple, list)):
        return sum(expected_size(v) for v in expected)
    return int(np.asarray(expected).size)


def agreeing(actual: Any, expected: Any, rtol: float, atol: float) -> int:
    """How many of the expected numbers `actual` gets right, element by element (0 for the whole
    of a part whose form is wrong: a missing value, another shape, not numbers)."""
    if isinstance(expected, Tree):
        expected = expected.leaves
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or set(actual) != {str(k) for k in expected}:
            return 0
        return sum(agreeing(actual[str(k)], want, rtol, atol) for k, want in expected.items())
    if isinstance(expected, (tuple, list)):
        items = unpack(actual, len(expected))
        return 0 if items is None else sum(agreeing(a, e, rtol, atol) for a, e in zip(items, expected))
    if mismatch(actual, expected, rtol, atol, values=False):
        return 0
    got = np.real(actual).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        return int(np.isclose(got, np.asarray(expected, dtype=np.float64), rtol=rtol, atol=atol).sum())


def _elements(value: Any) -> set[float] | None:
    """The distinct numbers of an argument, or None for one that is not numbers."""
    try:
        arr = np.asarray(value)
    except Exception:  # noqa: BLE001 - a case the instructor wrote: anything that is not numbers
        return None
    if arr.dtype.kind not in "biuf":
        return None
    return set(arr.astype(np.float64).ravel().tolist())


def covers(case: Case, other: Case) -> bool:
    """Whether every argument of `case` holds only numbers that the same argument of `other`
    holds (a reshape of it, a part of it, one of its elements): calling with `case` asks nothing
    about the function's values that calling with `other` did not."""
    if case.kwargs != other.kwargs or len(case.args) != len(other.args):
        return False
    for mine, theirs in zip(case.args, other.args):
        a, b = _elements(mine), _elements(theirs)
        if a is None or b is None or not a <= b:
            return False
    return True


def _numpy_args(case: Case) -> tuple[tuple, dict]:
    return case.args, case.kwargs


def _call_text(function: str, case: Case) -> str:
    parts = [describe(np.asarray(a)) if isinstance(a, (np.ndarray, np.generic)) else describe(a) for a in case.args]
    parts += [f"{k}={v!r}" for k, v in case.kwargs.items()]
    text = ", ".join(parts)
    return f"{function}({text if len(text) < 120 else text[:117] + '...'})"


class NumericCheckImpl:
    spec_type = NumericCheck

    def __init__(self, full_id: str, spec: NumericCheck, ctx: Context):
        self.full_id, self.spec = full_id, spec
        self.cases = materialize(spec.cases, ctx.assignment.references, ctx.seed, full_id)
        self.reference_values = reference_values(full_id, spec, ctx, self.cases)
        overrides = {k: to_wire(v) for k, v in spec.set_globals.items()}
        judged, public = ctx.assignment.spec.judged(spec.function), public_positions(spec.public, spec.hidden,
                                                                                      self.cases)
        self.calls = StudentCalls(ctx.planner, spec.function, self.cases, judged=judged, public=public,
                                  set_globals=overrides)
        # the same calls without the globals: whether the globals are what changed the answers
        self.without = (StudentCalls(ctx.planner, spec.function, self.cases, judged=judged, public=public)
                        if overrides else None)

    def _both(self) -> list[StudentCalls]:
        return [self.calls] + ([self.without] if self.without is not None else [])

    def requests(self) -> list[Request]:
        return [r for calls in self._both() for r in calls.requests()]

    def runs(self) -> list[ModuleRun]:
        return [r for calls in self._both() for r in calls.runs()]

    def fallbacks(self) -> list[EagerFallback]:
        return [f for calls in self._both() for f in calls.fallbacks()]

    def baseline_ids(self) -> set[str]:
        """The requests of the calls without the globals: asked after every other request of the
        batch (`grader.judging.plan.observe_all`), so the calls that set globals meet the student's
        code where they met it before the baseline existed (a function that reads the global on
        every other trace would otherwise escape it: found by an attack)."""
        return {r.id for r in self.without.requests()} if self.without is not None else set()

    def globals_changed_nothing(self, seen: Seen, answers: list[Any] | None = None) -> bool:
        """Whether the function answers every call the same without the globals the check sets:
        then its wrong answers are its values' fault, not a global's (found by an attack: an lr
        capped at 1000 was told "must use its lr argument" by the checks that set a global)."""
        if self.without is None:
            return False
        if answers is None:
            answers = self.calls.answers(seen, self.spec.message)
        plain = self.without.answers(seen, self.spec.message)
        if isinstance(answers, CheckOutcome) or isinstance(plain, CheckOutcome) or len(plain) != len(answers):
            return False
        return all(mismatch(a, _expected_form(b), self.spec.rtol, self.spec.atol) is None
                   for a, b in zip(answers, plain))

    def judge(self, seen: Seen) -> CheckOutcome:
        hint, fn = self.spec.message, self.spec.function
        answers = self.calls.answers(seen, hint)
        if isinstance(answers, CheckOutcome):
            return answers
        expected = self.reference_values if self.reference_values is not None else [c.expected for c in self.cases]
        why = disagreement(fn, self.cases, answers, expected, self.spec.output, self.spec.rtol, self.spec.atol)
        if not why:
            return PASSED
        wrong = sum(1 for value, want in zip(answers, expected)
                    if mismatch(select(value, self.spec.output), want, self.spec.rtol, self.spec.atol))
        if self.globals_changed_nothing(seen, answers):
            return wrong_values(globals_unused(self.spec), why).model_copy(
                update={"tally": (wrong or 1, len(self.cases)), "reason": "globals_unused"})
        # a wrong shape is a wrong answer too: the other checks of the function it fails point here
        return wrong_values(hint, why).model_copy(update={"tally": (wrong or 1, len(self.cases))})

    def retests(self, other: object) -> bool:
        """Whether this check calls the function only on inputs `other`, a value check of the same
        function and reference, already called it on: then it measures something else than those
        values (the shape of what comes back, that it runs under jax.jit), and when they are wrong
        it is judged on that alone (`judge_form`), the values being `other`'s to report."""
        if not isinstance(other, NumericCheckImpl) or other is self:
            return False
        mine, theirs = self.spec, other.spec
        if (mine.function, mine.reference, mine.output, mine.set_globals) != \
                (theirs.function, theirs.reference, theirs.output, theirs.set_globals):
            return False
        return bool(self.cases) and all(any(covers(case, seen) for seen in other.cases) for case in self.cases)

    def judge_form(self, seen: Seen, enough: Fraction) -> CheckOutcome | None:
        """The check's own property when the values of its inputs are another check's failure:
        the function runs (traced, under jax.jit for a module) and returns answers of the
        reference's form (how many values, their shapes, numbers). None when the program is no
        attempt at the function (right on less than `enough` of the values: a decoy, an identity
        borrowed as its trace), so that its values decide."""
        hint, fn = self.spec.message, self.spec.function
        answers = self.calls.answers(seen, hint)
        if isinstance(answers, CheckOutcome):
            return answers
        expected = self.reference_values if self.reference_values is not None else [c.expected for c in self.cases]
        if len(answers) != len(self.cases):
            return failed(hint, f"`{fn}` gave {len(answers)} answers for {len(self.cases)} calls")
        for case, value, want in zip(self.cases, answers, expected):
            why = mismatch(select(value, self.spec.output), want, self.spec.rtol, self.spec.atol, values=False)
            if why:
                return failed(hint, f"{_call_text(fn, case)} {why}")
        right = sum(agreeing(select(value, self.spec.output), want, self.spec.rtol, self.spec.atol)
                    for value, want in zip(answers, expected))
        total = sum(expected_size(want) for want in expected)
        return PASSED if total and Fraction(right, total) >= enough else None


def globals_unused(spec: NumericCheck) -> str:
    """The sentence of a check that sets globals, for wrong answers that are the same without them
    (no input or value in it: it is what a hidden check's student reads)."""
    names = " or ".join(f"`{name}`" for name in sorted(spec.set_globals))
    return (f"`{spec.function}` gives wrong values on this check's inputs, the same ones without a global {names}: "
            "the global is not the cause, its values are")


def _expected_form(value: Any) -> Any:
    """An answer as `mismatch` takes an expected value (its containers as lists, its leaves as arrays)."""
    if isinstance(value, Tree):
        return list(value.leaves)
    if isinstance(value, dict):
        return {k: _expected_form(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_expected_form(v) for v in value]
    return value


def select(value: Any, index: int | None) -> Any:
    """Item `index` of a several-valued answer (by its leaves), or the answer itself."""
    if index is None:
        return value
    items = list(value.leaves) if isinstance(value, Tree) else value
    if isinstance(items, (tuple, list)) and len(items) > index:
        return items[index]
    return OpaqueValue(type=type(value).__name__, repr=f"{describe(value)}, which has no item {index}")


def disagreement(function: str, cases: list[Case], answers: list[Any], expected: list[Any],
                 output: int | None, rtol: float, atol: float) -> str | None:
    """Why the answers to the cases are not the expected ones (the first call that differs)."""
    if len(answers) != len(cases):
        return f"`{function}` gave {len(answers)} answers for {len(cases)} calls"
    for case, value, want in zip(cases, answers, expected):
        why = mismatch(select(value, output), want, rtol, atol)
        if why:
            return f"{_call_text(function, case)} {why}"
    return None


def reference_values(full_id: str, spec: Any, ctx: Context, cases: list[Case]) -> list[Any] | None:
    """The reference's values on the cases (instructor code: an exception is the assignment's bug)."""
    if not spec.reference:
        return None
    reference = getattr(ctx.assignment.references, spec.reference)
    with instructor_code(f"{full_id}: reference {spec.reference}"):
        return [reference(*args, **kwargs) for args, kwargs in map(_numpy_args, cases)]
