"""Copied work, found on the compiled program: groups of students whose exported programs for
an exercise are identical or nearly so. A lead for the instructor to read, never a verdict.

Each report carries, for the instructor only, one `ProgramFingerprint` per exported function
(grader/verifier/inside/fingerprint.py made it in the verifier: locations, names and the constants'
order stripped, operations that change nothing folded, so renaming, reformatting, re-commenting and
`+ 0.0` or `* 1.0` after most operations leave it as it was). Per exercise:

- a student's program is all the exercise's functions together; students with no fingerprint
  for the exercise (not answered, not traceable, not graded) are left out;
- functions that carry no evidence are left out first: one whose program is exactly the
  instructor's (`reference`: students who wrote the reference solution's program did not copy
  each other), and one whose exact program a large share of the class wrote (`common_share`:
  what the exercise dictates, e.g. the chapter's own two-line `step`, which every honest
  student writes the same); the writers of each common program are listed after the groups,
  marked `common`, since a ring of copies looks the same;
- with the reference, what a function shares with the reference's is no evidence either: its
  4-grams that the reference's function also has are set aside, and only the rest is compared
  (two students who each changed the reference a little, `x / 2` for `0.5 * x`, share nothing
  beyond it; two copies of an unusual program share all of what is unusual);
- what is left must be big enough to tell people apart (`min_size` distinct op 4-grams): every
  correct answer to a one-line exercise is the same program; and, with the reference, what lies
  beyond it too (`min_beyond`): the reference with the same small change (`jnp.maximum` for a
  `jnp.where`) is what two students write apart;
- two students are alike by their normalised programs: identical digests give 1.0, otherwise
  the Jaccard similarity of their op 4-gram sets, function by function, pooled (a function
  only one of them has counts as all different);
- groups are single-linkage clusters at `threshold`: a copy of a copy joins the group even when
  it is further from the first than the threshold, which the group's `similarity` (the lowest
  between two members) then shows.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import combinations

from grader.report import ProgramFingerprint, Report
from grader.term.models import SimilarGroup
from grader.verifier.inside.fingerprint import MAX_SHINGLES

DEFAULT_THRESHOLD = 0.7
"""Measured on ch2-jit (tests/test_similarity.py holds the programs): renamed and reformatted
copies are identical (1.0), and so is a copy with no-op operations inserted (`x + 0.0`, `x * 1.0`,
`x / 1.0` after most operations: folded by the fingerprint; unfolded, they left it at 0.15-0.48);
the reference with one op tweaked or one step added keeps 0.83-0.93;
independently written correct answers share 0.02-0.31 (Newton loops are alike by nature). The
course's programs are small (20-50 distinct 4-grams), so one changed op costs about 0.25: 0.7
catches a copy with one edit and leaves twice the widest gap seen between independent work.
A copy wrapped in extra code (the reference called from a new function) falls to 0.5-0.6 and
is missed: lower the threshold to look for those."""
MIN_SIZE = 20
"""Distinct op 4-grams an exercise's program needs to be compared: the chapter's `step` (given
in the exercise's text) has 17; the shortest sensible Newton loop has over 20."""
MIN_BEYOND = 12
"""Distinct op 4-grams beyond the reference's an exercise's program needs to be compared when the
reference is known. One changed op changes at most 4 (NGRAM) of them, so 12 is three ops changed
apart. Measured on ch2-jit (docs/grading-a-class.md): the reference with one natural change
(`(x + a / x) / 2`, `jnp.maximum(a, 1.0)`) keeps 3-4 beyond it; unusual programs of the same
exercises keep 17-42."""
COMMON_SHARE = 0.25
COMMON_MIN = 4
"""A function's exact program written by more than COMMON_SHARE of the students who exported
it, and by at least COMMON_MIN of them, is the exercise's natural answer, not evidence."""

SCHEMA = """CREATE TABLE IF NOT EXISTS similar_programs (
    exercise TEXT NOT NULL, group_id INTEGER NOT NULL, student TEXT NOT NULL,
    similarity REAL NOT NULL, threshold REAL NOT NULL, identical INTEGER NOT NULL,
    PRIMARY KEY (group_id, student)
)"""


@dataclass(frozen=True)
class _Function:
    """One exported function of a student's: its digest, the 4-grams compared (those beyond the
    reference's), and whether its sketch was full (then the 4-grams are a sample)."""

    digest: str
    shingles: frozenset[int]
    full: bool


@dataclass(frozen=True)
class _Program:
    """One student's program for one exercise: function -> its `_Function`, and one digest of
    them all (identical programs: every function's digest the same)."""

    functions: dict[str, _Function]
    digest: str
    size: int

    @classmethod
    def of(cls, functions: dict[str, _Function]) -> _Program:
        text = "\n".join(f"{name} {f.digest}" for name, f in sorted(functions.items()))
        return cls(functions, hashlib.sha256(text.encode("utf-8")).hexdigest(),
                   sum(len(f.shingles) for f in functions.values()))


_ABSENT = _Function("", frozenset(), False)


def _overlap(a: _Function, b: _Function) -> tuple[int, int]:
    """(shared, compared) 4-grams of two sketches: exact when neither is full, else the bottom-k
    estimate (the k smallest of the union, and how many of them both hold)."""
    if not a.full and not b.full:
        return len(a.shingles & b.shingles), len(a.shingles | b.shingles)
    sample = sorted(a.shingles | b.shingles)[:MAX_SHINGLES]
    return sum(1 for s in sample if s in a.shingles and s in b.shingles), len(sample)


def _similarity(a: _Program, b: _Program) -> float:
    """1.0 for identical programs, else the pooled Jaccard similarity of their functions' 4-grams."""
    if a.digest == b.digest:
        return 1.0
    shared = compared = 0
    for name in set(a.functions) | set(b.functions):
        s, c = _overlap(a.functions.get(name, _ABSENT), b.functions.get(name, _ABSENT))
        shared, compared = shared + s, compared + c
    return shared / compared if compared else 0.0


def _by_exercise(reports: dict[str, Report]) -> dict[str, dict[str, list[ProgramFingerprint]]]:
    """exercise -> student -> that student's fingerprints, exercises in order of first appearance."""
    out: dict[str, dict[str, list[ProgramFingerprint]]] = {}
    for student in sorted(reports):
        for fingerprint in reports[student].programs:
            out.setdefault(fingerprint.exercise, {}).setdefault(student, []).append(fingerprint)
    return out


def _uninformative(prints: dict[str, list[ProgramFingerprint]], reference: Iterable[ProgramFingerprint],
                   common_share: float | None) -> set[tuple[str, str]]:
    """The (function, digest) pairs that are no evidence: the reference's, and the common ones."""
    dropped = {(p.function, p.digest) for p in reference}
    if common_share is not None:
        writers = Counter((p.function, p.digest) for fps in prints.values() for p in fps)
        exporters = Counter(p.function for fps in prints.values() for p in fps)
        dropped |= {key for key, n in writers.items()
                    if n >= COMMON_MIN and n > common_share * exporters[key[0]]}
    return dropped


def _programs(prints: dict[str, list[ProgramFingerprint]], dropped: set[tuple[str, str]],
              reference: Iterable[ProgramFingerprint], min_size: int, min_beyond: int) -> dict[str, _Program]:
    """Each student's program that is evidence: the functions not dropped, each without the
    4-grams the reference's function has; a student left with too little to compare is left out."""
    theirs = {p.function: frozenset(p.shingles) for p in reference}
    programs = {}
    for student, fps in prints.items():
        functions = {}
        for p in fps:
            beyond = frozenset(p.shingles) - theirs.get(p.function, frozenset())
            if (p.function, p.digest) not in dropped and beyond:
                functions[p.function] = _Function(p.digest, beyond, len(p.shingles) >= MAX_SHINGLES)
        program = _Program.of(functions)
        whole = sum(len(p.shingles) for p in fps if p.function in functions)
        if program.functions and whole >= min_size and (not theirs or program.size >= min_beyond):
            programs[student] = program
    return programs


def _clusters(students: list[str], linked: list[tuple[str, str]]) -> list[list[str]]:
    """Connected components (single linkage) with two members or more, each sorted."""
    parent = {s: s for s in students}

    def root(s: str) -> str:
        while parent[s] != s:
            parent[s] = parent[parent[s]]
            s = parent[s]
        return s

    for a, b in linked:
        parent[root(a)] = root(b)
    groups: dict[str, list[str]] = {}
    for s in students:
        groups.setdefault(root(s), []).append(s)
    return [sorted(g) for g in groups.values() if len(g) > 1]


def _groups_of(exercise: str, programs: dict[str, _Program], threshold: float) -> list[SimilarGroup]:
    students = sorted(programs)
    pairs = {(a, b): _similarity(programs[a], programs[b]) for a, b in combinations(students, 2)}
    linked = [pair for pair, value in pairs.items() if value >= threshold]
    groups = []
    for members in _clusters(students, linked):
        lowest = min(pairs[pair] for pair in combinations(members, 2))
        groups.append(SimilarGroup(exercise=exercise, students=members, similarity=round(lowest, 4),
                                   threshold=threshold,
                                   identical=len({programs[s].digest for s in members}) == 1))
    return sorted(groups, key=lambda g: (-g.similarity, -len(g.students), g.students))


def similar_groups(reports: dict[str, Report], threshold: float = DEFAULT_THRESHOLD, *,
                   reference: list[ProgramFingerprint] | None = None, min_size: int = MIN_SIZE,
                   min_beyond: int = MIN_BEYOND,
                   common_share: float | None = COMMON_SHARE) -> list[SimilarGroup]:
    """Groups of students (the keys of `reports`) whose programs for an exercise are alike, per
    exercise in the reports' order, the most alike first. `reference`: the instructor's own
    fingerprints (a graded reference solution's `programs`, grader.term.reference_programs),
    whose programs, and what students' programs share with them, are no evidence;
    `common_share=None` keeps programs however many students wrote them."""
    if not 0 <= threshold <= 1:
        raise ValueError(f"a similarity threshold is between 0 and 1, not {threshold!r}")
    groups: list[SimilarGroup] = []
    commons: list[SimilarGroup] = []
    for exercise, prints in _by_exercise(reports).items():
        mine = [p for p in reference or [] if p.exercise == exercise]
        dropped = _uninformative(prints, mine, common_share)
        programs = _programs(prints, dropped, mine, min_size, min_beyond)
        groups += _groups_of(exercise, programs, threshold)
        commons += _common_groups(exercise, prints, dropped - {(p.function, p.digest) for p in mine}, threshold)
    return groups + commons


def _common_groups(exercise: str, prints: dict[str, list[ProgramFingerprint]],
                   common: set[tuple[str, str]], threshold: float) -> list[SimilarGroup]:
    """The students who wrote each common program, shown apart rather than hidden: the program
    the exercise dictates looks the same as a ring of copies, and only the instructor can tell."""
    groups = []
    for function, digest in sorted(common):
        writers = sorted(s for s, fps in prints.items() if any((p.function, p.digest) == (function, digest) for p in fps))
        if len(writers) > 1:
            groups.append(SimilarGroup(exercise=exercise, students=writers, similarity=1.0,
                                       threshold=threshold, identical=True, common=True))
    return groups


def record_groups(db: sqlite3.Connection, groups: list[SimilarGroup]) -> None:
    """Keep the groups in the gradebook's `similar_programs` table (its own; replaced each
    time, in one transaction): one row per member, group ids counting from 1 in `groups`' order."""
    rows = [(g.exercise, group_id, student, g.similarity, g.threshold, int(g.identical))
            for group_id, g in enumerate(groups, 1) for student in g.students]
    with db:
        db.execute(SCHEMA)
        db.execute("DELETE FROM similar_programs")
        db.executemany("INSERT INTO similar_programs (exercise, group_id, student, similarity, threshold, "
                       "identical) VALUES (?, ?, ?, ?, ?, ?)", rows)
