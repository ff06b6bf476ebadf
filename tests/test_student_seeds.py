"""Hidden inputs drawn per student (`--seed-per-student`): a seed each, drawn at random at the
student's first grading, kept in the gradebook, reused by each of their regrades and hand-ins.

Most batches here grade nothing (tests/test_batch_life.py's `Fake`: a graded report per task,
carrying the task's seed); the kernel test grades two byte-identical copies for real, to show
that they meet different hidden inputs and are still one group in the class analysis."""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import pytest
from test_batch_life import OPTIONS, Fake, a_class, seeds_table

from grader.batch.run import grade_many
from grader.errors import UsageError
from grader.options import GradeOptions
from grader.outputs.gradebook import Gradebook
from grader.outputs.names import OutputFolder
from grader.report import Report

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Fake:
    executor = Fake()
    monkeypatch.setattr("grader.batch.run.executor_for", lambda jobs, scheduler: executor)
    return executor


def stored(out: Path) -> dict[str, int]:
    with Gradebook(OutputFolder(out).gradebook) as book:
        return {s: d.seed for s, d in book.student_seeds().items()}


def report_seed(out: Path, student: str) -> int:
    return json.loads(OutputFolder(out).report(student).read_text(encoding="utf-8"))["seed"]


def test_each_student_gets_a_seed_of_their_own_and_every_regrade_reuses_it(tmp_path, fake) -> None:
    subs, out = a_class(tmp_path / "subs", "alice", "bob", "cal"), tmp_path / "out"
    shutil.copy(subs / "alice.py", subs / "bob.py")  # byte for byte alice's
    first = grade_many([subs], out, OPTIONS, per_student=True)
    seeds = fake.graded()
    assert seeds == stored(out) and len(set(seeds.values())) == 3  # each their own, drawn at random
    assert (first.per_student, first.seeds_first, first.seed, first.other_seed) == (True, 3, None, [])
    assert seeds_table(out) == []  # no batch seed
    assert {s: report_seed(out, s) for s in seeds} == seeds

    later = grade_many([subs], out, OPTIONS)  # the flag need not be repeated: the gradebook keeps it
    assert (later.resumed, later.graded, later.per_student, fake.graded()) == (3, 0, True, {})
    a_class(subs, "dora")  # arrives later: her first grading draws her seed, the others' stay
    grade_many([subs], out, OPTIONS)
    dora = fake.graded()
    assert list(dora) == ["dora"] and stored(out) == seeds | dora and dora["dora"] not in seeds.values()
    grade_many([subs], out, OPTIONS, only=["bob"])
    assert fake.graded() == {"bob": seeds["bob"]}
    grade_many([subs / "alice.py"], out, OPTIONS, force=True)  # one file into the batch, as `grade FILE -o OUT`
    assert fake.graded() == {"alice": seeds["alice"]}

    with Gradebook(OutputFolder(out).gradebook) as book:  # cal's result was graded on other inputs
        book.connection.execute("UPDATE submissions SET seed = seed + 1 WHERE student = 'cal'")
        book.connection.commit()
        assert book.graded_with_another_seed(None) == ["cal"]
    resumed = grade_many([subs], out, OPTIONS)
    assert fake.graded() == {"cal": seeds["cal"]} and resumed.resumed == 3


