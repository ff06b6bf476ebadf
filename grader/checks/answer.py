"""Answer checks: a written answer (a quiz's letter, a number) matches one of the accepted ones.

Answers come in every form the text allows (docs/writing-an-assignment.md, "How answers are
compared"): "a list of 8 bools" is any sequence of 8 bool-like values (`grader.checks.items` states
that rule once; it is imported here too, where an assignment's checks.py finds it). An item is
judged only once its answer has the form a form check of the exercise asks for
(`grader.checks.form`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grader.checks.base import PASSED, CheckOutcome, Context, ModuleRun, Seen, failed, not_answered, result_of
from grader.checks.form import gate
from grader.checks.items import answer_items, bool_like
from grader.kernel.protocol import Request, ValuesResult
from grader.spec import AnswerCheck
from grader.values import describe, from_wire


def _normal(value: Any) -> Any:
    """Strings compare without case and spaces; numbers and booleans by value."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, str):
        return "".join(value.split()).lower()
    return value


def _matches(given: Any, accepted: Any) -> bool:
    """A bool answer is matched by any bool-like value (and only by one: 1.0 is no bool)."""
    if isinstance(accepted, bool):
        return bool_like(given) is accepted
    given = _normal(given)
    return isinstance(given, (str, bool, int, float)) and given == _normal(accepted)


class AnswerCheckImpl:
    spec_type = AnswerCheck

    def __init__(self, full_id: str, spec: AnswerCheck, ctx: Context):
        self.full_id, self.spec = full_id, spec
        self.value = ctx.planner.value(spec.name)
        self.gate = gate(ctx, full_id, spec.name)

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
        items = answer_items(value)
        if items is not None and isinstance(key, int) and 0 <= key < len(items):
            return True, items[key]
        return False, None

    def judge(self, seen: Seen) -> CheckOutcome:
        spec = self.spec
        result = result_of(seen, self.value, ValuesResult, f"`{spec.name}`", spec.message)
        if isinstance(result, CheckOutcome):
            return result
        value = from_wire(result.values[0])
        blocked = self.gate.blocks(value) if self.gate is not None else None
        if blocked is not None:
            return blocked
        found, item = self._item(value)
        if not found or item is None or (isinstance(item, str) and not item.strip()):
            return not_answered(spec.name, defined=True, item=spec.key)
        if any(_matches(item, a) for a in spec.accept):
            return PASSED
        return failed(spec.message, f"answer {spec.key!r} is {describe(item)}")
