"""What `grade validate` writes: the kill matrix for a terminal, JUnit XML, JSON and an HTML page.

The kill matrix has one row per mutant (hand-written, derived, honest) and one column per check
of the assignment: `x` where the check kills the mutant (does not pass), `.` where it passes, a
blank where the check belongs to another exercise. A survivor is a mutant no check of its
exercises kills; an honest variant that any check kills is a check too strict. A derived mutant the
reference gives nothing to change in is a row `not applicable`, blank: it was not graded.

Every string that a mutant's grading produced (check messages, which quote answers) is made
inert before it reaches a terminal, an XML attribute or an HTML page.

On a terminal, `Live` prints each row the moment it is judged (a validation takes minutes) with
a status line on stderr redrawn in place; the kill matrices follow at the end (`matrices`).
"""

from __future__ import annotations

import html
import shutil
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import TextIO

from grader.course.validate import AssignmentValidation, MatrixRow, Row, Status, Validation
from grader.inert import MESSAGE_LIMIT, name, terminal, text

_KILLED, _PASSED, _ELSEWHERE = "x", ".", " "


def _cell(row: MatrixRow, check: str) -> str:
    exercise = check.split(".", 1)[0]
    if row.not_applicable or (row.family != "honest" and exercise not in row.exercises):
        return _ELSEWHERE
    return _KILLED if check in row.killed_by else _PASSED


def _verdict(row: MatrixRow) -> str:
    if row.not_applicable:
        return "not applicable"
    if row.family == "honest":
        return "KEPT FULL MARKS" if not row.killed_by else "LOST POINTS"
    if row.survived:
        return "equivalent" if row.equivalent else "SURVIVES"
    return "killed"


def matrix_table(result: AssignmentValidation) -> str:
    """The kill matrix of one assignment: checks numbered in a legend, one line per mutant."""
    if not result.matrix:
        return ""
    checks = result.checks
    legend = [f"  {k + 1:>2} {name(c)}" for k, c in enumerate(checks)]
    width = max(len(name(r.mutant)) for r in result.matrix)
    ruler = "".join(str((k + 1) % 10) for k in range(len(checks)))
    title = (f"kill matrix of {name(result.assignment)} ({_KILLED}: the check kills the mutant; "
             f"{_PASSED}: it passes; blank: another exercise)")
    lines = [title, *legend, "",
             f"  {'mutant':<{width}}  {'family':<17}  {ruler}  verdict"]
    for row in result.matrix:
        cells = "".join(_cell(row, c) for c in checks)
        lines.append(f"  {name(row.mutant):<{width}}  {row.family:<17}  {cells}  {_verdict(row)}")
    families = Counter(r.family for r in result.matrix if not r.not_applicable)
    survivors = [r.mutant for r in result.matrix if r.family != "honest" and r.survived and not r.equivalent]
    skipped = sum(1 for r in result.matrix if r.not_applicable)
    lines.append("")
    lines.append("  " + ", ".join(f"{n} {f}" for f, n in sorted(families.items()))
                 + f"; survivors: {', '.join(name(s) for s in survivors) or 'none'}"
                 + (f"; not applicable: {skipped}" if skipped else ""))
    return "\n".join(lines)


def junit(validation: Validation) -> str:
    """One <testcase> per validated item, grouped in a <testsuite> per assignment."""
    suites = ET.Element("testsuites", name="grade validate")
    for result in validation.assignments:
        failures = [r for r in result.rows if not r.ok]
        suite = ET.SubElement(suites, "testsuite", name=text(result.assignment), tests=str(len(result.rows)),
                              failures=str(sum(1 for r in failures if not r.bug)),
                              errors=str(sum(1 for r in failures if r.bug)))
        for row in result.rows:
            case = ET.SubElement(suite, "testcase", classname=f"{text(result.assignment)}.{row.kind}",
                                 name=text(row.item))
            if not row.ok:
                tag = "error" if row.bug else "failure"
                ET.SubElement(case, tag, message=text(row.detail)[:MESSAGE_LIMIT]).text = text(row.detail)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _row_html(row: Row) -> str:
    mark = "ok" if row.ok else "FAILED"
    return (f"<tr class='{'ok' if row.ok else 'bad'}'><td>{html.escape(row.item)}</td><td>{mark}</td>"
            f"<td>{html.escape(text(row.detail))}</td></tr>")


