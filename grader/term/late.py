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
from datetime import datetime, timedelta, timezone
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from grader.errors import UsageError
from grader.report import LatePenalty

POLICY_FILE = "late.toml"
TIMES_COLUMNS = ("student", "submitted_at")


def parse_time(text: str) -> datetime:
    """ISO 8601; a time without a zone is UTC (said so in the docs, never the machine's zone)."""
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


class LatePolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    due: datetime
    grace_minutes: float = Field(default=0, ge=0)
    percent_per_day: float = Field(gt=0, le=100)
    cap_percent: float = Field(default=100, gt=0, le=100)
    times: str | None = None

    @field_validator("due", mode="before")
    @classmethod
    def _zoned(cls, value: object) -> object:
        if isinstance(value, str):
            return parse_time(value)
        if isinstance(value, datetime) and value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value

    def rule(self) -> str:
        grace = f" after {self.grace_minutes:g} minutes of grace" if self.grace_minutes else ""
        return (f"{self.percent_per_day:g}% of the points per day late (or part day){grace}, "
                f"at most {self.cap_percent:g}%")

    def penalty(self, submitted: datetime, source: str, max_score: float) -> LatePenalty | None:
        """None when on time (within the grace); else the points off, capped."""
        late = submitted - (self.due + timedelta(minutes=self.grace_minutes))
        if late <= timedelta(0):
            return None
        days = math.ceil(late / timedelta(days=1))
        percent = min(self.cap_percent, days * self.percent_per_day)
        return LatePenalty(submitted_at=submitted.isoformat(timespec="seconds"), source=source,  # type: ignore[arg-type]
                           due=self.due.isoformat(timespec="seconds"), days_late=days,
                           points=round(max_score * percent / 100, 6), rule=self.rule())


def load_policy(out_dir: Path) -> LatePolicy | None:
    """OUT/late.toml, or None when the batch has no late policy; a bad file is one sentence."""
    path = out_dir / POLICY_FILE
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
        with path.open(newline="", encoding="utf-8-sig") as f:
            rows = list(csv.DictReader(f))
    except OSError as exc:
        raise UsageError(f"cannot read the submission times {path} ({exc.strerror})") from None
    times: dict[str, datetime] = {}
    for number, row in enumerate(rows, start=2):
        if any(c not in row for c in TIMES_COLUMNS):
            raise UsageError(f"{path} needs the columns {', '.join(TIMES_COLUMNS)}")
        try:
            times[row["student"].strip()] = parse_time(row["submitted_at"])
        except (ValueError, AttributeError):
            raise UsageError(f"{path}, line {number}: {row['submitted_at']!r} is not an ISO 8601 time") from None
    return times
