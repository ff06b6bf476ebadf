"""An LTI 1.3 platform (an LMS stand-in, as Canvas or Moodle is one) served on a loopback port, so
the tests can drive the hand-in service as an LTI tool end to end, over HTTP, as a course would.

It is written from the IMS texts, and is strict where real platforms are, so that a tool's
mistakes fail tests rather than production:

- LTI 1.3 Core (imsglobal.org/spec/lti/v1p3): resource link launches and their claims
  (message_type, version 1.3.0, deployment_id, target_link_uri, resource_link, roles as full LIS
  URIs, context, lis, custom).
- IMS Security Framework 1.0 (/spec/security/v1p0): "OpenID Connect Launch Flow" (third-party
  initiated login, then the authentication request: scope=openid, response_type=id_token,
  response_mode=form_post, prompt=none, a known client_id, a registered redirect_uri, the
  login_hint and lti_message_hint the platform issued, a nonce; the answer is an auto-posting
  form of id_token and state), "Using JSON Web Tokens with OAuth 2.0 Client Credentials Grant"
  (client_assertion checked against the tool's JWKS by kid, RS256 only, iss = sub = client_id,
  aud = the token URL as Canvas wants it, exp, iat, jti used once), and key sets (GET /jwks).
- Assignment and Grade Services 2.0 (/spec/lti-ags/v2p0): the line item service (container GET
  with resource_link_id / resource_id / tag filters and Link rel="next" paging, POST, item GET)
  and the score publish service (Content-Type application/vnd.ims.lis.v1.score+json, the
  activityProgress and gradingProgress vocabularies, timestamps that only move forward: Canvas
  answers an older one 400, an unknown or non-student user 422, a missing scoreMaximum 422).
- Deep Linking 2.0 (/spec/lti-dl/v2p0): the LtiDeepLinkingRequest settings claim and the
  LtiDeepLinkingResponse JWT posted back as the form field JWT (iss = client_id, aud = platform,
  nonce, deployment_id, data echoed); an ltiResourceLink carrying lineItem makes a line item.

Failures a tool must survive can be injected: Canvas's rate limit (403 "Forbidden (Rate Limit
Exceeded)" with X-Rate-Limit-Remaining: 0.0), 429 or 503 with Retry-After, failing token requests.
Moodle-style AGS URLs with a query string (`ags_url_query="type_id=1"`) catch a tool that appends
/scores after the query instead of before it.

Stricter than Canvas on purpose: a score timestamp equal to the last accepted one is refused as
an older one is (Canvas lets an equal one through), scoreGiven above scoreMaximum is refused 422
(no extra credit), and every lti_message_hint serves one authentication request only.

Not implemented: Names and Roles Provisioning, the AGS result service (result.readonly is granted
but there is no /results), line item PUT/DELETE, submission review, Proctoring, dynamic
registration, platform key rotation, the Accept header (Canvas ignores it too), OIDC error
answers posted back to the tool (refusals are plain 400s here), and https: everything is loopback
http. `Platform.launch` emulates a browser's cookie rules (origin, path, SameSite on the
cross-site form post) but runs no JavaScript and has no frames.
"""

from __future__ import annotations

import json
import math
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from html import escape
from html.parser import HTMLParser
from http.cookies import SimpleCookie
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from hand_in_servers import serving  # uvicorn in a thread on a free loopback port

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
DL = "https://purl.imsglobal.org/spec/lti-dl/claim/"
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/"
AGS_SCOPES = (f"{SCOPE}lineitem", f"{SCOPE}lineitem.readonly", f"{SCOPE}result.readonly", f"{SCOPE}score")
LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
CONTAINER_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ACTIVITY_PROGRESS = frozenset({"Initialized", "Started", "InProgress", "Submitted", "Completed"})
GRADING_PROGRESS = frozenset({"FullyGraded", "Pending", "PendingManual", "Failed", "NotReady"})
CANVAS_RATE_LIMIT_BODY = "403 Forbidden (Rate Limit Exceeded)"
MessageType = Literal["LtiResourceLinkRequest", "LtiDeepLinkingRequest"]


@dataclass(frozen=True)
class User:
    """A course member as the platform knows them; `sub` is what the id_token and AGS call them."""

    sub: str
    name: str
    email: str
    person_sourcedid: str | None
    roles: tuple[str, ...]
    custom: Mapping[str, str]


@dataclass
class LineItem:
    """A gradebook column; `url` is its id in AGS, as the tool sees it."""

    url: str
    label: str
    score_maximum: float
    resource_link_id: str | None
    resource_id: str | None = None
    tag: str | None = None

    def as_json(self) -> dict[str, Any]:
        optional = {"resourceLinkId": self.resource_link_id, "resourceId": self.resource_id, "tag": self.tag}
        return {"id": self.url, "label": self.label, "scoreMaximum": self.score_maximum,
                **{key: value for key, value in optional.items() if value is not None}}


