"""Whether a module's loop or case does the work: the module run again with that construct
knocked out gives other values.

constructs.py shows what a `while`'s stop reads and what a `case`'s index comes from; it cannot
show that the construct matters. A `lax.while_loop` started at the closed form's answer
(`sqrt(a)` twice) stops before its first step, and a `lax.switch` whose result is multiplied by
zero before it is added to a `jnp.select` changes nothing, yet both read and feed what they
should. So the module is run once more per construct, on the job's own calls, with it knocked
out:

- a `while`: its condition returns `false`, so it runs no step and returns its initial values;
- a `case`: its index is the constant of each of its branches in turn (the first MAX_BRANCHES).

A loop `does_work` when some call's outputs differ from the module's own by more than the
job's tolerance; a case when that holds for every branch it is forced to: a branch that alone
gives the module's own values on every call is the one the case always takes on them, so the
case chooses nothing there (`always_one_branch`: a `lax.switch` on `income < 0` beside a
`jnp.select` that computes every bracket, a `lax.cond` on `threshold == threshold`). The checks'
calls must then take more than one branch of an honest case, as a text's cases do. The
tolerance is the checks' own (rtol, atol), so a change no check could see is none; (0, 0) is
bit for bit. A tolerance, because a `lax.switch` whose every branch computes the whole answer,
each written its own way (`jnp.select` over the brackets, or the rates applied in another
order), gives the same answer whichever branch it takes, to the last bit or two: compared bit
for bit, those last bits were taken for the choice doing the work. A knocked-out module runs no
step of a loop or takes a branch the program has, but what follows may then run longer (a
second loop that only stops once the first has converged): the grader runs knockouts as a job
of their own, after the module's values, with a deadline of their own (grader/judging/
verification.py). A construct whose knockout could not be built or run is not judged (None).
Loaded by path from runtime.py (no `grader` package in the verifier).
"""

from __future__ import annotations

import dataclasses
from typing import Any

MAX_KNOCKOUTS = 8  # constructs knocked out per job (each is a module compiled and run again)
MAX_BRANCHES = 8  # branches a case is forced to, each (a lax.switch over eight brackets at most)


def _ops(module: Any, constructs: Any) -> tuple[list[Any], list[Any]]:
    """The module's `while` and `case` ops, in the order constructs.analyse reports them."""
    graph, _ = constructs._build(module)
    return graph.whiles, graph.cases


def _constant_before(op: Any, value_type: Any, value: int) -> Any:
    """A constant of a scalar tensor type, inserted just before `op`."""
    import numpy as np
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import hlo

    element = ir.RankedTensorType(value_type).element_type
    dtype = np.bool_ if ir.IntegerType(element).width == 1 else np.int32 if ir.IntegerType(element).width == 32 \
        else np.int64
    with ir.InsertionPoint(op), op.location:
        attr = ir.DenseElementsAttr.get(np.array(value, dtype), type=ir.RankedTensorType(value_type))
        return hlo.ConstantOp(attr).result


def _knock(op: Any, kind: str, branch: int) -> None:
    """Knock out one op in place (see the module docstring)."""
    if kind == "loop":
        cond = op.regions[0].blocks[0]
        ops = cond.operations
        stop = ops[len(ops) - 1].operation
        stop.operands[0] = _constant_before(stop, stop.operands[0].type, 0)
    else:
        index = op.operands[0]
        op.operands[0] = _constant_before(op, index.type, branch)


def branch_counts(exported: Any, constructs: Any) -> list[int]:
    """How many branches each `case` of the module has, in the order constructs.analyse reports them."""
    from jax._src.interpreters import mlir
    from jax._src.lib import _jax
    from jax._src.lib.mlir import ir

    with mlir.make_ir_context():
        module = _jax.mlir.deserialize_portable_artifact(exported.mlir_module_serialized)
        if isinstance(module, (str, bytes)):
            module = ir.Module.parse(module)
        _, cases = _ops(module, constructs)
        return [len(op.regions) for op in cases]


