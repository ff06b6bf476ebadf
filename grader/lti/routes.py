"""The LTI routes of the hand-in service (docs/lti.md):

    GET|POST /lti/login    the platform's login initiation: a redirect to its auth endpoint
    POST     /lti/launch   the launch (id_token, state): a student to the hand-in page, signed in;
                           an instructor to what the service sends this LMS; a deep-linking
                           request answered with the assignment as a graded resource link
    GET      /lti/jwks     the tool's public key
    GET      /lti/config   the addresses and scopes to register the tool with (JSON)

A student's launch opens a session (a token like the course's, kept hashed for twelve hours) and
answers with the hand-in page holding it: the student hands in as with a token of their own. No
cookie authenticates anything. Against a launch begun by someone else and posted from their page
in the student's browser (a login cross-site request, which would have the student hand in into
the other's account): a launch posted by a page of another site (its Origin) is refused; a browser
carrying a login's state cookie must carry this launch's; and only that cookie vouches for a
launch: without it (cookies blocked in the LMS's frame; a page on the LMS's own origin, which any
teacher there may publish, posting someone's launch) the page holds the session only as an offer,
and asks the student whether the roster id it signs in is theirs first, as for any link.
"""

from __future__ import annotations

import hashlib
import secrets
from urllib.parse import parse_qsl

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from grader.lti import pages
from grader.lti.ags import LINEITEM_SCOPE, READ_LINEITEM_SCOPE, SCORE_SCOPE
from grader.lti.identity import identify
from grader.lti.launch import DEEP_LINKING_REQUEST, LTI, Launch, LaunchRefused, login_redirect, verify_launch
from grader.lti.tool import LtiTool
from grader.serve.page import content_security_policy, hand_in_page
from grader.serve.security import origin_of

MAX_FORM_BYTES = 128 * 1024
LAUNCH_PATHS = ("/lti/login", "/lti/launch")
"""Posted by the LMS's pages, another site's: the Guard lets their Origin through; `launch` checks it."""
STATE_COOKIE = "__Host-lti_state_"
"""A login's cookie: this prefix and a digest of its state (one per login, so two tabs launching at
once each find their own). `__Host-`: a browser takes it only from this host itself, over https,
for path /, so a page of a sibling domain cannot plant one to vouch for a launch of its own."""
DL = "https://purl.imsglobal.org/spec/lti-dl/claim/"


def _tool(request: Request) -> LtiTool:
    return request.app.state.serving.lti


def _base(request: Request, tool: LtiTool) -> str:
    return (tool.origin or str(request.base_url)).rstrip("/")


async def _params(request: Request) -> dict[str, str]:
    """A login's or launch's parameters: the query, and a urlencoded body of bounded size."""
    params = dict(request.query_params)
    if request.method == "POST":
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM_BYTES:
                raise LaunchRefused("this launch is larger than any LMS sends")
        try:
            params.update(parse_qsl(body.decode("utf-8"), max_num_fields=50))
        except (UnicodeDecodeError, ValueError):
            raise LaunchRefused("this launch's form could not be read") from None
    return params


def _page(answer: tuple[str, str], status: int = 200) -> HTMLResponse:
    html, policy = answer
    return HTMLResponse(html, status_code=status,
                        headers={"Content-Security-Policy": policy, "Cache-Control": "no-store"})


def _refused(tool: LtiTool, sentence: str, status: int = 400) -> HTMLResponse:
    return _page(pages.refusal(sentence, tool.frame_origins()), status)


async def login(request: Request) -> Response:
    tool = _tool(request)
    try:
        params = await _params(request)
        target = await run_in_threadpool(login_redirect, params, tool.registrations, tool.store,
                                         _base(request, tool) + "/lti/launch")
    except LaunchRefused as exc:
        return _refused(tool, str(exc))
    answer = RedirectResponse(target, status_code=302, headers={"Cache-Control": "no-store"})
    state = dict(parse_qsl(target.split("?", 1)[1]))["state"]
    answer.set_cookie(_cookie(state), "1", max_age=600, path="/", secure=True, httponly=True, samesite="none")
    return answer


