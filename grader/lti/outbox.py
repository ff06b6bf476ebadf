"""Grades on their way to the LMS: kept in the gradebook, sent by one thread, retried, never lost.

When the service's outputs are rebuilt (grader/serve/publish.py), `owe` writes, for every
student who launched from a platform, the grade the batch's policy gives them now (late work,
adjustments applied; a student taken out: their grade cleared) into their link's outbox row,
if it differs from what the row holds. Many hand-ins between two sends make one post: the row
holds one grade, the latest.

The `Poster` thread sends what is due, oldest first: a line item found or made when the launch
gave none, then the score (grader/lti/ags.py). A post the platform may take later (429, 5xx,
Canvas's 403 without rate left, the network) waits twice as long as the one before (from
FIRST_WAIT_S, at most MAX_WAIT_S), or the platform's Retry-After when longer; one refused for
good (another 4xx) is marked failed with the platform's words, and tried again only when the grade
changes. A row is marked sent only if the grade it sent is still the one owed (the publisher may
have changed it meanwhile), so a restart or a race re-sends, never skips. The table survives a
restart: the next start sends what is pending.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

from pydantic import BaseModel

from grader.inert import terminal
from grader.lti.ags import AgsClient, Outcome, Score
from grader.lti.registration import Platform, Registrations
from grader.lti.store import Link, LtiStore
from grader.report import Report

FIRST_WAIT_S = 2.0
MAX_WAIT_S = 3600.0


class Owed(BaseModel):
    """One outbox row: the grade a link's line item should show."""

    link: int
    score: float | None
    max_score: float
    timestamp: str
    attempts: int


def _stamp(after: str | None) -> str:
    """Now, in ISO 8601 with milliseconds, in a later second than `after`: platforms refuse a score
    not newer than the last (Moodle compares whole seconds, answering 409; Canvas 400)."""
    moment = datetime.now(timezone.utc)
    if after:
        try:
            earlier = datetime.fromisoformat(after)
        except ValueError:
            earlier = None
        if earlier is not None and moment.replace(microsecond=0) <= earlier.replace(microsecond=0):
            moment = earlier.replace(microsecond=0) + timedelta(seconds=1)
    return moment.isoformat(timespec="milliseconds")


def owe(store: LtiStore, reports: dict[str, Report]) -> int:
    """Record the grade each linked student is owed now; how many rows changed."""
    changed = 0
    with store.db as db:
        rows = {r[0]: r[1:] for r in db.execute("SELECT link, score, max_score, timestamp FROM lti_outbox")}
        for link in store.links():
            report = reports.get(link.student)
            row = rows.get(link.id)
            if report is not None:
                wanted = (round(report.final, 4), report.max_score)
            elif row is not None and row[0] is not None:
                wanted = (None, row[1])  # taken out: clear what the platform shows
            else:
                continue
            if row is not None and (row[0], row[1]) == wanted:
                continue
            db.execute("INSERT INTO lti_outbox (link, score, max_score, timestamp, state, attempts, next_at)"
                       " VALUES (?,?,?,?, 'pending', 0, 0) ON CONFLICT (link) DO UPDATE SET"
                       " score = excluded.score, max_score = excluded.max_score, timestamp = excluded.timestamp,"
                       " state = 'pending', attempts = 0, next_at = 0, status = NULL, error = NULL",
                       (link.id, wanted[0], wanted[1], _stamp(row[2] if row else None)))
            changed += 1
    return changed


def due(store: LtiStore, at: float) -> list[Owed]:
    rows = store.db.execute("SELECT link, score, max_score, timestamp, attempts FROM lti_outbox"
                            " WHERE state = 'pending' AND next_at <= ? ORDER BY next_at, link", (at,)).fetchall()
    return [Owed(link=r[0], score=r[1], max_score=r[2], timestamp=r[3], attempts=r[4]) for r in rows]


def next_due(store: LtiStore) -> float | None:
    row = store.db.execute("SELECT min(next_at) FROM lti_outbox WHERE state = 'pending'").fetchone()
    return row[0] if row and row[0] is not None else None


def counts(store: LtiStore, issuer: str, client_id: str, context_id: str) -> dict[str, int]:
    """The outbox's rows of one course of one platform, by state."""
    return dict(store.db.execute("SELECT o.state, count(*) FROM lti_outbox o JOIN lti_links l ON l.id = o.link"
                                 " WHERE l.issuer = ? AND l.client_id = ? AND l.context_id = ? GROUP BY o.state",
                                 (issuer, client_id, context_id)).fetchall())


def failures(store: LtiStore, issuer: str, client_id: str, context_id: str) -> list[tuple[str, int | None, str]]:
    """(student, status, the platform's words) of each grade one course of one platform refused."""
    return store.db.execute("SELECT l.student, o.status, coalesce(o.error, '') FROM lti_outbox o"
                            " JOIN lti_links l ON l.id = o.link WHERE o.state = 'failed' AND l.issuer = ?"
                            " AND l.client_id = ? AND l.context_id = ? ORDER BY l.student",
                            (issuer, client_id, context_id)).fetchall()


def refused_notice(store: LtiStore) -> list[str]:
    """The class page's line about grades the LMS refused (none: no line)."""
    row = store.db.execute("SELECT count(*), count(DISTINCT l.student) FROM lti_outbox o JOIN lti_links l"
                           " ON l.id = o.link WHERE o.state = 'failed'").fetchone()
    if not row or not row[0]:
        return []
    return [f"the LMS refused {row[0]} grade(s) of {row[1]} student(s): open the assignment from the LMS as an "
            "instructor to read what it said (they are sent again when a grade changes)"]


