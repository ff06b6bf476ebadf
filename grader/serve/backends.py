"""Where the service's gradings run: a small protocol, and warm worker processes on this machine.

A backend takes a batch's `Task` and returns a `concurrent.futures.Future` of its `Report`,
graded exactly as a batch grades it (`grader.batch.executors.grade_task(task, warm=True)`, whose
fault boundary turns the student's failures into their report). It runs at most `capacity` at
once, and `abandon(future)` stops one that overran its deadline: its kernel is killed and the
future fails. A Dask backend (`--scheduler`) implements the same three methods.

`LocalBackend` keeps `capacity` worker processes, each a process pool of one started as a batch's
workers are (grader/batch/worker_process.py: its fork servers boot first, it ignores Ctrl-C,
SIGTERM kills its kernels, and it dies with the service, even by SIGKILL) and kept warm between
hand-ins (grader/batch/warm_worker.py). One process a pool, so that killing one worker for a stuck
job costs no other job; a pool whose worker died is replaced at its next task.
"""

from __future__ import annotations

import multiprocessing
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, Protocol

from grader.batch.executors import Task, grade_task, stop_pool
from grader.batch.worker_process import init
from grader.report import Report


class Backend(Protocol):
    """Grades tasks: `submit` at most `capacity` at once; `abandon` one; `close` all."""

    capacity: int

    def submit(self, task: Task) -> Future[Report]: ...

    def abandon(self, future: Future[Report]) -> None: ...

    def close(self) -> None: ...


def _warm(sandbox: bool) -> None:
    """A worker's first task: import what grading needs and fork the first hand-in's kernel, so
    that the first hand-in waits for neither."""
    import grader.pipeline  # noqa: F401
    from grader.batch import warm_worker
    from grader.options import GradeOptions

    warm_worker.current().launch_ahead(GradeOptions(sandbox=sandbox))


class _Slot:
    """One worker process: a pool of one, replaced when its worker is gone."""

    def __init__(self, context: Any, sandbox: bool):
        self._context = context
        self._sandbox = sandbox
        self._pool: ProcessPoolExecutor | None = None
        self.current: Future[Report] | None = None

    def _live_pool(self) -> ProcessPoolExecutor:
        if self._pool is None or getattr(self._pool, "_broken", False):
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=self._context, initializer=init,
                                             initargs=(None, self._sandbox))
        return self._pool

    def warm(self) -> None:
        self._live_pool().submit(_warm, self._sandbox)

    def free(self) -> bool:
        return self.current is None or self.current.done()

    def submit(self, task: Task) -> Future[Report]:
        self.current = self._live_pool().submit(grade_task, task, warm=True)
        return self.current

    def kill(self) -> None:
        """Stop the worker (SIGTERM: it kills its kernels and goes; SIGKILL if it lingers) and sweep
        what it left; its running task's future fails. The next task gets a fresh worker."""
        pool, self._pool = self._pool, None
        if pool is not None:
            stop_pool(pool)  # a batch's own way to stop its pool


class LocalBackend:
    """`capacity` warm worker processes on this machine."""

    def __init__(self, workers: int, *, sandbox: bool):
        self.capacity = workers
        context = multiprocessing.get_context("spawn")  # clean workers: no inherited threads
        self._slots = [_Slot(context, sandbox) for _ in range(workers)]
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start every worker now (call it from the thread that submits: a worker dies with the
        thread that started it)."""
        for slot in self._slots:
            slot.warm()

    def submit(self, task: Task) -> Future[Report]:
        with self._lock:
            slot = next((s for s in self._slots if s.free()), None)
            if slot is None:
                raise RuntimeError("every worker is busy: the dispatcher submitted past the capacity")
            return slot.submit(task)

    def abandon(self, future: Future[Report]) -> None:
        with self._lock:
            slots = [s for s in self._slots if s.current is future]
        for slot in slots:
            slot.kill()

    def close(self) -> None:
        for slot in self._slots:
            slot.kill()
