"""The probe: runs inside the student's kernel and answers the grader's requests with observations.

It is loaded by file path (not as part of the `grader` package), so it imports nothing but the
standard library, NumPy and JAX, and it never judges: it reports what happened ("this call
returned that array", "that name is not defined", "3 compilations") and the grader decides.

Student code ran before this module was loaded and may have changed JAX's configuration or
logging, so everything the probe relies on is set up at the moment it measures.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import json
import math
import os
import re
import signal
import time
import types
from typing import Any, Callable, Iterator

import numpy as np

MIME_TYPE = "application/x-grader-observation+json"
MAX_ELEMENTS = 100_000  # larger arrays come back as an opaque value, keeping messages small
MAX_TEXT = 300
MAX_DEPTH = 16  # containers nested deeper come back as an opaque value
MAX_INT = 2**63
MAX_COUNTED = 1_000_000  # calls of a counted function reported per call (protocol.MAX_COUNTED)
_NON_FINITE = {math.inf: "inf", -math.inf: "-inf"}
_DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "float32", "float64", "complex64", "complex128"}
_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
_LOWERED_OP = re.compile(r"\b(?:stablehlo|mhlo|chlo)\.([a-z_]+)")


# ----------------------------------------------------------------------------- values


def decode(value: dict) -> Any:
    """Turn a wire value into the Python object the student's function receives."""
    t = value["t"]
    if t == "py":
        return value["v"]
    if t == "array":
        import jax

        arr = np.asarray(value["data"], dtype=value["dtype"]).reshape(value["shape"])
        # what jnp.asarray gives (its dtype as JAX's x64 setting makes it, uncommitted, on the
        # default device), by a transfer: jnp.asarray compiles a conversion for each new shape and
        # dtype, 10-15 ms after every cache clear a check makes
        return jax.device_put(arr)
    if t == "tuple":
        return tuple(decode(v) for v in value["items"])
    if t == "list":
        return [decode(v) for v in value["items"]]
    if t == "dict":
        return {k: decode(v) for k, v in value["items"].items()}
    if t == "none":
        return None
    raise ValueError(f"cannot decode a value of type {t!r}")


def _short(text: str) -> str:
    text = str(text)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _opaque(obj: Any, why: str | None = None) -> dict:
    try:
        text = why or repr(obj)
    except Exception:  # a hostile __repr__ must not break the probe
        text = "<unprintable>"
    return {"t": "other", "type": type(obj).__name__, "repr": _short(text)}


def _finite(x: float) -> float | str:
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else _NON_FINITE[x]


def _array_data(arr: np.ndarray) -> Any:
    """Nested lists of the array's elements as JSON carries them (non-finite floats as strings,
    complex numbers as [real, imag])."""
    if arr.dtype.kind == "c":
        pairs = np.stack([arr.real, arr.imag], axis=-1)
        return _array_data(pairs.astype(np.float64))
    data = arr.tolist()
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        def clean(x: Any) -> Any:
            return [clean(v) for v in x] if isinstance(x, list) else _finite(x)
        data = clean(data)
    return data


def _encode_array(obj: Any) -> dict:
    try:
        arr = np.asarray(obj)
    except Exception as exc:
        return _opaque(obj, f"could not be converted to an array: {_short(str(exc))}")
    if str(arr.dtype) not in _DTYPES and str(arr.dtype).startswith(("bfloat", "float")):
        arr = arr.astype(np.float32)  # bfloat16, float8 and friends: exact in float32
    if str(arr.dtype) not in _DTYPES:
        return _opaque(obj, f"array of dtype {arr.dtype}")
    if arr.size > MAX_ELEMENTS:
        return _opaque(obj, f"array of shape {arr.shape}, too large to compare")
    return {
        "t": "array",
        "dtype": str(arr.dtype),
        "shape": list(arr.shape),
        "data": _array_data(arr),
        "weak": bool(getattr(obj, "weak_type", False)),
    }


def _pytree(obj: Any) -> dict | None:
    """A NamedTuple, a registered dataclass or another pytree node: its leaves, if JAX knows it."""
    import sys

    tree_util = getattr(sys.modules.get("jax"), "tree_util", None)
    if tree_util is None:
        return None
    try:
        leaves, treedef = tree_util.tree_flatten(obj)
    except Exception:
        return None
    if treedef.num_leaves == 1 and leaves and leaves[0] is obj:
        return None  # a leaf JAX does not know how to take apart
    if len(leaves) > MAX_ELEMENTS:
        return _opaque(obj, f"a pytree of {len(leaves)} leaves, too large to compare")
    return {"t": "tree", "type": _short(type(obj).__name__), "leaves": [encode(x, 1) for x in leaves]}


def encode(obj: Any, depth: int = 0) -> dict:
    """Turn whatever the student's code returned into a wire value (never raises)."""
    if depth > MAX_DEPTH:
        return _opaque(obj, "nested too deeply")
    if obj is None:
        return {"t": "none"}
    if type(obj) is float and not math.isfinite(obj):
        return {"t": "array", "dtype": "float64", "shape": [], "data": _finite(obj), "weak": True}
    if type(obj) is int and abs(obj) >= MAX_INT:
        return _opaque(obj, "an integer too large for any array dtype")
    if type(obj) in (bool, int, float):
        return {"t": "py", "v": obj}
    if type(obj) is str:
        return {"t": "py", "v": _short(obj)}
    if type(obj) in (tuple, list):
        if len(obj) > MAX_ELEMENTS:
            return _opaque(obj, f"a {type(obj).__name__} of {len(obj)} items, too long to compare")
        return {"t": type(obj).__name__, "items": [encode(x, depth + 1) for x in obj]}
    if type(obj) is dict and all(type(k) in (str, int) for k in obj) and len(obj) <= MAX_ELEMENTS:
        return {"t": "dict", "items": {_short(str(k)): encode(v, depth + 1) for k, v in obj.items()}}
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):
        return _encode_array(obj)
    return _pytree(obj) or _opaque(obj)


_CELL_FILE = re.compile(r"(ipykernel_\d+[/\\]\d+\.py|<ipython-input-[\d-]+>)$")