@dataclass(frozen=True)
class AcceptedScore:
    """One score post the platform took, in arrival order (the gradebook keeps only the latest)."""

    line_item: str
    user_id: str
    body: Mapping[str, Any]
    timestamp: datetime


@dataclass(frozen=True)
class LoggedRequest:
    """One request the platform answered; `time` is time.monotonic(), for spacing between retries."""

    method: str
    path: str
    query: str
    status: int
    time: float


class LaunchFailed(AssertionError):
    """A launch stopped before the tool's final answer; `response` is the answer that stopped it."""

    def __init__(self, step: str, response: httpx.Response) -> None:
        super().__init__(f"{step}: {response.status_code} {response.text[:500]}")
        self.step = step
        self.response = response


class _Refused(Exception):
    """A request the platform refuses; OAuth's error code where the answer is an OAuth one."""

    def __init__(self, status: int, message: str, error: str = "invalid_request") -> None:
        super().__init__(message)
        self.status = status
        self.error = error

    def response(self) -> Response:
        return JSONResponse({"error": self.error, "error_description": str(self)}, self.status)


@dataclass
class _Injected:
    count: int
    status: int
    retry_after: float | None = None
    canvas_rate_limit: bool = False

    def response(self) -> Response:
        headers = {} if self.retry_after is None else {"Retry-After": f"{self.retry_after:g}"}
        if self.canvas_rate_limit:
            return PlainTextResponse(CANVAS_RATE_LIMIT_BODY, 403, {"X-Rate-Limit-Remaining": "0.0"})
        return JSONResponse({"error": "temporarily_unavailable", "error_description": "injected"},
                            self.status, headers)


@dataclass
class _Pending:
    """A launch the platform started and the authentication request has not yet come back for."""

    user: User
    login_hint: str
    message_type: MessageType
    resource_link_id: str | None
    title: str | None
    with_ags: bool
    lineitem: str | None
    custom: Mapping[str, str]


@dataclass
class _Grant:
    scopes: frozenset[str]
    expires_at: float


