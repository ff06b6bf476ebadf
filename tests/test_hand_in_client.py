"""The pack's `grade NOTEBOOK --hand-in`: it checks the notebook here, hands it in to the real
hand-in service (`grade serve` on a loopback port), waits and prints the verdict; every failure is
one line and its exit code, and the token is never printed. What the real service cannot be made to
do on demand (stay queued, fail the machine, redirect) is asked of a stand-in that speaks the same
API (tests/hand_in_servers.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import terminal_ctrl_c

from hand_in_servers import (RealService, StandIn, closed_port, forwarding_proxy, real_service, redirecting, refusal,
                             serving)

PROXIES = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
STUDENTS = ("alice", "bob", "carol")  # one per test that hands in to the service: each has its own rate limit


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealService]:
    with real_service(tmp_path_factory.mktemp("service"), STUDENTS) as running:
        yield running


def _env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without a token or a proxy, with `home` as HOME."""
    env = {k: v for k, v in os.environ.items() if k not in ("GRADE_TOKEN", "PYTHONPATH", "VIRTUAL_ENV", *PROXIES)}
    return {**env, "HOME": str(home), **extra}


def _notebook(where: Path, code: str = "x = 1\n") -> Path:
    """A small ch2-jit notebook (nothing answered): its check here takes a Python start, no more."""
    cell = {"cell_type": "code", "metadata": {}, "source": code, "outputs": [], "execution_count": None}
    path = where / "submit.ipynb"
    path.write_text(json.dumps({"cells": [cell], "metadata": {"grader": {"assignment": "ch2-jit"}},
                                "nbformat": 4, "nbformat_minor": 5}), encoding="utf-8")
    return path


