"""Forged and broken id_tokens against the launch's checks (grader/lti/launch.py), each refused
in one sentence: the forgeries an attack on the tool tried, kept as tests. The platform's key set
is a stand-in with one key (`k1`); everything else is the tool's own code."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from grader.lti.launch import LTI, LaunchRefused, verify_launch
from grader.lti.platform_keys import KeyUnavailable
from grader.lti.registration import Platform, Registrations
from grader.lti.store import STATE_LIFETIME_S, LtiStore

KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER = rsa.generate_private_key(public_exponent=65537, key_size=2048)
A = Platform(issuer="https://a.example", client_id="c", deployment_ids=("d1",), login_url="https://a.example/l",
             token_url="https://a.example/t", jwks_url="https://a.example/j")
B = Platform(issuer="https://b.example", client_id="c", deployment_ids=("d1",), login_url="https://b.example/l",
             token_url="https://b.example/t", jwks_url="https://b.example/j", contexts=("course-b",))
REGISTERED = Registrations(platforms=(A, B))


class OneKey:
    """The platforms' key sets: `k1` only."""

    def key(self, url: str, kid: str | None) -> jwt.PyJWK:
        if kid == "k1":
            return jwt.PyJWK(jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key(), as_dict=True), "RS256")
        raise KeyUnavailable("the LMS signed this launch with a key it does not publish")


def claims(nonce: str, **given: object) -> dict:
    now = int(time.time())
    found = {"iss": A.issuer, "aud": "c", "sub": "u", "iat": now, "exp": now + 300, "nonce": nonce,
             LTI + "version": "1.3.0", LTI + "message_type": "LtiResourceLinkRequest", LTI + "deployment_id": "d1",
             LTI + "resource_link": {"id": "r"}, LTI + "context": {"id": "course-b"}}
    found.update(given)
    return {k: v for k, v in found.items() if v is not None}


def signed(nonce: str, key: rsa.RSAPrivateKey = KEY, kid: str = "k1", **given: object) -> str:
    return jwt.encode(claims(nonce, **given), key, algorithm="RS256", headers={"kid": kid})


def b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LtiStore]:
    made = LtiStore(tmp_path / "gradebook.sqlite")
    yield made
    made.close_all()


def launch(store: LtiStore, token_of: Callable[[str], str], platform: int = 0):
    state, nonce = store.begin(platform)
    return verify_launch(token_of(nonce), state, REGISTERED, store, OneKey())


def test_a_good_launch_passes(store: LtiStore) -> None:
    assert launch(store, signed).claims["sub"] == "u"


@pytest.mark.parametrize("forge", [
    lambda n: f"{b64({'alg': 'none', 'kid': 'k1'})}.{b64(claims(n))}.",
    lambda n: f"{b64({'alg': 'HS256', 'kid': 'k1'})}.{b64(claims(n))}.AAAA",
    lambda n: signed(n, key=OTHER),
    lambda n: signed(n, kid="unknown"),
    lambda n: signed(n, exp=int(time.time()) - 120),
    lambda n: signed(n, iat=int(time.time()) + 3600, exp=int(time.time()) + 7200),
    lambda n: signed(n, aud=["c", "other"]),
    lambda n: signed(n, aud=["c", "other"], azp="other"),
    lambda n: signed(n, aud="other"),
    lambda n: signed(n, iss=B.issuer),
    lambda n: signed("not-the-nonce"),
    lambda n: signed(n, **{LTI + "deployment_id": "d2"}),
    lambda n: signed(n, **{LTI + "version": "1.1"}),
    lambda n: signed(n, **{LTI + "message_type": "LtiSubmissionReviewRequest"}),
    lambda n: signed(n, **{LTI + "resource_link": None}),
    lambda n: signed(n, sub=None),
    lambda n: signed(n, exp=None),
], ids=["alg none", "HS256", "another key", "unknown kid", "expired", "issued in the future", "two audiences, no azp",
        "azp another tool", "another audience", "another platform", "another nonce", "unregistered deployment",
        "LTI 1.1", "another message", "no resource link", "no sub", "no exp"])
def test_forgeries_are_refused(store: LtiStore, forge: Callable[[str], str]) -> None:
    with pytest.raises(LaunchRefused):
        launch(store, forge)


def test_a_state_is_used_once_is_this_run_s_and_names_its_platform(store: LtiStore, tmp_path: Path,
                                                                   monkeypatch) -> None:
    state, nonce = store.begin(0)
    verify_launch(signed(nonce), state, REGISTERED, store, OneKey())
    with pytest.raises(LaunchRefused, match="already used"):
        verify_launch(signed(nonce), state, REGISTERED, store, OneKey())
    state, nonce = store.begin(1)  # B's login, A's token
    with pytest.raises(LaunchRefused):
        verify_launch(signed(nonce), state, REGISTERED, store, OneKey())
    index, rest = state.split(".", 1)
    with pytest.raises(LaunchRefused, match="expired or was already used"):  # B's state made A's: its MAC fails
        verify_launch(signed(nonce), f"0.{rest}", REGISTERED, store, OneKey())
    later = LtiStore(tmp_path / "gradebook.sqlite")  # a restarted service: another run's secret
    state, nonce = store.begin(0)
    with pytest.raises(LaunchRefused, match="expired"):
        verify_launch(signed(nonce), state, REGISTERED, later, OneKey())
    later.close_all()
    state, nonce = store.begin(0)
    monkeypatch.setattr(time, "time", lambda real=time.time: real() + STATE_LIFETIME_S + 5)
    with pytest.raises(LaunchRefused, match="expired"):
        verify_launch(signed(nonce), state, REGISTERED, store, OneKey())


def test_a_registration_pinned_to_its_courses_refuses_the_platform_s_others(store: LtiStore) -> None:
    assert launch(store, lambda n: signed(n, iss=B.issuer), platform=1).context_id == "course-b"
    with pytest.raises(LaunchRefused, match="not one the grading service is set up for"):
        launch(store, lambda n: signed(n, iss=B.issuer, **{LTI + "context": {"id": "a-sandbox"}}), platform=1)
