"""What a module's loops and cases do, read from its def-use chains (never its text).

`lax.while_loop`, `lax.fori_loop` and `lax.scan` all lower to a StableHLO `while`, and
`lax.switch` on a constant index lowers to a `case` as one on a traced index does: the op names
cannot tell them apart; what the ops read and feed can.

- A `while`'s stop is `value_dependent` when its condition reads a loop-carried value that the
  body computes (neither passed through nor a counter) from the function's inputs (Newton's
  `|x_new - x| >= tol`); `counted_by_input` when it reads only a counter and a bound that comes
  from an input (`fori_loop` over a traced `num_steps`); `counted_by_constant` when the bound is
  fixed when traced (`scan`, a `fori_loop` over a Python int; its `bound` is the constant the
  counter is compared with, so a loop over an array's elements shows how it grows, and its `blocks`
  the k of an input it steps through k elements at a time, as `lax.scan(..., unroll=k)` does);
  `invariant` when it reads neither a
  counter nor a computed value (it runs zero times or never stops). It `feeds_output` when a
  value its body computes reaches what `main` returns.
- A `case` has an `index_from_input` when data flows from an argument of `main` to its index,
  `feeds_output` when one of its results reaches what `main` returns, `branches_differ`
  unless every branch returns the very same values, and is `returned` when one of its results is
  what `main` returns as it is (reshaped, converted or passed out of a call at most).

Loaded by path from runtime.py (no `grader` package in the verifier): standard library and the
MLIR bindings JAX ships only. Every walk is iterative and bounded by MAX_VALUES; a module past
the bound raises TooLarge, and the caller reports the module as one it could not analyse.
"""

from __future__ import annotations

from typing import Any

MAX_VALUES = 400_000  # values (and edges) a module may have for its constructs to be analysed
MAX_WALK_STEPS = 4 * MAX_VALUES  # steps of all the walks over one module's values, together
MAX_BLOCKS = 8  # block sizes reported for one loop
MAX_REPORTED = 64  # loops and cases reported, each kind
_CONSTANT_OPS = ("stablehlo.constant", "mhlo.constant", "arith.constant")
_SHAPING_OPS = ("stablehlo.broadcast_in_dim", "stablehlo.convert", "stablehlo.reshape", "stablehlo.broadcast")


class TooLarge(Exception):
    """The module has more values than the analysis walks."""


class _Graph:
    """Each value's direct dependencies: operands of the op defining it, the terminators of that
    op's regions (a loop's or a case's results come from them), a loop's initial and next values
    (for its region arguments), a call's callee results, the callers' operands (for a function's
    arguments)."""

    def __init__(self) -> None:
        self.deps: dict[Any, list[Any]] = {}
        self.size = 0
        self.whiles: list[Any] = []
        self.cases: list[Any] = []
        self.functions: dict[str, Any] = {}
        self.calls: list[Any] = []

    def add(self, value: Any, sources: list[Any]) -> None:
        self.size += 1 + len(sources)
        if self.size > MAX_VALUES:
            raise TooLarge
        self.deps.setdefault(value, []).extend(sources)


def _terminator(block: Any) -> Any | None:
    ops = block.operations
    count = len(ops)
    return ops[count - 1].operation if count else None


def _returned(region_op: Any) -> list[Any]:
    """The operands of every terminator of the op's regions."""
    out: list[Any] = []
    for region in region_op.regions:
        for block in region.blocks:
            last = _terminator(block)
            if last is not None:
                out.extend(last.operands)
    return out


def _symbol(op: Any, key: str) -> str | None:
    from jax._src.lib.mlir import ir

    try:
        attr = op.attributes[key]
    except (KeyError, IndexError, ValueError):
        return None
    try:
        return ir.FlatSymbolRefAttr(attr).value
    except Exception:  # noqa: BLE001 - a string attribute
        try:
            return ir.StringAttr(attr).value
        except Exception:  # noqa: BLE001 - neither: no symbol
            return None


def _build(module: Any) -> tuple[_Graph, Any]:
    """The graph of every value of the module, and `main`'s func op."""
    graph = _Graph()
    main = None
    stack = [module.operation]
    while stack:
        op = stack.pop().operation
        name = op.name
        if name == "func.func":
            symbol = _symbol(op, "sym_name")
            if symbol is not None:
                graph.functions.setdefault(symbol, op)
                if symbol == "main":
                    main = op
        elif name == "stablehlo.while":
            graph.whiles.append(op)
        elif name == "stablehlo.case":
            graph.cases.append(op)
        elif name == "func.call":
            graph.calls.append(op)
        operands = list(op.operands)
        if op.regions and name not in ("func.func", "builtin.module"):
            returned = _returned(op)
            for result in op.results:
                graph.add(result, operands + returned)
            body = _terminator(op.regions[1].blocks[0]) if name == "stablehlo.while" and len(op.regions) > 1 \
                and op.regions[1].blocks else None
            nxt = list(body.operands) if body is not None else []
            for region in op.regions:
                for block in region.blocks:
                    for position, argument in enumerate(block.arguments):
                        if name == "stablehlo.while":
                            graph.add(argument, [operands[position]] if position < len(operands) else operands)
                            if position < len(nxt):
                                graph.add(argument, [nxt[position]])
                        else:
                            graph.add(argument, operands)
        else:
            for result in op.results:
                graph.add(result, operands)
        for region in op.regions:
            for block in region.blocks:
                stack.extend(block.operations)
    for call in graph.calls:  # results from the callee's returns; its arguments from the callers
        callee = graph.functions.get(_symbol(call, "callee") or "")
        if callee is None or not callee.regions or not callee.regions[0].blocks:
            continue
        block = callee.regions[0].blocks[0]
        returned = _returned(callee)
        for position, result in enumerate(call.results):
            if position < len(returned):
                graph.add(result, [returned[position]])
        operands = list(call.operands)
        for position, argument in enumerate(block.arguments):
            if position < len(operands):
                graph.add(argument, [operands[position]])
    return graph, main


