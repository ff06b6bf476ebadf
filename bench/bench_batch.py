"""Benchmark: batch throughput for 40 copies of the reference notebook, and its peak memory.

Runs, in one go: `grade DIR -o OUT -j 1`, `grade DIR -o OUT -j 2`, and 40 sequential
`grade FILE` runs, each as a fresh process. Peak memory is that of the whole process tree,
kernels included: each command runs in a cgroup v1 memory group of its own (as root; elsewhere
the column says n/a), whose memory.max_usage_in_bytes we read afterwards.
Usage: python bench/bench_batch.py [--copies N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "solutions" / "ch2-jit.ipynb"
GRADE = [sys.executable, "-m", "grader"]


def _memory_group() -> Path | None:
    from grader.sandbox import _own_cgroup

    parent = _own_cgroup("memory")
    if parent is None:
        return None
    group = parent / f"bench-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    return group


def measured(cmds: list[list[str]]) -> tuple[float, float | None]:
    """Wall time of running cmds one after the other, and the peak memory of all of them (GiB)."""
    group = _memory_group()
    start = time.perf_counter()
    for cmd in cmds:
        if group is not None:
            cmd = ["/bin/sh", "-c", f'echo $$ > "{group}/cgroup.procs"; exec "$@"', "bench", *cmd]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    peak = None
    if group is not None:
        peak = int((group / "memory.max_usage_in_bytes").read_text()) / 2**30
        for _ in range(100):  # exited processes leave the group asynchronously
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.05)
    return wall, peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--copies", type=int, default=40)
    args = parser.parse_args()
    n = args.copies
    with tempfile.TemporaryDirectory() as tmp:
        subs = Path(tmp) / "subs"
        subs.mkdir()
        for i in range(n):
            shutil.copy(NOTEBOOK, subs / f"student{i:03d}.ipynb")
        runs = {
            "grade DIR -j 1": [[*GRADE, str(subs), "-o", f"{tmp}/out1", "-j", "1", "--seed", "1"]],
            "grade DIR -j 2": [[*GRADE, str(subs), "-o", f"{tmp}/out2", "-j", "2", "--seed", "1"]],
            f"{n} x grade FILE": [[*GRADE, str(p), "--seed", "1", "--json", f"{tmp}/r.json"]
                                  for p in sorted(subs.iterdir())],
        }
        results = {name: measured(cmds) for name, cmds in runs.items()}
    sequential = results[f"{n} x grade FILE"][0]
    print(f"{n} copies of {NOTEBOOK.relative_to(ROOT)}, {os.cpu_count()} cores")
    print("| run | wall (s) | submissions / min | vs sequential | peak memory (GiB) |")
    print("| --- | --- | --- | --- | --- |")
    for name, (wall, peak) in results.items():
        mem = f"{peak:.2f}" if peak is not None else "n/a"
        print(f"| {name} | {wall:.1f} | {60 * n / wall:.1f} | {sequential / wall:.2f}x | {mem} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
