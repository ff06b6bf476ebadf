"""What each allow-listed custom call must look like before a module that makes it is run.

A custom call is opaque to XLA: it hands the kernel the buffers the module declares, and the
kernel writes what its routine computes, sized from its operands. A LAPACK call whose results
the module declares smaller than that overflows the verifier's heap; one declared larger leaves
memory the kernel never wrote, which would come back as the student's values. So every call is
compared, before anything runs, with the call JAX 0.12 itself emits for that target
(jax/_src/lax/linalg.py, `_linalg_ffi_lowering`): the same operands and results (shapes from the
operands' shapes and the call's settings, dtypes from the target's letter), the same layouts
(column-major matrices), the same aliasing, settings from the values the lowering uses, and
nothing else. A target with no contract here is never run.

It is loaded by path from runtime.py (no `grader` package in the verifier): standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# ----------------------------------------------------------------------------- what a call is


@dataclass(frozen=True)
class Tensor:
    """An operand or result: its static shape and MLIR element type (f32, complex<f64>, i32)."""

    shape: tuple[int, ...]
    dtype: str

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"


@dataclass(frozen=True)
class Alias:
    """An output_operand_alias: result (tuple indices, empty for a single result) reuses an operand."""

    result: tuple[int, ...]
    operand: int
    operand_part: tuple[int, ...] = ()


@dataclass(frozen=True)
class CustomCall:
    """One custom call as the module states it (runtime.read_call reads it from the parsed op)."""

    target: str
    operands: tuple[Tensor, ...]
    results: tuple[Tensor, ...]
    attributes: frozenset[str]
    api_version: int = 1
    backend_config: str = ""
    has_side_effect: bool = False
    called_computations: int = 0
    operand_layouts: tuple[tuple[int, ...], ...] | None = None
    result_layouts: tuple[tuple[int, ...], ...] | None = None
    aliases: tuple[Alias, ...] = ()
    config: tuple[tuple[str, str, int], ...] | None = None
    """mhlo.backend_config as (name, MLIR type, value), sorted; None when absent."""
    frontend: tuple[tuple[str, str], ...] = ()
    """mhlo.frontend_attributes as (name, value), sorted."""


class Mismatch(Exception):
    """The call is not the one JAX emits for its target: the message says how, in a few words."""


# ----------------------------------------------------------------------------- LAPACK

_LAPACK = re.compile(r"lapack_([sdcz])([a-z]+)_ffi")
_ELEMENT = {"s": "f32", "d": "f64", "c": "complex<f32>", "z": "complex<f64>"}
_REAL = {"s": "f32", "d": "f64", "c": "f32", "z": "f64"}
_COMPLEX = {"s": "complex<f32>", "d": "complex<f64>", "c": "complex<f32>", "z": "complex<f64>"}
_LAPACK_ATTRIBUTES = frozenset({
    "call_target_name", "api_version", "backend_config", "has_side_effect", "called_computations",
    "mhlo.backend_config", "mhlo.frontend_attributes", "operand_layouts", "result_layouts",
    "output_operand_aliases", "sdy.sharding_rule", "sdy.sharding", "mhlo.sharding"})
_ANNOTATION_ATTRIBUTES = frozenset({
    "call_target_name", "api_version", "backend_config", "has_side_effect", "called_computations",
    "mhlo.sharding", "sdy.sharding", "sdy.sharding_rule", "mhlo.frontend_attributes"})
ANNOTATIONS = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",
                         "annotate_device_placement"})
"""Annotations for XLA's partitioner and memory placement: on one device, the identity."""

I32 = "i32"
UI8 = "ui8"


def _chars(*letters: str) -> tuple[str, frozenset[int]]:
    """A setting the lowering passes as one character (np.uint8(ord(c)))."""
    return UI8, frozenset(ord(c) for c in letters)


@dataclass(frozen=True)
class Contract:
    """The call JAX emits: operands, results, aliases and settings (each: its type and the values
    the lowering can give it)."""

    operands: tuple[Tensor, ...]
    results: tuple[Tensor, ...]
    aliases: tuple[tuple[int, int], ...]  # (result, operand)
    config: tuple[tuple[str, tuple[str, frozenset[int]]], ...] = ()


