"""Benchmark: the hand-in service (`grade serve`) as a student's client sees it, as ratios to the floor.

The service is the real one, started as an instructor starts it (`grade tokens OUT --roster FILE`,
then `grade serve OUT -a ch2-jit --roster FILE --port 0`, sandboxed unless --no-sandbox), and this
process is its clients: httpx on loopback, one token per student of a roster the bench writes.

1. Verdict latency, one hand-in at a time: the time from the POST of the reference notebook
   (solutions/ch2-jit.ipynb) to the poll (every 20 ms, 50 ms after 2 s) that sees it graded, each
   hand-in by a student of its own (no rate limit in the way). Twice, each on a fresh service and
   OUT: the store of compiled programs cold (GRADER_EXECUTABLES an empty folder, which the service
   fills before its first grading, grader/sandbox/executables.py) and warm (the folder it filled).
   The first hand-in after the start (the workers' boot and, cold, the store's build) is reported
   apart from the next --latency-runs; p50 and p95 of those.
2. A burst: --hand-ins from --students (default 200 from 50), all students at once, each sending
   its hand-ins back to back; about one in four is the reference module with one of a few
   hand-written mutants appended (as `grade validate` builds them). A 429 waits its Retry-After;
   submitting stops after at most 2 minutes. Then it waits until every accepted hand-in is
   graded, superseded or not graded, and reads OUT's gradebook (tables hand_ins, submissions):
   none lost or taken twice, each student's row the last graded hand-in, and for a sample of at
   most --verify files `grade FILE -a ch2-jit --seed <OUT's seed> --json` gives the same verdict.
   Queue wait (accepted to started) p50/p95, and the RSS of the service's whole process tree
   (workers, kernels, verifiers), sampled every 0.5 s: first quarter against last.

The floor (`python -c "import jax, jax.numpy as jnp; jnp.ones(1).block_until_ready()"`) is measured
in the same run, before and after (median). Usage:
python bench/bench_serve.py [--latency-runs N] [--hand-ins H] [--students S] [-j J] [--no-sandbox]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tree import measured

from grader.serve.running import ServiceDidNotStart, running_service

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "solutions" / "ch2-jit.ipynb"
MODULE = ROOT / "solutions" / "ch2-jit.py"
MUTANTS = ("tax_switch_wrong_at_55555", "newton_wrong_at_half", "training_fori_lr_sign_flip",
           "detective_call_1_flipped")  # a few cheap ones, one per exercise
GRADE = [sys.executable, "-m", "grader"]
FLOOR = [sys.executable, "-c", "import jax, jax.numpy as jnp; jnp.ones(1).block_until_ready()"]
SUBMITTING_S = 120.0  # the burst's bound on submitting
DONE = ("graded", "not_graded", "superseded")
POLL_S = 0.02  # --poll: the latency's polls, the first 2 s (then at least 50 ms: the service's 30 requests a second)


# ---------------------------------------------------------------------------------- the service

@dataclass
class Service:
    url: str
    tokens: dict[str, str]
    out: Path
    pid: int
    env: dict[str, str]


@contextmanager
def service(where: Path, students: list[str], *, sandbox: bool, store: Path, jobs: int,
            timeout: float = 300.0) -> Iterator[Service]:
    """`grade tokens` then `grade serve` on a fresh OUT in `where` (grader/serve/running.py), its
    store of compiled programs `store`; stopped with SIGINT (killed if stuck)."""
    where.mkdir(parents=True)
    env = {**os.environ, "GRADER_EXECUTABLES": str(store)}
    options = ["-j", str(jobs), *([] if sandbox else ["--no-sandbox"])]
    try:
        with running_service(where, students, options=options, env=env, timeout=timeout) as running:
            yield Service(url=running.url, tokens=running.tokens, out=running.out, pid=running.pid, env=env)
    except ServiceDidNotStart as exc:
        sys.exit(str(exc))


def client() -> httpx.Client:
    return httpx.Client(timeout=60, trust_env=False)


def hand_in(http: httpx.Client, svc: Service, student: str, name: str, data: bytes) -> httpx.Response:
    return http.post(f"{svc.url}/api/hand-ins", headers={"Authorization": f"Bearer {svc.tokens[student]}"},
                     files={"file": (name, data, "application/octet-stream")})


def wait_verdict(http: httpx.Client, svc: Service, student: str, job: str, start: float,
                 timeout: float = 600.0) -> tuple[float, str]:
    """Poll the hand-in until it is done; (seconds since `start`, its state)."""
    headers = {"Authorization": f"Bearer {svc.tokens[student]}"}
    while True:
        answer = http.get(f"{svc.url}/api/hand-ins/{job}", headers=headers)
        elapsed = time.perf_counter() - start
        if answer.status_code == 429:
            time.sleep(float(answer.headers.get("Retry-After", "1")))
            continue
        answer.raise_for_status()
        state = answer.json()["state"]
        if state in DONE:
            return elapsed, state
        if elapsed > timeout:
            sys.exit(f"a hand-in of {student} was not done after {timeout:.0f} s")
        time.sleep(POLL_S if elapsed < 2 else max(POLL_S, 0.05))


def one_verdict(http: httpx.Client, svc: Service, student: str, path: Path) -> tuple[float, str]:
    data = path.read_bytes()
    start = time.perf_counter()
    reply = hand_in(http, svc, student, path.name, data)
    if reply.status_code != 202:
        sys.exit(f"a hand-in was refused ({reply.status_code}): {reply.text[:200]}")
    return wait_verdict(http, svc, student, reply.json()["id"], start)


def tree_rss(root: int) -> int:
    """Bytes resident in `root` and every process under it (sandboxed kernels included: their
    host pids descend from it)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0, [root]
    page = os.sysconf("SC_PAGE_SIZE")
    while todo:
        pid = todo.pop()
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
        except (OSError, IndexError, ValueError):
            pass
        todo.extend(children.get(pid, []))
    return total


