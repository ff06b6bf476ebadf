"""The class report page: its numbers (pure), its HTML (escaped, self-contained, deterministic,
sortable, readable on a phone), and what a real browser shows of it (headless Chromium, skipped
when it is not installed). Reports are built directly: no kernel runs here."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

from grader.batch.discovery import student_file_stem
from grader.outputs.classpage.assets import SCRIPT, csp
from grader.outputs.classreport import BINS, bin_index, render_html, summarize, write_class_report
from grader.outputs.names import report_file_name
from grader.report import (
    Adjustment,
    CellProblem,
    CheckResult,
    Environment,
    ExerciseResult,
    Isolation,
    LatePenalty,
    NotAnswered,
    Report,
    SubmissionRef,
)
from grader.term.models import SimilarGroup

# a small assignment: exercise -> check id -> points
POINTS = {"a": {"a.one": 6.0, "a.two": 4.0}, "b": {"b.one": 5.0, "b.two": 5.0}}
XSS = "<script>alert(1)</script>"
Verdict = str | dict[str, object]  # a check's message, or its verdict's fields (message, reason and data)


def not_answered(name: str = "f", because: str | None = None) -> dict[str, object]:
    """The fields of a "Not answered yet" verdict, its sentence made from them as the grader makes it."""
    missing = NotAnswered(name=name, because=because)
    return {"message": missing.message, "reason": "not_answered", "not_answered": missing}


BLANK = not_answered()


def make_report(student: str, passed: set[str] = frozenset(), *, statuses: dict[str, str] | None = None,
                error: str | None = None, exercises: bool = True, assignment: str = "toy",
                messages: dict[str, Verdict] | None = None, message: Verdict = "no",
                **fields: object) -> Report:
    """A report of the toy assignment: checks in `passed` get full points, the others fail
    (or take their status from `statuses`) with `message` (or theirs in `messages`); `error` makes
    a report in error (every check skipped); `fields` are further Report fields."""
    statuses, messages = statuses or {}, messages or {}
    exs = []
    for ex_id, checks in POINTS.items() if exercises else ():
        results = []
        for cid, pts in checks.items():
            status = "skipped" if error else "passed" if cid in passed else statuses.get(cid, "failed")
            verdict = messages.get(cid, message)
            said = {"message": None} if status == "passed" else verdict if isinstance(verdict, dict) else \
                {"message": verdict}
            results.append(CheckResult(id=cid, title=f"title of {cid}", status=status,
                                       score=pts if status == "passed" else 0.0, max_score=pts,
                                       hidden=cid.endswith("two"), **said))
        exs.append(ExerciseResult(id=ex_id, title=f"Exercise {ex_id.upper()}", checks=results,
                                  score=sum(c.score for c in results), max_score=sum(checks.values())))
    return Report(assignment=assignment, student=student,
                  submission=SubmissionRef(path=f"{student}.ipynb", sha256=None, kind=None),
                  status="error" if error else "graded", error=error,
                  score=sum(e.score for e in exs), max_score=sum(e.max_score for e in exs), exercises=exs,
                  seed=1, duration_s=0.5, environment=Environment(grader="0", python="3.12", jax=None),
                  isolation=Isolation(sandboxed=False, layers=[]), **fields)


def class_of_four() -> dict[str, Report]:
    return {
        "dana": make_report("dana", {"a.one", "a.two", "b.one", "b.two"}),  # 20 / 20
        "ana": make_report("ana", {"a.one", "b.one"}, statuses={"a.two": "timeout"}),  # 11 / 20
        "cole": make_report("cole", {"a.two"}, statuses={"b.two": "error"}),  # 4 / 20
        "bo": make_report("bo", error="the notebook is not valid JSON"),  # 0 / 20, in error
    }


# hostile student text: markup, a javascript: URL, a right-to-left override
EVIL = "<script>alert(1)</script>\u202eevil"
EVIL_MESSAGE = ('cell 2, line 1 raised ValueError: <script>alert(2)</script> <a href="javascript:alert(3)">'
                "click</a> \u202egnp.exe\nTraceback (most recent call last): secret second line")
DIED = "cell 5 killed the Python kernel; it was restarted without that cell"
CHECK_DIED = "b.two could not be checked (the Python kernel died during this check (the kernel process died))"
DIED_IN_CHECK = {"message": CHECK_DIED, "reason": "kernel_died"}
LATE = LatePenalty(submitted_at="2025-03-02T09:00:00+01:00", source="file", due="2025-03-01T23:59:00+01:00",
                   days_late=1, points=1.1, rule="10% of the points per day late, at most 50%")
ADJUSTED = Adjustment(points=2.0, reason="a.two regraded by hand: <b>right</b> idea", by="prof.x",
                      at="2025-03-04T10:00:00+01:00")
NOT_GRADED = {"zoe": "two submissions: zoe.ipynb and zoe/zoe.py",
              "javascript:alert(4)": "a symbolic link, not a submission"}
GROUPS = [SimilarGroup(exercise="a", students=["cole", "ana"], similarity=0.93, threshold=0.9, identical=False),
          SimilarGroup(exercise="b", students=["dana", EVIL], similarity=1.0, threshold=0.9, identical=True)]


def problem(cell: int, message: str, status: str = "error", **fields: object) -> CellProblem:
    return CellProblem(cell=cell, where=f"cell {cell}", status=status, message=message, **fields)


def rich_class() -> dict[str, Report]:
    """Every case the page must show: late and adjusted, in error, cell errors (one hostile), a
    kernel killed by a cell and one killed during a check, a blank submission."""
    return class_of_four() | {
        "ana": make_report("ana", {"a.one", "b.one"}, statuses={"a.two": "timeout"}, late=LATE,
                           adjustments=[ADJUSTED], final_score=11.9),
        "cole": make_report("cole", {"a.two"}, statuses={"b.two": "error"}, cell_problems=[
            problem(3, "cell 3, line 2 raised ZeroDivisionError: division by zero\nmore", line=2,
                    ename="ZeroDivisionError", exercise="b")]),
        "kim": make_report("kim", {"a.one", "a.two"}, cell_problems=[problem(5, DIED, "died")]),
        "lee": make_report("lee", {"a.one"}, statuses={"b.two": "error"}, messages={"b.two": DIED_IN_CHECK}),
        "blank": make_report("blank", message=BLANK),
        EVIL: make_report(EVIL, {"b.one"}, cell_problems=[problem(2, EVIL_MESSAGE, line=1, ename="<b>Err</b>")],
                          cell_problems_omitted=3),
    }


def without_our_script(page: str) -> str:
    """The page minus its one script (which must be ours, once), to look for any other."""
    ours = f"<script>{SCRIPT}</script>"
    assert page.count(ours) == 1
    return page.replace(ours, "")


def without_section(page: str, ident: str) -> str:
    """The page without one of its sections (from its heading to the next one)."""
    start = page.index(f'<h2 id="{ident}">')
    end = page.find("<h2", start + 1)
    return page[:start] + (page[end:] if end >= 0 else "")


def student_row(page: str, student: str) -> str:
    """The students table's row of this (plain ASCII) student, as HTML."""
    return re.search(rf'<tr data-order="\d+"[^>]*><td class="student"><a class="who" href="[^"]+">{student}</a>'
                     r".*?</tr>", page).group(0)