class _Budget:
    """Steps left for every walk of one module together (MAX_WALK_STEPS): a module of many loops
    whose stops each reach the whole program cannot make the analysis quadratic."""

    def __init__(self, steps: int) -> None:
        self.left = steps

    def spend(self, steps: int = 1) -> None:
        self.left -= steps
        if self.left < 0:
            raise TooLarge


def _closure(starts: list[Any], edges: dict[Any, list[Any]], budget: _Budget, stop: set | None = None) -> set:
    """Every value reachable from `starts` along `edges`, not expanding those in `stop`."""
    seen = set(starts)
    todo = list(starts)
    while todo:
        value = todo.pop()
        if stop is not None and value in stop:
            continue
        sources = edges.get(value, ())
        budget.spend(1 + len(sources))
        for nxt in sources:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _reversed(graph: _Graph) -> dict[Any, list[Any]]:
    users: dict[Any, list[Any]] = {}
    for value, sources in graph.deps.items():
        for source in sources:
            users.setdefault(source, []).append(value)
    return users


def _as(kind: Any, value: Any) -> Any:
    """`value` as an `ir.OpResult` or an `ir.BlockArgument` (`kind`), or None. The MLIR bindings of
    JAX 0.6 hand out plain `Value`s, which only the class's own `isinstance` recognises."""
    if isinstance(value, kind):
        return value
    recognises = getattr(kind, "isinstance", None)
    return kind(value) if recognises is not None and recognises(value) else None


def _is_constant(value: Any, depth: int = 4) -> bool:
    """A value fixed when traced: a constant, maybe broadcast or converted."""
    from jax._src.lib.mlir import ir

    while depth > 0 and (result := _as(ir.OpResult, value)) is not None:
        op = result.owner.operation
        if op.name in _CONSTANT_OPS:
            return True
        if op.name not in _SHAPING_OPS or len(op.operands) != 1:
            return False
        value, depth = op.operands[0], depth - 1
    return False


def _carried_kind(argument: Any, nxt: Any) -> str:
    """How the body makes a loop-carried value's next value: `passed` (unchanged), `counter` (plus a
    constant) or `computed`."""
    from jax._src.lib.mlir import ir

    if nxt == argument:
        return "passed"
    result = _as(ir.OpResult, nxt)
    if result is not None:
        op = result.owner.operation
        if op.name in ("stablehlo.add", "stablehlo.subtract") and len(op.operands) == 2:
            a, b = op.operands[0], op.operands[1]
            if (a == argument and _is_constant(b)) or (op.name == "stablehlo.add" and b == argument and _is_constant(a)):
                return "counter"
    return "computed"


def _loop(op: Any, graph: _Graph, live: set, tainted: set, budget: _Budget) -> dict:
    if len(op.regions) != 2 or not op.regions[0].blocks or not op.regions[1].blocks:
        return {"stop": "invariant", "feeds_output": False}
    cond, body = op.regions[0].blocks[0], op.regions[1].blocks[0]
    cond_args, body_args = list(cond.arguments), list(body.arguments)
    cond_end, body_end = _terminator(cond), _terminator(body)
    nxt = list(body_end.operands) if body_end is not None else []
    kinds = [_carried_kind(arg, nxt[i]) if i < len(nxt) else "computed" for i, arg in enumerate(body_args)]
    stops = set(cond_args)
    predicate = list(cond_end.operands) if cond_end is not None else []
    read = _closure(predicate, graph.deps, budget, stop=stops)
    positions = [i for i, arg in enumerate(cond_args) if arg in read]
    outside = read - stops
    computed = [i for i in positions if i < len(kinds) and kinds[i] == "computed"
                and i < len(body_args) and body_args[i] in tainted]
    if computed:
        stop = "value_dependent"
    elif any(i < len(kinds) and kinds[i] in ("counter", "computed") for i in positions):
        bounds = [i for i in positions if i < len(kinds) and kinds[i] == "passed" and body_args[i] in tainted]
        captured = any(v in tainted and not _defined_in(v, op, budget) for v in outside)
        stop = "counted_by_input" if bounds or captured else "counted_by_constant"
    else:
        stop = "invariant"
    feeds = any(result in live and j < len(kinds) and kinds[j] == "computed" for j, result in enumerate(op.results))
    bound = _constant_bound(read) if stop == "counted_by_constant" else None
    blocks = _blocks(body_args, kinds, tainted, bound) if bound is not None else []
    return {"stop": stop, "feeds_output": feeds, "bound": bound, "blocks": blocks}