def _batch_and_matrix(call: CustomCall, anchor: int) -> tuple[tuple[int, ...], int, int]:
    """The batch dimensions and the (rows, columns) of the operand the others are sized from."""
    if len(call.operands) <= anchor:
        raise Mismatch(f"{len(call.operands)} operands")
    shape = call.operands[anchor].shape
    if len(shape) < 2:
        raise Mismatch(f"operand {anchor + 1} is not a matrix ({call.operands[anchor]})")
    return shape[:-2], shape[-2], shape[-1]


def _config(call: CustomCall, name: str) -> int | None:
    return next((value for key, _, value in call.config or () if key == name), None)


def _getrf(t: str, call: CustomCall) -> Contract:
    b, m, n = _batch_and_matrix(call, 0)
    a = Tensor((*b, m, n), _ELEMENT[t])
    return Contract((a,), (a, Tensor((*b, min(m, n)), I32), Tensor(b, I32)), ((0, 0),))


def _potrf(t: str, call: CustomCall) -> Contract:
    b, _, n = _batch_and_matrix(call, 0)
    a = Tensor((*b, n, n), _ELEMENT[t])
    return Contract((a,), (a, Tensor(b, I32)), ((0, 0),), (("uplo", _chars("L", "U")),))


def _geqrf(t: str, call: CustomCall) -> Contract:
    b, m, n = _batch_and_matrix(call, 0)
    a = Tensor((*b, m, n), _ELEMENT[t])
    return Contract((a,), (a, Tensor((*b, min(m, n)), _ELEMENT[t])), ((0, 0),))


def _orgqr(t: str, call: CustomCall) -> Contract:
    b, m, n = _batch_and_matrix(call, 0)
    k = call.operands[1].shape[-1] if len(call.operands) > 1 and call.operands[1].shape else -1
    if not m >= n >= k >= 0:  # LAPACK's own requirement, and the lowering's shape rule
        raise Mismatch(f"{call.operands[0]} with {k} reflectors")
    a = Tensor((*b, m, n), _ELEMENT[t])
    return Contract((a, Tensor((*b, k), _ELEMENT[t])), (a,), ((0, 0),))


def _syevd(t: str, call: CustomCall) -> Contract:
    b, _, n = _batch_and_matrix(call, 0)
    a = Tensor((*b, n, n), _ELEMENT[t])
    return Contract((a,), (a, Tensor((*b, n), _REAL[t]), Tensor(b, I32)), ((0, 0),),
                    (("mode", _chars("N", "V")), ("uplo", _chars("L", "U"))))


def _geev(t: str, call: CustomCall) -> Contract:
    b, _, n = _batch_and_matrix(call, 0)
    a = Tensor((*b, n, n), _ELEMENT[t])
    vectors = Tensor((*b, n, n), _COMPLEX[t])
    values = (Tensor((*b, n), _ELEMENT[t]),) * (2 if t in "sd" else 1)  # real: wr and wi
    return Contract((a,), (*values, vectors, vectors, Tensor(b, I32)), (),
                    (("compute_left", _chars("N", "V")), ("compute_right", _chars("N", "V"))))


def _gesdd(t: str, call: CustomCall) -> list[Contract]:
    b, m, n = _batch_and_matrix(call, 0)
    if m == 0 or n == 0:  # JAX computes an empty SVD without LAPACK
        raise Mismatch(f"an empty matrix {call.operands[0]}")
    k = min(m, n)
    a = Tensor((*b, m, n), _ELEMENT[t])
    mode = _config(call, "mode")
    shapes = [(m, n)] if mode != ord("S") else []  # U m x m, VT n x n
    if mode in (ord("S"), ord("N")):  # U m x k, VT k x n ("N": U and VT unused, either size)
        shapes.append((k, k))
    settings = (("mode", _chars("A", "S", "N")),)
    return [Contract((a,), (a, Tensor((*b, k), _REAL[t]), Tensor((*b, m, u), _ELEMENT[t]),
                            Tensor((*b, v, n), _ELEMENT[t]), Tensor(b, I32)), ((0, 0),), settings)
            for u, v in shapes]