# ----------------------------------------------------------------------------- the numbers


def test_bin_edges() -> None:
    assert [bin_index(p) for p in (0, 9.99, 10, 55, 89.9, 90, 99.9, 100)] == [0, 0, 1, 5, 8, 9, 9, 9]


def test_histogram_counts_every_student_once() -> None:
    s = summarize(class_of_four())
    assert len(s.histogram) == BINS
    assert [(b.lo, b.hi) for b in s.histogram[:2]] == [(0, 10), (10, 20)]
    assert {i: b.count for i, b in enumerate(s.histogram) if b.count} == {0: 1, 2: 1, 5: 1, 9: 1}
    assert [b.errors for b in s.histogram] == [1] + [0] * 9  # bo, in error, scored 0
    assert sum(b.count for b in s.histogram) == s.students == 4


def test_counts_means_and_rows() -> None:
    s = summarize(class_of_four())
    assert (s.assignments, s.students, s.graded, s.errors, s.died, s.missing) == (["toy"], 4, 3, 1, 0, 0)
    assert s.mean_percent == pytest.approx((100 + 55 + 20 + 0) / 4)
    assert s.median_percent == pytest.approx((20 + 55) / 2)
    # exercise means over every student, the one in error counting 0
    assert [(e.id, e.title, e.max_score) for e in s.exercises] == [
        ("a", "Exercise A", 10), ("b", "Exercise B", 10)]
    assert [e.mean for e in s.exercises] == pytest.approx([(10 + 6 + 4 + 0) / 4, (10 + 5 + 0 + 0) / 4])
    # rows sorted by student id; the report in error is listed with its reason
    assert [(r.student, r.status, r.score, r.percent) for r in s.rows] == [
        ("ana", "graded", 11, 55), ("bo", "error", 0, 0),
        ("cole", "graded", 4, 20), ("dana", "graded", 20, 100)]
    assert s.rows[1].error == "the notebook is not valid JSON"
    assert s.rows[0].exercises == {"a": 6, "b": 5}


def test_pass_rates_hardest_first() -> None:
    checks = summarize(class_of_four()).checks
    # among the 3 graded reports: a.one 2, a.two 2, b.one 2, b.two 1 passed; ties by id
    assert [(c.id, c.passed, c.total) for c in checks] == [
        ("b.two", 1, 3), ("a.one", 2, 3), ("a.two", 2, 3), ("b.one", 2, 3)]
    assert checks[0].rate == pytest.approx(1 / 3)
    assert checks[0].statuses == {"error": 1, "failed": 1, "passed": 1}
    assert checks[2].statuses == {"passed": 2, "timeout": 1}
    assert (checks[0].exercise, checks[0].hidden, checks[0].title) == ("b", True, "title of b.two")


def test_summary_is_json_with_rates() -> None:
    dumped = summarize(class_of_four()).model_dump(mode="json")
    assert dumped["checks"][0]["id"] == "b.two" and dumped["checks"][0]["rate"] == pytest.approx(1 / 3)


