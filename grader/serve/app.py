"""The hand-in service's HTTP side: the routes of docs/hand-in-service.md in one Starlette app.

    GET  /                           the hand-in page (grader/serve/page.py)
    GET  /healthz                    {"ok": true}
    POST /api/hand-ins               a file in, 202 HandInReply (413, 400, 429: one sentence each)
    GET  /api/hand-ins               the student's hand-ins, oldest first
    GET  /api/hand-ins/{id}          one of them, with its report as the student sees it
    GET  /api/hand-ins/{id}/feedback its feedback page

Every /api request names its student by the token in `Authorization: Bearer` (401 without one the
course issued); a student sees only their own hand-ins, and an id of another's gets the answer an
unknown id gets (404). The app holds no state of its own but `app.state.serving` (the job table,
the tokens, the rate limits and the grading service, started and stopped by the lifespan);
blocking work (SQLite, reading and storing files) runs off the event loop. Anything a route did
not expect is one sentence and a 500 for the client, and a traceback on the service's stderr for
the instructor, never the other way round.
"""

from __future__ import annotations

import contextlib
import secrets
import sys
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from grader.inert import terminal
from grader.outputs.names import OutputFolder
from grader.serve import limits
from grader.serve.jobs import Accepted, JobTable, new_id
from grader.serve.limits import Buckets, RateLimit
from grader.serve.models import ErrorBody, HandInList, HandInReply, HandInStatus, HandInSummary, Health, Job
from grader.serve.publish import Publisher
from grader.serve.security import Guard, secured_headers
from grader.serve.service import Service
from grader.serve.student_view import feedback_page, page_policy, student_view
from grader.serve.tokens import Tokens
from grader.serve.uploads import Refused, check, read_form, shown_name, store, suffix_of

if TYPE_CHECKING:
    from grader.lti.tool import LtiTool

_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


@dataclass
class Serving:
    """What the routes use: set up by `grade serve` (grader/serve/command.py) before the app starts."""

    out_dir: Path
    assignment: str  # the assignment's id
    assignment_folder: Path
    jobs: JobTable
    tokens: Tokens
    service: Service
    publisher: Publisher
    rate: RateLimit
    lti: LtiTool | None = None  # `--lti FILE`: launches from the LMS, grades back to it (grader/lti/)

    def __post_init__(self) -> None:
        self.hand_ins = Buckets(self.rate)
        self.requests = Buckets(limits.REQUESTS)
        self.uploading: dict[str, int] = {}  # student -> uploads arriving now (limits.UPLOADS_AT_ONCE)
        self.pages = Pages()


class Pages:
    """The feedback pages made lately, by job id: a graded hand-in's page never changes, and
    making one parses the kept file again (0.2 s for a large notebook, holding the GIL the event
    loop needs), which a student asking for it in a loop would make everyone wait for."""

    KEPT = 64

    def __init__(self) -> None:
        self._pages: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, job_id: str) -> str | None:
        with self._lock:
            page = self._pages.get(job_id)
            if page is not None:
                self._pages.move_to_end(job_id)
            return page

    def put(self, job_id: str, page: str) -> str:
        with self._lock:
            self._pages[job_id] = page
            while len(self._pages) > self.KEPT:
                self._pages.popitem(last=False)
        return page


class _Refusal(Exception):
    def __init__(self, status: int, sentence: str, headers: dict[str, str] | None = None):
        super().__init__(sentence)
        self.status, self.sentence, self.headers = status, sentence, headers or {}


