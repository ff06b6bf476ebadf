"""`grade DIR... -o OUT`: discover, grade (resuming), and write reports, summary and gradebook.

Steps: discover the submissions; read each once, bounded (`submission.peek`: its sha256 and the
assignment its notebook metadata names); decide the one assignment the batch grades; skip those
whose stored result is current by the resume key (the submission's bytes, the assignment's
digest, the grader's and JAX's versions: `gradebook.Stored`), unless `force` or `only`; grade
the rest with an executor (local processes or a Dask cluster), recording each report as it is
done; and rebuild every output from the gradebook (`term.outputs`) in one commit
(`term.staging`), every CHECKPOINT_EVERY reports and at the end, Ctrl-C included, so what was
done is kept, a rerun resumes, and a crash leaves the last consistent state.

Which assignment (`grader.assignment.choice.decide_assignment`, where every choice of an assignment is
made): the one given with -a (an id, or a folder of the instructor's); else the one that a strict
majority of the readable submissions names; else the only assignment there is. Without such a
majority the batch stops before anything is graded, with one line giving the count per
assignment and asking for -a; so does a batch that cannot tell at all. Every submission is then
graded as that assignment (modules and notebooks without metadata too): a notebook naming another known assignment gets
an error report naming both ("this notebook says it is for ch2-practice, but this batch grades
ch2-jit"), one naming anything else (a path, `..`, a non-string, an unknown id) an error report
saying it is not an assignment here. Nothing a notebook names is ever loaded.

The hidden inputs are drawn from the batch's one seed, kept with it in OUT's gradebook
(grader/batch/seed.py): a resumed batch grades what it regrades with that seed, so identical
files get identical verdicts; `new_seed` (or another `--seed`) draws new inputs and regrades all.
A batch started with `per_student` keeps a seed per student instead (grader/batch/student_seeds.py):
each regrade of a student uses theirs, and `new_seed` draws a new one for every student.

A student of the gradebook whose file is no longer among those graded (a file renamed or
removed) stays in every output; a batch of whole folders names them (`BatchResult.gone`), and
`grade remove` (grader/term/remove.py) takes them out.

Whatever is wrong with one student's files (a link, a FIFO, an OS error, too big, unreadable)
is that student's error report, and the batch goes on. Reports are written to
`OUT/<student_file_stem(student)>.json`; the ids themselves are kept verbatim inside.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel

from grader import assignment as assignments
from grader import interrupts, precompile
from grader.assignment.choice import decide_assignment, wrong_claim
from grader.assignment.digest import assignment_digest
from grader.batch.discovery import Discovery, discover
from grader.batch.executors import Executor, LocalExecutor, SerialExecutor, Task, error_report
from grader.batch.progress import Progress
from grader.batch.seed import choose_seed
from grader.batch.student_seeds import seed_settings, seeds_for
from grader.errors import SubmissionUnreadable, UsageError
from grader.faults import is_internal
from grader.options import GradeOptions
from grader.outputs.gradebook import ExportSettings, Gradebook, SeedDraw, Stored
from grader.outputs.names import OutputFolder
from grader.outputs.rebuild import rebuild
from grader.outputs.staging import Staging, locked, recover
from grader.report import Report, environment
from grader.submission import Peek, display_path, peek
from grader.term import reference_programs
from grader.term.late import load_policy, load_times
from grader.term.lms import stored_canvas_roster


class BatchResult(BaseModel):
    """What a batch did, adding up: found = graded + not_graded + unchanged (+ files skipped)."""

    found: int = 0  # students found (each with a submission, a problem, or two submissions)
    graded: int  # graded now, status "graded"
    resumed: int  # kept from an earlier run: current by the resume key
    errors: int  # not graded now: an error report each
    not_graded: dict[str, list[str]] = {}  # reason -> students, for every error report written now
    died: list[str] = []  # graded, but a cell killed the kernel (the exercise after it scored 0)
    interrupted: bool
    terminated: bool = False  # the interruption was SIGTERM (exit 143), not Ctrl-C (130)
    skipped: dict[str, str]  # files and folders that are not submissions
    below: list[str] = []  # students under --fail-under
    internal: list[str] = []  # students whose grading met a grader bug (grader.faults): exit 3
    assignment: str | None = None  # what the batch graded (-a, or decided from the notebooks)
    recovered: bool = False  # an earlier run's interrupted commit was finished first
    seed: int | None = None  # of the hidden inputs of every submission graded now: the batch's (None: per student)
    per_student: bool = False  # the batch keeps a seed per student (grader/batch/student_seeds.py)
    per_student_chosen: bool = False  # chosen by this run (its first grading)
    seeds_first: int = 0  # per student: students given their first seed now
    seeds_redrawn: int = 0  # per student: students given a new seed now (--new-seed)
    seed_draw: SeedDraw | None = None  # the batch's seed, when it was drawn, whether the instructor asked
    seed_new: bool = False  # drawn by this run: the batch's first, or one asked for (`seed_draw.redrawn`)
    seed_before: int | None = None  # the seed a new draw replaced
    other_seed: list[str] = []  # students still graded with an earlier seed (no file now, or interrupted)
    gone: list[str] = []  # students of OUT whose file is not among those graded (a batch of whole folders)
    warnings: list[str] = []  # an export that could not be rebuilt


def not_graded_lines(result: BatchResult, limit: int = 8) -> list[str]:
    """Every student not graded, grouped by reason (the ids as given; the caller makes them inert)."""
    lines = []
    for reason, students in sorted(result.not_graded.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        shown = ", ".join(sorted(students)[:limit]) + (f", and {len(students) - limit} more" if len(students) > limit else "")
        lines.append(f"  {reason} ({len(students)}): {shown}")
    return lines


def executor_for(jobs: int, scheduler: str | None) -> Executor:
    if scheduler:
        from grader.batch.cluster import DaskExecutor

        return DaskExecutor(scheduler)
    return LocalExecutor(jobs) if jobs > 1 else SerialExecutor()


def _as_recorded(found: Discovery, paths: list[Path], out_dir: Path, student: str | None) -> Discovery:
    """One file graded into a batch's folder is a regrade of the student it was graded for
    (`--student`, else the gradebook's student for that path, else the file's stem)."""
    if len(paths) != 1 or len(found.submissions) != 1:
        return found
    item = found.submissions[0]
    book_path = OutputFolder(out_dir).gradebook
    if student is None and book_path.is_file():
        with Gradebook(book_path) as book:
            student = book.student_at(os.path.abspath(item.path))
    if student is None or student == item.student:
        return found
    return found.model_copy(update={"submissions": [item.model_copy(update={"student": student})]})


def _not_among_the_submissions(folder: Path, paths: list[Path]) -> None:
    """The assignment is instructor code run in the grader's process: one found inside the
    folders being graded (`./assignments` of a submissions folder) could be a student's."""
    for path in paths:
        given = Path(path).resolve()
        if given.is_dir() and (folder == given or given in folder.parents):
            raise UsageError(f"the assignment folder {folder} is inside {path}, which is being graded: run grade "
                             "from the course's folder, or pass --assignments DIR")