def test_new_seed_draws_every_student_a_new_one_and_the_class_page_says_so(tmp_path, fake) -> None:
    subs, out = a_class(tmp_path / "subs", "alice", "bob"), tmp_path / "out"
    grade_many([subs], out, OPTIONS, per_student=True)
    before = fake.graded()
    page = OutputFolder(out).class_page.read_text(encoding="utf-8")
    assert "redrawn" not in page
    with pytest.raises(UsageError, match="regrades every submission of the batch"):
        grade_many([subs], out, OPTIONS, only=["alice"], new_seed=True)
    assert fake.graded() == {}

    (subs / "bob.py").unlink()  # bob's file is gone: he stays graded on his earlier inputs
    redrawn = grade_many([subs], out, OPTIONS, new_seed=True)
    after = fake.graded()
    assert list(after) == ["alice"] and after["alice"] != before["alice"]
    assert stored(out)["bob"] != before["bob"]  # every student of the batch is drawn again
    assert (redrawn.seeds_redrawn, redrawn.other_seed) == (2, ["bob"])
    today = datetime.now(timezone.utc).date().isoformat()
    page = OutputFolder(out).class_page.read_text(encoding="utf-8")
    assert (f"hidden inputs redrawn on {today}, a new seed for each student: 1 submission(s) still graded on the "
            "earlier ones (bob)") in page
    db = sqlite3.connect(OutputFolder(out).gradebook)
    try:  # the history: first draws, then the redraw with its date
        history = db.execute("SELECT student, redrawn, drawn_at FROM student_seeds ORDER BY rowid").fetchall()
    finally:
        db.close()
    assert [(s, r) for s, r, _ in history] == [("alice", 0), ("bob", 0), ("alice", 1), ("bob", 1)]
    assert history[-1][2].startswith(today)

    a_class(subs, "bob")
    grade_many([subs], out, OPTIONS)
    assert fake.graded() == {"bob": stored(out)["bob"]}
    page = OutputFolder(out).class_page.read_text(encoding="utf-8")
    assert f"hidden inputs redrawn on {today}, a new seed for each student: every submission regraded" in page


def test_a_command_that_contradicts_the_batch_s_kind_of_seed_is_one_sentence(tmp_path, fake) -> None:
    subs = a_class(tmp_path / "subs", "alice")
    one, each = tmp_path / "one", tmp_path / "each"
    grade_many([subs], one, OPTIONS)
    grade_many([subs], each, OPTIONS, per_student=True)
    fake.graded()
    with pytest.raises(UsageError, match=r"from one seed \(\d+, since .*grade into a new folder"):
        grade_many([subs], one, OPTIONS, per_student=True)
    with pytest.raises(UsageError, match="--seed 7 gives every student one seed, but this batch draws a seed per"):
        grade_many([subs], each, OPTIONS.model_copy(update={"seed": 7}))
    with pytest.raises(UsageError, match="contradict each other"):
        grade_many([subs], tmp_path / "new", OPTIONS.model_copy(update={"seed": 7}), per_student=True)
    assert fake.graded() == {}
    with Gradebook(OutputFolder(one).gradebook) as book:  # the default: one seed, as before
        assert not book.seed_settings().per_student and book.student_seeds() == {} and book.seed() is not None


def test_the_command_line_says_how_the_hidden_inputs_were_drawn(tmp_path, fake, capsys) -> None:
    from grader.cli import main

    subs, out = a_class(tmp_path / "subs", "alice", "bob"), tmp_path / "out"
    assert main([str(subs), "-o", str(out), "-a", "ch2-jit", "--no-sandbox", "--seed-per-student"]) == 0
    printed = capsys.readouterr().out
    assert "hidden inputs drawn per student: each student's own seed, kept in the gradebook for their every " \
           "regrade; 2 student(s) got their first seed now, drawn at random" in printed
    assert "seed " + str(stored(out)["alice"]) not in printed  # the instructor's gradebook has them
    assert main([str(subs), "-o", str(out), "-a", "ch2-jit", "--no-sandbox", "--new-seed"]) == 0
    assert "hidden inputs drawn again for each of 2 student(s), a new seed of their own" in capsys.readouterr().out
    assert main([str(subs), "-o", str(out), "-a", "ch2-jit", "--no-sandbox", "--seed", "3"]) == 2
    assert "this batch draws a seed per student" in capsys.readouterr().err
    assert main([str(subs / "alice.py"), "--seed-per-student"]) == 2
    assert "--seed-per-student draws the hidden inputs of a batch's students" in capsys.readouterr().err

    empty, served = tmp_path / "hand-ins", tmp_path / "served"  # the choice made before grade serve's first hand-in
    empty.mkdir()
    assert main([str(empty), "-o", str(served), "-a", "ch2-jit", "--no-sandbox", "--seed-per-student"]) == 0
    assert "hidden inputs will be drawn per student, each at their first grading" in capsys.readouterr().out
    with Gradebook(OutputFolder(served).gradebook) as book:
        assert book.seed_settings().per_student and book.seed() is None


