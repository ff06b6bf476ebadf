"""The verifier: the process that executes the modules kernels export (grader/verifier/).

A. Without a process: the result validation (every bound a line from the verifier must pass),
   the bounded line reader, the allow-list and the module inspection (in this process, on
   modules exported here: nothing is executed), the job model, and the sandbox command.
B. With a real verifier (marked `kernel`): modules exported in the test run on several calls in
   the sandbox and agree with NumPy; a Python callback is refused; garbage, a hang and a memory
   bomb cost their own job only; the sandbox has no network and no solutions; nothing is left
   after close(). A fake verifier (another program in the same place) that misbehaves gives
   "crashed", never an exception.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import os
import re
import socket
import sys
import textwrap
import threading
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export, lax
from pydantic import ValidationError

from grader.kernel.protocol import ArrayValue, PyScalar
from grader.report import Isolation
from grader.sandbox.layers import KERNEL_INSIDE, LAYERS, VERIFIER_INSIDE, Sandbox, SandboxPolicy, available
from grader.values import from_wire, to_wire
from grader.verifier.client import Verifier, VerifierProcess, VerifierStartFailed, _Dead, _Lines, _LineTooLong
from grader.verifier.inside import runtime
from grader.verifier.protocol import (
    MAX_LINE_BYTES,
    MAX_RESULT_NODES,
    BadAnswer,
    VerifierJob,
    job_line,
    parse_result,
)

ISOLATION = available()
POLICY = SandboxPolicy()
S = jax.ShapeDtypeStruct
F32 = jnp.float32
full_sandbox = pytest.mark.skipif(not ISOLATION.sandboxed,
                                  reason=f"the full sandbox is not available here: {ISOLATION.missing}")


# ============================================================================= modules


def newton(x):
    """sqrt(x) by Newton's method in a while_loop."""
    def cond(c):
        y, i = c
        return (jnp.abs(y * y - x) > 1e-6 * x).any() & (i < 60)

    def body(c):
        y, i = c
        return 0.5 * (y + x / y), i + 1

    y, _ = lax.while_loop(cond, body, (jnp.maximum(x, 1.0), 0))
    return y


def switched(i, x):
    return lax.switch(i, [lambda x: x + 1.0, lambda x: x * 2.0, lambda x: -x], x)


def pair(x, y):
    return x + y, jnp.sum(x * y)


def serialized(fn, *avals, **kwargs) -> bytes:
    return bytes(export.export(jax.jit(fn), **kwargs)(*avals).serialize())


def with_module_text(base: bytes, text: str) -> bytes:
    """`base` (a serialized module) with its StableHLO replaced by `text`: what a hostile kernel
    could send, since jax.export itself refuses to serialize host callbacks."""
    from jax._src.export._export import _module_to_bytecode
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    with mlir.make_ir_context():
        blob = _module_to_bytecode(ir.Module.parse(text))
    exported = export.deserialize(bytearray(base))
    return bytes(dataclasses.replace(exported, mlir_module_serialized=blob).serialize())


CALLBACK_MLIR = """
module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32>) {
    %0 = stablehlo.custom_call @TARGET(%arg0) {api_version = 4 : i32, backend_config = {index = 0 : ui64},
         has_side_effect = true} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}
"""


def callback_module(target: str = "xla_ffi_python_cpu_callback") -> bytes:
    """A module that calls a Python callback (executing it segfaults a plain interpreter: the
    callback it names does not exist there)."""
    return with_module_text(serialized(lambda x: x + 1, S((3,), F32)), CALLBACK_MLIR.replace("TARGET", target))


def inspect(blob: bytes) -> dict:
    return runtime.inspect_module(export.deserialize(bytearray(blob)))


def arr(x, dtype=None) -> ArrayValue:
    return to_wire(np.asarray(x, dtype=dtype))


# ============================================================================= A. no process


def job(id="j", module=b"x", calls=()) -> VerifierJob:
    return VerifierJob(id=id, module=module, calls=list(calls))


FACTS = {"fun_name": "f", "platforms": ["cpu"], "in_avals": [{"shape": [2], "dtype": "float32", "weak": False}],
         "out_avals": [{"shape": [2], "dtype": "float32", "weak": False}], "in_tree": "t", "out_tree": "t",
         "nr_devices": 1, "ops": ["add"], "custom_calls": []}
VALUE = {"t": "array", "dtype": "float32", "shape": [2], "data": [1.0, "nan"], "weak": False}


def line(**fields) -> bytes:
    raw = {"id": "j", "status": "ok", "facts": FACTS, "values": [[VALUE]], "detail": None, **fields}
    return json.dumps(raw).encode()


def test_a_good_answer_is_accepted() -> None:
    result = parse_result(line(), job(calls=[[arr([1.0, 2.0], np.float32)]]))
    assert result.status == "ok" and result.facts.ops == ["add"]
    got = from_wire(result.values[0][0])
    assert got.dtype == np.float32 and got[0] == 1.0 and math.isnan(got[1])
    refused = parse_result(line(status="refused", values=None, detail="custom calls outside the allow-list: x"), job())
    assert refused.status == "refused" and refused.values is None


@pytest.mark.parametrize("dtype, data, ok", [
    ("int32", [1, 2, 3], True),
    ("int32", [1, 2, 3.0], False),
    ("int32", [1, 2, "nan"], False),
    ("int32", [1, 2, True], False),
    ("bool", [True, False, True], True),
    ("bool", [True, 0, True], False),
    ("float32", [1, 2.5, "-inf"], True),
    ("float32", [1, 2.5, "-Inf"], False),
    ("float32", [1, 2.5, False], False),
    ("float32", [1, 2.5, {}], False),
    ("float64", [np.float64(1.0), 2.0, 3.0], True),  # a float subclass, leaf by leaf as before
    ("complex64", [[1.0, "nan"], [0, 1], [2.0, 2.0]], True),
    ("complex64", [[1.0, "nan"], 1.0, [2.0, 2.0]], False),
])
def test_an_array_holds_only_leaves_of_its_dtype(dtype, data, ok) -> None:
    if ok:
        assert ArrayValue(dtype=dtype, shape=[3], data=data).shape == [3]
    else:
        with pytest.raises(ValidationError, match="not " + dtype):
            ArrayValue(dtype=dtype, shape=[3], data=data)


