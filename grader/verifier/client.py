"""The grader's side of the verifier: start it in a sandbox, give it jobs, read bounded answers.

One `Verifier` per submission. `launch()` starts the process when the submission's grading
starts (it imports JAX while the kernel runs); `run()` sends jobs one at a time and reads each
answer with a deadline; `close()` kills it and tears its sandbox down. The verifier executes
hostile StableHLO, so it runs in the same sandbox as a kernel (grader/sandbox/layers.py, with the
verifier's runtime directory instead of the probe's and no connection file), and everything it
sends is hostile data, checked here like a kernel's observations:

    a line      at most MAX_LINE_BYTES, read from the pipe in bounded chunks (a 1 GB line is
                never buffered); at most MAX_RESULT_NODES JSON values (counted on the bytes
                before parsing, then by `measure()`), then the pydantic models below
    an answer   for the job that was sent (its id), with one list of outputs per call, each of
                the shapes the module declares

A job that is still running at its deadline gets "timeout"; a verifier that dies during a job
gives it "crashed"; a line that fails a check gives it "crashed" too. A result is used only once
the process that sent it has answered a ping after it (`Verifier._confirm`): a module that
damaged the verifier's memory may have it write values (whatever the memory held) and die
afterwards, and those values must never reach a student. In each case the process is
killed and a fresh one (a fresh sandbox) does the next job. The budget of those restarts is per
student function (`VerifierJob.functions`, the functions whose program a job's module is): the
jobs of one function may kill `max_restarts` + 1 verifiers, after which that function's
remaining jobs are not run ("crashed", saying so), while the other functions' jobs still run;
memory bombs in one function no longer take the hidden checks of the functions that were right.
A submission's verifier starts at most `max_starts` processes in all (each start is a boot or a
fork): a bound on what a submission whose every function crashes can cost, which only one that
uses up the budgets of several functions meets.

Time: `run(jobs, timeout)` gives the jobs `timeout` seconds in all, not counting the verifier's
boots. Each job's deadline is its share of what is left, (time left) / (jobs left), so a job
that hangs costs its own share only and time that fast jobs leave passes on to the later
ones: every job gets at least timeout / len(jobs). A boot is bounded by `boot_timeout`; a
verifier that cannot boot is the grader's fault (VerifierStartFailed, exit 3), not a student's.
Once a module of a function ran past its deadline, that function's later modules are not run
in this submission (a "timeout" that says so, as the kernel does not call a function that hung
again): an endless loop costs the student one limit, not one per check. A job that runs nothing
(a module's facts) and a knockout still run.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from typing import Self


from grader import runtime_paths
from grader.errors import KernelError, MachineOverloaded
from grader.sandbox import lifetime
from grader.sandbox.layers import (
    VERIFIER_INSIDE,
    Sandbox,
    SandboxPolicy,
    available,
    launch_environment,
    out_of_memory,
    peak_memory_bytes,
)
from grader.sandbox.starvation import CpuMeter, starved_window
from grader.verifier.protocol import (
    MAX_LINE_BYTES,
    BadAnswer,
    VerifierJob,
    VerifierResult,
    VerifierStatus,
    _short,
    is_pong,
    job_line,
    parse_result,
    ping_line,
)

RUNTIME = VERIFIER_INSIDE / "runtime.py"
BOOT_TIMEOUT_S = 60.0
MAX_RESTARTS = 5
"""Verifiers one function's programs may kill beyond the first (crashes, hangs): 6 in all."""
MAX_STARTS = 4 * (MAX_RESTARTS + 1)
"""Verifier processes one submission may start in all: four functions' budgets."""
DEFAULT_POLICY = SandboxPolicy()  # the kernels' limits
PING_GRACE_S = 10.0
"""How long a verifier has to answer the ping after a result, at least (it only writes a line)."""
_READ_CHUNK = 1 << 20
_EXIT_WAIT_S = 2.0  # after EOF, how long a dying verifier is given to be reaped



class VerifierStartFailed(KernelError):
    """The verifier could not be started or did not become ready: the machine's fault."""

    def __init__(self, reason: str):
        super().__init__(f"could not start the verifier: {reason}")
        self.reason = reason


# ----------------------------------------------------------------------------- the process


class _Dead(Exception):
    """The verifier's end of a pipe is closed: it exited (or was killed)."""


class _LineTooLong(Exception):
    pass