def knocked_out(exported: Any, constructs: Any, kind: str, position: int, branch: int = 0) -> Any:
    """`exported` with the `position`-th loop or case knocked out (a new jax Exported)."""
    from jax._src.export._export import _module_to_bytecode
    from jax._src.interpreters import mlir
    from jax._src.lib import _jax
    from jax._src.lib.mlir import ir

    with mlir.make_ir_context():
        module = _jax.mlir.deserialize_portable_artifact(exported.mlir_module_serialized)
        if isinstance(module, (str, bytes)):
            module = ir.Module.parse(module)
        whiles, cases = _ops(module, constructs)
        _knock((whiles if kind == "loop" else cases)[position], kind, branch)
        if not module.operation.verify():
            raise ValueError("the knocked-out module does not verify")
        data = _module_to_bytecode(module)
    return dataclasses.replace(exported, mlir_module_serialized=data)


def _plain(x: Any) -> Any:
    """An output as NumPy compares it: bfloat16 and friends as float32 (as the wire carries them)."""
    import numpy as np

    x = np.asarray(x)
    return x if x.dtype.kind in "biufc" else x.astype(np.float32)


def _same(a: list, b: list, rtol: float = 0.0, atol: float = 0.0) -> bool:
    """Whether the knocked-out leaves `a` are the module's own `b`: the same shapes, and each
    element within atol + rtol * |own| (bit for bit at (0, 0); NaN where NaN was)."""
    import numpy as np

    for x, y in zip(a, b):
        x, y = _plain(x), _plain(y)
        if x.shape != y.shape:
            return False
        if x.dtype.kind == "b" or y.dtype.kind == "b" or (rtol == 0 and atol == 0):
            if not np.array_equal(x, y, equal_nan=x.dtype.kind in "fc" and y.dtype.kind in "fc"):
                return False
        elif not np.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True):
            return False
    return len(a) == len(b)


def does_work(exported: Any, constructs: Any, facts: dict, args: list[list[Any]], outputs: list[list[Any]],
              runner: Any, kinds: list[str], rtol: float = 0.0, atol: float = 0.0) -> None:
    """Mark each reported loop or case (`kinds`: those a check asks about) of `facts["constructs"]`
    with `does_work` (see the module docstring): `runner(exported)` compiles a module, `args` are
    the job's decoded calls and `outputs` the module's own leaves for them (run here, or given by
    a knockout job); a change is one beyond (rtol, atol). A construct of a kind no check asks
    about costs no compile."""
    import jax

    found = facts.get("constructs") or {}
    if found.get("unreadable") or not args:
        return
    budget = MAX_KNOCKOUTS
    counts: list[int] | None = None
    for kind, key in (("loop", "loops"), ("case", "cases")):
        if kind not in kinds:
            continue
        for position, entry in enumerate(found.get(key, [])):
            if budget <= 0:
                return
            budget -= 1
            try:
                if kind == "case" and counts is None:
                    counts = branch_counts(exported, constructs)
                branches = [0] if kind == "loop" else range(min(counts[position], MAX_BRANCHES))  # type: ignore[index]
                changed = []
                for branch in branches:
                    fn = runner(knocked_out(exported, constructs, kind, position, branch))
                    changed.append(any(
                        not _same(jax.tree_util.tree_leaves(jax.block_until_ready(fn(*call))), mine, rtol, atol)
                        for call, mine in zip(args, outputs)))
                    if kind == "case" and not changed[-1] and any(changed):
                        break  # a branch that changes nothing, beside one that does: decided
            except Exception:  # noqa: BLE001 - a knockout that cannot be built or run judges nothing
                entry["does_work"] = None
                continue
            entry["does_work"] = all(changed) if kind == "case" else changed[0]
            if kind == "case" and any(changed) and not all(changed):
                entry["always_one_branch"] = True
