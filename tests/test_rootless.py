"""The sandbox of an ordinary user (issue 30): bubblewrap in an unprivileged user namespace, the
limits it can have (rlimits counted inside that namespace), strays found without a cgroup, and
what a batch does with a host that lacks layers."""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.errors import UsageError
from grader.report import Isolation
from grader.sandbox import executables, layers
from grader.sandbox.layers import LAYERS, Detected, Sandbox, SandboxPolicy

POLICY = SandboxPolicy()
ROOTLESS = ["namespaces", "user", "seccomp", "rlimits", "scratch"]


def test_an_ordinary_user_gets_namespaces_user_seccomp_rlimits_and_a_scratch_tmpfs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(layers, "_userns_refused", lambda: None)
    monkeypatch.setattr(layers, "_namespace_tmpfs_refused", lambda: None)
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    found = layers.detect.__wrapped__()
    assert (found.backend, list(found.layers)) == ("rootless", ROOTLESS)
    assert set(found.missing) == {"cgroups", "cpu"}
    assert "processes are counted in the sandbox's own user namespace" in found.missing["cgroups"]
    assert "the grader's watcher, which kills them past the limit" in found.missing["cgroups"]
    assert layers.bounds(found.layers, POLICY) == {"memory_bound": "watcher", "memory_bytes": POLICY.memory_bytes,
                                                   "scratch_bound": "tmpfs",
                                                   "scratch_bytes": POLICY.scratch_bytes + POLICY.tmp_bytes}
    monkeypatch.setattr(layers, "_namespace_tmpfs_refused", lambda: "mount: permission denied")
    plain = layers.detect.__wrapped__()
    assert "plain folder only the grader can enter" in plain.missing["scratch"]
    assert layers.bounds(plain.layers, POLICY)["scratch_bound"] == "file size"
    monkeypatch.setattr(layers, "_userns_refused", lambda: "user namespaces are refused here (x)")
    refused = layers.detect.__wrapped__()
    assert "namespaces" in refused.missing and "seccomp" in refused.missing and refused.layers == ("rlimits",)
    assert layers.bounds(refused.layers, POLICY) == {"memory_bound": "per process", "memory_bytes": None,
                                                     "scratch_bound": "file size", "scratch_bytes": None}


def _wrapped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, uid: int) -> list[str]:
    monkeypatch.setattr(os, "geteuid", lambda: uid)
    layers_here = ROOTLESS if uid else [layer for layer in LAYERS if layer != "cgroups"]
    sandbox = Sandbox(tmp_path, POLICY, Isolation(sandboxed=False, layers=layers_here, missing={}))
    return sandbox.wrap(["python", "-m", "ipykernel_launcher"], connection_file=str(tmp_path / "c.json"))


