"""`grade serve` as a student and an instructor meet it: a real service in a subprocess on a free
loopback port, driven with a real HTTP client (httpx).

One service (`served`) takes the hand-ins of most tests; the tests that kill or stop a service
start their own on a folder of their own. Nothing waits a fixed time: every wait polls with a
deadline, which only bounds a test that would otherwise hang (no speed is asserted here; bench/
measures it).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import nbformat
import pytest

from grader.sandbox.layers import CORE_LAYERS, available

pytestmark = pytest.mark.kernel

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK = REPO / "solutions" / "ch2-jit.ipynb"
ISOLATION = available()
SANDBOX_ARGS = [] if all(layer in ISOLATION.layers for layer in CORE_LAYERS) else ["--no-sandbox"]
START_S = 180.0  # bounds a service's start (the first may build the compiled-program store)
GRADED_S = 600.0  # bounds the gradings a test waits for on a busy 2-core machine
DONE = {"graded", "not_graded", "superseded"}
STUDENTS = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan"]


def poll(what: Callable[[], Any], deadline_s: float, why: str, every_s: float = 0.05) -> Any:
    """`what()` once it is truthy, asked every `every_s`; AssertionError after `deadline_s` (a bound,
    not a timing)."""
    end = time.monotonic() + deadline_s
    while True:
        found = what()
        if found:
            return found
        if time.monotonic() > end:
            raise AssertionError(f"not within {deadline_s:g} s: {why}")
        time.sleep(every_s)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Served:
    out: Path
    roster: Path
    url: str
    proc: subprocess.Popen
    log: Path
    tokens: dict[str, str]
    clients: dict[str | None, httpx.Client] = field(default_factory=dict)

    def client(self, student: str | None) -> httpx.Client:
        if student not in self.clients:
            headers = {"Authorization": f"Bearer {self.tokens[student]}"} if student else {}
            self.clients[student] = httpx.Client(base_url=self.url, headers=headers, timeout=60)
        return self.clients[student]

    def hand_in(self, student: str, path: Path, name: str | None = None, **kwargs: Any) -> httpx.Response:
        with path.open("rb") as f:
            return self.client(student).post("/api/hand-ins", files={"file": (name or path.name, f)}, **kwargs)

    def status(self, student: str, job: str) -> dict:
        reply = self.client(student).get(f"/api/hand-ins/{job}")
        assert reply.status_code == 200, reply.text
        return reply.json()

    def finished(self, student: str, job: str, deadline_s: float = GRADED_S) -> dict:
        return poll(lambda: (s := self.status(student, job))["state"] in DONE and s, deadline_s,
                    f"{student}'s hand-in {job} finished", every_s=0.2)

    def db(self) -> sqlite3.Connection:
        return contextlib.closing(sqlite3.connect(self.out / "gradebook.sqlite", timeout=30))  # type: ignore[return-value]

    def close_clients(self) -> None:
        for client in self.clients.values():
            client.close()
        self.clients.clear()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.close_clients()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("the service did not stop on SIGTERM:\n" + self.log.read_text())


def issue_tokens(out: Path, roster: Path) -> dict[str, str]:
    target = out.parent / f"{out.name}-tokens.csv"
    done = subprocess.run([sys.executable, "-m", "grader", "tokens", str(out), "--roster", str(roster), "-o",
                           str(target)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    with target.open(encoding="utf-8") as f:
        return {row["student"]: row["token"] for row in csv.DictReader(f)}


def start(out: Path, roster: Path, tokens: dict[str, str], *args: str) -> Served:
    """`grade serve` on a free port (another one if that port was taken meanwhile), healthy."""
    for attempt in range(5):
        port = _free_port()
        log = out.parent / f"{out.name}-serve-{port}.log"
        with log.open("w") as sink:
            proc = subprocess.Popen([sys.executable, "-m", "grader", "serve", str(out), "-a", "ch2-jit", "--roster",
                                     str(roster), "--port", str(port), *SANDBOX_ARGS, *args],
                                    stdout=sink, stderr=subprocess.STDOUT, cwd=REPO)
        url = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            if proc.poll() is not None:
                return True
            try:
                return asking.get(f"{url}/healthz").status_code == 200
            except httpx.HTTPError:
                return False

        with httpx.Client(timeout=2) as asking:  # one client: each new one loads a CA bundle (40 ms of CPU)
            poll(healthy, START_S, "the service answered /healthz")
        if proc.poll() is None:
            return Served(out, roster, url, proc, log, tokens)
        if "is in use" not in log.read_text():
            raise AssertionError("grade serve exited:\n" + log.read_text())
    raise AssertionError("no free port after five tries")


def _roster(folder: Path, students: list[str]) -> Path:
    roster = folder / "roster.txt"
    roster.write_text("student\n" + "".join(s + "\n" for s in students), encoding="utf-8")
    return roster


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("served")
    out, roster = folder / "out", _roster(folder, STUDENTS)
    service = start(out, roster, issue_tokens(out, roster))
    yield service
    service.stop()


@pytest.fixture(scope="module")
def alices(served: Served) -> tuple[httpx.Response, dict]:
    """Alice's hand-in of the reference notebook (the service's answer) and its status once finished:
    one grading the tests that need a graded hand-in only read (alice hands in nothing else here)."""
    reply = served.hand_in("alice", NOTEBOOK)
    assert reply.status_code == 202, reply.text
    return reply, served.finished("alice", reply.json()["id"])


def _checks(report: dict) -> dict[str, dict]:
    return {c["id"]: c for e in report["exercises"] for c in e["checks"]}


def endless(folder: Path) -> Path:
    """A hand-in whose one cell never finishes (tests/fixtures/submissions/endless_loop_cell.py's
    loop, sleeping in it): only a deadline or a stop ends it, and it leaves the cores to the others
    (the busy loop burned one for each attempt's whole deadline)."""
    path = folder / "endless.py"
    path.write_text("# %% [endless loop] a cell that never finishes\nimport time\n\nwhile True:\n"
                    "    time.sleep(0.05)\n", encoding="utf-8")
    return path


def _gradebook_seed(served: Served) -> int:
    with served.db() as db:
        return db.execute("SELECT seed FROM seeds ORDER BY rowid DESC LIMIT 1").fetchone()[0]


# ----------------------------------------------------------------------------- a student's hand-in


def test_the_reference_notebook_gets_100_and_its_feedback_page(served: Served, alices) -> None:
    reply, status = alices
    body = reply.json()
    assert body["state"] == "queued" and body["student"] == "alice" and body["superseded"] is None
    assert reply.headers["cache-control"] == "no-store" and reply.headers["x-content-type-options"] == "nosniff"
    assert status["state"] == "graded", status
    assert status["score"] == 100 and status["max_score"] == 100 and status["message"] == "graded: 100 / 100"
    report = status["report"]
    assert report["submission"]["path"] == "ch2-jit.ipynb" and report["seed"] is None  # the class's seed withheld
    assert str(served.out) not in json.dumps(status)  # no path of the grading machine
    page = served.client("alice").get(f"/api/hand-ins/{body['id']}/feedback")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "unsafe-inline" not in policy and "script-src" not in policy
    assert "100 / 100" in page.text and "<script" not in page.text
    listed = served.client("alice").get("/api/hand-ins").json()
    assert listed["student"] == "alice" and listed["assignment"] == "ch2-jit"
    assert [h["id"] for h in listed["hand_ins"]] == [body["id"]] and "report" not in listed["hand_ins"][0]


def test_hidden_values_stay_hidden_and_verdicts_are_those_of_grade_file_seed(
        served: Served, submission_from_reference) -> None:
    """The attack of tests/test_hidden_leaks.py, handed in: the instructor's report holds what the
    student's code printed of the hidden values, the student's view and page none of it; and every
    verdict is the one `grade FILE --seed <the batch's seed>` gives."""
    path = submission_from_reference("setup", "tax", "tax_wrong_only_on_hidden_incomes_and_prints_a_stash.py",
                                     "newton", "detective", "training_raises_with_its_baked_values.py")
    reply = served.hand_in("bob", path)
    assert reply.status_code == 202, reply.text
    status = served.finished("bob", reply.json()["id"])
    assert status["state"] == "graded", status
    mine = _checks(status["report"])
    assert mine["tax.switch_hidden"]["status"] == "failed" and mine["tax.switch_visible"]["status"] == "passed"
    page = served.client("bob").get(f"/api/hand-ins/{status['id']}/feedback").text
    for text in (json.dumps(status), page):
        for marker in ("LEAKTEXT", "STASHED", "PRINTEDLEAK"):  # as tests/test_hidden_leaks.py
            assert marker not in text, marker
    assert all(c["counterexample"] is None and c["tally"] is None for c in mine.values())
    assert status["report"]["seed"] is None and status["report"]["duration_s"] is None  # a sleep(lr) tells lr
    instructors = poll(lambda: (served.out / "bob.json").is_file() and (served.out / "bob.json").read_text(), 120,
                       "bob's report in OUT")
    assert "LEAKTEXT" in instructors  # the instructor's report has it: it was there to withhold

    done = subprocess.run([sys.executable, "-m", "grader", str(path), "-a", "ch2-jit", "--seed",
                           str(_gradebook_seed(served)), "--json", "-", *SANDBOX_ARGS],
                          capture_output=True, text=True, cwd=REPO, timeout=GRADED_S)
    alone = _checks(json.loads(done.stdout))
    assert {k: (c["status"], c["score"]) for k, c in alone.items()} == \
        {k: (c["status"], c["score"]) for k, c in mine.items()}
    assert status["score"] == json.loads(done.stdout)["score"]


def test_a_new_hand_in_supersedes_the_queued_one(served: Served, tmp_path: Path) -> None:
    # the first is still being graded when the next two come (a fresh clone's loaded run once took
    # the first to its end, and the second into a worker, before the third was in): the second waits
    slow = tmp_path / "slow.py"
    slow.write_text((REPO / "solutions" / "ch2-jit.py").read_text(encoding="utf-8")
                    + "\n\n# %% [slow]\nimport time\ntime.sleep(4)\n", encoding="utf-8")
    replies = [served.hand_in("erin", path) for path in (slow, NOTEBOOK, NOTEBOOK)]
    assert [r.status_code for r in replies] == [202, 202, 202], [r.text for r in replies]
    ids = [r.json()["id"] for r in replies]
    assert replies[2].json()["superseded"] == ids[1]  # the second waited behind the first
    said = replies[2].json()["message"]
    assert "replaces your earlier hand-in" in said and ids[1] not in said  # no internal id in a sentence
    final = [served.finished("erin", job) for job in ids]
    assert final[1]["state"] == "superseded" and "your later hand-in" in final[1]["message"] and final[1]["report"] is None
    assert final[2]["state"] == "graded" and final[2]["score"] == 100
    assert final[0]["state"] in ("graded", "superseded")
    with served.db() as db:
        (latest,) = db.execute("SELECT report FROM submissions WHERE student = 'erin'").fetchone()
    assert ids[2] in json.loads(latest)["submission"]["path"]  # the row is the latest hand-in's


@pytest.mark.skipif(not {"namespaces", "user"} <= set(ISOLATION.layers),
                    reason="kill(-1, 9) could reach this machine's processes without namespaces and the user layer")
def test_a_hostile_hand_in_costs_only_itself(served: Served, submission_from_reference) -> None:
    """A hand-in that SIGKILLs its kernel's parent and every process it may signal is graded (its
    cells that tried reported; the rest of it full marks, as in `grade FILE`, though its kernel's
    parent is a fork server, the first process of its namespace), under a name of the service's;
    the one handed in right after it, on the same worker (-j 1), gets 100, and the service answers on."""
    hostile = submission_from_reference("setup", "tax", "kills_parent_process.py", "newton",
                                        "kills_every_process.py", "detective", "training")
    attack = served.hand_in("frank", hostile, name="../../../../escape.py")
    honest = served.hand_in("grace", NOTEBOOK)
    assert attack.status_code == 202 and honest.status_code == 202, (attack.text, honest.text)
    frank = served.finished("frank", attack.json()["id"])
    grace = served.finished("grace", honest.json()["id"])
    assert grace["state"] == "graded" and grace["score"] == 100
    assert frank["state"] == "graded" and frank["report"]["status"] == "graded", frank["message"]
    assert {p["status"] for p in frank["report"]["cell_problems"]} <= {"error", "died"}, frank["report"]
    assert frank["score"] == 100  # as `grade FILE` gives it: its kernel's parent outlives the kill
    assert frank["report"]["submission"]["path"] == "escape.py"
    assert not list(served.out.parent.rglob("escape.py"))  # kept under the service's own name
    assert httpx.get(f"{served.url}/healthz").json() == {"ok": True}


def test_a_notebook_of_another_assignment_or_not_a_notebook_is_one_sentence(served: Served, tmp_path: Path) -> None:
    other = nbformat.read(NOTEBOOK, as_version=4)
    other.metadata["grader"] = {"assignment": "ch2-practice"}
    wrong = tmp_path / "practice.ipynb"
    nbformat.write(other, wrong)
    reply = served.hand_in("heidi", wrong)
    assert reply.status_code == 400
    assert reply.json() == {"error": "practice.ipynb: this notebook says it is for ch2-practice, but this service "
                                     "grades ch2-jit"}
    text = tmp_path / "essay.txt"
    text.write_text("not code", encoding="utf-8")
    reply = served.hand_in("heidi", text)
    assert reply.status_code == 400 and "essay.txt is neither" in reply.json()["error"]
    broken = tmp_path / "broken.ipynb"
    broken.write_bytes(b"\x00\xff{")
    reply = served.hand_in("heidi", broken, headers={"Origin": served.url})  # its own origin: not refused
    assert reply.status_code == 400 and reply.json()["error"].startswith("broken.ipynb: ")
    assert not list(served.out.glob("hand-ins/heidi/*"))  # a refused file is not kept
    with served.db() as db:
        assert db.execute("SELECT count(*) FROM hand_ins WHERE student = 'heidi'").fetchone()[0] == 0


# ----------------------------------------------------------------------------- who may do what


def test_a_token_is_needed_and_opens_only_its_own_hand_ins(served: Served, alices) -> None:
    job = alices[1]["id"]  # alice's, graded: its feedback page is there, for her only
    missing = served.client(None).get("/api/hand-ins")
    assert missing.status_code == 401 and "token" in missing.json()["error"]
    assert missing.headers["www-authenticate"] == "Bearer"
    wrong = httpx.get(f"{served.url}/api/hand-ins", headers={"Authorization": "Bearer gt_not-a-token"})
    assert wrong.status_code == 401 and "not one the course issued" in wrong.json()["error"]
    for path in (f"/api/hand-ins/{job}", f"/api/hand-ins/{job}/feedback"):
        theirs = served.client("dave").get(path)
        unknown = served.client("dave").get(path.replace(job, "A" * len(job)))
        assert theirs.status_code == unknown.status_code == 404
        assert theirs.json() == unknown.json() == {"error": "no hand-in of yours has this id"}
    assert served.client("dave").get("/api/hand-ins/..%2F..%2Fgradebook.sqlite").status_code == 404
    assert job not in served.client("dave").get("/api/hand-ins").text
    assert served.client("alice").get(f"/api/hand-ins/{job}/feedback").status_code == 200  # it is there


def test_a_foreign_origin_is_refused(served: Served) -> None:
    reply = served.hand_in("dave", NOTEBOOK, headers={"Origin": "https://evil.example"})
    assert reply.status_code == 403 and "another site" in reply.json()["error"]
    with served.db() as db:
        assert db.execute("SELECT count(*) FROM hand_ins WHERE student = 'dave'").fetchone()[0] == 0


def test_a_file_past_the_size_limit_is_413_before_it_is_read(served: Served, tmp_path: Path) -> None:
    big = tmp_path / "big.ipynb"
    with big.open("wb") as f:
        f.truncate(50 * 10**6)
    reply = served.hand_in("dave", big)
    assert reply.status_code == 413 and "larger than 20 MiB" in reply.json()["error"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while it streams
        yield b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.py\"\r\n\r\n"
        for _ in range(25):
            yield b"#" * 2**20
        yield b"\r\n--b--\r\n"

    streamed = served.client("dave").post("/api/hand-ins", content=chunks(),
                                          headers={"Content-Type": "multipart/form-data; boundary=b"})
    assert streamed.status_code == 413 and "larger than 20 MiB" in streamed.json()["error"]


def test_too_many_hand_ins_are_429_with_retry_after(served: Served, tmp_path: Path) -> None:
    bad = tmp_path / "empty.py"
    bad.write_bytes(b"\x00")
    answers = [served.hand_in("carol", bad) for _ in range(4)]
    assert [a.status_code for a in answers] == [400, 400, 400, 429], [a.text for a in answers]
    limited = answers[3]
    assert int(limited.headers["retry-after"]) >= 1
    assert limited.json()["error"].startswith("too many hand-ins: at most 3 at once and 6 a minute")


def test_the_hand_in_page_carries_its_nonce(served: Served) -> None:
    pytest.importorskip("grader.serve.page")
    page = httpx.get(served.url + "/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    nonce = policy.split("'nonce-", 1)[1].split("'", 1)[0]
    assert f"nonce='{nonce}'" in page.text and "frame-ancestors 'none'" in policy
    assert httpx.get(served.url + "/").headers["content-security-policy"] != policy  # fresh per response


def test_grade_tokens_refuses_while_the_service_holds_out(served: Served) -> None:
    done = subprocess.run([sys.executable, "-m", "grader", "tokens", str(served.out), "--roster", str(served.roster),
                           "--reissue", "alice"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 2, done.stderr
    said = re.fullmatch(r"grade: grade serve \(pid (\d+)\) is serving (.+): stop it \(Ctrl-C\), run this command, "
                        r"then start it again \(hand-ins wait in the gradebook meanwhile\)\n", done.stderr)
    assert said and said[2] == str(served.out), done.stderr


def test_the_outputs_include_the_hand_ins(served: Served, alices) -> None:
    assert alices[1]["state"] == "graded"

    def published() -> bool:
        summary = served.out / "summary.csv"
        return summary.is_file() and "alice" in summary.read_text() and \
            "alice" in (served.out / "index.html").read_text()

    poll(published, 120, "summary.csv and index.html name alice")
    assert (served.out / "feedback" / "alice.html").is_file() and (served.out / "alice.json").is_file()
    assert json.loads((served.out / "alice.json").read_text())["score"] == 100


# ----------------------------------------------------------------------------- a service that stops


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found |= {int(p) for p in (task / "children").read_text().split()}
    return found


def _gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" in status  # a zombie nobody reaped is no process


def test_kill_9_mid_burst_then_every_accepted_hand_in_is_graded_once(tmp_path: Path) -> None:
    """Four hand-ins on two workers, killed once the first is graded: some graded, some running, some
    queued (the kill is what is tested; four are enough for all three: once the first is graded, its
    worker has taken the third, the other still grades the second, the fourth waits; each costs a
    grading)."""
    students = [f"s{i:02d}" for i in range(1, 5)]
    out, roster = tmp_path / "out", _roster(tmp_path, students)
    tokens = issue_tokens(out, roster)
    first = start(out, roster, tokens, "-j", "2")
    try:
        ids = {}
        for student in students:
            reply = first.hand_in(student, NOTEBOOK)
            assert reply.status_code == 202, reply.text
            ids[student] = reply.json()["id"]

        def graded() -> int:
            with first.db() as db:
                return db.execute("SELECT count(*) FROM hand_ins WHERE state = 'graded'").fetchone()[0]

        poll(graded, GRADED_S, "a first hand-in graded")
        workers = _children(first.proc.pid)
    finally:
        first.stop(signal.SIGKILL)
    poll(lambda: all(_gone(pid) for pid in workers), 120, "the killed service's workers gone with it")
    with first.db() as db:
        before = dict(db.execute("SELECT id, finished_at FROM hand_ins WHERE state = 'graded'").fetchall())
        states = dict(db.execute("SELECT state, count(*) FROM hand_ins GROUP BY state").fetchall())
    assert sum(states.values()) == len(students) and set(states) <= {"graded", "running", "queued"}, states
    assert states.get("graded", 0) < len(students), "every hand-in was graded before the kill: nothing was interrupted"

    second = start(out, roster, tokens)  # one worker: what is asserted is which hand-ins it grades
    try:
        for student, job in ids.items():
            assert second.finished(student, job)["state"] == "graded", student
        with second.db() as db:
            rows = db.execute("SELECT id, state, finished_at, sha256 FROM hand_ins").fetchall()
            graded_rows = db.execute("SELECT student, sha256, score FROM submissions").fetchall()
        assert len(rows) == len(students) and {r[1] for r in rows} == {"graded"}
        assert {r[0]: r[2] for r in rows if r[0] in before} == before  # graded before the kill: not again
        sha = hashlib.sha256(NOTEBOOK.read_bytes()).hexdigest()
        assert sorted(r[0] for r in graded_rows) == students and {(r[1], r[2]) for r in graded_rows} == {(sha, 100)}

        def published() -> bool:
            summary = out / "summary.csv"
            return summary.is_file() and all(s in summary.read_text() for s in students)

        poll(published, 120, "summary.csv lists all four")
        assert all(s in (out / "index.html").read_text() for s in students)
    finally:
        code = second.stop()
    assert code in (0, 143) and "grade serve: stopped" in second.log.read_text()


def test_a_job_past_its_deadline_is_retried_once_then_not_graded(tmp_path: Path) -> None:
    out, roster = tmp_path / "out", _roster(tmp_path, ["slow", "stopped"])
    tokens = issue_tokens(out, roster)
    served = start(out, roster, tokens, "--deadline", "4")
    never = endless(tmp_path)
    second = None
    try:
        job = served.hand_in("slow", never).json()["id"]
        status = served.finished("slow", job)
        assert status["state"] == "not_graded", status
        assert status["message"] == ("not graded: the grading machine did not finish it; hand in again "
                                     "(this costs no attempt)")
        assert status["score"] is None and status["report"] is None
        with served.db() as db:
            assert db.execute("SELECT attempts FROM hand_ins WHERE id = ?", (job,)).fetchone()[0] == 2
            assert db.execute("SELECT count(*) FROM submissions").fetchone()[0] == 0  # it cost no attempt
        # SIGTERM while one runs: it goes back to the queue, its attempt not spent
        second = served.hand_in("stopped", never).json()["id"]
        poll(lambda: served.status("stopped", second)["state"] == "running", GRADED_S, "the second running")
    finally:
        code = served.stop()
    assert code in (0, 143), served.log.read_text()
    assert second is not None
    with served.db() as db:
        state, attempts = db.execute("SELECT state, attempts FROM hand_ins WHERE id = ?", (second,)).fetchone()
    assert (state, attempts) == ("queued", 0)
    assert "1 hand-in(s) still queued" in served.log.read_text() and "Traceback" not in served.log.read_text()
