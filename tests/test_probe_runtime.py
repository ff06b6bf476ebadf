"""The in-kernel probe, run in this process on a plain dict namespace (no kernel needed)."""

from __future__ import annotations

import functools
import json
import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from grader.kernel.inside import runtime
from grader.kernel.protocol import MIME_TYPE, Observation


def array(values, dtype="float32") -> dict:
    arr = np.asarray(values, dtype=dtype)
    return {"t": "array", "dtype": dtype, "shape": list(arr.shape), "data": arr.tolist()}


def py(v) -> dict:
    return {"t": "py", "v": v}


def observe(op: str, namespace: dict, **fields) -> dict:
    raw = runtime.observe({"op": op, "id": "r1", **fields}, namespace)
    Observation.model_validate(raw)  # the grader must be able to read every answer
    return raw


@pytest.fixture(autouse=True)
def _the_test_process_s_children_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """`runtime.serve` first kills and reaps every descendant of its process, as a kernel must
    (tests/test_leftovers.py tests that in kernels). Here that process is the test's: it killed the
    warm worker's fork servers that the process's later tests use (booted again by the next), and
    would kill any server a test of this process keeps."""
    monkeypatch.setattr(runtime, "stop_leftover_processes", lambda: None)


def test_serve_here_leaves_this_process_s_children_running() -> None:
    import subprocess
    import sys

    echo = "import sys\nfor line in sys.stdin:\n    print(line, end='', flush=True)\n"
    child = subprocess.Popen([sys.executable, "-c", echo], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        runtime.serve(json.dumps([{"op": "value", "id": "a", "name": "x"}]), {"x": 1}, emit=lambda o: None)
        try:
            child.stdin.write("alive?\n")
            child.stdin.flush()
        except BrokenPipeError:
            pass
        assert child.stdout.readline() == "alive?\n"  # a killed child answers with EOF
    finally:
        child.kill()
        child.communicate()


def test_mime_type_matches_the_protocol() -> None:
    assert runtime.MIME_TYPE == MIME_TYPE


# ----------------------------------------------------------------------------- encode / decode


@pytest.mark.parametrize("value", [0, 3, -7, 2.5, True, False])
def test_python_scalars_stay_python(value) -> None:
    wire = runtime.encode(value)
    assert wire == {"t": "py", "v": value}
    back = runtime.decode(wire)
    assert back == value and type(back) is type(value)


def test_float32_array_round_trip_keeps_dtype_and_shape() -> None:
    x = jnp.arange(6, dtype=jnp.float32).reshape(2, 3) / 4
    wire = runtime.encode(x)
    assert wire["t"] == "array" and wire["dtype"] == "float32" and wire["shape"] == [2, 3]
    assert wire["weak"] is False
    back = runtime.decode(wire)
    assert isinstance(back, jax.Array)
    assert back.dtype == jnp.float32 and back.shape == (2, 3)
    np.testing.assert_array_equal(np.asarray(back), np.asarray(x))


def test_decoding_arrays_after_a_cache_clear_compiles_nothing_and_gives_what_jnp_asarray_gives() -> None:
    """The probe clears JAX's caches before every check that watches a trace; jnp.asarray then
    compiled a conversion for each new shape and dtype of the arguments (10-15 ms each)."""
    wires = [array([[1.0, 2.0], [3.0, 4.0]]), array([1, 2, 3], "int32"), array([True, False], "bool"),
             array(2.5), array([1.0, 2.0], "float64")]
    compiles = []

    def listener(event: str, duration: float, **kwargs) -> None:
        if event == runtime._COMPILE_EVENT:
            compiles.append(event)

    jax.clear_caches()
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        decoded = [runtime.decode(w) for w in wires]
    finally:
        runtime._unregister(listener)
    assert compiles == []
    for wire, value in zip(wires, decoded):
        expected = jnp.asarray(np.asarray(wire["data"], dtype=wire["dtype"]).reshape(wire["shape"]))
        assert isinstance(value, jax.Array) and not value.committed
        assert (value.dtype, value.weak_type, value.shape) == (expected.dtype, expected.weak_type, expected.shape)
        np.testing.assert_array_equal(np.asarray(value), np.asarray(expected))


KEPT_LOADED = r"""
import json, sys
import jax, numpy as np
from jax._src import compilation_cache, compiler
from grader.kernel.inside import runtime

if sys.argv[2] == "preset":  # the student's cells had set the very configuration the probe sets
    for name, value in {"jax_enable_compilation_cache": True, "jax_compilation_cache_dir": sys.argv[1],
                        "jax_persistent_cache_min_compile_time_secs": 0.0,
                        "jax_persistent_cache_min_entry_size_bytes": 0,
                        "jax_compilation_cache_max_size": -1}.items():
        jax.config.update(name, value)
runtime.keep_compiled(sys.argv[1])
xla, counted, read, printed = [], [], [], []
real_compile, real_read = compiler.backend_compile_and_load, compilation_cache.get_executable_and_time
compiler.backend_compile_and_load = lambda backend, module, *a, **k: (
    xla.append(str(module.operation.attributes["sym_name"])), real_compile(backend, module, *a, **k))[1]


def read_from_the_folder(*args, **kwargs):
    found = real_read(*args, **kwargs)
    if found[0] is not None:
        read.append(1)
    return found


compilation_cache.get_executable_and_time = read_from_the_folder
jax.monitoring.register_event_duration_secs_listener(
    lambda event, duration, **k: counted.append(k.get("fun_name")) if event == runtime._COMPILE_EVENT else None)


def twice_plus_one(x):
    return x * 2 + 1


f = jax.jit(twice_plus_one)
values = [float(np.asarray(f(np.ones(3, np.float32))).sum())]
jax.clear_caches()
values.append(float(np.asarray(f(np.ones(3, np.float32))).sum()))
plain = [len([m for m in xla if "twice_plus_one" in m]), len([c for c in counted if "twice_plus_one" in str(c)]),
         len(read)]
traces = []


def g(x):
    traces.append(1)
    jax.debug.callback(lambda v, trace=len(traces): printed.append((trace, float(v))), x.sum())
    return x


jax.jit(g)(np.ones(2, np.float32)).block_until_ready()
jax.effects_barrier()
jax.clear_caches()
jax.jit(g)(np.full(2, 2.0, np.float32)).block_until_ready()
jax.effects_barrier()
print(json.dumps({"plain": plain, "values": values, "printed": printed}))
"""


@pytest.mark.parametrize("configured", ["by the probe", "preset"])
def test_a_program_compiled_again_after_a_cache_clear_is_the_one_kept_loaded(tmp_path, repo_root,
                                                                            configured) -> None:
    """In a process of its own (the probe sets JAX's configuration): after a cache clear the
    program is traced again and its compile counted (what a compile count observes), but XLA
    compiles it once; a program with a host callback is never taken from memory, so the callback
    of its own trace runs. The same where the student's cells had set the cache's configuration."""
    import subprocess
    import sys

    (tmp_path / "compiled").mkdir()
    done = subprocess.run([sys.executable, "-c", KEPT_LOADED, str(tmp_path / "compiled"), configured],
                          capture_output=True, text=True, cwd=repo_root, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    compiled_by_xla, counted, loaded_from_the_folder = seen["plain"]
    assert (compiled_by_xla, counted, loaded_from_the_folder) == (1, 2, 0) and seen["values"] == [9.0, 9.0]
    assert seen["printed"] == [[1, 2.0], [2, 4.0]]  # each call ran the callback of its own trace


def test_jax_internals_other_than_expected_are_left_alone(monkeypatch) -> None:
    """A JAX whose two cache steps take other parameters keeps them unwrapped (everything is then
    compiled or read from the folder, as before): a wrapper calling them wrongly would break
    every compile in the kernel."""
    from jax._src import compiler

    def cache_read(module_name, key, compile_options, backend, executable_devices, callbacks):
        raise AssertionError("not called here")

    monkeypatch.setattr(compiler, "_cache_read", cache_read)
    monkeypatch.setattr(compiler, "_compile_and_write_cache", compiler._compile_and_write_cache)
    runtime._keep_loaded()
    assert compiler._cache_read is cache_read


@pytest.mark.parametrize("dtype", ["float64", "int32", "int64", "bool"])
def test_numpy_arrays_keep_their_dtype(dtype) -> None:
    x = np.array([[1, 0], [0, 1]], dtype=dtype)
    wire = runtime.encode(x)
    assert (wire["dtype"], wire["shape"]) == (dtype, [2, 2])
    np.testing.assert_array_equal(np.asarray(wire["data"], dtype=dtype), x)


def test_weak_type_flag() -> None:
    weak = runtime.encode(jnp.array(5.0))
    strong = runtime.encode(jnp.float32(5.0))
    assert weak["weak"] is True and weak["shape"] == [] and weak["data"] == 5.0
    assert strong["weak"] is False and strong["dtype"] == "float32"


def test_containers_round_trip() -> None:
    value = (1, [2.0, None], {"a": 3, "b": (True,)})
    wire = runtime.encode(value)
    assert wire["t"] == "tuple" and wire["items"][1]["t"] == "list"
    assert runtime.decode(wire) == value
    json.dumps(wire)  # always JSON


def test_encode_never_raises_on_strange_objects() -> None:
    class Hostile:
        def __repr__(self):
            raise RuntimeError("no repr for you")

    assert runtime.encode(Hostile()) == {"t": "other", "type": "Hostile", "repr": "<unprintable>"}
    assert runtime.encode(np.array(["a", "b"]))["t"] == "other"  # not numbers
    big = runtime.encode(np.zeros(runtime.MAX_ELEMENTS + 1, dtype=np.float32))
    assert big["t"] == "other" and "too large" in big["repr"]


def test_strings_travel_as_short_python_values() -> None:
    """Written answers (a quiz's letters) are strings; a huge one is cut, never carried whole."""
    assert runtime.encode("B") == {"t": "py", "v": "B"}
    assert len(runtime.encode("y" * 10_000)["v"]) <= runtime.MAX_TEXT
    assert runtime.encode({1: "B", "2": "c"}) == {"t": "dict", "items": {"1": {"t": "py", "v": "B"},
                                                                         "2": {"t": "py", "v": "c"}}}


def test_subclasses_are_not_passed_as_plain_values() -> None:
    class Sneaky(float):
        pass

    assert runtime.encode(Sneaky(1.0))["t"] == "other"


# ----------------------------------------------------------------------------- observe


def test_missing_name() -> None:
    raw = observe("lookup", {}, name="tax_switch")
    assert raw == {"id": "r1", "status": "missing", "detail": "tax_switch"}
    assert observe("value", {}, name="predictions")["status"] == "missing"
    assert observe("call", {}, target="step", calls=[])["status"] == "missing"


def test_lookup_describes_a_jitted_function() -> None:
    @jax.jit
    def f(a, tol=1e-6):
        return a

    raw = observe("lookup", {"f": f, "n": 3}, name="f")
    result = raw["result"]
    assert raw["status"] == "ok"
    assert result["is_callable"] is True and result["is_jitted"] is True
    assert [(p["name"], p["has_default"]) for p in result["parameters"]] == [("a", False), ("tol", True)]
    plain = observe("lookup", {"n": 3}, name="n")["result"]
    assert plain == {"op": "lookup", "type_name": "int", "is_callable": False, "is_jitted": False, "parameters": None}


def test_value_of_a_name() -> None:
    raw = observe("value", {"predictions": [True, False]}, name="predictions")
    assert raw["result"]["values"] == [{"t": "list", "items": [py(True), py(False)]}]


def test_call_returns_values_in_order() -> None:
    ns = {"double": lambda x: x * 2}
    raw = observe("call", ns, target="double", calls=[{"args": [py(2)]}, {"args": [array([1.0, 2.0])]}])
    first, second = raw["result"]["values"]
    assert first == py(4)
    assert second["dtype"] == "float32" and second["data"] == [2.0, 4.0]


def test_raising_function() -> None:
    def boom(x):
        raise ValueError("negative income\nand a second line")

    raw = observe("call", {"boom": boom}, target="boom", calls=[{"args": [py(1)]}])
    assert raw["status"] == "raised"
    assert raw["raised"] == {"ename": "ValueError", "evalue": "negative income"}


def test_system_exit_inside_a_function_is_caught() -> None:
    def leave(x):
        raise SystemExit("bye")

    raw = observe("call", {"leave": leave}, target="leave", calls=[{"args": [py(1)]}])
    assert raw["status"] == "raised"
    assert raw["raised"]["ename"] == "SystemExit"


def test_keyboard_interrupt_is_not_swallowed() -> None:
    """KeyboardInterrupt is how the grader stops a hang: the probe must let it through."""

    def interrupted(x):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runtime.observe({"op": "call", "id": "r", "target": "f", "calls": [{"args": [py(1)]}]}, {"f": interrupted})


def test_serve_emits_each_observation_in_order() -> None:
    emitted: list[dict] = []
    requests = [{"op": "value", "id": "a", "name": "x"}, {"op": "lookup", "id": "b", "name": "nope"}]
    runtime.serve(json.dumps(requests), {"x": 1}, emit=emitted.append, nonce="n1")
    assert [o["nonce"] for o in emitted] == ["n1", "n1"]
    assert [(o["observation"]["id"], o["observation"]["status"]) for o in emitted] == [("a", "ok"), ("b", "missing")]


# ----------------------------------------------------------------------------- trace


def test_trace_of_lax_switch_lists_cond() -> None:
    def pick(i, x):
        return lax.switch(i, [lambda v: v, lambda v: v + 1.0, lambda v: v * 2.0], x)

    raw = observe("trace", {"pick": pick}, target="pick", call={"args": [py(1), py(1.0)]}, representation="jaxpr")
    assert raw["status"] == "ok"
    assert "cond" in raw["result"]["primitives"]


def test_trace_finds_primitives_inside_jitted_functions() -> None:
    @jax.jit
    def loop(x):
        return lax.while_loop(lambda v: v < 10.0, lambda v: v * 2.0, x)

    raw = observe("trace", {"loop": loop}, target="loop", call={"args": [py(1.0)]}, representation="jaxpr")
    assert "while" in raw["result"]["primitives"]


def test_trace_of_fori_loop_with_traced_bound_lowers_to_while() -> None:
    def run(n, x):
        return lax.fori_loop(0, n, lambda i, c: c + 1.0, x)

    lowered = observe("trace", {"run": run}, target="run", call={"args": [py(5), py(0.0)]}, representation="lowered")
    assert lowered["status"] == "ok"
    assert "while" in lowered["result"]["primitives"]
    jaxpr = observe("trace", {"run": run}, target="run", call={"args": [py(5), py(0.0)]}, representation="jaxpr")
    assert "while" in jaxpr["result"]["primitives"] and "scan" not in jaxpr["result"]["primitives"]


def test_trace_of_fori_loop_with_python_bound_is_a_scan_in_the_jaxpr() -> None:
    def run(x):
        return lax.fori_loop(0, 5, lambda i, c: c + 1.0, x)

    raw = observe("trace", {"run": run}, target="run", call={"args": [py(0.0)]}, representation="jaxpr")
    assert "scan" in raw["result"]["primitives"] and "while" not in raw["result"]["primitives"]


def test_trace_of_a_function_that_cannot_be_traced_is_raised() -> None:
    def branchy(x):
        return 1.0 if x > 0 else 0.0  # Python `if` on a tracer

    raw = observe("trace", {"f": branchy}, target="f", call={"args": [py(1.0)]}, representation="jaxpr")
    assert raw["status"] == "raised"
    assert "Tracer" in raw["raised"]["ename"] or "Concretization" in raw["raised"]["ename"]


def test_trace_works_when_the_student_disabled_jit() -> None:
    def pick(i, x):
        return lax.switch(i, [lambda v: v, lambda v: v + 1.0], x)

    with jax.disable_jit():
        raw = observe("trace", {"pick": pick}, target="pick", call={"args": [py(1), py(1.0)]}, representation="jaxpr")
    assert "cond" in raw["result"]["primitives"]


# ----------------------------------------------------------------------------- compile counts


def fresh_jitted():
    """A new jitted function each time, so the cache is always cold."""

    @jax.jit
    def scale(x):
        return x * 3.0 + 1.0

    return scale


def count(fn, calls: list[dict]) -> dict:
    raw = observe("compile_count", {"fn": fn}, target="fn", calls=calls)
    assert raw["status"] == "ok", raw
    return raw["result"]


def test_compile_count_same_shapes_compile_once() -> None:
    result = count(fresh_jitted(), [{"args": [array([1.0, 2.0, 3.0])]}, {"args": [array([4.0, 5.0, 6.0])]},
                                    {"args": [array([7.0, 8.0, 9.0])]}])
    assert result["compiles"] == 1
    assert result["names"] == ["jit(scale)"]


def test_compile_count_new_shape_compiles_again() -> None:
    result = count(fresh_jitted(), [{"args": [array([1.0, 2.0, 3.0])]}, {"args": [array([1.0, 2.0, 3.0, 4.0])]}])
    assert result["compiles"] == 2


def test_compile_count_carries_jax_s_own_explanation_of_each_recompile() -> None:
    result = count(fresh_jitted(), [{"args": [array([1.0, 2.0, 3.0])]}, {"args": [array([1.0, 2.0, 3.0, 4.0])]}])
    assert result["why"] == ["at x, now f32[4] and before f32[3]"]
    assert result["arguments"] == ["x"] and result["static"] == []
    assert not jax.config.jax_explain_cache_misses  # the student's setting is restored


def test_compile_count_names_the_static_parameters() -> None:
    @functools.partial(jax.jit, static_argnames="tol")
    def newton(a, tol):
        return a * tol

    result = count(newton, [{"args": [array([1.0]), {"t": "py", "v": 0.1}]},
                            {"args": [array([1.0]), {"t": "py", "v": 0.01}]}])
    assert result["compiles"] == 2 and result["static"] == ["tol"] and result["arguments"] == ["a", "tol"]


def test_compile_count_is_a_delta_not_a_total() -> None:
    other = fresh_jitted()
    other(jnp.ones(5)).block_until_ready()  # compiled before the probe looks: not counted
    result = count(fresh_jitted(), [{"args": [array([1.0, 2.0, 3.0])]}])
    assert result["compiles"] == 1


def test_compile_count_is_measured_on_cleared_caches() -> None:
    """A student cell that already called the function with the check's argument types (or its
    static values) must not make a recompiling function look as if it compiled once."""
    fn = fresh_jitted()
    fn(jnp.ones(3)).block_until_ready()
    fn(jnp.ones(4)).block_until_ready()  # the cache is warm for both shapes
    result = count(fn, [{"args": [array([1.0, 2.0, 3.0])]}, {"args": [array([1.0, 2.0, 3.0, 4.0])]}])
    assert result["compiles"] == 2


@pytest.fixture
def jax_logging_restored():
    """Undo what a 'student' does to JAX's global logging configuration in the next test."""
    from jax._src import monitoring

    before = jax.config.jax_log_compiles
    logger = logging.getLogger("jax")
    handlers, level = list(logger.handlers), logger.level
    listeners = {name: list(getattr(monitoring, name)) for name in dir(monitoring)
                 if name.startswith("_") and name.endswith("_listeners")}
    yield
    jax.config.update("jax_log_compiles", before)
    logger.handlers[:] = handlers
    logger.setLevel(level)
    for name, saved in listeners.items():
        getattr(monitoring, name)[:] = saved


def test_compile_count_not_fooled_by_student_logging_changes(jax_logging_restored) -> None:
    jax.config.update("jax_log_compiles", False)
    logging.getLogger("jax").handlers.clear()
    logging.getLogger("jax").setLevel(logging.CRITICAL)
    jax.monitoring.clear_event_listeners()
    result = count(fresh_jitted(), [{"args": [array([1.0, 2.0, 3.0])]}, {"args": [array([1.0, 2.0])]}])
    assert result["compiles"] == 2


def test_compile_count_not_fooled_by_compilations_logged_on_purpose(jax_logging_restored) -> None:
    jax.config.update("jax_log_compiles", True)
    jax.monitoring.clear_event_listeners()
    result = count(fresh_jitted(), [{"args": [array([1.0])]}, {"args": [array([2.0])]}])
    assert result["compiles"] == 1


def test_compile_count_removes_its_listener() -> None:
    fn = fresh_jitted()
    count(fn, [{"args": [array([1.0])]}])
    events: list[str] = []

    def listener(event: str, duration: float, **kwargs) -> None:
        events.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        count(fresh_jitted(), [{"args": [array([1.0])]}])
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert events, "our own listener saw the compilation"
    # and the probe's listeners are gone: a second count sees its own compilation only
    assert count(fn, [{"args": [array([1.0])]}])["compiles"] == 1


def test_compile_count_of_a_raising_function() -> None:
    def broken(x):
        raise RuntimeError("nope")

    raw = observe("compile_count", {"fn": broken}, target="fn", calls=[{"args": [py(1.0)]}])
    assert raw["status"] == "raised" and raw["raised"]["ename"] == "RuntimeError"


def test_borrowed_trace_and_lower_do_not_make_a_function_jitted() -> None:
    """jax.export's own test is a Protocol: attributes suffice. The probe reports the type."""
    def plain(x):
        return x * 2

    borrowed = jax.jit(lambda x: x * 2)
    plain.trace, plain.lower = borrowed.trace, borrowed.lower
    abstract = {"t": "abstract", "shape": [3], "dtype": "float32", "weak": False}
    for fn, jitted in ((plain, False), (borrowed, True)):
        raw = runtime.observe({"op": "export", "id": "e", "target": "f", "args": [abstract]}, {"f": fn})
        assert raw["status"] == "ok" and raw["result"]["jitted"] is jitted


def test_the_kernel_s_recompile_explanations_are_bounded() -> None:
    """`why`, `arguments` and `static` come from the student's process: they only word a failure,
    and the wire refuses too many of them or overlong ones."""
    from pydantic import ValidationError

    from grader.kernel.protocol import CompileCountResult

    CompileCountResult(compiles=1, names=["f"], why=["at x"] * 64, arguments=["a"] * 64, static=["a"])
    for field, value in (("why", ["at x"] * 65), ("static", ["s" * 3000]), ("arguments", ["a"] * 65)):
        with pytest.raises(ValidationError):
            CompileCountResult(compiles=1, names=["f"], **{field: value})


# ----------------------------------------------------------------------------- export memo

SCALAR = {"t": "abstract", "shape": [], "dtype": "float32", "weak": False}


def test_one_batch_exports_a_function_once_for_the_same_abstract_arguments() -> None:
    """Requests that differ only in their fallback share the abstract export: the function is
    traced once, and every request gets the same module."""
    traces: list[int] = []

    def f(x, tol):
        traces.append(1)
        return x * tol

    requests = [{"op": "export", "id": f"e{i}", "target": "f", "args": [SCALAR, SCALAR],
                 "fallback": fallback}
                for i, fallback in enumerate([{}, {"1": py(1e-6)}, {"0": py(2.0), "1": py(0.1)}])]
    emitted: list[dict] = []
    runtime.serve(json.dumps(requests), {"f": f}, emit=emitted.append)
    results = [o["observation"]["result"] for o in emitted]
    assert len(traces) == 1
    assert len({r["module"] for r in results}) == 1 and all(r["baked"] == [] for r in results)
    # another batch (a new probe cell) traces again: the notebook may have changed since
    runtime.serve(json.dumps(requests[:1]), {"f": f}, emit=emitted.append)
    assert len(traces) == 2


def test_a_function_that_cannot_be_traced_abstractly_is_tried_once_and_baked_per_request() -> None:
    """The abstract attempt's failure is remembered; each request still bakes its own fallback,
    and one without a fallback still reports what the abstract attempt raised."""
    attempts: list[str] = []

    def newton(a, tol):
        attempts.append(type(tol).__name__)
        steps = 0
        while tol < 1.0:  # a Python while on a traced tol cannot be traced abstractly
            tol, steps = tol * 2, steps + 1
        return a * steps

    requests = [{"op": "export", "id": "plain", "target": "newton", "args": [SCALAR, SCALAR]},
                {"op": "export", "id": "tight", "target": "newton", "args": [SCALAR, SCALAR],
                 "fallback": {"1": py(1e-3)}},
                {"op": "export", "id": "loose", "target": "newton", "args": [SCALAR, SCALAR],
                 "fallback": {"1": py(0.5)}}]
    emitted: list[dict] = []
    runtime.serve(json.dumps(requests), {"newton": newton}, emit=emitted.append)
    plain, tight, loose = (o["observation"] for o in emitted)
    assert plain["status"] == "raised" and plain["raised"]["ename"].startswith("Tracer")
    assert tight["status"] == loose["status"] == "ok"
    assert tight["result"]["baked"] == loose["result"]["baked"] == [1]
    assert tight["result"]["abstract_raised"] == plain["raised"]
    assert tight["result"]["module"] != loose["result"]["module"]  # each bakes its own tol
    abstract_attempts = [a for a in attempts if a != "float"]
    assert len(abstract_attempts) == 1


def test_the_export_memo_is_per_function_object_and_per_globals() -> None:
    """A redefined function, or other globals set for the call, is exported anew."""
    def first(x):
        return x + 1

    def second(x):
        return x + 2

    runtime.begin_batch()
    ask = {"op": "export", "id": "e", "target": "f", "args": [SCALAR]}
    one = runtime.observe(ask, {"f": first})["result"]["module"]
    two = runtime.observe(ask, {"f": second})["result"]["module"]
    assert one != two
    scaled = {**ask, "set_globals": {"k": py(3.0)}}

    ns = {"k": 2.0}
    exec("def f(x):\n    return x * k", ns)  # noqa: S102 - a notebook's function reads its globals
    plain = runtime.observe(ask, ns)["result"]["module"]
    assert runtime.observe(scaled, ns)["result"]["module"] != plain


def test_a_python_loop_s_count_is_baked_alone_and_its_learning_rate_stays_an_input() -> None:
    """Only what must be concrete is baked in: the loop's count. The learning rate stays an
    input, so every hidden learning rate runs the same program."""
    def train(w, lr, n):
        for _ in range(n):  # a Python loop needs a concrete count
            w = w - lr * w
        return w

    def branchy(w, lr, n):
        for _ in range(n):
            w = w - lr * w if lr > 0.1 else w  # a Python `if` on lr needs it concrete too
        return w

    def export(fn, lr: float) -> dict:
        request = {"op": "export", "id": "e", "target": "f", "args": [SCALAR, {**SCALAR, "weak": True},
                                                                     {**SCALAR, "dtype": "int32", "weak": True}],
                   "fallback": {"1": py(lr), "2": py(3)}}
        raw = runtime.observe(request, {"f": fn})
        assert raw["status"] == "ok", raw
        return raw["result"]

    first, second = export(train, 0.25), export(train, 0.5)
    assert first["baked"] == second["baked"] == [2]
    assert first["module"] == second["module"]
    assert export(branchy, 0.25)["baked"] == [1, 2]


# ----------------------------------------------------------------------------- counted calls, one object twice


def _loop_namespace() -> dict:
    ns: dict = {}
    exec(  # noqa: S102 - a notebook's functions read each other as globals
        "import jax\nfrom jax import lax\n"
        "@jax.jit\ndef step(w, b):\n    return w + 1, b - 1\n"
        "def python_loop(w, b, n):\n    for _ in range(n):\n        w, b = step(w, b)\n        print(float(w))\n"
        "    return w, b\n"
        "def fori(w, b, n):\n    return lax.fori_loop(0, n, lambda i, wb: step(*wb), (w, b))\n", ns)
    return ns


@pytest.mark.parametrize("target, counts", [("python_loop", [0, 1, 5]), ("fori", [1, 1, 1])])
def test_a_python_loop_calls_step_once_per_step_and_a_fori_loop_traces_it_once(target, counts) -> None:
    ns = _loop_namespace()
    step = ns["step"]
    calls = [{"args": [array(0.0), array(0.0), py(n)]} for n in (0, 1, 5)]
    raw = observe("call", ns, target=target, calls=calls, count_calls="step")
    assert raw["status"] == "ok", raw
    assert raw["result"]["counts"] == counts
    assert ns["step"] is step  # the student's function is put back


def test_counting_a_name_that_is_not_defined_is_not_answered_yet() -> None:
    ns = _loop_namespace()
    del ns["step"]
    raw = observe("call", ns, target="python_loop", calls=[{"args": [array(0.0), array(0.0), py(1)]}],
                  count_calls="step")
    assert raw["status"] == "missing" and raw["detail"] == "step"


def test_the_counted_function_is_put_back_even_when_the_call_raises() -> None:
    ns = _loop_namespace()
    step = ns["step"]
    raw = observe("call", ns, target="python_loop", calls=[{"args": [py("w"), py("b"), py(2)]}], count_calls="step")
    assert raw["status"] == "raised" and ns["step"] is step


def test_a_call_without_counting_reports_no_counts() -> None:
    raw = observe("call", _loop_namespace(), target="python_loop", calls=[{"args": [array(0.0), array(0.0), py(1)]}])
    assert raw["status"] == "ok" and "counts" not in raw["result"]


def test_same_as_passes_one_object_for_two_arguments_and_across_calls() -> None:
    seen: list = []

    def keep(w, b):
        seen.append((w, b))
        return w

    calls = [{"args": [array(0.0), array(0.0)], "same_as": {"1": {"call": 0, "arg": 0}}},
             {"args": [{"t": "none"}, array(2.0)], "same_as": {"0": {"call": 0, "arg": 1}}}]
    assert observe("call", {"keep": keep}, target="keep", calls=calls)["status"] == "ok"
    (w0, b0), (w1, b1) = seen
    assert w0 is b0 and w1 is w0 and b1 is not w0


@pytest.mark.parametrize("same_as", [{"1": {"call": 0, "arg": 1}}, {"0": {"call": 1, "arg": 0}}, {"1": {"call": 0, "arg": 5}}])
def test_same_as_must_name_an_earlier_argument(same_as) -> None:
    raw = observe("call", {"f": lambda w, b: w}, target="f",
                  calls=[{"args": [array(0.0), array(0.0)], "same_as": same_as}])
    assert raw["status"] == "raised" and raw["raised"]["ename"] == "ValueError"


def test_a_function_that_donates_both_buffers_cannot_take_one_buffer_twice() -> None:
    """The chapter's cell passes `_w0 = _b0 = jnp.float32(0.0)`: XLA refuses to donate it twice."""
    donating = jax.jit(lambda w, b: (w + 1, b + 1), donate_argnums=(0, 1))
    apart = [{"args": [array(0.0), array(0.0)]}]
    together = [{"args": [array(0.0), array(0.0)], "same_as": {"1": {"call": 0, "arg": 0}}}]
    assert observe("call", {"f": donating}, target="f", calls=apart)["status"] == "ok"
    assert observe("call", {"f": donating}, target="f", calls=together)["status"] == "raised"


def test_a_loop_that_calls_a_jit_of_step_by_another_name_calls_step() -> None:
    """`fast_step = jax.jit(step)`, or the plain function under a jitted step: the same step."""
    ns: dict = {}
    exec(  # noqa: S102 - a notebook's functions
        "import jax\n"
        "def step(w):\n    return w + 1\n"
        "fast_step = jax.jit(step)\n"
        "def loop(w, n):\n    for _ in range(n):\n        w = fast_step(w)\n    return w\n"
        "def private_copy(w):\n    return w + 1\n"
        "def loop_elsewhere(w, n):\n    for _ in range(n):\n        w = private_copy(w)\n    return w\n", ns)
    fast, step = ns["fast_step"], ns["step"]
    calls = [{"args": [array(0.0), py(n)]} for n in (0, 3)]
    assert observe("call", ns, target="loop", calls=calls, count_calls="step")["result"]["counts"] == [0, 3]
    assert ns["fast_step"] is fast and ns["step"] is step
    assert observe("call", ns, target="loop_elsewhere", calls=calls, count_calls="step")["result"]["counts"] == [0, 0]


def test_step_is_counted_in_the_globals_the_loop_reads_when_the_namespace_is_a_copy(tmp_path) -> None:
    """`runpy.run_path` (the pack's self-check of a module) returns a copy of the module's globals."""
    import runpy

    module = tmp_path / "answers.py"
    module.write_text("def step(w):\n    return w + 1\n"
                      "def loop(w, n):\n    for _ in range(n):\n        w = step(w)\n    return w\n")
    ns = runpy.run_path(str(module))
    step, module_globals = ns["step"], ns["loop"].__globals__
    assert module_globals is not ns
    raw = observe("call", ns, target="loop", calls=[{"args": [array(0.0), py(4)]}], count_calls="step")
    assert raw["result"]["counts"] == [4]
    assert ns["step"] is step and module_globals["step"] is step


def test_a_loop_that_jits_step_inside_itself_calls_step_once_per_step() -> None:
    """`jstep = jax.jit(step)` made inside the loop (or through `from jax import jit`) calls the
    compiled step once per step: counted as such, found by a held-out honest submission that lost
    the point; a fori_loop over such a jit still traces step once."""
    ns: dict = {}
    exec(  # noqa: S102 - a notebook's functions
        "import jax\nfrom jax import jit, lax\n"
        "def step(w):\n    return w + 1\n"
        "def loop(w, n):\n    jstep = jax.jit(step)\n    for _ in range(n):\n        w = jstep(w)\n    return w\n"
        "def loop_jit_name(w, n):\n    jstep = jit(step)\n    for _ in range(n):\n        w = jstep(w)\n    return w\n"
        "def fori(w, n):\n    jstep = jax.jit(step)\n    return lax.fori_loop(0, n, lambda i, w: jstep(w), w)\n", ns)
    real_jit, step = jax.jit, ns["step"]
    calls = [{"args": [array(0.0), py(n)]} for n in (0, 1, 4)]
    for target, counts in (("loop", [0, 1, 4]), ("loop_jit_name", [0, 1, 4]), ("fori", [1, 1, 1])):
        raw = observe("call", ns, target=target, calls=calls, count_calls="step")
        assert raw["status"] == "ok" and raw["result"]["counts"] == counts, (target, raw)
    assert jax.jit is real_jit and ns["jit"] is real_jit and ns["step"] is step  # all put back


@pytest.mark.parametrize("static", [{"static_argnums": 1}, {"static_argnames": "tol"}])
def test_an_export_refused_by_a_static_argument_names_it_not_what_jax_raised(static) -> None:
    """A static argument asked for traced: JAX compares a tracer with a placeholder object, and
    its text names tracer classes; the probe says which argument is static instead."""
    @functools.partial(jax.jit, **static)
    def newton(a, tol):
        return jnp.where(a >= tol, a, tol)

    raw = runtime.observe({"op": "export", "id": "e", "target": "newton", "args": [SCALAR, SCALAR]},
                          {"newton": newton})
    assert raw["status"] == "raised", raw
    assert raw["raised"]["ename"] == "StaticArgumentError"
    assert raw["raised"]["evalue"] == "marks argument 2 (`tol`) static"
    baked = runtime.observe({"op": "export", "id": "f", "target": "newton", "args": [SCALAR, SCALAR],
                             "fallback": {"1": py(1e-6)}}, {"newton": newton})
    assert baked["status"] == "ok" and baked["result"]["baked"] == [1]  # baking its public value works
