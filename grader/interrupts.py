"""Ctrl-C and SIGTERM that are never lost by the command line.

Python raises a signal's exception wherever the main thread happens to be. Inside a finalizer, a
weakref callback or the garbage collector it is printed ("Exception ignored in: ...") and dropped,
and the grader would go on grading the next submission as if nothing had been asked. So the
command line's handlers also *latch* the signal, and `check()`, called before every cell and every
submission, raises it again. Only `handled()` (the command line, whose process then exits) installs
them: a notebook or a test that calls the grader keeps Python's own Ctrl-C.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that everything unwinds as it does for Ctrl-C."""


_latched: type[KeyboardInterrupt] | None = None


def _on_sigint(signum: int, frame: object) -> None:
    latch(KeyboardInterrupt)
    raise KeyboardInterrupt


def _on_sigterm(signum: int, frame: object) -> None:
    latch(Terminated)
    raise Terminated()


def latch(kind: type[KeyboardInterrupt] = KeyboardInterrupt) -> None:
    """Remember a stop request (a Terminated outranks a Ctrl-C)."""
    global _latched
    if _latched is not Terminated:
        _latched = kind


def check() -> None:
    """Raise the stop request a handler latched, if any (a no-op outside the command line)."""
    if _latched is not None:
        raise _latched()


def is_ctrl_c_handler(handler: object) -> bool:
    """Whether SIGINT raises KeyboardInterrupt in this process (Python's handler or ours)."""
    return handler is signal.default_int_handler or handler is _on_sigint


@contextmanager
def handled() -> Iterator[None]:
    """Install the latching handlers for the command line's run; restore the previous ones."""
    global _latched
    previous_int = signal.getsignal(signal.SIGINT)
    if previous_int is signal.default_int_handler:  # an ignored Ctrl-C (`nohup`, `&`) stays ignored
        signal.signal(signal.SIGINT, _on_sigint)
    previous_term = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous_int)
        signal.signal(signal.SIGTERM, previous_term)
        _latched = None