def _cookie(state: str) -> str:
    return STATE_COOKIE + hashlib.sha256(state.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _foreign(request: Request, tool: LtiTool) -> bool:
    """Whether a page of another site posted the launch (its Origin is neither a registered LMS's
    nor ours; none, or `null`, says nothing)."""
    origin = request.headers.get("origin")
    if origin is None or origin.strip() == "null":
        return False
    given = origin_of(origin)
    return given is None or (given not in tool.frame_origins() and given != origin_of(_base(request, tool)))


async def launch(request: Request) -> Response:
    tool = _tool(request)
    try:
        params = await _params(request)
        state = params.get("state", "")
        if _foreign(request, tool):
            raise LaunchRefused("this launch was sent by a page that is not your LMS's: open the assignment "
                                "from your course in the LMS")
        mine = _cookie(state) in request.cookies
        if not mine and any(name.startswith(STATE_COOKIE) for name in request.cookies):
            raise LaunchRefused("this launch was begun in another browser: open the assignment from your course "
                                "in the LMS again")
        # only this browser's own login cookie vouches for a launch: without it, it may be another
        # person's launch posted by a page of theirs (a login cross-site request; a page on the LMS's
        # own origin too, which any teacher there can publish), so the student is asked first
        vouched = mine
        checked = await run_in_threadpool(verify_launch, params.get("id_token", ""), state, tool.registrations,
                                          tool.store, tool.platform_keys)
    except LaunchRefused as exc:
        return _refused(tool, str(exc))
    if checked.message_type == DEEP_LINKING_REQUEST:
        return _deep_link(request, tool, checked)
    who = identify(checked.claims, checked.platform.match, set(tool.roster))
    if who.student is None and who.teaching and who.refusal is None:
        from grader.lti.outbox import counts, failures

        def staff_page() -> tuple[str, str]:
            course = (checked.platform.issuer, checked.platform.client_id, checked.context_id)
            return pages.teaching(who.name, tool.title, counts(tool.store, *course), failures(tool.store, *course),
                                  tool.frame_origins())

        return _page(await run_in_threadpool(staff_page))
    if who.student is None:
        return _refused(tool, who.refusal or "your LMS account is not a student of this course", 403)
    student = who.student
    bound = await run_in_threadpool(tool.store.bound_to, checked.platform.issuer, checked.platform.client_id,
                                    str(checked.claims["sub"]))
    if bound - {student}:  # the same LMS user as another roster student before: the roster or a claim changed
        return _refused(tool, "your LMS account was signed in as another student of this course's roster before: "
                              "ask your instructor to check the roster before you hand in here", 403)

    def sign_in() -> tuple[str, bool]:
        ags = checked.ags
        scopes = [s for s in ags.get("scope", []) if isinstance(s, str)] if isinstance(ags.get("scope"), list) else []
        lineitem, lineitems = ags.get("lineitem"), ags.get("lineitems")
        linked = False
        if scopes and SCORE_SCOPE in scopes:  # where the grade goes; no AGS, no passback
            _, linked = tool.store.link(issuer=checked.platform.issuer, client_id=checked.platform.client_id,
                                        deployment_id=checked.deployment_id, context_id=checked.context_id,
                                        sub=str(checked.claims["sub"]), student=student,
                                        lineitem=lineitem if isinstance(lineitem, str) else None,
                                        lineitems=lineitems if isinstance(lineitems, str) else None, scopes=scopes,
                                        resource_link_id=checked.resource_link_id)
        return tool.store.open_session(student), linked

    token, linked = await run_in_threadpool(sign_in)
    if linked:  # the grade they have is owed to this new link: the next rebuild's grades are sent
        request.app.state.serving.publisher.changed(student)
    nonce = secrets.token_urlsafe(16)  # not vouched for: the page offers the session, and asks first
    answer = HTMLResponse(hand_in_page(nonce=nonce, title=tool.assignment, session=token, offer=not vouched), headers={
        "Content-Security-Policy": content_security_policy(nonce, tool.frame_origins()), "Cache-Control": "no-store"})
    answer.delete_cookie(_cookie(state), path="/", secure=True, httponly=True, samesite="none")
    return answer


def _deep_link(request: Request, tool: LtiTool, checked: Launch) -> Response:
    """Answer a deep-linking request with the assignment: a resource link with its line item."""
    settings = checked.deep_linking
    return_url = settings.get("deep_link_return_url")
    if not isinstance(return_url, str) or not checked.platform.owns(return_url):
        return _refused(tool, "the LMS's deep-linking request names no address of its own to answer to: the "
                              "answer, signed by this tool, goes only to the platform's addresses (its origins)")
    accepts = settings.get("accept_types")
    if isinstance(accepts, list) and "ltiResourceLink" not in accepts:
        return _refused(tool, "the LMS asked for content this tool does not make (it makes an assignment link)")
    item = {"type": "ltiResourceLink", "title": tool.title, "url": _base(request, tool) + "/lti/launch",
            "lineItem": {"scoreMaximum": tool.max_score, "label": tool.title, "resourceId": tool.assignment,
                         "tag": "grade"}}
    claims = {"iss": checked.platform.client_id, "aud": checked.platform.issuer,
              "nonce": secrets.token_urlsafe(16),
              LTI + "deployment_id": checked.deployment_id, LTI + "message_type": "LtiDeepLinkingResponse",
              LTI + "version": "1.3.0", DL + "content_items": [item]}
    if "data" in settings:
        claims[DL + "data"] = settings["data"]
    signed = tool.key.sign(claims)
    return _page(pages.deep_linking_answer(return_url, signed, tool.title, tool.frame_origins(),
                                           origin_of(return_url) or "'none'"))


async def jwks(request: Request) -> Response:
    return JSONResponse(_tool(request).key.jwks(), headers={"Cache-Control": "max-age=300"})


async def config(request: Request) -> Response:
    """What an LMS's admin registers: the tool's addresses and the scopes it asks for."""
    tool = _tool(request)
    base = _base(request, tool)
    return JSONResponse({
        "title": tool.title, "description": f"Hand in {tool.assignment} and get the verdict at once",
        "oidc_initiation_url": base + "/lti/login", "target_link_uri": base + "/lti/launch",
        "redirect_uris": [base + "/lti/launch"], "jwks_url": base + "/lti/jwks",
        "deep_linking_url": base + "/lti/launch",
        "scopes": [SCORE_SCOPE, LINEITEM_SCOPE, READ_LINEITEM_SCOPE],
        "custom_fields": {"student_id": "the roster's id of the student, e.g. $Canvas.user.sisid"},
    })


def lti_routes() -> list[Route]:
    return [Route("/lti/login", login, methods=["GET", "POST"]), Route("/lti/launch", launch, methods=["POST"]),
            Route("/lti/jwks", jwks), Route("/lti/config", config)]