@pytest.mark.parametrize("raw, why", [
    (b"not json", "not JSON"),
    (b"\xff\xfe", "not JSON"),
    (b"[1, 2]", "not an object"),
    (b"[" * 100 + b"]" * 100, "deeper"),
    (b"[" + b"0," * (2 * MAX_RESULT_NODES) + b"0]", "more than"),
    (line(id="k"), "another job"),
    (line(status="timeout"), "status"),
    (line(status="crashed"), "status"),
    (line(values=None), "without facts or values"),
    (line(values=[]), "0 lists of outputs for 1 calls"),
    (line(values=[[VALUE, VALUE]]), "2 outputs"),
    (line(values=[[{**VALUE, "shape": [1, 2], "data": [[1.0, 2.0]]}]]), "not the float32[2]"),
    (line(values=[[{**VALUE, "dtype": "float64"}]]), "not the float32[2]"),
    (line(values=[[{**VALUE, "data": [1.0]}]]), "shape"),
    (line(values=[[{**VALUE, "dtype": "object"}]]), "dtype"),
    (line(values=[[{**VALUE, "data": ["1e5", 1.0]}]]), "float32"),
    (line(values=[[{**VALUE, "data": [True, 1.0]}]]), "float32"),
    (line(values=[[{**VALUE, "data": [None, 1.0]}]]), "float32"),
    (line(values=[[{**VALUE, "data": [[1.0], 1.0]}]]), "float32"),
    (line(status="error", detail="boom"), "values in a error answer"),
    (line(detail="x" * 3000), "longer than"),
    (line(extra=1), "extra"),
    (line(facts={**FACTS, "ops": ["x"] * 1001}), "ops"),
    (line(facts={**FACTS, "in_avals": [{"shape": [-1], "dtype": "float32", "weak": False}]}), "in_avals"),
])
def test_a_bad_answer_is_refused(raw: bytes, why: str) -> None:
    with pytest.raises(BadAnswer, match=re.escape(why)):
        parse_result(raw, job(calls=[[arr([1.0, 2.0], np.float32)]]))


def test_an_oversized_line_is_refused_before_it_is_parsed() -> None:
    with pytest.raises(BadAnswer, match="over 16 MiB"):
        parse_result(b" " * (MAX_LINE_BYTES + 1), job())


def pipe_with(data: bytes) -> tuple[int, threading.Thread]:
    """A pipe's read end, a thread writing `data` into it (then closing it)."""
    r, w = os.pipe()

    def write() -> None:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(w, view[:65536]):]
        except OSError:
            pass
        finally:
            os.close(w)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return r, thread


def test_the_line_reader_never_buffers_more_than_its_cap() -> None:
    cap = 2**20
    r, thread = pipe_with(b"x" * (64 * 2**20))  # a 64 MiB line
    lines = _Lines(r, cap)
    with pytest.raises(_LineTooLong):
        lines.readline(time.monotonic() + 10)
    assert len(lines.buffer) <= cap + 1
    os.close(r)  # the writer gets EPIPE
    thread.join(10)
    assert not thread.is_alive()


def test_the_line_reader_splits_lines_and_keeps_deadlines() -> None:
    r, _ = pipe_with(b'{"a": 1}\n{"b": 2}\npartial')
    lines = _Lines(r, 1024)
    deadline = time.monotonic() + 5
    assert lines.readline(deadline) == b'{"a": 1}'
    assert lines.readline(deadline) == b'{"b": 2}'
    with pytest.raises(_Dead):  # the writer closed its end before a newline
        lines.readline(deadline)
    os.close(r)
    r, w = os.pipe()
    lines = _Lines(r, 1024)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        lines.readline(started + 0.2)
    assert 0.15 < time.monotonic() - started < 2
    os.close(r)
    os.close(w)


def test_a_line_waiting_in_the_pipe_is_read_after_the_deadline() -> None:
    # a verifier started beside the kernel is asked first after the student's cells, which may
    # take longer than its start-up limit: its ready line, long written, is not a timeout
    r, w = os.pipe()
    os.write(w, b'{"ready": 1}\n{"next"')
    lines = _Lines(r, 1024)
    past = time.monotonic() - 100
    assert lines.readline(past) == b'{"ready": 1}'
    with pytest.raises(TimeoutError):  # nothing complete waits: the deadline holds
        lines.readline(past)
    os.close(r)
    os.close(w)


def test_job_model_bounds() -> None:
    with pytest.raises(ValidationError):
        VerifierJob(id="j", module=b"x" * (6 * 2**20 + 1))
    with pytest.raises(ValidationError):
        VerifierJob(id="", module=b"x")
    with pytest.raises(ValidationError):
        VerifierJob(id="j", module=b"x", calls=[[]] * (runtime.MAX_CALLS + 1))
    with pytest.raises(ValidationError):  # flat inputs only: no tuples, dicts, opaque values
        VerifierJob(id="j", module=b"x", calls=[[{"t": "tuple", "items": []}]])
    ok = VerifierJob(id="j", module=b"\x00\x01", calls=[[arr([1.0, np.nan]), PyScalar(v=2)]])
    sent = json.loads(job_line(ok))
    assert base64.b64decode(sent["module"]) == b"\x00\x01"
    assert sent["calls"][0][1] == {"t": "py", "v": 2}
    assert math.isnan(sent["calls"][0][0]["data"][1])


