"""Student text reaches the instructor inert: on the terminal (render, progress), in summary.csv
and in Gradescope's results.json. No kernel: reports are built by hand."""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from pathlib import Path

import pytest

from grader import inert
from grader.batch.progress import Progress
from grader.outputs.exports import gradescope_results, write_summary_csv
from grader.views.terminal import summary, summary_exercise
from grader.report import (
    CellProblem,
    CheckResult,
    Environment,
    ExerciseResult,
    Isolation,
    NotAnswered,
    Report,
    SubmissionRef,
)

SPOOF = "\x1b[2J\x1b[H Total 100 / 100"
# one of each: CSI, OSC (a window title), C0 NUL / BEL / CR / LF / TAB, DEL, C1 CSI, bidi override
# and isolate, marks, zero-width characters, BOM, line separator, a lone surrogate (an undecodable
# byte of a file name), a tag character
HOSTILE = (SPOOF + "\r\x1b]0;title\x07\u202eevil\u2066x\u2069\x00\x9b31m\x7f\n  fake line\t"
           "\u200e\u200f\u061c\u200b\u200d\ufeff\u2028\udcff\U000e0041")
DANGEROUS = ["\x1b", "\x9b", "\x07", "\x00", "\r", "\n", "\t", "\x7f", "\x85", "\u202a", "\u202e", "\u2066",
             "\u2069", "\u200e", "\u200f", "\u061c", "\u200b", "\u200d", "\u2060", "\ufeff", "\u00ad",
             "\u2028", "\u2029", "\udcff", "\U000e0041", "\u3164"]


def unsafe_in(text: str, allowed: str = "") -> list[str]:
    """The characters of `text` that must not reach a terminal (each escaped by inert)."""
    return [ch for ch in text if ch not in allowed
            and (unicodedata.category(ch) in {"Cc", "Cf", "Cs", "Zl", "Zp"} or ch == "\u3164")]


def hostile_report(*, status: str = "graded", score: float = 3.0) -> Report:
    checks = [CheckResult(id="a.one", title="one", status="passed", score=3.0, max_score=3.0, hidden=False,
                          message=None),
              CheckResult(id="a.two", title="two", status="failed", score=0.0, max_score=7.0, hidden=True,
                          message=f"expected 2, got {HOSTILE}"),
              CheckResult(id="a.three", title="three", status="error", score=0.0, max_score=0.0, hidden=False,
                          message=HOSTILE)]
    return Report(assignment="toy" + SPOOF, student=HOSTILE,
                  submission=SubmissionRef(path=f"subs/{HOSTILE}.ipynb", sha256=None, kind="notebook"),
                  status=status, error=HOSTILE if status == "error" else None, score=score, max_score=10.0,
                  exercises=[ExerciseResult(id="a", title="Exercise A", score=score, max_score=10.0,
                                            checks=checks)],
                  seed=7, duration_s=1.25, environment=Environment(grader="0", python="3.12", jax=None),
                  cell_problems=[CellProblem(cell=2, where="cell 2", status="error", message=HOSTILE)],
                  isolation=Isolation(sandboxed=False, layers=[]))


# ----------------------------------------------------------------------------- inert itself


@pytest.mark.parametrize("ch", DANGEROUS, ids=[f"U+{ord(c):04X}" for c in DANGEROUS])
def test_terminal_escapes_each_dangerous_character_visibly(ch: str) -> None:
    out = inert.terminal(f"a{ch}b")
    assert ch not in out and out.isascii()
    assert out == f"a{inert.escape_char(ch)}b" and out != "ab"  # escaped, not dropped


def test_escapes_read_as_python_would_write_them() -> None:
    assert inert.terminal("\x1b[2J\r\n\t\x9b\u202e\U000e0041") == r"\x1b[2J\r\n\t\x9b\u202e\U000e0041"


