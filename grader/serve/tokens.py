"""A token per student: how the hand-in service knows who hands in (`grade tokens`).

A token is 32 random bytes (`secrets.token_urlsafe(32)`) behind a short prefix, so that it never
starts with a character a spreadsheet reads as a formula and is recognisable in a leaked log. It
is printed once, as CSV (student,token), to stdout or to a file only its owner reads (0600), and
stored only as its sha256 in OUT's gradebook (`tokens(student, sha256, issued_at)`): a copy of the
gradebook gives nobody a token. Issuing gives a token to every student of the roster who has none;
`--reissue STUDENT...` replaces those students' tokens (a lost or leaked one). A token is checked
against every stored hash in constant time (`Tokens.student`), and only a student still on the
roster is let in: a token is never a way to invent a student.

The gradebook belongs to whichever command holds OUT's lock: `grade tokens` takes it (and finishes
an interrupted commit first, which would otherwise put back a gradebook without the new tokens),
so it refuses, in one sentence, while `grade serve` runs on OUT.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import hmac
import io
import os
import secrets
import sqlite3
import sys
from pathlib import Path

from grader.errors import UsageError
from grader.inert import PATH_LIMIT, terminal

PREFIX = "gt_"
MAX_TOKEN_CHARS = 512  # a header longer than this is no token of ours, and is not hashed

SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (student TEXT PRIMARY KEY, sha256 TEXT NOT NULL, issued_at TEXT NOT NULL);
"""


def new_token() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class Tokens:
    """The stored hashes of the roster's students, checked in constant time."""

    def __init__(self, hashes: dict[str, str], roster: list[str]):
        allowed = set(roster)
        self._hashes = [(student, h) for student, h in hashes.items() if student in allowed]

    @classmethod
    def load(cls, db: sqlite3.Connection, roster: list[str]) -> Tokens:
        db.executescript(SCHEMA)
        return cls(dict(db.execute("SELECT student, sha256 FROM tokens").fetchall()), roster)

    def __len__(self) -> int:
        return len(self._hashes)

    def student(self, token: str) -> str | None:
        """Whose token this is (None: nobody's). Every stored hash is compared, each in constant
        time, so the time taken says nothing about which hash came close."""
        if not token or len(token) > MAX_TOKEN_CHARS:
            return None
        given = digest(token).encode("ascii")
        found = None
        for student, stored in self._hashes:
            if hmac.compare_digest(given, stored.encode("ascii")):
                found = student
        return found


def issue(db: sqlite3.Connection, roster: list[str], reissue: list[str], issued_at: str) -> dict[str, str]:
    """New tokens (student -> token) for the roster's students without one and for `reissue`,
    stored hashed in one transaction."""
    db.executescript(SCHEMA)
    unknown = [s for s in reissue if s not in roster]
    if unknown:
        raise UsageError(f"--reissue: {terminal(unknown[0], 60)} is not on the roster")
    have = {row[0] for row in db.execute("SELECT student FROM tokens")}
    wanted = [s for s in roster if s not in have or s in reissue]
    fresh = {student: new_token() for student in wanted}
    with db:
        db.executemany("INSERT OR REPLACE INTO tokens VALUES (?,?,?)",
                       [(student, digest(token), issued_at) for student, token in fresh.items()])
    return fresh


def as_csv(tokens: dict[str, str]) -> str:
    """The instructor's list to hand out, opened in a spreadsheet as often as not: each id is
    neutralised and quoted as summary.csv's are (`inert.csv_cell`: a roster id `=HYPERLINK(...)`
    is written `'=HYPERLINK(...)`); a token starts with PREFIX, never with a formula's sign."""
    from grader.inert import csv_cell

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)
    writer.writerow(["student", "token"])
    for student, token in tokens.items():
        writer.writerow([csv_cell(student), token])
    return out.getvalue()


def open_private(path: Path) -> int:
    """A descriptor of `path` only its owner may read (0600, also when it existed before); opened
    before any token is issued, so a token is never issued that cannot be written down."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        os.fchmod(fd, 0o600)
    except OSError as exc:
        raise UsageError(f"cannot write {terminal(path, PATH_LIMIT)} ({exc.strerror or exc})") from None
    return fd


def write_all(fd: int, text: str) -> None:
    os.ftruncate(fd, 0)
    data = text.encode("utf-8")
    while data:
        data = data[os.write(fd, data):]
    os.fsync(fd)


def tokens_command(parser: type[argparse.ArgumentParser], argv: list[str]) -> int:
    """`grade tokens OUT --roster FILE [--reissue STUDENT...] [-o FILE]`."""
    p = parser(prog="grade tokens", description="Give every student of the roster a token to hand in to "
               "`grade serve OUT` (printed once as CSV: student,token; only a hash is kept in OUT).")
    p.add_argument("outdir", type=Path, metavar="OUT", help="the batch folder the service serves")
    p.add_argument("--roster", type=Path, required=True, help="a Canvas gradebook export, or one student id a line")
    p.add_argument("--reissue", nargs="+", metavar="STUDENT", default=[],
                   help="replace these students' tokens (the old ones stop working)")
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="write the CSV here (mode 0600), not to stdout")
    args = p.parse_args(argv)
    from datetime import datetime, timezone

    from grader.outputs.gradebook import Gradebook
    from grader.outputs.names import OutputFolder
    from grader.outputs.staging import locked, recover
    from grader.serve.roster import read_roster

    roster = read_roster(args.roster)
    args.outdir.mkdir(parents=True, exist_ok=True)
    fd = open_private(args.output) if args.output is not None else None
    try:
        with locked(args.outdir):
            recover(args.outdir)
            with Gradebook(OutputFolder(args.outdir).gradebook) as book:
                fresh = issue(book.connection, roster, args.reissue,
                              datetime.now(timezone.utc).isoformat(timespec="seconds"))
        if not fresh:
            print(f"grade tokens: every student of the roster ({len(roster)}) has a token already; "
                  "--reissue STUDENT replaces one", file=sys.stderr)
            return 0
        if fd is None:
            sys.stdout.write(as_csv(fresh))
            return 0
        write_all(fd, as_csv(fresh))
    finally:
        if fd is not None:
            os.close(fd)
    print(f"{len(fresh)} token(s) in {terminal(args.output, PATH_LIMIT)} (only you can read it): hand each "
          "student their own line", file=sys.stderr)
    return 0
