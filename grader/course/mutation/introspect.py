"""What the reference solution's functions are and return: the facts output mutants need.

Run in a worker process (it imports JAX and executes the instructor's reference module, never a
student's): each function is called once on the first case the checks give it, and its output's
leaves (kind, shape) are read, with whether it is a jax.jit result and its parameters' defaults.

It also records which constructs each function uses (`CONSTRUCTS`: the loops and cases of
jax.lax, jax.vmap, jax.jit), the way a derived mutant's cell would meet them: traced (or called,
when it is not jitted) once with `jax.lax.<name>` and `jax.<name>` replaced by recorders, its
helpers too. A derived cell changes a construct by replacing that same attribute, so what is not
recorded (a function that loops with jnp.cumsum, or `from jax.lax import scan`) no cell can change.
The names its source (and the helpers it names) mention are kept as well, for a function that
cannot be called, and to say why a construct it names could not be changed.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, Field

LAX_CONSTRUCTS = ("while_loop", "fori_loop", "scan", "map", "cond", "switch")  # attributes of jax.lax
JAX_CONSTRUCTS = ("vmap", "jit")  # attributes of jax
CONSTRUCTS = LAX_CONSTRUCTS + JAX_CONSTRUCTS


class Leaf(BaseModel):
    kind: Literal["float", "int", "bool", "other"]
    ndim: int


class FunctionFacts(BaseModel):
    name: str
    jitted: bool
    wrapped: bool = Field(default=False, description=(
        "it has `__wrapped__` (a jax.jit result made of a Python function): what its un-jitted form calls"))
    defaults: dict[int, str] = Field(default_factory=dict, description="position -> repr of its default")
    leaves: list[Leaf] = Field(default_factory=list)
    container: str = Field(default="leaf", description="leaf, tuple, list or other: how the leaves come back")
    error: str | None = Field(default=None, description="why it could not be called on its first case")
    constructs: list[str] | None = Field(default=None, description=(
        "the CONSTRUCTS it calls as jax.lax.<name> / jax.<name> while it is traced on its first case (its "
        "helpers too): what a derived cell can replace; None when it could not be traced"))
    written: list[str] | None = Field(default=None, description=(
        "the CONSTRUCTS its source names, and the source of the module-level helpers it names, however "
        "imported; None when the reference does not parse"))

    def uses(self) -> set[str] | None:
        """The constructs a derived cell can change in it: those traced, else those its source
        names (None: unknown, when neither could be read)."""
        if self.constructs is not None:
            return set(self.constructs)
        return set(self.written) if self.written is not None else None


class ReferenceFacts(BaseModel):
    functions: dict[str, FunctionFacts] = Field(default_factory=dict)
    values: dict[str, str] = Field(default_factory=dict, description="name -> repr of the reference's value")


def _leaf(value: Any) -> Leaf:
    import numpy as np

    kind = np.asarray(value).dtype.kind if not isinstance(value, (str, bytes)) else "O"
    mapped = {"f": "float", "i": "int", "u": "int", "b": "bool"}.get(kind, "other")
    return Leaf(kind=mapped, ndim=int(np.ndim(value)) if mapped != "other" else 0)  # type: ignore[arg-type]


def _defaults(fn: Any) -> dict[int, str]:
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return {}
    return {i: repr(p.default) for i, p in enumerate(parameters)
            if p.default is not inspect.Parameter.empty and type(p.default) in (bool, int, float)}


def changeable(facts: FunctionFacts | None, knows: tuple[str, ...]) -> tuple[str, ...]:
    """The constructs of `knows` that the reference's function uses, in the order of `knows`
    (all of them when that is unknown: no facts, or a function neither traced nor read)."""
    used = facts.uses() if facts is not None else None
    return knows if used is None else tuple(k for k in knows if k in used)


def unchangeable(name: str, facts: FunctionFacts | None, knows: tuple[str, ...], what: str) -> str:
    """Why a family cannot make its mutant of `name`: it uses none of the constructs it knows."""
    reason = f"{name} uses no {what} (it knows {', '.join(knows)})"
    named = [k for k in knows if facts is not None and facts.written and k in facts.written]
    if named and facts is not None and facts.constructs is not None:
        reason += (f"; its source names {', '.join(named)}, but not called as jax.lax.{named[0]} while it is "
                   "traced, the attribute a derived cell replaces")
    return reason


@contextlib.contextmanager
def _recording(found: set[str]) -> Iterator[None]:
    """Every CONSTRUCTS attribute of jax.lax and jax replaced by a recorder of its calls."""
    import jax

    kept = [(module, n, getattr(module, n)) for module, names in ((jax.lax, LAX_CONSTRUCTS), (jax, JAX_CONSTRUCTS))
            for n in names]

    def recorder(n: str, real: Any) -> Any:
        @functools.wraps(real)
        def recorded(*args: Any, **kwargs: Any) -> Any:
            found.add(n)
            return real(*args, **kwargs)
        return recorded

    for module, n, real in kept:
        setattr(module, n, recorder(n, real))
    try:
        yield
    finally:
        for module, n, real in kept:
            setattr(module, n, real)


def _traced_constructs(fn: Any, args: list[Any]) -> list[str]:
    """The constructs `fn` calls while traced as a derived cell traces it: its Python function
    under a new jax.jit when it is jitted, else called as it is; every cache cleared first, so
    a jitted helper it calls is traced again too."""
    import jax

    inner = getattr(fn, "__wrapped__", fn)
    jitted = jax.jit(inner) if hasattr(fn, "lower") else None
    found: set[str] = set()
    jax.clear_caches()
    with _recording(found):
        if jitted is not None:
            jitted.trace(*args)
        else:
            inner(*args)
    if jitted is not None:
        found.add("jit")  # what without_jit takes away (the decorator ran before the recorders)
    return sorted(found, key=CONSTRUCTS.index)


def written_constructs(source: str, name: str) -> list[str] | None:
    """The CONSTRUCTS that the module-level definition of `name` names (as `lax.scan`, `scan`, or
    an alias of an import), with the module-level helpers it names, transitively."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    top: dict[str, list[ast.AST]] = {}
    aliases: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            top.setdefault(node.name, []).append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    top.setdefault(target.id, []).append(node)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "jax":
            aliases.update({a.asname or a.name: a.name for a in node.names if a.name in CONSTRUCTS})
    words: set[str] = set()
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for node in top.get(current, []):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Attribute):  # lax.scan, jax.vmap
                    words.add(sub.attr)
                elif isinstance(sub, ast.Name):  # a name imported from jax (not Python's map), or a helper
                    if sub.id in aliases:
                        words.add(aliases[sub.id])
                    if sub.id in top and sub.id not in seen:
                        todo.append(sub.id)
    return [c for c in CONSTRUCTS if c in words]


