"""The wire format between the grader and the in-kernel probe.

Requests go into the kernel as JSON; observations come back as JSON. Both sides speak the same
shapes: the grader validates them with these models, the kernel side (`runtime.py`) builds and
reads them as plain dicts so that it needs nothing but the standard library, NumPy and JAX.
An observation is a fact ("this call returned that array", "that name is not defined"), never a
verdict: judging happens in the grader's process.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

MIME_TYPE = "application/x-grader-observation+json"
"""Display-data MIME type the probe publishes each observation under."""


# ----------------------------------------------------------------------------- bounds

MAX_TEXT = 2_000
"""Characters of any one string on the wire (names, reprs, exception messages)."""
MAX_ELEMENTS = 100_000
"""Elements of one array; the probe sends larger arrays as opaque values."""
MAX_DEPTH = 32
"""Nesting of containers in one observation (a pytree answer is a few levels deep)."""
MAX_NODES = 400_000
"""JSON nodes (numbers, strings, lists, dicts) of one observation."""
MAX_SUBMISSION_NODES = 4_000_000
"""JSON nodes of all the observations of one submission together."""
MAX_INT = 2**64
"""Python ints on the wire stay below this in magnitude (a count, an index, a uint64)."""
DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128")
"""The closed set of array dtypes: no structured, sub-array, object or string dtypes."""


class TooLarge(ValueError):
    """An observation over a documented bound: the check that asked gets an error."""


LONG_TEXT_KEYS = frozenset({"module"})
"""Keys whose string may be longer than MAX_TEXT: an exported module (up to MAX_MODULE_CHARS)."""


def measure(raw: object, *, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> int:
    """Count the JSON nodes of a raw observation, refusing one that is too deep, too large, or
    holds an over-long string or integer, before any model is built from it (pydantic would
    recurse into it, and NumPy would allocate from it)."""
    nodes = 0
    stack: list[tuple[object, int]] = [(raw, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, tuple):  # a (key, string) pair under a long-text key
            if len(item[1]) > MAX_MODULE_CHARS:
                raise TooLarge(f"a module longer than {MAX_MODULE_CHARS:,} characters")
            nodes += 1
            continue
        nodes += 1
        if nodes > max_nodes:
            raise TooLarge(f"more than {max_nodes:,} values")
        if depth > max_depth:
            raise TooLarge(f"nested deeper than {max_depth} levels")
        if isinstance(item, dict):
            for key, value in item.items():
                if not isinstance(key, str) or len(key) > MAX_TEXT:
                    raise TooLarge("a key that is not a short string")
                if key in LONG_TEXT_KEYS and isinstance(value, str):
                    stack.append(((key, value), depth + 1))
                else:
                    stack.append((value, depth + 1))
        elif isinstance(item, list):
            stack.extend((value, depth + 1) for value in item)
        elif isinstance(item, str):
            if len(item) > MAX_TEXT:
                raise TooLarge(f"a string longer than {MAX_TEXT:,} characters")
        elif isinstance(item, bool) or item is None:
            pass
        elif isinstance(item, int):
            if abs(item) >= MAX_INT:
                raise TooLarge("an integer too large for any array dtype")
        elif not isinstance(item, float):
            raise TooLarge(f"a {type(item).__name__}, which JSON does not carry")
    return nodes


Text = Annotated[str, Field(max_length=MAX_TEXT)]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ----------------------------------------------------------------------------- values


class PyScalar(_Wire):
    """A Python bool, int or float (weakly typed when it reaches JAX), or a short string."""

    t: Literal["py"] = "py"
    v: bool | int | float | Text


NON_FINITE = ("nan", "inf", "-inf")
"""How a float that JSON cannot carry travels: as one of these strings."""


def _real_ok(x: object) -> bool:
    return (isinstance(x, (int, float)) and not isinstance(x, bool)) or x in NON_FINITE


def _leaf_ok(leaf: object, kind: str) -> bool:
    if kind == "c":  # complex: [real, imag]
        return isinstance(leaf, list) and len(leaf) == 2 and all(_real_ok(x) for x in leaf)
    if kind == "b":
        return isinstance(leaf, bool)
    if kind == "f":
        return _real_ok(leaf)
    return isinstance(leaf, int) and not isinstance(leaf, bool)


_EXACT_LEAVES = {"f": frozenset({int, float, str}), "i": frozenset({int}), "b": frozenset({bool})}


def _leaves_ok(leaves: list[object], kind: str) -> bool:
    """`_leaf_ok` for every leaf. What JSON gives (exact ints, floats, bools and strings) is
    decided by the set of the leaves' types, at C speed (an observation holds up to 100,000
    elements); anything else leaf by leaf."""
    exact = _EXACT_LEAVES.get(kind)
    if exact is not None:
        types = set(map(type, leaves))
        if types <= exact and (str not in types or all(x in NON_FINITE for x in leaves if type(x) is str)):
            return True
    return all(_leaf_ok(leaf, kind) for leaf in leaves)


class ArrayValue(_Wire):
    """An array or array scalar (NumPy or JAX), with its dtype and weak-type flag.

    The data must be nested lists exactly of `shape` (complex elements as [real, imag] pairs),
    so that what NumPy builds from it is what the shape says, and no bigger.
    """

    t: Literal["array"] = "array"
    dtype: Literal[DTYPES]  # type: ignore[valid-type]
    shape: list[Annotated[int, Field(ge=0)]] = Field(max_length=MAX_DEPTH)
    data: list | bool | int | float | str = Field(
        description="nested lists, or a scalar for shape []; non-finite floats as 'nan', 'inf', '-inf'")
    weak: bool = False

    @model_validator(mode="after")
    def _data_matches_shape(self) -> ArrayValue:
        size = 1
        for n in self.shape:
            size *= n
            if size > MAX_ELEMENTS:
                raise ValueError(f"an array of shape {tuple(self.shape)} is over {MAX_ELEMENTS:,} elements")
        kind = "c" if self.dtype.startswith("complex") else self.dtype[0] if self.dtype != "bool" else "b"
        kind = "i" if kind == "u" else kind
        level: list[object] = [self.data]
        for n in self.shape:
            nxt: list[object] = []
            for item in level:
                if not isinstance(item, list) or len(item) != n:
                    raise ValueError(f"data does not have shape {tuple(self.shape)}")
                nxt.extend(item)
            level = nxt
        if not _leaves_ok(level, kind):
            raise ValueError(f"data holds values that are not {self.dtype}")
        return self


class SeqValue(_Wire):
    """A tuple or a list of values."""

    t: Literal["tuple", "list"]
    items: list[Value]


class DictValue(_Wire):
    """A dict with string keys."""

    t: Literal["dict"] = "dict"
    items: dict[Text, Value]


class TreeValue(_Wire):
    """Another pytree (a NamedTuple, a registered dataclass, ...): its type name and its leaves,
    in JAX's flattening order. Checks compare answers by their leaves."""

    t: Literal["tree"] = "tree"
    type: Text
    leaves: list[Value]


