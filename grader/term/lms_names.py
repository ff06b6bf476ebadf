"""Who handed a file in, as an LMS's download names it: Canvas, Moodle, Gradescope.

An instructor grades the folder the LMS gave them, so a file's name is all that says whose it is.
Each LMS's own code decides the names:

Canvas, "Download Submissions" (instructure/canvas-lms `lib/content_zipper.rb`, `get_filename` and
`add_upload_submission`): `<name>[_LATE]_<user id>_<attachment id>_<file name>`, where `<name>`
is the student's sortable name ("García, José") lower-cased with every non-word character removed
(`garcíajosé`; `sanitize_user_name` also drops `_<digits>_` from it, "because we use /_\\d+_/ to
infer the user/attachment ids"), `LATE` is there when Canvas marked the submission late, the user
id is the gradebook export's `ID` column, the attachment id changes with every upload, and the file
name is the one the student uploaded, with Canvas's `-1`, `-2` ... when they uploaded a file of
that name before (`Attachment.make_unique_filename`). Older Canvas lower-cased the whole prefix
(`_late_`). With anonymous grading the name is left out and the user id is `anon_<anonymous id>`,
which no gradebook column holds. Canvas reads its own names back the same way
(`infer_comment_context_from_filename`: the first two all-digit `_` pieces are the user and the
attachment).

Moodle, "Download all submissions" (moodle/moodle `mod/assign/locallib.php`, `download_submissions`):
the prefix is the full name with `_` made spaces, then `_<participant id>` (the assignment's own
number for the student, `get_uniqueid_for_user`; "Participant" instead of the name under blind
marking); with "Download submissions in folders" (the default since Moodle 3.1) each student's
files are in `<prefix>_assignsubmission_file_/`, otherwise each file is
`<prefix>_assignsubmission_file_<file name>`. Moodle's names carry no lateness.

Gradescope, "Export Submissions": one folder per submission, `submission_<id>/`, holding the
student's files, beside `submission_metadata.yml` (Ruby's YAML, symbol keys): per folder,
`:submitters:` (each `:name:`, `:sid:`, `:email:`), `:created_at:`, `:score:`, `:status:`,
`:results:` and `:history:` (read from real exports and the tools that read them, e.g. the
"submission_metadata.yml" readers in gradescope-utils' users' repositories). It carries no late flag
either; `:created_at:` is kept as the submission time.

A name can read more than one way. Canvas keeps `_` and digits in a name (they are word
characters), so a student who calls herself `alice_10001` has files named
`alice_10001_20002_6661_ch2-jit.ipynb`, which also reads as user 10001's (alice's) file
`20002_6661_ch2-jit.ipynb`; a Moodle name, or a Moodle file's uploaded name, can hold another
student's `_<id>_assignsubmission_file_`; an older Canvas name without a name part can read as a
Moodle one. `readings` lists every way a name reads and `read` decides: one reading is the
student's; of several, the one whose user id alone is in the batch's Canvas export (`CanvasRoster`),
else none: the name is `Ambiguous`, and the batch gives that file an error report under its own
name instead of giving it to anyone. (A student who named herself so is in the export too: her
file is then no one's, and alice's own file, which reads one way, stays alice's.)

A student's id in a batch is the LMS's own prefix less what changes between two downloads (the
late mark, the attachment id, the file name): `garcíajosé_10002`, `Anna Müller_1234567`, or
Gradescope's e-mail address (else its student id, else `submission_<id>`), in Unicode NFC so a
folder unzipped on macOS names the same student. `grade export --canvas` matches Canvas's user
id to the export's `ID` column and Gradescope's e-mail and student id to SIS Login ID and SIS User
ID (grader/term/lms.py).
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path

from grader.errors import SubmissionUnreadable
from grader.report import LmsSubmission, Report
from grader.submission import SUFFIXES, read_bytes

GRADESCOPE_METADATA = "submission_metadata.yml"
MAX_METADATA_SUBMISSIONS = 100_000
MIN_ATTACHMENT_DIGITS = 3
"""Canvas's attachment ids number every file an instance has stored: a real download's have 3
digits or more, and a name such as `hw_1_2_x.ipynb` is not taken for Canvas's."""

