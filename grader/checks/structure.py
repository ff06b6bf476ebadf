"""Structure checks: the program has / lacks operations.

From the module (the default): the StableHLO operations of the very modules the value checks
execute (`while`, `case`, `select`...), read by the verifier, for every signature the check's
cases give, so a function that lowers differently for the check's inputs cannot hide. From the
kernel ("jaxpr" / "lowered"): the primitives the probe reports (forgeable by the student's code).

`loop` and `case_chooses_output` ask what a module's `while` or `case` does, as the verifier
reads it from the def-use chains (grader/verifier/inside/constructs.py): lax.while_loop, fori_loop and
scan all lower to a `while`, and a switch on a constant index is a `case` too; and whether it
does the work: the module run with it knocked out gives other values (grader/verifier/inside/knockout.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from grader.cases import materialize, to_calls
from grader.checks.base import PASSED, CheckOutcome, Context, ModuleRun, Seen, failed, result_of
from grader.checks.numeric import reference_values
from grader.checks.program import ProgramCalls, drawn_beyond, public_positions
from grader.errors import AssignmentBug
from grader.kernel.protocol import Abstract, Request, TraceResult
from grader.spec import MIN_GROWTH_SIZES, CompileLimitCheck, StructureCheck, too_few_sizes
from grader.verifier.protocol import Constructs, LoopFacts


class StructureCheckImpl:
    spec_type = StructureCheck

    def __init__(self, full_id: str, spec: StructureCheck, ctx: Context):
        self.full_id, self.spec = full_id, spec
        cases = materialize(spec.cases, ctx.assignment.references, ctx.seed, full_id)
        self.program: ProgramCalls | None = None
        self.trace = None
        self.expected_beyond: list | None = None
        self.cases = cases
        if spec.constant_size:  # rows are refused by the spec; a generator's draws only now
            sizes = sorted({sum(int(np.size(arg)) for arg in case.args) for case in cases})
            if len(sizes) < MIN_GROWTH_SIZES:
                raise AssignmentBug(full_id, too_few_sizes(sizes))
        self.expected = reference_values(full_id, spec, ctx, cases)
        if spec.representation == "module":
            self.program = ProgramCalls(ctx.planner, spec.function, cases,
                                        public_positions(spec.public, spec.hidden, cases),
                                        inspect_only=self.expected is None, judged=False,
                                        beyond=drawn_beyond(ctx, spec),
                                        knockouts=frozenset({"loop"} if spec.loop is not None else set())
                                        | frozenset({"case"} if spec.case_chooses_output else set()))
            self.expected_beyond = reference_values(full_id, spec, ctx, self.program.beyond)
        else:
            self.trace = ctx.planner.trace(spec.function, to_calls(cases)[0], spec.representation)

    def requests(self) -> list[Request]:
        return list(self.program.exports) if self.program else [self.trace]  # type: ignore[list-item]

    def runs(self) -> list[ModuleRun]:
        return self.program.runs() if self.program else []

    def _sizes(self, seen: Seen) -> list[tuple[int, int]]:
        """(input size, operations) of each module inspected (one per signature of the cases), the
        size being the number of elements of its traced arguments, as the grader asked for them."""
        assert self.program is not None
        return [(input_size(r), o.facts.op_count) for r, o in ((r, seen.run(r)) for r in self.program.runs())
                if o is not None and o.facts is not None]

    def _loop_bounds(self, seen: Seen) -> list[tuple[int, int]]:
        """(input size, steps) of each module inspected: the trip counts fixed when traced of its loops,
        added up (a loop over the elements adds one step per element, whatever else loops beside it)."""
        assert self.program is not None
        return [(input_size(r), sum(loop.bound for loop in o.facts.constructs.loops
                                    if loop.bound is not None))
                for r, o in ((r, seen.run(r)) for r in self.program.runs())
                if o is not None and o.facts is not None and o.facts.constructs is not None]

    def _growth(self, seen: Seen, what: str) -> str | None:
        """Why the program grows with the input (None: it does not), as the end of a sentence."""
        operations = per_size(self._sizes(seen))
        if follows_the_size(operations):
            return (f"{what} grows with the input: {_listed(operations.values())} operations for "
                    f"{_listed(operations)} elements, at least one more for each extra element (a Python "
                    "loop over the elements is unrolled into it)")
        steps = per_size(self._loop_bounds(seen))
        if follows_the_size(steps):
            return (f"{what} loops once per element: {_listed(steps.values())} steps for {_listed(steps)} "
                    "elements (a lax.fori_loop or lax.scan over the elements, one step per element)")
        return None

    def _seen_ops(self, seen: Seen) -> tuple[set[str], str] | CheckOutcome:
        spec = self.spec
        if self.program:
            refused = self.program.misfit(seen, spec.message)
            if refused is not None:
                return refused
            runs = [seen.run(run) for run in self.program.runs()]
            if not all(o is not None and o.facts is not None and o.status != "refused" for o in runs):
                outcomes = self.program.outcomes(seen, spec.message)  # the verdict that says why
                return outcomes if isinstance(outcomes, CheckOutcome) else CheckOutcome(
                    status="error", message=f"{spec.message}: the verifier could not read the program")
            # the facts come from a job of their own: a program that hangs when run still has them
            common = set.intersection(*(set(o.facts.ops) for o in runs if o is not None and o.facts is not None))
            return common, "its exported program"
        result = result_of(seen, self.trace, TraceResult, f"tracing `{spec.function}`", spec.message)  # type: ignore[arg-type]
        if isinstance(result, CheckOutcome):
            return result
        return set(result.primitives), "its jaxpr" if spec.representation == "jaxpr" else "its lowered StableHLO"

    def judge(self, seen: Seen) -> CheckOutcome:
        spec = self.spec
        found = self._seen_ops(seen)
        if isinstance(found, CheckOutcome):
            return found
        ops, what = found
        lacking = [p for p in spec.contains if p not in ops]
        if lacking:
            missed = {_CONSTRUCTS.get(p) for p in lacking}
            found = [p for p in _CONSTRUCTS if p in ops and _CONSTRUCTS[p] not in missed]
            has = f"it has {constructs_named(found, 'a ')}" if found else "it has no loop or branch"
            return failed(spec.message, f"{what} has no {constructs_named(lacking)} ({has})")
        present = [p for p in spec.absent if p in ops]
        if present:
            return failed(spec.message, f"{what} contains {constructs_named(present, 'a ')}")
        grown = self._growth(seen, what) if spec.constant_size and self.program is not None else None
        if grown:
            return failed(spec.message, grown)
        if self.program is not None and (spec.loop is not None or spec.case_chooses_output):
            unjudged = None
            steps: list[tuple[int, set[int]]] = []  # per module: an input's length, the elements a step takes
            for run in self.program.runs():
                outcome = seen.run(run)
                facts = outcome.facts if outcome is not None else None
                constructs = facts.constructs if facts is not None else None
                why = construct_problem(spec, constructs, leading_lengths(run))
                if why:
                    return failed(spec.message, f"{what} {why}")
                unjudged = unjudged or unfinished_knockout(spec, constructs, what)
                if spec.loop == "over_input" and constructs is not None:
                    steps.append((max(leading_lengths(run), default=0), elements_per_step(constructs,
                                                                                          leading_lengths(run))))
            if steps and not set.intersection(*(taken for _, taken in steps)):
                shown = ", ".join(f"{'/'.join(map(str, sorted(taken)))} for {n}" for n, taken in steps)
                return failed(spec.message, f"{what} has a loop over blocks of the input whose size grows with its "
                                            f"length (elements a step takes: {shown}): lax.scan over the input runs "
                                            "once per element, or once per block of a fixed size (its unroll)")
            if unjudged is not None:  # the program's values stand; only this check is not judged
                agreed = self._agrees(seen)
                return unjudged if agreed.status == "passed" else agreed
        return self._agrees(seen)

    def _agrees(self, seen: Seen) -> CheckOutcome:
        """The program judged must also be a correct one: its values on the cases."""
        if self.program is None or self.expected is None:
            return PASSED
        return vouches(self.program, seen, self.spec, self.expected, self.expected_beyond)


# the program's operations (StableHLO's, or a jaxpr's primitives) a student meets in the chapter's words
_CONSTRUCTS = {"case": "lax.switch or lax.cond", "cond": "lax.switch or lax.cond",
               "while": "loop (lax.while_loop, lax.fori_loop or lax.scan)", "scan": "lax.scan",
               "select": "jnp.where or jnp.select", "select_n": "jnp.where or jnp.select"}


def constructs_named(ops: Iterable[str], article: str = "") -> str:
    """Operations as the chapter names what makes them ("case": "lax.switch or lax.cond"), each
    once; an operation the chapter does not name keeps the spec's name for it."""
    said = list(dict.fromkeys(article + _CONSTRUCTS[op] if op in _CONSTRUCTS else f"`{op}`" for op in ops))
    return " and ".join(said) if len(said) < 3 else ", ".join(said[:-1]) + " and " + said[-1]


