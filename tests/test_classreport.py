"""The class report page: its numbers (pure), its HTML (escaped, self-contained, deterministic),
and what a real browser shows of it (headless Chromium, skipped when it is not installed)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

from grader.classreport import BINS, bin_index, render_html, summarize, write_class_report
from grader.report import CheckResult, Environment, ExerciseResult, Report, SubmissionRef
from grader.sandbox import Isolation

# a small assignment: exercise -> check id -> points
POINTS = {"a": {"a.one": 6.0, "a.two": 4.0}, "b": {"b.one": 5.0, "b.two": 5.0}}
XSS = "<script>alert(1)</script>"


def make_report(student: str, passed: set[str] = frozenset(), *, statuses: dict[str, str] | None = None,
                error: str | None = None, exercises: bool = True, assignment: str = "toy") -> Report:
    """A report of the toy assignment: checks in `passed` get full points, the others fail
    (or take their status from `statuses`); `error` makes a report in error (every check skipped)."""
    statuses = statuses or {}
    exs = []
    for ex_id, checks in POINTS.items() if exercises else ():
        results = []
        for cid, pts in checks.items():
            status = "skipped" if error else "passed" if cid in passed else statuses.get(cid, "failed")
            results.append(CheckResult(id=cid, title=f"title of {cid}", status=status,
                                       score=pts if status == "passed" else 0.0, max_score=pts,
                                       hidden=cid.endswith("two"),
                                       message=None if status == "passed" else "no"))
        exs.append(ExerciseResult(id=ex_id, title=f"Exercise {ex_id.upper()}", checks=results,
                                  score=sum(c.score for c in results), max_score=sum(checks.values())))
    return Report(assignment=assignment, student=student,
                  submission=SubmissionRef(path=f"{student}.ipynb", sha256=None, kind=None),
                  status="error" if error else "graded", error=error,
                  score=sum(e.score for e in exs), max_score=sum(e.max_score for e in exs), exercises=exs,
                  seed=1, duration_s=0.5, environment=Environment(grader="0", python="3.12", jax=None),
                  isolation=Isolation(sandboxed=False, layers=[]))


def class_of_four() -> dict[str, Report]:
    return {
        "dana": make_report("dana", {"a.one", "a.two", "b.one", "b.two"}),  # 20 / 20
        "ana": make_report("ana", {"a.one", "b.one"}, statuses={"a.two": "timeout"}),  # 11 / 20
        "cole": make_report("cole", {"a.two"}, statuses={"b.two": "error"}),  # 4 / 20
        "bo": make_report("bo", error="the notebook is not valid JSON"),  # 0 / 20, in error
    }


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
    assert (s.assignments, s.students, s.graded, s.errors) == (["toy"], 4, 3, 1)
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


# ----------------------------------------------------------------------------- the HTML


def test_student_text_is_escaped(tmp_path: Path) -> None:
    reports = {XSS: make_report(XSS, {"a.one"}),
               "mal": make_report("mal", error='<img src=x onerror="alert(2)"> & more')}
    page = write_class_report(reports, tmp_path).read_text(encoding="utf-8")
    assert "<script" not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=&quot;alert(2)&quot;&gt; &amp; more" in page
    assert 'href="%3Cscript%3Ealert%281%29%3C%2Fscript%3E.json"' in page  # the file name, percent-encoded


ATTRIBUTE_BREAKOUT = '"><img src=x onerror=alert(1)>'


def test_ids_that_break_out_of_attributes_are_escaped_and_links_encoded(tmp_path: Path) -> None:
    reports = {ATTRIBUTE_BREAKOUT: make_report(ATTRIBUTE_BREAKOUT, {"a.one"}),
               "../../etc/passwd#x?y": make_report("../../etc/passwd#x?y"),
               "javascript:alert(1)": make_report("javascript:alert(1)", error=ATTRIBUTE_BREAKOUT)}
    page = write_class_report(reports, tmp_path).read_text(encoding="utf-8")
    assert "<img" not in page and 'onerror=alert(1)>' not in page
    assert page.count("&quot;&gt;&lt;img src=x onerror=alert(1)&gt;") == 2  # the id and the error
    hrefs = re.findall(r'href="([^"]*)"', page)
    assert sorted(hrefs) == sorted(["%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E.json",
                                    "..%2F..%2Fetc%2Fpasswd%23x%3Fy.json", "javascript%3Aalert%281%29.json"])
    assert all(re.fullmatch(r"[A-Za-z0-9._~%-]+", h) for h in hrefs)  # relative, one path segment


def test_links_use_the_given_report_file_names(tmp_path: Path) -> None:
    reports = {"\u0430lice": make_report("\u0430lice"), "bo b": make_report("bo b")}
    page = write_class_report(reports, tmp_path,
                              report_file=lambda s: f"r-{s.encode().hex()}.json").read_text(encoding="utf-8")
    assert 'href="r-d0b06c696365.json"' in page and 'href="r-626f2062.json"' in page


LOOKALIKE = "\u0430lice"  # the first letter is CYRILLIC SMALL LETTER A


def test_non_ascii_ids_are_marked_so_look_alikes_can_be_told_apart(tmp_path: Path) -> None:
    page = write_class_report({"alice": make_report("alice"), LOOKALIKE: make_report(LOOKALIKE)},
                              tmp_path).read_text(encoding="utf-8")
    rows = {m.group(1): m.group(0) for m in re.finditer(r'<tr><td><a href="([^"]+)\.json">.*?</tr>', page)}
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
    assert "bob\\u202egnp.exe</a>" in page and "z\\u200bed\\u2066</a>" in page
    assert "bad\\x1b[2J\\u202e\\x00 cell" in page
    assert "U+202E RIGHT-TO-LEFT OVERRIDE" in page and "U+200B ZERO WIDTH SPACE" in page
    assert page.count('class="badge nonascii"') == 2


def test_page_is_self_contained_and_deterministic(tmp_path: Path) -> None:
    reports = class_of_four()
    first = write_class_report(reports, tmp_path / "one").read_bytes()
    again = write_class_report(dict(reversed(list(reports.items()))), tmp_path / "two").read_bytes()
    assert first == again
    page = first.decode("utf-8")
    for outside in ("http:", "https:", "//", "src=", "url(", "@import", "<link", "<script"):
        assert outside not in page, outside
    for student in ("ana", "bo", "cole", "dana"):
        assert f'<a href="{student}.json">{student}</a>' in page
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
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(profile),
           "XDG_CACHE_HOME": str(profile)}
    out = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S, env=env,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-2000:]
    return out


class PageView(HTMLParser):
    """What the rendered DOM shows: links, histogram bins, the checks table's rows as text."""

    def __init__(self) -> None:
        super().__init__()
        self.links: dict[str, str] = {}
        self.bins: list[int] = []
        self.check_rows: list[list[str]] = []
        self._href: str | None = None
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "a":
            self._href, self._text = a.get("href"), []
        elif tag == "g" and a.get("class") == "bin":
            self.bins.append(int(a["data-count"] or -1))
        elif tag == "table":
            self._table = a.get("class")
        elif tag == "tr" and self._table == "checks":
            self._cell = []
        elif tag == "td" and self._cell is not None:
            self._text = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links["".join(self._text)] = self._href
            self._href = None
        elif tag == "td" and self._cell is not None:
            self._cell.append("".join(self._text).strip())
        elif tag == "tr" and self._cell:
            self.check_rows.append(self._cell)
            self._cell = None

    def handle_data(self, data: str) -> None:
        self._text.append(data)


