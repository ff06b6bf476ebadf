"""Structure checks: the program has / lacks operations.

From the module (the default): the StableHLO operations of the very modules the value checks
execute (`while`, `case`, `select`...), read by the verifier, for every signature the check's
cases give, so a function that lowers differently for the check's inputs cannot hide. From the
kernel ("jaxpr" / "lowered"): the primitives the probe reports (forgeable by the student's code).
"""

from __future__ import annotations

from grader.cases import materialize, to_calls
from grader.checks.base import PASSED, CheckOutcome, Context, ModuleRun, Seen, failed, result_of, wrong_values
from grader.checks.numeric import disagreement, reference_values
from grader.checks.program import ProgramCalls, drawn_beyond, public_positions
from grader.probe.protocol import Request, TraceResult
from grader.spec import CompileLimitCheck, StructureCheck


class StructureCheckImpl:
    spec_type = StructureCheck

    def __init__(self, full_id: str, spec: StructureCheck, ctx: Context):
        self.full_id, self.spec = full_id, spec
        cases = materialize(spec.cases, ctx.assignment.references, ctx.seed, full_id)
        self.program: ProgramCalls | None = None
        self.trace = None
        self.expected_beyond: list | None = None
        self.cases = cases
        self.expected = reference_values(full_id, spec, ctx, cases)
        if spec.representation == "module":
            self.program = ProgramCalls(ctx.planner, spec.function, cases,
                                        public_positions(spec.public, spec.hidden, cases),
                                        inspect_only=self.expected is None, judged=False,
                                        beyond=drawn_beyond(ctx, spec))
            self.expected_beyond = reference_values(full_id, spec, ctx, self.program.beyond)
        else:
            self.trace = ctx.planner.trace(spec.function, to_calls(cases)[0], spec.representation)

    def requests(self) -> list[Request]:
        return list(self.program.exports) if self.program else [self.trace]  # type: ignore[list-item]

    def runs(self) -> list[ModuleRun]:
        return self.program.runs() if self.program else []

    def _sizes(self, seen: Seen) -> list[int]:
        """Operations in each module inspected (one per signature of the cases)."""
        assert self.program is not None
        return [o.facts.op_count for o in (seen.run(r) for r in self.program.runs())
                if o is not None and o.facts is not None]

    def _seen_ops(self, seen: Seen) -> tuple[set[str], str] | CheckOutcome:
        spec = self.spec
        if self.program:
            refused = self.program.misfit(seen, spec.message)
            if refused is not None:
                return refused
            runs = [seen.run(run) for run in self.program.runs()]
            if not all(o is not None and o.facts is not None and o.status != "refused" for o in runs):
                outcomes = self.program.outcomes(seen, spec.message)  # the verdict that says why
                return outcomes if isinstance(outcomes, CheckOutcome) else CheckOutcome(
                    status="error", message=f"{spec.message}: the verifier could not read the program")
            # the facts come from a job of their own: a program that hangs when run still has them
            common = set.intersection(*(set(o.facts.ops) for o in runs if o is not None and o.facts is not None))
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
        if spec.constant_size and len(set(self._sizes(seen))) > 1:
            sizes = sorted(set(self._sizes(seen)))
            return failed(spec.message, f"{what} grows with the input ({sizes[0]} to {sizes[-1]} operations "
                                        "for larger arrays): a Python loop over elements is unrolled into it")
        return self._agrees(seen)

    def _agrees(self, seen: Seen) -> CheckOutcome:
        """The program judged must also be a correct one: its values on the cases."""
        if self.program is None or self.expected is None:
            return PASSED
        return vouches(self.program, seen, self.spec, self.expected, self.expected_beyond)


def vouches(program: ProgramCalls, seen: Seen, spec: StructureCheck | CompileLimitCheck, expected: list,
            expected_beyond: list | None) -> CheckOutcome:
    """Whether the modules read for a structure or compile check compute the reference's values,
    on the check's cases and on the `beyond` ones (drawn, hidden), whichever value checks judge
    the same modules: a program counts as evidence only by being right beyond the notebook's
    examples, which a table of the notebook's answers is not. The beyond cases are not quoted:
    the check is visible, its cases may be hidden ones (the instructor sees them)."""
    answers = program.answers(seen, spec.message)
    if isinstance(answers, CheckOutcome):
        return answers
    why = disagreement(spec.function, program.cases, answers, expected, spec.output, spec.rtol, spec.atol)
    if why:
        return wrong_values(spec.message, f"the program inspected does not compute the right values: {why}")
    if not program.beyond or expected_beyond is None:
        return PASSED
    beyond = program.beyond_answers(seen, spec.message)
    if isinstance(beyond, CheckOutcome):
        return beyond.model_copy(update={"message": f"{spec.message}: the program inspected could not be run "
                                                    "beyond the notebook's examples", "counterexample": beyond.message})
    why = disagreement(spec.function, program.beyond, beyond, expected_beyond, spec.output, spec.rtol, spec.atol)
    if not why:
        return PASSED
    return wrong_values(spec.message, "the program inspected does not compute the right values beyond the "
                                      "notebook's examples").model_copy(update={"counterexample": why})
