"""From the checks' module runs to verifier jobs, and from the verifier's results back to runs.

Every run of one exported module becomes part of one job (the module is deserialized and
compiled once, all its calls executed, its facts read once); identical modules that several
exports returned (the same program, baked values unused) are one job too. A module's facts come
with its run; only a module that is inspected and never run, or whose run hung or killed the
verifier, gets a job that runs nothing. What comes back is
validated by the verifier client; here it is cut back into each run's share and turned into
NumPy values for the checks.

Knockouts (does a loop or a case do the work? grader/verifier/inside/knockout.py) are jobs of
their own, one per module and kind, after every value job of the batch: given the module's own
outputs, they compile and run only the knocked-out modules, with a deadline of their own. A
knockout that hangs or kills the verifier (a loop knocked out, what follows it never stops) is
marked `unfinished` on the module's constructs, which only the structure check that asked reads:
the values of the module, and the checks that judge them, are those of its value job. A knockout
compares with the tolerance of the checks that asked it (the tightest), not bit for bit.

Each job names the functions whose program its module is (`VerifierJob.functions`): a verifier
it crashes or hangs counts against their restarts only (grader/verifier/client.py).
"""

from __future__ import annotations

import base64
import hashlib
import queue
import threading
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from grader.checks import Check, ModuleRun, RunOutcome
from grader.checks.base import ModuleFacts
from grader.kernel.protocol import ExportResult, Observation
from grader.values import from_wire
from grader.verifier.protocol import Unfinished, VerifierJob, VerifierResult

MAX_CALLS_PER_JOB = 64
"""Calls of one module the verifier takes in one job; more are split into several jobs."""


class Verifying(Protocol):
    """Runs jobs: the sandboxed Verifier for grading, LocalVerifier for self-checks."""

    def run(self, jobs: list[VerifierJob], timeout: float) -> dict[str, VerifierResult]: ...


def _outcome(result: VerifierResult | None, start: int, count: int) -> RunOutcome:
    if result is None:
        return RunOutcome(status="crashed", detail="the verifier gave no result")
    facts = None
    if result.facts is not None:
        printed = result.facts.fingerprint
        facts = ModuleFacts(ops=list(result.facts.ops), custom_calls=list(result.facts.custom_calls),
                            inputs=len(result.facts.in_avals), op_count=result.facts.op_count,
                            constructs=result.facts.constructs,
                            digest=printed.digest if printed else None,
                            shingles=list(printed.shingles) if printed else [])
    if result.status != "ok":
        return RunOutcome(status=result.status, detail=result.detail, facts=facts)
    values = result.values or []
    if len(values) < start + count:
        return RunOutcome(status="crashed", detail="the verifier returned fewer results than calls", facts=facts)
    leaves = [[from_wire(v) for v in call] for call in values[start:start + count]]
    return RunOutcome(status="ok", facts=facts, values=leaves)


