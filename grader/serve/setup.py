"""Everything `grade serve` sets up before it listens, each check one sentence when it fails.

The assignment (as `-a` gives it: an id, or a folder of the instructor's); the roster and the
tokens issued from it (no token at all and no LTI registration: nobody could hand in, so it
refuses); the LTI registrations and the tool's key (grader/lti/, with `--lti FILE`); OUT's gradebook,
which must not hold another assignment's grades; the batch's one seed for life, drawn now if OUT
has none (grader/batch/seed.py), or, when OUT's batch draws a seed per student, each hand-in's
student's own (grader/batch/student_seeds.py); the job table and its reaper; the options every
hand-in is graded with, the same as a batch's; the workers, the grading loop and the publisher,
not started yet (the app's lifespan starts them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grader.errors import UsageError
from grader.inert import terminal
from grader.serve.app import Serving


@dataclass
class Prepared:
    serving: Serving
    notes: str = ""  # what the start line adds: hand-ins put back in the queue, students without a token


def prepare(out_dir: Path, assignment: str, roster_file: Path, *, sandboxed: bool, workers: int,
            per_minute: float, burst: int, deadline_s: float | None, scheduler: str | None = None,
            lti: Path | None = None, origin: str | None = None, seed_per_student: bool = False) -> Prepared:
    """Check and set up the service on OUT (whose lock the caller holds)."""
    from grader import assignment as assignments
    from grader.assignment.digest import assignment_digest
    from grader.batch.seed import choose_seed
    from grader.batch.student_seeds import ServedSeeds
    from grader.options import GradeOptions
    from grader.outputs.gradebook import Gradebook
    from grader.outputs.names import OutputFolder
    from grader.serve.backends import Backend, LocalBackend
    from grader.serve.jobs import JobTable
    from grader.serve.limits import RateLimit
    from grader.serve.publish import Publisher
    from grader.serve.roster import read_roster
    from grader.serve.service import Service, deadline_for, instance_name
    from grader.serve.tokens import Tokens

    folder = assignments.resolve(assignment).resolve()
    loaded = assignments.load(assignment)
    spec = loaded.spec
    roster = read_roster(roster_file)
    path = OutputFolder(out_dir).gradebook
    with Gradebook(path) as book:
        others = sorted({r[0] for r in book.connection.execute("SELECT DISTINCT assignment FROM submissions")}
                        - {spec.id})
        if others:
            raise UsageError(f"{terminal(out_dir)} holds grades of {terminal(others[0], 60)}: serve {spec.id} "
                             "into a folder of its own")
        tokens = Tokens.load(book.connection, roster)
        if not len(tokens) and lti is None:
            raise UsageError(f"no student of the roster has a token for {terminal(out_dir)} yet: run "
                             f"grade tokens {terminal(out_dir)} --roster {terminal(roster_file)} first")
        seed: int | None = None
        if seed_per_student:  # chosen at OUT's first grading, or refused in one sentence
            from grader.batch.student_seeds import seed_settings

            seed_settings(book, per_student=True, given=None)
        if not book.seed_settings().per_student:
            recorded = book.seed()
            choice = choose_seed(recorded or book.seed_most_graded_with(), None, False, whole_batch=False)
            if choice.new or recorded is None:
                book.record_seed(choice.draw)
            seed = choice.seed
        has_rows = bool(book.students())
    jobs = JobTable(path)
    worker = instance_name()
    again, lost = jobs.reap(worker)
    options = GradeOptions(assignment=assignment, seed=seed, sandbox=sandboxed)
    publisher = Publisher(out_dir)
    if has_rows or again or lost:
        publisher.changed()  # the outputs may be a rebuild behind (a run that was killed)

    def ahead() -> None:
        """What a batch does before its first grading: the reference's compiled programs and fingerprints."""
        from grader import precompile
        from grader.term import reference_programs

        try:
            precompile.ensure(loaded, sandbox=sandboxed)
            reference_programs.ensure(loaded, options)
        except Exception:  # noqa: BLE001 - both are caches: grading goes on without them, as a batch's does
            pass

    if scheduler:  # the workers of a Dask scheduler, checked now (grader/serve/dask_backend.py)
        from grader.serve.dask_backend import DaskBackend

        backend: Backend = DaskBackend(scheduler, sandbox=sandboxed, shared=[str(path)])
    else:
        backend = LocalBackend(workers, sandbox=sandboxed)
    service = Service(jobs=jobs, backend=backend, publisher=publisher,
                      options=options, assignment_digest=assignment_digest(folder),
                      deadline_s=deadline_s or deadline_for(spec), worker=worker, prepare=ahead,
                      seed_of=None if seed is not None else ServedSeeds(path))
    tool = None
    if lti is not None:  # checked before any port is bound: a launch must not be the first to find it wrong
        from grader.lti.tool import lti_tool

        tool = lti_tool(lti, out_dir, path, roster=roster, assignment=spec.id, title=spec.title,
                        max_score=spec.max_score, origin=origin)
        publisher.published = tool.grades_changed
        publisher.notices = tool.notices
        publisher.changed()  # grades owed since the last run (an adjustment, a removal) reach the outbox
    serving = Serving(out_dir=out_dir, assignment=spec.id, assignment_folder=folder, jobs=jobs, tokens=tokens,
                      service=service, publisher=publisher, rate=RateLimit(per_minute=per_minute, burst=burst),
                      lti=tool)
    notes = []
    if seed is None:
        notes.append("hidden inputs drawn per student: each hand-in uses its student's own seed")
    if again:
        notes.append(f"{again} hand-in(s) a stopped run was grading queued again")
    if lost:
        notes.append(f"{lost} hand-in(s) not graded (three runs stopped while grading each)")
    missing = len(roster) - len(tokens)
    if tool is not None:
        notes.append(f"LTI 1.3 for {len(tool.registrations.platforms)} platform registration(s): "
                     "register the addresses of /lti/config")
    elif missing:
        notes.append(f"{missing} student(s) of the roster without a token: stop the service, run grade tokens")
    return Prepared(serving=serving, notes="".join(f"; {n}" for n in notes))
