"""Grade many submissions: tasks, the executors that run them, and reports for failed ones.

An executor takes tasks and yields (task, report) pairs as gradings finish, in any order; the
caller writes the results, so the order of completion never changes one. Each submission is
graded in its own fresh kernel. In a worker process the next submission's kernel is launched
and warmed (JAX imported) while the current one is graded, so a batch is not a sum of cold
starts. Every grading goes through `faults.grade_guarded`, which decides whose fault a failure
is: a student's becomes that student's error report and the batch goes on; a broken grader or
spec stops it. A worker process that dies takes its submission's grading with it: that one is
retried once in a fresh pool, then gets an error report.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Iterable, Iterator, Protocol

from pydantic import BaseModel, ConfigDict

from grader import interrupts
from grader.batch import warm_worker, worker_process
from grader.faults import grade_guarded
from grader.kernel.client import Kernel
from grader.options import GradeOptions
from grader.report import CheckResult, ExerciseResult, Report, SubmissionRef, environment
from grader.sandbox.layers import sweep


class Task(BaseModel):
    """One submission to grade, and how."""

    model_config = ConfigDict(frozen=True)

    student: str
    path: str
    options: GradeOptions


def error_report(task: Task, reason: str) -> Report:
    """The report of a submission that could not be graded at all: every score 0, one reason."""
    from grader import assignment as assignments
    from grader.pipeline import isolation_for

    exercises: list[ExerciseResult] = []
    name = task.options.assignment or "unknown"
    try:
        spec = assignments.load(name).spec if task.options.assignment else None
    except Exception:  # the batch reports the spec problem itself
        spec = None
    if spec is not None:
        name = spec.id
        for ex in spec.exercises:
            checks = [CheckResult(id=f"{ex.id}.{c.id}", title=c.title, status="skipped", score=0.0,
                                  max_score=c.points, hidden=c.hidden, message=f"not graded: {reason}")
                      for c in ex.checks]
            exercises.append(ExerciseResult(id=ex.id, title=ex.title, score=0.0, max_score=ex.points,
                                            checks=checks))
    return Report(
        assignment=name,
        submission=SubmissionRef(path=task.path, sha256=None, kind=None),
        student=task.student,
        status="error",
        error=reason,
        score=0.0,
        max_score=sum(e.max_score for e in exercises),
        exercises=exercises,
        seed=task.options.seed or 0,
        duration_s=0.0,
        environment=environment(),
        isolation=isolation_for(task.options),
    )


# ---------------------------------------------------------------------------- one task


def grade_task(task: Task, *, warm: bool = False) -> Report:
    """Grade one task; what is wrong with the submission becomes an error report. `warm` (a
    batch worker's): its kernels and verifier come from this thread's warm worker."""
    from grader.pipeline import grade_one, kernels_for

    options = task.options.model_copy(update={"student": task.student})
    if warm:
        worker = warm_worker.current()
        factory, verifier = worker.kernels(options), worker.verifier(options)
    else:
        factory, verifier = kernels_for(options), None
    launched: list[Kernel] = []

    def tracked() -> Kernel:
        launched.append(factory())
        return launched[-1]

    try:
        report = grade_guarded(lambda: grade_one(task.path, options, kernel_factory=tracked, verifier=verifier),
                               lambda reason: error_report(task, reason))
    finally:
        if warm and not launched:
            factory().close()  # launched for a submission that never used it (unreadable)
    if warm:
        worker.launch_ahead(options)  # the next submission's kernel, forked as this report goes back
    return report


def _grade_in_worker(task: Task) -> Report:
    if worker_process.started is not None:
        worker_process.started.put((os.getpid(), task.student))
    return grade_task(task, warm=True)


# ---------------------------------------------------------------------------- executors


class Executor(Protocol):
    """Runs tasks; yields each (task, report) as soon as it is done, in any order."""

    def map(self, tasks: Iterable[Task]) -> Iterator[tuple[Task, Report]]: ...


class SerialExecutor:
    """One task after the other, in this process (-j 1, tests, debugging), warm as a worker is:
    with this thread's warm worker, closed at the end (servers and what they forked killed) if
    this batch made it. One the caller had already (a library user, or a test session grading
    through one worker) is the caller's: closing it would only make the next grading boot its
    servers again (2.7 CPU s)."""

    def map(self, tasks: Iterable[Task]) -> Iterator[tuple[Task, Report]]:
        made = warm_worker.existing() is None
        try:
            for task in tasks:
                interrupts.check()  # a Ctrl-C the last submission's clean-up swallowed
                yield task, grade_task(task, warm=True)
        finally:
            if made:
                warm_worker.close_current()


class LocalExecutor:
    """`workers` processes on this machine, each keeping one warm kernel ahead of need.

    A worker that dies (a crash, the machine's memory limit) breaks the whole pool. Its tasks
    are sorted: the one that was running in the dead worker is retried once, in a fresh pool,
    and gets an error report if it kills a worker again; the others are simply resubmitted.
    What the dead worker left (sandbox cgroups and scratch mounts) is swept.
    """

    def __init__(self, workers: int):
        self.workers = workers
        self._context = multiprocessing.get_context("spawn")  # clean workers: no inherited threads

    def _pool(self, started: Any, sandbox: bool) -> ProcessPoolExecutor:
        """Workers whose fork servers start booting before the grader is imported there
        (grader/batch/early_servers.py)."""
        return ProcessPoolExecutor(max_workers=self.workers, mp_context=self._context,
                                   initializer=worker_process.init, initargs=(started, sandbox))

    def map(self, tasks: Iterable[Task]) -> Iterator[tuple[Task, Report]]:
        tasks = list(tasks)
        sandbox = any(task.options.sandbox for task in tasks)
        started = self._context.SimpleQueue()
        pool = self._pool(started, sandbox)
        pending: dict[Future, Task] = {}
        running: dict[int, str] = {}  # worker pid -> the student it last started
        finished: set[str] = set()
        blamed: set[str] = set()
        try:
            for task in tasks:
                pending[pool.submit(_grade_in_worker, task)] = task
            while pending:
                interrupts.check()  # a Ctrl-C swallowed where Python could not raise it
                done, _ = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
                broken = False
                for future in done:
                    task = pending.pop(future)
                    try:
                        report = future.result()
                    except BrokenProcessPool:
                        pending[future] = task  # sorted below with the others
                        broken = True
                        continue
                    finished.add(task.student)
                    yield task, report
                if not broken:
                    continue
                while not started.empty():
                    pid, student = started.get()
                    running[pid] = student
                culprits = _culprits(pool, running, finished)
                left = list(pending.values())
                pending.clear()
                stop_pool(pool)
                pool = self._pool(started, sandbox)
                for task in left:
                    if task.student in culprits and task.student in blamed:
                        yield task, error_report(task, "the grader process grading it died twice "
                                                       "(a crash, or the machine's memory limit)")
                        continue
                    if task.student in culprits:
                        blamed.add(task.student)
                    pending[pool.submit(_grade_in_worker, task)] = task
        finally:
            if pending:  # interrupted (Ctrl-C) or stopped by a grader fault: don't wait for them
                stop_pool(pool)
            else:
                pool.shutdown(wait=True)


def _culprits(pool: ProcessPoolExecutor, running: dict[int, str], finished: set[str]) -> set[str]:
    """The students whose grading was running in a worker that died on its own (not one the
    broken pool terminated); all that were running if that cannot be told. Sweeps what the dead
    workers left."""
    processes = dict(getattr(pool, "_processes", {}) or {})
    for process in processes.values():
        process.join(timeout=5)
    died = {pid for pid, process in processes.items() if process.exitcode not in (None, 0, -15, 143)}
    for pid in processes:
        sweep(pid)
    active = {pid: student for pid, student in running.items() if student not in finished}
    blamed = {student for pid, student in active.items() if pid in died}
    return blamed or set(active.values())


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Stop a pool without waiting on it: its workers (which ignore SIGINT) are told to clean up
    and go (SIGTERM), then killed if they linger; only then is the pool shut down, so shutting
    down never waits on a worker that does not exit."""
    processes = list((getattr(pool, "_processes", {}) or {}).values())
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=15)
        if process.is_alive():
            process.kill()
            process.join(timeout=5)
    for process in processes:
        if process.pid is not None:
            sweep(process.pid)
    pool.shutdown(wait=False, cancel_futures=True)