_CANVAS_ANONYMOUS = re.compile(
    r"(?:(?P<late>late|LATE)_)?anon_(?P<anon>[A-Za-z0-9]+)_(?P<attachment>\d+)_(?P<file>.+)", re.DOTALL)
_MOODLE_MARK = re.compile(r"_(?P<id>\d+)_assignsubmission_(?P<plugin>[a-z]+)_")
_GRADESCOPE_FOLDER = re.compile(r"submission_(?P<id>\d+)")
_DIGITS = re.compile(r"[0-9]+")
_CANVAS_NAME = re.compile(r"\w*")  # word characters, `_` and digits included (Canvas removes only \W)


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


# ----------------------------------------------------------------------------- names


def canvas_readings(name: str) -> list[LmsSubmission]:
    """Every way `name` reads as Canvas's `garcíajosé_LATE_10002_5551_ch2-jit-1.ipynb`: at each pair
    of all-digit pieces (Canvas's own reader takes the first), what comes before is the name (and
    the late mark), lower-case word characters, `_` and digits included, as Canvas writes it."""
    name = _nfc(name)
    anonymous = _CANVAS_ANONYMOUS.fullmatch(name)
    if anonymous:
        return [LmsSubmission(lms="canvas", anonymous=True, user_id=None, name=f"anon_{anonymous['anon']}",
                              submission_id=anonymous["attachment"], file_name=anonymous["file"],
                              late=anonymous["late"] is not None)]
    parts = name.split("_")
    found = []
    for i in range(len(parts) - 2):
        if not (_DIGITS.fullmatch(parts[i]) and _DIGITS.fullmatch(parts[i + 1])):
            continue
        prefix, user, attachment, file_name = parts[:i], parts[i], parts[i + 1], "_".join(parts[i + 2:])
        if len(attachment) < MIN_ATTACHMENT_DIGITS or not file_name:
            continue  # `hw_1_2_x.ipynb` is a name someone chose, not Canvas's
        late = bool(prefix) and prefix[-1] in ("LATE", "late")
        if late:
            prefix = prefix[:-1]
        student = "_".join(prefix)
        if not _CANVAS_NAME.fullmatch(student) or student != student.lower() \
                or (prefix and not all(prefix)):
            continue  # Canvas writes the name lower-cased, of word characters only
        found.append(LmsSubmission(lms="canvas", user_id=user, name=student or None, submission_id=attachment,
                                   file_name=file_name, late=late))
    return found


def moodle_readings(name: str, *, folder: bool) -> list[LmsSubmission]:
    """Every way `name` reads as a Moodle download's file
    `Anna Müller_1234567_assignsubmission_file_ch2-jit.ipynb` or folder
    `Anna Müller_1234567_assignsubmission_file_`: at each `_<id>_assignsubmission_<plugin>_` (Moodle
    writes a full name's `_` as spaces, but an uploaded file's name keeps them)."""
    name = _nfc(name)
    found = []
    for mark in _MOODLE_MARK.finditer(name):
        student, rest = name[:mark.start()], name[mark.end():]
        if not student.strip() or (folder and rest) or (not folder and not rest):
            continue
        found.append(LmsSubmission(lms="moodle", user_id=mark["id"], name=student, late=None,
                                   file_name=None if folder else rest))
    return found


def _one(readings: list[LmsSubmission]) -> LmsSubmission | None:
    return readings[0] if len(readings) == 1 else None


def canvas(name: str) -> LmsSubmission | None:
    """Canvas's `garcíajosé_LATE_10002_5551_ch2-jit-1.ipynb`, if it reads one way only."""
    return _one(canvas_readings(name))


