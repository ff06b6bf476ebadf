"""An LTI launch in a real headless Chromium, against the real `grade serve --lti` and the tests'
LTI platform (tests/lti_platform.py), both on loopback: the student opens the assignment from the
LMS (the tool's login, the platform's auto-posting form, the launch), lands on the hand-in page
signed in, hands in the reference notebook and reads 100 / 100, and the platform's gradebook has
the grade. And the same launch inside the LMS's own page, in a frame: the hand-in page may be
framed by a registered LMS origin and by no other."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from browser import Browser, chromium
from hand_in_servers import serving
from lti_platform import Platform
from test_lti import NOTEBOOK, registration, score_of, until

from grader.serve.running import RunningService, running_service

pytestmark = [pytest.mark.kernel, pytest.mark.skipif(
    chromium() is None, reason="chromium is not installed (scripts/install-chromium installs it)")]

SIGNED_IN = "!document.getElementById('signed').hidden && document.getElementById('student').textContent"


def course_page(request: Request) -> HTMLResponse:
    """The LMS's course page: the assignment in a frame (its `src`, the tool's login initiation)."""
    return HTMLResponse(f"<!doctype html><title>JAX101</title><iframe src='{request.query_params['src']}' "
                        "style='width:100%;height:600px'></iframe>")


@pytest.fixture(scope="module")
def lms() -> Iterator[str]:
    """The LMS's pages (where students open it: the registration's `origins`)."""
    with serving(Starlette(routes=[Route("/course", course_page)])) as url:
        yield url


@pytest.fixture(scope="module")
def platform() -> Iterator[Platform]:
    with Platform() as started:
        started.add_user("u-ada", name="Ada Lovelace", person_sourcedid="s100")
        yield started


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, platform: Platform, lms: str) -> Iterator[RunningService]:
    where = tmp_path_factory.mktemp("lti-browser")
    file = where / "platforms.toml"
    file.write_text(registration(platform) + f'origins = ["{lms}"]\n', encoding="utf-8")
    with running_service(where, ["s100"], options=["--no-sandbox", "--lti", str(file)]) as running:
        platform.register_tool(login_url=f"{running.url}/lti/login", redirect_uris=[f"{running.url}/lti/launch"],
                               jwks_url=f"{running.url}/lti/jwks")
        yield running


def launch_url(platform: Platform, **given: object) -> str:
    url, params = platform.initiate_launch("u-ada", "rl-1", **given)
    return f"{url}?{urlencode(params)}"


def test_a_student_opens_the_assignment_from_the_lms_hands_in_and_the_grade_reaches_it(
        service: RunningService, platform: Platform, tmp_path: Path) -> None:
    lineitem = platform.add_line_item("JAX, compiled", 100, "rl-1")
    notebook = tmp_path / "submit.ipynb"
    notebook.write_bytes(NOTEBOOK.read_bytes())
    with Browser(width=375) as browser:
        browser.open(launch_url(platform, lineitem=lineitem))
        assert browser.wait_for(SIGNED_IN, navigating=True) == "s100"
        assert browser.evaluate("location.href") == f"{service.url}/"  # the session left the address bar
        browser.set_files("#file", notebook)
        browser.evaluate("document.getElementById('send').click()")
        assert browser.wait_for("!document.getElementById('score').hidden && "
                                "document.getElementById('score').textContent", timeout=180) == "100 / 100"
        assert [line for line in browser.console() if "Content Security Policy" in line] == []
    until(lambda: score_of(platform, lineitem, "u-ada") == 100, "the grade in the LMS's gradebook", timeout=60)


def test_the_launch_works_in_the_lms_s_frame_and_no_other_site_may_frame_the_page(
        service: RunningService, platform: Platform, lms: str) -> None:
    with Browser(width=375) as browser:
        browser.open(f"{lms}/course?{urlencode({'src': launch_url(platform)})}")
        assert browser.in_frame(SIGNED_IN, timeout=60) == "s100"
    with serving(Starlette(routes=[Route("/course", course_page)])) as stranger, Browser(width=375) as browser:
        browser.open(f"{stranger}/course?{urlencode({'src': f'{service.url}/'})}")
        with pytest.raises((TimeoutError, RuntimeError, IndexError, KeyError)):
            browser.in_frame("document.getElementById('hand-in') !== null", timeout=5)
        assert any("frame-ancestors" in line for line in browser.console())
