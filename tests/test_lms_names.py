"""Submissions as an LMS hands them out (issue 32): Canvas's, Moodle's and Gradescope's names are
read as each LMS writes them, each file goes to its student, `grade export --canvas` matches a
Canvas download on its user id and exits 4 naming every graded student it could not match, and
Gradescope's autograder does not take a helper module for the submission."""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from grader.batch.discovery import discover
from grader.errors import UsageError
from grader.gradescope import run as gradescope_run
from grader.report import LmsSubmission, Report
from grader.term import lms_names
from grader.term.lms import fill_canvas, write_moodle
from grader.term.lms_names import MetadataUnreadable, parse_gradescope_metadata

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "solutions" / "ch2-jit.ipynb"
ROSTER = ROOT / "tests" / "fixtures" / "canvas" / "gradebook_export.csv"  # IDs 10001 (Doe) ... 10005
GRADE = [sys.executable, "-m", "grader"]

METADATA = """---
submission_216975964:
  :submitters:
  - :name: Alice Doe
    :sid: '20230001'
    :email: alice@uni.edu
  :created_at: 2026-12-02 02:52:07.938335000 Z
  :score: 0.0
  :status: processed
  :results:
    score: 0.0
    tests: []
    output: "x"
  :history:
  - :submitters: []
    :created_at: 2026-11-30 02:07:23.037492000 Z
    :score: 0.0
    :id: 216255674
submission_216996427:
  :submitters:
  - :name: "Jos\\xE9 Garc\\u00EDa"
    :sid: '06828527'
    :email:
  - :name: Wei Chen
    :sid: '20230003'
    :email: wchen@uni.edu
  :created_at: 2026-12-02 04:04:59.089605000 -08:00
  :history: []
"""


# ----------------------------------------------------------------------------- the names


@pytest.mark.parametrize(("name", "student", "user_id", "late", "file_name"), [
    ("garcíajosé_LATE_10002_5551_ch2-jit.ipynb", "garcíajosé_10002", "10002", True, "ch2-jit.ipynb"),
    ("garciajose_late_10002_5551_ch2-jit.ipynb", "garciajose_10002", "10002", True, "ch2-jit.ipynb"),  # older
    ("doealice_10001_5550_ch2-jit-1.ipynb", "doealice_10001", "10001", False, "ch2-jit-1.ipynb"),  # re-upload
    ("doealice_10001_5550_my_work_2.py", "doealice_10001", "10001", False, "my_work_2.py"),
    ("10003_5552_ch2-jit.ipynb", "10003", "10003", False, "ch2-jit.ipynb"),  # older Canvas, anonymous
    ("doe_alice_10001_5550_x.ipynb", "doe_alice_10001", "10001", False, "x.ipynb"),  # `_` is a word character
    ("LATE_anon_Xy7Zq_5553_ch2-jit.ipynb", "anon_Xy7Zq", None, True, "ch2-jit.ipynb"),
])
def test_canvas_names_as_canvas_writes_them(name: str, student: str, user_id: str | None, late: bool,
                                            file_name: str) -> None:
    found = lms_names.canvas(name)
    assert found is not None and found.lms == "canvas"
    assert (lms_names.student_id(found), found.user_id, found.late, found.file_name) == (
        student, user_id, late, file_name)
    assert found.anonymous == (user_id is None)


@pytest.mark.parametrize("name", ["alice.ipynb", "hw_1_2_x.ipynb", "Alice_10001_5550_x.ipynb",
                                  "doealice_10001_x.ipynb", "s1234567.ipynb", "doe__10001_5550_x.ipynb"])
def test_a_name_someone_chose_is_not_canvas_s(name: str) -> None:
    assert lms_names.canvas(name) is None


def test_a_name_unzipped_on_macos_names_the_same_student() -> None:
    nfd = unicodedata.normalize("NFD", "garcíajosé_LATE_10002_5551_ch2-jit.ipynb")
    found = lms_names.canvas(nfd)
    assert found is not None and lms_names.student_id(found) == "garcíajosé_10002"


