"""Interface checks: the name exists, is callable, is jitted, accepts N arguments, returns a shape."""

from __future__ import annotations

import numpy as np

from grader.cases import materialize, to_calls
from grader.checks.base import CheckOutcome, Context, PASSED, failed, result_of
from grader.probe.protocol import CallRequest, LookupRequest, LookupResult, Observation, Parameter, Request, ValuesResult
from grader.spec import InterfaceCheck
from grader.values import describe, from_wire, unpack

_KINDS = {"float": "f", "int": "iu", "bool": "b"}


def accepts(parameters: list[Parameter], n: int) -> bool:
    """Whether a call with n positional arguments binds to these parameters."""
    positional = [p for p in parameters if p.kind in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")]
    required = sum(1 for p in positional if not p.has_default)
    required_kw = any(p.kind == "KEYWORD_ONLY" and not p.has_default for p in parameters)
    unlimited = any(p.kind == "VAR_POSITIONAL" for p in parameters)
    return not required_kw and required <= n and (unlimited or n <= len(positional))


class InterfaceCheckImpl:
    def __init__(self, full_id: str, spec: InterfaceCheck, ctx: Context):
        self.full_id, self.spec = full_id, spec
        self.cases = materialize(spec.returns.cases, ctx.assignment.references, ctx.seed, full_id) if spec.returns else []

    def requests(self) -> list[Request]:
        reqs: list[Request] = [LookupRequest(id=f"{self.full_id}/lookup", name=self.spec.name)]
        if self.spec.returns:
            reqs.append(CallRequest(id=f"{self.full_id}/returns", target=self.spec.name, calls=to_calls(self.cases)))
        return reqs

    def judge(self, observations: dict[str, Observation]) -> CheckOutcome:
        name, hint = self.spec.name, self.spec.message
        found = result_of(observations, f"{self.full_id}/lookup", LookupResult, f"`{name}`", hint)
        if isinstance(found, CheckOutcome):
            return found
        if not found.is_callable:
            return failed(hint, f"`{name}` is a {found.type_name}, not a function")
        if self.spec.jitted and not found.is_jitted:
            return failed(hint, f"`{name}` is a plain {found.type_name}, not wrapped in jax.jit (it has no .lower)")
        if self.spec.arity is not None and found.parameters is not None and not accepts(found.parameters, self.spec.arity):
            names = ", ".join(p.name for p in found.parameters)
            return failed(hint, f"`{name}({names})` cannot be called with {self.spec.arity} positional arguments")
        if self.spec.returns:
            return self._judge_returns(observations)
        return PASSED

    def _judge_returns(self, observations: dict[str, Observation]) -> CheckOutcome:
        assert self.spec.returns is not None
        shape, hint, name = self.spec.returns, self.spec.message, self.spec.name
        result = result_of(observations, f"{self.full_id}/returns", ValuesResult, f"`{name}`", hint)
        if isinstance(result, CheckOutcome):
            return result
        for value in result.values:
            got = from_wire(value)
            items = unpack(got, shape.length)
            if items is None:
                return failed(hint, f"`{name}` returned {describe(got)}, not a tuple of {shape.length} values")
            for i, (item, kind) in enumerate(zip(items, shape.kinds or [])):
                if kind == "any":
                    continue
                if not isinstance(item, np.ndarray) or item.ndim != 0 or item.dtype.kind not in _KINDS[kind]:
                    what = f"dtype {item.dtype}, shape {item.shape}" if isinstance(item, np.ndarray) else describe(item)
                    return failed(hint, f"item {i} of what `{name}` returns should be a scalar {kind}, got {what}")
        return PASSED
