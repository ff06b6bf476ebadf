"""The class report: one self-contained HTML page over a batch's reports (`OUT/index.html`).

Why: after `grade submissions/ -o OUT`, an instructor has one JSON file per student and wants to
see the class at a glance: how scores are spread, which exercises and checks the class
struggles with, and who to look at. The page is a single file with inline CSS and inline SVG,
no JavaScript and nothing fetched from the network, so it opens anywhere (a laptop, an LMS,
an archive) and is safe with student-supplied text: every string is HTML-escaped, and made
inert first (`grader.inert`: control, bidi and invisible characters shown as `\u202e` and the
like). A student id with non-ASCII characters is marked "non-ASCII", with its ASCII-escaped form
shown and its code points in a tooltip, so that `alice` and a Cyrillic `аlice` can be told apart.
Output is deterministic (no timestamps, everything sorted), so the same reports give the same bytes.

The numbers (`summarize`) are pure and separate from the rendering (`render_html`).
"""

from __future__ import annotations

import html
from collections import Counter
from pathlib import Path
from statistics import median
from typing import Callable
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, computed_field

from grader import inert
from grader.report import Report

BINS = 10  # histogram bins of percent: [0, 10), [10, 20), ... [90, 100]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Bin(_Model):
    lo: float
    hi: float
    count: int
    errors: int  # how many of `count` are reports in error (scored 0)


class ExerciseStats(_Model):
    id: str
    title: str
    mean: float  # over every student; a report in error or without the exercise counts 0
    max_score: float


class CheckStats(_Model):
    id: str
    title: str
    exercise: str
    hidden: bool
    passed: int
    total: int  # graded reports that have this check (reports in error ran no check)
    statuses: dict[str, int]  # status -> count, among those `total`

    @computed_field
    @property
    def rate(self) -> float:
        return self.passed / self.total if self.total else 0.0


class StudentRow(_Model):
    student: str
    status: str
    error: str | None
    score: float
    max_score: float
    percent: float
    exercises: dict[str, float | None]  # exercise id -> score; None when the report lacks it


class ClassSummary(_Model):
    assignments: list[str]  # sorted; the "unknown" of reports in error is left out when others exist
    students: int
    graded: int
    errors: int
    mean_percent: float | None
    median_percent: float | None
    histogram: list[Bin]
    exercises: list[ExerciseStats]
    checks: list[CheckStats]  # hardest first: lowest pass rate, then id
    rows: list[StudentRow]  # sorted by student id


def percent(score: float, max_score: float) -> float:
    return round(100.0 * score / max_score, 9) if max_score > 0 else 0.0


