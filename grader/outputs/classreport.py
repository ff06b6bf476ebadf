"""The class report: one self-contained HTML page over a batch's reports (`OUT/index.html`).

Why: after `grade submissions/ -o OUT`, an instructor has one JSON file per student and wants to
see the class at a glance: who was not graded and why (a report in error, no report at all, a
kernel that died), how scores are spread, which exercises and checks the class struggles with
(pass rates among the students who answered), every student sortable by score, name or status
with a link to their feedback page, what the class got wrong (per check, the failures grouped by
the message the students got and by their compiled program, each group opening one student's
feedback page), the cells that raised, late penalties and adjustments, and students whose
programs are alike. The page is a single file with inline CSS, inline SVG and one
small inline script (allowed by its hash in the page's Content-Security-Policy, and optional:
without it the table is sorted by name); nothing is fetched from the network, so it opens
anywhere and is safe with student-supplied text (every string made inert and HTML-escaped,
every link relative and percent-encoded). Output is deterministic: the same reports give the
same bytes.

The numbers are in `grader.outputs.classpage.summary` (pure), the HTML in `grader.outputs.classpage.page`;
this module writes the file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from grader.atomic import write_atomic
from grader.outputs.classpage.analysis import ClassAnalysis, analyze, check_functions
from grader.outputs.classpage.page import feedback_file, render_html, report_file
from grader.outputs.classpage.summary import BINS, ClassSummary, assignment_ids, bin_index, summarize
from grader.outputs.names import OutputFolder
from grader.report import ProgramFingerprint, Report
from grader.spec import AssignmentSpec
from grader.term.models import SimilarGroup

__all__ = ["BINS", "ClassAnalysis", "ClassSummary", "bin_index", "class_analysis", "feedback_file",
           "render_html", "report_file", "summarize", "write_class_report"]


def _assignment_spec(ids: list[str]) -> AssignmentSpec | None:
    """The spec when the reports are of one known assignment; else None (the page shows the id)."""
    if len(ids) != 1:
        return None
    from grader.assignment import read_spec, resolve
    from grader.errors import GraderError

    try:
        return read_spec(resolve(ids[0]))
    except (GraderError, OSError):  # an unknown or broken assignment: the page shows its id
        return None


def class_analysis(reports: dict[str, Report], *, feedback_file: Callable[[str], str] = feedback_file,
                   reference: Iterable[ProgramFingerprint] | None = None) -> ClassAnalysis:
    """What the class got wrong (grader.outputs.classpage.analysis), each check's function read
    from the assignment's spec when the reports are of one known assignment."""
    return _analysis(reports, _assignment_spec(assignment_ids(reports)), feedback_file, reference)


def _analysis(reports: dict[str, Report], spec: AssignmentSpec | None, feedback_file: Callable[[str], str],
              reference: Iterable[ProgramFingerprint] | None) -> ClassAnalysis:
    return analyze(reports, feedback_file=feedback_file, functions=check_functions(spec) if spec else None,
                   reference=reference)


def write_class_report(reports: dict[str, Report], out_dir: Path, *,
                       report_file: Callable[[str], str] = report_file,
                       feedback_file: Callable[[str], str] = feedback_file,
                       groups: Iterable[SimilarGroup] = (),
                       not_graded: dict[str, str] | None = None,
                       reference: Iterable[ProgramFingerprint] | None = None) -> Path:
    """Write `out_dir/index.html` for these reports (keys are student ids) and return its path.

    `report_file(student)` and `feedback_file(student)` name that student's JSON report and
    feedback page relative to `out_dir`; `groups` are students whose programs are alike;
    `not_graded` names students who have no report at all, with the reason (student -> reason);
    `reference` are the reference solution's fingerprints (what the class got wrong marks its
    programs).
    """
    summary = summarize(reports, not_graded, groups)
    spec = _assignment_spec(summary.assignments)
    analysis = _analysis(reports, spec, feedback_file, reference)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = OutputFolder(out_dir).class_page
    page = render_html(summary, spec.title if spec else None, report_file=report_file,
                       feedback_file=feedback_file, analysis=analysis)
    return write_atomic(target, page)
