"""The service's grading loop: queued hand-ins to the workers, their reports into the gradebook.

One dispatcher thread owns the loop. While a worker is free it claims the oldest queued job
(grader/serve/jobs.py) and submits it to the backend (grader/serve/backends.py) as the batch's
`Task`, with the batch's one seed (grader/batch/seed.py), or the student's own when the batch
keeps one per student (`seed_of`, grader/batch/student_seeds.py), and the assignment given to
`grade serve`, so a verdict is the one `grade FILE --seed S` gives for the same file. When a grading
ends:

- a report of the student's (graded, or the student's file not gradable) is recorded as a batch
  records it, in the transaction that marks the job graded, and the outputs are rebuilt soon
  (grader/serve/publish.py);
- a report in error for the machine's or the grader's reasons (overloaded, a grader bug, a broken
  grader) leaves the job `not_graded`, with a sentence for the student, and the student's row as
  it was: it costs no attempt;
- a worker that died, or was killed because its job overran its deadline (the assignment's time
  budget times DEADLINE_MARGIN), fails the job's future: the job is queued again once, then not
  graded ("the grading machine did not finish it").

Stopping (SIGTERM, Ctrl-C) kills the workers and their kernels and puts the running jobs back in
the queue; the next start grades them.
"""

from __future__ import annotations

import os
import queue
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from grader.batch.executors import Task
from grader.inert import MESSAGE_LIMIT, terminal
from grader.options import GradeOptions
from grader.outputs.gradebook import Gradebook
from grader.report import Report
from grader.serve import jobs as job_states
from grader.serve.backends import Backend
from grader.serve.jobs import JobTable
from grader.serve.models import Job
from grader.serve.publish import Publisher

DEADLINE_MARGIN = 2.0
"""A job's deadline: the assignment's time budget (all its cells, and every exercise's probe) times this."""
POLL_S = 0.5

_MACHINE_REASONS = {
    "overloaded": "the grading machine was too busy to give it its time",
    "grader_bug": "the grader failed on it (a bug of the grader's, reported to the instructor)",
}


def deadline_for(spec: object) -> float:
    """Seconds a job may run before its worker is killed: the assignment's budget times the margin."""
    limits = getattr(spec, "limits")
    exercises = len(getattr(spec, "exercises"))
    return DEADLINE_MARGIN * (limits.submission_timeout_s + exercises * limits.probe_timeout_s)


def instance_name() -> str:
    """This service run, as the job table's `worker` records it: a later run knows it is gone."""
    return f"{socket.gethostname()}/{os.getpid()}/{secrets.token_hex(4)}"


@dataclass
class _Running:
    job: Job
    future: Future[Report]
    until: float  # time.monotonic() past which the job is abandoned
    abandoned: bool = False


