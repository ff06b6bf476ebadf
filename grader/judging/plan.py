"""The plan: every check of an assignment built with its inputs drawn, the requests they make
observed (by a kernel or the notebook's namespace, hidden values sent only as far as a function
needs them) and the exported programs run by a verifier.

No kernel, sandbox or batch code is imported here: the notebook's self-check (and the student
pack) plans with this module and the in-process prober and verifier (`local.py`), the
authoritative grade (`grader.pipeline`) with a fresh kernel and a sandboxed verifier.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from grader.assignment import Assignment
from grader.checks import Check, Context, ModuleRun, Planner, Seen, build
from grader.checks.base import CheckOutcome
from grader.errors import UsageError
from grader.judging.reveal import Stage, judged_now
from grader.judging.verification import Verifying, verify_all
from grader.checks.program import EagerFallback
from grader.kernel.protocol import CallRequest, ExportRequest, Observation, PyScalar, Request
from grader.spec import ExerciseSpec

Plan = list[tuple[ExerciseSpec, list[Check]]]


class Deferred:
    """A check this stage does not judge (`grader.judging.reveal`): built from nothing, so its inputs are
    never drawn (the student pack has no generator to draw them with)."""

    def __init__(self, full_id: str):
        self.full_id = full_id

    def requests(self) -> list[Request]:
        return []

    def runs(self) -> list[ModuleRun]:
        return []

    def judge(self, seen: Seen) -> CheckOutcome:
        raise AssertionError("a deferred check is not judged")


_last_plan: tuple[Assignment, int, Stage, Plan] | None = None


def plan(assignment: Assignment, seed: int, stage: Stage = "hand_in") -> Plan:
    """Every check built with its inputs drawn: hidden inputs come from the seed. One planner
    for the whole assignment, so checks that need the same export share it.

    A built check is only read from then on (its requests, its runs, its judgment of what was
    seen), so the last plan is kept: a batch grades every submission with one seed, and a
    worker builds its checks once instead of once a submission (50-100 ms: drawing the inputs
    and computing the reference's answers). `assignments.load` gives the same object while the
    assignment's files are unchanged, and only that object reuses the plan."""
    global _last_plan
    last = _last_plan
    if last is not None and last[0] is assignment and last[1] == seed and last[2] == stage:
        return list(last[3])
    ctx = Context(assignment=assignment, seed=seed, planner=Planner(assignment.spec.sections), stage=stage)
    built: Plan = [(ex, [build(ex.id, spec, ctx) if judged_now(spec, stage) else Deferred(f"{ex.id}.{spec.id}")
                         for spec in ex.checks]) for ex in assignment.spec.exercises]
    _last_plan = (assignment, seed, stage, built)
    return list(built)


def only(checks_plan: Plan, exercises: tuple[str, ...] | None) -> Plan:
    """The plan of these exercises alone (all when None): the probe asks about them only, the
    verifier runs their programs only, and the report scores them only."""
    if exercises is None:
        return checks_plan
    unknown = set(exercises) - {exercise.id for exercise, _ in checks_plan}
    if unknown:
        raise UsageError(f"no exercise {', '.join(sorted(unknown))} in this assignment")
    return [(exercise, checks) for exercise, checks in checks_plan if exercise.id in exercises]


class Prober(Protocol):
    """Answers probe requests: a kernel Session for grading, a LocalProber for self-checks."""

    def observe(self, requests: list[Request], timeout: float) -> dict[str, Observation]: ...


def probe_order(checks_plan: Plan) -> Plan:
    """The exercises in the order the probe asks about them: those with the most exported
    programs first, ties in the assignment's order. The verifier runs an exercise's programs
    while the kernel answers the next exercise, so what is left to run after the kernel's last
    answer is the last exercise's programs: the fewest. The order is fixed by the assignment,
    never by the submission; the report lists exercises in the assignment's order."""
    def exports(item: tuple[ExerciseSpec, list[Check]]) -> int:
        return len({run.export.id for check in item[1] for run in check.runs()})

    return sorted(checks_plan, key=lambda item: -exports(item))  # stable: ties keep their order


def hidden_last(checks_plan: Plan) -> list[tuple[ExerciseSpec, list[Check]]]:
    """The probe's batches: every exercise's visible checks, then every exercise's hidden ones.
    A hidden check's request can carry hidden values into the kernel (public values baked into an
    export, a `source = "kernel"` call), where the student's code may keep them; asked last, no
    visible check's answer (whose message shows what the kernel said) can carry them out."""
    ordered = probe_order(checks_plan)
    hidden_ids = {f"{exercise.id}.{spec.id}" for exercise, _ in ordered for spec in exercise.checks if spec.hidden}
    batches = []
    for hidden in (False, True):
        for exercise, checks in ordered:
            part = [c for c in checks if (c.full_id in hidden_ids) is hidden]
            if part:
                batches.append((exercise, part))
    return batches


def observe_all(prober: Prober, checks_plan: Plan, probe_timeout: float,
                on_exercise: Callable[[list[Check], dict[str, Observation]], None] | None = None,
                on_stage: Callable[[str], None] | None = None) -> dict[str, Observation]:
    """One probe batch per exercise (in `probe_order`), its hidden checks' in a second round
    (`hidden_last`), so a hang in one exercise costs only that exercise; a request that several
    checks share is asked once, with the first. A function judged 'either' that could not be
    traced is then called eagerly (`_untraced`), in the same batch. `on_exercise` gets each batch's checks as soon as
    the kernel has answered them (the verifier starts on them meanwhile).

    A hidden batch that asks the kernel nothing (its requests were a visible check's too, and none
    is to be called eagerly) is handed to the verifier first, when the hidden round starts: its
    programs then run on hidden inputs while the kernel answers the other hidden batches, instead
    of after the kernel's last answer. The kernel meets the same requests in the same order."""
    observations: dict[str, Observation] = {}
    asked: set[str] = set()

    def ask(exercise: ExerciseSpec, checks: list[Check], hidden: bool) -> None:
        if on_stage is not None:
            on_stage(f"checking {exercise.title}")
        requests = []
        for check in checks:
            for request in check.requests():
                if request.id not in asked:
                    asked.add(request.id)
                    requests.append(request)
        baselines = {i for check in checks for i in getattr(check, "baseline_ids", set)()}
        requests.sort(key=lambda r: r.id in baselines)  # stable: the calls without globals last
        observations.update(_hidden_values_if_needed(prober, requests, probe_timeout) if hidden
                            else prober.observe(requests, probe_timeout))
        eager = [call for check in checks for call in _untraced(check, observations) if call.id not in asked]
        if eager:
            asked.update(call.id for call in eager)
            observations.update(prober.observe(list({call.id: call for call in eager}.values()), probe_timeout))
        if on_exercise is not None:
            on_exercise(checks, observations)

    batches = hidden_last(checks_plan)  # every visible batch, then every hidden one
    kinds = [_is_hidden(exercise, checks) for exercise, checks in batches]
    for exercise, checks in [b for b, h in zip(batches, kinds) if not h]:
        ask(exercise, checks, hidden=False)
    for exercise, checks in _free_first([b for b, h in zip(batches, kinds) if h], asked, observations):
        ask(exercise, checks, hidden=True)
    return observations


def _is_hidden(exercise: ExerciseSpec, checks: list[Check]) -> bool:
    """Whether a batch of `hidden_last` is a hidden one (its checks are all hidden or all visible)."""
    return any(spec.hidden and f"{exercise.id}.{spec.id}" == checks[0].full_id for spec in exercise.checks)


def _free_first(batches: Plan, asked: set[str], observations: dict[str, Observation]) -> Plan:
    """The hidden batches, those that ask the kernel nothing first (their requests all asked in
    the visible round, no eager call to make), each group in its order."""
    def free(checks: list[Check]) -> bool:
        return (all(r.id in asked for check in checks for r in check.requests())
                and all(call.id in asked for check in checks for call in _untraced(check, observations)))

    return [b for b in batches if free(b[1])] + [b for b in batches if not free(b[1])]


def _untraced(check: Check, observations: dict[str, Observation]) -> list[CallRequest]:
    """The eager calls of a function judged 'either' whose export raised: its text allows jax.jit
    and does not require it, so what cannot be traced is called as plain Python."""
    fallbacks: list[EagerFallback] = getattr(check, "fallbacks", lambda: [])()
    return [fallback.call for fallback in fallbacks
            if any((o := observations.get(e.id)) is not None and o.status == "raised" for e in fallback.exports)]


def _hidden_values_if_needed(prober: Prober, requests: list[Request], timeout: float) -> dict[str, Observation]:
    """A hidden batch's observations, its exports asked with no value first: one that cannot be
    traced with every argument abstract is asked again with its public Python integers alone (a
    loop's count), and only if that raised too with every public value (which a hidden check
    draws). A function that traces never has a hidden value in its kernel, however its code reads
    the requests (a wrapped `json.loads`), and a Python loop meets its count, never its `lr`."""
    def counts(request: ExportRequest) -> dict:
        return {i: v for i, v in request.fallback.items() if isinstance(v, PyScalar) and type(v.v) in (int, bool)}

    stages: list[Callable[[ExportRequest], dict]] = [lambda r: {}, counts, lambda r: r.fallback]
    asked = {r.id: {} for r in requests if isinstance(r, ExportRequest)}
    seen = prober.observe([r.model_copy(update={"fallback": {}}) if r.id in asked else r for r in requests], timeout)
    for stage in stages[1:]:
        again = []
        for r in requests:
            if not isinstance(r, ExportRequest) or (o := seen.get(r.id)) is None or o.status != "raised":
                continue
            more = stage(r)
            if more and more != asked[r.id]:
                asked[r.id] = more
                again.append(r.model_copy(update={"fallback": more}))
        if again:
            seen.update(prober.observe(again, timeout))
    return seen


def seen_all(observations: dict[str, Observation], verifier: Verifying, checks_plan: Plan,
             timeout: float, budget: float | None = None) -> Seen:
    """The kernel's observations and the verifier's runs of the exported programs."""
    checks = [check for _, exercise_checks in checks_plan for check in exercise_checks]
    return Seen(observations=observations, runs=verify_all(verifier, checks, observations, timeout, budget))
