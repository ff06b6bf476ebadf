"""How a pool's worker processes start: forked from a server that imported the grader once.

`spawn` started every worker as a fresh Python that imported the grader itself (0.4 CPU s each: a
batch's two, a service's replaced worker, the test suite's hundred pools). `forkserver` keeps what
spawn was chosen for: the server is a fresh, single-threaded Python that runs nothing but imports,
so a worker inherits no thread, lock or event loop of the process that made the pool; and a worker
forked from it starts with the grader imported. Only the environment differs: the server keeps
the one it started with, so each worker takes the pool's own (what spawn gave it) before its
initializer runs.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from typing import Any

PRELOAD = ["grader.batch.worker_process", "grader.batch.early_servers", "grader.batch.executors",
           "grader.batch.warm_worker", "grader.pipeline", "grader.kernel.server", "grader.verifier.forkserver"]
"""What every worker imports before its first task: imported once, in the server."""


def context() -> Any:
    """The multiprocessing context of the grader's worker pools."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def initializer(then: Callable[..., None] | None = None,
                args: tuple = ()) -> tuple[Callable[..., None], tuple]:
    """`initializer` and `initargs` for a pool: the pool's environment, then `then(*args)`."""
    return _start, (dict(os.environ), then, args)


def _start(environment: dict[str, str], then: Callable[..., None] | None, args: tuple) -> None:
    os.environ.clear()
    os.environ.update(environment)
    _die_with_the_pool_s_process()
    if then is not None:
        then(*args)


def _die_with_the_pool_s_process() -> None:
    """A SIGTERM to this worker when the process that made its pool dies, even by SIGKILL. The
    worker's parent is the server, which lives as long as any worker does (each holds its end of
    the server's pipe): Linux's parent-death signal would never come. multiprocessing's sentinel
    of the pool's process (a pipe that process holds open) is read instead, in a thread."""
    import multiprocessing.connection
    import signal
    import threading

    parent = multiprocessing.parent_process()
    if parent is None or parent.sentinel is None:
        return

    def watch() -> None:
        multiprocessing.connection.wait([parent.sentinel])
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="dies-with-the-pool", daemon=True).start()
