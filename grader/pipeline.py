"""grade_one: spec -> kernel -> probe -> verdicts -> report, one short step each."""

from __future__ import annotations

import functools
import secrets
import threading
import time
from pathlib import Path
from typing import Callable, Protocol

from grader import assignment as assignments
from grader.assignment import Assignment
from grader.attribution import attribute
from grader.checks import Check, Context, Planner, Seen, build
from grader.checks.base import CheckOutcome
from grader.errors import AssignmentBug, UsageError, WrongAssignment
from grader.faults import one_line
from grader.kernel import Kernel
from grader.options import GradeOptions
from grader.probe.protocol import Observation, Request
from grader.report import ExerciseResult, Report, SubmissionRef, environment
from grader.reveal import Stage, judged_now, not_judged_yet, revealed
from grader.scoring import score_check, score_exercise, total
from grader.sandbox import Isolation, SandboxPolicy, available
from grader.session import Session
from grader.spec import CheckSpec, ExerciseSpec
from grader.submission import Submission, claim_text, read_submission
from grader.verification import InBackground, Verifying, verify_all
from grader.verifier.client import Verifier

Plan = list[tuple[ExerciseSpec, list[Check]]]


def isolation_for(options: GradeOptions) -> Isolation:
    """The layers that will be in force (all the machine has, or none with --no-sandbox)."""
    if options.sandbox:
        return available()
    return Isolation(sandboxed=False, layers=[], missing={"all": "turned off with --no-sandbox"})


def kernels_for(options: GradeOptions) -> Callable[[], Kernel]:
    policy = SandboxPolicy() if options.sandbox else None
    return functools.partial(Kernel, kernel_name=options.kernel_name, sandbox=policy)


def choose_assignment(submission: Submission, options: GradeOptions) -> str:
    """-a (the instructor's: an id or a folder), else the notebook's `grader.assignment`, else the
    file name, else the only one.

    What a notebook names is the student's: it may only be the id of an assignment in the
    assignments folder (never a path, so nothing in the submissions folder is loaded as instructor
    code), and with -a it must be that one. Otherwise the submission is not gradable:
    WrongAssignment (an error report in a batch, exit 2 for one file).
    """
    known = assignments.available()
    hint = submission.assignment_hint
    if hint is not None and hint not in known:
        raise WrongAssignment(submission.path, claim_text(hint))
    if options.assignment:
        if hint is not None:
            wanted = assignments.resolve(options.assignment).resolve()
            if assignments.resolve(hint).resolve() != wanted:
                raise WrongAssignment(submission.path, hint, wanted.name, graded="it is being graded as")
        return options.assignment
    if hint is not None:
        return str(assignments.assignments_dir() / hint)  # the instructor's folder, never one elsewhere
    stem = Path(submission.path).stem
    if stem in known:
        return str(assignments.assignments_dir() / stem)
    if len(known) == 1:
        return str(assignments.assignments_dir() / known[0])
    raise UsageError(f"cannot tell which assignment {submission.path} is for; pass -a ({', '.join(known)})")


def plan(assignment: Assignment, seed: int) -> Plan:
    """Every check built with its inputs drawn: hidden inputs come from the seed. One planner
    for the whole assignment, so checks that need the same export share it."""
    ctx = Context(assignment=assignment, seed=seed, planner=Planner())
    return [(ex, [build(ex.id, spec, ctx) for spec in ex.checks]) for ex in assignment.spec.exercises]


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


class Prober(Protocol):
    """Answers probe requests: a kernel Session for grading, a LocalProber for self-checks."""

    def observe(self, requests: list[Request], timeout: float) -> dict[str, Observation]: ...


def observe_all(prober: Prober, checks_plan: Plan, probe_timeout: float,
                on_exercise: Callable[[list[Check], dict[str, Observation]], None] | None = None,
                ) -> dict[str, Observation]:
    """One probe batch per exercise, so a hang in one exercise costs only that exercise; a request
    that several checks share is asked once. `on_exercise` gets each exercise's checks as soon
    as the kernel has answered them (the verifier starts on them meanwhile)."""
    observations: dict[str, Observation] = {}
    asked: set[str] = set()
    for _, checks in checks_plan:
        requests = []
        for check in checks:
            for request in check.requests():
                if request.id not in asked:
                    asked.add(request.id)
                    requests.append(request)
        observations.update(prober.observe(requests, probe_timeout))
        if on_exercise is not None:
            on_exercise(checks, observations)
    return observations


def seen_all(observations: dict[str, Observation], verifier: Verifying, checks_plan: Plan,
             timeout: float, budget: float | None = None) -> Seen:
    """The kernel's observations and the verifier's runs of the exported programs."""
    checks = [check for _, exercise_checks in checks_plan for check in exercise_checks]
    return Seen(observations=observations, runs=verify_all(verifier, checks, observations, timeout, budget))


