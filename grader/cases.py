"""Inputs of a check: literal rows from the spec, or cases drawn by a seeded generator.

Hidden inputs come from generators in the assignment's references.py; a generator with a
`domains` parameter gets its exercise's declared argument domains (grader.domains draws from
them). Each check gets its own NumPy Generator derived from (run seed, check id), so a regrade
with the same seed draws the same inputs whatever order the checks run in, and adding a check
never changes another's draw.
"""

from __future__ import annotations

import hashlib
import inspect
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from grader.errors import AssignmentBug
from grader.faults import instructor_code
from grader.kernel.protocol import Call
from grader.spec import Cases
from grader.values import to_wire


@dataclass(frozen=True)
class Case:
    """One call of a student's function, and optionally the value it should return."""

    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    expected: Any = None


def to_calls(cases: list[Case]) -> list[Call]:
    """The calls as they travel to the probe."""
    return [Call(args=[to_wire(a) for a in c.args], kwargs={k: to_wire(v) for k, v in c.kwargs.items()})
            for c in cases]


def rng_for(seed: int, check_id: str) -> np.random.Generator:
    digest = hashlib.sha256(check_id.encode()).digest()
    return np.random.default_rng([seed, int.from_bytes(digest[:8], "little")])


def _literal(value: Any, kind: str) -> Any:
    if kind == "py":
        return value
    return np.asarray(value, dtype=kind)


def _takes_domains(generator: Any) -> bool:
    """Does the generator draw from its exercise's declared domains (a `domains` keyword)?"""
    try:
        return "domains" in inspect.signature(generator).parameters
    except (TypeError, ValueError):
        return False


def materialize(cases: Cases, references: ModuleType | None, seed: int, check_id: str) -> list[Case]:
    """The concrete calls for a check (raises for a broken spec or generator: an instructor bug)."""
    if cases.rows is not None:
        assert cases.types is not None
        return [Case(args=tuple(_literal(v, t) for v, t in zip(row, cases.types))) for row in cases.rows]
    if references is None or not hasattr(references, cases.generator or ""):
        raise AssignmentBug(check_id, f"generator {cases.generator!r} is not defined in references.py")
    generator = getattr(references, cases.generator)
    params = dict(cases.params)
    if _takes_domains(generator):
        params["domains"] = cases.domains
    with instructor_code(f"{check_id}: generator {cases.generator}"):
        drawn = generator(rng_for(seed, cases.draw_key or check_id), **params)
        return [c if isinstance(c, Case) else Case(args=tuple(c)) for c in drawn]
