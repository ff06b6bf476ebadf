"""Headless Chromium for the tests, driven over its DevTools pipe (as scripts/phone-view does:
NUL-separated JSON on fds 3 and 4, so nothing but a `chromium` on PATH is needed), with a phone's
metrics: open a page, evaluate JavaScript, give a file input its files, wait for a condition with a
deadline. Every read from Chromium has a deadline too: a browser that hangs fails the test."""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def chromium() -> str | None:
    return next((c for c in ("chromium", "chromium-browser", "google-chrome") if shutil.which(c)), None)


PLACE_FDS = ("import fcntl, os, sys; r, w = (fcntl.fcntl(int(a), fcntl.F_DUPFD, 10) for a in sys.argv[1:3]); "
             "os.dup2(r, 3); os.dup2(w, 4); os.execvp(sys.argv[3], sys.argv[3:])")  # r, w: above 4, so dup2 copies


class Browser:
    """One headless Chromium and one tab, `width` CSS px wide (a phone's 375 by default)."""

    def __init__(self, width: int = 375, height: int = 812, timeout: float = 30.0):
        found = chromium()
        if found is None:
            raise RuntimeError("no chromium on PATH")
        self.timeout = timeout
        self.width = width
        self.events: list[dict] = []
        self._buffer = b""
        self._next_id = 0
        to_r, self._to = os.pipe()
        self._from, from_w = os.pipe()
        self._profile = tempfile.mkdtemp(prefix="test-browser-")
        # Chromium keeps a folder of its own in TMPDIR (org.chromium.Chromium.*), which a killed
        # browser leaves behind: one in the host's /tmp for every test that opened a page. Kept in
        # the profile instead, it goes with it.
        scratch = os.path.join(self._profile, "tmp")
        os.mkdir(scratch)

        # chromium reads fd 3 and writes fd 4: a small Python puts the pipes there and execs it (a
        # preexec_fn would fork this process, which JAX, imported here by other tests, warns against)
        self._process = subprocess.Popen(
            [sys.executable, "-I", "-c", PLACE_FDS, str(to_r), str(from_w), found,
             "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--remote-debugging-pipe",
             f"--user-data-dir={self._profile}", "about:blank"],
            pass_fds=(to_r, from_w), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "TMPDIR": scratch}, start_new_session=True)
        os.close(to_r)
        os.close(from_w)
        try:
            target = self.call("Target.createTarget", url="about:blank")["targetId"]
            self._session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=2,
                      mobile=True, session=True)
            for domain in ("Page", "Runtime", "DOM", "Log"):
                self.call(f"{domain}.enable", session=True)
            # an iframe in a process of its own (a sandboxed one) is a target of its own: attach to it too
            self.call("Target.setAutoAttach", session=True, autoAttach=True, waitForDebuggerOnStart=False,
                      flatten=True)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Ask Chromium to close (it ends its helpers and removes what it keeps in TMPDIR), kill
        what is left of its process group after 5 s, then remove the profile; a helper still
        writing into it (the network service's state) is why the removal is tried again."""
        if self._process.poll() is None:
            try:
                closing = {"id": self._next_id + 1, "method": "Browser.close"}
                os.write(self._to, json.dumps(closing).encode() + b"\0")
                self._process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        try:
            os.killpg(self._process.pid, 9)
        except OSError:
            pass
        self._process.wait()
        for fd in (self._to, self._from):
            try:
                os.close(fd)
            except OSError:
                pass
        deadline = time.monotonic() + 5
        while True:
            shutil.rmtree(self._profile, ignore_errors=True)
            if not os.path.exists(self._profile) or time.monotonic() > deadline:
                break
            time.sleep(0.05)

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._from, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, session: bool | str = False, **params: object) -> dict:
        """One DevTools command: to the browser, to the tab (`session=True`) or to the target of that
        session id; its result."""
        self._next_id += 1
        message: dict = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session if session is True else session
        os.write(self._to, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def open(self, url: str) -> None:
        """Navigate and wait for the load event."""
        self.events = [e for e in self.events if e.get("method") != "Page.loadEventFired"]
        self.call("Page.navigate", session=True, url=url)
        deadline = time.monotonic() + self.timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            self.events.append(self._read(deadline))

    def evaluate(self, expression: str) -> object:
        """The value of a JavaScript expression (awaited when it is a promise), as JSON."""
        return _value(expression, self.call("Runtime.evaluate", session=True, expression=expression,
                                            returnByValue=True, awaitPromise=True))

    def in_frame(self, expression: str, timeout: float = 30.0) -> object:
        """The value of a JavaScript expression in the page's iframe once it is truthy (the frame's
        document may still be the empty one it starts with), as the test sees it: its sandbox keeps
        the page's own script out, not DevTools."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self._in_frame(expression)
                if value:
                    return value
            except (RuntimeError, IndexError, KeyError):  # no frame yet, or its document is being replaced
                if time.monotonic() > deadline:
                    raise
            if time.monotonic() > deadline:
                raise TimeoutError(f"still false in the frame after {timeout:g} s: {expression}")
            time.sleep(0.05)

    def _in_frame(self, expression: str) -> object:
        self.evaluate("0")  # read what Chromium said meanwhile
        frames = [e["params"]["sessionId"] for e in self.events if e.get("method") == "Target.attachedToTarget"
                  and e["params"]["targetInfo"]["type"] == "iframe"]
        if frames:  # the frame has a process of its own
            answer = self.call("Runtime.evaluate", session=frames[-1], expression=expression, returnByValue=True)
        else:  # the frame lives in the page's process: a world of the test's own in it
            tree = self.call("Page.getFrameTree", session=True)["frameTree"]
            frame = tree["childFrames"][0]["frame"]["id"]
            world = self.call("Page.createIsolatedWorld", session=True, frameId=frame)["executionContextId"]
            answer = self.call("Runtime.evaluate", session=True, expression=expression, contextId=world,
                               returnByValue=True)
        return _value(expression, answer)

    def wait_for(self, expression: str, timeout: float = 60.0, navigating: bool = False) -> object:
        """Evaluate `expression` until it is truthy (its value), or fail at the deadline; with
        `navigating`, across the page's navigations (a page being replaced cannot be asked)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.evaluate(expression)
            except RuntimeError:
                if not navigating:
                    raise
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"still false after {timeout:g} s: {expression}")
            time.sleep(0.05)

    def set_files(self, selector: str, *paths: Path) -> None:
        """Give a file input its files, as a person choosing them does (it fires `change`)."""
        found = self.call("Runtime.evaluate", session=True,
                          expression=f"document.querySelector({json.dumps(selector)})")
        self.call("DOM.setFileInputFiles", session=True, files=[str(p) for p in paths],
                  objectId=found["result"]["objectId"])

    def screenshot(self, path: Path) -> None:
        height = self.evaluate("document.documentElement.scrollHeight")
        shot = self.call("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": self.width, "height": min(int(height), 4000), "scale": 1})
        path.write_bytes(base64.b64decode(shot["data"]))

    def console(self) -> list[str]:
        """What the page's console and Chromium's log said so far (CSP violations among them)."""
        said = [e["params"]["entry"].get("text", "") for e in self.events if e.get("method") == "Log.entryAdded"]
        said += [" ".join(str(a.get("value", a.get("description", ""))) for a in e["params"].get("args", []))
                 for e in self.events if e.get("method") == "Runtime.consoleAPICalled"]
        return said


def _value(expression: str, answer: dict) -> object:
    """A Runtime.evaluate answer's value, or RuntimeError with what the expression threw."""
    if "exceptionDetails" in answer:
        raise RuntimeError(f"{expression}: {_thrown(answer)}")
    return answer["result"].get("value")


def _thrown(answer: dict) -> str:
    """What a page's script threw, as DevTools describes it."""
    return str(answer["exceptionDetails"].get("exception", {}).get("description"))