def judge_one(check: Check, spec: CheckSpec, seen: Seen) -> CheckOutcome:
    """One check's verdict. What it judges is the student's: whatever it holds, a check that
    raises on it gives that check an `error` (the exception kept for the instructor), never an
    exception out of the grader."""
    try:
        return check.judge(seen)
    except Exception as exc:  # noqa: BLE001 - the boundary between student data and check code
        return CheckOutcome(status="error", message=f"{spec.message}: this answer could not be checked",
                            judge_error=f"{check.full_id} raised {one_line(exc)}")


def _subject(spec: CheckSpec) -> str | None:
    """The student function a check judges (a custom check's `function` is the instructor's)."""
    if spec.kind == "custom":
        return spec.call
    return getattr(spec, "function", None) if spec.kind != "interface" else spec.name


def same_cause(outcome: CheckOutcome, spec: CheckSpec, root: str) -> CheckOutcome:
    """One root cause, one message: a check that failed only because the function's values are
    wrong, or because JAX cannot trace it (which `root` already says, with the call or the line),
    gives no advice of its own."""
    if outcome.cause == "values":
        message, cause = f"same wrong values as {root}; this check of {spec.title!r} is judged once those are right", \
            "same_values"
    else:
        message, cause = f"same tracing error as {root}; this check of {spec.title!r} is judged once it traces", \
            "same_trace"
    return outcome.model_copy(update={"message": message, "cause": cause,
                                      "counterexample": outcome.counterexample or outcome.message, "tally": None})


def judge(checks_plan: Plan, seen: Seen, stage: Stage = "hand_in") -> list[ExerciseResult]:
    """Every check's verdict, as a student may see it (`grader.reveal`): at the self-check stage
    the checks left to the hand-in are recorded, not judged; a check failed only by values an
    earlier check already showed wrong points to it (one root cause, one message)."""
    results = []
    for exercise, checks in checks_plan:
        scored = []
        first: dict[tuple[str, str], str] = {}  # (function, cause) -> the first check it failed
        for spec, check in zip(exercise.checks, checks):
            if not judged_now(spec, stage):
                scored.append(score_check(check.full_id, spec, not_judged_yet(spec), exercise))
                continue
            outcome = judge_one(check, spec, seen)
            function = _subject(spec)
            key = (function or "", outcome.cause or "")
            if outcome.cause in ("values", "trace") and key in first:
                outcome = same_cause(outcome, spec, first[key])
            elif outcome.cause in ("values", "trace") and function:
                first[key] = check.full_id
            scored.append(score_check(check.full_id, spec, revealed(outcome, spec), exercise))
        results.append(score_exercise(exercise, scored))
    return results


def verifier_for(options: GradeOptions) -> Verifier:
    return Verifier(sandbox=SandboxPolicy() if options.sandbox else None)


def grade_one(path: str | Path, options: GradeOptions | None = None, *,
              kernel_factory: Callable[[], Kernel] | None = None,
              verifier: Verifier | None = None) -> Report:
    """Grade one submission in its own fresh kernel and return its report.

    `kernel_factory` supplies kernels (the first may already be launched, to boot while the
    grader imports and plans). Raises SubmissionUnreadable / UsageError / SpecInvalid / AssignmentNotFound for bad input and
    KernelStartFailed when no kernel can run at all; everything the student's code does is a
    status inside the report instead. `verifier` runs the exported programs (one per
    submission: a fresh one unless given, closed at the end either way).
    """
    options = options or GradeOptions()
    started = time.monotonic()
    submission = read_submission(path)
    assignment = assignments.load(choose_assignment(submission, options))
    limits = assignment.spec.limits
    cell_timeout = options.cell_timeout or limits.cell_timeout_s
    probe_timeout = options.cell_timeout or limits.probe_timeout_s
    seed = options.seed if options.seed is not None else secrets.randbelow(2**31)

    verifier = verifier or verifier_for(options)
    try:
        with Session(submission, cell_timeout=cell_timeout, submission_timeout=limits.submission_timeout_s,
                     kernel_factory=kernel_factory or kernels_for(options)) as session:
            session.launch()
            verifier.launch()
            preparation = _Preparation(assignment)
            checks_plan = plan(assignment, seed)
            session.run_student_cells()
            verifying = InBackground(verifier, probe_timeout, session.remaining)
            observations = observe_all(session, checks_plan, probe_timeout, on_exercise=verifying.submit)
        seen = Seen(observations=observations, runs=verifying.result())
    finally:
        verifier.close()
    preparation.wait()
    exercises, problems = attribute(judge(checks_plan, seen), submission.cells, session.problems)
    score, max_score = total(exercises)
    return Report(
        assignment=assignment.spec.id,
        submission=SubmissionRef(path=submission.path, sha256=submission.sha256, kind=submission.kind),
        student=options.student,
        status="graded",
        score=score,
        max_score=max_score,
        exercises=exercises,
        seed=seed,
        duration_s=round(time.monotonic() - started, 3),
        environment=environment(),
        cell_problems=problems,
        cell_problems_omitted=session.problems_omitted,
        isolation=isolation_for(options),
    )
