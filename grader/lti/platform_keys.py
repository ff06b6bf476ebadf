"""The platforms' public keys, read from their JWKS URLs, kept, and read again when a launch names
a key the kept set lacks (platforms rotate keys: Canvas every month).

A JWKS is data from the network: its size and the time to read it are bounded, it is parsed by
the JWT library, and keys that are not RSA signing keys are left out. A launch with an unknown
`kid` reads the set again at most once a minute per platform, whether the last read worked or not,
so a stream of forged launches (a state is free to ask for) cannot make the service hammer a
platform; each platform's set is read under a lock of its own, so one slow platform holds up only
its own launches.
"""

from __future__ import annotations

import threading
import time

import httpx
import jwt

MAX_JWKS_BYTES = 512 * 1024
REFETCH_AFTER_S = 60.0
TIMEOUT_S = 10.0
READ_S = 15.0  # the whole key set


class KeyUnavailable(Exception):
    """The platform's key for a launch could not be had: one sentence why."""


class PlatformKeys:
    """Each platform's keys by kid, fetched on first use and again for an unknown kid."""

    def __init__(self, client: httpx.Client | None = None):
        self._client = client or httpx.Client(timeout=TIMEOUT_S, follow_redirects=False)
        self._keys: dict[str, dict[str, jwt.PyJWK]] = {}
        self._fetched_at: dict[str, float] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()  # guards _locks

    def close(self) -> None:
        self._client.close()

    def key(self, jwks_url: str, kid: str | None) -> jwt.PyJWK:
        """The key `kid` of the set at `jwks_url` (the only key, when the token names none)."""
        with self._lock:
            lock = self._locks.setdefault(jwks_url, threading.Lock())
        with lock:
            found = self._find(jwks_url, kid)
            if found is None and time.monotonic() - self._fetched_at.get(jwks_url, -1e9) > REFETCH_AFTER_S:
                self._fetched_at[jwks_url] = time.monotonic()  # a failed read waits its minute too
                self._keys[jwks_url] = self._fetch(jwks_url)
                found = self._find(jwks_url, kid)
        if found is None:
            raise KeyUnavailable("the LMS signed this launch with a key it does not publish")
        return found

    def _find(self, jwks_url: str, kid: str | None) -> jwt.PyJWK | None:
        keys = self._keys.get(jwks_url, {})
        if kid is None:
            return next(iter(keys.values())) if len(keys) == 1 else None
        return keys.get(kid)

    def _fetch(self, url: str) -> dict[str, jwt.PyJWK]:
        deadline = time.monotonic() + READ_S
        try:
            with self._client.stream("GET", url, headers={"Accept": "application/json"}) as answer:
                if answer.status_code != 200:
                    raise KeyUnavailable(f"the LMS's key set answered {answer.status_code}")
                body = b""
                for chunk in answer.iter_bytes():
                    body += chunk
                    if len(body) > MAX_JWKS_BYTES:
                        raise KeyUnavailable("the LMS's key set is larger than a key set can be")
                    if time.monotonic() > deadline:
                        raise KeyUnavailable(f"the LMS's key set took longer than {READ_S:g} s to read")
        except (httpx.HTTPError, httpx.InvalidURL, ValueError, UnicodeError) as exc:
            raise KeyUnavailable(f"the LMS's key set could not be read ({type(exc).__name__})") from None
        try:
            keys = jwt.PyJWKSet.from_json(body.decode("utf-8")).keys
        except (jwt.PyJWTError, ValueError, UnicodeDecodeError):
            raise KeyUnavailable("the LMS's key set is not a JWKS") from None
        return {k.key_id: k for k in keys if k.key_id and k.key_type == "RSA"
                and getattr(k, "public_key_use", None) in (None, "sig")}