_HEAD = ("<!doctype html><meta charset='utf-8'><title>grade validate</title><style>"
         "body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
         "td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px}tr.bad td{background:#fdd}"
         "td.k{background:#c33;color:#fff;text-align:center}td.p{text-align:center;color:#999}"
         "th.v{writing-mode:vertical-rl;white-space:nowrap}</style><h1>grade validate</h1>")


def page(validation: Validation) -> str:
    """A self-contained HTML page: every item, then each assignment's kill matrix."""
    parts = [_HEAD]
    for result in validation.assignments:
        parts.append(f"<h2>{html.escape(result.assignment)}</h2><table><tr><th>item</th><th>result</th>"
                     "<th>detail</th></tr>" + "".join(_row_html(r) for r in result.rows) + "</table>")
        if not result.matrix:
            continue
        head = "".join(f"<th class='v'>{html.escape(c)}</th>" for c in result.checks)
        body = []
        for row in result.matrix:
            cells = []
            for check in result.checks:
                mark = _cell(row, check)
                cells.append("<td class='k'>x</td>" if mark == _KILLED else
                             "<td class='p'>.</td>" if mark == _PASSED else "<td></td>")
            bad = (row.family == "honest" and row.killed_by) or (row.survived and not row.equivalent
                                                                  and row.family != "honest")
            if row.not_applicable:
                cells = [f"<td colspan='{len(result.checks)}'>{html.escape(text(row.not_applicable))}</td>"]
            body.append(f"<tr class='{'bad' if bad else 'ok'}'><td>{html.escape(row.mutant)}</td>"
                        f"<td>{row.family}</td>{''.join(cells)}<td>{_verdict(row)}</td></tr>")
        parts.append(f"<h3>kill matrix</h3><table><tr><th>mutant</th><th>family</th>{head}<th>verdict</th></tr>"
                     + "".join(body) + "</table>")
    return "".join(parts) + "\n"


def write(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")


def matrices(validation: Validation) -> str:
    """Every assignment's kill matrix, one block each."""
    return "\n\n".join(m for m in (matrix_table(a) for a in validation.assignments) if m)


def console(validation: Validation) -> str:
    """The whole result at once: the table of rows, then the kill matrices."""
    from grader.course.validate import table

    return "\n\n".join(b for b in (table(validation.rows), matrices(validation)) if b)


def row_line(row: Row) -> str:
    """One row as soon as it is known: the verdict first, since the columns cannot be aligned
    before every row is in."""
    return (f"{'ok' if row.ok else 'FAILED':<6}  {name(row.assignment)}  {name(row.item)}"
            + (f"  ({terminal(row.detail, MESSAGE_LIMIT)})" if row.detail else ""))


def status_line(status: Status) -> str:
    if status.total is None:
        return f"validate {name(status.assignment)}: planning (deriving mutants)"
    return f"validate {name(status.assignment)}: {status.done}/{status.total} items, {status.running} running"


class Live:
    """Rows on `out` as they come, each flushed at once (so `| head` and CI logs see them); on a
    terminal, the status line on `err`, rewritten in place and cleared before each row so the two
    never share a line. Off a terminal, no status and no carriage returns."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None):
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.enabled = self.err.isatty()
        self._status = ""
        self._drawn = 0

    def row(self, row: Row) -> None:
        self._clear()
        self.out.write(row_line(row) + "\n")
        self.out.flush()
        self._draw()

    def status(self, status: Status) -> None:
        self._status = status_line(status)
        self._draw()

    def _draw(self) -> None:
        if self.enabled and self._status:
            shown = self._status[:max(shutil.get_terminal_size().columns - 1, 20)]  # a wrapped line is not redrawn
            self.err.write("\r" + shown.ljust(self._drawn))
            self.err.flush()
            self._drawn = len(shown)

    def _clear(self) -> None:
        if self.enabled and self._drawn:
            self.err.write("\r" + " " * self._drawn + "\r")
            self.err.flush()
            self._drawn = 0

    def close(self) -> None:
        self._clear()
        self._status = ""

