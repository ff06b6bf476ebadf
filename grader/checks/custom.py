"""Custom checks: a function in the assignment's checks.py judges what the probe observed.

The function runs in the grader's process as `f(observed, **params)`: `observed` maps each name
of the check's `observe` list to its value (NumPy arrays, tuples, lists, dicts) and, when the
check has `call`, "calls" to a list of (Case, result) pairs. It returns a `Verdict`. If checks.py
defines `prepare()`, the pipeline runs it once in the background while the kernel starts (for
example to measure real JAX behaviour on the installed version). An observed name that a form
check of the exercise covers is judged only once it has that form (`grader.checks.form`).
"""

from __future__ import annotations

import copy
from typing import Any, Callable

from pydantic import BaseModel

from grader.cases import materialize
from grader.checks.base import PASSED, CheckOutcome, Context, ModuleRun, Seen, failed, result_of
from grader.checks.form import Gate, gate
from grader.checks.program import EagerFallback, StudentCalls, public_positions
from grader.errors import AssignmentBug
from grader.faults import one_line
from grader.kernel.protocol import Request, ValuesResult
from grader.spec import CustomCheck
from grader.values import from_wire


class Verdict(BaseModel):
    """What a custom check function returns."""

    passed: bool
    detail: str | None = None


class CustomCheckImpl:
    spec_type = CustomCheck

    def __init__(self, full_id: str, spec: CustomCheck, ctx: Context):
        self.full_id, self.spec = full_id, spec
        module = ctx.assignment.checks
        if module is None or not hasattr(module, spec.function):
            raise AssignmentBug(full_id, f"checks.py has no function {spec.function!r}")
        self.function: Callable[..., Verdict] = getattr(module, spec.function)
        self.cases = materialize(spec.cases, ctx.assignment.references, ctx.seed, full_id) if spec.cases else []
        self.values = {name: ctx.planner.value(name) for name in spec.observe}
        self.gates: dict[str, Gate] = {name: found for name in spec.observe
                                       if (found := gate(ctx, full_id, name)) is not None}
        self.calls = None
        if spec.call:
            self.calls = StudentCalls(ctx.planner, spec.call, self.cases, judged=ctx.assignment.spec.judged(spec.call),
                                      public=public_positions(spec.public, spec.hidden, self.cases))

    def requests(self) -> list[Request]:
        return list(self.values.values()) + (self.calls.requests() if self.calls else [])

    def runs(self) -> list[ModuleRun]:
        return self.calls.runs() if self.calls else []

    def fallbacks(self) -> list[EagerFallback]:
        return self.calls.fallbacks() if self.calls else []

    def judge(self, seen: Seen) -> CheckOutcome:
        observed: dict[str, Any] = {}
        for name, request in self.values.items():
            result = result_of(seen, request, ValuesResult, f"`{name}`", self.spec.message)
            if isinstance(result, CheckOutcome):
                return result
            observed[name] = from_wire(result.values[0])
        for name, waits_for in self.gates.items():  # answers are judged once they have their form
            blocked = waits_for.blocks(observed[name])
            if blocked is not None:
                return blocked
        if self.calls:
            answers = self.calls.answers(seen, self.spec.message)
            if isinstance(answers, CheckOutcome):
                return answers
            observed["calls"] = list(zip(copy.deepcopy(self.cases), answers))
        try:  # copies: the check is built once for many submissions (judging.plan), and the
            # assignment's function may change what it is given
            verdict = self.function(observed, **copy.deepcopy(self.spec.params))
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - on a student's odd answer: that check's error
            return _could_not_judge(self.spec, f"{self.spec.function} raised {one_line(exc)}")
        if not isinstance(verdict, Verdict):
            return _could_not_judge(self.spec, f"{self.spec.function} returned a {type(verdict).__name__}, "
                                               "not a Verdict")
        return PASSED if verdict.passed else failed(self.spec.message, verdict.detail or "not as expected")


def _could_not_judge(spec: CustomCheck, why: str) -> CheckOutcome:
    return CheckOutcome(status="error", message=f"{spec.message}: this answer could not be checked",
                        judge_error=why)
