"""What every check is: the requests it needs answered, then a verdict from what came back.

A check never touches the kernel or the verifier itself. It asks a `Planner` for the requests it
needs and keeps them as objects: questions for the kernel (`requests`: is this name defined,
what is this answer, export this function for these shapes) and programs for the verifier to run
(`runs`: this exported module, on these inputs). Once both have answered, it judges (`judge`) with
a pure function of `Seen`, looked up by those same objects, in the grader's process. The same
check code serves the authoritative grade (a fresh kernel and a sandboxed verifier) and the
notebook's self-check (the live namespace, and the verifier's runtime in process).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, Field, model_validator

from grader.assignment import Assignment
from grader.kernel.protocol import (
    Call,
    CallRequest,
    CompileCountRequest,
    ExportArg,
    ExportRequest,
    LookupRequest,
    Observation,
    Request,
    TraceRequest,
    Value,
    ValueRequest,
)
from grader.report import CheckStatus, NotAnswered, Reason, check_reason
from grader.verifier.protocol import Constructs


class RaisedKind(BaseModel):
    """What the student's code raised, as facts a verdict can name without quoting its text
    (`grader.judging.reveal` builds a hidden check's message from these, never from the exception's text)."""

    subject: str = Field(description="the grader's words for what raised, e.g. '`tax_switch`'")
    ename: str = Field(description="the exception's class name, as the kernel reported it")
    evalue: str = Field(default="", description="its text, which the student's code wrote: the instructor's only")
    line: int | None = Field(default=None, description="the line of the student's cell where it was raised")
    file: str | None = Field(default=None, description="the file its cell was compiled under (`Raised.file`)")
    teach: str | None = Field(default=None, description="the chapter's lesson for this kind of error, if it has one")


class CheckOutcome(BaseModel):
    """A verdict: `message` is empty when the check passed. `judge_error` is set when the
    check's own code raised on this answer (kept for the instructor; the student sees `message`).
    `reason`, with the data its sentence is made from, says why when the status alone does not
    (`grader.report.Reason`); the report's `CheckResult` carries them on."""

    status: CheckStatus
    message: str | None = None
    judge_error: str | None = None
    counterexample: str | None = Field(default=None, description=(
        "what the student may not see (a hidden input, an expected value): the instructor's report only"))
    tally: tuple[int, int] | None = Field(default=None, description="(calls that failed, calls made)")
    raised: RaisedKind | None = Field(default=None, description="the student's code raised: what, where")
    cause: Literal["values", "trace", "static", "raised", "same_values", "same_trace", "same_static",
                   "same_raised"] | None = Field(
        default=None, description=(
            "'values': the function's values disagree with the reference; 'trace': JAX could not trace it; "
            "'static': it marks static an argument the check needs traced; 'raised': called as plain Python "
            "(its text does not require a trace), it raised; the later checks of the same function that fail "
            "for that reason point here ('same_values', 'same_trace', 'same_static', 'same_raised')"))
    reason: Reason | None = None
    not_answered: NotAnswered | None = Field(default=None, description=(
        "with reason 'not_answered': the name not defined or without an answer (as the probe reported it)"))
    same_as: str | None = Field(default=None, description=(
        "with reason 'same_cause': the check that shows the root cause"))

    @model_validator(mode="after")
    def _reason_has_its_data(self) -> CheckOutcome:
        check_reason(self.reason, self.not_answered, self.same_as)
        return self


PASSED = CheckOutcome(status="passed")


def not_answered(name: str, *, item: str | int | None = None, defined: bool = False) -> CheckOutcome:
    """"Not answered yet": `name` is not defined, or (`defined`) holds no answer `item`."""
    missing = NotAnswered(name=name, defined=defined, item=item)
    return CheckOutcome(status="failed", message=missing.message, reason="not_answered", not_answered=missing)


# ----------------------------------------------------------------------------- requests as objects


@dataclass(frozen=True, eq=False)
class ModuleRun:
    """Execute the module that `export` returns, once per call, on these flat inputs (the
    values of the traced arguments: hidden ones only ever reach the verifier). `judged`: a value
    check judges these values (a structure or compile check's own run only vouches for its module)."""

    export: ExportRequest
    inputs: list[list[Value]]
    judged: bool = True
    knockouts: frozenset[str] = frozenset()  # "loop", "case": the constructs a check asks do the work


