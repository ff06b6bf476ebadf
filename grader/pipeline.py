"""grade_one: spec -> kernel -> probe -> verdicts -> report, one short step each."""

from __future__ import annotations

import functools
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path

from grader import assignment as assignments
from grader.assignment import Assignment
from grader.assignment.choice import choose_assignment
from grader.checks import Seen
from grader.errors import AssignmentBug, MachineOverloaded
from grader.faults import one_line
from grader.judging.plan import observe_all, only, plan
from grader.judging.verdicts import graded_report
from grader.judging.verification import InBackground
from grader.kernel.client import Kernel
from grader.kernel.session import Session
from grader.options import GradeOptions
from grader.report import Isolation, Report, environment
from grader.sandbox.layers import SandboxPolicy, available
from grader.sandbox.starvation import REGRADES
from grader.submission import read_submission
from grader.verifier.client import Verifier


def isolation_for(options: GradeOptions) -> Isolation:
    """The layers that will be in force (all the machine has, or none with --no-sandbox)."""
    if options.sandbox:
        return available()
    return Isolation(sandboxed=False, layers=[], missing={"all": "turned off with --no-sandbox"}, backend="none")


def policy_for(options: GradeOptions) -> SandboxPolicy | None:
    """The sandbox of this run's kernels and verifiers: the default limits, and the reference
    solutions' compiled programs to read (grader/sandbox/executables.py) where the machine can bind them."""
    from grader.sandbox import executables

    return executables.sandbox_policy(options.sandbox)


def kernels_for(options: GradeOptions) -> Callable[[], Kernel]:
    return functools.partial(Kernel, kernel_name=options.kernel_name, sandbox=policy_for(options))


# ----------------------------------------------------------------------------- which assignment
# Every choice of the assignment a submission is graded as is made here: one file
# (`choose_assignment`), a batch (`decide_assignment`, then `wrong_claim` per notebook) and the
# Gradescope bundle (`only_assignment`).


class _Preparation:
    """Runs checks.py's optional prepare() beside the kernel start (e.g. measuring real JAX)."""

    def __init__(self, assignment: Assignment):
        self._error: BaseException | None = None
        fn: Callable[[], object] | None = getattr(assignment.checks, "prepare", None)
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True) if fn else None
        if self._thread:
            self._thread.start()

    def _run(self, fn: Callable[[], object]) -> None:
        try:
            fn()
        except BaseException as exc:  # surfaced in wait(), in the main thread
            self._error = exc

    def wait(self) -> None:
        if self._thread:
            self._thread.join()
        if self._error:
            raise AssignmentBug("checks.py prepare()", one_line(self._error)) from self._error


def verifier_for(options: GradeOptions) -> Verifier:
    return Verifier(sandbox=policy_for(options))


def grade_one(path: str | Path, options: GradeOptions | None = None, *,
              kernel_factory: Callable[[], Kernel] | None = None,
              verifier: Verifier | None = None,
              on_stage: Callable[[str], None] | None = None,
              on_assignment: Callable[[Assignment, GradeOptions], None] | None = None) -> Report:
    """Grade one submission in its own fresh kernel and return its report.

    `kernel_factory` supplies kernels (the first may already be launched, to boot while the
    grader imports and plans). Raises SubmissionUnreadable / UsageError / SpecInvalid / AssignmentNotFound for bad input and
    KernelStartFailed when no kernel can run at all; everything the student's code does is a
    status inside the report instead. `verifier` runs the exported programs (one per
    submission: a fresh one unless given, closed at the end either way). `on_assignment`
    is called once the submission's assignment is known, before its first grading (the command
    line's single file compiles the reference solution's programs then: grader/precompile.py).

    A cell or check that timed out while the machine kept the submission's processes from the
    CPU is no verdict (grader/sandbox/starvation.py): the submission is graded again, from the start and
    with the same seed, at most REGRADES times; still starved, MachineOverloaded (its error report).
    """
    options = options or GradeOptions()
    if options.seed is None:  # a regrade draws the same hidden inputs
        options = options.model_copy(update={"seed": secrets.randbelow(2**31)})
    for attempt in range(REGRADES + 1):
        try:
            return _grade_once(path, options, kernel_factory=kernel_factory, verifier=verifier,
                               on_stage=on_stage, on_assignment=on_assignment if attempt == 0 else None)
        except MachineOverloaded:
            if attempt == REGRADES:
                raise
            verifier = _fresh(verifier) if verifier is not None else None
    raise AssertionError("unreachable")


def _fresh(verifier: Verifier) -> Verifier:
    """A new verifier like `verifier` (closed by the attempt that used it): the same sandbox,
    fork server and known answers, its restarts unused."""
    return Verifier(verifier.policy, boot_timeout=verifier.boot_timeout, max_restarts=verifier.max_restarts,
                    program=verifier.program, server=verifier.server, answers=verifier.answers)


def _grade_once(path: str | Path, options: GradeOptions, *, kernel_factory: Callable[[], Kernel] | None,
                verifier: Verifier | None, on_stage: Callable[[str], None] | None,
                on_assignment: Callable[[Assignment, GradeOptions], None] | None) -> Report:
    """One grading of the submission (grade_one's steps)."""
    started = time.monotonic()
    submission = read_submission(path)
    assignment = assignments.load(choose_assignment(submission, options))
    if on_assignment is not None:
        on_assignment(assignment, options)
    limits = assignment.spec.limits
    cell_timeout = options.cell_timeout or limits.cell_timeout_s
    probe_timeout = options.cell_timeout or limits.probe_timeout_s
    request_timeout = options.cell_timeout or limits.request_timeout_s
    seed = options.seed if options.seed is not None else secrets.randbelow(2**31)

    verifier = verifier or verifier_for(options)
    try:
        with Session(submission, cell_timeout=cell_timeout, submission_timeout=limits.submission_timeout_s,
                     request_timeout=request_timeout,
                     kernel_factory=kernel_factory or kernels_for(options)) as session:
            if on_stage is not None:
                session.on_stage = on_stage
            session.launch()
            verifier.launch()
            preparation = _Preparation(assignment)
            checks_plan = only(plan(assignment, seed), options.exercises)
            session.run_student_cells()
            verifying = InBackground(verifier, probe_timeout, session.remaining)
            try:
                observations = observe_all(session, checks_plan, probe_timeout, on_exercise=verifying.submit,
                                           on_stage=on_stage)
            except MachineOverloaded:
                verifying.cancel()  # before the verifier is closed, so that nothing starts one again
                raise
        seen = Seen(observations=observations, runs=verifying.result())
    finally:
        verifier.close()
    preparation.wait()
    return graded_report(checks_plan, seen, submission, assignment=assignment.spec.id, problems=session.problems,
                         problems_omitted=session.problems_omitted, student=options.student, seed=seed,
                         started=started, environment=environment(), isolation=isolation_for(options))
