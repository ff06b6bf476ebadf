"""What a call changes outside itself: the probe's watch for a function its text calls pure.

Loaded by path beside the probe (`runtime._sibling`), so it imports nothing but the standard
library and NumPy. It never judges: it reports what changed ("global `losses` (a list) grew from
0 to 1 items"), and the grader's `pure` check decides.

A snapshot is a fingerprint of what the student's code can reach and change: every global of the
notebook's namespace (bound, rebound, or a list, dict, set, NumPy array or plain object mutated in
place), the variables of the enclosing functions the called function closes over, its own
attributes and its parameters' default values (`def f(x, seen=[])`), the call's arguments, and
NumPy's and Python's global random state. Modules, classes
and functions are compared by identity only (their caches are JAX's, not the student's state), and
JAX arrays are immutable. Every fingerprint is bounded: containers are read a few levels deep and
their first items only, large arrays by a sample of their bytes, so a watch costs the same on any
notebook.
"""

from __future__ import annotations

import hashlib
import random
import re
import types
from typing import Any

import numpy as np

DEPTH = 3  # levels of containers read
ITEMS = 256  # items read of one container
NODES = 20_000  # values read in one snapshot
ARRAY_BYTES = 1 << 20  # bytes of an array hashed whole; larger ones by a sample
MAX_CHANGES = 6
MAX_NAME = 60
# IPython's own names, which change from cell to cell, never during a call
_IPYTHON = re.compile(r"^(_|__|___|_i+|_i\d+|_\d+|_oh|_ih|_dh|In|Out|exit|quit|get_ipython)$")
_OPAQUE = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
           types.BuiltinMethodType)


def _kind(value: Any) -> str:
    """How a change to `value` is told: "a list", "a dict", "an array", "an object"."""
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a dict"
    if isinstance(value, (set, frozenset)):
        return "a set"
    if isinstance(value, np.ndarray):
        return "a NumPy array"
    if isinstance(value, (int, float, complex, str, bytes, bool)) or value is None:
        return "a value"
    return "an object"


class _Budget:
    def __init__(self) -> None:
        self.left = NODES

    def take(self) -> bool:
        self.left -= 1
        return self.left >= 0


