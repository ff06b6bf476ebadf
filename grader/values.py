"""Conversions between Python/NumPy objects in the grader and wire values (probe.protocol.Value).

Inputs the grader draws are sent to the kernel with `to_wire`; what the kernel returns is turned
back into NumPy with `from_wire` before any comparison, so every judgement runs on plain NumPy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grader.probe.protocol import (
    ArrayValue,
    DictValue,
    NoneValue,
    OpaqueValue,
    PyScalar,
    SeqValue,
    Value,
)


def to_wire(obj: Any) -> Value:
    """A Python scalar stays a Python scalar (weakly typed in JAX); arrays keep their dtype."""
    if obj is None:
        return NoneValue()
    if type(obj) in (bool, int, float, str):
        return PyScalar(v=obj)
    if isinstance(obj, (tuple, list)):
        return SeqValue(t="tuple" if isinstance(obj, tuple) else "list", items=[to_wire(x) for x in obj])
    if isinstance(obj, dict):
        return DictValue(items={str(k): to_wire(v) for k, v in obj.items()})
    if isinstance(obj, (np.ndarray, np.generic)):
        arr = np.asarray(obj)
        return ArrayValue(dtype=str(arr.dtype), shape=list(arr.shape), data=arr.tolist())
    raise TypeError(f"cannot send a {type(obj).__name__} to the kernel")


def from_wire(value: Value) -> Any:
    """NumPy arrays for arrays and scalars, tuples/lists/dicts as such; opaque values stay opaque."""
    if isinstance(value, PyScalar):
        return value.v if isinstance(value.v, str) else np.asarray(value.v)
    if isinstance(value, ArrayValue):
        return np.asarray(value.data, dtype=value.dtype).reshape(value.shape)
    if isinstance(value, SeqValue):
        items = [from_wire(v) for v in value.items]
        return tuple(items) if value.t == "tuple" else items
    if isinstance(value, DictValue):
        return {k: from_wire(v) for k, v in value.items.items()}
    if isinstance(value, NoneValue):
        return None
    return value  # OpaqueValue: the judge says what it was


def describe(obj: Any) -> str:
    """A short, student-readable rendering of a value for failure messages."""
    if isinstance(obj, OpaqueValue):
        return f"a {obj.type} ({obj.repr})"
    if isinstance(obj, np.ndarray):
        if obj.ndim == 0:
            return f"{obj.item()!r}"
        text = np.array2string(obj, precision=6, threshold=8, separator=", ")
        return f"{text} (shape {tuple(obj.shape)})" if obj.ndim > 1 or obj.size > 8 else text
    if isinstance(obj, dict):
        return "{" + ", ".join(f"{k!r}: {describe(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, (tuple, list)):
        inner = ", ".join(describe(x) for x in obj)
        return f"({inner})" if isinstance(obj, tuple) else f"[{inner}]"
    return repr(obj)