def test_moodle_names_with_and_without_folders() -> None:
    folder = lms_names.moodle("Anna Müller_1234567_assignsubmission_file_", folder=True)
    flat = lms_names.moodle("Anna Müller_1234567_assignsubmission_file_ch2-jit.ipynb", folder=False)
    blind = lms_names.moodle("Participant_7654321_assignsubmission_file_", folder=True)
    assert folder is not None and flat is not None and blind is not None
    assert lms_names.student_id(folder) == lms_names.student_id(flat) == "Anna Müller_1234567"
    assert (flat.user_id, flat.file_name, flat.late) == ("1234567", "ch2-jit.ipynb", None)
    assert lms_names.student_id(blind) == "Participant_7654321"
    assert lms_names.moodle("Anna Müller_assignsubmission_file_", folder=True) is None


# A student who calls herself `doealice_10001` on Canvas (user 20002): her files read as hers and as
# doealice's (user 10001) file `20002_6661_ch2-jit.ipynb`.
CLAIMING = "doealice_10001_20002_6661_ch2-jit.ipynb"


def test_a_name_that_reads_as_several_students_is_no_one_s_unless_the_roster_decides() -> None:
    readings = lms_names.readings(CLAIMING, folder=False)
    assert [(r.user_id, lms_names.student_id(r)) for r in readings] == [
        ("10001", "doealice_10001"), ("20002", "doealice_10001_20002")]
    assert lms_names.canvas(CLAIMING) is None  # never the first split, as Canvas's own reader takes it
    nobody = lms_names.read(CLAIMING, folder=False)
    assert isinstance(nobody, lms_names.Ambiguous) and nobody.chosen is None
    assert "doealice_10001 (Canvas user 10001) or doealice_10001_20002 (Canvas user 20002)" in nobody.reason()
    assert "grade export OUT --canvas" in nobody.reason()
    both = lms_names.read(CLAIMING, folder=False, roster={"10001", "20002"})  # both enrolled: undecided
    assert isinstance(both, lms_names.Ambiguous) and both.chosen is None
    # an upload name with digits in it: the roster has no user 2, so the file is doealice's
    own = lms_names.read("doealice_10001_5550_hw_2_123_x.ipynb", folder=False, roster={"10001", "20002"})
    assert isinstance(own, lms_names.Ambiguous) and own.chosen is not None
    assert lms_names.student_id(own.chosen) == "doealice_10001"
    # Moodle's full names the same: a flat download's file whose name holds another's prefix
    flat = "Anna Müller_1234567_assignsubmission_file_x_7654321_assignsubmission_file_ch2-jit.ipynb"
    assert [lms_names.student_id(r) for r in lms_names.moodle_readings(flat, folder=False)] == [
        "Anna Müller_1234567", "Anna Müller_1234567_assignsubmission_file_x_7654321"]
    assert lms_names.moodle(flat, folder=False) is None
    moodle = lms_names.read(flat, folder=False, roster={"1234567"})  # a Canvas export decides no Moodle name
    assert isinstance(moodle, lms_names.Ambiguous) and moodle.chosen is None
    assert moodle.reason().endswith("rename it to its student's id")
    # a name that reads as Canvas's and as Moodle's: neither is taken for granted
    both_lms = lms_names.read("10001_777_assignsubmission_file_x.ipynb", folder=False)
    assert isinstance(both_lms, lms_names.Ambiguous)
    assert {r.lms for r in both_lms.readings} == {"canvas", "moodle"}


