"""The sandbox of an ordinary user (issue 30): bubblewrap in an unprivileged user namespace, the
limits it can have (rlimits counted inside that namespace), strays found without a cgroup, and
what a batch does with a host that lacks layers."""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.errors import UsageError
from grader.report import Isolation
from grader.sandbox import layers
from grader.sandbox.layers import LAYERS, Detected, Sandbox, SandboxPolicy

POLICY = SandboxPolicy()
ROOTLESS = ["namespaces", "user", "seccomp", "rlimits"]


def test_an_ordinary_user_gets_namespaces_user_seccomp_and_rlimits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(layers, "_userns_refused", lambda: None)
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    found = layers.detect.__wrapped__()
    assert (found.backend, list(found.layers)) == ("rootless", ROOTLESS)
    assert set(found.missing) == {"cgroups", "cpu", "scratch"}
    assert "processes are counted in the sandbox's own user namespace" in found.missing["cgroups"]
    monkeypatch.setattr(layers, "_userns_refused", lambda: "user namespaces are refused here (x)")
    refused = layers.detect.__wrapped__()
    assert "namespaces" in refused.missing and "seccomp" in refused.missing and refused.layers == ("rlimits",)


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
