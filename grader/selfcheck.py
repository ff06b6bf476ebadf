"""The template notebook's self-check: `check("tax", "ch2-jit")` runs that exercise's checks here.

It judges the live namespace of the student's notebook with the same spec and the same check
code as `grade`, observed through the in-process prober instead of a fresh kernel, at the
"self_check" stage (`grader.judging.reveal`): hidden checks, predictions and quiz answers are left to the
hand-in and said so. Each exercise has the spec's time limit and an interrupt stops it at once,
each with one sentence: the exported programs run in a child process that is killed then (a
loop inside XLA cannot be interrupted), started once per notebook session (`grader.judging.local`).
It imports no kernel or sandbox code, so the student pack (`grade pack`) runs it anywhere JAX
runs. The authoritative grade is `grade submit.ipynb`.
"""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from grader import assignment as assignments
from grader.checks.base import Seen
from grader.errors import GraderError, UsageError
from grader.judging.local import LocalProber, LocalVerifier, TimeUp
from grader.judging.plan import Plan, observe_all, plan
from grader.judging.reveal import judged_now
from grader.judging.verdicts import judge
from grader.judging.verification import verify_all
from grader.kernel.protocol import ExportResult, Observation
from grader.views.terminal import summary_exercise
from grader.selfgrade import packs

_warned: set[str] = set()


class Stopped(KeyboardInterrupt):
    """Ctrl-C (Jupyter's interrupt) stopped the self-check: still a KeyboardInterrupt, so a Run All
    stops there, shown in a notebook as its one sentence (IPython asks `_render_traceback_`)
    instead of a traceback through the grader."""

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """SIGALRM after `seconds` in the main thread (where notebooks run cells); no limit elsewhere
    (another thread, Windows). It stops Python code (a `while True`); what runs inside XLA it
    cannot stop, which is why the exported programs run in a child (`grader.judging.child`)."""
    if seconds <= 0:
        raise TimeUp()
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


class _Clock:
    """An exercise's time: what runs in the notebook and the child's jobs, not the child's boot."""

    def __init__(self, limit: float):
        self.limit, self.started, self.not_counted = limit, time.monotonic(), 0.0

    def left(self) -> float:
        return self.limit - (time.monotonic() - self.started - self.not_counted)


def _namespace() -> dict[str, Any]:
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None:
            return shell.user_ns
    except ImportError:
        pass
    return vars(sys.modules["__main__"])