def test_ordinary_text_is_kept_as_it_is() -> None:
    for text in ("alice", "Zoë Ñúñez", "José-María O'Brien", "田中 太郎", "Ελένη", "аlice",
                 "x = 1 / 0 ≤ 2 — ok ✓", "C:\\Users\\bo\\hw.ipynb", "emoji 🎉"):
        assert inert.terminal(text) == text and inert.text(text) == text


def test_text_keeps_newlines_and_escapes_the_rest() -> None:
    assert inert.text("line one\nline two\r\n\x1b[31m") == "line one\nline two\\r\n\\x1b[31m"
    assert inert.terminal("line one\nline two") == "line one\\nline two"


def test_limit_caps_and_says_how_much_was_cut() -> None:
    assert inert.terminal("x" * 50, 10) == "x" * 10 + "… (40 more characters)"
    assert inert.terminal("x" * 11, 10) == "x" * 10 + "… (1 more character)"
    assert inert.terminal("x" * 10, 10) == "x" * 10
    out = inert.terminal("\x1b" * 50, 10)  # the cap counts what is shown, escapes included
    assert out == "\\x1b\\x1b… (48 more characters)"
    assert len(inert.name("n" * 1000)) < inert.NAME_LIMIT + 30


@pytest.mark.parametrize("cell", ["=HYPERLINK(\"http://x\",\"y\")", "+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1"])
def test_csv_cell_neutralises_formula_triggers(cell: str) -> None:
    out = inert.csv_cell(cell)
    assert out.startswith("'") and out[1:] == inert.text(cell)


def test_csv_cell_leaves_other_text() -> None:
    assert [inert.csv_cell(c) for c in ("alice", "", "a=b", "1-2", "'quoted")] == \
           ["alice", "", "a=b", "1-2", "'quoted"]


def test_ascii_form_and_code_points_tell_look_alikes_apart() -> None:
    assert inert.ascii_form("\u0430lice") == "\\u0430lice" != inert.ascii_form("alice") == "alice"
    assert inert.code_points("\u0430l\u0430\u202e") == ["U+0430 CYRILLIC SMALL LETTER A",
                                                        "U+202E RIGHT-TO-LEFT OVERRIDE"]


# ----------------------------------------------------------------------------- the terminal summary

GRADER_COLOURS = re.compile(r"\x1b\[(?:0|1|2|31|32|33)m")


@pytest.mark.parametrize("status", ["graded", "error"])
def test_summary_shows_no_raw_control_and_keeps_the_graders_total(status: str) -> None:
    report = hostile_report(status=status, score=3.0 if status == "graded" else 0.0)
    plain = summary(report, color=False)
    assert unsafe_in(plain, allowed="\n") == []
    lines = plain.split("\n")
    # one line per grader item: header, [not graded], exercise, 2 failed checks, the legend, 1 cell note, total
    assert len(lines) == (8 if status == "error" else 7), lines
    assert [line for line in lines if line.lstrip().startswith("Total")] == [lines[-1]]
    assert lines[-1] == f"Total {3 if status == 'graded' else 0} / 10   (seed 7, 1.2 s)"
    assert all(line.startswith("  ") for line in lines[1:-1])  # student text never starts a line
    assert "\\x1b[2J\\x1b[H Total 100 / 100" in plain  # shown, escaped, after the grader's prefix
    assert "\\u202eevil" in plain and "\\n  fake line" in plain and "\\udcff" in plain

    coloured = summary(report, color=True)
    assert GRADER_COLOURS.search(coloured)  # the grader still paints
    assert GRADER_COLOURS.sub("", coloured) == plain  # and only the grader's codes are raw
    assert "\x1b[1m" + ("3 / 10" if status == "graded" else "0 / 10") + "\x1b[0m" in coloured.split("\n")[-1]


def test_summary_caps_long_names_and_messages() -> None:
    report = hostile_report().model_copy(update={
        "assignment": "a" * 5000,
        "submission": SubmissionRef(path="p" * 5000 + ".ipynb", sha256=None, kind="notebook")})
    report.exercises[0].checks[1].message = "m" * 10_000
    lines = summary(report).split("\n")
    assert len(lines[0]) < inert.NAME_LIMIT + inert.PATH_LIMIT + 80 and "more characters)" in lines[0]
    assert len(lines[2]) < inert.MESSAGE_LIMIT + 80
    assert f"({10_000 - inert.MESSAGE_LIMIT} more characters)" in lines[2]