def test_a_display_name_cannot_claim_another_student_s_download(tmp_path: Path) -> None:
    """doealice's own file reads one way and stays hers; the claiming one is an error report of its
    own, with or without the roster (which holds both users), and never a second file of hers."""
    for name in ("doealice_10001_5550_ch2-jit.ipynb", CLAIMING):
        (tmp_path / name).write_text("{}")
    for roster in (None, {"10001", "20002"}):
        found = discover([tmp_path], roster=roster)
        assert found.conflicts == {}
        assert [(f.student, f.path.name) for f in found.submissions] == [
            ("doealice_10001", "doealice_10001_5550_ch2-jit.ipynb")]
        [problem] = found.problems
        assert problem.student == "doealice_10001_20002_6661_ch2-jit"
        assert "reads as 2 students'" in problem.reason and "given to none of them" in problem.reason
    # a roster from before she enrolled (no user 20002) would give her file to doealice: doealice's
    # own file, whose name reads one way, keeps it hers
    stale = discover([tmp_path], roster={"10001"})
    assert stale.conflicts == {} and [f.student for f in stale.submissions] == ["doealice_10001"]
    assert [p.student for p in stale.problems] == ["doealice_10001_20002_6661_ch2-jit"]
    assert "export it again" in stale.problems[0].reason
    # the roster decides a file no other claims: the same claim alone, with only user 20002 enrolled
    (tmp_path / "doealice_10001_5550_ch2-jit.ipynb").unlink()
    decided = discover([tmp_path], roster={"20002"})
    assert [f.student for f in decided.submissions] == ["doealice_10001_20002"] and decided.problems == []
    identified = lms_names.identify(tmp_path / CLAIMING, "doealice_10001_20002")
    assert identified is not None and identified.user_id == "20002"
    assert lms_names.identify(tmp_path / CLAIMING) is None


def test_a_batch_reads_the_canvas_export_it_keeps_to_decide(tmp_path: Path) -> None:
    """The roster reaches a batch through OUT: `grade export --canvas` keeps the export's path in the
    gradebook; a missing or unreadable one decides nothing."""
    from grader.outputs.gradebook import ExportSettings, Gradebook
    from grader.term.lms import stored_canvas_roster

    assert stored_canvas_roster(tmp_path) is None
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        book.save_export_settings(ExportSettings(canvas_roster=str(ROSTER)))
    assert stored_canvas_roster(tmp_path) == {"10001", "10002", "10003", "10004", "10005", "10099"}
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        book.save_export_settings(ExportSettings(canvas_roster=str(tmp_path / "gone.csv")))
    assert stored_canvas_roster(tmp_path) is None


def test_gradescope_metadata_as_gradescope_writes_it() -> None:
    found = parse_gradescope_metadata(METADATA)
    assert sorted(found) == ["submission_216975964", "submission_216996427"]
    alice, group = found["submission_216975964"], found["submission_216996427"]
    assert (alice.name, alice.sid, alice.email, alice.submitted_at) == (
        "Alice Doe", "20230001", "alice@uni.edu", "2026-12-02T02:52:07+00:00")  # not the history's time
    assert alice.group == [] and lms_names.student_id(alice) == "alice@uni.edu"
    assert (group.name, group.sid, group.email) == ("José García", "06828527", None)  # quoted: leading 0 kept
    assert group.group == ["wchen@uni.edu"] and group.submitted_at == "2026-12-02T04:04:59-08:00"
    assert lms_names.student_id(group) == "06828527"
    with pytest.raises(MetadataUnreadable):
        parse_gradescope_metadata("students:\n- alice\n")


# ----------------------------------------------------------------------------- discovery