_KIND_REASONS = {
    "unreadable": "not a notebook or module the grader can read",
    "wrong_assignment": "a submission for another assignment",
    "overloaded": "the machine kept it from the CPU past its time limit",
    "grader_bug": "the grader failed on it (a grader bug)",
}


def reason_group(report: Report) -> str:
    """What an error report's reason is, without the student's own path or details: the key
    under which a batch's end groups the students not graded. It is the report's `error_kind`
    where the fault boundary set one (never parsed from the sentence); otherwise (a file
    discovery refused, a grading process that died) the sentence, less the student's path."""
    if report.error_kind is not None:
        return _KIND_REASONS[report.error_kind]
    reason = report.error or "no reason given"
    path = report.submission.path
    for prefix in (path, display_path(Path(path)) if path else ""):
        if prefix and reason.startswith(prefix + ": "):
            reason = reason[len(prefix) + 2:]
    return reason[:120]


def _submitted_at(path: str) -> str | None:
    """The file's modification time, for a late policy (an LMS download keeps it)."""
    from datetime import datetime, timezone

    try:
        return datetime.fromtimestamp(os.lstat(path).st_mtime, timezone.utc).isoformat(timespec="seconds")
    except OSError:
        return None


CHECKPOINT_EVERY = 25
"""Reports recorded between two commits of a long batch: a crash loses at most these."""


