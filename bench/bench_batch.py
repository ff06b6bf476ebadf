"""Benchmark: a class graded in one batch, per submission, as a ratio to the floor.

The floor (`python -c "import jax, jax.numpy as jnp; jnp.ones(1).block_until_ready()"`) is
measured in the same run, before and after the batches (median of both). Each batch grades N
copies of the reference notebook into a fresh OUT with `-j 1` and `-j 2`; wall time per
submission is divided by the floor (issue 12's target at -j 2: at most 0.5x). CPU seconds and
peak memory are the whole process tree's, kernels and verifiers included (bench/tree.py); the
peak is reported per worker (target: at most 400 MB).
Classes (--kind): copies of the reference notebook; the hand-written mutants, each appended to
the reference module as `grade validate` does (a mixed class, most answers wrong somewhere);
copies where one in ten hangs in a graded function or kills its kernel. --dask adds a 2-worker
Dask LocalCluster, compared by wall time (its workers run outside the measured tree).
--seed-per-student adds, beside each -j row, the same batch drawing a seed per student (every
submission then meets hidden inputs of its own: its checks are built again and the verifier's
answers for hidden inputs are not shared between students).
Usage: python bench/bench_batch.py [--copies N ...] [--kind K ...] [--dask] [--sequential] [--rounds R]
       [--seed-per-student]
"""

from __future__ import annotations

import argparse
import dataclasses
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


def dask_cost(subs: Path, out: Path):
    """The same batch through a 2-worker LocalCluster (one thread each) started in this process
    before the measured command connects to it; the workers' CPU is outside the command's
    cgroup, so only wall time is comparable."""
    import dask
    from distributed import LocalCluster

    with dask.config.set({"temporary-directory": str(out.parent / "dask-scratch")}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        return measured([[*GRADE, str(subs), "-o", str(out), "-a", "ch2-jit", "--scheduler", cluster.scheduler_address]])


def floor_s(runs: int = 5) -> float:
    return statistics.median(measured([FLOOR]).wall_s for _ in range(runs))


FAULTS = {  # one in ten of the faulty class: a graded function that hangs, a cell that kills the kernel
    "hang": "\n\n# %% [fault]\n_right = newton_sqrt\n\n\ndef newton_sqrt(a, tol):\n"
            "    while True:\n        pass\n",
    "dies": "\n\n# %% [fault]\nimport os\nos._exit(1)\n",
}


def write_class(folder: Path, kind: str, n: int) -> None:
    """`n` submissions: copies of the reference notebook ("copies"), the reference module with
    each hand-written mutant appended as a last cell ("mutants", as `grade validate` builds
    them), or copies with one in ten faulty, alternately hanging and killing its kernel ("faults")."""
    folder.mkdir()
    reference = (ROOT / "solutions" / "ch2-jit.py").read_text()
    mutants = sorted((ROOT / "assignments" / "ch2-jit" / "mutants").glob("*.py"))
    for i in range(n):
        if kind == "mutants":
            text = reference.rstrip("\n") + "\n\n# %% [mutant]\n" + mutants[i % len(mutants)].read_text()
            (folder / f"student{i:03d}.py").write_text(text)
        elif kind == "faults" and i % 10 == 9:
            fault = FAULTS["hang" if (i // 10) % 2 == 0 else "dies"]
            (folder / f"student{i:03d}.py").write_text(reference.rstrip("\n") + fault)
        else:
            shutil.copy(NOTEBOOK, folder / f"student{i:03d}.ipynb")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--copies", type=int, action="append", help="class sizes (default: 20)")
    parser.add_argument("--kind", action="append", choices=("copies", "mutants", "faults"),
                        help="which classes (default: copies)")
    parser.add_argument("--dask", action="store_true", help="also a 2-worker Dask LocalCluster")
    parser.add_argument("--sequential", action="store_true", help="also N separate `grade FILE` runs")
    parser.add_argument("--jobs", type=int, action="append", help="-j values (default: 1 and 2)")
    parser.add_argument("--seed-per-student", action="store_true",
                        help="also each -j row with a seed per student (grade DIR --seed-per-student)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure every row this many times, each round against its own floor; "
                             "a row shows its median round (default: 1)")
    args = parser.parse_args()
    sizes = args.copies or [20]
    kinds = args.kind or ["copies"]
    rounds: list[list[tuple[str, int, int, object]]] = []
    floors: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:
            for n in sizes:
                write_class(Path(tmp) / f"{kind}{n}", kind, n)
        for r in range(args.rounds):
            before = floor_s()
            rows = []
            for kind in kinds:
                for n in sizes:
                    subs = Path(tmp) / f"{kind}{n}"
                    for jobs in args.jobs or [1, 2]:
                        for per_student in (False, True) if args.seed_per_student else (False,):
                            out = f"{tmp}/out-{kind}{n}-{jobs}-{r}-{int(per_student)}"
                            flag = ["--seed-per-student"] if per_student else []
                            cost = measured([[*GRADE, str(subs), "-o", out, "-j", str(jobs), "-a", "ch2-jit", *flag]])
                            rows.append((f"{kind}: grade DIR -j {jobs} {' '.join(flag)}".rstrip(), n, jobs, cost))
                    if args.dask:
                        cost = dask_cost(subs, Path(tmp) / f"out-{kind}{n}-dask-{r}")
                        # its workers run outside the measured tree: only the wall time compares
                        rows.append((f"{kind}: Dask LocalCluster, 2 workers", n, 2,
                                     dataclasses.replace(cost, cpu_s=None, peak_gib=None)))
                    if args.sequential:
                        cost = measured([[*GRADE, str(p), "--json", f"{tmp}/r.json"] for p in sorted(subs.iterdir())])
                        rows.append((f"{kind}: {n} x grade FILE", n, 1, cost))
            floors.append(statistics.median([before, floor_s()]))
            rounds.append(rows)
    print(f"floor {statistics.median(floors):.2f} s (median before and after each of {args.rounds} round(s): "
          f"{', '.join(f'{f:.2f}' for f in floors)}), {os.cpu_count()} cores; "
          f"no --seed: one fresh draw of hidden inputs per batch, as in a real one")
    print("| run | copies | wall (s) | per minute | wall per submission, x floor | CPU s per submission, "
          "whole tree | peak MB per worker, whole tree |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for k, (name, n, jobs, _) in enumerate(rounds[0]):
        # the median round of this row, by its ratio to that round's floor
        ratio, cost = sorted(((rows[k][3].wall_s / n / f, rows[k][3]) for rows, f in zip(rounds, floors)),
                             key=lambda t: t[0])[len(rounds) // 2]
        cpu = f"{cost.cpu_s / n:.2f}" if cost.cpu_s is not None else "n/a"
        peak = f"{1024 * cost.peak_gib / jobs:.0f}" if cost.peak_gib is not None else "n/a"
        spread = (f" ({', '.join(f'{rows[k][3].wall_s / n / f:.2f}' for rows, f in zip(rounds, floors))})"
                  if len(rounds) > 1 else "")
        print(f"| {name} | {n} | {cost.wall_s:.1f} | {60 * n / cost.wall_s:.1f} | {ratio:.2f}{spread} | {cpu} | {peak} |")
    print(f"targets at -j 2: wall per submission <= {TARGET_PER_SUBMISSION}x the floor, "
          f"peak <= {TARGET_PEAK_PER_WORKER_MB} MB per worker")
    return 0


if __name__ == "__main__":
    sys.exit(main())