def wait_after(attempts: int, asked: float | None, first: float = FIRST_WAIT_S) -> float:
    """The wait before try `attempts + 2`: doubling from `first`, or what the platform asked when longer."""
    doubling = min(MAX_WAIT_S, first * 2 ** min(attempts, 30))
    return max(doubling, min(asked or 0.0, MAX_WAIT_S))


def _owned(platform: Platform, url: str) -> tuple[str | None, Outcome]:
    """`url` if it is the platform's (the access token goes there); else why it is refused."""
    if platform.owns(url):
        return url, Outcome(kind="done")
    from grader.serve.security import origin_of

    where = origin_of(url) or "an address that is not one"
    return None, Outcome(kind="refused", said=f"the LMS named a line item at {terminal(where, 100)}, which is not "
                                              "one of its registration's addresses: add it to the platform's origins")


class Poster:
    """The thread that sends the outbox's due grades."""

    def __init__(self, store: LtiStore, registrations: Registrations, ags: AgsClient, *, assignment: str,
                 label: str, first_wait_s: float = FIRST_WAIT_S,
                 log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)):
        self.store, self.registrations, self.ags = store, registrations, ags
        self.assignment, self.label, self.first_wait_s, self.log = assignment, label, first_wait_s, log
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="grade-serve-lti-outbox", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                for owed in due(self.store, time.time()):
                    if self._stopping.is_set():
                        return
                    try:
                        self.send(owed)
                    except Exception as exc:  # noqa: BLE001 - this row waits, the others go on
                        self._record(owed, Outcome(kind="again", said=f"the grader failed on it "
                                                   f"({type(exc).__name__})"), self.store.get_link(owed.link))
                soonest = next_due(self.store)
            except Exception as exc:  # noqa: BLE001 - the rows stay pending; the thread must not die
                self.log(f"grade serve: LTI grades could not be sent ({type(exc).__name__}: "
                         f"{terminal(str(exc), 200)}); retrying")
                soonest = time.time() + self.first_wait_s
            timeout = None if soonest is None else max(0.0, soonest - time.time())
            self._wake.wait(timeout if timeout is None else min(timeout, 60.0))
            self._wake.clear()

    def send(self, owed: Owed) -> Outcome:
        """Send one row's grade and record what came of it."""
        link = self.store.get_link(owed.link)
        platform = self.registrations.find(link.issuer, link.client_id) if link else None
        if link is None or platform is None:
            outcome = Outcome(kind="refused", said="this LMS is no longer among the service's LTI registrations")
        elif not platform.deploys(link.deployment_id) or (platform.contexts and link.context_id not in platform.contexts):
            outcome = Outcome(kind="refused", said="this course or deployment of the LMS is no longer registered: "
                                                   "its grades are not sent there")
        else:
            lineitem, outcome = self._lineitem(link, platform, owed)
            if lineitem is not None:
                outcome = self.ags.post_score(platform, lineitem, Score(
                    user_id=link.sub, score=owed.score, max_score=owed.max_score, timestamp=owed.timestamp))
        self._record(owed, outcome, link)
        return outcome

    def _lineitem(self, link: Link, platform: Platform, owed: Owed) -> tuple[str | None, Outcome]:
        from grader.lti.ags import LINEITEM_SCOPE

        if link.lineitem:
            return _owned(platform, link.lineitem)
        if not link.lineitems or LINEITEM_SCOPE not in link.scopes:
            return None, Outcome(kind="refused", said="the LMS's launch gave no line item for this assignment, "
                                                      "nor the right to make one: make it a graded assignment")
        container, refused = _owned(platform, link.lineitems)
        if container is None:
            return None, refused
        outcome, made = self.ags.find_or_create_lineitem(
            platform, container, resource_id=self.assignment, label=self.label, max_score=owed.max_score,
            resource_link_id=link.resource_link_id, granted=link.scopes)
        if made is None:
            return None, outcome
        lineitem, refused = _owned(platform, made)
        if lineitem is not None:
            self.store.set_lineitem(link.id, lineitem)
        return lineitem, refused

    def _record(self, owed: Owed, outcome: Outcome, link: Link | None) -> None:
        who = terminal(link.student, 60) if link else f"link {owed.link}"
        with self.store.db as db:
            if outcome.kind == "done":
                db.execute("UPDATE lti_outbox SET state = 'sent', sent_score = score, sent_at = ?, status = ?,"
                           " error = NULL WHERE link = ? AND timestamp = ?",
                           (owed.timestamp, outcome.status, owed.link, owed.timestamp))
            elif outcome.kind == "again":
                wait = wait_after(owed.attempts, outcome.wait_s, self.first_wait_s)
                db.execute("UPDATE lti_outbox SET attempts = attempts + 1, next_at = ?, status = ?, error = ?"
                           " WHERE link = ? AND timestamp = ?",
                           (time.time() + wait, outcome.status, outcome.said, owed.link, owed.timestamp))
            else:
                db.execute("UPDATE lti_outbox SET state = 'failed', status = ?, error = ? WHERE link = ?"
                           " AND timestamp = ?", (outcome.status, outcome.said, owed.link, owed.timestamp))
                self.log(f"grade serve: the LMS refused {who}'s grade ({outcome.status or 'no answer'}: "
                         f"{terminal(outcome.said, 200)}); it is sent again when the grade changes")