def follows_the_size(measured: dict[int, int]) -> bool:
    """Whether a quantity of the programs (operations, or loop steps fixed when traced), given by
    input size (elements), grows with the input: it rises strictly from each size to the next larger
    one, and from the smallest size to the largest by at least as much as the size does.

    Why both: a loop over the elements, unrolled by Python or a lax.fori_loop / lax.scan, adds at
    least one operation or one step per element, at every size. A program that handles the array
    whole may still lower one operation longer for some sizes than for others (a vectorized
    jnp.digitize + jnp.choose: 138 operations for 3 elements, 139 for 12 and for 1000): that is
    not growth, and with fewer than three sizes the two could not be told apart."""
    sizes = sorted(measured)
    if len(sizes) < 2:
        return False
    values = [measured[s] for s in sizes]
    rises = all(a < b for a, b in zip(values, values[1:]))
    return rises and values[-1] - values[0] >= sizes[-1] - sizes[0]


def input_size(run: ModuleRun) -> int:
    """The number of elements of a module's traced arguments (a scalar counts one)."""
    return sum(math.prod(arg.shape) for arg in run.export.args if isinstance(arg, Abstract))


def per_size(pairs: list[tuple[int, int]]) -> dict[int, int]:
    """The quantity measured for each input size (the largest, where two signatures share a size)."""
    measured: dict[int, int] = {}
    for size, value in pairs:
        measured[size] = max(value, measured.get(size, value))
    return dict(sorted(measured.items()))


