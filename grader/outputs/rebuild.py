"""Rebuild every output of a batch from its gradebook, into a staging folder.

One function writes them all, so a regrade, an adjustment, a change of the late policy and
`grade export` produce the same files: each student's report (final score, adjustments, late
penalty) and feedback page, summary.csv, index.html with the copied-work groups, and the exports
the batch keeps (Gradescope, Canvas, Moodle). Unchanged student files are not rewritten; the
files of a student removed from the gradebook (`grade remove`) are deleted in the same commit, so
no output names a student the others do not.

The class page says what happened to the batch as a whole, one line each under its title
(`batch_notices`): hidden inputs drawn again (the batch's one seed, or every student's own), and
whether every submission has been regraded on them since.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from grader.errors import GraderError
from grader.outputs.gradebook import ExportSettings, Gradebook
from grader.outputs.names import (
    CANVAS_CSV,
    CLASS_PAGE,
    GRADESCOPE,
    MOODLE_CSV,
    SUMMARY_CSV,
    OutputFolder,
    feedback_file_name,
    gradescope_results_name,
    report_file_name,
)
from grader.outputs.staging import Staging
from grader.report import Report
from grader.term.final import finalize
from grader.term.late import load_policy, load_times
from grader.term.lms import CanvasFill, fill_canvas, write_moodle

__all__ = ["Rebuilt", "batch_notices", "rebuild", "update"]


class Rebuilt(BaseModel):
    """What a rebuild wrote: the final reports, how the Canvas column was filled, and each export's
    outcome."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    reports: dict[str, Report]
    canvas: CanvasFill | None = None
    written: list[str] = []  # the exports written (names.GRADESCOPE, CANVAS_CSV, MOODLE_CSV)
    warnings: list[str] = []  # one sentence per export not written (the rest of the commit stands)


def final_reports(gradebook: Gradebook, out_dir: Path) -> dict[str, Report]:
    """Every student's report with the late policy and the adjustments applied."""
    policy = load_policy(out_dir)
    times = load_times(out_dir, policy) if policy else {}
    adjustments = gradebook.adjustments()
    recorded = gradebook.submitted_at()
    return {student: finalize(report, adjustments.get(student, []), policy, times, recorded.get(student))
            for student, report in gradebook.reports().items()}


def _feedback(report: Report) -> bytes:
    """The page to hand back (the submission read again, bounded as before; one that cannot be
    read any more gives a page without code)."""
    from grader.views.page import page
    from grader.submission import read_submission

    try:
        cells = read_submission(Path(report.submission.path)).cells if report.status == "graded" else []
    except (GraderError, OSError):
        cells = []
    return page(report, cells).encode("utf-8")


def batch_notices(gradebook: Gradebook) -> list[str]:
    """The class page's lines about the batch as a whole (plain text)."""
    if gradebook.seed_settings().per_student:
        redrawn = gradebook.last_student_redraw()
        if redrawn is None:
            return []
        when = f"hidden inputs redrawn on {redrawn[:10]}, a new seed for each student"
        behind = gradebook.graded_with_another_seed(None)
    else:
        draw = gradebook.seed()
        if draw is None or not draw.redrawn:
            return []
        when = f"hidden inputs redrawn on {draw.drawn_at[:10]}"
        behind = gradebook.graded_with_another_seed(draw.seed)
    if not behind:
        return [f"{when}: every submission regraded"]
    shown = ", ".join(behind[:8]) + (f" and {len(behind) - 8} more" if len(behind) > 8 else "")
    return [f"{when}: {len(behind)} submission(s) still graded on the earlier ones ({shown}): "
            "grade the folder again, or remove the students whose file is gone"]


def _with_notices(page: Path, notices: list[str]) -> None:
    """Put `notices` under the class page's title (the page's own note style), escaped."""
    if not notices:
        return
    import html

    from grader.atomic import write_atomic
    from grader.inert import text

    content = page.read_text(encoding="utf-8")
    at = content.find("</h1>")
    if at < 0:
        return
    at += len("</h1>")
    lines = "".join(f'<p class="note warn">{html.escape(text(n))}</p>' for n in notices)
    write_atomic(page, content[:at] + lines + content[at:])


def _delete_removed(stage: Staging, gradebook: Gradebook, reports: dict[str, Report]) -> None:
    """Stage the deletion of every file a removed student still has in OUT (not graded since)."""
    out_dir = stage.out_dir
    for student in {r.student for r in gradebook.removals()} - set(reports):
        files = (report_file_name(student), feedback_file_name(student), gradescope_results_name(student))
        for name in files:
            if (out_dir / name).exists():
                stage.delete(name)