class _Lines:
    """Lines from a non-blocking pipe, with deadlines, never buffering more than `cap` bytes."""

    def __init__(self, fd: int, cap: int):
        self.fd, self.cap = fd, cap
        self.buffer = bytearray()
        self._scanned = 0
        os.set_blocking(fd, False)
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)

    def pending(self) -> bool:
        return bool(self.buffer)

    def readline(self, deadline: float) -> bytes:
        """The next line (without its newline); TimeoutError, _Dead or _LineTooLong."""
        while True:
            end = self.buffer.find(b"\n", self._scanned)
            if end >= 0:
                line = bytes(self.buffer[:end])
                del self.buffer[: end + 1]
                self._scanned = 0
                return line
            self._scanned = len(self.buffer)
            if len(self.buffer) > self.cap:
                raise _LineTooLong
            left = deadline - time.monotonic()
            # past the deadline, what is already in the pipe is still read (a verifier started
            # early may have been ready long before it is first asked, after slow student cells)
            if not self._poll.poll(max(1, int(left * 1000)) if left > 0 else 0):
                if left <= 0:
                    raise TimeoutError
                continue
            try:
                chunk = os.read(self.fd, min(_READ_CHUNK, self.cap + 1 - len(self.buffer)))
            except BlockingIOError:
                continue
            if not chunk:
                raise _Dead
            self.buffer += chunk


def _write_all(fd: int, data: bytes, deadline: float) -> None:
    poll = select.poll()
    poll.register(fd, select.POLLOUT | select.POLLERR | select.POLLHUP)
    view = memoryview(data)
    while view:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        if not poll.poll(max(1, int(left * 1000))):
            continue
        try:
            n = os.write(fd, view[:_READ_CHUNK])
        except BlockingIOError:
            continue
        except (BrokenPipeError, ConnectionResetError):
            raise _Dead from None
        view = view[n:]


def _scratch_directory() -> Path:
    return runtime_paths.scratch_directory("verify")


def runtime_command() -> list[str]:
    """The verifier's program: the runtime file, in isolated mode (no PYTHON* variables, no user
    site, not its directory on sys.path), writing no bytecode."""
    return [sys.executable, "-I", "-B", str(RUNTIME)]


def ready_version(line: bytes) -> str:
    """The JAX version a verifier's first line announces (ValueError, UnicodeDecodeError or
    RecursionError when it is not a ready line)."""
    ready = json.loads(line.decode("utf-8"))
    if not (isinstance(ready, dict) and ready.get("ready") is True and isinstance(ready.get("jax"), str)):
        raise ValueError("not a ready line")
    return _short(ready["jax"], 40)


def death_detail(status: str | None, out_of_memory: bool, policy: SandboxPolicy | None) -> str:
    """Why a verifier died, for a crashed job's detail: its exit status where it is known, and
    its memory limit when its cgroup hit it."""
    died = f"the verifier died ({status})" if status else "the verifier died"
    if out_of_memory:
        limit = policy.memory_bytes if policy else None
        return f"{died} at its memory limit" + (f" of {limit / 2**30:.3g} GiB" if limit else "")
    return died


class Booting:
    """A verifier process between its start and its ready line (`started`, `ready_at`)."""

    started: float
    ready_at: float | None

    @property
    def ready(self) -> bool:
        return self.ready_at is not None

    @property
    def boot_seconds(self) -> float | None:
        return None if self.ready_at is None else self.ready_at - self.started