def _blocks(body_args: list, kinds: list[str], tainted: set, bound: int) -> list[int]:
    """The block sizes k of the arrays a counted loop steps through k elements at a time: its
    loop-invariant arrays from the inputs whose leading axis is its trip count and whose second is
    k (`lax.scan(..., unroll=k)` carries the first n - n % k elements of the scanned input as
    (n // k, k, ...) and makes the other n % k steps after the loop)."""
    from jax._src.lib.mlir import ir

    found = set()
    for argument, kind in zip(body_args, kinds):
        if kind != "passed" or argument not in tainted:
            continue
        typed = _as(ir.RankedTensorType, argument.type)
        if typed is None or typed.rank < 2:
            continue
        shape = typed.shape
        if shape[0] == bound and 2 <= shape[1] < 2**31:
            found.add(int(shape[1]))
    return sorted(found)[:MAX_BLOCKS]


def _constant_bound(read: set) -> int | None:
    """The largest integer constant a counted loop's stop compares with: its trip count, when it
    counts from zero by one (a scan's length, a fori_loop's upper bound)."""
    from jax._src.lib.mlir import ir

    found = None
    for value in read:
        result = _as(ir.OpResult, value)
        if result is None or result.owner.operation.name not in _CONSTANT_OPS:
            continue
        try:
            dense = ir.DenseIntElementsAttr(result.owner.operation.attributes["value"])
            number = int(dense[0]) if len(dense) == 1 or dense.is_splat else None
        except Exception:  # noqa: BLE001 - not an integer constant
            continue
        if number is not None and abs(number) < 2**31:
            found = number if found is None else max(found, number)
    return found


def _defined_in(value: Any, op: Any, budget: _Budget) -> bool:
    """Whether `value` is defined inside `op`'s regions (bounded climb of its parents)."""
    from jax._src.lib.mlir import ir

    result = _as(ir.OpResult, value)
    owner = result.owner if result is not None else _as(ir.BlockArgument, value).owner.owner
    for _ in range(256):
        budget.spend()
        if owner is None:
            return False
        owner = owner.operation
        if owner == op:
            return True
        owner = owner.parent
    return False


def _case(op: Any, live: set, tainted: set, returned: set) -> dict:
    operands = list(op.operands)
    branches = []
    for region in op.regions:
        end = _terminator(region.blocks[0]) if region.blocks else None
        branches.append(tuple(end.operands) if end is not None else ())
    return {"index_from_input": bool(operands) and operands[0] in tainted,
            "feeds_output": any(result in live for result in op.results),
            "branches_differ": len(set(branches)) > 1,
            "returned": any(result in returned for result in op.results)}


def _returned_as_is(main: Any, graph: _Graph, budget: _Budget) -> set:
    """The values `main` returns as they are: its return's operands, and what each of them is a
    reshape, conversion or broadcast of, or the value a call returns from its callee."""
    from jax._src.lib.mlir import ir

    seen: set = set()
    todo = list(_returned(main))
    while todo:
        value = todo.pop()
        if value in seen:
            continue
        seen.add(value)
        budget.spend()
        result = _as(ir.OpResult, value)
        if result is None:
            continue
        op = result.owner.operation
        if op.name in _SHAPING_OPS and len(op.operands) == 1:
            todo.append(op.operands[0])
        elif op.name == "func.call":
            callee = graph.functions.get(_symbol(op, "callee") or "")
            position = list(op.results).index(value) if value in list(op.results) else -1
            ends = _returned(callee) if callee is not None else []
            if 0 <= position < len(ends):
                todo.append(ends[position])
    return seen


def analyse(module: Any) -> dict:
    """{"loops": [...], "cases": [...]} of a parsed module (see the module docstring); raises
    TooLarge for a module past the bounds, ValueError for one without a single `main`."""
    graph, main = _build(module)
    if main is None or not main.regions or not main.regions[0].blocks:
        raise ValueError("the module has no `main` to follow its values from")
    entry = main.regions[0].blocks[0]
    budget = _Budget(MAX_WALK_STEPS)
    live = _closure(_returned(main), graph.deps, budget)
    tainted = _closure(list(entry.arguments), _reversed(graph), budget)
    loops = [_loop(op, graph, live, tainted, budget) for op in graph.whiles[:MAX_REPORTED]]
    returned = _returned_as_is(main, graph, budget) if graph.cases else set()
    cases = [_case(op, live, tainted, returned) for op in graph.cases[:MAX_REPORTED]]
    return {"loops": loops, "cases": cases}
