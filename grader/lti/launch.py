"""An LTI 1.3 launch, checked as the IMS Security Framework (5.1.3) and LTI Core (5.3) say.

1. The login initiation (`/lti/login`, GET or POST, from the platform): its issuer and client id
   must be registered; the answer is a redirect to the platform's authorization endpoint with a
   fresh `state` and `nonce` and `response_mode=form_post`. Nothing is written: the state carries
   the nonce under a MAC of this run's (grader/lti/store.py).
2. The launch (`/lti/launch`, POSTed by the user's browser): `state` must be one this service run
   began, at most ten minutes ago, and not used (its nonce is kept as used once the token carrying
   it checks out); the `id_token` must be an RS256 JWT signed by a key the registered
   platform publishes, issued by it for this client (`aud`, and `azp` when `aud` names several),
   unexpired (a minute of clock skew), carrying the state's nonce (so a token is used once), an
   LTI 1.3.0 message of a kind the tool takes, from a registered deployment and, when the
   registration names its courses (`contexts`), from one of them.

Whatever a check refuses is one sentence for the page (`LaunchRefused`); nothing of the token is
trusted before the signature is.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import jwt
from pydantic import BaseModel

from grader.lti.platform_keys import KeyUnavailable, PlatformKeys
from grader.lti.registration import Platform, Registrations
from grader.lti.store import LtiStore

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
AGS = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
DEEP_LINKING = "https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"
RESOURCE_LINK = "LtiResourceLinkRequest"
DEEP_LINKING_REQUEST = "LtiDeepLinkingRequest"
LEEWAY_S = 60
MAX_TOKEN_CHARS = 64 * 1024


class LaunchRefused(Exception):
    """A login or launch this tool does not take: the sentence says why, for the user's page."""


class Launch(BaseModel):
    """A launch whose token checked out: the platform and the claims."""

    platform: Platform
    claims: dict[str, Any]

    @property
    def message_type(self) -> str:
        return str(self.claims[LTI + "message_type"])

    @property
    def deployment_id(self) -> str:
        return str(self.claims[LTI + "deployment_id"])

    @property
    def context_id(self) -> str:
        context = self.claims.get(LTI + "context")
        return str(context.get("id", "")) if isinstance(context, dict) else ""

    @property
    def resource_link_id(self) -> str:
        link = self.claims.get(LTI + "resource_link")
        return str(link.get("id", "")) if isinstance(link, dict) else ""

    @property
    def ags(self) -> dict[str, Any]:
        found = self.claims.get(AGS)
        return found if isinstance(found, dict) else {}

    @property
    def deep_linking(self) -> dict[str, Any]:
        found = self.claims.get(DEEP_LINKING)
        return found if isinstance(found, dict) else {}


def _param(params: dict[str, str], name: str, limit: int = 2048) -> str:
    value = params.get(name, "")
    return value if isinstance(value, str) and len(value) <= limit else ""


def login_redirect(params: dict[str, str], registrations: Registrations, store: LtiStore, launch_url: str) -> str:
    """Where to send the user's browser for a login initiation: the platform's auth endpoint."""
    issuer, client_id = _param(params, "iss"), _param(params, "client_id")
    login_hint = _param(params, "login_hint")
    if not issuer or not login_hint:
        raise LaunchRefused("this is not an LTI 1.3 login: open the assignment from your course in the LMS")
    platform = registrations.find(issuer, client_id or None)
    if platform is None:
        raise LaunchRefused("this LMS (or this registration of the tool) is not one the course's grading service "
                            "knows: your instructor must add it to the service's LTI registrations")
    target = _param(params, "target_link_uri")
    state, nonce = store.begin(registrations.platforms.index(platform))
    query = {"scope": "openid", "response_type": "id_token", "response_mode": "form_post", "prompt": "none",
             "client_id": platform.client_id, "redirect_uri": launch_url, "login_hint": login_hint,
             "state": state, "nonce": nonce}
    if hint := _param(params, "lti_message_hint"):
        query["lti_message_hint"] = hint
    if target:  # the platform may check it against the registration; the launch does not depend on it
        query["target_link_uri"] = target
    glue = "&" if "?" in platform.login_url else "?"
    return platform.login_url + glue + urlencode(query)


