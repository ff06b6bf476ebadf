"""Hidden inputs drawn per student: each student's seed, drawn at their first grading, kept for life.

A course may want two students comparing their messages to share no hidden input. A batch started
with `--seed-per-student` (its gradebook keeps the choice: `SeedSettings`) draws a seed for each
student at their first grading (a batch, one file, `--only`, or a hand-in through `grade serve`),
at random (`secrets`), never from their id or login: knowing a classmate's id tells nothing about
their inputs. Every regrade of that student (a resumed batch, `--only`, one file, a new hand-in)
uses their stored seed, and the resume key compares a result's seed with the student's own, so a
result graded on other inputs is not current.

`--new-seed` draws a new seed for every student of the batch (recorded with its date, as the
one-seed batch records a redraw) and so regrades all of them; like a new batch seed it needs the
whole folder. `--seed N` is refused here: it gives every student one seed, which is the other kind
of batch (`grade FILE --seed S` shows one student's verdict on given inputs). The choice is made
once: a later command asking for the other kind is refused in one sentence.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from grader.batch.seed import fresh, part_of_the_batch
from grader.errors import UsageError
from grader.outputs.gradebook import Gradebook, SeedSettings, StudentSeed, now


class Drawn(BaseModel):
    """Each student's seed for this grading, and how many were drawn now."""

    seeds: dict[str, int]
    first: int = 0  # students given their first seed now
    redrawn: int = 0  # students given a new seed by --new-seed


def seed_settings(book: Gradebook, *, per_student: bool, given: int | None) -> SeedSettings:
    """How this batch draws hidden inputs: as its gradebook keeps it, or, at its first grading, per
    student when asked (recorded now). What contradicts the kept choice is refused."""
    kept = book.seed_settings()
    if kept.per_student:
        if given is not None:
            raise UsageError(f"--seed {given} gives every student one seed, but this batch draws a seed per student "
                             "(chosen at its first grading): leave out --seed (--new-seed draws new ones for "
                             "everyone), or grade one file without -o: grade FILE --seed N")
        return kept
    if not per_student:
        return kept
    batch_seed = book.seed() or book.seed_most_graded_with()
    if batch_seed is not None:
        raise UsageError(f"this batch draws every student's hidden inputs from one seed ({batch_seed.seed}, since "
                         f"{batch_seed.drawn_at[:10]}), and --seed-per-student is chosen at a batch's first grading: "
                         "grade into a new folder (-o) to draw them per student")
    if given is not None:
        raise UsageError(f"--seed {given} and --seed-per-student contradict each other (one seed for every student, "
                         "or a seed drawn at random for each): pass one")
    chosen = SeedSettings(per_student=True, since=now())
    book.save_seed_settings(chosen)
    return chosen


def seeds_for(book: Gradebook, students: list[str], *, redraw: bool = False, whole_batch: bool = True) -> Drawn:
    """Each student's stored seed, drawn now for those without one; with `redraw`, a new one for
    every student of the batch (those graded before included), which `whole_batch` must allow."""
    if redraw and not whole_batch:
        raise part_of_the_batch("--new-seed")
    stored = book.student_seeds()
    at = now()
    if redraw:
        drawn = [StudentSeed(student=s, seed=fresh(avoid=stored[s].seed if s in stored else None), drawn_at=at,
                             redrawn=True) for s in sorted(set(students) | set(stored))]
    else:
        drawn = [StudentSeed(student=s, seed=fresh(), drawn_at=at) for s in sorted(set(students) - set(stored))]
    book.record_student_seeds(drawn)
    current = {s: d.seed for s, d in stored.items()} | {d.student: d.seed for d in drawn}
    return Drawn(seeds={s: current[s] for s in students}, first=0 if redraw else len(drawn),
                 redrawn=len(drawn) if redraw else 0)


class ServedSeeds:
    """For `grade serve`: the seed of a hand-in's student, drawn and kept at their first hand-in.
    Called from the dispatcher's thread, so it opens the gradebook itself (a few ms a hand-in)."""

    def __init__(self, gradebook: Path):
        self.gradebook = gradebook

    def __call__(self, student: str) -> int:
        with Gradebook(self.gradebook) as book:
            return seeds_for(book, [student]).seeds[student]