def introspect(source: str, samples: dict[str, list[Any]], names: list[str]) -> ReferenceFacts:
    """Execute the reference module `source`, then call each function on its sample arguments."""
    import jax

    namespace: dict[str, Any] = {"__name__": "__reference__"}
    exec(compile(source, "<reference>", "exec"), namespace)  # noqa: S102 - the instructor's solution
    facts = ReferenceFacts()
    for name, args in samples.items():
        fn = namespace.get(name)
        if not callable(fn):
            facts.functions[name] = FunctionFacts(name=name, jitted=False, error="not defined in the reference")
            continue
        entry = FunctionFacts(name=name, jitted=hasattr(fn, "lower"), defaults=_defaults(fn),
                              wrapped=callable(getattr(fn, "__wrapped__", None)))
        try:
            out = fn(*args)
            leaves, tree = jax.tree_util.tree_flatten(out)
            entry.leaves = [_leaf(v) for v in leaves]
            entry.container = ("leaf" if tree.num_nodes == 1 and tree.num_leaves == 1 else
                               "tuple" if isinstance(out, tuple) and not hasattr(out, "_fields") else
                               "list" if isinstance(out, list) else "other")
        except Exception as exc:  # noqa: BLE001 - reported as a fact: no output mutants for it
            entry.error = f"{type(exc).__name__}: {exc}"[:300]
        entry.written = written_constructs(source, name)
        if entry.error is None:
            with contextlib.suppress(Exception):  # then what its source names stands for it
                entry.constructs = _traced_constructs(fn, args)
        facts.functions[name] = entry
    for name in names:
        if name in namespace:
            facts.values[name] = repr(namespace[name])
    return facts
