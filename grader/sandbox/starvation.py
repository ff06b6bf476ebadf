"""Whether a timeout was the student's: did its processes get the CPU while the grader waited?

Each sandbox has a CPU share of its own (grader/sandbox/layers.py: cgroup v1 `cpu.shares`, equal for
every sandbox), so at `-j N` on N cores or more a submission is due at least one core whenever it
wants one, however many processes its neighbour runs. Something outside the shares can still
take the CPU (a machine busy with other work, more workers than cores, a cgroup the grader does
not control): then an honest cell or check runs out of time because of someone else, and that
timeout must not become the student's verdict.

So when a cell, a probe request or a verifier job times out, the grader reads two numbers of the
sandbox over that wait:

    used     the CPU time its processes got (`cpuacct.usage` of its cpuacct cgroup: exited
             processes included)
    waited   the time its threads spent runnable but not running (the run-queue delay of
             /proc/<tid>/schedstat, summed over the cgroup's threads)

It was *starved* when it wanted the CPU (waited at least WAITED_SHARE of the wait) and did not get
its due (used less than FAIR_CORES of one core). A process that sleeps or blocks does not wait on
the run queue, so a student's `time.sleep` or `input()` stays its own timeout; a student's own
hundred busy threads get the sandbox's whole share (a core or more), so they are not starved
either: they only wait behind each other.

A starved timeout raises `MachineOverloaded` (grader/errors.py): the submission is graded again
(pipeline.grade_one, at most REGRADES times), and if it is starved again it becomes an error
report that says the grading machine was overloaded (grader/faults.py: not the student's fault).
Without the cpu layer (no cpuacct cgroup to read) nothing is measured and a timeout stays a
timeout, as before.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

WAITED_SHARE = 0.25
"""Of the wait's wall time, how long the sandbox's threads must have waited to run."""
FAIR_CORES = 1 / 3
"""CPU per second of wall time below which a sandbox that wanted more was starved. Its share is
a whole core at `-j` up to the core count; a third leaves room for the grader's own processes."""
REGRADES = 1
"""How many times a starved submission is graded again before it is reported not graded."""
MAX_TASKS = 4096
"""Threads of one sandbox read (the pids limit is 512: a bound on the reading, not a limit)."""


def starved(used_s: float, waited_s: float, wall_s: float) -> bool:
    """Whether processes that used `used_s` CPU seconds and waited `waited_s` seconds to run in
    `wall_s` seconds were kept from the CPU by others (the rule in the module's docstring)."""
    if wall_s <= 0:
        return False
    return waited_s >= WAITED_SHARE * wall_s and used_s < FAIR_CORES * wall_s


@dataclass(frozen=True)
class CpuWindow:
    """What a sandbox's processes got of the CPU during one wait."""

    wall_s: float
    used_s: float
    waited_s: float

    @property
    def starved(self) -> bool:
        return starved(self.used_s, self.waited_s, self.wall_s)

    def describe(self) -> str:
        """The numbers in words, for the error report."""
        return (f"its processes got {self.used_s:.2g} CPU s in {self.wall_s:.3g} s and waited "
                f"{self.waited_s:.3g} s for a CPU")


def usage_ns(group: Path | None) -> int | None:
    """A cpuacct cgroup's CPU time so far, in nanoseconds (None without one)."""
    if group is None:
        return None
    try:
        if (group / "cpu.stat").exists() and not (group / "cpuacct.usage").exists():  # cgroup v2
            stat = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
            return int(stat["usage_usec"]) * 1000
        return int((group / "cpuacct.usage").read_text())
    except (OSError, ValueError, KeyError):
        return None


def run_delays(group: Path | None) -> dict[int, int]:
    """Each thread of a cgroup and its run-queue delay so far, in nanoseconds (field 2 of
    /proc/<tid>/schedstat); threads that exit meanwhile are left out."""
    if group is None:
        return {}
    try:
        listed = group / "tasks" if (group / "tasks").exists() else group / "cgroup.threads"  # v1, v2
        tids = listed.read_text().split()[:MAX_TASKS]
    except OSError:
        return {}
    delays = {}
    for tid in tids:
        try:
            delays[int(tid)] = int(Path(f"/proc/{tid}/schedstat").read_text().split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return delays


class CpuMeter:
    """Started when a wait starts; `window()` says what the sandbox got since (None when the
    sandbox has no cpuacct cgroup)."""

    def __init__(self, group: Path | None):
        self.group = group
        self.started = time.monotonic()
        self.usage = usage_ns(group)
        self.delays = run_delays(group) if self.usage is not None else {}

    def window(self) -> CpuWindow | None:
        """Read before the sandbox's processes are killed (their threads' delays go with them)."""
        if self.usage is None:
            return None
        wall = time.monotonic() - self.started
        usage = usage_ns(self.group)
        if usage is None:
            return None
        waited = 0
        for tid, delay in run_delays(self.group).items():
            before = self.delays.get(tid, 0)
            waited += delay - before if delay >= before else delay  # a reused tid: a new thread
        return CpuWindow(wall_s=wall, used_s=max(0, usage - self.usage) / 1e9, waited_s=waited / 1e9)


def starved_window(meter: CpuMeter | None) -> CpuWindow | None:
    """The meter's window when it shows starvation, else None (no meter, no cgroup, or fed)."""
    window = meter.window() if meter is not None else None
    return window if window is not None and window.starved else None
