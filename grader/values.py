"""Conversions between Python/NumPy objects in the grader and wire values (probe.protocol.Value).

Inputs the grader draws are sent to the kernel with `to_wire`; what the kernel returns is turned
back into NumPy with `from_wire` before any comparison, so every judgement runs on plain NumPy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from grader.kernel.protocol import (
    ArrayValue,
    DictValue,
    NoneValue,
    OpaqueValue,
    PyScalar,
    SeqValue,
    TreeValue,
    Value,
)


@dataclass(frozen=True)
class Tree:
    """A pytree answer other than a tuple, list or dict (a NamedTuple, a dataclass): its leaves."""

    type: str
    leaves: tuple[Any, ...]


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
        if value.dtype.startswith("complex"):  # [real, imag] pairs
            pairs = np.asarray(value.data, dtype=np.float64).reshape([*value.shape, 2])
            return (pairs[..., 0] + 1j * pairs[..., 1]).astype(value.dtype)
        return np.asarray(value.data, dtype=value.dtype).reshape(value.shape)  # "nan" parses too
    if isinstance(value, SeqValue):
        items = [from_wire(v) for v in value.items]
        return tuple(items) if value.t == "tuple" else items
    if isinstance(value, DictValue):
        return {k: from_wire(v) for k, v in value.items.items()}
    if isinstance(value, TreeValue):
        return Tree(type=value.type, leaves=tuple(from_wire(v) for v in value.leaves))
    if isinstance(value, NoneValue):
        return None
    return value  # OpaqueValue: the judge says what it was


def unpack(value: Any, n: int) -> list[Any] | None:
    """The n values of an answer that should be n values, or None when it is not.

    The rule (docs/writing-an-assignment.md, "How answers are compared"): what `a, b = f(...)` unpacks into n values
    is n values. A tuple or list of n items; a pytree (NamedTuple, registered dataclass) of n
    leaves; a 1-D array of length n. Anything else (a dict, whose unpacking gives its keys; a
    scalar; a string) is not.
    """
    if isinstance(value, (tuple, list)):
        items = list(value)
    elif isinstance(value, Tree):
        items = list(value.leaves)
    elif isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.kind in "biufc":
        items = [np.asarray(value[i]) for i in range(value.shape[0])]  # 0-d arrays, not NumPy scalars
    else:
        return None
    return items if len(items) == n else None


def number(value: Any) -> str:
    """A number as a student reads it: no float noise (39753.95, not 39753.946874999994),
    whole numbers without a fraction, nan / inf as Python writes them."""
    if isinstance(value, (bool, np.bool_)):
        return repr(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (complex, np.complexfloating)):
        return repr(complex(value))
    as_float = float(value)
    if not np.isfinite(as_float):
        return repr(as_float)
    text = f"{as_float:.7g}"
    return text if any(c in text for c in ".en") else text + ".0"  # a float still reads as one


def to_tolerance(value: Any, band: float, extra: int = 0) -> str:
    """A number rounded to what a check can tell apart: `band` is its tolerance there
    (atol + rtol * |expected|), so 39753.946874999994 within 0.4 reads 39753.9 and a square
    root to rtol 1e-5 keeps its 4 decimals. Integers, non-finite values and numbers too large or
    small for fixed notation read as `number` writes them."""
    if isinstance(value, (bool, np.bool_, int, np.integer, complex, np.complexfloating)):
        return number(value)
    as_float = float(value)
    if not (np.isfinite(as_float) and np.isfinite(band) and band > 0):
        return number(value)
    decimals = max(0, math.ceil(-math.log10(band))) + extra
    if abs(as_float) >= 1e15 or decimals > 12 or (as_float != 0 and abs(as_float) < 10.0 ** -min(decimals, 4)):
        return number(value)
    text = f"{as_float:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0")
        text = text + "0" if text.endswith(".") else text
    return "0.0" if text in ("-0", "-0.0") else text


def compared(got: Any, expected: Any, rtol: float, atol: float) -> tuple[str, str]:
    """A wrong value and the expected one, each rounded to the check's tolerance at the expected
    value, with as many more decimals as it takes for the two to read differently."""
    band = atol + rtol * abs(float(expected)) if np.isfinite(float(expected)) else 0.0
    for extra in range(6):
        shown = to_tolerance(got, band, extra), to_tolerance(expected, band, extra)
        if shown[0] != shown[1]:
            return shown
    return number(got), number(expected)


def _array(arr: np.ndarray) -> str:
    """An array on one line, abbreviated: [0, 5000, 9999.5, …, 123456, 1e+06] (shape (12,))."""
    flat = arr.ravel()
    shown = [number(v) for v in flat] if flat.size <= 8 else \
        [*(number(v) for v in flat[:3]), "…", *(number(v) for v in flat[-2:])]
    text = "[" + ", ".join(shown) + "]"
    return f"{text} (shape {tuple(arr.shape)})" if arr.ndim > 1 or arr.size > 8 else text


def describe(obj: Any) -> str:
    """A short, student-readable rendering of a value for failure messages."""
    if isinstance(obj, OpaqueValue):
        return f"a {obj.type} ({obj.repr})"
    if isinstance(obj, Tree):
        return f"{obj.type}(" + ", ".join(describe(x) for x in obj.leaves[:8]) + (", …" if len(obj.leaves) > 8 else "") + ")"
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "biufc":
            return f"an array of {obj.dtype} (shape {tuple(obj.shape)})"
        return number(obj.item()) if obj.ndim == 0 else _array(obj)
    if isinstance(obj, (float, int, np.generic)) and not isinstance(obj, (str, bytes)):
        return number(obj)
    if isinstance(obj, dict):
        shown = list(obj.items())[:8]
        more = ", …" if len(obj) > 8 else ""
        return "{" + ", ".join(f"{k!r}: {describe(v)}" for k, v in shown) + more + "}"
    if isinstance(obj, (tuple, list)):
        inner = ", ".join(describe(x) for x in list(obj)[:8]) + (", …" if len(obj) > 8 else "")
        return f"({inner})" if isinstance(obj, tuple) else f"[{inner}]"
    text = repr(obj)
    return text if len(text) <= 200 else text[:199] + "…"