def test_error_report_without_exercises_counts_zero() -> None:
    """A report in error whose assignment was unknown has no exercises: shown as "—", counted 0."""
    reports = {"eve": make_report("eve", {"a.one"}),
               "zed": make_report("zed", error="unreadable", exercises=False, assignment="unknown")}
    s = summarize(reports)
    assert s.assignments == ["toy"]  # "unknown" of the error report is not a second assignment
    assert s.exercises[0].mean == pytest.approx(3.0)
    assert s.rows[1].exercises == {"a": None, "b": None} and s.rows[1].percent == 0
    page = render_html(s)
    assert "unreadable" in page and "—" in page


def test_empty_class_says_no_submissions(tmp_path: Path) -> None:
    s = summarize({})
    assert (s.students, s.graded, s.errors, s.mean_percent, s.rows, s.checks) == (0, 0, 0, None, [], [])
    page = write_class_report({}, tmp_path / "out").read_text(encoding="utf-8")
    assert "No submissions" in page
    assert "<svg" not in page


def test_pass_rates_are_among_students_who_answered() -> None:
    """A blank submission ("Not answered yet" on every check, also with the cause attribution adds)
    is left out of every rate; one that answered only `a` counts for `a` only."""
    reports = {"dana": make_report("dana", {"a.one", "a.two", "b.one", "b.two"}),
               "blank": make_report("blank", message=BLANK),
               "half": make_report("half", messages={c: not_answered(because="cell 2 raised NameError")
                                                     for c in ("b.one", "b.two")}),
               "bo": make_report("bo", error="unreadable")}
    s = summarize(reports)
    checks = {c.id: c for c in s.checks}
    assert (checks["a.one"].passed, checks["a.one"].total, checks["a.one"].unanswered) == (1, 2, 1)
    assert (checks["b.one"].passed, checks["b.one"].total, checks["b.one"].unanswered) == (1, 1, 2)
    assert checks["b.one"].rate == 1.0 and checks["b.one"].statuses == {"passed": 1}
    a, b = s.exercises
    assert (a.answered, a.mean_answered, a.full) == (2, 5.0, 1)
    assert (b.answered, b.mean_answered, b.full) == (1, 10.0, 1)
    assert a.mean == pytest.approx(10 / 4)  # the class mean still counts everyone
    assert [(r.student, r.unanswered) for r in s.rows] == [("blank", ["a", "b"]), ("bo", []), ("dana", []),
                                                           ("half", ["b"])]
    page = render_html(s)
    assert "nothing answered" in student_row(page, "blank") and "not answered: b" in student_row(page, "half")
    row = re.search(r"<tr><td><code>b\.one</code>.*?</tr>", page).group(0)
    assert '<td class="n">1 / 1</td><td class="n">100%</td>' in row and row.endswith('<td class="n">2</td></tr>')


def test_a_kernel_that_died_is_not_graded_with_its_reason() -> None:
    s = summarize(rich_class())
    rows = {r.student: r for r in s.rows}
    assert (rows["kim"].status, rows["kim"].state, rows["kim"].error) == ("error", "died", DIED)
    assert (rows["lee"].status, rows["lee"].state) == ("error", "died")
    assert rows["lee"].error == f"b.two: {CHECK_DIED}"
    assert rows["kim"].score == 10  # the points of what could still be checked are kept
    assert (rows["cole"].status, rows["cole"].state) == ("graded", "graded")  # a cell error is not a death
    assert (s.graded, s.errors, s.died) == (5, 3, 2)  # ana, blank, cole, dana, EVIL | bo, kim, lee
    page = render_html(s)
    for student, reason in (("kim", DIED), ("lee", CHECK_DIED)):
        item = re.search(rf'<li><a class="who" href="[^"]+">{student}</a>.*?</li>', page).group(0)
        assert '<span class="badge died">kernel died</span>' in item and reason in item
    assert '<div class="v">2</div><div class="k">kernel died</div>' in page


def test_students_without_a_report_are_listed_with_the_reason() -> None:
    s = summarize(class_of_four(), {**NOT_GRADED, "dana": "ignored: dana has a report"})
    rows = {r.student: r for r in s.rows}
    assert [r.student for r in s.rows] == sorted(rows)
    assert (rows["zoe"].status, rows["zoe"].state, rows["zoe"].error) == ("error", "missing", NOT_GRADED["zoe"])
    assert (rows["zoe"].percent, rows["zoe"].max_score, rows["zoe"].exercises) == (0, 20, {"a": None, "b": None})
    assert rows["dana"].state == "graded"  # a report wins over a reason given for no report
    assert (s.students, s.errors, s.missing) == (6, 3, 2)
    page = render_html(s)
    assert '<span class="who">zoe</span> <span class="badge missing">no report</span>' in page
    assert NOT_GRADED["zoe"] in page and NOT_GRADED["javascript:alert(4)"] in page
    assert 'href="javascript' not in page and "feedback/zoe" not in page  # no page to open: no link


# ----------------------------------------------------------------------------- the HTML


def test_student_text_is_escaped(tmp_path: Path) -> None:
    reports = {XSS: make_report(XSS, {"a.one"}),
               "mal": make_report("mal", error='<img src=x onerror="alert(2)"> & more')}
    page = write_class_report(reports, tmp_path).read_text(encoding="utf-8")
    rest = without_our_script(page)
    assert "<script" not in rest and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=&quot;alert(2)&quot;&gt; &amp; more" in page
    assert 'href="%3Cscript%3Ealert%281%29%3C%2Fscript%3E.json"' in page  # the file name, percent-encoded


