"""What the reference solution's functions are and return: the facts output mutants need.

Run in a worker process (it imports JAX and executes the instructor's reference module, never a
student's): each function is called once on the first case the checks give it, and its output's
leaves (kind, shape) are read, with whether it is a jax.jit result and its parameters' defaults.
"""

from __future__ import annotations

import inspect
from typing import Any, Literal

from pydantic import BaseModel, Field


class Leaf(BaseModel):
    kind: Literal["float", "int", "bool", "other"]
    ndim: int


class FunctionFacts(BaseModel):
    name: str
    jitted: bool
    defaults: dict[int, str] = Field(default_factory=dict, description="position -> repr of its default")
    leaves: list[Leaf] = Field(default_factory=list)
    container: str = Field(default="leaf", description="leaf, tuple, list or other: how the leaves come back")
    error: str | None = Field(default=None, description="why it could not be called on its first case")


class ReferenceFacts(BaseModel):
    functions: dict[str, FunctionFacts] = Field(default_factory=dict)
    values: dict[str, str] = Field(default_factory=dict, description="name -> repr of the reference's value")


def _leaf(value: Any) -> Leaf:
    import numpy as np

    kind = np.asarray(value).dtype.kind if not isinstance(value, (str, bytes)) else "O"
    mapped = {"f": "float", "i": "int", "u": "int", "b": "bool"}.get(kind, "other")
    return Leaf(kind=mapped, ndim=int(np.ndim(value)) if mapped != "other" else 0)  # type: ignore[arg-type]


def _defaults(fn: Any) -> dict[int, str]:
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return {}
    return {i: repr(p.default) for i, p in enumerate(parameters)
            if p.default is not inspect.Parameter.empty and type(p.default) in (bool, int, float)}


def introspect(source: str, samples: dict[str, list[Any]], names: list[str]) -> ReferenceFacts:
    """Execute the reference module `source`, then call each function on its sample arguments."""
    import jax

    namespace: dict[str, Any] = {"__name__": "__reference__"}
    exec(compile(source, "<reference>", "exec"), namespace)  # noqa: S102 - the instructor's solution
    facts = ReferenceFacts()
    for name, args in samples.items():
        fn = namespace.get(name)
        if not callable(fn):
            facts.functions[name] = FunctionFacts(name=name, jitted=False, error="not defined in the reference")
            continue
        entry = FunctionFacts(name=name, jitted=hasattr(fn, "lower"), defaults=_defaults(fn))
        try:
            out = fn(*args)
            leaves, tree = jax.tree_util.tree_flatten(out)
            entry.leaves = [_leaf(v) for v in leaves]
            entry.container = ("leaf" if tree.num_nodes == 1 and tree.num_leaves == 1 else
                               "tuple" if isinstance(out, tuple) and not hasattr(out, "_fields") else
                               "list" if isinstance(out, list) else "other")
        except Exception as exc:  # noqa: BLE001 - reported as a fact: no output mutants for it
            entry.error = f"{type(exc).__name__}: {exc}"[:300]
        facts.functions[name] = entry
    for name in names:
        if name in namespace:
            facts.values[name] = repr(namespace[name])
    return facts