def gradebook(out: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{out / 'gradebook.sqlite'}?mode=ro", uri=True, timeout=30)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def seconds(iso_start: str, iso_end: str) -> float:
    from datetime import datetime

    return (datetime.fromisoformat(iso_end) - datetime.fromisoformat(iso_start)).total_seconds()


# ---------------------------------------------------------------------------------- 1. latency

@dataclass
class Latency:
    label: str
    first: float
    runs: list[float]
    grading: list[float]  # the service's own started -> finished, per run
    states: list[str]


def latency(where: Path, label: str, runs: int, *, sandbox: bool, store: Path, jobs: int) -> Latency:
    students = [f"lat{i:03d}" for i in range(runs + 1)]
    with service(where, students, sandbox=sandbox, store=store, jobs=jobs) as svc, client() as http:
        first, state = one_verdict(http, svc, students[0], NOTEBOOK)
        states = [state]
        walls = []
        for student in students[1:]:
            wall, state = one_verdict(http, svc, student, NOTEBOOK)
            walls.append(wall)
            states.append(state)
        with gradebook(svc.out) as db:
            grading = [seconds(a, b) for a, b in db.execute(
                "SELECT started_at, finished_at FROM hand_ins WHERE student != ? AND finished_at IS NOT NULL"
                " AND started_at IS NOT NULL", (students[0],))]
    return Latency(label, first, walls, grading, states)


# ---------------------------------------------------------------------------------- 2. the burst

@dataclass
class Burst:
    planned: int
    accepted: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (student, kind)
    refused_429: int = 0
    refused_other: list[str] = field(default_factory=list)
    not_sent: int = 0
    submitting_s: float = 0.0
    waited_s: float = 0.0
    rss: list[tuple[float, int]] = field(default_factory=list)
    rows: list[tuple] = field(default_factory=list)  # hand_ins rows
    row_checks: list[str] = field(default_factory=list)
    verified: list[tuple[str, bool, str]] = field(default_factory=list)
    seed: int | None = None
    unfinished: int = 0


def burst_files(folder: Path, hand_ins: int) -> list[tuple[str, Path]]:
    """The burst's files: (kind, path); one in four a mutant, cycling over MUTANTS."""
    folder.mkdir()
    reference = MODULE.read_text(encoding="utf-8")
    files = []
    for i in range(hand_ins):
        if i % 4 == 3:
            name = MUTANTS[(i // 4) % len(MUTANTS)]
            path = folder / f"{name}.py"
            if not path.exists():  # as grader/course/validate.py's Mutant.submission builds it
                mutant = (ROOT / "assignments" / "ch2-jit" / "mutants" / f"{name}.py").read_text(encoding="utf-8")
                path.write_text(reference.rstrip("\n") + "\n\n# %% [mutant]\n" + mutant, encoding="utf-8")
            files.append((name, path))
        else:
            files.append(("reference", NOTEBOOK))
    return files


def burst(where: Path, hand_ins: int, students: int, verify: int, *, sandbox: bool, store: Path,
          jobs: int) -> Burst:
    names = [f"s{i:03d}" for i in range(students)]
    files = burst_files(where.parent / "burst-files", hand_ins)
    plan: dict[str, list[tuple[str, Path]]] = {s: [] for s in names}
    for i, item in enumerate(files):
        plan[names[i % students]].append(item)
    result = Burst(planned=hand_ins)
    lock = threading.Lock()
    with service(where, ["warmup", *names], sandbox=sandbox, store=store, jobs=jobs) as svc:
        with client() as http:  # unmeasured: the workers booted and warm, as in term time
            one_verdict(http, svc, "warmup", NOTEBOOK)
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                result.rss.append((time.monotonic(), tree_rss(svc.pid)))
                stop.wait(0.5)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        start = time.monotonic()
        bound = start + SUBMITTING_S

        def submit(student: str) -> None:
            with client() as http:
                for n, (kind, path) in enumerate(plan[student]):
                    data = path.read_bytes()
                    while True:
                        if time.monotonic() > bound:
                            with lock:
                                result.not_sent += len(plan[student]) - n
                            return
                        reply = hand_in(http, svc, student, path.name, data)
                        if reply.status_code == 202:
                            with lock:
                                result.accepted[reply.json()["id"]] = (student, kind)
                            break
                        if reply.status_code == 429:
                            with lock:
                                result.refused_429 += 1
                            wait = float(reply.headers.get("Retry-After", "1"))
                            time.sleep(min(wait, max(0.0, bound - time.monotonic()) + 0.01))
                            continue
                        with lock:
                            result.refused_other.append(f"{reply.status_code}: {reply.text[:120]}")
                        break

        with ThreadPoolExecutor(max_workers=min(students, 64)) as pool:
            list(pool.map(submit, names))
        result.submitting_s = time.monotonic() - start
        deadline = time.monotonic() + 60 + 15 * len(result.accepted)
        ids = set(result.accepted)
        while True:
            with gradebook(svc.out) as db:
                states = dict(db.execute("SELECT id, state FROM hand_ins WHERE student != 'warmup'").fetchall())
            left = [i for i in ids if states.get(i) not in DONE]
            if not left or time.monotonic() > deadline:
                result.unfinished = len(left)
                break
            time.sleep(0.5)
        result.waited_s = time.monotonic() - start
        stop.set()
        sampler.join()
        with gradebook(svc.out) as db:
            result.rows = db.execute(
                "SELECT id, seq, student, path, sha256, state, accepted_at, started_at, finished_at, attempts,"
                " superseded_by, score FROM hand_ins WHERE student != 'warmup' ORDER BY seq").fetchall()
            result.seed = db.execute("SELECT seed FROM seeds ORDER BY rowid DESC LIMIT 1").fetchone()[0]
            rows = {r[0]: r[1:] for r in db.execute(
                "SELECT student, sha256, submitted_at, score, report FROM submissions WHERE student != 'warmup'")}
        result.row_checks = check_rows(result, rows)
        result.verified = verify_sample(result, rows, verify, sandbox=sandbox, out=svc.out, env=svc.env,
                                        tmp=where.parent)
    return result


def check_rows(result: Burst, rows: dict[str, tuple]) -> list[str]:
    """What is wrong with the tables after the burst (nothing: an empty list)."""
    wrong = []
    by_id = {r[0]: r for r in result.rows}
    lost = [i for i in result.accepted if i not in by_id]
    extra = [i for i in by_id if i not in result.accepted]
    if lost:
        wrong.append(f"{len(lost)} accepted hand-in(s) missing from hand_ins")
    if extra:
        wrong.append(f"{len(extra)} hand_ins row(s) never accepted")
    twice = [r for r in result.rows if r[5] == "graded" and r[9] != 1]
    if twice:
        wrong.append(f"{len(twice)} graded hand-in(s) taken more than once (attempts != 1)")
    for r in result.rows:
        if r[5] == "superseded":
            later = by_id.get(r[10])
            if later is None or later[2] != r[2] or later[1] <= r[1]:
                wrong.append(f"a superseded hand-in of {r[2]} names no later hand-in of theirs")
    last: dict[str, tuple] = {}
    for r in result.rows:
        if r[5] == "graded":
            last[r[2]] = r
    for student, r in last.items():
        row = rows.get(student)
        if row is None or row[0] != r[4] or row[1] != r[6] or row[2] != r[11]:
            wrong.append(f"{student}'s row is not their last graded hand-in")
    return wrong


def verdict(report: dict) -> tuple:
    return (report.get("status"), report.get("score"), report.get("max_score"),
            tuple((c["id"], c["status"], c["score"]) for e in report.get("exercises", []) for c in e["checks"]))


def verify_sample(result: Burst, rows: dict[str, tuple], limit: int, *, sandbox: bool, out: Path,
                  env: dict[str, str], tmp: Path) -> list[tuple[str, bool, str]]:
    """Each sampled student's row against `grade FILE --seed SEED` on the file it was graded from;
    the sample takes the mutants' students first, then the reference's."""
    last: dict[str, tuple] = {}
    for r in result.rows:
        if r[5] == "graded":
            last[r[2]] = r
    kinds = {result.accepted[r[0]][1] for r in last.values() if r[0] in result.accepted}
    by_kind: dict[str, list[str]] = {k: [] for k in sorted(kinds)}
    for student, r in sorted(last.items()):
        by_kind[result.accepted.get(r[0], ("", "reference"))[1]].append(student)
    sample: list[str] = []
    while len(sample) < limit and any(by_kind.values()):
        for k in list(by_kind):
            if by_kind[k] and len(sample) < limit:
                sample.append(by_kind[k].pop(0))
    checked = []
    for student in sample:
        r = last[student]
        path = Path(r[3]) if Path(r[3]).is_absolute() else out / r[3]
        answer = tmp / f"verify-{student}.json"
        done = subprocess.run([*GRADE, str(path), "-a", "ch2-jit", "--seed", str(result.seed), "--json", str(answer),
                               *([] if sandbox else ["--no-sandbox"])], capture_output=True, text=True, env=env)
        if not answer.is_file():
            checked.append((student, False, f"grade FILE wrote no report: {done.stderr.strip()[-200:]}"))
            continue
        mine = verdict(json.loads(answer.read_text()))
        theirs = verdict(json.loads(rows[student][3]))
        kind = result.accepted.get(r[0], ("", "?"))[1]
        checked.append((student, mine == theirs, f"{kind}: {theirs[1]:g}/{theirs[2]:g}" if mine == theirs else
                        f"{kind}: service {theirs[:3]}, grade FILE {mine[:3]}"))
    return checked


# ---------------------------------------------------------------------------------- main

def floor_s(runs: int) -> list[float]:
    return [measured([FLOOR]).wall_s for _ in range(runs)]


def main() -> int:
    global POLL_S
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency-runs", type=int, default=20, help="hand-ins one at a time, after the first "
                        "(default 20)")
    parser.add_argument("--hand-ins", type=int, default=200, help="hand-ins of the burst (default 200)")
    parser.add_argument("--students", type=int, default=50, help="students of the burst (default 50)")
    parser.add_argument("--verify", type=int, default=10, help="files of the burst regraded with grade FILE "
                        "(default 10)")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="the service's -j (default 1, its own default)")
    parser.add_argument("--no-sandbox", action="store_true", help="serve and regrade without the sandbox")
    parser.add_argument("--poll", type=float, default=POLL_S, help="seconds between the latency's status polls "
                        f"in the first 2 s (default {POLL_S})")
    parser.add_argument("--floor-runs", type=int, default=3, help="floor runs before and after (default 3)")
    args = parser.parse_args()
    POLL_S = args.poll
    sandbox = not args.no_sandbox
    floors = floor_s(args.floor_runs)
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        tmp_path = Path(tmp)
        store = tmp_path / "executables"
        store.mkdir()
        lat = [latency(tmp_path / "cold", "cold store" if sandbox else "no store (--no-sandbox)",
                       args.latency_runs, sandbox=sandbox, store=store, jobs=args.jobs)]
        if sandbox:
            lat.append(latency(tmp_path / "warm", "warm store", args.latency_runs, sandbox=sandbox, store=store,
                               jobs=args.jobs))
        result = burst(tmp_path / "burst", args.hand_ins, args.students, args.verify, sandbox=sandbox, store=store,
                       jobs=args.jobs) if args.hand_ins > 0 else None
    floors += floor_s(args.floor_runs)
    floor = statistics.median(floors)
    report(args, sandbox, floor, floors, lat, result)
    return 0


def report(args: argparse.Namespace, sandbox: bool, floor: float, floors: list[float], lat: list[Latency],
           b: Burst | None) -> None:
    print(f"floor {floor:.2f} s (median of {len(floors)}: {', '.join(f'{f:.2f}' for f in floors)}), "
          f"{os.cpu_count()} cores, grade serve -j {args.jobs}, {'sandboxed' if sandbox else '--no-sandbox'}")
    print("| measure | value | x floor |")
    print("| --- | --- | --- |")
    for one in lat:
        print(f"| latency, {one.label}: first hand-in after the start | {one.first:.2f} s | {one.first / floor:.2f} |")
        if one.runs:
            p50, p95 = percentile(one.runs, 0.5), percentile(one.runs, 0.95)
            print(f"| latency, {one.label}: next {len(one.runs)} one at a time, p50 | {p50:.2f} s | "
                  f"{p50 / floor:.2f} |")
            print(f"| latency, {one.label}: p95 | {p95:.2f} s | {p95 / floor:.2f} |")
            if one.grading:
                g = statistics.median(one.grading)
                print(f"| latency, {one.label}: the service's own grading (started to finished), median | "
                      f"{g:.2f} s | {g / floor:.2f} |")
        bad = [s for s in one.states if s != "graded"]
        if bad:
            print(f"| latency, {one.label}: NOT graded | {len(bad)} ({', '.join(sorted(set(bad)))}) | |")
    if b is None:
        return
    states: dict[str, int] = {}
    for r in b.rows:
        states[r[5]] = states.get(r[5], 0) + 1
    print(f"| burst: hand-ins planned / accepted (202) / refused otherwise / not sent in {SUBMITTING_S:.0f} s | "
          f"{b.planned} / {len(b.accepted)} / {len(b.refused_other)} / {b.not_sent} | |")
    print(f"| burst: 429 answers waited out (Retry-After) | {b.refused_429} | |")
    print(f"| burst: submitting took, then all done after | {b.submitting_s:.1f} s, {b.waited_s:.1f} s | |")
    print(f"| burst: graded / superseded / not graded / unfinished | {states.get('graded', 0)} / "
          f"{states.get('superseded', 0)} / {states.get('not_graded', 0)} / {b.unfinished} | |")
    print(f"| burst: lost, taken twice, rows not the last graded hand-in | "
          f"{'none' if not b.row_checks else '; '.join(b.row_checks[:5])} | |")
    same = sum(ok for _, ok, _ in b.verified)
    sampled: dict[str, int] = {}
    for _, _, what in b.verified:
        sampled[what.split(":")[0]] = sampled.get(what.split(":")[0], 0) + 1
    print(f"| burst: rows equal to grade FILE -a ch2-jit --seed {b.seed} | {same} / {len(b.verified)} "
          f"({', '.join(f'{k} {n}' for k, n in sorted(sampled.items()))}) | |")
    for student, ok, what in b.verified:
        if not ok:
            print(f"| burst: {student} DIFFERS | {what} | |")
    waits = [seconds(r[6], r[7]) for r in b.rows if r[7] and r[5] in ("graded", "not_graded")]
    if waits:
        p50, p95 = percentile(waits, 0.5), percentile(waits, 0.95)
        print(f"| burst: queue wait (accepted to started), p50 | {p50:.1f} s | {p50 / floor:.2f} |")
        print(f"| burst: queue wait, p95 | {p95:.1f} s | {p95 / floor:.2f} |")
    grading = [seconds(r[7], r[8]) for r in b.rows if r[7] and r[8] and r[5] == "graded"]
    if grading:
        g = statistics.median(grading)
        print(f"| burst: the service's own grading, median | {g:.2f} s | {g / floor:.2f} |")
        print(f"| burst: graded per minute, first accepted to last finished | "
              f"{60 * len(grading) / max(1e-9, seconds(min(r[6] for r in b.rows), max(r[8] for r in b.rows if r[8]))):.1f}"
              f" | |")
    if len(b.rss) >= 4:
        quarter = len(b.rss) // 4
        first = statistics.median(v for _, v in b.rss[:quarter]) / 2**20
        last = statistics.median(v for _, v in b.rss[-quarter:]) / 2**20
        peak = max(v for _, v in b.rss) / 2**20
        flat = "flat" if last <= 1.1 * first else "GROWS"
        print(f"| burst: service tree RSS, first quarter / last quarter (median) / peak, {len(b.rss)} samples | "
              f"{first:.0f} / {last:.0f} / {peak:.0f} MB ({last / first:.2f}x: {flat}) | |")


if __name__ == "__main__":
    sys.exit(main())
