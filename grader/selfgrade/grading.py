"""`grade submit.ipynb` from the student pack, as steps: the notebook read as `grade` reads it,
its cells run in a child process (`session.NotebookProcess`), every check the self-check stage
judges observed there and judged as the instructor's `grade` judges it, the rest recorded as
"checked when you hand in"; a `grader.report.Report`.

No kernel, sandbox or batch code is imported: the pack holds none of it.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from grader import assignment as assignments
from grader.assignment.choice import choose_assignment
from grader.checks import Seen
from grader.judging.local import LocalVerifier, TimeUp
from grader.judging.plan import observe_all, plan
from grader.judging.reveal import Stage
from grader.judging.verdicts import graded_report, judged
from grader.judging.verification import InBackground
from grader.options import GradeOptions
from grader.report import Environment, Isolation, Report, environment
from grader.selfgrade.child import Child
from grader.selfgrade.packs import this_pack
from grader.selfgrade.session import NotebookProcess
from grader.submission import pack_distribution, read_submission
from grader.verifier.protocol import VerifierJob, VerifierResult

STAGE: Stage = "self_check"
UNSANDBOXED = Isolation(sandboxed=False, layers=[], backend="none", missing={
    "all": "the student pack's grade runs your notebook as you, on your own machine"})


class EachJobItsShare:
    """The self-check's verifier (a child process, killed when its time is up) with the sandboxed
    verifier's sense of time (grader/verifier/client.py): the jobs have `timeout` seconds in all,
    each its share of what is left, so a program that never ends is that job's "timeout" and
    the jobs after it still run."""

    def __init__(self, verifier: LocalVerifier):
        self.verifier = verifier

    def run(self, jobs: list[VerifierJob], timeout: float) -> dict[str, VerifierResult]:
        results: dict[str, VerifierResult] = {}
        end = time.monotonic() + timeout
        for index, job in enumerate(jobs):
            share = max(end - time.monotonic(), 0.0) / (len(jobs) - index)
            if share <= 0:
                results[job.id] = VerifierResult(id=job.id, status="timeout",
                                                 detail="not run: the submission's time limit ran out")
                continue
            booting = self.verifier.waited
            try:
                results.update(self.verifier.run([job], share))
            except TimeUp:
                results[job.id] = VerifierResult(id=job.id, status="timeout",
                                                 detail=f"still running after {share:.3g} s")
            end += self.verifier.waited - booting  # a boot is not the jobs' time
        return results


def pack_environment() -> Environment:
    """Where this ran: Python, JAX and the pack's distribution and version (the instructor's
    grader is not installed; from this checkout, the grader's)."""
    here = environment()
    own = this_pack()
    if own is None:
        return here
    name = pack_distribution(own)
    try:
        return here.model_copy(update={"grader": f"{name} {metadata.version(name)}"})
    except metadata.PackageNotFoundError:
        return here.model_copy(update={"grader": name})


def grade_notebook(path: str | Path, *, assignment: str | None = None, timeout: float | None = None,
                   seed: int | None = None, student: str | None = None,
                   on_stage: Callable[[str], None] | None = None, first: Child | None = None) -> Report:
    """Run and judge one notebook (or module). Raises SubmissionUnreadable, WrongAssignment,
    UsageError or AssignmentNotFound for bad input (exit 2), KernelStartFailed when Python
    cannot run the cells at all (exit 3); whatever the student's code does is in the report.
    `first`: a child started beforehand in the notebook's folder (the caller kills it if this
    raises before adopting it)."""
    started = time.monotonic()
    stage = on_stage or (lambda text: None)
    submission = read_submission(path)
    loaded = assignments.load(choose_assignment(submission, GradeOptions(assignment=assignment)))
    limits = loaded.spec.limits
    seed = secrets.randbelow(2**31) if seed is None else seed
    checks_plan = plan(loaded, seed, stage=STAGE)
    now = judged(checks_plan, STAGE)  # the others are recorded, never observed
    probe_timeout = timeout or limits.probe_timeout_s
    verifier = LocalVerifier()
    try:
        verifier.launch()  # its child imports JAX while the notebook's cells run
        with NotebookProcess(submission, cell_timeout=timeout or limits.cell_timeout_s,
                             request_timeout=timeout or limits.request_timeout_s,
                             submission_timeout=limits.submission_timeout_s, first=first) as process:
            stage("running the notebook's cells")
            process.run_student_cells()
            # the programs of one exercise run while the next exercise's functions are exported
            verifying = InBackground(EachJobItsShare(verifier), probe_timeout, process.remaining)
            observations = observe_all(process, now, probe_timeout, on_exercise=verifying.submit,
                                       on_stage=stage)
        stage("running the exported programs")
        seen = Seen(observations=observations, runs=verifying.result())
    finally:
        verifier.close()
    return graded_report(checks_plan, seen, submission, assignment=loaded.spec.id, problems=process.problems,
                         problems_omitted=process.problems_omitted, student=student, seed=seed, started=started,
                         environment=pack_environment(), isolation=UNSANDBOXED, stage=STAGE)
