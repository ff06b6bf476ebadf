"""`grade remove OUT STUDENT... [--reason "..."]`: take students out of a batch, every output with them.

A roster changes: a student drops the course, a file is renamed (its old name is a student whose
file is gone, which a batch names at its end). Removing is one commit (`outputs.rebuild.update`):
the gradebook moves the student to its `removals` table (who, when, by whom, why, and the raw
report: nothing is lost), and the rebuild deletes their report, feedback page and Gradescope
results and writes summary.csv, the class page and the exports without them, so every output
agrees. Their adjustments stay in the gradebook: a removed student graded again (their file
graded by a later batch) comes back, adjustments included.
"""

from __future__ import annotations

import argparse
import difflib
import getpass
import os
import sys
import unicodedata
from pathlib import Path

from grader.errors import UsageError
from grader.inert import PATH_LIMIT, name, terminal
from grader.outputs import names
from grader.outputs.gradebook import Gradebook, Removal, now
from grader.outputs.rebuild import Rebuilt, update

REASON_LIMIT = 500  # characters of a removal's reason kept
BY_LIMIT = 100


def remove_students(out_dir: Path, removals: list[Removal]) -> Rebuilt:
    """Remove these students from the batch in OUT in one commit; a student not in its gradebook
    is a UsageError naming them (and the removal on record, or the closest id)."""
    book = names.OutputFolder(out_dir).gradebook
    if not book.is_file():
        raise UsageError(f"{book} does not exist: pass the -o folder of an earlier batch")

    def change(gradebook: Gradebook) -> None:  # under OUT's lock: checked and removed together
        students, before = gradebook.students(), gradebook.removals()
        for removal in removals:
            if removal.student not in students:
                raise UsageError(not_there(removal.student, students, before, out_dir))
        for removal in removals:
            gradebook.remove(removal)

    return update(out_dir, change=change)


def _fold(text: str) -> str:
    """A student id as a person types it: no case, no accents, letters and digits only."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if c.isalnum() and not unicodedata.combining(c))


def same_student(student: str, students: list[str]) -> str | None:
    """The id of `students` that `student` is, written in another Unicode form (a name copied from
    a macOS file name is NFD, the gradebook's NFC)."""
    found = [s for s in students if unicodedata.normalize("NFC", s) == unicodedata.normalize("NFC", student)]
    return found[0] if len(found) == 1 else None


def closest(student: str, students: list[str]) -> str | None:
    """The id nearest to one that is not a student's, for "did you mean": the same letters and
    digits but for case and accents; else an id holding what was typed, or held in it (`alice` for
    Canvas's `doealice_10001`, `alice@uni.edu`); else the closest by difflib, on those forms. One
    rule for `grade adjust`, `grade remove` and `--only`."""
    want = _fold(student)
    if not want:
        return None
    folded = {s: _fold(s) for s in students}

    def best(pool: list[str]) -> str:
        return min(pool, key=lambda s: (-difflib.SequenceMatcher(None, want, folded[s]).ratio(), s))

    same = [s for s, f in folded.items() if f == want]
    if same:
        return best(same)
    holding = [s for s, f in folded.items() if len(want) >= 3 and len(f) >= 3 and (want in f or f in want)]
    if holding:
        return best(holding)
    near = difflib.get_close_matches(want, sorted(set(folded.values())), n=1)
    return best([s for s, f in folded.items() if f == near[0]]) if near else None


def not_there(student: str, students: list[str], before: list[Removal], out_dir: Path,
              then: str = "there is nothing left to remove") -> str:
    """The sentence for an id that is no student of the batch: the removal on record (and `then`),
    or the closest id."""
    earlier = [r for r in before if r.student == student]
    if earlier:
        last = earlier[-1]
        return (f"{student!r} was removed from {out_dir} on {last.removed_at[:10]} by {last.by}"
                + (f" ({last.reason})" if last.reason else "") + f": {then}")
    close = closest(student, students)
    return f"no student {student!r} in {out_dir}" + (f" (did you mean {close!r}?)" if close else "")


def remove(parser: type[argparse.ArgumentParser], argv: list[str]) -> int:
    p = parser(prog="grade remove", description="Take students out of a batch: their report, feedback page "
               "and Gradescope results are deleted, summary.csv, the class page and the exports rebuilt "
               "without them, and the gradebook keeps the removal (who, when, why) and their last report. "
               "A removed student whose file is graded again comes back.")
    p.add_argument("outdir", type=Path, metavar="OUTDIR", help="the -o folder of a batch")
    p.add_argument("students", nargs="+", metavar="STUDENT", help="student ids, as in the gradebook")
    p.add_argument("--reason", default="", help="why (kept in the gradebook's removals)")
    p.add_argument("--by", default=None, help="who (default: the user running it)")
    args = p.parse_args(argv)
    by = (args.by or os.environ.get("GRADER_USER") or getpass.getuser())[:BY_LIMIT]
    at = now()
    wanted = list(dict.fromkeys(args.students))
    rebuilt = remove_students(args.outdir, [Removal(student=s, removed_at=at, by=by,
                                                    reason=args.reason.strip()[:REASON_LIMIT])
                                            for s in wanted])
    with Gradebook(names.OutputFolder(args.outdir).gradebook) as gradebook:
        kept = {r.student: r for r in gradebook.removals()}
    left = len(rebuilt.reports)
    for student in wanted:
        print(f"removed {name(student)} from {terminal(args.outdir, PATH_LIMIT)} "
              f"({left} student{'s' if left != 1 else ''} left)")
        path = kept[student].path
        if path and os.path.lexists(path):
            print(f"  their file {terminal(path, PATH_LIMIT)} is still there: a batch of its folder grades "
                  "them again; move it away to keep them out")
    for warning in rebuilt.warnings:
        print(f"grade: {terminal(warning)}", file=sys.stderr)
    return 2 if rebuilt.warnings else 0
