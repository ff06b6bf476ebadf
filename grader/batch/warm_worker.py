"""What a batch worker keeps warm between submissions: fork servers and the verifier's answers.

A worker (a LocalExecutor process, a Dask worker's thread) grades one submission after another.
Rather than boot a kernel and a verifier for each, it keeps, per thread:

    a kernel server     (grader/kernel/server.py) in the whole sandbox: each submission's kernel
                        is forked from it, with JAX imported already; elsewhere (no sandbox, or a
                        kernel spec other than this interpreter's), a spare kernel booting while
                        the current submission is graded, as before
    a verifier server   (grader/verifier/forkserver.py): a verifier is forked when a job needs one
    answers             (grader/verifier/result_cache.py): a job whose module bytes and inputs were
                        answered before gets that answer

Every kernel is still a new process for one submission, killed at its end with all it started.
`close()` ends everything (a worker's exit, SIGTERM).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from grader.batch import early_servers
from grader.kernel.client import Kernel
from grader.options import GradeOptions
from grader.pipeline import policy_for
from grader.sandbox.layers import SandboxPolicy
from grader.verifier.client import Verifier

NATIVE_KERNEL = "python3"  # ipykernel's own spec: this interpreter, `-m ipykernel_launcher`


class WarmWorker:
    """One thread's fork servers, spare kernel and answers."""

    def __init__(self) -> None:
        from grader.verifier.result_cache import ResultCache

        self.answers = ResultCache()
        self._kernel_servers: dict[SandboxPolicy | None, Any] = {}
        self._verifier_servers: dict[SandboxPolicy | None, Any] = {}
        self._spare: tuple[tuple[str, SandboxPolicy | None], Kernel] | None = None  # (kernel, policy), kernel

    def kernels(self, options: GradeOptions) -> Callable[[], Kernel]:
        """A factory of this submission's kernels; the first is launched now."""
        from grader.kernel.server import KernelServer, usable

        policy = policy_for(options)
        if usable(policy) and options.kernel_name == NATIVE_KERNEL:
            assert policy is not None
            server = self._kernel_servers.get(policy)
            if server is None:
                server = early_servers.take("kernel", policy) or KernelServer(policy).start()
                self._kernel_servers[policy] = server
            first = [Kernel(sandbox=policy, server=server).launch()]
            return lambda: first.pop() if first else Kernel(sandbox=policy, server=server)
        spare, self._spare = self._spare, None
        if spare is not None and spare[0] != (options.kernel_name, policy):  # launched for other options
            spare[1].close()
            spare = None
        kernel = spare[1] if spare is not None else Kernel(kernel_name=options.kernel_name, sandbox=policy,
                                                          warm=True).launch()
        self._spare = ((options.kernel_name, policy),
                       Kernel(kernel_name=options.kernel_name, sandbox=policy, warm=True).launch())
        first = [kernel]
        return lambda: first.pop() if first else Kernel(kernel_name=options.kernel_name, sandbox=policy)

    def verifier(self, options: GradeOptions) -> Verifier:
        """A verifier forked from this worker's server, answering known jobs from its cache."""
        from grader.verifier.forkserver import VerifierServer, usable

        policy = policy_for(options)
        if not usable(policy):
            return Verifier(sandbox=policy, answers=self.answers)
        server = self._verifier_servers.get(policy)
        if server is None:
            server = early_servers.take("verifier", policy) or VerifierServer(policy).start()
            self._verifier_servers[policy] = server
        return Verifier(sandbox=policy, server=server, answers=self.answers)

    def close(self) -> None:
        """Kill the spare kernel and the servers (and their children)."""
        if self._spare is not None:
            self._spare[1].close()
            self._spare = None
        for servers in (self._kernel_servers, self._verifier_servers):
            for server in servers.values():
                server.kill()
            servers.clear()


_local = threading.local()
_all: list[WarmWorker] = []
_lock = threading.Lock()


def current() -> WarmWorker:
    """This thread's warm worker (made on first use)."""
    worker = getattr(_local, "worker", None)
    if worker is None:
        worker = _local.worker = WarmWorker()
        with _lock:
            _all.append(worker)
    return worker


def existing() -> WarmWorker | None:
    """This thread's warm worker, if one was made and not closed since."""
    return getattr(_local, "worker", None)


def close_current() -> None:
    """Close this thread's warm worker (a serial batch that made it, at its end)."""
    worker = getattr(_local, "worker", None)
    if worker is None:
        return
    del _local.worker
    with _lock:
        if worker in _all:
            _all.remove(worker)
    worker.close()


def close_all() -> None:
    """Close every thread's warm worker (a worker process on its way out)."""
    with _lock:
        workers = list(_all)
        _all.clear()
    for worker in workers:
        worker.close()
    _local.__dict__.clear()
