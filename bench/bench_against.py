"""Benchmark: this tree against an earlier revision, interleaved in one run.

The floor drifts by 20 % from one hour to the next on this machine, so a change is measured
against the revision before it in the same run, round by round: the floor, the revision (a git
worktree of it, imported through PYTHONPATH from this venv), this tree. Each command's wall time,
and its CPU seconds as a whole process tree (bench/tree.py). Both trees build their own store of
the reference's compiled programs in an unmeasured first run.
Usage: python bench/bench_against.py REV [--copies N] [--jobs J] [--rounds R]
       (--copies 1: `grade FILE` on the reference notebook; more: a batch of copies of it)
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tree import Cost, measured

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "solutions" / "ch2-jit.ipynb"
FLOOR = [sys.executable, "-c", "import jax, jax.numpy as jnp; jnp.ones(1).block_until_ready()"]


def command(tree: Path, folder: Path, out: Path, copies: int, jobs: int) -> list[str]:
    """`grade` with the grader of `tree`: run from a folder without one of its own (`-m` puts the
    working directory before PYTHONPATH), so that PYTHONPATH decides which tree is imported."""
    grade = ["env", "-C", str(folder.parent), f"PYTHONPATH={tree}", sys.executable, "-m", "grader"]
    if copies == 1:
        return [*grade, str(NOTEBOOK), "--seed", "1", "--json", str(out)]
    return [*grade, str(folder), "-o", str(out), "-j", str(jobs), "-a", "ch2-jit"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rev", help="the earlier revision (a commit, a tag, HEAD~3)")
    parser.add_argument("--copies", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        earlier = work / "earlier"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(earlier), args.rev],
                       check=True)
        try:
            folder = work / "class"
            folder.mkdir()
            for i in range(args.copies):
                shutil.copy(NOTEBOOK, folder / f"student{i:03d}.ipynb")
            trees = {args.rev: earlier, "this tree": ROOT}
            costs: dict[str, list[Cost]] = {"floor": [], **{name: [] for name in trees}}
            for k, tree in enumerate(trees.values()):  # unmeasured: the file cache, each tree's store
                measured([command(tree, folder, work / f"warm-{k}", args.copies, args.jobs)])
            for n in range(args.rounds):
                costs["floor"].append(measured([FLOOR]))
                for k, (name, tree) in enumerate(trees.items()):
                    out = work / f"out-{n}-{k}"
                    costs[name].append(measured([command(tree, folder, out, args.copies, args.jobs)]))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(earlier)], check=False)
    floor = statistics.median(c.wall_s for c in costs["floor"])
    what = "grade FILE" if args.copies == 1 else f"{args.copies} copies at -j {args.jobs}"
    print(f"{what}, {args.rounds} interleaved rounds; per submission: wall / floor and CPU s (whole tree)")
    print("| run | median wall (s) | x floor per submission | CPU s per submission |")
    print("| --- | --- | --- | --- |")
    for name, values in costs.items():
        per = 1 if name == "floor" else args.copies
        wall = statistics.median(c.wall_s for c in values)
        cpu = [c.cpu_s for c in values if c.cpu_s is not None]
        shown = f"{statistics.median(cpu) / per:.2f}" if cpu else "n/a"
        print(f"| {name} | {wall:.2f} | {wall / per / floor:.2f} | {shown} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
