"""A one-line progress bar for batches: done / total, failures, ETA; silent off a terminal.

It may name the submission last graded (`update(ok, label=student)`): that label is a student's
folder or file name, so it is made inert and capped (`grader.inert.name`) before it is drawn.

The line fits the terminal's width, read at every redraw (a terminal resized mid-batch too): a
line longer than the terminal would wrap, and the next `\r` would redraw only its last row,
leaving the rest cut mid-word above it. What does not fit is left out whole, least useful first
(the last submission's name, then the bar, which also narrows), never cut inside a word, and "…"
says something was left out. A stream that tells no width (not a real terminal) gets it all.
"""

from __future__ import annotations

import os
import sys
import time
import unicodedata
from typing import TextIO

from grader.inert import name

LABEL_LIMIT = 32  # characters of the last submission's name on the bar
BAR_WIDTH = 30  # cells of the bar on a wide terminal
BAR_MIN = 10  # a narrower bar says nothing: left out
ELLIPSIS = "…"


def columns(text: str) -> int:
    """The terminal cells `text` takes: wide (CJK) characters two, combining marks none."""
    return sum(0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
               for ch in text)


def fit_pieces(pieces: list[str], width: int | None, sep: str = "  ") -> str:
    """`pieces` joined by `sep`, as many as fit in `width` cells from the first, each whole; " …"
    ends the line when some were left out (None: no limit)."""
    if width is None:
        return sep.join(pieces)
    kept: list[str] = []
    for piece in pieces:
        if columns(sep.join([*kept, piece])) <= width:
            kept.append(piece)
            continue
        while kept and columns(sep.join(kept)) + 2 > width:
            kept.pop()
        return f"{sep.join(kept)} {ELLIPSIS}" if kept else ELLIPSIS if width >= 1 else ""
    return sep.join(kept)


def fit_words(text: str, width: int | None) -> str:
    """`text` cut at the last space that leaves room for "…" in `width` cells; whole if it fits."""
    if width is None or columns(text) <= width:
        return text
    words = text.split(" ")
    kept = ""
    for word in words:
        candidate = f"{kept} {word}" if kept else word
        if columns(candidate) + 2 > width:
            break
        kept = candidate
    return f"{kept} {ELLIPSIS}" if kept else ELLIPSIS


def terminal_width(stream: TextIO) -> int | None:
    """The columns of the terminal `stream` writes to, less one (writing the last column makes
    some terminals wrap); None when it tells none."""
    try:
        return max(os.get_terminal_size(stream.fileno()).columns - 1, 1)
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return None


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None, width: int | None = None):
        self.total, self.done, self.failed = total, 0, 0
        self.stream = stream if stream is not None else sys.stderr
        self._width = width  # cells the line may take; None: the terminal's, read at each redraw
        self.enabled = self.stream.isatty() and total > 0
        self._started = time.monotonic()
        self._label = ""
        self._drawn = 0  # length of the line drawn last, to blank what a shorter one leaves
        self._draw()

    def update(self, ok: bool, label: str | None = None) -> None:
        self.done += 1
        self.failed += 0 if ok else 1
        self._label = "" if label is None else name(label, LABEL_LIMIT)
        self._draw()

    def line(self, width: int | None) -> str:
        """The status line in at most `width` cells (None: no limit)."""
        elapsed = time.monotonic() - self._started
        eta = elapsed / self.done * (self.total - self.done) if self.done else 0.0
        eta_text = f"ETA {int(eta // 60)}:{int(eta % 60):02d}" if self.done else "ETA --:--"
        counts = fit_pieces([f"{self.done}/{self.total}", f"failed {self.failed}", eta_text], width)
        room = BAR_WIDTH if width is None else min(BAR_WIDTH, width - columns(counts) - 3)
        line = counts
        if room >= BAR_MIN and not counts.endswith(ELLIPSIS):
            filled = room * self.done // max(self.total, 1)
            line = f"[{'#' * filled}{'.' * (room - filled)}] {counts}"
        if self._label and not counts.endswith(ELLIPSIS):
            last = f"{line}  last: {self._label}"
            line = last if width is None or columns(last) <= width else line
        return line

    def _draw(self) -> None:
        if not self.enabled:
            return
        width = self._width if self._width is not None else terminal_width(self.stream)
        line = self.line(width)
        blank = max(self._drawn - columns(line), 0)
        if width is not None:
            blank = min(blank, max(width - columns(line), 0))
        self.stream.write("\r" + line + " " * blank)
        self._drawn = columns(line)
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


class StageLine:
    """One submission's progress on a terminal: once a grading has run for `after` seconds, a
    line says what it does (which cell, which exercise) and for how long, redrawn every second
    by a timer thread, so a cell that never ends is not silence. Silent off a terminal."""

    def __init__(self, stream: TextIO | None = None, after: float = 3.0, width: int | None = None):
        import threading

        self.stream = stream if stream is not None else sys.stderr
        self._width = width  # as Progress's
        self.enabled = self.stream.isatty()
        self._stage = "starting"
        self._started = time.monotonic()
        self._after = after
        self._drawn = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True) if self.enabled else None
        if self._thread:
            self._thread.start()

    def __call__(self, stage: str) -> None:
        self._stage = name(stage, 60)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            elapsed = time.monotonic() - self._started
            if elapsed >= self._after:
                width = self._width if self._width is not None else terminal_width(self.stream)
                text = self.line(elapsed, width)
                blank = max(self._drawn - columns(text), 0)
                if width is not None:
                    blank = min(blank, max(width - columns(text), 0))
                self.stream.write("\r" + text + " " * blank)
                self.stream.flush()
                self._drawn = columns(text)

    def line(self, elapsed: float, width: int | None) -> str:
        """What the grading does and for how long, in at most `width` cells (the time kept)."""
        doing, took = f"grading: {self._stage}", f" ({elapsed:.0f} s)"
        if width is not None and width < columns(took) + 2:
            return fit_words(doing + took, width)
        return fit_words(doing, None if width is None else width - columns(took)) + took

    def close(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=2)
        if self._drawn:
            self.stream.write("\r" + " " * self._drawn + "\r")
            self.stream.flush()
