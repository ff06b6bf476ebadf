"""Answer checks: a written answer (a quiz's letter, a number) matches one of the accepted ones.

Answers come in every form the text allows (docs/writing-an-assignment.md, "How answers are compared"): "a list of 8
bools" is any sequence of 8 bool-like values. `answer_items` and `bool_like` state that rule once,
for answer checks and for an assignment's custom checks of answers (the detective's predictions).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grader.checks.base import PASSED, CheckOutcome, Context, ModuleRun, Seen, failed, not_answered, result_of
from grader.kernel.protocol import Request, ValuesResult
from grader.spec import AnswerCheck
from grader.values import Tree, describe, from_wire


def answer_items(value: Any) -> list[Any] | None:
    """The items of a sequence of answers, in order, or None when it is not one: a list, a tuple,
    a NamedTuple (or another pytree's leaves) or a 1-D array (NumPy or JAX). A dict, a string, a
    scalar or an array of another rank is not a sequence of answers."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, Tree):
        return list(value.leaves)
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return [value[i] for i in range(value.shape[0])]
    return None


def bool_like(item: Any) -> bool | None:
    """True or False for a bool-like answer, else None. Bool-like: a Python, NumPy or JAX bool,
    and the integers 0 and 1 (which Python itself treats as False and True); not a float, a string,
    None, nor any other number."""
    if isinstance(item, np.ndarray) and item.ndim == 0:
        item = item.item()
    if isinstance(item, (bool, np.bool_)):
        return bool(item)
    if isinstance(item, (int, np.integer)) and int(item) in (0, 1):
        return bool(int(item))
    return None


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
        found, item = self._item(value)
        if not found or item is None or (isinstance(item, str) and not item.strip()):
            return not_answered(spec.name, defined=True, item=spec.key)
        if any(_matches(item, a) for a in spec.accept):
            return PASSED
        return failed(spec.message, f"answer {spec.key!r} is {describe(item)}")
