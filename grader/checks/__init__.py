"""Check kinds, one module each; `build` turns a spec entry into a runnable check."""

from __future__ import annotations

from grader.checks.answer import AnswerCheckImpl
from grader.checks.base import Check, CheckOutcome, Context
from grader.checks.compilation import CompileLimitCheckImpl
from grader.checks.custom import CustomCheckImpl, Verdict
from grader.checks.interface import InterfaceCheckImpl
from grader.checks.numeric import NumericCheckImpl
from grader.checks.structure import StructureCheckImpl
from grader.spec import CheckSpec

_KINDS = {
    "interface": InterfaceCheckImpl,
    "numeric": NumericCheckImpl,
    "structure": StructureCheckImpl,
    "compile_limit": CompileLimitCheckImpl,
    "custom": CustomCheckImpl,
    "answer": AnswerCheckImpl,
}


def build(exercise_id: str, spec: CheckSpec, ctx: Context) -> Check:
    return _KINDS[spec.kind](f"{exercise_id}.{spec.id}", spec, ctx)


__all__ = ["Check", "CheckOutcome", "Context", "Verdict", "build"]
