"""A LocalExecutor worker process: how it starts, says which task it starts, and goes.

Its initializer starts the worker's fork servers first (early_servers: they boot while the
grader is imported here), then hands Ctrl-C to the parent (which stops the pool), makes SIGTERM
kill the worker's kernels and verifiers and exit, and asks Linux for a SIGTERM when the batch's
process dies, even by SIGKILL, so that no worker (and no kernel it started) outlives it.
"""

from __future__ import annotations

import os
from typing import Any

started: Any = None
"""Per worker process: the queue where it says which task it starts (LocalExecutor), or None."""


def init(queue: Any, sandbox: bool) -> None:
    """The pool's initializer: the servers first, then the worker's own setup."""
    from grader.batch import early_servers

    early_servers.start(sandbox)
    setup(queue)


def setup(queue: Any = None) -> None:
    """Ctrl-C is the parent's to handle (it stops the pool); SIGTERM cleans up and exits."""
    import atexit
    import signal

    from grader.batch import warm_worker

    global started
    started = queue
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    atexit.register(warm_worker.close_all)
    _die_with_parent()


def _on_sigterm(signum: int, frame: object) -> None:
    """Kill this worker's kernels and verifiers, then go at once. (A SystemExit would be caught
    by concurrent.futures inside the running task, and the worker would wait for work again.)"""
    from grader.batch import warm_worker
    from grader.sandbox import lifetime

    lifetime.kill_everything()
    warm_worker.close_all()
    os._exit(143)


def _die_with_parent() -> None:
    """Linux: a SIGTERM when the batch's process dies (PR_SET_PDEATHSIG)."""
    import ctypes
    import signal
    import sys

    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
