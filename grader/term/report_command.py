"""`grade report OUTDIR [--json]`: what the class got wrong, from a batch's gradebook.

Per check, the share of the students who answered its exercise that failed it, and the failures
grouped by the message the students got and by their compiled program, each group naming one
student whose feedback page to open (grader.outputs.classpage.analysis; the class page shows the
same). `--json` prints the `ClassAnalysis` model (docs/grading-a-class.md). It reads the batch's
final reports and changes nothing. For the instructor: nothing of it reaches a student.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from grader.errors import UsageError
from grader.inert import MESSAGE_LIMIT, NAME_LIMIT, terminal
from grader.outputs import names
from grader.outputs.classpage.analysis import ClassAnalysis

__all__ = ["report", "text_of"]

SHOWN_GROUPS = 3
"""Message groups printed per check (the largest); `--json` has them all."""


def report(parser: type[argparse.ArgumentParser], argv: list[str]) -> int:
    p = parser(prog="grade report", description="What the class got wrong: per check, the share of students "
               "who failed it, their failures grouped by the message they got and by their compiled program, "
               "and one student's feedback page to open for each. Reads the batch; changes nothing.")
    p.add_argument("outdir", type=Path, metavar="OUTDIR", help="the -o folder of a batch")
    p.add_argument("--json", action="store_true", help="print it as JSON (docs/grading-a-class.md)")
    args = p.parse_args(argv)
    analysis = analyze_batch(args.outdir)
    print(analysis.model_dump_json(indent=2) if args.json else "\n".join(text_of(analysis, args.outdir)))
    return 0


def analyze_batch(out_dir: Path) -> ClassAnalysis:
    """The analysis of a batch's final reports (late penalties and adjustments do not change it)."""
    from grader.outputs.classreport import class_analysis
    from grader.outputs.gradebook import Gradebook
    from grader.outputs.rebuild import final_reports
    from grader.term.reference_programs import cached_for

    book = names.OutputFolder(out_dir).gradebook
    if not book.is_file():
        raise UsageError(f"{book} does not exist: pass the -o folder of an earlier batch")
    with Gradebook(book) as gradebook:
        reports = final_reports(gradebook, out_dir)
    return class_analysis(reports, feedback_file=names.feedback_file_name, reference=cached_for(reports))


def text_of(analysis: ClassAnalysis, out_dir: Path) -> list[str]:
    """The analysis for a terminal, every student-supplied string made inert: the checks that some
    student failed, the largest share first, each with its largest groups by message."""
    failing = [c for c in analysis.checks if c.failed]
    lines = [(f"{len(failing)} of {len(analysis.checks)} checks failed by at least one of the "
              f"{analysis.graded} graded students")]
    for c in failing:
        lines.append(f"{terminal(c.id, NAME_LIMIT)}  {c.failed}/{c.judged} failed "
                     f"({100 * c.share:.0f}%): {terminal(c.title, MESSAGE_LIMIT)}")
        for g in c.by_message[:SHOWN_GROUPS]:
            lines.append(f"  {g.count:>4}  {terminal(g.message, MESSAGE_LIMIT)}")
            lines.append(f"        e.g. {terminal(out_dir / g.example_feedback, MESSAGE_LIMIT)}")
        if len(c.by_message) > SHOWN_GROUPS:
            lines.append(f"        and {len(c.by_message) - SHOWN_GROUPS} more message(s): --json lists them")
        same = [g for g in c.by_program if g.program is not None and g.count > 1]
        if same:
            largest = same[0]
            lines.append(f"        {largest.count} of them wrote the same program"
                         + (" (the reference solution's)" if largest.reference else ""))
    return lines