ATTRIBUTE_BREAKOUT = '"><img src=x onerror=alert(1)>'
FIXED_HREFS = {"#not-graded", "#distribution", "#exercises", "#checks", "#wrong", "#students", "#problems",
               "#changes", "#similar", "#sort=-name", "#sort=status", "#sort=score"}


def test_ids_that_break_out_of_attributes_are_escaped_and_links_encoded(tmp_path: Path) -> None:
    reports = {ATTRIBUTE_BREAKOUT: make_report(ATTRIBUTE_BREAKOUT, {"a.one"}),
               "../../etc/passwd#x?y": make_report("../../etc/passwd#x?y"),
               "javascript:alert(1)": make_report("javascript:alert(1)", error=ATTRIBUTE_BREAKOUT)}
    page = write_class_report(reports, tmp_path).read_text(encoding="utf-8")
    assert "<img" not in page and 'onerror=alert(1)>' not in page
    outside = without_section(page, "wrong")  # which repeats the id (tests/test_class_analysis.py)
    assert outside.count("&quot;&gt;&lt;img src=x onerror=alert(1)&gt;") == 3  # the id, the error twice
    hrefs = re.findall(r'href="([^"]*)"', page)
    json = re.findall(r'class="json" href="([^"]*)"', page)
    assert sorted(json) == sorted(["%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E.json",
                                   "..%2F..%2Fetc%2Fpasswd%23x%3Fy.json", "javascript%3Aalert%281%29.json"])
    feedback = re.findall(r'class="who" href="([^"]*)"', page)
    assert set(feedback) == {f"feedback/{student_file_stem(s)}.html" for s in reports}
    for h in hrefs:  # relative, below the page, or a fixed fragment of the page's own
        assert h in FIXED_HREFS or re.fullmatch(r"(feedback/)?[A-Za-z0-9._~%-]+", h), h


def test_links_use_the_given_report_and_feedback_file_names(tmp_path: Path) -> None:
    reports = {"\u0430lice": make_report("\u0430lice"), "bo b": make_report("bo b")}
    page = write_class_report(reports, tmp_path, report_file=lambda s: f"r-{s.encode().hex()}.json",
                              feedback_file=lambda s: f"fb/{s}.html").read_text(encoding="utf-8")
    assert 'href="r-d0b06c696365.json"' in page and 'href="r-626f2062.json"' in page
    assert 'href="fb/%D0%B0lice.html"' in page and 'href="fb/bo%20b.html"' in page
    climbing = write_class_report(reports, tmp_path, feedback_file=lambda s: f"../{s}.html").read_text()
    assert 'href="..%2Fbo%20b.html"' in climbing  # one segment: it cannot leave the folder


def test_each_student_links_to_their_feedback_page_then_json(tmp_path: Path) -> None:
    """As `grade_many` calls it (it passes only report_file); the default feedback page is the batch's."""
    reports = {"ana": make_report("ana"), "Bob Smith": make_report("Bob Smith", error="unreadable")}
    page = write_class_report(reports, tmp_path, report_file=report_file_name).read_text(encoding="utf-8")
    for student in reports:
        stem = student_file_stem(student)
        cell = re.search(rf'<td class="student"><a class="who" href="feedback/{re.escape(stem)}\.html">'
                         rf'{student}</a><a class="json" href="([^"]+)"', page)
        assert cell and unquote(cell.group(1)) == f"{stem}.json", student


LOOKALIKE = "\u0430lice"  # the first letter is CYRILLIC SMALL LETTER A


def test_non_ascii_ids_are_marked_so_look_alikes_can_be_told_apart(tmp_path: Path) -> None:
    page = write_class_report({"alice": make_report("alice"), LOOKALIKE: make_report(LOOKALIKE)},
                              tmp_path).read_text(encoding="utf-8")
    rows = {m.group(1): m.group(0)
            for m in re.finditer(r'<tr data-order[^>]*><td class="student">.*?<a class="json" href="([^"]+)\.json"'
                                 r'.*?</tr>', page)}
    assert sorted(rows) == ["%D0%B0lice", "alice"]
    assert "non-ASCII" not in rows["alice"]
    marked = rows["%D0%B0lice"]
    assert '<span class="badge nonascii"' in marked and ">non-ASCII</span>" in marked
    assert '<code class="ascii">\\u0430lice</code>' in marked  # visible, not only in the tooltip
    assert "U+0430 CYRILLIC SMALL LETTER A" in marked
    assert page.count(">non-ASCII</span>") == 1


def test_bidi_and_invisible_characters_in_ids_and_errors_are_shown(tmp_path: Path) -> None:
    sneaky = "bob\u202egnp.exe"  # would read "bobexe.png"
    hidden = "z\u200bed\u2066"
    reports = {sneaky: make_report(sneaky), hidden: make_report(hidden),
               "eve": make_report("eve", error="bad\x1b[2J\u202e\x00 cell")}
    page = write_class_report(reports, tmp_path).read_text(encoding="utf-8")
    for ch in ("\u202e", "\u200b", "\u2066", "\x1b", "\x00"):
        assert ch not in page, repr(ch)
    assert "bob\\u202egnp.<wbr>exe</a>" in page  # <wbr>: it may wrap after "."
    assert "z\\u200bed\\u2066</a>" in page
    assert "bad\\x1b[2J\\u202e\\x00 cell" in page
    assert "U+202E RIGHT-TO-LEFT OVERRIDE" in page and "U+200B ZERO WIDTH SPACE" in page
    assert page.count('class="badge nonascii"') == 2