def _cell_frame(exc: BaseException) -> tuple[str, int] | None:
    """The file and line, in the student's cell, of the innermost frame of a cell in the traceback."""
    found = None
    tb = exc.__traceback__
    while tb is not None:
        if _CELL_FILE.search(tb.tb_frame.f_code.co_filename):
            found = (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    return found


def _cell_function(exc: BaseException) -> str | None:
    """The function of the student's that raised: the innermost frame of a cell in the traceback
    (`bucket_size`, when `mean_any_length` called it), or None at a cell's top level."""
    found = None
    tb = exc.__traceback__
    while tb is not None:
        if _CELL_FILE.search(tb.tb_frame.f_code.co_filename):
            found = tb.tb_frame.f_code.co_name
        tb = tb.tb_next
    return found if found and found.isidentifier() else None


# JAX's names for a traced value, which the chapter calls "a traced value": the classes
# (DynamicJaxprTracer, JitTracer...), their reprs (`JitTracer(~int32[])`, `Traced<float32[]>with<...>`)
_TRACER_WORDS = re.compile(
    r"<class '[\w.]*Tracer'>(?:, \w*Tracer\((?:[^()]|\([^()]*\))*\))?"
    r"|\b\w*Tracer\((?:[^()]|\([^()]*\))*\)"
    r"|Traced<[^<>]*(?:<[^<>]*>[^<>]*)*>(?:with<[^<>]*(?:<[^<>]*>[^<>]*)*>)?"
    r"|'\w*Tracer'|\b[A-Z]\w*Tracer\b")
_PLACEHOLDER = "ShapeDtypeStruct"  # what the grader passes for a traced argument when it exports


def _first_sentences(text: str) -> str:
    """The exception's first line, with what a line ending in ":" announces (the next line, and the
    indented ones under it: "wrong:\\n  expected 1\\n  got 2", "The error was:\\nTypeError: ..."), as
    one line, never cut mid-sentence: past MAX_TEXT, cut after the last whole sentence that fits."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    said = lines[0].strip() if lines else ""
    for line in lines[1:]:
        if not (said.endswith(":") or line[:1].isspace()):
            break
        said += " " + line.strip()
    if len(said) <= MAX_TEXT:
        return said
    end = said.rfind(". ", 0, MAX_TEXT - 1)
    return said[: end + 1] if end > MAX_TEXT // 3 else _short(said)


def _line_of(frame: tuple[str, int] | None) -> str:
    """ " at line 7 of its cell (`return f(x, n)`)": where the student's code did it."""
    if frame is None:
        return ""
    import linecache

    code = linecache.getline(frame[0], frame[1]).strip()
    code = code if len(code) <= 100 else code[:99] + "…"
    return f" at line {frame[1]} of its cell" + (f" (`{code}`)" if code else "")


def _in_chapter_words(exc: BaseException, said: str) -> tuple[str, str]:
    """The exception's class and text in the chapter's words (traced and static arguments, "a
    traced value"), never JAX's class names for tracers or the grader's placeholders: a static
    argument that received a traced value, or the grader's placeholder for one, is told as the
    static argument it is (`StaticArgumentError`, as `op_export` names one it finds itself)."""
    ename = type(exc).__name__
    whole = str(exc)
    if "Non-hashable static arguments" in whole and "Trace" in whole:
        return "StaticArgumentError", ("passes a traced value to an argument that a jax.jit function it "
                                       "calls marks static (static_argnums / static_argnames)"
                                       + _line_of(_cell_frame(exc)))
    if _PLACEHOLDER in whole:
        return "StaticArgumentError", ("marks static (static_argnums / static_argnames) an argument this "
                                       "check passes traced, so it received no value"
                                       + _line_of(_cell_frame(exc)))
    return ename, _TRACER_WORDS.sub("a traced value", said)


def _raised(exc: BaseException) -> dict:
    ename, evalue = _in_chapter_words(exc, _first_sentences(str(exc)))
    raised = {"ename": ename, "evalue": _short(evalue)}
    frame = _cell_frame(exc)
    if frame is not None:
        raised["line"] = frame[1]
        raised["file"] = _short(frame[0])
        function = _cell_function(exc)
        if function is not None:
            raised["function"] = _short(function)
    return raised


# ----------------------------------------------------------------------------- operations


class _Missing(Exception):
    """The requested name is not defined in the namespace."""


def _resolve(namespace: dict, name: str) -> Any:
    if name not in namespace:
        raise _Missing(name)
    return namespace[name]


def _calls(request: dict) -> list[tuple[tuple, dict]]:
    """The calls' arguments, decoded; an argument with `same_as` is the very object of the earlier
    argument it names (one buffer passed twice, as the chapter's cells pass `_w0 = _b0`)."""
    made: list[tuple[tuple, dict]] = []
    for c in request["calls"]:
        args = [decode(a) for a in c.get("args", [])]
        for position, source in sorted((int(k), v) for k, v in (c.get("same_as") or {}).items()):
            call, arg = int(source["call"]), int(source["arg"])
            earlier = (made[call][0] if call < len(made)
                       else args if call == len(made) and arg < position else None)
            if earlier is None or not 0 <= position < len(args) or not 0 <= arg < len(earlier):
                raise ValueError(f"same_as names no earlier argument: {position} -> ({call}, {arg})")
            args[position] = earlier[arg]
        made.append((tuple(args), {k: decode(v) for k, v in c.get("kwargs", {}).items()}))
    return made


def _parameters(obj: Any) -> list[dict] | None:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    return [
        {"name": p.name, "kind": p.kind.name, "has_default": p.default is not p.empty}
        for p in sig.parameters.values()
    ]


def op_lookup(request: dict, namespace: dict) -> dict:
    obj = _resolve(namespace, request["name"])
    return {
        "op": "lookup",
        "type_name": type(obj).__name__,
        "is_callable": callable(obj),
        "is_jitted": hasattr(obj, "lower"),
        "parameters": _parameters(obj) if callable(obj) else None,
    }


def op_value(request: dict, namespace: dict) -> dict:
    return {"op": "value", "values": [encode(_resolve(namespace, request["name"]))]}


def _wrapped_chain(obj: Any) -> list[Any]:
    """`obj` and what it wraps (`__wrapped__`: a jax.jit of a function, a functools.wraps)."""
    chain = [obj]
    for _ in range(8):
        try:
            inner = getattr(chain[-1], "__wrapped__", None)
        except Exception:  # noqa: BLE001 - a hostile attribute: the chain stops here
            inner = None
        if inner is None or any(inner is seen for seen in chain):
            break
        chain.append(inner)
    return chain


class _CountedCalls:
    """While the calls run, the named function, and every name bound to it or to a wrapper of it
    (`fast_step = jax.jit(step)`, the plain function under a jitted `step`), is a wrapper that
    counts its calls: a Python loop that calls step num_steps times calls it num_steps times; a
    `fori_loop` traces it once. The names are rebound in the namespace and in the globals the
    called function reads (`runpy.run_path` hands the self-check a copy of a module's globals).
    What the student defined is put back afterwards, whatever the calls did."""

    MAX_NAMES = 16

    def __init__(self, namespace: dict, name: str | None, caller: Any = None) -> None:
        self.namespace, self.name, self.caller, self.count = namespace, name, caller, 0
        self.originals: list[tuple[dict, str, Any]] = []
        self.cells: list[tuple[Any, Any]] = []  # closure cells rebound, with what they held
        self.defaults: list[tuple[Any, tuple]] = []  # functions whose default values were rebound
        self.items: list[tuple[Any, Any, Any]] = []  # (a list or dict in a closure cell, key, what it held)
        self.wrappers: dict[int, Any] = {}  # id of a counting wrapper -> what it calls

    def _spaces(self) -> list[dict]:
        spaces = [self.namespace]
        for fn in _wrapped_chain(self.caller):
            found = getattr(fn, "__globals__", None) if not isinstance(fn, type) else None
            if isinstance(found, dict) and not any(found is s for s in spaces):
                spaces.append(found)
        return spaces

    def __enter__(self) -> "_CountedCalls":
        if self.name is None:
            return self
        try:
            self._bind()
        except BaseException:  # a `with` does not exit what failed to enter: put back what was bound
            self.__exit__(None, None, None)
            raise
        return self

    def _bind(self) -> None:
        self._jit_counting()
        target = _resolve(self.namespace, self.name)
        if not callable(target):
            raise TypeError(f"`{_short(self.name)}` is not a function")
        family = _wrapped_chain(target)
        for space in self._spaces():
            names = [k for k, v in list(space.items())
                     if isinstance(k, str) and not k.startswith("__") and callable(v)
                     and any(a is b for a in _wrapped_chain(v) for b in family)]
            for name in sorted(names, key=lambda k: k != self.name)[: self.MAX_NAMES]:
                self.originals.append((space, name, space[name]))
                space[name] = self._counting(space[name])
        self._bind_held(family)

    MAX_HELD = 64  # closure cells and default values looked at, in the caller and what they hold

    def _bind_held(self, family: list) -> None:
        """The counted function where the caller holds it in no namespace: in a closure cell
        (`train_python_loop = make_loop(step)`), a list or dict in one (`make_loop([step])`) or a
        default value (`def loop(..., update=step)`), its own or those of the functions it holds
        that way (a few levels down)."""
        seen: set[int] = set()
        todo = [(fn, 0) for fn in _wrapped_chain(self.caller)]
        looked = 0
        while todo and looked < self.MAX_HELD:
            fn, depth = todo.pop()
            if id(fn) in seen or not isinstance(fn, types.FunctionType):
                continue
            seen.add(id(fn))
            for cell in fn.__closure__ or ():
                looked += 1
                try:
                    held = cell.cell_contents
                except ValueError:  # a cell not yet bound
                    continue
                if callable(held) and any(a is b for a in _wrapped_chain(held) for b in family):
                    self.cells.append((cell, held))
                    cell.cell_contents = self._counting(held)
                elif depth < 3 and isinstance(held, types.FunctionType):
                    todo.append((held, depth + 1))
                elif type(held) in (list, dict):  # `make_loop([step])`: the helper an item of what it holds
                    looked += self._bind_items(held, family)
            defaults = fn.__defaults__ or ()
            if any(callable(d) and any(a is b for a in _wrapped_chain(d) for b in family) for d in defaults):
                looked += len(defaults)
                self.defaults.append((fn, defaults))
                fn.__defaults__ = tuple(self._counting(d) if callable(d) and any(
                    a is b for a in _wrapped_chain(d) for b in family) else d for d in defaults)

    def _bind_items(self, held: list | dict, family: list) -> int:
        """The counted function as an item of a list or a dict the caller holds in a closure cell,
        counted in place and put back afterwards; how many items were looked at."""
        keys = list(range(min(len(held), self.MAX_HELD)) if isinstance(held, list)
                    else itertools.islice(held, self.MAX_HELD))  # a huge container: its first items only
        for key in keys:
            item = held[key]
            if callable(item) and any(a is b for a in _wrapped_chain(item) for b in family):
                self.items.append((held, key, item))
                held[key] = self._counting(item)
        return len(keys)

    def _jit_counting(self) -> None:
        """`jax.jit` (and every name bound to it) made, for the calls' time, to count the calls
        of a jit it makes of the counted function: `fast = jax.jit(step)` inside the loop calls
        step's compiled program once per step, and traces step once."""
        import jax

        real = jax.jit

        def jit(fun: Any, *args: Any, **kwargs: Any) -> Any:
            original = self.wrappers.get(id(fun))
            if original is None:
                return real(fun, *args, **kwargs)
            return self._counting(real(original, *args, **kwargs))

        self.originals.append((vars(jax), "jit", real))
        jax.jit = jit
        for space in self._spaces():
            bound = [k for k, v in list(space.items()) if v is real and isinstance(k, str)]
            for name in bound[: self.MAX_NAMES]:
                self.originals.append((space, name, real))
                space[name] = jit

    perturb = False  # while set, what the counted function returns is changed (`_perturbed`)
    traced = False  # whether a counted call was made while JAX traced (then a cached trace hides calls)

    def _counting(self, original: Any) -> Any:
        clean = _trace_state_clean()

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            if not self.traced and not clean():
                self.traced = True
            result = original(*args, **kwargs)
            return _perturbed(result) if self.perturb else result

        self.wrappers[id(counted)] = original

        try:
            import functools

            functools.update_wrapper(counted, original)
        except Exception:  # noqa: BLE001 - a callable without the usual attributes: counted all the same
            pass
        return counted

    def __exit__(self, *exc: object) -> None:
        for space, name, original in reversed(self.originals):
            space[name] = original
        for cell, held in reversed(self.cells):
            cell.cell_contents = held
        for fn, defaults in reversed(self.defaults):
            fn.__defaults__ = defaults
        for held, key, item in reversed(self.items):
            try:
                held[key] = item
            except (IndexError, TypeError):  # the calls emptied it: nothing of ours is left in it to take back
                pass

    def take(self) -> int:
        count, self.count = self.count, 0
        return min(count, MAX_COUNTED)


def _trace_state_clean() -> Callable[[], bool]:
    """Whether no JAX trace is under way (a call from plain Python); where this JAX does not say,
    every call counts as made while tracing."""
    try:
        from jax._src import core

        clean = core.trace_state_clean
        clean()
        return clean
    except Exception:  # noqa: BLE001 - another JAX: the caches are cleared before every counted call
        return lambda: False


_plus_one: Any = None  # jax.jit(lambda x: x + 1), made on first use


def _moved_array(leaf: Any) -> Any:
    """`leaf + 1` for a concrete JAX array, through one jitted add: the same dtype and weak type
    as the eager add, in one dispatch instead of NumPy-style promotion and a primitive's (a
    Python loop's helper returns thousands of them)."""
    global _plus_one
    import jax

    if _plus_one is None:
        _plus_one = jax.jit(lambda x: x + 1)
    return _plus_one(leaf)


def _perturbed(result: Any) -> Any:
    """What a helper returned, every number moved by one (an array's elements too, traced ones
    alike): a function that uses what its helper returns then returns something else."""
    import jax

    def moved(leaf: Any) -> Any:
        if isinstance(leaf, bool) or getattr(getattr(leaf, "dtype", None), "kind", "") == "b":
            return leaf
        try:
            if isinstance(leaf, jax.Array) and not isinstance(leaf, jax.core.Tracer):
                return _moved_array(leaf)
            return leaf + 1
        except Exception:  # noqa: BLE001 - not a number: kept
            return leaf

    try:
        return jax.tree_util.tree_map(moved, result)
    except Exception:  # noqa: BLE001 - a result JAX cannot take apart: kept
        return result


def _sibling(name: str) -> Any:
    """A module beside this one, loaded fresh by path as this one is (never kept in
    `sys.modules`, where the student's code could reach it between cells)."""
    import types
    from importlib.machinery import SourceFileLoader

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    module = types.ModuleType(f"grader_probe_{name}")
    module.__file__ = path
    exec(SourceFileLoader(module.__name__, path).get_code(module.__name__), vars(module))
    return module


def _watched_on_the_host(state: Any, namespace: dict, fn: Any, args: tuple, kwargs: dict) -> list[str]:
    """The call again with NumPy copies of its array arguments, watched: what a function changes
    in a NumPy argument it was handed (`avg *= decay`) shows only then. What this call returns, or
    raises (a jnp-only method on a NumPy array), is no part of any answer."""
    host_args, host_kwargs = state.on_the_host(args), {k: state.on_the_host(v) for k, v in kwargs.items()}
    before = state.snapshot(namespace, fn, host_args, host_kwargs)
    try:
        import jax

        jax.block_until_ready(fn(*host_args, **host_kwargs))
    except Exception:  # noqa: BLE001 - not this call's business: only what it changed
        pass
    return state.changes(before, state.snapshot(namespace, fn, host_args, host_kwargs))


def _uses_what_it_returns(fn: Any, calls: list[tuple[tuple, dict, dict]], counted: Any) -> list[bool]:
    """For each (args, kwargs, answer): whether the function's answer changes when the counted
    helper's results are moved (`_perturbed`): a loop that calls `step` and throws its results
    away, doing the work some other way, answers the same. JAX's caches are cleared before the
    moved calls and after them, so every trace they make sees the moved helper and none outlives
    them; between two moved calls the traces kept are moved ones too."""
    import jax

    uses = []
    counted.perturb = True
    try:
        jax.clear_caches()
        for args, kwargs, answer in calls:
            try:
                moved = encode(jax.block_until_ready(fn(*args, **kwargs)))
            except Exception:  # noqa: BLE001 - moved results it cannot take (a NaN check, a shape): it reads them
                uses.append(True)
            else:
                uses.append(moved != answer)
            finally:
                counted.take()
    finally:
        counted.perturb = False
        counted.take()
        jax.clear_caches()
    return uses


def _call_key(request: dict) -> str | None:
    """What makes two call requests the same calls: the function, the calls, the globals set;
    None for a request that watches (its calls are observed differently, and shared with none)."""
    if request.get("watch"):
        return None
    return json.dumps([request.get("target"), request.get("calls"), request.get("set_globals", {})], sort_keys=True)


class SharedRuns:
    """One run of the same calls for the two requests of a batch that ask them: a plain call
    request (a value check of an eager function) and a counting one (a `calls` check), which
    draw the very same cases when the spec says so (`cases.draws_as`). The calls run once, counted
    (counting reads the calls, it changes none of their values), in the turn of whichever of the
    two comes first; the other is answered from that run, and a counting request whose counts are
    known makes only its moved run (`perturb`). A plain request's turn is then no longer than its
    own run (the moved run stays in the counting request's turn, under its limit). Requests that
    watch (`watch`: a pure check) are never shared."""

    def __init__(self, requests: list[dict] | None = None) -> None:
        self.counting: dict[str, str] = {}  # call key -> the helper a counting request of the batch counts
        self.runs: dict[str, tuple[list, list | None, str | None]] = {}  # call key -> values, counts, helper
        for request in requests or []:
            if isinstance(request, dict) and request.get("op") == "call" \
                    and isinstance(request.get("count_calls"), str):
                key = _call_key(request)
                if key is not None:
                    self.counting.setdefault(key, request["count_calls"])

    def known(self, key: str | None, helper: str | None) -> tuple[list, list] | None:
        """The values (and, for a request counting `helper`, its counts) that a run of the same
        calls already gave, if any."""
        run = self.runs.get(key) if key is not None else None
        if run is None or (helper is not None and run[2] != helper):
            return None
        return run[0], run[1] or []

    def keep(self, key: str | None, values: list, counts: list | None, helper: str | None) -> None:
        if key is not None:
            self.runs[key] = (values, counts, helper)


_shared_runs = SharedRuns()


def op_call(request: dict, namespace: dict) -> dict:
    """Call the function on each call in turn. With `watch`, JAX's caches are cleared before each
    call, so that a jitted function traces again and what its Python does while tracing (the
    globals it changes) happens during this call, and what changed outside the function is
    reported (`state.py`). With `count_calls`, before the first call too, and before each later one
    once a counted call was made while JAX traced: a jitted function whose trace an earlier cell or
    call left in the cache calls its helpers only when it traces, so a loop that calls `step` once
    through a jitted helper and the other times eagerly would be counted short on every call but
    the first (found by an attack on the moved calls' change, which had made the calls after the
    first reuse each other's traces). Where every counted call came from plain Python, no trace
    holds one, and `step`'s program is not traced and loaded again for each call. The same calls
    asked twice in a batch run once (`SharedRuns`): a plain request whose counting twin is in the
    batch runs its calls counted as the twin would, and keeps the counts for it."""
    key, own = _call_key(request), request.get("count_calls")
    known = _shared_runs.known(key, own)
    if known is not None and own is None:
        return {"op": "call", "values": known[0]}
    helper = own if own is not None else _shared_runs.counting.get(key) if key is not None else None
    perturb = own is not None and bool(request.get("perturb"))
    try:
        values, counts, uses, mutated = _run_calls(request, namespace, helper, known, perturb)
    except _HelperUnusable as unusable:
        if own is not None:
            raise unusable.cause from None
        helper = None  # the twin says why in its own turn; these values need no helper
        values, counts, uses, mutated = _run_calls(request, namespace, None, None, False)
    _shared_runs.keep(key, values, counts if helper is not None else None, helper)
    result: dict[str, Any] = {"op": "call", "values": values}
    if own is not None:
        result["counts"] = counts
    if perturb:
        result["uses"] = uses
    if request.get("watch"):
        result["mutated"] = [_short(m) for m in mutated]
    return result


class _HelperUnusable(Exception):
    """The helper to count is missing or not a function: raised before any call is made."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


@contextlib.contextmanager
def _globals_set(request: dict, namespace: dict) -> Iterator[None]:
    """The request's `set_globals` bound in the namespace while it runs, then what was there put
    back. JAX's caches are cleared when it sets any, before and after: a jitted function that
    reads the global traces afresh with it, and no trace made with it outlives the request (the
    same call without the globals, which a check makes beside it, would reuse it)."""
    overrides = {k: decode(v) for k, v in request.get("set_globals", {}).items()}
    if not overrides:
        yield
        return
    import jax

    saved = {k: namespace[k] for k in overrides if k in namespace}
    namespace.update(overrides)
    jax.clear_caches()
    try:
        yield
    finally:
        for k in overrides:
            namespace.pop(k, None)
        namespace.update(saved)
        jax.clear_caches()


def _run_calls(request: dict, namespace: dict, helper: str | None, known: tuple[list, list] | None,
               perturb: bool) -> tuple[list, list, list, list]:
    """The calls (values, counts, uses, what changed): watched when the request says so, with
    `helper`'s calls counted when one is given, none made when `known` holds their values and
    counts; with `perturb`, every counted call again with the helper's results moved
    (`_uses_what_it_returns`): a watched call's right after it, the others' after all of them,
    between two cache clears."""
    import jax

    fn = _resolve(namespace, request["target"])
    calls = _calls(request)
    state = _sibling("state") if request.get("watch") else None
    values, counts = (list(known[0]), list(known[1])) if known is not None else ([], [])
    uses: list[bool] = []
    mutated: list[str] = []
    held = _JaxLogsHeld() if state else contextlib.nullcontext()
    with _globals_set(request, namespace), jax.disable_jit(False), held:
        counter = _CountedCalls(namespace, helper, fn)
        try:
            counted = counter.__enter__()
        except (_Missing, TypeError) as exc:
            raise _HelperUnusable(exc) from None
        try:
            for n, (args, kwargs) in enumerate(calls if known is None else []):
                if state or (helper is not None and (n == 0 or counted.traced)):
                    jax.clear_caches()
                before = state.snapshot(namespace, fn, args, kwargs) if state else None
                values.append(encode(jax.block_until_ready(fn(*args, **kwargs))))
                count = counted.take()
                counts.append(count)
                if perturb and state:  # what the moved call changes is this call's to report
                    uses += _uses_what_it_returns(fn, [(args, kwargs, values[-1])], counted) if count else [False]
                if state:
                    changed = state.changes(before, state.snapshot(namespace, fn, args, kwargs))
                    mutated += [c for c in changed if c not in mutated][: state.MAX_CHANGES - len(mutated)]
                    changed = _watched_on_the_host(state, namespace, fn, args, kwargs)
                    mutated += [c for c in changed if c not in mutated][: state.MAX_CHANGES - len(mutated)]
            if perturb and not state:  # every call's moved run after all of them: two cache clears
                moved = _uses_what_it_returns(
                    fn, [(a, k, v) for (a, k), v, c in zip(calls, values, counts) if c], counted)
                uses = [bool(c) and moved.pop(0) for c in counts]
        finally:
            counter.__exit__(None, None, None)
    return values, counts, uses, mutated


def _jaxpr_primitives(jaxpr: Any, found: set[str]) -> None:
    for eqn in jaxpr.eqns:
        found.add(eqn.primitive.name)
        for param in eqn.params.values():
            for sub in param if isinstance(param, (tuple, list)) else (param,):
                inner = getattr(sub, "jaxpr", sub)  # ClosedJaxpr -> Jaxpr
                if hasattr(inner, "eqns"):
                    _jaxpr_primitives(inner, found)


def op_trace(request: dict, namespace: dict) -> dict:
    import jax

    fn = _resolve(namespace, request["target"])
    args = tuple(decode(a) for a in request["call"].get("args", []))
    kwargs = {k: decode(v) for k, v in request["call"].get("kwargs", {}).items()}
    found: set[str] = set()
    with jax.disable_jit(False):
        if request["representation"] == "jaxpr":
            # A jitted function traces itself, which respects its static arguments.
            traced = fn.trace(*args, **kwargs) if hasattr(fn, "trace") else None
            closed = traced.jaxpr if traced is not None else jax.make_jaxpr(fn)(*args, **kwargs)
            _jaxpr_primitives(closed.jaxpr, found)
        else:
            lowerable = fn if hasattr(fn, "lower") else jax.jit(fn)
            found.update(_LOWERED_OP.findall(lowerable.lower(*args, **kwargs).as_text()))
    return {"op": "trace", "primitives": sorted(found)}


def op_compile_count(request: dict, namespace: dict) -> dict:
    """Compilations during the calls only: inputs are built first, the listener is ours, and
    JAX's caches are cleared first, so calls the student's own cells made earlier (with the same
    values, or the same static arguments) cannot leave the cache warm."""
    import jax
    import jax.monitoring

    fn = _resolve(namespace, request["target"])
    calls = _calls(request)
    names: list[str] = []
    jax.clear_caches()

    def listener(event: str, duration: float, **kwargs: Any) -> None:
        if event == _COMPILE_EVENT:
            names.append(str(kwargs.get("fun_name", "?")))

    jax.monitoring.register_event_duration_secs_listener(listener)
    misses = _CacheMisses()
    counted = 0
    try:
        with jax.disable_jit(False), misses:
            for args, kwargs in calls:
                jax.block_until_ready(fn(*args, **kwargs))
        counted = len(names)
        if counted > 1:  # recompiled: does the very same call compile again? (a jit made anew each call)
            with jax.disable_jit(False), contextlib.suppress(Exception):
                args, kwargs = calls[-1]
                jax.block_until_ready(fn(*args, **kwargs))
    finally:
        _unregister(listener)
    again, names = len(names) - counted, names[:counted]
    return {"op": "compile_count", "compiles": len(names), "names": names, "why": misses.reasons,
            "arguments": _argument_names(fn), "static": _static_parameters(fn), "again": again}


class _CacheMisses:
    """JAX's own explanation of each retrace (`jax_explain_cache_misses`) while the calls run:
    the "* at x, now f32[4] and before f32[3]" lines.

    What JAX logs meanwhile is the grader's to read and never reaches the student's notebook (a
    self-check runs this in the student's kernel, where JAX 0.6.2's own stderr handler on the
    `jax` logger printed a "TRACING CACHE MISS" paragraph per call): the `jax` and `jaxlib`
    loggers hand their records to this handler alone, the loggers below them pass theirs up,
    at the level the explanations are logged, and JAX's cache-miss warnings are ignored. Every
    logger, handler, level and filter is put back as it was afterwards."""

    LIMIT = 32
    ROOTS = ("jax", "jaxlib")

    def __init__(self) -> None:
        import logging

        self.reasons: list[str] = []
        self._handler = logging.Handler()
        self._handler.emit = self._record  # type: ignore[method-assign]
        self._before: Any = None
        self._loggers: list[tuple[Any, list, int, bool, bool]] = []
        self._warnings: Any = None

    def _record(self, record: Any) -> None:
        try:
            text = record.getMessage()
        except Exception:
            return
        if "CACHE MISS" not in text:
            return
        for line in text.splitlines():
            line = line.strip()
            # JAX 0.6's "* key with different input types:" heads the lines that say which
            if line.startswith("* ") and not line.startswith("* key with") and len(self.reasons) < self.LIMIT:
                self.reasons.append(line[2:][:300])

    def _capture_logs(self) -> None:
        import logging

        family = [logging.getLogger(root) for root in self.ROOTS]
        family += [lg for name, lg in list(logging.Logger.manager.loggerDict.items())
                   if isinstance(lg, logging.Logger) and name.startswith(tuple(f"{r}." for r in self.ROOTS))]
        for lg in family:
            self._loggers.append((lg, list(lg.handlers), lg.level, lg.propagate, lg.disabled))
            lg.handlers = [self._handler] if lg.name in self.ROOTS else []
            lg.disabled = False
            lg.propagate = lg.name not in self.ROOTS
            lg.setLevel(logging.WARNING if lg.name in self.ROOTS else logging.NOTSET)

    def _restore_logs(self) -> None:
        for lg, handlers, level, propagate, disabled in reversed(self._loggers):
            lg.handlers = handlers
            lg.setLevel(level)
            lg.propagate, lg.disabled = propagate, disabled
        self._loggers = []

    def __enter__(self) -> "_CacheMisses":
        import warnings

        import jax

        self._capture_logs()
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        warnings.filterwarnings("ignore", message=".*CACHE MISS")
        try:
            self._before = jax.config.jax_explain_cache_misses
            jax.config.update("jax_explain_cache_misses", True)
        except (AttributeError, KeyError, ValueError):  # a JAX without the option: no explanations
            self._before = None
        return self

    def __exit__(self, *exc: Any) -> None:
        import jax

        try:
            if self._before is not None:
                jax.config.update("jax_explain_cache_misses", self._before)
        finally:
            self._warnings.__exit__(None, None, None)
            self._restore_logs()


class _JaxLogsHeld(_CacheMisses):
    """While a watched call runs: JAX's log records (a compile log the student's notebook turned
    on) go to the grader's handler alone, so a handler of the student's that appends them to a
    list does not make a pure function look as if it changed that list."""

    def __enter__(self) -> "_JaxLogsHeld":
        self._capture_logs()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._restore_logs()


def _argument_names(fn: Any) -> list[str]:
    import inspect

    try:
        return [p.name[:100] for p in inspect.signature(fn).parameters.values()][:64]
    except (TypeError, ValueError):
        return []


def _static_parameters(fn: Any) -> list[str]:
    """The parameters jax.jit was told are static, by name (empty when unknown): JAX 0.12 cannot
    explain the recompile a new static value causes, so the grader names the argument itself."""
    info = getattr(fn, "_jit_info", None)
    if info is None:
        return []
    names = _argument_names(fn)
    try:
        static = [names[i] for i in getattr(info, "static_argnums", ()) if 0 <= i < len(names)]
        static += [n for n in getattr(info, "static_argnames", ()) if n not in static]
    except (TypeError, IndexError):
        return []
    return [str(n)[:100] for n in static][:64]


def _unregister(listener: Any) -> None:
    """jax.monitoring's public unregister (JAX 0.7 on), else the private one older JAX has."""
    import jax.monitoring

    public = getattr(jax.monitoring, "unregister_event_duration_listener", None)
    if public is not None:
        public(listener)
        return
    from jax._src import monitoring

    monitoring._unregister_event_duration_listener_by_callback(listener)


