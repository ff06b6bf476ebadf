"""The servers of the hand-in tests, each real on a loopback port: the hand-in service itself,
started as an instructor starts it (`grade tokens`, then `grade serve OUT -a ch2-jit --roster
FILE --port 0`: `real_service`), and a stand-in that speaks the same HTTP API with verdicts made up
on the spot (uvicorn in a thread, as httpx's own tests run theirs: `serving`), for what the real
service cannot be made to do on demand: a hand-in that stays queued, one the machine fails, a
redirect, a sentence with markup in it.

The stand-in's jobs move one state per poll (queued, running, then its `outcome`), so a test never
waits on a clock; `hold` keeps them queued.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from grader.report import CheckResult, ExerciseResult, Isolation, StudentReport, SubmissionRef, environment
from grader.serve.page import content_security_policy, hand_in_page
from grader.serve.running import RunningService, running_service

UNKNOWN_TOKEN = "This token is not one the course issued: use the token your course gave you."
NOT_FOUND = "There is no hand-in of yours with that id."


class _Quiet(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # older uvicorn; newer ones leave threads' signals alone
        pass

    async def main_loop(self) -> None:
        """uvicorn's loop, looking at `should_exit` every 10 ms instead of every 100 ms: a test's
        server stops in 0.1 s instead of 0.18 (a test of the LTI tool stops two)."""
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            await asyncio.sleep(0.01)


@contextmanager
def serving(app: object, timeout: float = 30.0) -> Iterator[str]:
    """`app` served on a free loopback port for the block; its base URL (no trailing slash)."""
    # IPPROTO_TCP named: asyncio then sets TCP_NODELAY on each connection (without it, every answer
    # on a kept-alive connection waited ~40 ms for Nagle's algorithm)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = _Quiet(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        assert thread.is_alive(), "the server stopped while starting"
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()


RealService = RunningService


@contextmanager
def real_service(where: Path, students: tuple[str, ...], timeout: float = 120.0) -> Iterator[RealService]:
    """The hand-in service for ch2-jit as an instructor starts it (grader/serve/running.py),
    unsandboxed: what these tests ask of it is the service, not the sandbox."""
    with running_service(where, students, options=["--no-sandbox"], timeout=timeout) as running:
        yield running


def refusal(url: str, token: str) -> str:
    """The sentence the service answers a request with this token with (its 401's, for a wrong one)."""
    answer = httpx.get(f"{url}/api/hand-ins", headers={"Authorization": f"Bearer {token}"}, timeout=30,
                       trust_env=False)
    assert answer.status_code == 401, answer.text
    return answer.json()["error"]


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def made_up_report(filename: str, data: bytes, student: str) -> StudentReport:
    """A graded report at full marks, as the service would send it (the student's view)."""
    check = CheckResult(id="tax.visible", title="tax on the notebook's incomes", status="passed", score=100,
                        max_score=100, hidden=False, message=None)
    return StudentReport(assignment="ch2-jit", submission=SubmissionRef(
        path=filename, sha256=hashlib.sha256(data).hexdigest(), kind="notebook"), student=student,
        status="graded", score=100, max_score=100, environment=environment(),
        exercises=[ExerciseResult(id="tax", title="Exercise 1: progressive tax", score=100, max_score=100,
                                  checks=[check])],
        isolation=Isolation(sandboxed=False, layers=[]))


@dataclass
class StandIn:
    """The stand-in service's state: tokens, jobs, and what each test asks of it."""

    outcome: str = "graded"  # what a job ends as: graded, not_graded
    hold: bool = False  # jobs stay queued
    tokens: dict[str, str] = field(default_factory=lambda: {secrets.token_urlsafe(24): "alice"})
    jobs: dict[str, dict] = field(default_factory=dict)
    polled: dict[str, int] = field(default_factory=dict)  # job id -> status requests seen
    headers_seen: list[dict[str, str]] = field(default_factory=list)
    refusal: str = UNKNOWN_TOKEN  # the 401's sentence

    @property
    def token(self) -> str:
        return next(iter(self.tokens))

    def student(self, request: Request) -> str | None:
        self.headers_seen.append(dict(request.headers))
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        return self.tokens.get(token) if scheme == "Bearer" else None

    def app(self) -> Starlette:
        async def page(request: Request) -> Response:
            nonce = secrets.token_urlsafe(16)
            return HTMLResponse(hand_in_page(nonce=nonce, title="ch2-jit"),
                                headers={"Content-Security-Policy": content_security_policy(nonce)})

        async def hand_ins(request: Request) -> Response:
            student = self.student(request)
            if student is None:
                return JSONResponse({"error": self.refusal}, 401)
            if request.method == "GET":
                return JSONResponse({"student": student, "assignment": "ch2-jit", "hand_ins": [
                    {k: v for k, v in self.view(job).items() if k != "report"}
                    for job in self.jobs.values() if job["student"] == student]})
            async with request.form() as form:  # its files closed after
                upload = form.get("file")
                named = "" if upload is None or isinstance(upload, str) else upload.filename or ""
                if not named.endswith((".ipynb", ".py")):
                    return JSONResponse({"error": "Hand in one notebook (.ipynb) or module (.py)."}, 400)
                data = await upload.read()
            job_id = secrets.token_hex(8)
            self.jobs[job_id] = {"id": job_id, "student": student, "state": "queued", "filename": upload.filename,
                                 "data": data}
            return JSONResponse({"id": job_id, "state": "queued", "student": student, "superseded": None,
                                 "message": "Handed in; it is queued for grading."}, 202)

        async def status(request: Request) -> Response:
            student = self.student(request)
            if student is None:
                return JSONResponse({"error": self.refusal}, 401)
            job = self.jobs.get(request.path_params["id"])
            if job is None or job["student"] != student:
                return JSONResponse({"error": NOT_FOUND}, 404)
            self.polled[job["id"]] = self.polled.get(job["id"], 0) + 1
            if not self.hold:
                job["state"] = {"queued": "running", "running": self.outcome}.get(job["state"], job["state"])
            return JSONResponse(self.view(job))

        async def feedback(request: Request) -> Response:
            from grader.views.page import page

            student = self.student(request)
            job = self.jobs.get(request.path_params["id"])
            if student is None or job is None or job["student"] != student or job["state"] != "graded":
                return JSONResponse({"error": NOT_FOUND}, 404)
            return HTMLResponse(page(made_up_report(job["filename"], job["data"], student), []))

        return Starlette(routes=[Route("/", page), Route("/api/hand-ins", hand_ins, methods=["GET", "POST"]),
                                 Route("/api/hand-ins/{id}", status),
                                 Route("/api/hand-ins/{id}/feedback", feedback)])

    def view(self, job: dict) -> dict:
        graded = job["state"] == "graded"
        report = made_up_report(job["filename"], job["data"], job["student"]) if graded else None
        message = {"queued": "Queued for grading.", "running": "Being graded.",
                   "graded": "Graded: 100 / 100.",
                   "not_graded": "not graded: the grading machine failed; hand in again"}[job["state"]]
        return {"id": job["id"], "state": job["state"], "message": message,
                "position": 0 if job["state"] == "queued" else None,
                "report": report.model_dump(mode="json") if report else None,
                "score": report.score if report else None, "max_score": report.max_score if report else None}


def redirecting(target: str) -> Starlette:
    """A server that sends every request elsewhere (a proxy's http -> https, say)."""

    async def away(request: Request) -> Response:
        return Response(status_code=307, headers={"Location": f"{target}{request.url.path}"})

    return Starlette(routes=[Route("/{path:path}", away, methods=["GET", "POST"])])


@dataclass
class ProxyLog:
    """What a forwarding proxy was asked: each request's line and its Proxy-Authorization."""

    requests: list[tuple[str, str, str]] = field(default_factory=list)


@contextmanager
def forwarding_proxy() -> Iterator[tuple[str, ProxyLog]]:
    """A plain HTTP proxy on a loopback port (absolute-form requests, forwarded as they come) for
    the block: its address (http://127.0.0.1:PORT) and what it was asked."""
    import http.client
    import http.server
    import urllib.parse

    log = ProxyLog()

    class Forward(http.server.BaseHTTPRequestHandler):
        def _forward(self) -> None:
            log.requests.append((self.command, self.path, self.headers.get("Proxy-Authorization", "")))
            target = urllib.parse.urlsplit(self.path)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("proxy-authorization", "connection")}
            upstream = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
            try:
                upstream.request(self.command, urllib.parse.urlunsplit(("", "", target.path, target.query, "")),
                                 body=body, headers=headers)
                answer = upstream.getresponse()
                data = answer.read()
            finally:
                upstream.close()
            self.send_response(answer.status)
            for key, value in answer.getheaders():
                if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _forward

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", log
    finally:
        server.shutdown()
        server.server_close()
        thread.join(30)