def test_cell_problems_are_listed_inert() -> None:
    """Cell, line, exception type and the first line of the message; nothing of it is markup."""
    page = render_html(summarize(rich_class(), NOT_GRADED, GROUPS))
    section = page.split('<h2 id="problems">', 1)[1].split("<h2", 1)[0]
    rows = re.findall(r"<tr class=\"(\w+)\">(.*?)</tr>", section)
    assert [status for status, _ in rows] == ["error", "error", "died"]  # EVIL, cole, kim: by name
    evil, cole, kim = (r for _, r in rows)
    assert "<td>cell 3</td><td class=\"n\">2</td><td><code class=\"ename\">ZeroDivisionError</code></td>" in cole
    assert "division by zero …" in cole and "more" not in cole  # the first line, marked as cut
    assert "<td>cell 5</td><td class=\"n\">—</td><td>killed the kernel</td>" in kim and DIED in kim
    assert "<code class=\"ename\">&lt;b&gt;Err&lt;/b&gt;</code>" in evil
    assert "&lt;script&gt;alert(2)&lt;/script&gt; &lt;a href=&quot;javascript:alert(3)&quot;&gt;" in evil
    assert "\\u202egnp.exe" in evil and "secret second line" not in evil
    assert '<tr><td class="student"></td><td colspan="4" class="reason">and 3 more, not listed in the report' \
        in section  # under the student's listed problems
    rest = without_our_script(page)
    assert "<script" not in rest and "<b>" not in rest and "<a href=\"javascript" not in rest
    assert "\u202e" not in page
    assert not re.search(r'href="\s*javascript', page, re.IGNORECASE)
    for h in re.findall(r'href="([^"]*)"', page):
        assert h in FIXED_HREFS or re.fullmatch(r"(feedback/)?[A-Za-z0-9._~%-]+", h), h


def test_raw_and_final_scores_late_penalty_and_adjustments() -> None:
    page = render_html(summarize(rich_class()))
    ana = student_row(page, "ana")
    assert '<s title="raw score, before the late penalty and adjustments">11</s> 11.9 / 20' in ana
    assert '<td class="n">59.5</td>' in ana  # the percent of the final score
    assert "late 1 d, −1.1" in ana and "adjusted +2" in ana
    changes = page.split('<h2 id="changes">', 1)[1].split("<h2", 1)[0]
    assert changes.count("<tr>") == 1 + 1  # the head and ana
    for shown in ("−1.1", "1 day(s) late", LATE.submitted_at, LATE.due, LATE.rule,
                  "+2: a.two regraded by hand: &lt;b&gt;right&lt;/b&gt; idea", "by prof.x", ADJUSTED.at,
                  '<td class="n">11.9 / 20</td>'):
        assert shown in changes, shown
    dana = student_row(page, "dana")
    assert "<s " not in dana and "20 / 20" in dana  # nothing changed: one score


def test_similar_programs_show_similarity_and_threshold() -> None:
    page = render_html(summarize(rich_class(), groups=GROUPS))
    section = page.split('<h2 id="similar">', 1)[1]
    a, b = re.findall(r"<tr><td><code>(\w)</code></td><td>(.*?)</td><td class=\"n\">(.*?)</td>"
                      r"<td class=\"n\">(.*?)</td></tr>", section)
    assert a[0] == "a" and a[2:] == ("93%", "≥ 90%")
    assert a[1].index(">ana<") < a[1].index(">cole<")  # members sorted
    assert b[2:] == ("identical", "≥ 90%") and "&lt;script&gt;" in b[1]
    assert "similar" not in re.findall(r'href="#(\w+)"', render_html(summarize(rich_class())))  # none: no section