class _QuietDebugging:
    """While exporting: `jax.debug.print` / `jax.debug.callback` lower to nothing, so a module
    with debugging aids (which section 2.6 teaches) serializes; host callbacks cannot."""

    def __enter__(self) -> _QuietDebugging:
        import dataclasses

        from jax._src import debugging
        from jax._src.interpreters import mlir

        def nothing(ctx: Any, *args: Any, **kwargs: Any) -> list:
            return []

        self._saved: list[tuple[dict, Any, Any]] = []
        for name in ("debug_callback_p", "debug_print_p"):
            primitive = getattr(debugging, name, None)
            if primitive is None:
                continue
            for table in [mlir._lowerings, *mlir._platform_specific_lowerings.values()]:
                if primitive in table:
                    entry = table[primitive]
                    if dataclasses.is_dataclass(entry):  # JAX 0.7 on: a rule and its options
                        quiet: Any = dataclasses.replace(entry, rule=nothing)
                    elif callable(entry):  # older JAX: the rule itself
                        quiet = nothing
                    else:
                        continue
                    self._saved.append((table, primitive, entry))
                    table[primitive] = quiet
        return self

    def __exit__(self, *exc: object) -> None:
        for table, primitive, rule in self._saved:
            table[primitive] = rule


_X64_WEAK = {"int32": "int64", "float32": "float64", "complex64": "complex128"}


