"""The code of derived mutants: cells appended to the reference module, run in the kernel.

Each cell rebinds one name of the reference. `_orig` is the reference's function and `_inner`
the Python function under its jax.jit; `_as_original` jits the mutant again when the reference
was jitted, so the mutation is the only difference. Constructs are removed by replacing the
`jax.lax` function (or `jax.vmap`) the reference calls, only while the mutant's function is
traced: `_replaced(name=_name, ...)`, for the constructs (`constructs`) the reference uses.
"""

from __future__ import annotations

HEADER = '''\
# %% [derived mutant: {name}]
import contextlib as _contextlib

import jax as _jax
import jax.numpy as _jnp
import numpy as _np

_orig = {target}
_inner = getattr(_orig, "__wrapped__", _orig)


def _as_original(fn):
    return _jax.jit(fn) if hasattr(_orig, "lower") else fn


'''


def cell(name: str, target: str, body: str) -> str:
    return HEADER.format(name=name, target=target) + body.strip() + "\n"


def _replacements(constructs: tuple[str, ...]) -> str:
    """`_replaced`'s arguments: each construct replaced by the cell's function of its name."""
    return ", ".join(f"{c}=_{c}" for c in constructs)


def argument_fixed(target: str, position: int, constant: str) -> str:
    return f'''
def _mutant(*args, **kwargs):
    args = list(args)
    args[{position}] = {constant}
    return _orig(*args, **kwargs)


{target} = _as_original(_mutant)
'''


def output_changed(target: str, leaf_code: str) -> str:
    """`leaf_code` (one line) rewrites `leaves`, the output's leaves flattened, in place."""
    return f'''
def _mutant(*args, **kwargs):
    leaves, tree = _jax.tree_util.tree_flatten(_orig(*args, **kwargs))
    {leaf_code}
    return _jax.tree_util.tree_unflatten(tree, leaves)


{target} = _as_original(_mutant)
'''


def extra_axis(leaf: int, ndim: int) -> str:
    """Output `leaf` with a leading unit axis, as `out[None]` gives it; but not a second one where a
    loop feeds the output back in (its rank already above the reference's `ndim`, led by that axis):
    compounded, the rank grows by one each step, and every step compiles its operations for a new
    shape (`step` in a 300-step Python loop ran out of its time, 10 s in every grading)."""
    value = f"leaves[{leaf}]"
    return (f"{value} = {value} if _jnp.ndim({value}) > {ndim} and _jnp.shape({value})[0] == 1 "
            f"else _jnp.reshape({value}, (1,) + _jnp.shape({value}))")


def without_jit(target: str) -> str:
    return f'''
def _mutant(*args, **kwargs):
    return _inner(*args, **kwargs)


{target} = _mutant
'''


def made_static(target: str, position: int) -> str:
    return f"{target} = _jax.jit(_inner, static_argnums=({position},))\n"


_REPLACING = '''
@_contextlib.contextmanager
def _replaced(**functions):
    modules = {{k: _jax if k == "vmap" else _jax.lax for k in functions}}
    kept = {{k: getattr(modules[k], k) for k in functions}}
    for k, v in functions.items():
        setattr(modules[k], k, v)
    try:
        yield
    finally:
        for k, v in kept.items():
            setattr(modules[k], k, v)


def _masked(keep, new, old):
    return _jax.tree_util.tree_map(lambda n, o: _jnp.where(keep, n, o), new, old)


{helpers}
'''
_REPLACED = _REPLACING + '''

def _mutant(*args, **kwargs):
    with _replaced({replacements}):
        return _inner(*args, **kwargs)


{target} = _as_original(_mutant)
'''

_WITHOUT_CASE = '''
def _switch(index, branches, *operands):
    index = _jnp.clip(index, 0, len(branches) - 1)
    outs = [branch(*operands) for branch in branches]
    return _jax.tree_util.tree_map(
        lambda *xs: _jnp.select([index == k for k in range(len(xs))], list(xs)), *outs)


def _cond(pred, true_fun, false_fun, *operands):
    return _masked(pred, true_fun(*operands), false_fun(*operands))
'''

