"""The code of derived mutants: cells appended to the reference module, run in the kernel.

Each cell rebinds one name of the reference. `_orig` is the reference's function and `_inner`
the Python function under its jax.jit; `_as_original` jits the mutant again when the reference
was jitted, so the mutation is the only difference. Constructs are removed by replacing the
`jax.lax` function the reference calls, only while the mutant's function is traced.
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


def without_jit(target: str) -> str:
    return f'''
def _mutant(*args, **kwargs):
    return _inner(*args, **kwargs)


{target} = _mutant
'''


def made_static(target: str, position: int) -> str:
    return f"{target} = _jax.jit(_inner, static_argnums=({position},))\n"


_REPLACED = '''
@_contextlib.contextmanager
def _replaced(**functions):
    kept = {{k: getattr(_jax.lax, k) for k in functions}}
    for k, v in functions.items():
        setattr(_jax.lax, k, v)
    try:
        yield
    finally:
        for k, v in kept.items():
            setattr(_jax.lax, k, v)


def _masked(keep, new, old):
    return _jax.tree_util.tree_map(lambda n, o: _jnp.where(keep, n, o), new, old)


{helpers}


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


def without_case(target: str) -> str:
    return _REPLACED.format(helpers=_WITHOUT_CASE.strip(), target=target,
                            replacements="switch=_switch, cond=_cond")


def without_while(target: str, unroll: int, bound: int) -> str:
    return _REPLACED.format(helpers=_WITHOUT_WHILE.format(unroll=unroll, bound=bound).strip(), target=target,
                            replacements="while_loop=_while_loop, fori_loop=_fori_loop")


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
'''

_PEELED = {
    "first": _LOOPS + '''

def _fori_loop(lower, upper, body_fun, init, **kwargs):
    return _real_fori_loop(lower + 1, upper, body_fun, body_fun(lower, init), **kwargs)
''',
    "last": _LOOPS + '''

def _fori_loop(lower, upper, body_fun, init, **kwargs):
    return body_fun(upper - 1, _real_fori_loop(lower, upper - 1, body_fun, init, **kwargs))
''',
}


def loops_capped(target: str, while_cap: int, fori_cap: int) -> str:
    """A `while_loop` stopped after `while_cap` iterations, a `fori_loop`'s count capped at
    `fori_cap`: right while the checks' loops stay that short."""
    return _REPLACED.format(helpers=_CAPPED.format(while_cap=while_cap, fori_cap=fori_cap).strip(), target=target,
                            replacements="while_loop=_while_loop, fori_loop=_fori_loop")


def iteration_peeled(target: str, which: str) -> str:
    """The `fori_loop`'s first or last iteration made outside it, unconditionally: right for any
    count but zero."""
    return _REPLACED.format(helpers=_PEELED[which].strip(), target=target, replacements="fori_loop=_fori_loop")


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
_lax = {k: getattr(_jax.lax, k) for k in ("while_loop", "fori_loop", "scan", "switch", "cond")}
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


def counted_lookalike(target: str, steps: int, by: str) -> str:
    """lax.while_loop and lax.fori_loop replaced by a loop of `steps` steps fixed when traced
    (`by`: "fori_loop" over a Python int, or "scan" of that length), masked to the original's."""
    counted = (_BY_FORI if by == "fori_loop" else _BY_SCAN).format(steps=steps)
    helpers = _ORIGINALS.strip() + "\n\n\n" + _COUNTED.format(counted=counted).strip()
    return _REPLACED.format(helpers=helpers, target=target,
                            replacements="while_loop=_while_loop, fori_loop=_fori_loop")


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


def case_lookalike(target: str, kind: str) -> str:
    """lax.switch and lax.cond replaced: `decoy` (the answer from a select, a case on a constant
    index beside it), `vmapped` (the case batched, which makes it a select), `nested` (switch as
    nested conds: the same construct)."""
    helpers = {"decoy": _DECOY_CASE, "vmapped": _VMAPPED_CASE, "nested": _NESTED_CONDS}[kind]
    replacements = "switch=_switch" if kind == "nested" else "switch=_switch, cond=_cond"
    return _REPLACED.format(helpers=_ORIGINALS.strip() + "\n\n\n" + helpers.strip(), target=target,
                            replacements=replacements)