def rebuild(stage: Staging, gradebook: Gradebook, settings: ExportSettings,
            changed: set[str] = frozenset(), notices: Sequence[str] = ()) -> Rebuilt:
    """Write every output into `stage`; `changed` are the students graded again just now
    (their feedback page is rebuilt even when their report reads the same); `notices`, more lines
    for the class page from whoever rebuilds (the hand-in service: grades the LMS refused)."""
    from grader.outputs.classreport import write_class_report
    from grader.outputs.exports import write_gradescope, write_summary_csv
    from grader.term.reference_programs import cached_for
    from grader.term.similarity import record_groups, similar_groups

    out_dir = stage.out_dir
    reports = final_reports(gradebook, out_dir)
    gradebook.set_final({s: r.final for s, r in reports.items()})
    for student, report in reports.items():
        json_changed = stage.write_if_changed(report_file_name(student),
                                              (report.model_dump_json(indent=2) + "\n").encode("utf-8"))
        if json_changed or student in changed or not OutputFolder(out_dir).feedback(student).is_file():
            stage.write_if_changed(feedback_file_name(student), _feedback(report))
    reference = cached_for(reports)  # the reference solution's programs: no evidence of copying
    groups = similar_groups(reports, reference=reference)
    record_groups(gradebook.connection, groups)
    write_summary_csv(reports, stage.path(SUMMARY_CSV))
    write_class_report(reports, stage.root, report_file=report_file_name, groups=groups,
                       feedback_file=feedback_file_name, reference=reference)
    _with_notices(stage.path(CLASS_PAGE), [*batch_notices(gradebook), *notices])
    _delete_removed(stage, gradebook, reports)
    rebuilt = Rebuilt(reports=reports)
    kept = gradebook.export_settings()  # what the last good rebuild used
    late_policy = load_policy(out_dir) is not None

    def canvas() -> None:
        rebuilt.canvas = fill_canvas(Path(settings.canvas_roster or ""), reports, stage.path(CANVAS_CSV),
                                     column=settings.canvas_column, late_policy=late_policy)

    # each export on its own: one that fails says so, leaves nothing of itself staged (OUT keeps its
    # last good one), and is not kept as a setting (the next rebuild uses the last good one); the
    # others, and the batch's grades, are written all the same
    exports = [(GRADESCOPE, settings.gradescope, lambda: write_gradescope(reports, stage.root),
                {"gradescope": settings.gradescope}, {"gradescope": kept.gradescope}),
               (CANVAS_CSV, bool(settings.canvas_roster), canvas,
                {"canvas_roster": settings.canvas_roster, "canvas_column": settings.canvas_column},
                {"canvas_roster": kept.canvas_roster, "canvas_column": kept.canvas_column}),
               (MOODLE_CSV, settings.moodle, lambda: write_moodle(reports, stage.path(MOODLE_CSV)),
                {"moodle": settings.moodle}, {"moodle": kept.moodle})]
    saved: dict[str, object] = {}
    for name, wanted, write, ok, before in exports:
        if not wanted:
            saved.update(ok)
            continue
        try:
            write()
        except (GraderError, OSError) as exc:
            _unstage(stage, name)
            if name == CANVAS_CSV:
                rebuilt.canvas = None
            done = "updated" if (out_dir / name).exists() else "written"
            kept_note = f", {name} stays as it was" if done == "updated" else ""
            rebuilt.warnings.append(f"{name} was not {done}{kept_note}: {exc}")
            saved.update(before)
        else:
            rebuilt.written.append(name)
            saved.update(ok)
    gradebook.save_export_settings(ExportSettings.model_validate(saved))
    return rebuilt


def _unstage(stage: Staging, name: str) -> None:
    """Drop what a failed export staged (a file, or a folder written halfway)."""
    import shutil

    staged = stage.root / name
    if staged.is_dir():
        shutil.rmtree(staged, ignore_errors=True)
    else:
        staged.unlink(missing_ok=True)


def update(out_dir: Path, settings: ExportSettings | None = None, *,
           change: Callable[[Gradebook], None] | None = None, changed: set[str] = frozenset()) -> Rebuilt:
    """Rebuild OUT's outputs from its gradebook in one commit, after `change` (an adjustment)
    is made to the staged gradebook: `grade adjust`, `grade export`."""
    stage = Staging(out_dir)
    try:
        with Gradebook(stage.gradebook()) as gradebook:
            if change is not None:
                change(gradebook)
            rebuilt = rebuild(stage, gradebook, gradebook.export_settings().merged(settings or ExportSettings()),
                              changed)
    except BaseException:
        stage.abort()
        raise
    stage.commit()
    return rebuilt
