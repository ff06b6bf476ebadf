"""The late policy: a due time, a grace period, a penalty per day late and a cap.

It lives in `OUT/late.toml`, beside the gradebook, so it applies to every rebuild of that
batch's outputs (a regrade, an adjustment, `grade export`) and is easy to read and change:

    due = "2026-12-08T23:59:00+01:00"   # ISO 8601 with its time zone (UTC when none is given)
    grace_minutes = 15                   # submissions this late count as on time
    percent_per_day = 10                 # of the maximum score, per day or part day late
    cap_percent = 50                     # never more than this
    times = "times.csv"                  # optional: student,submitted_at (an LMS download)

A submission's time is the `times` CSV's when it names the student, else the submission file's
modification time recorded when it was graded (an LMS download usually keeps it; a copy may
not, which is why the CSV wins). The raw score stays in the report; the penalty is a separate
field and the final score is computed from both.
"""

from __future__ import annotations

import csv
import math
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from grader.errors import UsageError
from grader.outputs.names import OutputFolder
from grader.report import LatePenalty

GRACE_LIMIT_MINUTES = 60 * 24 * 366  # a year: more is not a grace period
TIMES_COLUMNS = ("student", "submitted_at")
TIMES_LIMIT_BYTES = 16 * 2**20


def parse_time(text: str) -> datetime:
    """ISO 8601; a time without a zone is UTC (said so in the docs, never the machine's zone)."""
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


class LatePolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    due: datetime
    grace_minutes: float = Field(default=0, ge=0, le=GRACE_LIMIT_MINUTES, allow_inf_nan=False)
    percent_per_day: float = Field(gt=0, le=100, allow_inf_nan=False)
    cap_percent: float = Field(default=100, gt=0, le=100, allow_inf_nan=False)
    times: str | None = None

    @field_validator("due", mode="before")
    @classmethod
    def _zoned(cls, value: object) -> object:
        """A string or a TOML date-time; a date alone is midnight UTC; no zone is UTC."""
        if isinstance(value, str):
            value = parse_time(value)
        elif isinstance(value, date) and not isinstance(value, datetime):
            value = datetime(value.year, value.month, value.day, tzinfo=timezone.utc)
        if isinstance(value, datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=timezone.utc)
            if not datetime(1971, 1, 1, tzinfo=timezone.utc) <= value <= datetime(9000, 1, 1, tzinfo=timezone.utc):
                raise ValueError("the due time must be a date between 1971 and 9000")
        return value

    def rule(self) -> str:
        grace = f" after {self.grace_minutes:g} minutes of grace" if self.grace_minutes else ""
        return (f"{self.percent_per_day:g}% of the points per day late (or part day){grace}, "
                f"at most {self.cap_percent:g}%")

    def penalty(self, submitted: datetime, source: str, max_score: float) -> LatePenalty | None:
        """None when on time (within the grace); else the points off, capped."""
        try:
            late = submitted - (self.due + timedelta(minutes=self.grace_minutes))
        except OverflowError:  # a submission time at the edge of the calendar: not late
            return None
        if late <= timedelta(0):
            return None
        days = math.ceil(late / timedelta(days=1))
        percent = min(self.cap_percent, days * self.percent_per_day)
        return LatePenalty(submitted_at=submitted.isoformat(timespec="seconds"), source=source,  # type: ignore[arg-type]
                           due=self.due.isoformat(timespec="seconds"), days_late=days,
                           points=round(max_score * percent / 100, 6), rule=self.rule())


def load_policy(out_dir: Path) -> LatePolicy | None:
    """OUT/late.toml, or None when the batch has no late policy; a bad file is one sentence."""
    path = OutputFolder(out_dir).late_policy
    if not path.is_file():
        return None
    import tomllib

    try:
        return LatePolicy.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not valid TOML ({exc})") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"{path}: {'.'.join(map(str, first['loc'])) or 'file'}: {first['msg']}") from None


def load_times(out_dir: Path, policy: LatePolicy) -> dict[str, datetime]:
    """The `times` CSV (student,submitted_at), relative to OUT; a bad row is one sentence."""
    if not policy.times:
        return {}
    path = out_dir / policy.times
    try:
        if path.stat().st_size > TIMES_LIMIT_BYTES:
            raise UsageError(f"the submission times {path} are over {TIMES_LIMIT_BYTES // 2**20} MiB")
        with path.open(newline="", encoding="utf-8-sig") as f:
            rows = list(csv.DictReader(f))
    except OSError as exc:
        raise UsageError(f"cannot read the submission times {path} ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise UsageError(f"the submission times {path} are not UTF-8 text") from None
    except csv.Error as exc:
        raise UsageError(f"the submission times {path} are not a readable CSV ({exc})") from None
    times: dict[str, datetime] = {}
    for number, row in enumerate(rows, start=2):
        if any(c not in row for c in TIMES_COLUMNS):
            raise UsageError(f"{path} needs the columns {', '.join(TIMES_COLUMNS)}")
        try:
            times[row["student"].strip()] = parse_time(row["submitted_at"])
        except (ValueError, AttributeError, OverflowError):
            raise UsageError(f"{path}, line {number}: {row['submitted_at']!r} is not an ISO 8601 time") from None
    return times
