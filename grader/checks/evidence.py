"""When a structure or compile check's program is evidence: the student's attempt at the
function, not a decoy beside it or a table of the notebook's answers.

A `case`, a `while` or one compilation proves something only of a program that computes the
function. Requiring every value right made one wrong bracket rate cost every structure point of
the function as well; requiring nothing would let a table of the notebook's answers (built with
lax.switch or jnp.select on equality) earn them. The rule, counted number by number over the
module's runs (an array of 12 incomes is 12 values):

1. it agrees with the reference on at least a third of the values it is run on: the check's own
   cases, the notebook's examples of the function and the hidden checks' draws. A decoy (a
   `case` or a `while` around something else) is right on few; a rate wrong in one bracket of a
   program that derives the later brackets' base from it is wrong above that bracket, and still
   an attempt at the tax;
2. where there are draws, its share of right values on them is no more than a quarter below its
   share on the visible ones (the check's cases and the notebook's examples). A table is right
   on every example and wrong beyond them; a program with one wrong bracket is wrong on the
   notebook's inputs in that bracket as often as on the draws in it.

Without draws (the self-check, or a check whose calls no hidden check shares a signature with)
the first rule alone applies, on the check's own cases; when the check's own cases are drawn
(a compile check's calls) they count as draws, and a table is wrong on them. With one or two
draws the second rule rests on them alone (ch2-practice's `uses_cond` has one of its threshold).
The draws are never quoted: the check is visible, and its message says only that the program
computes the right values for too few inputs. A value check that re-tests another's inputs for
a property of its own (the shape, jax.jit) asks the same of its program, by the first rule
(`NumericCheckImpl.judge_form`, with `ENOUGH`).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from grader.checks.base import PASSED, CheckOutcome, Seen, wrong_values
from grader.checks.numeric import agreeing, disagreement, expected_size, select
from grader.checks.program import NotebookExample, ProgramCalls
from grader.spec import CompileLimitCheck, StructureCheck

ENOUGH = Fraction(1, 3)
"""Rule 1: the least share of right values, over everything the module is run on."""

OVERFIT_MARGIN = Fraction(1, 4)
"""Rule 2: how far below its share on the visible values its share on the draws may fall."""


class RightValues:
    """Right values out of values, for one group of calls."""

    def __init__(self, right: int = 0, total: int = 0) -> None:
        self.right = right
        self.total = total

    def add(self, answers: list[Any], expected: list[Any], spec: StructureCheck | CompileLimitCheck) -> None:
        for value, want in zip(answers, expected):
            self.total += expected_size(want)
            self.right += agreeing(select(value, spec.output), want, spec.rtol, spec.atol)

    def share(self) -> Fraction:
        return Fraction(self.right, self.total) if self.total else Fraction(1)


def is_evidence(visible: RightValues, drawn: RightValues) -> bool:
    """The rule, on the counts: right on enough of everything (1), and not far less often on the
    draws than on the visible values (2)."""
    right, total = visible.right + drawn.right, visible.total + drawn.total
    overall = Fraction(right, total) if total else Fraction(1)
    overfit = drawn.total > 0 and visible.total > 0 and drawn.share() < visible.share() - OVERFIT_MARGIN
    return overall >= ENOUGH and not overfit


def vouches(program: ProgramCalls, seen: Seen, spec: StructureCheck | CompileLimitCheck, expected: list,
            expected_beyond: list | None) -> CheckOutcome:
    """PASSED when the modules read for the check are evidence (the rule above), else the failure
    that names the cause: wrong values (cause "values", so a check of the same function that
    already showed them is named instead)."""
    answers = program.answers(seen, spec.message)
    if isinstance(answers, CheckOutcome):
        return answers
    own = disagreement(spec.function, program.cases, answers, expected, spec.output, spec.rtol, spec.atol)
    visible, drawn = RightValues(), RightValues()
    (drawn if spec.cases.rows is None else visible).add(answers, expected, spec)
    why = own
    if program.beyond and expected_beyond is not None:
        beyond = program.beyond_answers(seen, spec.message)
        if isinstance(beyond, CheckOutcome):
            return beyond.model_copy(update={"message": f"{spec.message}: the program inspected could not be run "
                                                        "beyond the notebook's examples",
                                             "counterexample": beyond.message})
        for case, value, want in zip(program.beyond, beyond, expected_beyond):
            (visible if isinstance(case, NotebookExample) else drawn).add([value], [want], spec)
        why = own or disagreement(spec.function, program.beyond, beyond, expected_beyond, spec.output,
                                  spec.rtol, spec.atol)
    if not why or is_evidence(visible, drawn):
        return PASSED
    shown = f" ({own})" if own and spec.cases.rows is not None else ""  # the check's own cases are visible
    return wrong_values(spec.message, "the program inspected computes the right values for too few inputs, or "
                                      f"only for the notebook's examples{shown}").model_copy(
        update={"counterexample": f"{why} (right on {visible.right} of {visible.total} visible values, "
                                  f"{drawn.right} of {drawn.total} drawn)"})
