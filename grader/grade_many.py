"""`grade DIR... -o OUT`: discover, grade (resuming), and write reports, summary and gradebook.

Steps: discover the submissions; read each once, bounded (`submission.peek`: its sha256 and the
assignment its notebook metadata names); decide the one assignment the batch grades; skip those
whose stored result matches their sha256, the assignment and the grader version (unless
`force`); grade the rest with an executor (local processes or a Dask cluster), writing each
student's report and gradebook rows as soon as it is done; then rebuild summary.csv, index.html
and the requested exports from the gradebook, also after Ctrl-C, so what was done is kept and a
rerun resumes.

Which assignment (`decide_assignment`): the one given with -a (an id, or a folder of the
instructor's); else the one that a strict majority of the readable submissions names; else the
only assignment there is. Without such a majority the batch stops before anything is graded,
with one line giving the count per assignment and asking for -a; so does a batch that cannot
tell at all. Every submission is then graded as that assignment
(modules and notebooks without metadata too): a notebook naming another known assignment gets
an error report naming both ("this notebook says it is for ch2-practice, but this batch grades
ch2-jit"), one naming anything else (a path, `..`, a non-string, an unknown id) an error report
saying it is not an assignment here. Nothing a notebook names is ever loaded.

Whatever is wrong with one student's files (a link, a FIFO, an OS error, too big, unreadable)
is that student's error report, and the batch goes on. Reports are written to
`OUT/<student_file_stem(student)>.json`; the ids themselves are kept verbatim inside.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from pydantic import BaseModel

from grader import assignment as assignments
from grader.batch import Executor, LocalExecutor, SerialExecutor, Task, error_report
from grader.discovery import discover, report_file_name, student_file_stem
from grader.errors import GraderError, SubmissionUnreadable, UsageError, WrongAssignment
from grader.exports import write_gradescope, write_summary_csv
from grader.faults import is_internal
from grader.gradebook import Gradebook
from grader.options import GradeOptions
from grader.progress import Progress
from grader.report import Report, environment, write
from grader.submission import Peek, claim_text, display_path, peek


class BatchResult(BaseModel):
    graded: int
    resumed: int
    errors: int
    interrupted: bool
    skipped: dict[str, str]
    below: list[str] = []  # students under --fail-under
    internal: list[str] = []  # students whose grading met a grader bug (grader.faults): exit 3
    assignment: str | None = None  # what the batch graded (-a, or decided from the notebooks)


def executor_for(jobs: int, scheduler: str | None) -> Executor:
    if scheduler:
        from grader.cluster import DaskExecutor

        return DaskExecutor(scheduler)
    return LocalExecutor(jobs) if jobs > 1 else SerialExecutor()


def rebuild_outputs(out_dir: Path, gradebook: Gradebook, formats: set[str]) -> None:
    reports = gradebook.reports()
    write_summary_csv(reports, out_dir / "summary.csv")
    from grader.classreport import write_class_report

    write_class_report(reports, out_dir, report_file=report_file_name)
    if "gradescope" in formats:
        write_gradescope(reports, out_dir)


def write_feedback(report: Report, out_dir: Path) -> None:
    """OUT/feedback/<student>.html: the page to hand back (the submission read again, bounded as
    before; one that cannot be read gives a page without code)."""
    from grader.feedback import write_page
    from grader.submission import read_submission

    try:
        cells = read_submission(report.submission.path).cells if report.status == "graded" else []
    except GraderError:
        cells = []
    write_page(report, cells, out_dir / "feedback" / (student_file_stem(report.student or "unknown") + ".html"))


def decide_assignment(requested: str | None, hints: list[str | None], *, needed: bool = True) -> str | None:
    """The one assignment a batch grades: -a, else the one that a strict majority of the readable
    submissions names, else the only assignment there is; otherwise the batch asks for -a.

    `hints` has one entry per readable submission: what its notebook names, or None. A majority,
    not any claim: one notebook naming another assignment in a class of modules cannot decide
    what the others are graded as; it gets its own error report. Returns None when nothing is
    `needed` (no readable submission) and nothing tells.
    """
    if requested:
        return requested
    known = assignments.available()
    counts = Counter(h for h in hints if h in known)
    if counts:
        top, votes = counts.most_common(1)[0]
        if 2 * votes > len(hints):
            return top
        listed = ", ".join(f"{n} for {a}" for a, n in sorted(counts.items()))
        unnamed = len(hints) - sum(counts.values())
        raise UsageError(f"the submissions do not agree on an assignment ({listed}"
                         + (f", {unnamed} naming none" if unnamed else "") + "): pass -a to say which one this batch grades")
    if len(known) == 1:
        return known[0]
    if not needed:
        return None
    raise UsageError("cannot tell which assignment this batch grades (no notebook names one): pass -a"
                     + (f" ({', '.join(known)})" if known else ""))


def _claim_problem(item: Peek, known: list[str], folder: Path | None, batch_id: str | None) -> str | None:
    """Why a notebook's claim keeps it from being graded in this batch, or None."""
    hint = item.assignment_hint
    if hint is None:
        return None
    if hint not in known:
        return str(WrongAssignment(item.path, claim_text(hint)))
    if folder is not None and assignments.resolve(hint).resolve() != folder:
        return str(WrongAssignment(item.path, hint, batch_id))
    return None


