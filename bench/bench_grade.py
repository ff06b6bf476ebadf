"""Benchmark: wall time of `grade` on the reference notebook against the cost of importing JAX,
and the sandbox's share of it.

The three commands (the floor, `grade` with the sandbox, `grade --no-sandbox`) run as fresh
processes, interleaved so that machine noise hits all alike; we report medians and ratios
measured in one run. Usage: python bench/bench_grade.py [--runs N]
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
        commands = {
            "floor: python -c 'import jax; jnp.ones(1)'": FLOOR,
            f"grade {args.notebook.relative_to(ROOT)}": cmd,
            "grade --no-sandbox (same notebook)": cmd + ["--no-sandbox"],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for command in commands.values():
            timed(command)  # warm the OS file cache
        for _ in range(args.runs):
            for name, command in commands.items():
                times[name].append(timed(command))
    print(f"machine: {platform.machine()}, {platform.python_version()}, runs: {args.runs} each, interleaved")
    print("| command | median wall (s) | min | max |")
    print("| --- | --- | --- | --- |")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.2f} | {min(values):.2f} | {max(values):.2f} |")
    floor, sandboxed, bare = (statistics.median(v) for v in times.values())
    print(f"ratio grade / floor: {sandboxed / floor:.2f}x (target <= 3x)")
    print(f"sandbox cost: {sandboxed - bare:+.2f} s, {100 * (sandboxed - bare) / sandboxed:+.1f} % of the "
          "sandboxed total (target < 10 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
