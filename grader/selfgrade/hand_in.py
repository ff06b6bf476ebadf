"""`grade submit.ipynb --hand-in`: the pack hands the notebook in to the course's hand-in service
(`grade serve`), waits for the verdict and prints it as the terminal prints a report.

The standard library only (http.client, what urllib is built on): the pack must install without
an HTTP client of its own. The service's address is `--hand-in URL`, else the one the pack was
built with (`grade pack --hand-in-url`); the student's token is `--token-file FILE`, else
$GRADE_TOKEN, else ~/.config/jax-course/token. The token goes only into the Authorization header
of requests to that address: never printed, never sent on to a redirect's target (a redirect is
one sentence naming the address to use instead).

Every failure is one line: the service's own sentence for a refusal (exit 2), "could not reach the
hand-in service" when it cannot be reached (exit 3: nothing was handed in); a verdict the machine
could not give ("not graded") exits 3 as well. Ctrl-C while waiting stops waiting only: the hand-in
stays with the service, and the sentence says where to read its verdict.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import secrets
import sys
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from grader import interrupts
from grader.errors import GraderError, UsageError
from grader.inert import MESSAGE_LIMIT, PATH_LIMIT, terminal

ENV_TOKEN = "GRADE_TOKEN"
TOKEN_FILE = Path("~/.config/jax-course/token")
WAIT_S = 600.0  # how long `grade --hand-in` waits for a verdict before saying where to read it later
REQUEST_TIMEOUT_S = 30.0
LOST_S = 60.0  # while waiting, how long the service may stay out of reach before waiting stops
REPLY_LIMIT = 8 << 20  # bytes of one reply read (a report is tens of kilobytes)
TOKEN_LIMIT = 512
DONE = ("graded", "not_graded", "superseded")


class HandInRefused(GraderError):
    """The service said no (a bad token, a file too large, too many hand-ins): its sentence, exit 2."""

    exit_code = 2


class TooManyRequests(HandInRefused):
    """429: the service's sentence, and the seconds it asks to wait (`Retry-After`)."""

    def __init__(self, sentence: str, retry_after: float):
        super().__init__(sentence)
        self.retry_after = retry_after


class ServiceUnreachable(GraderError):
    """No answer from the service, or one that is not its API (exit 3: nothing was handed in).
    `why` is the sentence without what it means for the notebook."""

    exit_code = 3

    def __init__(self, why: str):
        super().__init__(f"{why}; your notebook was not handed in")
        self.why = why


class StoppedWaiting(GraderError):
    """Ctrl-C (exit 130) or SIGTERM (143) while handing in or waiting: the hand-in stays with the
    service, and the sentence says where its verdict will be."""

    exit_code = 130

    def __init__(self, sentence: str, stop: KeyboardInterrupt):
        super().__init__(sentence)
        if isinstance(stop, interrupts.Terminated):
            self.exit_code = 143


class NotGraded(GraderError):
    """Handed in, but no verdict: the machine failed, a newer hand-in replaced it, or waiting ran
    out (exit 3; the sentence says what to do)."""

    exit_code = 3


def service_url(given: str | None) -> str:
    """The service's address: `given` (`--hand-in URL`), else the pack's; UsageError when there is
    neither, or it is not an http(s) address."""
    if not given:
        from grader.selfgrade.packs import hand_in_url

        given = hand_in_url()
        if not given:
            raise UsageError("this pack knows no hand-in service: pass its address, --hand-in URL (your course "
                             "says which)")
    return address(given, "--hand-in")


def address(given: str, option: str) -> str:
    """`given` as the service's address (http or https, a host, no user or password; no query,
    fragment or trailing slash), or UsageError naming `option`."""
    try:
        parsed = urllib.parse.urlsplit(given.strip())
        fine = (parsed.scheme in ("http", "https") and bool(parsed.hostname)
                and not parsed.username and not parsed.password)
        parsed.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        fine = False
    if not fine:
        raise UsageError(f"{option} needs the hand-in service's address, such as https://grade.example.edu, "
                         f"not {terminal(given, PATH_LIMIT)}")
    return urllib.parse.urlunsplit((parsed.scheme, parsed.netloc, parsed.path.rstrip("/"), "", ""))


