"""What every response of the service carries, and the requests it refuses before any route runs.

No cookies anywhere: a student's token travels only in the Authorization header their own client
or the hand-in page sets, which no other site's page can make a browser send, so there is no
cross-site request to forge. On top of that:

- a POST whose `Origin` header is present and is not the service's own origin (the scheme and
  host the request was made to, which a TLS proxy in front reports, or one given with `--origin`)
  is refused, 403 (but on the LTI launch's paths, which the LMS's pages post to: grader/lti/routes.py
  checks their Origin against the platform's);
- a request whose Host is not one the service answers to (loopback names, and the hosts of
  `--origin`; any with `--public` and no `--origin`) is refused, 400: a page of another site that
  a DNS trick points at 127.0.0.1 cannot talk to it;
- every response says `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`, and a
  Content-Security-Policy (`default-src 'self'; frame-ancestors 'none'` unless the route set a
  stricter one: the hand-in page's nonce, a feedback page's style hash); /api answers are never
  cached (`Cache-Control: no-store`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

DEFAULT_POLICY = "default-src 'self'; frame-ancestors 'none'"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> str | None:
    """`scheme://host[:port]`, lower case, the default port left out; None for what is no origin
    (`null`, a path, garbage)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    shown = "" if port in (None, _DEFAULT_PORTS[parts.scheme]) else f":{port}"
    return f"{parts.scheme}://{host}{shown}"


def _host_name(host_header: str) -> str:
    """The host of a Host header, without its port."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class Guard:
    """The ASGI middleware that refuses foreign origins and hosts and adds the security headers."""

    def __init__(self, app: ASGIApp, *, origins: Iterable[str] = (), any_host: bool = False,
                 cross_site_posts: Iterable[str] = ()):
        self.app = app
        self.cross_site_posts = frozenset(cross_site_posts)
        self.origins = {o for o in (origin_of(u) for u in origins) if o}
        self.hosts = None if any_host and not self.origins else \
            set(LOOPBACK_HOSTS) | {_host_name(urlsplit(o).netloc) for o in self.origins}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        api = scope["path"].startswith("/api/") or scope["path"] == "/api"
        host = headers.get("host", "")
        if self.hosts is not None and _host_name(host) not in self.hosts:
            await _refuse(send, 400, "this service does not answer to that host name; use its address as the "
                                     "instructor gave it", api)
            return
        if scope["method"] == "POST" and "origin" in headers and scope["path"] not in self.cross_site_posts \
                and not self._own(headers["origin"], scope, host):
            await _refuse(send, 403, "this hand-in comes from another site's page: hand in from the service's own "
                                     "page or the grade command", api)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = _secured(message.get("headers", []), api)
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _own(self, origin: str, scope: Scope, host: str) -> bool:
        given = origin_of(origin)
        if given is None:
            return False
        return given in self.origins or given == origin_of(f"{scope.get('scheme', 'http')}://{host}")


def secured_headers(api: bool) -> list[tuple[str, str]]:
    """The headers every answer carries (`_secured`), for one made outside the Guard (a 500)."""
    return [(k.decode(), v.decode()) for k, v in _secured([], api)]


def _secured(headers: list[tuple[bytes, bytes]], api: bool) -> list[tuple[bytes, bytes]]:
    names = {k.lower() for k, _ in headers}
    added = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer")]
    if b"content-security-policy" not in names:
        added.append((b"content-security-policy", DEFAULT_POLICY.encode()))
    if api and b"cache-control" not in names:
        added.append((b"cache-control", b"no-store"))
    return [*[(k, v) for k, v in headers if k.lower() not in {a for a, _ in added}], *added]


async def _refuse(send: Send, status: int, sentence: str, api: bool) -> None:
    body = json.dumps({"error": sentence}).encode()
    headers = _secured([(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())], api)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
