"""Compile-count limits: at most N XLA compilations over a call sequence, counted in the kernel.

The probe counts compilation events between the first and the last call of the sequence (inputs
are built before it starts counting), so eager array creation and earlier cells never count.
"""

from __future__ import annotations

from grader.cases import materialize, to_calls
from grader.checks.base import CheckOutcome, Context, PASSED, failed, result_of
from grader.probe.protocol import CompileCountRequest, CompileCountResult, Observation, Request
from grader.spec import CompileLimitCheck


class CompileLimitCheckImpl:
    def __init__(self, full_id: str, spec: CompileLimitCheck, ctx: Context):
        self.full_id, self.spec = full_id, spec
        cases = materialize(spec.cases, ctx.assignment.references, ctx.seed, full_id)
        self.calls = to_calls(cases)

    def requests(self) -> list[Request]:
        return [CompileCountRequest(id=f"{self.full_id}/count", target=self.spec.function, calls=self.calls)]

    def judge(self, observations: dict[str, Observation]) -> CheckOutcome:
        spec = self.spec
        result = result_of(observations, f"{self.full_id}/count", CompileCountResult,
                           f"`{spec.function}`", spec.message)
        if isinstance(result, CheckOutcome):
            return result
        n = result.compiles
        if n > spec.max_compiles:
            return failed(spec.message, f"it compiled {n} times over {len(self.calls)} calls "
                                        f"(at most {spec.max_compiles} allowed)")
        return PASSED
