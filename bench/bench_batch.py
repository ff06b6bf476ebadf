"""Benchmark: a class graded in one batch, per submission, as a ratio to the floor.

The floor (`python -c "import jax, jax.numpy as jnp; jnp.ones(1).block_until_ready()"`) is
measured in the same run, before and after the batches (median of both). Each batch grades N
copies of the reference notebook into a fresh OUT with `-j 1` and `-j 2`; wall time per
submission is divided by the floor (issue 12's target at -j 2: at most 0.5x). CPU seconds and
peak memory are the whole process tree's, kernels and verifiers included (bench/tree.py); the
peak is reported per worker (target: at most 400 MB).
Usage: python bench/bench_batch.py [--copies N ...] [--sequential]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from tree import measured

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "solutions" / "ch2-jit.ipynb"
GRADE = [sys.executable, "-m", "grader"]
FLOOR = [sys.executable, "-c", "import jax, jax.numpy as jnp; jnp.ones(1).block_until_ready()"]
TARGET_PER_SUBMISSION = 0.5
TARGET_PEAK_PER_WORKER_MB = 400


def floor_s(runs: int = 5) -> float:
    return statistics.median(measured([FLOOR]).wall_s for _ in range(runs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--copies", type=int, action="append", help="class sizes (default: 20)")
    parser.add_argument("--sequential", action="store_true", help="also N separate `grade FILE` runs")
    args = parser.parse_args()
    sizes = args.copies or [20]
    before = floor_s()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            subs = Path(tmp) / f"subs{n}"
            subs.mkdir()
            for i in range(n):
                shutil.copy(NOTEBOOK, subs / f"student{i:03d}.ipynb")
            for jobs in (1, 2):
                cost = measured([[*GRADE, str(subs), "-o", f"{tmp}/out{n}-{jobs}", "-j", str(jobs), "--seed", "1"]])
                rows.append((f"grade DIR -j {jobs}", n, jobs, cost))
            if args.sequential:
                cost = measured([[*GRADE, str(p), "--seed", "1", "--json", f"{tmp}/r.json"]
                                 for p in sorted(subs.iterdir())])
                rows.append((f"{n} x grade FILE", n, 1, cost))
    floor = statistics.median([before, floor_s()])
    print(f"floor {floor:.2f} s (median before and after), {os.cpu_count()} cores, {NOTEBOOK.relative_to(ROOT)}")
    print("| run | copies | wall (s) | per minute | wall per submission, x floor | CPU s per submission, "
          "whole tree | peak MB per worker, whole tree |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, n, jobs, cost in rows:
        cpu = f"{cost.cpu_s / n:.2f}" if cost.cpu_s is not None else "n/a"
        peak = f"{1024 * cost.peak_gib / jobs:.0f}" if cost.peak_gib is not None else "n/a"
        print(f"| {name} | {n} | {cost.wall_s:.1f} | {60 * n / cost.wall_s:.1f} | "
              f"{cost.wall_s / n / floor:.2f} | {cpu} | {peak} |")
    print(f"targets at -j 2: wall per submission <= {TARGET_PER_SUBMISSION}x the floor, "
          f"peak <= {TARGET_PEAK_PER_WORKER_MB} MB per worker")
    return 0


if __name__ == "__main__":
    sys.exit(main())
