"""A batch's final scores for an LMS: Canvas's gradebook export filled in, Moodle's grade import CSV.

Canvas (`fill_canvas`). Canvas imports grades from a CSV shaped like its own export (Grades ->
Export -> CSV), so the safest file to give it is its own export with one column filled in and
every other byte left alone. The format, as Canvas's own code writes and reads it
(instructure/canvas-lms `lib/gradebook_exporter.rb` and `lib/gradebook_importer.rb`) and as its
guides describe it (e.g. ts.vcu.edu "Gradebook Action Menu", nemogb "Detailed Canvas Export Info",
OSU "Import CSV file to Carmen grades"):

- a header row: `Student` (or `LastName`, `FirstName`), `ID` (Canvas's user id), `SIS User ID`
  (only in exports with SIS ids), `SIS Login ID`, then maybe `Integration ID` and `Root Account`,
  then `Section`; custom columns (notes) follow, then one column per assignment named
  "Title (numeric id)", then read-only totals: per assignment group and overall "Current Points",
  "Final Points", "Current Score", "Unposted Current Score", "Final Score", "Unposted Final Score",
  "Current Grade" ... "Override Score"; the importer ignores these (its NON_ASSIGNMENT_COLUMN_HEADERS,
  matched anywhere in a header, so an assignment titled "Final Grade project" is ignored too);
- maybe a row saying "Manual Posting" under assignments whose grades are posted by hand (the
  importer skips a row whose cells are all empty, "Muted" or "Manual Posting...");
- a row whose first cell contains "Points Possible", with each assignment's points and
  "(read only)" under computed columns (the importer reads an assignment as read-only from it);
- one row per student, the test student ("Student, Test") last; a score cell may hold "EX"
  (excused) or "N/A" (not assigned to that student); numbers carry two decimals ("9.50").

The importer finds each student by the `ID` cell, else by SIS User ID or SIS Login ID, else by
name; it treats a blank cell (or "-") as "no change", reads "12,5" as 12.5, and splits on `;`
instead of `,` when that gives more fields. `fill_canvas` keeps those cells as they are, so
Canvas finds every student it found before, and writes only the target column's student cells.

A batch graded from Canvas's own "Download Submissions" names its students by Canvas's user id
(`garcíajosé_10002`, from `garcíajosé_LATE_10002_5551_ch2-jit.ipynb`; grader/term/lms_names.py
cites Canvas's code for the names): those match the export's `ID` column and nothing else, and
Canvas's LATE mark is listed. Gradescope's export names them by e-mail and student id, matched as
any id is. A student of the batch that matches no row is named with what was looked for, and
`grade export` exits 4 (grader/term/commands.py).

Moodle (`write_moodle`). Moodle's grade import (Grades -> Import -> CSV file; docs.moodle.org
"Grade import"; moodle/moodle `grade/import/csv/classes/load_data.php`) takes any header: the
instructor maps one column to a user field (username, email address, ID number or Moodle's user
id), each grade column to a grade item and a feedback column to that item's feedback. A value
that matches no user aborts the whole import, so only graded students get a row; an empty grade
or "-" clears a grade, so students whose submission could not be graded get none. Moodle refuses
grades above 100 unless the site allows more (`unlimitedgrades`); e-mail addresses are matched
case-sensitively (MDL-29315).

Student ids are the batch's folder names, hence student text: `fill_canvas` writes none into
the Canvas file (only numbers), and `write_moodle` writes them through `inert.csv_cell`.
"""

from __future__ import annotations

import contextlib
import csv
import io
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from grader import inert
from grader.atomic import write_atomic
from grader.errors import UsageError
from grader.report import LmsSubmission, Report
from grader.term import lms_names

_BOM = "\ufeff"
_ASSIGNMENT_HEADER = re.compile(r"\A(?P<title>.*)\s+\((?P<id>\d+)\)\Z", re.DOTALL)  # Canvas's title_and_id
_COMPUTED = re.compile("Current Score|Current Points|Current Grade|Final Score|Final Points|Final Grade"
                       "|Override Score|Override Grade|Override Status")  # the importer's list, unanchored
_NOT_STUDENT = re.compile(r"^\s*(Muted|Manual Posting.*)?\s*$", re.IGNORECASE)
_DECIMAL = re.compile(r"^-?[0-9.,]+$")
_TEST_STUDENT = "Student, Test"  # how Canvas's student view ("Test Student") is listed, sortable name


