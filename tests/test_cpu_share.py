"""One student cannot starve another: a CPU share per sandbox, and no verdict from a starved timeout.

Each kernel and verifier has a cgroup v1 cpu group of its own (equal `cpu.shares`) and a cpuacct
group whose CPU time, with its threads' run-queue delay, tells a timeout the student caused from
one the machine caused (grader/sandbox/starvation.py). A starved timeout regrades the submission, and
starved again it is an error report saying the machine was overloaded, never a timeout verdict.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from grader import pipeline
from grader.batch.executors import Task, error_report
from grader.errors import MachineOverloaded
from grader.faults import classify, grade_guarded
from grader.kernel.client import CellRun
from grader.kernel.session import Session
from grader.options import GradeOptions
from grader.report import Report
from grader.sandbox.layers import CGROUP_ROOT, Sandbox, SandboxPolicy, available, owner_tag
from grader.sandbox.starvation import FAIR_CORES, REGRADES, WAITED_SHARE, CpuMeter, CpuWindow, starved
from grader.submission import read_submission

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = (ROOT / "solutions" / "ch2-jit.py").read_text(encoding="utf-8")
ISOLATION = available()
cpu_layer = pytest.mark.skipif("cpu" not in ISOLATION.layers or "cgroups" not in ISOLATION.layers,
                               reason=ISOLATION.missing.get("cpu") or ISOLATION.missing.get("cgroups", ""))


# ----------------------------------------------------------------------------- the decision


def test_starved_only_when_it_wanted_the_cpu_and_did_not_get_its_due() -> None:
    wall = 10.0
    assert starved(used_s=0.05, waited_s=9.5, wall_s=wall)  # runnable all along, ran 0.5 %
    assert not starved(used_s=10.0, waited_s=0.0, wall_s=wall)  # its own endless loop, a core
    assert not starved(used_s=0.0, waited_s=0.0, wall_s=wall)  # time.sleep / input(): not waiting to run
    assert not starved(used_s=10.0, waited_s=400.0, wall_s=wall)  # its own 40 busy threads share its core
    assert not starved(used_s=0.05, waited_s=WAITED_SHARE * wall - 0.1, wall_s=wall)
    assert starved(used_s=FAIR_CORES * wall - 0.1, waited_s=WAITED_SHARE * wall, wall_s=wall)
    assert not starved(used_s=FAIR_CORES * wall, waited_s=wall, wall_s=wall)
    assert not starved(used_s=0.0, waited_s=0.0, wall_s=0.0)
    window = CpuWindow(wall_s=wall, used_s=0.05, waited_s=9.5)
    assert window.starved and "0.05 CPU s in 10 s" in window.describe()


def test_a_meter_reads_the_groups_cpu_time_and_its_threads_waits(tmp_path: Path) -> None:
    """CpuMeter on a directory shaped like a cpuacct cgroup (this process's own threads)."""
    (tmp_path / "cpuacct.usage").write_text("1000000000\n")
    (tmp_path / "tasks").write_text(f"{os.getpid()}\n")
    meter = CpuMeter(tmp_path)
    (tmp_path / "cpuacct.usage").write_text("1500000000\n")
    window = meter.window()
    assert window is not None and window.used_s == pytest.approx(0.5) and window.waited_s >= 0
    assert CpuMeter(None).window() is None  # no cpu layer: nothing measured, a timeout stays one
    assert CpuMeter(tmp_path / "gone").window() is None


# ----------------------------------------------------------------------------- no verdict from it


class _StarvedKernel:
    """A kernel whose first cell times out while starved (what Kernel.run reports then)."""

    def __init__(self) -> None:
        self.alive = False

    def launch(self) -> _StarvedKernel:
        return self

    def start(self) -> _StarvedKernel:
        self.alive = True
        return self

    def run(self, code: str, timeout: float, **_: object) -> CellRun:
        self.alive = False
        return CellRun(status="timeout", evalue=f"still running after {timeout:g} s",
                       starved="its processes got 0.01 CPU s in 5 s and waited 4.9 s for a CPU")

    def stop_strays(self) -> int:
        return 0

    def close(self) -> None:
        self.alive = False


def test_a_starved_timeout_is_no_cell_problem(tmp_path: Path) -> None:
    path = tmp_path / "honest.py"
    path.write_text("# %% [a]\nx = 1\n", encoding="utf-8")
    with Session(read_submission(path), cell_timeout=5, submission_timeout=60, kernel_factory=_StarvedKernel) as s:
        with pytest.raises(MachineOverloaded) as raised:
            s.run_student_cells()
    assert not s.problems  # no "cell 1 was stopped after 5 s (an endless loop?)"
    assert "overloaded" in str(raised.value) and "not this submission's code" in str(raised.value)


def test_a_starved_grading_is_graded_again_then_reported_overloaded(monkeypatch: pytest.MonkeyPatch) -> None:
    options = GradeOptions(assignment="ch2-jit", seed=3)
    attempts: list[int | None] = []

    def starved_once(path, options, **_: object) -> Report:
        attempts.append(options.seed)
        if len(attempts) == 1:
            raise MachineOverloaded("cell 2", "its processes got 0 CPU s in 30 s and waited 29 s for a CPU")
        return error_report(Task(student="x", path=str(path), options=options), "graded")

    monkeypatch.setattr(pipeline, "_grade_once", starved_once)
    assert pipeline.grade_one("x.py", options).error == "graded" and attempts == [3, 3]

    attempts.clear()

    def always(path, options, **_: object) -> Report:
        attempts.append(options.seed)
        raise MachineOverloaded("a check", "its processes got 0 CPU s in 30 s and waited 29 s for a CPU")

    monkeypatch.setattr(pipeline, "_grade_once", always)
    task = Task(student="x", path="x.py", options=options)
    report = grade_guarded(lambda: pipeline.grade_one("x.py", options), lambda why: error_report(task, why))
    assert len(attempts) == REGRADES + 1
    assert report.status == "error" and report.error is not None
    assert report.error.startswith("the grading machine was overloaded, not this submission's code: a check")
    assert {c.status for e in report.exercises for c in e.checks} == {"skipped"}  # no timeout verdict
    assert classify(MachineOverloaded("a", "b")) == "machine"


# ----------------------------------------------------------------------------- the cgroups


def _cpu_groups(groups: dict[str, Path]) -> None:
    assert set(groups) >= {"memory", "pids", "cpu", "cpuacct"}
    assert (groups["cpu"] / "cpu.shares").read_text().strip() == str(SandboxPolicy().cpu_shares)
    assert (groups["cpu"] / "cpu.cfs_quota_us").read_text().strip() == "-1"  # shares, no cap


@cpu_layer
def test_a_sandbox_has_a_cpu_share_of_its_own_removed_on_cleanup(tmp_path: Path) -> None:
    sandbox = Sandbox(tmp_path, SandboxPolicy(), ISOLATION)
    sandbox.prepare()
    proc = None
    try:
        groups = {c: g for c in ("memory", "pids", "cpu", "cpuacct") if (g := sandbox.cgroup(c)) is not None}
        _cpu_groups(groups)
        proc = subprocess.Popen(sandbox.wrap([sys.executable, "-c", "while True: pass"]),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 20
        while int((groups["cpuacct"] / "cpuacct.usage").read_text()) < 50_000_000:  # 50 ms of CPU
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        assert proc.pid in [int(p) for p in (groups["cpu"] / "cgroup.procs").read_text().split()]
    finally:
        sandbox.cleanup()
        if proc is not None:
            proc.wait(timeout=10)
    assert not any(g.exists() for g in groups.values())


@cpu_layer
@pytest.mark.kernel
@pytest.mark.skipif(not ISOLATION.sandboxed, reason="fork servers need the whole sandbox")
def test_a_forked_verifier_has_a_cpu_share_of_its_own_removed_when_killed() -> None:
    from grader.verifier.forkserver import VerifierServer

    server = VerifierServer(SandboxPolicy()).start()
    try:
        child = server.fork()
        groups = dict(child.groups)
        _cpu_groups(groups)
        assert child.host_pid in [int(p) for p in (groups["cpu"] / "cgroup.procs").read_text().split()]
        assert child.cpu_group() == groups["cpuacct"]
        child.kill()
        assert not any(g.exists() for g in groups.values())
    finally:
        server.kill()


class _Hogs:
    """Busy processes, one per core, in a cpu cgroup of their own with the default share (tagged
    with this process's pid, so that a sweep finds it): beside a kernel whose share is smaller, the
    machine is busy with someone else. Each joins the cgroup before it execs Python and says so
    once it spins; they spin until stopped.

    This once started them outside the cgroup, moved them in afterwards and ran the cell at once:
    with other load on the machine their Python took a good part of the cell's 2 s to start, and
    the starved kernel had the CPU meanwhile (its timeout read as its own: the test failed twice).
    Now the cell starts only once every hog spins (a condition, not a wait)."""

    def __init__(self) -> None:
        self.group = CGROUP_ROOT / "cpu" / f"{owner_tag()}hogs-{uuid.uuid4().hex[:8]}"
        self.group.mkdir()
        spin = "import sys\nsys.stdout.write('spinning')\nsys.stdout.flush()\nwhile True: pass"
        join = f'echo $$ > "{self.group}/cgroup.procs" && exec "$0" -c "$1"'
        self.procs = [subprocess.Popen(["/bin/sh", "-c", join, sys.executable, spin], stdout=subprocess.PIPE)
                      for _ in range(os.cpu_count() or 2)]
        for proc in self.procs:
            assert proc.stdout is not None and proc.stdout.read(len("spinning")) == b"spinning"

    def stop(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()
        for _ in range(100):
            try:
                self.group.rmdir()
                return
            except OSError:
                time.sleep(0.02)


SPIN_ALREADY = """
import threading
def _spin():
    while True:
        pass
threading.Thread(target=_spin, daemon=True).start()
"""
"""A thread that wants the CPU from before the measured cell is sent: the cell's window then holds
the kernel's demand from its first instant, however late a loaded machine lets the grader send
the cell (a run measured 3.9 s for its 2 s window, the kernel idle while the grader waited)."""


def _timed_out(kernel, code: str, *, hogs: bool, share: int = 1024, spinning: bool = False,
               seconds: float = 2) -> CellRun:
    """Run `code` for `seconds` in a fresh kernel with CPU share `share`, beside busy processes with
    the default share when `hogs`; with `spinning`, a busy thread of the kernel's runs first."""
    kernel.start()
    if spinning:
        assert kernel.run(SPIN_ALREADY, 60).status == "ok"
    (kernel._sandbox.cgroup("cpu") / "cpu.shares").write_text(str(share))
    hog = _Hogs() if hogs else None
    try:
        return kernel.run(code, seconds)
    finally:
        if hog is not None:
            hog.stop()


@cpu_layer
@pytest.mark.kernel
@pytest.mark.serial  # what it measures is the CPU the kernel gets: the other pytest worker's load is in it
def test_a_real_kernel_kept_from_the_cpu_times_out_starved_and_one_that_sleeps_does_not() -> None:
    """Failed twice with other load on the machine (`starved=None` for the kernel kept from the
    CPU): its hogs were not yet spinning, and the loaded grader sent the cell late, so that for
    much of the window the kernel had nothing to run. Now the hogs spin and the kernel wants the
    CPU before the window opens; nothing waits on the clock. Failed a third time beside the other
    pytest worker (its kernels took CPU the measure counts), so it runs alone, with the serial
    tests (its hogs, both cores for seconds, made other tests' time limits fire too)."""
    from grader.kernel.client import Kernel

    kernel = Kernel(sandbox=SandboxPolicy())
    try:
        busy = _timed_out(kernel, "while True: pass", hogs=True, share=2, spinning=True)  # kept from the CPU
        assert busy.status == "timeout" and busy.starved and "waited" in busy.starved, busy
        asleep = _timed_out(kernel, "import time; time.sleep(100)", hogs=True)  # its share, asleep
        assert asleep.status == "timeout" and asleep.starved is None, asleep  # its own timeout
        # a core of its own, however busy the machine running the tests is
        alone = _timed_out(kernel, "while True: pass", hogs=False, share=262144, spinning=True)
        assert alone.status == "timeout" and alone.starved is None, alone  # its own endless loop
    finally:
        kernel.close()


OWN_HOGS = """
import os, threading
if os.fork() == 0:  # a busy child process of its own
    while True:
        pass
def spin():
    while True:
        pass
for _ in range(8):  # and eight busy threads
    threading.Thread(target=spin, daemon=True).start()
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # the cell's own thread: one CPU, the lowest
os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # priority there is
spin()
"""


@cpu_layer
@pytest.mark.kernel
def test_a_students_own_hogs_count_as_its_own_time_never_as_the_machines() -> None:
    """Issue (third round, decided): can a student's own processes make its timeout read as the
    machine's ("overloaded", graded again)? They are in its cpu cgroup: their CPU is the sandbox's
    `used`, and however its threads wait behind each other, at the lowest priority or on one CPU,
    the sandbox as a whole gets its share. Measured beside 4 and 5 busy cgroups on 2 cores, a plain
    loop, 8 busy threads, SCHED_IDLE, one CPU and nice 19 got the same (0.35-0.4 of a core, then
    0.33): only the machine's load decides. With a share that no load outweighs, the timeout of a
    sandbox full of its own hogs is its own."""
    from grader.kernel.client import Kernel

    kernel = Kernel(sandbox=SandboxPolicy())
    try:
        # 1 s: its hogs, busy from the cell's first instant, spin both cores through it (no hogs of
        # the machine's to wait on here, so that the window's length does not decide the reading)
        run = _timed_out(kernel, OWN_HOGS, hogs=False, share=262144, seconds=1)
        assert run.status == "timeout" and run.starved is None, run
    finally:
        kernel.close()


# ----------------------------------------------------------------------------- the attack

HOG_PROCESSES = 200  # within the pids limit (512)
HOG_SECONDS = 120  # longer than the honest grading takes; the hog's kernel is closed after it
HOG = f"""
import os, time
children = []
for _ in range({HOG_PROCESSES}):  # busy processes, each in a session (an autogroup) of its own
    pid = os.fork()
    if pid == 0:
        os.setsid()
        end = time.monotonic() + {HOG_SECONDS}
        while time.monotonic() < end:
            pass
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
"""


@cpu_layer
@pytest.mark.kernel
def test_a_hog_beside_an_honest_submission_costs_the_honest_one_nothing() -> None:
    """Found by an attack: a submission that kept some 440 busy processes, each in its own
    session, took an honest neighbour from 100 to 20 (its cells and checks timed out). Without a
    CPU share per sandbox the scheduler shares the machine per session: the honest kernel gets
    one part in 200. With one, it gets its half of the machine."""
    import tempfile

    from grader.sandbox.layers import launch_environment

    scratch = Path(tempfile.mkdtemp(prefix=f"grade-{os.getpid()}-hog-"))
    sandbox = Sandbox(scratch, SandboxPolicy(), ISOLATION)  # as a neighbour's kernel has
    sandbox.prepare()
    hog = subprocess.Popen(sandbox.wrap([sys.executable, "-c", HOG]), cwd=scratch, env=launch_environment(scratch),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        pids = sandbox.cgroup("pids")
        deadline = time.monotonic() + 60
        while len((pids / "cgroup.procs").read_text().split()) < HOG_PROCESSES and time.monotonic() < deadline:
            time.sleep(0.05)  # until the hog's processes all run (a condition, not a wait)
        assert len((pids / "cgroup.procs").read_text().split()) >= HOG_PROCESSES
        report = pipeline.grade_one(ROOT / "solutions" / "ch2-jit.py",
                                    GradeOptions(assignment="ch2-jit", seed=3, cell_timeout=20))
        hog_ran_throughout = hog.poll() is None
    finally:
        hog.kill()
        hog.wait(timeout=30)
        sandbox.cleanup()
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)
    assert report.status == "graded", report.error
    assert report.score == 100 and not report.cell_problems, report.cell_problems
    assert all(c.status != "timeout" for e in report.exercises for c in e.checks)
    assert hog_ran_throughout
