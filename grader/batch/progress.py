"""A one-line progress bar for batches: done / total, failures, ETA; silent off a terminal.

It may name the submission last graded (`update(ok, label=student)`): that label is a student's
folder or file name, so it is made inert and capped (`grader.inert.name`) before it is drawn.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from grader.inert import name

LABEL_LIMIT = 32  # characters of the last submission's name on the bar


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None):
        self.total, self.done, self.failed = total, 0, 0
        self.stream = stream if stream is not None else sys.stderr
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

    def _draw(self) -> None:
        if not self.enabled:
            return
        width = 30
        filled = width * self.done // max(self.total, 1)
        elapsed = time.monotonic() - self._started
        eta = elapsed / self.done * (self.total - self.done) if self.done else 0.0
        eta_text = f"ETA {int(eta // 60)}:{int(eta % 60):02d}" if self.done else "ETA --:--"
        line = (f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}"
                f"  failed {self.failed}  {eta_text} " + (f" last: {self._label} " if self._label else ""))
        self.stream.write("\r" + line + " " * max(self._drawn - len(line), 0))
        self._drawn = len(line)
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


class StageLine:
    """One submission's progress on a terminal: once a grading has run for `after` seconds, a
    line says what it does (which cell, which exercise) and for how long, redrawn every second
    by a timer thread, so a cell that never ends is not silence. Silent off a terminal."""

    def __init__(self, stream: TextIO | None = None, after: float = 3.0):
        import threading

        self.stream = stream if stream is not None else sys.stderr
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
                text = f"grading: {self._stage} ({elapsed:.0f} s)"
                self.stream.write("\r" + text.ljust(self._drawn))
                self.stream.flush()
                self._drawn = len(text)

    def close(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=2)
        if self._drawn:
            self.stream.write("\r" + " " * self._drawn + "\r")
            self.stream.flush()