def _array_digest(arr: np.ndarray) -> str:
    try:
        data = arr.tobytes() if arr.nbytes <= ARRAY_BYTES else np.ascontiguousarray(arr.reshape(-1)[:: max(
            1, arr.size // (ARRAY_BYTES // max(arr.itemsize, 1)))]).tobytes()
    except Exception:  # noqa: BLE001 - an array of objects, a broken subclass: its identity only
        return "?"
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def fingerprint(value: Any, budget: _Budget, depth: int = 0) -> Any:
    """A comparable summary of `value`: equal before and after a call unless the call changed it
    (or rebound it: identities are part of it)."""
    if not budget.take():
        return ("…",)
    if value is None or type(value) in (bool, int, float, complex, str, bytes):
        return ("=", type(value).__name__, value if not isinstance(value, (str, bytes)) or len(value) < 200
                else hashlib.blake2b(value if isinstance(value, bytes) else value.encode("utf-8", "replace"),
                                     digest_size=12).hexdigest())
    if isinstance(value, _OPAQUE):
        return ("id", id(value))
    if isinstance(value, np.ndarray):
        return ("array", id(value), value.shape, value.dtype.str, _array_digest(value))
    if depth >= DEPTH:
        return ("id", id(value), _size(value))
    if isinstance(value, (list, tuple)):
        return ("seq", id(value), len(value), tuple(fingerprint(v, budget, depth + 1) for v in value[:ITEMS]))
    if isinstance(value, dict):
        items = list(value.items())[:ITEMS]
        return ("dict", id(value), len(value), tuple((repr(k)[:80], fingerprint(v, budget, depth + 1)) for k, v in items))
    if isinstance(value, (set, frozenset)):
        return ("set", id(value), len(value), tuple(sorted(repr(v)[:80] for v in list(value)[:ITEMS])))
    if type(value).__module__.startswith(("jax", "jaxlib")):  # JAX's arrays and objects: immutable, or JAX's own
        return ("id", id(value))
    attributes = _attributes(value)
    if attributes is not None:
        return ("obj", id(value), tuple((k, fingerprint(v, budget, depth + 1)) for k, v in attributes[:ITEMS]))
    return ("id", id(value))


def _size(value: Any) -> int | None:
    try:
        return len(value)
    except Exception:  # noqa: BLE001 - no length: identity alone
        return None


def _attributes(value: Any) -> list[tuple[str, Any]] | None:
    try:
        found = vars(value)
    except TypeError:
        return None
    except Exception:  # noqa: BLE001 - a hostile __dict__: identity alone
        return None
    return sorted(((str(k), v) for k, v in list(found.items())), key=lambda kv: kv[0])


def _chain(fn: Any) -> list[Any]:
    """`fn` and what it wraps (`__wrapped__`: a jax.jit of a function, a functools.wraps)."""
    chain = [fn]
    for _ in range(8):
        try:
            inner = getattr(chain[-1], "__wrapped__", None)
        except Exception:  # noqa: BLE001 - a hostile attribute: the chain stops here
            inner = None
        if inner is None or any(inner is seen for seen in chain):
            break
        chain.append(inner)
    return chain


def _closure(fn: Any) -> list[tuple[str, Any]]:
    """The variables of enclosing functions that `fn` (and what it wraps) closes over."""
    cells = []
    for layer in _chain(fn):
        code, closure = getattr(layer, "__code__", None), getattr(layer, "__closure__", None)
        if code is None or not closure:
            continue
        for name, cell in zip(code.co_freevars, closure):
            try:
                cells.append((name, cell.cell_contents))
            except ValueError:  # an empty cell
                cells.append((name, None))
    return cells


def _defaults(fn: Any) -> list[tuple[str, Any]]:
    """The default values of its parameters (`def f(x, seen=[])`: a list every call shares)."""
    found = []
    for layer in _chain(fn):
        code = getattr(layer, "__code__", None)
        defaults = getattr(layer, "__defaults__", None) or ()
        if code is not None and defaults:
            names = code.co_varnames[: code.co_argcount][-len(defaults):]
            found += list(zip(names, defaults))
        found += list((getattr(layer, "__kwdefaults__", None) or {}).items())
    return found


def _own_attributes(fn: Any) -> list[tuple[str, Any]]:
    """The attributes the student may keep on the plain function (`f.calls += 1`)."""
    found = []
    for layer in _chain(fn):
        if isinstance(layer, types.FunctionType):
            found += [(k, v) for k, v in (_attributes(layer) or []) if k != "__wrapped__"]
    return found


def on_the_host(value: Any) -> Any:
    """`value` with its JAX arrays as NumPy copies (what a student's own code may pass: "for
    scalars or arrays"), so that a function that writes into a NumPy argument shows it."""
    if isinstance(value, (tuple, list)):
        return type(value)(on_the_host(v) for v in value)
    if type(value).__module__.startswith(("jax", "jaxlib")) and hasattr(value, "shape"):
        try:
            return np.array(value)
        except Exception:  # noqa: BLE001 - kept as it is
            return value
    return value


def snapshot(namespace: dict, fn: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    """Fingerprints of everything `fn` may change, by the words a change is told in."""
    budget = _Budget()
    seen: dict[str, Any] = {}
    for name, value in list(namespace.items()):
        if isinstance(name, str) and not _IPYTHON.match(name) and not name.startswith("__"):
            seen[f"global `{name[:MAX_NAME]}`"] = (_kind(value), fingerprint(value, budget))
    for name, value in _closure(fn):
        seen[f"`{name[:MAX_NAME]}` of an enclosing function"] = (_kind(value), fingerprint(value, budget))
    for name, value in _own_attributes(fn):
        seen[f"its attribute `{name[:MAX_NAME]}`"] = (_kind(value), fingerprint(value, budget))
    for name, value in _defaults(fn):
        seen[f"the default value of its argument `{name[:MAX_NAME]}`"] = (_kind(value), fingerprint(value, budget))
    for position, value in enumerate(args):
        seen[f"argument {position + 1}"] = (_kind(value), fingerprint(value, budget))
    for name, value in kwargs.items():
        seen[f"argument `{name[:MAX_NAME]}`"] = (_kind(value), fingerprint(value, budget))
    try:
        kind, key, position, *rest = np.random.get_state()
        seen["NumPy's global random state"] = ("a value", ("=", "state", (_array_digest(np.asarray(key)),
                                                                          position, repr(rest))))
    except Exception:  # noqa: BLE001 - a NumPy without it
        pass
    seen["Python's global random state"] = ("a value", ("=", "state", hash(random.getstate())))
    return seen


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs, in words: "global `losses` (a list) grew from 0 to 1 items", "global `count`
    was bound", "NumPy's global random state was rebound" (a random draw)."""
    said = []
    for where in list(before) + [w for w in after if w not in before]:
        if where in before and where in after and before[where] == after[where]:
            continue
        if where not in before:
            said.append(f"{where} was bound ({after[where][0]})")
        elif where not in after:
            said.append(f"{where} was deleted")
        else:
            said.append(_told(where, before[where], after[where]))
        if len(said) >= MAX_CHANGES:
            break
    return said


def _told(where: str, before: tuple[str, Any], after: tuple[str, Any]) -> str:
    """One change in words: rebound (another object, or another number), grown or shrunk (a
    container's length), or changed in place."""
    (kind, old), (_, new) = before, after
    if where.endswith("random state"):
        return f"{where} changed (something drew random numbers from it)"
    if old[0] == "=" or new[0] == "=" or old[0] != new[0] or old[1] != new[1]:
        return f"{where} was rebound"
    if old[0] in ("seq", "dict", "set") and old[2] != new[2]:
        grew = "grew" if new[2] > old[2] else "shrank"
        return f"{where} ({kind}) {grew} from {old[2]} to {new[2]} items"
    return f"{where} ({kind}) was changed in place"
