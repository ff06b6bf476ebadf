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
from concurrent.futures import ProcessPoolExecutor
from typing import Any

PRELOAD = ["grader.batch.worker_process", "grader.batch.early_servers", "grader.batch.executors",
           "grader.batch.warm_worker", "grader.pipeline", "grader.kernel.server", "grader.verifier.forkserver"]
"""What every worker imports before its first task: imported once, in the server."""


def context() -> Any:
    """The multiprocessing context of the grader's worker pools."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    _forget_a_server_reaped_elsewhere()
    return ctx


def _forget_a_server_reaped_elsewhere() -> None:
    """multiprocessing starts a new server where its last one died, but fails (ChildProcessError)
    where something else reaped it: a sweep of this process's descendants, as Gradescope's
    run_autograder does before it writes results.json. Then it is forgotten as multiprocessing
    forgets a dead one, and the next pool starts another."""
    from multiprocessing import forkserver

    server = forkserver._forkserver
    with server._lock:
        pid = server._forkserver_pid
        if pid is None:
            return
        try:
            os.waitpid(pid, os.WNOHANG)
            return  # ours to reap: multiprocessing's own check sees whether it lives
        except ChildProcessError:
            pass
        try:
            os.close(server._forkserver_alive_fd)
        except (OSError, TypeError):
            pass
        server._forkserver_alive_fd = None
        server._forkserver_address = None
        server._forkserver_pid = None


def pool(workers: int, then: Callable[..., None] | None = None, args: tuple = ()) -> ProcessPoolExecutor:
    """A pool of `workers` processes forked from the server, each of which takes this process's
    environment, dies with this process, then runs `then(*args)`."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=context(), initializer=_start,
                               initargs=(dict(os.environ), then, args))


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
