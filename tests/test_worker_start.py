"""Pool workers start forked from a server that imported the grader (grader/batch/worker_start.py):
without a thread of the process that made the pool, with the grader imported, and with the
pool's environment, not the one the server started with."""

from __future__ import annotations

import os
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import forkserver

import pytest

from grader.batch import worker_start


def _environment(name: str) -> str | None:
    return os.environ.get(name)


def _imported(name: str) -> bool:
    return name in sys.modules


def _pool() -> ProcessPoolExecutor:
    return worker_start.pool(1)


def test_a_worker_has_the_environment_of_its_pool_not_of_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADER_TEST_EARLIER", "1")
    with _pool() as pool:  # the server starts here, with this environment, if it was not running
        assert pool.submit(_environment, "GRADER_TEST_EARLIER").result(timeout=60) == "1"
    monkeypatch.setenv("GRADER_TEST_LATER", "2")
    monkeypatch.delenv("GRADER_TEST_EARLIER")
    with _pool() as pool:
        assert pool.submit(_environment, "GRADER_TEST_LATER").result(timeout=60) == "2"
        assert pool.submit(_environment, "GRADER_TEST_EARLIER").result(timeout=60) is None


def test_the_server_is_one_thread_and_its_workers_start_with_the_grader_imported() -> None:
    with _pool() as pool:
        assert pool.submit(_imported, "grader.pipeline").result(timeout=60)
        assert not pool.submit(_imported, "jax").result(timeout=60)  # JAX stays out of the workers
    server = forkserver._forkserver._forkserver_pid
    assert server is not None and len(os.listdir(f"/proc/{server}/task")) == 1


POOL_THEN_KILLED = """
import os, signal, sys
from multiprocessing import forkserver
from grader.batch import worker_start
if __name__ == "__main__":
    pool = worker_start.pool(1)
    print(pool.submit(os.getpid).result(), forkserver._forkserver._forkserver_pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_worker_and_its_server_go_when_the_pool_s_process_is_killed(tmp_path) -> None:
    """Found by tests/test_serve.py's kill -9: the worker's parent is the server, which outlives a
    killed service as long as a worker holds its pipe, so no parent-death signal came."""
    import subprocess
    import time

    script = tmp_path / "pool.py"
    script.write_text(POOL_THEN_KILLED)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    worker, server = map(int, done.stdout.split())
    deadline = time.monotonic() + 30  # a bound, not a timing
    while not (_gone(worker) and _gone(server)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(worker) and _gone(server)


def test_a_server_that_something_else_killed_and_reaped_is_replaced() -> None:
    """Found in the whole suite: a test ran Gradescope's run_autograder in its process, whose sweep
    kills and reaps every descendant; the next pool failed with ChildProcessError."""
    import signal

    with _pool() as pool:
        pool.submit(os.getpid).result(timeout=60)
    server = forkserver._forkserver._forkserver_pid
    os.kill(server, signal.SIGKILL)
    os.waitpid(server, 0)  # reaped here, not by multiprocessing
    with _pool() as pool:
        assert pool.submit(_environment, "PATH").result(timeout=60) == os.environ["PATH"]
    assert forkserver._forkserver._forkserver_pid not in (None, server)