class NoneValue(_Wire):
    t: Literal["none"] = "none"


class OpaqueValue(_Wire):
    """Anything the probe cannot (or will not) carry across: its type name and a short repr."""

    t: Literal["other"] = "other"
    type: Text
    repr: Text


Value = Annotated[
    Union[PyScalar, ArrayValue, SeqValue, DictValue, TreeValue, NoneValue, OpaqueValue],
    Field(discriminator="t"),
]
SeqValue.model_rebuild()
DictValue.model_rebuild()
TreeValue.model_rebuild()


# ----------------------------------------------------------------------------- requests


MAX_COUNTED = 1_000_000
"""Calls of a counted function reported for one call (a loop's steps; more is a runaway loop)."""


class SameObject(_Wire):
    """An argument that is the very object passed as positional argument `arg` of call `call` of
    the same request (an earlier one, or an earlier position of the same call): how the chapter's
    cells call `f(_w0, _b0, ...)` with `_w0 = _b0 = jnp.float32(0.0)`, one buffer for two arguments."""

    call: int = Field(ge=0)
    arg: int = Field(ge=0)


class Call(_Wire):
    """One call: positional and keyword arguments. `same_as` maps a positional argument to the
    earlier argument whose object it receives (its own wire value is then not used)."""

    args: list[Value] = []
    kwargs: dict[str, Value] = {}
    same_as: dict[int, SameObject] = Field(default_factory=dict, max_length=64)


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
    """Call `target` on each call in turn, as a cell calls it, and return results."""

    op: Literal["call"] = "call"
    id: str
    target: str
    calls: list[Call]
    set_globals: dict[str, Value] = Field(
        default_factory=dict, description="bound in the namespace during the calls, then restored"
    )
    count_calls: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = Field(
        default=None, description="a function of the namespace whose calls are counted during each call: "
        "the name is bound to a counting wrapper for the calls, then restored; JAX's caches are cleared "
        "before each call, so a jitted function traces (and calls its helpers) again")
    perturb: bool = Field(default=False, description=(
        "with count_calls: call again with what the counted function returns moved by one, and report "
        "whether the answer changed (the function uses what its helper returns)"))
    watch: bool = Field(default=False, description=(
        "report what each call changed outside the function (globals, closures, arguments, random state), "
        "JAX's caches cleared before each call: a pure check"))


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


