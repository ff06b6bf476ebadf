"""`grade serve` started as its own process, the way an instructor starts it: `grade tokens` for a
roster, then `grade serve OUT -a ASSIGNMENT --roster FILE --port 0`, its address read from the line
it prints, up once /healthz answers; stopped with Ctrl-C (SIGINT: it stops its workers and says so),
killed if it will not stop. The tests' real service and `bench/bench_serve.py` both start it here.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

GRADE = [sys.executable, "-m", "grader"]
ADDRESS = re.compile(r"^grade serve: (http://127\.0\.0\.1:\d+)/ ", re.M)
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy


class ServiceDidNotStart(RuntimeError):
    """`grade tokens` or `grade serve` failed, or the service printed no address or did not answer."""


@dataclass
class RunningService:
    """A `grade serve` process: its address, each roster student's token, its OUT and its pid."""

    url: str
    tokens: dict[str, str]
    out: Path
    pid: int


def _healthy(url: str) -> bool:
    try:
        with _NO_PROXY.open(f"{url}/healthz", timeout=5) as answer:
            return json.loads(answer.read()) == {"ok": True}
    except (OSError, ValueError, urllib.error.URLError):
        return False


@contextmanager
def running_service(where: Path, students: Sequence[str], *, assignment: str = "ch2-jit",
                    options: Sequence[str] = (), env: Mapping[str, str] | None = None,
                    timeout: float = 120.0) -> Iterator[RunningService]:
    """The service on a fresh OUT in `where` (roster, tokens, its output in serve.out and serve.err)
    for the block; `options` are more of `grade serve`'s (`--no-sandbox`, `-j 2`)."""
    where.mkdir(parents=True, exist_ok=True)
    roster = where / "roster.txt"
    roster.write_text("".join(f"{s}\n" for s in students), encoding="utf-8")
    out = where / "OUT"
    environment = dict(os.environ if env is None else env)
    issued = subprocess.run([*GRADE, "tokens", str(out), "--roster", str(roster)], capture_output=True,
                            text=True, timeout=timeout, env=environment)
    if issued.returncode != 0:
        raise ServiceDidNotStart(f"grade tokens failed: {issued.stderr.strip()}")
    tokens = {row[0]: row[1] for row in csv.reader(io.StringIO(issued.stdout)) if row and row[0] != "student"}
    said, errors = where / "serve.out", where / "serve.err"
    command = [*GRADE, "serve", str(out), "-a", assignment, "--roster", str(roster), "--port", "0", *options]
    with open(said, "w") as stdout, open(errors, "w") as stderr:
        process = subprocess.Popen(command, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                                   start_new_session=True, env=environment)

    def failed(what: str) -> ServiceDidNotStart:
        return ServiceDidNotStart(f"grade serve {what}: {errors.read_text(encoding='utf-8').strip()}")

    try:
        deadline = time.monotonic() + timeout
        while not (found := ADDRESS.search(said.read_text(encoding="utf-8"))):
            if process.poll() is not None or time.monotonic() > deadline:
                raise failed("printed no address")
            time.sleep(0.05)
        url = found.group(1)
        while not _healthy(url):
            if process.poll() is not None or time.monotonic() > deadline:
                raise failed("did not answer")
            time.sleep(0.05)
        yield RunningService(url=url, tokens=tokens, out=out, pid=process.pid)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
