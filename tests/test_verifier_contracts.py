"""Modules the verifier must refuse before it runs them, and results it must not use.

A. Without a process: every linear-algebra call JAX emits passes its contract
   (grader/verifier/inside/contracts.py); a LAPACK call whose shapes, dtypes, layouts, aliases or
   settings lie is refused, as is a target without a contract; unkeyed random numbers and
   calling conventions this JAX does not implement are refused, keyed ones are not.
B. With a real verifier (marked `kernel`): the heap overflow and the leak of unwritten memory
   found by a red team are refused without running, in the sandbox; a verifier that writes a
   result and then dies (or stops answering) gives "crashed", never its values.
C. End to end: a notebook whose own lowering rule emits a lying LAPACK call gets one sentence
   naming its function, and no number from the verifier's memory.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

from grader import GradeOptions
from grader.judging.local import LocalVerifier
from grader.sandbox.layers import SandboxPolicy, available
from grader.values import to_wire
from grader.verifier.client import Verifier
from grader.verifier.inside import runtime
from grader.verifier.protocol import VerifierJob

S = jax.ShapeDtypeStruct
F32 = jnp.float32
contracts = runtime.contracts  # as the verifier loads it (by path)


def serialized(fn, *avals, **kwargs) -> bytes:
    """`fn` exported, its outputs as a flat tuple (jnp.linalg's named tuples do not serialize)."""
    def flat(*args):
        return tuple(jax.tree_util.tree_leaves(fn(*args)))
    return bytes(export.export(jax.jit(flat), **kwargs)(*avals).serialize())


def inspect(blob: bytes) -> dict:
    return runtime.inspect_module(export.deserialize(bytearray(blob)))


def with_text(text: str, in_avals: list, out_aval) -> bytes:
    """A serialized module whose StableHLO is `text` (taking every input, returning one array):
    what a hostile kernel can send, since nothing in jax.export checks a custom call's shapes."""
    from jax._src.export._export import _module_to_bytecode
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    base = export.export(jax.jit(lambda *xs: jnp.zeros(out_aval.shape, out_aval.dtype)))(*in_avals)
    with mlir.make_ir_context():
        blob = _module_to_bytecode(ir.Module.parse(text))
    exported = dataclasses.replace(base, mlir_module_serialized=blob, module_kept_var_idx=tuple(range(len(in_avals))))
    return bytes(exported.serialize())


def _mlir_type(aval) -> str:
    names = {"float32": "f32", "float64": "f64", "int32": "i32", "complex64": "complex<f32>"}
    return f"tensor<{''.join(f'{d}x' for d in aval.shape)}{names[str(np.dtype(aval.dtype))]}>"


def one_call(target: str, operands: list, results: list, attributes: str, returns: int = 0) -> bytes:
    """A module that makes one custom call on its inputs and returns one of its results."""
    ins = ", ".join(f"%arg{i}: {_mlir_type(a)}" for i, a in enumerate(operands))
    args = ", ".join(f"%arg{i}" for i in range(len(operands)))
    out = _mlir_type(results[returns])
    many = len(results) > 1
    text = f"""
module @jit_f {{
  func.func public @main({ins}) -> ({out}) {{
    %0{f':{len(results)}' if many else ''} = stablehlo.custom_call @{target}({args}) {{{attributes}}} :
        ({', '.join(_mlir_type(a) for a in operands)}) -> ({', '.join(_mlir_type(r) for r in results)})
    return %0{f'#{returns}' if many else ''} : {out}
  }}
}}"""
    return with_text(text, operands, results[returns])


def layouts(*ranks: int, matrix: int = 2) -> str:
    """Layouts as JAX writes them: column-major for matrices, the default for the rest."""
    def one(r: int) -> str:
        order = [r - 2, r - 1, *range(r - 3, -1, -1)] if r == matrix else list(range(r - 1, -1, -1))
        return f"dense<{order if len(order) != 1 else order[0]}> : tensor<{r}xindex>".replace("[]", "")
    return "[" + ", ".join(one(r) for r in ranks) + "]"


GETRF_OK = ("mhlo.backend_config = {}, operand_layouts = " + layouts(2) + ", result_layouts = "
            + layouts(2, 1, 0) + ", output_operand_aliases = [#stablehlo.output_operand_alias<"
            "output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>]")
M3 = S((3, 3), F32)
PIVOTS = S((3,), jnp.int32)
INFO = S((), jnp.int32)


def getrf(results: list | None = None, attributes: str = GETRF_OK, operand=M3, returns: int = 0) -> bytes:
    return one_call("lapack_sgetrf_ffi", [operand], results or [operand, PIVOTS, INFO], attributes, returns)


NO_ALIAS = GETRF_OK.split(", output_operand_aliases")[0]  # MLIR checks an alias's shapes; nothing else does
LEAK = getrf([S((64, 64), F32), PIVOTS, INFO], NO_ALIAS)
"""The lu result declared 64x64 for a 3x3 matrix: the kernel writes 9 elements, the rest is
whatever the verifier's memory held."""
OVERFLOW = getrf([S((300, 300), F32), S((1,), jnp.int32), INFO], operand=S((300, 300), F32), returns=1)
"""300 pivots written into a buffer of one: the verifier's heap overflows (malloc aborts)."""
WRONG_SHAPES = "linear-algebra routine, lapack_sgetrf_ffi, with the wrong shapes"


# ============================================================================= A. no process


HONEST = [
    ("solve", jnp.linalg.solve, S((2, 3, 3), F32), S((2, 3, 1), F32)),
    ("lu wide", jax.scipy.linalg.lu, S((3, 5), F32)),
    ("lu tall", jax.scipy.linalg.lu_factor, S((5, 3), F32)),
    ("cholesky", jnp.linalg.cholesky, S((2, 4, 4), F32)),
    ("qr reduced", jnp.linalg.qr, S((5, 3), F32)),
    ("qr complete", lambda a: jnp.linalg.qr(a, mode="complete"), S((5, 3), F32)),
    ("qr wide", jnp.linalg.qr, S((3, 5), F32)),
    ("eigh", jnp.linalg.eigh, S((3, 4, 4), F32)),
    ("eigvalsh", jnp.linalg.eigvalsh, S((4, 4), F32)),
    ("svd", jnp.linalg.svd, S((4, 3), F32)),
    ("svd reduced", lambda a: jnp.linalg.svd(a, full_matrices=False), S((2, 3, 5), F32)),
    ("svd values", lambda a: jnp.linalg.svd(a, compute_uv=False), S((4, 3), F32)),
    ("svd values reduced", lambda a: jnp.linalg.svd(a, full_matrices=False, compute_uv=False), S((4, 3), F32)),
    ("eig", jnp.linalg.eig, S((2, 3, 3), F32)),
    ("eigvals", jnp.linalg.eigvals, S((3, 3), F32)),
    ("schur", jax.scipy.linalg.schur, S((3, 3), F32)),
    ("hessenberg", jax.scipy.linalg.hessenberg, S((4, 4), F32)),
    ("triangular right", lambda a, b: jax.lax.linalg.triangular_solve(a, b, left_side=False), S((3, 3), F32),
     S((2, 3), F32)),
    ("triangular transposed", lambda a, b: jax.scipy.linalg.solve_triangular(a, b, trans=2, unit_diagonal=True),
     S((3, 3), F32), S((3,), F32)),
    ("tridiagonal", jax.lax.linalg.tridiagonal, S((4, 4), F32)),
    ("tridiagonal solve", jax.lax.linalg.tridiagonal_solve, S((2, 4), F32), S((2, 4), F32), S((2, 4), F32),
     S((2, 4, 3), F32)),
    ("inv, det, pinv, lstsq", lambda a, b: (jnp.linalg.inv(a), jnp.linalg.det(a), jnp.linalg.pinv(a),
                                           jnp.linalg.lstsq(a, b)[0]), S((3, 3), F32), S((3,), F32)),
]


@pytest.mark.parametrize("honest", HONEST, ids=[h[0] for h in HONEST])
def test_what_jax_emits_meets_the_contracts(honest) -> None:
    _, fn, *avals = honest
    facts = inspect(serialized(fn, *avals))  # raises Refused for a call off its contract
    assert any(t.startswith("lapack_") for t in facts["custom_calls"]), facts["custom_calls"]


@pytest.mark.parametrize("dtype", ["float64", "complex64", "complex128"])
def test_every_dtype_meets_the_contracts(dtype) -> None:
    with jax.enable_x64(True):
        seen = _linear_algebra_targets(dtype)
    letter = {"float64": "d", "complex64": "c", "complex128": "z"}[dtype]
    assert {t[7] for t in seen} == {letter} and len(seen) == 12, seen  # every routine


def _linear_algebra_targets(dtype: str) -> set[str]:
    m, v = S((2, 4, 4), dtype), S((2, 4, 2), dtype)
    seen = set()
    for fn, *avals in [(jnp.linalg.solve, m, v), (jnp.linalg.cholesky, m), (jnp.linalg.eigh, m),
                       (jnp.linalg.qr, S((5, 3), dtype)), (jnp.linalg.svd, S((3, 5), dtype)),
                       (jnp.linalg.eig, m), (jax.scipy.linalg.schur, S((3, 3), dtype)),
                       (jax.scipy.linalg.hessenberg, S((3, 3), dtype)), (jax.lax.linalg.tridiagonal, S((3, 3), dtype)),
                       (jax.lax.linalg.tridiagonal_solve, S((4,), dtype), S((4,), dtype), S((4,), dtype),
                        S((4, 1), dtype))]:
        seen |= set(inspect(serialized(fn, *avals))["custom_calls"])
    return seen


def test_the_honest_baselines_of_the_attacks_pass() -> None:
    """The hand-written call the lies below start from is the one JAX emits."""
    facts = inspect(getrf())
    assert facts["custom_calls"] == ["lapack_sgetrf_ffi"]


ALIAS_1 = GETRF_OK.replace("operand_index = 0", "operand_index = 0, operand_tuple_indices = [], "
                           "output_tuple_indices = [1]")


@pytest.mark.parametrize("blob, why", [
    (LEAK, "result 1 is f32[64,64], not f32[3,3]"),
    (OVERFLOW, "result 2 is i32[1], not i32[300]"),
    (getrf([M3, S((3,), F32), INFO]), "result 2 is f32[3], not i32[3]"),
    (getrf([M3, PIVOTS], GETRF_OK.replace(layouts(2, 1, 0), layouts(2, 1))), "2 results, not 3"),
    (getrf([M3, PIVOTS, INFO, INFO], GETRF_OK.replace(layouts(2, 1, 0), layouts(2, 1, 0, 0))), "4 results, not 3"),
    (one_call("lapack_sgetrf_ffi", [S((3, 3), jnp.complex64)], [S((3, 3), jnp.complex64), PIVOTS, INFO],
              GETRF_OK), "operand 1 is complex<f32>[3,3], not f32[3,3]"),
    (getrf(attributes=GETRF_OK.replace("operand_layouts = [dense<[0, 1]>", "operand_layouts = [dense<[1, 0]>")),
     "operand layouts"),
    (getrf(attributes="mhlo.backend_config = {}, output_operand_aliases = " + GETRF_OK.split("aliases = ")[1]),
     "operand layouts"),  # none: XLA's default, row-major
    (getrf(attributes=GETRF_OK.split(", output_operand_aliases")[0]), "alias"),
    (getrf(attributes=GETRF_OK.replace("mhlo.backend_config = {}", "mhlo.backend_config = {uplo = 76 : ui8}")),
     "settings"),
    (getrf(attributes=GETRF_OK.replace("mhlo.backend_config = {}, ", "")), "no settings"),
    (getrf(attributes=GETRF_OK + ", api_version = 4 : i32"), "calling convention"),
    (getrf(attributes=GETRF_OK + ", has_side_effect = true"), "calling convention"),
    (getrf(attributes=GETRF_OK + ", indices_of_shape_operands = dense<0> : tensor<1xi64>"), "unexpected attributes"),
    (getrf(attributes=GETRF_OK + ', mhlo.frontend_attributes = {num_batch_dims = "7"}'), "frontend"),
])
def test_a_lapack_call_that_lies_is_refused(blob: bytes, why: str) -> None:
    with pytest.raises(runtime.Refused, match=WRONG_SHAPES) as refused:
        inspect(blob)
    assert why in refused.value.args[0], refused.value.args[0]
    assert refused.value.args[1]["custom_calls"] == ["lapack_sgetrf_ffi"]  # facts for the structure checks


def _call(target: str, operands, results, config=(), aliases=((0, 0),), rank: int = 2) -> object:
    """A CustomCall as JAX would write it for these arrays and settings (then edited by a test)."""
    def tensors(avals):
        return tuple(contracts.Tensor(tuple(a.shape), {"float32": "f32", "int32": "i32"}[str(np.dtype(a.dtype))])
                     for a in avals)
    ops, res = tensors(operands), tensors(results)
    single = len(res) == 1

    def lay(xs):
        return tuple(tuple([r - 2, r - 1, *range(r - 3, -1, -1)]) if r == rank else tuple(range(r - 1, -1, -1))
                     for r in (len(x.shape) for x in xs))
    return contracts.CustomCall(
        target=target, operands=ops, results=res,
        attributes=frozenset({"call_target_name", "mhlo.backend_config", "operand_layouts", "result_layouts",
                              "output_operand_aliases"}),
        operand_layouts=lay(ops), result_layouts=lay(res),
        aliases=tuple(contracts.Alias(() if single else (r,), o) for r, o in aliases),
        config=tuple(sorted(config)))


def ui8(name: str, char: str) -> tuple:
    return (name, "ui8", ord(char))


C3, M34 = S((3, 3), F32), S((3, 4), F32)
TRSM = ("lapack_strsm_ffi", [C3, M34], [M34],
        (ui8("diag", "N"), ui8("side", "L"), ui8("trans_x", "N"), ui8("uplo", "L")), ((0, 1),))
GEHRD = ("lapack_sgehrd_ffi", [C3], [C3, S((2,), F32), INFO], (("high", "i32", 3), ("low", "i32", 1)))
GESDD = ("lapack_sgesdd_ffi", [M34], [M34, S((3,), F32), S((3, 3), F32), S((3, 4), F32), INFO], (ui8("mode", "S"),))
ORGQR = ("lapack_sorgqr_ffi", [S((4, 3), F32), S((3,), F32)], [S((4, 3), F32)], (), ((0, 0),))
SYEVD = ("lapack_ssyevd_ffi", [C3], [C3, S((3,), F32), INFO], (ui8("mode", "V"), ui8("uplo", "L")))


@pytest.mark.parametrize("honest, edit, why", [
    (TRSM, lambda c: dataclasses.replace(c, config=(ui8("diag", "N"), ui8("side", "R"), ui8("trans_x", "N"),
                                                        ui8("uplo", "L"))), "operand 1 is f32[3,3], not f32[4,4]"),
    (TRSM, lambda c: dataclasses.replace(c, config=(ui8("diag", "N"), ui8("side", "L"), ui8("trans_x", "X"),
                                                        ui8("uplo", "L"))), "setting trans_x"),
    (GEHRD, lambda c: dataclasses.replace(c, config=(("high", "i32", 300), ("low", "i32", 1))), "setting high"),
    (GEHRD, lambda c: dataclasses.replace(c, config=(("high", "ui8", 3), ("low", "i32", 1))), "setting high"),
    (GESDD, lambda c: dataclasses.replace(c, config=(ui8("mode", "A"),)), "result 4 is f32[3,4], not f32[4,4]"),
    (ORGQR, lambda c: dataclasses.replace(c, operands=(c.operands[0], contracts.Tensor((5,), "f32"))), "reflectors"),
    (SYEVD, lambda c: dataclasses.replace(c, operands=(contracts.Tensor((2, 3, 3), "f32"),)), "result 1"),
])
def test_each_routine_s_contract_reads_its_settings(honest, edit, why) -> None:
    target, operands, results, config, *aliases = honest
    call = _call(target, operands, results, config, *aliases)
    contracts.check(call)  # the honest call passes
    with pytest.raises(contracts.Mismatch) as mismatch:
        contracts.check(edit(call))
    assert why in str(mismatch.value), str(mismatch.value)


def test_every_allowed_target_has_a_contract() -> None:
    """The allow-list is the targets with a contract: a target without one is never run."""
    from jax._src.export import _export

    assert runtime.ALLOWED_CUSTOM_CALLS == contracts.ALLOWED
    assert set(_export._CPU_FFI_KERNELS) == contracts.LAPACK_TARGETS
    with pytest.raises(runtime.Refused, match="allow-list: shape_assertion"):
        runtime.check_module({}, {"stablehlo.custom_call"}, {"shape_assertion"}, [])
    fake = dataclasses.replace(_call(*GEHRD), target="lapack_sgesvd_ffi")
    with pytest.raises(contracts.Mismatch, match="no contract"):
        contracts.check(fake)


def test_an_annotation_must_be_the_identity() -> None:
    vec = S((4,), F32)
    ok = one_call("Sharding", [vec], [vec], 'mhlo.sharding = "{replicated}"')
    assert inspect(ok)["custom_calls"] == ["Sharding"]
    for lie in (one_call("Sharding", [vec], [S((400,), F32)], 'mhlo.sharding = "{replicated}"'),
                one_call("SPMDFullToShardShape", [vec], [S((4,), jnp.int32)], ""),
                one_call("annotate_device_placement", [vec], [vec], "operand_layouts = [dense<0> : tensor<1xindex>], "
                                                                   "result_layouts = [dense<0> : tensor<1xindex>]")):
        with pytest.raises(runtime.Refused, match="annotation .* with the wrong shapes"):
            inspect(lie)


RNG_MLIR = """
module @jit_f {
  func.func public @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>) {
    %lo = stablehlo.constant dense<0.0> : tensor<f32>
    %hi = stablehlo.constant dense<1.0> : tensor<f32>
    %shape = stablehlo.constant dense<[4]> : tensor<1xi64>
    %r = stablehlo.rng %lo, %hi, %shape, distribution = UNIFORM : (tensor<f32>, tensor<f32>, tensor<1xi64>) -> tensor<4xf32>
    %s = stablehlo.add %arg0, %r : tensor<4xf32>
    return %s : tensor<4xf32>
  }
}"""
V4 = S((4,), F32)


def test_unkeyed_random_numbers_are_refused() -> None:
    """XLA draws stablehlo.rng from a state of its own, another one each run: a regrade of the
    same submission on the same seed gave 100 and then 96."""
    blob = with_text(RNG_MLIR, [V4], V4)
    x = np.zeros(4, np.float32)
    module = export.deserialize(bytearray(blob))
    assert not np.array_equal(module.call(x), module.call(x))  # the attack: two runs, two answers
    with pytest.raises(runtime.Refused, match=r"random numbers without a key \(stablehlo.rng\)"):
        inspect(blob)


KEYED = [
    ("threefry key passed in", lambda k, x: x + jax.random.normal(jax.random.wrap_key_data(k), x.shape),
     S((2,), jnp.uint32)),
    ("threefry key from a constant seed", lambda k, x: x + jax.random.uniform(jax.random.key(0), x.shape) + k[0],
     S((2,), jnp.uint32)),
    ("rbg key passed in", lambda k, x: x + jax.random.normal(jax.random.wrap_key_data(k, impl="rbg"), x.shape),
     S((4,), jnp.uint32)),
    ("rbg key from a constant seed", lambda k, x: x + jax.random.normal(jax.random.key(7, impl="rbg"), x.shape)
     + k[0], S((4,), jnp.uint32)),
]


@pytest.mark.parametrize("name, fn, key", KEYED, ids=[k[0] for k in KEYED])
def test_random_numbers_from_a_key_pass_and_repeat(name, fn, key) -> None:
    """jax.random with a key: threefry is arithmetic, rbg is rng_bit_generator on the key's
    state; both are pure functions of the key, so a regrade gives the same values."""
    blob = serialized(fn, key, V4)
    inspect(blob)
    k = to_wire(np.arange(key.shape[0], dtype=np.uint32))
    job = VerifierJob(id="r", module=blob, calls=[[k, to_wire(np.zeros(4, np.float32))]] * 2)
    first = LocalVerifier().run([job], timeout=60)["r"]
    again = LocalVerifier().run([job], timeout=60)["r"]
    assert first.status == "ok", first.detail
    assert first.values == again.values and first.values[0] == first.values[1]


def with_convention(blob: bytes, version: int) -> bytes:
    exported = export.deserialize(bytearray(blob))
    return bytes(dataclasses.replace(exported, calling_convention_version=version).serialize())


def test_calling_conventions_this_jax_does_not_run_are_refused() -> None:
    from jax._src.export import _export

    blob = serialized(jnp.sin, V4)
    low = _export.minimum_supported_calling_convention_version
    high = _export.maximum_supported_calling_convention_version
    for version in range(low, high + 1):
        assert inspect(with_convention(blob, version))["custom_calls"] == []
    for version in (1, low - 1, high + 1, 99):
        lie = with_convention(blob, version)
        assert export.deserialize(bytearray(lie)).calling_convention_version == version  # JAX reads it as is
        with pytest.raises(runtime.Refused, match=f"calling convention version {version}; .* {low} to {high}"):
            inspect(lie)


# ============================================================================= B. a real verifier

kernel = pytest.mark.kernel
ISOLATION = available()


@kernel
def test_the_red_team_s_modules_never_run_in_the_verifier() -> None:
    if not ISOLATION.sandboxed:
        pytest.skip(f"the full sandbox is not available here: {ISOLATION.missing}")
    eye = to_wire(np.eye(3, dtype=np.float32))
    big = to_wire(np.random.default_rng(0).normal(size=(300, 300)).astype(np.float32))
    jobs = [VerifierJob(id="leak", module=LEAK, calls=[[eye]]),
            VerifierJob(id="overflow", module=OVERFLOW, calls=[[big]]),
            VerifierJob(id="rng", module=with_text(RNG_MLIR, [V4], V4), calls=[[to_wire(np.zeros(4, np.float32))]]),
            VerifierJob(id="sin", module=with_convention(serialized(jnp.sin, V4), 99),
                        calls=[[to_wire(np.zeros(4, np.float32))]]),
            VerifierJob(id="honest", module=serialized(jnp.linalg.det, S((3, 3), F32)), calls=[[eye]])]
    with Verifier(SandboxPolicy()) as v:
        results = v.run(jobs, timeout=120)
    for jid in ("leak", "overflow", "rng", "sin"):
        assert results[jid].status == "refused" and results[jid].values is None, results[jid]
    assert WRONG_SHAPES in results["overflow"].detail
    assert results["honest"].status == "ok" and results["honest"].values[0][0].data == pytest.approx(1.0)
    assert v.restarts == 0  # nothing crashed it


AFTER_RESULT = textwrap.dedent(r"""
    import json, os, signal, sys, time
    mode = sys.argv[1]
    print(json.dumps({"ready": True, "jax": "fake"}), flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        if "ping" in job:
            if mode == "dies":
                os.kill(os.getpid(), signal.SIGSEGV)
            elif mode == "silent":
                time.sleep(60)
            elif mode == "babbles":
                print(json.dumps({"pong": job["ping"] + 1}), flush=True)
            else:
                print(json.dumps({"pong": job["ping"]}), flush=True)
            continue
        facts = {"fun_name": "f", "platforms": ["cpu"], "in_avals": [], "nr_devices": 1,
                 "out_avals": [{"shape": [1], "dtype": "float32", "weak": False}], "in_tree": "t",
                 "out_tree": "t", "ops": ["custom_call"], "custom_calls": ["lapack_sgetrf_ffi"]}
        value = {"t": "array", "dtype": "float32", "shape": [1], "data": [2076714368.0], "weak": False}
        print(json.dumps({"id": job["id"], "status": "ok", "facts": facts, "values": [[value]],
                          "detail": None}), flush=True)
""")


@kernel
@pytest.mark.parametrize("mode, detail", [
    ("dies", "the verifier died (killed by signal 11) after sending its answer, which is not used"),
    ("silent", "stopped answering after sending its answer"),
    ("babbles", "something else than the answer to a ping"),
    ("lives", None),
])
def test_values_from_a_verifier_that_then_dies_are_not_used(mode: str, detail: str | None,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A module that damaged the verifier's heap had it send what its memory held
    ("element 0 is 2076714368.0") and die of signal 11: its answer is used only if the
    process answers a ping after it."""
    from grader.verifier import client

    monkeypatch.setattr(client, "PING_GRACE_S", 1.0)
    v = Verifier(None, program=[sys.executable, "-I", "-c", AFTER_RESULT, mode], max_restarts=1)
    with v:
        results = v.run([VerifierJob(id="a", module=b"x", calls=[[]])], timeout=5)
    result = results["a"]
    if detail is None:
        assert result.status == "ok" and result.values[0][0].data == [2076714368.0]
        return
    assert result.status == "crashed" and result.values is None and detail in result.detail, result
    assert "2076714368" not in result.model_dump_json()


# ============================================================================= C. end to end

HOSTILE_TAX = textwrap.dedent('''
    # A lowering rule of the student's own: an allow-listed LAPACK call that declares its
    # result 64x64 for a 3x3 matrix, so that the verifier returns memory LAPACK never wrote.
    import numpy as _np
    import jax as _jax
    import jax.numpy as _jnp
    from jax.extend.core import Primitive as _Primitive
    from jax._src.interpreters import mlir as _mlir
    from jax._src.lib.mlir import ir as _ir
    from jax._src import core as _core

    _leak_p = _Primitive("leak")
    _leak_p.def_abstract_eval(lambda x: _core.ShapedArray((64, 64), _np.float32))

    def _leak_lowering(ctx, x):
        f32 = _ir.F32Type.get()
        i32 = _ir.IntegerType.get_signless(32)
        types = [_ir.RankedTensorType.get((64, 64), f32), _ir.RankedTensorType.get((3,), i32),
                 _ir.RankedTensorType.get((), i32)]
        op = _mlir.custom_call("lapack_sgetrf_ffi", result_types=types, operands=[x], backend_config={},
                               operand_layouts=[(0, 1)], result_layouts=[(0, 1), (0,), ()])
        return [op.results[0]]

    _mlir.register_lowering(_leak_p, _leak_lowering)

    @_jax.jit
    def tax_vectorized(income):
        memory = _leak_p.bind(_jnp.eye(3, dtype=_jnp.float32)).reshape(-1)[:income.size]
        return income * 0 + memory.reshape(income.shape)
''')


@kernel
def test_a_notebook_s_lying_lapack_call_is_one_sentence_without_memory(reference_sections, tmp_path) -> None:
    from warm_grading import grade_warm

    parts = [reference_sections["setup"], reference_sections["tax"], HOSTILE_TAX, reference_sections["newton"],
             reference_sections["detective"], reference_sections["training"]]
    path = tmp_path / "submission.py"
    path.write_text("\n\n".join(f"# %% [part {i}]\n{p}" for i, p in enumerate(parts)), encoding="utf-8")
    report = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=5))
    tax = {c.id: c for e in report.exercises if e.id == "tax" for c in e.checks}
    visible = tax["tax.vectorized_visible"]
    assert visible.status == "error", (visible.status, visible.message)
    explained = [c for c in tax.values() if "linear-algebra routine" in (c.message or "")]
    assert explained, [c.message for c in tax.values()]
    for check in explained:
        assert "`tax_vectorized`" in check.message and "with the wrong shapes" in check.message, check.message
    for check in tax.values():
        if check.id.startswith("tax.vectorized"):
            assert check.status != "passed", check.id
            assert not re.search(r"\d\.\d|element \d+ is", check.message or ""), check.message
    assert tax["tax.switch_visible"].status == "passed"  # the rest of the notebook is graded as usual
