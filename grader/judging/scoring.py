"""Pure functions from check outcomes to points: all-or-nothing per check, summed upward."""

from __future__ import annotations

from grader.checks.base import CheckOutcome
from grader.judging.attribution import undefined_name
from grader.report import CheckResult, ExerciseResult, Tally
from grader.spec import CheckSpec, ExerciseSpec


def score_check(full_id: str, spec: CheckSpec, outcome: CheckOutcome,
                exercise: ExerciseSpec | None = None) -> CheckResult:
    # a check failed (or not judged) only for another check's cause, or stopped before it judged anything
    # (the function never finished): its sentence is not the one missed
    own = outcome.reason != "same_cause" and outcome.status != "timeout"
    sentences = [exercise.requirement(r).text for r in spec.verifies] if exercise and own else []
    return CheckResult(
        id=full_id,
        title=spec.title,
        status=outcome.status,
        score=spec.points if outcome.status == "passed" else 0.0,
        max_score=spec.points,
        hidden=spec.hidden,
        reveal=spec.revealed,
        message=outcome.message,
        counterexample=outcome.counterexample,
        requirements=sentences,
        judge_error=outcome.judge_error,
        tally=Tally(failed=outcome.tally[0], calls=outcome.tally[1]) if outcome.tally else None,
        reason=outcome.reason,
        not_answered=outcome.not_answered,
        same_as=outcome.same_as,
        undefined=undefined_name(outcome.raised.ename, outcome.raised.evalue) if outcome.raised else None,
    )


def score_exercise(spec: ExerciseSpec, results: list[CheckResult]) -> ExerciseResult:
    return ExerciseResult(id=spec.id, title=spec.title, score=sum(r.score for r in results),
                          max_score=spec.points, checks=results)


def total(exercises: list[ExerciseResult]) -> tuple[float, float]:
    return sum(e.score for e in exercises), sum(e.max_score for e in exercises)