def moodle(name: str, *, folder: bool) -> LmsSubmission | None:
    """A Moodle download's file or folder name, if it reads one way only."""
    return _one(moodle_readings(name, folder=folder))


CanvasRoster = Collection[str]
"""The Canvas user ids (the `ID` cells) of a Canvas gradebook export (grader/term/lms.py
`canvas_roster`): what decides between the readings of a Canvas download's name."""


def _confirmed(found: LmsSubmission, roster: CanvasRoster) -> bool:
    """The roster has a row with this Canvas reading's user id. Only the id: a name compared with
    the roster's would rest on how Canvas spells names, and a name spelled otherwise would leave
    the one reading that is not the student's."""
    return found.lms == "canvas" and not found.anonymous and bool(found.user_id) and found.user_id in roster


@dataclass(frozen=True)
class Ambiguous:
    """A name that reads as several students' in an LMS's download. `chosen`: the one reading whose
    user id the batch's Canvas export holds (the file is that student's, unless that student has a
    file whose name reads one way: batch/discovery.py); None: nothing decided."""

    readings: tuple[LmsSubmission, ...]
    roster: bool  # a Canvas export was there to decide
    chosen: LmsSubmission | None = None

    def reason(self) -> str:
        """Why its file is no one's, for its error report (the ids are the student's text)."""
        ids = " or ".join(f"{student_id(r)} ({_lms_title(r)})" for r in self.readings)
        if self.chosen is not None:
            decided = (f"the Canvas export holds the user id of {student_id(self.chosen)} alone, who has "
                       "a file whose name reads one way; rename it to its student's id (a student added to "
                       "Canvas since: export it again)")
        elif not any(r.lms == "canvas" and r.user_id for r in self.readings):
            decided = "rename it to its student's id"
        elif self.roster:
            decided = ("the batch's Canvas export holds the user id of none of them alone; rename it to its "
                       "student's id")
        else:
            decided = ("give the batch the Canvas export to decide (grade export OUT --canvas EXPORT.csv, "
                       "then grade again), or rename it to its student's id")
        return (f"its name reads as {len(self.readings)} students' in the LMS's download ({ids}), so it is "
                f"given to none of them: {decided}")


def _lms_title(found: LmsSubmission) -> str:
    if found.lms == "canvas":
        return f"Canvas user {found.user_id}" if found.user_id else "Canvas"
    title = found.lms.capitalize()
    return f"{title} participant {found.user_id}" if found.user_id else title


def readings(name: str, *, folder: bool,
             metadata: dict[str, LmsSubmission] | None = None) -> list[LmsSubmission]:
    """Every way an entry of a download reads: a file's name as Canvas's or Moodle's, a folder's as
    Gradescope's (with its metadata), Moodle's or Canvas's (a Canvas zip unzipped into folders)."""
    if folder:
        gradescope = gradescope_folder(name, metadata)
        if gradescope is not None:
            return [gradescope]
        return moodle_readings(name, folder=True) + canvas_readings(name)
    return canvas_readings(name) + moodle_readings(name, folder=False)


def decide(found: list[LmsSubmission],
           roster: CanvasRoster | None = None) -> LmsSubmission | Ambiguous | None:
    """One reading: the student's; none: None; several: `Ambiguous`, with the roster's choice if it
    confirms exactly one (never the first reading, as Canvas's own reader takes it)."""
    if len(found) <= 1:
        return _one(found)
    confirmed = [r for r in found if _confirmed(r, roster)] if roster else []
    return Ambiguous(tuple(found), roster=bool(roster), chosen=confirmed[0] if len(confirmed) == 1 else None)


def read(name: str, *, folder: bool, metadata: dict[str, LmsSubmission] | None = None,
         roster: CanvasRoster | None = None) -> LmsSubmission | Ambiguous | None:
    """Whose an entry of a download is (`readings`, `decide`)."""
    return decide(readings(name, folder=folder, metadata=metadata), roster)


