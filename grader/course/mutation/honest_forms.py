"""Honest variants in the forms the text allows, which must keep full marks (`grade validate`).

Derived per function from how its text has it judged (`FunctionUse.judged`, the spec's
`[[exercises.functions]]`), only where the mode and the reference allow them:

- 'either' (jit is optional): `without_jit`, the reference's function un-jitted (its `__wrapped__`,
  or its def re-made without the jit decorator); `host_numpy`, its arguments brought to the host
  (Python numbers, NumPy arrays) and its array results returned as NumPy: it cannot be traced, so
  the grader must call it eagerly; `python_loop`, where the reference loops with a lax loop, the
  loop written in Python (the unrolling of `construct_removed`, a mutant for a traced function).
- 'eager' (plain Python): the reference with a `float()` log of every output, its own and those of
  the interface functions it calls (each step of a loop); printing them; returning Python floats
  and ints instead of arrays; and `host_numpy`, `python_loop` as above.
- any mode, where the reference's def uses jax.numpy: `jnp_as_np`, the def rewritten with
  `from jax import numpy as np` (`jnp.` written `np.`), executed in its own copy of the module's
  globals, so that the rest of the module keeps NumPy as `np`. A function that is no def of the
  module (a lambda, a factory's result) is "not applicable", with the reason.
- An answer value that is a list (or a tuple) of bools (`predictions`): a NumPy bool array, the
  tuple (or the list), and the integers 0 and 1 ("a list of 8 bools" is any sequence of 8 bool-like
  values: docs/writing-an-assignment.md, "How answers are compared"). A function returning a
  tuple or a list gets the other containers in families.py (`honest_containers`).

A variant that would break the reference's other functions, which call it as the reference wrote
it (a NumPy `step` inside `train_fori`'s fori_loop), is judged by its own checks only; the others
are graded whole.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from typing import Any

import numpy as np

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
    "list": "list({name})",
    "zero_one_ints": "[int(bool(_v)) for _v in {name}]",
}
_BOOLS = r"\s*(?:(?:True|False)\s*,\s*)*(?:True|False)\s*,?\s*"
_BOOL_CONTAINER = {"list": re.compile(rf"\[{_BOOLS}\]"), "tuple": re.compile(rf"\({_BOOLS}\)")}

PYTHON_LOOPS = ("while_loop", "fori_loop", "scan", "map")  # python_loop writes these as Python loops


def plain_python(use: FunctionUse) -> bool:
    """Whether the spec judges `use` as plain Python: every check that calls it runs it eagerly."""
    return use.judged == "eager"


def jit_optional(use: FunctionUse) -> bool:
    """Whether the text allows `use` both jitted and not (judged 'either')."""
    return use.judged == "either"


def derive(build: MutantSink, use: FunctionUse | NameUse, facts: FunctionFacts | None) -> None:
    """Add the honest forms of `use` to `build`: those its mode allows, or a list of bools'."""
    if isinstance(use, NameUse):
        _bool_sequences(build, use)
        return
    if plain_python(use) and facts is not None and not facts.error:
        _plain_python(build, use)
    if jit_optional(use):
        _without_jit(build, use, facts)
    if plain_python(use) or jit_optional(use):
        _host_numpy(build, use)
        _python_loop(build, use, facts)
    _jnp_as_np(build, use)


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
    """A list of bools as a tuple, a tuple as a list, either as a NumPy bool array and as 0 and 1."""
    value = build.facts.values.get(use.name, "")
    written = [kind for kind, pattern in _BOOL_CONTAINER.items() if pattern.fullmatch(value)]
    if use.keys or not written:
        return
    for kind, code in _BOOL_SEQUENCES.items():
        if kind in _BOOL_CONTAINER and kind in written:  # the reference's own container
            continue
        build.add(f"{use.name}.as_{kind}", "honest", f"{use.name} as a {kind.replace('_', ' ')}", use,
                  snippets.value_changed(use.name, code.format(name=use.name)))


# ----------------------------------------------------------------------------- jit optional, plain Python


def _own_checks(use: FunctionUse) -> list[str]:
    """What a variant that the reference's other functions could not call must pass: the checks
    that call the function itself, of every kind."""
    return list(use.own_checks or use.checks)


def _without_jit(build: MutantSink, use: FunctionUse, facts: FunctionFacts | None) -> None:
    """Graded whole: the reference's other functions call it un-jitted (inside their own traces)."""
    name = f"{use.name}.without_jit"
    summary = f"{use.name} not jitted, as its text allows (jax.jit is optional)"
    if facts is None:
        return
    if not facts.jitted:
        build.not_applicable(name, "honest", use, f"{use.name} is not a jax.jit result in the reference: the "
                             "reference itself is its un-jitted form", expected=[], summary=summary)
        return
    if facts.wrapped:
        build.add(name, "honest", summary, use, snippets.without_jit(use.name), expected=[])
        return
    found, why = definition(build.reference, use.name)
    if found is None:
        build.not_applicable(name, "honest", use, f"its jax.jit result has no __wrapped__, and {why}",
                             expected=[], summary=summary)
        return
    undecorated = _without_decorators(found, "jit")
    if undecorated is None:
        build.not_applicable(name, "honest", use, "its jax.jit result has no __wrapped__, and its def has no "
                             "jit decorator to take away", expected=[], summary=summary)
        return
    build.add(name, "honest", summary, use, snippets.redefined(use.name, undecorated), expected=[])


def _has_array(value: Any) -> bool:
    if isinstance(value, (np.ndarray, np.generic)):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_array(v) for v in value)
    if isinstance(value, dict):
        return any(_has_array(v) for v in value.values())
    return False


