"""Check kinds, one module each, in one registry: `build` turns a spec entry into a check.

Adding a kind is one spec model in `grader.spec.CHECK_SPECS` and one implementation here, whose
`spec_type` names its model.
"""

from __future__ import annotations

from grader.checks.answer import AnswerCheckImpl
from grader.checks.base import Check, CheckOutcome, Context, ModuleRun, Planner, RunOutcome, Seen
from grader.checks.calls import CallsCheckImpl
from grader.checks.compilation import CompileLimitCheckImpl
from grader.checks.custom import CustomCheckImpl, Verdict
from grader.checks.eager import EagerCheckImpl
from grader.checks.form import FormCheckImpl
from grader.checks.interface import InterfaceCheckImpl
from grader.checks.numeric import NumericCheckImpl
from grader.checks.pure import PureCheckImpl
from grader.checks.structure import StructureCheckImpl
from grader.spec import CHECK_SPECS, CheckSpec

IMPLEMENTATIONS = (InterfaceCheckImpl, NumericCheckImpl, StructureCheckImpl, CompileLimitCheckImpl,
                   CustomCheckImpl, AnswerCheckImpl, EagerCheckImpl, FormCheckImpl, CallsCheckImpl, PureCheckImpl)
REGISTRY = {impl.spec_type: impl for impl in IMPLEMENTATIONS}
assert set(REGISTRY) == set(CHECK_SPECS), "every spec kind has exactly one implementation"


def build(exercise_id: str, spec: CheckSpec, ctx: Context) -> Check:
    return REGISTRY[type(spec)](f"{exercise_id}.{spec.id}", spec, ctx)


__all__ = ["Check", "CheckOutcome", "Context", "ModuleRun", "Planner", "RunOutcome", "Seen", "Verdict", "build"]