def verify_launch(id_token: str, state: str, registrations: Registrations, store: LtiStore,
                  keys: PlatformKeys) -> Launch:
    """The launch, if every check holds (module docstring); LaunchRefused otherwise."""
    begun = store.check(state)
    if begun is None or begun[0] >= len(registrations.platforms):
        raise LaunchRefused("this launch has expired or was already used: open the assignment from your course "
                            "in the LMS again")
    platform, nonce = registrations.platforms[begun[0]], begun[1]
    if not id_token or len(id_token) > MAX_TOKEN_CHARS:
        raise LaunchRefused("this launch is not one the grading service can check: open the assignment from your "
                            "course in the LMS again")
    try:
        header = jwt.get_unverified_header(id_token)
        key = keys.key(platform.jwks_url, header.get("kid") if isinstance(header.get("kid"), str) else None)
        claims = jwt.decode(id_token, key, algorithms=["RS256"], audience=platform.client_id,
                            issuer=platform.issuer, leeway=LEEWAY_S,
                            options={"require": ["exp", "iat", "iss", "aud", "sub", "nonce"]})
    except KeyUnavailable as exc:
        raise LaunchRefused(f"this launch could not be checked: {exc}; try again in a minute") from None
    except jwt.PyJWTError as exc:
        raise LaunchRefused(f"this launch did not come from your LMS as it should ({_why(exc)}): open the "
                            "assignment from your course in the LMS again") from None
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audiences) > 1 and claims.get("azp") != platform.client_id:
        raise LaunchRefused("this launch was issued for another tool (its azp is not this tool's client id)")
    if claims.get("nonce") != nonce:
        raise LaunchRefused("this launch was not issued for this login (its nonce differs): open the assignment "
                            "from your course in the LMS again")
    if not store.use(nonce):  # only now, with the platform's signature on it: a forgery writes nothing
        raise LaunchRefused("this launch has expired or was already used: open the assignment from your course "
                            "in the LMS again")
    launch = Launch(platform=platform, claims=claims)
    if claims.get(LTI + "version") != "1.3.0":
        raise LaunchRefused("this LMS launched with another LTI version than 1.3.0")
    if launch.message_type not in (RESOURCE_LINK, DEEP_LINKING_REQUEST) or LTI + "deployment_id" not in claims:
        raise LaunchRefused(f"this tool takes assignment launches and deep linking, not "
                            f"{str(claims.get(LTI + 'message_type'))[:60]}")
    if not platform.deploys(launch.deployment_id):
        raise LaunchRefused("this deployment of the tool is not registered with the grading service: your "
                            "instructor must add its deployment id")
    if platform.contexts and launch.context_id not in platform.contexts:
        raise LaunchRefused("this course of your LMS is not one the grading service is set up for: open the "
                            "assignment from the course your instructor gave it in")
    if launch.message_type == RESOURCE_LINK and not launch.resource_link_id:
        raise LaunchRefused("this launch names no resource link, which LTI 1.3 requires")
    return launch


def _why(exc: jwt.PyJWTError) -> str:
    kinds = {jwt.ExpiredSignatureError: "it has expired", jwt.InvalidAudienceError: "it is for another tool",
             jwt.InvalidIssuerError: "another issuer signed it", jwt.ImmatureSignatureError: "it is not valid yet",
             jwt.InvalidSignatureError: "its signature does not hold",
             jwt.MissingRequiredClaimError: "a required claim is missing"}
    for kind, said in kinds.items():
        if isinstance(exc, kind):
            return said
    return "it is not a valid token"
