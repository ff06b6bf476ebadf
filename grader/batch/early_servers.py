"""A batch worker's fork servers, started as the worker process starts.

Booting a fork server is importing IPython, ipykernel and JAX in its sandbox (about 1.3 s of
wall time); a worker process spends about 0.8 s importing the grader before its first task.
Started before those imports, the two overlap, and the worker's warm worker
(grader/batch/warm_worker.py) adopts the servers at its first submission (`take`). This module imports
only what starting the servers needs. Servers nobody adopted die with the worker: they are
tracked (grader/sandbox/lifetime.py) like every server, and killed at its exit.
"""

from __future__ import annotations

import atexit
from typing import Any

_servers: dict[tuple[str, Any], Any] = {}


def start(sandbox: bool) -> None:
    """Start this process's kernel and verifier servers for `sandbox` (the batch's setting);
    nothing where a fork server cannot run (no whole sandbox). Never raises: the first
    submission starts its servers then, as before."""
    try:
        from grader.kernel.server import KernelServer, usable
        from grader.sandbox import executables

        policy = executables.sandbox_policy(sandbox)
        if not usable(policy) or ("kernel", policy) in _servers:
            return
        _servers[("kernel", policy)] = KernelServer(policy).start()
        from grader.verifier.forkserver import VerifierServer

        _servers[("verifier", policy)] = VerifierServer(policy).start()
    except Exception:  # noqa: BLE001 - an early start is only a head start
        return


def take(kind: str, policy: Any) -> Any:
    """The server of `kind` ("kernel", "verifier") started early for `policy`, once; else None."""
    return _servers.pop((kind, policy), None)


def kill_unclaimed() -> None:
    """Kill the servers no warm worker adopted (a worker's exit, a batch's end on a Dask worker)."""
    for server in _servers.values():
        try:
            server.kill()
        except Exception:  # noqa: BLE001 - on the way out
            pass
    _servers.clear()


atexit.register(kill_unclaimed)
