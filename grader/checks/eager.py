"""Eager checks: a function called in the kernel as the chapter's own cells call it, whatever its
mode: for what only a call shows. `same_object` passes one object for several arguments, as the
chapter's cell passes `_w0 = _b0 = jnp.float32(0.0)` as both w and b (a function that donates both
buffers cannot be called that way); and what the chapter's cell asserts of a result without a
reference value: `at_least` ("there should be at least 1 iteration") and `increasing` ("a smaller
tol should take more iterations", from one call to the next). The values are the student's
process's claims: they can only be about the student's own function (docs/security.md, "Where
values come from").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grader.cases import Case, materialize, to_calls
from grader.checks.base import PASSED, CheckOutcome, Context, ModuleRun, Seen, failed, result_of, wrong_values
from grader.checks.numeric import _call_text, disagreement, reference_values, select
from grader.errors import AssignmentBug
from grader.kernel.protocol import Call, CallRequest, Request, SameObject, ValuesResult
from grader.spec import EagerCheck
from grader.values import describe, from_wire


def aliased_calls(cases: list[Case], groups: list[list[int]], check_id: str) -> list[Call]:
    """The calls with each group's later positions given the first position's object."""
    calls = to_calls(cases)
    if not groups:
        return calls
    out = []
    for n, (case, call) in enumerate(zip(cases, calls)):
        same: dict[int, SameObject] = {}
        for group in groups:
            first, *rest = group
            if max(group) >= len(case.args):
                raise AssignmentBug(check_id, f"same_object names argument {max(group)}, beyond the case's arguments")
            for position in rest:
                if not np.array_equal(np.asarray(case.args[position]), np.asarray(case.args[first])):
                    raise AssignmentBug(check_id, f"same_object: arguments {first} and {position} differ in case {n}")
                same[position] = SameObject(call=n, arg=first)
        out.append(call.model_copy(update={"same_as": same}))
    return out


def _real(value: Any) -> float | None:
    """The real number a result holds (an iteration count as an int or a float), else None."""
    if isinstance(value, (bool, int, float, np.ndarray, np.generic)):
        arr = np.asarray(value)
        if arr.ndim == 0 and arr.dtype.kind in "iuf" and np.isfinite(float(arr)):
            return float(arr)
    return None


class EagerCheckImpl:
    spec_type = EagerCheck

    def __init__(self, full_id: str, spec: EagerCheck, ctx: Context):
        self.full_id, self.spec = full_id, spec
        self.cases = materialize(spec.cases, ctx.assignment.references, ctx.seed, full_id)
        self.reference_values = reference_values(full_id, spec, ctx, self.cases)
        self.call: CallRequest = ctx.planner.call(spec.function, aliased_calls(self.cases, spec.same_object, full_id))

    def requests(self) -> list[Request]:
        return [self.call]

    def runs(self) -> list[ModuleRun]:
        return []

    def judge(self, seen: Seen) -> CheckOutcome:
        spec, fn = self.spec, self.spec.function
        result = result_of(seen, self.call, ValuesResult, f"`{fn}`", spec.message)
        if isinstance(result, CheckOutcome):
            return result
        if len(result.values) != len(self.cases):
            return CheckOutcome(status="error", message=f"{spec.message}: the probe's answer about `{fn}` was unreadable")
        answers = [from_wire(v) for v in result.values]
        if spec.at_least is not None or spec.increasing:
            why = self._order(answers)
            if why:
                return failed(spec.message, why)
        if self.reference_values is None and all(c.expected is None for c in self.cases):
            return PASSED
        expected = self.reference_values if self.reference_values is not None else [c.expected for c in self.cases]
        why = disagreement(fn, self.cases, answers, expected, spec.output, spec.rtol, spec.atol)
        return wrong_values(spec.message, why) if why else PASSED

    def _order(self, answers: list[Any]) -> str | None:
        """Why item `output` of the answers is not as the chapter's cell asks: a number, at least
        `at_least`, growing from each call to the next (the first call that is not)."""
        spec = self.spec
        seen: list[tuple[str, float, str]] = []
        for case, answer in zip(self.cases, answers):
            call, item = _call_text(spec.function, case), select(answer, spec.output)
            which = f"item {spec.output} of what {call} returned" if spec.output is not None else call
            value = _real(item)
            if value is None:
                return f"{which} is {describe(item)}, not a number"
            if spec.at_least is not None and value < spec.at_least:
                return f"{which} is {describe(item)}, less than {spec.at_least:g}"
            if spec.increasing and seen and not value > seen[-1][1]:
                before, _, shown = seen[-1]
                return f"{which} is {describe(item)}, not more than the {shown} of {before}"
            seen.append((call, value, describe(item)))
        return None