# A Python loop over steps, unrolled while tracing. The barrier after each step keeps XLA from
# fusing across steps (it duplicates each step into every later one): on newton_sqrt's 100 steps
# its CPU compiler took 12 s instead of 0.7 s, the mutant's compile count timed out, and its
# grading cost 27-32 s. The steps compute what they did; the program still has no while.
_WITHOUT_WHILE = '''
def _while_loop(cond_fun, body_fun, init):
    state = init
    for _ in range({unroll}):
        state = _jax.lax.optimization_barrier(_masked(cond_fun(state), body_fun(state), state))
    return state


def _fori_loop(lower, upper, body_fun, init, **kwargs):
    state = init
    for i in range({bound}):
        state = _jax.lax.optimization_barrier(_masked(lower + i < upper, body_fun(lower + i, state), state))
    return state
'''

# A scan and a map unrolled over their (static) length: the same in a mutant and in an honest
# Python loop (python_loops), where the while and fori loops run as Python's own instead.
_UNROLLED_SCAN_MAP = '''
def _scan(f, init, xs=None, length=None, reverse=False, **kwargs):  # a Python loop over its whole length
    leaves = _jax.tree_util.tree_leaves(xs)
    n = leaves[0].shape[0] if leaves else int(length)
    if n == 0:  # nothing to unroll
        return _lax['scan'](f, init, xs, length=length, reverse=reverse, **kwargs)
    carry, ys = init, []
    for i in (range(n - 1, -1, -1) if reverse else range(n)):
        carry, y = f(carry, _jax.tree_util.tree_map(lambda v: v[i], xs))
        carry = _jax.lax.optimization_barrier(carry)
        ys.append(y)
    if reverse:
        ys.reverse()
    return carry, _jax.tree_util.tree_map(lambda *v: _jnp.stack(v), *ys)


def _map(f, xs, **kwargs):  # a Python loop over the elements
    n = _jax.tree_util.tree_leaves(xs)[0].shape[0]
    if n == 0:
        return _lax['map'](f, xs, **kwargs)
    outs = [f(_jax.tree_util.tree_map(lambda v: v[i], xs)) for i in range(n)]
    return _jax.tree_util.tree_map(lambda *v: _jnp.stack(v), *outs)
'''

# Python's own loops, for a function whose text allows one (an honest variant): on concrete values,
# so that a function judged 'either' whose bound or predicate is traced raises, and is then called
# eagerly. A loop of a jitted helper, traced inside a concrete call, stays the helper's own.
_PYTHON_WHILE_FORI = '''
_concrete_call = [False]


def _traced(*values):
    return any(isinstance(v, _jax.core.Tracer) for v in _jax.tree_util.tree_leaves(values))


def _while_loop(cond_fun, body_fun, init):  # while cond_fun(state): state = body_fun(state)
    state, keep = init, cond_fun(init)
    if _concrete_call[-1] and _traced(keep):  # a jitted helper's loop
        return _lax['while_loop'](cond_fun, body_fun, init)
    while bool(keep):
        state = body_fun(state)
        keep = cond_fun(state)
    return state


def _fori_loop(lower, upper, body_fun, init, **kwargs):  # for i in range(lower, upper)
    if _concrete_call[-1] and _traced(lower, upper):  # a jitted helper's loop
        return _lax['fori_loop'](lower, upper, body_fun, init, **kwargs)
    state = init
    for i in range(int(lower), int(upper)):
        state = body_fun(i, state)
    return state
'''

_PYTHON_LOOPS_CALL = '''

def _mutant(*args, **kwargs):
    _concrete_call.append(not _traced(args, kwargs))
    try:
        with _replaced({replacements}):
            return _inner(*args, **kwargs)
    finally:
        _concrete_call.pop()


{target} = _mutant  # not jitted: a Python loop runs on concrete values
'''