def bin_index(pct: float) -> int:
    """The histogram bin of a percent; a bin holds its lower edge, and the last bin also 100."""
    return min(max(int(pct // (100 / BINS)), 0), BINS - 1)


def summarize(reports: dict[str, Report]) -> ClassSummary:
    students = sorted(reports)
    graded = [reports[s] for s in students if reports[s].status == "graded"]

    ids = sorted({r.assignment for r in reports.values()})
    if len(ids) > 1 and "unknown" in ids:
        ids.remove("unknown")

    # exercises in the order of the reports (the spec's), first student first
    ex_title: dict[str, str] = {}
    ex_max: dict[str, float] = {}
    for s in students:
        for ex in reports[s].exercises:
            ex_title.setdefault(ex.id, ex.title)
            ex_max[ex.id] = max(ex_max.get(ex.id, 0.0), ex.max_score)

    rows = []
    for s in students:
        r = reports[s]
        by_ex = {ex.id: ex.score for ex in r.exercises}
        rows.append(StudentRow(student=s, status=r.status, error=r.error, score=r.score,
                               max_score=r.max_score, percent=percent(r.score, r.max_score),
                               exercises={e: by_ex.get(e) for e in ex_title}))

    counts = [0] * BINS
    errs = [0] * BINS
    for row in rows:
        i = bin_index(row.percent)
        counts[i] += 1
        errs[i] += row.status == "error"
    width = 100 / BINS
    histogram = [Bin(lo=i * width, hi=(i + 1) * width, count=counts[i], errors=errs[i]) for i in range(BINS)]

    exercises = [ExerciseStats(id=e, title=ex_title[e], max_score=ex_max[e],
                               mean=sum(row.exercises[e] or 0.0 for row in rows) / len(rows))
                 for e in ex_title]

    checks: dict[str, dict] = {}
    for r in graded:
        for ex in r.exercises:
            for c in ex.checks:
                entry = checks.setdefault(c.id, {"id": c.id, "title": c.title, "exercise": ex.id,
                                                 "hidden": c.hidden, "passed": 0, "total": 0,
                                                 "statuses": Counter()})
                entry["total"] += 1
                entry["passed"] += c.status == "passed"
                entry["statuses"][c.status] += 1
    check_stats = [CheckStats(**{**v, "statuses": dict(sorted(v["statuses"].items()))})
                   for v in checks.values()]
    check_stats.sort(key=lambda c: (c.rate, c.id))

    pcts = [row.percent for row in rows]
    return ClassSummary(
        assignments=ids, students=len(rows), graded=len(graded), errors=len(rows) - len(graded),
        mean_percent=sum(pcts) / len(pcts) if pcts else None,
        median_percent=median(pcts) if pcts else None,
        histogram=histogram, exercises=exercises, checks=check_stats, rows=rows,
    )


# ---------------------------------------------------------------------------- rendering


def _e(text: object) -> str:
    """Text for the page (an element's content or a quoted attribute): inert, then HTML-escaped."""
    return html.escape(inert.text(text), quote=True)


def report_file(student: str) -> str:
    """The file name of a student's JSON report, beside index.html (as grade_many writes it)."""
    return f"{student}.json"


def _href(file_name: str) -> str:
    """A relative link to a file beside the page: every character but unreserved ones
    percent-encoded (so `/`, `?`, `#`, `:` or quotes in a name cannot make it another URL);
    the bytes of a name Python decoded with surrogateescape are encoded back as they were."""
    try:
        return quote(file_name, safe="", errors="surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate no file system name decodes to
        return quote(file_name, safe="", errors="backslashreplace")


def _student_cell(student: str, href: str) -> str:
    """The student's link; a name with non-ASCII characters is marked, its ASCII form shown."""
    link = f'<a href="{_e(href)}">{html.escape(inert.terminal(student), quote=True)}</a>'
    if student.isascii() and student.isprintable():
        return link
    ascii_form = inert.ascii_form(student)
    points = inert.code_points(student)
    listed = ", ".join(points[:20]) + (", …" if len(points) > 20 else "")
    tip = f"ASCII form: {ascii_form}; {listed}"
    mark = "non-ASCII" if not student.isascii() else "unprintable"
    return (f'{link} <span class="badge nonascii" title="{_e(tip)}">{mark}</span> '
            f'<code class="ascii">{_e(ascii_form)}</code>')


def _num(x: float) -> str:
    """12 -> "12", 12.5 -> "12.5", 12.3456 -> "12.3"."""
    return f"{x:.1f}".removesuffix(".0")


def _meter(fraction: float) -> str:
    pct = max(0.0, min(1.0, fraction)) * 100
    tone = "low" if pct < 50 else "mid" if pct < 80 else "high"
    return f'<span class="meter"><span class="fill {tone}" style="width:{pct:.1f}%"></span></span>'


def _score_cell(score: float | None, max_score: float) -> str:
    """A student's score on an exercise; tinted when below half marks."""
    if score is None:
        return '<td class="n">—</td>'
    weak = " weak" if max_score and score < max_score / 2 else ""
    return f'<td class="n{weak}">{_num(score)}</td>'


def _histogram_svg(bins: list[Bin]) -> str:
    w, h, left, bottom, top = 860, 250, 8, 34, 24
    plot_h = h - bottom - top
    slot = (w - left - 8) / len(bins)
    peak = max((b.count for b in bins), default=0) or 1
    parts = [f'<svg class="histogram" viewBox="0 0 {w} {h}" role="img" aria-label="score distribution">',
             f'<line class="axis" x1="{left}" y1="{h - bottom}" x2="{w - 4}" y2="{h - bottom}"/>']
    for i, b in enumerate(bins):
        x = left + i * slot + 4
        bw = slot - 8
        bar_h = plot_h * b.count / peak
        err_h = plot_h * b.errors / peak
        y = h - bottom - bar_h
        last = i == len(bins) - 1
        label = f"{_num(b.lo)}–{_num(b.hi)}%"
        tip = f"{b.count} student{'s' if b.count != 1 else ''} with {_num(b.lo)}% ≤ score " \
              f"{'≤' if last else '<'} {_num(b.hi)}%" + (f" ({b.errors} in error)" if b.errors else "")
        parts.append(f'<g class="bin" data-count="{b.count}"><title>{_e(tip)}</title>')
        parts.append(f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bw:.1f}" height="{bar_h:.1f}"/>')
        if b.errors:
            parts.append(f'<rect class="bar-error" x="{x:.1f}" y="{h - bottom - err_h:.1f}" '
                         f'width="{bw:.1f}" height="{err_h:.1f}"/>')
        parts.append(f'<text class="count{" zero" if not b.count else ""}" x="{x + bw / 2:.1f}" '
                     f'y="{y - 6:.1f}">{b.count}</text>')
        parts.append(f'<text class="tick" x="{x + bw / 2:.1f}" y="{h - bottom + 18}">{_e(label)}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


_CSS = """
:root { --ink:#1f2328; --muted:#656d76; --line:#d0d7de; --soft:#f6f8fa; --blue:#3b6fd4;
        --red:#cf222e; --amber:#bf8700; --green:#1a7f37; }
* { box-sizing: border-box; }
body { margin: 0; padding: 28px 36px 48px; color: var(--ink); background: #fff;
       font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; }
main { max-width: 1080px; margin: 0 auto; }
h1 { font-size: 22px; margin: 0 0 2px; }
h2 { font-size: 16px; margin: 32px 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
.sub { color: var(--muted); margin: 0 0 18px; }
.note { color: var(--muted); font-size: 12.5px; margin: 4px 0 8px; }
.warn { color: var(--red); }
.cards { display: flex; gap: 12px; flex-wrap: wrap; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 10px 16px; min-width: 120px;
        background: var(--soft); }
.card.alert .v { color: var(--red); }
.card .v { font-size: 22px; font-weight: 600; }
.card .k { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 5px 10px; border-bottom: 1px solid var(--line); vertical-align: middle; }
th { font-size: 12px; color: var(--muted); font-weight: 600; background: var(--soft); white-space: nowrap; }
td.n, th.n { text-align: right; white-space: nowrap; }
tbody tr:hover { background: #fafbfc; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; color: var(--muted); }
.meter { display: inline-block; width: 110px; height: 9px; background: #eaeef2; border-radius: 5px;
         overflow: hidden; vertical-align: middle; }
.meter .fill { display: block; height: 100%; }
.fill.low { background: var(--red); } .fill.mid { background: var(--amber); }
.fill.high { background: var(--green); }
.badge { display: inline-block; padding: 0 8px; border-radius: 10px; font-size: 12px; }
.badge.graded { background: #dafbe1; color: var(--green); }
.badge.error { background: #ffebe9; color: var(--red); }
.badge.nonascii { background: #fff8c5; color: #7d4e00; border: 1px solid #d4a72c; cursor: help; }
.tag { white-space: nowrap; font-size: 11px; color: var(--muted); border: 1px solid var(--line);
       border-radius: 4px; padding: 0 4px; margin-left: 4px; }
.reason { color: var(--muted); font-size: 12px; }
td.reason { white-space: nowrap; }
th .max { font-weight: 400; }
td.weak { background: #fff1f0; }
a { color: var(--blue); text-decoration: none; } a:hover { text-decoration: underline; }
svg.histogram { display: block; width: 100%; max-width: 860px; height: auto; }
svg .bar { fill: var(--blue); } svg .bar-error { fill: #b7bdc5; }
svg .axis { stroke: var(--muted); stroke-width: 1; }
svg text { font-size: 12px; text-anchor: middle; fill: var(--ink); }
svg text.tick { fill: var(--muted); font-size: 11px; }
svg text.count.zero { fill: #aab1b9; }
.legend { font-size: 12px; color: var(--muted); }
.legend i { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 10px; vertical-align: -1px; }
.legend .graded { background: var(--blue); } .legend .error { background: #b7bdc5; }
.empty { padding: 40px; text-align: center; color: var(--muted); border: 1px dashed var(--line);
         border-radius: 8px; }
"""


# how a check's other outcomes read ("3 failed, 1 raised"), in this order
_OUTCOME = {"failed": "failed", "error": "raised", "timeout": "timed out", "skipped": "skipped"}


def render_html(summary: ClassSummary, title: str | None = None, *,
                report_file: Callable[[str], str] = report_file) -> str:
    """The page. `report_file(student)` names the student's JSON report beside the page, which the
    student's link opens (percent-encoded here, whatever characters the name has)."""
    ids = ", ".join(summary.assignments)
    heading = title or ids or "Class report"
    head = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>Class report · {_e(heading)}</title><style>{_CSS}</style></head><body><main>"
            f"<h1>{_e(heading)}</h1>")
    sub = f'<p class="sub">Class report of <code>{_e(ids)}</code></p>' if ids else ""
    if len(summary.assignments) > 1:
        sub += f'<p class="note warn">These reports are of several assignments: {_e(ids)}.</p>'
    if not summary.students:
        return head + sub + '<p class="empty">No submissions: there are no reports to summarize.</p>' \
            "</main></body></html>\n"

    cards = [("students", summary.students, ""), ("graded", summary.graded, ""),
             ("in error", summary.errors, " alert" if summary.errors else ""),
             ("mean", f"{_num(summary.mean_percent or 0)}%", ""),
             ("median", f"{_num(summary.median_percent or 0)}%", "")]
    out = [head, sub, '<div class="cards">']
    out += [f'<div class="card{tone}"><div class="v">{_e(v)}</div><div class="k">{_e(k)}</div></div>'
            for k, v, tone in cards]
    out.append("</div>")

    out.append('<h2>Score distribution</h2><p class="note">Students per band of percent of the maximum '
               "score. A report in error scores 0."
               '<span class="legend"><i class="graded"></i>graded <i class="error"></i>in error</span></p>')
    out.append(_histogram_svg(summary.histogram))

    out.append('<h2>Exercises</h2><table class="exercises"><thead><tr><th>Exercise</th>'
               '<th class="n">Mean / max</th><th class="n">Mean %</th><th></th></tr></thead><tbody>')
    for ex in summary.exercises:
        frac = ex.mean / ex.max_score if ex.max_score else 0.0
        out.append(f"<tr><td>{_e(ex.title)} <code>{_e(ex.id)}</code></td>"
                   f'<td class="n">{_num(ex.mean)} / {_num(ex.max_score)}</td>'
                   f'<td class="n">{_num(100 * frac)}%</td><td>{_meter(frac)}</td></tr>')
    out.append("</tbody></table>")

    out.append('<h2>Checks, hardest first</h2><p class="note">Pass rate among graded submissions '
               "(a report in error ran no check).</p>"
               '<table class="checks"><thead><tr><th>Check</th><th>What it verifies</th>'
               '<th class="n">Passed</th><th class="n">Pass rate</th><th></th><th>Other outcomes</th>'
               "</tr></thead><tbody>")
    for c in summary.checks:
        others = ", ".join(f"{c.statuses[s]} {word}" for s, word in _OUTCOME.items() if c.statuses.get(s))
        hidden = '<span class="tag">hidden inputs</span>' if c.hidden else ""
        out.append(f"<tr><td><code>{_e(c.id)}</code></td><td>{_e(c.title)}{hidden}</td>"
                   f'<td class="n">{c.passed} / {c.total}</td><td class="n">{_num(100 * c.rate)}%</td>'
                   f'<td>{_meter(c.rate)}</td><td class="reason">{_e(others)}</td></tr>')
    out.append("</tbody></table>")

    ex_head = "".join(f'<th class="n" title="{_e(ex.title)}">{_e(ex.id)} '
                      f'<span class="max">/ {_num(ex.max_score)}</span></th>' for ex in summary.exercises)
    out.append(f'<h2>Students</h2><p class="note">Each name links to the student\'s JSON report.</p>'
               f'<table class="students"><thead><tr><th>Student</th><th class="n">Total</th>'
               f'<th class="n">%</th>{ex_head}<th>Status</th></tr></thead><tbody>')
    for row in summary.rows:
        cells = "".join(_score_cell(row.exercises[ex.id], ex.max_score) for ex in summary.exercises)
        reason = f' <span class="reason">{_e(row.error)}</span>' if row.error else ""
        out.append(f"<tr><td>{_student_cell(row.student, _href(report_file(row.student)))}</td>"
                   f'<td class="n">{_num(row.score)} / {_num(row.max_score)}</td>'
                   f'<td class="n">{_num(row.percent)}</td>{cells}'
                   f'<td><span class="badge {_e(row.status)}">{_e(row.status)}</span>{reason}</td></tr>')
    out.append("</tbody></table></main></body></html>\n")
    return "".join(out)


def _assignment_title(ids: list[str]) -> str | None:
    """The spec's title when the reports are of one known assignment; else None (the id is shown)."""
    if len(ids) != 1:
        return None
    from grader.assignment import read_spec, resolve
    from grader.errors import GraderError

    try:
        return read_spec(resolve(ids[0])).title
    except (GraderError, OSError):  # an unknown or broken assignment: the page shows its id
        return None


def write_class_report(reports: dict[str, Report], out_dir: Path, *,
                       report_file: Callable[[str], str] = report_file) -> Path:
    """Write `out_dir/index.html` for these reports (keys are student ids) and return its path;
    `report_file(student)` is the name of that student's JSON report in `out_dir`."""
    summary = summarize(reports)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / "index.html"
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(render_html(summary, _assignment_title(summary.assignments), report_file=report_file),
                   encoding="utf-8")
    tmp.replace(target)
    return target
