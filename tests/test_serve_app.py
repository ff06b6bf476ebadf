"""The hand-in service's HTTP side alone: its routes on a real job table and token table, with a
dispatcher and a publisher that grade nothing (no kernels), served on a loopback port (uvicorn in
a thread, tests/hand_in_servers.py) and driven by httpx. What a review of the service found (a cancelled request leaving a job without its file,
uploads that never end, storage without bound, feedback pages parsed again and again, a
dispatcher that died while /healthz said ok, a 500 without the security headers) is tried here."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from hand_in_servers import serving as served_on_loopback

from grader import assignment
from grader.report import Report
from grader.serve import app as app_module
from grader.serve import limits
from grader.serve.app import Serving, build_app
from grader.serve.jobs import JobTable
from grader.serve.limits import RateLimit
from grader.serve.tokens import Tokens, digest

REPO = Path(__file__).resolve().parent.parent
MODULE = REPO / "solutions" / "ch2-jit.py"
TOKEN = "gt_alice-token"


@dataclass
class Dispatcher:
    """The service's dispatcher as the routes see it: woken, alive or not."""

    running: bool = True
    woken: int = 0

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def wake(self) -> None:
        self.woken += 1

    def alive(self) -> bool:
        return self.running


@dataclass
class Publisher:
    changed_for: list = field(default_factory=list)

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def changed(self, student: str | None = None) -> None:
        self.changed_for.append(student)


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[Serving]:
    out = tmp_path / "OUT"
    out.mkdir()
    jobs = JobTable(out / "gradebook.sqlite")
    folder = assignment.resolve("ch2-jit")
    made = Serving(out_dir=out, assignment="ch2-jit", assignment_folder=folder, jobs=jobs,
                   tokens=Tokens({"alice": digest(TOKEN)}, ["alice"]), service=Dispatcher(),  # type: ignore[arg-type]
                   publisher=Publisher(), rate=RateLimit(per_minute=600, burst=50))  # type: ignore[arg-type]
    yield made
    jobs.close_all()


@pytest.fixture
def client(serving: Serving) -> Iterator[httpx.Client]:
    with served_on_loopback(build_app(serving, origins=[], any_host=False)) as url, \
            httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, trust_env=False,
                         timeout=30) as http:
        yield http


def _hand_in(client: httpx.Client, data: bytes | None = None, name: str = "mine.py"):
    return client.post("/api/hand-ins", files={"file": (name, MODULE.read_bytes() if data is None else data)})


def _kept(serving: Serving) -> list[Path]:
    return sorted((serving.out_dir / "hand-ins" / "alice").glob("*"))


def test_a_job_always_has_its_file_even_when_the_request_is_cancelled(serving: Serving, monkeypatch) -> None:
    """The request is cancelled (its client gone, the server shutting down) while the job is being
    written: the file is kept for the job the worker thread still writes. Before, the cancelled
    coroutine deleted the file of a job that was then queued, and grading it replaced the
    student's grade with "no such file"."""
    written = threading.Event()
    accept = serving.jobs.accept

    def slow_accept(**kwargs):
        import time

        time.sleep(0.3)
        try:
            return accept(**kwargs)
        finally:
            written.set()

    monkeypatch.setattr(serving.jobs, "accept", slow_accept)
    data = MODULE.read_bytes()

    class Upload:
        filename = "mine.py"

        def __init__(self) -> None:
            import io

            self.file = io.BytesIO(data)

    async def cancelled() -> None:
        task = asyncio.ensure_future(app_module.run_in_threadpool(app_module._admit, serving, "alice", Upload().file,
                                                                   "mine.py"))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())
    assert written.wait(10)
    (job,) = serving.jobs.of_student("alice")
    assert job.state == "queued" and Path(job.path).is_file()


