"""Read a submission (notebook or module) into the code cells the kernel will run.

Only code is taken from a notebook: saved outputs, stale results and fake reports in it are
never read. Cells tagged `selfcheck` (the template's self-check cells) hold the template's call to
the self-check, which the grader leaves out: it runs the same checks itself. Code a student wrote
there besides it is graded like an answer cell's, as Run All in Jupyter would run it, and the
report says so in a note naming the cell (`SourceCell.notice`). A module is split into its top-level
statements (or at `# %%` markers when it has them) so that one statement that raises does not stop
the rest, as with notebook cells; past `MAX_CELLS` consecutive statements are merged.

Everything here is read as hostile data (`read_bytes`): a symbolic link is never followed (it is
"a symbolic link, not a submission"), only a regular file is opened (a FIFO, a device or a socket
is refused without blocking), the size is checked before reading and the read stops one byte past
`MAX_BYTES`, and every OS error is one plain `SubmissionUnreadable` sentence. A module is read as
Python reads it: in the encoding its PEP 263 coding line declares (UTF-8 without one), a byte-order
mark dropped, CRLF or lone CR line endings made LF; an encoding Python does not know, or bytes that
are not in it, make the submission unreadable in one sentence (a notebook is UTF-8 JSON, and may
have a byte-order mark too). The caps below bound what one submission can cost.
"""

from __future__ import annotations

import codecs
import errno
import hashlib
import io
import json
import os
import re
import reprlib
import stat
import tokenize
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from grader.errors import SubmissionUnreadable, WrongAssignment

MAX_BYTES = 20 * 1024 * 1024
"""Largest submission file, in bytes (20 MiB). Checked with fstat before a byte is read, and the
read stops one byte past it (a file that grows meanwhile), so a bigger file, sparse or not, is
refused in one sentence without being read or hashed."""

MAX_SOURCE_CHARS = 5_000_000
"""Most characters of code one submission may run (all its cells together, 5 million): a notebook's
saved outputs may fill its 20 MiB, its code may not. Over it, the submission is refused."""

MAX_CELLS = 500
"""Most cells a module is run as. Its top-level statements (or `# %%` sections) beyond that are
grouped, consecutive ones merged into equal runs, so a statement that raises costs only its group,
the kernel gets at most 500 round trips, and a report lists at most 500 cell problems."""

MAX_NOTEBOOK_CELLS = 2000
"""Most cells (code, markdown and raw together) a notebook may have; one with more is refused
before it is validated, so a notebook of 100,000 cells costs a JSON parse and one sentence."""

CLAIM_CHARS = 80
"""Most characters of a notebook's `grader.assignment` quoted in a message (a repr, then cut)."""

SKIP_TAG = "selfcheck"
_SELFCHECK_IMPORT = re.compile(r"from (?:grader\.selfcheck|jax_course_[a-z0-9_]+) import check")
"""The template's import of the self-check: the assignment's own pack (`from jax_course_ch2_jit import
check`), or `grader.selfcheck` in the notebooks of the single `jax-course-selfcheck` pack before it."""
_SELFCHECK_CALL = re.compile(r"""check\(\s*["'](?P<exercise>[\w-]+)["']\s*(?:,\s*["'][\w-]+["']\s*)?\)""")
"""The template's call (`check("tax", "ch2-jit")`), as written or with its assignment left out."""
_SELFCHECK_GUARD = re.compile(
    r"^try:\n    " + _SELFCHECK_IMPORT.pattern + r"\nexcept ModuleNotFoundError:\n"
    r"""    check = lambda \*args: print\((?:'[^'\\\n]*'|"[^"\\\n]*")\)\n""", re.M)
"""The template's guarded import, whichever pack it names and whatever its sentence says (every
guard `selfcheck_guard` writes, and the one of older notebooks)."""


def pack_distribution(assignment: str) -> str:
    """The student pack of an assignment (`grade pack`): one distribution per assignment, so a
    course's packs install side by side, `jax-course-ch2-jit`."""
    return f"jax-course-{assignment}"


