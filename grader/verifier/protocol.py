"""What the grader and the verifier say to each other: the job and result models, their bounds,
and the checks every line from the verifier meets before the grader uses it.

Models only (pydantic and the standard library), with the bounds `inside/runtime.py` keeps on
its side: the judging core (`grader.judging.verification`) and the student pack's in-process
verifier use them without starting any process; `client.py` starts the verifier and speaks it.
"""

from __future__ import annotations

import base64
import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from grader.kernel.protocol import MAX_NODES, MAX_TEXT, ArrayValue, PyScalar, TooLarge, measure
from grader.verifier.inside import constructs as _constructs
from grader.verifier.inside import fingerprint as _fingerprint
from grader.verifier.inside import runtime as _runtime

MAX_LINE_BYTES = 16 * 2**20
"""Bytes of one line from the verifier (400,000 values of up to 26 bytes each fit)."""
MAX_RESULT_NODES = MAX_NODES
"""JSON values of one result (the runtime keeps its outputs to MAX_VALUE_NODES, fewer)."""
MAX_MODULE_BYTES = 6 * 2**20
"""Bytes of one serialized module (the kernel sends at most 4.5 MiB; the course's are a few KB)."""
MAX_ID = 200
MAX_CALLS = _runtime.MAX_CALLS
MAX_INPUTS = _runtime.MAX_INPUTS
MAX_OUTPUTS = _runtime.MAX_OUTPUTS
MAX_OPS = _runtime.MAX_OPS
ALLOWED_CUSTOM_CALLS = _runtime.ALLOWED_CUSTOM_CALLS

Text = Annotated[str, Field(max_length=MAX_TEXT)]

# ----------------------------------------------------------------------------- models


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Aval(_Wire):
    """The abstract value of one flat input or output: shape, dtype (as JAX names it: it may be
    bfloat16 even though values travel in the closed set of protocol dtypes) and weak type."""

    shape: list[Annotated[int, Field(ge=0, lt=2**63)]] = Field(max_length=_runtime.MAX_RANK)
    dtype: Annotated[str, Field(max_length=40)]
    weak: bool


class Fingerprint(_Wire):
    """A module's normalised program (grader/verifier/inside/fingerprint.py: locations, names and the
    constants' order stripped): its sha256, and the hashes of its op n-grams (a bottom-k sketch)."""

    digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    shingles: list[Annotated[int, Field(ge=0, lt=2**64)]] = Field(max_length=_fingerprint.MAX_SHINGLES)


LoopStop = Literal["value_dependent", "counted_by_input", "counted_by_constant", "invariant"]


class LoopFacts(_Wire):
    """A `while` of the module (lax.while_loop, fori_loop and scan all lower to one): what its
    stop reads (constructs.py) and whether a value its body computes reaches the outputs."""

    stop: LoopStop = Field(description=(
        "value_dependent: the condition reads a value the body computes from the inputs (a while_loop); "
        "counted_by_input: a counter against a bound from an input (fori_loop over a traced count); "
        "counted_by_constant: a counter against a bound fixed when traced (scan, fori_loop over a Python int); "
        "invariant: neither (it runs zero times or never stops)"))
    feeds_output: bool
    bound: int | None = Field(default=None, ge=-2**31, lt=2**31, description=(
        "counted_by_constant: the integer constant its counter is compared with (its trip count)"))
    does_work: bool | None = Field(default=None, description=(
        "the module gives other values on the job's calls when this loop runs no step (knockout.py); "
        "None: not asked or not measured"))
    blocks: list[Annotated[int, Field(ge=2, lt=2**31)]] = Field(
        default_factory=list, max_length=_constructs.MAX_BLOCKS, description=(
            "counted_by_constant: the k of each input array it steps through k elements at a time (carried "
            "as (bound, k, ...): lax.scan with unroll=k), whose other n % k elements follow the loop"))


class CaseFacts(_Wire):
    """A `case` of the module (lax.switch, lax.cond): whether it chooses from the inputs and its
    choice is what the function returns."""

    index_from_input: bool = Field(description="data flows from an argument to the branch index")
    feeds_output: bool = Field(description="one of its results reaches the outputs")
    branches_differ: bool = Field(description="not every branch returns the very same values")
    does_work: bool | None = Field(default=None, description=(
        "the module gives other values on the job's calls whichever branch this case is forced to take "
        "(knockout.py); None: not asked or not measured"))
    always_one_branch: bool = Field(default=False, description=(
        "forced to one of its branches, the module gives its own values on every call while another "
        "branch changes them: on these calls the case always takes that branch, so it chooses nothing"))
    returned: bool = Field(default=False, description=(
        "one of its results is what `main` returns, as it is (at most reshaped, converted or passed out of a "
        "call): a case that does no work is then one whose every branch computes the same answer"))


