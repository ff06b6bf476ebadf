"""The terminal summary of a report: per exercise score / max, each failed check and why."""

from __future__ import annotations

from grader.report import ExerciseResult, Report

_MARK = {"passed": "✓", "failed": "✗", "error": "!", "timeout": "⏱", "skipped": "-"}


def _points(x: float) -> str:
    return f"{x:g}"


def _check_lines(ex: ExerciseResult) -> list[str]:
    """Why points were lost: "not answered yet" once, or each failed check with its message."""
    if all(c.status == "failed" and (c.message or "").startswith("Not answered yet") for c in ex.checks):
        names = sorted({c.message.split("`")[1] for c in ex.checks if c.message and "`" in c.message})
        return [f"      - not answered yet: define {', '.join(names)}"]
    lines = []
    for c in ex.checks:
        if c.status != "passed":
            tag = " (hidden inputs)" if c.hidden else ""
            lines.append(f"      {_MARK[c.status]} {c.id}{tag}, {_points(c.max_score)} pts: {c.message}")
    return lines


def summary_exercise(ex: ExerciseResult) -> str:
    """One exercise, for the notebook's self-check cells."""
    head = "✅" if ex.score == ex.max_score else "❌"
    return "\n".join([f"{head} {ex.title}: {_points(ex.score)} / {_points(ex.max_score)}"] + _check_lines(ex))


def summary(report: Report, *, color: bool = False) -> str:
    def paint(text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if color else text

    lines = [f"{report.assignment} · {report.submission.path}"]
    if report.status == "error":
        lines.append(paint(f"  not graded: {report.error}", "31"))
    width = max((len(e.title) for e in report.exercises), default=0)
    for ex in report.exercises:
        full = ex.score == ex.max_score
        score = f"{_points(ex.score):>4} / {_points(ex.max_score)}"
        lines.append(f"  {ex.title:<{width}}  {paint(score, '32' if full else '33')}")
        lines.extend(_check_lines(ex))
    for problem in report.cell_problems:
        lines.append(paint(f"  note: {problem.message}", "2"))
    total = f"{_points(report.score)} / {_points(report.max_score)}"
    lines.append(f"Total {paint(total, '1')}   (seed {report.seed}, {report.duration_s:.1f} s)")
    return "\n".join(lines)
