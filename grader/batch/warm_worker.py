"""What a batch worker keeps warm between submissions: fork servers and the verifier's answers.

A worker (a LocalExecutor process, a Dask worker's thread) grades one submission after another.
Rather than boot a kernel and a verifier for each, it keeps, per thread:

    a kernel server     (grader/kernel/server.py) in the whole sandbox: each submission's kernel
                        is forked from it, with JAX imported already, the next one as soon as a
                        grading ends (`launch_ahead`); elsewhere (no sandbox, or a
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
        self._ahead: tuple[SandboxPolicy, Kernel] | None = None  # forked by launch_ahead, not taken yet
        self._launching: threading.Thread | None = None

    def kernels(self, options: GradeOptions) -> Callable[[], Kernel]:
        """A factory of this submission's kernels; the first is the one forked ahead, or launched now."""
        from grader.kernel.server import usable

        policy = policy_for(options)
        if usable(policy) and options.kernel_name == NATIVE_KERNEL:
            assert policy is not None
            server = self._kernel_server(policy)
            first = [self._ahead_or_now(policy, server)]
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

    def launch_ahead(self, options: GradeOptions) -> None:
        """Fork the next submission's kernel now, in a thread (a fork and the kernel's start:
        45-50 ms that the next grading then does not wait for): after a grading, as its report
        goes back, and as a service's worker starts. Only where kernels are forked; the next
        `kernels` for other options closes it. A fresh kernel, which no student's code has run in."""
        from grader.kernel.server import usable

        policy = policy_for(options)
        if not (usable(policy) and options.kernel_name == NATIVE_KERNEL):
            return
        assert policy is not None
        self._join_ahead()
        if self._ahead is not None:
            return  # one is waiting already
        server = self._kernel_server(policy)

        def launch() -> None:
            from jupyter_core.utils import ensure_event_loop

            try:
                self._ahead = (policy, Kernel(sandbox=policy, server=server).launch())
            except Exception:  # noqa: BLE001 - the next grading launches its own, and says why if it cannot
                self._ahead = None
            finally:
                ensure_event_loop().close()  # the loop jupyter_client ran the launch on, this thread's

        self._launching = threading.Thread(target=launch, name="kernel-ahead", daemon=True)
        self._launching.start()

    def _kernel_server(self, policy: SandboxPolicy) -> Any:
        """This worker's kernel server for `policy`: the one started early, else a new one."""
        from grader.kernel.server import KernelServer

        server = self._kernel_servers.get(policy)
        if server is None:
            server = early_servers.take("kernel", policy) or KernelServer(policy).start()
            self._kernel_servers[policy] = server
        return server

    def _join_ahead(self) -> None:
        if self._launching is not None:
            self._launching.join()
            self._launching = None

    def _ahead_or_now(self, policy: SandboxPolicy, server: Any) -> Kernel:
        """The kernel `launch_ahead` forked for `policy`, else one launched now."""
        self._join_ahead()
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] == policy:
            return ahead[1]
        if ahead is not None:
            ahead[1].close()
        return Kernel(sandbox=policy, server=server).launch()

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
        """Kill the spare kernels and the servers (and their children)."""
        self._join_ahead()
        if self._ahead is not None:
            self._ahead[1].close()
            self._ahead = None
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
