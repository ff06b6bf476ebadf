"""Answer checks: a written answer (a quiz's letter, a number) matches one of the accepted ones."""

from __future__ import annotations

from typing import Any

import numpy as np

from grader.checks.base import PASSED, CheckOutcome, Context, ModuleRun, Seen, failed, result_of
from grader.probe.protocol import Request, ValuesResult
from grader.spec import AnswerCheck
from grader.values import describe, from_wire


def _normal(value: Any) -> Any:
    """Strings compare without case and spaces; numbers and booleans by value."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, str):
        return "".join(value.split()).lower()
    return value


class AnswerCheckImpl:
    spec_type = AnswerCheck

    def __init__(self, full_id: str, spec: AnswerCheck, ctx: Context):
        self.full_id, self.spec = full_id, spec
        self.value = ctx.planner.value(spec.name)

    def requests(self) -> list[Request]:
        return [self.value]

    def runs(self) -> list[ModuleRun]:
        return []

    def _item(self, value: Any) -> tuple[bool, Any]:
        key = self.spec.key
        if key is None:
            return True, value
        if isinstance(value, dict):
            return str(key) in value, value.get(str(key))
        if isinstance(value, (list, tuple)) and isinstance(key, int) and 0 <= key < len(value):
            return True, value[key]
        return False, None

    def judge(self, seen: Seen) -> CheckOutcome:
        spec = self.spec
        result = result_of(seen, self.value, ValuesResult, f"`{spec.name}`", spec.message)
        if isinstance(result, CheckOutcome):
            return result
        value = from_wire(result.values[0])
        found, item = self._item(value)
        if not found or item is None or (isinstance(item, str) and not item.strip()):
            return CheckOutcome(status="failed", message=f"Not answered yet: `{spec.name}` has no answer {spec.key!r}.")
        given = _normal(item)
        if isinstance(given, (str, bool, int, float)) and any(given == _normal(a) for a in spec.accept):
            return PASSED
        return failed(spec.message, f"answer {spec.key!r} is {describe(item)}")