def test_discovery_names_each_student_the_lms_way(tmp_path: Path) -> None:
    canvas = tmp_path / "canvas"
    canvas.mkdir()
    for name in ("doealice_10001_5550_ch2-jit.ipynb", "garcíajosé_LATE_10002_5551_ch2-jit-1.ipynb",
                 "nguyenbao_10004_5560_ch2-jit.ipynb", "nguyenbao_10004_5561_helpers.py",
                 "doealice_10001_5549_report.pdf", "alice.ipynb"):
        (canvas / name).write_text("{}")
    moodle = tmp_path / "moodle"
    (moodle / "Anna Müller_1234567_assignsubmission_file_").mkdir(parents=True)
    (moodle / "Anna Müller_1234567_assignsubmission_file_" / "ch2-jit.ipynb").write_text("{}")
    (moodle / "Bo Li_7654321_assignsubmission_file_ch2-jit.ipynb").write_text("{}")
    gradescope = tmp_path / "assignment_9100_export"
    for folder in ("submission_216975964", "submission_216996427", "submission_300"):
        (gradescope / folder).mkdir(parents=True)
        (gradescope / folder / "ch2-jit.ipynb").write_text("{}")
    (gradescope / "submission_metadata.yml").write_text(METADATA, encoding="utf-8")
    found = discover([canvas, moodle, gradescope])
    assert {f.student: f.path.relative_to(tmp_path).as_posix() for f in found.submissions} == {
        "doealice_10001": "canvas/doealice_10001_5550_ch2-jit.ipynb",
        "garcíajosé_10002": "canvas/garcíajosé_LATE_10002_5551_ch2-jit-1.ipynb",
        "alice": "canvas/alice.ipynb",
        "Anna Müller_1234567": "moodle/Anna Müller_1234567_assignsubmission_file_/ch2-jit.ipynb",
        "Bo Li_7654321": "moodle/Bo Li_7654321_assignsubmission_file_ch2-jit.ipynb",
        "alice@uni.edu": "assignment_9100_export/submission_216975964/ch2-jit.ipynb",
        "06828527": "assignment_9100_export/submission_216996427/ch2-jit.ipynb",
        "submission_300": "assignment_9100_export/submission_300/ch2-jit.ipynb",  # not in the metadata
    }
    assert sorted(found.conflicts) == ["nguyenbao_10004"]  # a student's two files: a person decides
    assert list(found.skipped) == [str(canvas / "doealice_10001_5549_report.pdf")]  # the metadata was read


def test_gradescope_metadata_that_cannot_be_read_is_listed_and_the_folders_keep_their_names(
        tmp_path: Path) -> None:
    (tmp_path / "submission_216975964").mkdir()
    (tmp_path / "submission_216975964" / "a.ipynb").write_text("{}")
    (tmp_path / "submission_metadata.yml").symlink_to("/etc/passwd")
    found = discover([tmp_path])
    assert [f.student for f in found.submissions] == ["submission_216975964"] and found.problems == []
    assert "not read (a symbolic link" in found.skipped[str(tmp_path / "submission_metadata.yml")]


def test_identify_agrees_with_discovery_and_leaves_other_ids_alone(tmp_path: Path) -> None:
    path = tmp_path / "garcíajosé_LATE_10002_5551_ch2-jit.ipynb"
    assert lms_names.identify(path, "garcíajosé_10002").late is True  # type: ignore[union-attr]
    assert lms_names.identify(path, "garcíajosé_LATE_10002_5551_ch2-jit") is not None  # a batch from before
    assert lms_names.identify(path, "jose") is None  # --student jose: the instructor's id wins
    assert lms_names.identify(tmp_path / "carol" / "garcíajosé_LATE_10002_5551_x.ipynb", "carol") is None


# ----------------------------------------------------------------------------- the Canvas export


def report(student: str, path: str, score: float = 80.0, *, lms: LmsSubmission | None = None) -> Report:
    return Report.model_validate({
        "assignment": "ch2-jit", "student": student, "lms": lms,
        "submission": {"path": path, "sha256": None, "kind": "notebook"},
        "status": "graded", "score": score, "max_score": 100.0,
        "exercises": [], "seed": 1, "duration_s": 0.1,
        "environment": {"grader": "0", "python": "3.12", "jax": None},
        "isolation": {"sandboxed": False, "layers": []}})


