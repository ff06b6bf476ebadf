"""The class page, section by section: who was not graded and why, every student (sortable), how
scores are spread, which exercises and checks the class struggles with, the cells that raised or
killed the kernel, score changes, and programs that are alike.

Why it reads this way: an instructor opens it to find whom to look at. So the students who were
not graded come first, with the reason, then every student (the table sorts by score, name or
status, `assets`), each linking to their feedback page (what they will see) and their JSON
report; the class's numbers follow, then the details the students table points to.
Everything a student controls (their id, their cells' messages) goes through `markup.esc` and
every link through `markup.href`; the page is deterministic (no timestamps, everything sorted).
"""

from __future__ import annotations

from collections.abc import Callable

from grader.outputs.classpage.analysis import CheckFailures, ClassAnalysis, WrongAnswer
from grader.outputs.classpage.assets import CSS, SCRIPT, csp
from grader.outputs.classpage.markup import (
    esc,
    esc_line,
    first_line,
    histogram_svg,
    href,
    href_path,
    meter,
    num,
    plain_name,
    score_cell,
    signed,
    student_name,
)
from grader.outputs.classpage.summary import ClassSummary, StudentRow

STATE_LABEL = {"graded": "graded", "died": "kernel died", "error": "not graded", "missing": "no report"}
_OUTCOME = {"failed": "failed", "error": "raised", "timeout": "timed out", "skipped": "skipped"}
_PROBLEM = {"error": "raised", "timeout": "timed out", "died": "killed the kernel", "skipped": "not run"}


def report_file(student: str) -> str:
    """The file name of a student's JSON report, beside index.html (`grade_many` passes its own)."""
    return f"{student}.json"


def feedback_file(student: str) -> str:
    """The student's feedback page below index.html, as a batch writes it."""
    from grader.outputs.names import feedback_file_name

    return feedback_file_name(student)


class Links:
    """Where a student's name leads: their feedback page, and their JSON report beside it. A
    student without a report has neither, so their name is plain text."""

    def __init__(self, summary: ClassSummary, report: Callable[[str], str], feedback: Callable[[str], str]):
        self._reported = {row.student for row in summary.rows if row.state != "missing"}
        self._report, self._feedback = report, feedback

    def name(self, student: str) -> str:
        page = href_path(self._feedback(student)) if student in self._reported else None
        return student_name(student, page)

    def plain(self, student: str) -> str:
        """The name as `name` links it, without the look-alike mark (for a name repeated in a list)."""
        page = href_path(self._feedback(student)) if student in self._reported else None
        return plain_name(student, page)

    def json(self, student: str) -> str:
        if student not in self._reported:
            return ""
        return f'<a class="json" href="{esc(href(self._report(student)))}" title="the JSON report">JSON</a>'