class Platform:
    """The platform: start it (or use it as a context manager), register the tool, add users and
    line items, then launch. Everything a test reads back is copied under a lock, because the
    server answers on its own thread."""

    def __init__(self, *, client_id: str = "jax-course-tool", deployment_id: str = "1:course",
                 tool_login_url: str | None = None, tool_redirect_uris: Sequence[str] = (),
                 tool_jwks_url: str | None = None, target_link_uri: str | None = None,
                 token_audience: str | None = None, token_lifetime: int = 3600,
                 context: Mapping[str, str] | None = None, ags_url_query: str | None = None,
                 page_size: int | None = None) -> None:
        self.client_id = client_id
        self.deployment_id = deployment_id
        self.register_tool(login_url=tool_login_url, redirect_uris=tool_redirect_uris,
                           jwks_url=tool_jwks_url, target_link_uri=target_link_uri)
        self._token_audience = token_audience
        self.token_lifetime = token_lifetime
        self.context = dict(context or {"id": "course-1", "label": "JAX101", "title": "JAX, compiled"})
        self.ags_url_query = ags_url_query
        self.page_size = page_size
        self.kid = secrets.token_hex(8)
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.base_url = ""
        self._lock = threading.Lock()
        self._users: dict[str, User] = {}
        self._line_items: dict[str, LineItem] = {}
        self._pending: dict[str, _Pending] = {}
        self._dl_data: set[str] = set()
        self._tokens: dict[str, _Grant] = {}
        self._seen_jti: set[str] = set()
        self._seen_nonces: set[str] = set()
        self._tool_keys: dict[str, jwt.PyJWK] = {}
        self._last_timestamp: dict[tuple[str, str], datetime] = {}
        self._gradebook: dict[str, dict[str, dict[str, Any]]] = {}
        self._scores: list[AcceptedScore] = []
        self._content_items: list[dict[str, Any]] = []
        self._id_tokens: list[dict[str, Any]] = []
        self._log: list[LoggedRequest] = []
        self._inject: dict[str, _Injected] = {}
        self._browsers: dict[httpx.Client, _Browser] = {}
        self._serving: AbstractContextManager[str] | None = None

    # -- configuration ---------------------------------------------------------------------------

    def register_tool(self, *, login_url: str | None, redirect_uris: Sequence[str], jwks_url: str | None,
                      target_link_uri: str | None = None) -> None:
        """The tool's registration; separate from __init__ because a tool often needs the platform's
        base_url (its issuer) before it can start and tell its own URLs."""
        self.tool_login_url = login_url
        self.tool_redirect_uris = tuple(redirect_uris)
        self.tool_jwks_url = jwks_url
        self.target_link_uri = target_link_uri

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"

    @property
    def issuer(self) -> str:
        return self.base_url

    @property
    def token_url(self) -> str:
        return self.url("/token")

    @property
    def token_audience(self) -> str:
        """What a client assertion's aud must be: the token URL unless configured (Canvas's rule)."""
        return self._token_audience or self.token_url

    def _ags_url(self, path: str) -> str:
        return self.url(path) + (f"?{self.ags_url_query}" if self.ags_url_query else "")

    # -- serving ---------------------------------------------------------------------------------

    def start(self) -> Platform:
        self._serving = serving(self._logged(self._app()))
        self.base_url = self._serving.__enter__()
        return self

    def stop(self) -> None:
        if self._serving is not None:
            self._serving.__exit__(None, None, None)
            self._serving = None

    def __enter__(self) -> Platform:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _app(self) -> Starlette:
        guard = self._guard
        return Starlette(routes=[
            Route("/jwks", guard(self._jwks), methods=["GET"]),
            Route("/auth", guard(self._auth), methods=["GET", "POST"]),
            Route("/token", guard(self._token), methods=["POST"]),
            Route("/lineitems", guard(self._lineitems), methods=["GET", "POST"]),
            Route("/lineitems/{item}", guard(self._lineitem), methods=["GET"]),
            Route("/lineitems/{item}/scores", guard(self._score), methods=["POST"]),
            Route("/deep-link-return", guard(self._deep_link_return), methods=["POST"]),
        ])

    @staticmethod
    def _guard(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                return await handler(request)
            except _Refused as refused:
                return refused.response()
        return endpoint

    def _logged(self, app: Starlette) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
        """The app, with every answer written to the request log (what retry tests read). The entry
        is written before the answer leaves, so a client that has its answer finds it logged."""
        async def logged(scope: Scope, receive: Receive, send: Send) -> None:
            async def noting(message: Message) -> None:
                if message["type"] == "http.response.start":
                    entry = LoggedRequest(scope["method"], scope["path"], scope["query_string"].decode(),
                                          message["status"], time.monotonic())
                    with self._lock:
                        self._log.append(entry)
                await send(message)
            await app(scope, receive, noting)
        return logged

    # -- what tests set up and read --------------------------------------------------------------

    def add_user(self, sub: str, *, name: str | None = None, email: str | None = None,
                 person_sourcedid: str | None = None, roles: str | Sequence[str] = "learner",
                 custom: Mapping[str, str] | None = None) -> User:
        """A course member; roles "learner" / "instructor" or full LIS role URIs."""
        named = {"learner": (LEARNER,), "instructor": (INSTRUCTOR,)}
        role_uris = named[roles] if isinstance(roles, str) else tuple(roles)
        user = User(sub, name or f"Student {sub}", email or f"{sub}@example.edu", person_sourcedid,
                    role_uris, dict(custom or {}))
        with self._lock:
            self._users[sub] = user
        return user

    def add_line_item(self, label: str, score_maximum: float, resource_link_id: str | None,
                      resource_id: str | None = None, tag: str | None = None) -> str:
        """A gradebook column, as an instructor makes one; its URL (the lineitem claim's value)."""
        with self._lock:
            return self._new_line_item(label, score_maximum, resource_link_id, resource_id, tag).url

    def _new_line_item(self, label: str, score_maximum: float, resource_link_id: str | None,
                       resource_id: str | None, tag: str | None) -> LineItem:
        key = str(len(self._line_items) + 1)
        item = LineItem(self._ags_url(f"/lineitems/{key}"), label, score_maximum, resource_link_id,
                        resource_id, tag)
        self._line_items[key] = item
        return item

    def fail_next_scores(self, n: int, status: int = 429, retry_after: float | None = None,
                         canvas_rate_limit: bool = False) -> None:
        """The next n score posts fail before any check; canvas_rate_limit answers Canvas's 403."""
        with self._lock:
            self._inject["scores"] = _Injected(n, 403 if canvas_rate_limit else status, retry_after,
                                               canvas_rate_limit)

    def fail_next_tokens(self, n: int, status: int = 503, retry_after: float | None = None) -> None:
        with self._lock:
            self._inject["token"] = _Injected(n, status, retry_after)

    def expire_tokens(self) -> None:
        """Every access token issued so far stops working, as an hour's wait would make it."""
        with self._lock:
            for grant in self._tokens.values():
                grant.expires_at = 0.0

    @property
    def gradebook(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Line item URL -> user id -> the latest accepted score body."""
        with self._lock:
            return json.loads(json.dumps(self._gradebook))

    @property
    def scores(self) -> list[AcceptedScore]:
        with self._lock:
            return list(self._scores)

    @property
    def line_items(self) -> list[LineItem]:
        with self._lock:
            return [LineItem(**vars(item)) for item in self._line_items.values()]

    @property
    def content_items(self) -> list[dict[str, Any]]:
        with self._lock:
            return json.loads(json.dumps(self._content_items))

    @property
    def id_tokens(self) -> list[dict[str, Any]]:
        """The claims of every id_token issued, in order."""
        with self._lock:
            return json.loads(json.dumps(self._id_tokens))

    @property
    def requests(self) -> list[LoggedRequest]:
        with self._lock:
            return list(self._log)

    # -- launching -------------------------------------------------------------------------------

    def initiate_launch(self, user: User | str, resource_link_id: str | None = None, *,
                        message_type: MessageType = "LtiResourceLinkRequest", with_ags: bool = True,
                        lineitem: str | None = None, title: str | None = None,
                        custom: Mapping[str, str] | None = None) -> tuple[str, dict[str, str]]:
        """The tool's login URL and the third-party-initiated login parameters for one launch."""
        if self.tool_login_url is None or not self.tool_redirect_uris:
            raise RuntimeError("register_tool() first: the platform knows no tool to launch")
        if message_type == "LtiResourceLinkRequest" and resource_link_id is None:
            raise ValueError("a resource link launch needs a resource_link_id")
        with self._lock:
            member = self._users[user] if isinstance(user, str) else user
            hint = secrets.token_urlsafe(16)
            pending = _Pending(member, secrets.token_urlsafe(12), message_type, resource_link_id, title,
                               with_ags, lineitem, {**member.custom, **(custom or {})})
            self._pending[hint] = pending
        return self.tool_login_url, {
            "iss": self.issuer, "login_hint": pending.login_hint, "target_link_uri": self._target(),
            "lti_message_hint": hint, "client_id": self.client_id, "lti_deployment_id": self.deployment_id}

    def _target(self) -> str:
        return self.target_link_uri or self.tool_redirect_uris[0]

    def launch(self, client: httpx.Client, user: User | str, resource_link_id: str | None = None, *,
               message_type: MessageType = "LtiResourceLinkRequest", with_ags: bool = True,
               lineitem: str | None = None, custom: Mapping[str, str] | None = None,
               login_method: Literal["GET", "POST"] = "GET", cross_site: bool = True,
               follow: bool = False) -> httpx.Response:
        """Drive a launch as a browser would and return the tool's answer to the form post.

        Cookies follow a browser's rules: kept per origin and path across launches with the same
        client; on the cross-site form post to the tool (the platform is another site in a real
        course) only SameSite=None cookies go along, and SameSite=None without Secure is dropped
        as Chrome drops it (Secure itself is honoured on loopback http, as browsers do). After the
        launch the tool's cookies are also in client.cookies, for the test's own requests.
        `follow` follows the tool's redirects on its own origin.
        """
        url, params = self.initiate_launch(user, resource_link_id, message_type=message_type,
                                           with_ags=with_ags, lineitem=lineitem, custom=custom)
        browser = self._browsers.setdefault(client, _Browser(client))
        if login_method == "GET":
            answer = browser.go("GET", url, params=params)
        else:
            answer = browser.go("POST", url, data=params)
        if not answer.is_redirect:
            raise LaunchFailed("the tool's login initiation did not redirect", answer)
        location = urljoin(str(answer.url), answer.headers["location"])
        if location.split("?")[0] != self.url("/auth"):
            raise LaunchFailed(f"the tool's login redirected to {location}, not the platform", answer)
        again = answer.status_code in (307, 308) and login_method == "POST"
        answer = browser.go("POST", location, data=params) if again else browser.go("GET", location)
        if answer.status_code != 200:
            raise LaunchFailed("the platform refused the authentication request", answer)
        action, fields = _auto_post_form(answer.text)
        answer = browser.go("POST", action, data=fields, cross_site=cross_site)
        for _ in range(10 if follow else 0):
            if not answer.is_redirect:
                break
            target = urljoin(str(answer.url), answer.headers["location"])
            if _origin(target) != _origin(action):
                break
            answer = browser.go("GET", target)
        browser.share()
        return answer

    # -- endpoints: OIDC -------------------------------------------------------------------------

    async def _jwks(self, request: Request) -> Response:
        public = RSAAlgorithm.to_jwk(self._key.public_key(), as_dict=True)
        return JSONResponse({"keys": [{**public, "kid": self.kid, "alg": "RS256", "use": "sig"}]})

    async def _auth(self, request: Request) -> Response:
        """The authentication request (Security Framework, OpenID Connect Launch Flow), by GET or POST."""
        params = dict(request.query_params)
        if request.method == "POST":
            params.update({key: str(value) for key, value in (await request.form()).items()})
        if params.get("client_id") != self.client_id:
            raise _Refused(400, f"unknown client_id {params.get('client_id')!r}", "unauthorized_client")
        redirect_uri = params.get("redirect_uri")
        if redirect_uri not in self.tool_redirect_uris:
            raise _Refused(400, f"redirect_uri {redirect_uri!r} is not registered for this tool")
        expected = {"scope": "openid", "response_type": "id_token", "response_mode": "form_post",
                    "prompt": "none"}
        for name, value in expected.items():
            if params.get(name) != value:
                raise _Refused(400, f"{name} must be {value!r}, not {params.get(name)!r}")
        if not params.get("nonce"):
            raise _Refused(400, "nonce is missing")
        with self._lock:
            pending = self._pending.pop(params.get("lti_message_hint", ""), None)
        if pending is None:
            raise _Refused(400, "lti_message_hint is not one this platform issued (or was used already)")
        if params.get("login_hint") != pending.login_hint:
            raise _Refused(400, "login_hint does not match the one issued with this lti_message_hint")
        claims = self._claims(pending, params["nonce"])
        with self._lock:
            self._id_tokens.append(claims)
        id_token = jwt.encode(claims, self._key, algorithm="RS256", headers={"kid": self.kid})
        fields = {"id_token": id_token, **({"state": params["state"]} if "state" in params else {})}
        inputs = "".join(f'<input type="hidden" name="{name}" value="{escape(value)}">'
                         for name, value in fields.items())
        return HTMLResponse(f'<!doctype html><html><body onload="document.forms[0].submit()">'
                            f'<form method="post" action="{escape(redirect_uri)}">{inputs}</form>'
                            f"</body></html>")

    def _claims(self, pending: _Pending, nonce: str) -> dict[str, Any]:
        now = int(time.time())
        user = pending.user
        claims: dict[str, Any] = {
            "iss": self.issuer, "aud": self.client_id, "azp": self.client_id, "sub": user.sub,
            "iat": now, "exp": now + 300, "nonce": nonce, "name": user.name, "email": user.email,
            f"{LTI}message_type": pending.message_type, f"{LTI}version": "1.3.0",
            f"{LTI}deployment_id": self.deployment_id, f"{LTI}target_link_uri": self._target(),
            f"{LTI}roles": list(user.roles), f"{LTI}context": dict(self.context),
            f"{LTI}custom": dict(pending.custom),
        }
        if user.person_sourcedid is not None:
            claims[f"{LTI}lis"] = {"person_sourcedid": user.person_sourcedid}
        if pending.resource_link_id is not None and pending.message_type == "LtiResourceLinkRequest":
            claims[f"{LTI}resource_link"] = {"id": pending.resource_link_id,
                                             "title": pending.title or pending.resource_link_id}
        if pending.with_ags:
            endpoint = {"scope": list(AGS_SCOPES), "lineitems": self._ags_url("/lineitems")}
            claims[AGS_CLAIM] = endpoint | ({"lineitem": pending.lineitem} if pending.lineitem else {})
        if pending.message_type == "LtiDeepLinkingRequest":
            data = secrets.token_urlsafe(12)
            with self._lock:
                self._dl_data.add(data)
            claims[f"{DL}deep_linking_settings"] = {
                "deep_link_return_url": self.url("/deep-link-return"), "accept_types": ["ltiResourceLink"],
                "accept_presentation_document_targets": ["iframe", "window"], "accept_multiple": False,
                "data": data}
        return claims

    # -- endpoints: client credentials -----------------------------------------------------------

    async def _token(self, request: Request) -> Response:
        """Client credentials with a signed JWT (Security Framework, and RFC 7523's assertion)."""
        if injected := self._take("token"):
            return injected
        form = {key: str(value) for key, value in (await request.form()).items()}
        if form.get("grant_type") != "client_credentials":
            raise _Refused(400, f"grant_type {form.get('grant_type')!r}", "unsupported_grant_type")
        if form.get("client_assertion_type") != JWT_BEARER:
            raise _Refused(400, f"client_assertion_type must be {JWT_BEARER}")
        scopes = frozenset(form.get("scope", "").split())
        if not scopes or not scopes <= set(AGS_SCOPES):
            raise _Refused(400, f"scopes {sorted(scopes - set(AGS_SCOPES)) or 'none'} are not granted",
                           "invalid_scope")
        claims = await self._verify_tool_jwt(form.get("client_assertion", ""), self.token_audience,
                                             ["exp", "iat", "iss", "sub", "aud", "jti"])
        if claims["sub"] != self.client_id:
            raise _Refused(400, "sub must be the client_id", "invalid_client")
        with self._lock:
            if claims["jti"] in self._seen_jti:
                raise _Refused(400, "jti was used already", "invalid_client")
            self._seen_jti.add(claims["jti"])
            token = secrets.token_urlsafe(24)
            self._tokens[token] = _Grant(scopes, time.time() + self.token_lifetime)
        return JSONResponse({"access_token": token, "token_type": "Bearer",
                             "expires_in": self.token_lifetime, "scope": " ".join(sorted(scopes))})

    async def _verify_tool_jwt(self, token: str, audience: str, required: list[str]) -> dict[str, Any]:
        """A JWT the tool signed, checked with its published keys; RS256 only, by kid."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as error:
            raise _Refused(400, f"not a JWT: {error}", "invalid_client") from None
        if header.get("alg") != "RS256" or not header.get("kid"):
            raise _Refused(400, f"the JWT must be RS256 with a kid, not {header}", "invalid_client")
        key = await self._tool_key(header["kid"])
        try:
            return jwt.decode(token, key, algorithms=["RS256"], audience=audience, issuer=self.client_id,
                              options={"require": required})
        except jwt.PyJWTError as error:
            raise _Refused(400, f"the JWT does not verify: {error}", "invalid_client") from None

    async def _tool_key(self, kid: str) -> Any:
        """The tool's key by kid, fetched again when a kid is new (the tool may have rotated)."""
        with self._lock:
            key = self._tool_keys.get(kid)
        if key is not None:
            return key.key
        if self.tool_jwks_url is None:
            raise _Refused(400, "no JWKS URL is registered for the tool", "invalid_client")
        try:
            async with httpx.AsyncClient(timeout=5) as fetcher:
                answer = await fetcher.get(self.tool_jwks_url)
                answer.raise_for_status()
                keys = jwt.PyJWKSet.from_dict(answer.json()).keys
        except (httpx.HTTPError, ValueError, jwt.PyJWTError) as error:
            raise _Refused(400, f"the tool's JWKS could not be read: {error}", "invalid_client") from None
        with self._lock:
            self._tool_keys.update({found.key_id: found for found in keys if found.key_id})
            key = self._tool_keys.get(kid)
        if key is None:
            raise _Refused(400, f"the tool's JWKS has no key {kid!r}", "invalid_client")
        return key.key

    # -- endpoints: AGS --------------------------------------------------------------------------

    def _authorize(self, request: Request, *allowed: str) -> None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        with self._lock:
            grant = self._tokens.get(token.strip()) if scheme.lower() == "bearer" else None
        if grant is None or grant.expires_at <= time.time():
            raise _Refused(401, "a valid Bearer access token is needed", "invalid_token")
        if not grant.scopes & {f"{SCOPE}{name}" for name in allowed}:
            raise _Refused(403, f"the token lacks the scope for this ({', '.join(allowed)})",
                           "insufficient_scope")

    def _check_query(self, request: Request) -> None:
        """Moodle-style AGS URLs carry a query the platform needs back on every call."""
        for name, value in parse_qsl(self.ags_url_query or ""):
            if request.query_params.get(name) != value:
                raise _Refused(404, f"no such AGS resource: {request.url}", "not_found")

    async def _lineitems(self, request: Request) -> Response:
        self._check_query(request)
        if request.method == "POST":
            self._authorize(request, "lineitem")
            body = await _json_body(request, LINEITEM_TYPE)
            label, maximum = body.get("label"), body.get("scoreMaximum")
            if not isinstance(label, str) or not label or not _number(maximum) or maximum <= 0:
                raise _Refused(400, "a line item needs a label and a scoreMaximum above 0")
            with self._lock:
                item = self._new_line_item(label, float(maximum), body.get("resourceLinkId"),
                                           body.get("resourceId"), body.get("tag"))
            return JSONResponse(item.as_json(), 201, media_type=LINEITEM_TYPE)
        self._authorize(request, "lineitem", "lineitem.readonly")
        query = request.query_params
        filters = {"resource_link_id": "resourceLinkId", "resource_id": "resourceId", "tag": "tag"}
        with self._lock:
            items = [item.as_json() for item in self._line_items.values()]
        items = [item for item in items
                 if all(item.get(key) == query[name] for name, key in filters.items() if name in query)]
        if not all(query.get(name, "1").isdigit() for name in ("limit", "page")):
            raise _Refused(400, "limit and page must be whole numbers")
        size = int(query["limit"]) if "limit" in query else self.page_size
        headers = {}
        if size:
            page = int(query.get("page", "1"))
            if page * size < len(items):
                following = urlencode({**dict(query), "page": str(page + 1)})
                headers["Link"] = f'<{self.url("/lineitems")}?{following}>; rel="next"'
            items = items[(page - 1) * size:page * size]
        return JSONResponse(items, headers=headers, media_type=CONTAINER_TYPE)

    def _item(self, request: Request) -> LineItem:
        self._check_query(request)
        with self._lock:
            item = self._line_items.get(request.path_params["item"])
        if item is None:
            raise _Refused(404, f"no line item {request.url.path}", "not_found")
        return item

    async def _lineitem(self, request: Request) -> Response:
        self._authorize(request, "lineitem", "lineitem.readonly")
        return JSONResponse(self._item(request).as_json(), media_type=LINEITEM_TYPE)

    async def _score(self, request: Request) -> Response:
        """The score publish service, checked in Canvas's order and with Canvas's statuses."""
        if injected := self._take("scores"):
            return injected
        self._authorize(request, "score")
        item = self._item(request)
        body = await _json_body(request, SCORE_TYPE)
        for name in ("userId", "activityProgress", "gradingProgress", "timestamp"):
            if body.get(name) in (None, ""):
                raise _Refused(400, f"param is missing or the value is empty: {name}")
        user_id = body["userId"]
        with self._lock:
            user = self._users.get(user_id) if isinstance(user_id, str) else None
        if user is None or LEARNER not in user.roles:
            raise _Refused(422, "User not found in course or is not a student", "unprocessable_entity")
        if body["activityProgress"] not in ACTIVITY_PROGRESS:
            raise _Refused(400, f"activityProgress must be one of {sorted(ACTIVITY_PROGRESS)}")
        if body["gradingProgress"] not in GRADING_PROGRESS:
            raise _Refused(400, f"gradingProgress must be one of {sorted(GRADING_PROGRESS)}")
        timestamp = _timestamp(body["timestamp"])
        given, maximum = body.get("scoreGiven"), body.get("scoreMaximum")
        if given is not None or maximum is not None:
            if not (_number(given) and _number(maximum)):
                raise _Refused(422, "scoreGiven and scoreMaximum must both be numbers when either is given",
                               "unprocessable_entity")
            if not 0 <= given <= maximum or maximum <= 0:
                raise _Refused(422, f"scoreGiven {given} must lie in [0, scoreMaximum {maximum}]",
                               "unprocessable_entity")
        if "comment" in body and not isinstance(body["comment"], (str, type(None))):
            raise _Refused(400, "comment must be a string")
        with self._lock:
            last = self._last_timestamp.get((item.url, user_id))
            if last is not None and timestamp <= last:
                raise _Refused(400, f"Provided timestamp of {body['timestamp']} before last updated "
                                    f"timestamp of {last.isoformat(timespec='milliseconds')}")
            self._last_timestamp[(item.url, user_id)] = timestamp
            self._gradebook.setdefault(item.url, {})[user_id] = json.loads(json.dumps(body))
            self._scores.append(AcceptedScore(item.url, user_id, body, timestamp))
        result = item.url.split("?")[0] + f"/results/{user_id}"
        return JSONResponse({"resultUrl": result})

    def _take(self, kind: str) -> Response | None:
        with self._lock:
            injected = self._inject.get(kind)
            if injected is None or injected.count <= 0:
                return None
            injected.count -= 1
        return injected.response()

    # -- endpoints: deep linking -----------------------------------------------------------------

    async def _deep_link_return(self, request: Request) -> Response:
        """The LtiDeepLinkingResponse (Deep Linking 2.0): a JWT the tool signs, as the form field JWT."""
        token = str((await request.form()).get("JWT", ""))
        claims = await self._verify_tool_jwt(token, self.issuer, ["exp", "iat", "iss", "aud", "nonce"])
        expected = {f"{LTI}message_type": "LtiDeepLinkingResponse", f"{LTI}version": "1.3.0",
                    f"{LTI}deployment_id": self.deployment_id}
        for name, value in expected.items():
            if claims.get(name) != value:
                raise _Refused(400, f"{name} must be {value!r}, not {claims.get(name)!r}")
        items = claims.get(f"{DL}content_items", [])
        if not isinstance(items, list) or len(items) > 1:
            raise _Refused(400, "content_items must be a list of at most one item (accept_multiple is false)")
        for content in items:
            if not isinstance(content, dict) or content.get("type") != "ltiResourceLink":
                raise _Refused(400, "only ltiResourceLink items are accepted")
            line = content.get("lineItem")
            if line is not None and (not isinstance(line, dict) or not _number(line.get("scoreMaximum"))
                                     or line["scoreMaximum"] <= 0):
                raise _Refused(400, "lineItem needs a scoreMaximum above 0")
        with self._lock:
            if claims["nonce"] in self._seen_nonces:
                raise _Refused(400, "nonce was used already")
            data = claims.get(f"{DL}data")
            if not isinstance(data, str) or data not in self._dl_data:
                raise _Refused(400, "data must echo the deep_linking_settings data of an open request")
            self._seen_nonces.add(claims["nonce"])
            self._dl_data.discard(data)
            for content in items:
                self._content_items.append(content)
                if (line := content.get("lineItem")) is not None:
                    link = f"dl-{len(self._content_items)}"
                    self._new_line_item(line.get("label") or content.get("title") or link,
                                        float(line["scoreMaximum"]), link, line.get("resourceId"),
                                        line.get("tag"))
        return HTMLResponse("<!doctype html><p>The content was added to the course.</p>")


async def _json_body(request: Request, media_type: str) -> dict[str, Any]:
    """The request's JSON object, refused 415 unless sent as exactly `media_type` (charset allowed)."""
    sent = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if sent != media_type:
        raise _Refused(415, f"Content-Type must be {media_type}, not {sent or 'missing'}",
                       "unsupported_media_type")
    try:
        body = json.loads(await request.body())
    except ValueError:
        raise _Refused(400, "the body is not JSON") from None
    if not isinstance(body, dict):
        raise _Refused(400, "the body must be a JSON object")
    return body


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _timestamp(value: object) -> datetime:
    """ISO 8601 with a date, a 'T', a time and a zone (AGS wants the zone; Canvas parses it)."""
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) and "T" in value else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise _Refused(400, f"Provided timestamp of {value} not a valid timestamp")
    return parsed


def _path_matches(path: str, cookie_path: str) -> bool:
    """RFC 6265 5.1.4: "/lti" matches "/lti" and "/lti/launch", not "/ltix"."""
    return path == cookie_path or path.startswith(cookie_path.rstrip("/") + "/")


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class _FormReader(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "form" and self.action is None:
            self.action = values.get("action")
        elif tag == "input" and values.get("name"):
            self.fields[str(values["name"])] = values.get("value") or ""


def _auto_post_form(page: str) -> tuple[str, dict[str, str]]:
    reader = _FormReader()
    reader.feed(page)
    if not reader.action:
        raise AssertionError(f"no form in the platform's answer: {page[:300]}")
    return reader.action, reader.fields


@dataclass
class _Cookie:
    name: str
    value: str
    path: str
    same_site: str
    origin: str


@dataclass
class _Browser:
    """Enough of a browser's cookie jar for a launch: per origin and path, SameSite honoured."""

    client: httpx.Client
    jar: dict[tuple[str, str, str], _Cookie] = field(default_factory=dict)

    def go(self, method: str, url: str, *, cross_site: bool = False, **sent: Any) -> httpx.Response:
        origin, path = _origin(url), urlsplit(url).path or "/"
        cookies = [cookie for cookie in self.jar.values()
                   if cookie.origin == origin and _path_matches(path, cookie.path)
                   and (not cross_site or cookie.same_site == "none")]
        headers = {"Cookie": "; ".join(f"{c.name}={c.value}" for c in cookies)} if cookies else {}
        saved, self.client.cookies = self.client.cookies, httpx.Cookies()
        try:
            answer = self.client.request(method, url, headers=headers, follow_redirects=False, **sent)
        finally:
            self.client.cookies = saved
        default_path = path[:path.rfind("/")] or "/"  # RFC 6265 5.1.4: the request's directory
        for line in answer.headers.get_list("set-cookie"):
            parsed = SimpleCookie()
            parsed.load(line)
            for morsel in parsed.values():
                same_site = str(morsel["samesite"] or "lax").lower()
                cookie = _Cookie(morsel.key, morsel.value, morsel["path"] or default_path, same_site, origin)
                key = (origin, cookie.path, cookie.name)
                if morsel["max-age"] in ("0", 0) or (same_site == "none" and not morsel["secure"]):
                    self.jar.pop(key, None)
                else:
                    self.jar[key] = cookie
        return answer

    def share(self) -> None:
        """The tool's cookies into the client's own jar, for the test's next requests to the tool."""
        for cookie in self.jar.values():
            self.client.cookies.set(cookie.name, cookie.value, domain=urlsplit(cookie.origin).hostname or "",
                                    path=cookie.path)
