"""One SQLite connection per thread to a gradebook that several threads use at once (the hand-in
service's web server threads, its dispatcher, its publisher, the LTI outbox): SQLite connections
must not be shared between threads that use them at the same time, and a service that stops closes
every one of them, from whichever thread stops it."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path


class Connections:
    """This thread's connection to `path` (made on first use), and all of them closed at once."""

    def __init__(self, path: Path):
        self.path = path
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self._lock = threading.Lock()

    def get(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            # used by its own thread only; closed from another one by close_all
            db = self._local.db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            with self._lock:
                self._opened.append(db)
        return db

    def close_mine(self) -> None:
        """Close this thread's connection."""
        db = getattr(self._local, "db", None)
        if db is not None:
            with self._lock:
                self._opened = [d for d in self._opened if d is not db]
            db.close()
            del self._local.db

    def close_all(self) -> None:
        """Close every thread's connection, once they are done."""
        with self._lock:
            opened, self._opened = self._opened, []
        for db in opened:
            db.close()
        self._local = threading.local()
