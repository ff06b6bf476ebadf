"""The LTI platform of tests/lti_platform.py, checked against a stand-in tool written here: a real
login/launch/jwks app on its own loopback port, plus the client side of a client-credentials grant
and a score post. What these tests prove is that the platform is strict where the tool tests need
it to be, so a mistake in the real tool fails there.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any, Literal
from urllib.parse import urlencode

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from lti_platform import (AGS_CLAIM, CANVAS_RATE_LIMIT_BODY, DL, LTI, SCOPE, SCORE_TYPE, LaunchFailed,
                          Platform, serving)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route


HTTP = httpx.Client()  # the tests' own requests; closed at the module's end


@pytest.fixture(scope="module", autouse=True)
def _close_http() -> Iterator[None]:
    yield
    HTTP.close()


class StandInTool:
    """An LTI tool as small as the flow allows: it checks the issuer, keeps state in a cookie and
    the nonce in memory, and answers a launch with the id_token's verified claims."""

    def __init__(self, platform: Platform) -> None:
        self.platform = platform
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "tool-1"
        self.base_url = ""
        self.nonces: list[str] = []
        self.same_site: Literal["lax", "strict", "none"] = "none"
        self.redirect_uri: str | None = None  # None: its own /lti/launch
        self.http = httpx.Client()  # one client: each new one loads a CA bundle (tens of ms)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/lti/login", self.login, methods=["GET", "POST"]),
                                 Route("/lti/launch", self.launch, methods=["POST"]),
                                 Route("/lti/jwks", self.jwks, methods=["GET"])])

    async def login(self, request: Request) -> Response:
        params = dict(request.query_params) | {k: str(v) for k, v in (await request.form()).items()}
        if params.get("iss") != self.platform.issuer or params.get("client_id") != self.platform.client_id:
            return PlainTextResponse("unknown platform", 400)
        state, nonce = secrets.token_urlsafe(8), secrets.token_urlsafe(8)
        self.nonces.append(nonce)
        query = {"scope": "openid", "response_type": "id_token", "response_mode": "form_post",
                 "prompt": "none", "client_id": params["client_id"], "login_hint": params["login_hint"],
                 "redirect_uri": self.redirect_uri or f"{self.base_url}/lti/launch",
                 "lti_message_hint": params["lti_message_hint"], "nonce": nonce, "state": state}
        answer = RedirectResponse(f"{self.platform.url('/auth')}?{urlencode(query)}", 302)
        answer.set_cookie("lti_state", state, path="/lti", secure=True, samesite=self.same_site)
        return answer

    async def launch(self, request: Request) -> Response:
        form = await request.form()
        if form.get("state") != request.cookies.get("lti_state"):
            return PlainTextResponse("state does not match the cookie", 400)
        keys = self.http.get(self.platform.url("/jwks")).json()
        key = jwt.PyJWKSet.from_dict(keys)[jwt.get_unverified_header(str(form["id_token"]))["kid"]]
        claims = jwt.decode(str(form["id_token"]), key.key, algorithms=["RS256"],
                            audience=self.platform.client_id, issuer=self.platform.issuer)
        if claims["nonce"] not in self.nonces:
            return PlainTextResponse("unknown nonce", 400)
        return JSONResponse(claims)

    async def jwks(self, request: Request) -> Response:
        public = RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return JSONResponse({"keys": [{**public, "kid": self.kid, "alg": "RS256", "use": "sig"}]})

    def sign(self, claims: dict[str, Any]) -> str:
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": self.kid})

    def token(self, scopes: str = f"{SCOPE}score", aud: str | None = None,
              jti: str | None = None) -> httpx.Response:
        now = int(time.time())
        assertion = self.sign({"iss": self.platform.client_id, "sub": self.platform.client_id,
                               "aud": aud or self.platform.token_url, "iat": now, "exp": now + 300,
                               "jti": jti or secrets.token_hex(8)})
        return self.http.post(self.platform.token_url, data={
            "grant_type": "client_credentials", "client_assertion_type":
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer", "client_assertion": assertion,
            "scope": scopes})


@pytest.fixture(scope="module")
def stand_in_tool() -> Iterator[StandInTool]:
    """One tool server for the module (a server's stop costs a tenth of a second or more)."""
    tool = StandInTool(Platform())
    with serving(tool.app()) as tool_url, tool.http:
        tool.base_url = tool_url
        yield tool


@pytest.fixture
def course(stand_in_tool: StandInTool) -> Iterator[tuple[Platform, StandInTool]]:
    tool = stand_in_tool
    with Platform() as platform:
        tool.platform, tool.nonces, tool.same_site, tool.redirect_uri = platform, [], "none", None
        platform.register_tool(login_url=f"{tool.base_url}/lti/login",
                               redirect_uris=[f"{tool.base_url}/lti/launch"],
                               jwks_url=f"{tool.base_url}/lti/jwks")
        platform.add_user("student-1", name="Ada", person_sourcedid="S-1")
        platform.add_user("teacher-1", roles="instructor")
        yield platform, tool


