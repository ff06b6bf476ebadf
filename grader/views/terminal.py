"""The terminal summary of a report: per exercise score / max, each failed check and why.

Every string that comes from a report is made inert (`grader.inert`) before it is laid out or
painted: a student's message, file name or id can neither move the cursor, clear the screen,
reverse text nor start a line of its own; only the grader's own colour codes reach the terminal.
"""

from __future__ import annotations

import textwrap

from grader.inert import MESSAGE_LIMIT, PATH_LIMIT, flowing, name, terminal
from grader.judging.attribution import in_live_cells
from grader.report import CheckResult, ExerciseResult, Report

_MARK = {"passed": "✓", "failed": "✗", "error": "!", "timeout": "⏱", "skipped": "-"}


def _points(x: float) -> str:
    return f"{x:g}"


def pts(x: float) -> str:
    """Points as a count: "1 pt", "2.5 pts", "0 pts"."""
    return f"{x:g} pt" if x == 1 else f"{x:g} pts"


LEGEND = "✗ failed  ! error  ⏱ timed out  - not run (or checked when you hand in)"


def later(checks: list[CheckResult]) -> list[CheckResult]:
    """The checks a self-check left to the hand-in (hidden inputs, predictions): judged by `grade`."""
    return [c for c in checks if c.reason == "on_hand_in"]


def scored(score: float, max_score: float, checks: list[CheckResult]) -> str:
    """Points as what was checked: "19 / 25" when every check was judged; at the self-check, whose
    hidden checks and predictions wait for the hand-in, "18 of the 18 points checked here" (never a
    total that reads as the grade), or "checked when you hand in" when none of them was."""
    left = sum(c.max_score for c in later(checks))
    if not left:
        return f"{_points(score)} / {_points(max_score)}"
    here = max_score - left
    if not here:
        return "checked when you hand in"
    return f"{_points(score)} of the {_points(here)} point{'' if here == 1 else 's'} checked here"


def _all_checks(report: Report) -> list[CheckResult]:
    return [c for ex in report.exercises for c in ex.checks]


def _tally(ex: ExerciseResult) -> str:
    judged = [c for c in ex.checks if c.reason != "on_hand_in"]
    passed = sum(1 for c in judged if c.status == "passed")
    return f"{passed} of {len(judged)} checks"


def unanswered(ex: ExerciseResult) -> list[tuple[str | None, list[str]]] | None:
    """When no check of the exercise judged (at this stage) has an answer to judge, what to say
    instead of one message per check, once: (None, names) for the names the exercise asks for that
    are not defined ("not answered yet: define ..."), (cause, names) for those a cell that failed
    would have defined (a syntax error, an import: the student answered, and is told so). None
    when some check has an answer to judge."""
    judged = [c for c in ex.checks if c.reason != "on_hand_in"]
    missing = [c.not_answered for c in judged if c.not_answered is not None]
    if not judged or len(missing) != len(judged):
        return None
    plain = sorted({m.name for m in missing if not m.because and not m.used})
    caused: dict[str, set[str]] = {}  # a failed cell's sentence -> the names it would have bound
    for m in missing:
        if m.because:
            caused.setdefault(m.because, set()).add(m.name)
    return ([(None, plain)] if plain else []) + [(cause, sorted(names)) for cause, names in sorted(caused.items())]


def not_defined(names: list[str]) -> str:
    """"`step` is not defined", "`step`, `train_fori` are not defined" (names made inert by the caller)."""
    return f"{', '.join(f'`{n}`' for n in names)} {'is' if len(names) == 1 else 'are'} not defined"


def _colour(score: float, max_score: float) -> str:
    """Green when full, yellow for some points, red for none."""
    return "32" if max_score and score >= max_score else "33" if score > 0 else "31"


def _check(c: CheckResult) -> str:
    """A check as the exercise says it (its title, "newton_sqrt on hidden values of a"), never its id."""
    return flowing(c.title, MESSAGE_LIMIT)


def _check_lines(ex: ExerciseResult, verbose: bool = False) -> list[str]:
    """Why points were lost: "not answered yet" once, or each failed check with its message (and
    the checks the self-check leaves to the hand-in, in one line). Checks are named by their
    titles, in the exercise's words; `verbose` (the instructor's -v) names them by id and lists
    the passed ones too."""
    waiting = later(ex.checks)
    told = unanswered(ex)
    if told is not None:
        return [f"      - not answered yet: define {', '.join(name(n) for n in names)}" if cause is None else
                f"      ✗ {flowing(cause, MESSAGE_LIMIT)}, so {not_defined([name(n) for n in names])}: "
                "fix that cell first" for cause, names in told]
    lines = []
    if waiting:
        titles = "; ".join(_check(c) for c in waiting)
        lines.append(f"      - {len(waiting)} checked when you hand in ({pts(sum(c.max_score for c in waiting))}): "
                     f"{titles}")
    gated = _gated(ex)
    for c in ex.checks:
        if verbose and c.status == "passed":
            lines.append(f"      ✓ {name(c.id)}, {pts(c.max_score)}: {_check(c)}")
        if id(c) in gated:
            group = gated[id(c)]
            if group:  # the first of the checks one failed form check holds back: one line for all
                which = f" ({', '.join(name(g.id) for g in group)})" if verbose else ""
                points = pts(sum(g.max_score for g in group))
                lines.append(f"      {_MARK[c.status]} {len(group)} checks{which}, {points}: "
                             f"{flowing(c.message, MESSAGE_LIMIT)}")
            continue
        if c.status != "passed" and c not in waiting:
            tag = " (hidden inputs)" if c.hidden else ""
            which = f"{name(c.id)}{tag}, {pts(c.max_score)}" if verbose else f"{_check(c)}{tag} ({pts(c.max_score)})"
            lines.append(f"      {_MARK[c.status]} {which}: {flowing(c.message, MESSAGE_LIMIT)}")
            lines.extend(f"          the exercise asks: {flowing(r, MESSAGE_LIMIT)}" for r in c.requirements)
    return lines


