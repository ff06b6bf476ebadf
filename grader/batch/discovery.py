"""Find the submissions in folders: one per student, as a file or as a sub-folder.

`alice.ipynb` or `bob.py` directly in a folder is the submission of `alice` / `bob`; a
sub-folder `carol/` holding exactly one notebook or module is `carol`'s. Two submissions for one
student is an error for that student only (`conflicts`).

Everything in a submissions folder is hostile data, so discovery never follows a symbolic link
and opens no file but Gradescope's metadata (below; it lists folders and lstats their entries):

- an entry that is a symbolic link (to the solutions, another student's file, `/proc`, nowhere) is
  "a symbolic link, not a submission" for the student it would be: the stem of `alice.ipynb`, or
  the whole name of a link without a submission suffix, which would be a linked student *folder*
  (`carol -> ../bob`): it is never entered. These come back as `problems`, one error report each;
- inside a student's folder, a notebook or module that is a link, a FIFO, a device or a socket is
  one of that student's submissions, and reading it is refused (so the student gets an error
  report, or a conflict with the other file); other links in there are never followed nor read;
- a FIFO, device or socket named like a submission is that student's problem (it is never opened,
  so it cannot block); one named otherwise is skipped;
- an OS error listing a student's folder or lstat-ing an entry (EACCES, EIO, ELOOP, ...) is that
  student's problem; one on a folder given on the command line is listed in `skipped`;
- a name that is not valid UTF-8 is that student's problem, under an id with the bytes shown as
  `\\xNN` (ids are kept verbatim otherwise: any length, any script, any case);
- names starting with a dot are hidden files: skipped and listed, except `IGNORED` ones.

Paths given on the command line are the instructor's: a given folder may be a link (it is
listed), a given file is read as any submission (so a link is refused).

A folder as an LMS hands it out names its students the LMS's way (grader/term/lms_names.py, which
cites each LMS's code): Canvas's `garcíajosé_LATE_10002_5551_ch2-jit.ipynb` is `garcíajosé_10002`'s,
Moodle's `Anna Müller_1234567_assignsubmission_file_/` is `Anna Müller_1234567`'s, Gradescope's
`submission_4242/` is the submitter's e-mail address from the `submission_metadata.yml` beside it
(the one file discovery reads, as a submission is read: never through a link, bounded; unreadable,
it is listed in `skipped` and the folders keep Gradescope's names). A name that reads as several
students' (`alice_10001_20002_6661_x.ipynb`: alice's, user 10001, or `alice_10001`'s, user 20002)
is decided by the batch's Canvas export when it confirms one reading, else it is an error report
under its own name, given to none of them.

Student ids go into reports verbatim; the files named after them (`OUT/<name>.json`,
`OUT/gradescope/<name>/`, named in grader/outputs/names.py) use `student_file_stem`, which is
safe and distinct for distinct ids, case-insensitively too.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel

from grader.report import LmsSubmission
from grader.submission import SUFFIXES, SYMLINK, display_path, file_problem, os_problem
from grader.term import lms_names
from grader.term.lms_names import GRADESCOPE_METADATA, MetadataUnreadable

IGNORED = {"__pycache__", ".ipynb_checkpoints", ".DS_Store", ".git"}
NOT_UTF8 = "its name is not valid UTF-8, so it cannot be recorded as it is; rename it"

STEM_CHARS = 40
"""Most characters of the readable part of a student's file name (before `~` and the hash)."""
HASH_CHARS = 16
"""Hex digits of sha256(student id) in a student's file name: 64 bits, so distinct ids do not
collide by chance nor by a student's choosing of a name."""
_PLAIN = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")


