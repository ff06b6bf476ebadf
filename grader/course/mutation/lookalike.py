"""The `lookalike` family: the construct an exercise names replaced by one that lowers the same
way, which a structure check must tell apart (a `fori_loop` or `scan` where the text says
`while_loop`, a `switch` beside the `jnp.select` that computes the answer, or one that always
takes the branch returning it).

Each mutant keeps the reference's values (a loop of a fixed count masked to stop where the
original stops, a select of every branch), so only the structure check that reads what the loop's
stop or the case's index depends on (StructureCheck.loop, case_chooses_output) can kill it. The
forms the module cannot tell apart from the construct named, and the text accepts, are derived as
honest variants: a `fori_loop` written as the `while_loop` it is built on, a `switch` written as
nested `lax.cond`.

Each mutant replaces the constructs it knows (`LOOPS`, `COUNTED`, `CASES`, `SWITCH`) that the
reference uses; where the spec asks for a look-alike and the reference uses none of them (a
`lax.scan` where a check reads a while loop's stop, a `lax.cond` where the variant needs a
`lax.switch`), it is recorded as not applicable.
"""

from __future__ import annotations

from grader.course.mutation import snippets
from grader.course.mutation.interface import FunctionUse
from grader.course.mutation.introspect import FunctionFacts, changeable, unchangeable
from grader.course.mutation.sink import MutantSink

FIXED_STEPS = 100  # a while_loop's look-alike runs this many steps (the checks' loops stop sooner)
MAX_COUNT = 1000  # a fori_loop's look-alike runs the largest count the checks pass, at most this
LOOPS = ("while_loop", "fori_loop")  # replaced by a loop of a count fixed when traced
COUNTED = ("fori_loop",)  # written as the while_loop it is built on (an honest variant)
CASES = ("switch", "cond")  # replaced by a select beside a dead case or under one that always takes one
# branch, or batched into a select
SWITCH = ("switch",)  # written as nested lax.cond (an honest variant)


def derive(build: MutantSink, use: FunctionUse, facts: FunctionFacts | None) -> None:
    """Add this family's mutants (and its honest variants) of `use` to `build`."""
    name = use.name
    by_stop = {"value_dependent": [n.check for n in use.structure if n.loop == "value_dependent"],
               "counted_by_input": [n.check for n in use.structure if n.loop == "counted_by_input"]}
    loops = changeable(facts, LOOPS)
    if by_stop["value_dependent"]:
        for by in ("fori_loop", "scan"):
            if not loops:
                build.not_applicable(f"{name}.lookalike_{by}", "lookalike", use, unchangeable(
                    name, facts, LOOPS, "loop this family can replace by a counted one"), by_stop["value_dependent"])
                continue
            build.add(f"{name}.lookalike_{by}", "lookalike",
                      f"{name} loops {FIXED_STEPS} times with lax.{by} (masked where the while_loop would stop) "
                      "instead of a lax.while_loop whose stop reads the values", use,
                      snippets.counted_lookalike(name, FIXED_STEPS, by, loops), by_stop["value_dependent"])
    if by_stop["counted_by_input"]:
        steps = min(max(use.largest_int, 1), MAX_COUNT)
        for by in ("fori_loop", "scan"):
            if not loops:
                build.not_applicable(f"{name}.lookalike_static_{by}", "lookalike", use, unchangeable(
                    name, facts, LOOPS, "loop this family can replace by a counted one"), by_stop["counted_by_input"])
                continue
            build.add(f"{name}.lookalike_static_{by}", "lookalike",
                      f"{name} loops a count fixed when traced ({steps}, lax.{by}, masked to the traced bound) "
                      "instead of a lax.fori_loop over the traced count", use,
                      snippets.counted_lookalike(name, steps, by, loops), by_stop["counted_by_input"])
        if changeable(facts, COUNTED):
            build.add(f"{name}.lookalike_while_counter", "honest",
                      f"{name} counts to the traced bound with lax.while_loop, what lax.fori_loop is built on "
                      "(the same program)", use, snippets.fori_as_while(name))
        else:
            build.not_applicable(f"{name}.lookalike_while_counter", "honest", use, unchangeable(
                name, facts, COUNTED, "fori_loop this variant can write as a while_loop"), [])
    chooses = [n.check for n in use.structure if n.case_chooses_output]
    if chooses:
        cases = changeable(facts, CASES)
        every_case = [n.check for n in use.structure if "case" in n.contains]
        if cases:
            build.add(f"{name}.lookalike_constant_case", "lookalike",
                      f"{name} computes the answer with a select, beside a lax.switch / lax.cond on a constant index "
                      "or predicate", use, snippets.case_lookalike(name, "decoy", cases), chooses)
            build.add(f"{name}.lookalike_guard_case", "lookalike",
                      f"{name} computes the answer with a select, returned by a lax.switch / lax.cond whose index "
                      "comes from the input but always takes the same branch", use,
                      snippets.case_lookalike(name, "guard", cases), chooses)
            build.add(f"{name}.lookalike_vmapped_case", "lookalike",
                      f"{name} runs its lax.switch / lax.cond under jax.vmap (a batch of one), which makes it a select",
                      use, snippets.case_lookalike(name, "vmapped", cases), every_case)
        else:
            reason = unchangeable(name, facts, CASES, "case this family can imitate")
            build.not_applicable(f"{name}.lookalike_constant_case", "lookalike", use, reason, chooses)
            build.not_applicable(f"{name}.lookalike_guard_case", "lookalike", use, reason, chooses)
            build.not_applicable(f"{name}.lookalike_vmapped_case", "lookalike", use, reason, every_case)
        known = facts.uses() if facts is not None else None
        if ("switch" in known) if known is not None else ("switch" in build.reference):
            build.add(f"{name}.lookalike_nested_cond", "honest",
                      f"{name} chooses with nested lax.cond instead of lax.switch (the same construct: both lower "
                      "to cases, and the chapter's self-check looks for `cond`)", use,
                      snippets.case_lookalike(name, "nested"))
        elif known is not None:
            build.not_applicable(f"{name}.lookalike_nested_cond", "honest", use, unchangeable(
                name, facts, SWITCH, "switch this variant can write as nested lax.cond"), [])