def _export_arg(value: dict) -> Any:
    """A weakly typed scalar stands for a Python number: 64-bit when the student enabled x64,
    as JAX itself would trace `f(1.0)` then."""
    import jax

    if value["t"] == "abstract":
        dtype, weak = value["dtype"], value.get("weak", False)
        if weak and jax.config.jax_enable_x64:
            dtype = _X64_WEAK.get(dtype, dtype)
        return jax.ShapeDtypeStruct(tuple(value["shape"]), dtype, weak_type=weak)
    return decode(value)


def _exported(fn: Any, args: list, traced: list[int], name: str) -> tuple[Any, bool, str | None, str]:
    """(Exported, direct, why the function itself was refused, its output's tree): the
    function's own jit when `jax.export` accepts it and its output serializes, else a jit of it
    with flat outputs."""
    import jax
    from jax import export

    refused = None
    if len(traced) == len(args):
        try:
            exported = export.export(fn)(*args)
            if _serializable(exported):
                return exported, True, None, str(exported.out_tree)
        except ValueError as exc:
            if "must be the result of `jit`" not in str(exc):
                raise
            refused = _short(str(exc).splitlines()[0])
    trees: list[str] = []

    def flat(*values: Any) -> list:
        full = list(args)
        for i, v in zip(traced, values):
            full[i] = v
        leaves, tree = jax.tree_util.tree_flatten(fn(*full))
        trees.append(str(tree))
        return leaves

    flat.__name__ = name
    direct = refused is None and len(traced) == len(args)
    exported = export.export(jax.jit(flat))(*(args[i] for i in traced))
    return exported, direct, refused, trees[0] if trees else "?"


