"""Grade a batch on a Dask cluster: `grade submissions/ -o reports/ --scheduler tcp://HOST:8786`.

`DaskExecutor` implements the batch `Executor` protocol with `distributed`: one Dask task per
submission runs `grader.batch.executors.grade_task` on some worker (a kernel forked from that worker's warm
kernel server there, as locally: grader/batch/warm_worker.py), and
the reports come back to this process, the client, which writes every output as a local run does.
Workers run the same grader installation, assignments folder and JAX, and read the submissions
at the paths the client names (a shared filesystem); before submitting anything the executor asks
every connected worker and refuses to start if one differs, so 30,000 students never get reports
from a mismatched or blind worker.

A task that raises on its worker (or whose workers kept dying) becomes that student's error
report; a broken grader or spec or a cancelled task (lost scheduler) stops the batch, as it does
locally: `grader.faults` decides which is which. `distributed` is the optional `cluster`
extra, imported only when an executor is made.
"""

from __future__ import annotations

import hashlib
import os
import socket
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from grader.batch.executors import Task, error_report, grade_task
from grader.errors import UsageError
from grader.faults import classify, not_graded, one_line
from grader.report import Report

if TYPE_CHECKING:
    from distributed import Client, Future

MISSING_EXTRA = "--scheduler needs the cluster extra: pip install '.[cluster]'"
SAMPLE_PATHS = 16  # submissions whose visibility each worker confirms before the batch starts


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise UsageError(MISSING_EXTRA) from None
    return distributed