def _gated(ex: ExerciseResult) -> dict[int, list[CheckResult]]:
    """The skipped checks that one failed check holds back with one sentence (a form check: eight
    calls not judged while `predictions` is not eight True/False values), when there are several:
    the first maps to the whole group, the others to an empty list (keyed by `id()`). One cause,
    one line."""
    groups: dict[tuple[str, str | None], list[CheckResult]] = {}
    for c in ex.checks:
        if c.status == "skipped" and c.reason == "same_cause" and c.same_as is not None:
            groups.setdefault((c.same_as, c.message), []).append(c)
    out: dict[int, list[CheckResult]] = {}
    for group in groups.values():
        if len(group) > 1:
            out.update({id(c): (group if i == 0 else []) for i, c in enumerate(group)})
    return out


def summary_exercise(ex: ExerciseResult) -> str:
    """One exercise, for the notebook's self-check cells (cells named as the notebook numbers them)."""
    ex = in_live_cells(ex)
    failed = any(c.status != "passed" and c.reason != "on_hand_in" for c in ex.checks)  # a 0-point one too
    head = "❌" if failed else "✅" if ex.score == ex.max_score else "⏳"
    return "\n".join([f"{head} {terminal(ex.title)}: {scored(ex.score, ex.max_score, ex.checks)}"]
                     + _check_lines(ex))


def _wrapped(lines: list[str], width: int | None) -> list[str]:
    """Each line wrapped to the terminal, its continuation indented under its text."""
    if not width:
        return lines
    out = []
    for line in lines:
        body = line.lstrip(" ")
        indent = " " * (len(line) - len(body) + 4)
        out.extend(textwrap.wrap(line, width=max(width, 40), subsequent_indent=indent,
                                 break_on_hyphens=False) or [line])
    return out


def summary(report: Report, *, color: bool = False, verbose: bool = False, width: int | None = None) -> str:
    def paint(text: str, code: str) -> str:  # `text` is inert already: paint only what is
        return f"\033[{code}m{text}\033[0m" if color else text

    lines = [f"{name(report.assignment)} · {terminal(report.submission.path, PATH_LIMIT)}"]
    if report.status == "error":
        lines.append(paint(f"  not graded: {flowing(report.error, MESSAGE_LIMIT)}", "31"))
    titles = [terminal(ex.title) for ex in report.exercises]
    column = max((len(t) for t in titles), default=0)
    for ex, title in zip(report.exercises, titles):
        score = scored(ex.score, ex.max_score, ex.checks)
        score = f"{score:>{len(score) + 4 - len(_points(ex.score))}}"  # the points right-aligned in 4
        judged = ex.max_score - sum(c.max_score for c in later(ex.checks))
        colour = _colour(ex.score, judged) if judged else "2"  # nothing judged here: no verdict to colour
        tally = f"  ({_tally(ex)})" if judged or any(c.reason != "on_hand_in" for c in ex.checks) else ""
        lines.append(f"  {title:<{column}}  {paint(score, colour)}{tally}")
        lines.extend(_wrapped(_check_lines(ex, verbose), width))
    if any(c.status != "passed" for ex in report.exercises for c in ex.checks):
        lines.append(paint(f"  {LEGEND}", "2"))
    for problem in report.cell_problems:
        if problem.exercise is not None:
            continue  # told under its exercise
        lines.append(paint(f"  note: {flowing(problem.message, MESSAGE_LIMIT)}", "2"))
    total = scored(report.score, report.max_score, _all_checks(report))
    said = [f"seed {report.seed}"] if report.seed is not None else []  # a student's view of a hand-in has neither
    said += [f"{report.duration_s:.1f} s"] if report.duration_s is not None else []
    lines.append(f"Total {paint(total, '1')}" + (f"   ({', '.join(said)})" if said else ""))
    if report.late is not None:
        lines.append(f"  late: submitted {report.late.submitted_at}, {report.late.days_late} day(s) after "
                     f"{report.late.due}: -{_points(report.late.points)} ({report.late.rule})")
    for a in report.adjustments:
        lines.append(f"  adjusted {a.points:+g} by {terminal(a.by, 60)} on {terminal(a.at, 40)}: "
                     f"{flowing(a.reason, MESSAGE_LIMIT)}")
    if report.final_score is not None:
        lines.append(f"Final {paint(f'{_points(report.final)} / {_points(report.max_score)}', '1')}")
    return "\n".join(lines)
