"""The feedback page to hand back: the student's cells beside each exercise's verdicts, nothing
hidden, nothing that runs; rendered in headless Chromium."""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from warm_grading import grade_warm

from grader import GradeOptions
from grader.views.page import page, write_page
from grader.report import CheckResult, Environment, ExerciseResult, Isolation, Report, SubmissionRef
from grader.submission import SourceCell, read_submission


class Dom(HTMLParser):
    """Sections by exercise: their code cells' text and their checks' (class, text)."""

    def __init__(self) -> None:
        super().__init__()
        self.code: dict[str, list[str]] = {}
        self.checks: dict[str, tuple[str, str]] = {}
        self.scripts = 0
        self._exercise: str | None = None
        self._pre: list[str] | None = None
        self._check: tuple[str, str, list[str]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section":
            self._exercise = a.get("data-exercise") or ""
        elif tag == "pre":
            self._pre = []
        elif tag == "li" and "data-check" in a:
            self._check = (a["data-check"] or "", a.get("class") or "", [])
        elif tag == "script":
            self.scripts += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "pre" and self._pre is not None:
            self.code.setdefault(self._exercise or "", []).append("".join(self._pre))
            self._pre = None
        elif tag == "li" and self._check is not None:
            check_id, status, parts = self._check
            self.checks[check_id] = (status, "".join(parts))
            self._check = None

    def handle_data(self, data: str) -> None:
        if self._pre is not None:
            self._pre.append(data)
        if self._check is not None:
            self._check[2].append(data)


def test_student_text_is_escaped_and_nothing_runs() -> None:
    check = CheckResult(id="a.one", title="<b>one</b>", status="failed", score=0, max_score=1, hidden=True,
                        message="wrong <img src=x onerror=alert(1)>", counterexample="f(123.25) expected 9.5")
    report = Report(assignment="ch2-jit", submission=SubmissionRef(path="s.py", sha256=None, kind="module"),
                    student="<script>alert(1)</script>", status="graded", score=0, max_score=1,
                    exercises=[ExerciseResult(id="a", title="A", score=0, max_score=1, checks=[check])], seed=1,
                    duration_s=1.0, environment=Environment(grader="0", python="3", jax=None),
                    isolation=Isolation(sandboxed=True, layers=[]))
    text = page(report, [SourceCell(index=0, source="x = '</pre><script>alert(2)</script>'")])
    assert "<script>" not in text and "<img" not in text and "&lt;script&gt;" in text
    assert "123.25" not in text and "9.5" not in text  # the instructor's counterexample


needs_chromium = pytest.mark.skipif(shutil.which("chromium") is None,
                                    reason="chromium is not installed (scripts/install-chromium installs it)")


@pytest.mark.kernel
@needs_chromium
def test_the_page_in_a_browser_shows_cells_beside_verdicts(submission_from_reference, tmp_path: Path) -> None:
    from tests.test_classreport import chromium

    path = submission_from_reference("setup", "tax", "tax_vectorized_one_wrong_rate.py", "newton", "detective",
                                     "training")
    report = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=3))
    html_file = write_page(report, read_submission(path).cells, tmp_path / "feedback.html")
    dom = Dom()
    dom.feed(chromium(tmp_path, "--dump-dom", html_file.as_uri()).stdout)
    assert dom.scripts == 0
    assert any("def tax_vectorized" in cell and "0.25" in cell for cell in dom.code["tax"])  # their own code
    assert any("def newton_sqrt" in cell for cell in dom.code["newton"])
    status, text = dom.checks["tax.vectorized_visible"]
    assert status == "failed" and "expected 6111.0" in text and "the exercise asks" in text
    hidden_status, hidden_text = dom.checks["tax.vectorized_hidden"]
    counterexample = next(c.counterexample for e in report.exercises for c in e.checks
                          if c.id == "tax.vectorized_hidden")
    assert hidden_status == "failed" and counterexample
    secret = set(re.findall(r"\d+\.\d+", counterexample)) - set(re.findall(r"\d+\.\d+", text))
    assert secret and not secret & set(re.findall(r"\d+\.\d+", hidden_text))
    assert dom.checks["newton.visible"][0] == "passed"  # passed checks are shown too
    shot = tmp_path / "feedback.png"
    chromium(tmp_path, "--window-size=1280,1600", f"--screenshot={shot}", html_file.as_uri())
    assert shot.stat().st_size > 10_000