class Planner:
    """Hands out the requests checks need, each with a fresh id; an export that several checks
    need (the same function, shapes and baked values) is one request, exported once."""

    def __init__(self, sections: dict[str, str] | None = None) -> None:
        self._numbers = itertools.count(1)
        self._exports: dict[str, ExportRequest] = {}
        self.sections = dict(sections or {})  # where the course teaches what the advice cites (AssignmentSpec)

    def _id(self, kind: str) -> str:
        return f"{kind}-{next(self._numbers)}"

    def lookup(self, name: str) -> LookupRequest:
        return LookupRequest(id=self._id("lookup"), name=name)

    def value(self, name: str) -> ValueRequest:
        return ValueRequest(id=self._id("value"), name=name)

    def call(self, target: str, calls: list[Call], *, set_globals: dict[str, Value] | None = None,
             count_calls: str | None = None, perturb: bool = False, watch: bool = False) -> CallRequest:
        return CallRequest(id=self._id("call"), target=target, calls=calls, set_globals=set_globals or {},
                           count_calls=count_calls, perturb=perturb, watch=watch)

    def trace(self, target: str, call: Call, representation: Literal["jaxpr", "lowered"]) -> TraceRequest:
        return TraceRequest(id=self._id("trace"), target=target, call=call, representation=representation)

    def compile_count(self, target: str, calls: list[Call]) -> CompileCountRequest:
        return CompileCountRequest(id=self._id("count"), target=target, calls=calls)

    def export(self, target: str, args: list[ExportArg], fallback: dict[int, ExportArg],
               set_globals: dict[str, Value] | None = None) -> ExportRequest:
        key = json.dumps([target, [a.model_dump() for a in args], {k: v.model_dump() for k, v in sorted(fallback.items())},
                          {k: v.model_dump() for k, v in sorted((set_globals or {}).items())}], sort_keys=True)
        if key not in self._exports:
            self._exports[key] = ExportRequest(id=self._id("export"), target=target, args=args,
                                               fallback=fallback, set_globals=set_globals or {})
        return self._exports[key]


@dataclass(frozen=True)
class Context:
    """What a check may use besides its spec: the loaded assignment, the run's seed, the planner."""

    assignment: Assignment
    seed: int
    planner: Planner = field(default_factory=Planner)
    stage: str = "hand_in"  # or "self_check": the student's, on demand, where no hidden draw may be used


# ----------------------------------------------------------------------------- what came back


class ModuleFacts(BaseModel):
    """What the verifier read in a module: its operations and custom calls, its inputs, and its
    normalised program's fingerprint (for the instructor's search for copied work: no check reads it)."""

    ops: list[str]
    custom_calls: list[str]
    op_count: int = 0
    inputs: int
    constructs: Constructs | None = Field(default=None, description=(
        "what its loops' stops read and its cases choose from (grader/verifier/inside/constructs.py)"))
    digest: str | None = None
    shingles: list[int] = Field(default_factory=list)


class RunOutcome(BaseModel):
    """What the verifier did with one module run: `values` holds, per call, the output leaves."""

    status: Literal["ok", "refused", "error", "timeout", "crashed"]
    detail: str | None = None
    facts: ModuleFacts | None = None
    values: list[list[Any]] | None = None
    judged: bool = Field(default=False, description="a value check judges the values of this very module")


@dataclass
class Seen:
    """The kernel's observations and the verifier's runs, looked up by the request objects."""

    observations: dict[str, Observation] = field(default_factory=dict)
    runs: dict[int, RunOutcome] = field(default_factory=dict)

    def of(self, request: Request) -> Observation | None:
        return self.observations.get(request.id)

    def run(self, run: ModuleRun) -> RunOutcome | None:
        return self.runs.get(id(run))


class Check(Protocol):
    full_id: str

    def requests(self) -> list[Request]: ...

    def runs(self) -> list[ModuleRun]: ...

    def judge(self, seen: Seen) -> CheckOutcome: ...


# ----------------------------------------------------------------------------- shared verdicts


def not_available(obs: Observation | None, subject: str, hint: str) -> CheckOutcome | None:
    """The outcome when an observation holds no result (missing name, exception, hang, crash)."""
    if obs is None:
        return CheckOutcome(status="error", message=f"{hint}: the grader got no answer about {subject}")
    if obs.status == "ok":
        return None
    if obs.status == "missing":
        return not_answered(str(obs.detail))
    if obs.status == "raised" and obs.raised is not None:
        static = obs.raised.ename == "StaticArgumentError"  # its text says what: "marks argument 2 static"
        said = (f"{subject} {obs.raised.evalue}" if static
                else f"{subject} raised {obs.raised.ename}: {obs.raised.evalue}")
        return CheckOutcome(
            status="error", message=f"{hint}: {said}",
            raised=RaisedKind(subject=subject, ename=obs.raised.ename, evalue=obs.raised.evalue, line=obs.raised.line,
                              file=obs.raised.file),
        )
    if obs.status == "timeout":
        return CheckOutcome(status="timeout", message=f"{hint}: {subject} did not finish ({obs.detail})")
    return CheckOutcome(status="error", message=f"{hint}: {subject} could not be checked ({obs.detail})",
                        reason="kernel_died" if obs.died else None)


R = TypeVar("R")


def result_of(seen: Seen, request: Request, kind: type[R], subject: str, hint: str) -> R | CheckOutcome:
    """The typed result of one request, or the outcome that replaces it (missing name, raised,
    hang, crash, or an answer of the wrong shape, which only a tampered probe sends)."""
    obs = seen.of(request)
    problem = not_available(obs, subject, hint)
    if problem:
        return problem
    assert obs is not None
    if not isinstance(obs.result, kind):
        return CheckOutcome(status="error", message=f"{hint}: the probe's answer about {subject} was unreadable")
    return obs.result


def failed(hint: str, detail: str) -> CheckOutcome:
    return CheckOutcome(status="failed", message=f"{hint}: {detail}")


def wrong_values(hint: str, detail: str) -> CheckOutcome:
    """A failure because the function's values are not the reference's (not its shape, not its
    program): the root cause other checks of the same function then name instead of advising."""
    return CheckOutcome(status="failed", message=f"{hint}: {detail}", cause="values")