# ----------------------------------------------------------------------------- what fill_canvas says


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Scaling(_Model):
    """Scores were rescaled: the grader's points out of `max_score` became Canvas's out of
    `points_possible` (score * points_possible / max_score, rounded to two decimals)."""

    max_score: float
    points_possible: float


_UnmatchedReason = Literal["not in the roster", "several roster rows match",
                           "another student matches the same row", "anonymous in the LMS's download"]
_UNMATCHED_REASONS: tuple[_UnmatchedReason, ...] = get_args(_UnmatchedReason)


class UnmatchedStudent(_Model):
    """A student of the batch whose score went nowhere, and why."""

    student: str
    reason: _UnmatchedReason
    lines: list[int] = Field(default_factory=list, description="the roster lines concerned (1 = the header)")
    looked_for: str = Field(default="", description="what was looked for in the roster, in words")

    def line(self) -> str:
        """One line for the terminal: the student, why, and what was looked for (inert)."""
        where = f" (lines {', '.join(map(str, self.lines))})" if self.lines else ""
        sought = f"; looked for {self.looked_for}" if self.looked_for else ""
        return f"not matched: {inert.name(self.student)}: {self.reason}{where}{inert.terminal(sought)}"


_RowReason = Literal["no report", "test student", "not graded", "excused", "not assigned",
                     "several students match"]


class RowNotFilled(_Model):
    """A student row of the roster whose cell was not written: it keeps what the export had, which
    Canvas's import reads as "no change"."""

    line: int = Field(description="the line of the roster file where the row starts (1 = the header)")
    name: str = Field(description="Canvas's Student cell")
    login: str = Field(description="Canvas's SIS Login ID cell")
    student: str | None = Field(default=None, description="the batch's student matched to this row, if any")
    reason: _RowReason


class CanvasFill(_Model):
    """What `fill_canvas` wrote and, as importantly, what it did not."""

    out: Path
    column: str = Field(description="the header of the filled column")
    assignment: str
    points_possible: float | None = Field(description="the column's Points Possible (None: none given)")
    scaling: Scaling | None = Field(description="set when Points Possible is not the grader's max_score")
    matched: int = Field(description="students of the batch matched to a roster row each (a Gradescope "
                                     "group's members: a row each, all given the group's score)")
    filled: int = Field(description="cells written")
    replaced: list[str] = Field(default_factory=list,
                                description="students whose cell held a different score, now replaced")
    unmatched: list[UnmatchedStudent] = Field(default_factory=list)
    not_filled: list[RowNotFilled] = Field(default_factory=list)
    not_graded: list[str] = Field(default_factory=list,
                                  description="students whose report is an error: no score written for them")
    late: list[str] = Field(default_factory=list, description=(
        "students whose file the LMS marked late (Canvas's LATE): listed, their score is not changed for it"))
    late_policy: bool = Field(default=False, description=(
        "OUT/late.toml is in force: it takes points off by the submission times, whatever the LMS's mark"))
    late_penalized: list[str] = Field(default_factory=list, description=(
        "of `late`, those the late policy took points off"))

    @property
    def graded_unmatched(self) -> list[UnmatchedStudent]:
        """Graded students whose score went nowhere: `grade export` fails while there is one."""
        return [u for u in self.unmatched if u.student not in self.not_graded]

    def describe(self) -> list[str]:
        """Lines for the instructor's terminal, every id and name made inert."""
        scaling = self.scaling
        note = (f", rescaled from {_number(scaling.max_score)} to {_number(scaling.points_possible)} points"
                if scaling else "")
        lines = [f"{inert.terminal(self.out)}: {self.filled} scores in {inert.terminal(self.column)}{note}"]
        if self.replaced:
            lines.append(f"{len(self.replaced)} replace a different score already in Canvas: "
                         + _names(self.replaced))
        for reason in _UNMATCHED_REASONS:
            ids = [u.student for u in self.unmatched if u.reason == reason]
            if ids:
                lines.append(f"{len(ids)} of the batch, {reason}: " + _names(ids))
        if self.not_graded:
            lines.append(f"{len(self.not_graded)} could not be graded, nothing written: "
                         + _names(self.not_graded))
        if self.late and self.late_policy:
            lines.append(f"{len(self.late)} marked late by the LMS (OUT/late.toml takes points off by the "
                         f"submission times, not by this mark: {len(self.late_penalized)} of them lost "
                         "points): " + _names(self.late))
        elif self.late:
            lines.append(f"{len(self.late)} marked late by the LMS (no points taken off here; Canvas's late "
                         "policy, or an OUT/late.toml, does that): " + _names(self.late))
        for reason in ("no report", "excused", "not assigned", "several students match"):
            names = [r.name for r in self.not_filled if r.reason == reason]
            if names:
                lines.append(f"{len(names)} roster rows left as exported ({reason}): " + _names(names))
        return lines