class Abstract(_Wire):
    """An argument given by its abstract value only (shape, dtype, weak type): traced when the
    function is exported, so no value of it ever enters the kernel."""

    t: Literal["abstract"] = "abstract"
    shape: list[Annotated[int, Field(ge=0, le=2**31)]] = Field(max_length=MAX_DEPTH)
    dtype: Literal[DTYPES]  # type: ignore[valid-type]
    weak: bool = False


ExportArg = Annotated[Union[Abstract, PyScalar, ArrayValue, NoneValue], Field(discriminator="t")]
"""An argument of an export: abstract (traced), or a concrete static value (public, e.g. a
number of steps that a Python loop needs)."""


class ExportRequest(_Wire):
    """Trace and export `target` for these arguments (`jax.export`), and return the serialized
    module, which the grader inspects and executes in its verifier.

    The function itself is exported when `jax.export` accepts it (only a `jax.jit` result: the
    module is then `direct`), else a jit of it. Outputs that JAX cannot serialize (a NamedTuple,
    a dataclass) are flattened to their leaves. `fallback` gives public values (never hidden
    ones) of some abstract arguments: where the function cannot be traced with those abstract (a
    Python loop's count, an argument the student made static), it is exported again with them
    baked in, and `baked` says which.
    """

    op: Literal["export"] = "export"
    id: str
    target: str
    args: list[ExportArg]
    fallback: dict[int, ExportArg] = Field(default_factory=dict)
    set_globals: dict[str, Value] = Field(
        default_factory=dict, description="bound in the namespace while tracing, then restored")


Request = Annotated[
    Union[LookupRequest, ValueRequest, CallRequest, TraceRequest, CompileCountRequest, ExportRequest],
    Field(discriminator="op"),
]


# ----------------------------------------------------------------------------- observations


