"""The wire format between the grader and the in-kernel probe.

Requests go into the kernel as JSON; observations come back as JSON. Both sides speak the same
shapes: the grader validates them with these models, the kernel side (`runtime.py`) builds and
reads them as plain dicts so that it needs nothing but the standard library, NumPy and JAX.
An observation is a fact ("this call returned that array", "that name is not defined"), never a
verdict: judging happens in the grader's process.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

MIME_TYPE = "application/x-grader-observation+json"
"""Display-data MIME type the probe publishes each observation under."""


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ----------------------------------------------------------------------------- values


class PyScalar(_Wire):
    """A Python bool, int or float (weakly typed when it reaches JAX), or a short string."""

    t: Literal["py"] = "py"
    v: bool | int | float | str


class ArrayValue(_Wire):
    """An array or array scalar (NumPy or JAX), with its dtype and weak-type flag."""

    t: Literal["array"] = "array"
    dtype: str
    shape: list[int]
    data: list | bool | int | float = Field(description="nested lists, or a scalar for shape []")
    weak: bool = False


class SeqValue(_Wire):
    """A tuple or a list of values."""

    t: Literal["tuple", "list"]
    items: list[Value]


class DictValue(_Wire):
    """A dict with string keys."""

    t: Literal["dict"] = "dict"
    items: dict[str, Value]


class NoneValue(_Wire):
    t: Literal["none"] = "none"


class OpaqueValue(_Wire):
    """Anything the probe cannot (or will not) carry across: its type name and a short repr."""

    t: Literal["other"] = "other"
    type: str
    repr: str


Value = Annotated[
    Union[PyScalar, ArrayValue, SeqValue, DictValue, NoneValue, OpaqueValue],
    Field(discriminator="t"),
]
SeqValue.model_rebuild()
DictValue.model_rebuild()


# ----------------------------------------------------------------------------- requests


class Call(_Wire):
    """One call: positional and keyword arguments."""

    args: list[Value] = []
    kwargs: dict[str, Value] = {}


class LookupRequest(_Wire):
    """What is this name: defined? callable? jitted? its signature?"""

    op: Literal["lookup"] = "lookup"
    id: str
    name: str


class ValueRequest(_Wire):
    """The value bound to a name (for answers such as `predictions`)."""

    op: Literal["value"] = "value"
    id: str
    name: str


class CallRequest(_Wire):
    """Call `target` on each call in turn (optionally wrapped in `jax.jit`) and return results."""

    op: Literal["call"] = "call"
    id: str
    target: str
    calls: list[Call]
    jit: bool = False
    set_globals: dict[str, Value] = Field(
        default_factory=dict, description="bound in the namespace during the calls, then restored"
    )


class TraceRequest(_Wire):
    """Trace `target` on one call and list the primitives of its jaxpr or lowered module."""

    op: Literal["trace"] = "trace"
    id: str
    target: str
    call: Call
    representation: Literal["jaxpr", "lowered"]


class CompileCountRequest(_Wire):
    """Count XLA compilations that happen while `target` runs over a call sequence."""

    op: Literal["compile_count"] = "compile_count"
    id: str
    target: str
    calls: list[Call]


Request = Annotated[
    Union[LookupRequest, ValueRequest, CallRequest, TraceRequest, CompileCountRequest],
    Field(discriminator="op"),
]


# ----------------------------------------------------------------------------- observations


class Raised(_Wire):
    """An exception raised by the student's code."""

    ename: str
    evalue: str


class Parameter(_Wire):
    name: str
    kind: Literal[
        "POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD", "VAR_POSITIONAL", "KEYWORD_ONLY", "VAR_KEYWORD"
    ]
    has_default: bool


class LookupResult(_Wire):
    op: Literal["lookup"] = "lookup"
    type_name: str
    is_callable: bool
    is_jitted: bool = Field(description="has the `lower` attribute that jax.jit wrappers have")
    parameters: list[Parameter] | None = Field(
        default=None, description="None when inspect.signature cannot read one"
    )


class ValuesResult(_Wire):
    op: Literal["value", "call"]
    values: list[Value]


class TraceResult(_Wire):
    op: Literal["trace"] = "trace"
    primitives: list[str]


class CompileCountResult(_Wire):
    op: Literal["compile_count"] = "compile_count"
    compiles: int
    names: list[str]


Result = Annotated[
    Union[LookupResult, ValuesResult, TraceResult, CompileCountResult], Field(discriminator="op")
]

ObservationStatus = Literal["ok", "missing", "raised", "timeout", "crashed"]


class Observation(_Wire):
    """What the kernel saw for one request. `timeout`/`crashed` are filled in by the grader."""

    id: str
    status: ObservationStatus
    result: Result | None = None
    raised: Raised | None = None
    detail: str | None = Field(default=None, description="what went wrong, for timeout/crashed")
