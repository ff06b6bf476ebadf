"""What an assignment's checks call, and with which values: the interface mutants are derived from.

Read from the spec and the cases its checks draw (with `grade validate`'s seed), in the grader's
process: for each student function, the exercises and checks that call it, the values each
argument position takes, the operations its structure checks require, whether the spec asks for
it to be jitted and its arguments traced; for each name read as a value, the checks that read it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from grader.assignment import Assignment
from grader.cases import Case, materialize
from grader.spec import (
    AnswerCheck,
    CallsCheck,
    CompileLimitCheck,
    CustomCheck,
    EagerCheck,
    InterfaceCheck,
    NumericCheck,
    PureCheck,
    StructureCheck,
)

MAX_CONSTANTS = 3  # values tried per argument when it is replaced by a constant
MAX_LITERAL_SIZE = 64  # array elements a constant may have, written out in the mutant's code


class StructureNeed(BaseModel):
    """A structure check on the exported module of a function: what it requires."""

    check: str
    contains: list[str]
    constant_size: bool
    loop: str | None = Field(default=None, description="the kind of while loop it requires (StructureCheck.loop)")
    case_chooses_output: bool = False


class FunctionUse(BaseModel):
    """A student function as the spec's checks use it."""

    name: str
    exercises: list[str] = Field(default_factory=list)
    checks: list[str] = Field(default_factory=list, description="full ids of the checks that call it")
    arity: int = 0
    constants: dict[int, list[str]] = Field(default_factory=dict, description=(
        "per argument position, up to MAX_CONSTANTS values the checks pass there, as Python literals"))
    largest_int: int = Field(default=0, description="the largest whole number the checks pass it (a loop's bound)")
    structure: list[StructureNeed] = Field(default_factory=list)
    jitted_checks: list[str] = Field(default_factory=list, description="checks that require a jax.jit result")
    compile_checks: list[str] = Field(default_factory=list)
    varying: list[int] = Field(default_factory=list, description=(
        "positions a compile check varies with Python scalars: the arguments that must stay traced"))
    judged: str = Field(default="traced", description=(
        "how its text has it judged (FunctionSpec.judged): which honest forms it gets "
        "(grader/course/mutation/honest_forms.py): un-jitted, host NumPy and a Python loop where jit is "
        "optional, the plain-Python forms where the text prescribes plain Python"))
    sample: list[Any] = Field(default_factory=list, description="the first call's arguments, to introspect it")
    own_checks: list[str] = Field(default_factory=list, description=(
        "every check that calls it, whatever its kind (`checks`, and the eager, calls and pure checks, which "
        "call it in the kernel): what an honest form of it alone must pass (honest_forms.py)"))


class NameUse(BaseModel):
    """A name whose value the checks read (predictions, quiz answers)."""

    name: str
    exercises: list[str] = Field(default_factory=list)
    checks: list[str] = Field(default_factory=list)
    keys: dict[str, list[str]] = Field(default_factory=dict, description=(
        "answer checks: the key (as a Python literal) -> the accepted answers' literals"))


class Interface(BaseModel):
    functions: dict[str, FunctionUse] = Field(default_factory=dict)
    names: dict[str, NameUse] = Field(default_factory=dict)
    helpers: list[str] = Field(default_factory=list, description=(
        "the helpers the spec's `calls` rules count by name (a setup cell's `damp`): part of the interface"))


def literal(value: Any) -> str | None:
    """Python source for a case value, or None when it is too large to write out."""
    if type(value) in (bool, int, float):
        return repr(value)
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        return f"_np.{value.dtype.name}({value.item()!r})"
    if isinstance(value, np.ndarray):
        if value.size > MAX_LITERAL_SIZE:
            return None
        return f"_np.asarray({value.tolist()!r}, dtype=_np.{value.dtype.name})"
    return None


def _whole(value: Any) -> int | None:
    if type(value) is int or (isinstance(value, np.integer) and np.ndim(value) == 0):
        return int(value)
    return None


