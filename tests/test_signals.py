"""Ctrl-C and SIGTERM: `grade` stops promptly, with one line, and leaves nothing behind.

Each test runs `grade` as a subprocess with its own TMPDIR, waits (polling, bounded) until the
student's endless cell is running in the kernel (the cell writes a file into its scratch
directory, which is under that TMPDIR), signals it, and then looks for what could remain: a
scratch tmpfs still mounted, a sandbox cgroup, a process working in that TMPDIR.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import terminal_ctrl_c

from grader.sandbox import layers as sandbox

pytestmark = [pytest.mark.kernel, pytest.mark.serial]  # counts every grader cgroup on the machine

ENDLESS = "open('started', 'w').close()\nwhile True:\n    pass\n"
WAIT_S = 120  # bound of every poll below; a healthy run takes a few seconds


def _start(args: list[str], tmpdir: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    return subprocess.Popen([*terminal_ctrl_c.python_module("grader"), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _wait_until_running(proc: subprocess.Popen[str], tmpdir: Path, count: int = 1) -> None:
    deadline = time.monotonic() + WAIT_S
    while len(list(tmpdir.glob("grade-*/started"))) < count:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"the endless cell never started: {out} {err}")
        time.sleep(0.05)  # polling for a condition, bounded


def _cgroups() -> set[str]:
    found: set[str] = set()
    for controller in ("memory", "pids"):
        parent = sandbox._own_cgroup(controller)
        if parent is not None:
            found |= {str(p) for p in parent.glob("grader-*")}
    return found


def _leftovers(tmpdir: Path, cgroups_before: set[str]) -> list[str]:
    found = []
    mounts = Path("/proc/self/mounts").read_text()
    found += [line for line in mounts.splitlines() if str(tmpdir) in line]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd.startswith(str(tmpdir)):
            found.append(f"process {pid} in {cwd}")
    found += sorted(_cgroups() - cgroups_before)  # others' gradings may run on this machine meanwhile
    return found


def _no_leftovers(tmpdir: Path, cgroups_before: set[str]) -> None:
    deadline = time.monotonic() + 10
    while _leftovers(tmpdir, cgroups_before) and time.monotonic() < deadline:
        time.sleep(0.05)  # killed processes leave their cgroup asynchronously
    assert _leftovers(tmpdir, cgroups_before) == []


@pytest.fixture
def endless(tmp_path: Path) -> Path:
    path = tmp_path / "endless.py"
    path.write_text(ENDLESS, encoding="utf-8")
    return path


@pytest.fixture
def tmpdir_for_grade():
    """A nested TMPDIR, as SLURM and CI runners set it, short enough for the kernel's unix
    sockets (a longer one makes the grader fall back to /tmp)."""
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="sig-", dir="/tmp"))
    path = base / "a" / "b"
    path.mkdir(parents=True)
    yield path
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize(("signum", "code", "word"), [(signal.SIGINT, 130, "interrupted"),
                                                     (signal.SIGTERM, 143, "terminated")])
def test_one_file_stops_at_once_and_cleans_up(endless, tmpdir_for_grade, signum, code, word) -> None:
    before = _cgroups()
    proc = _start([str(endless), "-a", "ch2-jit", "--timeout", "300"], tmpdir_for_grade)
    _wait_until_running(proc, tmpdir_for_grade)
    proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=30)  # the cell's own limit is 300 s: this is the signal
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert err.strip().splitlines() and word in err.strip().splitlines()[-1]
    assert "Traceback" not in err
    _no_leftovers(tmpdir_for_grade, before)


@pytest.mark.parametrize(("signum", "code", "word"), [(signal.SIGINT, 130, "interrupted"),
                                                     (signal.SIGTERM, 143, "terminated")])
def test_a_batch_stops_on_a_signal_without_tracebacks(tmp_path, tmpdir_for_grade, signum, code, word) -> None:
    """SIGTERM is said as such (143), not as a Ctrl-C: found by an attack, the batch loop's
    handler took its KeyboardInterrupt subclass for one."""
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("a", "b"):
        (subs / f"{name}.py").write_text(ENDLESS, encoding="utf-8")
    before = _cgroups()
    proc = _start([str(subs), "-o", str(tmp_path / "out"), "-a", "ch2-jit", "-j", "2", "--timeout", "300"],
                  tmpdir_for_grade)
    _wait_until_running(proc, tmpdir_for_grade, count=2)
    proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert word in err and "Traceback" not in err and "Exception ignored" not in err, err
    _no_leftovers(tmpdir_for_grade, before)