def _table(cls: str, head: str, rows: list[str], table_id: str = "") -> str:
    """A table in its own horizontally scrolling box, so that the page never overflows."""
    ident = f' id="{table_id}"' if table_id else ""
    return (f'<div class="scroll"><table class="{cls}"{ident}><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def _section(ident: str, title: str, note: str) -> str:
    return f'<h2 id="{ident}">{title}</h2><p class="note">{note}</p>'


def _cards(s: ClassSummary) -> str:
    cards = [("students", s.students, ""), ("graded", s.graded, ""),
             ("not graded", s.errors, " alert" if s.errors else "")]
    if s.died:
        cards.append(("kernel died", s.died, " alert"))
    cards += [("mean", f"{num(s.mean_percent or 0)}%", ""), ("median", f"{num(s.median_percent or 0)}%", "")]
    return '<div class="cards">' + "".join(
        f'<div class="card{tone}"><div class="v">{esc(v)}</div><div class="k">{esc(k)}</div></div>'
        for k, v, tone in cards) + "</div>"


def _toc(present: list[tuple[str, str]]) -> str:
    """Links to the sections on this page (fixed ids, never a student's)."""
    return '<nav class="toc">' + "".join(f'<a href="#{i}">{esc(t)}</a>' for i, t in present) + "</nav>"


def _not_graded(s: ClassSummary, links: Links) -> str:
    items = [f'<li>{links.name(r.student)} <span class="badge {r.state}">{STATE_LABEL[r.state]}</span> '
             f'<span class="reason">{esc_line(r.error or "no reason given", 500)}</span></li>'
             for r in s.rows if r.status == "error"]
    return (_section("not-graded", "Not graded", "Reports in error score 0; a submission that killed its "
                     "kernel keeps the points of what could still be checked.")
            + f'<ul class="plain not-graded">{"".join(items)}</ul>')


def _distribution(s: ClassSummary, links: Links) -> str:
    legend = '<span class="legend"><i class="graded"></i>graded <i class="error"></i>not graded</span>'
    return (_section("distribution", "Score distribution", "Students per band of percent of the maximum "
                     "score (final scores; each band's bounds under its bar, in %). A report in error "
                     f"scores 0. {legend}")
            + f'<div class="scroll">{histogram_svg(s.histogram)}</div>')


def _exercises(s: ClassSummary, links: Links) -> str:
    rows = []
    for ex in s.exercises:
        frac = (ex.mean_answered or 0.0) / ex.max_score if ex.max_score else 0.0
        mean = "—" if ex.mean_answered is None else f"{num(ex.mean_answered)} / {num(ex.max_score)}"
        rows.append(f"<tr><td>{esc(ex.title)} <code>{esc(ex.id)}</code></td>"
                    f'<td class="n">{ex.answered} / {s.students}</td><td class="n">{mean}</td>'
                    f'<td class="n">{num(100 * frac)}%</td><td>{meter(frac)}</td>'
                    f'<td class="n">{ex.full} / {ex.answered}</td><td class="n">{num(ex.mean)}</td></tr>')
    head = ('<th>Exercise</th><th class="n">Answered</th><th class="n">Mean / max</th>'
            '<th class="n">Mean %</th><th></th><th class="n">Full marks</th><th class="n">Class mean</th>')
    return (_section("exercises", "Exercises", "Means among the students who answered the exercise "
                     "(graded, and at least one of its checks judged an answer rather than “Not answered "
                     "yet”); the class mean counts everyone else as 0.") + _table("exercises", head, rows))


def _checks(s: ClassSummary, links: Links) -> str:
    rows = []
    for c in s.checks:
        others = ", ".join(f"{c.statuses[k]} {word}" for k, word in _OUTCOME.items() if c.statuses.get(k))
        hidden = '<span class="tag">hidden inputs</span>' if c.hidden else ""
        rows.append(f"<tr><td><code>{esc(c.id)}</code></td><td>{esc(c.title)}{hidden}</td>"
                    f'<td class="n">{c.passed} / {c.total}</td><td class="n">{num(100 * c.rate)}%</td>'
                    f'<td>{meter(c.rate)}</td><td class="reason">{esc(others)}</td>'
                    f'<td class="n">{c.unanswered or ""}</td></tr>')
    head = ('<th>Check</th><th>What it verifies</th><th class="n">Passed</th><th class="n">Pass rate</th>'
            '<th></th><th>Other outcomes</th><th class="n">Not answered</th>')
    return (_section("checks", "Checks, hardest first", "Pass rate among the students who answered the "
                     "check's exercise; those who did not are counted apart, and reports not graded ran no "
                     "check.") + _table("checks", head, rows))


MAX_GROUPS = 5
"""Groups shown per check and per grouping (the largest); the rest are counted, and are in the JSON."""


def _group_row(group: WrongAnswer, what: str, links: Links) -> str:
    """One way of failing: how many, what (escaped by the caller), one example to open, and everyone."""
    everyone = ", ".join(links.plain(s) for s in group.students)
    more = (f'<details><summary>all {group.count}</summary><p class="who-all">{everyone}</p></details>'
            if group.count > 1 else "")
    return (f'<tr><td class="n">{group.count}</td><td class="msg">{what}</td>'
            f'<td class="student">{links.plain(group.example)}{more}</td></tr>')


def _rest(groups: list[WrongAnswer], kind: str) -> str:
    """One row for the groups not shown: how many students, in how many groups."""
    if not groups:
        return ""
    students = sum(g.count for g in groups)
    own = ", each their own" if all(g.count == 1 for g in groups) and len(groups) > 1 else ""
    other = f"with {len(groups)} other {kind}{'s' if len(groups) != 1 else ''}{own}"
    return (f'<tr><td class="n">{students}</td><td class="reason" colspan="2">{other} (every one in '
            "<code>grade report OUT --json</code>)</td></tr>")


def _program_label(group: WrongAnswer, function: str | None) -> str:
    of = f" of <code>{esc(function)}</code>" if function else " of the exercise"
    if group.program is None:
        return f"no compiled program{of}: it did not trace, or no check exported it"
    mine = " (the reference solution's program)" if group.reference else ""
    same = "the same program" if group.count > 1 else "a program"
    return f'{same}{of} <code title="{esc(group.program)}">{esc(group.program[:10])}</code>{mine}'


def _wrong_check(c: CheckFailures, links: Links) -> str:
    hidden = '<span class="tag">hidden inputs</span>' if c.hidden else ""
    share = f'<span class="count">{c.failed} of {c.judged}</span> failed ({num(100 * c.share)}%)'
    head = (f'<h3 class="wrong"><code>{esc(c.id)}</code> {esc(c.title)}{hidden}</h3>'
            f'<p class="share">{share}</p>')
    by_message = [_group_row(g, esc_line(g.message, 500), links) for g in c.by_message[:MAX_GROUPS]]
    by_message.append(_rest(c.by_message[MAX_GROUPS:], "message"))
    heads = [f'<th class="n">Students</th><th>{what}</th><th>One of them</th>'
             for what in ("The message they got", "Their compiled program")]
    out = f'<div class="wrong-check">{head}{_table("wrong", heads[0], by_message)}'
    shown = [g for g in c.by_program if g.count > 1 or g.program is None][:MAX_GROUPS]
    if shown:
        by_program = [_group_row(g, _program_label(g, c.function), links) for g in shown]
        by_program.append(_rest([g for g in c.by_program if g not in shown], "program"))
        out += _table("wrong", heads[1], by_program)
    elif c.failed > 1:
        out += '<p class="note">Each of them wrote a program of their own.</p>'
    return out + "</div>"


def _wrong(analysis: ClassAnalysis, links: Links) -> str:
    failing = [c for c in analysis.checks if c.failed]
    return (_section("wrong", "What the class got wrong", "Per check, the students who answered its exercise "
                     "and did not pass it, grouped by the message they got (numbers and quoted names that "
                     "differ between them shown as “…”) and by their compiled program (the same normalised "
                     "program: the same way of getting it wrong). Each group opens one student’s feedback "
                     "page. For the instructor: nothing of this reaches a student.")
            + "".join(_wrong_check(c, links) for c in failing))


def _notes(row: StudentRow) -> str:
    """What else to know about a student, each a link to its section below."""
    notes = []
    if row.late:
        notes.append(f'<a href="#changes">late {row.late.days_late} d, {signed(-row.late.points)}</a>')
    if row.lms_late:  # the LMS's own mark, whatever the late policy made of it
        lms = esc(row.lms_late)
        notes.append(f'<span class="reason" title="the file\'s name in {lms}\'s download says so; no points '
                     f'are taken off for the mark itself">marked late in {lms}</span>')
    if row.adjustments:
        notes.append(f'<a href="#changes">adjusted {signed(sum(a.points for a in row.adjustments))}</a>')
    count = len(row.problems) + row.problems_omitted
    if count:
        notes.append(f'<a href="#problems">{count} cell problem{"s" if count != 1 else ""}</a>')
    if row.unanswered and len(row.unanswered) == len(row.exercises):
        notes.append('<span class="reason">nothing answered</span>')
    elif row.unanswered:
        notes.append(f'<span class="reason">not answered: {esc(", ".join(row.unanswered))}</span>')
    return "<br>".join(notes)


def _student_row(order: int, row: StudentRow, s: ClassSummary, links: Links) -> str:
    """One row; its data-* attributes are what the script sorts on (order is the name order)."""
    cells = "".join(score_cell(row.exercises[ex.id], ex.max_score) for ex in s.exercises)
    raw = "" if row.final == row.score else \
        f'<s title="raw score, before the late penalty and adjustments">{num(row.score)}</s> '
    why = f'<span class="why">{esc_line(row.error, 300)}</span>' if row.error else ""
    return (f'<tr data-order="{order}" data-score="{row.percent:.6f}" data-status="{row.rank}">'
            f'<td class="student">{links.name(row.student)}{links.json(row.student)}</td>'
            f'<td class="n">{raw}{num(row.final)} / {num(row.max_score)}</td><td class="n">{num(row.percent)}</td>'
            f'<td><span class="badge {row.state}">{STATE_LABEL[row.state]}</span>{why}</td>'
            f'{cells}<td class="notes">{_notes(row)}</td></tr>')


def _sortable(col: str, label: str, cls: str = "", sort: str = "none") -> str:
    """A heading that sorts by `col`: a link to `#sort=col` (the script sets where a second click leads)."""
    first = "-" if sort == "ascending" else ""
    return f'<th{cls} aria-sort="{sort}"><a href="#sort={first}{col}" data-sort="{col}">{label}</a></th>'


def _students(s: ClassSummary, links: Links) -> str:
    ex_head = "".join(f'<th class="n" title="{esc(ex.title)}">{esc(ex.id)} '
                      f'<span class="max">/ {num(ex.max_score)}</span></th>' for ex in s.exercises)
    head = (_sortable("name", "Student", sort="ascending") + _sortable("score", "Score", ' class="n"')
            + '<th class="n">%</th>' + _sortable("status", "Status") + f"{ex_head}<th>Notes</th>")
    rows = [_student_row(i, row, s, links) for i, row in enumerate(s.rows)]
    return (_section("students", "Students", '<span id="sorted-by">Sorted by name.</span> Click a heading '
                     "to sort by it (again to reverse). Each name opens the student's feedback page; “JSON” "
                     "opens their report.") + _table("students", head, rows, "students-table"))


def _problems(s: ClassSummary, links: Links) -> str:
    rows = []
    for r in s.rows:
        name = links.name(r.student)
        for p in sorted(r.problems, key=lambda p: p.cell):
            what = f'<code class="ename">{esc_line(p.ename, 80)}</code>' if p.ename else esc(_PROBLEM[p.status])
            line = "—" if p.line is None else p.line
            rows.append(f'<tr class="{p.status}"><td class="student">{name}</td><td>{esc(p.where)}</td>'
                        f'<td class="n">{line}</td><td>{what}</td>'
                        f'<td class="msg">{first_line(p.message)}</td></tr>')
        if r.problems_omitted:
            rows.append(f'<tr><td class="student">{name if not r.problems else ""}</td><td colspan="4" '
                        f'class="reason">and {r.problems_omitted} more, not listed in the report</td></tr>')
    head = ('<th>Student</th><th>Where</th><th class="n">Line</th><th>Error</th>'
            "<th>What happened (first line)</th>")
    return (_section("problems", "Cell problems", "Student cells that raised, hung, killed the kernel or "
                     "were not run. Their text is the student's, shown as text.")
            + _table("problems", head, rows))


def _late(r: StudentRow) -> str:
    if r.late is None:
        return "—"
    return (f'{signed(-r.late.points)}<span class="why">{r.late.days_late} day(s) late: submitted '
            f"{esc(r.late.submitted_at)}, due {esc(r.late.due)} ({esc(r.late.rule)})</span>")


def _adjustments(r: StudentRow) -> str:
    items = "".join(f'<li>{signed(a.points)}: {esc_line(a.reason, 500)} <span class="reason">by '
                    f"{esc_line(a.by, 100)}, {esc_line(a.at, 40)}</span></li>" for a in r.adjustments)
    return f'<ul class="plain">{items}</ul>' if items else "—"


def _changes(s: ClassSummary, links: Links) -> str:
    rows = [f'<tr><td class="student">{links.name(r.student)}</td><td class="n">{num(r.score)}</td>'
            f"<td>{_late(r)}</td><td>{_adjustments(r)}</td>"
            f'<td class="n">{num(r.final)} / {num(r.max_score)}</td></tr>' for r in s.rows if r.changed]
    head = ('<th>Student</th><th class="n">Raw</th><th>Late penalty</th><th>Adjustments</th>'
            '<th class="n">Final</th>')
    return (_section("changes", "Score changes", "The late policy's penalty and grade changes by hand (why, "
                     "who, when); the final score is what goes to the gradebook.")
            + _table("changes", head, rows))


def _similar(s: ClassSummary, links: Links) -> str:
    rows = []
    for g in s.groups:
        alike = "identical" if g.identical else f"{num(100 * g.similarity)}%"
        if g.common:
            alike += " (common: the exercise may dictate it)"
        names = ", ".join(links.name(st) for st in sorted(g.students))
        rows.append(f"<tr><td><code>{esc(g.exercise)}</code></td><td>{names}</td>"
                    f'<td class="n">{alike}</td><td class="n">≥ {num(100 * g.threshold)}%</td></tr>')
    head = '<th>Exercise</th><th>Students</th><th class="n">Similarity</th><th class="n">Threshold</th>'
    return (_section("similar", "Similar programs", "Students whose exported programs for an exercise are "
                     "alike: the lowest similarity between two of them, and the threshold at or above which "
                     "students are grouped. A lead to look at, not a verdict.")
            + _table("similar", head, rows))


Section = Callable[[ClassSummary, Links], str]


def _sections(s: ClassSummary, analysis: ClassAnalysis | None) -> list[tuple[str, str, Section]]:
    """The sections this class needs, in the page's order: id, title in the contents, renderer."""
    wanted: list[tuple[str, str, object, Section]] = [
        ("not-graded", "Not graded", s.errors, _not_graded),
        ("students", "Students", True, _students),
        ("distribution", "Distribution", True, _distribution),
        ("exercises", "Exercises", s.exercises, _exercises),
        ("checks", "Checks", s.checks, _checks),
        ("wrong", "What the class got wrong", analysis and any(c.failed for c in analysis.checks),
         lambda _, links: _wrong(analysis, links) if analysis else ""),
        ("problems", "Cell problems", any(r.problems or r.problems_omitted for r in s.rows), _problems),
        ("changes", "Score changes", any(r.changed for r in s.rows), _changes),
        ("similar", "Similar programs", s.groups, _similar)]
    return [(ident, title, make) for ident, title, present, make in wanted if present]


def render_html(summary: ClassSummary, title: str | None = None, *,
                report_file: Callable[[str], str] = report_file,
                feedback_file: Callable[[str], str] = feedback_file,
                analysis: ClassAnalysis | None = None) -> str:
    """The page. `feedback_file(student)` and `report_file(student)` name the student's feedback
    page and JSON report relative to the page (percent-encoded here, whatever characters they have);
    `analysis` is what the class got wrong (its section is left out without it)."""
    ids = ", ".join(summary.assignments)
    heading = title or ids or "Class report"
    out = [(f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{csp()}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>Class report · {esc(heading)}</title><style>{CSS}</style></head><body><main>"
            f"<h1>{esc(heading)}</h1>")]
    if ids:
        out.append(f'<p class="sub">Class report of <code>{esc(ids)}</code></p>')
    if len(summary.assignments) > 1:
        out.append(f'<p class="note warn">These reports are of several assignments: {esc(ids)}.</p>')
    if not summary.students:
        out.append('<p class="empty">No submissions: there are no reports to summarize.</p>'
                   "</main></body></html>\n")
        return "".join(out)
    links = Links(summary, report_file, feedback_file)
    sections = _sections(summary, analysis)
    out += [_cards(summary), _toc([(ident, title) for ident, title, _ in sections])]
    out += [make(summary, links) for _, _, make in sections]
    out.append(f"</main><script>{SCRIPT}</script></body></html>\n")
    return "".join(out)