def pack_package(assignment: str) -> str:
    """The import package of an assignment's pack, `jax_course_ch2_jit` (also the start of its
    wheel's file name)."""
    return "jax_course_" + re.sub(r"[-_.]+", "_", assignment).lower()


def selfcheck_not_installed(assignment: str) -> str:
    """What a self-check cell says when its kernel's Python lacks the assignment's pack."""
    package = pack_package(assignment)
    return (f"⚠️ The self-check of {assignment} is not installed in this notebook's Python: put the wheel "
            f"{package}-*.whl from your handout beside the notebook (in Colab, upload it with the Files "
            f"pane; no wheel? ask your instructor for the pack of {assignment}), run %pip install "
            f"{package}-*.whl in a cell, then run this cell again.")


def selfcheck_guard(assignment: str) -> str:
    """The template's import of the assignment's self-check: without its pack installed in the
    kernel's Python, the cell says in one sentence how to install it instead of a traceback."""
    return (f"try:\n    from {pack_package(assignment)} import check\nexcept ModuleNotFoundError:\n"
            f"    check = lambda *args: print({selfcheck_not_installed(assignment)!r})\n")


def selfcheck_source(exercise: str, assignment: str) -> str:
    """What the template's self-check cell of an exercise holds (scripts/make_notebooks.py writes
    it): the lines the grader leaves out of a cell tagged `selfcheck`."""
    return f'{selfcheck_guard(assignment)}check("{exercise}", "{assignment}")'


SUFFIXES = {".ipynb": "notebook", ".py": "module"}
SYMLINK = "a symbolic link, not a submission"

_FILE_TYPES = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
               stat.S_IFSOCK: "a socket"}
_OPEN_FLAGS = (os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_NOCTTY", 0)
               | getattr(os, "O_CLOEXEC", 0))
_CONTINUATIONS = {"else", "elif", "except", "finally"}  # a logical line that goes on a statement


class SourceCell(BaseModel):
    model_config = ConfigDict(frozen=True)

    index: int
    source: str
    first_line: int = 1
    number: int | None = Field(default=None, description=(
        "a notebook's cells as Jupyter numbers them after Run All: the code cells that are not blank, "
        "from 1, the template's self-check cells too (`index` counts markdown cells too)"))
    notice: str | None = Field(default=None, description=(
        "what the report says of this cell whatever it does, after the cell's name (a self-check cell "
        "the student wrote code in: graded, its self-check call left out)"))


class Submission(BaseModel):
    """What the pipeline grades; `cells` is everything that will run, in order."""

    model_config = ConfigDict(frozen=True)

    path: str
    kind: Literal["notebook", "module"]
    sha256: str
    cells: list[SourceCell]
    assignment_hint: str | None = None  # the notebook's `grader.assignment`, verbatim: untrusted


class Peek(BaseModel):
    """What a batch needs of a file before grading it: its hash and the assignment it names."""

    model_config = ConfigDict(frozen=True)

    path: str
    kind: Literal["notebook", "module"]
    sha256: str
    assignment_hint: str | None = None


# ---------------------------------------------------------------------------- names and claims


def display_path(path: str | os.PathLike[str]) -> str:
    """A path as text that prints and encodes as UTF-8: bytes of a name that is not UTF-8 (which
    Python decodes to lone surrogates) are shown as `\\xNN`."""
    text = os.fspath(path)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        try:
            raw = text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            raw = text.encode("utf-8", "surrogatepass")
        return raw.decode("utf-8", "backslashreplace")


_claim_repr = reprlib.Repr()  # limits set one by one: Repr() takes them as arguments from Python 3.12
_claim_repr.maxlevel, _claim_repr.maxstring, _claim_repr.maxother = 2, CLAIM_CHARS, CLAIM_CHARS
_claim_repr.maxlist = _claim_repr.maxdict = 4


