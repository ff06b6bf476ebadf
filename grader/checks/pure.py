"""Pure checks: a function its text calls pure changes nothing outside itself while it runs.

The probe calls it in the kernel on the check's cases with JAX's caches cleared first (a jitted
function then traces during the call, so what its Python does at trace time shows, and what the
compiled call does too) and reports what changed outside it: a global bound, rebound or mutated
(a list appended to), a variable of an enclosing function, an argument, the global random state
(grader/kernel/inside/state.py). Printing is not state. What the probe reports is the student's
process's claim: it can only cost the student's own function this check.
"""

from __future__ import annotations

from grader.cases import materialize, to_calls
from grader.checks.base import PASSED, CheckOutcome, Context, ModuleRun, Seen, failed, result_of
from grader.kernel.protocol import CallRequest, Request, ValuesResult
from grader.spec import PureCheck


class PureCheckImpl:
    spec_type = PureCheck

    def __init__(self, full_id: str, spec: PureCheck, ctx: Context):
        self.full_id, self.spec = full_id, spec
        self.cases = materialize(spec.cases, ctx.assignment.references, ctx.seed, full_id)
        self.call: CallRequest = ctx.planner.call(spec.function, to_calls(self.cases), watch=True)

    def requests(self) -> list[Request]:
        return [self.call]

    def runs(self) -> list[ModuleRun]:
        return []

    def judge(self, seen: Seen) -> CheckOutcome:
        spec, fn = self.spec, self.spec.function
        result = result_of(seen, self.call, ValuesResult, f"`{fn}`", spec.message)
        if isinstance(result, CheckOutcome):
            return result
        if result.mutated is None:
            return CheckOutcome(status="error", message=f"{spec.message}: the probe's answer about `{fn}` was unreadable")
        if result.mutated:
            shown = "; ".join(result.mutated[:3]) + (f"; and {len(result.mutated) - 3} more" if len(result.mutated) > 3
                                                     else "")
            return failed(spec.message, f"while `{fn}` ran (traced and called), {shown}: a pure function only "
                                        "computes its result from its arguments")
        return PASSED