def _listed(numbers: Iterable[int]) -> str:
    items = [str(n) for n in numbers]
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


_WHILE_RULE = "with lax.while_loop, whether to go on depends on a traced value the loop computes"
_COUNT_RULE = "lax.fori_loop must count up to the traced argument"
_WRONG_STOP = {
    ("value_dependent", "counted_by_constant"): "it runs a number of steps fixed by a counter, as a lax.fori_loop or "
                                                f"lax.scan does; {_WHILE_RULE}",
    ("value_dependent", "counted_by_input"): f"it only counts steps up to a bound, as a lax.fori_loop does; {_WHILE_RULE}",
    ("value_dependent", "invariant"): f"its stop reads nothing the loop computes (it runs zero times or never stops); "
                                      f"{_WHILE_RULE}",
    ("counted_by_input", "counted_by_constant"): "it runs a number of steps fixed when the function was traced (a "
                                                 f"lax.scan, or a lax.fori_loop over a Python int): {_COUNT_RULE}",
    ("counted_by_input", "value_dependent"): "its stop depends on values the loop computes, not only on a counter "
                                             f"reaching the traced count: {_COUNT_RULE}",
    ("counted_by_input", "invariant"): f"its stop reads no counter (it runs zero times or never stops): {_COUNT_RULE}",
}


def leading_lengths(run: ModuleRun) -> set[int]:
    """The lengths of the traced array arguments of a module (their leading axes): what a loop over
    an input's elements (lax.scan over xs) runs once per element of."""
    return {arg.shape[0] for arg in run.export.args if isinstance(arg, Abstract) and arg.shape}


def _per_element(loop: LoopFacts, lengths: set[int]) -> bool:
    """Whether a loop steps through an input of one of `lengths` elements: once per element, or
    once per block of k elements of it, the last n % k after the loop (`lax.scan(..., unroll=k)`)."""
    if loop.stop != "counted_by_constant" or loop.bound is None:
        return False
    return loop.bound in lengths or (loop.bound >= 1 and any(loop.bound * k <= n < (loop.bound + 1) * k
                                                             for k in loop.blocks for n in lengths))


def elements_per_step(constructs: Constructs, lengths: set[int]) -> set[int]:
    """How many of an input's elements a step of a loop over it takes: 1 for a loop once per
    element, k for one over blocks of k (`_per_element`); across a check's modules a scan's k stays
    the same (its `unroll`), where a loop over a fixed number of blocks takes more as inputs grow."""
    taken: set[int] = set()
    for loop in constructs.loops:
        if not loop.feeds_output or loop.does_work is False or not _per_element(loop, lengths):
            continue
        if loop.bound in lengths:
            taken.add(1)
        taken |= {k for k in loop.blocks for n in lengths if loop.bound * k <= n < (loop.bound + 1) * k}
    return taken


def _over_input_problem(constructs: Constructs, lengths: set[int]) -> str | None:
    """Why no loop of the module runs once per element of an input (lax.scan over xs), or None."""
    loops = [loop for loop in constructs.loops if loop.feeds_output]
    if any(_per_element(loop, lengths) and loop.does_work is not False for loop in loops):
        return None
    if not constructs.loops:
        return "has no loop (a lax.scan over the input's elements lowers to one)"
    if not loops:
        return "has a loop, but what the function returns does not come out of it (the loop does not compute the answer)"
    per_element = [loop for loop in loops if _per_element(loop, lengths)]
    if per_element:
        return ("has a loop over the input's elements, but the function returns the same values when it runs no "
                "step: the loop must compute the answer")
    fixed = next((loop.bound for loop in loops if loop.stop == "counted_by_constant"), None)
    elements = " or ".join(str(n) for n in sorted(lengths)) or "no"
    if fixed is not None:
        return (f"has a loop of {fixed} steps for an input of {elements} elements: lax.scan over the input runs "
                "once per element")
    return (f"has a loop whose number of steps is not the input's length ({elements} elements): lax.scan over "
            "the input runs once per element")


