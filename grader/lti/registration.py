"""The LMS platforms a hand-in service is registered with: `grade serve ... --lti FILE`.

An instructor (or the LMS's admin) registers the tool on their platform and copies what the
platform gives back into a TOML file, one `[[platform]]` table each (docs/lti.md shows one for
each LMS):

    [[platform]]
    lms = "canvas"                                   # canvas, moodle, brightspace, blackboard, other
    issuer = "https://canvas.instructure.com"        # the `iss` of its launches
    client_id = "10000000000042"
    deployment_ids = ["12:8865aa05b4b79b64a91a86042e43af5ea8ae79eb"]   # or ["*"]: any of this client
    login_url = "https://sso.canvaslms.com/api/lti/authorize_redirect"
    token_url = "https://sso.canvaslms.com/login/oauth2/token"
    jwks_url = "https://sso.canvaslms.com/api/lti/security/jwks"
    origins = ["https://school.instructure.com"]     # where students open the LMS (may frame the page)
    contexts = ["8865"]                              # the course(s) whose launches count (recommended)

Optional: `token_audience` (the `aud` of the tool's client assertion; default the token URL, which
Canvas requires; Brightspace gives its own value at registration), `contexts` (the LMS's ids of
the courses whose launches count: without it, any course of the platform that places the tool can
launch it), `match` (the launch's claims tried to find the student on the roster; see
grader/lti/identity.py; a `custom.NAME` claim only with `contexts`, since custom parameters are
set by whoever places the tool). `deployment_ids = ["*"]` takes any deployment of the client, which
Blackboard (one client id for every school) refuses.

Every value is checked when the service starts, each failure one sentence that names the file,
the platform and the key: a launch must never be the first to find a registration wrong.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from grader.errors import UsageError
from grader.inert import PATH_LIMIT, terminal

MAX_FILE_BYTES = 256 * 1024
_HOST = re.compile(r"[a-z0-9.-]+|[0-9a-f:]+")  # a DNS name or an IP address: nothing a header could end at
LMS = Literal["canvas", "moodle", "brightspace", "blackboard", "other"]
DEFAULT_MATCH = ("lis.person_sourcedid", "email")
"""`sub` is the platform's own user id, in a space of its own: it names a roster student only when
the roster's ids are that platform's user ids, which a registration says by listing it in `match`."""
"""The claims tried to find a launch's student on the roster (grader/lti/identity.py)."""


def _url(value: str, *, https_unless_loopback: bool = True) -> str:
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises for a port that is not one
    except ValueError:
        raise ValueError("is not an address such as https://lms.example.edu/...") from None
    if parts.scheme not in ("https", "http") or not parts.hostname or not _HOST.fullmatch(parts.hostname):
        raise ValueError("is not an address such as https://lms.example.edu/...")
    if https_unless_loopback and parts.scheme != "https" and parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError("must be https (only a loopback address may be http)")
    return value