def _on_a_phone(page_file: Path, shot: Path) -> dict[str, float]:
    """The page in headless Chromium emulating a 375 px phone (scripts/phone-view)."""
    import json
    import subprocess
    import sys

    script = Path(__file__).resolve().parent.parent / "scripts" / "phone-view"
    done = subprocess.run([sys.executable, str(script), str(page_file), str(shot), "--height", "812"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.kernel
@needs_chromium
def test_both_pages_read_on_a_phone(tmp_path: Path) -> None:
    """A phone lays out a page without a viewport tag at 980 px and shows it at 0.4 scale: each
    page says `width=device-width`, and at 375 px nothing is wider than the screen (long
    messages, code and names wrap or scroll inside their own box)."""
    from grader.outputs.classreport import write_class_report
    from tests.test_classreport import class_of_four

    long = "the iteration count must follow the stopping rule " * 6
    check = CheckResult(id="newton.iterations", title="newton_sqrt's iteration count follows the stopping rule",
                        status="failed", score=0, max_score=3, hidden=False, message=long,
                        requirements=["newton_sqrt(a, tol) returns (root, number_of_iterations)"])
    report = Report(assignment="ch2-jit", submission=SubmissionRef(path="s.py", sha256=None, kind="module"),
                    student="a_student_with_a_very_long_name_indeed@example.org", status="graded", score=0,
                    max_score=3, exercises=[ExerciseResult(id="newton", title="Exercise 2: Newton's square root "
                                                           "with lax.while_loop", score=0, max_score=3,
                                                           checks=[check])],
                    seed=1, duration_s=1.0, environment=Environment(grader="0", python="3", jax=None),
                    isolation=Isolation(sandboxed=True, layers=[]))
    code = "@jax.jit\ndef newton_sqrt(a, tol):\n    return lax.while_loop(" + "cond_fun, " * 20 + "state)\n"
    feedback = write_page(report, [SourceCell(index=0, source=code)], tmp_path / "feedback.html")
    class_page = write_class_report(class_of_four(), tmp_path / "class")
    for name, file in (("feedback", feedback), ("class", class_page)):
        seen = _on_a_phone(file, tmp_path / f"{name}-375.png")
        assert seen["inner_width"] == 375, (name, seen)  # 980 without the viewport tag
        assert seen["scroll_width"] <= 375, (name, seen)
        assert (tmp_path / f"{name}-375.png").stat().st_size > 5_000


def test_the_final_score_leads_the_page_and_the_graded_one_is_explained_below() -> None:
    """A late penalty took 10 of the checks' 88 points: the title says 78 / 100, the grade the
    student gets, and the box under it says how 88 became 78."""
    from grader.report import LatePenalty

    check = CheckResult(id="a.one", title="one", status="passed", score=88, max_score=100, hidden=False,
                        message=None)
    late = LatePenalty(submitted_at="2026-12-09T10:00:00+00:00", source="times_csv",
                       due="2026-12-08T23:59:00+00:00", days_late=1, points=10,
                       rule="10% of the points per day late")
    report = Report(assignment="ch2-jit", submission=SubmissionRef(path="s.py", sha256=None, kind="module"),
                    student="alice", status="graded", score=88, max_score=100, late=late, final_score=78,
                    exercises=[ExerciseResult(id="a", title="A", score=88, max_score=100, checks=[check])],
                    seed=1,
                    duration_s=1.0, environment=Environment(grader="0", python="3", jax=None),
                    isolation=Isolation(sandboxed=True, layers=[]))
    text = page(report, [])
    title = re.search(r"<h1>.*?</h1>", text)
    assert title is not None and "78 / 100" in title.group(0) and "88" not in title.group(0)
    scores = re.findall(r"\b(78|88) / 100\b", text)
    assert scores[0] == "78"  # the first score on the page is the final one
    box = text[text.index("<section class='final'>"):]
    assert "the checks gave <span data-score='graded'>88</span>" in box and "−10" in box


def _stage_report(later: bool) -> Report:
    """A report of two exercises: one check passed and a hidden one, judged (`later` False) or left
    to the hand-in as the self-check leaves it; the second exercise's check likewise."""
    def left(cid: str, title: str, points: float) -> CheckResult:
        if later:
            return CheckResult(id=cid, title=title, status="skipped", score=0, max_score=points, hidden=True,
                               message="recorded; checked when you hand in", reason="on_hand_in")
        return CheckResult(id=cid, title=title, status="passed", score=points, max_score=points, hidden=True,
                           message=None)

    seen = CheckResult(id="a.one", title="f on the notebook's values", status="passed", score=3, max_score=3,
                       hidden=False, message=None)
    a = ExerciseResult(id="a", title="A", score=3 if later else 7, max_score=7,
                       checks=[seen, left("a.two", "f on hidden values", 4)])
    b = ExerciseResult(id="b", title="B", score=0 if later else 1, max_score=1, checks=[left("b.one", "call ①", 1)])
    return Report(assignment="ch2-jit", submission=SubmissionRef(path="s.ipynb", sha256=None, kind="notebook"),
                  student=None, status="graded", score=a.score + b.score, max_score=8, exercises=[a, b], seed=1,
                  duration_s=1.0, environment=Environment(grader="0", python="3", jax=None),
                  isolation=Isolation(sandboxed=False, layers=[]))


def test_the_self_check_says_what_it_checked_never_a_total_that_reads_as_the_grade() -> None:
    """Before: the pack's `grade` printed "Total 3 / 8" and its page "0/4: recorded; checked when you
    hand in" for each hidden check. After, on the terminal and the page alike: "3 of the 3 points
    checked here", and each check left to the hand-in with the points it is worth."""
    from grader.views.terminal import summary, summary_exercise

    report = _stage_report(later=True)
    terminal = summary(report)
    assert "Total 3 of the 3 points checked here" in terminal and "/ 8" not in terminal, terminal
    assert "   3 of the 3 points checked here  (1 of 1 checks)" in terminal
    assert "  B     checked when you hand in\n" in terminal
    assert "1 checked when you hand in (4 pts): f on hidden values" in terminal
    assert "1 checked when you hand in (1 pt): call ①" in terminal  # before: "(1 pts)"
    assert summary_exercise(report.exercises[0]).splitlines()[0] == "⏳ A: 3 of the 3 points checked here"
    shown = page(report, [])
    assert "f on hidden values</b> (hidden inputs), 4 pts: checked when you hand in" in shown
    assert "0/4" not in shown and "recorded" not in shown
    assert ">3 of the 3 points checked here</span>" in shown and ">checked when you hand in</span>" in shown
    assert "3 of the 3 points checked here. 5 of the 8 points are checked when you hand in" in shown
    graded = _stage_report(later=False)  # the instructor's `grade`: every check judged, the total is the grade
    assert "Total 8 / 8" in summary(graded) and "checked here" not in summary(graded) + page(graded, [])


def test_the_page_marks_checks_as_the_terminal_does() -> None:
    """Before: a timed-out check (and one that raised) was ✗ on the page, ⏱ (!) on the terminal."""
    from grader.views.terminal import LEGEND

    timed_out = CheckResult(id="a.one", title="one", status="timeout", score=0, max_score=1, hidden=False,
                            message="stopped after 30 s, `f` still running: does a loop never end?")
    report = _stage_report(later=False).model_copy(update={"exercises": [ExerciseResult(
        id="a", title="A", score=0, max_score=1, checks=[timed_out])]})
    shown = page(report, [])
    assert '.timeout::before{content:"⏱ "' in shown and '.error::before{content:"! "' in shown
    assert "<li class='timeout' data-check='a.one'>" in shown and LEGEND in shown