def verify_all(verifier: Verifying, checks: Iterable[Check], observations: dict[str, Observation],
               timeout: float, budget: float | None = None) -> dict[int, RunOutcome]:
    """Run every check's module runs in the verifier, `timeout` seconds a module (within `budget`
    for all, when given: what is left of the submission's limit), then the knockouts the checks
    ask, `timeout` seconds a module and kind; a run whose export failed is left out (its check
    reads the export's failure instead)."""
    by_module: dict[str, tuple[str, list[tuple[ModuleRun, int]]]] = {}  # digest -> (module, [(run, offset)])
    calls: dict[str, list] = {}
    # module -> construct ("loop", "case") a check asks do the work -> the tightest (rtol, atol) of those checks
    knockouts: dict[str, dict[str, tuple[float, float]]] = {}
    functions: dict[str, set[str]] = {}  # module -> the functions whose program it is
    for check in checks:
        tolerance = _tolerance(check)
        for run in check.runs():
            obs = observations.get(run.export.id)
            if obs is None or obs.status != "ok" or not isinstance(obs.result, ExportResult):
                continue
            digest = hashlib.sha256(obs.result.module.encode("ascii")).hexdigest()[:24]
            _, placed = by_module.setdefault(digest, (obs.result.module, []))
            job_calls = calls.setdefault(digest, [])
            placed.append((run, len(job_calls)))
            functions.setdefault(digest, set()).add(run.export.target)
            asked = knockouts.setdefault(digest, {})
            for kind in run.knockouts:
                have = asked.get(kind, tolerance)
                asked[kind] = (min(have[0], tolerance[0]), min(have[1], tolerance[1]))
            baked = set(obs.result.baked)  # those values are in the module: not inputs
            job_calls.extend([v for i, v in enumerate(call) if i not in baked] for call in run.inputs)
    if not by_module:
        return {}
    started = time.monotonic()
    blobs = {digest: _blob(module) for digest, (module, _) in by_module.items()}
    owners = {digest: sorted(names)[:64] for digest, names in functions.items()}
    jobs, chunks = [], {}
    for digest, blob in blobs.items():
        all_calls = calls[digest]
        if not all_calls:  # inspected only: a job that runs nothing
            jobs.append(_facts_job(digest, blob, owners[digest]))
            continue
        parts = [all_calls[i:i + MAX_CALLS_PER_JOB] for i in range(0, len(all_calls), MAX_CALLS_PER_JOB)]
        chunks[digest] = [f"{digest}-{n}" for n in range(len(parts))]
        jobs += [VerifierJob(id=job_id, module=blob, calls=part, functions=owners[digest])
                 for job_id, part in zip(chunks[digest], parts)]
    total = timeout * len(jobs) if budget is None else min(timeout * len(jobs), budget)
    # (a timeout of 0 is the self-check's: no limit of the verifier's own, its alarm stops it)
    results = _out_of_time(jobs) if budget is not None and budget <= 0 else verifier.run(jobs, total)
    # A module whose run hung or killed the verifier brought no facts: a job that runs nothing
    # reads them, so that a structure check still judges it.
    unread = [_facts_job(digest, blobs[digest], owners[digest]) for digest, ids in chunks.items()
              if _unanswered(results.get(ids[0]))]
    results.update(_run_within(verifier, unread, timeout, budget, started))
    # The knockouts, after every value: the first part's calls and values (`_inspection`).
    knocking = [job for digest, ids in chunks.items()
                for job in _knockout_jobs(digest, blobs[digest], calls[digest][:MAX_CALLS_PER_JOB],
                                          results.get(ids[0]), knockouts[digest], owners[digest])]
    results.update(_run_within(verifier, knocking, timeout, budget, started))
    outcomes: dict[int, RunOutcome] = {}
    for digest, (_, placed) in by_module.items():
        parts = [results.get(job_id) for job_id in chunks.get(digest, [])]
        facts = _knocked(_inspection(parts[0] if parts else None, results.get(f"{digest}-facts")), digest, results)
        merged = _merge(facts, parts)
        judged = any(run.judged for run, _ in placed)  # a value check runs this very module
        for run, offset in placed:
            if run.inputs:
                outcome = _outcome(merged, offset, len(run.inputs))
            else:  # inspect only
                outcome = _outcome(facts, 0, 0)
            outcomes[id(run)] = outcome.model_copy(update={"judged": judged})
    return outcomes


def _out_of_time(jobs: list[VerifierJob]) -> dict[str, VerifierResult]:
    """Jobs left when the submission's time limit has run out: each says so (its check too)."""
    why = "not run: the submission's time limit ran out"
    return {job.id: VerifierResult(id=job.id, status="timeout", detail=why) for job in jobs}


def _blob(module: str) -> bytes:
    try:
        return base64.b64decode(module, validate=True)
    except ValueError:  # the protocol's pattern refuses it first; never the grader's crash
        return b""


def _facts_job(digest: str, blob: bytes, functions: list[str]) -> VerifierJob:
    return VerifierJob(id=f"{digest}-facts", module=blob, calls=[], functions=functions)


def _tolerance(check: Check) -> tuple[float, float]:
    """(rtol, atol) of a check that asks for knockouts: a knocked-out module whose values stay
    within it changes nothing the check could see. A check without one: bit for bit."""
    spec = getattr(check, "spec", None)
    rtol, atol = getattr(spec, "rtol", 0.0), getattr(spec, "atol", 0.0)
    ok = all(isinstance(x, (int, float)) and x >= 0 for x in (rtol, atol))
    return (float(rtol), float(atol)) if ok else (0.0, 0.0)


def _run_within(verifier: Verifying, jobs: list[VerifierJob], timeout: float, budget: float | None,
                started: float) -> dict[str, VerifierResult]:
    """Run more jobs of the batch, `timeout` seconds each, within what is left of `budget`."""
    if not jobs:
        return {}
    left = None if budget is None else budget - (time.monotonic() - started)
    if left is not None and left <= 0:
        return _out_of_time(jobs)
    return verifier.run(jobs, timeout * len(jobs) if left is None else min(timeout * len(jobs), left))


def _knockout_jobs(digest: str, blob: bytes, calls: list, first: VerifierResult | None,
                   asked: dict[str, tuple[float, float]], functions: list[str]) -> list[VerifierJob]:
    """One job per kind of construct the checks ask about that the module has, once its values
    are in (`first`, the value job of the module's first calls); none for a module whose calls
    did not all run or whose constructs could not be followed (its check says why)."""
    if first is None or first.status != "ok" or first.facts is None or first.values is None:
        return []
    found = first.facts.constructs
    if found is None or found.unreadable or len(first.values) != len(calls):
        return []
    return [VerifierJob(id=f"{digest}-knockout-{kind}", module=blob, calls=calls, knockouts=[kind],
                        outputs=first.values, tolerance=asked[kind], functions=functions)
            for kind in sorted(asked) if (found.loops if kind == "loop" else found.cases)]