def test_self_check_summary_is_inert_too() -> None:
    out = summary_exercise(hostile_report().exercises[0])
    assert unsafe_in(out, allowed="\n") == [] and len(out.split("\n")) == 3


def test_not_answered_names_are_inert() -> None:
    check = CheckResult(id="b.x", title="x", status="failed", score=0, max_score=1, hidden=False,
                        message=f"Not answered yet: `f{SPOOF}` is not defined.", reason="not_answered",
                        not_answered=NotAnswered(name=f"f{SPOOF}"))
    ex = ExerciseResult(id="b", title="B", score=0, max_score=1, checks=[check])
    out = summary_exercise(ex)
    assert unsafe_in(out, allowed="\n") == [] and "not answered yet: define f\\x1b[2J" in out


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_label_is_inert_and_capped() -> None:
    stream = FakeTerminal()
    bar = Progress(2, stream=stream)
    bar.update(True, label=HOSTILE * 10)
    bar.update(False, label="bo")
    bar.close()
    written = stream.getvalue()
    assert unsafe_in(written, allowed="\r\n") == []
    assert written.count("\r") == 3 and written.endswith("\n") and written.count("\n") == 1
    last = written.split("\r")[-1]
    assert "2/2  failed 1" in last and "last: bo" in last
    assert "last: \\x1b[2J" in written and "more characters)" in written


# ----------------------------------------------------------------------------- summary.csv and Gradescope


def csv_report(student: str, *, score: float = 4.0, error: str | None = None,
               assignment: str = "toy") -> Report:
    check = CheckResult(id="a.one", title="one", status="failed", score=score, max_score=10.0, hidden=False,
                        message="no")
    ex = ExerciseResult(id="a", title="A", score=score, max_score=10.0, checks=[check])
    return Report(assignment=assignment, student=student,
                  submission=SubmissionRef(path=f"{student}.py", sha256=None, kind="module"),
                  status="error" if error else "graded", error=error, score=score, max_score=10.0,
                  exercises=[ex], seed=1, duration_s=0.1,
                  environment=Environment(grader="0", python="3.12", jax=None),
                  isolation=Isolation(sandboxed=False, layers=[]))


FORMULAS = ["=HYPERLINK(\"http://evil\",\"click\")", "+cmd|' /C calc'!A0", "-2+3",
            "@SUM(1+1)*cmd|' /C calc'!A0", "\t=1+2", "\r=1+2"]


def test_summary_csv_neutralises_student_text_and_keeps_numbers(tmp_path: Path) -> None:
    reports = {s: csv_report(s, score=i - 2.5) for i, s in enumerate(FORMULAS)}  # -2.5, -1.5, ... 2.5
    reports["a;=1+2"] = csv_report("a;=1+2", error="=WEBSERVICE(\"http://evil\")\nsecond line\x1b[2J",
                                 assignment="@toy")
    path = write_summary_csv(reports, tmp_path / "summary.csv")
    raw = path.read_bytes().decode("utf-8")  # UTF-8
    assert "\x1b" not in raw
    rows = list(csv.reader(io.StringIO(raw, newline=""), quoting=csv.QUOTE_NONNUMERIC))
    header, body = rows[0], rows[1:]
    assert header == ["student", "assignment", "status", "score", "max_score", "a", "late_penalty", "adjustment",
                      "final_score", "error"]  # one header row
    assert len(body) == len(reports)
    for row in body:
        for cell in row:
            if isinstance(cell, str):
                assert not cell.startswith(inert.FORMULA_TRIGGERS), row
        assert all(isinstance(row[i], float) for i in (3, 4, 5)), row  # unquoted: numbers
    by_student = {row[0]: row for row in body}
    for i, s in enumerate(FORMULAS):
        row = by_student["'" + inert.text(s)]
        assert row[3] == row[5] == i - 2.5 and row[4] == 10.0  # negative scores too, not neutralised
    semi = by_student["a;=1+2"]
    assert semi[1] == "'@toy" and semi[9] == "'=WEBSERVICE(\"http://evil\")\nsecond line\\x1b[2J"
    assert '"a;=1+2"' in raw  # quoted: a spreadsheet splitting on ";" keeps it one cell
    assert "\n-2.5," not in raw and ",-2.5,10," in raw  # the grader's numbers, as numbers
    # and a plain reader (the batch tests', an LMS import) reads the scores as before
    plain = list(csv.DictReader(io.StringIO(raw, newline="")))
    assert sorted(float(r["score"]) for r in plain) == sorted(r.score for r in reports.values())


