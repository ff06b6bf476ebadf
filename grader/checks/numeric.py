"""Numeric checks: the student's values agree with a reference within rtol/atol, shapes included.

The expected values come from the grader's side only: a NumPy reference in references.py
evaluated here, values a generator drew with the inputs, or (for "agrees with") another of the
student's functions called by the probe on the very same inputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grader.cases import Case, materialize, to_calls
from grader.checks.base import CheckOutcome, Context, PASSED, failed, result_of
from grader.faults import instructor_code
from grader.probe.protocol import CallRequest, Observation, OpaqueValue, Request, ValuesResult
from grader.spec import NumericCheck
from grader.values import Tree, describe, from_wire, to_wire, unpack


def mismatch(actual: Any, expected: Any, rtol: float, atol: float) -> str | None:
    """Why `actual` is not close to `expected`, or None when it is (recursing into containers).

    Several values are compared by their leaves (`values.unpack`): a NamedTuple, a list or a
    1-D array of two numbers is as good as a tuple of two, as `w, b = step(...)` shows.
    """
    if isinstance(expected, Tree):  # "agrees with" another function that returned a pytree
        expected = expected.leaves
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or set(actual) != {str(k) for k in expected}:
            return f"returned {describe(actual)}, expected a dict with keys {sorted(map(str, expected))}"
        for key, want in expected.items():
            why = mismatch(actual[str(key)], want, rtol, atol)
            if why:
                return f"item {key!r} {why}"
        return None
    if isinstance(expected, (tuple, list)):
        items = unpack(actual, len(expected))
        if items is None:
            return f"returned {describe(actual)}, expected {len(expected)} values"
        for i, (a, e) in enumerate(zip(items, expected)):
            why = mismatch(a, e, rtol, atol)
            if why:
                return f"item {i} {why}"
        return None
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
    got = actual.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.isclose(got, expected, rtol=rtol, atol=atol)
    if close.all():
        return None
    if expected.ndim == 0:
        return f"returned {describe(got)}, expected {describe(expected)}"
    idx = tuple(int(i) for i in np.argwhere(~close)[0])
    return (f"element {idx if len(idx) > 1 else idx[0]} is {got[idx].item()!r}, expected {expected[idx].item()!r} "
            f"({int((~close).sum())} of {close.size} elements differ)")


def _numpy_args(case: Case) -> tuple[tuple, dict]:
    return case.args, case.kwargs


def _call_text(function: str, case: Case) -> str:
    parts = [describe(np.asarray(a)) if isinstance(a, (np.ndarray, np.generic)) else repr(a) for a in case.args]
    parts += [f"{k}={v!r}" for k, v in case.kwargs.items()]
    text = ", ".join(parts)
    return f"{function}({text if len(text) < 120 else text[:117] + '...'})"


class NumericCheckImpl:
    def __init__(self, full_id: str, spec: NumericCheck, ctx: Context):
        self.full_id, self.spec = full_id, spec
        self.cases = materialize(spec.cases, ctx.assignment.references, ctx.seed, full_id)
        self.reference_values: list[Any] | None = None
        if spec.reference:
            reference = getattr(ctx.assignment.references, spec.reference)
            with instructor_code(f"{full_id}: reference {spec.reference}"):
                self.reference_values = [reference(*args, **kwargs) for args, kwargs in map(_numpy_args, self.cases)]

    def requests(self) -> list[Request]:
        overrides = {k: to_wire(v) for k, v in self.spec.set_globals.items()}
        reqs: list[Request] = [CallRequest(id=f"{self.full_id}/actual", target=self.spec.function,
                                           calls=to_calls(self.cases), jit=self.spec.jit, set_globals=overrides)]
        if self.spec.against:
            reqs.append(CallRequest(id=f"{self.full_id}/against", target=self.spec.against, calls=to_calls(self.cases)))
        return reqs

    def _select(self, value: Any) -> Any:
        index = self.spec.output
        if index is None:
            return value
        items = list(value.leaves) if isinstance(value, Tree) else value
        if isinstance(items, (tuple, list)) and len(items) > index:
            return items[index]
        return OpaqueValue(type=type(value).__name__, repr=f"{describe(value)}, which has no item {index}")

    def _expected(self, observations: dict[str, Observation]) -> list[Any] | CheckOutcome:
        if self.reference_values is not None:
            return self.reference_values
        if self.spec.against:
            result = result_of(observations, f"{self.full_id}/against", ValuesResult,
                               f"`{self.spec.against}`", self.spec.message)
            if isinstance(result, CheckOutcome):
                return result
            return [self._select(from_wire(v)) for v in result.values]
        return [c.expected for c in self.cases]

    def judge(self, observations: dict[str, Observation]) -> CheckOutcome:
        hint, fn = self.spec.message, self.spec.function
        result = result_of(observations, f"{self.full_id}/actual", ValuesResult,
                           f"`{fn}`" + (" under jax.jit" if self.spec.jit else ""), hint)
        if isinstance(result, CheckOutcome):
            return result
        expected = self._expected(observations)
        if isinstance(expected, CheckOutcome):
            return expected
        for case, value, want in zip(self.cases, result.values, expected):
            why = mismatch(self._select(from_wire(value)), want, self.spec.rtol, self.spec.atol)
            if why:
                return failed(hint, f"{_call_text(fn, case)} {why}")
        return PASSED
