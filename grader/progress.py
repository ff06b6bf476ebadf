"""A one-line progress bar for batches: done / total, failures, ETA; silent off a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None):
        self.total, self.done, self.failed = total, 0, 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() and total > 0
        self._started = time.monotonic()
        self._draw()

    def update(self, ok: bool) -> None:
        self.done += 1
        self.failed += 0 if ok else 1
        self._draw()

    def _draw(self) -> None:
        if not self.enabled:
            return
        width = 30
        filled = width * self.done // max(self.total, 1)
        elapsed = time.monotonic() - self._started
        eta = elapsed / self.done * (self.total - self.done) if self.done else 0.0
        eta_text = f"ETA {int(eta // 60)}:{int(eta % 60):02d}" if self.done else "ETA --:--"
        self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}"
                          f"  failed {self.failed}  {eta_text} ")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