def test_a_knockout_job_is_given_the_modules_outputs_and_answers_facts_only() -> None:
    """The grader sends a knockout job the values the module's value job gave: only the knocked-out
    module is compiled and run, nothing is fingerprinted again, and the answer holds no values;
    `functions` is the grader's bookkeeping and never leaves it."""
    def zero_trip(x):
        return lax.while_loop(lambda c: (c[0] != c[1]).any(), lambda c: (c[0] * 2.0, c[1]), (x, x))[0]

    blob = serialized(zero_trip, S((2,), F32))
    calls = [[arr([1.0, 2.0], np.float32)]]
    job = VerifierJob(id="k", module=blob, calls=calls, knockouts=["loop"], outputs=[[arr([1.0, 2.0], np.float32)]],
                      tolerance=(1e-5, 1e-2), functions=["f"])
    sent = json.loads(job_line(job))
    assert sent["tolerance"] == [1e-5, 1e-2] and "functions" not in sent and len(sent["outputs"]) == 1
    answer = runtime.run_job(sent)
    assert answer["status"] == "ok" and answer["values"] == [] and answer["facts"]["fingerprint"] is None
    assert answer["facts"]["constructs"]["loops"][0]["does_work"] is False
    result = parse_result(json.dumps(answer).encode(), job)
    assert result.values == [] and result.facts.constructs.loops[0].does_work is False
    moved = runtime.run_job({**sent, "outputs": [[to_wire(np.array([1.0, 2.5], np.float32)).model_dump()]]})
    assert moved["facts"]["constructs"]["loops"][0]["does_work"] is True  # outputs it does not give
    with pytest.raises(BadAnswer, match="values in the answer of a knockout job"):
        parse_result(line(id="k"), job)
    unfinished = {**FACTS, "constructs": {"unfinished": {"loop": {"status": "timeout", "detail": "x"}}}}
    with pytest.raises(BadAnswer, match="the grader's to say"):
        parse_result(line(facts=unfinished), VerifierJob(id="j", module=b"x", calls=[[arr([1.0, 2.0])]]))


KEPT_SCRIPT = textwrap.dedent('''
    import importlib.util, json, sys
    from jax._src import compiler

    compiled = []
    real = compiler.backend_compile_and_load

    def counting(*args, **kwargs):
        compiled.append(1)
        return real(*args, **kwargs)

    compiler.backend_compile_and_load = counting
    spec = importlib.util.spec_from_file_location("verifier_runtime", sys.argv[1])  # by path, as the verifier
    runtime = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runtime)
    runtime._warm_up()
    if sys.argv[2] == "kept":
        runtime.keep_serialized()
    jobs = json.loads(sys.stdin.read())
    before = len(compiled)
    answers = [runtime.run_job(job) for job in jobs]
    print(json.dumps({"compiles": len(compiled) - before, "answers": answers}))
''')


