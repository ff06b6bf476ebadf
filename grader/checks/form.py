"""Form checks: a written answer has the form the exercise asks for, whatever it says.

"predictions: a list of 8 bools" says how many answers and of which kind before it says which:
a 7-item list, a string or a float among the bools is a wrong form, and telling the student so
reveals no answer, so the self-check judges it (`grader.judging.reveal`). The answers themselves
(answer checks, custom checks that observe the name) are judged only once the form holds: until
then each is `skipped` and points to the form check (`gate`), so a 7-item list gives one message,
not one per answer. The items' rule is the answer checks' own (`grader.checks.items`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grader.checks.base import PASSED, CheckOutcome, Context, ModuleRun, Seen, result_of
from grader.checks.items import answer_items, bool_like
from grader.kernel.protocol import Request, ValuesResult
from grader.spec import FormCheck
from grader.values import Tree, describe, from_wire

_ITEM = {"bool": "True or False", "letter": "one letter"}


def letter_like(item: Any) -> bool:
    """A string that is one letter once its spaces are taken out (case does not matter)."""
    if not isinstance(item, str):
        return False
    plain = "".join(item.split())
    return len(plain) == 1 and plain.isalpha()


def _item_ok(kind: str, item: Any) -> bool:
    return bool_like(item) is not None if kind == "bool" else letter_like(item)


def _what(value: Any) -> str:
    """What a value is, in a few words: its kind, never its whole content."""
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a dict"
    if isinstance(value, (list, tuple)):
        return "a list" if isinstance(value, list) else "a tuple"
    if isinstance(value, Tree):
        return f"a {value.type}"
    if value is None:
        return "None"
    shape = getattr(value, "shape", None)
    if shape == ():
        return f"a single value ({describe(value)})"
    if shape is not None:
        return f"an array of shape {tuple(shape)}"
    return describe(value)


def _listed(pairs: list[tuple[str, Any]], limit: int = 3) -> str:
    shown = ", ".join(f"{where} is {describe(item)}" for where, item in pairs[:limit])
    return shown + (f" (and {len(pairs) - limit} more)" if len(pairs) > limit else "")


def form_problem(spec: FormCheck, value: Any) -> str | None:
    """What is wrong with the form of `value` (the student's own value, so it may be quoted), or None."""
    if spec.length is not None:
        items = answer_items(value)
        if items is None:
            return f"it is {_what(value)}"
        if len(items) != spec.length:
            return f"it holds {len(items)}"
        wrong = [(f"item {k}", item) for k, item in enumerate(items, 1) if not _item_ok(spec.items, item)]
        return f"{_listed(wrong)}, not {_ITEM[spec.items]}" if wrong else None
    if not isinstance(value, dict):
        return f"it is {_what(value)}"
    known = {str(k) for k in spec.keys or []}
    strangers = [k for k in value if str(k) not in known]
    if strangers:
        return f"it has keys that are not among {', '.join(str(k) for k in spec.keys or [])}: " + \
            ", ".join(repr(k) for k in strangers[:5])
    wrong = [(f"the answer to {k}", item) for k, item in value.items() if not _item_ok(spec.items, item)]
    return f"{_listed(wrong)}, not {_ITEM[spec.items]}" if wrong else None


class FormCheckImpl:
    spec_type = FormCheck

    def __init__(self, full_id: str, spec: FormCheck, ctx: Context):
        self.full_id, self.spec = full_id, spec
        self.value = ctx.planner.value(spec.name)

    def requests(self) -> list[Request]:
        return [self.value]

    def runs(self) -> list[ModuleRun]:
        return []

    def judge(self, seen: Seen) -> CheckOutcome:
        spec = self.spec
        result = result_of(seen, self.value, ValuesResult, f"`{spec.name}`", spec.message)
        if isinstance(result, CheckOutcome):
            return result
        problem = form_problem(spec, from_wire(result.values[0]))
        if problem is None:
            return PASSED
        return CheckOutcome(status="failed", message=f"{spec.message}; {problem}")


@dataclass(frozen=True)
class Gate:
    """The form check an answer check waits for: its id and spec."""

    form_id: str
    spec: FormCheck

    def blocks(self, value: Any) -> CheckOutcome | None:
        """None when `value` has its form; else the gated check's verdict: not judged, see the form check."""
        if form_problem(self.spec, value) is None:
            return None
        return CheckOutcome(status="skipped", reason="same_cause", same_as=self.form_id,
                            message=f"not judged until `{self.spec.name}` has the form the exercise asks for")


def gate(ctx: Context, full_id: str, name: str) -> Gate | None:
    """The form check of this check's exercise on `name`, if the spec has one."""
    exercise_id = full_id.split(".", 1)[0]
    spec = getattr(ctx.assignment, "spec", None)  # a check built alone (a unit test) has no assignment
    for exercise in spec.exercises if spec is not None else []:
        if exercise.id != exercise_id:
            continue
        for check in exercise.checks:
            if isinstance(check, FormCheck) and check.name == name:
                return Gate(form_id=f"{exercise.id}.{check.id}", spec=check)
    return None
