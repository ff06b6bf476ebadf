"""A hand-in's bytes: read from the request, bounded, kept in OUT, and refused when not gradable.

Everything here is the student's and hostile: the form (one file field, `file`), the file name
(only whether it ends in .ipynb or .py is used: the file is kept as
`OUT/hand-ins/<student>/<job id>.<ext>`, grader/outputs/names.py, so `../../x` names nothing),
the size (the request's Content-Length, then a count while it streams, then the file's own), and
the contents (read as a batch reads a submission, grader/submission.py: a file it refuses is
refused now, in the sentence it gives, and nothing is queued; so is a notebook for another
assignment). Each refusal is a `Refused`: a status code and one sentence, naming the file by the
name the student gave it (made inert), never by the path it has here.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from pydantic import BaseModel

from grader.errors import SubmissionUnreadable
from grader.inert import text
from grader.serve import limits
from grader.submission import MAX_BYTES, SUFFIXES

FILE_NAME_CHARS = 100
"""Most characters of the student's file name kept (to show it, never to use it)."""
FORM = "file"
"""The form field the file comes in."""


class Refused(Exception):
    """A hand-in not kept: the status code to answer and the sentence that says why."""

    def __init__(self, status: int, sentence: str, headers: dict[str, str] | None = None):
        super().__init__(sentence)
        self.status = status
        self.sentence = sentence
        self.headers = headers or {}


class Upload(BaseModel):
    """A hand-in kept in OUT, readable as a submission for the served assignment."""

    path: Path
    file_name: str
    sha256: str


def shown_name(raw: str | None) -> str:
    """The student's file name to show: its last part (either kind of slash), inert and cut."""
    name = raw or ""
    name = PureWindowsPath(PurePosixPath(name).name).name or name
    return text(name, FILE_NAME_CHARS).replace("\n", "\\n") or "(no name)"


def suffix_of(raw: str | None) -> str:
    """`.ipynb` or `.py` (whatever the case), else Refused 400."""
    suffix = Path(raw or "").suffix.lower()
    if suffix not in SUFFIXES:
        raise Refused(400, f"hand in a notebook (.ipynb) or a Python module (.py): {shown_name(raw)} is neither")
    return suffix


async def read_form(request: Any) -> Any:
    """The request's one file, as Starlette's multipart parser reads it from the bounded stream
    (kept in a spooled temporary file until stored)."""
    from starlette.formparsers import MultiPartException, MultiPartParser

    kind = request.headers.get("content-type", "")
    if not kind.lower().startswith("multipart/form-data"):
        raise Refused(400, f"send the file as a form (multipart/form-data) with one field named {FORM}")
    if limits.declared_too_large(request.headers.get("content-length")):
        raise Refused(413, limits.too_large())
    import anyio

    parser = MultiPartParser(request.headers, limits.bounded(request.stream()), max_files=1, max_fields=4,
                             max_part_size=4096)
    try:
        with anyio.fail_after(limits.UPLOAD_S):
            form = await parser.parse()
    except TimeoutError:
        raise Refused(408, limits.upload_too_slow()) from None
    except limits.TooLarge:
        raise Refused(413, limits.too_large()) from None
    except MultiPartException:
        raise Refused(400, f"the form could not be read: send one file, in a field named {FORM}") from None
    except Exception:  # noqa: BLE001 - python-multipart's own errors on a malformed body
        raise Refused(400, f"the form could not be read: send one file, in a field named {FORM}") from None
    upload = form.get(FORM)
    if upload is None or isinstance(upload, str):
        await form.close()
        raise Refused(400, f"the form has no file in a field named {FORM}")
    return form


def store(source: Any, target: Path) -> str:
    """Copy the uploaded file to `target` (written whole and synced before it has its name,
    grader/atomic.py) and return its sha256; Refused 413 past MAX_BYTES. Blocking: run it off the
    event loop."""
    from grader.atomic import atomic_file

    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    source.seek(0)
    with atomic_file(target) as out:
        while chunk := source.read(1 << 20):
            size += len(chunk)
            if size > MAX_BYTES:
                raise Refused(413, limits.too_large())
            digest.update(chunk)
            out.write(chunk)
    _sync_folder(target.parent)
    return digest.hexdigest()


def _sync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def check(path: Path, file_name: str, assignment_id: str, assignment_folder: Path) -> None:
    """Read the kept file as a batch would, and refuse (400) what it would not grade: not a
    notebook or module, or a notebook that names another assignment. Blocking."""
    from grader import assignment as assignments
    from grader.assignment.choice import wrong_claim
    from grader.submission import read_submission

    try:
        submission = read_submission(path)
        wrong = wrong_claim(str(path), submission.assignment_hint, assignment_id, assignment_folder,
                            assignments.available(), graded_as="this service grades")
    except SubmissionUnreadable as exc:
        raise Refused(400, f"{file_name}: {_reason(exc.reason)}") from None
    if wrong is not None:
        raise Refused(400, f"{file_name}: {_reason(wrong.reason)}")


def _reason(reason: str) -> str:
    return text(reason, 300).replace("\n", " ")