def test_a_module_run_again_in_a_later_job_is_loaded_not_compiled_and_answers_the_same(tmp_path) -> None:
    """A verifier whose JAX reads a store (as the sandbox's does, never writing to it) keeps what
    it compiled, serialized: the same module in a later job on other inputs (the hidden checks'
    after the visible ones') is not compiled again; every answer is the one compiling gives."""
    import subprocess

    from grader.sandbox.layers import sandbox_environment

    blob = serialized(newton, S((3,), F32))
    other = serialized(lambda x: jnp.sin(x) * 3.0, S((3,), F32))
    jobs = [json.loads(job_line(VerifierJob(id=name, module=module, calls=[[arr(x, np.float32)]])))
            for name, module, x in (("visible", blob, [4.0, 9.0, 2.0]), ("other", other, [0.5, 1.0, 2.0]),
                                    ("hidden", blob, [16.0, 0.25, 7.0]))]
    runs = {}
    for mode in ("kept", "compiled"):
        store = tmp_path / mode
        store.mkdir()
        env = {**os.environ, **sandbox_environment(store, writable=False)}
        done = subprocess.run([sys.executable, "-c", KEPT_SCRIPT, runtime.__file__, mode], input=json.dumps(jobs),
                              capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        runs[mode] = json.loads(done.stdout.strip().splitlines()[-1])
        assert list(store.iterdir()) == []  # nothing written to the store
    assert runs["compiled"]["compiles"] == 3 and runs["kept"]["compiles"] == 2
    assert runs["kept"]["answers"] == runs["compiled"]["answers"]
    hidden = from_wire(ArrayValue.model_validate(runs["kept"]["answers"][2]["values"][0][0]))
    np.testing.assert_allclose(hidden, np.sqrt([16.0, 0.25, 7.0]), rtol=1e-5)


def test_the_allow_list() -> None:
    from jax._src.export import _export

    assert set(_export._CPU_FFI_KERNELS) <= runtime.ALLOWED_CUSTOM_CALLS  # what jnp.linalg emits on CPU
    for target in ("xla_python_cpu_callback", "xla_ffi_python_cpu_callback",
                   "xla_ffi_partitioned_python_cpu_callback", "xla_python_gpu_callback", "AllocateBuffer",
                   "cusolver_getrf_ffi", "tpu_custom_call"):
        assert target not in runtime.ALLOWED_CUSTOM_CALLS
        with pytest.raises(runtime.Refused, match=target):
            runtime.check_module({}, {"stablehlo.custom_call"}, {target, "lapack_sgetrf_ffi"}, [])
    runtime.check_module({}, {"stablehlo.custom_call", "stablehlo.while"}, {"lapack_sgetrf_ffi", "Sharding"}, [])
    with pytest.raises(runtime.Refused, match="host"):
        runtime.check_module({}, {"stablehlo.outfeed"}, set(), [])
    with pytest.raises(runtime.Refused, match="dialects"):
        runtime.check_module({}, {"gpu.launch"}, set(), [])


def test_a_python_callback_is_refused_by_inspection() -> None:
    for target in ("xla_ffi_python_cpu_callback", "xla_python_cpu_callback"):
        with pytest.raises(runtime.Refused, match=f"allow-list: {target}") as refused:
            inspect(callback_module(target))
        assert refused.value.args[1]["custom_calls"] == [target]


def test_jnp_linalg_on_cpu_passes_the_allow_list() -> None:
    """What JAX 0.12 emits on CPU for jnp.linalg and jax.scipy.linalg: LAPACK FFI targets only."""
    m, v = S((3, 3), F32), S((3,), F32)
    functions = [
        (jnp.linalg.solve, m, v), (jnp.linalg.inv, m), (jnp.linalg.cholesky, m), (jnp.linalg.det, m),
        (jnp.linalg.eigvalsh, m), (jnp.linalg.pinv, m), (lambda a: tuple(jnp.linalg.eigh(a)), m),
        (lambda a: tuple(jnp.linalg.qr(a)), m), (lambda a: tuple(jnp.linalg.svd(a)), m),
        (lambda a: jnp.linalg.eigvals(a), m), (lambda a, b: jnp.linalg.lstsq(a, b)[0], m, v),
        (lambda a: tuple(jnp.linalg.slogdet(a)), m), (jax.scipy.linalg.expm, m),
        (lambda a: jax.scipy.linalg.lu(a), m), (lambda a, b: jax.scipy.linalg.solve_triangular(a, b), m, v),
        (lambda a: jax.scipy.linalg.schur(a), m), (lambda a: jax.scipy.linalg.hessenberg(a), m),
        (lambda a: jnp.linalg.eig(a)[0], m),
    ]
    seen: set[str] = set()
    for fn, *avals in functions:
        facts = inspect(serialized(fn, *avals))  # raises Refused for a target not allowed
        assert bool(facts["custom_calls"]) == ("custom_call" in facts["ops"])
        seen |= set(facts["custom_calls"])
    assert all(t.startswith("lapack_") and t.endswith("_ffi") for t in seen), seen
    assert {"lapack_sgetrf_ffi", "lapack_strsm_ffi", "lapack_spotrf_ffi", "lapack_ssyevd_ffi",
            "lapack_sgesdd_ffi", "lapack_sgeqrf_ffi", "lapack_sgeev_ffi"} <= seen


def test_facts_come_from_the_module_not_its_text() -> None:
    """Names the student chooses (scopes, output keys) end up in the module's text as locations
    and string attributes: they neither add ops nor hide or fake a custom call."""
    def sneaky(x):
        with jax.named_scope("stablehlo.while stablehlo.custom_call @xla_python_cpu_callback"):
            y = x * 2
        return {"stablehlo.case": y, 'call_target_name = "xla_ffi_python_cpu_callback"': y + 1}

    blob = serialized(sneaky, S((3,), F32))
    assert "stablehlo.while" in export.deserialize(bytearray(blob)).mlir_module()
    facts = inspect(blob)
    assert "while" not in facts["ops"] and "case" not in facts["ops"] and facts["custom_calls"] == []
    assert {"multiply", "add"} <= set(facts["ops"])
    facts = inspect(serialized(newton, S((4,), F32)))
    assert "while" in facts["ops"] and facts["in_avals"] == [{"shape": [4], "dtype": "float32", "weak": False}]
    assert "case" in inspect(serialized(switched, S((), jnp.int32), S((3,), F32)))["ops"]


def test_a_module_that_lies_about_its_inputs_is_refused() -> None:
    lying = with_module_text(serialized(lambda x: x + 1, S((3,), F32)), """
module @jit_f {
  func.func public @main(%arg0: tensor<5xf32>) -> (tensor<5xf32>) {
    return %arg0 : tensor<5xf32>
  }
}""")
    with pytest.raises(runtime.Refused, match="does not take and return"):
        inspect(lying)


def test_modules_that_cannot_run_here_are_refused() -> None:
    (n,) = export.symbolic_shape("n")
    with pytest.raises(runtime.Refused, match="symbolic shape"):
        inspect(serialized(lambda x: x * 2, S((n,), F32)))
    with pytest.raises(runtime.Refused, match="exported for cuda, not cpu"):
        inspect(serialized(lambda x: x * 2, S((3,), F32), platforms=("cuda",)))
    with pytest.raises(runtime.Refused, match="cusolver_getrf_ffi"):  # its GPU branch
        inspect(serialized(jnp.linalg.solve, S((3, 3), F32), S((3,), F32), platforms=("cpu", "cuda")))
    assert inspect(serialized(jnp.sin, S((3,), F32), platforms=("cpu", "cuda")))["platforms"] == ["cpu", "cuda"]


def test_the_verifier_sandbox_command(tmp_path: Path, repo_root: Path) -> None:
    """The argv alone, as if this machine had every layer: the verifier's runtime directory
    read-only (not the probe's), no connection file handed over, only the scratch writable."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    sandbox = Sandbox(scratch, POLICY, Isolation(sandboxed=True, layers=list(LAYERS)), runtime_dir=VERIFIER_INSIDE)
    program = [sys.executable, "-I", "-B", str(VERIFIER_INSIDE / "runtime.py")]
    argv = sandbox.wrap(list(program))
    assert argv[-len(program):] == program
    assert argv[3:5] == ["grader-sandbox", ""] and "chown" not in argv[2]
    bw = argv[argv.index("bwrap"):argv.index("setpriv")]
    binds = [(bw[i], Path(bw[i + 1])) for i in range(len(bw) - 2) if bw[i] in ("--bind", "--ro-bind")]
    readonly = {src for option, src in binds if option == "--ro-bind"}
    assert VERIFIER_INSIDE in readonly and KERNEL_INSIDE not in readonly
    assert {src for option, src in binds if option == "--bind"} == {scratch}
    for option, src in binds:
        for secret in ("solutions", "assignments", "tests"):
            assert not (repo_root / secret).resolve().is_relative_to(src.resolve()), (option, src)
    assert "--unshare-net" in bw and "--clearenv" in bw and "--seccomp" in bw


def test_a_kernels_sandbox_command_is_unchanged(tmp_path: Path) -> None:
    """Sandbox.wrap for a kernel still hands over its connection file and binds the probe."""
    connection = str(tmp_path / "connection.json")
    sandbox = Sandbox(tmp_path, POLICY, Isolation(sandboxed=True, layers=list(LAYERS)))
    argv = sandbox.wrap([sys.executable, "-m", "ipykernel_launcher", "-f", connection], connection)
    assert argv[3:5] == ["grader-sandbox", connection] and 'chown 65534:65534 "$1"' in argv[2]
    bw = argv[argv.index("bwrap"):argv.index("setpriv")]
    readonly = {Path(bw[i + 1]) for i in range(len(bw) - 1) if bw[i] == "--ro-bind"}
    assert KERNEL_INSIDE in readonly and VERIFIER_INSIDE not in readonly


# ============================================================================= B. a real verifier

kernel = pytest.mark.kernel


@pytest.fixture(scope="module")
def verifier():
    """One sandboxed verifier shared by the tests that do not kill it on purpose."""
    if not ISOLATION.sandboxed:
        pytest.skip(f"the full sandbox is not available here: {ISOLATION.missing}")
    v = Verifier(POLICY).launch()
    try:
        yield v.wait_ready()
    finally:
        v.close()


RNG = np.random.default_rng(7)


@kernel
def test_modules_run_in_the_sandbox_and_agree_with_numpy(verifier: Verifier) -> None:
    xs = [RNG.uniform(0.1, 100.0, size=4).astype(np.float32) for _ in range(5)]
    pairs = [(RNG.normal(size=3).astype(np.float32), RNG.normal(size=3).astype(np.float32)) for _ in range(4)]
    jobs = [
        VerifierJob(id="newton", module=serialized(newton, S((4,), F32)), calls=[[arr(x)] for x in xs]),
        VerifierJob(id="switch", module=serialized(switched, S((), jnp.int32), S((3,), F32)),
                    calls=[[PyScalar(v=i), arr([1.0, -2.0, 3.0], np.float32)] for i in (0, 1, 2, 7)]),
        VerifierJob(id="pair", module=serialized(pair, S((3,), F32), S((3,), F32)),
                    calls=[[arr(a), arr(b)] for a, b in pairs]),
        VerifierJob(id="inspect", module=serialized(newton, S((4,), F32))),
    ]
    results = verifier.run(jobs, timeout=60)
    assert [r.status for r in results.values()] == ["ok"] * 4, results
    newton_result = results["newton"]
    assert "while" in newton_result.facts.ops and newton_result.facts.fun_name == "newton"
    for x, (value,) in zip(xs, newton_result.values):
        np.testing.assert_allclose(from_wire(value), np.sqrt(x), rtol=1e-5)
    assert "case" in results["switch"].facts.ops
    expected = [np.array([2.0, -1.0, 4.0]), np.array([2.0, -4.0, 6.0]), np.array([-1.0, 2.0, -3.0]),
                np.array([-1.0, 2.0, -3.0])]  # lax.switch clamps the index
    for want, (value,) in zip(expected, results["switch"].values):
        np.testing.assert_array_equal(from_wire(value), want.astype(np.float32))
    for (a, b), (total, dot) in zip(pairs, results["pair"].values):
        np.testing.assert_allclose(from_wire(total), a + b, rtol=1e-6)
        np.testing.assert_allclose(from_wire(dot), np.dot(a, b), rtol=1e-5, atol=1e-6)
    assert [a.shape for a in results["pair"].facts.out_avals] == [[3], []]
    assert results["inspect"].values == [] and results["inspect"].facts.in_avals[0].shape == [4]


@kernel
def test_a_module_calling_lapack_runs_after_modules_that_do_not(verifier: Verifier) -> None:
    """The verifier initialises LAPACK only for a module that calls it (runtime.defer_lapack):
    one that comes after others, in the same process, still gets it."""
    m = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], np.float32)
    v = np.array([1.0, -2.0, 0.5], np.float32)
    jobs = [VerifierJob(id="plain", module=serialized(newton, S((4,), F32)), calls=[[arr(np.ones(4, np.float32))]]),
            VerifierJob(id="solve", module=serialized(jnp.linalg.solve, S((3, 3), F32), S((3,), F32)),
                        calls=[[arr(m), arr(v)]]),
            VerifierJob(id="eigh", module=serialized(lambda a: jnp.linalg.eigh(a)[0], S((3, 3), F32)),
                        calls=[[arr(m)]])]
    results = verifier.run(jobs, timeout=60)
    assert [r.status for r in results.values()] == ["ok"] * 3, results
    assert any(t.startswith("lapack_") for t in results["solve"].facts.custom_calls)
    np.testing.assert_allclose(from_wire(results["solve"].values[0][0]), np.linalg.solve(m, v), rtol=1e-4)
    np.testing.assert_allclose(from_wire(results["eigh"].values[0][0]), np.linalg.eigvalsh(m), rtol=1e-4)


@kernel
def test_unused_inputs_keywords_and_several_platforms(verifier: Verifier) -> None:
    """Flat inputs follow `in_avals` whatever the module keeps: an unused one, a keyword one;
    a module exported for cpu and cuda takes its platform index inside `Exported.call`."""
    x = np.array([1.0, 2.0, 3.0], np.float32)
    jobs = [
        VerifierJob(id="unused", module=serialized(lambda a, b: a * 2.0, S((3,), F32), S((2,), F32)),
                    calls=[[arr(x), arr([5.0, 6.0], np.float32)]]),
        VerifierJob(id="keyword", module=bytes(export.export(jax.jit(lambda a, k=2.0: a * k))(
            S((3,), F32), k=S((), F32)).serialize()), calls=[[arr(x), PyScalar(v=3.0)]]),
        VerifierJob(id="platforms", module=serialized(jnp.sin, S((3,), F32), platforms=("cpu", "cuda")),
                    calls=[[arr(x)]]),
    ]
    results = verifier.run(jobs, timeout=60)
    assert [r.status for r in results.values()] == ["ok"] * 3, results
    assert results["unused"].facts.in_avals[1].shape == [2]
    np.testing.assert_allclose(from_wire(results["unused"].values[0][0]), x * 2)
    assert "'k'" in results["keyword"].facts.in_tree
    np.testing.assert_allclose(from_wire(results["keyword"].values[0][0]), x * 3)
    np.testing.assert_allclose(from_wire(results["platforms"].values[0][0]), np.sin(x), rtol=1e-6)


@kernel
def test_bad_jobs_cost_their_own_job_only(verifier: Verifier) -> None:
    process = verifier.process
    good = serialized(lambda x: x * 2, S((2,), F32))
    jobs = [
        VerifierJob(id="garbage", module=os.urandom(64) + b"\x00" * 64, calls=[[arr([1.0, 2.0], np.float32)]]),
        VerifierJob(id="callback", module=callback_module(), calls=[[arr([1.0, 2.0, 3.0], np.float32)]]),
        VerifierJob(id="wrong-shape", module=good, calls=[[arr([1.0, 2.0, 3.0], np.float32)]]),
        VerifierJob(id="wrong-dtype", module=good, calls=[[ArrayValue(dtype="complex64", shape=[2],
                                                                     data=[[1.0, 0.0], [2.0, 0.0]])]]),
        VerifierJob(id="too-few", module=good, calls=[[]]),
        VerifierJob(id="huge-output", module=serialized(lambda x: jnp.zeros(200_000) + x, S((), F32)),
                    calls=[[PyScalar(v=1.0)]]),
        VerifierJob(id="huge-outputs", module=serialized(lambda x: jnp.zeros(100_000) + x, S((), F32)),
                    calls=[[PyScalar(v=1.0)]] * 4),
        VerifierJob(id="good", module=good, calls=[[arr([1.0, 2.0], np.float64)], [arr([3, 4], np.int32)]]),
    ]
    results = verifier.run(jobs, timeout=60)
    assert results["garbage"].status == "error" and "deserialized" in results["garbage"].detail
    callback = results["callback"]
    assert callback.status == "refused" and "xla_ffi_python_cpu_callback" in callback.detail
    assert callback.facts.custom_calls == ["xla_ffi_python_cpu_callback"] and callback.values is None
    assert results["wrong-shape"].status == "error" and "shape [3]" in results["wrong-shape"].detail
    assert results["wrong-dtype"].status == "error" and "complex64" in results["wrong-dtype"].detail
    assert results["too-few"].status == "error" and "0 inputs" in results["too-few"].detail
    assert results["huge-output"].status == "error" and "over 100,000 elements" in results["huge-output"].detail
    assert results["huge-outputs"].status == "error" and "over 350,000 values" in results["huge-outputs"].detail
    assert results["good"].status == "ok"
    assert [from_wire(v[0]).tolist() for v in results["good"].values] == [[2.0, 4.0], [6.0, 8.0]]
    assert verifier.process is process and process.alive()  # none of them killed it


@kernel
@full_sandbox
def test_a_hang_is_a_timeout_and_the_next_job_gets_a_fresh_verifier() -> None:
    forever = serialized(lambda x: lax.while_loop(lambda c: True, lambda c: c + 1.0, x), S((), F32))
    quick = serialized(lambda x: x + 1.0, S((2,), F32))
    with Verifier(POLICY) as v:
        first = v.wait_ready().process
        results = v.run([VerifierJob(id="forever", module=forever, calls=[[PyScalar(v=1.0)]]),
                         VerifierJob(id="quick", module=quick, calls=[[arr([1.0, 2.0], np.float32)]])],
                        timeout=6.0)
        assert results["forever"].status == "timeout"
        assert 2.9 < results["forever"].seconds < 4.5, results["forever"]  # its share: 6 s / 2 jobs
        assert results["quick"].status == "ok" and from_wire(results["quick"].values[0][0]).tolist() == [2.0, 3.0]
        assert v.restarts == 1 and v.process is not first and not first.alive()


@kernel
@full_sandbox
def test_a_function_whose_module_hung_is_not_run_again_in_that_submission() -> None:
    """The kernel calls a function that hung no more; the verifier runs its later modules no more
    either (an endless loop costs the student one limit, not one per check), and still reads their
    facts and runs every other function's, also a module that is another function's too."""
    forever = serialized(lambda x: lax.while_loop(lambda c: True, lambda c: c + 1.0, x), S((), F32))
    forever_too = serialized(lambda x: lax.while_loop(lambda c: True, lambda c: c + 2.0, x), S((), F32))
    quick = serialized(lambda x: x + 1.0, S((2,), F32))
    two = [[arr([1.0, 2.0], np.float32)]]
    with Verifier(POLICY) as v:
        visible = v.run([VerifierJob(id="visible", module=forever, calls=[[PyScalar(v=1.0)]],
                                     functions=["newton_sqrt"])], timeout=2.0)
        assert visible["visible"].status == "timeout"
        assert visible["visible"].detail == "still running after 2 s"
        hidden = v.run([VerifierJob(id="hidden", module=forever_too, calls=[[PyScalar(v=2.0)]],
                                    functions=["newton_sqrt"]),
                        VerifierJob(id="facts", module=forever_too, calls=[], functions=["newton_sqrt"]),
                        VerifierJob(id="other", module=quick, calls=two, functions=["tax"]),
                        VerifierJob(id="shared", module=quick, calls=two, functions=["newton_sqrt", "tax"])],
                       timeout=8.0)
        assert hidden["hidden"].status == "timeout" and hidden["hidden"].seconds == 0.0  # never sent

        assert hidden["hidden"].detail == "still running after 2 s in an earlier check; not run again"
        assert hidden["facts"].status == "ok" and hidden["facts"].facts is not None
        assert hidden["other"].status == "ok" and hidden["shared"].status == "ok"
        assert v.restarts == 1  # the visible module's hang only: the hidden one killed no verifier


@kernel
@full_sandbox
def test_a_memory_bomb_costs_its_own_job() -> None:
    n = 2**15  # an outer product of 4 GiB in a 1 GiB sandbox
    bomb = serialized(lambda x: (jnp.outer(x, x) + 1.0).cumsum(axis=0)[-1, :3], S((n,), F32))
    quick = serialized(lambda x: x + 1.0, S((2,), F32))
    with Verifier(SandboxPolicy(memory_bytes=2**30)) as v:
        results = v.run([VerifierJob(id="bomb", module=bomb, calls=[[arr(np.ones(n, np.float32))]]),
                         VerifierJob(id="quick", module=quick, calls=[[arr([1.0, 2.0], np.float32)]])],
                        timeout=60.0)
        assert results["bomb"].status in ("crashed", "error"), results["bomb"]
        if results["bomb"].status == "crashed":
            assert "memory limit" in results["bomb"].detail
        assert results["quick"].status == "ok"


LOOK_AROUND = r"""
import errno, json, os, socket, sys
def attempt(action):
    try:
        action()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, type(exc).__name__)
    return "ok"
