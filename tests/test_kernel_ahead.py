"""A warm worker forks the next submission's kernel as a grading ends (WarmWorker.launch_ahead):
the next grading takes that kernel instead of forking and waiting for one, and a worker that
closes kills it."""

from __future__ import annotations

import os

import pytest

from grader import GradeOptions
from grader.batch import warm_worker
from grader.batch.executors import Task, grade_task
from grader.batch.warm_worker import WarmWorker
from grader.sandbox import executables
from grader.sandbox.layers import available

pytestmark = [pytest.mark.kernel,
              pytest.mark.skipif(not available().sandboxed, reason="kernels are forked only in the whole sandbox")]

OPTIONS = GradeOptions(assignment="ch2-jit", seed=3, exercises=("detective",))


def _pid(worker: WarmWorker) -> int:
    worker._join_ahead()
    assert worker._ahead is not None, "no kernel was forked ahead"
    return worker._ahead[1]._km.provisioner.process.pid


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_the_next_submission_takes_the_kernel_forked_as_the_last_grading_ended(repo_root, warm) -> None:
    notebook = repo_root / "solutions" / "ch2-jit.ipynb"
    first = grade_task(Task(student="ada", path=str(notebook), options=OPTIONS), warm=True)
    assert first.status == "graded" and first.score == first.max_score
    worker = warm_worker.current()
    ahead = _pid(worker)
    assert _alive(ahead)

    server = worker._kernel_servers[executables.sandbox_policy(True)]
    forks: list[dict] = []
    fork = server.fork

    def counted(request: dict, *args, **kwargs):
        forks.append(request)
        return fork(request, *args, **kwargs)

    server.fork = counted
    try:
        second = grade_task(Task(student="grace", path=str(notebook), options=OPTIONS), warm=True)
        worker._join_ahead()
    finally:
        del server.fork
    assert second.status == "graded" and second.score == second.max_score
    assert not _alive(ahead)  # taken by the second grading, and killed at its end
    assert len(forks) == 1  # the kernel forked ahead for the third: the second forked none of its own
    assert _pid(worker) != ahead


def test_a_worker_that_closes_kills_the_kernel_it_forked_ahead() -> None:
    worker = WarmWorker()
    try:
        worker.launch_ahead(GradeOptions(sandbox=True))
        pid = _pid(worker)
        assert _alive(pid) and pid != os.getpid()
    finally:
        worker.close()
    assert worker._ahead is None
    assert not _alive(pid)