def read_token(token_file: Path | None) -> str:
    """The student's token: `token_file`, else $GRADE_TOKEN, else ~/.config/jax-course/token.
    UsageError (never quoting the token) when there is none or it is not one."""
    if token_file is not None:
        where = terminal(token_file, PATH_LIMIT)
        token = _token_in(token_file, where)
    elif os.environ.get(ENV_TOKEN, "").strip():
        where = f"${ENV_TOKEN}"
        token = os.environ[ENV_TOKEN].strip()
    else:
        home = TOKEN_FILE.expanduser()
        where = str(TOKEN_FILE)
        if not home.is_file():
            raise UsageError(f"no token to hand in with: put the token your course gave you in {TOKEN_FILE}, "
                             f"or pass --token-file FILE (or set {ENV_TOKEN})")
        token = _token_in(home, where)
    if not token or len(token) > TOKEN_LIMIT or not all("\x21" <= ch <= "\x7e" for ch in token):
        raise UsageError(f"{where} holds no token (one line of letters, digits and punctuation): put the token "
                         "your course gave you there")
    return token


def _token_in(path: Path, where: str) -> str:
    try:
        with open(path, "rb") as file:
            raw = file.read(TOKEN_LIMIT * 2)
    except OSError as exc:
        raise UsageError(f"could not read the token file {where} ({terminal(exc.strerror or exc)})") from None
    return raw.decode("utf-8", "replace").strip()


def multipart(path: Path, data: bytes) -> tuple[bytes, str]:
    """A multipart/form-data body with one field `file` holding `data` under `path`'s name (UTF-8,
    its quote and line breaks escaped as a browser escapes them), and its Content-Type."""
    boundary = f"grade-{secrets.token_hex(16)}"
    name = path.name.replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode("utf-8", "surrogateescape")
    return head + data + f"\r\n--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def proxy_for(parts: urllib.parse.SplitResult) -> tuple[str, int, str] | None:
    """(host, port, base64 "user:password" or "") of the proxy the environment names for the
    service at `parts`, or None (no proxy, or NO_PROXY covers its host)."""
    import base64
    import urllib.request

    proxies = urllib.request.getproxies_environment()
    if not proxies or urllib.request.proxy_bypass_environment(parts.hostname or "", proxies):
        return None
    named = proxies.get(parts.scheme) or proxies.get("all")
    if not named:
        return None
    try:
        proxy = urllib.parse.urlsplit(named if "://" in named else f"http://{named}")
        host, port = proxy.hostname, proxy.port or (443 if proxy.scheme == "https" else 80)
    except ValueError:
        host = None
    if not host:
        raise UsageError(f"the proxy the environment names for {parts.scheme} ({terminal(named, PATH_LIMIT)}) is not "
                         "an address: fix or unset it")
    user = urllib.parse.unquote(proxy.username or "")
    credentials = (base64.b64encode(f"{user}:{urllib.parse.unquote(proxy.password or '')}".encode()).decode()
                   if user else "")
    return host, port, credentials


@dataclass
class Reply:
    """A 2xx answer of the service: its status and its JSON body."""

    status: int
    body: dict


