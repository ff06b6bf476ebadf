"""The template notebook's self-check: `check("tax", "ch2-jit")` runs that exercise's checks here.

It judges the live namespace of the student's notebook with the same spec and the same check
code as `grade`, observed through the in-process prober instead of a fresh kernel, at the
"self_check" stage (`grader.judging.reveal`): hidden checks, predictions and quiz answers are left to the
hand-in and said so. Each exercise has the spec's time limit (an endless loop stops with a
sentence) and an interrupt stops it at once. It imports no kernel or sandbox code, so the student
pack (`grade pack`) runs it anywhere JAX runs. The authoritative grade is `grade submit.ipynb`.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from grader import assignment as assignments
from grader.judging.local import LocalProber, LocalVerifier
from grader.judging.plan import observe_all, plan, seen_all
from grader.judging.reveal import judged_now
from grader.judging.verdicts import judge
from grader.render import summary_exercise

_warned: set[str] = set()


class TimeUp(BaseException):
    """The exercise's time limit: a BaseException, so the student's code cannot catch it away
    with `except Exception` (as the probe lets KeyboardInterrupt through)."""


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """SIGALRM after `seconds` in the main thread (where notebooks run cells); no limit elsewhere."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expired(signum: int, frame: object) -> None:
        raise TimeUp()

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _namespace() -> dict[str, Any]:
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None:
            return shell.user_ns
    except ImportError:
        pass
    return vars(sys.modules["__main__"])


def _warn_about_jax() -> None:
    """Once: the student's JAX is not the one the course grades with (some answers depend on it)."""
    course = assignments.assignments_dir() / "course.json"
    try:
        wanted = json.loads(course.read_text(encoding="utf-8")).get("jax")
    except (OSError, ValueError):
        return
    from importlib import metadata

    have = metadata.version("jax")
    if wanted and have != wanted and have not in _warned:
        _warned.add(have)
        print(f"note: you have JAX {have}; the course grades with JAX {wanted}. Answers that depend on the "
              "version (which calls compile, for instance) are judged with the course's when you hand in.")


def check(exercise: str, assignment: str, namespace: dict[str, Any] | None = None,
          seed: int | None = None, timeout: float | None = None) -> None:
    """Print this exercise's verdict, check by check, for the code defined so far."""
    loaded = assignments.load(assignment)
    _warn_about_jax()
    seed = secrets.randbelow(2**31) if seed is None else seed
    selected = [(ex, checks) for ex, checks in plan(loaded, seed, stage="self_check") if ex.id == exercise]
    if not selected:
        known = ", ".join(e.id for e in loaded.spec.exercises)
        raise ValueError(f"{assignment} has no exercise {exercise!r} (it has {known})")
    limit = timeout or loaded.spec.limits.probe_timeout_s
    prober = LocalProber(namespace if namespace is not None else _namespace())
    now = [(ex, [c for s, c in zip(ex.checks, checks) if judged_now(s, "self_check")]) for ex, checks in selected]
    try:
        with _time_limit(limit):
            observations = observe_all(prober, now, probe_timeout=0)
            result = judge(selected, seen_all(observations, LocalVerifier(), now, timeout=0), stage="self_check")[0]
    except TimeUp:
        print(f"⏱ {selected[0][0].title}: the self-check stopped after {limit:g} s; does a loop never end? "
              "(the grader gives each exercise the same time)")
        return
    print(summary_exercise(result))