def _host_numpy(build: MutantSink, use: FunctionUse) -> None:
    """Where the checks pass it an array: on the host, it cannot be traced, and proves the eager
    call (the fallback of an 'either' function) keeps its points."""
    if not any(_has_array(a) for a in use.sample):
        return  # Python numbers in (bucket_size(n)): no array to bring to the host
    build.add(f"{use.name}.host_numpy", "honest", f"{use.name} computes on the host: Python numbers and NumPy "
              "arrays in, NumPy arrays out (jax.jit cannot trace it)", use, snippets.host_numpy(use.name),
              expected=_own_checks(use))


def _python_loop(build: MutantSink, use: FunctionUse, facts: FunctionFacts | None) -> None:
    used = facts.uses() if facts is not None else None
    loops = tuple(k for k in PYTHON_LOOPS if used is not None and k in used)
    if not loops:
        return  # no lax loop to write in Python
    build.add(f"{use.name}.python_loop", "honest", f"{use.name} loops in Python (no "
              f"{' / '.join('lax.' + k for k in loops)}) and is not jitted, as its text allows", use,
              snippets.python_loops(use.name, loops), expected=_own_checks(use))


# ----------------------------------------------------------------------------- jax.numpy as np


def _jnp_as_np(build: MutantSink, use: FunctionUse) -> None:
    """Graded whole: the same function, which the reference's other functions call as before."""
    name = f"{use.name}.jnp_as_np"
    summary = f"{use.name} written with `from jax import numpy as np` (np. where the reference writes jnp.)"
    try:
        aliases = jax_numpy_aliases(ast.parse(build.reference)) - {"np"}
    except SyntaxError:
        return
    if not aliases:
        return  # the module never names jax.numpy: nothing to write as np
    found, why = definition(build.reference, use.name)
    if found is None:
        build.not_applicable(name, "honest", use, why, expected=[], summary=summary)
        return
    names = _names(found)
    used = sorted(aliases & names)
    if not used:
        return
    if "np" in names:
        build.not_applicable(name, "honest", use, f"{use.name} uses np (NumPy) as well as {used[0]}: with np "
                             "bound to jax.numpy it would be another function", expected=[], summary=summary)
        return
    rewritten = _renamed(found, set(used), "np")
    build.add(name, "honest", summary, use, snippets.redefined(use.name, rewritten, "np"), expected=[])


def jax_numpy_aliases(tree: ast.Module) -> set[str]:
    """The names the module binds to jax.numpy at its top level (`import jax.numpy as jnp`,
    `from jax import numpy as jnp`)."""
    found = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            found |= {a.asname for a in node.names if a.name == "jax.numpy" and a.asname}
        elif isinstance(node, ast.ImportFrom) and node.module == "jax" and not node.level:
            found |= {a.asname or a.name for a in node.names if a.name == "numpy"}
    return found


def definition(source: str, name: str) -> tuple[str, str] | tuple[None, str]:
    """(the source of the module-level def that `name` is bound to last, its decorators included,
    ""), or (None, why there is none: a sentence that starts with the name)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None, f"{name}: the reference does not parse"
    last: ast.stmt | None = None
    for node in tree.body:
        if _binds(node, name):
            last = node
    if last is None:
        return None, f"{name} is not bound at the top of the reference module: there is no def of it to rewrite"
    if not isinstance(last, (ast.FunctionDef, ast.AsyncFunctionDef)):
        how = {ast.Assign: "an assignment (a lambda, or a function a factory builds)",
               ast.AnnAssign: "an assignment", ast.Import: "an import", ast.ImportFrom: "an import",
               ast.ClassDef: "a class"}.get(type(last), "a statement that is no def")
        return None, (f"{name} is bound by {how} in the reference, not by a def: there is no source of it "
                      "to rewrite")
    lines = source.splitlines()
    start = min([d.lineno for d in last.decorator_list] + [last.lineno])
    return "\n".join(lines[start - 1:last.end_lineno]) + "\n", ""


def _binds(node: ast.stmt, name: str) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for target in node.targets
                   for t in ast.walk(target))
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return isinstance(node.target, ast.Name) and node.target.id == name
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return any((a.asname or a.name.split(".")[0]) == name for a in node.names)
    return False


_LAYOUT = (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)


def _tokens(text: str) -> list[tuple[tokenize.TokenInfo, bool]]:
    """The def's tokens, each with whether it is a name read or bound (not an attribute: `x.np`)."""
    out, previous = [], None
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        out.append((token, token.type == tokenize.NAME and (previous is None or previous.string != ".")))
        if token.type not in _LAYOUT:
            previous = token
    return out


def _names(text: str) -> set[str]:
    return {token.string for token, is_name in _tokens(text) if is_name}


def _renamed(text: str, old: set[str], new: str) -> str:
    """The def's text with the names `old` written `new`, token by token (comments, strings stay)."""
    return tokenize.untokenize([token._replace(string=new) if is_name and token.string in old else token
                                for token, is_name in _tokens(text)])


def _without_decorators(text: str, word: str) -> str | None:
    """The def's text without the decorators that name `word` (None when none does)."""
    tree = ast.parse(text)
    node = tree.body[0]
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    lines = text.splitlines()
    dropped = {n for d in node.decorator_list if word in (ast.get_source_segment(text, d) or "")
               for n in range(d.lineno, (d.end_lineno or d.lineno) + 1)}
    if not dropped:
        return None
    return "\n".join(line for n, line in enumerate(lines, start=1) if n not in dropped) + "\n"