def _is_jit(fn: Any) -> bool:
    """Whether `fn` is what jax.jit returns: its type, not its attributes (jax.export's own test
    is a Protocol, which a plain function with borrowed `.trace` and `.lower` satisfies)."""
    import jax

    return type(fn) is type(jax.jit(abs))


def _serializable(exported: Any) -> bool:
    """Whether the output tree holds only what serializes without registration."""
    text = str(exported.out_tree)
    return "CustomNode" not in text and "namedtuple" not in text


def _keep_ir_context() -> None:
    """JAX makes a fresh MLIR context every ten lowerings in a thread (a bound on what a
    long-lived thread interns); a grading kernel lives for one submission, so its probe (`serve`)
    keeps the one it has for all its requests (5-10 ms a context). Nothing changes where JAX's
    internals are not as expected."""
    try:
        from jax._src.interpreters import mlir

        held = mlir._thread_local_context.value
        if held is not None:
            mlir._thread_local_context.set_local((held[0], 0))
    except Exception:  # noqa: BLE001 - only a context less reused
        pass


class _StrippedModules:
    """While exporting: JAX serializes each module without its debug locations (the cell's file
    name, line numbers, argument names). They change nothing the module computes, and without
    them two students who hand in the same program hand in the same bytes, which the grader's
    verifier answers once per batch (grader/verifier/result_cache.py). The strip runs on JAX's
    own private copy of the module, right before its one serialization (`active`), instead of
    reading the artifact back to strip and serialize it again (`_without_locations`): the same
    bytes, 2-4 ms less an export. Not installed where JAX's internals are not as expected."""

    def __enter__(self) -> _StrippedModules:
        self.active = False
        try:
            from jax._src.export import _export
            from jax._src.lib.mlir import passmanager
        except ImportError:
            return self
        original = getattr(_export, "_module_to_bytecode", None)
        if original is None:
            return self

        def stripped(module: Any) -> bytes:
            try:
                strip = passmanager.PassManager.parse("builtin.module(strip-debuginfo)",
                                                      context=module.context)
                strip.run(module.operation)
            except Exception:  # noqa: BLE001 - serialized as it is, and stripped afterwards
                self.active = False
            return original(module)

        self._export, self._original, self.active = _export, original, True
        _export._module_to_bytecode = stripped
        return self

    def __exit__(self, *exc: object) -> None:
        if self.active:
            self._export._module_to_bytecode = self._original