def student_file_stem(student: str) -> str:
    """The file name (without suffix) for a student id: the id itself when it is short, lowercase
    ASCII letters, digits, `_`, `.` and `-`, not starting with a dot or dash; otherwise a readable
    slug, `~`, and 16 hex digits of the id's sha256. Distinct ids give distinct stems, also on a
    case-insensitive file system (plain stems are lowercase and never contain `~`; hashed ones
    differ in the hash), and every stem is a safe, short (at most 64 characters) file name."""
    if _PLAIN.fullmatch(student):
        return student
    digest = hashlib.sha256(student.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", student)[:STEM_CHARS].lstrip(".-") or "student"
    return f"{slug}~{digest}"


class Found(BaseModel):
    student: str
    path: Path


class Problem(BaseModel):
    """A student whose entry is not a submission we may read: one error report."""

    student: str
    path: str  # printable
    reason: str


class Discovery(BaseModel):
    submissions: list[Found]
    conflicts: dict[str, list[Path]]
    skipped: dict[str, str]  # path -> why
    problems: list[Problem] = []


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _student_of(name: str, metadata: dict[str, LmsSubmission] | None = None,
                roster: lms_names.CanvasRoster | None = None) -> tuple[str, lms_names.Ambiguous | None]:
    """The student an entry belongs to: `alice.ipynb` -> alice, a folder `carol` -> carol; an
    LMS's name -> the LMS's student (`metadata`: Gradescope's, for its `submission_<id>` folders);
    and, for a name that reads as several students', how (lms_names.read): the student `roster`
    chose, else its own name, whose problem it is (an error report, never another student's file)."""
    path = Path(name)
    is_file = path.suffix.lower() in SUFFIXES
    stem = path.stem if is_file else name
    if not _utf8(stem):
        return display_path(stem), None
    found = lms_names.read(name, folder=not is_file, metadata=metadata, roster=roster)
    if isinstance(found, lms_names.Ambiguous):
        return (stem if found.chosen is None else lms_names.student_id(found.chosen)), found
    return (lms_names.student_id(found) if found is not None else stem), None


class _Finder:
    def __init__(self, roster: lms_names.CanvasRoster | None = None) -> None:
        self.roster = roster
        self.by_roster: dict[Path, tuple[str, str]] = {}  # path -> (its own name, why), given by the roster
        self.no_ones: dict[Path, str] = {}  # path -> why it is no student's (its own name's problem)
        # student -> [(path, None for a readable candidate, or why it is not one)]
        self.candidates: dict[str, list[tuple[Path, str | None]]] = defaultdict(list)
        self.skipped: dict[str, str] = {}

    def _whose(self, name: str, path: Path, metadata: dict[str, LmsSubmission] | None = None) -> str:
        """The entry's student (`_student_of`); a name that reads several ways is kept aside: given
        to no one (`no_ones`), or to the roster's choice (`by_roster`, undone by `discover` if that
        student has an entry whose name reads one way)."""
        student, ambiguous = _student_of(name, metadata, self.roster)
        if ambiguous is not None:
            if ambiguous.chosen is None:
                self.no_ones[path] = ambiguous.reason()
            else:
                self.by_roster[path] = (Path(name).stem if Path(name).suffix.lower() in SUFFIXES else name,
                                        ambiguous.reason())
        return student

    def add(self, student: str, path: Path, why: str | None) -> None:
        if why is None and not _utf8(str(path)):
            why = NOT_UTF8
        self.candidates[student].append((path, why))

    def given(self, given: Path) -> None:
        try:
            mode = os.lstat(given).st_mode
            if stat.S_ISLNK(mode):  # the instructor's own link: followed for a folder only
                target = os.stat(given).st_mode
                mode = target if stat.S_ISDIR(target) else mode
        except FileNotFoundError:
            if os.path.islink(given):  # dangling
                self.add(self._whose(given.name, given), given, SYMLINK)
            else:
                self.skipped[display_path(given)] = "no such file or folder"
            return
        except (OSError, ValueError) as exc:
            self.skipped[display_path(given)] = os_problem(exc) if isinstance(exc, OSError) else "a bad name"
            return
        if stat.S_ISDIR(mode):
            self.folder(given)
        else:
            student = self._whose(given.name, given)
            self.add(student, given, self.no_ones.get(given) or file_problem(mode))

    def _list(self, folder: Path) -> list[os.DirEntry[str]]:
        with os.scandir(folder) as entries:
            return sorted(entries, key=lambda e: e.name)

    def folder(self, folder: Path) -> None:
        try:
            entries = self._list(folder)
        except OSError as exc:
            self.skipped[display_path(folder)] = os_problem(exc)
            return
        metadata = self._gradescope_metadata(folder, entries)
        for entry in entries:
            path = Path(entry.path)
            if entry.name in IGNORED or entry.name == GRADESCOPE_METADATA:  # read, or listed as unreadable
                continue
            if entry.name.startswith("."):
                self.skipped[display_path(path)] = "a hidden file or folder (its name starts with a dot)"
                continue
            student = self._whose(entry.name, path, metadata)
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError as exc:
                self.add(student, path, os_problem(exc))
                continue
            if path in self.no_ones and (stat.S_ISDIR(mode) or Path(entry.name).suffix.lower() in SUFFIXES):
                self.add(student, path, self.no_ones[path])  # no one's: not entered, not read
            elif stat.S_ISLNK(mode):
                self.add(student, path, SYMLINK)
            elif stat.S_ISDIR(mode):
                self.student_folder(student, path)
            elif Path(entry.name).suffix.lower() in SUFFIXES:
                self.add(student, path, file_problem(mode))
            else:
                self.skipped[display_path(path)] = "not a .ipynb notebook or .py module"

    def _gradescope_metadata(self, folder: Path,
                             entries: list[os.DirEntry[str]]) -> dict[str, LmsSubmission] | None:
        """Gradescope's submission_metadata.yml in this folder, or None (none, or unreadable: listed)."""
        if not any(e.name == GRADESCOPE_METADATA for e in entries):
            return None
        path = folder / GRADESCOPE_METADATA
        try:
            return lms_names.read_gradescope_metadata(path)
        except MetadataUnreadable as exc:
            self.skipped[display_path(path)] = (f"Gradescope's submission metadata, not read ({exc}): its "
                                                "submission_<id> folders keep those names")
            return None

    def student_folder(self, student: str, folder: Path) -> None:
        try:
            entries = self._list(folder)
        except OSError as exc:
            self.add(student, folder, os_problem(exc))
            return
        found = False
        for entry in entries:
            if entry.name in IGNORED or entry.name.startswith(".") \
                    or Path(entry.name).suffix.lower() not in SUFFIXES:
                continue
            path = Path(entry.path)
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError as exc:
                self.add(student, path, os_problem(exc))
                found = True
                continue
            if stat.S_ISDIR(mode):
                continue  # a folder named like a notebook: not looked into
            self.add(student, path, file_problem(mode))
            found = True
        if not found:
            self.skipped[display_path(folder)] = "a folder without a notebook or module"


def discover(paths: list[Path], roster: lms_names.CanvasRoster | None = None) -> Discovery:
    """The submissions of `paths`; `roster` (the batch's Canvas export, `grade export --canvas`)
    decides whose a file is when its name reads as several students' (lms_names.read)."""
    finder = _Finder(roster)
    for given in paths:
        finder.given(Path(given))
    submissions: list[Found] = []
    conflicts: dict[str, list[Path]] = {}
    problems: list[Problem] = []
    for student, items in sorted(finder.candidates.items()):
        decided = [item for item in items if item[0] in finder.by_roster]
        if decided and len(decided) < len(items):  # a file whose name reads one way is the student's
            for path, _ in decided:
                own, why = finder.by_roster[path]
                problems.append(Problem(student=own, path=display_path(path), reason=why))
            items = [item for item in items if item[0] not in finder.by_roster]
        if len(items) > 1:
            conflicts[student] = [path for path, _ in items]
            continue
        [(path, why)] = items
        if why is None:
            submissions.append(Found(student=student, path=path))
        else:
            problems.append(Problem(student=student, path=display_path(path), reason=why))
    return Discovery(submissions=submissions, conflicts=conflicts, skipped=finder.skipped, problems=problems)
