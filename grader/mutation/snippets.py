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