_WITHOUT_VMAP = '''
def _vmap(fun, in_axes=0, out_axes=0, **kwargs):  # lax.map over the leading axis: a loop over the elements
    def mapped(*args):
        axes = tuple(in_axes) if isinstance(in_axes, (list, tuple)) else (in_axes,) * len(args)
        if any(a not in (0, None) for a in axes) or out_axes != 0 or kwargs:  # not one this cell can write
            return _lax_vmap(fun, in_axes=in_axes, out_axes=out_axes, **kwargs)(*args)
        xs = tuple(a for a, axis in zip(args, axes) if axis == 0)

        def one(sliced):
            it = iter(sliced)
            return fun(*[next(it) if axis == 0 else a for a, axis in zip(args, axes)])
        return _lax['map'](one, xs)
    return mapped
'''


def without_case(target: str, constructs: tuple[str, ...] = ("switch", "cond")) -> str:
    return _REPLACED.format(helpers=_WITHOUT_CASE.strip(), target=target, replacements=_replacements(constructs))


def without_while(target: str, unroll: int, bound: int,
                  constructs: tuple[str, ...] = ("while_loop", "fori_loop")) -> str:
    """Each loop of `constructs` unrolled in Python: a while_loop to `unroll` steps, a fori_loop
    to `bound`, a scan and a map to their (static) length."""
    helpers = (_ORIGINALS.strip() + "\n\n\n" + _WITHOUT_WHILE.format(unroll=unroll, bound=bound).strip()
               + "\n\n\n" + _UNROLLED_SCAN_MAP.strip())
    return _REPLACED.format(helpers=helpers, target=target, replacements=_replacements(constructs))


def python_loops(target: str, constructs: tuple[str, ...]) -> str:
    """An honest variant: each lax loop of `constructs` written as a Python loop (a while_loop as
    `while`, a fori_loop as `for i in range(...)`, a scan and a map unrolled as `without_while`
    unrolls them), and the function not jitted: what a text that allows a Python loop accepts."""
    helpers = (_ORIGINALS.strip() + "\n\n\n" + _PYTHON_WHILE_FORI.strip() + "\n\n\n"
               + _UNROLLED_SCAN_MAP.strip())
    return (_REPLACING + _PYTHON_LOOPS_CALL).format(helpers=helpers, target=target,
                                                   replacements=_replacements(constructs))


def without_vmap(target: str) -> str:
    """jax.vmap replaced by lax.map over the mapped arguments' leading axis."""
    helpers = _ORIGINALS.strip() + "\n_lax_vmap = _jax.vmap\n\n\n" + _WITHOUT_VMAP.strip()
    return _REPLACED.format(helpers=helpers, target=target, replacements="vmap=_vmap")


def loop_over_elements(target: str) -> str:
    return f'''
def _mutant(x, *rest):
    flat = _jnp.ravel(x)
    each = [_inner(flat[k], *rest) for k in range(flat.shape[0])]  # unrolled while tracing
    return _jnp.stack(each).reshape(_jnp.shape(x))


{target} = _as_original(_mutant)
'''


def host_callback(target: str) -> str:
    return f'''
def _on_host(*args):
    return _jax.tree_util.tree_map(_np.asarray, _inner(*args))


def _mutant(*args):
    shapes = _jax.eval_shape(_inner, *args)
    return _jax.pure_callback(_on_host, shapes, *args)


{target} = _as_original(_mutant)
'''


_CONTAINERS = {
    "tuple": ("", "tuple(leaves)"),
    "list": ("", "list(leaves)"),
    "namedtuple": ("""\
import collections as _collections

_Out = _collections.namedtuple("Out", [f"out{{k}}" for k in range({count})])
""", "_Out(*leaves)"),
    "dataclass": ("""\
import dataclasses as _dataclasses

_fields = [f"out{{k}}" for k in range({count})]
_Out = _dataclasses.make_dataclass("Out", _fields)
_jax.tree_util.register_dataclass(_Out, data_fields=_fields, meta_fields=[])
""", "_Out(*leaves)"),
}
CONTAINERS = tuple(_CONTAINERS)


def container(target: str, kind: str, count: int) -> str:
    """The same leaves in another container the grader accepts."""
    setup, make = _CONTAINERS[kind]
    return setup.format(count=count) + f'''

def _mutant(*args, **kwargs):
    leaves = _jax.tree_util.tree_leaves(_orig(*args, **kwargs))
    return {make}


{target} = _as_original(_mutant)
'''


