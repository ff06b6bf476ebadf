"""One seed a batch, for life: which seed a grading into OUT draws its hidden inputs from.

A batch's hidden inputs are drawn from one seed, stored with the batch (the gradebook's `seeds`
table, in OUT) the first time it grades. Every later grading into the same OUT (a resumed batch,
`--only`, one file regraded) uses that seed, so two byte-identical notebooks are judged on the
same inputs whenever each was graded. The seed is part of the resume key (outputs/gradebook.py):
a result graded with another seed is not current.

The instructor draws new inputs with `--new-seed` (a fresh seed) or `--seed N` naming another
seed than the stored one: that is a new draw, recorded with its date, and since no stored result
has the new seed, the whole batch is regraded (so `--only` and a single file refuse it: they
would leave the others on the old inputs). `--seed N` naming the stored seed changes nothing.

A batch may instead keep a seed per student (`--seed-per-student` at its first grading:
grader/batch/student_seeds.py); this module is the one-seed batch, the default.
"""

from __future__ import annotations

import secrets

from pydantic import BaseModel

from grader.errors import UsageError
from grader.outputs.gradebook import SeedDraw, now

SEED_RANGE = 2**31


class SeedChoice(BaseModel):
    """The seed a grading uses, and whether it is a draw to record (a first one, or a redraw)."""

    draw: SeedDraw
    new: bool  # not stored yet: record `draw` with the batch

    @property
    def seed(self) -> int:
        return self.draw.seed


def choose_seed(stored: SeedDraw | None, given: int | None, redraw: bool, *, whole_batch: bool) -> SeedChoice:
    """The batch's seed (`stored`), unless this is its first grading (`given`, else a fresh
    draw) or the instructor asks for another (`redraw`, or `given` differing from the stored
    one), which `whole_batch` must allow."""
    if redraw and given is not None:
        raise UsageError("--seed N and --new-seed both choose the hidden inputs: pass one")
    if stored is None:
        seed = given if given is not None else fresh()
        return SeedChoice(draw=SeedDraw(seed=seed, drawn_at=now()), new=True)
    if not redraw and given in (None, stored.seed):
        return SeedChoice(draw=stored, new=False)
    if not whole_batch:
        raise part_of_the_batch("--new-seed" if redraw else f"--seed {given} (this batch's seed is {stored.seed})")
    seed = given if given is not None else fresh(avoid=stored.seed)
    return SeedChoice(draw=SeedDraw(seed=seed, drawn_at=now(), redrawn=True), new=True)


def part_of_the_batch(asked: str) -> UsageError:
    """A new draw asked for while grading part of the batch, which would leave the rest on the old inputs."""
    return UsageError(f"{asked} draws new hidden inputs, which regrades every submission of the batch: "
                      "grade the whole folder (not --only, nor one file)")


def fresh(avoid: int | None = None) -> int:
    """A seed drawn at random (`secrets`: nothing a student knows predicts it), other than `avoid`."""
    while True:
        seed = secrets.randbelow(SEED_RANGE)
        if seed != avoid:
            return seed