def test_a_hand_in_is_graded_with_its_student_s_own_seed(tmp_path, fake) -> None:
    """`grade serve` on a batch with a seed per student: a hand-in of a student graded before uses
    their stored seed, a new student's first hand-in draws and keeps theirs; on a one-seed batch
    every hand-in uses the batch's seed, as before."""
    from concurrent.futures import Future

    from grader.serve.jobs import new_id
    from grader.serve.setup import prepare
    from grader.serve.tokens import issue

    class Backend:
        capacity = 4

        def __init__(self) -> None:
            self.tasks: list = []

        def submit(self, task):
            self.tasks.append(task)
            return Future()

    subs = a_class(tmp_path / "subs", "alice")
    roster = tmp_path / "roster.txt"
    roster.write_text("student\nalice\nbob\n", encoding="utf-8")

    def served(out: Path) -> dict[str, list[int]]:
        with Gradebook(OutputFolder(out).gradebook) as book:
            issue(book.connection, ["alice", "bob"], [], "2026-03-01T10:00:00+00:00")
        serving = prepare(out, "ch2-jit", roster, sandboxed=False, workers=1, per_minute=6, burst=3,
                          deadline_s=60).serving
        service, jobs = serving.service, serving.jobs
        service.backend = Backend()
        for student in ("alice", "bob", "bob"):
            kept = tmp_path / f"{student}-{new_id()}.py"
            kept.write_text("x = 1\n")
            jobs.accept(job_id=new_id(), student=student, assignment="ch2-jit", path=str(kept),
                        file_name="mine.py", sha256="0" * 64)
            service._fill()
            for running in service._running.values():  # done: the student's next hand-in may be claimed
                jobs.not_graded(running.job, service.worker, "-")
            service._running.clear()
        seeds: dict[str, list[int]] = {}
        for task in service.backend.tasks:
            seeds.setdefault(task.student, []).append(task.options.seed)
        jobs.close_all()
        return seeds

    each = tmp_path / "each"
    grade_many([subs], each, OPTIONS, per_student=True)
    alice = stored(each)["alice"]
    seeds = served(each)
    assert seeds["alice"] == [alice] and seeds["bob"] == [stored(each)["bob"]] * 2 and stored(each)["bob"] != alice

    one = tmp_path / "one"
    grade_many([subs], one, OPTIONS)
    with Gradebook(OutputFolder(one).gradebook) as book:
        batch_seed = book.seed().seed
    assert served(one) == {"alice": [batch_seed], "bob": [batch_seed, batch_seed]} and stored(one) == {}


def test_grade_serve_chooses_seeds_per_student_on_a_new_folder_and_refuses_it_on_a_one_seed_batch(
        tmp_path, fake) -> None:
    from grader.serve.setup import prepare
    from grader.serve.tokens import issue

    roster = tmp_path / "roster.txt"
    roster.write_text("alice\n", encoding="utf-8")

    def serve(out: Path, per_student: bool):
        out.mkdir(exist_ok=True)
        with Gradebook(OutputFolder(out).gradebook) as book:
            issue(book.connection, ["alice"], [], "2026-03-01T10:00:00+00:00")
        prepared = prepare(out, "ch2-jit", roster, sandboxed=False, workers=1, per_minute=6, burst=3,
                           deadline_s=60, seed_per_student=per_student)
        prepared.serving.jobs.close_all()
        return prepared

    fresh = serve(tmp_path / "fresh", True)
    assert "drawn per student" in fresh.notes and fresh.serving.service.options.seed is None
    with Gradebook(OutputFolder(tmp_path / "fresh").gradebook) as book:
        assert book.seed_settings().per_student and book.seed() is None
    assert "drawn per student" in serve(tmp_path / "fresh", False).notes  # kept: no flag needed again
    serve(tmp_path / "one", False)  # a one-seed batch, drawn at the service's first start
    with pytest.raises(UsageError, match="grade into a new folder"):
        serve(tmp_path / "one", True)