class VerifierProcess(Booting):
    """One verifier process (or `argv`, for tests) in a fresh sandbox of its own; `kill()` ends
    it and removes the sandbox (processes, cgroups, the scratch mount and directory)."""

    def __init__(self, policy: SandboxPolicy | None, argv: Sequence[str] | None = None):
        self.scratch = _scratch_directory()
        lifetime.track(self)
        self.sandbox = (Sandbox(self.scratch, policy, available(), runtime_dir=VERIFIER_INSIDE)
                        if policy else None)
        self.started = time.monotonic()
        self.ready_at: float | None = None
        self.jax_version: str | None = None
        self.popen: subprocess.Popen | None = None
        command = list(argv) if argv is not None else runtime_command()
        try:
            if self.sandbox:
                self.sandbox.prepare()
                command = self.sandbox.wrap(command)
            self.popen = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                cwd=self.scratch, env=launch_environment(self.scratch), start_new_session=True)
        except BaseException as exc:
            self.kill()
            if not isinstance(exc, Exception):
                raise
            raise VerifierStartFailed(f"{type(exc).__name__}: {exc}") from None
        assert self.popen.stdin is not None and self.popen.stdout is not None
        os.set_blocking(self.popen.stdin.fileno(), False)
        self.lines = _Lines(self.popen.stdout.fileno(), MAX_LINE_BYTES)

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def wait_ready(self, timeout: float) -> None:
        """Read the ready line; VerifierStartFailed (the process killed) when it does not come."""
        if self.ready:
            return
        deadline = self.started + timeout
        try:
            version = ready_version(self.lines.readline(deadline))
        except TimeoutError:
            why = f"not ready after {timeout:g} s"
        except _Dead:
            why = f"it exited while starting ({self.exit_status()})"
        except (_LineTooLong, UnicodeDecodeError, ValueError, RecursionError) as exc:
            why = f"its first line is not a ready line ({type(exc).__name__})"
        else:
            self.ready_at = time.monotonic()
            self.jax_version = version
            return
        self.kill()
        raise VerifierStartFailed(why)

    def send(self, data: bytes, deadline: float) -> None:
        if self.popen is None or self.popen.stdin is None:
            raise _Dead
        _write_all(self.popen.stdin.fileno(), data, deadline)

    def readline(self, deadline: float) -> bytes:
        return self.lines.readline(deadline)

    def exit_status(self) -> str:
        """How the process ended, in words (it is waited for a moment)."""
        if self.popen is None:
            return "it was never started"
        try:
            code = self.popen.wait(timeout=_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            return "its output closed"
        if code < 0:
            return f"killed by signal {-code}"
        if code > 128 and self.sandbox and self.sandbox.has("namespaces"):
            return f"killed by signal {code - 128}"  # bubblewrap reports its child's signal so
        return f"exit status {code}"

    def out_of_memory(self) -> bool:
        """Whether the sandbox's memory cgroup has killed a process or hit its limit."""
        return out_of_memory(self.sandbox.cgroup("memory") if self.sandbox else None)

    def peak_memory_bytes(self) -> int | None:
        """The sandbox's peak memory use (cgroup v1 memory.max_usage_in_bytes)."""
        return peak_memory_bytes(self.sandbox.cgroup("memory") if self.sandbox else None)

    def cpu_group(self) -> Path | None:
        """The sandbox's cpuacct cgroup, whose CPU time tells a starved timeout (grader/sandbox/starvation.py)."""
        return self.sandbox.cgroup("cpuacct") if self.sandbox else None

    def death(self) -> str:
        """Why the process died, for a crashed job's detail."""
        return death_detail(self.exit_status(), self.out_of_memory(), self.sandbox.policy if self.sandbox else None)

    def kill(self) -> None:
        """Kill the process and everything in its sandbox; remove the sandbox. Idempotent."""
        lifetime.untrack(self)
        popen, self.popen = self.popen, None
        if popen is not None:
            if popen.poll() is None:
                try:
                    os.killpg(popen.pid, signal.SIGKILL)  # its session: start_new_session
                except (ProcessLookupError, PermissionError):
                    pass
                popen.kill()
            try:
                popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for pipe in (popen.stdin, popen.stdout):
                try:
                    if pipe is not None:
                        pipe.close()
                except OSError:
                    pass
        if self.sandbox is not None:
            self.sandbox.cleanup()  # whatever it started, wherever it went
        shutil.rmtree(self.scratch, ignore_errors=True)


# ----------------------------------------------------------------------------- the verifier


def _runs_values(job: VerifierJob) -> bool:
    """A job that runs its module on inputs for their values (not one reading its facts only,
    nor a knockout, whose modified module may hang where the student's does not)."""
    return bool(job.calls) and not job.knockouts


class _Spawner(Protocol):
    """Where verifier processes come from instead of a fresh boot (forkserver.VerifierServer)."""

    def fork(self) -> VerifierProcess: ...


class _Answers(Protocol):
    """Answers already given for identical jobs (result_cache.ResultCache)."""

    def get(self, job: VerifierJob) -> VerifierResult | None: ...

    def put(self, job: VerifierJob, result: VerifierResult, size: int) -> None: ...


class Verifier:
    """The verifier of one submission. `sandbox=None` runs it unsandboxed (--no-sandbox).

    In a batch worker, `server` forks its processes from a warm fork server (forkserver.py)
    instead of booting each, and `answers` gives a job whose module and inputs were answered
    before that answer without running it (result_cache.py). With a server, a process is only
    made when a job needs one."""

    def __init__(self, sandbox: SandboxPolicy | None = DEFAULT_POLICY, *,
                 boot_timeout: float = BOOT_TIMEOUT_S, max_restarts: int = MAX_RESTARTS,
                 program: Sequence[str] | None = None, server: _Spawner | None = None,
                 answers: _Answers | None = None, max_starts: int = MAX_STARTS):
        """`program` replaces the runtime by another command in the same sandbox (tests only:
        a verifier that misbehaves)."""
        self.policy = sandbox
        self.program = list(program) if program is not None else None
        self.server = server
        self.answers = answers
        self.boot_timeout = boot_timeout
        self.max_restarts = max_restarts  # per function: see the module docstring
        self.max_starts = max_starts
        self.restarts = 0  # processes started after the first
        self.kills: dict[str, int] = {}  # verifiers each function's jobs killed ("": a job of no function)
        self._last: list[str] = []  # the functions of the job the current process ran last
        self._hung: dict[str, str] = {}  # function -> how a run of one of its modules timed out
        self.boot_seconds: float | None = None  # launch to ready, of the latest process
        self.jax_version: str | None = None
        self._process: VerifierProcess | None = None
        self._started = 0
        self._pings = 0

    @property
    def process(self) -> VerifierProcess | None:
        """The current process (None between a kill and the next job)."""
        return self._process

    def launch(self) -> Verifier:
        """Start the verifier now and return at once: it boots (imports JAX) meanwhile. With a
        fork server, nothing: a fork is cheap, and a batch's jobs may all be answered already."""
        if self.server is None:
            self._start()
        return self

    def _start(self) -> None:
        if self._process is None:
            self._process = self.server.fork() if self.server is not None else VerifierProcess(self.policy, self.program)
            self._started += 1

    def wait_ready(self) -> Verifier:
        """Launch (if not yet) and wait until the verifier is ready."""
        self._start()
        assert self._process is not None
        try:
            self._process.wait_ready(self.boot_timeout)
        except VerifierStartFailed:
            self._process = None  # killed already
            raise
        self.boot_seconds = self._process.boot_seconds
        self.jax_version = self._process.jax_version
        return self

    def _ready_process(self, job: VerifierJob) -> VerifierProcess | None:
        """A ready verifier for `job`, a fresh one if the last one died or spoke out of turn (the
        job it ran last is charged); None when the job's functions have used up their restarts,
        or the submission its starts."""
        proc = self._process
        if proc is not None and (not proc.alive() or proc.lines.pending()):
            self._charge(self._last)
            self._kill()
        if self._spent(job):
            return None
        if self._process is None:
            if self._started >= self.max_starts:
                return None
            if self._started > 0:
                self.restarts += 1
            self._start()
        self.wait_ready()
        self._last = list(job.functions)
        return self._process

    @staticmethod
    def _owners(functions: Sequence[str]) -> list[str]:
        return list(functions) or [""]

    def _charge(self, functions: Sequence[str]) -> None:
        """A verifier killed by a job of these functions (it hung, died or misspoke)."""
        for name in self._owners(functions):
            self.kills[name] = self.kills.get(name, 0) + 1

    def _spent(self, job: VerifierJob) -> bool:
        """Whether every function the job's module belongs to has killed the first verifier and
        `max_restarts` more: the module is theirs alone to answer for."""
        return all(self.kills.get(name, 0) > self.max_restarts for name in self._owners(job.functions))

    def _used_up(self, job: VerifierJob) -> str:
        """Why a job is not run: its functions' own programs crashed or hung the verifier that
        often (or the submission's did, in all), which its check's message then says."""
        if not self._spent(job):
            times = f"{self._started} time{'s' if self._started != 1 else ''}"
            return (f"not run: this submission's programs crashed or hung the verifier {times}, the most one "
                    "submission may (a fresh verifier each time)")
        count = min(self.kills.get(name, 0) for name in self._owners(job.functions))
        times = f"{count} time{'s' if count != 1 else ''}"
        names = [name for name in job.functions if name]
        if not names:
            return (f"not run: this submission's earlier programs crashed or hung the verifier {times}, "
                    "the most one submission may (a fresh verifier each time)")
        whose = " and ".join(f"`{name}`" for name in names)
        return (f"not run: the earlier programs of {whose} crashed or hung the verifier {times}, the most "
                "one function's may (a fresh verifier each time)")

    def _hung_before(self, job: VerifierJob) -> VerifierResult | None:
        """A "timeout" for a job whose every function had a module run past its deadline earlier
        in this submission (None for any other job): not run again."""
        if not (_runs_values(job) and job.functions and all(name in self._hung for name in job.functions)):
            return None
        return VerifierResult(id=job.id, status="timeout",
                              detail=f"{self._hung[job.functions[0]]} in an earlier check; not run again")

    def _kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process = None

    def run(self, jobs: Sequence[VerifierJob], timeout: float) -> dict[str, VerifierResult]:
        """Do the jobs in order; a result for each, by id. Never raises for what a job holds
        (VerifierStartFailed when a verifier cannot boot; KeyboardInterrupt kills it)."""
        ids = [job.id for job in jobs]
        if len(set(ids)) != len(ids):
            raise ValueError("job ids must be unique")
        if not timeout > 0:
            raise ValueError(f"the jobs need some time, not {timeout!r} s")
        results: dict[str, VerifierResult] = {}
        end: float | None = None
        try:
            for index, job in enumerate(jobs):
                answered = self.answers.get(job) if self.answers is not None else None
                if answered is None:
                    answered = self._hung_before(job)
                if answered is not None:
                    results[job.id] = answered
                    continue
                waited = time.monotonic()
                proc = self._ready_process(job)
                waited = time.monotonic() - waited
                if proc is None:
                    results[job.id] = VerifierResult(id=job.id, status="crashed", detail=self._used_up(job))
                    continue
                now = time.monotonic()
                end = now + timeout if end is None else end + waited  # boots are not the jobs' time
                share = max(0.0, end - now) / (len(jobs) - index)
                results[job.id] = self._do(proc, job, share)
                if self._process is None:  # the job killed it: a restart of its functions'
                    self._charge(job.functions)
                if results[job.id].status == "timeout" and _runs_values(job):
                    self._hung.update(dict.fromkeys(job.functions, results[job.id].detail or "timed out"))
        except BaseException:
            self._kill()
            raise
        return results

    def _do(self, proc: VerifierProcess, job: VerifierJob, share: float) -> VerifierResult:
        started = time.monotonic()
        deadline = started + share

        def ended(status: VerifierStatus, detail: str) -> VerifierResult:
            return VerifierResult(id=job.id, status=status, detail=detail, seconds=time.monotonic() - started)

        meter = CpuMeter(proc.cpu_group())
        try:
            proc.send(job_line(job), deadline)
            line = proc.readline(deadline)
        except TimeoutError:
            starved = starved_window(meter)  # read before the kill takes its threads away
            self._kill()
            if starved is not None:  # not the module's timeout: grade_one grades it again
                raise MachineOverloaded("a verifier job", starved.describe()) from None
            return ended("timeout", f"still running after {share:.3g} s")
        except _Dead:
            detail = proc.death()
            self._kill()
            return ended("crashed", detail)
        except _LineTooLong:
            self._kill()
            return ended("crashed", f"the verifier sent a line over {MAX_LINE_BYTES // 2**20} MiB")
        try:
            result = parse_result(line, job)
        except BadAnswer as exc:
            self._kill()
            return ended("crashed", _short(f"the verifier sent an answer the grader cannot accept: {exc}"))
        distrust = self._confirm(proc, max(deadline, time.monotonic() + PING_GRACE_S))
        if distrust is not None:
            self._kill()
            return ended("crashed", distrust)
        if self.answers is not None:
            self.answers.put(job, result, len(line))
        return result.model_copy(update={"seconds": time.monotonic() - started})

    def _confirm(self, proc: VerifierProcess, deadline: float) -> str | None:
        """None when the verifier answers a ping after its result; otherwise why the result is not
        used (it died or stopped answering after writing it: what it wrote may be the memory of a
        process a module damaged)."""
        self._pings += 1
        try:
            proc.send(ping_line(self._pings), deadline)
            answer = proc.readline(deadline)
        except _Dead:
            return f"{proc.death()} after sending its answer, which is not used"
        except (TimeoutError, _LineTooLong):
            return "the verifier stopped answering after sending its answer, which is not used"
        if not is_pong(answer, self._pings):
            return "the verifier sent something else than the answer to a ping after its answer"
        return None

    def peak_memory_bytes(self) -> int | None:
        """Peak memory of the current process's sandbox (None without the cgroup layer)."""
        return self._process.peak_memory_bytes() if self._process else None

    def close(self) -> None:
        """Kill the verifier and remove its sandbox: no process, cgroup or mount is left."""
        self._kill()

    def __enter__(self) -> Self:
        return self.launch()

    def __exit__(self, *exc: object) -> None:
        self.close()
