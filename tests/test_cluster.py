"""The Dask executor: same reports as the serial one on a real local cluster; failures; the extra."""

from __future__ import annotations

import builtins
import os
import socket
from concurrent.futures import CancelledError
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")
import dask

from grader.batch.cluster import MISSING_EXTRA, DaskExecutor, _outcome, worker_facts, worker_problems
from grader.batch.executors import SerialExecutor, Task
from grader.errors import AssignmentNotFound, KernelStartFailed, SpecInvalid, UsageError
from grader.options import GradeOptions

ROOT = Path(__file__).resolve().parent.parent
OPTIONS = GradeOptions(assignment="ch2-jit", seed=1)


def test_missing_extra_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_distributed(name, *args, **kwargs):
        if name == "distributed" or name.startswith("distributed."):
            raise ModuleNotFoundError("No module named 'distributed'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_distributed)
    with pytest.raises(UsageError) as caught:
        DaskExecutor("tcp://127.0.0.1:8786")
    assert str(caught.value) == "--scheduler needs the cluster extra: pip install '.[cluster]'"
    assert str(caught.value) == MISSING_EXTRA


class _Finished:
    """A stand-in for a distributed Future whose task raised `exc` on its worker."""

    def __init__(self, exc: BaseException):
        self.exc = exc

    def result(self):
        raise self.exc


def test_what_a_worker_raises() -> None:
    task = Task(student="zed", path="zed.py", options=OPTIONS)
    report = _outcome(_Finished(RuntimeError("boom\nmore lines")), task)
    assert report.status == "error" and report.score == 0 and report.student == "zed"
    assert report.error.endswith("(a grader bug; please report it): RuntimeError: boom")  # one line
    killed = distributed.KilledWorker("key", None, 3)
    assert "died" in _outcome(_Finished(killed), task).error
    # infrastructure: a grader that cannot start kernels, a broken spec, a lost scheduler
    for exc in (KernelStartFailed("no python3"), SpecInvalid("ch2-jit", ["points: < 0"]),
                CancelledError("scheduler-connection-lost")):
        with pytest.raises(type(exc)):
            _outcome(_Finished(exc), task)


def test_worker_problems_name_the_worker_and_the_fix() -> None:
    here = worker_facts([], sandbox=False)
    assert worker_problems(here, {"tcp://a:1": dict(here)}) == []
    blind = dict(here, host="b", cwd="/home/b", unseen=["subs/alice.py"], jax="0.0.1",
                 **{"sandbox missing": {"namespaces": "bubblewrap is not installed", "cgroups": "none here"}})
    problems = worker_problems(here, {"tcp://b:1": blind})
    assert len(problems) == 3
    assert problems[0].startswith("worker tcp://b:1 on b has jax 0.0.1")
    assert "cannot read 1 submission(s), e.g. subs/alice.py (its directory: /home/b)" in problems[1]
    assert "lacks the sandbox: namespaces (bubblewrap is not installed)" in problems[2]
    assert "cgroups" not in problems[2]  # a batch grades without cgroups (rlimits): not a worker's fault
    rootless = dict(here, **{"sandbox missing": {"cgroups": "none here", "scratch": "a plain folder"}})
    assert worker_problems(here, {"tcp://c:1": rootless}) == []


@pytest.fixture(scope="module")
def cluster_client(tmp_path_factory: pytest.TempPathFactory):
    # Dask's scratch (by default /tmp/dask-scratch-space, kept after the cluster stops) in the
    # test's own temporary folder; its scheduler's HTTP server (metrics, health) on a free port: with
    # dashboard_address=None it still takes 8787, and a cluster another test runs beside it holds that
    with dask.config.set({"temporary-directory": str(tmp_path_factory.mktemp("dask"))}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     dashboard_address=":0") as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        yield client


@pytest.mark.kernel
def test_cluster_grades_like_serial(cluster_client, tmp_path: Path) -> None:
    copy = tmp_path / "copy.py"
    copy.write_bytes((ROOT / "solutions" / "ch2-jit.py").read_bytes())
    bad = tmp_path / "bad.ipynb"
    bad.write_text("{ not json", encoding="utf-8")
    tasks = [Task(student="ref", path=str(ROOT / "solutions" / "ch2-jit.py"), options=OPTIONS),
             Task(student="template", path=str(ROOT / "student_template" / "ch2-jit.ipynb"), options=OPTIONS),
             Task(student="copy", path=str(copy), options=OPTIONS),
             Task(student="bad", path=str(bad), options=OPTIONS),
             Task(student="text", path=str(tmp_path / "notes.txt"), options=OPTIONS)]

    def outcome(executor) -> dict[str, tuple]:
        got = {}
        for task, report in executor.map(tasks):
            assert report.student == task.student
            got[task.student] = (report.status, report.score, report.max_score, report.seed,
                                 report.submission.path, report.error,
                                 [(c.id, c.status, c.score) for e in report.exercises for c in e.checks])
        return got

    on_cluster = outcome(DaskExecutor(cluster_client))
    assert on_cluster == outcome(SerialExecutor())
    assert {s: r[:2] for s, r in on_cluster.items()} == {
        "ref": ("graded", 100.0), "template": ("graded", 0.0), "copy": ("graded", 100.0),
        "bad": ("error", 0.0), "text": ("error", 0.0)}
    assert "not a valid Jupyter notebook" in on_cluster["bad"][5]


@pytest.mark.kernel
def test_a_task_raising_on_a_worker(cluster_client, tmp_path: Path) -> None:
    """A submission that cannot be read raises inside grade_task on the worker: that student's
    error report (grader.faults). An assignment the instructor named wrongly stops the batch.

    The executor connects to the scheduler's address itself here, and closes that connection.
    """
    bad = tmp_path / "lost.py"
    bad.write_bytes(b"\xff\xfe not utf-8")
    # unsandboxed: no worker boots fork servers (a kernel and a verifier each) for gradings that never run
    unsandboxed = OPTIONS.model_copy(update={"sandbox": False})
    tasks = [Task(student="lost", path=str(bad), options=unsandboxed)]
    executor = DaskExecutor(cluster_client.scheduler.address)
    [(task, report)] = list(executor.map(tasks))
    assert task is tasks[0] and report.status == "error" and report.student == "lost"
    assert "UTF-8" in report.error
    assert executor._client is None
    wrong = [Task(student="x", path=str(ROOT / "solutions" / "ch2-jit.py"),
                  options=GradeOptions(assignment="no-such-assignment", seed=1, sandbox=False))]
    with pytest.raises(AssignmentNotFound):
        list(DaskExecutor(cluster_client.scheduler.address).map(wrong))


def test_workers_that_cannot_see_the_submissions_stop_the_batch(
        cluster_client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers started in another directory than the client's relative paths: refused up front."""
    monkeypatch.chdir(ROOT)
    tasks = [Task(student="ref", path="solutions/ch2-jit.py", options=OPTIONS)]
    before = cluster_client.run(os.getcwd)
    cluster_client.run(os.chdir, str(tmp_path))
    try:
        with pytest.raises(UsageError, match=r"cannot read 1 submission\(s\), e.g. solutions/ch2-jit.py"):
            list(DaskExecutor(cluster_client).map(tasks))
    finally:
        for worker, cwd in before.items():
            cluster_client.run(os.chdir, cwd, workers=[worker])


def test_unreachable_scheduler_is_a_usage_error() -> None:
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}), \
            pytest.raises(UsageError, match=f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}"):
        DaskExecutor(f"tcp://127.0.0.1:{port}")


def _profiling(client) -> set[bool]:
    return set(client.run(lambda dask_worker: dask_worker.periodic_callbacks["profile"].is_running()).values())


def test_a_batch_pauses_the_workers_profiler_and_resumes_it(cluster_client) -> None:
    """Dask samples every task thread every 10 ms: paused while the grader's batch runs, running
    again after it, as the instructor's cluster had it."""
    from grader.batch.cluster import close_warm_workers, start_servers

    assert _profiling(cluster_client) == {True}
    cluster_client.run(start_servers, False)  # what a batch runs on its workers as it starts
    assert _profiling(cluster_client) == {False}
    cluster_client.run(close_warm_workers)  # and as it ends
    assert _profiling(cluster_client) == {True}