def construct_problem(spec: StructureCheck, constructs: Constructs | None, lengths: set[int] | None = None) -> str | None:
    """Why a module's loops or cases are not the construct the spec names (None: they are), as the
    end of a sentence about the program; one reason, the one nearest to a passing program.
    `lengths`: the leading axes of the module's traced array arguments (for `loop = "over_input"`)."""
    if constructs is None or constructs.unreadable:
        return f"could not be followed: {constructs.unreadable if constructs else 'the verifier did not read it'}"
    if spec.loop == "over_input":
        why = _over_input_problem(constructs, lengths or set())
        if why:
            return why
    elif spec.loop is not None:
        loops = constructs.loops
        if not any(loop.stop == spec.loop and loop.feeds_output and loop.does_work is not False for loop in loops):
            if any(loop.stop == spec.loop and loop.feeds_output for loop in loops):
                return ("has such a while loop, but the function returns the same values when the loop runs no "
                        "step (it starts at the answer, computed some other way): the loop must compute it")
            if any(loop.stop == spec.loop for loop in loops):
                return ("has such a while loop, but what the function returns does not come out of it (the loop "
                        "does not compute the answer)")
            shown = next((loop for loop in loops if loop.feeds_output), loops[0] if loops else None)
            if shown is None:
                return "has no while loop"
            return f"has a while loop, but {_WRONG_STOP[(spec.loop, shown.stop)]}"
    if spec.case_chooses_output:
        cases = constructs.cases
        if not any(c.index_from_input and c.feeds_output and c.branches_differ and c.does_work is not False
                   for c in cases):
            if not any(c.index_from_input for c in cases):
                return ("has a case, but its index does not depend on the input (a constant index or predicate): "
                        "the branch must be chosen from the traced value")
            if not any(c.index_from_input and c.feeds_output for c in cases):
                return "has a case, but its result is not what the function returns (something else computes the answer)"
            if not any(c.index_from_input and c.feeds_output and c.branches_differ for c in cases):
                return "has a case, but every branch returns the same values, so it chooses nothing"
            if any(c.index_from_input and c.feeds_output and c.always_one_branch for c in cases):
                return ("has a case, but it takes the same branch for every input checked, and that branch alone "
                        "gives every answer: the case must choose between the cases the text names (a condition "
                        "that always holds, beside code that computes every case, chooses nothing)")
            if any(c.index_from_input and c.returned and c.branches_differ for c in cases):
                return ("has a case whose result is what the function returns, but it returns the same values "
                        "whichever branch it takes: every branch computes the whole answer, so the choice changes "
                        "nothing (each branch must compute the answer of its own case)")
            return ("has a case, but the function returns the same values whichever branch it takes (its result "
                    "does not change the answer: something else computes it)")
    return None


def unfinished_knockout(spec: StructureCheck, constructs: Constructs | None, what: str) -> CheckOutcome | None:
    """The verdict when the knockout this check asked for did not finish (a loop knocked out, what
    follows it never stops; a verifier killed): whether the construct does the work is not known,
    so the check is not passed, and says why (None: every knockout it asked for finished)."""
    if constructs is None:
        return None
    kinds = [("loop", "its loop running no step")] if spec.loop is not None else []
    kinds += [("case", "its case forced to one branch")] if spec.case_chooses_output else []
    for kind, how in kinds:
        problem = constructs.unfinished.get(kind)  # type: ignore[call-overload]
        if problem is None:
            continue
        sentence = (f"{spec.message}: {what} was run again with {how}, to tell whether the {kind} computes the "
                    f"answer, and that run did not finish ({problem.detail}): the program computes the right values, but "
                    "this check could not be judged")
        return CheckOutcome(status="timeout" if problem.status == "timeout" else "error", message=sentence)
    return None


def vouches(program: ProgramCalls, seen: Seen, spec: StructureCheck | CompileLimitCheck, expected: list,
            expected_beyond: list | None) -> CheckOutcome:
    """Whether the modules read for a structure or compile check are evidence: the student's
    attempt at the function, not a table of the notebook's answers (the rule: grader.checks.evidence)."""
    from grader.checks.evidence import vouches as evidence

    return evidence(program, seen, spec, expected, expected_beyond)