def claim_text(value: object) -> str:
    """A notebook's claimed assignment, safe to print: a repr (control and bidi characters
    escaped), cut to about CLAIM_CHARS characters, nested values elided."""
    text = _claim_repr.repr(value)
    return text if len(text) <= CLAIM_CHARS + 10 else text[:CLAIM_CHARS] + "…"


def _claim(raw: object, shown: str) -> str | None:
    """`metadata.grader.assignment` of a parsed notebook: None when absent (or null), the string
    verbatim, and a notebook that names something else than a string is not gradable."""
    metadata = raw.get("metadata") if isinstance(raw, dict) else None
    grader = metadata.get("grader") if isinstance(metadata, dict) else None
    value = grader.get("assignment") if isinstance(grader, dict) else None
    if value is None or isinstance(value, str):
        return value
    raise WrongAssignment(shown, claim_text(value))


# ---------------------------------------------------------------------------- bytes


def file_problem(mode: int) -> str | None:
    """Why a file of this type (an lstat's st_mode) is not a submission; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        return SYMLINK
    if stat.S_ISDIR(mode):
        return "is a directory"
    return f"not a regular file ({_FILE_TYPES.get(stat.S_IFMT(mode), 'a special file')})"


def os_problem(exc: OSError) -> str:
    """An OS error on a student's file, as the end of one sentence."""
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    return f"cannot be read ({exc.strerror or errno.errorcode.get(exc.errno or 0, type(exc).__name__)})"


def _too_big() -> str:
    return f"larger than {MAX_BYTES // 2**20} MiB, the most the grader reads"


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a submission file, or SubmissionUnreadable with one reason.

    Never through a symbolic link (lstat, then O_NOFOLLOW), only a regular file (lstat, then fstat
    of the descriptor opened with O_NONBLOCK, so a FIFO swapped in cannot block), never more than
    MAX_BYTES: the size is checked before reading and the read is bounded anyway.
    """
    shown = display_path(path)
    try:
        why = file_problem(os.lstat(path).st_mode)
        if why:
            raise SubmissionUnreadable(shown, why)
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        reason = SYMLINK if exc.errno == errno.ELOOP and os.path.islink(path) else os_problem(exc)
        raise SubmissionUnreadable(shown, reason) from None
    except ValueError:  # a NUL character in the name
        raise SubmissionUnreadable(shown, "cannot be read (its name has a NUL character)") from None
    try:
        info = os.fstat(fd)
        why = file_problem(info.st_mode)
        if why:
            raise SubmissionUnreadable(shown, why)
        if info.st_size > MAX_BYTES:
            raise SubmissionUnreadable(shown, _too_big())
        chunks: list[bytes] = []
        total = 0
        while total <= MAX_BYTES:
            chunk = os.read(fd, min(1 << 20, MAX_BYTES + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > MAX_BYTES:
            raise SubmissionUnreadable(shown, _too_big())
    except OSError as exc:
        raise SubmissionUnreadable(shown, os_problem(exc)) from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def _kind(path: str | os.PathLike[str]) -> Literal["notebook", "module"]:
    kind = SUFFIXES.get(Path(path).suffix.lower())
    if kind is None:
        raise SubmissionUnreadable(display_path(path), "expected a .ipynb notebook or a .py module")
    return kind  # type: ignore[return-value]


def _decode(data: bytes, shown: str, kind: str) -> str:
    """Text as Python reads a module: in its PEP 263 encoding, BOM dropped, CRLF and lone CR made
    LF (a notebook: UTF-8, BOM dropped)."""
    encoding = _module_encoding(data, shown) if kind == "module" else "utf-8"
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError:
        raise SubmissionUnreadable(shown, "is not UTF-8 text" if encoding == "utf-8" else
                                   f"is not {encoding} text, the encoding its coding line declares") from None
    except LookupError:  # a codec found by detect_encoding that cannot decode (a text transform)
        raise SubmissionUnreadable(shown, f"declares the encoding {encoding!r}, which Python cannot read "
                                          "source in") from None
    if kind == "module":
        text = _newlines(text)
    return text


def _module_encoding(data: bytes, shown: str) -> str:
    """The encoding Python reads a module's bytes in (tokenize.detect_encoding: a PEP 263 coding
    line in the first two lines, a UTF-8 byte-order mark, else UTF-8), as a codec name for the
    bytes without their byte-order mark."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)  # reads two lines at most
    except SyntaxError as exc:
        reason = str(exc.msg if hasattr(exc, "msg") else exc)
        if reason.startswith("encoding problem"):
            raise SubmissionUnreadable(shown, "cannot be read as Python source: it starts with a UTF-8 byte-order "
                                              "mark, and its coding line declares another encoding") from None
        if not reason.startswith("unknown encoding"):
            return "utf-8"  # bytes that are not UTF-8 and no coding line: the decoding says so
        shown_reason = reason[:80] + ("…" if len(reason) > 80 else "")
        raise SubmissionUnreadable(shown, f"cannot be read as Python source ({shown_reason}): its coding "
                                          "line must name an encoding Python knows, e.g. utf-8") from None
    return "utf-8" if encoding == "utf-8-sig" else encoding