def test_a_canvas_download_is_matched_on_the_id_column(tmp_path: Path) -> None:
    batch = {
        "doealice_10001": report("doealice_10001", "/subs/doealice_10001_5550_ch2-jit.ipynb", 90.0),
        "garcíajosé_10002": report("garcíajosé_10002", "/subs/garcíajosé_LATE_10002_5551_ch2-jit-1.ipynb"),
        "zedzoe_10077": report("zedzoe_10077", "/subs/zedzoe_10077_5599_ch2-jit.ipynb"),
        "anon_Xy7Zq": report("anon_Xy7Zq", "/subs/anon_Xy7Zq_5553_ch2-jit.ipynb"),
        "s1": report("s1", "/gs/submission_1/x.ipynb", 60.0,
                     lms=LmsSubmission(lms="gradescope", sid="20230003", email="nobody@else.edu", late=None)),
    }
    fill = fill_canvas(ROSTER, batch, tmp_path / "canvas.csv")
    rows = {r.login: r for r in fill.not_filled}
    assert fill.filled == 3 and "alice@uni.edu" not in rows and "jgarcia" not in rows
    assert "wchen" not in rows  # Gradescope's student id is Chen's SIS User ID
    assert fill.late == ["garcíajosé_10002"]
    unmatched = {u.student: u for u in fill.unmatched}
    assert set(unmatched) == {"zedzoe_10077", "anon_Xy7Zq"} == {u.student for u in fill.graded_unmatched}
    assert unmatched["zedzoe_10077"].looked_for == "Canvas user id 10077 in the ID column"
    assert unmatched["anon_Xy7Zq"].reason == "anonymous in the LMS's download"
    assert unmatched["zedzoe_10077"].line() == ("not matched: zedzoe_10077: not in the roster; looked for "
                                                "Canvas user id 10077 in the ID column")
    text = (tmp_path / "canvas.csv").read_text(encoding="utf-8-sig")
    assert ",10001,20230001,alice@uni.edu,JAX 101 - Section A,,9.50,45," in text  # 90 of 100 -> 45 of 50
    assert any("marked late by the LMS" in line and "garcíajosé_10002" in line for line in fill.describe())


def test_each_member_of_a_gradescope_group_gets_the_group_s_score(tmp_path: Path) -> None:
    group = LmsSubmission(lms="gradescope", sid="20230003", email="wei@else.edu", late=None,
                          group=["bnguyen@uni.edu", "ghost@uni.edu"])
    batch = {"wei@else.edu": report("wei@else.edu", "/gs/submission_7/x.ipynb", 60.0, lms=group)}
    fill = fill_canvas(ROSTER, batch, tmp_path / "canvas.csv")
    assert fill.filled == 2 and fill.matched == 1  # Chen (by SIS User ID) and Nguyen, 60 of 100 -> 30 of 50
    text = (tmp_path / "canvas.csv").read_text(encoding="utf-8-sig")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    target = rows[0].index("Chapter 2: jax.jit (ch2-jit) (123456)")
    assert {r[3] for r in rows[3:] if r[target] == "30"} == {"wchen", "bnguyen@uni.edu"}
    assert [(u.student, u.looked_for.split(" in ")[0]) for u in fill.unmatched] == [
        ("wei@else.edu", "group member 'ghost@uni.edu'")]


def test_moodle_s_import_is_not_given_ids_it_cannot_match(tmp_path: Path) -> None:
    folder = "/m/Anna Müller_1234567_assignsubmission_file_/ch2-jit.ipynb"
    batch = {"alice": report("alice", "/subs/alice.ipynb"),
             "Anna Müller_1234567": report("Anna Müller_1234567", folder)}
    with pytest.raises(UsageError, match=r"1 students .*Anna Müller_1234567.* Moodle's grading worksheet"):
        write_moodle(batch, tmp_path / "moodle.csv")  # one row Moodle cannot match aborts its import
    assert not (tmp_path / "moodle.csv").exists()
    del batch["Anna Müller_1234567"]
    assert write_moodle(batch, tmp_path / "moodle.csv").read_text().splitlines()[1].startswith('"alice",80')


# ----------------------------------------------------------------------------- a class, end to end (kernels)


def canvas_class(folder: Path) -> None:
    folder.mkdir()
    shutil.copy(NOTEBOOK, folder / "doealice_10001_5550_ch2-jit.ipynb")
    shutil.copy(NOTEBOOK, folder / "garcíajosé_LATE_10002_5551_ch2-jit-1.ipynb")


def roster_without(tmp_path: Path, row_start: str) -> Path:
    lines = ROSTER.read_bytes().split(b"\n")
    path = tmp_path / "roster.csv"
    path.write_bytes(b"\n".join(line for line in lines if not line.startswith(row_start.encode())))
    return path