def score(user: str = "student-1", given: float = 7, at: datetime | None = None) -> dict[str, Any]:
    moment = at or datetime.now(timezone.utc)
    return {"userId": user, "scoreGiven": given, "scoreMaximum": 10, "activityProgress": "Completed",
            "gradingProgress": "FullyGraded", "timestamp": moment.isoformat(timespec="milliseconds")}


def post_score(url: str, token: str, body: dict[str, Any], content_type: str = SCORE_TYPE) -> httpx.Response:
    return HTTP.post(f"{url}/scores", json=body,
                      headers={"Authorization": f"Bearer {token}", "Content-Type": content_type})


def test_a_launch_delivers_a_verifiable_id_token_with_the_nonce_the_tool_sent(course):
    platform, tool = course
    item = platform.add_line_item("Chapter 2", 10, "link-2")
    with httpx.Client() as browser:
        answer = platform.launch(browser, "student-1", "link-2", lineitem=item, custom={"chapter": "2"})
    assert answer.status_code == 200, answer.text
    claims = answer.json()
    assert claims["nonce"] == tool.nonces[-1]
    assert claims[f"{LTI}message_type"] == "LtiResourceLinkRequest"
    assert claims[f"{LTI}version"] == "1.3.0"
    assert claims[f"{LTI}resource_link"]["id"] == "link-2"
    assert claims[f"{LTI}roles"] == ["http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"]
    assert claims[f"{LTI}lis"] == {"person_sourcedid": "S-1"}
    assert claims[f"{LTI}custom"] == {"chapter": "2"}
    assert claims[AGS_CLAIM]["lineitem"] == item
    assert claims[AGS_CLAIM]["lineitems"] == platform.url("/lineitems")
    assert platform.id_tokens[-1]["nonce"] == tool.nonces[-1]


def test_a_state_cookie_without_samesite_none_is_not_sent_on_the_cross_site_post(course):
    platform, tool = course
    tool.same_site = "lax"
    with httpx.Client() as browser:
        answer = platform.launch(browser, "student-1", "link-2")
    assert answer.status_code == 400 and "state" in answer.text


def test_an_unregistered_redirect_uri_is_refused(course):
    platform, tool = course
    tool.redirect_uri = f"{tool.base_url}/elsewhere"
    with httpx.Client() as browser, pytest.raises(LaunchFailed) as failed:
        platform.launch(browser, "student-1", "link-2")
    assert failed.value.response.status_code == 400
    assert "redirect_uri" in failed.value.response.text


def test_a_message_hint_serves_one_authentication_request_only(course):
    platform, tool = course
    url, params = platform.initiate_launch("student-1", "link-2")
    login = HTTP.get(url, params=params)
    assert HTTP.get(login.headers["location"]).status_code == 200
    assert HTTP.get(login.headers["location"]).status_code == 400


def test_a_client_assertion_must_have_the_token_url_as_audience_and_a_fresh_jti(course):
    platform, tool = course
    refused = tool.token(aud=platform.issuer)
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_client"
    granted = tool.token(jti="once")
    assert granted.status_code == 200
    assert granted.json()["token_type"] == "Bearer" and granted.json()["expires_in"] == 3600
    assert tool.token(jti="once").status_code == 400
    names_and_roles = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
    assert tool.token(scopes=names_and_roles).json()["error"] == "invalid_scope"


def test_a_score_lands_only_with_the_right_media_type_and_a_later_timestamp(course):
    platform, tool = course
    item = platform.add_line_item("Chapter 2", 10, "link-2")
    token = tool.token().json()["access_token"]
    assert post_score(item, token, score(), "application/json").status_code == 415
    first = datetime.now(timezone.utc)
    assert post_score(item, token, score(at=first)).status_code == 200
    older = post_score(item, token, score(given=9, at=first - timedelta(seconds=1)))
    assert older.status_code == 400 and "before last updated" in older.text
    assert post_score(item, token, score(given=9, at=first)).status_code == 400
    assert post_score(item, token, score(given=11)).status_code == 422
    assert post_score(item, token, score(user="teacher-1")).status_code == 422
    assert post_score(item, token, {**score(), "timestamp": "2024-01-01T10:00:00"}).status_code == 400
    assert post_score(item, "not-a-token", score()).status_code == 401
    assert post_score(item, token, score(given=8, at=first + timedelta(seconds=1))).status_code == 200
    assert platform.gradebook[item]["student-1"]["scoreGiven"] == 8
    assert [accepted.body["scoreGiven"] for accepted in platform.scores] == [7, 8]


