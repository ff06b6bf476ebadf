"""The term's subcommands on a batch's folder: `grade adjust` and `grade export`.

Both change OUT only through `term.outputs.update`, one commit that rebuilds every output from
the gradebook, so the student's report, feedback page, summary.csv, index.html and the exports
always agree. `grade export --canvas` exits 4 when a graded student matched no roster row, and
names each one.
"""

from __future__ import annotations

import argparse
import getpass
import math
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from grader.errors import UsageError
from grader.inert import PATH_LIMIT, terminal
from grader.outputs import names
from grader.report import Adjustment

if TYPE_CHECKING:
    from grader.term.lms import CanvasFill


def _book(out_dir: Path) -> Path:
    book = names.OutputFolder(out_dir).gradebook
    if not book.is_file():
        raise UsageError(f"{book} does not exist: pass the -o folder of an earlier batch")
    return book


def adjust(parser: type[argparse.ArgumentParser], argv: list[str]) -> int:
    p = parser(prog="grade adjust", description="Change a student's grade by hand, with a reason: kept "
               "across regrades, shown in the student's report and feedback page, the gradebook and every "
               "export.")
    p.add_argument("outdir", type=Path, metavar="OUTDIR", help="the -o folder of a batch")
    p.add_argument("student", metavar="STUDENT", help="the student id, as in the gradebook")
    p.add_argument("--points", type=float, required=True, help="points added (negative to take off)")
    p.add_argument("--reason", required=True, help="why, in a sentence the student will read")
    p.add_argument("--by", default=None, help="who (default: the user running it)")
    args = p.parse_args(argv)
    from grader.outputs.gradebook import Gradebook

    if not math.isfinite(args.points) or args.points == 0:
        raise UsageError("--points must be a non-zero number")
    if not args.reason.strip():
        raise UsageError("--reason must say why")
    from grader.term.remove import not_there, same_student

    with Gradebook(_book(args.outdir)) as book:
        students = book.students()
        args.student = same_student(args.student, students) or args.student  # NFD from a macOS name
        reports = book.reports() if args.student in students else {}
        removals = book.removals()
    if args.student in reports and abs(args.points) > reports[args.student].max_score:
        raise UsageError(f"--points {args.points:g} is more than the assignment's "
                         f"{reports[args.student].max_score:g} points: an adjustment changes a grade, it "
                         "does not replace the assignment")
    if args.student not in students:  # the near name as --only and grade remove find it
        raise UsageError(not_there(args.student, students, removals, args.outdir,
                                   then="grade their file again to bring them back, then adjust"))
    adjustment = Adjustment(points=args.points, reason=args.reason.strip()[:500],
                            by=(args.by or os.environ.get("GRADER_USER") or getpass.getuser())[:100],
                            at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    return _record_and_update(args.outdir, args.student, adjustment)


def _record_and_update(out_dir: Path, student: str, adjustment: Adjustment) -> int:
    """The adjustment and the rebuilt outputs in one commit; 2 when an export could not follow."""
    from grader.outputs.rebuild import update

    rebuilt = update(out_dir, change=lambda book: book.adjust(student, adjustment), changed={student})
    report = rebuilt.reports[student]
    print(f"{terminal(student, 60)}: {report.final:g} / {report.max_score:g} "
          f"(graded {report.score:g}, adjusted {adjustment.points:+g})")
    for warning in rebuilt.warnings:
        print(f"grade: {terminal(warning)}", file=sys.stderr)
    return 2 if rebuilt.warnings else 0


def export(parser: type[argparse.ArgumentParser], argv: list[str]) -> int:
    p = parser(prog="grade export", description="Rebuild a batch's outputs from its gradebook, without "
               "grading, and add exports: they are kept up to date by every later regrade and adjustment.")
    p.add_argument("outdir", type=Path, help="the -o folder of an earlier batch")
    p.add_argument("--gradescope", action="store_true",
                   help=f"{names.GRADESCOPE}/<student>/{names.GRADESCOPE_RESULTS}")
    p.add_argument("--canvas", type=Path, metavar="ROSTER.csv",
                   help="fill this batch's column of a Canvas gradebook export (writes OUTDIR/canvas.csv)")
    p.add_argument("--canvas-column", metavar="COLUMN",
                   help="the Canvas column to fill (default: found by id)")
    p.add_argument("--moodle", action="store_true", help="a Moodle grade-import CSV (OUTDIR/moodle.csv)")
    p.add_argument("--csv", action="store_true", help="summary.csv (always rebuilt; kept for older scripts)")
    p.add_argument("--html", action="store_true", help="index.html (always rebuilt; kept for older scripts)")
    args = p.parse_args(argv)
    _book(args.outdir)
    if args.canvas is not None and not args.canvas.is_file():
        raise UsageError(f"{args.canvas} does not exist: pass the CSV that Canvas's Grades > Export wrote")
    from grader.outputs.gradebook import ExportSettings
    from grader.outputs.rebuild import update

    folder = names.OutputFolder(args.outdir)
    if args.canvas is not None and args.canvas.resolve() == folder.canvas_csv.resolve():
        raise UsageError(f"{args.canvas} is what this export writes: pass the CSV Canvas exported, kept "
                         "elsewhere")

    wanted = ExportSettings(gradescope=args.gradescope,
                            canvas_roster=str(args.canvas.resolve()) if args.canvas else None,
                            canvas_column=args.canvas_column, moodle=args.moodle)
    rebuilt = update(args.outdir, wanted)
    # each export says its own outcome, the ones written and the ones that failed alike
    if rebuilt.canvas is not None:
        for line in rebuilt.canvas.describe():
            print(line.replace(str(folder.staging), str(args.outdir)))
    exports = {names.GRADESCOPE: folder.gradescope, names.CANVAS_CSV: folder.canvas_csv,
               names.MOODLE_CSV: folder.moodle_csv}  # asked now or kept by the batch
    shown = [folder.summary_csv, folder.class_page] + [path for name, path in exports.items()
                                                       if name in rebuilt.written]
    for path in shown:
        print(terminal(path, PATH_LIMIT))
    for warning in rebuilt.warnings:
        print(f"grade: {terminal(warning)}", file=sys.stderr)
    unmatched = _unmatched(rebuilt.canvas)
    return EXPORT_FAILED_EXIT if rebuilt.warnings else unmatched


EXPORT_FAILED_EXIT = 2
"""`grade export` when an export asked for could not be written (a column Canvas does not import,
ids Moodle cannot match): its sentence says why, after every other export's outcome (those are
written); the failed one leaves OUT's earlier file as it was and is not kept for later rebuilds."""


UNMATCHED_EXIT = 4
"""`grade export` when a graded student's score went nowhere: the export is written, as a batch
writes the reports it could grade, and, as a batch's 4 does for the students it could not grade,
every student left out is named, one line each (2 would say nothing was done and the command
should change; here the roster or the files' names should)."""


def _unmatched(fill: CanvasFill | None) -> int:
    """Each student of the batch that matched no roster row, one line each on stderr; 4 if any
    of them was graded (a student who could not be graded has no score to lose), else 0."""
    if fill is None:
        return 0
    for student in fill.unmatched:
        print(f"grade: {student.line()}", file=sys.stderr)
    if fill.graded_unmatched:
        print(f"grade: {len(fill.graded_unmatched)} graded student(s) matched no row of the Canvas export: "
              "their scores are not in canvas.csv", file=sys.stderr)
        return UNMATCHED_EXIT
    return 0
