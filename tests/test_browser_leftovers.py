"""The tests' browser (tests/browser.py) and scripts/phone-view leave nothing in the host's /tmp.

Found on a developer's machine: 706 `org.chromium.Chromium.*` folders in /tmp, one for every test
that opened a page, since the browser is killed at the end and Chromium keeps such a folder in
TMPDIR. `make test` must leave the machine as it found it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from browser import Browser, chromium

pytestmark = [pytest.mark.kernel,
              pytest.mark.skipif(chromium() is None,
                                 reason="chromium is not installed (scripts/install-chromium)")]


def _chromium_folders() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("org.chromium.Chromium.*")}


def test_a_browser_closed_leaves_no_folder_in_the_temporary_folder() -> None:
    before = _chromium_folders()
    with Browser() as browser:
        browser.call("Page.navigate", session=True, url="data:text/html,<p>hello</p>")
        profile = Path(browser._profile)
        kept = list(profile.rglob("org.chromium.Chromium.*"))
    assert _chromium_folders() - before == set()
    assert kept and not profile.exists()  # Chromium kept its folder in the profile, removed with it


def test_phone_view_leaves_no_folder_in_the_temporary_folder(tmp_path: Path) -> None:
    """scripts/phone-view, which the page tests and a course author use, the same."""
    page = tmp_path / "page.html"
    page.write_text("<!doctype html><meta name=viewport content='width=device-width'><p>hello</p>")
    before = _chromium_folders() | {p.name for p in Path(tempfile.gettempdir()).glob("phone-view-*")}
    phone_view = Path(__file__).parents[1] / "scripts" / "phone-view"
    done = subprocess.run([sys.executable, str(phone_view), str(page)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["inner_width"] == 375
    after = _chromium_folders() | {p.name for p in Path(tempfile.gettempdir()).glob("phone-view-*")}
    assert after - before == set()