def gradescope_folder(name: str, metadata: dict[str, LmsSubmission] | None) -> LmsSubmission | None:
    """A Gradescope export's `submission_<id>` folder, with what submission_metadata.yml says of it."""
    m = _GRADESCOPE_FOLDER.fullmatch(name)
    if m is None:
        return None
    known = (metadata or {}).get(name)
    return known if known is not None else LmsSubmission(lms="gradescope", submission_id=m["id"], late=None)


def student_id(found: LmsSubmission) -> str:
    """The batch's id for the student: the LMS's prefix less the parts that change between downloads."""
    if found.lms == "canvas":
        if found.anonymous or not found.user_id:
            return found.name or f"anon_{found.submission_id}"
        return f"{found.name}_{found.user_id}" if found.name else found.user_id
    if found.lms == "moodle":
        return f"{found.name}_{found.user_id}"
    return found.email or found.sid or f"submission_{found.submission_id}"


# ----------------------------------------------------------------------------- Gradescope's metadata


class MetadataUnreadable(Exception):
    """submission_metadata.yml could not be read or is not the shape Gradescope writes."""


_KEY = re.compile(r"(?P<indent> *)(?P<dash>- )?:(?P<key>[a-z_]+):(?: (?P<value>.*))?\Z")
_TOP = re.compile(r"(?P<key>submission_\d+):\s*\Z")
_ESCAPES = {"0": "\0", "a": "\a", "b": "\b", "t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r",
            "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85", "_": "\xa0",
            "L": "\u2028", "P": "\u2029"}
_ESCAPE = re.compile(r"\\(x[0-9A-Fa-f]{2}|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)")


def _scalar(raw: str | None) -> str | None:
    """One YAML scalar as Ruby's Psych writes it: plain, 'single' ('' for ') or "double" quoted."""
    value = (raw or "").strip()
    if value in ("", "~", "null", "[]", "{}"):
        return None
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    if len(value) >= 2 and value[0] == value[-1] == '"':
        def unescape(m: re.Match[str]) -> str:
            code = m.group(1)
            return chr(int(code[1:], 16)) if code[0] in "xuU" and len(code) > 1 else _ESCAPES.get(code, code)
        return _ESCAPE.sub(unescape, value[1:-1])
    return value


