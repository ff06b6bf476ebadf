"""The verifier: runs in its own sandbox, judges nothing, and executes exported JAX modules.

The student's kernel no longer reports what its functions return: it exports each one
(`jax.export.export(jitted)(*avals).serialize()`, a StableHLO module) and the grader runs that
module here, on visible and hidden inputs, in a process that runs no student Python.

It is loaded by file path (`python -I runtime.py`, never as part of the `grader` package), so it
imports nothing but the standard library, NumPy and JAX. It speaks JSON lines:

    stdin   one job per line:  {"id": str, "module": base64 of the serialized module,
                                "calls": [[wire value, ...], ...]}   (one value per flat input)
            a knockout job also: {"knockouts": ["loop"|"case", ...], "tolerance": [rtol, atol],
                                "outputs": [[wire value, ...], ...]}   (the module's own, per call):
                                only the knocked-out modules run, the answer holds facts, no values
    stdout  first  {"ready": true, "jax": version}   once JAX is imported and warmed up,
            then one result per job, in order:
                   {"id", "status": "ok"|"refused"|"error", "facts": {...}|null,
                    "values": [[wire value of each output leaf], ...]|null, "detail": str|null}

A module is refused (never run) when it calls custom-call targets outside ALLOWED_CUSTOM_CALLS
(Python callbacks above all: they would run code that is not in the module), calls an allowed
target otherwise than JAX does (contracts.py: operand and result shapes, dtypes, layouts,
aliases and settings; a kernel writes what its routine computes, whatever the module declares),
draws random numbers without a key (UNKEYED_RANDOM), claims a calling convention this JAX does
not implement, talks to the host (infeed, outfeed, send, recv), uses ops outside the StableHLO
dialects, is not for CPU, has effects, symbolic shapes, more than MAX_INPUTS inputs or
MAX_OUTPUTS outputs, or a `main` whose signature does not match the inputs and outputs it
declares. Its facts (ops, custom calls) are
read by walking the parsed module's operations, never from its text, whose locations and string
attributes are the student's to choose; so are its constructs (constructs.py: what each loop's
stop reads, whether each case's index comes from the inputs, whether they feed the outputs).
The one use of its text is `fingerprint` (fingerprint.py: the normalised program's digest and
op n-gram hashes, for the instructor's search for copied work; null when it cannot be made),
which decides nothing.

A bad job (garbage bytes, inputs of the wrong shape, an exception in XLA) is that job's "error";
the process lives on until EOF or until the sandbox's limits (or the grader) end it. A job's
arrays and executables are freed before its result is written, and after each result the grader
sends a ping, {"ping": int}, which is answered {"pong": int} only by a process that came back to
its loop: values from a process that dies after writing them are never used (client.py).
"""

from __future__ import annotations

import base64
import json
import math
import os
import sys
import time
from typing import Any

MAX_TEXT = 300  # characters of a detail, a name, a tree description
MAX_ELEMENTS = 100_000  # elements of one output array
MAX_VALUE_NODES = 350_000  # JSON values of all the outputs of one job (the grader reads 400,000)
MAX_INPUTS = 256  # flat inputs of a module
MAX_OUTPUTS = 256  # flat outputs of a module
MAX_CALLS = 64  # calls in one job
MAX_OPS = 1_000  # distinct op names reported
MAX_RANK = 32
DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128")
NON_FINITE = ("nan", "inf", "-inf")


