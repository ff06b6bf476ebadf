"""Benchmark: wall time of `grade` on the reference notebook against the cost of importing JAX.

Both commands run as fresh processes, interleaved (floor, grade, floor, grade, ...) so that
machine noise hits both alike; we report medians and their ratio, measured in one run.
Usage: python bench/bench_grade.py [--runs N]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLOOR = [sys.executable, "-c", "import jax, jax.numpy as jnp; jnp.ones(1).block_until_ready()"]


def grade_command(notebook: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "grader", str(notebook), "--seed", "1", "--json", str(out)]


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--notebook", type=Path, default=ROOT / "solutions" / "ch2-jit.ipynb")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cmd = grade_command(args.notebook, Path(tmp) / "report.json")
        timed(FLOOR), timed(cmd)  # warm the OS file cache for both
        floor, grade = [], []
        for _ in range(args.runs):
            floor.append(timed(FLOOR))
            grade.append(timed(cmd))
    f, g = statistics.median(floor), statistics.median(grade)
    print(f"machine: {platform.machine()}, {platform.python_version()}, runs: {args.runs} each, interleaved")
    print("| command | median wall (s) | min | max |")
    print("| --- | --- | --- | --- |")
    print(f"| floor: python -c 'import jax; jnp.ones(1)' | {f:.2f} | {min(floor):.2f} | {max(floor):.2f} |")
    print(f"| grade {args.notebook.relative_to(ROOT)} | {g:.2f} | {min(grade):.2f} | {max(grade):.2f} |")
    print(f"ratio grade / floor: {g / f:.2f}x (target <= 3x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