def _newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


# ---------------------------------------------------------------------------- notebooks


_JSON_KINDS = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "true or false",
               type(None): "null"}


_CUT_WORD = re.compile(r"(?:n(?:u(?:ll?)?)?|t(?:r(?:ue?)?)?|f(?:a(?:l(?:se?)?)?)?|-?[\d.eE+-]{0,30})")


def broken_json(text: str, exc: Exception) -> str:
    """Why a notebook's JSON does not parse, in words a student can act on (never the parser's class
    name): an empty file, a file cut short, or where the JSON breaks."""
    if not text.strip():
        return "the file is empty"
    if isinstance(exc, RecursionError):
        return "its JSON is nested too deeply to read"
    if isinstance(exc, json.JSONDecodeError):
        rest = text[exc.pos:].rstrip()  # what follows the error: nothing, or a word or number cut short
        if not rest or exc.msg.startswith("Unterminated string") or _CUT_WORD.fullmatch(rest):
            return "the file ends in the middle of its JSON (cut short when it was saved or copied?)"
        return f"its JSON is broken at line {exc.lineno}, column {exc.colno}"
    return "its JSON cannot be read"


def _parse_json(text: str, shown: str) -> dict:
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise SubmissionUnreadable(shown, f"not a valid Jupyter notebook: {broken_json(text, exc)}; open it in "
                                          "Jupyter and save it again, or hand in a copy that opens") from None
    if not isinstance(raw, dict):
        kind = _JSON_KINDS.get(type(raw), "not an object")
        raise SubmissionUnreadable(shown, f"not a valid Jupyter notebook (its JSON is {kind}, where a notebook is "
                                          "an object holding its cells)")
    return raw


def _cell_count(raw: dict) -> int:
    """Cells of a notebook as JSON: v4's `cells`, or every v3 worksheet's."""
    cells = raw.get("cells")
    count = len(cells) if isinstance(cells, list) else 0
    worksheets = raw.get("worksheets")
    if isinstance(worksheets, list):
        count += sum(len(ws["cells"]) for ws in worksheets
                     if isinstance(ws, dict) and isinstance(ws.get("cells"), list))
    return count


def _too_many_cells(count: int) -> str:
    return f"has {count} cells, more than the {MAX_NOTEBOOK_CELLS} a notebook may have"


def _too_much_code(count: int) -> str:
    return f"has {count} characters of code, more than the {MAX_SOURCE_CHARS} a submission may run"


