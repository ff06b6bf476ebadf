"""Assignment and Grade Services 2.0, the tool's side: a token, a line item, a score.

- A token: the client-credentials grant with a JWT the tool signs (IMS Security Framework 4.1:
  `iss` = `sub` = the client id, `aud` the platform's token audience, which Canvas wants to be its
  token URL), kept until a minute before it expires, asked again once after a 401.
- A line item: the launch's own (`lineitem` in its AGS claim); when the platform gives only its
  container (`lineitems`), the one whose `resourceId` is the assignment's id, created with that
  id, its label and maximum when there is none (the tool then owns it).
- A score: POST `{lineitem}/scores` (before the line item's query string), as
  `application/vnd.ims.lis.v1.score+json`: the user's `sub`, the grade, the maximum, "Completed"
  and "FullyGraded" (which every platform shows), or, for a student taken out, no grade and
  "NotReady" (AGS 3.4.7: the platform clears it); its timestamp the time the grade was decided.

Every answer is classified for the outbox (grader/lti/outbox.py): done; again later (429, 5xx,
Canvas's 403 when no rate limit is left, a network failure), with the wait the platform asked for;
or refused for good (another 4xx), with the platform's words, bounded.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Literal
from urllib.parse import urlencode, urlsplit, urlunsplit

import httpx
from pydantic import BaseModel

from grader.inert import terminal
from grader.lti.keys import ToolKey
from grader.lti.registration import Platform

SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/"
SCORE_SCOPE, LINEITEM_SCOPE = SCOPE + "score", SCOPE + "lineitem"
READ_LINEITEM_SCOPE = SCOPE + "lineitem.readonly"
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
CONTAINER_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
TIMEOUT_S = 20.0
ANSWER_S = 30.0  # a whole answer, however slowly it drips: one platform must not hold every other's grades
MAX_ANSWER_BYTES = 256 * 1024
MAX_TOKEN_CHARS = 8192


class Outcome(BaseModel):
    """What a request to the platform came to."""

    kind: Literal["done", "again", "refused"]
    status: int | None = None  # the HTTP status, None when none came
    wait_s: float | None = None  # the platform's Retry-After, when it gave one
    said: str = ""  # for the instructor: the platform's words or the failure


class Score(BaseModel):
    """One score for one user on one line item (AGS 3.4)."""

    user_id: str
    score: float | None  # None: clear the user's grade (a student taken out)
    max_score: float
    timestamp: str  # ISO 8601 with milliseconds and zone, later than any sent before

    def body(self) -> dict[str, object]:
        if self.score is None:
            return {"userId": self.user_id, "activityProgress": "Initialized", "gradingProgress": "NotReady",
                    "timestamp": self.timestamp}
        return {"userId": self.user_id, "scoreGiven": round(self.score, 4), "scoreMaximum": self.max_score,
                "activityProgress": "Completed", "gradingProgress": "FullyGraded", "timestamp": self.timestamp}


def scores_url(lineitem: str) -> str:
    """`{lineitem}/scores`, the path extended before the query (Moodle's line items carry one)."""
    parts = urlsplit(lineitem)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/scores"))


class Answer(BaseModel):
    """A platform's answer, read within bounds: its status, headers and at most MAX_ANSWER_BYTES."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json_body(self) -> object:
        try:
            return json.loads(self.body)
        except ValueError:
            return None


def _outcome(answer: Answer) -> Outcome:
    status = answer.status
    text = answer.body[:2000].decode("utf-8", "replace")
    said = terminal(text, 300)
    if 200 <= status < 300:
        return Outcome(kind="done", status=status)
    wait = _retry_after(answer.headers.get("retry-after"))
    rate_left = answer.headers.get("x-rate-limit-remaining")
    out_of_rate = status == 403 and (("rate limit" in text.lower())
                                     or (rate_left is not None and _number(rate_left) == 0))
    if status == 429 or status >= 500 or out_of_rate:
        return Outcome(kind="again", status=status, wait_s=wait, said=said)
    return Outcome(kind="refused", status=status, said=said)


def _number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def _retry_after(value: str | None) -> float | None:
    """Retry-After as seconds (a number of seconds, or an HTTP date)."""
    if not value:
        return None
    seconds = _number(value.strip())
    if seconds is not None:
        return max(0.0, min(seconds, 24 * 3600.0))
    from email.utils import parsedate_to_datetime

    try:
        return max(0.0, min(parsedate_to_datetime(value).timestamp() - time.time(), 24 * 3600.0))
    except (TypeError, ValueError, OverflowError):
        return None


class AgsClient:
    """Tokens per platform and scope set, kept; requests to the platforms, classified."""

    def __init__(self, key: ToolKey, client: httpx.Client | None = None):
        self.key = key
        self.http = client or httpx.Client(timeout=TIMEOUT_S, follow_redirects=False)
        self._tokens: dict[tuple[str, str, str], tuple[str, float]] = {}
        self._lock = threading.Lock()

    def _token(self, platform: Platform, scopes: list[str], fresh: bool = False) -> str | Outcome:
        key = (platform.issuer, platform.client_id, " ".join(sorted(scopes)))
        with self._lock:
            kept = self._tokens.get(key)
        if kept and not fresh and kept[1] > time.monotonic():
            return kept[0]
        assertion = self.key.sign({"iss": platform.client_id, "sub": platform.client_id, "aud": platform.audience})
        form = {"grant_type": "client_credentials",
                "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                "client_assertion": assertion, "scope": " ".join(scopes)}
        answer = self._exchange("POST", platform.token_url, {"Accept": "application/json"}, data=form)
        if isinstance(answer, Outcome):
            return answer.model_copy(update={"said": f"token: {answer.said}"})
        outcome = _outcome(answer)
        if outcome.kind != "done":
            return outcome.model_copy(update={"said": f"token: {outcome.said}"})
        body = answer.json_body()
        token = body.get("access_token") if isinstance(body, dict) else None
        try:
            lifetime = float(body.get("expires_in", 3600)) if isinstance(body, dict) else 0.0
        except (TypeError, ValueError):
            lifetime = 0.0
        if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_CHARS or not token.isascii() \
                or not token.isprintable() or lifetime != lifetime:  # NaN
            return Outcome(kind="again", status=answer.status, said="the LMS's token answer held no usable token")
        with self._lock:
            self._tokens[key] = (token, time.monotonic() + max(0.0, lifetime - 60))
        return token

    def _send(self, platform: Platform, scopes: list[str], method: str, url: str, *,
              json_body: object = None, content_type: str | None = None, accept: str) -> tuple[Outcome, object]:
        """One request with a token; a 401 asks for a new token and tries once more."""
        for fresh in (False, True):
            token = self._token(platform, scopes, fresh=fresh)
            if isinstance(token, Outcome):
                return token, None
            headers = {"Authorization": f"Bearer {token}", "Accept": accept}
            content = None
            if json_body is not None:
                headers["Content-Type"] = content_type or "application/json"
                content = json.dumps(json_body).encode()
            answer = self._exchange(method, url, headers, content=content)
            if isinstance(answer, Outcome):
                return answer, None
            if answer.status == 401 and not fresh:
                continue
            outcome = _outcome(answer)
            return outcome, answer.json_body() if outcome.kind == "done" else None
        raise AssertionError("unreachable")

    def _exchange(self, method: str, url: str, headers: dict[str, str], **sent: object) -> Answer | Outcome:
        """One request, its answer read within MAX_ANSWER_BYTES and ANSWER_S; every failure an Outcome."""
        deadline = time.monotonic() + ANSWER_S
        try:
            with self.http.stream(method, url, headers=headers, **sent) as answer:  # type: ignore[arg-type]
                body = b""
                for chunk in answer.iter_bytes():
                    body += chunk
                    if len(body) > MAX_ANSWER_BYTES:
                        return Outcome(kind="again", status=answer.status_code, said="the LMS's answer was too long")
                    if time.monotonic() > deadline:
                        return Outcome(kind="again", status=answer.status_code,
                                       said=f"the LMS's answer took longer than {ANSWER_S:g} s")
                return Answer(status=answer.status_code, headers={k.lower(): v for k, v in answer.headers.items()},
                              body=body)
        except (httpx.HTTPError, httpx.InvalidURL, ValueError, UnicodeError) as exc:
            return Outcome(kind="again", said=f"the LMS could not be reached ({type(exc).__name__})")

    def post_score(self, platform: Platform, lineitem: str, score: Score) -> Outcome:
        outcome, _ = self._send(platform, [SCORE_SCOPE], "POST", scores_url(lineitem), json_body=score.body(),
                                content_type=SCORE_TYPE, accept="application/json")
        return outcome

    def find_or_create_lineitem(self, platform: Platform, container: str, *, resource_id: str, label: str,
                                max_score: float, resource_link_id: str,
                                granted: list[str]) -> tuple[Outcome, str | None]:
        """The line item of `container` for this assignment (its resourceId), made if missing.
        Moodle reads line items only for a token with the read-only scope too, when granted."""
        parts = urlsplit(container)
        query = (parts.query + "&" if parts.query else "") + urlencode({"resource_id": resource_id})
        reading = [LINEITEM_SCOPE, *([READ_LINEITEM_SCOPE] if READ_LINEITEM_SCOPE in granted else [])]
        outcome, body = self._send(platform, reading, "GET", urlunsplit(parts._replace(query=query)),
                                   accept=CONTAINER_TYPE)
        if outcome.kind != "done":
            return outcome, None
        for item in body if isinstance(body, list) else []:
            if isinstance(item, dict) and item.get("resourceId") == resource_id and isinstance(item.get("id"), str):
                return outcome, item["id"]
        new = {"scoreMaximum": max_score, "label": label, "resourceId": resource_id, "tag": "grade"}
        if resource_link_id:
            new["resourceLinkId"] = resource_link_id
        outcome, body = self._send(platform, [LINEITEM_SCOPE], "POST", container, json_body=new,
                                   content_type=LINEITEM_TYPE, accept=LINEITEM_TYPE)
        made = body.get("id") if isinstance(body, dict) else None
        if outcome.kind == "done" and not isinstance(made, str):
            return Outcome(kind="refused", status=outcome.status, said="the LMS made a line item without an id"), None
        return outcome, made
