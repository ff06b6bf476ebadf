"""Interface checks: the name exists, is callable, is a jax.jit result, accepts N arguments,
returns a structure.

"Is wrapped in jax.jit" is what `jax.export` itself accepts (the export's evidence), not an
attribute the function carries; the returned structure is read from the values of its exported
program (or, for a function judged eagerly, from what the kernel reports).
"""

from __future__ import annotations

import numpy as np

from grader.cases import materialize
from grader.checks.base import PASSED, CheckOutcome, Context, ModuleRun, Seen, failed, result_of
from grader.checks.program import EagerFallback, ProgramCalls, StudentCalls, public_positions
from grader.kernel.protocol import LookupResult, Parameter, PyScalar, Request
from grader.spec import InterfaceCheck
from grader.values import describe, unpack

_KINDS = {"float": "f", "int": "iu", "bool": "b"}


def accepts(parameters: list[Parameter], n: int) -> bool:
    """Whether a call with n positional arguments binds to these parameters."""
    positional = [p for p in parameters if p.kind in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")]
    required = sum(1 for p in positional if not p.has_default)
    required_kw = any(p.kind == "KEYWORD_ONLY" and not p.has_default for p in parameters)
    unlimited = any(p.kind == "VAR_POSITIONAL" for p in parameters)
    return not required_kw and required <= n and (unlimited or n <= len(positional))


class InterfaceCheckImpl:
    spec_type = InterfaceCheck

    def __init__(self, full_id: str, spec: InterfaceCheck, ctx: Context):
        self.full_id, self.spec = full_id, spec
        self.lookup = ctx.planner.lookup(spec.name)
        self.jit_program: ProgramCalls | None = None
        if spec.jitted and spec.cases is not None:
            cases = materialize(spec.cases, ctx.assignment.references, ctx.seed, full_id)
            every = set(range(max((len(c.args) for c in cases), default=0)))  # only jax.export's test matters here
            self.jit_program = ProgramCalls(ctx.planner, spec.name, cases, every, inspect_only=True)
        self.returns: StudentCalls | None = None
        if spec.returns:
            cases = materialize(spec.returns.cases, ctx.assignment.references, ctx.seed, full_id)
            self.returns = StudentCalls(ctx.planner, spec.name, cases, judged=ctx.assignment.spec.judged(spec.name),
                                        public=public_positions(spec.returns.public, spec.hidden, cases))

    def requests(self) -> list[Request]:
        reqs: list[Request] = [self.lookup]
        if self.jit_program:
            reqs += self.jit_program.exports
        if self.returns:
            reqs += self.returns.requests()
        return reqs

    def runs(self) -> list[ModuleRun]:
        return (self.jit_program.runs() if self.jit_program else []) + (self.returns.runs() if self.returns else [])

    def fallbacks(self) -> list[EagerFallback]:
        return self.returns.fallbacks() if self.returns else []

    def judge(self, seen: Seen) -> CheckOutcome:
        name, hint = self.spec.name, self.spec.message
        found = result_of(seen, self.lookup, LookupResult, f"`{name}`", hint)
        if isinstance(found, CheckOutcome):
            return found
        if not found.is_callable:
            return failed(hint, f"`{name}` is a {found.type_name}, not a function")
        if self.spec.arity is not None and found.parameters is not None and not accepts(found.parameters, self.spec.arity):
            names = ", ".join(p.name for p in found.parameters)
            return failed(hint, f"`{name}({names})` cannot be called with {self.spec.arity} positional arguments")
        if self.jit_program:
            verdict = self._judge_jitted(seen)
            if verdict is not PASSED:
                return verdict
        if self.returns:
            return self._judge_returns(seen)
        return PASSED

    def _judge_jitted(self, seen: Seen) -> CheckOutcome:
        assert self.jit_program is not None
        exported = self.jit_program.exported(seen, self.spec.message)
        if isinstance(exported, CheckOutcome):
            return exported
        for result in exported:
            if not result.jitted:
                return failed(self.spec.message, f"`{self.spec.name}` is not a jax.jit function: jax.export refused "
                                                 f"it ({result.jit_refused or 'not the result of jit'})")
        return PASSED

    def _judge_returns(self, seen: Seen) -> CheckOutcome:
        assert self.spec.returns is not None and self.returns is not None
        shape, hint, name = self.spec.returns, self.spec.message, self.spec.name
        answers = self.returns.answers(seen, hint)
        if isinstance(answers, CheckOutcome):
            return answers
        wire = self.returns.wire_values(seen) or []
        for n, got in enumerate(answers):
            items = [got] if shape.length is None else unpack(got, shape.length)
            if items is None:
                return failed(hint, f"`{name}` returned {describe(got)}, not a tuple of {shape.length} values")
            for i, (item, kind) in enumerate(zip(items, shape.kinds or [])):
                if kind == "any":
                    continue
                if kind == "python_int":
                    raw = wire[n] if n < len(wire) else None
                    if not (isinstance(raw, PyScalar) and type(raw.v) is int):
                        return failed(hint, f"`{name}` should return a plain Python int, got {describe(got)}"
                                            + (f" (dtype {got.dtype})" if isinstance(got, np.ndarray) else ""))
                    continue
                which = f"item {i} of what `{name}` returns" if shape.length is not None else f"what `{name}` returns"
                if not isinstance(item, np.ndarray) or item.ndim != 0 or item.dtype.kind not in _KINDS[kind]:
                    what = f"dtype {item.dtype}, shape {item.shape}" if isinstance(item, np.ndarray) else describe(item)
                    return failed(hint, f"{which} should be a scalar {kind}, got {what}")
        return PASSED
