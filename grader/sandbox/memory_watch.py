"""The total memory of a sandbox without a memory cgroup (an ordinary user's, a container's with
read-only cgroups): a thread of the grader that adds up what the sandbox's processes hold and kills
the sandbox past its limit.

Without a cgroup the kernel bounds memory per process only (RLIMIT_AS, twice the limit), so three
children of 1.6 GiB each held 4.7 GiB against a 4 GiB limit. The watcher closes that: every
INTERVAL_S it lists the sandbox's processes, from the procfs bubblewrap mounted in the sandbox's
own pid namespace (`/proc/<its init>/root/proc`: every process of the sandbox and no other, double-
forked daemons included), and adds up their anonymous and shared-memory resident pages
(`RssAnon + RssShmem` of /proc/<pid>/status: cheap, and an overcount where forks share pages);
past the limit it measures again exactly (`Pss_Anon + Pss_Shmem` of smaps_rollup: shared pages
divided among their sharers) and, still past it, kills the sandbox's init, which takes every
process of the namespace with it. The kernel's cell then dies, as under a cgroup's OOM kill.

It runs in the grader, out of the student's reach: nothing in the sandbox can stop, slow down
(other than by the CPU it takes from the machine) or fool it. What it does not count: the files
of the sandbox's tmpfs (bounded by their own size), and kernel memory no process maps (socket and
pipe buffers; a memfd, whose pages need no mapping, cannot be made: grader/sandbox/seccomp.py). A
sandbox allocates between two looks, INTERVAL_S apart: at some GiB/s, a few hundred MiB past the
limit before it is killed.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

INTERVAL_S = 0.05
FIND_S = 10.0
"""How long the watcher looks for the sandbox's process after `wrap()`, which comes right before
the launch (a launch that never happens, or fails, ends the watch)."""
MAX_PROCESSES = 4096  # the pids limit is 512: a bound on the reading, not a limit
THOROUGH_EVERY = 20
"""Every how many looks the watcher, while it looks for the sandbox, reads every process rather
than the ones started since (pids wrap around)."""


def _last_pid() -> int:
    """The pid this pid namespace gave last (/proc/loadavg's last field)."""
    try:
        return int(Path("/proc/loadavg").read_text().split()[-1])
    except (OSError, ValueError, IndexError):
        return 0


def _pids(after: int | None) -> list[int]:
    """The processes of /proc, only those with a pid above `after` unless it is None."""
    pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    return pids if after is None else [pid for pid in pids if pid > after]


def _stat(pid: int | str, proc: str = "/proc") -> tuple[int, int] | None:
    """(parent pid, start time) of a process."""
    try:
        fields = Path(f"{proc}/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[19])


def _status_kib(path: str, names: tuple[str, ...]) -> int:
    """The sum of some `Name:  N kB` lines of a /proc file (0 where it is gone)."""
    try:
        text = Path(path).read_text()
    except OSError:
        return 0
    total = 0
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in names:
            try:
                total += int(rest.split()[0])
            except (ValueError, IndexError):
                pass
    return total


def resident_bytes(proc: str, pids: list[str]) -> int:
    """What processes hold in anonymous and shared memory (RssAnon + RssShmem; pages that forks
    share count once per process)."""
    return 1024 * sum(_status_kib(f"{proc}/{pid}/status", ("RssAnon", "RssShmem")) for pid in pids)


def proportional_bytes(proc: str, pids: list[str]) -> int:
    """The same, exactly: a shared page counted as its share per process (PSS)."""
    return 1024 * sum(_status_kib(f"{proc}/{pid}/smaps_rollup", ("Pss_Anon", "Pss_Shmem")) for pid in pids)


def sandbox_processes(init: int) -> tuple[str, list[str]] | None:
    """The procfs of the pid namespace whose init is `init` (a host pid), and the pids listed in
    it; None while `init` has not yet made its namespace's root its own (or is gone): its root's
    /proc/1 must be `init` itself."""
    proc = f"/proc/{init}/root/proc"
    own, inside = _stat(init), _stat(1, proc)
    if own is None or inside is None or own[1] != inside[1]:
        return None
    try:
        pids = [name for name in os.listdir(proc) if name.isdigit()][:MAX_PROCESSES]
    except OSError:
        return None
    return proc, pids


class MemoryWatch:
    """Watches the sandbox that a child of this process started in `cwd` (the sandbox's scratch:
    no other child of this process runs there), and kills it once its processes hold more than
    `limit` bytes. `stop()` ends the watch; `exceeded` is what it held when it was killed."""

    def __init__(self, cwd: Path, limit: int, *, interval: float = INTERVAL_S):
        self.cwd = os.path.realpath(cwd)
        self.limit = limit
        self.interval = interval
        self.exceeded: int | None = None
        self.peak = 0
        self._since = _last_pid()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="grader-memory-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    # ------------------------------------------------------------------ finding the sandbox

    def _launched(self, thorough: bool) -> tuple[int, int] | None:
        """(pid, start time) of this process's child that runs in `cwd`: the sandbox's outermost
        process (the wrapper, then bubblewrap). Only processes started since the watch began are
        looked at, unless `thorough` (the pids wrapped around)."""
        me = os.getpid()
        for pid in _pids(None if thorough else self._since):
            stat = _stat(pid)
            if stat is None or stat[0] != me:
                continue
            try:
                if os.readlink(f"/proc/{pid}/cwd") == self.cwd:
                    return pid, stat[1]
            except OSError:
                continue
        return None

    @staticmethod
    def _init(root: int, thorough: bool) -> int | None:
        """The sandbox's init: the earliest child of its outermost bubblewrap."""
        children = [(stat[1], pid) for pid in _pids(None if thorough else root)
                    if (stat := _stat(pid)) is not None and stat[0] == root]
        return min(children)[1] if children else None

    # ------------------------------------------------------------------ watching

    def _run(self) -> None:
        deadline = time.monotonic() + FIND_S
        root: tuple[int, int] | None = None
        init: tuple[int, int] | None = None
        polls = 0
        while not self._stop.wait(self.interval):
            polls += 1
            thorough = polls % THOROUGH_EVERY == 0
            try:
                if root is None:
                    root = self._launched(thorough)
                    if root is None and time.monotonic() > deadline:
                        return
                    continue
                if (_stat(root[0]) or (0, -1))[1] != root[1]:
                    return  # the sandbox is gone
                if init is None:
                    found = self._init(root[0], thorough)
                    started = _stat(found) if found is not None else None
                    init = (found, started[1]) if found is not None and started is not None else None
                    if init is None:
                        continue
                listed = sandbox_processes(init[0])
                if listed is None:
                    if (_stat(init[0]) or (0, -1))[1] != init[1]:
                        init = None  # a passing child (the wrapper's mount), not bubblewrap's
                    continue
                proc, pids = listed
                held = resident_bytes(proc, pids)
                if held > self.limit:
                    held = proportional_bytes(proc, pids)
                self.peak = max(self.peak, held)
                if held > self.limit:
                    self._kill(root, init)
                    self.exceeded = held
                    return
            except Exception:  # noqa: BLE001 - a reading that failed is read again next time
                continue

    @staticmethod
    def _kill(root: tuple[int, int], init: tuple[int, int]) -> None:
        """SIGKILL the sandbox's init (the kernel kills every process of its pid namespace with
        it) and its outermost process, each only if it is still the process it was."""
        for pid, started in (init, root):
            stat = _stat(pid)
            if stat is not None and stat[1] == started:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