def _spread(values: list[str]) -> list[str]:
    """At most MAX_CONSTANTS of the distinct values: the first, the middle and the last seen."""
    distinct = list(dict.fromkeys(values))
    if len(distinct) <= MAX_CONSTANTS:
        return distinct
    return [distinct[0], distinct[len(distinct) // 2], distinct[-1]]


def check_calls(check: Any, assignment: Assignment, seed: int, full_id: str) -> tuple[str | None, list[Case]]:
    """(the function a check calls, the cases it calls it with)."""
    refs = assignment.references
    if isinstance(check, (NumericCheck, StructureCheck, CompileLimitCheck)):
        return check.function, materialize(check.cases, refs, seed, full_id)
    if isinstance(check, InterfaceCheck):
        source = check.cases or (check.returns.cases if check.returns else None)
        return check.name, materialize(source, refs, seed, full_id) if source else []
    if isinstance(check, CustomCheck) and check.call and check.cases:
        return check.call, materialize(check.cases, refs, seed, full_id)
    return None, []


def derive(assignment: Assignment, seed: int) -> Interface:
    """The interface the spec's checks use, with the cases they draw for `seed`."""
    found = Interface(helpers=sorted({rule.name for exercise in assignment.spec.exercises
                                      for function in exercise.functions for rule in function.calls}))
    per_position: dict[str, dict[int, list[str]]] = {}
    called_by: dict[str, list[str]] = {}
    for exercise in assignment.spec.exercises:
        for check in exercise.checks:
            full_id = f"{exercise.id}.{check.id}"
            if isinstance(check, (EagerCheck, CallsCheck, PureCheck)):
                called_by.setdefault(check.function, []).append(full_id)
            function, cases = check_calls(check, assignment, seed, full_id)
            if function is not None:
                called_by.setdefault(function, []).append(full_id)
            if isinstance(check, CustomCheck):
                for observed in check.observe:
                    _name_use(found, observed, exercise.id, full_id)
            if isinstance(check, AnswerCheck):
                use = _name_use(found, check.name, exercise.id, full_id)
                key = repr(check.key)
                use.keys[key] = [repr(a) for a in check.accept]
            if function is None:
                continue
            use = found.functions.setdefault(function, FunctionUse(name=function))
            if exercise.id not in use.exercises:
                use.exercises.append(exercise.id)
            use.checks.append(full_id)
            use.judged = assignment.spec.judged(function)
            if cases and not use.sample:
                use.sample = list(cases[0].args)
            for case in cases:
                use.arity = max(use.arity, len(case.args))
                for position, value in enumerate(case.args):
                    code = literal(value)
                    if code is not None:
                        per_position.setdefault(function, {}).setdefault(position, []).append(code)
                    whole = _whole(value)
                    if whole is not None:
                        use.largest_int = max(use.largest_int, whole)
            if isinstance(check, StructureCheck) and check.representation == "module":
                use.structure.append(StructureNeed(check=full_id, contains=list(check.contains),
                                                   constant_size=check.constant_size, loop=check.loop,
                                                   case_chooses_output=check.case_chooses_output))
            if isinstance(check, InterfaceCheck) and check.jitted:
                use.jitted_checks.append(full_id)
            if isinstance(check, CompileLimitCheck):
                use.compile_checks.append(full_id)
                for position in range(min(len(c.args) for c in cases) if cases else 0):
                    values = {repr(c.args[position]) for c in cases}
                    scalar = all(type(c.args[position]) in (int, float) for c in cases)
                    if scalar and len(values) > 1 and position not in use.varying:
                        use.varying.append(position)
    for function, positions in per_position.items():
        found.functions[function].constants = {p: _spread(v) for p, v in sorted(positions.items())}
    for function, use in found.functions.items():
        use.own_checks = called_by.get(function, [])
    return found


def _name_use(found: Interface, name: str, exercise: str, check: str) -> NameUse:
    use = found.names.setdefault(name, NameUse(name=name))
    if exercise not in use.exercises:
        use.exercises.append(exercise)
    use.checks.append(check)
    return use
