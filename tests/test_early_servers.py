"""A batch worker's fork servers start before it imports the grader (grader/batch/early_servers.py),
and its warm worker adopts them: no second server is booted for the first submission."""

from __future__ import annotations

import pytest

from grader import GradeOptions
from grader.batch import early_servers
from grader.batch.warm_worker import WarmWorker
from grader.sandbox import executables
from grader.sandbox.layers import available

pytestmark = [pytest.mark.kernel,
              pytest.mark.skipif(not available().sandboxed, reason="fork servers need the whole sandbox")]


def test_the_warm_worker_adopts_the_servers_started_early() -> None:
    early_servers.start(sandbox=True)
    policy = executables.sandbox_policy(True)
    kernel_server = early_servers._servers[("kernel", policy)]
    verifier_server = early_servers._servers[("verifier", policy)]
    worker = WarmWorker()
    try:
        options = GradeOptions(assignment="ch2-jit", seed=1)
        factory = worker.kernels(options)
        verifier = worker.verifier(options)
        factory().close()
        verifier.close()
        assert worker._kernel_servers[policy] is kernel_server and kernel_server.starts == 1
        assert worker._verifier_servers[policy] is verifier_server and verifier_server.starts == 1
        assert early_servers.take("kernel", policy) is None  # adopted once, by one warm worker
    finally:
        worker.close()


def test_servers_nobody_adopted_are_killed_with_the_worker() -> None:
    early_servers.start(sandbox=True)
    policy = executables.sandbox_policy(True)
    servers = [early_servers._servers[("kernel", policy)], early_servers._servers[("verifier", policy)]]
    early_servers.kill_unclaimed()  # what the worker's exit runs
    assert early_servers._servers == {}
    assert all(server._popen is None for server in servers)