def _converted_cells(text: str, shown: str) -> object:
    """The cells of a notebook of another format than v4 (v3's worksheets), converted by
    nbformat. A v4 notebook's cells are read from its JSON directly: nbformat would parse it
    again and compile its schema validator (0.1 s a process) only to log what it finds."""
    import nbformat  # here: reading a module, a v4 notebook or peeking at a batch needs none of it

    try:
        nb = nbformat.reads(text, as_version=4)
    except Exception:  # nbformat raises several unrelated types for bad JSON/schema: none is the student's word
        raise SubmissionUnreadable(shown, "not a valid Jupyter notebook (an older notebook format that cannot "
                                          "be converted: open it in Jupyter and save it again)") from None
    return nb.get("cells") if isinstance(nb, dict) else None


def _notebook_cells(text: str, shown: str) -> tuple[list[SourceCell], str | None]:
    raw = _parse_json(text, shown)
    hint = _claim(raw, shown)
    count = _cell_count(raw)
    if count > MAX_NOTEBOOK_CELLS:
        raise SubmissionUnreadable(shown, _too_many_cells(count))
    cells_in = raw.get("cells") if raw.get("nbformat") == 4 else _converted_cells(text, shown)
    if not isinstance(cells_in, list):
        raise SubmissionUnreadable(shown, "not a valid Jupyter notebook (no list of cells)")
    if len(cells_in) > MAX_NOTEBOOK_CELLS:
        raise SubmissionUnreadable(shown, _too_many_cells(len(cells_in)))
    cells = []
    chars = 0
    numbered = 0  # the code cells Jupyter numbers after Run All, self-check cells too: all but blank ones
    for i, cell in enumerate(cells_in):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        metadata = cell.get("metadata")
        tags = metadata.get("tags") if isinstance(metadata, dict) else None
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise SubmissionUnreadable(shown, f"not a valid Jupyter notebook (cell {i + 1}'s source "
                                              "is not text)")
        numbered += 1 if source.strip() else 0
        notice = None
        if isinstance(tags, list) and SKIP_TAG in tags:
            source, notice = _own_code(_newlines(source))
        if source.strip():
            source = _newlines(source)
            chars += len(source)
            if chars > MAX_SOURCE_CHARS:
                raise SubmissionUnreadable(shown, _too_much_code(chars))
            cells.append(SourceCell(index=i, source=source, number=numbered, notice=notice))
    return cells, hint


def _own_code(source: str) -> tuple[str, str | None]:
    """A self-check cell's code without the template's lines (its import of the self-check and its
    unindented `check("exercise", "assignment")` calls, each left as an empty line so that line
    numbers stay the cell's), and the note the report gives when something is left."""
    exercises = []
    # the template's guarded import, its lines left empty
    source = _SELFCHECK_GUARD.sub(lambda guard: "\n" * guard[0].count("\n"), source, count=1)
    lines = _lines(source)
    for n, line in enumerate(lines):
        text = line.strip()
        call = _SELFCHECK_CALL.fullmatch(text)
        if line[:1].isspace() or not (_SELFCHECK_IMPORT.fullmatch(text) or call):
            continue
        if call:
            exercises.append(call["exercise"])
        lines[n] = "\n" if line.endswith("\n") else ""
    kept = "".join(lines)
    if not kept.strip():
        return "", None
    which = f"exercise {exercises[0]}'s self-check cell" if exercises else "a self-check cell"
    return kept, (f"is {which}: the code you wrote there was graded like an answer cell's, without the "
                  "self-check call (the grader runs the same checks); answers belong in the answer cell above it")


# ---------------------------------------------------------------------------- modules


