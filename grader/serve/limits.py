"""What one student may cost the service: hand-ins per minute, requests, and bytes of a request.

A token bucket per student: it holds at most `burst` hand-ins and refills at `per_minute`; a
hand-in finding it empty is answered 429 with `Retry-After` (whole seconds until the next one is
allowed) and a sentence saying when. Every request of a student also draws from a larger bucket,
so a client polling in a loop cannot take the service from the others. Time is the monotonic
clock, passed in, so the buckets are tested without waiting.

A request body is bounded twice: by its Content-Length before a byte is read, and by counting
while it streams (a chunked body, or a Content-Length that lies), so that a 50 MB upload is
refused after at most the limit is read (`bounded`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import AsyncIterator, Callable

from pydantic import BaseModel, ConfigDict, Field

from grader.submission import MAX_BYTES

FORM_OVERHEAD = 64 * 1024
"""Bytes a multipart body may carry besides the file (boundaries, headers of the part)."""
MAX_BODY = MAX_BYTES + FORM_OVERHEAD


class RateLimit(BaseModel):
    """Hand-ins per minute and how many may come at once (`grade serve --rate N --burst N`)."""

    model_config = ConfigDict(frozen=True)

    per_minute: float = Field(default=6.0, gt=0)
    burst: int = Field(default=3, ge=1)


REQUESTS = RateLimit(per_minute=1800, burst=120)
"""Every request of one student (status polls included): thirty a second, 120 at once."""

UPLOAD_S = 300.0
"""How long one upload's body may take to arrive (20 MiB at about 0.5 Mbit/s): a body trickling in
a byte at a time (a slow-read attack, or a connection that died without closing) is answered 408
then, instead of holding its connection and its part of the service for ever."""
UPLOADS_AT_ONCE = 2
"""Uploads of one student arriving at once: more are answered 429 (each holds a connection)."""


KEPT_PER_STUDENT = 200 * 2**20
"""Bytes of hand-ins kept for one student (OUT/hand-ins/<student>/): past it a hand-in is refused
(413), so that one token cannot fill the machine's disk at the rate limit (20 MiB a file)."""


def kept_too_much(kept: int) -> str:
    return (f"you have {kept / 2**20:.0f} MiB of hand-ins kept here, the most one student may: ask your instructor "
            "to make room (or hand in a smaller file: outputs cleared)")


def upload_too_slow() -> str:
    return (f"the file did not arrive within {UPLOAD_S:g} s: hand it in again (on a steadier connection, "
            "or a smaller file: outputs cleared)")


def uploads_at_once() -> str:
    return (f"you are handing in {UPLOADS_AT_ONCE} files at once already: wait until one has arrived, "
            "then hand this one in")


class TooLarge(Exception):
    """A request body past the limit (answered 413)."""


class Buckets:
    """A token bucket per key (a student), thread-safe; `take` says how long to wait when empty."""

    def __init__(self, limit: RateLimit, clock: Callable[[], float] = time.monotonic):
        self.limit = limit
        self._clock = clock
        self._state: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """Take one token: 0.0 when taken, else the seconds until one is there (nothing taken)."""
        rate = self.limit.per_minute / 60.0
        with self._lock:
            at = self._clock()
            tokens, then = self._state.get(key, (float(self.limit.burst), at))
            tokens = min(float(self.limit.burst), tokens + (at - then) * rate)
            if tokens >= 1.0:
                self._state[key] = (tokens - 1.0, at)
                return 0.0
            self._state[key] = (tokens, at)
            return (1.0 - tokens) / rate


def retry_after(wait_s: float) -> int:
    """The Retry-After header's whole seconds for a wait (at least 1)."""
    return max(1, math.ceil(wait_s))


def too_many(wait_s: float, limit: RateLimit) -> str:
    """The 429 sentence."""
    return (f"too many hand-ins: at most {limit.burst} at once and {limit.per_minute:g} a minute; hand in again "
            f"in {retry_after(wait_s)} s")


def too_large(limit: int = MAX_BYTES) -> str:
    """The 413 sentence."""
    return (f"the file is larger than {limit // 2**20} MiB, the most the grader reads: hand in the notebook "
            "without its outputs")


def declared_too_large(content_length: str | None, limit: int = MAX_BODY) -> bool:
    """Whether a Content-Length alone says the body is past the limit (a malformed one is left to
    the streaming count)."""
    if content_length is None or not content_length.strip().isdigit():
        return False
    return int(content_length) > limit


async def bounded(stream: AsyncIterator[bytes], limit: int = MAX_BODY) -> AsyncIterator[bytes]:
    """The body's chunks, raising TooLarge as soon as more than `limit` bytes came."""
    total = 0
    async for chunk in stream:
        total += len(chunk)
        if total > limit:
            raise TooLarge()
        yield chunk