class Service:
    """The hand-in service's API at `url`, with the student's token. Requests go through
    http.client itself: a body is sent in pieces, and an answer the service gives before it has
    read the whole body (413 for a file too large) is still read, where urllib would only see the
    connection reset; a redirect is never followed."""

    def __init__(self, url: str, token: str):
        self.url = url
        self._token = token
        self._parts = urllib.parse.urlsplit(url)
        self._proxy = proxy_for(self._parts)

    def _unreachable(self, reason: object) -> ServiceUnreachable:
        through = f" through the proxy {self._proxy[0]}:{self._proxy[1]}" if self._proxy else ""
        return ServiceUnreachable(f"could not reach the hand-in service at {terminal(self.url, PATH_LIMIT)}"
                                  f"{terminal(through, PATH_LIMIT)}: {self.plain(reason)}")

    def plain(self, text: object) -> str:
        """A sentence from the service or the network, inert, capped, and without the token."""
        said = str(text).replace(self._token, "…")
        return terminal(said, MESSAGE_LIMIT)

    def _connection(self) -> tuple[http.client.HTTPConnection, str, dict[str, str]]:
        """A connection to the service, through the proxy the environment names for it (as pip
        and curl read HTTPS_PROXY, HTTP_PROXY, ALL_PROXY and NO_PROXY): to an https service a
        tunnel (CONNECT), so the proxy sees neither the token nor the notebook; to an http one the
        proxy is asked for the whole address. With the prefix of each request's target and the
        headers the proxy needs."""
        host, port = self._parts.hostname or "", self._parts.port
        proxy = self._proxy
        context = None
        if self._parts.scheme == "https":
            import ssl

            context = ssl.create_default_context()
        if proxy is None:
            if context is not None:
                return http.client.HTTPSConnection(host, port, timeout=REQUEST_TIMEOUT_S, context=context), "", {}
            return http.client.HTTPConnection(host, port, timeout=REQUEST_TIMEOUT_S), "", {}
        proxy_host, proxy_port, credentials = proxy
        extra = {"Proxy-Authorization": f"Basic {credentials}"} if credentials else {}
        if context is not None:
            tunnel = http.client.HTTPSConnection(proxy_host, proxy_port, timeout=REQUEST_TIMEOUT_S, context=context)
            tunnel.set_tunnel(host, port or 443, headers=extra)
            return tunnel, "", {}
        prefix = urllib.parse.urlunsplit(("http", self._parts.netloc, "", "", ""))
        return http.client.HTTPConnection(proxy_host, proxy_port, timeout=REQUEST_TIMEOUT_S), prefix, extra

    def request(self, method: str, path: str, body: bytes = b"", content_type: str | None = None) -> Reply:
        """One request; HandInRefused for a 4xx (or a redirect) with its sentence,
        ServiceUnreachable for no answer, a 5xx or an answer that is not the API's JSON."""
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json",
                   "User-Agent": "grade-hand-in"}
        if content_type:
            headers.update({"Content-Type": content_type, "Content-Length": str(len(body))})
        connection, prefix, proxy_headers = self._connection()
        headers.update(proxy_headers)
        failed: BaseException | None = None
        try:
            try:
                connection.putrequest(method, f"{prefix}{self._parts.path}/api/{path}", skip_accept_encoding=True)
                for header, value in headers.items():
                    connection.putheader(header, value)
                connection.endheaders()
                for start in range(0, len(body), 1 << 16):
                    connection.send(body[start:start + (1 << 16)])
            except OSError as exc:  # connected, the service may have answered already (413): read it
                if connection.sock is None:
                    raise self._unreachable(_why(exc)) from None
                failed = exc
            try:
                answer = connection.getresponse()
                status, raw = answer.status, answer.read(REPLY_LIMIT + 1)
                location, retry_after, reason = (answer.getheader("Location", ""),
                                                 answer.getheader("Retry-After", "1"), answer.reason)
            except (OSError, http.client.HTTPException) as exc:
                raise self._unreachable(_why(failed or exc)) from None
        finally:
            connection.close()
        if 200 <= status < 300:
            return Reply(status, self._json(raw, status))
        if 300 <= status < 400:
            elsewhere = terminal(location.replace(self._token, "…"), PATH_LIMIT) or "another address"
            raise HandInRefused(f"the hand-in service at {terminal(self.url, PATH_LIMIT)} sends requests to "
                                f"{elsewhere}: hand in there with --hand-in URL")
        raise self._refusal(status, reason, raw, retry_after)

    def _json(self, raw: bytes, status: int) -> dict:
        if len(raw) > REPLY_LIMIT:
            raise self._unreachable(f"its answer is larger than {REPLY_LIMIT >> 20} MiB")
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise self._unreachable(f"its answer ({status}) is not the hand-in service's")
        return body

    def _refusal(self, status: int, reason: str, raw: bytes, retry_after: str) -> GraderError:
        """The service's sentence as the error its status means."""
        try:
            said = json.loads(raw[: 64 << 10]).get("error")
        except (ValueError, AttributeError):
            said = None
        if not isinstance(said, str) or not said.strip():
            said = f"the hand-in service answered {status} {reason}"
        if status == 429:
            try:
                wait_s = float(retry_after)
            except ValueError:
                wait_s = 1.0
            wait_s = min(max(wait_s, 0.0), 60.0) if math.isfinite(wait_s) else 1.0
            return TooManyRequests(self.plain(said), wait_s)
        if status >= 500:
            return ServiceUnreachable(f"{self.plain(said)} (the hand-in service at "
                                      f"{terminal(self.url, PATH_LIMIT)})")
        return HandInRefused(self.plain(said))

    def hand_in(self, path: Path) -> dict:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise UsageError(f"{terminal(path, PATH_LIMIT)}: could not read it "
                             f"({terminal(exc.strerror)})") from None
        body, content_type = multipart(path, data)
        reply = self.request("POST", "hand-ins", body, content_type)
        if not isinstance(reply.body.get("id"), str) or not reply.body["id"]:
            raise self._unreachable("its answer names no hand-in")
        return reply.body

    def status(self, hand_in: str) -> dict:
        reply = self.request("GET", f"hand-ins/{urllib.parse.quote(hand_in, safe='')}")
        if reply.body.get("state") not in ("queued", "running", *DONE):
            raise self._unreachable("its answer is not a hand-in's state")
        return reply.body


