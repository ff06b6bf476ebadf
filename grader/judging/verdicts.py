"""Verdicts: each check's outcome on what was seen, one root cause, one message, then what a
student may see of it (`reveal`) and its points (`scoring`); and the report they make
(`graded_report`), built here for both `grade`s (the instructor's and the student pack's)."""

from __future__ import annotations

import time

from grader.checks import Check, Seen
from grader.checks.base import CheckOutcome
from grader.checks.evidence import ENOUGH
from grader.checks.numeric import NumericCheckImpl
from grader.faults import one_line
from grader.judging.attribution import Failure, attribute, one_message_per_cause
from grader.judging.plan import Plan
from grader.judging.reveal import Stage, judged_now, not_judged_yet, revealed
from grader.judging.scoring import score_check, score_exercise, total
from grader.report import (
    CellProblem,
    Environment,
    ExerciseResult,
    Isolation,
    ProgramFingerprint,
    Report,
    SubmissionRef,
)
from grader.spec import CheckSpec
from grader.submission import Submission


def judge_one(check: Check, spec: CheckSpec, seen: Seen) -> CheckOutcome:
    """One check's verdict. What it judges is the student's: whatever it holds, a check that
    raises on it gives that check an `error` (the exception kept for the instructor), never an
    exception out of the grader."""
    try:
        return check.judge(seen)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the boundary between student data and check code
        return CheckOutcome(status="error", message=f"{spec.message}: this answer could not be checked",
                            judge_error=f"{check.full_id} raised {one_line(exc)}")


def own_property(check: NumericCheckImpl, spec: CheckSpec, seen: Seen,
                 wrong: list[Check]) -> CheckOutcome | None:
    """The verdict of a value check that failed on inputs an earlier check already found wrong
    values for (`NumericCheckImpl.retests`): what it measures beyond those values, the form of the
    answers and that the function runs, decides it, on a program that is an attempt at the
    function (right on enough of the values, as `grader.checks.evidence` asks of structure); None
    when it re-tests nothing or the program is no attempt."""
    if not any(check.retests(other) for other in wrong):
        return None
    try:
        return check.judge_form(seen, ENOUGH)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - as judge_one: student data, check code
        return CheckOutcome(status="error", message=f"{spec.message}: this answer could not be checked",
                            judge_error=f"{check.full_id} raised {one_line(exc)}")


def judge(checks_plan: Plan, seen: Seen, stage: Stage = "hand_in") -> list[ExerciseResult]:
    """Every check's verdict, as a student may see it (`grader.judging.reveal`): at the self-check stage
    the checks left to the hand-in are recorded, not judged; a value check failed only by values an
    earlier check already showed wrong is judged on a property of its own when it has one (the
    shape, that it runs under jit: `own_property`); then each cause is told once, by the check
    `grader.judging.attribution` chooses, and the others failed by it point there."""
    results = []
    helpers = {f.name: [rule.name for rule in f.calls if rule.uses_result]
               for exercise, _ in checks_plan for f in exercise.functions}
    for exercise, checks in checks_plan:
        failures: list[Failure | None] = []
        failed_on_values: list[Check] = []  # the value checks failed so far, whose inputs are known wrong
        for spec, check in zip(exercise.checks, checks):
            if not judged_now(spec, stage):
                failures.append(None)
                continue
            outcome = judge_one(check, spec, seen)
            echo = shown = False
            if outcome.cause == "values" and isinstance(check, NumericCheckImpl):
                # a check whose own question is about globals: answered "not them", it only re-tests
                # values; answered "them", it names the cause
                echo = any(check.retests(other) for other in failed_on_values) or outcome.reason == "globals_unused"
                shown = check.without is not None and outcome.reason != "globals_unused"
                mine = own_property(check, spec, seen, failed_on_values)
                failed_on_values.append(check)
                outcome = mine if mine is not None else outcome
            failures.append(Failure(check.full_id, spec, outcome, echo, shown))
        outcomes = one_message_per_cause(failures, helpers)
        scored = [score_check(check.full_id, spec, not_judged_yet(spec) if outcome is None
                              else revealed(outcome, spec), exercise)
                  for spec, check, outcome in zip(exercise.checks, checks, outcomes)]
        results.append(score_exercise(exercise, scored))
    return results


def programs(checks_plan: Plan, seen: Seen) -> list[ProgramFingerprint]:
    """For the instructor's search for copied work: one fingerprint per (exercise, function)
    exported, in the spec's order. A function exported for several signatures is represented by
    one of its modules, the same for every student: the first one a visible check exports (a
    hidden check's shapes may come from its generator, and so from the student's seed)."""
    chosen: dict[tuple[str, str], tuple[tuple[bool, int], ProgramFingerprint]] = {}
    order = 0
    for exercise, checks in checks_plan:
        for spec, check in zip(exercise.checks, checks):
            for run in check.runs():
                order += 1
                outcome = seen.run(run)
                facts = outcome.facts if outcome is not None else None
                if facts is None or facts.digest is None:
                    continue
                key, rank = (exercise.id, run.export.target), (spec.hidden, order)
                if key not in chosen or rank < chosen[key][0]:
                    chosen[key] = (rank, ProgramFingerprint(exercise=exercise.id, function=run.export.target,
                                                            digest=facts.digest, shingles=facts.shingles))
    return [fingerprint for _, fingerprint in chosen.values()]


def judged(checks_plan: Plan, stage: Stage) -> Plan:
    """The checks judged at this stage (the self-check records the others, never observes them)."""
    return [(exercise, [c for spec, c in zip(exercise.checks, checks) if judged_now(spec, stage)])
            for exercise, checks in checks_plan]


def graded_report(checks_plan: Plan, seen: Seen, submission: Submission, *, assignment: str,
                  problems: list[CellProblem], problems_omitted: int, student: str | None, seed: int,
                  started: float, environment: Environment, isolation: Isolation,
                  stage: Stage = "hand_in") -> Report:
    """A graded submission's report: every check judged (`judge`), the verdicts and the cell
    problems attributed (`attribute`), scored, with the fingerprints of the programs seen.
    `started`: when the grading began (`time.monotonic()`)."""
    exercises, cell_problems = attribute(judge(checks_plan, seen, stage=stage), submission.cells, problems)
    score, max_score = total(exercises)
    return Report(
        assignment=assignment,
        submission=SubmissionRef(path=submission.path, sha256=submission.sha256, kind=submission.kind),
        student=student,
        status="graded",
        score=score,
        max_score=max_score,
        exercises=exercises,
        seed=seed,
        duration_s=round(time.monotonic() - started, 3),
        environment=environment,
        cell_problems=cell_problems,
        cell_problems_omitted=problems_omitted,
        isolation=isolation,
        programs=programs(judged(checks_plan, stage), seen),
    )
