"""Structure checks: the program has / lacks operations.

From the module (the default): the StableHLO operations of the very modules the value checks
execute (`while`, `case`, `select`...), read by the verifier, for every signature the check's
cases give, so a function that lowers differently for the check's inputs cannot hide. From the
kernel ("jaxpr" / "lowered"): the primitives the probe reports (forgeable by the student's code).
"""

from __future__ import annotations

from grader.cases import materialize, to_calls
from grader.checks.base import PASSED, CheckOutcome, Context, ModuleRun, Seen, failed, result_of
from grader.checks.program import ProgramCalls, public_positions
from grader.probe.protocol import Request, TraceResult
from grader.spec import StructureCheck


class StructureCheckImpl:
    spec_type = StructureCheck

    def __init__(self, full_id: str, spec: StructureCheck, ctx: Context):
        self.full_id, self.spec = full_id, spec
        cases = materialize(spec.cases, ctx.assignment.references, ctx.seed, full_id)
        self.program: ProgramCalls | None = None
        self.trace = None
        if spec.representation == "module":
            self.program = ProgramCalls(ctx.planner, spec.function, cases,
                                        public_positions(spec.public, spec.hidden, cases), inspect_only=True)
        else:
            self.trace = ctx.planner.trace(spec.function, to_calls(cases)[0], spec.representation)

    def requests(self) -> list[Request]:
        return list(self.program.exports) if self.program else [self.trace]  # type: ignore[list-item]

    def runs(self) -> list[ModuleRun]:
        return self.program.runs() if self.program else []

    def _seen_ops(self, seen: Seen) -> tuple[set[str], str] | CheckOutcome:
        spec = self.spec
        if self.program:
            outcomes = self.program.outcomes(seen, spec.message)
            if isinstance(outcomes, CheckOutcome):
                return outcomes
            common = set.intersection(*(set(o.facts.ops if o.facts else []) for o in outcomes))
            return common, "its exported program"
        result = result_of(seen, self.trace, TraceResult, f"tracing `{spec.function}`", spec.message)  # type: ignore[arg-type]
        if isinstance(result, CheckOutcome):
            return result
        return set(result.primitives), "its jaxpr" if spec.representation == "jaxpr" else "its lowered StableHLO"

    def judge(self, seen: Seen) -> CheckOutcome:
        spec = self.spec
        found = self._seen_ops(seen)
        if isinstance(found, CheckOutcome):
            return found
        ops, what = found
        lacking = [p for p in spec.contains if p not in ops]
        if lacking:
            listed = ", ".join(sorted(ops)[:12]) or "none"
            return failed(spec.message, f"{what} has no {' / '.join(lacking)} (it has: {listed})")
        present = [p for p in spec.absent if p in ops]
        if present:
            return failed(spec.message, f"{what} contains {', '.join(present)}")
        return PASSED