def _sytrd(t: str, call: CustomCall) -> Contract:
    b, _, n = _batch_and_matrix(call, 0)
    if n == 0:
        raise Mismatch("an empty matrix")
    a = Tensor((*b, n, n), _ELEMENT[t])
    return Contract((a,), (a, Tensor((*b, n), _REAL[t]), Tensor((*b, n - 1), _REAL[t]),
                           Tensor((*b, n - 1), _ELEMENT[t]), Tensor(b, I32)), ((0, 0),),
                    (("uplo", _chars("L", "U")),))


def _gehrd(t: str, call: CustomCall) -> Contract:
    b, _, n = _batch_and_matrix(call, 0)
    if n == 0:
        raise Mismatch("an empty matrix")
    a = Tensor((*b, n, n), _ELEMENT[t])
    return Contract((a,), (a, Tensor((*b, n - 1), _ELEMENT[t]), Tensor(b, I32)), ((0, 0),),
                    (("high", (I32, frozenset({n}))), ("low", (I32, frozenset({1})))))


def _gees(t: str, call: CustomCall) -> Contract:
    b, _, n = _batch_and_matrix(call, 0)
    a = Tensor((*b, n, n), _ELEMENT[t])
    values = (Tensor((*b, n), _ELEMENT[t]),) * (2 if t in "sd" else 1)
    return Contract((a,), (a, a, *values, Tensor(b, I32), Tensor(b, I32)), ((0, 0),),
                    (("mode", _chars("N", "V")), ("sort", _chars("N"))))


def _trsm(t: str, call: CustomCall) -> Contract:
    b, m, n = _batch_and_matrix(call, 1)
    side = _config(call, "side")
    k = m if side == ord("L") else n
    x = Tensor((*b, m, n), _ELEMENT[t])
    return Contract((Tensor((*b, k, k), _ELEMENT[t]), x), (x,), ((0, 1),),
                    (("diag", _chars("N", "U")), ("side", _chars("L", "R")),
                     ("trans_x", _chars("N", "T", "C")), ("uplo", _chars("L", "U"))))


def _gtsv(t: str, call: CustomCall) -> Contract:
    b, n, r = _batch_and_matrix(call, 3)
    diagonal = Tensor((*b, n), _ELEMENT[t])
    rhs = Tensor((*b, n, r), _ELEMENT[t])
    return Contract((diagonal, diagonal, diagonal, rhs), (diagonal, diagonal, diagonal, rhs, Tensor(b, I32)),
                    ((0, 0), (1, 1), (2, 2), (3, 3)))


_ROUTINES = {"getrf": _getrf, "potrf": _potrf, "geqrf": _geqrf, "orgqr": _orgqr, "ungqr": _orgqr,
             "syevd": _syevd, "heevd": _syevd, "geev": _geev, "gesdd": _gesdd, "sytrd": _sytrd,
             "hetrd": _sytrd, "gehrd": _gehrd, "gees": _gees, "trsm": _trsm, "gtsv": _gtsv}
_REAL_ONLY = {"orgqr", "syevd", "sytrd"}
_COMPLEX_ONLY = {"ungqr", "heevd", "hetrd"}


def lapack_targets() -> frozenset[str]:
    """Every LAPACK target with a contract: the allow-list's LAPACK part."""
    names = set()
    for routine in _ROUTINES:
        for t in "sdcz":
            if (routine in _REAL_ONLY and t in "cz") or (routine in _COMPLEX_ONLY and t in "sd"):
                continue
            names.add(f"lapack_{t}{routine}_ffi")
    return frozenset(names)


# ----------------------------------------------------------------------------- checks


def _column_major(rank: int) -> tuple[int, ...]:
    """A batch of Fortran-order matrices (linalg._column_major_matrix_layout)."""
    return (rank - 2, rank - 1, *range(rank - 3, -1, -1))


def _row_major(rank: int) -> tuple[int, ...]:
    return tuple(range(rank - 1, -1, -1))


def _layouts(tensors: tuple[Tensor, ...], matrix_rank: int) -> tuple[tuple[int, ...], ...]:
    """Column-major for the arrays of the largest operand rank, the default for the others."""
    return tuple(_column_major(len(x.shape)) if len(x.shape) == matrix_rank else _row_major(len(x.shape))
                 for x in tensors)