def _without_locations(exported: Any) -> Any:
    """The module without its debug locations, where `_StrippedModules` could not strip them
    before serialization: the serialized artifact is read back as a module, stripped and
    serialized again. Unchanged where JAX's internals are not as expected."""
    import dataclasses

    try:
        from jax._src.export import _export
        from jax._src.interpreters import mlir
        from jax._src.lib import _jax
        from jax._src.lib.mlir import ir, passmanager

        with mlir.make_ir_context():
            module = _jax.mlir.deserialize_portable_artifact(exported.mlir_module_serialized)
            if isinstance(module, (str, bytes)):  # older jaxlib: the module's text
                module = ir.Module.parse(module)
            passmanager.PassManager.parse("builtin.module(strip-debuginfo)").run(module.operation)
            serialized = _export._module_to_bytecode(module)
        return dataclasses.replace(exported, mlir_module_serialized=serialized)
    except Exception:  # noqa: BLE001 - a cache miss, never a wrong module
        return exported


class AbstractExports:
    """The abstract export of each (function, abstract arguments, globals) already attempted in
    one probe batch: what it returned, or what it raised.

    Checks that need the same function for the same abstract arguments differ only in what they
    bake in when it cannot be traced abstractly (`fallback`), so the abstract attempt, and when it
    succeeds the whole export, is made once per batch (the reference solution asks for 23 exports,
    13 of them distinct). One batch only (`begin_batch`): a notebook may redefine a function
    between two of its self-check cells, and the next batch must see the new one.
    """

    def __init__(self) -> None:
        self._made: dict[str, tuple[Any, dict | BaseException]] = {}

    @staticmethod
    def key(request: dict) -> str:
        return json.dumps([request["target"], request["args"], request.get("set_globals", {})],
                          sort_keys=True)

    def get(self, request: dict, fn: Any) -> dict | BaseException | None:
        made = self._made.get(self.key(request))
        return made[1] if made is not None and made[0] is fn else None

    def put(self, request: dict, fn: Any, outcome: dict | BaseException) -> None:
        self._made[self.key(request)] = (fn, outcome)


