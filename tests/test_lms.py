"""LMS exports: Canvas's own gradebook export filled in (only the target cells change, byte for
byte), Moodle's grade import CSV. No kernel: reports are built by hand."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from grader.errors import UsageError
from grader.outputs import names
from grader.report import Report
from grader.term import lms
from grader.term.lms import CanvasFill, fill_canvas, moodle_feedback, write_moodle

EXPORT = Path(__file__).parent / "fixtures" / "canvas" / "gradebook_export.csv"
TARGET = "Chapter 2: jax.jit (ch2-jit) (123456)"
BOM = "\ufeff".encode()


def report(score: float, *, status: str = "graded", final: float | None = None, failed: int = 0,
           assignment: str = "ch2-jit", max_score: float = 100.0) -> Report:
    checks = [{"id": f"tax.c{i}", "title": f"c{i}", "status": "failed" if i < failed else "passed",
               "score": 0.0, "max_score": 1.0, "hidden": False, "message": None} for i in range(3)]
    return Report.model_validate({
        "assignment": assignment, "submission": {"path": "x.ipynb", "sha256": None, "kind": "notebook"},
        "status": status, "error": "could not be read" if status == "error" else None,
        "score": score, "max_score": max_score, "final_score": final,
        "exercises": [{"id": "tax", "title": "Tax", "score": score, "max_score": max_score,
                       "checks": checks}],
        "seed": 1, "duration_s": 0.1, "environment": {"grader": "0", "python": "3.12", "jax": None},
        "isolation": {"sandboxed": False, "layers": []}})


def rows(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))


def the_batch() -> dict[str, Report]:
    return {
        "alice@uni.edu": report(81.5, failed=2),          # SIS Login ID
        "jgarcia": report(100.0, final=90.0),             # SIS Login ID; late: final 90
        "s7654321": report(100 / 3),                      # SIS User ID of Nguyen
        "mivanova": report(70.0),                         # excused in Canvas (EX)
        "wchen": report(0.0, status="error"),             # could not be graded
        "zed": report(50.0),                              # not in the roster
    }


@pytest.fixture
def filled(tmp_path: Path) -> tuple[CanvasFill, Path]:
    out = tmp_path / names.CANVAS_CSV
    return fill_canvas(EXPORT, the_batch(), out), out


# ----------------------------------------------------------------------------- Canvas: what changes


def test_only_the_target_cells_change_byte_for_byte(filled: tuple[CanvasFill, Path]) -> None:
    fill, out = filled
    text = EXPORT.read_text(encoding="utf-8")
    written = {"alice@uni.edu,JAX 101 - Section A,,9.50,": "40.75",
               "jgarcia,JAX 101 - Section B,,7.00,": "45",
               "bnguyen@uni.edu,JAX 101 - Section B,,10.00,": "16.67"}
    expected = text
    for before, value in written.items():
        expected = expected.replace(before + ",", before + value + ",")
    assert expected.count("40.75") == expected.count(",45,") == expected.count("16.67") == 1
    assert out.read_bytes() == expected.encode("utf-8")
    assert out.read_bytes().startswith(BOM)
    assert fill.column == TARGET and fill.filled == 3


def test_cells_differ_only_in_the_target_column_of_student_rows(filled: tuple[CanvasFill, Path]) -> None:
    _, out = filled
    before, after = rows(EXPORT.read_bytes()), rows(out.read_bytes())
    target = before[0].index(TARGET)
    assert len(before) == len(after) and {len(r) for r in after} == {len(before[0])}
    changed = {(i, j) for i, (b, a) in enumerate(zip(before, after))
               for j, (x, y) in enumerate(zip(b, a)) if x != y}
    assert {j for _, j in changed} == {target}
    assert after[2] == before[2] and after[2][0].strip() == "Points Possible"  # and the Manual Posting row
    assert after[1] == before[1]


def test_scores_are_scaled_to_points_possible_and_written_plain(filled: tuple[CanvasFill, Path]) -> None:
    fill, out = filled
    assert fill.points_possible == 50 and fill.scaling == lms.Scaling(max_score=100, points_possible=50)
    target = rows(out.read_bytes())[0].index(TARGET)
    cells = {r[3]: r[target] for r in rows(out.read_bytes())[3:]}
    assert (cells["alice@uni.edu"], cells["jgarcia"], cells["bnguyen@uni.edu"]) == ("40.75", "45", "16.67")


def test_numbers_are_written_plain(tmp_path: Path) -> None:
    scores = {"a": 12.5, "b": 100.0, "c": 2 / 3, "d": -0.0001, "e": 12.500000}
    out = write_moodle({s: report(v) for s, v in scores.items()}, tmp_path / "m.csv", feedback=False)
    assert [line.split(",")[1] for line in out.read_text(encoding="utf-8").splitlines()[1:]] == [
        "12.5", "100", "0.67", "0", "12.5"]


def test_no_scaling_when_points_possible_equals_max_score(tmp_path: Path) -> None:
    fill = fill_canvas(EXPORT, {"alice@uni.edu": report(40.0, max_score=50.0)}, tmp_path / "c.csv")
    assert fill.scaling is None and "40" in rows((tmp_path / "c.csv").read_bytes())[4]


# ----------------------------------------------------------------------------- Canvas: what does not


def test_nothing_is_dropped_silently(filled: tuple[CanvasFill, Path]) -> None:
    fill, out = filled
    assert fill.matched == 5  # zed is the sixth
    assert [(u.student, u.reason) for u in fill.unmatched] == [("zed", "not in the roster")]
    assert {(r.name, r.reason, r.student) for r in fill.not_filled} == {
        ('Chen, Wei "Will"', "not graded", "wchen"), ("Иванова, Мария", "excused", "mivanova"),
        ("Student, Test", "test student", None)}
    assert fill.not_graded == ["wchen"]
    assert {r.name: r.line for r in fill.not_filled}["Student, Test"] == 10  # Chen's note spans lines 4-5
    after = {r[3]: r for r in rows(out.read_bytes())}
    target = rows(out.read_bytes())[0].index(TARGET)
    assert after["wchen"][target] == "40.00"  # an error keeps Canvas's value: no silent 0
    assert after["mivanova"][target] == "EX"
    text = "\n".join(fill.describe())
    assert "zed" in text and "wchen" in text and "3 scores" in text and "rescaled from 100 to 50" in text


def test_a_roster_row_without_a_report_is_listed(tmp_path: Path) -> None:
    fill = fill_canvas(EXPORT, {"alice@uni.edu": report(10.0)}, tmp_path / "c.csv")
    no_report = {r.login for r in fill.not_filled if r.reason == "no report"}
    assert no_report == {"wchen", "jgarcia", "bnguyen@uni.edu", "mivanova"}


def test_a_different_score_already_in_canvas_is_reported_as_replaced(tmp_path: Path) -> None:
    same = fill_canvas(EXPORT, {"wchen": report(80.0)}, tmp_path / "a.csv")  # 80 / 100 -> 40.00 as before
    other = fill_canvas(EXPORT, {"wchen": report(90.0)}, tmp_path / "b.csv")
    assert same.replaced == [] and other.replaced == ["wchen"]


@pytest.mark.parametrize(("student", "login"), [
    ("ALICE@Uni.Edu", "alice@uni.edu"),    # case-insensitive
    ("alice", "alice@uni.edu"),            # a bare login matches one with a domain
    ("jgarcia@uni.edu", "jgarcia"),        # and the other way round
    ("20230005", "mivanova"),              # SIS User ID
])
def test_matching_rules(tmp_path: Path, student: str, login: str) -> None:
    fill = fill_canvas(EXPORT, {student: report(10.0)}, tmp_path / "c.csv")
    assert fill.matched == 1 and login not in {r.login for r in fill.not_filled if r.reason == "no report"}


def test_two_students_on_one_row_fill_neither(tmp_path: Path) -> None:
    fill = fill_canvas(EXPORT, {"alice": report(10.0), "alice@uni.edu": report(90.0)}, tmp_path / "c.csv")
    assert fill.filled == 0 and fill.matched == 0
    assert {(u.student, u.reason) for u in fill.unmatched} == {
        ("alice", "another student matches the same row"),
        ("alice@uni.edu", "another student matches the same row")}
    assert [r.reason for r in fill.not_filled if r.login == "alice@uni.edu"] == ["several students match"]


def test_a_domain_on_both_sides_must_agree(tmp_path: Path) -> None:
    fill = fill_canvas(EXPORT, {"alice@gmail.com": report(10.0)}, tmp_path / "c.csv")
    assert fill.filled == 0 and fill.unmatched[0].reason == "not in the roster"


# ----------------------------------------------------------------------------- Canvas: which column


def variant(tmp_path: Path, old: str, new: str) -> Path:
    path = tmp_path / "export.csv"
    path.write_bytes(EXPORT.read_bytes().replace(old.encode(), new.encode()))
    return path


def test_an_ambiguous_column_is_a_usage_error_listing_the_candidates(tmp_path: Path) -> None:
    roster = variant(tmp_path, "Quiz 1 (123457)", "ch2-jit retake quiz (123457)")
    with pytest.raises(UsageError, match=r"2 columns .* match ch2-jit: 'Chapter 2: jax\.jit \(ch2-jit\) "
                                         r"\(123456\)', 'ch2-jit retake quiz \(123457\)'; choose one"):
        fill_canvas(roster, the_batch(), tmp_path / "c.csv")
    assert not (tmp_path / "c.csv").exists()
    fill = fill_canvas(roster, the_batch(), tmp_path / "c.csv", column="123456")
    assert fill.column == TARGET


@pytest.mark.parametrize("column", [TARGET, "Chapter 2: jax.jit (ch2-jit)", "123456"])
def test_the_column_argument_by_header_title_or_id(tmp_path: Path, column: str) -> None:
    assert fill_canvas(EXPORT, the_batch(), tmp_path / "c.csv", column=column).column == TARGET


@pytest.mark.parametrize("column", ["Current Score", "Section", "Quiz 2"])
def test_a_column_canvas_does_not_import_is_refused(tmp_path: Path, column: str) -> None:
    with pytest.raises(UsageError, match="Canvas imports scores into; its assignment columns are: "
                                         r"'Chapter 1: arrays \(ch1-arrays\) \(123455\)'"):
        fill_canvas(EXPORT, the_batch(), tmp_path / "c.csv", column=column)


def test_no_column_naming_the_assignment(tmp_path: Path) -> None:
    batch = {"alice@uni.edu": report(1.0, assignment="ch9-pmap")}
    with pytest.raises(UsageError, match="no assignment column .* names ch9-pmap: choose one of"):
        fill_canvas(EXPORT, batch, tmp_path / "c.csv")
    with pytest.raises(UsageError, match="no assignment column"):  # a word, not a prefix
        fill_canvas(EXPORT, {"a": report(1.0, assignment="ch2")}, tmp_path / "c.csv")


def test_other_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="2 assignments"):
        fill_canvas(EXPORT, {"a": report(1.0), "b": report(1.0, assignment="ch1-arrays")}, tmp_path / "c.csv")
    with pytest.raises(UsageError, match="is the Canvas export itself"):
        fill_canvas(EXPORT, the_batch(), EXPORT)
    not_canvas = tmp_path / "summary.csv"
    not_canvas.write_text("student,score\nalice,3\n", encoding="utf-8")
    with pytest.raises(UsageError, match="not a Canvas gradebook export"):
        fill_canvas(not_canvas, the_batch(), tmp_path / "c.csv")


# ----------------------------------------------------------------------------- Canvas: the file itself


def test_a_file_canvas_would_not_have_written_is_refused(tmp_path: Path) -> None:
    latin1 = tmp_path / "latin1.csv"
    latin1.write_bytes(EXPORT.read_bytes().decode("utf-8-sig").replace("Иванова, Мария", "Muller, Anna")
                       .encode("latin-1"))
    with pytest.raises(UsageError, match="is not UTF-8"):
        fill_canvas(latin1, the_batch(), tmp_path / "c.csv")
    ragged = variant(tmp_path, ",B-,B-,B-,B-\n", ",B-,B-,B-\n")
    with pytest.raises(UsageError, match="line 4: 24 cells where the header has 25"):
        fill_canvas(ragged, the_batch(), tmp_path / "c.csv")


def test_semicolons_crlf_and_no_bom_are_kept(tmp_path: Path) -> None:
    buffer = io.StringIO(newline="")
    csv.writer(buffer, delimiter=";", lineterminator="\r\n").writerows(rows(EXPORT.read_bytes()))
    roster = tmp_path / "export.csv"
    roster.write_bytes(buffer.getvalue().encode("utf-8"))
    out = tmp_path / "c.csv"
    fill = fill_canvas(roster, the_batch(), out)
    data = out.read_bytes()
    assert fill.filled == 3 and not data.startswith(BOM)
    assert data.count(b"\r\n") == roster.read_bytes().count(b"\r\n")
    assert data.replace(b"40.75", b"").replace(b";45;", b";;").replace(b"16.67", b"") == roster.read_bytes()
    assert {len(r) for r in csv.reader(io.StringIO(data.decode(), newline=""), delimiter=";")} == {25}


def test_the_write_is_atomic(tmp_path: Path) -> None:
    out = tmp_path / names.CANVAS_CSV
    out.write_text("an older file", encoding="utf-8")
    fill_canvas(EXPORT, the_batch(), out)
    assert sorted(p.name for p in tmp_path.iterdir()) == [names.CANVAS_CSV]
    blocked = tmp_path / "blocked.csv"
    blocked.mkdir()  # a folder in the way: the rename fails, no half file or .tmp stays behind
    with pytest.raises(OSError):
        fill_canvas(EXPORT, the_batch(), blocked)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocked.csv", names.CANVAS_CSV]


def test_injection_looking_student_ids_never_reach_the_file_and_print_inert(tmp_path: Path) -> None:
    hostile = '=HYPERLINK("http://evil","x")\x1b[2J'
    fill = fill_canvas(EXPORT, {**the_batch(), hostile: report(1.0)}, tmp_path / "c.csv")
    assert b"HYPERLINK" not in (tmp_path / "c.csv").read_bytes()
    assert hostile in [u.student for u in fill.unmatched]  # the model keeps the raw id ...
    lines = fill.describe()                                 # ... the terminal gets it escaped
    assert any("HYPERLINK" in line and "\\x1b" in line for line in lines)
    assert not any("\x1b" in line for line in lines)


# ----------------------------------------------------------------------------- Moodle


def test_moodle_header_and_rows(tmp_path: Path) -> None:
    out = write_moodle(the_batch(), tmp_path / names.MOODLE_CSV)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0] == '"Username","ch2-jit","ch2-jit (Feedback)"'
    assert lines[1] == '"alice@uni.edu",81.5,"ch2-jit: 81.5 / 100, 2 checks failed"'
    assert lines[2] == '"jgarcia",90,"ch2-jit: 90 / 100, all checks passed"'
    text = io.StringIO(out.read_text(encoding="utf-8"), newline="")
    read = list(csv.reader(text, quoting=csv.QUOTE_NONNUMERIC))
    assert [r[0] for r in read[1:]] == ["alice@uni.edu", "jgarcia", "mivanova", "s7654321", "zed"]  # no wchen
    assert read[4][1] == 33.33 and {len(r) for r in read} == {3}
    assert sorted(p.name for p in tmp_path.iterdir()) == [names.MOODLE_CSV]


def test_moodle_without_feedback_and_by_email(tmp_path: Path) -> None:
    batch = {"alice@uni.edu": report(81.5), "bob@uni.edu": report(0.0, status="error")}
    out = write_moodle(batch, tmp_path / "m.csv", identifier="email", feedback=False)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines == ['"Email address","ch2-jit"', '"alice@uni.edu",81.5']
    with pytest.raises(UsageError, match="not e-mail addresses"):
        write_moodle(the_batch(), tmp_path / "m.csv", identifier="email")
    with pytest.raises(UsageError, match="identifier must be one of"):
        write_moodle(batch, tmp_path / "m.csv", identifier="nickname")  # type: ignore[arg-type]


def test_moodle_neutralises_injection_looking_ids(tmp_path: Path) -> None:
    out = write_moodle({"=cmd|' /C calc'!A0": report(5.0), "-2+3": report(1.0), "ok\x1bid": report(2.0)},
                       tmp_path / "m.csv")
    read = list(csv.reader(io.StringIO(out.read_text(encoding="utf-8"), newline="")))
    assert [r[0] for r in read[1:]] == ["'-2+3", "'=cmd|' /C calc'!A0", "ok\\x1bid"]


def test_moodle_feedback_says_what_made_the_score() -> None:
    late = {"submitted_at": "2025-01-02T00:00:00+00:00", "source": "file", "due": "2025-01-01T00:00:00+00:00",
            "days_late": 1, "points": 5.0, "rule": "5 points a day"}
    r = Report.model_validate({**report(86.5, final=81.5, failed=1).model_dump(), "late": late})
    assert moodle_feedback(r) == "ch2-jit: 81.5 / 100, 1 check failed, 5 points off for 1 day late"


@pytest.mark.parametrize("points", ["0.00", "-50.00"])
def test_a_column_with_no_points_possible_is_refused_not_overwritten(tmp_path: Path, points: str) -> None:
    roster = variant(tmp_path, ",10.00,50.00,5.00,", f",10.00,{points},5.00,")
    with pytest.raises(UsageError, match="points possible: set its points in Canvas first"):
        fill_canvas(roster, {"alice@uni.edu": report(40.0)}, tmp_path / "c.csv")
    assert not (tmp_path / "c.csv").exists()