def connect(host, port):
    with socket.create_connection((host, port), timeout=2):
        pass
def read(path):
    with open(path, "rb") as f:
        f.read(1)
params = json.loads(sys.argv[1])
facts = {"uid": os.getuid(), "env": sorted(os.environ), "cwd": os.getcwd(),
         "seccomp": [l.split()[1] for l in open("/proc/self/status") if l.startswith("Seccomp:")][0],
         "connect": attempt(lambda: connect("127.0.0.1", params["port"])),
         "runtime": attempt(lambda: read(params["runtime"]))}
for name in params["secrets"]:
    facts[name] = attempt(lambda: read(name))
facts["write_repo"] = attempt(lambda: open(params["repo"] + "/planted", "w"))
import numpy
facts["numpy"] = numpy.__version__
print(json.dumps(facts), flush=True)
"""


@kernel
@full_sandbox
def test_inside_the_verifier_sandbox(repo_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same sandbox, running a program that looks around: no network (a server listens on
    the host's loopback), no solutions, assignments or tests, no grader environment."""
    monkeypatch.setenv("GRADER_SECRET_TOKEN", "do-not-leak")
    secrets = [str(p) for p in (repo_root / "solutions" / "ch2-jit.py", repo_root / "assignments",
                                repo_root / "tests" / "conftest.py", repo_root / "grader" / "pipeline.py")]
    with socket.create_server(("127.0.0.1", 0)) as server:
        params = {"port": server.getsockname()[1], "runtime": str(VERIFIER_INSIDE / "runtime.py"),
                  "secrets": secrets, "repo": str(repo_root)}
        proc = VerifierProcess(POLICY, [sys.executable, "-I", "-c", LOOK_AROUND, json.dumps(params)])
        try:
            facts = json.loads(proc.readline(time.monotonic() + 60))
        finally:
            proc.kill()
    assert facts["uid"] == 65534 and facts["seccomp"] == "2"
    assert facts["connect"] in ("ENETUNREACH", "ECONNREFUSED", "EHOSTUNREACH"), facts
    assert facts["runtime"] == "ok" and facts["numpy"] == np.__version__
    for secret in secrets:
        assert facts[secret] in ("ENOENT", "EACCES"), (secret, facts[secret])
    assert facts["write_repo"] in ("ENOENT", "EACCES", "EROFS")
    assert "GRADER_SECRET_TOKEN" not in facts["env"]
    assert facts["cwd"] == str(proc.scratch)


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


