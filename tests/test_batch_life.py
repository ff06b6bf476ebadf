"""A batch's life over a term (issue 32): one seed for life, a roster that changes, and the small
things an instructor meets on the way (a folder misnamed, a status line on a narrow terminal).

Most batches here grade nothing (`Fake`: a graded report per task, carrying the task's seed and
the file's sha256, as a grading would); one grades for real, to show that a byte-identical copy
graded later gets the same verdicts."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import pytest

from grader.batch.executors import Task, error_report
from grader.batch.progress import Progress, StageLine, columns
from grader.batch.run import grade_many
from grader.errors import UsageError
from grader.options import GradeOptions
from grader.outputs.gradebook import ExportSettings, Gradebook, Removal
from grader.outputs.names import DELETIONS, MANIFEST, STAGING, OutputFolder
from grader.outputs.staging import Staging, recover
from grader.report import Report
from grader.term.remove import remove_students

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = (ROOT / "solutions" / "ch2-jit.py").read_text(encoding="utf-8")
CANVAS_EXPORT = ROOT / "tests" / "fixtures" / "canvas" / "gradebook_export.csv"
OPTIONS = GradeOptions(assignment="ch2-jit", cell_timeout=5, sandbox=False)  # no --seed: the batch's


class Fake:
    """An executor that grades nothing: a graded report per task, as a grading would record it."""

    def __init__(self) -> None:
        self.tasks: list[Task] = []

    def map(self, tasks):
        for task in tasks:
            self.tasks.append(task)
            report = error_report(task, "-")
            sha = hashlib.sha256(Path(task.path).read_bytes()).hexdigest()
            yield task, report.model_copy(update={
                "status": "graded", "error": None, "score": 42.0,
                "submission": report.submission.model_copy(update={"sha256": sha})})

    def graded(self) -> dict[str, int | None]:
        """student -> the seed they were graded with, since the last call."""
        done = {t.student: t.options.seed for t in self.tasks}
        self.tasks = []
        return done


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Fake:
    executor = Fake()
    monkeypatch.setattr("grader.batch.run.executor_for", lambda jobs, scheduler: executor)
    return executor


def a_class(folder: Path, *students: str) -> Path:
    folder.mkdir(exist_ok=True)
    for student in students:
        (folder / f"{student}.py").write_text(f"x = {len(student)}\n", encoding="utf-8")
    return folder


def seeds_table(out: Path) -> list[tuple[int, int]]:
    db = sqlite3.connect(OutputFolder(out).gradebook)
    try:
        return db.execute("SELECT seed, redrawn FROM seeds ORDER BY rowid").fetchall()
    finally:
        db.close()


# ----------------------------------------------------------------------------- one seed for life


def test_a_resumed_batch_grades_a_copy_with_the_batch_s_seed_until_a_new_one_is_asked(tmp_path, fake) -> None:
    subs, out = a_class(tmp_path / "subs", "alice"), tmp_path / "out"
    first = grade_many([subs], out, OPTIONS)
    seed = fake.graded()["alice"]
    assert first.seed == seed and first.seed_new and seeds_table(out) == [(seed, 0)]

    shutil.copy(subs / "alice.py", subs / "bob.py")  # arrives later, byte for byte alice's
    resumed = grade_many([subs], out, OPTIONS)
    assert fake.graded() == {"bob": seed}  # alice unchanged, bob on the same hidden inputs
    assert (resumed.resumed, resumed.seed, resumed.seed_new) == (1, seed, False)
    assert grade_many([subs], out, OPTIONS.model_copy(update={"seed": seed})).graded == 0  # the same seed
    assert seeds_table(out) == [(seed, 0)]
    page = OutputFolder(out).class_page.read_text(encoding="utf-8")
    assert "redrawn" not in page

    redrawn = grade_many([subs], out, OPTIONS, new_seed=True)
    again = fake.graded()
    assert sorted(again) == ["alice", "bob"] and len(set(again.values())) == 1  # every submission regraded
    new = again["alice"]
    assert new != seed and redrawn.seed == new and redrawn.seed_before == seed and redrawn.other_seed == []
    assert seeds_table(out) == [(seed, 0), (new, 1)]
    today = datetime.now(timezone.utc).date().isoformat()
    page = OutputFolder(out).class_page.read_text(encoding="utf-8")
    assert f"hidden inputs redrawn on {today}: every submission regraded" in page
    assert {json.loads((out / f"{s}.json").read_text())["seed"] for s in ("alice", "bob")} == {new}

    chosen = grade_many([subs], out, OPTIONS.model_copy(update={"seed": 7}))  # --seed N, another: a redraw
    assert fake.graded() == {"alice": 7, "bob": 7}
    assert chosen.seed_before == new and seeds_table(out)[-1] == (7, 1)


def test_a_new_seed_for_part_of_a_batch_is_refused(tmp_path, fake) -> None:
    subs, out = a_class(tmp_path / "subs", "alice", "bob"), tmp_path / "out"
    grade_many([subs], out, OPTIONS.model_copy(update={"seed": 5}))
    fake.graded()
    for kwargs in ({"only": ["alice"], "new_seed": True}, {"only": ["alice"]}):
        options = OPTIONS if kwargs.get("new_seed") else OPTIONS.model_copy(update={"seed": 6})
        with pytest.raises(UsageError, match="regrades every submission of the batch"):
            grade_many([subs], out, options, **kwargs)
    with pytest.raises(UsageError, match="regrades every submission of the batch"):
        grade_many([subs / "bob.py"], out, OPTIONS, new_seed=True)  # one file into the batch
    with pytest.raises(UsageError, match="pass one"):
        grade_many([subs], out, OPTIONS.model_copy(update={"seed": 6}), new_seed=True)
    assert fake.graded() == {} and seeds_table(out) == [(5, 0)]
    grade_many([subs], out, OPTIONS, only=["alice"])  # a regrade of one: the batch's seed
    assert fake.graded() == {"alice": 5}


def test_a_gradebook_from_before_seeds_were_kept_adopts_the_seed_most_rows_have(tmp_path, fake) -> None:
    subs, out = a_class(tmp_path / "subs", "amy", "ben", "cal"), tmp_path / "out"
    grade_many([subs], out, OPTIONS.model_copy(update={"seed": 11}))
    fake.graded()
    db = sqlite3.connect(OutputFolder(out).gradebook)
    with db:  # as an older grader left it: no seeds table, and one row graded on other inputs
        db.execute("DROP TABLE seeds")
        db.execute("UPDATE submissions SET seed = 12 WHERE student = 'cal'")
    db.close()
    resumed = grade_many([subs], out, OPTIONS)
    assert fake.graded() == {"cal": 11} and resumed.resumed == 2 and resumed.seed == 11
    assert seeds_table(out) == [(11, 0)]


@pytest.mark.kernel
def test_a_byte_identical_copy_graded_later_gets_the_same_verdicts(tmp_path: Path) -> None:
    mutant = (ROOT / "assignments" / "ch2-jit" / "mutants" / "newton_count_always_one.py").read_text()
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "alice.py").write_text(REFERENCE.rstrip("\n") + "\n\n# %% [mutant]\n" + mutant, encoding="utf-8")
    out = tmp_path / "out"
    options = GradeOptions(assignment="ch2-jit", cell_timeout=10)
    grade_many([subs], out, options)
    shutil.copy(subs / "alice.py", subs / "bob.py")
    resumed = grade_many([subs], out, options)
    assert (resumed.graded, resumed.resumed) == (1, 1)
    alice, bob = (Report.model_validate_json((out / f"{s}.json").read_text()) for s in ("alice", "bob"))
    assert alice.seed == bob.seed == resumed.seed
    verdicts = [[(c.id, c.status, c.message, c.counterexample) for e in r.exercises for c in e.checks]
                for r in (alice, bob)]
    assert verdicts[0] == verdicts[1] and any(status == "failed" for _, status, _, _ in verdicts[0])


# ----------------------------------------------------------------------------- a roster that changes


def everywhere(out: Path) -> dict[str, set[str]]:
    """Which students each output of OUT names."""
    folder = OutputFolder(out)
    summary = {row["student"] for row in csv.DictReader(folder.summary_csv.read_text().splitlines())}
    db = sqlite3.connect(folder.gradebook)
    try:
        book = {row[0] for row in db.execute("SELECT student FROM submissions")}
        students = {row[0] for row in db.execute("SELECT id FROM students")}
        checks = {row[0] for row in db.execute("SELECT DISTINCT student FROM check_results")}
    finally:
        db.close()
    canvas = list(csv.reader(io.StringIO(folder.canvas_csv.read_text(encoding="utf-8-sig"))))
    column = canvas[0].index("Chapter 2: jax.jit (ch2-jit) (123456)")
    filled = {s for row in canvas[3:] if row[column] for s in (row[2], row[3])}  # empty in the export
    moodle = {row[0] for row in csv.reader(folder.moodle_csv.read_text(encoding="utf-8").splitlines()[1:])}
    page = folder.class_page.read_text(encoding="utf-8")
    return {
        "reports": {json.loads(p.read_text())["student"] for p in out.glob("*.json")},
        "feedback": {p.stem for p in (out / "feedback").glob("*.html")},
        "gradescope": {p.parent.name for p in folder.gradescope.glob("*/results.json")},
        "summary.csv": summary, "gradebook": book, "students": students, "check_results": checks,
        "canvas.csv": {s for s in ("jgarcia", "s7654321") if s in filled},
        "moodle.csv": moodle, "index.html": {s for s in ("jgarcia", "s7654321") if f">{s}<" in page},
    }


def test_remove_takes_a_student_out_of_every_output_and_a_regrade_brings_them_back(tmp_path, fake) -> None:
    subs, out = a_class(tmp_path / "subs", "jgarcia", "s7654321"), tmp_path / "out"
    settings = ExportSettings(gradescope=True, canvas_roster=str(CANVAS_EXPORT), moodle=True)
    grade_many([subs], out, OPTIONS, settings=settings)
    both = {"jgarcia", "s7654321"}
    assert everywhere(out) == dict.fromkeys(everywhere(out), both)

    removal = Removal(student="s7654321", removed_at="2026-03-01T10:00:00+00:00", by="prof", reason="dropped")
    rebuilt = remove_students(out, [removal])
    assert sorted(rebuilt.reports) == ["jgarcia"]
    assert everywhere(out) == dict.fromkeys(everywhere(out), {"jgarcia"})
    assert not (out / "gradescope" / "s7654321").exists() and not (out / STAGING).exists()
    with Gradebook(OutputFolder(out).gradebook) as book:
        kept = book.removals()
        raw = book.connection.execute("SELECT report FROM removals").fetchone()[0]
    assert kept == [removal.model_copy(update={"path": str((subs / "s7654321.py").absolute())})]
    assert Report.model_validate_json(raw).student == "s7654321"  # their last report, kept

    with pytest.raises(UsageError, match="removed from .* on 2026-03-01 by prof \\(dropped\\)"):
        remove_students(out, [removal])
    with pytest.raises(UsageError, match="did you mean 'jgarcia'"):
        remove_students(out, [removal.model_copy(update={"student": "jgarcai"})])

    fake.graded()
    again = grade_many([subs], out, OPTIONS)  # the file is still there: graded again, they come back
    assert fake.graded() == {"s7654321": again.seed} and again.resumed == 1
    assert everywhere(out) == dict.fromkeys(everywhere(out), both)


def test_a_batch_names_the_students_whose_file_is_gone_and_removes_none(tmp_path, fake, capsys) -> None:
    from grader.cli import main

    subs, out = a_class(tmp_path / "subs", "alice", "bob", "Anna Müller_1234567"), tmp_path / "out"
    grade_many([subs], out, OPTIONS)
    (subs / "bob.py").rename(subs / "robert.py")  # renamed: bob's file is gone, robert is new
    (subs / "Anna Müller_1234567.py").unlink()
    result = grade_many([subs], out, OPTIONS)
    assert result.gone == ["Anna Müller_1234567", "bob"]
    with Gradebook(OutputFolder(out).gradebook) as book:
        assert book.students() == ["Anna Müller_1234567", "alice", "bob", "robert"]  # none removed
    assert grade_many([subs / "alice.py"], out, OPTIONS).gone == []  # one file: nobody else is gone
    assert grade_many([subs], out, OPTIONS, only=["alice"]).gone == []

    capsys.readouterr()
    assert main([str(subs), "-o", str(out), "-a", "ch2-jit", "--no-sandbox"]) == 0
    printed = capsys.readouterr().out
    assert (f"2 student(s) of {out} have no file in {subs} any more: Anna Müller_1234567, bob. They stay in "
            f"summary.csv, the class page and the exports until removed: grade remove {out} "
            "'Anna Müller_1234567' bob --reason \"...\"") in printed
    assert main(["remove", str(out), "Anna Müller_1234567", "bob", "--reason", "renamed"]) == 0
    assert "removed bob from" in capsys.readouterr().out
    assert main([str(subs), "-o", str(out), "-a", "ch2-jit", "--no-sandbox"]) == 0
    assert "no file in" not in capsys.readouterr().out


def test_a_commit_deletes_its_files_all_or_nothing(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "out"
    (out / "gradescope" / "bob").mkdir(parents=True)
    (out / "gradescope" / "bob" / "results.json").write_text("{}")
    (out / "bob.json").write_text("{}")
    stage = Staging(out)
    stage.delete("bob.json")
    stage.delete("gradescope/bob/results.json")
    stage.delete("../outside")  # never outside OUT
    (tmp_path / "outside").write_text("kept")
    stage.abort()  # no commit point: nothing deleted
    assert (out / "bob.json").is_file()

    stage = Staging(out)
    stage.delete("bob.json")
    stage.delete("gradescope/bob/results.json")
    stage.delete("../outside")
    stage.path("alice.json").write_text("{}")
    monkeypatch.setattr("grader.outputs.staging._apply", lambda out_dir: None)
    stage.commit()  # as if it crashed right after the commit point: the next command finishes it
    monkeypatch.undo()
    assert (out / STAGING / MANIFEST).is_file() and (out / STAGING / DELETIONS).is_file()
    assert (out / "bob.json").is_file()
    assert recover(out)
    assert not (out / "bob.json").exists() and not (out / "gradescope" / "bob").exists()
    assert (out / "alice.json").is_file() and (tmp_path / "outside").read_text() == "kept"


# ----------------------------------------------------------------------------- small things


def test_validate_says_to_rename_a_folder_not_named_as_its_spec_s_id(tmp_path: Path, monkeypatch) -> None:
    from grader.course.validate import FOLDER_NAME_ITEM, validate_all

    assignments = tmp_path / "assignments"
    shutil.copytree(ROOT / "assignments" / "ch2-practice", assignments / "practice-v2",
                    ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("GRADER_ASSIGNMENTS", str(assignments))
    rows = {r.item: r for r in validate_all(["practice-v2"], workers=1).rows}
    row = rows[FOLDER_NAME_ITEM]
    assert not row.ok
    assert row.detail == ("the folder is named 'practice-v2' but its spec's id is 'ch2-practice': rename the "
                          "folder to ch2-practice (notebooks, solutions/ch2-practice.* and reports name the "
                          "id; the folder is found by its name)")
    shutil.move(assignments / "practice-v2", assignments / "ch2-practice")
    assert FOLDER_NAME_ITEM not in {r.item for r in validate_all(["ch2-practice"], workers=1).rows}


class Screen(io.StringIO):
    def isatty(self) -> bool:
        return True


def drawn_lines(written: str) -> list[str]:
    return [part.rstrip(" ") for part in written.replace("\n", "\r").split("\r") if part.strip()]


WIDTHS = [1, 4, 8, 12, 19, 24, 33, 40, 57, 79, 119]


@pytest.mark.parametrize("width", WIDTHS)
def test_the_status_line_fits_the_terminal_and_cuts_no_word(width: int) -> None:
    wide = Screen()
    full = Progress(120, stream=wide)  # a stream that tells no width: everything
    narrow = Screen()
    bar = Progress(120, stream=narrow, width=width)
    for i in range(3):
        label = f"garcíajosé_LATE_{i}_ñandú 学生"
        full.update(i != 1, label=label)
        bar.update(i != 1, label=label)
    wholes, lines = drawn_lines(wide.getvalue()), drawn_lines(narrow.getvalue())
    assert len(lines) == len(wholes) == 4
    for line, whole in zip(lines, wholes):
        assert columns(line) <= width
        words, everything = line.split(), whole.split()
        kept = words[:-1] if words[-1] == "…" else words
        if kept and kept[0].startswith("["):  # the bar, narrowed to fit: one word of its own
            kept, everything = kept[1:], everything[1:]
        elif everything[0].startswith("["):
            everything = everything[1:]
        assert kept == everything[:len(kept)], (line, whole)  # whole words, in order, from the start
    if width >= 79:
        assert "3/120  failed 1  ETA" in narrow.getvalue()


@pytest.mark.parametrize("width", [6, 14, 22, 40, 80])
def test_the_stage_line_keeps_whole_words_and_its_time(width: int) -> None:
    line = StageLine(Screen(), width=width)
    line("running cell 12 of exercise tax_switch")
    text = line.line(12.0, width)
    line.close()
    assert columns(text) <= width
    whole = "grading: running cell 12 of exercise tax_switch (12 s)".split()
    words = [w for w in text.split() if w != "…"]
    assert all(w in whole for w in words), text
    if width >= 14:
        assert text.endswith("(12 s)")