def _names(items: list[str], shown: int = 10) -> str:
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(inert.name(s) for s in items[:shown]) + more


# ----------------------------------------------------------------------------- CSV that keeps its bytes


class _Malformed(Exception):
    """Not CSV at this line (internal: becomes a UsageError naming the file)."""

    def __init__(self, line: int):
        super().__init__(line)
        self.line = line


@dataclass(frozen=True)
class _Record:
    """One CSV record: its cells' values and where each cell's raw text lies in the file."""

    line: int
    values: list[str]
    spans: list[tuple[int, int]]


@dataclass(frozen=True)
class _Sheet:
    """A CSV file read so that it can be written back byte for byte, but for the cells replaced."""

    text: str
    bom: bool
    delimiter: str
    records: list[_Record]

    def render(self, cells: dict[tuple[int, int], str]) -> bytes:
        """The file with cells[(record, column)] in place of those cells' raw text."""
        out, pos = [], 0
        for start, end, value in sorted((*self.records[r].spans[c], v) for (r, c), v in cells.items()):
            assert not set(value) & {self.delimiter, '"', "\r", "\n"}, value
            out += [self.text[pos:start], value]
            pos = end
        out.append(self.text[pos:])
        return ((_BOM if self.bom else "") + "".join(out)).encode("utf-8")


def _newlines(s: str) -> int:
    return s.count("\n") + s.count("\r") - s.count("\r\n")


def _parse(text: str, delimiter: str) -> list[_Record]:
    """RFC 4180 records with the spans of their cells; a blank line is no record (as for Python's
    csv and Ruby's CSV). A quote inside an unquoted cell, or text after a closing quote, is an error,
    as it is for Canvas's importer."""
    quoted = re.compile(r'"([^"]*(?:""[^"]*)*)"')
    plain = re.compile(f'[^{re.escape(delimiter)}"\r\n]*')
    records: list[_Record] = []
    pos, line, n = 0, 1, len(text)
    while pos < n:
        if text[pos] in "\r\n":
            pos += 2 if text.startswith("\r\n", pos) else 1
            line += 1
            continue
        start_line, values, spans = line, [], []
        while True:
            m = (quoted if text[pos:pos + 1] == '"' else plain).match(text, pos)
            if m is None:
                raise _Malformed(line)
            raw = m.group(0)
            values.append(m.group(1).replace('""', '"') if m.re is quoted else raw)
            spans.append((pos, m.end()))
            line += _newlines(raw)
            pos = m.end()
            if pos >= n:
                break
            if text[pos] == delimiter:
                pos += 1
                continue
            if text[pos] in "\r\n":
                pos += 2 if text.startswith("\r\n", pos) else 1
                line += 1
                break
            raise _Malformed(line)
        records.append(_Record(start_line, values, spans))
    return records


