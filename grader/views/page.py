"""Feedback to hand back: one self-contained HTML page per submission (`grade FILE --html PAGE`,
and `OUT/feedback/<student>.html` in a batch).

Each exercise is a section: the student's own code cells that define its names, and beside them
its checks, passed or not, with their messages and the sentence of the exercise each verifies.
It shows only what the report's student-facing fields hold (`message`, never `counterexample`),
so nothing hidden is revealed; every string from the submission or the report is escaped, and
the page has no script and loads nothing.
"""

from __future__ import annotations

import html
from pathlib import Path

from grader.inert import text
from grader.judging.attribution import defined_names
from grader.views.terminal import LEGEND, later, not_defined, pts, scored, unanswered
from grader.report import CheckResult, ExerciseResult, Report
from grader.submission import SourceCell

# without it a phone lays out the page at 980 px and shows it at 0.4 scale
VIEWPORT = "<meta name='viewport' content='width=device-width, initial-scale=1'>"
_STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:76em;padding:0 1em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin:0}.score{float:right;font-weight:600}
section{border:1px solid #ddd;border-radius:6px;margin:1.2em 0;padding:.8em 1em}
.cols{display:flex;gap:1.2em;flex-wrap:wrap}.code{flex:3 1 34em;min-width:0}.checks{flex:2 1 22em;padding:0}
pre{background:#f6f8fa;padding:.6em;overflow-x:auto;font-size:13px;margin:.4em 0}
li{margin:.35em 0;list-style:none}.passed::before{content:"✓ ";color:#1a7f37}
.failed::before{content:"✗ ";color:#cf222e}.error::before{content:"! ";color:#cf222e}
.timeout::before{content:"⏱ ";color:#cf222e}.skipped::before{content:"- "}.legend{color:#555;font-size:.92em}
.asks{color:#555;font-size:.92em;display:block}.full{color:#1a7f37}.part{color:#9a6700}.none{color:#cf222e}
h1,h2,li,p{overflow-wrap:anywhere}
@media (max-width:40em){body{margin:.8em auto;padding:0 .6em}section{padding:.6em .7em}
.score{float:none;display:block}pre{font-size:12px}h1{font-size:1.25em}}
"""


def _names(report: Report) -> dict[str, set[str]]:
    """Per exercise, the names its checks judge (from the spec when it is known)."""
    from grader import assignment as assignments

    try:
        spec = assignments.load(report.assignment).spec
    except Exception:  # noqa: BLE001 - a page without code beside the checks is still feedback
        return {}
    found: dict[str, set[str]] = {}
    for exercise in spec.exercises:
        for check in exercise.checks:
            for field in ("function", "name", "call"):
                value = getattr(check, field, None)
                if isinstance(value, str) and (field != "function" or check.kind != "custom"):
                    found.setdefault(exercise.id, set()).add(value)
            found.setdefault(exercise.id, set()).update(getattr(check, "observe", []) or [])
    return found


def _fraction_class(score: float, max_score: float) -> str:
    if max_score and score >= max_score:
        return "full"
    return "part" if score > 0 else "none"


def _cell(cell: SourceCell) -> str:
    """A code cell under the name the messages give it: "cell 4" (Jupyter's number), a module's "line 12"."""
    where = f"cell {cell.number}" if cell.number is not None else f"line {cell.first_line}"
    return f"<p class='where'>{where}</p><pre data-cell='{cell.index}'>{html.escape(text(cell.source))}</pre>"


def page(report: Report, cells: list[SourceCell]) -> str:
    """The feedback page of one graded submission and its code cells."""
    e = html.escape
    names = _names(report)
    owner: dict[int, str] = {}
    for cell in cells:
        defined = defined_names(cell.source)
        for exercise_id, wanted in names.items():
            if defined & wanted:
                owner.setdefault(cell.index, exercise_id)
    who = f" · {e(text(report.student))}" if report.student else ""
    head = (f"<!doctype html><html lang='en'><meta charset='utf-8'>{VIEWPORT}"
            f"<title>{e(text(report.assignment))} feedback</title><style>{_STYLE}</style>"
            f"<h1>{e(text(report.assignment))}{who}"  # the final score leads: it is the grade
            f"<span class='score {_fraction_class(report.final, report.max_score)}' data-score='final'>"
            f"{e(scored(report.final, report.max_score, [c for x in report.exercises for c in x.checks]))}"
            "</span></h1>")
    parts = [head, _final(report), _checked_here(report)]
    if report.status == "error":
        parts.append(f"<p class='none'>Not graded: {e(text(report.error))}</p>")
    for exercise in report.exercises:
        code = "".join(_cell(cell)
                       for cell in cells if owner.get(cell.index) == exercise.id)
        checks = _unanswered(exercise) or [_check(c) for c in exercise.checks]
        judged = [c for c in exercise.checks if c.reason != "on_hand_in"]
        passed = sum(1 for c in judged if c.status == "passed")
        here = exercise.max_score - sum(c.max_score for c in later(exercise.checks))
        parts.append(f"<section data-exercise='{e(exercise.id)}'><h2>{e(text(exercise.title))}"
                     f"<span class='score {_fraction_class(exercise.score, here) if here else 'later'}'>"
                     f"{e(scored(exercise.score, exercise.max_score, exercise.checks))}</span></h2>"
                     f"<p>{passed} of {len(judged)} checks passed</p><div class='cols'>"
                     f"<div class='code'>{code or '<p>No cell defines its names.</p>'}</div>"
                     f"<ul class='checks'>{''.join(checks)}</ul></div></section>")
    others = "".join(_cell(cell)
                     for cell in cells if cell.index not in owner)
    if others:
        parts.append(f"<section data-exercise=''><h2>Your other cells</h2>{others}</section>")
    for problem in report.cell_problems:
        if problem.exercise is None:
            parts.append(f"<p class='part'>note: {e(text(problem.message))}</p>")
    if any(c.status != "passed" for exercise in report.exercises for c in exercise.checks):
        parts.append(f"<p class='legend'>{e(LEGEND)}</p>")  # the terminal's marks, the same here
    return "".join(parts) + "</html>\n"


def _check(c: CheckResult) -> str:
    """One check: its title, its points and, unless it passed, its message and the sentences of the
    exercise it verifies; a check left to the hand-in says so, with the points it is worth."""
    e = html.escape
    hidden = " (hidden inputs)" if c.hidden else ""
    head = f"<li class='{c.status}' data-check='{e(c.id)}'><b>{e(text(c.title))}</b>{hidden}, "
    if c.reason == "on_hand_in":
        return f"{head}{pts(c.max_score)}: checked when you hand in</li>"
    asks = "".join(f"<span class='asks'>the exercise asks: {e(text(r))}</span>"
                   for r in c.requirements) if c.status != "passed" else ""
    message = f": {e(text(c.message))}" if c.message and c.status != "passed" else ""
    return f"{head}{c.score:g}/{c.max_score:g}{message}{asks}</li>"


def _unanswered(exercise: ExerciseResult) -> list[str]:
    """An exercise none of whose checks has an answer to judge, said once as the terminal says it
    (`grader.views.terminal.unanswered`): the names not defined, or the cell that failed to define them."""
    e = html.escape
    told = unanswered(exercise)
    if told is None:
        return []
    return [f"<li class='skipped'>not answered yet: define {e(text(', '.join(names)))}</li>" if cause is None else
            f"<li class='failed'>{e(text(cause))}, so {e(text(not_defined(names)))}: fix that cell first</li>"
            for cause, names in told]


def _checked_here(report: Report) -> str:
    """At the self-check (the pack's `grade --html`): what was checked, never a total that reads as
    the grade, and what is left to the hand-in, as the terminal says it."""
    checks = [c for exercise in report.exercises for c in exercise.checks]
    waiting = sum(c.max_score for c in later(checks))
    if not waiting:
        return ""
    here = f"{scored(report.score, report.max_score, checks)}. " if waiting < report.max_score else ""
    return (f"<p class='checked'>{html.escape(here)}"
            f"{waiting:g} of the {report.max_score:g} points are checked when you hand in (hidden inputs, "
            "predictions): your grade is the one the course's grader gives then.</p>")


def _final(report: Report) -> str:
    """Under the final score the title leads with: the score the checks gave, then the late penalty
    and the grade changes by hand, with who, when and why (nothing when none)."""
    e = html.escape
    lines = []
    if report.late is not None:
        lines.append(f"<li>late: submitted {e(report.late.submitted_at)}, due {e(report.late.due)}, "
                     f"{report.late.days_late} day(s) late: −{report.late.points:g} ({e(report.late.rule)})</li>")
    for a in report.adjustments:
        lines.append(f"<li>adjusted {a.points:+g} by {e(text(a.by))} on {e(text(a.at))}: {e(text(a.reason))}</li>")
    if not lines:
        return ""
    return (f"<section class='final'><p>Final score {report.final:g} / {report.max_score:g}: the checks gave "
            f"<span data-score='graded'>{report.score:g}</span>, then</p><ul>{''.join(lines)}</ul></section>")


def write_page(report: Report, cells: list[SourceCell], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    from grader.atomic import write_atomic

    return write_atomic(path, page(report, cells))
