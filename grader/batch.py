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
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Iterable, Iterator, Protocol

from pydantic import BaseModel, ConfigDict

from grader.faults import grade_guarded
from grader.kernel import Kernel
from grader.options import GradeOptions
from grader.report import CheckResult, ExerciseResult, Report, SubmissionRef, environment
from grader.sandbox import SandboxPolicy


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


_spare: Kernel | None = None  # per worker process: the next submission's kernel, already booting


def _kernel_for(options: GradeOptions) -> Kernel:
    """A warm kernel for this submission, and launch the next one so it boots meanwhile."""
    global _spare
    policy = SandboxPolicy() if options.sandbox else None
    kernel = _spare or Kernel(kernel_name=options.kernel_name, sandbox=policy, warm=True).launch()
    _spare = Kernel(kernel_name=options.kernel_name, sandbox=policy, warm=True).launch()
    return kernel


def _discard_spare() -> None:
    global _spare
    if _spare is not None:
        _spare.close()
        _spare = None


def grade_task(task: Task, *, warm: bool = False) -> Report:
    """Grade one task; what is wrong with the submission becomes an error report."""
    from grader.pipeline import grade_one, kernels_for

    options = task.options.model_copy(update={"student": task.student})
    first: list[Kernel] = [_kernel_for(options)] if warm else []
    fresh = kernels_for(options)

    def factory() -> Kernel:
        return first.pop() if first else fresh()

    try:
        return grade_guarded(lambda: grade_one(task.path, options, kernel_factory=factory),
                             lambda reason: error_report(task, reason))
    finally:
        for unused in first:
            unused.close()


def _grade_in_worker(task: Task) -> Report:
    return grade_task(task, warm=True)


def _worker_init() -> None:
    """Ctrl-C is the parent's to handle (it stops the pool); SIGTERM cleans up like an exit."""
    import atexit
    import signal
    import sys

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    atexit.register(_discard_spare)


# ---------------------------------------------------------------------------- executors


class Executor(Protocol):
    """Runs tasks; yields each (task, report) as soon as it is done, in any order."""

    def map(self, tasks: Iterable[Task]) -> Iterator[tuple[Task, Report]]: ...


class SerialExecutor:
    """One task after the other, in this process (tests, debugging, -j 1 without workers)."""

    def map(self, tasks: Iterable[Task]) -> Iterator[tuple[Task, Report]]:
        for task in tasks:
            yield task, grade_task(task)


class LocalExecutor:
    """`workers` processes on this machine, each keeping one warm kernel ahead of need."""

    def __init__(self, workers: int):
        self.workers = workers

    def _pool(self) -> ProcessPoolExecutor:
        context = multiprocessing.get_context("spawn")  # clean workers: no inherited threads
        return ProcessPoolExecutor(max_workers=self.workers, mp_context=context, initializer=_worker_init)

    def map(self, tasks: Iterable[Task]) -> Iterator[tuple[Task, Report]]:
        pool = self._pool()
        pending: dict[Future, Task] = {}
        retried: set[str] = set()
        try:
            for task in tasks:
                pending[pool.submit(_grade_in_worker, task)] = task
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                broken: list[Task] = []
                for future in done:
                    task = pending.pop(future)
                    try:
                        yield task, future.result()
                    except BrokenProcessPool:
                        broken.append(task)
                if broken:  # a worker died: every unfinished task of the pool failed with it
                    broken += list(pending.values())
                    pending.clear()
                    _stop(pool)
                    pool = self._pool()
                    for task in broken:
                        if task.student in retried:
                            yield task, error_report(task, "the grader process grading it died twice "
                                                           "(a crash, or the machine's memory limit)")
                        else:
                            retried.add(task.student)
                            pending[pool.submit(_grade_in_worker, task)] = task
        finally:
            if pending:  # interrupted (Ctrl-C) or stopped by a grader fault: don't wait for them
                _stop(pool)
            else:
                pool.shutdown(wait=True)


def _stop(pool: ProcessPoolExecutor) -> None:
    """Shut a pool down; on Ctrl-C its workers (which ignore SIGINT) are told to clean up and go."""
    processes = list(getattr(pool, "_processes", {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()  # SIGTERM: the worker exits through atexit, killing its kernels
    for process in processes:
        process.join(timeout=15)
        if process.is_alive():
            process.kill()


