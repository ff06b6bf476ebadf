"""Structure checks: the jaxpr (or lowered StableHLO) of one call has / lacks primitives."""

from __future__ import annotations

from grader.cases import materialize, to_calls
from grader.checks.base import CheckOutcome, Context, PASSED, failed, result_of
from grader.probe.protocol import Observation, Request, TraceRequest, TraceResult
from grader.spec import StructureCheck


class StructureCheckImpl:
    def __init__(self, full_id: str, spec: StructureCheck, ctx: Context):
        self.full_id, self.spec = full_id, spec
        self.call = to_calls(materialize(spec.cases, ctx.assignment.references, ctx.seed, full_id))[0]

    def requests(self) -> list[Request]:
        return [TraceRequest(id=f"{self.full_id}/trace", target=self.spec.function, call=self.call,
                             representation=self.spec.representation)]

    def judge(self, observations: dict[str, Observation]) -> CheckOutcome:
        spec = self.spec
        what = "its jaxpr" if spec.representation == "jaxpr" else "its lowered StableHLO"
        result = result_of(observations, f"{self.full_id}/trace", TraceResult, f"tracing `{spec.function}`",
                           spec.message)
        if isinstance(result, CheckOutcome):
            return result
        seen = set(result.primitives)
        lacking = [p for p in spec.contains if p not in seen]
        if lacking:
            listed = ", ".join(sorted(seen)[:12]) or "none"
            return failed(spec.message, f"{what} has no {' / '.join(lacking)} (it has: {listed})")
        present = [p for p in spec.absent if p in seen]
        if present:
            return failed(spec.message, f"{what} contains {', '.join(present)}")
        return PASSED