def test_students_table_is_sortable_and_sorted_by_name_without_script() -> None:
    s = summarize(rich_class())
    page = render_html(s)
    table = page.split('id="students-table"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r'<tr data-order="(\d+)" data-score="([\d.-]+)" data-status="(\d)">', table)
    assert [int(i) for i, _, _ in rows] == list(range(len(s.rows)))  # written in name order
    by_status = {r.student: int(st) for r, (_, _, st) in zip(s.rows, rows)}
    assert by_status["bo"] < by_status["kim"] < by_status["cole"] < by_status["dana"]  # error, died, problems, clean
    assert [float(sc) for _, sc, _ in rows] == pytest.approx([r.percent for r in s.rows])
    assert '<th aria-sort="ascending"><a href="#sort=-name" data-sort="name">Student</a></th>' in table
    assert '<a href="#sort=score" data-sort="score">Score</a>' in table
    assert '<a href="#sort=status" data-sort="status">Status</a>' in table
    assert '<span id="sorted-by">Sorted by name.</span>' in page


def test_page_is_responsive() -> None:
    """Each table scrolls in its own box, so the page itself never overflows; narrow screens
    get less padding and smaller cards."""
    page = render_html(summarize(rich_class(), NOT_GRADED, GROUPS))
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    assert page.count("<table") == page.count('<div class="scroll"><table') == 6
    assert "@media (max-width: 640px)" in page and ".scroll { overflow-x: auto;" in page
    assert "td.reason { white-space: nowrap; }" not in page  # what made long reasons overflow


def test_page_is_self_contained_and_deterministic(tmp_path: Path) -> None:
    reports = class_of_four()
    first = write_class_report(reports, tmp_path / "one").read_bytes()
    again = write_class_report(dict(reversed(list(reports.items()))), tmp_path / "two").read_bytes()
    assert first == again
    page = first.decode("utf-8")
    for outside in ("http:", "https:", "//", "src=", "url(", "@import", "<link"):
        assert outside not in page, outside
    assert "<script" not in without_our_script(page)  # one inline script, allowed by its hash alone
    assert f'<meta http-equiv="Content-Security-Policy" content="{csp()}">' in page
    assert "script-src 'sha256-" in csp() and "unsafe-inline" not in csp().split("script-src")[1]
    for student in ("ana", "bo", "cole", "dana"):
        assert f'<a class="who" href="feedback/{student}.html">{student}</a>' in page
        assert f'<a class="json" href="{student}.json"' in page
    assert page.count('<g class="bin"') == BINS
    assert list(tmp_path.joinpath("one").iterdir()) == [tmp_path / "one" / "index.html"]  # no temp file left


def test_title_comes_from_the_spec_when_known(tmp_path: Path) -> None:
    known = write_class_report({"s": make_report("s", assignment="ch2-jit")}, tmp_path / "k").read_text()
    assert "<h1>Chapter 2: Accelerating functions with jax.jit</h1>" in known and "ch2-jit" in known
    unknown = write_class_report({"s": make_report("s")}, tmp_path / "u").read_text()
    assert "<h1>toy</h1>" in unknown


# ----------------------------------------------------------------------------- in a browser

needs_chromium = pytest.mark.skipif(shutil.which("chromium") is None,
                                    reason="chromium is not installed (scripts/install-chromium installs it)")
BROWSER_TIMEOUT_S = 120  # a safety net against a hung browser, not a speed requirement


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "chromium-profile"
    cmd = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", *args]
    # Chromium's TMPDIR folder inside a folder of this run's, removed with it: not left in the host's
    # /tmp (a short path: Chromium's socket there must fit in a Unix socket's 108 bytes)
    with tempfile.TemporaryDirectory(prefix="chromium-") as scratch:
        env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(profile),
               "XDG_CACHE_HOME": str(profile), "TMPDIR": scratch}
        out = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S,
                             env=env, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-2000:]
    return out


class Node:
    """An element of a parsed DOM: tag, attributes, children (nodes and text)."""

    def __init__(self, tag: str, attrs: dict[str, str | None]) -> None:
        self.tag, self.attrs, self.children = tag, attrs, []

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def find(self, tag: str | None = None, **attrs: str) -> list[Node]:
        """Every element below this one with that tag and those attribute values (`cls` is class)."""
        want = {("class" if k == "cls" else k): v for k, v in attrs.items()}
        found = []
        for c in self.children:
            if isinstance(c, Node):
                if (tag is None or c.tag == tag) and all(c.attrs.get(k) == v for k, v in want.items()):
                    found.append(c)
                found += c.find(tag, **attrs)
        return found


class Dom(HTMLParser):
    """The DOM as Chromium serialises it (`--dump-dom`), as a tree of `Node`s."""

    VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
                      "wbr"})

    def __init__(self, markup: str) -> None:
        super().__init__()
        self.root = Node("#document", {})
        self._open = [self.root]
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, dict(attrs))
        self._open[-1].children.append(node)
        if tag not in self.VOID:
            self._open.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._open[-1].children.append(Node(tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._open) - 1, 0, -1):
            if self._open[i].tag == tag:
                del self._open[i:]
                return

    def handle_data(self, data: str) -> None:
        self._open[-1].children.append(data)

    def student_order(self) -> list[str]:
        table = self.root.find("table", id="students-table")[0]
        return [row.find(None, cls="who")[0].text() for row in table.find("tbody")[0].find("tr")]


LONG = "a-very-long-student-id-without-spaces" * 4
LONG_ERROR = "the-notebook-could-not-be-read:" + "x" * 300  # nothing to break a line at


def browser_class() -> dict[str, Report]:
    """The rich class, plus what stretches a layout: an id and an error with no space to wrap at."""
    return rich_class() | {XSS: make_report(XSS, {"b.one"}), LONG: make_report(LONG, error=LONG_ERROR)}


@pytest.fixture
def batch_folder(tmp_path: Path) -> Path:
    """A batch's folder as `grade_many` leaves it: JSON reports, feedback pages, then index.html."""
    out_dir = tmp_path / "reports"
    (out_dir / "feedback").mkdir(parents=True)
    reports = browser_class()
    for student, report in reports.items():
        (out_dir / report_file_name(student)).write_text(report.model_dump_json(), encoding="utf-8")
        (out_dir / "feedback" / f"{student_file_stem(student)}.html").write_text("<p>feedback</p>")
    write_class_report(reports, out_dir, report_file=report_file_name, groups=GROUPS, not_graded=NOT_GRADED)
    return out_dir


def dump(tmp_path: Path, url: str, size: str = "1400,900") -> Dom:
    return Dom(chromium(tmp_path, f"--window-size={size}", "--dump-dom", url).stdout)