def _counts_first(fallback: dict[int, dict]) -> list[dict[int, dict]]:
    """The sets of public values to try baking in, fewest first: the Python integers alone (a
    loop's count, a size: what a Python loop needs concrete), then every one. A float left
    abstract (a learning rate) keeps the program the same for every value drawn, so one compiled
    program serves every student's hidden draws."""
    counts = {i: v for i, v in fallback.items() if v.get("t") == "py" and type(v.get("v")) in (int, bool)}
    return [counts, fallback] if counts and len(counts) < len(fallback) else [fallback]


def _baked(fn: Any, specs: list[dict], fallback: dict[int, dict],
           name: str) -> tuple[Any, bool, str | None, str, list[int]]:
    """The export with the fewest public values baked in that traces (`_counts_first`); what
    baking all of them raises when none does."""
    attempts = _counts_first(fallback)
    for n, bake in enumerate(attempts, 1):
        args = [_export_arg(bake.get(i, a)) for i, a in enumerate(specs)]
        traced = [i for i in range(len(args)) if i not in bake]
        try:
            return (*_exported(fn, args, traced, name), sorted(bake))
        except Exception:
            if n == len(attempts):
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")


_batch_exports = AbstractExports()


def begin_batch(requests: list[dict] | None = None) -> None:
    """Forget the exports and calls of the last batch (`serve` starts each batch with it); the
    batch's `requests` tell which calls two of its requests share (`SharedRuns`)."""
    global _batch_exports, _shared_runs
    _batch_exports = AbstractExports()
    _shared_runs = SharedRuns(requests)


class StaticArgumentError(Exception):
    """The function marks static an argument the grader asked for traced: named by its position
    (and name), instead of what tracing it with a placeholder raised deep inside JAX."""