def _json(model: BaseModel, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(model.model_dump_json(), status_code=status, headers=headers, media_type="application/json")


def _error(status: int, sentence: str, headers: dict[str, str] | None = None) -> Response:
    return _json(ErrorBody(error=sentence), status, headers)


def _serving(request: Request) -> Serving:
    return request.app.state.serving


def _student(request: Request) -> str:
    """Whose token the request carries (401 otherwise), within their request budget (429)."""
    serving = _serving(request)
    scheme, _, token = request.headers.get("authorization", "").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise _Refusal(401, "send your hand-in token: Authorization: Bearer <token> (your course gave you one)",
                       {"WWW-Authenticate": "Bearer"})
    student = serving.tokens.student(token.strip())
    if student is None and serving.lti is not None:  # a launch's session (grader/lti/routes.py)
        student = serving.lti.session_student(token.strip())
    if student is None:
        raise _Refusal(401, "this token is not one the course issued, or it was replaced: ask your instructor "
                            "for yours", {"WWW-Authenticate": "Bearer"})
    wait = serving.requests.take(student)
    if wait:
        raise _Refusal(429, f"too many requests: wait {limits.retry_after(wait)} s",
                       {"Retry-After": str(limits.retry_after(wait))})
    return student


def _job_of(serving: Serving, student: str, job_id: str) -> Job:
    """The student's job, or the 404 an unknown id gets (another student's id is unknown to them)."""
    job = serving.jobs.get(job_id, student) if set(job_id) <= _ID_CHARS and 0 < len(job_id) <= 64 else None
    if job is None:
        raise _Refusal(404, "no hand-in of yours has this id")
    return job


# ---------------------------------------------------------------------------- sentences


def _message(job: Job, position: int | None) -> str:
    if job.state == "queued":
        return (f"queued: {position} hand-in(s) ahead of yours" if position else "queued: yours is next")
    if job.state == "running":
        return "being graded"
    if job.state == "graded":
        if job.reason:  # the student's file could not be graded: their report says why
            return f"graded, but not gradable: {job.reason.replace(job.path, job.file_name)}"
        return f"graded: {job.score:g} / {job.max_score:g}"
    if job.state == "not_graded":
        why = job.reason or "the grading machine failed"
        return f"not graded: {why}; hand in again (this costs no attempt)"
    return "replaced by your later hand-in, which is graded instead (only the latest one waiting is graded)"


def _summary(serving: Serving, job: Job) -> HandInSummary:
    position = serving.jobs.position(job) if job.state == "queued" else None
    graded = job.state == "graded"
    return HandInSummary(id=job.id, state=job.state, message=_message(job, position), position=position,
                         score=job.score if graded else None, max_score=job.max_score if graded else None)


def _status(serving: Serving, job: Job) -> HandInStatus:
    report = serving.jobs.report(job.id) if job.state == "graded" else None
    shown = student_view(report, job.path, job.file_name) if report is not None else None
    return HandInStatus(**_summary(serving, job).model_dump(), report=shown)


def _reply(accepted: Accepted, student: str) -> HandInReply:
    if accepted.behind:
        said = "handed in: your previous hand-in is being graded, and this one is graded right after it"
    else:
        said = "handed in: it is queued and graded as soon as a worker is free"
    if accepted.superseded:
        said += "; it replaces your earlier hand-in that was still waiting (only the latest is graded)"
    return HandInReply(id=accepted.id, student=student, superseded=accepted.superseded, message=said)


# ---------------------------------------------------------------------------- routes


async def hand_in(request: Request) -> Response:
    serving = _serving(request)
    student = await run_in_threadpool(_student, request)
    if serving.uploading.get(student, 0) >= limits.UPLOADS_AT_ONCE:
        raise _Refusal(429, limits.uploads_at_once(), {"Retry-After": "5"})
    wait = serving.hand_ins.take(student)
    if wait:
        raise _Refusal(429, limits.too_many(wait, serving.rate), {"Retry-After": str(limits.retry_after(wait))})
    serving.uploading[student] = serving.uploading.get(student, 0) + 1  # the event loop's: no lock
    try:
        form = await read_form(request)
    finally:
        serving.uploading[student] -= 1
        if not serving.uploading[student]:
            del serving.uploading[student]
    try:
        upload = form.get("file")
        accepted = await run_in_threadpool(_admit, serving, student, upload.file, upload.filename)
    finally:
        await form.close()
    serving.service.wake()
    return _json(_reply(accepted, student), 202)


def _admit(serving: Serving, student: str, data: Any, filename: str) -> Accepted:
    """Keep the upload under a name of the service's, check it, and queue it: in one worker
    thread, so that a request cancelled meanwhile (a client gone, the server shutting down) never
    stops it halfway. A file is removed only while no job can name it: one that fails its check,
    or whose job was not written; a job, once written, always has its file."""
    file_name = shown_name(filename)
    job_id = new_id()
    path = OutputFolder(serving.out_dir).hand_in(student, job_id, suffix_of(filename))
    kept = _kept_bytes(path.parent)
    if kept + _size(data) > limits.KEPT_PER_STUDENT:
        raise Refused(413, limits.kept_too_much(kept))
    try:
        sha256 = store(data, path)
        check(path, file_name, serving.assignment, serving.assignment_folder)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    try:
        accepted = serving.jobs.accept(job_id=job_id, student=student, assignment=serving.assignment,
                                       path=str(path), file_name=file_name, sha256=sha256)
    except BaseException:
        try:
            written = serving.jobs.get(job_id) is not None
        except Exception:  # noqa: BLE001 - cannot tell: keep the file (an orphan costs disk, a lost file a grade)
            written = True
        if not written:
            path.unlink(missing_ok=True)
        raise
    if accepted.superseded and (replaced := serving.jobs.get(accepted.superseded)) is not None:
        Path(replaced.path).unlink(missing_ok=True)  # never graded now: its row says it was replaced
    return accepted


def _kept_bytes(folder: Path) -> int:
    """Bytes of the hand-ins kept in a student's folder."""
    try:
        return sum(entry.stat().st_size for entry in folder.iterdir() if entry.is_file())
    except OSError:
        return 0


def _size(data: Any) -> int:
    """Bytes of an upload's spooled file."""
    try:
        data.seek(0, 2)
        return int(data.tell())
    except (OSError, ValueError):
        return 0


async def list_hand_ins(request: Request) -> Response:
    serving = _serving(request)

    def listed() -> HandInList:
        student = _student(request)
        return HandInList(student=student, assignment=serving.assignment,
                          hand_ins=[_summary(serving, job) for job in serving.jobs.of_student(student)])

    return _json(await run_in_threadpool(listed))


async def one_hand_in(request: Request) -> Response:
    serving = _serving(request)

    def status() -> HandInStatus:
        return _status(serving, _job_of(serving, _student(request), request.path_params["id"]))

    return _json(await run_in_threadpool(status))


async def feedback(request: Request) -> Response:
    serving = _serving(request)

    def page() -> str:
        job = _job_of(serving, _student(request), request.path_params["id"])
        kept = serving.pages.get(job.id)
        if kept is not None:
            return kept
        report = serving.jobs.report(job.id) if job.state == "graded" else None
        if report is None:
            raise _Refusal(404, f"this hand-in has no feedback page: it is {job.state.replace('_', ' ')}")
        return serving.pages.put(job.id, feedback_page(student_view(report, job.path, job.file_name), Path(job.path)))

    html = await run_in_threadpool(page)
    return HTMLResponse(html, headers={"Content-Security-Policy": page_policy(html)})


async def home(request: Request) -> Response:
    try:
        from grader.serve import page
    except ImportError:
        return _error(404, "the hand-in page is not installed here: hand in with `grade FILE --hand-in`")
    nonce = secrets.token_urlsafe(16)
    lti = _serving(request).lti
    csp = page.content_security_policy(nonce, frame_origins=lti.frame_origins() if lti else [])
    title = _serving(request).assignment
    return HTMLResponse(page.hand_in_page(nonce=nonce, title=title),
                        headers={"Content-Security-Policy": csp, "Cache-Control": "no-store"})


async def healthz(request: Request) -> Response:
    """{"ok": true} while the dispatcher grades; 503 {"ok": false} when it has stopped (hand-ins
    would wait for a restart), for a monitor or a proxy's health check to see."""
    if not _serving(request).service.alive():
        return _json(Health(ok=False), 503)
    return _json(Health())


# ---------------------------------------------------------------------------- errors


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, (_Refusal, Refused))
    return _error(exc.status, exc.sentence, exc.headers)


