"""Custom checks of ch2-jit: the detective's truth and Newton's iteration counts.

The detective's truth is measured here, in the grader's process, with the installed JAX: which
of the chapter's eight calls trigger an XLA compilation. It is never a hard-coded list, because
the answer depends on the JAX version (the chapter's answer on 0.12 is 7: only call 2 hits); it
is measured once per installed JAX and kept in the user's cache directory.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
from pathlib import Path
from typing import Any

import numpy as np

from grader import Verdict
from grader.checks.answer import answer_items, bool_like
from grader.values import describe, unpack

CALLS = [
    "detective(jnp.ones(3))",
    "detective(jnp.ones(3) * 5)",
    "detective(jnp.ones(4))",
    'detective(jnp.ones(3), mode="b")',
    "detective(jnp.ones(3, dtype=jnp.int32))",
    "detective(1.0)",
    "detective(jnp.float32(1.0))",
    'detective(jnp.ones(3), mode="a")',
]
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


MEASUREMENT = 1  # bump when _measure changes: cached truths of older measurements are ignored


def _cache_file() -> Path:
    """Where the truth measured with this JAX is kept: one file per JAX, jaxlib and machine."""
    from importlib import metadata

    versions = "-".join(metadata.version(d) for d in ("jax", "jaxlib"))
    key = hashlib.sha256(json.dumps([MEASUREMENT, CALLS]).encode()).hexdigest()[:12]
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "jax-course-grader" / f"detective-{versions}-{platform.machine()}-{key}.json"


@functools.cache
def detective_truth() -> tuple[bool, ...]:
    """For each of the eight calls: did it compile? Measured once per installed JAX (a grading
    needs no JAX of its own when the measurement is kept), as deltas around each call."""
    path = _cache_file()
    try:
        kept = json.loads(path.read_text())
        if isinstance(kept, list) and len(kept) == len(CALLS) and all(type(x) is bool for x in kept):
            return tuple(kept)
    except (OSError, ValueError):
        pass
    truth = _measure()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial_file = path.with_name(f".{path.name}.{os.getpid()}")
        partial_file.write_text(json.dumps(list(truth)))
        partial_file.replace(path)
    except OSError:
        pass  # a read-only home: measured again next time
    return truth


def _measure() -> tuple[bool, ...]:
    from functools import partial

    import jax
    import jax.numpy as jnp

    @partial(jax.jit, static_argnames=["mode"])
    def detective(x, mode="a"):
        return x * 2 if mode == "a" else x + 1

    inputs = [((jnp.ones(3),), {}), ((jnp.ones(3) * 5,), {}), ((jnp.ones(4),), {}),
              ((jnp.ones(3),), {"mode": "b"}), ((jnp.ones(3, dtype=jnp.int32),), {}),
              ((1.0,), {}), ((jnp.float32(1.0),), {}), ((jnp.ones(3),), {"mode": "a"})]
    events: list[str] = []

    def listener(event: str, duration: float, **kwargs: Any) -> None:
        if event == COMPILE_EVENT and kwargs.get("fun_name") == "jit(detective)":
            events.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        truth = []
        for args, kwargs in inputs:
            before = len(events)
            jax.block_until_ready(detective(*args, **kwargs))
            truth.append(len(events) > before)
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    return tuple(truth)


def prepare() -> None:
    detective_truth()


def detective_call(observed: dict[str, Any], call: int) -> Verdict:
    """Prediction `call` (1-based) of `predictions` matches what the installed JAX does.

    "A list of 8 bools" is any sequence of 8 bool-like values (grader.checks.answer: a list, a
    tuple or a 1-D NumPy / JAX array; True/False, NumPy bools, 0 and 1), as the chapter's own cell
    reads it with `len(predictions)` and `bool(predictions[k])`."""
    predictions = answer_items(observed["predictions"])
    if predictions is None or len(predictions) != 8:
        size = f"{len(predictions)} items" if predictions is not None else "not a list"
        return Verdict(passed=False, detail=f"predictions must be a list of 8 True/False values ({size})")
    guess = bool_like(predictions[call - 1])
    if guess is None:
        return Verdict(passed=False, detail=f"item {call} of predictions is not True/False")
    truth = detective_truth()[call - 1]
    if guess == truth:
        return Verdict(passed=True)
    return Verdict(passed=False, detail=f"you predicted that {CALLS[call - 1]} "
                                        f"{'compiles' if guess else 'hits the cache'}; it does not")


def newton_reference_count(a: float, tol: float, dtype: type) -> int | None:
    """Iterations of the exercise's algorithm: x0 = a (1 when a < 1), x <- (x + a/x) / 2, until
    |x_new - x| < tol; the step that meets the rule counts. None when it does not stop."""
    a_, tol_ = dtype(a), dtype(tol)
    x = dtype(1.0) if a_ < 1 else a_
    for k in range(1, 1001):
        x_new = dtype(0.5) * (x + a_ / x)
        if abs(x_new - x) < tol_:
            return k
        x = x_new
    return None


def _count(value: Any) -> int | None:
    """A whole number of iterations, or None (a string, NaN, infinity, 2.5, an array...)."""
    arr = np.asarray(value) if isinstance(value, (np.ndarray, np.generic, int, float)) else None
    if arr is None or arr.ndim != 0 or arr.dtype.kind not in "iuf":
        return None
    number = float(arr)
    if not np.isfinite(number) or number != int(number):
        return None
    return int(number)


def iterations_follow_stopping_rule(observed: dict[str, Any]) -> Verdict:
    """The count is the one the exercise's stopping rule determines.

    The text fixes the start, the update and the rule, so the count is determined: the number
    of updates x <- (x + a/x)/2 made, the last being the one that meets |x_(k+1) - x_k| < tol.
    Two readings of "the number of iterations" are accepted: that count, and one fewer (a loop
    that tests the next update before making it stops one update earlier, with a root as
    accurate); rounding near the threshold may move either, so the count in float32 and in
    float64 are both accepted. One more than the rule's count (a count started at 1, an extra
    update) fails.
    """
    for case, result in observed["calls"]:
        a, tol = case.args
        pair = unpack(result, 2)
        if pair is None:
            return Verdict(passed=False, detail=f"newton_sqrt({a:g}, {tol:g}) returned {describe(result)}; "
                                                "expected (root, iterations)")
        count = _count(pair[1])
        if count is None:
            return Verdict(passed=False, detail=f"newton_sqrt({a:g}, {tol:g}) returned {describe(pair[1])} "
                                                "as its iteration count; expected a whole number")
        expected = [k for k in (newton_reference_count(a, tol, np.float32),
                                newton_reference_count(a, tol, np.float64)) if k is not None]
        if not expected:
            raise ValueError(f"the stopping rule does not stop for a={a!r}, tol={tol!r}: fix the generator")
        low, high = min(expected) - 1, max(expected)
        if not low <= count <= high:
            return Verdict(passed=False, detail=f"newton_sqrt({a:g}, {tol:g}) reports {count} iterations; "
                                                f"the stopping rule |x_(k+1) - x_k| < tol, started from x0 = "
                                                f"{'1' if a < 1 else 'a'}, takes {min(expected)}")
    return Verdict(passed=True)