def grade_many(paths: list[Path], out_dir: Path, options: GradeOptions, *, jobs: int = 1,
               force: bool = False, formats: set[str] = frozenset(), scheduler: str | None = None,
               fail_under: float | None = None, only: list[str] | None = None,
               settings: ExportSettings | None = None, new_seed: bool = False,
               per_student: bool = False) -> BatchResult:
    """Grade what `paths` hold into OUT; with `only`, regrade just those students (forced) and
    rebuild everything else around them; with `new_seed`, draw new hidden inputs and regrade all;
    with `per_student` (at OUT's first grading), draw a seed per student for life.
    Every update of OUT is one commit (`term.staging`)."""
    found = _as_recorded(discover(paths, roster=stored_canvas_roster(out_dir)), paths, out_dir,
                         options.student)
    # (student, printable path, reason, its group at the batch's end: the reason without their details)
    failed: list[tuple[str, str, str, str]] = []
    for problem in found.problems:
        failed.append((problem.student, problem.path, f"{problem.path}: {problem.reason}", problem.reason))
    for student, clash in found.conflicts.items():
        names = ", ".join(display_path(p) for p in clash)
        failed.append((student, display_path(clash[0]), f"two submissions for one student: {names}",
                       "two submissions for one student"))
    peeked: list[tuple[str, Path, Peek]] = []
    for item in found.submissions:
        try:
            peeked.append((item.student, item.path, peek(item.path)))
        except SubmissionUnreadable as exc:
            failed.append((item.student, display_path(item.path), str(exc), _KIND_REASONS["unreadable"]))
    if only is not None:
        everyone = {f[0] for f in failed} | {s for s, _, _ in peeked}
        unknown = [s for s in only if s not in everyone]
        if unknown:
            from grader.term.remove import closest  # the near name as grade adjust and remove find it

            close = closest(unknown[0], sorted(everyone))
            raise UsageError(f"--only: no submission of {unknown[0]!r} in {', '.join(map(str, paths))}"
                             + (f" (did you mean {close!r}?)" if close else ""))
        failed = [f for f in failed if f[0] in only]
        peeked = [p for p in peeked if p[0] in only]
        force = True

    chosen = decide_assignment(options.assignment, [p.assignment_hint for _, _, p in peeked], needed=bool(peeked))
    folder = assignments.resolve(chosen).resolve() if chosen else None
    if folder is not None:
        _not_among_the_submissions(folder, paths)
    batch_id = assignments.read_spec(folder).id if folder else None
    digest = assignment_digest(folder) if folder else None
    options = options.model_copy(update={"assignment": chosen})
    known = assignments.available()
    candidates: list[tuple[str, Path, Peek]] = []
    for student, path, item in peeked:
        assert folder is not None and batch_id is not None  # an assignment is decided for every peeked item
        wrong = wrong_claim(item.path, item.assignment_hint, batch_id, folder, known)
        if wrong is not None:
            failed.append((student, item.path, str(wrong), _KIND_REASONS["wrong_assignment"]))
        else:
            candidates.append((student, path, item))

    # the whole class: every student of OUT should be among those found, and a new seed can regrade all
    whole = only is None and all(Path(p).is_dir() for p in paths)
    out_dir.mkdir(parents=True, exist_ok=True)
    with locked(out_dir):  # the whole batch, checkpoints included: no other command interleaves
        return _grade_into(out_dir, options, failed, candidates, found, batch_id, digest, jobs=jobs,
                           force=force, formats=formats, scheduler=scheduler, fail_under=fail_under,
                           settings=settings, new_seed=new_seed, whole=whole, per_student=per_student)


