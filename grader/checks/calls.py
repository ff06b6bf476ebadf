"""Calls checks: the helpers a function's text says it uses are called while it runs.

"A Python loop calling step num_steps times" and "by padding to bucket_size(len(x)) and calling
masked_mean" are rules of the function's `[[exercises.functions]]` entry (`calls`); this check
calls the function in the kernel, once per helper, with the probe counting that helper's calls
during each call (`CallRequest.count_calls`: every name bound to the helper or a wrapper of it, and
a `jax.jit` made of it, counts). JAX's caches are cleared before each call, so a jitted function
traces again and the helpers its Python calls while tracing count. A count equal to an argument
tells a Python loop (one call per step) from a `lax.fori_loop` (its body traced once); a helper
that is never called is a rule of the text not followed; with `uses_result`, a helper whose
results are thrown away (the function answers the same when they are moved by one) is too. The counts are the student's process's
claims: they can only be about the student's own function.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grader.cases import materialize
from grader.checks.base import PASSED, CheckOutcome, Context, ModuleRun, Seen, failed, result_of
from grader.checks.eager import aliased_calls
from grader.checks.numeric import _call_text
from grader.errors import AssignmentBug
from grader.kernel.protocol import CallRequest, Request, ValuesResult
from grader.spec import CallRule, CallsCheck


def _count_of(value: Any) -> int | None:
    """The whole number an argument holds (num_steps), else None."""
    arr = np.asarray(value)
    if arr.ndim != 0 or arr.dtype.kind not in "iu":
        return None
    return int(arr)


def _called(helper: str, count: int) -> str:
    """`called `step` once`, `did not call `step``."""
    if count == 0:
        return f"did not call `{helper}`"
    return f"called `{helper}` " + ("once" if count == 1 else f"{count} times")


class CallsCheckImpl:
    spec_type = CallsCheck

    def __init__(self, full_id: str, spec: CallsCheck, ctx: Context):
        self.full_id, self.spec = full_id, spec
        self.cases = materialize(spec.cases, ctx.assignment.references, ctx.seed, full_id)
        declared = ctx.assignment.spec.functions.get(spec.function)
        self.rules: list[CallRule] = list(declared.calls) if declared is not None else []
        for rule in self.rules:
            if rule.count_argument is None:
                continue
            short = [n for n, case in enumerate(self.cases) if rule.count_argument >= len(case.args)]
            if short:
                raise AssignmentBug(full_id, f"count_argument {rule.count_argument} of {rule.name} names no argument "
                                             f"of cases {short} (they pass {len(self.cases[short[0]].args)}; "
                                             "positions count from 0)")
            bad = [n for n, case in enumerate(self.cases) if _count_of(case.args[rule.count_argument]) is None]
            if bad:
                raise AssignmentBug(full_id, f"count_argument {rule.count_argument} of {rule.name} is not a whole "
                                             f"number in cases {bad}")
        calls = aliased_calls(self.cases, spec.same_object, full_id)
        self.counted: list[tuple[CallRule, CallRequest]] = [
            (rule, ctx.planner.call(spec.function, calls, count_calls=rule.name, perturb=rule.uses_result))
            for rule in self.rules]

    def requests(self) -> list[Request]:
        return [request for _, request in self.counted]

    def runs(self) -> list[ModuleRun]:
        return []

    def judge(self, seen: Seen) -> CheckOutcome:
        spec, fn = self.spec, self.spec.function
        counted: list[tuple[CallRule, list[int]]] = []
        used: list[tuple[CallRule, list[bool]]] = []
        for rule, request in self.counted:
            result = result_of(seen, request, ValuesResult, f"`{fn}`", spec.message)
            if isinstance(result, CheckOutcome):
                return result
            if len(result.counts or []) != len(self.cases):
                return CheckOutcome(status="error", message=f"{spec.message}: the probe's answer about `{fn}` "
                                                            "was unreadable")
            if rule.uses_result and len(result.uses or []) != len(self.cases):
                return CheckOutcome(status="error", message=f"{spec.message}: the probe's answer about `{fn}` "
                                                            "was unreadable")
            counted.append((rule, list(result.counts or [])))
            used.append((rule, list(result.uses or [])))
        for n, case in enumerate(self.cases):  # the first call that misses a rule, with every rule it misses
            why = None
            exact = [(rule, counts[n]) for rule, counts in counted if rule.count_argument is not None
                     and counts[n] != _count_of(case.args[rule.count_argument])]
            never = [f"`{rule.name}`" for rule, counts in counted if rule.count_argument is None and counts[n] < 1]
            if exact:
                rule, count = exact[0]
                why = (f"called with {_count_of(case.args[rule.count_argument])} as argument {rule.count_argument + 1}, "
                       f"`{fn}` {_called(rule.name, count)}")
            elif never:
                why = f"{_call_text(fn, case)} did not call {' or '.join(never)}"
            ignored = [f"`{rule.name}`" for (rule, uses), (_, counts) in zip(used, counted)
                       if rule.uses_result and counts[n] > 0 and not uses[n]]
            if not why and ignored:
                why = (f"{_call_text(fn, case)} calls {' and '.join(ignored)} but does not use what "
                       f"{'it returns' if len(ignored) == 1 else 'they return'}: its answer stays the same "
                       "when they return something else")
            if why:
                return failed(spec.message, why)
        return PASSED
