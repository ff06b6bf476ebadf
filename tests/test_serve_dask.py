"""`grade serve --scheduler`: the hand-in service grading on a real Dask cluster on loopback (a
scheduler and one worker process started with `--preload grader.batch.preload`), driven over
HTTP as a student drives it; its verdicts are the local workers' for the same hand-in and seed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")
import dask

from test_serve import NOTEBOOK, SANDBOX_ARGS, Served, endless, issue_tokens, start

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[distributed.Client]:
    with dask.config.set({"temporary-directory": str(tmp_path_factory.mktemp("dask"))}), \
            distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                     dashboard_address=":0", preload=["grader.batch.preload"]) as local, \
            distributed.Client(local, set_as_default=False) as client:
        yield client


def _stopped(served: Served) -> None:
    """SIGTERM, as test_serve stops its services: it stops cleanly (or by the signal's own status)."""
    code = served.stop()
    assert code in (0, 143) and "grade serve: stopped" in served.log.read_text(), served.log.read_text()


def _graded(served: Served, student: str) -> dict:
    reply = served.hand_in(student, NOTEBOOK)
    assert reply.status_code == 202, reply.text
    status = served.finished(student, reply.json()["id"])
    assert status["state"] == "graded", status
    return status


def _verdicts(status: dict) -> dict[str, tuple]:
    return {c["id"]: (c["status"], c["score"], c["max_score"])
            for e in status["report"]["exercises"] for c in e["checks"]}


def test_hand_ins_graded_on_dask_workers_match_the_local_ones(cluster: distributed.Client,
                                                              tmp_path: Path) -> None:
    preloaded = cluster.run(lambda: "jax" in sys.modules and "grader.pipeline" in sys.modules)
    assert set(preloaded.values()) == {True}
    if not SANDBOX_ARGS:  # the whole sandbox here: the preload's fork servers are booting, for the first task

        def early() -> list[str]:
            from grader.batch import early_servers

            return sorted(kind for kind, _ in early_servers._servers)

        assert list(cluster.run(early).values()) == [["kernel", "verifier"]]
    out = tmp_path / "out"
    roster = tmp_path / "roster.txt"
    roster.write_text("student\nalice\nbob\n", encoding="utf-8")
    tokens = issue_tokens(out, roster)

    on_dask = start(out, roster, tokens, "--scheduler", cluster.scheduler.address)
    try:
        assert f"the Dask workers of {cluster.scheduler.address}" in on_dask.log.read_text()
        remote = _graded(on_dask, "alice")
    finally:
        _stopped(on_dask)
    assert remote["score"] == 100 and remote["max_score"] == 100

    local = start(out, roster, tokens)  # the same OUT: the same seed for life
    try:
        here = _graded(local, "bob")
    finally:
        _stopped(local)
    assert remote["report"]["seed"] == here["report"]["seed"]
    assert _verdicts(remote) == _verdicts(here) and _verdicts(remote)
    assert (remote["score"], remote["message"]) == (here["score"], here["message"])


def test_a_hand_in_past_its_deadline_is_cancelled_on_the_cluster(cluster: distributed.Client, tmp_path: Path) -> None:
    """`abandon` cancels the Dask task and restarts the worker grading it (its nanny's fresh one,
    warm by the preload), as a local backend kills its worker: tried once more, then not graded;
    the next hand-in is graded on the restarted worker, and the service stops cleanly."""
    out = tmp_path / "out"
    roster = tmp_path / "roster.txt"
    roster.write_text("student\nslow\nnext\n", encoding="utf-8")
    before = set(cluster.run(os.getpid).values())
    served = start(out, roster, issue_tokens(out, roster), "--scheduler", cluster.scheduler.address,
                   "--deadline", "4")
    try:
        reply = served.hand_in("slow", endless(tmp_path))
        assert reply.status_code == 202, reply.text
        status = served.finished("slow", reply.json()["id"])
        assert status["state"] == "not_graded", status
        assert status["message"] == ("not graded: the grading machine did not finish it; hand in again "
                                     "(this costs no attempt)")
        assert _graded(served, "next")["score"] == 100
    finally:
        _stopped(served)
    after = set(cluster.run(os.getpid).values())
    assert after and not after & before  # the worker that held the endless loop was replaced


def test_a_scheduler_nobody_answers_is_one_sentence(tmp_path: Path) -> None:
    roster = tmp_path / "roster.txt"
    roster.write_text("student\nalice\n", encoding="utf-8")
    out = tmp_path / "out"
    issue_tokens(out, roster)
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = dict(os.environ, DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="1s")
    done = subprocess.run([sys.executable, "-m", "grader", "serve", str(out), "-a", "ch2-jit", "--roster",
                           str(roster), "--port", "0", "--no-sandbox", "--scheduler", f"tcp://127.0.0.1:{port}"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}" in done.stderr
    refused = subprocess.run([sys.executable, "-m", "grader", "serve", str(out), "-a", "ch2-jit", "--roster",
                              str(roster), "-j", "2", "--scheduler", f"tcp://127.0.0.1:{port}"],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "-j does not go with --scheduler" in refused.stderr
