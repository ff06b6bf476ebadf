"""Who may hand in: the students of the instructor's roster, read once by `grade tokens` and
`grade serve`.

A roster is the file a batch's Canvas export reads (Grades, Export, CSV: grader/term/lms.py),
each student known by the id a batch matches them on first (SIS Login ID, else SIS User ID, else
Canvas's user id), so that a hand-in's row lands on the right line of that export; or a plain
list, one student id a line (the first cell of a CSV row), blank lines and `#` comments skipped,
and a first line `student` (or `id`, `login`) taken as a header. The ids are the instructor's,
kept verbatim, but still bounded: an id is what names a student's files and rows.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from grader.errors import UsageError
from grader.inert import terminal

MAX_ROSTER_BYTES = 10 * 2**20
MAX_ID_CHARS = 200
_HEADERS = {"student", "students", "id", "login", "student id", "student_id"}


def read_roster(path: Path) -> list[str]:
    """The roster's student ids, in its order; UsageError (one sentence) for a file that is not one."""
    from grader.term.lms import roster_students

    try:
        size = path.stat().st_size
    except OSError as exc:
        raise UsageError(f"cannot read the roster {terminal(path)}: {exc.strerror or exc}") from None
    if size > MAX_ROSTER_BYTES:
        raise UsageError(f"the roster {terminal(path)} is larger than {MAX_ROSTER_BYTES // 2**20} MiB: "
                         "is it the right file?")
    ids = roster_students(path)
    if ids is None:
        ids = _plain(path)
    return _checked(ids, path)


def _plain(path: Path) -> list[str]:
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise UsageError(f"cannot read the roster {terminal(path)}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"the roster {terminal(path)} is not UTF-8 text: save it as UTF-8 (CSV UTF-8)") from None
    ids: list[str] = []
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        first = row[0].strip() if row else ""
        if not first or first.startswith("#"):
            continue
        if not ids and number == 1 and first.casefold() in _HEADERS:
            continue
        ids.append(first)
    return ids


def _checked(ids: list[str], path: Path) -> list[str]:
    """Every id usable (printable, not too long) and listed once."""
    seen: set[str] = set()
    for student in ids:
        if len(student) > MAX_ID_CHARS or not student.isprintable():
            raise UsageError(f"the roster {terminal(path)} has a student id that is too long or holds control "
                             f"characters: {terminal(student, 60)}")
        if student in seen:
            raise UsageError(f"the roster {terminal(path)} lists {terminal(student, 60)} twice")
        seen.add(student)
    if not ids:
        raise UsageError(f"the roster {terminal(path)} lists no student: give a Canvas gradebook export, or "
                         "a file with one student id a line")
    return ids
