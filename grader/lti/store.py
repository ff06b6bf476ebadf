"""What the LTI side keeps, in OUT's gradebook beside the job table, so a restart loses nothing:

    lti_used(nonce, used_at)                                       -- logins finished: each once
    lti_sessions(sha256, student, expires_at)                      -- a launch's hand-in token, hashed
    lti_links(id, issuer, client_id, deployment_id, context_id, sub, student, lineitem, lineitems,
              scopes, resource_link_id, launched_at)               -- where a student's grade goes
    lti_outbox(link, score, max_score, timestamp, state, attempts, next_at, status, error,
               sent_score, sent_at)                                 -- the grade owed to each link

A link is one student of one platform's context (course): their latest launch's line item. Its
outbox row is the grade the line item should show, replaced (never appended) when the policy's
grade changes, so a platform is sent one score per student and line item, the latest, however
many hand-ins there were (grader/lti/outbox.py).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import sqlite3
import time
from pathlib import Path

from pydantic import BaseModel

from grader.outputs.connections import Connections

SCHEMA = """
CREATE TABLE IF NOT EXISTS lti_used (nonce TEXT PRIMARY KEY, used_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS lti_used_at ON lti_used(used_at);
CREATE TABLE IF NOT EXISTS lti_sessions (sha256 TEXT PRIMARY KEY, student TEXT NOT NULL, expires_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS lti_links (
    id INTEGER PRIMARY KEY, issuer TEXT NOT NULL, client_id TEXT NOT NULL, deployment_id TEXT NOT NULL,
    context_id TEXT NOT NULL, sub TEXT NOT NULL, student TEXT NOT NULL, lineitem TEXT, lineitems TEXT,
    scopes TEXT NOT NULL, resource_link_id TEXT NOT NULL, launched_at REAL NOT NULL,
    UNIQUE (issuer, client_id, deployment_id, context_id, sub)
);
CREATE TABLE IF NOT EXISTS lti_outbox (
    link INTEGER PRIMARY KEY REFERENCES lti_links(id), score REAL, max_score REAL NOT NULL,
    timestamp TEXT NOT NULL, state TEXT NOT NULL CHECK (state IN ('pending', 'sent', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0, next_at REAL NOT NULL DEFAULT 0, status INTEGER, error TEXT,
    sent_score REAL, sent_at TEXT
);
CREATE INDEX IF NOT EXISTS lti_outbox_due ON lti_outbox(state, next_at);
"""

STATE_LIFETIME_S = 600.0
SESSION_LIFETIME_S = 12 * 3600.0
SESSION_PREFIX = "gs_"


class Link(BaseModel):
    """Where one student's grade goes on one platform."""

    id: int
    issuer: str
    client_id: str
    deployment_id: str
    context_id: str
    sub: str
    student: str
    lineitem: str | None
    lineitems: str | None
    scopes: list[str]
    resource_link_id: str


_LINK_COLUMNS = ("id, issuer, client_id, deployment_id, context_id, sub, student, lineitem, lineitems, scopes,"
                 " resource_link_id")


def _link(row: tuple) -> Link:
    values = dict(zip([c.strip() for c in _LINK_COLUMNS.split(",")], row))
    values["scopes"] = json.loads(values["scopes"])
    return Link(**values)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class LtiStore:
    """The tables above, one connection per thread (the web server's, the outbox's)."""

    def __init__(self, gradebook: Path):
        self.path = gradebook
        self._connections = Connections(gradebook)
        self._secret = secrets.token_bytes(32)  # this run's: a login begun before a restart is begun again
        self.db.executescript(SCHEMA)

    @property
    def db(self) -> sqlite3.Connection:
        return self._connections.get()

    def close_all(self) -> None:
        """Close every thread's connection (the service has stopped)."""
        self._connections.close_all()

    # ------------------------------------------------------------------ logins

    def begin(self, platform: int) -> tuple[str, str]:
        """A new login's (state, nonce) for registration number `platform`. Nothing is written: the
        state carries its nonce, platform and time under this run's MAC (/lti/login answers anyone
        who names a registered issuer, and must cost nothing to ask)."""
        nonce, issued = secrets.token_urlsafe(24), str(int(time.time()))
        body = f"{platform}.{nonce}.{issued}"
        return f"{body}.{self._mac(body)}", nonce

    def check(self, state: str) -> tuple[int, str] | None:
        """The (platform, nonce) of a login this run began, not older than STATE_LIFETIME_S, or
        None; nothing is written (a launch whose token does not check out costs no row)."""
        parts = state.split(".") if isinstance(state, str) and len(state) <= 200 else []
        if len(parts) != 4 or not parts[0].isdigit() or not parts[2].isdigit() or not parts[0].isascii() \
                or not parts[2].isascii():
            return None
        if not hmac.compare_digest(parts[3], self._mac(".".join(parts[:3]))):
            return None
        if not 0 <= time.time() - int(parts[2]) <= STATE_LIFETIME_S:
            return None
        return int(parts[0]), parts[1]

    def use(self, nonce: str) -> bool:
        """Keep a checked login's nonce as used; False when it was used before (a replay)."""
        with self.db as db:
            db.execute("DELETE FROM lti_used WHERE used_at < ?", (time.time() - 2 * STATE_LIFETIME_S,))
            return db.execute("INSERT OR IGNORE INTO lti_used VALUES (?, ?)", (nonce, time.time())).rowcount == 1

    def _mac(self, body: str) -> str:
        digest = hmac.new(self._secret, body.encode(), hashlib.sha256).digest()[:24]
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    # ------------------------------------------------------------------ sessions

    def open_session(self, student: str) -> str:
        token = SESSION_PREFIX + secrets.token_urlsafe(32)
        with self.db as db:
            db.execute("DELETE FROM lti_sessions WHERE expires_at < ?", (time.time(),))
            db.execute("INSERT INTO lti_sessions VALUES (?,?,?)",
                       (_digest(token), student, time.time() + SESSION_LIFETIME_S))
        return token

    def session_student(self, token: str) -> str | None:
        """The student of a launch's token still valid (None: no such token)."""
        if not token.startswith(SESSION_PREFIX) or len(token) > 512:
            return None
        row = self.db.execute("SELECT student FROM lti_sessions WHERE sha256 = ? AND expires_at >= ?",
                              (_digest(token), time.time())).fetchone()
        return row[0] if row else None

    # ------------------------------------------------------------------ links

    def link(self, *, issuer: str, client_id: str, deployment_id: str, context_id: str, sub: str, student: str,
             lineitem: str | None, lineitems: str | None, scopes: list[str],
             resource_link_id: str) -> tuple[Link, bool]:
        """Record (or update) where this launch's student's grade goes, the latest launch's line item
        winning; whether that is new (a new link, or another student or line item for it: what its
        outbox row said was sent is then forgotten, so the grade is owed there again)."""
        key = (issuer, client_id, deployment_id, context_id, sub)
        with self.db as db:
            before = db.execute("SELECT id, student, lineitem FROM lti_links WHERE issuer = ? AND client_id = ?"
                                " AND deployment_id = ? AND context_id = ? AND sub = ?", key).fetchone()
            row = db.execute(
                "INSERT INTO lti_links (issuer, client_id, deployment_id, context_id, sub, student, lineitem,"
                " lineitems, scopes, resource_link_id, launched_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
                " ON CONFLICT (issuer, client_id, deployment_id, context_id, sub) DO UPDATE SET"
                " student = excluded.student, lineitem = COALESCE(excluded.lineitem, lti_links.lineitem),"
                " lineitems = excluded.lineitems, scopes = excluded.scopes,"
                " resource_link_id = excluded.resource_link_id, launched_at = excluded.launched_at"
                f" RETURNING {_LINK_COLUMNS}",
                (*key, student, lineitem, lineitems, json.dumps(scopes), resource_link_id, time.time())).fetchone()
            found = _link(row)
            changed = before is None or (before[1], before[2]) != (found.student, found.lineitem)
            if changed and before is not None:
                db.execute("DELETE FROM lti_outbox WHERE link = ?", (found.id,))
        return found, changed

    def bound_to(self, issuer: str, client_id: str, sub: str) -> set[str]:
        """The students this platform user's launches were linked to before (any course)."""
        return {row[0] for row in self.db.execute(
            "SELECT DISTINCT student FROM lti_links WHERE issuer = ? AND client_id = ? AND sub = ?",
            (issuer, client_id, sub))}

    def links(self) -> list[Link]:
        return [_link(r) for r in self.db.execute(f"SELECT {_LINK_COLUMNS} FROM lti_links ORDER BY id")]

    def get_link(self, link_id: int) -> Link | None:
        row = self.db.execute(f"SELECT {_LINK_COLUMNS} FROM lti_links WHERE id = ?", (link_id,)).fetchone()
        return _link(row) if row else None

    def set_lineitem(self, link_id: int, lineitem: str) -> None:
        with self.db as db:
            db.execute("UPDATE lti_links SET lineitem = ? WHERE id = ?", (lineitem, link_id))