def test_gradescope_output_keeps_newlines_and_nothing_else() -> None:
    data = gradescope_results(hostile_report(status="error", score=0.0))
    strings = [data["output"]] + [t[k] for t in data["tests"] for k in ("name", "output")]
    for s in strings:
        assert unsafe_in(s, allowed="\n") == [], s
    assert "\n  fake line" in data["output"] and "\\x1b[2J\\x1b[H Total 100 / 100" in data["output"]
    failed = next(t for t in data["tests"] if t["name"].startswith("a.two"))
    assert failed["output"].startswith("expected 2, got \\x1b[2J")
    graded = gradescope_results(csv_report("s", assignment="toy\x1b[2J"))
    assert graded["output"] == "toy\\x1b[2J: 4 / 10"


def test_a_failed_check_shows_the_requirement_it_verifies() -> None:
    """The sentence of the exercise a failed check verifies, beside it: in the terminal summary,
    the self-check cell's summary and Gradescope's output; never beside a passed check."""
    sentence = "tol must be passed in as a traced argument: changing tol doesn't recompile"
    failed = CheckResult(id="newton.compiles_once", title="compiles once", status="failed", score=0, max_score=3,
                         hidden=False, message="keep tol traced", requirements=[sentence])
    passed = failed.model_copy(update={"id": "newton.visible", "status": "passed", "score": 3,
                                       "requirements": ["newton_sqrt(a, tol) returns the square root of a"]})
    exercise = ExerciseResult(id="newton", title="Newton", score=3, max_score=6, checks=[passed, failed])
    report = hostile_report().model_copy(update={"exercises": [exercise]})
    for text in (summary(report), summary_exercise(exercise)):
        assert f"the exercise asks: {sentence}" in text
        assert "returns the square root" not in text
    outputs = {t["name"]: t["output"] for t in gradescope_results(report)["tests"]}
    assert outputs["newton.compiles_once: compiles once"].endswith(f"The exercise asks: {sentence}")
    assert "exercise asks" not in outputs["newton.visible: compiles once"]


def test_the_summary_explains_the_score_and_its_marks() -> None:
    """Checks passed of total per exercise, a legend for the marks, `-v` lists the passed ones,
    and long lines wrap to the terminal under their own indentation."""
    passed = CheckResult(id="a.easy", title="the easy one", status="passed", score=1, max_score=1, hidden=False,
                         message=None)
    failed = CheckResult(id="a.hard", title="the hard one", status="failed", score=0, max_score=2, hidden=False,
                         message="f(x) should double x: " + "it returned something else entirely, " * 6)
    report = hostile_report().model_copy(update={"exercises": [
        ExerciseResult(id="a", title="A", score=1, max_score=3, checks=[passed, failed])], "cell_problems": []})
    text = summary(report)
    assert "(1 of 2 checks)" in text and "✗ failed  ! error  ⏱ timed out" in text
    assert "a.easy" not in text and "✓ a.easy, 1 pt: the easy one" in summary(report, verbose=True)
    wrapped = summary(report, width=60).splitlines()
    assert all(len(line) <= 60 for line in wrapped if "the hard one" in line or line.startswith("          "))
    assert sum(1 for line in wrapped if line.startswith("          ")) >= 3