def _read_sheet(path: Path) -> _Sheet:
    """UTF-8 (a BOM kept), `,` or `;` chosen as Canvas's importer chooses: `;` if it splits the
    header into more cells."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read the Canvas export {path}: {e.strerror or e}") from None
    bom = data.startswith(_BOM.encode("utf-8"))
    try:
        text = data.decode("utf-8")[1 if bom else 0:]
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not UTF-8: download it again from Canvas (Grades, Export) "
                         "rather than saving it from a spreadsheet") from None
    parsed: dict[str, list[_Record]] = {}
    errors: list[_Malformed] = []
    for delimiter in (",", ";"):
        try:
            parsed[delimiter] = _parse(text, delimiter)
        except _Malformed as e:
            errors.append(e)
    if not parsed:
        raise UsageError(f"{path}, line {errors[0].line}: not valid CSV (a stray quote)")
    width = {d: len(r[0].values) if r else 0 for d, r in parsed.items()}
    delimiter = max(width, key=lambda d: (width[d], d == ","))  # `;` only if it gives more cells
    return _Sheet(text, bom, delimiter, parsed[delimiter])


# ----------------------------------------------------------------------------- the export's layout


@dataclass(frozen=True)
class _RosterRow:
    record: int  # index into the sheet's records
    line: int
    name: str
    login: str
    sis_user_id: str
    user_id: str  # Canvas's own id (the ID column): what its "Download Submissions" names carry


@dataclass(frozen=True)
class _Layout:
    header: list[str]
    candidates: list[int]  # assignment columns the importer would write (not computed, not read-only)
    points: _Record | None
    students: list[_RosterRow]


def _cell(record: _Record, index: int | None) -> str:
    return record.values[index] if index is not None else ""


def _canvas_layout(sheet: _Sheet, path: Path) -> _Layout:
    """Find the header, the Points Possible row, the student rows and the assignment columns."""
    if not sheet.records:
        raise UsageError(f"{path} is empty")
    header = sheet.records[0].values
    two_names = header[:2] == ["LastName", "FirstName"]
    if not _canvas_header(header):
        raise UsageError(f"{path} is not a Canvas gradebook export: its first row should begin with "
                         "Student, ID, ... Section (Grades, Export, CSV)")
    for record in sheet.records[1:]:
        if len(record.values) != len(header):
            raise UsageError(f"{path}, line {record.line}: {len(record.values)} cells where the header has "
                             f"{len(header)}; use the file as Canvas exported it")
    column = {h: i for i, h in reversed(list(enumerate(header)))}
    points = next((r for r in sheet.records[1:] if "Points Possible" in r.values[0]), None)
    students = [_RosterRow(i, r.line, f"{r.values[0]}, {r.values[1]}" if two_names else r.values[0],
                           _cell(r, column.get("SIS Login ID")), _cell(r, column.get("SIS User ID")),
                           _cell(r, column.get("ID")).strip())
                for i, r in enumerate(sheet.records) if i and _is_student(r)]
    first = column["Section"] + 1
    candidates = [i for i in range(first, len(header))
                  if _ASSIGNMENT_HEADER.match(header[i]) and not _COMPUTED.search(header[i])
                  and not (points and re.search(r"read\s+only", points.values[i]))]
    return _Layout(header, candidates, points, students)


def _canvas_header(header: list[str]) -> bool:
    """Whether a first row is a Canvas gradebook export's: Student, ID (or LastName, FirstName), ... Section."""
    two_names = header[:2] == ["LastName", "FirstName"]
    return bool(header) and (("Student" in header[0] and len(header) > 1 and "ID" in header[1]) or two_names) \
        and "Section" in header


def _is_student(record: _Record) -> bool:
    if "Points Possible" in record.values[0]:
        return False
    return not all(_NOT_STUDENT.match(v) for v in record.values)


def _title(header: str) -> str:
    m = _ASSIGNMENT_HEADER.match(header)
    return m.group("title") if m else header


def _choose_column(layout: _Layout, assignment: str, column: str | None, path: Path) -> int:
    """The column named by `column` (its whole header, its title without "(id)", or its id), else
    the one assignment column whose title holds the assignment id as a word ("ch2-jit" in
    "Chapter 2: jax.jit (ch2-jit)", not in "ch2-jitter"), case-insensitively."""
    headers = [layout.header[i] for i in layout.candidates]
    if column is not None:
        found = ([i for i in layout.candidates if layout.header[i] == column]
                 or [i for i in layout.candidates if _title(layout.header[i]) == column]
                 or [i for i in layout.candidates if layout.header[i].endswith(f"({column})")])
        if not found:
            raise UsageError(f"{column!r} is not a column of {path} that Canvas imports scores into; "
                             f"its assignment columns are: {_quoted(headers)}")
    else:
        word = re.compile(rf"(?<![\w-]){re.escape(assignment)}(?![\w-])", re.IGNORECASE)
        found = [i for i in layout.candidates if word.search(_title(layout.header[i]))]
        if not found:
            raise UsageError(f"no assignment column of {path} names {assignment}: choose one of "
                             f"{_quoted(headers)} with --canvas-column")
    if len(found) > 1:
        raise UsageError(f"{len(found)} columns of {path} match {column or assignment}: "
                         f"{_quoted([layout.header[i] for i in found])}; choose one with --canvas-column")
    return found[0]