@kernel
@full_sandbox
def test_nothing_remains_after_close() -> None:
    v = Verifier(POLICY).launch().wait_ready()
    proc = v.process
    groups = [proc.sandbox.cgroup(c) for c in ("memory", "pids")]
    pids = [int(p) for p in (groups[0] / "cgroup.procs").read_text().split()]
    assert len(pids) >= 3  # bwrap, its init, the runtime
    assert str(proc.scratch) in Path("/proc/self/mounts").read_text()
    v.close()
    deadline = time.monotonic() + 5
    while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(pid) for pid in pids)
    assert not any(g.exists() for g in groups)
    assert str(proc.scratch) not in Path("/proc/self/mounts").read_text()
    assert not proc.scratch.exists()
    v.close()  # twice is fine
    assert v.process is None


@kernel
def test_without_a_sandbox() -> None:
    """The --no-sandbox path: the same runtime, a plain process (still a clean environment)."""
    with Verifier(None) as v:
        results = v.run([VerifierJob(id="newton", module=serialized(newton, S((2,), F32)),
                                     calls=[[arr([4.0, 9.0], np.float32)]])], timeout=60)
        assert results["newton"].status == "ok", results
        np.testing.assert_allclose(from_wire(results["newton"].values[0][0]), [2.0, 3.0], rtol=1e-6)
        assert v.peak_memory_bytes() is None and v.jax_version == jax.__version__


