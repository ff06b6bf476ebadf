"""`grade DIR... -o OUT`: discover, grade (resuming), and write reports, summary and gradebook.

Steps: discover the submissions; skip those whose stored result matches their sha256, the
assignment and the grader version (unless `force`); grade the rest with an executor (local
processes or a Dask cluster), writing each student's report and gradebook rows as soon as it is
done; then rebuild summary.csv, index.html and the requested exports from the gradebook, also
after Ctrl-C, so what was done is kept and a rerun resumes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import BaseModel

from grader.batch import Executor, LocalExecutor, SerialExecutor, Task, error_report
from grader.discovery import discover
from grader.exports import write_gradescope, write_summary_csv
from grader.gradebook import Gradebook
from grader.options import GradeOptions
from grader.progress import Progress
from grader.report import environment, write


class BatchResult(BaseModel):
    graded: int
    resumed: int
    errors: int
    interrupted: bool
    skipped: dict[str, str]
    below: list[str] = []  # students under --fail-under


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def executor_for(jobs: int, scheduler: str | None) -> Executor:
    if scheduler:
        from grader.cluster import DaskExecutor

        return DaskExecutor(scheduler)
    return LocalExecutor(jobs) if jobs > 1 else SerialExecutor()


def rebuild_outputs(out_dir: Path, gradebook: Gradebook, formats: set[str]) -> None:
    reports = gradebook.reports()
    write_summary_csv(reports, out_dir / "summary.csv")
    from grader.classreport import write_class_report

    write_class_report(reports, out_dir)
    if "gradescope" in formats:
        write_gradescope(reports, out_dir)


def grade_many(paths: list[Path], out_dir: Path, options: GradeOptions, *, jobs: int = 1,
               force: bool = False, formats: set[str] = frozenset(), scheduler: str | None = None,
               fail_under: float | None = None) -> BatchResult:
    out_dir.mkdir(parents=True, exist_ok=True)
    found = discover(paths)
    version = environment().grader
    graded = resumed = errors = 0
    interrupted = False
    with Gradebook(out_dir / "gradebook.sqlite") as gradebook:
        def keep(report) -> None:
            nonlocal errors
            write(report, out_dir / f"{report.student}.json")
            gradebook.record(report)
            errors += report.status == "error"

        for student, clash in found.conflicts.items():
            names = ", ".join(str(p) for p in clash)
            keep(error_report(Task(student=student, path=str(clash[0]), options=options),
                              f"two submissions for one student: {names}"))
        tasks = []
        for item in found.submissions:
            if not force and gradebook.is_current(item.student, _sha256(item.path), options.assignment, version):
                resumed += 1
                continue
            # absolute: cluster workers need not share the client's working directory
            tasks.append(Task(student=item.student, path=str(item.path.resolve()), options=options))
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
                       skipped=found.skipped, below=below)
