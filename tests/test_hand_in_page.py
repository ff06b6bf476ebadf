"""The hand-in page in a real headless Chromium at a phone's 375 px, against the real hand-in
service (`grade serve` on a loopback port): the token from the link's fragment (kept for the tab,
gone from the address bar), the reference notebook chosen in the file input and handed in, the score
and the feedback page in a frame where nothing runs; a wrong token's sentence. Markup in a sentence
stays text: asked of a stand-in that speaks the same API (tests/hand_in_servers.py)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from browser import Browser, chromium
from hand_in_servers import RealService, StandIn, real_service, refusal, serving

pytestmark = [pytest.mark.kernel, pytest.mark.skipif(
    chromium() is None, reason="chromium is not installed (scripts/install-chromium installs it)")]

SIGNED_IN = "!document.getElementById('signed').hidden"
SHOWN = "(id) => !document.getElementById(id).hidden && document.getElementById(id).textContent"


def _shown(element: str) -> str:
    return f"({SHOWN})({json.dumps(element)})"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealService]:
    with real_service(tmp_path_factory.mktemp("service"), ("alice", "bob")) as running:
        yield running


def yes(browser: Browser) -> None:
    """Say "Yes, that is me" to a link's offer, as a person does: once the button answers (it waits a
    moment, so that a click aimed at something else, the instant it appears, says nothing)."""
    browser.wait_for("!document.getElementById('offer-yes').disabled")
    browser.evaluate("document.getElementById('offer-yes').click()")


def _no_sideways_scrolling(browser: Browser) -> None:
    layout = browser.evaluate("({inner: innerWidth, wide: document.documentElement.scrollWidth})")
    assert layout == {"inner": 375, "wide": 375}, layout


def test_hand_in_from_a_phone_and_read_the_feedback(service: RealService, tmp_path: Path,
                                                    repo_root: Path) -> None:
    token = service.tokens["alice"]
    notebook = tmp_path / "submit.ipynb"
    shutil.copy(repo_root / "solutions" / "ch2-jit.ipynb", notebook)
    with Browser(width=375) as browser:
        browser.open(f"{service.url}/#token={token}")
        # a link's token is offered: taken once the student says the id it signs in is theirs
        assert browser.wait_for(_shown("offer-student")) == "alice"
        assert browser.evaluate("location.href") == f"{service.url}/"  # the token left the address bar
        assert browser.evaluate("sessionStorage.length") == 0 and browser.evaluate(f"!({SIGNED_IN})")
        yes(browser)
        browser.wait_for(SIGNED_IN)
        assert browser.evaluate("sessionStorage.getItem('grade-hand-in-token')") == token
        assert browser.evaluate("document.getElementById('student').textContent") == "alice"
        _no_sideways_scrolling(browser)

        browser.set_files("#file", notebook)
        browser.evaluate("document.getElementById('send').click()")
        assert browser.wait_for(_shown("score"), timeout=180) == "100 / 100"
        browser.wait_for("!document.getElementById('feedback').hidden")
        frame = browser.evaluate("(() => { const f = document.getElementById('feedback');"
                                 " return {sandbox: f.getAttribute('sandbox'), page: f.srcdoc}; })()")
        assert frame["sandbox"] == ""  # nothing in it runs
        assert "data-score='final'" in frame["page"] and "100 / 100" in frame["page"]
        # its style applies: a srcdoc frame keeps the page's CSP, and the page's nonce lets the style in
        border = "getComputedStyle(document.querySelector('section[data-exercise]')).borderTopStyle"
        assert browser.in_frame(border) == "solid"
        assert browser.in_frame("document.querySelector('[data-score=final]').textContent") == "100 / 100"
        browser.wait_for("document.getElementById('hand-ins').children.length === 1")
        assert browser.evaluate("document.getElementById('state').textContent") == "Graded"
        _no_sideways_scrolling(browser)
        browser.screenshot(tmp_path / "hand-in-page.png")
        assert [line for line in browser.console() if "Content Security Policy" in line] == []


def test_a_link_with_someone_else_s_token_is_not_taken_when_the_student_says_no(service: RealService) -> None:
    """A classmate sends a link with their own token (an LMS launch of theirs, or a course token):
    taken at once, the student would hand in into the classmate's account. The page names the id
    the link signs in, and a student who says it is not theirs keeps their own session."""
    mine, theirs = service.tokens["alice"], service.tokens["bob"]
    with Browser(width=375) as browser:
        browser.open(f"{service.url}/#token={mine}")
        browser.wait_for(_shown("offer-student"))
        yes(browser)
        browser.wait_for(SIGNED_IN)
        browser.open("about:blank")  # the link opened anew in this tab (a fragment alone does not load the page)
        browser.open(f"{service.url}/#token={theirs}")
        assert browser.wait_for(_shown("offer-student")) == "bob"
        browser.evaluate("document.getElementById('offer-no').click()")
        browser.wait_for(SIGNED_IN)
        assert browser.evaluate("document.getElementById('student').textContent") == "alice"
        assert browser.evaluate("sessionStorage.getItem('grade-hand-in-token')") == mine


def test_a_yes_the_instant_the_offer_appears_and_a_link_without_a_token_take_nothing(service: RealService) -> None:
    with Browser(width=375) as browser:
        browser.open(f"{service.url}/#token={service.tokens['bob']}")
        browser.wait_for(_shown("offer-student"))
        browser.evaluate("document.getElementById('offer-yes').disabled = false;"
                         " document.getElementById('offer-yes').click()")  # a click that lands at once
        assert browser.evaluate("sessionStorage.length") == 0 and browser.evaluate(_shown("offer-student"))
        browser.open("about:blank")
        browser.open(f"{service.url}/#token=%E2%9C%93not-a-token")
        assert "no usable token" in browser.wait_for(_shown("error"))


def test_a_wrong_token_shows_the_service_s_sentence_then_the_right_one_is_pasted(service: RealService) -> None:
    wrong = "gt_not-a-token-of-this-course"
    with Browser(width=375) as browser:
        browser.open(f"{service.url}/#token={wrong}")
        assert browser.wait_for(_shown("error")) == refusal(service.url, wrong)
        assert browser.evaluate("sessionStorage.length") == 0  # a refused token is not kept
        assert browser.evaluate("!document.getElementById('token-form').hidden && "
                                "document.getElementById('hand-in').hidden")
        _no_sideways_scrolling(browser)
        browser.evaluate(f"document.getElementById('token').value = {json.dumps(service.tokens['bob'])};"
                         " document.querySelector('#token-form button').click()")
        browser.wait_for(SIGNED_IN)
        assert browser.evaluate("document.getElementById('error').hidden")
        assert browser.evaluate("document.getElementById('student').textContent") == "bob"


def test_what_the_service_says_is_shown_as_text(tmp_path: Path) -> None:
    """A sentence with markup in it stays text: no element is made of it, no script of it runs."""
    standin = StandIn(refusal="<img src=x onerror=\"document.title='owned'\"><b>bold</b> is not a token")
    with serving(standin.app()) as url, Browser(width=375) as browser:
        browser.open(f"{url}/#token=gt_wrong")
        assert browser.wait_for(_shown("error")) == standin.refusal
        assert browser.evaluate("document.getElementById('error').children.length") == 0
        assert browser.evaluate("document.title") != "owned"