@kernel
@full_sandbox
def test_boot_and_newton_timings() -> None:
    """Measured (printed with -s): launch to ready, then 8 Newton calls (deserialize, compile,
    run), and the sandbox's peak memory. The bounds are loose: this is a shared machine."""
    blob = serialized(newton, S((16,), F32))
    calls = [[arr(RNG.uniform(0.1, 100.0, size=16).astype(np.float32))] for _ in range(8)]
    with Verifier(POLICY) as v:
        v.wait_ready()
        started = time.monotonic()
        result = v.run([VerifierJob(id="newton", module=blob, calls=calls)], timeout=60)["newton"]
        seconds = time.monotonic() - started
        peak = v.peak_memory_bytes()
    assert result.status == "ok"
    print(f"\nverifier boot {v.boot_seconds:.2f} s; Newton x8 {seconds * 1000:.0f} ms; "
          f"peak memory {peak / 2**20:.0f} MiB")
    assert v.boot_seconds < 30 and seconds < 10 and peak < POLICY.memory_bytes


# ----------------------------------------------------------------------------- a fake verifier

FAKE = textwrap.dedent(r"""
    import json, os, sys, time
    mode = sys.argv[1]
    if mode == "never-ready":
        time.sleep(60)
    print(json.dumps({"ready": True, "jax": "fake"}), flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        if mode == "huge":
            chunk = "x" * 2**20
            for _ in range(64):
                sys.stdout.write(chunk)
            sys.stdout.flush()
            time.sleep(60)
        elif mode == "other-id":
            print(json.dumps({"id": "someone-else", "status": "error", "facts": None, "values": None,
                              "detail": "x"}), flush=True)
        elif mode == "dies":
            os._exit(3)
        elif mode == "lies":
            print(json.dumps({"id": job["id"], "status": "ok", "facts": None, "values": [], "detail": None}),
                  flush=True)
        elif mode == "bombs":  # a job whose id says bomb kills it; the others are answered, pings too
            if "ping" in job:
                print(json.dumps({"pong": job["ping"]}), flush=True)
            elif job["id"].startswith("bomb"):
                os._exit(137)
            else:
                print(json.dumps({"id": job["id"], "status": "error", "facts": None, "values": None,
                                  "detail": "answered"}), flush=True)
""")