def wait(service: Service, hand_in: str, on_state: Callable[[dict], None], *, wait_s: float = WAIT_S) -> dict:
    """Poll the hand-in's state, more slowly as time passes, until it is done: that state. The
    service out of reach for a while (restarting) is waited for, up to LOST_S; past `wait_s`,
    NotGraded says where to read the verdict later."""
    deadline = time.monotonic() + wait_s
    pause = 0.05
    lost_since: float | None = None
    while True:
        interrupts.check()  # a Ctrl-C whose exception a finalizer dropped (a closing connection's)
        try:
            state = service.status(hand_in)
            lost_since = None
        except TooManyRequests as exc:  # polled too often: wait as long as the service asks
            state = None
            pause = max(pause, exc.retry_after)
        except ServiceUnreachable as exc:
            now = time.monotonic()
            lost_since = lost_since or now
            if now - lost_since > LOST_S or now > deadline:
                raise NotGraded(f"{exc.why}; your notebook was handed in: {later(service.url)}") from None
            state = None
        if state is not None:
            on_state(state)
            if state["state"] in DONE:
                return state
        if time.monotonic() > deadline:
            raise NotGraded(f"not graded within {wait_s:g} s; your notebook was handed in and is still being "
                            f"graded: {later(service.url)}")
        time.sleep(pause)
        pause = min(pause * 1.5, 2.0)


def _why(exc: BaseException) -> str:
    """Why a request got no answer, in the words of the system ("Connection refused")."""
    if isinstance(exc, TimeoutError):
        return f"no answer within {REQUEST_TIMEOUT_S:g} s"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, http.client.HTTPException):
        return "the connection closed before an answer"
    return str(exc) or type(exc).__name__


def later(url: str) -> str:
    """Where a student reads a verdict they did not wait for."""
    return f"its verdict will be on the hand-in page, {terminal(url, PATH_LIMIT)}/"


def _state_line(state: dict) -> str:
    """The hand-in's state in a few words for the terminal's progress line ("" for none)."""
    if state["state"] == "queued":
        ahead = state.get("position")
        return f"queued, {ahead} ahead" if isinstance(ahead, int) and ahead > 0 else "queued, next"
    return {"running": "being graded"}.get(state["state"], "")


def hand_in(path: Path, url: str, token: str, *, verbose: bool = False,
            wait_s: float = WAIT_S) -> tuple[float, float]:
    """Hand `path` in, wait, print the verdict as the terminal prints a report: (final score,
    max score). HandInRefused, ServiceUnreachable, NotGraded or StoppedWaiting when there is none."""
    import shutil

    from grader.report import StudentReport
    from grader.views.terminal import summary

    service = Service(url, token)
    try:
        accepted = service.hand_in(path)
    except KeyboardInterrupt as stop:
        raise StoppedWaiting(f"interrupted while handing in; if your notebook reached the service, "
                             f"{later(url)}", stop) from None
    print(f"handed in to {terminal(url, PATH_LIMIT)}: {service.plain(accepted.get('message') or 'queued')}")
    sys.stdout.flush()
    from grader.views.status_line import Progress

    progress = Progress()

    def show(state: dict) -> None:
        line = _state_line(state)
        if line:
            progress(f"handed in: {line}")

    try:
        done = wait(service, accepted["id"], show, wait_s=wait_s)
    except KeyboardInterrupt as stop:
        raise StoppedWaiting(f"stopped waiting; your notebook was handed in and is still being graded: "
                             f"{later(url)}", stop) from None
    finally:
        progress.close()
    said = service.plain(done.get("message") or done["state"].replace("_", " "))
    if done["state"] != "graded":
        raise NotGraded(said)
    try:
        report = StudentReport.model_validate(done.get("report"))
    except ValueError:
        raise NotGraded(f"the hand-in service at {terminal(url, PATH_LIMIT)} graded your notebook, but its report "
                        f"is not one this pack reads: {later(url)}") from None
    tty = sys.stdout.isatty()
    width = shutil.get_terminal_size().columns if tty else None
    print(summary(report, color=tty, verbose=verbose, width=width))
    from grader.views.kept import keep

    keep(report, path.with_name(f"{path.stem}.hand-in.json"), "hand-in report", "the hand-in's report")
    print(said)
    return report.final, report.max_score