def _knocked(facts: VerifierResult | None, digest: str, results: dict[str, VerifierResult]) -> VerifierResult | None:
    """The module's facts with what its knockout jobs found: each construct's `does_work` (and a
    case's `always_one_branch`), or the kinds whose knockout did not finish (`Constructs.unfinished`)."""
    if facts is None or facts.facts is None or facts.facts.constructs is None:
        return facts
    found = facts.facts.constructs
    loops, cases, unfinished = list(found.loops), list(found.cases), {}
    for kind, mine in (("loop", loops), ("case", cases)):
        result = results.get(f"{digest}-knockout-{kind}")
        if result is None:
            continue
        if _unanswered(result):
            unfinished[kind] = Unfinished(status="timeout" if result.status == "timeout" else "crashed",
                                          detail=result.detail or "the verifier gave no result")
            continue
        theirs = result.facts.constructs if result.status == "ok" and result.facts is not None else None
        if theirs is None or theirs.unreadable:
            continue
        judged = theirs.loops if kind == "loop" else theirs.cases
        for i, entry in enumerate(judged[:len(mine)]):
            found_now = {"does_work": entry.does_work}
            if kind == "case":
                found_now["always_one_branch"] = entry.always_one_branch  # type: ignore[union-attr]
            mine[i] = mine[i].model_copy(update=found_now)
    constructs = found.model_copy(update={"loops": loops, "cases": cases, "unfinished": unfinished})
    return facts.model_copy(update={"facts": facts.facts.model_copy(update={"constructs": constructs})})


def _unanswered(result: VerifierResult | None) -> bool:
    """Whether a job ended without the verifier's word on its module (the grader's timeout, a
    verifier that died)."""
    return result is None or result.status in ("timeout", "crashed")


def _inspection(first: VerifierResult | None, facts_job: VerifierResult | None) -> VerifierResult | None:
    """What the module is, as a job that ran nothing would say: the facts its first run
    brought (whether or not a call then failed), its refusal, or the facts job's answer."""
    if first is not None and first.facts is not None and first.status in ("ok", "error"):
        return first.model_copy(update={"status": "ok", "values": [], "detail": None})
    if first is not None and not _unanswered(first):
        return first  # refused, or not even readable: a job that ran nothing says the same
    return facts_job


def _merge(facts: VerifierResult | None, parts: list[VerifierResult | None]) -> VerifierResult | None:
    """One module's results, from what it is (`_inspection`) and the jobs its calls were split into."""
    if facts is None or facts.status != "ok":
        return facts
    values = []
    for part in parts:
        if part is None or part.status != "ok":
            return part if part is None else part.model_copy(update={"facts": facts.facts})
        values += part.values or []
    return facts.model_copy(update={"values": values})


class InBackground:
    """Verifies exercise by exercise in a thread of its own, while the kernel exports the next
    exercise's functions: the verifier compiles on one core while the kernel traces on the other.
    `submit` hands over an exercise's checks once the kernel has answered them; `result` waits
    for every run (and raises what verifying raised, e.g. a verifier that cannot boot)."""

    def __init__(self, verifier: Verifying, timeout: float, budget: Callable[[], float]):
        self._verifier, self._timeout, self._budget = verifier, timeout, budget
        self._jobs: queue.Queue = queue.Queue()
        self._runs: dict[int, RunOutcome] = {}
        self._error: BaseException | None = None
        self._cancelled = False
        self._thread = threading.Thread(target=self._work, name="verify", daemon=True)
        self._thread.start()

    def submit(self, checks: list[Check], observations: dict[str, Observation]) -> None:
        self._jobs.put((checks, dict(observations)))

    def _work(self) -> None:
        while (item := self._jobs.get()) is not None:
            if self._error is not None or self._cancelled:
                continue
            checks, observations = item
            try:
                self._runs.update(verify_all(self._verifier, checks, observations, self._timeout, self._budget()))
            except BaseException as exc:  # surfaced in result(), in the grading thread
                self._error = exc

    def cancel(self) -> None:
        """Skip what is queued and wait for the jobs at hand (bounded by their timeout): the grading
        stops to start again (a regrade), and no verifier may start after the caller closes it."""
        self._cancelled = True
        self._jobs.put(None)
        self._thread.join()

    def result(self) -> dict[int, RunOutcome]:
        self._jobs.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._runs
