"""Compile-count limits: at most N XLA compilations over a call sequence.

From the module (the default): JAX compiles a function once per distinct signature of its traced
arguments, so the function must export with every argument traced (nothing baked, none static:
the module's inputs are all of them), and the calls must have at most N distinct signatures.
That is the evidence a pass needs; the kernel's count of compilation events during the calls, on
cleared caches, is a second signal (it sees a function that builds a fresh jit on every call),
which can only fail a check, never pass one. Only a function judged 'traced' has such a check
(`grader.spec.FunctionSpec`).
"""

from __future__ import annotations

from grader.cases import materialize, to_calls
from grader.checks.base import PASSED, CheckOutcome, Context, ModuleRun, Seen, failed, result_of
from grader.checks.evidence import vouches
from grader.checks.numeric import reference_values
from grader.checks.program import ProgramCalls, drawn_beyond
from grader.kernel.protocol import CompileCountResult, Request
from grader.spec import CompileLimitCheck
from grader.values import describe


class CompileLimitCheckImpl:
    spec_type = CompileLimitCheck

    def __init__(self, full_id: str, spec: CompileLimitCheck, ctx: Context):
        self.full_id, self.spec = full_id, spec
        self.cases = materialize(spec.cases, ctx.assignment.references, ctx.seed, full_id)
        self.expected = reference_values(full_id, spec, ctx, self.cases)
        self.program = ProgramCalls(ctx.planner, spec.function, self.cases, set(),
                                    inspect_only=self.expected is None, judged=False,
                                    beyond=drawn_beyond(ctx, spec))
        self.expected_beyond = reference_values(full_id, spec, ctx, self.program.beyond)
        self.count = ctx.planner.compile_count(spec.function, to_calls(self.cases))

    def requests(self) -> list[Request]:
        return [*self.program.exports, self.count]

    def runs(self) -> list[ModuleRun]:
        return self.program.runs()

    def _counted(self, seen: Seen) -> CheckOutcome:
        spec = self.spec
        result = result_of(seen, self.count, CompileCountResult, f"`{spec.function}`", spec.message)
        if isinstance(result, CheckOutcome):
            return result
        if result.compiles > spec.max_compiles:
            return failed(spec.message, f"it compiled {result.compiles} times over {len(self.cases)} calls "
                                        f"(at most {spec.max_compiles} allowed)" + self._why(seen))
        return PASSED

    def judge(self, seen: Seen) -> CheckOutcome:
        evidence = self._module_evidence(seen)
        return evidence if evidence is not PASSED else self._counted(seen)

    def _count_result(self, seen: Seen) -> CompileCountResult | None:
        observation = seen.of(self.count)
        result = observation.result if observation is not None else None
        return result if isinstance(result, CompileCountResult) else None

    def _why(self, seen: Seen) -> str:
        """Why it recompiled: a jit made anew at each call when the very same call compiles again;
        JAX's own cache-miss explanation (`jax_explain_cache_misses`) when it has one (a new shape,
        dtype or weak type), else the static argument whose value the calls change (JAX 0.12 says
        only "explanation unavailable" for that)."""
        result = self._count_result(seen)
        if result is not None and result.again:
            return ("; it compiled again when called once more with the very same arguments: a jax.jit made "
                    "anew at each call (inside the function, or around it each time it is called) compiles "
                    "every time, so make the jitted function once and call it")
        reasons = list(dict.fromkeys(result.why)) if result else []
        if reasons:
            shown = "; ".join(reasons[:2]) + (f"; and {len(reasons) - 2} more" if len(reasons) > 2 else "")
            return f". JAX explains the recompile: {shown}"
        return self._varying(result)

    def _varying(self, counted: CompileCountResult | None) -> str:
        """Why a static argument recompiles here: "`tol` is static and changes from 0.01 to 1e-4"
        (the arguments jax.jit marks static, by the kernel's word, else every Python number the
        calls vary)."""
        if not self.cases:
            return ""
        names = counted.arguments if counted else []
        static = set(counted.static) if counted else set()
        width = min(len(c.args) for c in self.cases)
        parts = []
        for position in range(width):
            values = [c.args[position] for c in self.cases]
            if not (all(type(v) in (int, float) for v in values) and len(set(values)) > 1):
                continue
            name = names[position] if position < len(names) else None
            if static and name not in static:
                continue
            distinct = list(dict.fromkeys(values))
            shown = " to ".join(describe(v) for v in distinct[:3]) + (" and on" if len(distinct) > 3 else "")
            label = f"`{name}`" if name else f"argument {position + 1}"
            parts.append(f"{label} {'is static and ' if name in static else ''}changes from {shown}")
        if not parts:
            return ""
        return (f"; it recompiled because {' and '.join(parts)} over the calls: "
                "a static argument compiles again for each new value")

    def _module_evidence(self, seen: Seen) -> CheckOutcome:
        spec = self.spec
        exported = self.program.exported(seen, spec.message)
        if isinstance(exported, CheckOutcome):
            text = exported.message or ""
            if exported.cause == "static":  # an argument static: what the calls vary, in the check's words
                return failed(spec.message, text + self._varying(self._count_result(seen))).model_copy(
                    update={"cause": "static", "raised": exported.raised})
            if exported.status == "error" and exported.cause == "trace":  # not traceable
                return failed(spec.message, text + " (with every argument traced, as the calls vary them)"
                              + self._varying(self._count_result(seen))).model_copy(update={"cause": "trace"})
            return exported
        for run in self.program.runs():  # before the general refusal: this one says why it recompiles
            outcome, expected = seen.run(run), len(run.export.args)
            if outcome is not None and outcome.facts is not None and outcome.facts.inputs != expected:
                return failed(spec.message, f"its program takes {outcome.facts.inputs} of its {expected} arguments "
                                            "as inputs: an argument is static, so each new value compiles again"
                                            + self._varying(self._count_result(seen)))
        outcomes = self.program.outcomes(seen, spec.message)
        if isinstance(outcomes, CheckOutcome):
            return outcomes
        if any(outcome.facts is None for outcome in outcomes):
            return CheckOutcome(status="error", message=f"{spec.message}: the verifier could not read the program")
        if len(exported) > spec.max_compiles:
            return failed(spec.message, f"its {len(self.cases)} calls have {len(exported)} different shapes or "
                                        f"dtypes, so it compiles {len(exported)} times (at most {spec.max_compiles})"
                                        + self._why(seen))
        if self.expected is not None:  # the module whose inputs are the evidence must be a correct one
            return vouches(self.program, seen, spec, self.expected, self.expected_beyond)
        return PASSED
