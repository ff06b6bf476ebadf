"""The hand-in service as an LTI 1.3 tool, against an LTI platform of the tests' own that speaks the
standard's messages on a loopback port (tests/lti_platform.py): launches, deep linking, grades
passed back through the outbox, a platform that answers 429, 503 and Canvas's rate-limit 403, and
(with kernels) a course that launches, hands in with the real `grade serve` and finds the grade
in the platform's gradebook, also after the service was stopped with the post still pending.

The routes run on a real server (uvicorn on loopback) with the real LTI tool, job table and
gradebook; only the grading loop is a stand-in here (grades are given to the tool as a rebuild
gives them), except in the tests marked kernel."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

import httpx
import jwt
import pytest

from hand_in_servers import serving as served_on_loopback
from lti_platform import LaunchFailed, Platform, _auto_post_form

from grader import assignment
from grader.lti.registration import read_registrations
from grader.lti.store import LtiStore
from grader.lti.keys import tool_key
from grader.lti.tool import LtiTool
from grader.report import Isolation, Report, SubmissionRef, environment
from grader.serve.app import Serving, build_app
from grader.serve.jobs import JobTable
from grader.serve.limits import RateLimit
from grader.serve.tokens import Tokens

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK = REPO / "solutions" / "ch2-jit.ipynb"
ROSTER = ["s100", "s200", "s300"]


def registration(platform: Platform, match_custom: bool = False) -> str:
    extra = 'match = ["custom.student_id", "lis.person_sourcedid"]\n' if match_custom else ""
    return ("[[platform]]\nlms = \"other\"\n"
            f'issuer = "{platform.issuer}"\nclient_id = "{platform.client_id}"\n'
            f'deployment_ids = ["{platform.deployment_id}"]\nlogin_url = "{platform.url("/auth")}"\n'
            f'token_url = "{platform.token_url}"\njwks_url = "{platform.url("/jwks")}"\n{extra}')


def until(condition: Callable[[], object], what: str, timeout: float = 60.0) -> object:
    """Poll `condition` until it holds (its value), failing with `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.02)
    return found


LAUNCHED = re.compile(r"<script type='application/json' id='launch' nonce='[^']+'>(.*?)</script>")


def launched(answer: httpx.Response) -> dict:
    """What a student's launch answers the page with: its session (`token`) and whether the page only
    offers it (`offer`: nothing vouched for the launch, so the page asks the student first)."""
    assert answer.status_code == 200, answer.text
    found = LAUNCHED.search(answer.text)
    assert found, answer.text[:500]
    return json.loads(found.group(1))


def session_token(answer: httpx.Response) -> str:
    """The hand-in token a student's launch signs them in with, their browser's login cookie vouching."""
    given = launched(answer)
    assert not given["offer"], "the launch was only offered"
    return given["token"]


def report(student: str, score: float, final: float | None = None) -> Report:
    return Report(assignment="ch2-jit", submission=SubmissionRef(path="x.ipynb", sha256="0" * 64, kind="notebook"),
                  student=student, status="graded", score=score, max_score=100, seed=1, duration_s=1,
                  environment=environment(), exercises=[], final_score=final,
                  isolation=Isolation(sandboxed=False, layers=[]))


@dataclass
class Dispatcher:
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def wake(self) -> None: ...
    def alive(self) -> bool:
        return True


@dataclass
class Publisher:
    changed_for: list = field(default_factory=list)

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def changed(self, student: str | None = None) -> None:
        self.changed_for.append(student)


@dataclass
class Course:
    """A platform, the tool registered with it, served on loopback."""

    platform: Platform
    tool: LtiTool
    url: str
    serving: Serving

    def launch(self, browser: httpx.Client, user: str, **given) -> httpx.Response:
        return self.platform.launch(browser, user, given.pop("resource_link_id", "rl-1"), **given)

    def launch_form(self, http: httpx.Client, user: str, **given) -> tuple[str, dict[str, str]]:
        """A login begun with `http`, the platform's answer read: the form a browser would post, not posted."""
        url, params = self.platform.initiate_launch(user, given.pop("resource_link_id", "rl-1"), **given)
        login = http.get(url, params=params)
        assert login.status_code == 302, login.text
        return _auto_post_form(httpx.get(login.headers["location"], timeout=30, trust_env=False).text)


@pytest.fixture
def platform() -> Iterator[Platform]:
    with Platform() as started:
        yield started


@contextlib.contextmanager
def made_course(tmp_path: Path, platform: Platform, registered: str | None = None) -> Iterator[Course]:
    """The app with its LTI tool for `platform` (registered as `registered` says, by default the
    plain registration), served on loopback, with three users on the platform."""
    out = tmp_path / "OUT"
    out.mkdir()
    file = tmp_path / "platforms.toml"
    file.write_text(registered or registration(platform), encoding="utf-8")
    book = out / "gradebook.sqlite"
    spec = assignment.load("ch2-jit").spec
    tool = LtiTool(registrations=read_registrations(file), key=tool_key(out), store=LtiStore(book),
                   roster=frozenset(ROSTER), assignment=spec.id, title=spec.title, max_score=spec.max_score,
                   first_wait_s=0.05)
    jobs = JobTable(book)
    serving = Serving(out_dir=out, assignment="ch2-jit", assignment_folder=assignment.resolve("ch2-jit"), jobs=jobs,
                      tokens=Tokens({}, ROSTER), service=Dispatcher(), publisher=Publisher(),  # type: ignore[arg-type]
                      rate=RateLimit(per_minute=600, burst=50), lti=tool)
    try:
        with served_on_loopback(build_app(serving, origins=[], any_host=False)) as url:
            platform.register_tool(login_url=f"{url}/lti/login", redirect_uris=[f"{url}/lti/launch"],
                                   jwks_url=f"{url}/lti/jwks")
            platform.add_user("u-ada", name="Ada", person_sourcedid="s100")
            platform.add_user("u-bo", name="Bo", email="s200")
            platform.add_user("u-teach", name="Prof", roles="instructor")
            yield Course(platform=platform, tool=tool, url=url, serving=serving)
    finally:
        jobs.close_all()


@pytest.fixture
def course(tmp_path: Path, platform: Platform) -> Iterator[Course]:
    with made_course(tmp_path, platform) as made:
        yield made


def browser(course: Course) -> httpx.Client:
    return httpx.Client(base_url=course.url, trust_env=False, timeout=30)


def score_of(platform: Platform, lineitem: str, user: str) -> float | None:
    return platform.gradebook.get(lineitem, {}).get(user, {}).get("scoreGiven")


def outbox_rows(book: Path, where: str) -> int:
    with contextlib.closing(sqlite3.connect(book)) as db:
        return db.execute(f"SELECT count(*) FROM lti_outbox WHERE {where}").fetchone()[0]


def posts(platform: Platform, path_part: str) -> list:
    return [r for r in platform.requests if r.method == "POST" and path_part in r.path]


def test_a_student_launches_signed_in_and_the_policy_s_grade_reaches_the_platform(course: Course) -> None:
    lineitem = course.platform.add_line_item("JAX, compiled", 100, "rl-1")
    with browser(course) as http:
        token = session_token(course.launch(http, "u-ada", lineitem=lineitem))
        mine = http.get("/api/hand-ins", headers={"Authorization": f"Bearer {token}"})
        assert mine.status_code == 200 and mine.json()["student"] == "s100"
        page = http.get("/")
        assert course.platform.base_url in page.headers["content-security-policy"]  # the LMS may frame it
    assert course.serving.publisher.changed_for == ["s100"]  # the grade they have is owed to the new link
    course.tool.grades_changed({"s100": report("s100", 80, final=72), "s300": report("s300", 50)})
    until(lambda: score_of(course.platform, lineitem, "u-ada") == 72, "the late policy's grade in the gradebook")
    [posted] = course.platform.scores
    assert posted.body["scoreMaximum"] == 100 and posted.body["gradingProgress"] == "FullyGraded"
    course.tool.grades_changed({"s100": report("s100", 80, final=72)})  # the same grade: not sent again
    course.tool.grades_changed({"s100": report("s100", 95)})
    until(lambda: score_of(course.platform, lineitem, "u-ada") == 95, "the new grade")
    assert len(course.platform.scores) == 2
    assert len(posts(course.platform, "/token")) == 1  # the token is kept between posts


def test_a_platform_that_answers_503_429_and_canvas_s_403_gets_the_grade_later_with_doubling_waits(
        course: Course) -> None:
    lineitem = course.platform.add_line_item("JAX, compiled", 100, "rl-1")
    with browser(course) as http:
        session_token(course.launch(http, "u-ada", lineitem=lineitem))
    course.platform.fail_next_scores(3, status=503)
    course.tool.grades_changed({"s100": report("s100", 64)})
    until(lambda: score_of(course.platform, lineitem, "u-ada") == 64, "the grade after three 503s")
    tries = [r.time for r in posts(course.platform, "/scores")]
    assert len(tries) == 4
    gaps = [b - a for a, b in zip(tries, tries[1:])]
    assert gaps[0] >= 0.05 and gaps[1] >= 0.1 and gaps[2] >= 0.2  # 0.05 s, doubled, doubled
    course.platform.fail_next_scores(1, canvas_rate_limit=True)
    course.tool.grades_changed({"s100": report("s100", 70)})
    until(lambda: score_of(course.platform, lineitem, "u-ada") == 70, "the grade after Canvas's rate limit")
    course.platform.fail_next_scores(1, status=429, retry_after=1)
    course.tool.grades_changed({"s100": report("s100", 75)})
    until(lambda: score_of(course.platform, lineitem, "u-ada") == 75, "the grade after a 429")
    late = [r.time for r in posts(course.platform, "/scores")][-2:]
    assert late[1] - late[0] >= 0.95  # the platform's Retry-After, longer than the doubling wait
    course.platform.expire_tokens()  # a 401: a new token, then the post
    course.tool.grades_changed({"s100": report("s100", 76)})
    until(lambda: score_of(course.platform, lineitem, "u-ada") == 76, "the grade after the token expired")


def test_a_grade_the_platform_refuses_is_kept_with_its_words_for_the_instructor(course: Course) -> None:
    lineitem = course.platform.add_line_item("JAX, compiled", 100, "rl-1")
    with browser(course) as http:
        session_token(course.launch(http, "u-bo", lineitem=lineitem))
        course.platform.add_user("u-bo", name="Bo", roles="instructor")  # no longer a student there: 422
        course.tool.grades_changed({"s200": report("s200", 88)})
        until(lambda: outbox_rows(course.serving.out_dir / "gradebook.sqlite", "state = 'failed'"),
              "the refusal recorded")
        staff = course.launch(http, "u-teach")
    assert staff.status_code == 200
    assert "refused: 1" in staff.text and "s200" in staff.text and "not a student" in staff.text
    assert len(posts(course.platform, "/scores")) == 1  # refused for good: not retried
    [notice] = course.tool.notices()  # the class page's line, at the next rebuild
    assert notice.startswith("the LMS refused 1 grade(s) of 1 student(s)")


def test_the_class_page_says_what_the_lms_refused(tmp_path: Path, monkeypatch) -> None:
    """The instructor's main view: a rebuild by the service puts the LTI side's line under the class
    page's title, as text."""
    from test_batch_life import OPTIONS, Fake, a_class

    from grader.batch.run import grade_many
    from grader.outputs.names import OutputFolder
    from grader.serve.publish import publish

    monkeypatch.setattr("grader.batch.run.executor_for", lambda jobs, scheduler: Fake())
    out = tmp_path / "out"
    grade_many([a_class(tmp_path / "subs", "alice")], out, OPTIONS)
    publish(out, set(), ["the LMS refused 2 grade(s) of 1 student(s): <b>open</b> it as an instructor"])
    page = OutputFolder(out).class_page.read_text(encoding="utf-8")
    assert "the LMS refused 2 grade(s) of 1 student(s): &lt;b&gt;open&lt;/b&gt;" in page


def test_without_a_line_item_the_tool_finds_or_makes_its_own_once(course: Course) -> None:
    with browser(course) as http:
        session_token(course.launch(http, "u-ada"))  # AGS with the container only (Brightspace, Blackboard)
        session_token(course.launch(http, "u-bo"))
    course.tool.grades_changed({"s100": report("s100", 90), "s200": report("s200", 40)})
    until(lambda: len(course.platform.scores) == 2, "both grades")
    [item] = course.platform.line_items
    assert (item.resource_id, item.score_maximum, item.label) == ("ch2-jit", 100, course.tool.title)
    assert {s.line_item for s in course.platform.scores} == {item.url}


def test_deep_linking_answers_with_the_assignment_as_a_graded_link(course: Course) -> None:
    with browser(course) as http:
        answer = course.platform.launch(http, "u-teach", message_type="LtiDeepLinkingRequest")
        assert answer.status_code == 200
        policy = answer.headers["content-security-policy"]
        assert f"form-action {course.platform.base_url}" in policy
        action, fields = _auto_post_form(answer.text)
        returned = http.post(action, data=fields)
    assert returned.status_code == 200, returned.text
    [item] = course.platform.content_items
    assert item["type"] == "ltiResourceLink" and item["url"] == f"{course.url}/lti/launch"
    assert item["lineItem"] == {"scoreMaximum": 100, "label": course.tool.title, "resourceId": "ch2-jit",
                                "tag": "grade"}
    assert [i.resource_id for i in course.platform.line_items] == ["ch2-jit"]


def test_launches_the_tool_must_not_take(course: Course, tmp_path: Path) -> None:
    course.platform.add_user("u-eve", name="Eve", email="eve@example.edu")
    course.platform.add_user("u-two", email="s300", person_sourcedid="s100")  # two roster ids: ambiguous
    with browser(course) as http:
        nobody = course.launch(http, "u-eve")
        assert nobody.status_code == 403 and "not on this course&#x27;s roster" in nobody.text
        assert "more than one student" in course.launch(http, "u-two").text
    with browser(course) as http:  # a browser with no login's cookie
        # replayed: the same id_token and state posted again (no cookie, no Origin: the student confirms)
        action, fields = course.launch_form(http, "u-ada")
        assert launched(http.post(action, data=fields))["offer"]  # no cookie vouches: only offered
        again = http.post(action, data=fields)
        assert again.status_code == 400 and "already used" in again.text
        # posted by another site's page
        action, fields = course.launch_form(http, "u-ada")
        forged = http.post(action, data=fields, headers={"Origin": "https://evil.example"})
        assert forged.status_code == 400 and "not your LMS" in forged.text
        # begun in another browser: this one carries another login's state cookie, not this one's
        url, params = course.platform.initiate_launch("u-ada", "rl-1")
        mine = http.get(url, params=params)
        [(name, value)] = mine.cookies.items()
        with httpx.Client(trust_env=False, timeout=30) as other:
            action, fields = course.launch_form(other, "u-bo")
        crossed = http.post(action, data=fields, headers={"Cookie": f"{name}={value}"})
        assert crossed.status_code == 400 and "another browser" in crossed.text
        # two tabs launching at once: each finds its own cookie
        first_url, first = course.platform.initiate_launch("u-ada", "rl-1")
        second_url, second = course.platform.initiate_launch("u-ada", "rl-1")
        logins = [http.get(first_url, params=first), http.get(second_url, params=second)]
        cookies = "; ".join(f"{n}={v}" for login in logins for n, v in login.cookies.items())
        for login in logins:
            form = _auto_post_form(httpx.get(login.headers["location"], timeout=30, trust_env=False).text)
            assert not launched(http.post(form[0], data=form[1], headers={"Cookie": cookies}))["offer"]
        # a login from an issuer the service does not know
        stranger = http.get("/lti/login", params={"iss": "https://lms.elsewhere", "login_hint": "x"})
        assert stranger.status_code == 400 and "not one the course" in stranger.text
        # a token signed by another key than the platform publishes
        forged_token = jwt.encode({"iss": course.platform.issuer, "aud": course.platform.client_id, "sub": "u-ada",
                                   "exp": time.time() + 60, "iat": time.time(), "nonce": "n"},
                                  __import__("cryptography.hazmat.primitives.asymmetric.rsa", fromlist=["rsa"])
                                  .generate_private_key(public_exponent=65537, key_size=2048),
                                  algorithm="RS256", headers={"kid": course.platform.kid})
        url, params = course.platform.initiate_launch("u-ada", "rl-1")
        state = dict(httpx.QueryParams(httpx.URL(http.get(url, params=params).headers["location"]).query))["state"]
        unsigned = http.post("/lti/launch", data={"id_token": forged_token, "state": state})
        assert unsigned.status_code == 400 and "signature does not hold" in unsigned.text
    with pytest.raises(LaunchFailed):  # the platform refuses a redirect URI it does not know
        course.platform.register_tool(login_url=f"{course.url}/lti/login", redirect_uris=["https://other/launch"],
                                      jwks_url=f"{course.url}/lti/jwks")
        with browser(course) as http:
            course.launch(http, "u-ada")


def test_the_tool_publishes_its_key_and_the_addresses_to_register(course: Course) -> None:
    with browser(course) as http:
        keys = http.get("/lti/jwks").json()["keys"]
        config = http.get("/lti/config").json()
    assert [k["kid"] for k in keys] == [course.tool.key.kid] and "d" not in keys[0]  # no private part
    assert config["oidc_initiation_url"] == f"{course.url}/lti/login"
    assert config["redirect_uris"] == [f"{course.url}/lti/launch"] and config["jwks_url"] == f"{course.url}/lti/jwks"


# ------------------------------------------------------------------ the real service, with kernels


@pytest.mark.kernel
def test_a_course_launches_hands_in_and_finds_the_grade_in_its_lms_also_across_a_restart(
        tmp_path: Path, platform: Platform) -> None:
    """The LMS's platform fails every score post (503) while the service grades the hand-in; the
    service is stopped with the post pending, the platform recovers, the service starts again and
    sends it: the grade arrives, once."""
    from grader.serve.running import running_service

    file = tmp_path / "platforms.toml"
    file.write_text(registration(platform), encoding="utf-8")
    platform.add_user("u-ada", name="Ada", person_sourcedid="s100")
    lineitem = platform.add_line_item("JAX, compiled", 100, "rl-1")
    platform.fail_next_scores(10_000, status=503)
    options = ["--no-sandbox", "--lti", str(file)]
    with running_service(tmp_path / "course", ["s100", "s200"], options=options) as service:
        platform.register_tool(login_url=f"{service.url}/lti/login", redirect_uris=[f"{service.url}/lti/launch"],
                               jwks_url=f"{service.url}/lti/jwks")
        with httpx.Client(base_url=service.url, trust_env=False, timeout=60) as http:
            token = session_token(platform.launch(http, "u-ada", "rl-1", lineitem=lineitem))
            auth = {"Authorization": f"Bearer {token}"}
            handed = http.post("/api/hand-ins", headers=auth,
                               files={"file": ("ch2-jit.ipynb", NOTEBOOK.read_bytes())})
            assert handed.status_code == 202, handed.text
            job = handed.json()["id"]
            graded = until(lambda: (j := http.get(f"/api/hand-ins/{job}", headers=auth).json())["state"] == "graded"
                           and j, "the hand-in graded", timeout=180)
            assert graded["score"] == 100
        book = service.out / "gradebook.sqlite"

        until(lambda: outbox_rows(book, "attempts > 0 AND status = 503"), "a post refused with 503", timeout=60)
    assert score_of(platform, lineitem, "u-ada") is None
    platform.fail_next_scores(0)
    with running_service(tmp_path / "course", ["s100", "s200"], options=options):
        until(lambda: score_of(platform, lineitem, "u-ada") == 100, "the pending grade after the restart", 60)
    [accepted] = platform.scores
    assert accepted.body["scoreGiven"] == 100 and accepted.user_id == "u-ada"


def test_a_session_ends_with_the_roster_and_a_login_writes_nothing(course: Course) -> None:
    with browser(course) as http:
        token = session_token(course.launch(http, "u-ada"))
        auth = {"Authorization": f"Bearer {token}"}
        assert http.get("/api/hand-ins", headers=auth).status_code == 200
        course.tool.roster = frozenset({"s200"})  # the service restarted with s100 taken off the roster
        assert http.get("/api/hand-ins", headers=auth).status_code == 401
        book = course.serving.out_dir / "gradebook.sqlite"
        before = book.stat().st_mtime_ns, rows(book, "SELECT count(*) FROM lti_used")
        params = {"iss": course.platform.issuer, "login_hint": "x", "client_id": course.platform.client_id}
        assert {http.get("/lti/login", params=params).status_code for _ in range(50)} == {302}
        assert (book.stat().st_mtime_ns, rows(book, "SELECT count(*) FROM lti_used")) == before


# ------------------------------------------------------------------ what an attack on the tool found


@pytest.mark.parametrize("origin", ["null", None, "platform"])
def test_a_launch_its_browser_s_cookie_does_not_vouch_for_is_only_offered(course: Course, origin: str | None) -> None:
    """A student begins a launch of their own, keeps the platform's form and has a page post it
    from a classmate's browser (Origin null from a sandboxed frame, none, or a page on the LMS's own
    origin, which any teacher there may publish): signed in at once, the classmate would hand in
    into the other's account. Only the browser's own login cookie vouches for a launch; without it
    the page holds the session as an offer, taken once the student says the roster id is theirs
    (tests/test_hand_in_page.py)."""
    sent = {"platform": course.platform.base_url}.get(origin or "", origin)
    with browser(course) as attacker:
        action, fields = course.launch_form(attacker, "u-ada")
    with browser(course) as victim:
        answer = victim.post(action, data=fields, headers={"Origin": sent} if sent else {})
    assert launched(answer)["offer"] and "location" not in answer.headers
    assert "frame-ancestors " + course.platform.base_url in answer.headers["content-security-policy"]
    with browser(course) as http:  # the browser that began the login carries its cookie: signed in at once
        assert session_token(course.launch(http, "u-ada"))


def test_launches_of_another_course_of_the_platform_and_observers_get_nothing(tmp_path: Path,
                                                                              platform: Platform) -> None:
    """Any teacher of a Moodle site can place the tool in a course of theirs: a registration pinned
    to its course refuses their launches; a parent (Canvas's observer, membership#Mentor) is no staff."""
    pinned = registration(platform, match_custom=True) + 'contexts = ["course-1"]\n'
    with made_course(tmp_path, platform, pinned) as course:
        platform.add_user("u-mallory", name="Mallory", custom={"student_id": "s100"})
        platform.add_user("u-parent", name="A parent", roles=["http://purl.imsglobal.org/vocab/lis/v2/membership#Mentor"])
        with browser(course) as http:
            assert session_token(course.launch(http, "u-mallory")) and True  # in the course: custom counts
            platform.context = {"id": "someone-elses-sandbox", "label": "X", "title": "a sandbox"}
            elsewhere = course.launch(http, "u-mallory")
            assert elsewhere.status_code == 400 and "not one the grading service is set up for" in elsewhere.text
            platform.context = {"id": "course-1", "label": "JAX101", "title": "JAX, compiled"}
            parent = course.launch(http, "u-parent")
            assert parent.status_code == 403 and "grading service" not in parent.text.split("<h1>")[1][:40]


def test_a_line_item_elsewhere_is_refused_and_one_broken_row_holds_up_no_other(course: Course) -> None:
    """The access token goes only to the platform's own addresses; a line item httpx cannot even
    parse is that row's failure, not the outbox thread's end."""
    seen: list[str | None] = []

    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def anything(request):
        seen.append(request.headers.get("authorization"))
        return JSONResponse({})

    good = course.platform.add_line_item("JAX, compiled", 100, "rl-1")
    with served_on_loopback(Starlette(routes=[Route("/{p:path}", anything, methods=["GET", "POST"])])) as elsewhere:
        course.platform.add_user("u-cy", person_sourcedid="s300")
        with browser(course) as http:
            session_token(course.launch(http, "u-ada", lineitem=f"{elsewhere}/internal/admin"))
            session_token(course.launch(http, "u-cy", lineitem="http://[::1"))
            session_token(course.launch(http, "u-bo", lineitem=good))
        course.tool.grades_changed({"s100": report("s100", 50), "s200": report("s200", 90), "s300": report("s300", 7)})
        until(lambda: score_of(course.platform, good, "u-bo") == 90, "Bo's grade, behind two bad rows")
        book = course.serving.out_dir / "gradebook.sqlite"
        until(lambda: outbox_rows(book, "state = 'failed'") == 2, "both bad rows refused")
    assert seen == []  # nothing, and no token, reached the other origin
    [why] = rows(book, "SELECT error FROM lti_outbox o JOIN lti_links l ON l.id = o.link WHERE l.student = 's100'")
    assert elsewhere in why[0] and "origins" in why[0]


def test_a_huge_or_dripping_answer_is_read_within_bounds(tmp_path: Path, platform: Platform, monkeypatch) -> None:
    """A platform (its address registered) answering 64 MiB, or a byte every half second: the tool
    reads at most MAX_ANSWER_BYTES, for at most ANSWER_S, and the other grades go on."""
    import asyncio

    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    from grader.lti import ags

    monkeypatch.setattr(ags, "ANSWER_S", 1.0)
    sent = {"huge": 0, "drip": 0}

    async def huge(request):
        async def chunks():
            for _ in range(64 * 1024):
                if await request.is_disconnected():  # the tool stopped reading and hung up
                    return
                sent["huge"] += 1024
                yield b"x" * 1024
        return StreamingResponse(chunks(), media_type="application/json")

    async def drip(request):
        async def chunks():
            for _ in range(600):
                sent["drip"] += 1
                yield b" "
                await asyncio.sleep(0.5)
        return StreamingResponse(chunks(), media_type="application/json")

    app = Starlette(routes=[Route("/huge/scores", huge, methods=["POST"]), Route("/drip/scores", drip, methods=["POST"])])
    with served_on_loopback(app) as other:
        registered = registration(platform) + f'origins = ["{other}"]\n'
        with made_course(tmp_path, platform, registered) as course:
            good = platform.add_line_item("JAX, compiled", 100, "rl-1")
            platform.add_user("u-cy", person_sourcedid="s300")
            with browser(course) as http:
                session_token(course.launch(http, "u-ada", lineitem=f"{other}/huge"))
                session_token(course.launch(http, "u-cy", lineitem=f"{other}/drip"))
                session_token(course.launch(http, "u-bo", lineitem=good))
            started = time.monotonic()
            course.tool.grades_changed({"s100": report("s100", 5), "s200": report("s200", 90),
                                        "s300": report("s300", 6)})
            until(lambda: score_of(platform, good, "u-bo") == 90, "Bo's grade beside the bad answers", timeout=30)
            assert time.monotonic() - started < 20
            book = course.serving.out_dir / "gradebook.sqlite"
            until(lambda: outbox_rows(book, "attempts > 0") == 2, "both bad answers given up on for now")
    assert sent["huge"] <= 8 * 2**20


def test_forged_launches_do_not_make_the_service_hammer_a_failing_key_set(tmp_path: Path, platform: Platform) -> None:
    import base64
    import json

    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    hits: list[int] = []

    async def jwks(request):
        hits.append(1)
        return Response("down", status_code=503)

    def b64(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    with served_on_loopback(Starlette(routes=[Route("/jwks", jwks)])) as broken:
        registered = registration(platform).replace(f'jwks_url = "{platform.url("/jwks")}"', f'jwks_url = "{broken}/jwks"')
        with made_course(tmp_path, platform, registered) as course, browser(course) as http:
            for number in range(20):
                login = http.get("/lti/login", params={"iss": platform.issuer, "login_hint": "x",
                                                       "client_id": platform.client_id})
                state = dict(httpx.URL(login.headers["location"]).params)["state"]
                forged = f"{b64({'alg': 'RS256', 'kid': f'k{number}'})}.{b64({'sub': 'x'})}.AAAA"
                answer = http.post("/lti/launch", data={"id_token": forged, "state": state})
                assert answer.status_code == 400
    assert len(hits) == 1


def rows(book: Path, sql: str) -> list:
    with contextlib.closing(sqlite3.connect(book)) as db:
        return db.execute(sql).fetchall()


def test_a_new_line_item_for_a_link_gets_the_grade_again_and_a_relaunch_rebuilds_nothing(course: Course) -> None:
    first = course.platform.add_line_item("JAX, compiled", 100, "rl-1")
    with browser(course) as http:
        session_token(course.launch(http, "u-ada", lineitem=first))
        session_token(course.launch(http, "u-ada", lineitem=first))
        assert course.serving.publisher.changed_for == ["s100"]  # the same link again: no rebuild asked
        course.tool.grades_changed({"s100": report("s100", 61)})
        until(lambda: score_of(course.platform, first, "u-ada") == 61, "the grade on the first line item")
        second = course.platform.add_line_item("JAX, compiled (again)", 100, "rl-1")  # the column made anew
        session_token(course.launch(http, "u-ada", lineitem=second))
    assert course.serving.publisher.changed_for == ["s100", "s100"]
    course.tool.grades_changed({"s100": report("s100", 61)})  # what the rebuild it asked for gives
    until(lambda: score_of(course.platform, second, "u-ada") == 61, "the same grade on the new line item")


# ------------------------------------------------------------ what a second attack on the tool found


def test_grades_stop_for_a_course_the_registration_no_longer_admits(tmp_path: Path, platform: Platform) -> None:
    """A teacher placed the tool in a course of theirs before the instructor pinned `contexts`, and
    a student of ours launched there; pinned (and the service restarted), that course's gradebook
    gets no more of their grades."""
    from grader.lti.registration import Registrations

    with made_course(tmp_path, platform) as course:
        platform.context = {"id": "rogue-course", "label": "X", "title": "someone else's course"}
        rogue = platform.add_line_item("copy", 100, "rl-rogue")
        with browser(course) as http:
            session_token(course.launch(http, "u-ada", resource_link_id="rl-rogue", lineitem=rogue))
        old = course.tool.registrations.platforms[0]
        pinned = Registrations(platforms=(old.model_copy(update={"contexts": ("course-1",)}),))
        course.tool.registrations = course.tool.poster.registrations = pinned
        course.tool.grades_changed({"s100": report("s100", 91)})
        book = course.serving.out_dir / "gradebook.sqlite"
        until(lambda: outbox_rows(book, "state = 'failed'"), "the rogue course's row refused")
    assert score_of(platform, rogue, "u-ada") is None
    [why] = rows(book, "SELECT error FROM lti_outbox")
    assert "no longer registered" in why[0]


def test_forged_launches_write_nothing_and_a_planted_cookie_vouches_for_nothing(course: Course) -> None:
    with browser(course) as http:
        for _ in range(10):  # a state is free to ask for; a token that does not check out costs no row
            action, fields = course.launch_form(http, "u-ada")
            assert http.post(action, data={"state": fields["state"], "id_token": "x.y.z"}).status_code == 400
    assert rows(course.serving.out_dir / "gradebook.sqlite", "SELECT count(*) FROM lti_used") == [(0,)]
    with browser(course) as mallory, browser(course) as victim:
        action, fields = course.launch_form(mallory, "u-bo")
        planted = "lti_state_" + hashlib.sha256(fields["state"].encode()).hexdigest()[:16]
        answer = victim.post(action, data=fields, headers={"Origin": "null", "Cookie": f"{planted}=1"})
    assert launched(answer)["offer"]  # only offered


def test_a_platform_user_id_is_no_roster_id_unless_the_registration_says_so(course: Course) -> None:
    """A roster of the school's student numbers; Mallory has no SIS id, and her platform user id
    (`sub`) is 1002, another student's number: she is not that student. And a platform user linked
    to one roster student is not signed in as another later."""
    course.tool.roster = frozenset({"1001", "1002", "s100"})
    course.platform.add_user("1002", name="Mallory", email="mallory@example.edu")
    with browser(course) as http:
        assert course.launch(http, "1002").status_code == 403
        session_token(course.launch(http, "u-ada"))  # s100, linked
        course.platform.add_user("u-ada", name="Ada", person_sourcedid="1001")  # the LMS now says 1001
        moved = course.launch(http, "u-ada")
    assert moved.status_code == 403 and "another student of this course&#x27;s roster" in moved.text


def test_the_deep_linking_answer_goes_only_to_the_platform(course: Course) -> None:
    from grader.lti.launch import DEEP_LINKING, LTI

    with browser(course) as http:
        login = http.get("/lti/login", params={"iss": course.platform.issuer, "login_hint": "x",
                                               "client_id": course.platform.client_id})
        query = dict(httpx.URL(login.headers["location"]).params)
        now = int(time.time())
        claims = {"iss": course.platform.issuer, "aud": course.platform.client_id, "sub": "u-teach", "iat": now,
                  "exp": now + 300, "nonce": query["nonce"], LTI + "message_type": "LtiDeepLinkingRequest",
                  LTI + "version": "1.3.0", LTI + "deployment_id": course.platform.deployment_id,
                  LTI + "roles": ["http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"],
                  DEEP_LINKING: {"deep_link_return_url": "http://evil.example.net/collect",
                                 "accept_types": ["ltiResourceLink"]}}
        token = jwt.encode(claims, course.platform._key, algorithm="RS256", headers={"kid": course.platform.kid})
        answer = http.post("/lti/launch", data={"state": query["state"], "id_token": token})
    assert answer.status_code == 400 and "evil.example.net" not in answer.text