def test_rootless_the_uid_comes_from_the_user_namespace_and_the_rlimits_are_set_inside(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    argv = _wrapped(monkeypatch, tmp_path, uid=1000)
    bwrap, prlimit = argv.index("bwrap"), argv.index("prlimit")
    assert argv[bwrap:].count("--unshare-user") == 1 and "--uid" in argv[bwrap:]
    assert prlimit > bwrap  # after the namespace exists: the process count is the sandbox's own
    assert f"--nproc={POLICY.pids}:{POLICY.pids}" in argv[prlimit:]
    assert "setpriv" not in argv and "chown" not in " ".join(argv)
    # the scratch and /tmp: tmpfs mounted in a namespace of the sandbox's own, never the host folder
    unshare = argv.index("unshare")
    assert unshare < bwrap and f"size={POLICY.scratch_bytes},nr_inodes={layers.TMPFS_INODES},mode=0700" in argv
    binds = [tuple(argv[i + 1:i + 3]) for i in range(bwrap, len(argv)) if argv[i] == "--bind"]
    assert (str(tmp_path / ".scratch"), str(tmp_path)) in binds and (str(tmp_path / ".tmp"), "/tmp") in binds
    assert (str(tmp_path), str(tmp_path)) not in binds
    assert argv[bwrap:prlimit][-4:] == ["--remount-ro", "/", "--remount-ro", "/dev"]


def test_as_root_the_uid_comes_from_setpriv_and_the_rlimits_from_outside(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    argv = _wrapped(monkeypatch, tmp_path, uid=0)
    assert argv.index("prlimit") < argv.index("bwrap") < argv.index("setpriv")
    assert "--unshare-user" not in argv and "chown" in " ".join(argv)


@pytest.mark.skipif(shutil.which("bwrap") is None or layers._bwrap_refused() is not None,
                    reason="needs bubblewrap's namespaces")
def test_without_a_cgroup_strays_are_the_bubblewrap_trees_and_the_kernel_is_kept(tmp_path: Path) -> None:
    """A tree under bubblewrap (its init, the 'kernel', two strays, one a double-forked daemon):
    every process but the kernel's chain goes; a process that is not bubblewrap is never touched."""
    sandbox = Sandbox(tmp_path, POLICY, Isolation(sandboxed=False, layers=["namespaces"], missing={}))
    script = "sleep 300 & (setsid sleep 301 &) ; exec sleep 302"
    process = subprocess.Popen(sandbox.wrap(["/bin/sh", "-c", script]), cwd=tmp_path)
    try:
        deadline = time.monotonic() + 10
        while len(layers.descendants(process.pid)) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        before = layers.descendants(process.pid)
        assert sandbox.stop_strays(process.pid) == 2
        after = layers.descendants(process.pid)
        commands = {Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1] for pid in after
                    if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep")}
        assert commands == {b"302"} and set(after) < set(before)
    finally:
        process.kill()
        process.wait()
    assert sandbox.stop_strays(os.getpid()) == 0  # pytest is no bubblewrap: nothing of it is killed


def _check(monkeypatch: pytest.MonkeyPatch, missing: dict[str, str], *, batch: bool,
           require: bool = False) -> bool:
    from grader import cli

    present = tuple(layer for layer in LAYERS if layer not in missing)
    found = Detected(layers=present, missing=missing, backend="rootless")
    monkeypatch.setattr(layers, "detect", lambda: found)
    args = argparse.Namespace(no_sandbox=False, require_sandbox=require)
    return cli._check_isolation(args, batch=batch)


def test_a_batch_grades_with_the_core_and_says_what_each_missing_layer_costs(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    assert _check(monkeypatch, {"cgroups": "no writable cgroup: memory capped per process"}, batch=True)
    assert "  cgroups: no writable cgroup: memory capped per process." in capsys.readouterr().err
    with pytest.raises(UsageError, match="at least bubblewrap's namespaces and the seccomp filter"):
        _check(monkeypatch, {"seccomp": "no filter"}, batch=True)
    assert _check(monkeypatch, {"seccomp": "no filter"}, batch=False)  # one file: said, and graded
    with pytest.raises(UsageError, match="--require-sandbox: this host .rootless. lacks cgroups"):
        _check(monkeypatch, {"cgroups": "none"}, batch=False, require=True)
    assert _check(monkeypatch, {}, batch=True, require=True)


def test_the_report_records_the_backend() -> None:
    from grader.options import GradeOptions
    from grader.pipeline import isolation_for

    assert isolation_for(GradeOptions(sandbox=False)).backend == "none"
    assert layers.available().backend == ("root" if os.geteuid() == 0 else "rootless")
    assert sys.platform.startswith("linux")


# ----------------------------------------------------------------------------- cgroup v2 (root)


def test_a_v2_root_hands_memory_pids_and_cpu_down_to_jax_grader(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    """On a fake unified hierarchy: the controllers enabled below the root and below jax-grader."""
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("memory\n")
    (tmp_path / "jax-grader").mkdir()
    (tmp_path / "jax-grader" / "cgroup.subtree_control").write_text("")
    writes: list[tuple[str, str]] = []
    real_write = Path.write_text

    def recording(path: Path, text: str, *args, **kwargs) -> int:
        writes.append((str(path.relative_to(tmp_path)), text))
        if path.name == "cgroup.subtree_control":  # the kernel lists what is enabled, without "+"
            text = " ".join(sorted({*path.read_text().split(), *(w.lstrip("+") for w in text.split())}))
        return real_write(path, text, *args, **kwargs)

    monkeypatch.setattr(layers, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(Path, "write_text", recording)
    parent = layers.v2_parent.__wrapped__()
    assert parent == tmp_path / "jax-grader"
    assert writes == [("cgroup.subtree_control", "+pids"), ("cgroup.subtree_control", "+cpu"),
                      ("jax-grader/cgroup.subtree_control", "+memory +pids +cpu")]
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(layers, "_own_v2_cgroup", lambda: tmp_path)
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert layers.v2_parent.__wrapped__() is None  # an ordinary user writes no cgroup here


def _fake_delegation(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *, writable: bool = True) -> tuple[Path, list]:
    """A fake unified hierarchy whose root an ordinary user cannot write, with the cgroup this
    process runs in (user.slice/grade.scope, two processes) delegated to it or not."""
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    own = tmp_path / "user.slice" / "grade.scope"
    own.mkdir(parents=True)
    (own / "cgroup.controllers").write_text("cpu memory pids\n")
    (own / "cgroup.subtree_control").write_text("")
    (own / "cgroup.procs").write_text("111\n222\n")
    writes: list[tuple[str, str]] = []
    real_write = Path.write_text

    def recording(path: Path, text: str, *args, **kwargs) -> int:
        writes.append((str(path.relative_to(tmp_path)), text))
        if path.name == "cgroup.subtree_control":  # the kernel makes it with the directory
            before = path.read_text().split() if path.exists() else []
            text = " ".join(sorted({*before, *(w.lstrip("+") for w in text.split())}))
        elif path.name == "cgroup.procs":  # a process moves: it leaves the cgroup it was in
            left = (own / "cgroup.procs").read_text().replace(text + "\n", "")
            real_write(own / "cgroup.procs", left)
            text = (path.read_text() if path.exists() else "") + text + "\n"
        return real_write(path, text, *args, **kwargs)

    monkeypatch.setattr(layers, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(os, "access", lambda path, mode: writable and Path(path).is_relative_to(own))
    monkeypatch.setattr(layers, "_own_v2_cgroup", lambda: own)
    monkeypatch.setattr(Path, "write_text", recording)
    return own, writes


def test_a_delegated_v2_cgroup_moves_the_grader_into_a_leaf_and_hands_controllers_down(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """systemd's Delegate=yes: the grader's processes leave the delegated cgroup for a leaf of their
    own (cgroup v2 hands no controller down from a cgroup with processes), then the sandboxes'
    parent gets memory, pids and cpu."""
    own, writes = _fake_delegation(monkeypatch, tmp_path)
    parent = layers.v2_parent.__wrapped__()
    assert parent == own / "jax-grader"
    scope = "user.slice/grade.scope"
    assert writes == [(f"{scope}/jax-grader-self/cgroup.procs", "111"),
                      (f"{scope}/jax-grader-self/cgroup.procs", "222"),
                      (f"{scope}/cgroup.subtree_control", "+memory"), (f"{scope}/cgroup.subtree_control", "+pids"),
                      (f"{scope}/cgroup.subtree_control", "+cpu"),
                      (f"{scope}/jax-grader/cgroup.subtree_control", "+memory +pids +cpu")]
    assert (own / "cgroup.procs").read_text() == ""
    # a batch's worker, started in the leaf, finds the same parent and moves nothing
    monkeypatch.setattr(layers, "_own_v2_cgroup", lambda: own / "jax-grader-self")
    writes.clear()
    assert layers.v2_parent.__wrapped__() == parent
    assert writes == [(f"{scope}/jax-grader/cgroup.subtree_control", "+memory +pids +cpu")]


def test_an_ordinary_user_without_delegation_writes_no_cgroup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    own, writes = _fake_delegation(monkeypatch, tmp_path, writable=False)
    assert layers.v2_parent.__wrapped__() is None
    assert writes == [] and not (own / "jax-grader-self").exists()


def test_a_delegated_cgroup_is_the_rootless_sandbox_s_cgroups_layer(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    own, _ = _fake_delegation(monkeypatch, tmp_path)
    monkeypatch.setattr(layers, "v2_parent", functools.cache(layers.v2_parent.__wrapped__))
    monkeypatch.setattr(layers, "_userns_refused", lambda: None)
    found = layers._rootless()
    assert "cgroups" in found.layers and "cpu" in found.layers and found.backend == "rootless"
    groups = layers.create_cgroups(layers.SandboxPolicy(), cpu=True)
    assert set(groups) == {"memory", "pids", "cpu", "cpuacct"} and groups["memory"].parent == own / "jax-grader"


def test_v2_files_tell_an_oom_the_peak_and_the_cpu_time(tmp_path: Path) -> None:
    from grader.sandbox.starvation import run_delays, usage_ns

    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
    (tmp_path / "memory.peak").write_text("123456\n")
    (tmp_path / "cpu.stat").write_text("usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n")
    (tmp_path / "cgroup.threads").write_text(f"{os.getpid()}\n")
    assert not layers.out_of_memory(tmp_path)
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n")
    assert layers.out_of_memory(tmp_path)
    assert layers.peak_memory_bytes(tmp_path) == 123456
    assert usage_ns(tmp_path) == 2_500_000
    assert list(run_delays(tmp_path)) == [os.getpid()]


# ----------------------------------------------------------------------------- read-only cgroups



@pytest.mark.kernel
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("bwrap"),
                    reason="simulates a container as root (unshare, a remount of the cgroups read-only)")
def test_with_read_only_cgroups_a_memory_bomb_is_stopped_by_rlimits_inside_namespaces(
        tmp_path: Path, repo_root: Path) -> None:
    """A container whose cgroupfs is read-only (Docker's default, Kubernetes'): the grader, root in
    it, gets no cgroup and grades with namespaces, seccomp and rlimits; the bomb's allocation fails
    at the address-space limit, and everything it answered is graded."""
    import json

    bomb = tmp_path / "bomb.py"
    reference = (repo_root / "solutions" / "ch2-jit.py").read_text()
    bomb.write_text(reference + "\n# %% [memory bomb]\nimport numpy as np\n"
                    "hoard = [np.empty(32 * 2**20) for _ in range(64)]  # 16 GiB of address space, fast\n")
    report_path = tmp_path / "bomb.json"
    grade = [sys.executable, "-m", "grader", str(bomb), "-a", "ch2-jit", "--json", str(report_path)]
    done = subprocess.run([str(repo_root / "scripts" / "read-only-cgroups"), *grade], capture_output=True,
                          text=True, timeout=600, cwd=repo_root)
    assert report_path.exists(), done.stderr[-2000:]
    report = json.loads(report_path.read_text())
    isolation = report["isolation"]
    assert "cgroups" in isolation["missing"]
    assert {"namespaces", "seccomp", "rlimits"} <= set(isolation["layers"])
    assert "cgroups:" in done.stderr  # said once, with what it costs
    assert any("MemoryError" in p["message"] for p in report["cell_problems"]), report["cell_problems"]
    assert report["score"] == 100


# ----------------------------------------------------------------------------- as an ordinary user
# Each attack runs a driver as an ordinary user (uid 65534; as root, in a mount namespace where the
# folders above the interpreter that others cannot enter are opened: this machine keeps Python under
# /root, 0700), which starts real rootless kernels and prints what it saw as its last line (JSON).

TESTS = Path(__file__).resolve().parent
USER_UID = 65534  # the ordinary user root becomes (BECOME_USER)
BECOME_USER = """
import os, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from gradescope_container import open_ways
open_ways([Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), Path({repo!r}), Path({work!r})])
os.execvp("setpriv", ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", "-i",
                      "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + {work!r}, sys.executable, "-I", {script!r}])
"""
DRIVER_HEAD = """
import json, os, sys
sys.path.insert(0, {repo!r})
from grader.sandbox.layers import available
if available().backend != "rootless" or "namespaces" not in available().layers:
    print(json.dumps({{"skip": str(available().missing)}}))
    raise SystemExit(0)
"""


def _user_can_run() -> str | None:
    """Why this test run cannot be an ordinary user's grader, or None."""
    if shutil.which("bwrap") is None:
        return "needs bubblewrap"
    if os.geteuid() == 0 and not (shutil.which("unshare") and shutil.which("setpriv")):
        return "as root, needs unshare and setpriv to become an ordinary user"
    return None


as_user = pytest.mark.skipif(_user_can_run() is not None, reason=_user_can_run() or "")


def run_as_user(work: Path, driver: str, *, timeout: float = 600) -> dict:
    """Run `driver` (Python, after DRIVER_HEAD) as an ordinary user in `work` (made theirs) and
    return its last line, read as JSON; skip where the user gets no rootless namespaces."""
    repo = str(TESTS.parent)
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o777)  # the folders above it that others cannot enter are opened in BECOME_USER
    script = work / "driver.py"
    script.write_text(DRIVER_HEAD.format(repo=repo) + driver)
    script.chmod(0o644)
    if os.geteuid() == 0:
        command = ["unshare", "--mount", "--propagation", "private", sys.executable, "-c",
                   BECOME_USER.format(tests=str(TESTS), repo=repo, work=str(work), script=str(script))]
    else:
        command = [sys.executable, "-I", str(script)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=work)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, (done.returncode, done.stdout[-2000:], done.stderr[-3000:])
    result = json.loads(lines[-1])
    if "skip" in result:
        pytest.skip(f"no rootless sandbox for an ordinary user here: {result['skip']}")
    result["stderr"] = done.stderr
    return result


KERNEL_DRIVER = """
from pathlib import Path
from grader.kernel.client import Kernel
from grader.sandbox.layers import SandboxPolicy


def seen(kernel):
    \"\"\"Where the kernel's scratch files are seen from the grader's side.\"\"\"
    sandbox, pid = kernel._sandbox, kernel._km.provisioner.process.pid
    return sandbox.seen_scratch(pid) if hasattr(sandbox, "seen_scratch") else kernel.scratch
"""

HIDE = """
import os
os.makedirs("vault/inner")
with open("vault/inner/hidden-args.txt", "w") as f:
    f.write("lr=0.0123 num_steps=17")  # as an eager check's hidden arguments, kept by the student's code
os.chmod("vault/inner", 0o311)  # enter, not list: a recursive removal cannot see the file
os.chmod("vault", 0o711)
os.chmod(".", 0o755)  # the scratch folder itself, open to every user of the machine
"""


@pytest.mark.kernel
@as_user
def test_files_a_rootless_kernel_hides_from_the_removal_never_reach_the_host(tmp_path: Path) -> None:
    """Third red-team round: a kernel made its folders enter-only (0711, 0311) so that the grader's
    removal, which ignored errors, left a file with an eager check's hidden arguments in /tmp,
    readable by any user who knew its name. The scratch is now a tmpfs of the sandbox's own mount
    namespace: the host's folder (0700, the grader's) never holds the kernel's files."""
    found = run_as_user(tmp_path, KERNEL_DRIVER + f"""
kernel = Kernel(sandbox=SandboxPolicy())
with kernel:
    run = kernel.run({HIDE!r}, 60)
    hidden = kernel.scratch / "vault/inner/hidden-args.txt"
    during = {{"status": run.status, "on_host": hidden.exists(), "mode": oct(kernel.scratch.stat().st_mode & 0o777),
              "inside": (seen(kernel) / "vault/inner/hidden-args.txt").exists()}}
print(json.dumps({{**during, "after": hidden.exists() or kernel.scratch.exists()}}))
""")
    assert found["status"] == "ok" and found["inside"], found  # the kernel did hide it, in its own tmpfs
    assert not found["on_host"] and found["mode"] == "0o700", found  # the host folder: the grader's alone
    assert not found["after"], found  # nothing of it left after grading


FILL = """
import errno, os


def fill(folder, limit=2**30, chunk=64):
    written, block = 0, b"\\0" * 2**20
    try:
        for n in range(limit // (chunk * 2**20)):
            with open(os.path.join(folder, f"fill{n}"), "wb", buffering=0) as f:
                for _ in range(chunk):
                    f.write(block)
                    written += 2**20
    except OSError as exc:
        return written, errno.errorcode.get(exc.errno)
    finally:
        for name in os.listdir(folder):
            if name.startswith("fill"):
                os.remove(os.path.join(folder, name))
    return written, None


def files(folder, limit=70_000):
    many = os.path.join(folder, "many")
    os.mkdir(many)
    made = 0
    try:
        for made in range(limit):
            open(os.path.join(many, str(made)), "w").close()
    except OSError as exc:
        return made, errno.errorcode.get(exc.errno)
    finally:
        for name in os.listdir(many):
            os.remove(os.path.join(many, name))
    return limit, None


def refused(path):
    try:
        open(path, "w").close()
    except OSError as exc:
        return errno.errorcode.get(exc.errno)
    return None


found = {"scratch": fill("."), "tmp": fill("/tmp"), "inodes": files("."),
         "root": refused("/probe"), "dev": refused("/dev/probe"), "etc": refused("/etc/probe")}
with open("found.json", "w") as f:
    f.write(__import__("json").dumps(found))
"""


@pytest.mark.kernel
@as_user
def test_a_rootless_kernel_s_files_have_a_total_bound_and_its_root_is_read_only(tmp_path: Path) -> None:
    """A rootless scratch was a plain host folder, each file capped at 256 MiB and their total at
    nothing (1,680 MiB held at once); the sandbox's root, /etc and /dev were tmpfs of the kernel's
    user without a size. Now: the scratch and /tmp are size-limited tmpfs with a bounded number of
    files, and the rest is read-only."""
    policy = SandboxPolicy()
    found = run_as_user(tmp_path, KERNEL_DRIVER + f"""
kernel = Kernel(sandbox=SandboxPolicy())
with kernel:
    run = kernel.run({FILL!r}, 300)
    seen_found = seen(kernel) / "found.json"
    print(json.dumps({{"status": run.status, "evalue": run.evalue,
                      **(json.loads(seen_found.read_text()) if seen_found.exists() else {{}})}}))
""")
    assert found["status"] == "ok", found
    (scratch, why_scratch), (tmp, why_tmp) = found["scratch"], found["tmp"]
    assert scratch <= policy.scratch_bytes and why_scratch == "ENOSPC", found  # was 1 GiB on the host's disk
    assert tmp <= policy.tmp_bytes and why_tmp == "ENOSPC", found
    made, why_files = found["inodes"]
    assert made <= layers.TMPFS_INODES and why_files == "ENOSPC", found
    assert found["root"] == found["dev"] == found["etc"] == "EROFS", found


THREE_CHILDREN = """
import os, time
readable, writable = os.pipe()
for _ in range(3):  # each within its own address-space limit (twice the memory limit), 3 * CHILD_GIB together
    if os.fork() == 0:
        block = bytearray(int(CHILD_GIB * 2**30))
        block[::4096] = b"\\1" * len(range(0, len(block), 4096))  # every page touched
        os.write(writable, b"x")
        time.sleep(600)
        os._exit(0)
for _ in range(3):
    os.read(readable, 1)
time.sleep(20)  # all three alive together: the watcher has 20 s to see it (it looks every 0.05 s)
"""


def three_children(child_gib: float = 1.6) -> str:
    """THREE_CHILDREN, each child holding `child_gib` GiB (1.6: past the default 4 GiB together)."""
    return f"CHILD_GIB = {child_gib!r}\n" + THREE_CHILDREN


@pytest.mark.kernel
@as_user
def test_the_processes_of_a_rootless_sandbox_together_are_killed_past_its_memory_limit(tmp_path: Path) -> None:
    """Without a cgroup only each process's address space was capped: three children of 1.6 GiB
    each held 4.7 GiB together against a 4 GiB limit. The grader's watcher adds them up and kills
    the sandbox. (Here at a quarter of the scale: 0.4 GiB each against a 1 GiB limit, so that two
    children and the kernel, 28 MiB, stay below it, and each is well within its address-space
    limit of 2 GiB.)"""
    limit = 2**30
    found = run_as_user(tmp_path, KERNEL_DRIVER + f"""
kernel = Kernel(sandbox=SandboxPolicy(memory_bytes={limit}))
with kernel:
    run = kernel.run({three_children(0.4)!r}, 120)
    sandbox = kernel._sandbox
print(json.dumps({{"status": run.status, "seconds": run.seconds,
                  "exceeded": getattr(sandbox, "memory_exceeded", None)}}))
""")
    assert found["status"] == "died" and found["seconds"] < 20, found  # not alive through its sleep
    assert found["exceeded"] is not None and found["exceeded"] > limit, found


@pytest.mark.kernel
@as_user
def test_a_rootless_batch_holds_and_records_its_memory_and_file_bounds(tmp_path: Path, repo_root: Path) -> None:
    """`grade DIR -j 2` as an ordinary user without a delegated cgroup: each sandbox bounded (the
    watcher, the tmpfs), said in every report's isolation record; the three children are killed
    and everything else of that submission is graded, beside an honest one."""
    reference = (repo_root / "solutions" / "ch2-jit.py").read_text()
    class_dir = tmp_path / "work" / "class"  # inside the folder the user is let into
    class_dir.mkdir(parents=True)
    (class_dir / "alice.py").write_text(reference)
    (class_dir / "bomb.py").write_text(reference + "\n\n# %% [three children]\n" + three_children())
    for path in [class_dir, *class_dir.iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    env = {"PYTHONPATH": str(TESTS.parent)}
    store = executables.store()
    if store is not None and os.geteuid() == 0:
        # An ordinary user running the tests hands the batch the session's store of the references'
        # programs (its environment); the user root becomes starts with an empty HOME and would
        # build it again (the hand-in service's test below builds one as that user): a copy of its own.
        seeded = tmp_path / "work" / "executables"
        shutil.copytree(store, seeded / store.name)
        for folder, _, names in os.walk(seeded):
            for path in (folder, *(os.path.join(folder, name) for name in names)):
                os.chown(path, USER_UID, USER_UID)
        env[executables.ENV] = str(seeded)
    found = run_as_user(tmp_path / "work", f"""
import subprocess
done = subprocess.run([sys.executable, "-m", "grader", {str(class_dir)!r}, "-o", "out", "-a", "ch2-jit", "-j", "2",
                       "--seed", "1"], capture_output=True, text=True, env={{**os.environ, **{env!r}}})
reports = {{name: json.load(open(f"out/{{name}}.json")) for name in ("alice", "bomb") if os.path.exists(f"out/{{name}}.json")}}
print(json.dumps({{"code": done.returncode, "err": done.stderr[-2000:], **reports}}))
""")
    assert "alice" in found and "bomb" in found, found["err"]
    policy = SandboxPolicy()
    for name in ("alice", "bomb"):
        isolation = found[name]["isolation"]
        assert isolation["backend"] == "rootless" and "cgroups" in isolation["missing"], isolation
        assert (isolation["memory_bound"], isolation["memory_bytes"]) == ("watcher", policy.memory_bytes), isolation
        assert (isolation["scratch_bound"], isolation["scratch_bytes"]) == (
            "tmpfs", policy.scratch_bytes + policy.tmp_bytes), isolation
    assert found["alice"]["score"] == 100 and not found["alice"]["cell_problems"], found["alice"]
    assert [p["status"] for p in found["bomb"]["cell_problems"]] == ["died"], found["bomb"]["cell_problems"]
    # told why: the watcher's bound (it read "killed the Python kernel" alone)
    assert "used more than the 4 GiB of memory a grading may use" in found["bomb"]["cell_problems"][0]["message"]
    assert found["bomb"]["score"] == 100, found["bomb"]  # its answers, all graded


KILLED_GRADER = """
import os, sys, time
sys.path.insert(0, {repo!r})
from grader import runtime_paths
from grader.kernel.client import Kernel
from grader.sandbox.layers import SandboxPolicy
kernel = Kernel(sandbox=SandboxPolicy()).start()
trap = runtime_paths.scratch_directory("trap")  # a folder whose insides deny listing, as a kernel's could
os.makedirs(trap / "a" / "b")
(trap / "a" / "b" / "f").write_text("x")
os.chmod(trap / "a" / "b", 0o311)
os.chmod(trap / "a", 0o500)
print(kernel.scratch, trap, flush=True)
time.sleep(600)
"""


@pytest.mark.kernel
@as_user
def test_the_scratch_of_a_grader_killed_outright_is_removed_by_the_next(tmp_path: Path) -> None:
    """A grader killed outright (the OOM killer, a power cut) left its scratch folders in the
    temporary folder (ten after a loaded hour): the next grader process removes those of graders
    that are gone, whatever modes their contents have, and never a live one's or another pid
    namespace's."""
    found = run_as_user(tmp_path, f"""
import signal, subprocess, tempfile, time
from pathlib import Path
from grader import runtime_paths
killed = subprocess.Popen([sys.executable, "-I", "-c", {KILLED_GRADER!r}.format(repo={str(TESTS.parent)!r})],
                          stdout=subprocess.PIPE, text=True)
scratch, trap = (Path(p) for p in killed.stdout.readline().split())
killed.kill()
killed.wait()
left = scratch.exists() and trap.exists()
alive = subprocess.Popen(["sleep", "600"])
tag = runtime_paths._namespace_tag()
base = Path(tempfile.gettempdir())
live = base / f"grade-{{alive.pid}}-{{tag}}abcdefgh"
foreign = base / f"grade-{{killed.pid}}-p1-abcdefgh"
for folder in (live, foreign):
    folder.mkdir()
try:
    mine = runtime_paths.scratch_directory()  # this process's first: the sweep
    print(json.dumps({{"left": left, "scratch": scratch.exists(), "trap": trap.exists(), "live": live.exists(),
                      "foreign": foreign.exists()}}))
finally:
    alive.kill()
    for folder in (live, foreign, mine):
        runtime_paths.remove_scratch(folder)
""")
    assert found["left"], found  # what a grader killed outright leaves
    assert not found["scratch"] and not found["trap"], found
    assert found["live"] and found["foreign"], found


def test_what_a_removal_cannot_remove_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture) -> None:
    from grader import runtime_paths

    scratch = tmp_path / "grade-1-p1-abcdefgh"
    (scratch / "a").mkdir(parents=True)
    (scratch / "a" / "stuck").write_text("x")
    (scratch / "a" / "gone").write_text("x")
    real_unlink = os.unlink

    def unlink(name, *args, **kwargs):
        if name == "stuck":
            raise PermissionError(1, "Operation not permitted")
        return real_unlink(name, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    assert runtime_paths.remove_scratch(scratch) == [f"{scratch}/a/stuck: Operation not permitted"]
    said = capsys.readouterr().err
    assert f"could not remove 1 entries of the scratch folder {scratch}" in said and "a/stuck" in said
    assert not (scratch / "a" / "gone").exists() and (scratch / "a" / "stuck").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="a root grader's sandboxes run as another user")
def test_a_root_grader_sweeps_the_scratch_its_dead_predecessor_handed_to_the_sandbox_user() -> None:
    """A root grader's scratch belongs to the sandbox's user (65534) once a kernel ran in it; a
    root grader killed outright left those in /tmp, and the next one took only root's own."""
    import subprocess
    import tempfile

    from grader import runtime_paths

    gone = subprocess.Popen(["true"])
    gone.wait()
    folder = Path(tempfile.gettempdir()) / f"grade-{gone.pid}-{runtime_paths._namespace_tag()}abcdefgh"
    (folder / "a" / "b").mkdir(parents=True)
    (folder / "a" / "b" / "hidden-arguments").write_text("x")
    for path in (folder, folder / "a", folder / "a" / "b", folder / "a" / "b" / "hidden-arguments"):
        os.chown(path, runtime_paths.SANDBOX_UID, runtime_paths.SANDBOX_UID)
    os.chmod(folder / "a", 0o311)  # enter but not list, as a kernel could leave it
    try:
        assert folder in runtime_paths.sweep_dead_scratch() or not folder.exists()
        assert not folder.exists()
    finally:
        if folder.exists():
            runtime_paths.remove_scratch(folder)


@pytest.mark.kernel
@as_user
def test_the_hand_in_service_of_an_ordinary_user_grades_in_its_rootless_sandbox(tmp_path: Path,
                                                                               repo_root: Path) -> None:
    """`grade serve` started by an ordinary user (its one command, sandboxed): the reference handed
    in with the pack's client gets 100, graded in the rootless sandbox with its bounds recorded,
    as that user's batch grades it."""
    notebook = tmp_path / "work" / "submit.ipynb"
    notebook.parent.mkdir(parents=True)
    shutil.copy(repo_root / "solutions" / "ch2-jit.ipynb", notebook)
    notebook.chmod(0o644)
    repo = str(TESTS.parent)
    found = run_as_user(tmp_path / "work", f"""
import sqlite3
from pathlib import Path
from grader.serve.running import running_service
from grader.selfgrade.hand_in import Service, wait
with running_service(Path("service"), ["alice"], env={{**os.environ, "PYTHONPATH": {repo!r}}}, timeout=300) as running:
    client = Service(running.url, running.tokens["alice"])
    done = wait(client, client.hand_in(Path({str(notebook)!r}))["id"], lambda state: None, wait_s=300)
    with sqlite3.connect(running.out / "gradebook.sqlite") as book:
        row = book.execute("SELECT report FROM submissions WHERE student = 'alice'").fetchone()
print(json.dumps({{"state": done["state"], "score": done.get("score"), "report": json.loads(row[0]) if row else None}}))
""")
    assert (found["state"], found["score"]) == ("graded", 100), found
    isolation = found["report"]["isolation"]
    assert isolation["backend"] == "rootless", isolation
    assert {"namespaces", "user", "seccomp", "rlimits"} <= set(isolation["layers"]), isolation
    assert isolation["memory_bound"] in ("watcher", "cgroup") and isolation["scratch_bound"] in ("tmpfs", "file size")