def _sibling(name: str) -> Any:
    """A module next to this file, loaded by path as this file is (no `grader` package in the
    verifier), once."""
    import importlib.util

    key = f"_verifier_{name}"
    if key in sys.modules:
        return sys.modules[key]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(key, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module  # dataclasses look their module up while it executes
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[key]
        raise
    return module


contracts = _sibling("contracts")
constructs = _sibling("constructs")

# The custom-call targets a module may use: what JAX 0.12 emits on CPU for jnp.linalg and
# jax.scipy.linalg (LAPACK through XLA's FFI, jax.export's list of stable CPU kernels), and the
# sharding annotations it writes around them, each with a contract (contracts.py) that its
# calls must meet. No Python callback (xla_python_cpu_callback, xla_ffi_python_cpu_callback,
# xla_ffi_partitioned_python_cpu_callback, ...): it would call a function registered in another
# process, or this one's; no GPU or TPU kernel (they cannot run here); no AllocateBuffer
# (uninitialised memory); no shape_assertion (only symbolic shapes need it, and they are refused).
ALLOWED_CUSTOM_CALLS = contracts.ALLOWED
# Random numbers drawn from XLA's own per-run state, not from a key the module holds: a regrade
# would see other values. `rng_bit_generator` is a pure function of its state operand (JAX's
# "rbg" keys), and threefry is arithmetic: both are allowed.
UNKEYED_RANDOM = frozenset({"stablehlo.rng", "mhlo.rng", "mhlo.xla.rng_get_and_update_state"})
HOST_OPS = frozenset({"stablehlo.infeed", "stablehlo.outfeed", "stablehlo.send", "stablehlo.recv"})
DIALECTS = ("builtin", "func", "stablehlo", "chlo", "mhlo", "sdy")
_BARE = ("stablehlo", "chlo", "mhlo")  # reported without their dialect, as the probe does

# MLIR element types of a module's signature, as NumPy dtype names
_ELEMENT_TYPES = {"i1": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
                  "ui8": "uint8", "ui16": "uint16", "ui32": "uint32", "ui64": "uint64",
                  "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
                  "complex<f32>": "complex64", "complex<f64>": "complex128"}


class Refused(Exception):
    """The module is not run: the message says why."""


class JobError(Exception):
    """The job cannot be done: the message is one sentence for the instructor."""


def _short(text: object) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    first = lines[0] if lines else ""
    return _short(f"{type(exc).__name__}: {first}" if first else type(exc).__name__)


# ----------------------------------------------------------------------------- inspection


def _walk(module: Any) -> tuple[set[str], set[str], list[str], int, list[Any]]:
    """(op names, custom-call targets, problems, number of operations, custom calls as
    contracts.CustomCall) of a parsed module, operation by operation."""
    from jax._src.lib.mlir import ir

    names: set[str] = set()
    targets: set[str] = set()
    problems: list[str] = []
    calls: list[Any] = []
    stack = [module.operation]
    count = 0
    while stack:
        op = stack.pop().operation
        count += 1
        name = op.name
        names.add(name)
        if name == "stablehlo.custom_call":
            try:
                target = ir.StringAttr(op.attributes["call_target_name"]).value
            except Exception:  # noqa: BLE001 - a call_target_name that is not a string: refused
                problems.append("a custom call whose target cannot be read")
            else:
                targets.add(target)
                if target in ALLOWED_CUSTOM_CALLS:  # the others are refused by name
                    try:
                        calls.append(read_call(op))
                    except Exception:  # noqa: BLE001 - attributes of unexpected kinds: refused
                        problems.append(_short(f"it calls {target} with operands or attributes "
                                               "that cannot be read"))
        for region in op.regions:
            for block in region:
                stack.extend(block)
    return names, targets, problems, count, calls


def _tensor(value_type: Any) -> Any:
    """A contracts.Tensor of a static ranked tensor type (ValueError for anything else)."""
    from jax._src.lib.mlir import ir

    tensor = ir.RankedTensorType(value_type)
    if not tensor.has_static_shape or tensor.encoding is not None:
        raise ValueError("not a plain array of static shape")
    return contracts.Tensor(tuple(int(d) for d in tensor.shape), str(tensor.element_type))


def _layouts(attributes: Any, key: str) -> tuple[tuple[int, ...], ...] | None:
    from jax._src.lib.mlir import ir

    if key not in attributes:
        return None
    return tuple(tuple(int(i) for i in ir.DenseIntElementsAttr(a)) for a in ir.ArrayAttr(attributes[key]))


def _dictionary(attributes: Any, key: str) -> list[tuple[str, Any]] | None:
    from jax._src.lib.mlir import ir

    if key not in attributes:
        return None
    d = ir.DictAttr(attributes[key])
    return [(d[i].name, d[i].attr) for i in range(len(d))]


def read_call(op: Any) -> Any:
    """A custom call as the module states it (contracts.CustomCall), for its contract to judge."""
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import hlo

    attributes = op.attributes
    names = frozenset(attributes[i].name for i in range(len(attributes)))

    def integer(key: str, default: int) -> int:
        return int(ir.IntegerAttr(attributes[key]).value) if key in attributes else default

    def setting(value: Any) -> tuple[str, int]:
        return str(ir.IntegerAttr(value).type), int(ir.IntegerAttr(value).value)

    config = _dictionary(attributes, "mhlo.backend_config")
    frontend = _dictionary(attributes, "mhlo.frontend_attributes") or []
    aliases = []
    if "output_operand_aliases" in attributes:
        for a in ir.ArrayAttr(attributes["output_operand_aliases"]):
            alias = hlo.OutputOperandAlias(a)
            aliases.append(contracts.Alias(tuple(alias.output_tuple_indices), int(alias.operand_index),
                                           tuple(alias.operand_tuple_indices)))
    return contracts.CustomCall(
        target=ir.StringAttr(attributes["call_target_name"]).value,
        operands=tuple(_tensor(v.type) for v in op.operands),
        results=tuple(_tensor(v.type) for v in op.results),
        attributes=names,
        api_version=integer("api_version", 1),
        backend_config=(ir.StringAttr(attributes["backend_config"]).value
                        if "backend_config" in attributes else ""),
        has_side_effect=bool(ir.BoolAttr(attributes["has_side_effect"]).value)
        if "has_side_effect" in attributes else False,
        called_computations=len(ir.ArrayAttr(attributes["called_computations"]))
        if "called_computations" in attributes else 0,
        operand_layouts=_layouts(attributes, "operand_layouts"),
        result_layouts=_layouts(attributes, "result_layouts"),
        aliases=tuple(aliases),
        config=None if config is None else tuple(sorted((key, *setting(value)) for key, value in config)),
        frontend=tuple(sorted((key, ir.StringAttr(value).value) for key, value in frontend)),
    )


def _signature(module: Any) -> tuple[list[tuple[list[int], str]], list[tuple[list[int], str]]]:
    """(shape, dtype) of the inputs and results of the module's public `main`."""
    from jax._src.lib.mlir import ir

    mains = [op for op in module.body.operations
             if op.operation.name == "func.func" and "sym_name" in op.attributes
             and ir.StringAttr(op.attributes["sym_name"]).value == "main"]
    if len(mains) != 1:
        raise Refused("the module has no single `main` function")
    kind = ir.FunctionType(ir.TypeAttr(mains[0].attributes["function_type"]).value)

    def types(seq: Any) -> list[tuple[list[int], str]]:
        out = []
        for t in seq:
            try:
                tensor = ir.RankedTensorType(t)
            except Exception:  # noqa: BLE001 - a type MLIR cannot read as a tensor: refused
                raise Refused(f"`main` takes or returns a {_short(t)}, not an array") from None
            element = str(tensor.element_type)
            if not tensor.has_static_shape:
                raise Refused("`main` has arrays of symbolic shape")
            out.append(([int(d) for d in tensor.shape], _ELEMENT_TYPES.get(element, element)))
        return out

    return types(kind.inputs), types(kind.results)


def _aval(aval: Any) -> dict:
    shape = list(aval.shape)
    if len(shape) > MAX_RANK or not all(type(d) is int for d in shape):
        raise Refused("the module has inputs or outputs of symbolic shape (shape polymorphism)")
    return {"shape": shape, "dtype": str(aval.dtype), "weak": bool(getattr(aval, "weak_type", False))}


def inspect_module(exported: Any, fingerprint: bool = True) -> dict:
    """The facts of a deserialized module; raises Refused (with the facts read so far in
    `args[1]`) when it must not be run. `fingerprint=False`: none made (a knockout job's module was
    fingerprinted by its value job)."""
    from jax._src.interpreters import mlir
    from jax._src.lib import _jax

    if len(exported.in_avals) > MAX_INPUTS:
        raise Refused(f"the module has {len(exported.in_avals)} inputs, more than {MAX_INPUTS}")
    if len(exported.out_avals) > MAX_OUTPUTS:
        raise Refused(f"the module has {len(exported.out_avals)} outputs, more than {MAX_OUTPUTS}")
    version = exported.calling_convention_version
    facts = {
        "fun_name": _short(exported.fun_name),
        "platforms": [_short(p) for p in exported.platforms][:8],
        "in_avals": [_aval(a) for a in exported.in_avals],
        "out_avals": [_aval(a) for a in exported.out_avals],
        "in_tree": _short(exported.in_tree),
        "out_tree": _short(exported.out_tree),
        "nr_devices": min(int(exported.nr_devices), 2**31),
        "ops": [],
        "custom_calls": [],
        "op_count": 0,
    }
    check_versions(facts, version)
    with mlir.make_ir_context():
        module = _jax.mlir.deserialize_portable_artifact(exported.mlir_module_serialized)
        if isinstance(module, (str, bytes)):  # older jaxlib: the module's text, parsed here
            from jax._src.lib.mlir import ir

            module = ir.Module.parse(module)
        names, targets, problems, facts["op_count"], calls = _walk(module)
        inputs, results = _signature(module)
        facts["fingerprint"] = _fingerprint(module) if fingerprint else None
        facts["constructs"] = _constructs(module)
    if len(names) > MAX_OPS or len(targets) > MAX_OPS:
        raise Refused(f"the module uses more than {MAX_OPS} kinds of operations", facts)
    facts["ops"] = sorted({n.split(".", 1)[1] if n.startswith(_BARE) else n for n in names}
                          - {"builtin.module"})
    facts["custom_calls"] = sorted(_short(t) for t in targets)
    check_module(facts, names, targets, problems)
    check_calls(facts, calls)
    if "cpu" not in exported.platforms:
        platforms = ", ".join(facts["platforms"]) or "no platform"
        raise Refused(f"the module was exported for {platforms}, not cpu", facts)
    if exported.nr_devices != 1:
        raise Refused(f"the module is for {exported.nr_devices} devices, not 1", facts)
    if exported.ordered_effects or exported.unordered_effects:
        raise Refused("the module has side effects", facts)
    kept = [facts["in_avals"][i] for i in exported.module_kept_var_idx]
    declared_in = [(a["shape"], a["dtype"]) for a in kept]
    declared_out = [(a["shape"], a["dtype"]) for a in facts["out_avals"]]
    if len(exported.platforms) > 1:  # main takes the platform's index first
        declared_in = [([], "int32"), *declared_in]
    if inputs != declared_in or results != declared_out:
        raise Refused("the module's `main` does not take and return the arrays it declares", facts)
    return facts


def _fingerprint(module: Any) -> dict | None:
    """The normalised program's digest and op n-gram hashes (fingerprint.py, next to this file),
    for the instructor's search for copied work. It never decides a job: None when it fails."""
    try:
        text = module.operation.get_asm(enable_debug_info=False)  # no locations: they are the student's
        return _fingerprinter().fingerprint(text)
    except Exception:  # noqa: BLE001 - a module the normaliser cannot read keeps its facts and values
        return None


def _constructs(module: Any) -> dict:
    """What the module's loops and cases read and feed (constructs.py), or why they could not be
    read: a module the analysis cannot follow fails only the checks that ask about them."""
    try:
        return constructs.analyse(module)
    except constructs.TooLarge:
        return {"unreadable": f"the program has more than {constructs.MAX_VALUES} values and edges to follow"}
    except Exception as exc:  # noqa: BLE001 - a hostile module: the checks that need it fail with a sentence
        return {"unreadable": _short(f"its loops and cases could not be followed ({_one_line(exc)})")}


def _fingerprinter() -> Any:
    """fingerprint.py, loaded by path as this file is (no `grader` package in the verifier)."""
    return _sibling("fingerprint")


def check_module(facts: dict, names: set[str], targets: set[str], problems: list[str]) -> None:
    """Refuse custom calls outside the allow-list, unkeyed random numbers, host transfers and foreign
    dialects."""
    if problems:
        raise Refused(problems[0], facts)
    foreign = sorted(t for t in targets if t not in ALLOWED_CUSTOM_CALLS)
    if foreign:
        raise Refused(_short("custom calls outside the allow-list: " + ", ".join(foreign)), facts)
    random = sorted(names & UNKEYED_RANDOM)
    if random:
        raise Refused(_short("it draws random numbers without a key (" + ", ".join(random)
                             + "), so a regrade would give other values: use jax.random with a key"), facts)
    host = sorted(names & HOST_OPS)
    if host:
        raise Refused(_short("operations that talk to the host: " + ", ".join(host)), facts)
    alien = sorted(n for n in names if n.split(".", 1)[0] not in DIALECTS)
    if alien:
        raise Refused(_short("operations of dialects other than StableHLO's: " + ", ".join(alien)), facts)


def check_calls(facts: dict, calls: list[Any]) -> None:
    """Refuse a custom call that is not the call JAX emits for its target (contracts.py): its
    kernel would write past the buffers the module declares, or leave them unwritten."""
    for call in calls:
        try:
            contracts.check(call)
        except contracts.Mismatch as mismatch:
            raise Refused(_short(contracts.describe(call, mismatch)), facts) from None


def check_versions(facts: dict, version: Any) -> None:
    """Refuse a calling convention this JAX does not implement: `Exported.call` would read the
    module as if it were one it does (jax/_src/export/_export.py)."""
    from jax._src.export import _export

    low = _export.minimum_supported_calling_convention_version
    high = _export.maximum_supported_calling_convention_version
    if type(version) is not int or not low <= version <= high:
        raise Refused(_short(f"the module claims calling convention version {version}; the grader's JAX "
                             f"runs versions {low} to {high} (export it with the course's JAX)"), facts)


# ----------------------------------------------------------------------------- values


def _decode_input(value: Any, aval: dict, where: str) -> Any:
    """A wire value as a NumPy array of the aval's dtype and shape; JobError when it is not one."""
    import numpy as np

    want = np.dtype(aval["dtype"])
    if not isinstance(value, dict) or value.get("t") not in ("array", "py"):
        raise JobError(f"{where} is not an array or a scalar")
    if value["t"] == "py":
        v = value.get("v")
        if type(v) not in (bool, int, float):
            raise JobError(f"{where} is a {type(v).__name__}, not a number")
        if aval["shape"] != []:
            raise JobError(f"{where} is a scalar; the module takes shape {aval['shape']}")
        kind = {bool: "b", int: "i", float: "f"}[type(v)]
        if want.kind not in {"b": "biufc", "i": "iufc", "f": "fc"}[kind]:
            raise JobError(f"{where} is a Python {type(v).__name__}; the module takes {want}")
        try:
            return np.asarray(v, dtype=want)
        except (OverflowError, ValueError) as exc:
            raise JobError(f"{where}: {_one_line(exc)}") from None
    dtype, shape, data = value.get("dtype"), value.get("shape"), value.get("data")
    if dtype not in DTYPES or not isinstance(shape, list) or not all(type(n) is int and n >= 0
                                                                      for n in shape):
        raise JobError(f"{where} has no valid dtype and shape")
    if shape != aval["shape"]:
        raise JobError(f"{where} has shape {shape}; the module takes shape {aval['shape']}")
    have = np.dtype(dtype)
    if have != want and not np.can_cast(have, want, casting="same_kind"):
        raise JobError(f"{where} is {have}; the module takes {want}")
    try:
        if have.kind == "c":  # [real, imag] pairs
            pairs = np.asarray(data, dtype=np.float64).reshape([*shape, 2])
            arr = (pairs[..., 0] + 1j * pairs[..., 1]).astype(have)
        else:
            arr = np.asarray(data, dtype=have).reshape(shape)  # "nan", "inf", "-inf" parse too
    except (TypeError, ValueError, OverflowError) as exc:
        raise JobError(f"{where}: its data is not {dtype} of shape {shape} ({_one_line(exc)})") from None
    return arr.astype(want, copy=False)


def _finite(x: float) -> float | str:
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _data(arr: Any) -> Any:
    """Nested lists of the elements (non-finite floats as strings, complex as [real, imag])."""
    import numpy as np

    if arr.dtype.kind == "c":
        return _data(np.stack([arr.real, arr.imag], axis=-1).astype(np.float64))
    data = arr.tolist()
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        def clean(x: Any) -> Any:
            return [clean(v) for v in x] if isinstance(x, list) else _finite(x)
        data = clean(data)
    return data


def _nodes(arr: Any) -> int:
    """JSON values an encoded array is: its dict and fields, its lists, its elements."""
    lists, width = 0, 1
    for n in arr.shape:
        lists += width
        width *= n
    elements = width * (3 if arr.dtype.kind == "c" else 1)
    return 6 + len(arr.shape) + lists + elements


def encode_output(leaf: Any, aval: dict, where: str) -> tuple[dict, int]:
    """(wire value, its JSON nodes) of one output array."""
    import numpy as np

    arr = np.asarray(leaf)
    if str(arr.dtype) not in DTYPES and str(arr.dtype).startswith(("bfloat", "float")):
        arr = arr.astype(np.float32)  # bfloat16, float8 and friends: exact in float32
    if str(arr.dtype) not in DTYPES:
        raise JobError(f"{where} is of dtype {arr.dtype}, which cannot be carried")
    if arr.size > MAX_ELEMENTS:
        raise JobError(f"{where} has shape {list(arr.shape)}, over {MAX_ELEMENTS:,} elements")
    value = {"t": "array", "dtype": str(arr.dtype), "shape": list(arr.shape), "data": _data(arr),
             "weak": bool(aval["weak"])}
    return value, _nodes(arr)


# ----------------------------------------------------------------------------- jobs


def _deserialize(module_b64: Any) -> Any:
    from jax import export

    if not isinstance(module_b64, str):
        raise JobError("the job has no module")
    try:
        blob = base64.b64decode(module_b64, validate=True)
    except ValueError:
        raise JobError("the module is not base64") from None
    try:
        return export.deserialize(bytearray(blob))
    except Exception as exc:  # noqa: BLE001 - whatever deserialize raises on hostile bytes is the job's error
        raise JobError(f"the module could not be deserialized ({_one_line(exc)})") from None


_initialize_lapack: Any = None
"""JAX's own LAPACK initialisation, when `defer_lapack` has taken it over (a verifier process)."""


def defer_lapack() -> None:
    """JAX initialises LAPACK on a process's first call of an exported module, whatever the
    module calls: SciPy's LAPACK is imported (0.3 CPU s). A verifier initialises it only before
    a module whose custom calls name a LAPACK kernel (`run_job`); nothing changes where JAX's
    internals are not as expected."""
    global _initialize_lapack
    try:
        from jax._src.lax import linalg
    except ImportError:
        return
    real = getattr(linalg, "initialize_lapack", None)
    if callable(real) and _initialize_lapack is None:
        _initialize_lapack = real
        linalg.initialize_lapack = lambda: None


def _lapack_for(facts: dict) -> None:
    """Initialise LAPACK before running a module that calls it (see `defer_lapack`)."""
    if _initialize_lapack is not None and any(t.startswith("lapack_") for t in facts["custom_calls"]):
        _initialize_lapack()


_kept: dict[str, bytes] = {}  # persistent-cache key -> an executable this process compiled, serialized
_kept_bytes = 0
MAX_KEPT_BYTES = 64 * 2**20


def keep_serialized() -> None:
    """A module run again in a later job (a function's module on the visible checks' inputs, then
    on the hidden ones') is loaded, not compiled again: each executable this verifier compiles is
    kept serialized, by its persistent-cache key (a hash of the program, the compile options and
    the versions), for the process's life, which is one submission's. What a job ran is still
    freed with the job (`run_job`): only the bytes outlive it, as the store's entries do, and
    loading them makes the executable that compiling the same program makes. These are JAX's two
    steps on either side of the key (`compile_or_get_cached`), taken only where the cache is in
    use (a sandbox's store; else every compile happens, as before); where they are not there with
    the parameters read here, nothing is wrapped. A program with host callbacks is never
    kept (the module refusal already keeps them out)."""
    import inspect

    try:
        from jax._src import compiler

        read, compile_and_write = compiler._cache_read, compiler._compile_and_write_cache
        reading, compiling = inspect.signature(read), inspect.signature(compile_and_write)
    except (ImportError, AttributeError, TypeError, ValueError):
        return
    needed = {"cache_key", "host_callbacks", "backend", "executable_devices", "compile_options"}
    if (getattr(read, "_grader_kept", False) or not needed <= set(reading.parameters)
            or not needed <= set(compiling.parameters)):
        return

    def cache_read(*args: Any, **kwargs: Any) -> Any:
        asked = reading.bind(*args, **kwargs).arguments
        blob = None if asked["host_callbacks"] else _kept.get(asked["cache_key"])
        if blob is not None:
            try:
                return asked["backend"].deserialize_executable(blob, asked["executable_devices"],
                                                               asked["compile_options"]), 0
            except Exception:  # noqa: BLE001 - not loadable after all: compiled, as without it
                _kept.pop(asked["cache_key"], None)
        return read(*args, **kwargs)

    def compile_and_write_cache(*args: Any, **kwargs: Any) -> Any:
        global _kept_bytes
        executable = compile_and_write(*args, **kwargs)
        asked = compiling.bind(*args, **kwargs).arguments
        if not asked["host_callbacks"] and asked["cache_key"] not in _kept:
            try:
                blob = executable.serialize()
            except Exception:  # noqa: BLE001 - one that cannot be serialized is compiled each time
                return executable
            if _kept_bytes + len(blob) <= MAX_KEPT_BYTES:
                _kept[asked["cache_key"]] = blob
                _kept_bytes += len(blob)
        return executable

    cache_read._grader_kept = True  # type: ignore[attr-defined]
    compiler._cache_read = cache_read
    compiler._compile_and_write_cache = compile_and_write_cache


def _runner(exported: Any) -> Any:
    """One jitted function of the flat inputs returning the flat outputs (compiled once)."""
    import jax

    def flat_call(*flat: Any) -> list:
        args, kwargs = jax.tree_util.tree_unflatten(exported.in_tree, flat)
        return jax.tree_util.tree_leaves(exported.call(*args, **kwargs))

    return jax.jit(flat_call)


def run_job(job: Any) -> dict:
    """The result of one job; never raises for what the job holds. The job's arrays and
    executables are freed before it returns, so that a heap a kernel damaged fails here, before
    any of its values is written."""
    import jax

    try:
        return _run_job(job)
    finally:
        jax.clear_caches()  # the job's executables go with it


def _decode_call(call: list, ins: list[dict], i: int) -> list[Any]:
    """Call `i`'s inputs as arrays of the module's input avals (JobError when they do not fit)."""
    if len(call) != len(ins):
        raise JobError(f"call {i} has {len(call)} inputs; the module takes {len(ins)}")
    return [_decode_input(v, a, f"call {i}, input {k}") for k, (v, a) in enumerate(zip(call, ins), 1)]


def _decode_outputs(leaves: list, outs: list[dict], i: int) -> list[Any]:
    """A knockout job's given outputs of call `i`, as arrays of the dtype they were carried in (the
    module's, or float32 for bfloat16 and friends) and the module's output shapes."""
    if len(leaves) != len(outs):
        raise JobError(f"call {i} is given {len(leaves)} outputs; the module declares {len(outs)}")
    decoded = []
    for k, (value, aval) in enumerate(zip(leaves, outs), 1):
        carried = value.get("dtype") if isinstance(value, dict) and value.get("t") == "array" else None
        if carried not in DTYPES:
            raise JobError(f"call {i}, output {k} is not an array")
        decoded.append(_decode_input(value, {"dtype": carried, "shape": aval["shape"]}, f"call {i}, output {k}"))
    return decoded


def _tolerance(given: Any) -> tuple[float, float]:
    """(rtol, atol) of a job's knockouts: two finite numbers >= 0, else (0, 0), bit for bit."""
    if (isinstance(given, list) and len(given) == 2
            and all(type(x) in (int, float) and math.isfinite(x) and x >= 0 for x in given)):
        return float(given[0]), float(given[1])
    return 0.0, 0.0


def _run_job(job: Any) -> dict:
    import jax

    jid = job.get("id") if isinstance(job, dict) else None
    result: dict = {"id": _short(jid) if isinstance(jid, str) else "", "status": "error", "facts": None,
                    "values": None, "detail": None}
    try:
        if not isinstance(job, dict) or not isinstance(jid, str):
            raise JobError("the job is not an object with a string id")
        calls = job.get("calls", [])
        if not isinstance(calls, list) or not all(isinstance(c, list) for c in calls):
            raise JobError("the job's calls are not lists of values")
        if len(calls) > MAX_CALLS:
            raise JobError(f"the job has {len(calls)} calls, more than {MAX_CALLS}")
        asked = job.get("knockouts", [])
        knockouts = [k for k in ("loop", "case") if isinstance(asked, list) and k in asked]
        given = job.get("outputs")
        if given is not None and (not knockouts or not isinstance(given, list) or len(given) != len(calls)
                                  or not all(isinstance(c, list) for c in given)):
            raise JobError("a knockout job needs knockouts and one list of outputs per call")
        tolerance = _tolerance(job.get("tolerance"))
        exported = _deserialize(job.get("module"))
        try:
            facts = inspect_module(exported, fingerprint=given is None)
        except Refused as refusal:
            result.update(status="refused", detail=_short(refusal.args[0]),
                          facts=refusal.args[1] if len(refusal.args) > 1 else None)
            return result
        result["facts"] = facts
        if given is not None:  # a knockout job: the module's own outputs are given, only knockouts run
            ins, outs = facts["in_avals"], facts["out_avals"]
            decoded = [_decode_call(call, ins, i) for i, call in enumerate(calls, 1)]
            own = [_decode_outputs(leaves, outs, i) for i, leaves in enumerate(given, 1)]
            if calls:
                _lapack_for(facts)
                _sibling("knockout").does_work(exported, constructs, facts, decoded, own, _runner, knockouts,
                                               *tolerance)
            result.update(status="ok", values=[])
            return result
        values: list[list[dict]] = []
        nodes = 0
        decoded = []
        results: list[list[Any]] = []
        if calls:
            _lapack_for(facts)
            fn = _runner(exported)
            ins, outs = facts["in_avals"], facts["out_avals"]
            for i, call in enumerate(calls, 1):
                args = _decode_call(call, ins, i)
                try:
                    leaves = jax.block_until_ready(fn(*args))
                except Exception as exc:  # noqa: BLE001 - XLA's errors are the call's
                    raise JobError(f"call {i} failed: {_one_line(exc)}") from None
                if len(leaves) != len(outs):
                    raise JobError(f"call {i} returned {len(leaves)} outputs; "
                                   f"the module declares {len(outs)}")
                if knockouts:
                    decoded.append(args)
                    results.append(leaves)
                encoded = []
                for k, (leaf, aval) in enumerate(zip(leaves, outs), 1):
                    value, n = encode_output(leaf, aval, f"call {i}, output {k}")
                    nodes += n
                    if nodes > MAX_VALUE_NODES:
                        raise JobError(f"the outputs are over {MAX_VALUE_NODES:,} values")
                    encoded.append(value)
                values.append(encoded)
            if knockouts:
                _sibling("knockout").does_work(exported, constructs, facts, decoded, results, _runner, knockouts,
                                               *tolerance)
        result.update(status="ok", values=values)
    except JobError as exc:
        result.update(status="error", values=None, detail=_short(exc))
    except Exception as exc:  # noqa: BLE001 - a bug here or in JAX on a strange module: still the job's
        result.update(status="error", values=None, detail=_one_line(exc))
    return result


# ----------------------------------------------------------------------------- main


def _warm_up() -> None:
    """Import, compile, export, deserialize and call once, so that the first job is fast."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import export

    jax.config.update("jax_enable_x64", True)  # modules of every dtype can be given their inputs
    exported = export.export(jax.jit(lambda x: jnp.sin(x) * 2 + 1))(jax.ShapeDtypeStruct((2,), np.float32))
    again = export.deserialize(bytearray(exported.serialize()))
    inspect_module(again)
    jax.block_until_ready(_runner(again)(np.zeros(2, np.float32)))
    jax.clear_caches()


def pong(job: Any) -> dict | None:
    """The answer to the grader's ping after a result: this process is back in its loop."""
    if isinstance(job, dict) and list(job) == ["ping"] and type(job["ping"]) is int:
        return {"pong": job["ping"]}
    return None


def main() -> int:
    # The protocol gets its own copies of stdin and stdout; fd 1 then points at stderr and fd 0
    # at /dev/null, so nothing a library prints can end up in (or read from) the protocol.
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    started = time.monotonic()
    import jax

    defer_lapack()
    _warm_up()
    keep_serialized()
    ready = {"ready": True, "jax": jax.__version__, "seconds": round(time.monotonic() - started, 3)}
    proto_out.write(json.dumps(ready) + "\n")
    proto_out.flush()
    while True:
        line = proto_in.readline()
        if not line:
            return 0
        if not line.strip():
            continue
        try:
            job = json.loads(line)
        except (ValueError, RecursionError) as exc:
            result = {"id": "", "status": "error", "facts": None, "values": None,
                      "detail": _short(f"the job is not JSON ({_one_line(exc)})")}
        else:
            result = pong(job) or run_job(job)
        try:
            text = json.dumps(result, allow_nan=False)
        except (ValueError, TypeError, RecursionError) as exc:  # a bug here: still only this job's error
            text = json.dumps({"id": result.get("id", ""), "status": "error", "facts": None, "values": None,
                               "detail": _short(f"the result could not be encoded ({_one_line(exc)})")})
        proto_out.write(text + "\n")
        proto_out.flush()


if __name__ == "__main__":
    sys.exit(main())