def _grade(cwd: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The pack's `grade`, run from this checkout."""
    return subprocess.run([sys.executable, "-m", "grader.selfgrade", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


def _token_file(where: Path, token: str) -> Path:
    path = where / "token"
    path.write_text(token + "\n", encoding="utf-8")
    return path


def _installed_pack(where: Path, url: str) -> Path:
    """ch2-jit's pack made with `--hand-in-url URL`, installed (without its dependencies, which a
    .pth line finds in this Python) into a venv that cannot see this checkout: its `grade`."""
    from grader.course.pack import build_pack
    from test_pack import _launcher_venv

    venv, _ = _launcher_venv(where, build_pack("ch2-jit", where / "handout", hand_in_url=url))
    return venv / "bin" / "grade"


@pytest.mark.kernel
def test_the_pack_hands_in_the_reference_and_prints_the_verdict(service: RealService, tmp_path: Path,
                                                                repo_root: Path) -> None:
    """The pack made with the service's address: `grade submit.ipynb --hand-in --token-file F` checks
    here, hands in, and prints the service's verdict (every check, the hidden ones too): 100."""
    grade = _installed_pack(tmp_path, service.url)
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(repo_root / "solutions" / "ch2-jit.ipynb", work / "submit.ipynb")
    token = service.tokens["alice"]
    _token_file(work, token)
    done = subprocess.run([str(grade), "submit.ipynb", "--hand-in", "--token-file", "token"], capture_output=True,
                          text=True, cwd=work, env=_env(tmp_path), timeout=300)
    assert done.returncode == 0, done.stderr
    here, handed = done.stdout.split(f"\nhanded in to {service.url}: ", 1)
    assert "48 of the 100 points are checked when you hand in" in here  # the check here, as today
    verdict = handed.split("\n", 1)[1]
    assert verdict.startswith("ch2-jit · submit.ipynb\n") and "checked when you hand in" not in verdict
    # neither the class's seed nor the time grading took (it can depend on a hidden value)
    assert "\nTotal 100 / 100\n" in verdict and verdict.endswith("graded: 100 / 100\n"), verdict
    assert "\nhand-in report: submit.hand-in.json\n" in verdict  # the verdict kept beside the notebook
    kept_here = json.loads((work / "submit.hand-in.json").read_text(encoding="utf-8"))
    assert kept_here["score"] == 100.0 and kept_here["submission"]["path"] == "submit.ipynb"
    assert kept_here["seed"] is None and kept_here["duration_s"] is None
    assert token not in done.stdout + done.stderr
    from grader.outputs.names import OutputFolder

    kept = OutputFolder(service.out).report("alice")  # the batch folder the service grades into
    deadline = time.monotonic() + 60
    while not kept.is_file():
        assert time.monotonic() < deadline, "the service wrote no report for alice"
        time.sleep(0.05)
    assert json.loads(kept.read_text(encoding="utf-8"))["score"] == 100.0


@pytest.mark.kernel
def test_the_token_in_the_home_folder_or_the_environment(service: RealService, tmp_path: Path) -> None:
    """Without --token-file: $GRADE_TOKEN, else ~/.config/jax-course/token; a token the service does
    not know is its sentence, exit 2, and printed nowhere."""
    _notebook(tmp_path)
    config = tmp_path / ".config" / "jax-course"
    config.mkdir(parents=True)
    _token_file(config, service.tokens["bob"])
    from_home = _grade(tmp_path, "submit.ipynb", "--hand-in", service.url, env=_env(tmp_path))
    assert from_home.returncode == 0, from_home.stderr
    assert "\nTotal 0 / 100" in from_home.stdout and from_home.stdout.endswith("graded: 0 / 100\n")
    assert service.tokens["bob"] not in from_home.stdout + from_home.stderr
    wrong = "gt_not-a-token-of-this-course"
    from_env = _grade(tmp_path, "submit.ipynb", "--hand-in", service.url, env=_env(tmp_path, GRADE_TOKEN=wrong))
    assert (from_env.returncode, from_env.stderr) == (2, f"grade: {refusal(service.url, wrong)}\n")
    assert "report: submit.report.json" in from_env.stdout  # checked here first, as without --hand-in
    assert wrong not in from_env.stdout + from_env.stderr


@pytest.mark.kernel
def test_a_refused_file_is_the_service_s_sentence_even_when_it_stops_reading(service: RealService,
                                                                               tmp_path: Path) -> None:
    """A file past the service's size limit is answered 413 before the service has read it all: the
    client still reads that answer (not "connection reset"); a module that is not text, 400. (The
    command line's check here refuses such files before they are sent: this is the client alone.)"""
    from grader.selfgrade.hand_in import HandInRefused, Service
    from grader.submission import MAX_BYTES

    big = tmp_path / "big.ipynb"
    big.write_bytes(b"{" + b" " * (MAX_BYTES + (4 << 20)) + b"}")
    binary = tmp_path / "binary.py"
    binary.write_bytes(b"\xff\xfe\x00 not text")
    client = Service(service.url, service.tokens["carol"])
    with pytest.raises(HandInRefused) as too_large:
        client.hand_in(big)
    with pytest.raises(HandInRefused) as not_text:
        client.hand_in(binary)
    assert f"larger than {MAX_BYTES >> 20} MiB, the most the grader reads" in str(too_large.value)
    assert str(not_text.value).startswith("binary.py: "), not_text.value


@pytest.mark.kernel
def test_an_unreachable_service_is_one_sentence_and_exit_3(tmp_path: Path) -> None:
    _notebook(tmp_path)
    _token_file(tmp_path, "gt_secret-token")
    url = f"http://127.0.0.1:{closed_port()}"
    done = _grade(tmp_path, "submit.ipynb", "--hand-in", url, "--token-file", "token", env=_env(tmp_path))
    assert done.returncode == 3, done.stderr
    assert done.stderr == (f"grade: could not reach the hand-in service at {url}: Connection refused; your "
                           "notebook was not handed in\n")
    assert "report: submit.report.json" in done.stdout  # checked here all the same
    assert "gt_secret-token" not in done.stdout + done.stderr


@pytest.mark.kernel
def test_ctrl_c_while_waiting_says_the_hand_in_stays_and_where_to_read_it(tmp_path: Path) -> None:
    standin = StandIn(hold=True)  # graded never: the client waits until Ctrl-C
    _notebook(tmp_path)
    _token_file(tmp_path, standin.token)
    with serving(standin.app()) as url:
        grading = subprocess.Popen(
            [*terminal_ctrl_c.python_module("grader.selfgrade"),  # tests/terminal_ctrl_c.py says why
             "submit.ipynb", "--hand-in", url, "--token-file", "token"],
            cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while not any(count >= 2 for count in standin.polled.values()):  # it is in its waiting loop
                assert grading.poll() is None and time.monotonic() < deadline, grading.communicate()
                time.sleep(0.05)
            os.killpg(grading.pid, signal.SIGINT)  # the terminal's Ctrl-C
            out, err = grading.communicate(timeout=60)
        finally:
            if grading.poll() is None:
                os.killpg(grading.pid, signal.SIGKILL)
                grading.wait()
    assert grading.returncode == 130, err
    assert err == (f"grade: stopped waiting; your notebook was handed in and is still being graded: its verdict "
                   f"will be on the hand-in page, {url}/\n")
    assert [job["state"] for job in standin.jobs.values()] == ["queued"]


def test_a_ctrl_c_a_finalizer_dropped_still_stops_the_wait() -> None:
    """Python drops a signal's exception raised inside a finalizer (a connection closing as the
    poll ends); the command line's handler latched it, and the waiting loop raises it then
    instead of polling on until its limit (seen once in a full run: the pack hung past Ctrl-C)."""
    from grader import interrupts
    from grader.selfgrade.hand_in import wait

    class Polled:
        url, calls = "http://127.0.0.1:9", 0

        def status(self, hand_in: str) -> dict:
            self.calls += 1
            interrupts.latch()  # what _on_sigint did before its exception was dropped
            return {"state": "queued"}

    service = Polled()
    with interrupts.handled(), pytest.raises(KeyboardInterrupt):
        wait(service, "h1", lambda state: None, wait_s=2.0)
    assert service.calls == 1


@pytest.mark.kernel
def test_not_graded_says_the_service_s_sentence_and_exits_3(tmp_path: Path) -> None:
    standin = StandIn(outcome="not_graded")
    _notebook(tmp_path)
    _token_file(tmp_path, standin.token)
    with serving(standin.app()) as url:
        done = _grade(tmp_path, "submit.ipynb", "--hand-in", url, "--token-file", "token", env=_env(tmp_path))
    assert (done.returncode, done.stderr) == (3, "grade: not graded: the grading machine failed; hand in again\n")


@pytest.mark.kernel
def test_a_redirect_is_not_followed_and_the_token_stays_home(tmp_path: Path) -> None:
    """A redirect would carry the Authorization header to its target: the client names the target
    instead, and the target never sees a request."""
    elsewhere = StandIn()
    _notebook(tmp_path)
    _token_file(tmp_path, elsewhere.token)
    with serving(elsewhere.app()) as target, serving(redirecting(target)) as url:
        done = _grade(tmp_path, "submit.ipynb", "--hand-in", url, "--token-file", "token", env=_env(tmp_path))
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"grade: the hand-in service at {url} sends requests to {target}/api/hand-ins: hand "
                           "in there with --hand-in URL\n")
    assert elsewhere.headers_seen == [] and elsewhere.token not in done.stdout + done.stderr


@pytest.mark.kernel
def test_the_proxy_the_environment_names_carries_the_hand_in(tmp_path: Path) -> None:
    """Behind a campus proxy (HTTP_PROXY, as pip and curl read it) every request goes through it,
    with its credentials and never the token in them; NO_PROXY sends them straight; a proxy that
    is not there is named in the one sentence."""
    import base64

    standin = StandIn()
    _notebook(tmp_path)
    _token_file(tmp_path, standin.token)
    hand_in = ("submit.ipynb", "--hand-in", None, "--token-file", "token")
    with serving(standin.app()) as url, forwarding_proxy() as (proxy, log):
        args = [url if a is None else a for a in hand_in]
        through = proxy.replace("http://", "http://student:s%40cret@")
        done = _grade(tmp_path, *args, env=_env(tmp_path, HTTP_PROXY=through))
        assert done.returncode == 0, done.stderr
        assert done.stdout.endswith("Graded: 100 / 100.\n") and (tmp_path / "submit.hand-in.json").is_file()
        assert log.requests[0][:2] == ("POST", f"{url}/api/hand-ins")
        assert {line[1].rsplit("/", 1)[0] for line in log.requests[1:]} == {f"{url}/api/hand-ins"}  # the polls
        assert {line[2] for line in log.requests} == {"Basic " + base64.b64encode(b"student:s@cret").decode()}
        asked = len(log.requests)
        direct = _grade(tmp_path, *args, env=_env(tmp_path, HTTP_PROXY=through, NO_PROXY="127.0.0.1"))
        assert direct.returncode == 0, direct.stderr
        assert len(log.requests) == asked
    gone = f"127.0.0.1:{closed_port()}"
    unreachable = _grade(tmp_path, *args, env=_env(tmp_path, HTTP_PROXY=f"http://{gone}"))
    assert unreachable.returncode == 3
    assert unreachable.stderr == (f"grade: could not reach the hand-in service at {url} through the proxy {gone}: "
                                  "Connection refused; your notebook was not handed in\n")


@pytest.mark.parametrize(("args", "said"), [
    (("--hand-in", "ftp://grade.example.edu"), "--hand-in needs the hand-in service's address, such as "
     "https://grade.example.edu, not ftp://grade.example.edu"),
    (("--hand-in",), "this pack knows no hand-in service: pass its address, --hand-in URL (your course says "
     "which)"),
    (("--hand-in", "http://127.0.0.1:9", "--token-file", "missing"), "could not read the token file missing "
     "(No such file or directory)"),
    (("--hand-in", "http://127.0.0.1:9"), "no token to hand in with: put the token your course gave you in "
     "~/.config/jax-course/token, or pass --token-file FILE (or set GRADE_TOKEN)"),
    (("--hand-in", "http://127.0.0.1:9", "--token-file", "blank"), "blank holds no token (one line of letters, "
     "digits and punctuation): put the token your course gave you there"),
    (("--hand-in", "http://127.0.0.1:9", "--json", "-"), "--hand-in prints the verdict: write the report to a "
     "file with --json FILE, not -"),
    (("--token-file", "blank"), "--token-file is for handing in: add --hand-in"),
])
def test_bad_usage_is_said_before_the_notebook_is_checked(tmp_path: Path, args: tuple[str, ...],
                                                          said: str) -> None:
    """Before any cell runs (no report written): one sentence, exit 2."""
    _notebook(tmp_path)
    (tmp_path / "blank").write_text("\n  \n")
    done = _grade(tmp_path, "submit.ipynb", *args, env=_env(tmp_path))
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"grade: {said}\n")
    assert not (tmp_path / "submit.report.json").exists()


def test_hand_in_before_the_notebook_means_the_pack_s_address(tmp_path: Path) -> None:
    """`grade --hand-in submit.ipynb`: the notebook, handed in to the pack's address (none here)."""
    _notebook(tmp_path)
    done = _grade(tmp_path, "--hand-in", "submit.ipynb", env=_env(tmp_path))
    assert (done.returncode, done.stderr) == (2, "grade: this pack knows no hand-in service: pass its address, "
                                                 "--hand-in URL (your course says which)\n")


@pytest.mark.kernel  # builds a pack
def test_the_pack_carries_the_service_s_address(tmp_path: Path) -> None:
    """`grade pack --hand-in-url URL`: the wheel's course.json holds it, STUDENTS.md says how to hand in;
    an address that is none is one sentence."""
    import zipfile

    from grader.course.pack import build_pack
    from grader.errors import UsageError

    wheel = build_pack("ch2-jit", tmp_path, hand_in_url="https://grade.example.edu/jax/")
    with zipfile.ZipFile(wheel) as archive:
        course = json.loads(archive.read("jax_course_ch2_jit/_assignments/course.json"))
    assert course["hand_in_url"] == "https://grade.example.edu/jax"
    students = (tmp_path / "STUDENTS.md").read_text(encoding="utf-8")
    assert "`grade ch2-jit.ipynb --hand-in`" in students and "~/.config/jax-course/token" in students
    assert "https://grade.example.edu/jax/ does the same from a" in students
    with pytest.raises(UsageError, match="--hand-in-url needs the hand-in service's address"):
        build_pack("ch2-jit", tmp_path / "bad", hand_in_url="grade.example.edu")
    plain = build_pack("ch2-jit", tmp_path / "plain")
    with zipfile.ZipFile(plain) as archive:
        assert "hand_in_url" not in json.loads(archive.read("jax_course_ch2_jit/_assignments/course.json"))
    assert "## Handing in" not in (tmp_path / "plain" / "STUDENTS.md").read_text(encoding="utf-8")
