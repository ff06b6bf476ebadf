"""Honest variants in the forms the text allows, which must keep full marks (`grade validate`).

- A function the spec judges as plain Python (every check that calls it runs it eagerly in the
  kernel, source "kernel": "a Python loop calling step"): the reference with a `float()` log of
  every output, its own and those of the interface functions it calls (each step of a loop);
  printing them; returning Python floats and ints instead of arrays. None of them can be traced
  by jax.jit, and none needs to be.
- An answer value that is a list of bools (`predictions`): a NumPy bool array, a tuple, and the
  integers 0 and 1 ("a list of 8 bools" is any sequence of 8 bool-like values: docs/writing-an-assignment.md,
  "How answers are compared").
"""

from __future__ import annotations

import re

from grader.course.mutation import snippets
from grader.course.mutation.interface import FunctionUse, Interface, NameUse
from grader.course.mutation.introspect import FunctionFacts, ReferenceFacts
from grader.course.mutation.sink import MutantSink

# Rebinds, for the duration of each call, the interface functions the target may call to wrappers
# that report their outputs (the probe's own wrapper, counting the calls of `step`, stays inside).
_REPORTED = '''
_reported = []


def _concrete_leaves(out):
    return [_leaf for _leaf in _jax.tree_util.tree_leaves(out)
            if not isinstance(_leaf, _jax.core.Tracer) and _np.size(_leaf) == 1]


def _reporting(fn):
    def _wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        _report(out)
        return out
    return _wrapper


def _mutant(*args, **kwargs):
    _space = globals()
    _kept = {{_n: _space[_n] for _n in {others!r} if callable(_space.get(_n))}}
    for _n, _fn in _kept.items():
        _space[_n] = _reporting(_fn)
    try:
        out = _orig(*args, **kwargs)
    finally:
        _space.update(_kept)
    _report(out)
    return out


{target} = _mutant
'''

_LOGS_FLOAT = '''
def _report(out):
    _reported.append([float(_leaf) for _leaf in _concrete_leaves(out)])
'''

_PRINTS = '''
def _report(out):
    print("step:", *(f"{float(_leaf):.6g}" for _leaf in _concrete_leaves(out)))
'''

_PYTHON_NUMBERS = '''
def _python(leaf):
    kind = _np.asarray(leaf).dtype.kind
    if _np.size(leaf) != 1 or kind not in "biuf":
        return leaf
    return bool(leaf) if kind == "b" else int(leaf) if kind in "iu" else float(leaf)


def _mutant(*args, **kwargs):
    out = _orig(*args, **kwargs)
    leaves, tree = _jax.tree_util.tree_flatten(out)
    return _jax.tree_util.tree_unflatten(tree, [_python(_leaf) for _leaf in leaves])


{target} = _mutant
'''

_BOOL_SEQUENCES = {
    "numpy_bool_array": "_np.asarray({name}, dtype=bool)",
    "tuple": "tuple({name})",
    "zero_one_ints": "[int(bool(_v)) for _v in {name}]",
}


def plain_python(use: FunctionUse) -> bool:
    """Whether the spec judges `use` as plain Python: every check that calls it runs it eagerly."""
    return bool(use.checks) and set(use.checks) <= set(use.kernel_checks)


def derive(build: MutantSink, use: FunctionUse | NameUse, facts: FunctionFacts | None) -> None:
    """Add the honest forms of `use` to `build`: a plain-Python function's, or a list of bools'."""
    if isinstance(use, NameUse):
        _bool_sequences(build, use)
    elif plain_python(use) and facts is not None and not facts.error:
        _plain_python(build, use)


def derive_all(build: MutantSink, interface: Interface, facts: ReferenceFacts) -> None:
    """`derive` for every function and every answer value of the interface."""
    for use in interface.functions.values():
        derive(build, use, facts.functions.get(use.name))
    for name_use in interface.names.values():
        derive(build, name_use, None)


def _plain_python(build: MutantSink, use: FunctionUse) -> None:
    """Graded whole (`expected` empty): checks the interface does not list (an eager check that
    counts the steps) must keep their points too."""
    others = sorted(n for n in build.interface.functions if n != use.name)
    reported = _REPORTED.format(others=others, target=use.name)
    build.add(f"{use.name}.logs_with_float", "honest",
              f"{use.name} logs float() of every output, its own and its steps', as plain Python may", use,
              _LOGS_FLOAT + reported, expected=[])
    build.add(f"{use.name}.prints_every_step", "honest",
              f"{use.name} prints every output, its own and its steps'", use, _PRINTS + reported, expected=[])
    build.add(f"{use.name}.returns_python_numbers", "honest",
              f"{use.name} returns Python floats and ints instead of arrays", use,
              _PYTHON_NUMBERS.format(target=use.name), expected=[])


def _bool_sequences(build: MutantSink, use: NameUse) -> None:
    value = build.facts.values.get(use.name, "")
    if use.keys or not re.fullmatch(r"\[\s*(?:(?:True|False)\s*,\s*)*(?:True|False)\s*\]", value):
        return
    for kind, code in _BOOL_SEQUENCES.items():
        build.add(f"{use.name}.as_{kind}", "honest", f"{use.name} as a {kind.replace('_', ' ')}", use,
                  snippets.value_changed(use.name, code.format(name=use.name)))