def _static_positions(fn: Any) -> list[int]:
    """The positions a jax.jit function marks static (static_argnums, and static_argnames
    through its signature); none for anything else."""
    import inspect

    info = getattr(fn, "_jit_info", None)
    try:
        positions = {int(i) for i in (getattr(info, "static_argnums", None) or ())}
        names = [str(n) for n in (getattr(info, "static_argnames", None) or ())]
    except (TypeError, ValueError):
        return []
    if names:
        try:
            parameters = list(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            parameters = []
        positions |= {parameters.index(n) for n in names if n in parameters}
    return sorted(p for p in positions if 0 <= p < 64)


def _static_refusal(fn: Any, traced: set[int]) -> StaticArgumentError | None:
    """The error to report when the function could not be exported and marks static one of the
    arguments left traced."""
    import inspect

    static = [p for p in _static_positions(fn) if p in traced]
    if not static:
        return None
    try:
        parameters = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        parameters = []
    named = ", ".join(f"argument {p + 1}" + (f" (`{_short(parameters[p])}`)" if p < len(parameters) else "")
                      for p in static)
    return StaticArgumentError(f"marks {named} static")


def op_export(request: dict, namespace: dict) -> dict:
    """Export the function for abstract arguments; bake the fallback values in where it cannot
    be traced with them abstract, each once per batch (`AbstractExports`). When no attempt
    traces and the function marks static an argument left traced, that is what is reported."""
    fn = _resolve(namespace, request["target"])
    try:
        return _export(request, namespace, fn)
    except Exception as exc:
        baked = {int(k) for k in request.get("fallback", {})}
        refusal = _static_refusal(fn, set(range(len(request["args"]))) - baked)
        if refusal is not None:
            raise refusal from exc
        raise


def _export(request: dict, namespace: dict, fn: Any) -> dict:
    import base64
    import dataclasses

    import jax

    made = _batch_exports
    before = made.get(request, fn)
    if isinstance(before, dict):
        return dict(before)
    name = _short(str(getattr(fn, "__name__", request["target"])))
    specs = list(request["args"])
    with _globals_set(request, namespace), jax.disable_jit(False), _QuietDebugging(), \
            _StrippedModules() as stripping:
        baked: list[int] = []
        abstract_raised = None
        args = [_export_arg(a) for a in specs]
        try:
            if before is not None:
                raise before
            exported, direct, refused, tree = _exported(fn, args, list(range(len(args))), name)
        except Exception as exc:
            if before is None:
                made.put(request, fn, exc)
            fallback = {int(k): v for k, v in request.get("fallback", {}).items()}
            if not fallback:
                raise
            abstract_raised = _raised(exc)
            exported, direct, refused, tree, baked = _baked(fn, specs, fallback, name)
    effects = tuple(e for e in exported.unordered_effects if type(e).__name__ != "DebugEffect")
    exported = dataclasses.replace(exported, unordered_effects=effects)
    if not stripping.active:
        exported = _without_locations(exported)
    blob = exported.serialize()
    result = {"op": "export", "module": base64.b64encode(bytes(blob)).decode("ascii"), "direct": direct,
              "jitted": _is_jit(fn), "baked": baked, "out_tree": _short(tree),
              "fun_name": _short(exported.fun_name)}
    if refused:
        result["jit_refused"] = refused
    if abstract_raised:
        result["abstract_raised"] = abstract_raised
    else:
        made.put(request, fn, dict(result))
    return result


OPERATIONS: dict[str, Callable[[dict, dict], dict]] = {
    "lookup": op_lookup,
    "value": op_value,
    "call": op_call,
    "trace": op_trace,
    "compile_count": op_compile_count,
    "export": op_export,
}


def observe(request: dict, namespace: dict) -> dict:
    """Answer one request; the student's exceptions become `raised`, never escape."""
    try:
        result = OPERATIONS[request["op"]](request, namespace)
    except _Missing as missing:
        return {"id": request["id"], "status": "missing", "detail": str(missing)}
    except (Exception, SystemExit) as exc:  # KeyboardInterrupt is the grader's timeout: let it go
        return {"id": request["id"], "status": "raised", "raised": _raised(exc)}
    return {"id": request["id"], "status": "ok", "result": result}


def _publish(observation: dict) -> None:
    from IPython import get_ipython

    get_ipython().display_pub.publish(data={MIME_TYPE: observation}, metadata={})


def _descendants(root: int) -> list[int]:
    """Processes below `root`, read from /proc (empty where there is no /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def stop_leftover_processes() -> None:
    """Kill and reap what the student's cells started and left behind.

    Background processes are no part of an answer, and they hold the process budget that JAX
    needs for its own threads when the checks compile (a fork burst would otherwise abort them).
    Only descendants of this kernel are touched.
    """
    for pid in _descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def keep_compiled(folder: str) -> None:
    """JAX's persistent compilation cache in `folder`, a fresh folder of this kernel's own scratch
    (the grader names it, and empties the scratch after the kernel), for the probe's requests.

    The checks that must see a function trace again clear JAX's caches (`op_call` with `watch` or
    `count_calls`, `_uses_what_it_returns`, `op_compile_count`), after which XLA compiled the same
    programs again, call after call: 0.05-0.2 s each, most of a training exercise's probe. With
    the cache a program compiled once is loaded instead. Nothing observed changes: tracing and
    lowering still happen, what the cache returns is the executable a compile of the same program
    (options, flags and versions in its key) makes, and the compile event the probe counts is
    recorded around the load as around a compile (`pxla._cached_compilation`). Set for each probe
    cell, since the student's code may change JAX's configuration; left as it is where JAX's
    internals are not as expected (then everything is compiled, as before)."""
    _keep_loaded()  # also where the student's cells had set this very configuration
    try:
        import jax
        from jax._src import compilation_cache

        wanted = {"jax_enable_compilation_cache": True, "jax_compilation_cache_dir": folder,
                  "jax_persistent_cache_min_compile_time_secs": 0.0,
                  "jax_persistent_cache_min_entry_size_bytes": 0, "jax_compilation_cache_max_size": -1}
        if all(getattr(jax.config, name) == value for name, value in wanted.items()):
            return
        os.makedirs(folder, mode=0o700, exist_ok=True)
        for name, value in wanted.items():
            jax.config.update(name, value)
        compilation_cache.reset_cache()  # the cache is chosen at a process's first compile: again
    except Exception:  # noqa: BLE001 - only programs compiled again
        pass


_loaded: dict[str, tuple[Any, Any]] = {}  # cache key -> (XLA's loaded executable, its compile time)


def _keep_loaded() -> None:
    """The programs compiled for the probe kept loaded in memory instead, by their persistent-cache
    key: a program compiled again after a cache clear is the executable already loaded, with no
    serializing and file write after its compile and no file read and deserializing at each load
    (together 0.15 s of a grading's probe). Only programs without host callbacks (a
    `jax.debug.print` binds the callbacks of its own trace); the others go through the folder as
    before. `_cache_read` and `_compile_and_write_cache` are JAX's two steps of
    `compile_or_get_cached` on either side of the key; where they are not there with the
    parameters read here, nothing is wrapped. The first probe cell wraps them (every cell loads
    this module afresh): its `_loaded` holds the programs for the kernel's life, which is one
    submission's."""
    try:
        from jax._src import compiler

        read, compile_and_write = compiler._cache_read, compiler._compile_and_write_cache
        reading, compiling = inspect.signature(read), inspect.signature(compile_and_write)
    except (ImportError, AttributeError, TypeError, ValueError):
        return
    needed = {"cache_key", "host_callbacks"}
    if (getattr(read, "_grader_loaded", False) or not needed <= set(reading.parameters)
            or not needed | {"backend", "computation", "executable_devices", "compile_options"}
            <= set(compiling.parameters)):
        return

    def cache_read(*args: Any, **kwargs: Any) -> Any:
        asked = reading.bind(*args, **kwargs).arguments
        if not asked["host_callbacks"] and asked["cache_key"] in _loaded:
            return _loaded[asked["cache_key"]]
        return read(*args, **kwargs)

    def compile_and_write_cache(*args: Any, **kwargs: Any) -> Any:
        asked = compiling.bind(*args, **kwargs).arguments
        if asked["host_callbacks"]:
            return compile_and_write(*args, **kwargs)
        started = time.monotonic()
        executable = compiler.backend_compile_and_load(asked["backend"], asked["computation"],
                                                       asked["executable_devices"], asked["compile_options"],
                                                       asked["host_callbacks"])
        _loaded[asked["cache_key"]] = (executable, int(time.monotonic() - started))
        return executable

    cache_read._grader_loaded = True  # type: ignore[attr-defined]
    compiler._cache_read = cache_read
    compiler._compile_and_write_cache = compile_and_write_cache


def serve(requests_json: str, namespace: dict, emit: Callable[[dict], None] | None = None,
          nonce: str = "", compiled: str | None = None) -> None:
    """Answer each request in order, emitting each observation as soon as it is known.

    Emitting one at a time means that when a later request hangs or kills the kernel, the
    grader still has every observation made before it. Each goes out wrapped with the probe
    cell's `nonce`, by which the grader tells it from output of the student's own cells.
    `compiled`: the folder of the kernel's compiled programs (`keep_compiled`).
    """
    emit = emit or _publish
    stop_leftover_processes()
    requests = json.loads(requests_json)
    begin_batch(requests if isinstance(requests, list) else None)
    if compiled is not None:
        keep_compiled(compiled)
    for request in requests:
        _keep_ir_context()  # a grading kernel's, not a self-check's: the student's kernel lives on
        emit({"nonce": nonce, "observation": observe(request, namespace)})