def grade_many(paths: list[Path], out_dir: Path, options: GradeOptions, *, jobs: int = 1,
               force: bool = False, formats: set[str] = frozenset(), scheduler: str | None = None,
               fail_under: float | None = None) -> BatchResult:
    found = discover(paths)
    failed: list[tuple[str, str, str]] = []  # (student, printable path, reason): error reports
    for problem in found.problems:
        failed.append((problem.student, problem.path, f"{problem.path}: {problem.reason}"))
    for student, clash in found.conflicts.items():
        names = ", ".join(display_path(p) for p in clash)
        failed.append((student, display_path(clash[0]), f"two submissions for one student: {names}"))
    peeked: list[tuple[str, Path, Peek]] = []
    for item in found.submissions:
        try:
            peeked.append((item.student, item.path, peek(item.path)))
        except SubmissionUnreadable as exc:
            failed.append((item.student, display_path(item.path), str(exc)))

    chosen = decide_assignment(options.assignment, [p.assignment_hint for _, _, p in peeked], needed=bool(peeked))
    folder = assignments.resolve(chosen).resolve() if chosen else None
    batch_id = assignments.read_spec(folder).id if folder else None
    options = options.model_copy(update={"assignment": chosen})
    known = assignments.available()
    candidates: list[tuple[str, Path, Peek]] = []
    for student, path, item in peeked:
        why = _claim_problem(item, known, folder, batch_id)
        if why:
            failed.append((student, item.path, why))
        else:
            candidates.append((student, path, item))

    out_dir.mkdir(parents=True, exist_ok=True)
    version = environment().grader
    graded = resumed = errors = 0
    internal: list[str] = []
    interrupted = False
    with Gradebook(out_dir / "gradebook.sqlite") as gradebook:
        def keep(report) -> None:
            nonlocal errors
            write(report, out_dir / report_file_name(report.student))
            write_feedback(report, out_dir)
            gradebook.record(report)
            errors += report.status == "error"
            if is_internal(report):
                internal.append(report.student)

        for student, shown, reason in sorted(failed):
            keep(error_report(Task(student=student, path=shown, options=options), reason))
        tasks = []
        for student, path, item in candidates:
            if not force and gradebook.is_current(student, item.sha256, batch_id, version):
                resumed += 1
                continue
            # absolute, not resolved (links are not followed): cluster workers need not share
            # the client's working directory
            tasks.append(Task(student=student, path=os.path.abspath(path), options=options))
        progress = Progress(len(tasks))
        try:
            for _, report in executor_for(jobs, scheduler).map(tasks):
                keep(report)
                graded += 1
                progress.update(report.status == "graded")
        except KeyboardInterrupt:
            interrupted = True
        finally:
            progress.close()
            rebuild_outputs(out_dir, gradebook, set(formats))
        below = [s for s, r in gradebook.reports().items()
                 if fail_under is not None and r.max_score and 100 * r.score / r.max_score < fail_under]
    return BatchResult(graded=graded, resumed=resumed, errors=errors, interrupted=interrupted,
                       skipped=found.skipped, below=below, assignment=batch_id, internal=internal)
