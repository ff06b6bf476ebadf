"""The service's gradings on a Dask cluster: `grade serve OUT ... --scheduler tcp://HOST:8786`.

`DaskBackend` is a `Backend` (grader/serve/backends.py) whose workers are a Dask scheduler's:
each hand-in is one Dask task running the batch's own task function on some worker
(`grader.batch.cluster.grade_warm`: a kernel forked from that worker thread's warm servers), and
its `concurrent.futures.Future` is resolved from the Dask future, sorted as a batch sorts it
(`grader.batch.cluster._outcome`: workers that kept dying are that hand-in's error report, a
broken grader or a dropped task fail the future, which the service tries once more).

Before the service binds its port the backend checks every connected worker as a batch does
(`check_workers`: the same grader, assignments and JAX, the sandbox, and OUT readable at the same
path, a shared filesystem). `capacity` is the workers' threads, as the scheduler counts them now.
`abandon` cancels the Dask task and restarts the worker running it through its nanny (a worker
thread cannot be interrupted; without a nanny the grading goes on there until its own time limits
kill its kernel), and its result is dropped. Workers started with
`--preload grader.batch.preload` are warm before the first hand-in.
"""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import CancelledError, Future, InvalidStateError
from typing import Any

from grader.batch.cluster import (_distributed, _outcome, check_workers, close_warm_workers, grade_warm,
                                  start_servers)
from grader.batch.executors import Task
from grader.errors import UsageError
from grader.options import GradeOptions
from grader.report import Report

CAPACITY_EVERY_S = 2.0  # how often the workers' thread count is asked of the scheduler


class DaskBackend:
    """Gradings on the workers of the Dask scheduler at `address`."""

    def __init__(self, address: str, *, sandbox: bool, shared: list[str]):
        """Connect and check the workers; `shared` are files the workers must read at the same
        paths (OUT's gradebook: the hand-ins are kept beside it)."""
        distributed = _distributed()
        self.address = address
        self._sandbox = sandbox
        try:
            self._client = distributed.Client(address, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise UsageError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
        try:
            options = GradeOptions(sandbox=sandbox)
            check_workers(self._client, [Task(student="", path=p, options=options) for p in shared])
        except BaseException:
            self._client.close()
            raise
        self._lock = threading.Lock()
        self._tasks: dict[Future[Report], Any] = {}  # our future -> its Dask future
        self._threads = 0
        self._asked = float("-inf")
        self._run = f"grade-serve-{uuid.uuid4().hex[:8]}"

    @property
    def capacity(self) -> int:
        """The connected workers' threads (0 while none is: hand-ins wait in the queue)."""
        now = time.monotonic()
        if now - self._asked >= CAPACITY_EVERY_S:
            self._asked = now
            try:
                self._threads = int(self._client.scheduler_info(n_workers=0).get("total_threads", 0))
            except Exception:  # noqa: BLE001 - a scheduler being reconnected: the last count holds
                pass
        return self._threads

    def start(self) -> None:
        """A head start: every worker's fork servers boot now (a no-op where the preload did it)."""
        try:
            self._client.run(start_servers, self._sandbox)
        except Exception:  # noqa: BLE001 - the first hand-in starts them otherwise
            pass

    def submit(self, task: Task) -> Future[Report]:
        future: Future[Report] = Future()
        future.set_running_or_notify_cancel()
        key = f"{self._run}-{uuid.uuid4().hex[:12]}"  # never a student's name: keys show on dashboards
        remote = self._client.submit(grade_warm, task, key=key, pure=False)
        with self._lock:
            self._tasks[future] = remote
        remote.add_done_callback(lambda done: self._resolve(future, done, task))
        return future

    def _resolve(self, future: Future[Report], remote: Any, task: Task) -> None:
        with self._lock:
            self._tasks.pop(future, None)  # the worker keeps no result once it is ours
        try:
            report = _outcome(remote, task)
        except BaseException as exc:  # noqa: BLE001 - a dropped task, a broken grader: the service retries
            _settle(future, exc=exc)
        else:
            _settle(future, report=report)
        remote.release()

    def abandon(self, future: Future[Report]) -> None:
        """Cancel the task and restart the worker grading it (its nanny starts a fresh one, warm
        again by its preload), as a local backend kills its stuck worker: a thread cannot be
        interrupted, and a stuck grading would otherwise hold the worker's thread until its own
        limits end it. The future fails now."""
        with self._lock:
            remote = self._tasks.pop(future, None)
        if remote is not None:
            try:
                where = self._client.run_on_scheduler(_processing_on, remote.key)
            except Exception:  # noqa: BLE001 - a lost scheduler: nothing runs it any more
                where = None
            try:
                self._client.cancel([remote], force=True)
            except Exception:  # noqa: BLE001 - a lost scheduler has dropped it already
                pass
            if where:
                threading.Thread(target=self._restart, args=(where,), name="grade-serve-restart",
                                 daemon=True).start()
        _settle(future, exc=CancelledError("stopped past its deadline"))

    def _restart(self, worker: str) -> None:
        """Restart `worker` through its nanny; a worker without one (`dask worker --no-nanny`)
        keeps grading until the cancelled grading's own limits end it."""
        try:
            self._client.restart_workers([worker], raise_for_error=False)
        except Exception:  # noqa: BLE001 - no nanny, or the worker left already
            pass

    def close(self) -> None:
        """Cancel what runs, kill the workers' fork servers (and the kernels forked from them),
        disconnect."""
        with self._lock:
            remotes = list(self._tasks.values())
            self._tasks.clear()
        try:
            if remotes:
                self._client.cancel(remotes, force=True)
            self._client.run(close_warm_workers)
        except Exception:  # noqa: BLE001 - a lost worker has nothing left to close
            pass
        self._client.close()


def _processing_on(key: str, dask_scheduler: Any = None) -> str | None:
    """On the scheduler: the address of the worker running task `key`, if one is."""
    task = dask_scheduler.tasks.get(key) if dask_scheduler is not None else None
    worker = getattr(task, "processing_on", None)
    return getattr(worker, "address", None)


def _settle(future: Future[Report], *, report: Report | None = None, exc: BaseException | None = None) -> None:
    """Resolve `future` unless it was already (an abandoned task's late end)."""
    try:
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(report)  # type: ignore[arg-type]
    except InvalidStateError:
        pass