def _same(what: str, have: tuple[Tensor, ...], want: tuple[Tensor, ...]) -> None:
    if len(have) != len(want):
        raise Mismatch(f"{len(have)} {what}s, not {len(want)}")
    for i, (h, w) in enumerate(zip(have, want), 1):
        if h != w:
            raise Mismatch(f"{what} {i} is {h}, not {w}")


def _check_common(call: CustomCall, allowed: frozenset[str]) -> None:
    """What every allowed call shares with JAX's: the calling convention and no extras."""
    extra = sorted(call.attributes - allowed)
    if extra:
        raise Mismatch(f"unexpected attributes ({', '.join(extra)[:80]})")
    if call.api_version != 1 or call.backend_config or call.has_side_effect or call.called_computations:
        raise Mismatch("another calling convention than JAX's")


def _check_contract(call: CustomCall, contract: Contract) -> None:
    _same("operand", call.operands, contract.operands)
    _same("result", call.results, contract.results)
    rank = max(len(x.shape) for x in contract.operands)
    if call.operand_layouts != _layouts(contract.operands, rank):
        raise Mismatch("operand layouts that are not column-major matrices")
    if call.result_layouts != _layouts(contract.results, rank):
        raise Mismatch("result layouts that are not column-major matrices")
    single = len(contract.results) == 1
    want = tuple(Alias(() if single else (r,), o) for r, o in contract.aliases)
    if call.aliases != want:
        raise Mismatch("results that alias other operands than JAX's")
    if call.config is None:
        raise Mismatch("no settings (mhlo.backend_config)")
    settings = dict(contract.config)
    if sorted(key for key, _, _ in call.config) != sorted(settings):
        raise Mismatch(f"settings {sorted(key for key, _, _ in call.config)!s:.80}, not {sorted(settings)}")
    for key, kind, value in call.config:
        want_kind, values = settings[key]
        if kind != want_kind or value not in values:
            raise Mismatch(f"setting {key} = {value} : {kind:.20}")
    if call.frontend not in ((), (("num_batch_dims", str(rank - 2)),)):
        raise Mismatch("frontend attributes other than its number of batch dimensions")


def _check_lapack(call: CustomCall) -> None:
    match = _LAPACK.fullmatch(call.target)
    if match is None or call.target not in LAPACK_TARGETS:
        raise Mismatch("no contract for this routine")
    _check_common(call, _LAPACK_ATTRIBUTES)
    contracts = _ROUTINES[match.group(2)](match.group(1), call)
    candidates = contracts if isinstance(contracts, list) else [contracts]
    problems = []
    for contract in candidates:
        try:
            _check_contract(call, contract)
            return
        except Mismatch as exc:
            problems.append(str(exc))
    raise Mismatch(problems[0])


def _check_annotation(call: CustomCall) -> None:
    """One array in, the same array out: what these are on one device."""
    _check_common(call, _ANNOTATION_ATTRIBUTES)
    if len(call.operands) != 1 or call.results != call.operands:
        raise Mismatch("its result is not its operand's shape and type")
    if call.operand_layouts is not None or call.result_layouts is not None or call.aliases or call.config:
        raise Mismatch("layouts, aliases or settings an annotation does not have")
    if any(key != "_xla_buffer_placement" for key, _ in call.frontend):
        raise Mismatch("frontend attributes other than a buffer placement")


LAPACK_TARGETS = lapack_targets()
ALLOWED = LAPACK_TARGETS | ANNOTATIONS


def check(call: CustomCall) -> None:
    """Raise Mismatch unless the call is one JAX emits for its target (with the call's own shapes)."""
    if call.target in ANNOTATIONS:
        _check_annotation(call)
    else:
        _check_lapack(call)


def describe(call: CustomCall, mismatch: Mismatch) -> str:
    """The refusal's words: what kind of routine, the target, and how it differs."""
    if call.target in ANNOTATIONS:
        return f"it calls the annotation {call.target} with the wrong shapes: {mismatch}"
    return f"it calls a linear-algebra routine, {call.target}, with the wrong shapes: {mismatch}"