def jax_note() -> str | None:
    """The sentence for a student whose JAX is not the one the course grades with (some answers
    depend on it), from the pack's course.json; None when they agree or nothing says (this checkout)."""
    course = assignments.PACKED_DIR / "course.json"  # the pack's (this checkout has none)
    try:
        said = json.loads(course.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    wanted = said.get("jax") if isinstance(said, dict) else None
    from importlib import metadata

    try:
        have = metadata.version("jax")
    except metadata.PackageNotFoundError:
        return None
    if not isinstance(wanted, str) or not wanted or have == wanted:
        return None
    return (f"note: you have JAX {have}; the course grades with JAX {wanted}. Answers that depend on the "
            "version (which calls compile, for instance) are judged with the course's when you hand in.")


def _warn_about_jax() -> None:
    """Once: the student's JAX is not the one the course grades with (the pack's `grade` says it too)."""
    note = jax_note()
    if note is not None and note not in _warned:
        _warned.add(note)
        print(note)


def check(exercise: str, assignment: str, namespace: dict[str, Any] | None = None,
          seed: int | None = None, timeout: float | None = None) -> None:
    """Print this exercise's verdict, check by check, for the code defined so far.

    In three steps, each stoppable: the notebook's functions are looked up, traced and exported
    here (an alarm stops a Python loop); their programs run in the child (killed at the limit);
    then the requests that run the student's compiled code here (a call, a compile count) are
    answered, once the child has run the same function's programs to their end.

    Whatever goes wrong on the grader's side is one sentence, never a traceback in the notebook:
    an assignment whose pack is not installed (which pack to install), an exercise it does not
    have, a bug (please report it). Ctrl-C is `Stopped`, shown as its sentence."""
    try:
        _check(exercise, assignment, namespace, seed, timeout)
    except KeyboardInterrupt:
        raise
    except packs.PackMissing as exc:
        known = packs.installed()
        if exc.claimed not in known:
            print(f"⚠️ {packs.PackMissing(exc.claimed, known, pip='%pip')}")
            return
        try:  # another assignment's pack, installed here: its self-check (it says its own sentences)
            other = packs.pack_of(exc.claimed, known)
        except packs.PackBroken as broken:
            print(f"⚠️ {broken}")
            return
        other.check(exercise, assignment, namespace=namespace, seed=seed, timeout=timeout)
    except GraderError as exc:
        print(f"⚠️ {exc}")
    except Exception as exc:  # noqa: BLE001 - the grader's bug, in one sentence
        print(f"⚠️ The self-check failed ({type(exc).__name__}: {exc}), a bug: please tell your instructor; "
              "`grade` on the whole notebook may still work.")


def _check(exercise: str, assignment: str, namespace: dict[str, Any] | None, seed: int | None,
           timeout: float | None) -> None:
    loaded = packs.load(assignment)
    _warn_about_jax()
    seed = secrets.randbelow(2**31) if seed is None else seed
    selected = [(ex, checks) for ex, checks in plan(loaded, seed, stage="self_check") if ex.id == exercise]
    if not selected:
        known = ", ".join(e.id for e in loaded.spec.exercises)
        raise UsageError(f"{assignment} has no exercise {exercise!r} (it has {known})")
    limit = timeout or loaded.spec.limits.probe_timeout_s
    verifier = LocalVerifier()
    verifier.launch()  # it imports JAX while the functions are traced
    prober = LocalProber(namespace if namespace is not None else _namespace(), hold_runs=True)
    now = [(ex, [c for s, c in zip(ex.checks, checks) if judged_now(s, "self_check")])
           for ex, checks in selected]
    title = selected[0][0].title
    observations: dict[str, Observation] = {}
    clock = _Clock(limit)
    try:
        with _time_limit(clock.left()):
            observations = observe_all(prober, now, probe_timeout=0)
        checks = [check for _, exercise_checks in now for check in exercise_checks]
        left = clock.left()
        if left <= 0:
            raise TimeUp()
        runs = verify_all(verifier, checks, observations, timeout=left, budget=left)
        clock.not_counted += verifier.waited
        with _time_limit(clock.left()):
            observations.update(prober.observe_held())
            result = judge(selected, Seen(observations=observations, runs=runs), stage="self_check")[0]
    except TimeUp:
        verifier.launch()  # a fresh child for the next cell, if this one was killed
        running = _running(verifier, prober, observations, now)
        print(f"⏱ {title}: stopped after {limit:g} s" + (f", `{running}` still running" if running else "")
              + ": does a loop never end? (the grader gives each exercise the same time)")
        return
    except KeyboardInterrupt:
        verifier.launch()
        running = _running(verifier, prober, observations, now)
        while_running = f", while `{running}` was running" if running else ""
        raise Stopped(f"⏹ {title}: stopped, as you asked{while_running}; nothing was checked") from None
    print(summary_exercise(result))


def _running(verifier: LocalVerifier, prober: LocalProber, observations: dict[str, Observation],
             now: Plan) -> str | None:
    """The function that was running when the self-check stopped: the one whose exported program
    the child was running, else the one the notebook was answering about."""
    requests = {request.id: request for _, checks in now for check in checks for request in check.requests()}
    if verifier.running is not None:
        module = base64.b64encode(verifier.running).decode("ascii")
        for request_id, observation in observations.items():
            if isinstance(observation.result, ExportResult) and observation.result.module == module:
                return getattr(requests.get(request_id), "target", None)
    current = prober.current
    return getattr(current, "target", None) or getattr(current, "name", None)