def _lines(text: str) -> list[str]:
    """Lines as Python counts them (LF only: not form feeds, U+2028 and the others that
    str.splitlines also splits at), each keeping its LF."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _statement_starts(text: str) -> list[int] | None:
    """First lines of the top-level statements (a decorated definition from its first decorator),
    from the tokenizer: as ast would find them, in constant memory. None when the text does not
    tokenize (the kernel reports the syntax error where it is)."""
    starts: list[int] = []
    level = 0
    line_start = True
    decorated = False
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            kind = tok.type
            if kind in (tokenize.NL, tokenize.COMMENT, tokenize.ENDMARKER):
                continue
            if kind == tokenize.INDENT:
                level += 1
            elif kind == tokenize.DEDENT:
                level -= 1
            elif kind == tokenize.NEWLINE:
                line_start = True
            elif line_start:
                line_start = False
                if level == 0:
                    if not decorated and not (kind == tokenize.NAME and tok.string in _CONTINUATIONS):
                        starts.append(tok.start[0])
                    decorated = kind == tokenize.OP and tok.string == "@"
    except Exception:  # TokenError, SyntaxError (IndentationError, nesting too deep), RecursionError
        return None
    return starts


def _group(starts: list[int], limit: int = MAX_CELLS) -> list[int]:
    """At most `limit` cell starts: runs of consecutive starts merged, in equal runs."""
    if len(starts) <= limit:
        return starts
    size = -(-len(starts) // limit)
    return starts[::size]


def _module_cells(text: str) -> list[SourceCell]:
    lines = _lines(text)
    markers = [i + 1 for i, line in enumerate(lines) if line.startswith("# %%")]
    starts = markers or _statement_starts(text) or [1]
    if starts[0] != 1:
        starts = [1] + starts  # what comes before the first (comments) is kept too
    starts = _group(starts)
    bounds = list(zip(starts, starts[1:] + [len(lines) + 1]))
    cells = []
    for n, (lo, hi) in enumerate(bounds):
        source = "".join(lines[lo - 1 : hi - 1])
        if source.strip():
            cells.append(SourceCell(index=n, source=source, first_line=lo))
    return cells


def file_statement(submission: Submission, here: bool = False) -> str | None:
    """The statement that gives a module, run statement by statement, the `__file__` Python gives
    the script it runs (`python submit.py`): the file's name as the student named it, in the working
    folder of the process that runs it (the grading kernel's, which holds nothing else: the grader
    runs the submitted file alone), or (`here`) the file's own path, for the pack's `grade`, which
    runs in the student's folder. None for a notebook: Jupyter gives a notebook no `__file__`."""
    if submission.kind != "module":
        return None
    if here:
        return f"__file__ = {str(Path(submission.path).resolve())!r}"
    name = Path(submission.path).name
    return f"__file__ = __import__('os').path.join(__import__('os').getcwd(), {name!r})"


# ---------------------------------------------------------------------------- reading


def peek(path: str | Path) -> Peek:
    """A file's sha256 and the assignment its notebook metadata names, from one bounded read,
    without validating the notebook: what a batch decides with before grading anything.

    Raises SubmissionUnreadable (or WrongAssignment, for a claim that is not a string) for what
    read_submission would refuse as well; a notebook that is not JSON peeks as naming nothing
    (grading it reports that).
    """
    kind = _kind(path)
    shown = display_path(path)
    data = read_bytes(path)
    sha256 = hashlib.sha256(data).hexdigest()
    hint = None
    if kind == "notebook":
        text = _decode(data, shown, kind)
        del data
        try:
            raw = _parse_json(text, shown)
        except SubmissionUnreadable:
            raw = {}
        hint = _claim(raw, shown)
    return Peek(path=shown, kind=kind, sha256=sha256, assignment_hint=hint)


def read_submission(path: str | Path) -> Submission:
    """Load a submission or raise SubmissionUnreadable with one plain reason."""
    kind = _kind(path)
    shown = display_path(path)
    data = read_bytes(path)
    sha256 = hashlib.sha256(data).hexdigest()
    text = _decode(data, shown, kind)
    del data
    hint = None
    if kind == "notebook":
        cells, hint = _notebook_cells(text, shown)
    else:
        if "\x00" in text:
            raise SubmissionUnreadable(shown, "contains NUL bytes, so it is not Python source")
        if len(text) > MAX_SOURCE_CHARS:
            raise SubmissionUnreadable(shown, _too_much_code(len(text)))
        cells = _module_cells(text)
    return Submission(path=shown, kind=kind, sha256=sha256, cells=cells, assignment_hint=hint)