@needs_chromium
def test_browser_shows_links_histogram_and_pass_rates(tmp_path: Path) -> None:
    reports = class_of_four() | {XSS: make_report(XSS, {"b.one"})}
    out_dir = tmp_path / "reports"
    out_dir.mkdir()
    for student, report in reports.items():
        if "/" not in student:
            (out_dir / f"{student}.json").write_text(report.model_dump_json(), encoding="utf-8")
    page = write_class_report(reports, out_dir)

    dom = chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    view = PageView()
    view.feed(dom)

    assert sorted(view.links) == sorted(reports)  # the XSS id is shown as text, not run
    assert view.links[XSS] == "%3Cscript%3Ealert%281%29%3C%2Fscript%3E.json"
    for student, href in view.links.items():
        if "/" not in student:  # every link opens that student's report
            assert (out_dir / unquote(href)).is_file(), href
    assert len(view.bins) == BINS and sum(view.bins) == len(reports)
    assert view.bins[0] == 1 and view.bins[5] == 1  # bo (in error) and ana
    assert [row[0] for row in view.check_rows] == ["b.two", "a.one", "a.two", "b.one"]
    assert view.check_rows[0][2:4] == ["1 / 4", "25%"]
    assert view.check_rows[-1][2:4] == ["3 / 4", "75%"]
    assert "No submissions" not in dom


@needs_chromium
def test_browser_screenshot(tmp_path: Path) -> None:
    order = ["a.one", "b.one", "a.two", "b.two"]
    reports = {f"student{i:02d}": make_report(f"student{i:02d}", set(order[: i % 5])) for i in range(12)}
    page = write_class_report(reports, tmp_path / "out")
    shot = tmp_path / "shot.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,1600", page.as_uri())
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(data[16:20]), int.from_bytes(data[20:24])) == (1200, 1600)
    assert len(data) > 20_000  # a blank page of that size compresses to a few kB
