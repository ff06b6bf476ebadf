"""The `overfit` family: mutants right on the inputs the checks are known to sample and wrong
elsewhere in the domain the text implies, which the hidden checks' draws must catch.

For every argument the spec declares a domain for (`[[exercises.domains]]`), read with what the
visible checks pass there (the notebook's rows, and the draws of checks that are not hidden):

- `<f>.arg<p>_clipped`: the argument clipped to the range the visible checks sample;
- `<f>.visible_special_cased`: right when the declared arguments are values the visible checks
  pass, off anywhere else;
- `<f>.loop_capped`: (a function whose program must have a `while`) its `lax.while_loop` stopped
  after a dozen iterations, its `lax.fori_loop`'s count (a `lax.scan`'s `length`) capped at the
  largest the visible checks pass, its `lax.scan` or `lax.map` over an array processing only as many
  elements as the longest array the visible checks pass (`CAPS`: the loops it knows);
- `<f>.first_iteration_peeled` / `<f>.last_iteration_peeled`: (a `while` and a declared count) one
  iteration made outside the `fori_loop` or `scan` (`PEELS`), wrong only for a count of 0;
- `<f>.arg<p>_at_least_1`: (a declared count, no `while` required: a Python loop) the count raised
  to 1, the first step made before the loop.

Each is expected to be killed by the hidden checks that call the function; of a reference that
uses none of the loops `loop_capped` or the peeled mutants know, they are recorded as not
applicable, with the reason. What the visible
checks sample comes from the spec, not from the interface: `sampling` reads it, and
`grader.course.validate` derives the mutants inside `sampled(...)`; without it this family derives none
(a synthetic interface has no spec to read).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, Field

from grader.course.mutation import snippets
from grader.course.mutation.interface import FunctionUse, check_calls
from grader.course.mutation.introspect import FunctionFacts, changeable, unchangeable
from grader.course.mutation.sink import MutantSink
from grader.spec import ArgumentDomain

if TYPE_CHECKING:
    from grader.assignment import Assignment

WHILE_CAP = 12  # "a Newton loop capped at a dozen iterations" (issue 28): survives a up to 1e4
MAX_SEEN = 256  # distinct visible values a special-cased mutant may list in its code
CAPS = ("while_loop", "fori_loop", "scan", "map")  # the loops loop_capped can cap
PEELS = ("fori_loop", "scan")  # the loops whose first or last iteration can be peeled


class DeclaredArgument(BaseModel):
    """A declared argument of one function, with what the visible checks pass there."""

    position: int
    domain: ArgumentDomain
    seen: list[float] = Field(default_factory=list, description=(
        "distinct values (array elements flattened) the visible checks pass to any function taking it"))


class FunctionSampling(BaseModel):
    arguments: list[DeclaredArgument] = Field(default_factory=list)
    hidden_checks: list[str] = Field(default_factory=list, description="full ids of the hidden checks calling it")
    largest_count: int | None = Field(default=None, description="the largest whole number visible checks pass it")
    longest: int | None = Field(default=None, description=(
        "the longest leading axis of an array the visible checks pass it (a scan's or map's length)"))


class Sampling(BaseModel):
    """What the spec says about the functions overfit mutants are derived for."""

    functions: dict[str, FunctionSampling] = Field(default_factory=dict)


_SAMPLING: contextvars.ContextVar[Sampling | None] = contextvars.ContextVar("overfit_sampling", default=None)


@contextlib.contextmanager
def sampled(sampling: Sampling) -> Iterator[None]:
    """Derive this family, inside the block, from `sampling`."""
    token = _SAMPLING.set(sampling)
    try:
        yield
    finally:
        _SAMPLING.reset(token)


def _numbers(value: Any) -> list[float]:
    array = np.asarray(value)
    if array.dtype.kind not in "fiu" or array.size > MAX_SEEN:
        return []
    return [float(v) for v in array.ravel()]


def sampling(loaded: Assignment, seed: int) -> Sampling:
    """Per function with a declared argument: the visible checks' values at each declared
    position (shared by the functions taking the argument), its hidden checks, its largest count."""
    found = Sampling()
    for exercise in loaded.spec.exercises:
        seen: dict[str, set[float]] = {d.argument: set() for d in exercise.domains}
        calls = []
        for check in exercise.checks:
            full_id = f"{exercise.id}.{check.id}"
            function, cases = check_calls(check, loaded, seed, full_id)
            if function is not None:
                calls.append((function, check.hidden, full_id, cases))
        for function, hidden, _, cases in calls:
            if hidden:
                continue
            for domain in exercise.domains:
                if function in domain.functions:
                    for case in cases:
                        if domain.position_in(function) < len(case.args):
                            seen[domain.argument].update(_numbers(case.args[domain.position_in(function)]))
        for domain in exercise.domains:
            for function in domain.functions:
                entry = found.functions.setdefault(function, FunctionSampling())
                entry.arguments.append(DeclaredArgument(position=domain.position_in(function), domain=domain,
                                                        seen=sorted(seen[domain.argument])))
        for function, hidden, full_id, cases in calls:
            entry = found.functions.get(function)
            if entry is None:
                continue
            if hidden:
                entry.hidden_checks.append(full_id)
                continue
            counts = [int(a) for case in cases for a in case.args if type(a) is int]
            if counts:
                entry.largest_count = max([entry.largest_count or 0, *counts])
            lengths = [int(np.shape(a)[0]) for case in cases for a in case.args
                       if not isinstance(a, (str, bytes)) and np.ndim(a) >= 1]
            if lengths:
                entry.longest = max([entry.longest or 0, *lengths])
    return found


def _literal(value: float, integer: bool) -> str:
    return repr(int(value)) if integer else repr(float(value))


def derive(build: MutantSink, use: FunctionUse, facts: FunctionFacts | None) -> None:
    """Add this family's mutants of `use` to `build`: none without a spec's sampling (see above),
    for a function no hidden check calls, or for one the reference cannot run."""
    known = _SAMPLING.get()
    entry = known.functions.get(use.name) if known is not None else None
    if entry is None or not entry.hidden_checks or (facts is not None and facts.error):
        return
    name, expected = use.name, entry.hidden_checks
    for argument in entry.arguments:
        if len(argument.seen) >= 2:
            integer, domain = argument.domain.integer, argument.domain
            low, high = _literal(argument.seen[0], integer), _literal(argument.seen[-1], integer)
            mutant = f"{name}.arg{argument.position}_clipped"
            whole = min([domain.low, *domain.values]), max([domain.high, *domain.values])
            if argument.seen[0] <= whole[0] and argument.seen[-1] >= whole[1]:
                build.not_applicable(mutant, "overfit", use, (
                    f"the visible checks already pass {domain.argument} its whole domain [{low}, {high}]: clipped "
                    "to it, it is the reference on every value the text allows"), expected=expected)
                continue
            build.add(mutant, "overfit",
                      f"{name} clips {domain.argument} to [{low}, {high}], the range the visible checks "
                      "sample", use, snippets.argument_clipped(name, argument.position, low, high), expected)
    seen = {a.position: repr([_literal(v, a.domain.integer) for v in a.seen]).replace("'", "")
            for a in entry.arguments if a.seen}
    if seen:
        build.add(f"{name}.visible_special_cased", "overfit",
                  f"{name} is right only on the values the visible checks pass", use,
                  snippets.special_cased(name, seen), expected)
    loops = any("while" in need.contains for need in use.structure)
    counts = [a for a in entry.arguments if a.domain.integer and min([a.domain.low, *a.domain.values]) <= 0]
    if loops:
        cap = entry.largest_count if entry.largest_count else WHILE_CAP
        length = entry.longest if entry.longest else WHILE_CAP
        capped = changeable(facts, CAPS)
        if capped:
            what = {"while_loop": f"stops its while_loop after {WHILE_CAP} iterations",
                    "fori_loop": f"caps its fori_loop at {cap}",
                    "scan": f"scans only the first {length} elements ({cap} steps of a scan over a length)",
                    "map": f"maps only the first {length} elements"}
            build.add(f"{name}.loop_capped", "overfit", f"{name} " + " and ".join(what[c] for c in capped), use,
                      snippets.loops_capped(name, WHILE_CAP, cap, length, capped), expected)
        else:
            build.not_applicable(f"{name}.loop_capped", "overfit", use,
                                 unchangeable(name, facts, CAPS, "loop this family can cap"), expected)
        if counts:
            peeled = changeable(facts, PEELS)
            for which in ("first", "last"):
                if peeled:
                    build.add(f"{name}.{which}_iteration_peeled", "overfit",
                              f"{name} makes its {' / '.join(peeled)}'s {which} iteration outside the loop (wrong "
                              "for a count of 0)", use, snippets.iteration_peeled(name, which, peeled), expected)
                else:
                    build.not_applicable(f"{name}.{which}_iteration_peeled", "overfit", use,
                                         unchangeable(name, facts, PEELS, "loop this family can peel"), expected)
    else:
        for argument in counts:
            build.add(f"{name}.arg{argument.position}_at_least_1", "overfit",
                      f"{name} makes one step even when {argument.domain.argument} is 0", use,
                      snippets.count_at_least_one(name, argument.position), expected)