# ----------------------------------------------------------------------------- honest forms (honest_forms.py)

_HOST_NUMPY = '''
def _to_host(value):  # a Python number for a scalar, a NumPy array for an array: raises on a tracer
    if not hasattr(value, "dtype"):  # a Python number already
        return value
    kind = _np.dtype(value.dtype).kind
    if _np.ndim(value) == 0 and kind in "biuf":
        return bool(value) if kind == "b" else int(value) if kind in "iu" else float(value)
    return _np.asarray(value)


def _from_device(value):
    return _np.asarray(value) if isinstance(value, _jax.Array) else value


def _mutant(*args, **kwargs):
    args, kwargs = _jax.tree_util.tree_map(_to_host, (args, kwargs))
    return _jax.tree_util.tree_map(_from_device, _orig(*args, **kwargs))


{target} = _mutant  # host values in and out: jax.jit cannot trace it
'''


def host_numpy(target: str) -> str:
    """An honest variant of a function jit is optional for: its arguments brought to the host
    first (a scalar as a Python number with float()/int(), an array with np.asarray), its array
    results returned as NumPy arrays. It cannot be traced, so it is called as plain Python."""
    return _HOST_NUMPY.format(target=target)


def redefined(target: str, source: str, jax_numpy_as: str | None = None) -> str:
    """The function redefined from `source` (its def, as the reference writes it, changed), executed
    in the module's globals, or, with `jax_numpy_as`, in its own copy of them where that name is
    jax.numpy (`from jax import numpy as np`), so that the rest of the module keeps its own."""
    quotes = "'" * 3  # the def written out as it reads, where a raw string can hold it
    readable = quotes not in source and not source.rstrip("\n").endswith("\\")
    code = f"_source = r{quotes}\n{source}{quotes}[1:]\n" if readable else f"_source = {source!r}\n"
    if jax_numpy_as is None:
        return code + f"exec(compile(_source, '<{target} redefined>', 'exec'), globals())\ndel _source\n"
    return code + f'''_globals = dict(globals())  # its own: {jax_numpy_as} is jax.numpy there alone
exec("from jax import numpy as {jax_numpy_as}", _globals)
exec(compile(_source, "<{target} with jax.numpy as {jax_numpy_as}>", "exec"), _globals)
{target} = _globals[{target!r}]
del _globals, _source
'''


def value_changed(target: str, new_value: str) -> str:
    return f"{target} = {new_value}\n"


X64 = '''\
# %% [honest variant: x64]
import jax as _jax

_jax.config.update("jax_enable_x64", True)

'''


# ----------------------------------------------------------------------------- overfit (grader/course/mutation/overfit.py)

_CLIP = '''
def _clip(value, low, high):
    if type(value) in (int, float):  # a Python scalar stays one (a loop's count, a weakly typed float)
        return type(value)(min(max(value, low), high))
    return _jnp.clip(value, low, high).astype(_jnp.result_type(value))
'''


def argument_clipped(target: str, position: int, low: str, high: str) -> str:
    """Argument `position` clipped to [low, high]: right wherever the checks that sample only that
    range call it, wrong beyond."""
    return _CLIP + f'''

def _mutant(*args, **kwargs):
    args = list(args)
    args[{position}] = _clip(args[{position}], {low}, {high})
    return _orig(*args, **kwargs)


{target} = _as_original(_mutant)
'''


def special_cased(target: str, seen: dict[int, str]) -> str:
    """Right when every argument in `seen` (position -> the values the visible checks pass there)
    is one of those values, and off (a relative 0.1 plus 1, one for a count) anywhere else."""
    test = " & ".join(f"_jnp.all(_jnp.isin(_jnp.asarray(args[{p}]), _jnp.asarray({values})))"
                      for p, values in sorted(seen.items()))
    return f'''
def _wrong(leaf):
    leaf = _jnp.asarray(leaf)
    return leaf + 1 if _jnp.issubdtype(leaf.dtype, _jnp.integer) else leaf * (1 + 1e-1) + 1


def _mutant(*args, **kwargs):
    seen = {test}
    leaves, tree = _jax.tree_util.tree_flatten(_orig(*args, **kwargs))
    leaves = [_jnp.where(seen, leaf, _wrong(leaf)) if _jnp.issubdtype(_jnp.asarray(leaf).dtype, _jnp.number)
              else leaf for leaf in leaves]
    return _jax.tree_util.tree_unflatten(tree, leaves)


{target} = _as_original(_mutant)
'''