def fake(mode: str, **kwargs) -> Verifier:
    return Verifier(None, program=[sys.executable, "-I", "-c", FAKE, mode], **kwargs)


@kernel
@pytest.mark.parametrize("mode, detail", [
    ("huge", "a line over 16 MiB"),
    ("other-id", "the answer of another job"),
    ("dies", "the verifier died (exit status 3)"),
    ("lies", "without facts or values"),
])
def test_a_misbehaving_verifier_crashes_its_job(mode: str, detail: str) -> None:
    with fake(mode) as v:
        results = v.run([job(id="a"), job(id="b")], timeout=20)
    for result in results.values():
        assert result.status == "crashed" and detail in result.detail, result
    assert v.restarts == 1


@kernel
def test_restarts_are_bounded() -> None:
    with fake("dies", max_restarts=1) as v:
        results = v.run([job(id=str(i)) for i in range(4)], timeout=20)
    assert [r.status for r in results.values()] == ["crashed"] * 4
    assert "died" in results["1"].detail and "not run" in results["2"].detail and "not run" in results["3"].detail
    assert v.restarts == 1


@kernel
def test_the_restarts_are_each_functions_own() -> None:
    """Memory bombs in one function's programs use up that function's restarts only: the jobs of
    the functions that were right still run (before, the budget was the submission's and their
    hidden checks were 'not run')."""
    bombs = [VerifierJob(id=f"bomb-{i}", module=b"x", functions=["tax_vectorized"]) for i in range(4)]
    right = [VerifierJob(id=f"right-{name}", module=b"x", functions=[name]) for name in ("tax_switch", "newton_sqrt")]
    shared = VerifierJob(id="right-shared", module=b"x", functions=["tax_vectorized", "tax_switch"])
    with fake("bombs", max_restarts=1) as v:
        results = v.run([*bombs, *right, shared], timeout=20)
    assert [results[j.id].status for j in bombs] == ["crashed"] * 4
    assert "died" in results["bomb-1"].detail and "not run" in results["bomb-2"].detail
    assert "`tax_vectorized`" in results["bomb-3"].detail and "one function's" in results["bomb-3"].detail
    assert [results[j.id].detail for j in [*right, shared]] == ["answered"] * 3  # they ran
    assert v.kills == {"tax_vectorized": 2} and v.restarts == 2


@kernel
def test_a_submission_starts_at_most_max_starts_verifiers() -> None:
    jobs = [VerifierJob(id=f"bomb-{i}", module=b"x", functions=[f"f{i}"]) for i in range(4)]
    with fake("bombs", max_starts=2) as v:
        results = v.run(jobs, timeout=20)
    assert ["died" in results[j.id].detail for j in jobs] == [True, True, False, False]
    assert "this submission's programs crashed or hung the verifier 2 times" in results["bomb-2"].detail


@kernel
def test_a_verifier_that_does_not_boot_is_the_graders_fault() -> None:
    v = fake("never-ready", boot_timeout=1.0)
    started = time.monotonic()
    with pytest.raises(VerifierStartFailed, match="not ready after 1 s") as failed:
        v.run([job()], timeout=5)
    assert time.monotonic() - started < 5 and failed.value.exit_code == 3
    assert v.process is None  # killed
    with pytest.raises(ValueError, match="unique"):
        v.run([job(), job()], timeout=5)