@pytest.mark.kernel
def test_byte_identical_copies_meet_different_hidden_inputs_and_stay_one_group(tmp_path: Path,
                                                                               reference_sections) -> None:
    """Two students hand in the same unusual program, wrong only on incomes the notebook never
    uses: each is judged on hidden inputs of their own seed, both fail the same hidden check with
    the same message (comparing them tells neither anything), the class analysis puts them in one
    group by message and by program, the search for copied work still links them, and a regrade
    of one meets the same inputs again."""
    from test_class_analysis import UNUSUAL

    from grader.term.report_command import analyze_batch

    # wrong only above 5e8: every seed's draws hold the domain's top (1e9), and too few values above 5e8 for
    # any seed to stop the structure checks taking the program as its attempt (at 1.5e6 one seed in a few
    # drew enough to, and its student read a message the other did not: a flaky test, not a finding)
    tax = UNUSUAL.split("@jax.jit\ndef newton_sqrt")[0].replace(
        "    return low + mid + high", "    return jnp.where(income > 5e8, 2.0, 1.0) * (low + mid + high)")
    source = "\n\n".join(f"# %% [{t}]\n{tax if t == 'tax' else body}" for t, body in reference_sections.items())
    subs = tmp_path / "subs"
    subs.mkdir()
    for student in ("ann", "ben"):
        (subs / f"{student}.py").write_text(source, encoding="utf-8")
    (subs / "cy.py").write_text((ROOT / "solutions" / "ch2-jit.py").read_text(encoding="utf-8"), encoding="utf-8")
    out = tmp_path / "out"
    options = GradeOptions(assignment="ch2-jit", cell_timeout=10)
    grade_many([subs], out, options, per_student=True)
    ann, ben = (Report.model_validate_json(OutputFolder(out).report(s).read_text()) for s in ("ann", "ben"))
    assert ann.seed == stored(out)["ann"] != ben.seed == stored(out)["ben"]

    def checks(report: Report) -> dict[str, object]:
        return {c.id: c for e in report.exercises for c in e.checks}

    hidden = checks(ann)["tax.vectorized_hidden"]
    assert hidden.status == checks(ben)["tax.vectorized_hidden"].status == "failed"
    assert hidden.counterexample != checks(ben)["tax.vectorized_hidden"].counterexample  # other inputs
    assert [(c.id, c.status, c.message) for c in checks(ann).values()] == \
           [(c.id, c.status, c.message) for c in checks(ben).values()]  # what each of them reads

    analysis = analyze_batch(out)
    failed = next(c for c in analysis.checks if c.id == "tax.vectorized_hidden")
    assert [g.students for g in failed.by_message] == [["ann", "ben"]]
    assert [g.students for g in failed.by_program] == [["ann", "ben"]]
    with Gradebook(OutputFolder(out).gradebook) as book:
        rows = book.connection.execute("SELECT exercise, group_id, student FROM similar_programs").fetchall()
    linked: dict[tuple[str, int], set[str]] = {}
    for exercise, group, student in rows:
        linked.setdefault((exercise, group), set()).add(student)
    assert {"ann", "ben"} in [members for (exercise, _), members in linked.items() if exercise == "tax"]

    again = grade_many([subs], out, options, only=["ann"])
    assert again.graded == 1
    regraded = Report.model_validate_json(OutputFolder(out).report("ann").read_text())
    assert regraded.seed == ann.seed
    assert checks(regraded)["tax.vectorized_hidden"].counterexample == hidden.counterexample


@pytest.mark.parametrize("name", ["ch2-jit", "ch2-practice", "ch2-scan"])
def test_the_programs_the_class_analysis_compares_do_not_depend_on_the_seed(name: str) -> None:
    """The fingerprint kept of each function is of the module exported for the shapes a check
    gives it (`verdicts.programs`: a visible check's first). Were it a hidden check's, whose
    generator may draw the shapes, two students on two seeds could differ there alone, and the
    class analysis and the search for copied work would not see one program. Every export is
    stood in for by a digest of what it asks for (function and abstract arguments)."""
    import hashlib
    from types import SimpleNamespace

    from grader import assignment
    from grader.judging.plan import plan
    from grader.judging.verdicts import programs

    class Signatures:
        def run(self, run):
            asked = run.export.target + "".join(arg.model_dump_json() for arg in run.export.args)
            return SimpleNamespace(facts=SimpleNamespace(digest=hashlib.sha256(asked.encode()).hexdigest(),
                                                         shingles=[]))

    loaded = assignment.load(name)
    kept = [programs(plan(loaded, seed), Signatures()) for seed in (1, 2, 987654321)]  # type: ignore[arg-type]
    assert kept[0] and kept[1] == kept[0] and kept[2] == kept[0]