@needs_chromium
def test_browser_shows_every_student_reason_cell_error_and_pass_rate(tmp_path: Path, batch_folder: Path) -> None:
    dom = dump(tmp_path, (batch_folder / "index.html").as_uri())
    students = sorted(browser_class() | NOT_GRADED)
    names = dom.student_order()
    assert names == [re.sub("\u202e", "\\\\u202e", s) for s in students]  # by name; the override shown inert
    for row in dom.root.find("table", id="students-table")[0].find("tbody")[0].find("tr"):
        for link in row.find("a"):  # every link opens a file of the batch
            if not (link.attrs["href"] or "").startswith("#"):
                assert (batch_folder / unquote(link.attrs["href"] or "")).is_file(), link.attrs
    reasons = {li.find(None, cls="who")[0].text(): li.text() for li in dom.root.find("ul", cls="plain not-graded")[0].find("li")}
    assert sorted(reasons) == sorted(["bo", "javascript:alert(4)", "kim", "lee", "zoe", LONG])
    assert NOT_GRADED["zoe"] in reasons["zoe"] and DIED in reasons["kim"] and CHECK_DIED in reasons["lee"]
    problems = [[td.text() for td in tr.find("td")] for tr in dom.root.find("table", cls="problems")[0].find("tr")[1:]]
    assert [p[1] for p in problems] == ["cell 2", "and 3 more, not listed in the report", "cell 3", "cell 5"]
    assert problems[2][:4] == ["cole", "cell 3", "2", "ZeroDivisionError"]
    assert problems[0][3] == "<b>Err</b>" and "<script>alert(2)</script>" in problems[0][4]  # text, not markup
    assert problems[0][0].startswith(XSS + "\\u202eevil") and problems[3][3] == "killed the kernel"
    assert len(dom.root.find("script")) == 1 and not dom.root.find("b") and not dom.root.find("img")
    checks = {tr.find("td")[0].text(): [td.text() for td in tr.find("td")]
              for tr in dom.root.find("table", cls="checks")[0].find("tbody")[0].find("tr")}
    assert checks["a.one"][2:4] == ["4 / 7", "57.1%"] and checks["a.one"][-1] == "1"  # blank left out
    assert sum(int(g.attrs["data-count"] or -1) for g in dom.root.find("g", cls="bin")) == len(students)


@needs_chromium
def test_browser_sorts_by_the_url_and_the_headings(tmp_path: Path, batch_folder: Path) -> None:
    page = (batch_folder / "index.html").as_uri()
    rows = {r.student: r for r in summarize(browser_class(), NOT_GRADED).rows}
    names = {s: re.sub("\u202e", "\\\\u202e", s) for s in rows}
    shown = {v: k for k, v in names.items()}

    by_score = dump(tmp_path, page + "#sort=score")
    lowest_first = sorted(rows, key=lambda s: (rows[s].percent, s))
    assert by_score.student_order() == [names[s] for s in lowest_first]
    assert by_score.root.find("table", id="students-table")[0].attrs["data-sorted"] == "score"
    assert by_score.root.find("span", id="sorted-by")[0].text() == "Sorted by final score, lowest first."
    score_heading = by_score.root.find("a", **{"data-sort": "score"})[0]
    assert score_heading.attrs["href"] == "#sort=-score"  # a second click reverses

    highest_first = dump(tmp_path, page + "?sort=-score", "375,800").student_order()
    assert highest_first[0] == "dana" and highest_first[-1] in {"bo", "zoe", "blank", "javascript:alert(4)"}
    assert [rows[shown[s]].percent for s in highest_first] == sorted((r.percent for r in rows.values()), reverse=True)

    by_status = dump(tmp_path, page + "#sort=status").student_order()
    # no report, in error, kernel died (with a cell problem first), cell problems, clean; then by name
    assert by_status == ["javascript:alert(4)", "zoe", LONG, "bo", "kim", "lee", names[EVIL], "cole",
                         XSS, "ana", "blank", "dana"]


@needs_chromium
def test_browser_runs_our_script_only(tmp_path: Path, batch_folder: Path) -> None:
    """Defence in depth: had a student's text become a script, the page's policy would not run it."""
    page = batch_folder / "index.html"
    tampered = page.with_name("tampered.html")
    tampered.write_text(page.read_text(encoding="utf-8").replace(
        "</main>", '</main><script>document.title = "INJECTED"</script>'), encoding="utf-8")
    dom = dump(tmp_path, tampered.as_uri() + "#sort=score")
    assert dom.root.find("title")[0].text() == "Class report · toy"  # the injected script did not run
    assert dom.root.find("table", id="students-table")[0].attrs["data-sorted"] == "score"  # ours did


def _probe(page: Path, width: int, height: int) -> Path:
    """A page that shows this one, untouched (its policy and script included), in a frame of that
    size, and records how far its content overflows the frame. Why a frame: headless Chromium
    lays out --dump-dom at a window at least 500 px wide, whatever --window-size says."""
    probe = page.with_name("probe.html")
    frame = html.escape(page.read_text(encoding="utf-8"), quote=True)
    probe.write_text(f'<!DOCTYPE html><html><body style="margin:0"><iframe id="f" style="border:0" width="{width}" '
                     f'height="{height}" srcdoc="{frame}"></iframe><script>window.onload = function () {{'
                     "var w = document.getElementById('f').contentWindow, d = w.document.documentElement;"
                     "document.body.setAttribute('data-width', String(w.innerWidth));"
                     "document.body.setAttribute('data-overflow', String(d.scrollWidth - w.innerWidth));"
                     "document.body.setAttribute('data-sorted', w.document.getElementById('students-table')"
                     ".getAttribute('data-sorted'));};</script></body></html>", encoding="utf-8")
    return probe