class Platform(BaseModel):
    """One registration: a platform (by issuer) and the client id it gave this tool."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lms: LMS = "other"
    issuer: str = Field(min_length=1, max_length=500)
    client_id: str = Field(min_length=1, max_length=500)
    deployment_ids: tuple[str, ...] = Field(min_length=1)
    login_url: str
    token_url: str
    jwks_url: str
    token_audience: str | None = None
    origins: tuple[str, ...] = ()
    contexts: tuple[str, ...] = ()
    match: tuple[str, ...] = DEFAULT_MATCH

    @field_validator("issuer", "login_url", "token_url", "jwks_url")
    @classmethod
    def _is_url(cls, value: str) -> str:
        return _url(value)

    @field_validator("origins")
    @classmethod
    def _are_origins(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        for value in values:
            _url(value)
        return values

    @field_validator("match")
    @classmethod
    def _known_claims(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        from grader.lti.identity import claim_names

        unknown = [v for v in values if v not in claim_names() and not v.startswith("custom.")]
        if unknown or not values:
            raise ValueError(f"names no claim a launch carries ({unknown[0] if unknown else 'empty'}); "
                             f"use {', '.join(DEFAULT_MATCH)}")
        return values

    @model_validator(mode="after")
    def _trusted(self) -> Platform:
        if any(m.startswith("custom.") for m in self.match) and not self.contexts:
            raise ValueError("match names a custom parameter, which whoever places the tool in any course of "
                             "the platform sets: pin the course with contexts = [...] or leave custom.* out")
        if "*" in self.deployment_ids and (self.lms == "blackboard" or self.issuer == "https://blackboard.com"):
            raise ValueError("deployment_ids = [\"*\"] would take every Blackboard school's launches (one client "
                             "id serves them all): name your school's deployment id")
        return self

    @property
    def audience(self) -> str:
        """The `aud` of this tool's client assertions at the platform's token endpoint."""
        return self.token_audience or self.token_url

    def deploys(self, deployment_id: str) -> bool:
        return "*" in self.deployment_ids or deployment_id in self.deployment_ids

    def frame_origins(self) -> list[str]:
        """The origins that may show the hand-in page in a frame: the LMS's own pages."""
        from grader.serve.security import origin_of

        found = [origin_of(u) for u in (*self.origins, self.issuer, self.login_url)]
        return sorted({o for o in found if o})

    def own_origins(self) -> frozenset[str]:
        """The platform's origins: where its line items may be (its issuer's, its endpoints', `origins`)."""
        from grader.serve.security import origin_of

        return frozenset(o for u in (*self.origins, self.issuer, self.login_url, self.token_url, self.jwks_url)
                         if (o := origin_of(u)))

    def owns(self, url: str) -> bool:
        """Whether `url` is at one of the platform's origins, over https (or loopback http): the only
        addresses the tool sends the platform's access token to (a line item named elsewhere, by a
        platform's mistake or a hostile one, would carry the token away)."""
        from grader.serve.security import origin_of

        try:
            _url(url)
        except ValueError:
            return False
        return origin_of(url) in self.own_origins()


class Registrations(BaseModel):
    """Every platform of the file, found by issuer and client id."""

    platforms: tuple[Platform, ...]

    def find(self, issuer: str, client_id: str | None) -> Platform | None:
        """The registration of `issuer` (with this client id, when it is given; a platform with one
        registration may leave it out of its login initiation)."""
        mine = [p for p in self.platforms if p.issuer == issuer]
        if client_id:
            mine = [p for p in mine if p.client_id == client_id]
        return mine[0] if len(mine) == 1 else None

    def frame_origins(self) -> list[str]:
        return sorted({o for p in self.platforms for o in p.frame_origins()})


def read_registrations(path: Path) -> Registrations:
    """The file's platforms, or UsageError: one sentence naming what is wrong and where."""
    shown = terminal(path, PATH_LIMIT)
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise UsageError(f"the LTI registrations {shown} are larger than {MAX_FILE_BYTES // 1024} KiB: "
                             "is it the right file?")
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read the LTI registrations {shown}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"the LTI registrations {shown} are not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"the LTI registrations {shown} are not TOML: {exc}") from None
    tables = data.get("platform")
    if set(data) - {"platform"} or not isinstance(tables, list) or not tables:
        raise UsageError(f"the LTI registrations {shown} need one [[platform]] table for each LMS registration "
                         "(docs/lti.md), and nothing else")
    platforms = []
    for number, table in enumerate(tables, start=1):
        try:
            platforms.append(Platform.model_validate(table))
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"]) or "the table:"
            message = str(error["msg"]).removeprefix("Value error, ").replace("Field required", "is missing")
            raise UsageError(f"the LTI registrations {shown}, platform {number}: {terminal(where, 60)} "
                             f"{terminal(message, 200)}") from None
    seen: set[tuple[str, str]] = set()
    for platform in platforms:
        key = (platform.issuer, platform.client_id)
        if key in seen:
            raise UsageError(f"the LTI registrations {shown} register {terminal(platform.issuer, 80)} with client "
                             f"{terminal(platform.client_id, 60)} twice")
        seen.add(key)
    return Registrations(platforms=tuple(platforms))