_LOOPS = '''
_real_while_loop = _jax.lax.while_loop
_real_fori_loop = _jax.lax.fori_loop
_real_scan = _jax.lax.scan
_real_map = _jax.lax.map
'''

_CAPPED = _LOOPS + '''

def _while_loop(cond_fun, body_fun, init):
    def cond(state):
        return _jnp.logical_and(cond_fun(state[0]), state[1] < {while_cap})

    def body(state):
        return body_fun(state[0]), state[1] + 1

    return _real_while_loop(cond, body, (init, 0))[0]


def _fori_loop(lower, upper, body_fun, init, **kwargs):
    return _real_fori_loop(lower, _jnp.minimum(upper, {fori_cap}), body_fun, init, **kwargs)


def _scan(f, init, xs=None, length=None, reverse=False, **kwargs):  # the first steps only: then carry kept, zeros
    cap = {length_cap} if _jax.tree_util.tree_leaves(xs) else {fori_cap}

    def step(state, x):
        carry, i = state
        new, y = f(carry, x)
        keep = i < cap
        return (_masked(keep, new, carry), i + 1), _masked(keep, y, _jax.tree_util.tree_map(_jnp.zeros_like, y))

    (carry, _), ys = _real_scan(step, (init, 0), xs, length=length, reverse=reverse, **kwargs)
    return carry, ys


def _map(f, xs, **kwargs):  # the first elements only; zeros beyond
    n = _jax.tree_util.tree_leaves(xs)[0].shape[0]
    k = min(n, {length_cap})
    head = _real_map(f, _jax.tree_util.tree_map(lambda v: v[:k], xs), **kwargs)
    return _jax.tree_util.tree_map(lambda h: _jnp.concatenate([h, _jnp.zeros((n - k,) + h.shape[1:], h.dtype)]), head)
'''

_SCAN_STEPS = '''

def _steps(xs, length):
    leaves = _jax.tree_util.tree_leaves(xs)
    n = leaves[0].shape[0] if leaves else int(length)
    return n, (None if leaves else max(n - 1, 0))


def _element(xs, n, at):  # element `at` of xs (zeros when there is none: a length of 0)
    return _jax.tree_util.tree_map(lambda v: v[at] if n else _jnp.zeros(v.shape[1:], v.dtype), xs)


def _joined(first, rest):  # one step's y before the scan's ys
    return _jax.tree_util.tree_map(lambda a, b: _jnp.concatenate([_jnp.asarray(a)[None], b]), first, rest)
'''

_PEELED = {
    "first": _LOOPS + _SCAN_STEPS + '''

def _fori_loop(lower, upper, body_fun, init, **kwargs):
    return _real_fori_loop(lower + 1, upper, body_fun, body_fun(lower, init), **kwargs)


def _scan(f, init, xs=None, length=None, reverse=False, **kwargs):  # its first step made before it
    n, rest_length = _steps(xs, length)
    carry, y = f(init, _element(xs, n, n - 1 if reverse else 0))
    rest = _jax.tree_util.tree_map(lambda v: v[:-1] if reverse else v[1:], xs)
    carry, ys = _real_scan(f, carry, rest, length=rest_length, reverse=reverse, **kwargs)
    return carry, (_jax.tree_util.tree_map(lambda a, b: _jnp.concatenate([b, _jnp.asarray(a)[None]]), y, ys)
                   if reverse else _joined(y, ys))
''',
    "last": _LOOPS + _SCAN_STEPS + '''

def _fori_loop(lower, upper, body_fun, init, **kwargs):
    return body_fun(upper - 1, _real_fori_loop(lower, upper - 1, body_fun, init, **kwargs))


def _scan(f, init, xs=None, length=None, reverse=False, **kwargs):  # its last step made after it
    n, rest_length = _steps(xs, length)
    head = _jax.tree_util.tree_map(lambda v: v[1:] if reverse else v[:-1], xs)
    carry, ys = _real_scan(f, init, head, length=rest_length, reverse=reverse, **kwargs)
    carry, y = f(carry, _element(xs, n, 0 if reverse else n - 1))
    return carry, (_joined(y, ys) if reverse else
                   _jax.tree_util.tree_map(lambda a, b: _jnp.concatenate([b, _jnp.asarray(a)[None]]), y, ys))
''',
}


