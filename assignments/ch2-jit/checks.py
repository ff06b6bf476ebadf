"""Custom checks of ch2-jit: the detective's truth and Newton's iteration counts.

The detective's truth is measured here, in the grader's process, with the installed JAX: which
of the chapter's eight calls trigger an XLA compilation. It is never a hard-coded list, because
the answer depends on the JAX version (the chapter's answer on 0.12 is 7: only call 2 hits).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from grader import Verdict

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


@functools.cache
def detective_truth() -> tuple[bool, ...]:
    """For each of the eight calls: did it compile? Counted as deltas around each call."""
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


def _as_bool(item: Any) -> bool | None:
    arr = np.asarray(item) if not isinstance(item, (list, tuple, dict)) else None
    if arr is None or arr.ndim != 0 or arr.dtype.kind not in "biuf":
        return None
    return bool(arr)


def detective_call(observed: dict[str, Any], call: int) -> Verdict:
    """Prediction `call` (1-based) of `predictions` matches what the installed JAX does."""
    predictions = observed["predictions"]
    if not isinstance(predictions, (list, tuple)) or len(predictions) != 8:
        size = f"{len(predictions)} items" if isinstance(predictions, (list, tuple)) else "not a list"
        return Verdict(passed=False, detail=f"predictions must be a list of 8 True/False values ({size})")
    guess = _as_bool(predictions[call - 1])
    if guess is None:
        return Verdict(passed=False, detail=f"item {call} of predictions is not True/False")
    truth = detective_truth()[call - 1]
    if guess == truth:
        return Verdict(passed=True)
    return Verdict(passed=False, detail=f"you predicted that {CALLS[call - 1]} "
                                        f"{'compiles' if guess else 'hits the cache'}; it does not")


def tighter_tol_more_iterations(observed: dict[str, Any]) -> Verdict:
    """Calls come in pairs on one a: (a, loose tol), (a, tight tol)."""
    calls = observed["calls"]
    for (loose_case, loose), (_, tight) in zip(calls[::2], calls[1::2]):
        a = loose_case.args[0]
        try:
            k_loose, k_tight = int(np.asarray(loose[1])), int(np.asarray(tight[1]))
        except (TypeError, IndexError, ValueError):
            return Verdict(passed=False, detail=f"newton_sqrt({a:g}, tol) should return (root, iterations)")
        if k_loose < 1:
            return Verdict(passed=False, detail=f"newton_sqrt({a:g}, 0.1) reports {k_loose} iterations; at least 1 is done")
        if k_tight <= k_loose:
            return Verdict(passed=False, detail=f"newton_sqrt({a:g}, ·) took {k_loose} iterations with tol=0.1 "
                                                f"and {k_tight} with tol=1e-6")
    return Verdict(passed=True)
