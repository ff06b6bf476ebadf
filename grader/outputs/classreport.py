"""The class report: one self-contained HTML page over a batch's reports (`OUT/index.html`).

Why: after `grade submissions/ -o OUT`, an instructor has one JSON file per student and wants to
see the class at a glance: who was not graded and why (a report in error, no report at all, a
kernel that died), how scores are spread, which exercises and checks the class struggles with
(pass rates among the students who answered), every student sortable by score, name or status
with a link to their feedback page, the cells that raised, late penalties and adjustments, and
students whose programs are alike. The page is a single file with inline CSS, inline SVG and one
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
from grader.outputs.classpage.page import feedback_file, render_html, report_file
from grader.outputs.classpage.summary import BINS, ClassSummary, bin_index, summarize
from grader.outputs.names import OutputFolder
from grader.report import Report
from grader.term.models import SimilarGroup

__all__ = ["BINS", "ClassSummary", "bin_index", "feedback_file", "render_html", "report_file", "summarize",
           "write_class_report"]


def _assignment_title(ids: list[str]) -> str | None:
    """The spec's title when the reports are of one known assignment; else None (the id is shown)."""
    if len(ids) != 1:
        return None
    from grader.assignment import read_spec, resolve
    from grader.errors import GraderError

    try:
        return read_spec(resolve(ids[0])).title
    except (GraderError, OSError):  # an unknown or broken assignment: the page shows its id
        return None


def write_class_report(reports: dict[str, Report], out_dir: Path, *,
                       report_file: Callable[[str], str] = report_file,
                       feedback_file: Callable[[str], str] = feedback_file,
                       groups: Iterable[SimilarGroup] = (),
                       not_graded: dict[str, str] | None = None) -> Path:
    """Write `out_dir/index.html` for these reports (keys are student ids) and return its path.

    `report_file(student)` and `feedback_file(student)` name that student's JSON report and
    feedback page relative to `out_dir`; `groups` are students whose programs are alike;
    `not_graded` names students who have no report at all, with the reason (student -> reason).
    """
    summary = summarize(reports, not_graded, groups)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = OutputFolder(out_dir).class_page
    page = render_html(summary, _assignment_title(summary.assignments), report_file=report_file,
                       feedback_file=feedback_file)
    return write_atomic(target, page)