@pytest.mark.kernel
def test_a_class_downloaded_as_canvas_names_it_exports_with_every_student_matched_or_named(
        tmp_path: Path) -> None:
    from grader.batch import warm_worker
    from grader.cli import main

    subs, out = tmp_path / "submissions", tmp_path / "out"
    canvas_class(subs)
    warm_worker.current()  # `grade SUBS -o OUT` in this process, with this thread's warm worker
    assert main([str(subs), "-o", str(out), "-a", "ch2-jit", "--seed", "3", "--no-sandbox"]) == 0
    josé = Report.model_validate_json(next(out.glob("garc*.json")).read_text(encoding="utf-8"))
    assert josé.student == "garcíajosé_10002" and josé.lms is not None
    assert (josé.lms.user_id, josé.lms.late, josé.lms.file_name) == ("10002", True, "ch2-jit-1.ipynb")

    export = [*GRADE, "export", str(out), "--canvas"]
    every = subprocess.run([*export, str(ROSTER)], capture_output=True, text=True)
    assert every.returncode == 0, every.stdout + every.stderr
    assert "2 scores in Chapter 2: jax.jit (ch2-jit) (123456)" in every.stdout
    assert "not matched" not in every.stderr
    filled = (out / "canvas.csv").read_text(encoding="utf-8-sig")
    assert '"Doe, Alice",10001,20230001,alice@uni.edu,JAX 101 - Section A,,9.50,50,' in filled
    assert '"García, José",10002,20230002,jgarcia,JAX 101 - Section B,,7.00,50,' in filled

    roster = roster_without(tmp_path, '"García, José"')  # added to the course after the export
    missing = subprocess.run([*export, str(roster)], capture_output=True, text=True)
    assert missing.returncode == 4, missing.stdout + missing.stderr
    named = [line for line in missing.stderr.splitlines() if line.startswith("grade: not matched:")]
    assert named == ["grade: not matched: garcíajosé_10002: not in the roster; looked for Canvas user id "
                     "10002 in the ID column"]
    assert "Traceback" not in missing.stderr
    assert '"Doe, Alice",10001,20230001,alice@uni.edu,JAX 101 - Section A,,9.50,50,' in (
        out / "canvas.csv").read_text(encoding="utf-8-sig")  # the others are exported all the same


# ----------------------------------------------------------------------------- Gradescope's autograder


def files(tmp_path: Path, *names: str) -> list[Path]:
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n")
    return gradescope_run.find_submissions(tmp_path)


@pytest.mark.parametrize(("names", "chosen"), [
    (["submission.ipynb", "utils.py"], "submission.ipynb"),              # a helper beside the notebook
    (["work/notebook.ipynb", "work/helpers/data.py"], "work/notebook.ipynb"),
    (["ch2_jit.py", "scratch.ipynb"], "ch2_jit.py"),                     # named after the assignment
    (["ch2-jit.ipynb", "scratch/ch2-jit.py"], None),                     # two named after it: ask
    (["a.py", "b.py"], None),                                            # two modules: ask
    (["a.ipynb", "b.ipynb", "utils.py"], None),
])
def test_the_file_graded_on_gradescope(tmp_path: Path, names: list[str], chosen: str | None) -> None:
    found = files(tmp_path, *names)
    pick = gradescope_run.choose_submission(found, "ch2-jit")
    assert (pick.relative_to(tmp_path).as_posix() if pick else None) == chosen
    assert (gradescope_run.submission_problem(found, tmp_path, "ch2-jit") is None) == (chosen is not None)


def test_a_stray_helper_is_not_graded_as_the_submission_and_the_output_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    layout = gradescope_run.Layout(root=tmp_path)
    (layout.submission).mkdir()
    shutil.copy(NOTEBOOK, layout.submission / "submission.ipynb")
    (layout.submission / "utils.py").write_text("def helper():\n    return 1\n")
    graded: list[Path] = []
    monkeypatch.setattr(gradescope_run, "bundled_assignment", lambda layout: "ch2-jit")
    monkeypatch.setattr(gradescope_run, "grade",
                        lambda path, assignment: (graded.append(path) or report("s", str(path), 100.0), []))
    results = gradescope_run.run(layout)
    assert graded == [layout.submission / "submission.ipynb"]
    assert results.score == 100.0
    assert "Graded submission.ipynb; not graded, as it is not the submission: utils.py." in results.output