def _timestamp(raw: str | None) -> str | None:
    """`2023-12-02 02:52:07.938335000 Z` (Psych's form) as ISO 8601, or None."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)(?:\.\d+)?\s*(Z|[+-]\d\d:?\d\d)?", raw or "")
    if m is None:
        return None
    zone = m[3] or "Z"
    try:
        moment = datetime.fromisoformat(f"{m[1]}T{m[2]}{'+00:00' if zone == 'Z' else zone}")
    except ValueError:
        return None
    return moment.isoformat(timespec="seconds")


def parse_gradescope_metadata(text: str) -> dict[str, LmsSubmission]:
    """Folder name -> the submission's first submitter (name, sid, e-mail) and time. Only what the
    export writes at the top of each submission is read; `:results:` and `:history:` are skipped."""
    found: dict[str, dict[str, object]] = {}
    current: dict[str, object] | None = None
    section = ""
    person: dict[str, str | None] | None = None
    for line in text.splitlines():
        if not line.strip() or line.startswith(("---", "#", "...")):
            continue
        top = _TOP.match(line)
        if top:
            if len(found) >= MAX_METADATA_SUBMISSIONS:
                raise MetadataUnreadable(f"more than {MAX_METADATA_SUBMISSIONS} submissions")
            current = found.setdefault(top["key"], {"submitters": []})
            section, person = "", None
            continue
        if current is None:
            if not line.startswith(" "):
                raise MetadataUnreadable("not Gradescope's submission metadata")
            continue
        key = _KEY.match(line)
        if key is None:
            continue  # a nested value (results, history) or a folded line: not what we read
        indent = len(key["indent"])
        if indent == 2 and not key["dash"]:
            section, person = key["key"], None
            if section == "created_at":
                current["submitted_at"] = _timestamp(_scalar(key["value"]))
            continue
        if section != "submitters":
            continue
        if indent == 2 and key["dash"]:
            person = {}
            submitters = current["submitters"]
            assert isinstance(submitters, list)
            submitters.append(person)
        if person is not None and (indent == 2 and key["dash"] or indent == 4 and not key["dash"]):
            person[key["key"]] = _scalar(key["value"])
    result: dict[str, LmsSubmission] = {}
    for folder, data in found.items():
        people = [p for p in data["submitters"] if isinstance(p, dict)]  # type: ignore[union-attr]
        first = people[0] if people else {}
        others = [str(p.get("email") or p.get("sid") or p.get("name") or "?") for p in people[1:]]
        submitted = data.get("submitted_at")
        result[folder] = LmsSubmission(
            lms="gradescope", submission_id=folder.removeprefix("submission_"), late=None,
            name=_nfc(first["name"]) if first.get("name") else None,
            sid=first.get("sid") or None, email=first.get("email") or None,
            submitted_at=submitted if isinstance(submitted, str) else None, group=others)
    return result


def read_gradescope_metadata(path: Path) -> dict[str, LmsSubmission]:
    """The export's metadata, read as any file of a submissions folder is (no link, bounded)."""
    try:
        data = read_bytes(path)
    except SubmissionUnreadable as exc:
        raise MetadataUnreadable(exc.reason) from None
    try:
        return parse_gradescope_metadata(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise MetadataUnreadable("it is not UTF-8 text") from None


@lru_cache(maxsize=64)
def _cached_metadata(path: str, mtime_ns: int, size: int) -> dict[str, LmsSubmission]:
    return read_gradescope_metadata(Path(path))


def _metadata_beside(folder: Path) -> dict[str, LmsSubmission] | None:
    path = folder.parent / GRADESCOPE_METADATA
    try:
        info = os.lstat(path)
        return _cached_metadata(str(path), info.st_mtime_ns, info.st_size)
    except (OSError, ValueError, MetadataUnreadable):
        return None


# ----------------------------------------------------------------------------- a report's submission


def _candidates(path: Path) -> list[tuple[str, list[LmsSubmission]]]:
    """(the name discovery would have taken the student from, every way the LMS reads it), file first."""
    found: list[tuple[str, list[LmsSubmission]]] = []
    folder = path
    if path.suffix.lower() in SUFFIXES:
        found.append((path.stem, readings(path.name, folder=False)))
        folder = path.parent
    if folder.name:
        metadata = _metadata_beside(folder) if _GRADESCOPE_FOLDER.fullmatch(folder.name) else None
        found.append((folder.name, readings(folder.name, folder=True, metadata=metadata)))
    return found


def identify(path: str | os.PathLike[str], student: str | None = None) -> LmsSubmission | None:
    """What the LMS's download says of the submission at `path` (its file's name: Canvas, Moodle
    without folders; its folder's: Moodle, Gradescope, a Canvas zip unzipped), or None. With
    `student`, only when that is the id discovery gives it (or gave before it read LMS names):
    `--student` or a file outside its LMS folder is not guessed at; of a name that reads several
    ways, the reading discovery chose (with the roster) for that student. Without, a name that
    reads one way only."""
    for raw, found in _candidates(Path(path)):
        if student is None:
            if len(found) == 1:
                return found[0]
            continue
        chosen = [r for r in found if _nfc(student) == student_id(r)]
        if len(chosen) == 1:
            return chosen[0]
        if len(found) == 1 and _nfc(student) == _nfc(raw):
            return found[0]
    return None


def of_report(report: Report) -> LmsSubmission | None:
    """The report's `lms` (set whenever outputs are rebuilt), else read from its submission's path."""
    return report.lms if report.lms is not None else identify(report.submission.path, report.student)