class Raised(_Wire):
    """An exception raised by the student's code; `line` is the line of the student's cell where
    it was raised (the innermost frame of a cell), when it is known."""

    ename: Text
    evalue: Text
    line: Annotated[int, Field(ge=0)] | None = None
    function: Annotated[str, Field(max_length=120, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = Field(
        default=None, description="the student's function whose line that is (a claim: it only words the message)")
    file: Text | None = Field(default=None, description=(
        "the file the cell's code was compiled under, which the grader maps to the cell as the student "
        "finds it (a claim: only a cell's file name is ever shown, as 'cell 5, line 7')"))


class Parameter(_Wire):
    name: Text
    kind: Literal[
        "POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD", "VAR_POSITIONAL", "KEYWORD_ONLY", "VAR_KEYWORD"
    ]
    has_default: bool


class LookupResult(_Wire):
    op: Literal["lookup"] = "lookup"
    type_name: Text
    is_callable: bool
    is_jitted: bool = Field(description="has the `lower` attribute that jax.jit wrappers have")
    parameters: list[Parameter] | None = Field(
        default=None, max_length=256, description="None when inspect.signature cannot read one"
    )


class ValuesResult(_Wire):
    op: Literal["value", "call"]
    values: list[Value]
    counts: list[Annotated[int, Field(ge=0, le=MAX_COUNTED)]] | None = Field(
        default=None, max_length=10_000, description="a call request with `count_calls`: per call, how many "
        "times the counted function was called (a claim of the student's process)")
    uses: list[bool] | None = Field(default=None, max_length=10_000, description=(
        "a call request with `perturb`: per call, whether its answer changed when the counted function's "
        "results were moved (a claim)"))
    mutated: list[Text] | None = Field(default=None, max_length=16, description=(
        "a call request with `watch`: what the calls changed outside the function, in words (a claim)"))


class TraceResult(_Wire):
    op: Literal["trace"] = "trace"
    primitives: list[Text] = Field(max_length=1_000)


class CompileCountResult(_Wire):
    op: Literal["compile_count"] = "compile_count"
    compiles: int = Field(ge=0, le=1_000_000)
    names: list[Text] = Field(max_length=10_000)
    why: list[Text] = Field(default_factory=list, max_length=64)
    """JAX's cache-miss explanations during the calls ("at x, now f32[4] and before f32[3]")."""
    arguments: list[Text] = Field(default_factory=list, max_length=64)
    static: list[Text] = Field(default_factory=list, max_length=64)
    """The function's parameter names and those jax.jit marks static (claims, used only to word
    a failure, never to judge one)."""
    again: int = Field(default=0, ge=0, le=1_000_000)
    """Compilations when the last call was made once more, after the counted ones, where those
    compiled more than once: a function that makes a new jax.jit each call compiles again (a
    claim too, used only to word a failure)."""


MAX_MODULE_CHARS = 6 * 2**20
"""Base64 characters of one exported module (4.5 MiB of StableHLO bytecode; the course's are a
few KB)."""


class ExportResult(_Wire):
    """An exported program: `module` (base64 of `Exported.serialize()`); `direct`, whether it is
    the function's own jit, exported with every argument abstract; `baked`, the arguments exported
    with their values; `out_tree`, what the function returned, as JAX writes its tree
    structure; `jit_refused`, why `jax.export` refused the function itself, when it did."""

    op: Literal["export"] = "export"
    module: Annotated[str, Field(max_length=MAX_MODULE_CHARS, pattern=r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$")]
    direct: bool
    jitted: bool = Field(description="the function is a jax.jit result, as jax.export tests it")
    baked: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list, max_length=64)
    out_tree: Text
    fun_name: Text
    jit_refused: Text | None = None
    abstract_raised: Raised | None = Field(
        default=None, description="what tracing with every argument abstract raised, when it was baked")


Result = Annotated[
    Union[LookupResult, ValuesResult, TraceResult, CompileCountResult, ExportResult], Field(discriminator="op")
]

ObservationStatus = Literal["ok", "missing", "raised", "timeout", "crashed"]


class Observation(_Wire):
    """What the kernel saw for one request. `timeout`/`crashed` are filled in by the grader."""

    id: Text
    status: ObservationStatus
    result: Result | None = None
    raised: Raised | None = None
    detail: Text | None = Field(default=None, description="what went wrong, for timeout/crashed")
    died: bool = Field(default=False, description="crashed because the Python kernel died while answering it "
                       "(the grader's to say: a probe's answer that claims it is rejected)")