def _quoted(items: list[str]) -> str:
    return ", ".join(repr(s) for s in items) or "none"


def canvas_roster(path: Path) -> frozenset[str]:
    """A Canvas gradebook export's user ids (its `ID` cells): what decides whose a download's file
    is when its name reads several ways (lms_names.read)."""
    layout = _canvas_layout(_read_sheet(path), path)
    return frozenset(row.user_id for row in layout.students if row.user_id)


def roster_students(path: Path) -> list[str] | None:
    """The students of a Canvas gradebook export, each by the id a batch's student matches first
    (`_find_id`): SIS Login ID, else SIS User ID, else Canvas's user id; the test student left
    out. None when the file is not a Canvas export (its first row is not Canvas's header)."""
    sheet = _read_sheet(path)
    if not sheet.records or not _canvas_header(sheet.records[0].values):
        return None
    layout = _canvas_layout(sheet, path)
    ids = [(row.login.strip() or row.sis_user_id.strip() or row.user_id) for row in layout.students
           if row.name != _TEST_STUDENT]
    return [i for i in ids if i]


def stored_canvas_roster(out_dir: Path) -> frozenset[str] | None:
    """The Canvas export a batch keeps (`grade export OUT --canvas`), read, or None: no batch in
    OUT yet, no export kept, or one that cannot be read any more (its names then decide nothing)."""
    import sqlite3

    from grader.outputs import names
    from grader.outputs.gradebook import ExportSettings

    book = names.OutputFolder(out_dir).gradebook
    if not book.is_file():
        return None
    try:  # read only, before the batch takes OUT's lock: nothing is written here
        with contextlib.closing(sqlite3.connect(f"{book.resolve().as_uri()}?mode=ro", uri=True)) as db:
            row = db.execute("SELECT value FROM settings WHERE name = 'exports'").fetchone()
        roster = ExportSettings.model_validate_json(row[0]).canvas_roster if row else None
        return canvas_roster(Path(roster)) if roster else None
    except (UsageError, OSError, ValueError, sqlite3.Error):
        return None


# ----------------------------------------------------------------------------- numbers


def _number(x: float) -> str:
    """Plain, at most two decimals as Canvas keeps them: 12.5, 100, 0.33, never 12.500000 or -0."""
    s = f"{round(x, 2) + 0.0:.2f}".rstrip("0").rstrip(".")
    return "0" if s == "-0" else s


def _read_number(cell: str) -> float | None:
    """A number as Canvas's importer reads one: "12,5" and "12.50" are 12.5; else None."""
    s = cell.strip()
    if not _DECIMAL.match(s):
        return None
    *whole, last = re.split(r"[,.]", s)
    try:
        return float(f"{''.join(whole)}.{last}" if whole else last)
    except ValueError:
        return None


# ----------------------------------------------------------------------------- matching


def _key(s: str) -> str:
    """Case-insensitive, and NFC: a folder name from macOS (NFD "José") matches Canvas's NFC."""
    return unicodedata.normalize("NFC", s).strip().casefold()


def _bare_match(a: str, b: str) -> bool:
    """"alice" and "alice@uni.edu": equal but for a domain exactly one of them has."""
    if ("@" in a) == ("@" in b):
        return False
    return a.split("@", 1)[0] == b.split("@", 1)[0] != ""


def _find_id(student: str, rows: list[_RosterRow]) -> list[int]:
    """Rows matching a student id, by the first rule that matches any: SIS Login ID, then SIS
    User ID (both exactly, case-insensitive), then SIS Login ID but for an @domain."""
    key = _key(student)
    rules = (lambda r: _key(r.login) == key, lambda r: _key(r.sis_user_id) == key,
             lambda r: _bare_match(_key(r.login), key))
    for rule in rules:
        found = [i for i, r in enumerate(rows) if rule(r)]
        if found:
            return found
    return []


