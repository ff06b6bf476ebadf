"""The template notebook's self-check: `check("tax", "ch2-jit")` runs that exercise's checks here.

It judges the live namespace of the student's notebook with the same spec and the same check
code as `grade`, observed through the in-process prober instead of a fresh kernel. It is a
convenience for the student; the authoritative grade is `grade submit.ipynb`.
"""

from __future__ import annotations

import secrets
import sys
from typing import Any

from grader import assignment as assignments
from grader.pipeline import judge, observe_all, plan, seen_all
from grader.probe.local import LocalProber, LocalVerifier
from grader.render import summary_exercise
from grader.reveal import judged_now


def _namespace() -> dict[str, Any]:
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None:
            return shell.user_ns
    except ImportError:
        pass
    return vars(sys.modules["__main__"])


def check(exercise: str, assignment: str, namespace: dict[str, Any] | None = None,
          seed: int | None = None) -> None:
    """Print this exercise's verdict, check by check, for the code defined so far."""
    loaded = assignments.load(assignment)
    seed = secrets.randbelow(2**31) if seed is None else seed
    selected = [(ex, checks) for ex, checks in plan(loaded, seed) if ex.id == exercise]
    if not selected:
        known = ", ".join(e.id for e in loaded.spec.exercises)
        raise ValueError(f"{assignment} has no exercise {exercise!r} (it has {known})")
    prober = LocalProber(namespace if namespace is not None else _namespace())
    now = [(ex, [c for s, c in zip(ex.checks, checks) if judged_now(s, "self_check")]) for ex, checks in selected]
    observations = observe_all(prober, now, probe_timeout=0)
    result = judge(selected, seen_all(observations, LocalVerifier(), now, timeout=0), stage="self_check")[0]
    print(summary_exercise(result))