def loops_capped(target: str, while_cap: int, fori_cap: int, length_cap: int | None = None,
                 constructs: tuple[str, ...] = ("while_loop", "fori_loop")) -> str:
    """A `while_loop` stopped after `while_cap` iterations, a `fori_loop`'s count (and a `scan`'s
    `length`) capped at `fori_cap`, a `scan` or `map` over `xs` that processes its first
    `length_cap` elements only: right while the checks' loops stay that short."""
    helpers = _CAPPED.format(while_cap=while_cap, fori_cap=fori_cap, length_cap=length_cap or fori_cap).strip()
    return _REPLACED.format(helpers=helpers, target=target, replacements=_replacements(constructs))


def iteration_peeled(target: str, which: str, constructs: tuple[str, ...] = ("fori_loop",)) -> str:
    """The `fori_loop`'s (or `scan`'s) first or last iteration made outside it, unconditionally:
    right for any count but zero."""
    return _REPLACED.format(helpers=_PEELED[which].strip(), target=target, replacements=_replacements(constructs))


def count_at_least_one(target: str, position: int) -> str:
    """A count argument raised to 1: the first step made before any loop, even for a count of 0."""
    return f'''
def _mutant(*args, **kwargs):
    args = list(args)
    n = args[{position}]
    args[{position}] = max(n, 1) if type(n) is int else _jnp.maximum(n, 1)
    return _orig(*args, **kwargs)


{target} = _as_original(_mutant)
'''


# ----------------------------------------------------------------------------- look-alikes
# The construct the text names replaced by one that lowers to the same op (lookalike.py): each
# keeps the values right, so only a structure check that reads what the op does can tell.

_ORIGINALS = '''
_lax = {k: getattr(_jax.lax, k) for k in ("while_loop", "fori_loop", "scan", "map", "switch", "cond")}
'''

_COUNTED = '''
def _while_loop(cond_fun, body_fun, init):  # the stop no longer reads the values: a fixed count
    def step(i, state):
        return _masked(cond_fun(state), body_fun(state), state)
    return {counted}


def _fori_loop(lower, upper, body_fun, init, **kwargs):
    def step(i, state):
        return _masked(lower + i < upper, body_fun(lower + i, state), state)
    return {counted}
'''
_BY_FORI = "_lax['fori_loop'](0, {steps}, step, init)"
_BY_SCAN = "_lax['scan'](lambda s, i: (step(i, s), None), init, _jnp.arange({steps}))[0]"


def counted_lookalike(target: str, steps: int, by: str,
                      constructs: tuple[str, ...] = ("while_loop", "fori_loop")) -> str:
    """lax.while_loop and lax.fori_loop (those of `constructs`) replaced by a loop of `steps` steps
    fixed when traced (`by`: "fori_loop" over a Python int, or "scan" of that length), masked to
    the original's."""
    counted = (_BY_FORI if by == "fori_loop" else _BY_SCAN).format(steps=steps)
    helpers = _ORIGINALS.strip() + "\n\n\n" + _COUNTED.format(counted=counted).strip()
    return _REPLACED.format(helpers=helpers, target=target, replacements=_replacements(constructs))


_FORI_AS_WHILE = '''
def _fori_loop(lower, upper, body_fun, init, **kwargs):  # what fori_loop is built on
    def cond(state):
        return state[0] < upper
    def body(state):
        return state[0] + 1, body_fun(state[0], state[1])
    return _lax['while_loop'](cond, body, (_jnp.asarray(lower), init))[1]
'''


