"""Student text made inert before the grader shows it: on a terminal, in a CSV cell, in HTML.

Why: a student controls much of what the grader prints (their cells' exception messages, file
and folder names, which become student ids, values quoted in failure messages). Printed raw, an
ESC sequence in any of them can move the cursor, clear the screen and paint "Total 100 / 100"
on the instructor's terminal; a bidi override (U+202E) can reverse text; zero-width and other
format characters can hide text or make two ids look the same; a CSV cell that starts with `=`
is a formula when the CSV is opened in a spreadsheet.

What is escaped, visibly (`\\x1b`, `\\u202e`, `\\n`), never dropped:

- control characters (Unicode category Cc): C0, DEL and C1, so also `\\r`, `\\t` and `\\n`
  (`text` keeps `\\n`, for multi-line text whose lines cannot be mistaken for the grader's);
- format characters (Cf): bidi embeddings, overrides and isolates (U+202A-U+202E,
  U+2066-U+2069), marks (U+200E, U+200F, U+061C), zero-width space and joiners, BOM, tags...;
- line and paragraph separators (Zl, Zp), which some terminals and editors treat as newlines;
- lone surrogates (Cs), as Python decodes undecodable bytes of a file name, which would otherwise
  make printing or writing UTF-8 fail;
- a few invisible letters used to make blank-looking names (Hangul fillers, U+034F).

A message shown on a terminal (`flowing`) reads as one line: its own line breaks and
indentation become single spaces (a cell's `assert ok, "wrong:\\n  expected ..."`), never a
literal `\\n`, and no part of it can start a line of the grader's.

Letters of any script are kept: `classreport` marks ids with non-ASCII letters instead, so that
`alice` and a Cyrillic look-alike can be told apart. Backslashes are kept as they are, so a
student's literal "\\x1b" reads the same as an escaped ESC: harmless, since it is inert either way.
"""

from __future__ import annotations

import re
import unicodedata

MESSAGE_LIMIT = 1000  # characters of a message (a check's, a cell's, an error) shown on a terminal
NAME_LIMIT = 80  # characters of an id (a student's, an assignment's, a check's) on a terminal
PATH_LIMIT = 200  # characters of a path on a terminal

_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_INVISIBLE = frozenset("\u034f\u115f\u1160\u3164\uffa0")  # not Cf, yet shown as nothing
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_BREAK = re.compile(r"[ \t]*(?:\r?\n|\t)[ \t]*")  # a line break or a tab, and the indentation around it

# OWASP, CSV Injection: no cell may begin with these (a spreadsheet would read a formula)
FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def unsafe(ch: str) -> bool:
    """Whether this character must not reach a terminal, a spreadsheet or a page as it is."""
    return ch in _INVISIBLE or unicodedata.category(ch) in _UNSAFE_CATEGORIES


def escape_char(ch: str) -> str:
    """`\\n`, `\\r`, `\\t`; else `\\xNN`, `\\uNNNN` or `\\UNNNNNNNN` (only ASCII characters)."""
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _cut(remaining: int) -> str:
    return f"… ({remaining} more character{'' if remaining == 1 else 's'})"


def _inert(value: object, limit: int | None, keep: str) -> str:
    s = str(value)
    if (limit is None or len(s) <= limit) and s.isprintable() and _INVISIBLE.isdisjoint(s):
        return s  # the common case, decided in C: nothing to escape, nothing to cut
    out: list[str] = []
    used = 0
    for i, ch in enumerate(s):
        piece = escape_char(ch) if ch not in keep and unsafe(ch) else ch
        if limit is not None and used + len(piece) > limit:
            return "".join(out) + _cut(len(s) - i)
        out.append(piece)
        used += len(piece)
    return "".join(out)


def terminal(text: object, limit: int | None = None) -> str:
    """One line of inert text for a terminal: every unsafe character escaped, newlines too.

    With `limit`, at most that many characters of the escaped text are kept, followed by
    "… (N more characters)", N counting the characters of `text` that were cut.
    """
    return _inert(text, limit, keep="")


def flowing(value: object, limit: int | None = None) -> str:
    """A message as one line of a terminal, as a student reads it: its own line breaks, tabs and
    indentation (a cell's `assert ok, f"wrong:\\n  expected {a}\\n  got {b}"`) become single spaces
    instead of a literal `\\n`, so no part of it can start a line of the grader's; everything else
    is escaped as by `terminal`. Cut to `limit` where a clause ends (". ", "; ", ", ", ": "), else
    between words, never mid-word when a break is near, followed by "… (N more characters)"."""
    s = _BREAK.sub(" ", str(value)).strip(" ")
    shown = _inert(s, None, keep="")
    if limit is None or len(shown) <= limit:
        return shown
    raw = used = 0  # characters of `s` whose escaped form fits in `limit`
    while raw < len(s):
        used += len(escape_char(s[raw]) if unsafe(s[raw]) else s[raw])
        if used > limit:
            break
        raw += 1
    head = s[:raw]
    cut = max(head.rfind(mark) + 1 for mark in (". ", "; ", ", ", ": "))
    if cut < raw // 2:
        cut = head.rfind(" ") if head.rfind(" ") >= raw // 2 else raw
    kept = head[:cut].rstrip()
    return _inert(kept, None, keep="") + _cut(len(s) - len(kept))


def name(text: object, limit: int = NAME_LIMIT) -> str:
    """An id or a file name on a terminal: `terminal` with a cap for names."""
    return _inert(text, limit, keep="")


def text(value: object, limit: int | None = None) -> str:
    """Inert multi-line text (Gradescope's output, a CSV cell, a page): `terminal` but newlines kept."""
    return _inert(value, limit, keep="\n")


def ascii_form(value: object) -> str:
    """Every character that is not printable ASCII escaped: `аlice` (Cyrillic а) -> `\\u0430lice`."""
    return "".join(ch if " " <= ch <= "~" else escape_char(ch) for ch in str(value))


def code_points(value: object) -> list[str]:
    """The distinct characters of `value` that `ascii_form` escapes, described, in order of first
    appearance: "U+0430 CYRILLIC SMALL LETTER A", "U+202E RIGHT-TO-LEFT OVERRIDE"."""
    seen: dict[str, None] = {}
    for ch in str(value):
        if not " " <= ch <= "~":
            seen.setdefault(ch)
    kinds = {"Cc": "(a control character)", "Cs": "(a lone surrogate)"}
    return [f"U+{ord(ch):04X} "
            + (unicodedata.name(ch, "") or kinds.get(unicodedata.category(ch), "(an unnamed character)"))
            for ch in seen]


def csv_cell(value: object) -> str:
    """A text cell of a CSV the grader writes, neutralised as OWASP's CSV Injection page says:
    a cell that begins with `=`, `+`, `-`, `@`, a tab or a carriage return gets a leading `'`
    (a spreadsheet then reads text, not a formula); then unsafe characters are escaped as by
    `text` (newlines kept). Write such cells quoted, so that a field separator inside a cell
    (`,` or, in some locales, `;`) cannot start a new cell: see `exports.write_summary_csv`.
    Numbers are not cells of this kind: write them as numbers.
    """
    s = str(value)
    if s.startswith(FORMULA_TRIGGERS):
        s = "'" + s
    return text(s)