def _find(student: str, lms: LmsSubmission | None, rows: list[_RosterRow]) -> tuple[list[int], str]:
    """The rows of a student, and what was looked for. A Canvas download's student is its user
    id in the ID column, nothing else (its name part is Canvas's, not a login); a Gradescope
    export's, its e-mail then its student id, as any id (and each member of a group submission
    the same way); everyone else, the id itself."""
    if lms is not None and lms.lms == "canvas" and lms.user_id:
        found = [i for i, r in enumerate(rows) if r.user_id == lms.user_id]
        return found, f"Canvas user id {lms.user_id} in the ID column"
    keys = [student]
    if lms is not None and lms.lms == "gradescope":
        keys += [k for k in (lms.email, lms.sid) if k and k != student]
    for key in keys:
        found = _find_id(key, rows)
        if found:
            return found, _looked_for(keys)
    return [], _looked_for(keys)


def _looked_for(keys: list[str]) -> str:
    shown = " or ".join(repr(k) for k in keys)
    return f"{shown} in SIS Login ID, SIS User ID, and SIS Login ID without its @domain"


def _match(students: list[str], identities: dict[str, LmsSubmission | None],
           rows: list[_RosterRow]) -> tuple[dict[int, str], set[int], list[UnmatchedStudent]]:
    """Row index -> its one student; the rows that several students match; who matched nothing.
    Two ids on one row (alice and alice@uni.edu both handed in) fill neither: a person decides."""
    claims: dict[int, list[str]] = {}
    unmatched: list[UnmatchedStudent] = []
    for student in students:
        lms = identities.get(student)
        if lms is not None and lms.anonymous:
            unmatched.append(UnmatchedStudent(student=student, reason="anonymous in the LMS's download",
                                              looked_for="nothing (download them with names shown)"))
            continue
        searches = [_find(student, lms, rows)]
        if lms is not None and lms.lms == "gradescope":  # a group submission: every member's row
            searches += [(_find_id(m, rows), f"group member {_looked_for([m])}") for m in lms.group]
        for found, looked_for in searches:
            if len(found) == 1:
                if student not in claims.setdefault(found[0], []):
                    claims[found[0]].append(student)
            else:
                unmatched.append(UnmatchedStudent(
                    student=student, reason="several roster rows match" if found else "not in the roster",
                    lines=[rows[i].line for i in found], looked_for=looked_for))
    shared = {i for i, ids in claims.items() if len(ids) > 1}
    for i in shared:
        unmatched += [UnmatchedStudent(student=s, reason="another student matches the same row",
                                       lines=[rows[i].line]) for s in claims[i]]
    return {i: ids[0] for i, ids in claims.items() if i not in shared}, shared, unmatched


# ----------------------------------------------------------------------------- filling


def _one_assignment(reports: dict[str, Report]) -> str:
    """An LMS column holds one assignment: a batch of reports for several is a mistake to stop at."""
    ids = sorted({r.assignment for r in reports.values()})
    if not ids:
        raise UsageError("no reports to export: grade a batch first")
    if len(ids) > 1:
        raise UsageError(f"the reports are for {len(ids)} assignments ({', '.join(map(inert.name, ids))}); "
                         "export one assignment at a time")
    return ids[0]


def _max_score(reports: dict[str, Report]) -> float | None:
    maxima = sorted({r.max_score for r in reports.values() if r.status == "graded"})
    if len(maxima) > 1:
        listed = ", ".join(map(_number, maxima))
        raise UsageError(f"the graded reports disagree on the maximum score ({listed}): "
                         "regrade the batch with one version of the assignment")
    return maxima[0] if maxima else None


def _scaling(max_score: float | None, points: float | None) -> Scaling | None:
    if max_score is None or points is None or max_score <= 0 or abs(points - max_score) < 1e-9:
        return None
    return Scaling(max_score=max_score, points_possible=points)


def _scaled(report: Report, scaling: Scaling | None) -> float:
    return report.final * scaling.points_possible / scaling.max_score if scaling else report.final


def _unfilled(row: _RosterRow, reason: _RowReason, student: str | None = None) -> RowNotFilled:
    return RowNotFilled(line=row.line, name=row.name, login=row.login, student=student, reason=reason)