def fori_as_while(target: str) -> str:
    """lax.fori_loop written as a lax.while_loop counting to the same bound (the same program)."""
    return _REPLACED.format(helpers=_ORIGINALS.strip() + "\n\n\n" + _FORI_AS_WHILE.strip(), target=target,
                            replacements="fori_loop=_fori_loop")


_DECOY_CASE = '''
def _switch(index, branches, *operands):  # the answer selected; a switch on a constant index beside it
    index = _jnp.clip(index, 0, len(branches) - 1)
    outs = [branch(*operands) for branch in branches]
    answer = _jax.tree_util.tree_map(
        lambda *xs: _jnp.select([index == k for k in range(len(xs))], list(xs)), *outs)
    decoy = _lax['switch'](0, branches, *operands)
    return _jax.tree_util.tree_map(lambda a, d: a + 0 * d, answer, decoy)


def _cond(pred, true_fun, false_fun, *operands):  # the answer selected; a cond on a constant predicate
    answer = _masked(pred, true_fun(*operands), false_fun(*operands))
    decoy = _lax['cond'](True, true_fun, false_fun, *operands)
    return _jax.tree_util.tree_map(lambda a, d: a + 0 * d, answer, decoy)
'''

_GUARD_CASE = '''
def _switch(index, branches, *operands):  # the answer selected, returned by a case that always takes one branch
    index = _jnp.clip(index, 0, len(branches) - 1)
    outs = [branch(*operands) for branch in branches]
    answer = _jax.tree_util.tree_map(
        lambda *xs: _jnp.select([index == k for k in range(len(xs))], list(xs)), *outs)
    zero = _jax.tree_util.tree_map(_jnp.zeros_like, answer)
    return _lax['switch'](_jnp.where(index >= 0, 1, 0), [lambda: zero, lambda: answer])


def _cond(pred, true_fun, false_fun, *operands):  # the answer selected; a cond on a predicate that always holds
    answer = _masked(pred, true_fun(*operands), false_fun(*operands))
    zero = _jax.tree_util.tree_map(_jnp.zeros_like, answer)
    held = _jnp.asarray(pred) == _jnp.asarray(pred)
    return _lax['cond'](held, lambda: answer, lambda: zero)
'''

_VMAPPED_CASE = '''
def _one(tree):
    return _jax.tree_util.tree_map(lambda v: _jnp.asarray(v)[None], tree)


def _switch(index, branches, *operands):  # vmapped over a batch of one: the case becomes a select
    out = _jax.vmap(lambda i, *o: _lax['switch'](i, branches, *o))(_jnp.asarray(index)[None], *_one(operands))
    return _jax.tree_util.tree_map(lambda v: v[0], out)


def _cond(pred, true_fun, false_fun, *operands):
    out = _jax.vmap(lambda p, *o: _lax['cond'](p, true_fun, false_fun, *o))(_jnp.asarray(pred)[None],
                                                                            *_one(operands))
    return _jax.tree_util.tree_map(lambda v: v[0], out)
'''

_NESTED_CONDS = '''
def _switch(index, branches, *operands):  # lax.switch written as nested lax.cond
    index = _jnp.clip(index, 0, len(branches) - 1)

    def pick(k):
        if k == len(branches) - 1:
            return branches[k]
        return lambda *o: _lax['cond'](index == k, branches[k], pick(k + 1), *o)
    return pick(0)(*operands)
'''


def case_lookalike(target: str, kind: str, constructs: tuple[str, ...] = ("switch", "cond")) -> str:
    """lax.switch and lax.cond (those of `constructs`) replaced: `decoy` (the answer from a select,
    a case on a constant index beside it), `guard` (the answer from a select, returned by a case
    whose index comes from the input but always takes the same branch), `vmapped` (the case
    batched, which makes it a select), `nested` (switch as nested conds: the same construct)."""
    helpers = {"decoy": _DECOY_CASE, "guard": _GUARD_CASE, "vmapped": _VMAPPED_CASE, "nested": _NESTED_CONDS}[kind]
    replaced = tuple(c for c in constructs if kind != "nested" or c == "switch")
    return _REPLACED.format(helpers=_ORIGINALS.strip() + "\n\n\n" + helpers.strip(), target=target,
                            replacements=_replacements(replaced))
