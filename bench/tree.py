"""What a command costs as a whole process tree: wall time, CPU seconds and peak memory.

The grader kills its kernels and verifiers at the end, so their CPU never reaches the parent's
rusage (`/usr/bin/time` misses it). Each measured command therefore runs in cgroup v1 groups of
its own, one per controller (cpuacct and memory, as root; elsewhere those columns are None),
and the kernels' and verifiers' own sandbox groups are children of them: `cpuacct.usage` and
`memory.max_usage_in_bytes` count the whole tree.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


@dataclass(frozen=True)
class Cost:
    wall_s: float
    cpu_s: float | None
    peak_gib: float | None


def _groups() -> dict[str, Path]:
    from grader.sandbox.layers import _own_cgroup

    made = {}
    for controller in ("cpuacct", "memory"):
        parent = _own_cgroup(controller)
        if parent is not None:
            group = parent / f"bench-{uuid.uuid4().hex[:8]}"
            group.mkdir()
            made[controller] = group
    return made


def _remove(group: Path) -> None:
    for _ in range(100):  # exited processes leave a group asynchronously
        try:
            group.rmdir()
            return
        except OSError:
            time.sleep(0.05)


def measured(cmds: list[list[str]]) -> Cost:
    """Run cmds one after the other, each a fresh process in the same groups."""
    groups = _groups()
    enter = "; ".join(f'echo $$ > "{g}/cgroup.procs"' for g in groups.values())
    start = time.perf_counter()
    for cmd in cmds:
        if groups:
            cmd = ["/bin/sh", "-c", f'{enter}; exec "$@"', "bench", *cmd]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    cpu = int((groups["cpuacct"] / "cpuacct.usage").read_text()) / 1e9 if "cpuacct" in groups else None
    peak = int((groups["memory"] / "memory.max_usage_in_bytes").read_text()) / 2**30 if "memory" in groups else None
    for group in groups.values():
        _remove(group)
    return Cost(wall, cpu, peak)
