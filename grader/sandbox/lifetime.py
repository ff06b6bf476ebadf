"""What must go when this process goes: the kernels and verifiers it started.

A process that is told to stop (SIGTERM to a batch worker) kills them all before it exits, so no
sandbox, mount or cgroup outlives it; one that dies without warning leaves them to its parent's
`sandbox.sweep`.
"""

from __future__ import annotations

import weakref
from typing import Protocol


class Killable(Protocol):
    def kill(self) -> None: ...


_live: weakref.WeakSet = weakref.WeakSet()


def track(thing: Killable) -> None:
    _live.add(thing)


def untrack(thing: Killable) -> None:
    _live.discard(thing)


def kill_everything() -> None:
    """Kill every tracked kernel and verifier (each cleans up its sandbox); never raises."""
    for thing in list(_live):
        try:
            thing.kill()
        except Exception:  # noqa: BLE001 - on the way out: the next one must still go
            pass