class Unfinished(_Wire):
    """A knockout job that ended without the verifier's word (grader/judging/verification.py)."""

    status: Literal["timeout", "crashed"]
    detail: Text


class Constructs(_Wire):
    """The module's loops and cases as its def-use chains show them, or why they could not be read."""

    loops: list[LoopFacts] = Field(default_factory=list, max_length=_runtime.constructs.MAX_REPORTED)
    cases: list[CaseFacts] = Field(default_factory=list, max_length=_runtime.constructs.MAX_REPORTED)
    unreadable: Text | None = None
    unfinished: dict[Literal["loop", "case"], Unfinished] = Field(default_factory=dict, description=(
        "the grader's, never the verifier's: the knockout job of that kind did not finish, and why; its "
        "`does_work` stays None and the structure check that asked says so"))


class ModuleFacts(_Wire):
    """What a module is, read by the verifier from the module itself. `ops` are the operation
    names of the parsed module (StableHLO, CHLO and MHLO ones bare, as the probe's `lowered`
    trace names them: "while", "case"; others with their dialect: "func.call")."""

    fun_name: Text
    platforms: list[Text] = Field(max_length=8)
    in_avals: list[Aval] = Field(max_length=MAX_INPUTS)
    out_avals: list[Aval] = Field(max_length=MAX_OUTPUTS)
    in_tree: Text
    out_tree: Text
    nr_devices: int = Field(ge=0, le=2**31)
    ops: list[Text] = Field(max_length=MAX_OPS)
    custom_calls: list[Text] = Field(max_length=MAX_OPS)
    op_count: int = Field(default=0, ge=0, le=2**31, description="operations in the module, nested ones included")
    fingerprint: Fingerprint | None = Field(default=None, description=(
        "the normalised program, for the instructor's search for copied work (never a verdict)"))
    constructs: Constructs | None = Field(default=None, description=(
        "what its loops' stops read and its cases choose from (grader/verifier/inside/constructs.py)"))


InputValue = Annotated[ArrayValue | PyScalar, Field(discriminator="t")]
"""One flat input: an array (cast to the module's dtype when NumPy's `same_kind` allows it) or
a Python number for a scalar input."""


class VerifierJob(_Wire):
    """Inspect a serialized module (`jax.export` bytes) and run it on each call: one value per
    entry of the module's `in_avals`, in order. No calls: inspect only."""

    id: Annotated[str, Field(min_length=1, max_length=MAX_ID)]
    module: bytes = Field(max_length=MAX_MODULE_BYTES)
    calls: list[Annotated[list[InputValue], Field(max_length=MAX_INPUTS)]] = Field(
        default_factory=list, max_length=MAX_CALLS)
    knockouts: list[Literal["loop", "case"]] = Field(default_factory=list, max_length=2, description=(
        "run the module again with each loop and case knocked out (knockout.py): does each do the work?"))
    outputs: list[Annotated[list[ArrayValue], Field(max_length=MAX_OUTPUTS)]] | None = Field(
        default=None, max_length=MAX_CALLS, description=(
            "a knockout job: the module's own outputs for `calls` (a value job's answer), so that only the "
            "knocked-out modules are compiled and run; its answer then holds no values"))
    tolerance: tuple[Annotated[float, Field(ge=0)], Annotated[float, Field(ge=0)]] = Field(
        default=(0.0, 0.0), description=(
            "(rtol, atol): a knocked-out module changes an output when an element differs from the module's "
            "own by more than atol + rtol * |own| (the checks' tolerance: a change no check can see is none)"))
    functions: list[Annotated[str, Field(max_length=MAX_ID)]] = Field(default_factory=list, max_length=64, description=(
        "the grader's bookkeeping, never sent: the student functions whose program this module is; a "
        "verifier the job kills counts against each one's restarts (client.Verifier)"))


Values = list[Annotated[list[ArrayValue], Field(max_length=MAX_OUTPUTS)]]

VerifierStatus = Literal["ok", "refused", "error", "timeout", "crashed"]


class _ResultLine(_Wire):
    """A result as the verifier may send it (timeout and crashed are the grader's to say)."""

    id: Text
    status: Literal["ok", "refused", "error"]
    facts: ModuleFacts | None
    values: Values | None = Field(max_length=MAX_CALLS)
    detail: Text | None