class DaskExecutor:
    """Grades on the workers of a Dask scheduler; yields (task, report) as each finishes.

    `address` is a scheduler address ("tcp://HOST:8786"), connected to now and closed at the end
    of each `map` (and by `close()`); or an existing `distributed.Client`, which stays the
    caller's to close.
    """

    def __init__(self, address: str | Client):
        self._distributed = _distributed()
        if isinstance(address, str):
            self.address: str | None = address
            self._client: Client | None = self._connect()
        elif isinstance(address, self._distributed.Client):
            self.address = None
            self._client = address
        else:
            raise TypeError(f"DaskExecutor needs a scheduler address or a distributed.Client, not {address!r}")

    def _connect(self) -> Client:
        assert self.address is not None
        try:
            return self._distributed.Client(self.address, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise UsageError(f"cannot reach the Dask scheduler at {self.address}: {exc}") from None

    def close(self) -> None:
        """Close the connection this executor opened (never a Client it was given)."""
        if self.address is not None and self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def map(self, tasks: Iterable[Task]) -> Iterator[tuple[Task, Report]]:
        pending: dict[Future, Task] = {}
        try:
            tasks = list(tasks)
            if not tasks:
                return
            if self._client is None:
                self._client = self._connect()
            client = self._client
            check_workers(client, tasks)
            try:  # each worker's fork servers boot while the tasks are sent (grader/batch/early_servers.py)
                client.run(start_servers, any(task.options.sandbox for task in tasks))
            except Exception:  # noqa: BLE001 - only a head start: the first task starts them otherwise
                pass
            run = f"grade_task-{uuid.uuid4().hex[:8]}"  # a rerun never reuses an old result
            keys = [(run, task.student, i) for i, task in enumerate(tasks)]
            futures = client.map(grade_warm, tasks, key=keys, pure=False)
            pending = dict(zip(futures, tasks))
            done = self._distributed.as_completed(futures, loop=client.loop)
            del futures  # a finished future is released once yielded: workers keep no old reports
            for future in done:
                task = pending.pop(future)
                yield task, _outcome(future, task)
        finally:
            if pending:
                client.cancel(list(pending))
                pending.clear()
            if self._client is not None:
                try:  # the workers' fork servers (and what they forked) go with the batch
                    self._client.run(close_warm_workers)
                except Exception:  # noqa: BLE001 - a lost worker has nothing left to close
                    pass
            self.close()


def grade_warm(task: Task) -> Report:
    """What a worker runs per submission: `grade_task` with the worker thread's fork servers
    (grader/batch/warm_worker.py), as a local batch worker does."""
    return grade_task(task, warm=True)


_paused: list[Any] = []  # on a worker: Dask profilers this batch paused, resumed at its end


def start_servers(sandbox: bool, dask_worker: Any = None) -> None:
    """Run on every worker as a batch starts: its fork servers begin to boot, and Dask's
    statistical profiler pauses (it samples the task threads every 10 ms, a few per cent of a
    batch's time on two cores); `close_warm_workers` resumes it."""
    from grader.batch import early_servers

    early_servers.start(sandbox)
    profiler = getattr(dask_worker, "periodic_callbacks", {}).get("profile")
    if profiler is not None and profiler.is_running():
        profiler.stop()
        _paused.append(profiler)


def close_warm_workers() -> None:
    """Run on every worker at a batch's end: its fork servers and their children are killed,
    and the profiler `start_servers` paused runs again."""
    from grader.batch import early_servers, warm_worker
    warm_worker.close_all()
    early_servers.kill_unclaimed()
    while _paused:
        _paused.pop().start()


def _outcome(future: Future, task: Task) -> Report:
    """The report of a finished future. `grade_task` already sorted the grading's own failures
    on the worker (grader.faults); what is left here is a grader fault (re-raised: the batch
    stops), a dropped task (the cluster is broken) or workers that died (that student's report)."""
    from concurrent.futures import CancelledError

    from distributed import KilledWorker

    try:
        result = future.result()
    except CancelledError:  # the scheduler dropped the task: the cluster is broken, not the student
        raise
    except KilledWorker:
        return error_report(task, "every worker that tried to grade it died (a crash or the memory limit of the worker)")
    except Exception as exc:  # noqa: BLE001 - sorted by the one fault boundary
        if classify(exc) == "grader":
            raise
        return not_graded(exc, lambda reason: error_report(task, reason))
    return Report.model_validate_json(result) if isinstance(result, (str, bytes)) else result


# ---------------------------------------------------------------------------- worker check


def _digest(root: Path, pattern: str) -> str:
    h = hashlib.sha256()
    if root.is_dir():
        for path in sorted(root.rglob(pattern)):
            if path.is_file() and "__pycache__" not in path.parts:
                h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def worker_facts(paths: list[str], sandbox: bool) -> dict[str, Any]:
    """What decides a grade on this machine; runs on every worker, and on the client to compare."""
    import grader
    from grader.assignment import assignments_dir
    from grader.report import environment

    env = environment()
    facts: dict[str, Any] = {
        "host": socket.gethostname(),
        "cwd": os.getcwd(),
        "grader": f"{env.grader} (code {_digest(Path(grader.__file__).parent, '*.py')})",
        "assignments": _digest(assignments_dir(), "*"),
        "jax": env.jax,
        "unseen": [p for p in paths if not os.path.isfile(p)],
        "sandbox missing": {},
    }
    if sandbox:
        from grader.sandbox.layers import available

        facts["sandbox missing"] = available().missing
    return facts


def worker_problems(here: dict[str, Any], workers: dict[str, dict[str, Any]]) -> list[str]:
    """One plain line per worker that would grade differently from (or blinder than) the client."""
    from grader.sandbox.layers import CORE_LAYERS

    problems = []
    for name, facts in sorted(workers.items()):
        where = f"worker {name} on {facts['host']}"
        for item in ("grader", "assignments", "jax"):
            if facts[item] != here[item]:
                problems.append(f"{where} has {item} {facts[item]}, the client {here[item]}: "
                                f"install the same grader, assignments folder and JAX everywhere")
        if facts["unseen"]:
            problems.append(f"{where} cannot read {len(facts['unseen'])} submission(s), e.g. "
                            f"{facts['unseen'][0]} (its directory: {facts['cwd']}): put the submissions "
                            "on a shared filesystem at the same path, or pass absolute paths")
        core = {k: v for k, v in facts["sandbox missing"].items() if k in CORE_LAYERS}  # a local batch's rule
        if core:
            problems.append(f"{where} lacks the sandbox: " + "; ".join(f"{k} ({v})" for k, v in core.items())
                            + ": bubblewrap's namespaces and the seccomp filter at least; fix that there, "
                            "or pass --no-sandbox to grade without any sandbox")
    return problems


def check_workers(client: Client, tasks: list[Task]) -> None:
    """Refuse to start if a connected worker would grade differently or cannot see submissions.

    Checks a sample of the submissions (those the client itself can read, spread over the batch)
    and the workers connected now; a worker that joins later is trusted to be set up the same way.
    """
    visible = [t.path for t in tasks if os.path.isfile(t.path)]
    step = max(1, len(visible) // SAMPLE_PATHS)
    sample = visible[::step][:SAMPLE_PATHS]
    sandbox = any(t.options.sandbox for t in tasks)
    here = worker_facts([], sandbox=False)
    try:
        workers = client.run(worker_facts, sample, sandbox)
    except Exception as exc:  # noqa: BLE001 - e.g. a worker without the grader installed
        raise UsageError(f"a Dask worker cannot run the grader: {one_line(exc)}") from None
    problems = worker_problems(here, workers)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UsageError(f"the Dask cluster is not ready: {problems[0]}{more}")