def _blank_reason(row: _RosterRow, cell: str, report: Report | None, shared: bool) -> _RowReason | None:
    """Why this row's cell is not written, or None to write it."""
    if shared:
        return "several students match"
    if report is None:
        return "test student" if row.name == _TEST_STUDENT and not row.login else "no report"
    if report.status != "graded":
        return "not graded"  # a submission that could not be graded must not quietly become 0
    if cell.strip().upper() == "EX":
        return "excused"  # the instructor excused this student in Canvas: not undone from here
    if cell.strip() == "N/A":
        return "not assigned"  # Canvas would ignore a score here anyway
    return None


@dataclass(frozen=True)
class _Plan:
    cells: dict[tuple[int, int], str]  # (record, column) -> the number to write there
    not_filled: list[RowNotFilled]
    replaced: list[str]


def _plan(sheet: _Sheet, layout: _Layout, target: int, reports: dict[str, Report],
          matched: dict[int, str], shared: set[int], scaling: Scaling | None) -> _Plan:
    """Each roster student row: the number to write in the target cell, or why none."""
    plan = _Plan({}, [], [])
    for i, row in enumerate(layout.students):
        student = matched.get(i)
        report = reports[student] if student is not None else None
        cell = sheet.records[row.record].values[target]
        reason = _blank_reason(row, cell, report, i in shared)
        if reason is not None or report is None or student is None:
            plan.not_filled.append(_unfilled(row, reason or "no report", student))
            continue
        value = _number(_scaled(report, scaling))
        before = _read_number(cell)
        if before is not None and _number(before) != value:
            plan.replaced.append(student)
        plan.cells[(row.record, target)] = value
    return plan


def fill_canvas(roster: Path, reports: dict[str, Report], out: Path, *,
                column: str | None = None, late_policy: bool = False) -> CanvasFill:
    """Write OUT: the Canvas export ROSTER with the assignment's column filled with `report.final`.

    Which column: `column` (whole header, title, or numeric id), else the one assignment column
    whose title names the batch's assignment id; none or several is a UsageError that lists them.
    Read-only columns (totals, grades, "(read only)" under Points Possible) are never candidates.

    Which row: a student of Canvas's "Download Submissions" (its report's `lms`, else its file's
    name) is the row whose ID is its Canvas user id. Any other student id matches a row's SIS
    Login ID, else its SIS User ID, else its SIS Login ID but for an @domain one side lacks
    (alice ~ alice@uni.edu), all case-insensitive; the first rule that matches anything decides (a
    Gradescope export's student: its e-mail, then its student id).

    Which value: the final score, times Points Possible / max_score when the two differ (then
    `CanvasFill.scaling` says so), rounded to two decimals and written plain. Not written, and
    listed: rows without a report, students whose report is an error (their cell keeps its value:
    a failure to grade is not a 0), cells Canvas marks EX or N/A, ambiguous matches; students of
    the batch that match no row are listed too. Every other byte of ROSTER is kept (BOM, `,` or
    `;`, line endings, quoting, row order). OUT is written atomically and may not be ROSTER.
    `late_policy`: OUT/late.toml is in force (the students the LMS marked late are listed with
    whether it took points off them).
    """
    if out.resolve() == roster.resolve():
        raise UsageError(f"{out} is the Canvas export itself: write the filled copy elsewhere")
    assignment = _one_assignment(reports)
    sheet = _read_sheet(roster)
    layout = _canvas_layout(sheet, roster)
    target = _choose_column(layout, assignment, column, roster)
    points = _read_number(layout.points.values[target]) if layout.points else None
    if points is not None and points <= 0:
        raise UsageError(f"the column {layout.header[target]!r} of {roster} has {_number(points)} points "
                         "possible: set its points in Canvas first, or pick another column with "
                         "--canvas-column")
    scaling = _scaling(_max_score(reports), points)
    identities = {student: lms_names.of_report(report) for student, report in reports.items()}
    matched, shared, unmatched = _match(sorted(reports), identities, layout.students)
    plan = _plan(sheet, layout, target, reports, matched, shared, scaling)
    late = sorted(s for s, lms in identities.items() if lms is not None and lms.late)
    write_atomic(out, sheet.render(plan.cells))  # Canvas never gets half a file
    return CanvasFill(out=out, column=layout.header[target], assignment=assignment, points_possible=points,
                      scaling=scaling, matched=len(set(matched.values())), filled=len(plan.cells),
                      replaced=sorted(plan.replaced), unmatched=sorted(unmatched, key=lambda u: u.student),
                      not_filled=plan.not_filled,
                      not_graded=sorted(s for s, r in reports.items() if r.status != "graded"),
                      late=late, late_policy=late_policy,
                      late_penalized=[s for s in late if (penalty := reports[s].late) is not None
                                      and penalty.points])