def test_failures_are_injected_as_configured(course):
    platform, tool = course
    item = platform.add_line_item("Chapter 2", 10, "link-2")
    platform.fail_next_tokens(1, 503)
    assert tool.token().status_code == 503
    token = tool.token().json()["access_token"]
    platform.fail_next_scores(2, 429, retry_after=2)
    answers = [post_score(item, token, score()) for _ in range(3)]
    assert [a.status_code for a in answers] == [429, 429, 200]
    assert answers[0].headers["retry-after"] == "2"
    platform.fail_next_scores(1, canvas_rate_limit=True)
    limited = post_score(item, token, score())
    assert (limited.status_code, limited.text) == (403, CANVAS_RATE_LIMIT_BODY)
    assert limited.headers["x-rate-limit-remaining"] == "0.0"
    assert post_score(item, token, score()).status_code == 200
    logged = [(r.method, r.status) for r in platform.requests if r.path.endswith("/scores")]
    assert logged == [("POST", 429), ("POST", 429), ("POST", 200), ("POST", 403), ("POST", 200)]
    platform.expire_tokens()
    assert post_score(item, token, score()).status_code == 401


def test_line_items_are_found_made_and_paged(course):
    platform, tool = course
    platform.add_line_item("Chapter 1", 10, "link-1", resource_id="ch1")
    platform.add_line_item("Chapter 2", 10, "link-2", resource_id="ch2")
    token = tool.token(f"{SCOPE}lineitem").json()["access_token"]
    auth = {"Authorization": f"Bearer {token}"}
    found = HTTP.get(platform.url("/lineitems"), params={"resource_id": "ch2"}, headers=auth)
    assert found.headers["content-type"].startswith("application/vnd.ims.lis.v2.lineitemcontainer+json")
    assert [item["label"] for item in found.json()] == ["Chapter 2"]
    made = HTTP.post(platform.url("/lineitems"), json={"label": "Chapter 3", "scoreMaximum": 5},
                      headers={**auth, "Content-Type": "application/vnd.ims.lis.v2.lineitem+json"})
    assert made.status_code == 201
    assert HTTP.get(made.json()["id"], headers=auth).json()["label"] == "Chapter 3"
    wrong = HTTP.post(platform.url("/lineitems"), json={"label": "x", "scoreMaximum": 5}, headers=auth)
    assert wrong.status_code == 415
    page = HTTP.get(platform.url("/lineitems"), params={"limit": 2}, headers=auth)
    assert len(page.json()) == 2 and page.links["next"]["url"]
    assert [i["label"] for i in HTTP.get(page.links["next"]["url"], headers=auth).json()] == ["Chapter 3"]


def test_moodle_style_urls_need_scores_before_the_query(course):
    platform, tool = course
    platform.ags_url_query = "type_id=1"
    item = platform.add_line_item("Chapter 2", 10, "link-2")
    token = tool.token().json()["access_token"]
    base, query = item.split("?")
    assert post_score(item, token, score()).status_code >= 400  # ".../2?type_id=1/scores"
    assert post_score(base, token, score()).status_code == 404
    right = HTTP.post(f"{base}/scores?{query}", json=score(),
                       headers={"Authorization": f"Bearer {token}", "Content-Type": SCORE_TYPE})
    assert right.status_code == 200


def test_a_deep_linking_response_makes_a_line_item(course):
    platform, tool = course
    with httpx.Client() as browser:
        claims = platform.launch(browser, "teacher-1", message_type="LtiDeepLinkingRequest").json()
    settings = claims[f"{DL}deep_linking_settings"]
    assert settings["accept_types"] == ["ltiResourceLink"] and f"{LTI}resource_link" not in claims
    now = int(time.time())
    response = {"iss": platform.client_id, "aud": platform.issuer, "iat": now, "exp": now + 300,
                "nonce": secrets.token_hex(8), f"{LTI}message_type": "LtiDeepLinkingResponse",
                f"{LTI}version": "1.3.0", f"{LTI}deployment_id": claims[f"{LTI}deployment_id"],
                f"{DL}data": settings["data"],
                f"{DL}content_items": [{"type": "ltiResourceLink", "title": "Chapter 4",
                                        "url": f"{tool.base_url}/lti/launch",
                                        "lineItem": {"scoreMaximum": 10, "resourceId": "ch4"}}]}
    posted = HTTP.post(settings["deep_link_return_url"], data={"JWT": tool.sign(response)})
    assert posted.status_code == 200, posted.text
    assert [(i.label, i.resource_id) for i in platform.line_items] == [("Chapter 4", "ch4")]
    replayed = HTTP.post(settings["deep_link_return_url"], data={"JWT": tool.sign(response)})
    assert replayed.status_code == 400
    wrong_aud = HTTP.post(settings["deep_link_return_url"],
                           data={"JWT": tool.sign({**response, "aud": platform.token_url})})
    assert wrong_aud.status_code == 400
