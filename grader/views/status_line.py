"""What runs now, on one line of a terminal's stderr: the pack's check and its hand-in's wait."""

from __future__ import annotations

import sys


class Progress:
    """What runs now, on one line of a terminal's stderr (nothing when it is not a terminal)."""

    def __init__(self) -> None:
        self.shown = sys.stderr.isatty()

    def __call__(self, text: str) -> None:
        if self.shown:
            sys.stderr.write(f"\r\033[K{text}…")
            sys.stderr.flush()

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