async def _http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    sentence = {404: "there is nothing at this address", 405: "this address does not take that method"}.get(
        exc.status_code, "this request could not be handled")
    return _error(exc.status_code, sentence, dict(exc.headers or {}))


async def _unexpected(request: Request, exc: Exception) -> Response:
    """A bug of the service's: the student gets a sentence; uvicorn logs the traceback for the instructor."""
    where = f"{terminal(request.method, 20)} {terminal(request.url.path, 200)}"
    print(f"grade serve: {where} failed (a bug of the service; its traceback follows)", file=sys.stderr)
    # Starlette answers this outside the Guard's middleware: its headers are added here
    answer = _error(500, "the service failed on this request; try again, and tell your instructor if it lasts")
    for key, value in secured_headers(api=request.url.path.startswith("/api/")):
        answer.headers[key] = value
    return answer


def build_app(serving: Serving, *, origins: list[str], any_host: bool) -> Starlette:
    """The app: routes, the security guard around them, and a lifespan that starts and stops
    the grading service and the publisher."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if serving.lti is not None:
            serving.lti.start()
        serving.publisher.start()
        serving.service.start()
        try:
            yield
        finally:
            await run_in_threadpool(serving.service.stop)
            await run_in_threadpool(serving.publisher.stop)  # its last rebuild owes the last grades
            if serving.lti is not None:
                await run_in_threadpool(serving.lti.stop)

    routes = [Route("/", home), Route("/healthz", healthz),
              Route("/api/hand-ins", hand_in, methods=["POST"]),
              Route("/api/hand-ins", list_hand_ins, methods=["GET"]),
              Route("/api/hand-ins/{id}", one_hand_in, methods=["GET"]),
              Route("/api/hand-ins/{id}/feedback", feedback, methods=["GET"])]
    if serving.lti is not None:
        from grader.lti.routes import LAUNCH_PATHS, lti_routes

        routes += lti_routes()
    app = Starlette(
        routes=routes,
        exception_handlers={_Refusal: _refused, Refused: _refused, HTTPException: _http, Exception: _unexpected},
        lifespan=lifespan)
    app.state.serving = serving
    app.add_middleware(Guard, origins=origins, any_host=any_host,
                       cross_site_posts=LAUNCH_PATHS if serving.lti is not None else ())
    return app