def _grade_into(out_dir: Path, options: GradeOptions, failed: list[tuple[str, str, str, str]],
                candidates: list[tuple[str, Path, Peek]], found: Discovery, batch_id: str | None,
                digest: str | None, *, jobs: int, force: bool, formats: set[str], scheduler: str | None,
                fail_under: float | None, settings: ExportSettings | None, new_seed: bool,
                whole: bool, per_student: bool) -> BatchResult:
    recovered = recover(out_dir)
    policy = load_policy(out_dir)  # a bad late.toml or times CSV stops the batch before it grades,
    if policy is not None:         # not at its commit, which would discard the grading
        load_times(out_dir, policy)
    env = environment()
    result = BatchResult(found=len(failed) + len(candidates), graded=0, resumed=0, errors=0,
                         interrupted=False, skipped=found.skipped, assignment=batch_id, recovered=recovered)
    batch = _Committing(out_dir, settings or ExportSettings(gradescope="gradescope" in formats))
    try:
        book = batch.gradebook
        found_now = {f[0] for f in failed} | {c[0] for c in candidates}
        seed_of = _seeds(book, options, result, sorted(found_now), new_seed=new_seed, whole=whole,
                         per_student=per_student)
        if whole:
            result.gone = [s for s in book.students() if s not in found_now]

        def with_seed(student: str) -> GradeOptions:
            return options.model_copy(update={"seed": seed_of[student]})

        def keep(report: Report, group: str | None = None) -> None:
            batch.record(report, digest)
            if report.status == "error":
                result.errors += 1
                result.not_graded.setdefault(group or reason_group(report), []).append(report.student or "?")
            else:
                result.graded += 1
                if any(p.status == "died" for p in report.cell_problems):
                    result.died.append(report.student or "?")
            if is_internal(report):
                result.internal.append(report.student or "?")

        for student, shown, reason, group in sorted(failed):
            keep(error_report(Task(student=student, path=shown, options=with_seed(student)), reason), group)
        tasks = []
        key = Stored(sha256=None, assignment=batch_id, assignment_digest=digest, grader_version=env.grader,
                     jax_version=env.jax)
        for student, path, item in candidates:
            mine = key.model_copy(update={"sha256": item.sha256, "seed": seed_of[student]})
            if not force and batch.gradebook.is_current(student, mine):
                result.resumed += 1
                continue
            # absolute, not resolved (links are not followed): cluster workers need not share
            # the client's working directory
            tasks.append(Task(student=student, path=os.path.abspath(path), options=with_seed(student)))
        if tasks and options.assignment:  # the reference's programs, compiled once for the class
            precompile.ensure(assignments.load(options.assignment), sandbox=options.sandbox)
            reference_programs.ensure(assignments.load(options.assignment), options)  # for copied work
        progress = Progress(len(tasks))
        try:
            for _, report in executor_for(jobs, scheduler).map(tasks):
                keep(report)
                progress.update(report.status == "graded")
        except KeyboardInterrupt as stop:
            result.interrupted = True
            result.terminated = isinstance(stop, interrupts.Terminated)
        finally:
            progress.close()
        result.other_seed = batch.gradebook.graded_with_another_seed(result.seed)
        reports = batch.commit()
    except BaseException:
        batch.abort()
        raise
    result.warnings = batch.warnings
    result.below = [s for s, r in reports.items()
                    if fail_under is not None and r.max_score and 100 * r.final / r.max_score < fail_under]
    return result


def _seeds(book: Gradebook, options: GradeOptions, result: BatchResult, students: list[str], *,
           new_seed: bool, whole: bool, per_student: bool) -> dict[str, int]:
    """Each student's seed for this grading: the batch's one (grader/batch/seed.py), or their own
    when the batch keeps one per student (grader/batch/student_seeds.py); what was drawn goes in
    `result`."""
    kept = book.seed_settings().per_student
    if seed_settings(book, per_student=per_student, given=options.seed).per_student:
        drawn = seeds_for(book, students, redraw=new_seed, whole_batch=whole)
        result.per_student, result.per_student_chosen = True, not kept
        result.seeds_first, result.seeds_redrawn = drawn.first, drawn.redrawn
        return drawn.seeds
    recorded = book.seed()
    stored = recorded or book.seed_most_graded_with()
    choice = choose_seed(stored, options.seed, new_seed, whole_batch=whole)
    if choice.new or recorded is None:
        book.record_seed(choice.draw)
    result.seed, result.seed_draw, result.seed_new = choice.seed, choice.draw, choice.new
    if stored is not None and choice.new and choice.draw.redrawn:
        result.seed_before = stored.seed
    return dict.fromkeys(students, choice.seed)


class _Committing:
    """The batch's open update of OUT: reports are recorded into a staged gradebook, and every
    CHECKPOINT_EVERY reports (and at the end, Ctrl-C included) all outputs are rebuilt and
    committed together. A SIGKILL loses only what was recorded since the last commit."""

    def __init__(self, out_dir: Path, settings: ExportSettings):
        self.out_dir, self.requested = out_dir, settings
        self.warnings: list[str] = []
        self._open()

    def _open(self) -> None:
        self.stage = Staging(self.out_dir)
        self.gradebook = Gradebook(self.stage.gradebook())
        self.settings = self.gradebook.export_settings().merged(self.requested)
        self.changed: set[str] = set()

    def record(self, report: Report, digest: str | None) -> None:
        self.gradebook.record(report, assignment_digest=digest, submitted_at=_submitted_at(report.submission.path))
        self.changed.add(report.student or "?")
        if len(self.changed) >= CHECKPOINT_EVERY:
            self.commit()
            self._open()

    def commit(self) -> dict[str, Report]:
        try:
            rebuilt = rebuild(self.stage, self.gradebook, self.settings, self.changed)
        finally:
            self.gradebook.close()
        self.stage.commit()
        self.warnings.extend(rebuilt.warnings)
        return rebuilt.reports

    def abort(self) -> None:
        self.gradebook.close()
        self.stage.abort()