class Service:
    """The dispatcher thread, the backend it feeds and the publisher it tells."""

    def __init__(self, *, jobs: JobTable, backend: Backend, publisher: Publisher, options: GradeOptions,
                 assignment_digest: str | None, deadline_s: float, worker: str,
                 prepare: Callable[[], None] | None = None, seed_of: Callable[[str], int] | None = None):
        assert (options.seed is None) == (seed_of is not None) and options.assignment
        self.jobs = jobs
        self.backend = backend
        self.publisher = publisher
        self.options = options
        self.digest = assignment_digest
        self.deadline_s = deadline_s
        self.worker = worker
        self.prepare = prepare
        self.seed_of = seed_of  # a student's own seed (drawn at their first hand-in); None: the batch's one
        self._events: queue.SimpleQueue[Future[Report] | None] = queue.SimpleQueue()
        self._running: dict[Future[Report], _Running] = {}
        self._unqueued: list[Job] = []  # claimed, not handed to a worker, not yet queued again
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ life

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="grade-serve-dispatcher", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """A hand-in was queued: look for a free worker now."""
        self._events.put(None)

    def stop(self) -> None:
        """Stop taking jobs, kill the workers (and their kernels), queue the running jobs again."""
        self._stopping.set()
        self._events.put(None)
        if self._thread is not None:
            self._thread.join()

    # ------------------------------------------------------------------ the loop

    def alive(self) -> bool:
        """Whether the dispatcher runs (what /healthz reports): hand-ins accepted while it does
        not would wait for a restart."""
        return self._thread is not None and self._thread.is_alive() and not self._stopping.is_set()

    def _loop(self) -> None:
        book: Gradebook | None = None
        try:
            start = getattr(self.backend, "start", None)
            if start is not None:
                try:
                    start()  # from this thread: the workers die with the thread that started them
                except Exception as exc:  # noqa: BLE001 - a head start only: a worker starts with its first task
                    self._said("starting the workers failed", exc, "each starts with its first hand-in instead")
            if self.prepare is not None:
                self.prepare()  # while the workers boot; it never raises (a cache, as in a batch)
            while not self._stopping.is_set():
                try:
                    book = book or Gradebook(self.jobs.path)
                    self._turn(book)
                except Exception as exc:  # noqa: BLE001 - say so, and go on: the jobs are in the table
                    self._said("the grading loop failed", exc)
                    self._stopping.wait(5.0)
            if book is not None:
                self._drain(book)
        finally:
            self.backend.close()
            self.jobs.release(self.worker)
            self.jobs.close()
            if book is not None:
                book.close()

    @staticmethod
    def _said(what: str, exc: BaseException, then: str = "trying again in a few seconds") -> None:
        why = terminal(f"{type(exc).__name__}: {exc}", MESSAGE_LIMIT)
        print(f"grade serve: {what} ({why}); {then}", file=sys.stderr)

    def _turn(self, book: Gradebook) -> None:
        """Fill the free workers, stop the overdue ones, then record what ends (or wait a little)."""
        self._fill()
        self._expire()
        try:
            event = self._events.get(timeout=POLL_S)
        except queue.Empty:
            return
        while True:
            if event is not None:
                self._finish(event, book)
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                return

    def _drain(self, book: Gradebook) -> None:
        """On the way out: record the gradings that ended before the workers are stopped."""
        for future in [f for f in self._running if f.done()]:
            self._finish(future, book)

    def _fill(self) -> None:
        """Hand queued jobs to free workers. A job whose file is gone from OUT (removed by hand)
        is the machine's failure, not the student's; one a worker would not take is queued again
        (kept to try again on the next turn if even that cannot be written)."""
        while self._unqueued:
            self.jobs.retry(self._unqueued[0], self.worker, job_states.MACHINE_FAILED)
            self._unqueued.pop(0)
        while len(self._running) < self.backend.capacity and not self._stopping.is_set():
            job = self.jobs.claim(self.worker, self.deadline_s)
            if job is None:
                return
            if not Path(job.path).is_file():
                self.jobs.not_graded(job, self.worker, job_states.FILE_GONE)
                continue
            try:
                options = self.options if self.seed_of is None else self.options.model_copy(
                    update={"seed": self.seed_of(job.student)})
                future = self.backend.submit(Task(student=job.student, path=job.path, options=options))
            except Exception:
                self._unqueued.append(job)
                raise
            self._running[future] = _Running(job, future, time.monotonic() + self.deadline_s)
            future.add_done_callback(self._events.put)

    def _expire(self) -> None:
        now = time.monotonic()
        for running in list(self._running.values()):
            if not running.abandoned and now > running.until and not running.future.done():
                running.abandoned = True
                print(f"grade serve: a hand-in of {terminal(running.job.student, 60)} ran past its deadline of "
                      f"{self.deadline_s:g} s: its worker is stopped", file=sys.stderr)
                threading.Thread(target=self.backend.abandon, args=(running.future,), daemon=True).start()

    def _finish(self, future: Future[Report], book: Gradebook) -> None:
        """Record how a grading ended; the job stays this run's until that is recorded (a
        failure to record is tried again after the loop's pause, never forgotten)."""
        running = self._running.get(future)
        if running is None:
            return
        try:
            self._record(running, book)
        except Exception:
            self._events.put(future)
            raise
        del self._running[future]

    def _record(self, running: _Running, book: Gradebook) -> None:
        job, future = running.job, running.future
        try:
            report = future.result()
        except Exception as exc:  # noqa: BLE001 - a worker that died or was stopped, a broken grader
            if not running.abandoned:
                print(f"grade serve: grading a hand-in of {terminal(job.student, 60)} failed "
                      f"({terminal(f'{type(exc).__name__}: {exc}', MESSAGE_LIMIT)})", file=sys.stderr)
            if self.jobs.retry(job, self.worker, job_states.MACHINE_FAILED) == "queued":
                self._events.put(None)
            return
        reason = machine_reason(report)
        if reason is None:
            if self.jobs.record_graded(book, job, self.worker, report, assignment_digest=self.digest):
                self.publisher.changed(job.student)
            return
        print(f"grade serve: a hand-in of {terminal(job.student, 60)} was not graded: "
              f"{terminal(report.error, MESSAGE_LIMIT)}", file=sys.stderr)
        self.jobs.not_graded(job, self.worker, reason, report)


def machine_reason(report: Report) -> str | None:
    """Why a report is not the student's grade (the machine's or the grader's fault), as the
    student reads it; None when it is theirs to keep (graded, or their file not gradable)."""
    if report.status == "graded" or report.fault == "student":
        return None
    if report.error_kind in _MACHINE_REASONS:
        return _MACHINE_REASONS[report.error_kind]
    return "the grading machine failed while grading it"

