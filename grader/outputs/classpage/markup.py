"""The class page's small pieces of HTML, each made safe where it is made.

Every string that reaches the page passes `esc` (inert first, `grader.inert`: control, bidi and
invisible characters shown as `\\u202e` and the like; then HTML-escaped, quotes too, so it is
safe in an element and in a quoted attribute). Every link is relative and percent-encoded
segment by segment (`href`), so that no student id becomes a scheme (`javascript:`), a query, a
fragment, another folder or an attribute break-out.
"""

from __future__ import annotations

import html
import re
import unicodedata
from urllib.parse import quote

from grader import inert
from grader.outputs.classpage.summary import Bin


def esc(text: object) -> str:
    """Text for the page (an element's content or a quoted attribute): inert, then HTML-escaped."""
    return html.escape(inert.text(text), quote=True)


def esc_line(text: object, limit: int | None = None) -> str:
    """One line of text (newlines shown as `\\n`), at most `limit` characters of it."""
    return html.escape(inert.terminal(text, limit), quote=True)


def first_line(text: str, limit: int = 300) -> str:
    """The first line of a message (a traceback's last line comes first in the grader's)."""
    line, _, rest = text.strip().partition("\n")
    return esc_line(line, limit) + (" …" if rest.strip() else "")


def _segment(name: str) -> str:
    """Every character but unreserved ones percent-encoded; the bytes of a name Python decoded
    with surrogateescape are encoded back as they were."""
    try:
        return quote(name, safe="", errors="surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate no file system name decodes to
        return quote(name, safe="", errors="backslashreplace")


def href(file_name: str) -> str:
    """A link to a file beside the page: one path segment (`/`, `?`, `#`, `:` encoded too)."""
    return _segment(file_name)


def href_path(path: str) -> str:
    """A link to a file below the page (`feedback/x.html`): each `/`-separated segment encoded;
    a path with an empty, `.` or `..` segment is encoded whole, as one segment, so it cannot
    climb out of the batch's folder."""
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return _segment(path)
    return "/".join(_segment(p) for p in parts)


_FAMILY = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HANGUL": "CJK", "BOPOMOFO": "CJK"}
"""Scripts written together in one name (Japanese and Korean names mix these with Han)."""
_LATIN_LOOKALIKES = frozenset("аеіјорсухѕԁһԛԝӏАВЕІЈКМНОРСТУХЅ" "αικνορτυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ")
"""Cyrillic and Greek letters that look like Latin ones: a name of only these reads as ASCII."""


def _script(ch: str) -> str:
    """A letter's script, as the first word of its Unicode name (`LATIN`, `CYRILLIC`, `CJK`, ...)."""
    word = unicodedata.name(ch, "?").split(" ", 1)[0]
    return _FAMILY.get(word, word)


def looks_like_another(student: str) -> bool:
    """Whether a name could be mistaken for another: letters of several scripts (a Cyrillic `а`
    in `аlice`), a letter that is an ASCII one in another form (fullwidth, mathematical), or a
    Cyrillic or Greek name made only of letters that look Latin (`аре`). A name written in one
    script, whichever (`Zoë Ångström`, `李雷`, `محمد`), is not."""
    letters = [ch for ch in student if unicodedata.category(ch).startswith("L")]
    if any(not ch.isascii() and unicodedata.normalize("NFKC", ch).isascii() for ch in letters):
        return True
    scripts = {_script(ch) for ch in letters}
    if len(scripts) > 1:
        return True
    return bool(letters) and scripts <= {"CYRILLIC", "GREEK"} and _LATIN_LOOKALIKES.issuperset(letters)


_BREAK_AFTER = re.compile(r"(?<=[_@.\-+])(?=.)")
"""Where a long id may wrap: after `_`, `@`, `.`, `-` and `+`, never inside a number or a word."""


def _shown(student: str) -> str:
    """The name as the page shows it: inert, escaped, with a line-break opportunity (`<wbr>`) after
    each separator, so a long id wraps between its parts (`doealice_` | `10001`), never mid-number."""
    return "<wbr>".join(html.escape(part, quote=True) for part in _BREAK_AFTER.split(inert.terminal(student)))


def student_name(student: str, link: str | None) -> str:
    """The student's name as written (a link when `link`), in any script, its characters that
    are not text (control, bidi, invisible) shown escaped. A name that could be mistaken for
    another (`looks_like_another`) or holds such characters is marked, its ASCII form shown and
    its code points in a tooltip, so `alice` and a Cyrillic `аlice` can be told apart."""
    shown = _shown(student)
    out = f'<a class="who" href="{esc(link)}">{shown}</a>' if link else f'<span class="who">{shown}</span>'
    if inert.terminal(student) == student and not looks_like_another(student):
        return out
    ascii_form = inert.ascii_form(student)
    points = inert.code_points(student)
    listed = ", ".join(points[:20]) + (", …" if len(points) > 20 else "")
    mark = "non-ASCII" if not student.isascii() else "unprintable"
    return (f'{out} <span class="badge nonascii" title="{esc(f"ASCII form: {ascii_form}; {listed}")}">'
            f'{mark}</span> <code class="ascii">{_shown(ascii_form)}</code>')


def plain_name(student: str, link: str | None) -> str:
    """The student's name as written, its non-text characters escaped, without the mark: where a
    name is repeated after the students table has shown it marked."""
    shown = _shown(student)
    return f'<a class="who" href="{esc(link)}">{shown}</a>' if link else f'<span class="who">{shown}</span>'


def num(x: float) -> str:
    """12 -> "12", 12.5 -> "12.5", 12.3456 -> "12.3", -0.0 -> "0"."""
    shown = f"{x:.1f}".removesuffix(".0")
    return "0" if shown == "-0" else shown


def signed(x: float) -> str:
    """+2, −1.5 (a minus sign, not a hyphen)."""
    return ("+" if x >= 0 else "−") + num(abs(x))


def meter(fraction: float) -> str:
    pct = max(0.0, min(1.0, fraction)) * 100
    tone = "low" if pct < 50 else "mid" if pct < 80 else "high"
    return f'<span class="meter"><span class="fill {tone}" style="width:{pct:.1f}%"></span></span>'


def score_cell(score: float | None, max_score: float) -> str:
    """A student's score on an exercise; tinted when below half marks."""
    if score is None:
        return '<td class="n">—</td>'
    weak = " weak" if max_score and score < max_score / 2 else ""
    return f'<td class="n{weak}">{num(score)}</td>'


def histogram_svg(bins: list[Bin]) -> str:
    """Bars of students per band of percent, the not graded part of each bar in grey."""
    # drawn for a phone's width (the page scales it up to 560 px, never down below its box): a wider
    # drawing scrolled its last bars off a 375 px screen, and scaled down its labels could not be read
    w, h, left, bottom, top = 440, 230, 6, 30, 22
    plot_h = h - bottom - top
    slot = (w - left - 8) / len(bins)
    peak = max((b.count for b in bins), default=0) or 1
    parts = [f'<svg class="histogram" viewBox="0 0 {w} {h}" role="img" aria-label="score distribution">',
             f'<line class="axis" x1="{left}" y1="{h - bottom}" x2="{w - 4}" y2="{h - bottom}"/>']
    for i, b in enumerate(bins):
        x, bw = left + i * slot + 3, slot - 6
        bar_h, err_h = plot_h * b.count / peak, plot_h * b.errors / peak
        y = h - bottom - bar_h
        upper = "≤" if i == len(bins) - 1 else "<"
        who = f"{b.count} student{'s' if b.count != 1 else ''}"
        tip = (f"{who} with {num(b.lo)}% ≤ score {upper} {num(b.hi)}%"
               + (f" ({b.errors} not graded)" if b.errors else ""))
        parts.append(f'<g class="bin" data-count="{b.count}"><title>{esc(tip)}</title>'
                     f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bw:.1f}" height="{bar_h:.1f}"/>')
        if b.errors:
            parts.append(f'<rect class="bar-error" x="{x:.1f}" y="{h - bottom - err_h:.1f}" '
                         f'width="{bw:.1f}" height="{err_h:.1f}"/>')
        parts.append(f'<text class="count{" zero" if not b.count else ""}" x="{x + bw / 2:.1f}" '
                     f'y="{y - 6:.1f}">{b.count}</text><text class="tick" x="{x + bw / 2:.1f}" '
                     f'y="{h - bottom + 17}">{esc(f"{num(b.lo)}–{num(b.hi)}")}</text></g>')
    parts.append("</svg>")
    return "".join(parts)