def test_a_superseded_hand_in_s_file_goes_and_a_student_s_files_have_a_bound(client: httpx.Client, serving: Serving,
                                                                              monkeypatch) -> None:
    first = _hand_in(client)
    second = _hand_in(client)
    assert first.status_code == 202 and second.status_code == 202, second.text
    assert second.json()["superseded"] == first.json()["id"]
    assert [p.stem for p in _kept(serving)] == [second.json()["id"]]  # the replaced one, never graded, is gone
    monkeypatch.setattr(limits, "KEPT_PER_STUDENT", _kept(serving)[0].stat().st_size + 100)
    refused = _hand_in(client)
    assert refused.status_code == 413 and refused.json()["error"].startswith("you have 0 MiB of hand-ins kept here")
    assert len(_kept(serving)) == 1 and len(serving.jobs.of_student("alice")) == 2


def test_an_upload_that_never_ends_is_408_and_a_student_uploads_two_at_once_at_most(
        client: httpx.Client, serving: Serving, monkeypatch) -> None:
    from grader.serve.uploads import Refused, read_form

    monkeypatch.setattr(limits, "UPLOAD_S", 0.2)

    from starlette.datastructures import Headers

    class Trickle:
        headers = Headers({"content-type": "multipart/form-data; boundary=x", "content-length": "100"})

        async def stream(self):
            yield b"--x\r\n"
            await asyncio.sleep(3600)

    async def read() -> None:
        with pytest.raises(Refused) as refused:
            await asyncio.wait_for(read_form(Trickle()), 5)
        assert refused.value.status == 408 and "did not arrive within 0.2 s" in refused.value.sentence

    asyncio.run(read())
    serving.uploading["alice"] = limits.UPLOADS_AT_ONCE  # two of hers arriving
    third = client.post("/api/hand-ins", files={"file": ("mine.py", b"x = 1\n")})
    assert third.status_code == 429 and third.json()["error"].startswith("you are handing in 2 files at once")


def test_a_feedback_page_is_made_once(client: httpx.Client, serving: Serving, monkeypatch) -> None:
    from hand_in_servers import made_up_report

    job_id = _hand_in(client).json()["id"]
    job = serving.jobs.claim("run", 60)
    shown = made_up_report("mine.py", MODULE.read_bytes(), "alice")  # as a student reads it: the worker's has
    report = Report.model_validate({**dict(shown), "seed": 3, "duration_s": 0.4,  # the seed and the time
                                    "submission": shown.submission.model_copy(update={"path": job.path})})
    from grader.outputs.gradebook import Gradebook

    with Gradebook(serving.jobs.path) as book:
        assert serving.jobs.record_graded(book, job, "run", report, assignment_digest="d")
    made = []
    real = app_module.feedback_page
    monkeypatch.setattr(app_module, "feedback_page", lambda *a: made.append(1) or real(*a))
    pages = [client.get(f"/api/hand-ins/{job_id}/feedback") for _ in range(3)]
    assert [p.status_code for p in pages] == [200] * 3 and len({p.text for p in pages}) == 1
    assert made == [1]


def test_healthz_says_when_the_dispatcher_has_stopped(client: httpx.Client, serving: Serving) -> None:
    assert client.get("/healthz").json() == {"ok": True}
    serving.service.running = False  # type: ignore[attr-defined]
    dead = client.get("/healthz")
    assert dead.status_code == 503 and dead.json() == {"ok": False}


def test_a_500_carries_the_security_headers(client: httpx.Client, serving: Serving, monkeypatch) -> None:
    monkeypatch.setattr(serving.jobs, "of_student", lambda *a, **k: 1 / 0)
    broken = client.get("/api/hand-ins")
    assert broken.status_code == 500 and "tell your instructor" in json.loads(broken.text)["error"]
    assert broken.headers["x-content-type-options"] == "nosniff" and broken.headers["cache-control"] == "no-store"
    assert broken.headers["referrer-policy"] == "no-referrer" and "content-security-policy" in broken.headers