@needs_chromium
@pytest.mark.parametrize("width,height", [(1400, 900), (375, 800)])
def test_browser_screenshot_fits_the_width(tmp_path: Path, batch_folder: Path, width: int, height: int) -> None:
    """At 1400 px and on a phone, the page is no wider than the window (tables scroll in their box).
    The screenshots stay in the test's own folder (pytest keeps the last runs' under its basetemp):
    `make test` writes nothing else to the host's /tmp (they were copied to /tmp/w, left behind)."""
    shot = tmp_path / f"classpage-{width}.png"
    chromium(tmp_path, f"--screenshot={shot}", f"--window-size={width},{height}", "--hide-scrollbars",
             (batch_folder / "index.html").as_uri())
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(data[16:20]), int.from_bytes(data[20:24])) == (width, height)
    assert len(data) > 20_000  # a blank page of that size compresses to a few kB
    body = dump(tmp_path, _probe(batch_folder / "index.html", width, height).as_uri()).root.find("body")[0]
    assert body.attrs["data-width"] == str(width)
    assert body.attrs["data-sorted"] == "name"  # the page's own script ran in the frame
    assert int(body.attrs["data-overflow"] or 1) <= 0, "the page is wider than the window"


# ----------------------------------------------------------------------------- on a phone (phone-view)


def test_canvas_s_late_mark_is_in_the_notes_column() -> None:
    """A file Canvas's download marks LATE: its row's notes say so, beside what the late policy
    took off (nothing here: no late.toml), so the instructor sees it without opening the report."""
    from grader.report import LmsSubmission

    marked = LmsSubmission(lms="canvas", user_id="10002", name="garcíajosé", submission_id="5551",
                           file_name="ch2-jit.ipynb", late=True)
    on_time = marked.model_copy(update={"late": False, "user_id": "10001", "name": "doealice"})
    page = render_html(summarize(class_of_four() | {
        "garcíajosé_10002": make_report("garcíajosé_10002", {"a.one"}, lms=marked),
        "doealice_10001": make_report("doealice_10001", {"a.one"}, lms=on_time)}))
    notes = {name.replace("<wbr>", ""): said for name, said in re.findall(
        r'<td class="student"><a class="who" href="[^"]+">(.*?)</a>.*?<td class="notes">(.*?)</td>', page)}
    assert "marked late in Canvas" in notes["garcíajosé_10002"]
    assert "late" not in notes["doealice_10001"] and "late" not in notes["dana"]


PHONE_LAYOUT = """JSON.stringify((function () {
  var width = window.innerWidth, split = [], off = [];
  document.querySelectorAll('.who').forEach(function (who) {
    var chars = [], walker = document.createTreeWalker(who, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      var node = walker.currentNode;
      for (var i = 0; i < node.length; i++) {
        var range = document.createRange(); range.setStart(node, i); range.setEnd(node, i + 1);
        var box = range.getClientRects()[0];
        if (box) { chars.push([node.data[i], box.top]); }
      }
    }
    for (var j = 1; j < chars.length; j++) {
      if (/[0-9]/.test(chars[j - 1][0]) && /[0-9]/.test(chars[j][0]) && chars[j][1] > chars[j - 1][1] + 2) {
        split.push(who.textContent);
      }
    }
  });
  document.querySelectorAll('svg.histogram .bin rect, svg.histogram .bin text').forEach(function (el) {
    var box = el.getBoundingClientRect();
    if (box.right > width + 0.5 || box.left < -0.5) {
      off.push(el.closest('.bin').getAttribute('data-count'));
    }
  });
  return {split: split, off: off, bins: document.querySelectorAll('svg.histogram .bin').length};
}()))"""


@needs_chromium
def test_on_a_phone_ids_wrap_between_their_parts_and_the_histogram_fits(tmp_path: Path) -> None:
    """At 375 px (scripts/phone-view): no student id breaks inside a number (they wrap after `_`,
    `@`, `.`, `-`), and every bar of the histogram, with its labels, is on the screen."""
    import json
    import subprocess
    import sys

    ids = ["student_20230001_long@uni.example.edu", "garcíajosé_10002", "doealice_10001",
           "s7654321_and_a_long_tail_20230005", "1234567890123_4567"]
    reports = class_of_four() | {s: make_report(s, {"a.one"}) for s in ids}
    page = write_class_report(reports, tmp_path / "class", not_graded={"9876543210_98765": "no file"})
    script = Path(__file__).resolve().parent.parent / "scripts" / "phone-view"
    done = subprocess.run([sys.executable, str(script), str(page), str(tmp_path / "class-375.png"),
                           "--eval", PHONE_LAYOUT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert seen["inner_width"] == 375 and seen["scroll_width"] <= 375, seen
    layout = json.loads(seen["eval"])
    assert layout["bins"] == BINS
    # no id broken mid-number; no bar, count or band off the screen
    assert (sorted(set(layout["split"])), layout["off"]) == ([], []), layout