class VerifierResult(_Wire):
    """What became of one job.

    ok        `facts`, and `values`: per call, the output leaves (in the order of
              `facts.out_avals`)
    refused   the module is not run (`detail` says why; `facts` when they could be read)
    error     the module or a call failed (garbage bytes, inputs that do not fit, XLA raised)
    timeout   still running at its deadline: the verifier was killed
    crashed   the verifier died during the job, or sent an answer the grader cannot accept
    """

    id: Text
    status: VerifierStatus
    facts: ModuleFacts | None = None
    values: Values | None = Field(default=None, max_length=MAX_CALLS)
    detail: Text | None = None
    seconds: float = Field(default=0.0, description="the job's wall time, measured by the grader")


class BadAnswer(ValueError):
    """A line from the verifier that is not an acceptable answer to the job sent."""


def _short(text: str, limit: int = 500) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_result(line: bytes, job: VerifierJob) -> VerifierResult:
    """Validate one line from the verifier as the answer to `job`; raise BadAnswer if it is not.

    The bounds come before any structure is built: the line's size (the reader's cap), an upper
    bound of its JSON values counted on the bytes (every value but the first in its container
    follows a comma), `measure()` on the parsed object, then the models, then the answer's fit
    to the job (its id, one list of outputs per call, of the shapes the module declares)."""
    if len(line) > MAX_LINE_BYTES:
        raise BadAnswer(f"a line over {MAX_LINE_BYTES // 2**20} MiB")
    if line.count(b",") + line.count(b"[") + line.count(b"{") + 1 > 2 * MAX_RESULT_NODES:
        raise BadAnswer(f"more than {MAX_RESULT_NODES:,} values")
    try:
        raw = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BadAnswer(f"not JSON ({type(exc).__name__})") from None
    try:
        measure(raw, max_nodes=MAX_RESULT_NODES)
    except TooLarge as exc:
        raise BadAnswer(str(exc)) from None
    if not isinstance(raw, dict):
        raise BadAnswer("not an object")
    try:
        wire = _ResultLine.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))[:100]
        raise BadAnswer(_short(f"{where}: {first.get('msg', 'invalid')}", 300)) from None
    if wire.id != job.id:
        raise BadAnswer("the answer of another job")
    if wire.facts is not None and wire.facts.constructs is not None and wire.facts.constructs.unfinished:
        raise BadAnswer("constructs marked unfinished (the grader's to say)")
    if wire.status == "ok":
        if wire.facts is None or wire.values is None:
            raise BadAnswer("an ok answer without facts or values")
        if job.outputs is not None:  # a knockout job: its facts only
            if wire.values:
                raise BadAnswer("values in the answer of a knockout job")
        elif len(wire.values) != len(job.calls):
            raise BadAnswer(f"{len(wire.values)} lists of outputs for {len(job.calls)} calls")
        outs = wire.facts.out_avals
        for i, leaves in enumerate(wire.values, 1):
            if len(leaves) != len(outs):
                raise BadAnswer(f"call {i}: {len(leaves)} outputs, the module declares {len(outs)}")
            for value, aval in zip(leaves, outs):
                carried = aval.dtype if aval.dtype in _runtime.DTYPES else "float32"
                if value.shape != aval.shape or value.dtype != carried:
                    raise BadAnswer(f"call {i}: an output that is not the {aval.dtype}{aval.shape} declared")
    elif wire.values is not None:
        raise BadAnswer(f"values in a {wire.status} answer")
    return VerifierResult(**wire.model_dump())


def job_line(job: VerifierJob) -> bytes:
    """The job as the runtime reads it: one JSON line (non-finite floats as NaN/Infinity, which
    Python's json reads back)."""
    line = {"id": job.id, "module": base64.b64encode(job.module).decode("ascii"),
            "calls": [[value.model_dump() for value in call] for call in job.calls]}
    if job.knockouts:
        line["knockouts"] = sorted(set(job.knockouts))
        line["tolerance"] = list(job.tolerance)
    if job.outputs is not None:
        line["outputs"] = [[value.model_dump() for value in call] for call in job.outputs]
    return (json.dumps(line) + "\n").encode("utf-8")


def ping_line(nonce: int) -> bytes:
    """The ping that follows each result: answered by a verifier that is back in its loop."""
    return (json.dumps({"ping": nonce}) + "\n").encode("ascii")


def is_pong(line: bytes, nonce: int) -> bool:
    """Whether a line is the answer to ping `nonce` (the line is bounded by the reader)."""
    try:
        answer = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(answer, dict) and list(answer) == ["pong"] and answer["pong"] == nonce
