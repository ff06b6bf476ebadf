"""The batch's outputs kept up to date while the service grades: rebuilt, debounced, off the
request path.

A graded hand-in changes its student's row of the gradebook; the reports, feedback pages,
summary.csv, class page and exports a batch writes are rebuilt from it by the batch's own code
(grader/outputs/rebuild.py), at most every `interval` seconds, in a thread of their own, and
once more when the service stops. Each rebuild is one commit of OUT's staging folder
(grader/outputs/staging.py), under OUT's lock, which the service holds for its whole run: a reader
of OUT sees the old outputs or the new, never half of them.

The gradebook itself is the service's live state (its job table is in it), so it is not staged:
the rebuild reads it, and writes to it what a rebuild writes (final scores, copied-work groups,
the exports kept), each in a transaction of its own. A crash between those writes and the
commit leaves outputs one rebuild behind, which the next start rebuilds.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from grader.inert import MESSAGE_LIMIT, terminal

if TYPE_CHECKING:
    from grader.report import Report

INTERVAL_S = 3.0


class Publisher:
    """A thread that rebuilds OUT's outputs when students' rows changed, at most every `interval`."""

    def __init__(self, out_dir: Path, interval: float = INTERVAL_S):
        self.out_dir = out_dir
        self.interval = interval
        self.published: Callable[[dict[str, Report]], None] | None = None
        """Told each rebuild's final reports (the LTI outbox owes them to the LMS: grader/lti/outbox.py)."""
        self.notices: Callable[[], list[str]] | None = None
        """More lines for the class page at each rebuild (the grades the LMS refused)."""
        self._changed: set[str] = set()
        self._dirty = False
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.rebuilds = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="grade-serve-publisher", daemon=True)
        self._thread.start()

    def changed(self, student: str | None = None) -> None:
        """Rows changed (this student's, or any): rebuild soon."""
        with self._cond:
            if student is not None:
                self._changed.add(student)
            self._dirty = True
            self._cond.notify()

    def stop(self) -> None:
        """Stop the thread, then rebuild once more if anything changed since the last rebuild."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
        self._publish_if_dirty()

    def _run(self) -> None:
        last = 0.0
        while True:
            with self._cond:
                while not self._dirty and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                # more hand-ins may be graded meanwhile: one rebuild for all of them
                while (wait := last + self.interval - time.monotonic()) > 0 and not self._stopping:
                    self._cond.wait(wait)
                if self._stopping:
                    return
            self._publish_if_dirty()
            last = time.monotonic()

    def _publish_if_dirty(self) -> None:
        with self._cond:
            if not self._dirty:
                return
            changed, self._changed, self._dirty = self._changed, set(), False
        try:
            reports = publish(self.out_dir, changed, self.notices() if self.notices is not None else [])
        except Exception as exc:  # noqa: BLE001 - the outputs lag; the gradebook has every result
            self._again(changed, f"the outputs in {terminal(self.out_dir)} could not be rebuilt", exc)
            return
        self.rebuilds += 1
        try:
            if self.published is not None:
                self.published(reports)
        except Exception as exc:  # noqa: BLE001 - owed at the next rebuild, which this one asks for
            self._again(changed, "the grades could not be queued for the LMS", exc)

    def _again(self, changed: set[str], what: str, exc: Exception) -> None:
        with self._cond:
            self._changed |= changed
            self._dirty = True
        print(f"grade serve: {what} ({terminal(f'{type(exc).__name__}: {exc}', MESSAGE_LIMIT)}); retrying",
              file=sys.stderr)


def publish(out_dir: Path, changed: set[str], notices: Sequence[str] = ()) -> dict[str, Report]:
    """Rebuild every output of OUT from its live gradebook, in one commit of the staging folder;
    the final reports (the grades after the late policy and adjustments)."""
    from grader.outputs.gradebook import Gradebook
    from grader.outputs.names import OutputFolder
    from grader.outputs.rebuild import rebuild
    from grader.outputs.staging import Staging

    stage = Staging(out_dir)
    try:
        with Gradebook(OutputFolder(out_dir).gradebook) as book:
            rebuilt = rebuild(stage, book, book.export_settings(), changed, notices)
    except BaseException:
        stage.abort()
        raise
    stage.commit()
    return rebuilt.reports