# ----------------------------------------------------------------------------- Moodle


MoodleIdentifier = Literal["username", "email", "idnumber"]
MOODLE_IDENTIFIER_HEADERS: dict[str, str] = {"username": "Username", "email": "Email address",
                                              "idnumber": "ID number"}  # Moodle's own names for them


class _Plain(float):
    """A grade in moodle.csv: unquoted, as `_number` writes it (the csv module writes a float's repr)."""

    def __repr__(self) -> str:
        return _number(self)

    __str__ = __repr__


def moodle_feedback(report: Report) -> str:
    """One line for the student in Moodle: "ch2-jit: 81.5 / 100, 2 checks failed, 5 points off
    for 1 day late" (what made the score, not the checks' own messages: the report has those)."""
    failed = sum(c.status in ("failed", "error", "timeout") for e in report.exercises for c in e.checks)
    parts = [f"{report.assignment}: {_number(report.final)} / {_number(report.max_score)}",
             "all checks passed" if not failed else f"{failed} check{'s' if failed > 1 else ''} failed"]
    if report.late is not None and report.late.points:
        days = report.late.days_late
        plural = "s" if days != 1 else ""
        parts.append(f"{_number(report.late.points)} points off for {days} day{plural} late")
    if report.adjustments:
        parts.append(f"adjusted by {_number(sum(a.points for a in report.adjustments))} points by hand")
    return ", ".join(parts)


def write_moodle(reports: dict[str, Report], out: Path, *, identifier: MoodleIdentifier = "username",
                 feedback: bool = True) -> Path:
    """Write OUT, a CSV for Moodle's grade import: the identifier column (the student id, which
    must be the Moodle username, e-mail address or ID number, as `identifier` says), a grade
    column named after the assignment and, with `feedback`, "<assignment> (Feedback)" (Moodle's
    own name for a feedback column). One row per graded student, sorted; students whose report
    is an error get no row (a row Moodle cannot use would abort the import, "-" would clear a
    grade). Grades are `report.final` out of `max_score`, unscaled: give the Moodle grade item
    that maximum. Text cells are quoted and `inert.csv_cell`-neutralised; grades are plain
    numbers. UTF-8 without BOM (Moodle asks for the encoding), written atomically. Students named
    by a Moodle or Canvas download (participant or user number) are a UsageError: Moodle's import
    matches none of them, and one row it cannot match aborts all of it.
    """
    if identifier not in MOODLE_IDENTIFIER_HEADERS:
        choices = ", ".join(MOODLE_IDENTIFIER_HEADERS)
        raise UsageError(f"identifier must be one of {choices}, not {identifier!r}")
    assignment = _one_assignment(reports)
    graded = {s: r for s, r in sorted(reports.items()) if r.status == "graded"}
    if identifier == "email" and (bad := [s for s in graded if "@" not in s]):
        raise UsageError(f"{len(bad)} student ids are not e-mail addresses ({_names(bad, 3)}): "
                         "use the username or ID number identifier")
    identities = {s: lms_names.of_report(r) for s, r in graded.items()}
    named = [s for s, lms in identities.items() if lms is not None and lms.lms in ("moodle", "canvas")]
    if named:  # one row Moodle cannot match aborts its whole import
        raise UsageError(f"{len(named)} students are named as an LMS's download names them "
                         f"({_names(named, 3)}), not by the Moodle username, e-mail address or ID number "
                         "that Moodle's grade import needs: enter their grades in Moodle's grading worksheet")
    header = [MOODLE_IDENTIFIER_HEADERS[identifier], assignment]
    if feedback:
        header.append(f"{assignment} (Feedback)")
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, quoting=csv.QUOTE_NONNUMERIC)
    writer.writerow([inert.csv_cell(h) for h in header])
    for student, report in graded.items():
        row: list[object] = [inert.csv_cell(student), _Plain(report.final)]
        if feedback:
            row.append(inert.csv_cell(moodle_feedback(report)))
        writer.writerow(row)
    write_atomic(out, buffer.getvalue().encode("utf-8"))
    return out
