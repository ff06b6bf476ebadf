"""The kernel sandbox: its properties, asserted from inside a sandboxed kernel, and faults that
must become verdicts, graded end to end.

A. Properties. A sandboxed kernel runs code that computes facts about its world and publishes
   them as one observation (a dict under the probe's MIME type); the test judges them, and checks
   from the host what the kernel cannot see about itself (its cgroup limits, leftover processes,
   files that must not have appeared on the host).
B. Faults. Each submission is the reference solution plus one faulty cell from
   tests/fixtures/submissions/, so the honest score is known: the fault costs its own cell (it
   shows in report.cell_problems) and no exercise, and the grader's process is unharmed.
C. The `grade` command's sandbox options, and the kernel command that Sandbox.wrap() builds.

Every test needs only the layers it is about and says which are missing when it skips. All
faults are bounded (memory chunks, processes, bytes, sleeps) so that they end by themselves
within a minute even if the sandbox failed to stop them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import json
import os
import re
import resource
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from grader import GradeOptions, Report, grade_one
from grader.kernel.client import Kernel
from grader.kernel.launch import KERNEL_ARGS, WARM_ARGS, LaunchedKernel
from grader.kernel.protocol import MIME_TYPE
from grader.report import Isolation
from grader.sandbox.layers import CGROUP_ROOT, KERNEL_INSIDE, LAYERS, Sandbox, SandboxPolicy, available

ISOLATION = available()
POLICY = SandboxPolicy()
CELL_TIMEOUT = 30.0  # for cells of part A, which should all finish at once
FAULT_TIMEOUT = 10.0  # per cell and per probe batch while grading a fault
MEMORY_TIMEOUT = 45.0  # this machine fills memory slowly near 4 GB: the OOM kill may take ~10 s
BOMB_MEMORY_BYTES = 2**30  # the memory bomb's kernels: killed at 1 GiB as at the default 4 GiB, a quarter of the pages zeroed
CLI_TIMEOUT_S = 300  # an outer bound on a `grade` subprocess (not a speed assertion)
SEED = 11
ALL = ("setup", "tax", "newton", "detective", "training")
DENIED = {"ENOENT", "EACCES", "EPERM", "EROFS"}  # what "cannot be read / written" may look like


def needs(*layers: str) -> pytest.MarkDecorator:
    """Skip unless every one of `layers` is available here, saying why each is missing."""
    missing = [layer for layer in layers if layer not in ISOLATION.layers]
    why = "; ".join(f"{layer}: {ISOLATION.missing.get(layer, 'missing')}" for layer in missing)
    return pytest.mark.skipif(bool(missing), reason=f"sandbox layer missing on this machine ({why})")


# ============================================================================= helpers

# Defined in every fact-finding cell: `attempt(fn, *args)` is "ok" or the errno name it failed with.
PRELUDE = '''
import errno as _errno
import json as _json
import os


def attempt(action, *args):
    try:
        action(*args)
    except OSError as exc:
        return _errno.errorcode.get(exc.errno, type(exc).__name__) if exc.errno else type(exc).__name__
    return "ok"


def read(path):
    with open(path, "rb") as f:
        f.read(1)


def write(path):
    with open(path, "w") as f:
        f.write("written from inside the sandbox")

'''


def observe(kernel: Kernel, body: str, **params: Any) -> dict[str, Any]:
    """Run `body` (which sets a dict `facts`) in the kernel and return the published facts.

    `params` reach the cell as the dict `params` (JSON), so paths are passed, not pasted."""
    code = (PRELUDE + f"params = _json.loads({json.dumps(params)!r})\n" + textwrap.dedent(body)
            + f"\nget_ipython().display_pub.publish(data={{{MIME_TYPE!r}: facts}}, metadata={{}})\n")
    run = kernel.run(code, CELL_TIMEOUT, observations=True)
    assert run.status == "ok", f"the fact-finding cell failed: {run.status} {run.ename}: {run.evalue}"
    assert len(run.observations) == 1, run.observations
    return run.observations[0]


def sandboxed_kernel(how: str) -> Kernel:
    """A sandboxed kernel as jupyter_client starts it, or as `grade FILE` starts its first one
    (grader/kernel/launch.py) and the Kernel adopts it: both must be the same sandbox."""
    if how == "adopted":
        return Kernel(adopt=LaunchedKernel(POLICY, KERNEL_ARGS))
    return Kernel(sandbox=POLICY)


STARTS = ["started", "adopted"]


@pytest.fixture(scope="module", params=STARTS)
def kernel(request: pytest.FixtureRequest) -> Iterator[Kernel]:
    """One sandboxed kernel shared by the tests that only look around (none of them harms it)."""
    if not ISOLATION.layers:
        pytest.skip(f"no sandbox layer is available on this machine: {ISOLATION.missing}")
    with sandboxed_kernel(request.param) as k:
        yield k


def ipv6_loopback_works() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def host_processes_with_argv(argv: list[str]) -> list[int]:
    """Pids of every process on the host whose command line is exactly `argv`."""
    wanted = [a.encode() for a in argv]
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        if cmdline.rstrip(b"\0").split(b"\0") == wanted:
            found.append(int(entry.name))
    return found


def cgroup_paths(text: str) -> dict[str, str]:
    """controller -> path, from the text of a /proc/<pid>/cgroup file (cgroup v1 lines)."""
    paths = {}
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            if controller:
                paths[controller] = path
    return paths


def grader_state() -> dict[str, Any]:
    """What a fault must not change about the grader's own process."""
    limits = ("RLIMIT_FSIZE", "RLIMIT_CPU", "RLIMIT_NOFILE", "RLIMIT_CORE", "RLIMIT_NPROC", "RLIMIT_AS")
    return {
        "ids": (os.getuid(), os.geteuid(), os.getgid(), os.getegid()),
        "rlimits": {name: resource.getrlimit(getattr(resource, name)) for name in limits},
        "cgroup": Path("/proc/self/cgroup").read_text(),
        "cwd": os.getcwd(),
    }


def grade(path: Path, timeout: float = FAULT_TIMEOUT, *, memory_bytes: int | None = None) -> Report:
    """grade_one in the sandbox (the default), checking that the grader itself came out unharmed;
    `memory_bytes` lowers the kernels' memory limit (their sandbox otherwise the default)."""
    from grader.pipeline import policy_for

    before = grader_state()
    options = GradeOptions(assignment="ch2-jit", seed=SEED, cell_timeout=timeout)
    kernels = None
    if memory_bytes is not None:
        policy = dataclasses.replace(policy_for(options), memory_bytes=memory_bytes)
        kernels = functools.partial(Kernel, kernel_name=options.kernel_name, sandbox=policy)
    report = grade_one(path, options, kernel_factory=kernels)
    assert grader_state() == before
    assert report.status == "graded", report.error
    assert report.isolation.layers == ISOLATION.layers  # the report says which layers were in force
    return report


def scores(report: Report) -> dict[str, float]:
    return {e.id: e.score for e in report.exercises}


def failing(report: Report) -> dict[str, str]:
    return {c.id: c.status for e in report.exercises for c in e.checks if c.status != "passed"}


def explain(report: Report) -> str:
    problems = [(p.where, p.status, p.message) for p in report.cell_problems]
    checks = [(c.id, c.status, c.message) for e in report.exercises for c in e.checks if c.status != "passed"]
    return f"cell problems: {problems}\nchecks not passed: {checks}"


# ============================================================================= A. properties


@pytest.mark.kernel
@needs("namespaces")
def test_no_socket_can_connect_even_to_the_hosts_loopback(kernel: Kernel) -> None:
    """The test listens on the host's loopback (IPv4, and IPv6 when the host has it); from inside
    the sandbox nothing connects, and the only network interface is the sandbox's own lo."""
    with contextlib.ExitStack() as stack:
        targets = []
        families = [(socket.AF_INET, "127.0.0.1")] + ([(socket.AF_INET6, "::1")] if ipv6_loopback_works() else [])
        servers = []
        for family, host in families:
            server = stack.enter_context(socket.socket(family, socket.SOCK_STREAM))
            server.bind((host, 0))
            server.listen(8)
            port = server.getsockname()[1]
            # The server is reachable from the host, so a failure inside is the sandbox's doing.
            with socket.create_connection((host, port), timeout=5):
                accepted, _ = server.accept()
                accepted.close()
            server.setblocking(False)
            servers.append(server)
            targets.append(["AF_INET6" if family == socket.AF_INET6 else "AF_INET", host, port])

        facts = observe(kernel, '''
            import socket

            facts = {"interfaces": sorted(name for _, name in socket.if_nameindex()), "connect": {}}
            for family, host, port in params["targets"]:
                s = socket.socket(getattr(socket, family), socket.SOCK_STREAM)
                s.settimeout(5)
                try:
                    s.connect((host, port))
                    facts["connect"][host] = "connected"
                except OSError as exc:
                    facts["connect"][host] = type(exc).__name__
                finally:
                    s.close()
        ''', targets=targets)

        assert set(facts["connect"]) == {host for _, host in families}
        for host, outcome in facts["connect"].items():
            assert outcome != "connected", f"the sandbox connected to {host}"
        for server in servers:
            with pytest.raises(BlockingIOError):  # no connection is waiting to be accepted
                server.accept()
    assert facts["interfaces"] == ["lo"]


@pytest.mark.kernel
@needs("user")
def test_kernel_runs_as_an_unprivileged_user_without_capabilities(kernel: Kernel) -> None:
    facts = observe(kernel, '''
        status = {}
        with open("/proc/self/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                status[key] = value.strip()
        facts = {"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "egid": os.getegid(),
                 "groups": os.getgroups(), "cap_eff": status["CapEff"], "cap_prm": status["CapPrm"],
                 "cap_bnd": status["CapBnd"], "no_new_privs": status.get("NoNewPrivs")}
    ''')
    assert facts["uid"] != 0 and facts["euid"] != 0
    assert facts["gid"] != 0 and facts["egid"] != 0
    assert (facts["uid"], facts["gid"]) == (POLICY.uid, POLICY.gid)
    assert 0 not in facts["groups"]
    assert int(facts["cap_eff"], 16) == 0 and int(facts["cap_prm"], 16) == 0 and int(facts["cap_bnd"], 16) == 0
    assert facts["no_new_privs"] == "1"


@pytest.mark.kernel
@needs("namespaces")
def test_reference_solutions_and_assignment_internals_cannot_be_read(kernel: Kernel, repo_root: Path) -> None:
    secret_dirs = [repo_root / "solutions", repo_root / "assignments"]
    secret_files = [p for d in secret_dirs for p in d.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert repo_root / "solutions" / "ch2-jit.py" in secret_files
    assert repo_root / "assignments" / "ch2-jit" / "references.py" in secret_files

    facts = observe(kernel, '''
        facts = {"lists": {d: attempt(os.listdir, d) for d in params["dirs"]},
                 "reads": {p: attempt(read, p) for p in params["files"]},
                 "repo": sorted(os.listdir(params["repo"])) if attempt(os.listdir, params["repo"]) == "ok" else []}
    ''', dirs=[str(d) for d in secret_dirs], files=[str(p) for p in secret_files], repo=str(repo_root))

    readable = {p: r for p, r in {**facts["lists"], **facts["reads"]}.items() if r not in DENIED}
    assert readable == {}, f"readable inside the sandbox: {readable}"
    # What the kernel sees of the repository is the probe's folder, and the venv when it lives
    # there (as `make`'s .venv does): the interpreter must be reachable.
    venv = Path(sys.prefix).resolve()
    allowed = {"grader"} | ({venv.relative_to(repo_root).parts[0]} if repo_root in venv.parents else set())
    assert set(facts["repo"]) <= allowed


@pytest.mark.kernel
@needs("namespaces")
def test_roots_home_cannot_be_read(kernel: Kernel) -> None:
    """Nothing of the host's /root is visible, except the folders leading to the interpreter when it
    lives there (the kernel cannot run without it)."""
    home = Path("/root")
    needed = set()
    for prefix in {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}:
        if home in prefix.parents:
            needed.add(prefix.relative_to(home).parts[0])
    host_entries = sorted(p.name for p in home.iterdir()) if home.is_dir() else []
    others = [str(home / name) for name in host_entries if name not in needed]

    facts = observe(kernel, '''
        root = "/root"
        facts = {"listing": sorted(os.listdir(root)) if attempt(os.listdir, root) == "ok" else [],
                 "entries": {p: attempt(os.listdir if os.path.isdir(p) else read, p) for p in params["others"]}}
    ''', others=others)

    assert set(facts["listing"]) <= needed, f"visible in /root: {set(facts['listing']) - needed}"
    opened = {p: r for p, r in facts["entries"].items() if r not in DENIED}
    assert opened == {}, f"readable inside the sandbox: {opened}"


@pytest.mark.kernel
@needs("namespaces")
def test_a_kernel_cannot_see_another_kernels_scratch_dir() -> None:
    with Kernel(sandbox=POLICY) as first, Kernel(sandbox=POLICY) as second:
        mine = observe(first, '''
            write("notes.txt")
            facts = {"cwd": os.getcwd(), "own": sorted(os.listdir("."))}
        ''')
        assert mine["cwd"] == str(first.scratch)
        assert {"notes.txt", "connection.json"} <= set(mine["own"])  # the first sees its own files

        theirs = observe(second, '''
            scratch = params["scratch"]
            facts = {"list": attempt(os.listdir, scratch),
                     "notes": attempt(read, os.path.join(scratch, "notes.txt")),
                     "connection": attempt(read, os.path.join(scratch, "connection.json")),
                     "tmp": sorted(os.listdir("/tmp")), "cwd": os.getcwd()}
        ''', scratch=str(first.scratch))
    for what in ("list", "notes", "connection"):
        assert theirs[what] in DENIED, (what, theirs[what])
    assert first.scratch.name not in theirs["tmp"]
    assert theirs["cwd"] != str(first.scratch)


@pytest.mark.kernel
@needs("namespaces", "user")
def test_writes_outside_the_scratch_dir_fail_and_tmp_is_private(kernel: Kernel, repo_root: Path) -> None:
    name = f"sandbox-write-{uuid.uuid4().hex}"
    outside = [Path("/usr") / name, Path("/etc") / name, Path("/") / name, repo_root / name,
               repo_root / "solutions" / name, KERNEL_INSIDE / name, Path(sys.prefix) / name,
               Path(sys.base_prefix) / name]
    facts = observe(kernel, '''
        name = params["name"]
        facts = {"outside": {p: attempt(write, p) for p in params["outside"]},
                 "tmp": attempt(write, os.path.join("/tmp", name)),
                 "tmp_listing": sorted(os.listdir("/tmp")),
                 "scratch": attempt(write, os.path.join(os.getcwd(), name))}
    ''', name=name, outside=[str(p) for p in outside])
    try:
        written = {p: r for p, r in facts["outside"].items() if r == "ok"}
        assert written == {}, f"written from inside the sandbox: {written}"
        for path in outside:
            assert not path.exists(), path
        # /tmp works inside, but it is the sandbox's own: nothing appears on the host's /tmp.
        assert facts["tmp"] == "ok" and name in facts["tmp_listing"]
        assert not (Path("/tmp") / name).exists()
        assert not (Path(tempfile.gettempdir()) / name).exists()
        # the scratch dir is the one host path it writes to
        assert facts["scratch"] == "ok" and (kernel.scratch / name).exists()
    finally:
        for path in outside:  # only if the sandbox failed: leave the host as it was
            with contextlib.suppress(OSError):
                path.unlink()


@pytest.mark.kernel
@needs("namespaces")
@pytest.mark.parametrize("how", STARTS)
def test_the_kernel_environment_holds_no_secret_of_the_grader(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"s3cret-{uuid.uuid4().hex}"
    monkeypatch.setenv("GRADER_TEST_SECRET", secret)
    with sandboxed_kernel(how) as kernel:
        facts = observe(kernel, '''
            with open("/proc/self/environ", "rb") as f:
                initial = f.read().decode("utf-8", "replace")
            others = {}  # the initial environment of every process it can see (bwrap's own included)
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{pid}/environ", "rb") as f:
                        others[pid] = f.read().decode("utf-8", "replace")
                except OSError as exc:
                    others[pid] = type(exc).__name__
            facts = {"environ": dict(os.environ), "initial": initial, "others": others}
        ''')
    assert "GRADER_TEST_SECRET" not in facts["environ"]
    assert secret not in json.dumps(facts)
    assert len(facts["others"]) >= 2, facts["others"].keys()  # it saw the sandbox's processes at least
    # what the kernel gets is a short, known list (plus what ipykernel sets for itself)
    assert not {k for k in facts["environ"] if k.startswith(("GRADER", "PYTEST", "VIRTUAL_ENV", "SSH", "AWS"))}


@pytest.mark.kernel
@pytest.mark.skipif(not {"cgroups", "namespaces"} & set(ISOLATION.layers),
                    reason=f"neither cgroups nor a pid namespace here: {ISOLATION.missing}")
@pytest.mark.parametrize("how", STARTS)
def test_processes_left_running_are_gone_once_the_kernel_is_closed(how: str) -> None:
    daemon = ["sleep", f"317.{uuid.uuid4().int % 10**6:06d}"]  # ~5 min, and a command line of its own
    kernel = sandboxed_kernel(how).start()
    try:
        observe(kernel, '''
            import subprocess

            # a daemon in its own session
            popen = subprocess.Popen(params["daemon"], start_new_session=True)
            # a double-forked one: reparented away from the kernel, in a session of its own
            r, w = os.pipe()  # close-on-exec: EOF once the grandchild runs the command
            child = os.fork()
            if child == 0:
                try:
                    if os.fork() == 0:
                        os.setsid()
                        os.execvp(params["daemon"][0], params["daemon"])
                finally:
                    os._exit(0)
            os.close(w)
            os.waitpid(child, 0)
            os.read(r, 1)
            os.close(r)
            facts = {"popen": popen.pid}
        ''', daemon=daemon)
        # both are seen from the host while the kernel lives (so the check below is not vacuous)
        assert len(host_processes_with_argv(daemon)) == 2
    finally:
        kernel.close()
    assert host_processes_with_argv(daemon) == []


# A daemon that double-forks (reparented to the sandbox's init, out of the kernel's reach) and beats
# a heartbeat file for a minute at most, and a plain child: both are strays.
DAEMON_CELL = '''
import subprocess, time

heartbeat = os.path.join(os.getcwd(), "heartbeat")
r, w = os.pipe()
child = os.fork()
if child == 0:
    try:
        os.setsid()
        if os.fork() == 0:
            os.write(w, str(os.getpid()).encode())
            for beat in range(1200):
                with open(heartbeat + ".new", "w") as f:
                    f.write(str(beat))
                os.replace(heartbeat + ".new", heartbeat)
                time.sleep(0.05)
    finally:
        os._exit(0)
os.close(w)
daemon = int(os.read(r, 32))
os.close(r)
os.waitpid(child, 0)
sleeper = subprocess.Popen(["sleep", "60"])
facts = {"kernel": os.getpid(), "daemon": daemon, "sleeper": sleeper.pid}
'''


def sandbox_procs(kernel: Kernel) -> dict[int, int]:
    """pid as the kernel sees it -> pid on the host, for every process in the kernel's pids cgroup."""
    root = kernel._km.provisioner.process.pid
    group = CGROUP_ROOT / "pids" / cgroup_paths(Path(f"/proc/{root}/cgroup").read_text())["pids"].lstrip("/")
    found = {}
    for pid in map(int, (group / "cgroup.procs").read_text().split()):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("NSpid:"):
                    found[int(line.split()[-1])] = pid
    return found


def beats(kernel: Kernel) -> int:
    with contextlib.suppress(OSError, ValueError):
        return int((kernel.scratch / "heartbeat").read_text())
    return -1


def wait_for(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def check_stop_strays(kernel: Kernel, chain_length: int) -> None:
    facts = observe(kernel, DAEMON_CELL)
    assert wait_for(lambda: beats(kernel) >= 2), "the daemon never beat"
    before = sandbox_procs(kernel)
    assert {facts["daemon"], facts["sleeper"], facts["kernel"]} <= set(before)  # so the test is not vacuous
    started = time.monotonic()
    assert kernel.stop_strays() == 2
    elapsed = time.monotonic() - started
    after = sandbox_procs(kernel)
    assert len(after) == chain_length and facts["kernel"] in after, after  # the kernel's chain, no more
    assert after[facts["kernel"]] == before[facts["kernel"]]
    last = beats(kernel)
    time.sleep(0.3)  # six beats' time
    assert beats(kernel) == last, "the daemon still beats"
    assert elapsed < 2.0, elapsed
    # the kernel still answers, and is the same process
    again = observe(kernel, 'facts = {"kernel": os.getpid(), "sleeper": sleeper.wait(timeout=5)}')
    assert again == {"kernel": facts["kernel"], "sleeper": -9}
    assert kernel.stop_strays() == 0


@pytest.mark.kernel
@needs("cgroups", "namespaces")
@pytest.mark.parametrize("how", STARTS)
def test_stop_strays_kills_a_double_forked_daemon_and_keeps_the_kernel(how: str) -> None:
    """The in-kernel probe only reaches the kernel's descendants; the grader reaches the cgroup.
    Kept: the provisioner's bwrap, bwrap's pid-1 init and the kernel."""
    with sandboxed_kernel(how) as kernel:
        check_stop_strays(kernel, chain_length=3)


@pytest.mark.kernel
def test_kernels_started_early_or_not_are_ipykernel_without_its_debugger() -> None:
    """As jupyter_client starts a kernel (the same sys.path: the scratch directory as '' after
    the standard library, as `python -m ipykernel_launcher` has it), and like it with
    ipykernel's debugger loaded without debugpy, which the student's code can still import."""
    cell = """
        import sys, ipykernel.debugger, debugpy
        facts = {"path": sys.path, "debugger": ipykernel.debugger._is_debugpy_available,
                 "debugpy": isinstance(debugpy.__version__, str)}
    """
    with Kernel(adopt=LaunchedKernel(POLICY, KERNEL_ARGS)) as kernel:
        adopted = observe(kernel, cell)
    with Kernel(sandbox=POLICY) as kernel:
        started = observe(kernel, cell)
    assert "" in adopted["path"] and adopted["path"] == started["path"]
    assert (adopted["debugger"], adopted["debugpy"]) == (False, True) == (started["debugger"], started["debugpy"])


@pytest.mark.kernel
def test_the_first_kernel_of_grade_file_imports_jax_before_the_first_cell_and_xla_flags_still_apply() -> None:
    """`grade FILE`'s first kernel is warm (it imports JAX while the grader gets ready), as a
    batch worker's forked kernels are; JAX's backend is not created by the import, so the
    XLA_FLAGS a student's cell sets still take effect, in place of the grader's (XLA's CPU
    runtime on the calling thread: grader/sandbox/layers.py's XLA_FLAGS)."""
    with Kernel(adopt=LaunchedKernel(POLICY, KERNEL_ARGS + WARM_ARGS)) as kernel:
        first = observe(kernel, """
            import os, sys
            facts = {"jax": "jax" in sys.modules, "names": [n for n in dir() if "jax" in n],
                     "xla_flags": os.environ.get("XLA_FLAGS")}
        """)
        run = kernel.run("import os\nos.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=3'\n"
                         "import jax\nassert len(jax.devices()) == 3, jax.devices()", CELL_TIMEOUT)
    # imported, no name left in the namespace, and XLA's programs on the kernel's own thread
    assert first == {"jax": True, "names": [], "xla_flags": "--xla_cpu_multi_thread_eigen=false"}
    assert run.status == "ok", run


@pytest.mark.kernel
def test_an_adopted_kernel_is_signed_with_the_key_the_grader_wrote_not_the_file_s() -> None:
    """The connection file belongs to the sandbox's user once the kernel starts: what it says
    afterwards is not read back (the grader keeps what it wrote)."""
    launched = LaunchedKernel(POLICY, KERNEL_ARGS)
    written = launched.connection_info
    forged = dict(written, key="0" * 64, ip="/tmp/elsewhere")
    Path(launched.connection_file).write_text(json.dumps(forged))
    kernel = Kernel(adopt=launched).launch()
    try:
        km = kernel._km
        assert km.session.key == str(written["key"]).encode() and km.ip == written["ip"]
    finally:
        kernel.close()


@pytest.mark.kernel
@needs("cgroups", "namespaces", "scratch")
def test_a_kernel_started_early_and_never_adopted_leaves_nothing() -> None:
    """`grade FILE` starts its first kernel before it has read the submission; an unreadable one
    (or Ctrl-C) discards it: the process, its cgroups, its scratch mount and directory go."""
    launched = LaunchedKernel(POLICY, KERNEL_ARGS)
    process, scratch = launched.process, launched.scratch
    groups = [launched.sandbox.cgroup(c) for c in ("memory", "pids")]
    assert process is not None and process.poll() is None and all(g is not None and g.exists() for g in groups)
    assert stat.S_IMODE(os.stat(launched.connection_file).st_mode) == 0o600  # its key: owner only
    assert str(scratch) in Path("/proc/self/mounts").read_text()
    launched.discard()
    assert process.poll() is not None
    assert not scratch.exists() and not any(g.exists() for g in groups)
    assert str(scratch) not in Path("/proc/self/mounts").read_text()


@pytest.mark.kernel
@needs("cgroups")
def test_stop_strays_without_namespaces_keeps_the_kernel_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without bubblewrap, the provisioner's process is the kernel itself (the daemon is reparented
    outside the sandbox, but it is still in the cgroup)."""
    import grader.kernel.client

    monkeypatch.setattr(grader.kernel.client, "available",
                        lambda: Isolation(sandboxed=False, layers=["cgroups", "rlimits"], missing={}))
    with Kernel(sandbox=POLICY) as kernel:
        check_stop_strays(kernel, chain_length=1)


def test_stop_strays_without_the_cgroup_layer_kills_nothing(tmp_path: Path) -> None:
    layers = [layer for layer in LAYERS if layer != "cgroups"]
    sandbox = Sandbox(tmp_path, POLICY, Isolation(sandboxed=False, layers=layers, missing={}))
    assert sandbox.stop_strays(os.getpid()) == 0


@pytest.mark.kernel
@needs("cgroups")
def test_cgroup_limits_hold_for_the_kernel(kernel: Kernel) -> None:
    """Read from the host: the kernel's own cgroups carry the policy's memory and pids limits."""
    facts = observe(kernel, '''
        with open("/proc/self/cgroup") as f:
            facts = {"cgroup": f.read()}
    ''')
    inside, grader = cgroup_paths(facts["cgroup"]), cgroup_paths(Path("/proc/self/cgroup").read_text())
    memory = CGROUP_ROOT / "memory" / inside["memory"].lstrip("/")
    pids = CGROUP_ROOT / "pids" / inside["pids"].lstrip("/")
    assert inside["memory"] != grader["memory"] and inside["pids"] != grader["pids"]
    assert memory.is_dir() and pids.is_dir(), (memory, pids)
    assert int((memory / "memory.limit_in_bytes").read_text()) == POLICY.memory_bytes
    assert int((pids / "pids.max").read_text()) == POLICY.pids
    assert (memory / "cgroup.procs").read_text().split()  # the kernel really is in it
    assert (pids / "cgroup.procs").read_text().split()


@pytest.mark.kernel
@needs("rlimits")
def test_rlimits_hold_inside(kernel: Kernel) -> None:
    facts = observe(kernel, '''
        import resource
        facts = {name: list(resource.getrlimit(getattr(resource, name)))
                 for name in ("RLIMIT_FSIZE", "RLIMIT_CPU", "RLIMIT_NOFILE", "RLIMIT_CORE")}
    ''')
    assert facts["RLIMIT_FSIZE"] == [POLICY.file_bytes] * 2
    assert facts["RLIMIT_CPU"] == [POLICY.cpu_seconds] * 2
    assert facts["RLIMIT_NOFILE"] == [POLICY.open_files] * 2
    assert facts["RLIMIT_CORE"] == [0, 0]


@pytest.mark.kernel
@needs("namespaces", "scratch")
def test_tmp_and_scratch_are_size_limited_tmpfs(kernel: Kernel) -> None:
    facts = observe(kernel, '''
        mounts = {}
        with open("/proc/self/mounts") as f:
            for line in f:
                _, point, kind = line.split()[:3]
                mounts[point] = kind
        sizes = {}
        for path in ("/tmp", os.getcwd()):
            st = os.statvfs(path)
            sizes[path] = st.f_blocks * st.f_frsize
        facts = {"mounts": mounts, "sizes": sizes, "cwd": os.getcwd()}
    ''')
    cwd = facts["cwd"]
    assert facts["mounts"]["/tmp"] == "tmpfs" and facts["mounts"][cwd] == "tmpfs"
    assert facts["sizes"]["/tmp"] == POLICY.tmp_bytes
    assert facts["sizes"][cwd] == POLICY.scratch_bytes


@pytest.mark.kernel
@needs("namespaces", "user", "scratch")
@pytest.mark.parametrize("base, below", [("/tmp", "a/b"), ("/var/tmp", "x")], ids=["tmp-a-b", "var-tmp-x"])
def test_a_kernel_starts_with_tmpdir_set_to_a_deeper_directory(base: str, below: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """SLURM and CI runners set TMPDIR. bwrap creates the scratch bind's missing parents inside the
    sandbox; with mode 0700 the kernel's user could not reach its own scratch directory."""
    top = Path(base) / f"grader-tmpdir-{uuid.uuid4().hex[:8]}"
    tmpdir = top / below
    tmpdir.mkdir(parents=True)
    os.chmod(top, 0o700)  # a job's private directory: not even the sandbox's user may enter it on the host
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    monkeypatch.setattr(tempfile, "tempdir", None)  # tempfile caches the directory it chose
    try:
        with Kernel(sandbox=POLICY) as kernel:
            assert kernel.scratch.parent == tmpdir
            facts = observe(kernel, '''
                import stat
                write("notes.txt")
                cwd = os.getcwd()
                facts = {"cwd": cwd, "own": sorted(os.listdir(".")), "uid": os.getuid(),
                         "parents": {p: oct(stat.S_IMODE(os.stat(p).st_mode))
                                     for p in params["parents"]},
                         "statvfs": os.statvfs(cwd).f_blocks * os.statvfs(cwd).f_frsize}
            ''', parents=[str(p) for p in kernel.scratch.parents if p != Path("/")])
        assert facts["cwd"] == str(kernel.scratch) and facts["uid"] == POLICY.uid
        assert {"notes.txt", "connection.json"} <= set(facts["own"])
        assert facts["statvfs"] == POLICY.scratch_bytes  # the tmpfs was mounted there
        for parent, mode in facts["parents"].items():  # /tmp itself is the private 1777 tmpfs
            assert mode in ("0o755", "0o1777"), (parent, mode)
    finally:
        shutil.rmtree(top, ignore_errors=True)


# ============================================================================= B. faults


@pytest.mark.kernel
@needs("cgroups")
def test_memory_bomb_is_killed_by_the_cgroup_and_the_rest_is_graded(submission_from_reference) -> None:
    path = submission_from_reference("setup", "tax", "allocates_6_gb_in_chunks.py", "newton", "detective", "training")
    report = grade(path, MEMORY_TIMEOUT, memory_bytes=BOMB_MEMORY_BYTES)
    assert [p.status for p in report.cell_problems] == ["died"], explain(report)
    assert "killed the Python kernel: it used more than the 1 GiB of memory a grading may use" in \
        report.cell_problems[0].message
    assert failing(report) == {}, explain(report)
    assert report.score == 100


@pytest.mark.kernel
@needs("cgroups")
def test_fork_burst_does_not_break_grading(submission_from_reference) -> None:
    """600 processes at once: the pids limit refuses the excess (the cell reports how many), and
    every exercise is still graded in full."""
    path = submission_from_reference("setup", "tax", "starts_600_processes.py", "newton", "detective", "training")
    report = grade(path)
    problems = [p for p in report.cell_problems if "processes could not start" in p.message]
    assert len(problems) == 1 and problems[0].status == "error", explain(report)
    refused = int(re.search(r"(\d+) of 600 processes could not start", problems[0].message)[1])
    assert 600 - POLICY.pids <= refused < 600  # the limit was in force (none of the children is reaped)
    assert failing(report) == {}, explain(report)
    assert report.score == 100


@pytest.mark.kernel
@needs("rlimits", "scratch")
def test_writing_a_5_gb_file_fails_early_in_memory_and_the_rest_is_graded(submission_from_reference) -> None:
    path = submission_from_reference("setup", "tax", "writes_5_gb_file.py", "newton", "detective", "training")
    report = grade(path)
    (problem,) = report.cell_problems
    assert problem.status == "error", explain(report)
    found = re.search(r"OSError: \[Errno (\d+)\] .* after (\d+) MiB on (\S+)", problem.message)
    assert found, problem.message
    code, mib, filesystem = int(found[1]), int(found[2]), found[3]
    assert code in (errno.EFBIG, errno.ENOSPC)
    assert mib * 2**20 <= max(POLICY.file_bytes or 0, POLICY.scratch_bytes)  # stopped early
    assert filesystem == "tmpfs"  # in memory: the host's disk was never written
    assert not list(Path(tempfile.gettempdir()).glob("grade-*/five_gb.bin"))
    assert failing(report) == {}, explain(report)
    assert report.score == 100


@pytest.mark.kernel
@needs("namespaces", "user")  # without both, kill(-1, 9) would reach this machine's processes
def test_killing_the_parent_and_everything_leaves_the_grader_and_others_alive(submission_from_reference) -> None:
    path = submission_from_reference("setup", "tax", "kills_parent_process.py", "newton", "kills_every_process.py",
                                     "detective", "training")
    # A bystander outside the sandbox running as the sandbox's own user: kill(-1, 9) from a kernel
    # must not reach it (nor other kernels, which run as that user too).
    bystander = subprocess.Popen(["setpriv", f"--reuid={POLICY.uid}", f"--regid={POLICY.gid}", "--clear-groups",
                                  "sleep", "120"])
    try:
        report = grade(path)
        assert bystander.poll() is None, "a process of the sandbox user outside the sandbox was killed"
    finally:
        bystander.kill()
        bystander.wait()
    assert len(report.cell_problems) == 2, explain(report)
    assert {p.status for p in report.cell_problems} <= {"error", "died"}, explain(report)
    assert failing(report) == {}, explain(report)
    assert report.score == 100


@pytest.mark.kernel
def test_hooks_that_swallow_errors_do_not_change_verdicts(submission_from_reference) -> None:
    """IPython's custom exception handler and sys.excepthook both silenced, then a wrong
    tax_switch: the wrong answer still fails, and nothing else does."""
    path = submission_from_reference(*ALL, "swallows_errors_then_wrong_tax_switch.py")
    report = grade(path)
    assert failing(report) == {"tax.switch_visible": "failed"}, explain(report)
    (check,) = [c for e in report.exercises for c in e.checks if c.id == "tax.switch_visible"]
    assert "55555" in (check.message or "")
    assert report.score == 100 - check.max_score


@pytest.mark.kernel
@needs("namespaces")
def test_reading_the_reference_solutions_from_disk_fails(submission_from_reference, repo_root: Path) -> None:
    path = submission_from_reference("setup", "tax", "reads_reference_solutions.py")
    path.write_text(path.read_text(encoding="utf-8").replace("@REPO_ROOT@", str(repo_root)), encoding="utf-8")
    assert (repo_root / "solutions" / "ch2-jit.py").is_file()  # it is there, on the host
    report = grade(path)
    assert scores(report) == {"tax": 25, "newton": 0, "detective": 0, "training": 0}, explain(report)
    (problem,) = report.cell_problems
    assert problem.status == "error"
    assert re.search(r"FileNotFoundError|PermissionError", problem.message), problem.message
    for exercise in report.exercises[1:]:
        assert all((c.message or "").startswith("Not answered yet") for c in exercise.checks), exercise.id


# ============================================================================= C. command line, wrap()


def grade_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=CLI_TIMEOUT_S)


@pytest.mark.kernel
@pytest.mark.skipif(not ISOLATION.sandboxed, reason=f"the full sandbox is not available here: {ISOLATION.missing}")
def test_cli_grades_a_batch_in_the_full_sandbox(tmp_path: Path, reference_source: str) -> None:
    for name in ("alice", "bob"):
        (tmp_path / f"{name}.py").write_text(reference_source, encoding="utf-8")
    out = grade_cli("alice.py", "bob.py", "-a", "ch2-jit", "-o", "reports", "--seed", str(SEED), cwd=tmp_path)
    assert out.returncode == 0, (out.stdout, out.stderr)
    assert "layers missing here" not in out.stderr
    for name in ("alice", "bob"):
        report = Report.model_validate_json((tmp_path / "reports" / f"{name}.json").read_text(encoding="utf-8"))
        assert report.isolation.sandboxed is True
        assert report.isolation.layers == list(LAYERS) and report.isolation.missing == {}
        assert report.score == 100


@pytest.mark.kernel
@pytest.mark.skipif(ISOLATION.sandboxed, reason="the full sandbox is available here, so a batch is not refused")
def test_cli_refuses_a_batch_without_the_full_sandbox(tmp_path: Path, reference_source: str) -> None:
    for name in ("alice", "bob"):
        (tmp_path / f"{name}.py").write_text(reference_source, encoding="utf-8")
    out = grade_cli("alice.py", "bob.py", "-a", "ch2-jit", "-o", "reports", cwd=tmp_path)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "--no-sandbox" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "reports").exists()


@pytest.mark.kernel
def test_cli_no_sandbox_is_recorded_in_the_report(tmp_path: Path, reference_source: str) -> None:
    (tmp_path / "ch2-jit.py").write_text(reference_source, encoding="utf-8")
    out = grade_cli("ch2-jit.py", "--no-sandbox", "--json", "-", "--seed", str(SEED), cwd=tmp_path)
    assert out.returncode == 0, (out.stdout, out.stderr)
    report = Report.model_validate(json.loads(out.stdout))
    assert report.isolation.sandboxed is False
    assert report.isolation.layers == []
    assert any("--no-sandbox" in why for why in report.isolation.missing.values()), report.isolation
    assert report.score == 100
    assert "layers missing here" not in out.stderr  # turned off on purpose: nothing to warn about


BIND_OPTIONS = ("--bind", "--bind-try", "--dev-bind", "--dev-bind-try", "--ro-bind", "--ro-bind-try")


def bwrap_binds(argv: list[str]) -> list[tuple[str, Path, Path]]:
    """(option, source, destination) of every bind in a bwrap command line."""
    binds = []
    for i, arg in enumerate(argv):
        if arg in BIND_OPTIONS:
            binds.append((arg, Path(argv[i + 1]), Path(argv[i + 2])))
    return binds


def covered(path: Path, sources: set[Path]) -> bool:
    return any(path == s or s in path.parents for s in sources)


def test_wrap_puts_the_kernel_inside_every_layer(tmp_path: Path, repo_root: Path) -> None:
    """The argv alone (no kernel, no prepare()): as if this machine had every layer."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    connection = str(scratch / "connection.json")
    kernel_argv = [sys.executable, "-m", "ipykernel_launcher", "-f", connection]
    sandbox = Sandbox(scratch, POLICY, Isolation(sandboxed=True, layers=list(LAYERS)))
    argv = sandbox.wrap(list(kernel_argv), connection)

    assert argv[-len(kernel_argv):] == kernel_argv
    prlimit, bwrap, setpriv = argv.index("prlimit"), argv.index("bwrap"), argv.index("setpriv")
    # limits are inherited by everything bwrap starts; the user is dropped inside the namespaces
    assert prlimit < bwrap < setpriv < len(argv) - len(kernel_argv)

    limits = argv[prlimit:argv.index("--", prlimit)]
    assert f"--fsize={POLICY.file_bytes}:{POLICY.file_bytes}" in limits
    assert "--core=0:0" in limits

    bw = argv[bwrap:setpriv]
    for flag in ("--unshare-net", "--unshare-pid", "--clearenv", "--die-with-parent"):
        assert flag in bw, flag

    drop = argv[setpriv:argv.index("--", setpriv)]
    assert "--reuid=65534" in drop and f"--regid={POLICY.gid}" in drop
    assert "--no-new-privs" in drop and "--clear-groups" in drop

    binds = bwrap_binds(bw)
    readonly = {src for option, src, _ in binds if option.startswith("--ro-bind")}
    writable = {src for option, src, _ in binds if not option.startswith("--ro-bind")}
    assert KERNEL_INSIDE in readonly
    for prefix in (Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()):
        assert covered(prefix, readonly), prefix
        assert not covered(prefix, writable), prefix
    assert writable == {scratch}  # the one host path it may write to
    solutions = (repo_root / "solutions").resolve()
    for option, src, _ in binds:
        assert not covered(solutions, {src.resolve()}), f"{option} {src} exposes {solutions}"
    assert not covered(repo_root / "assignments", {src.resolve() for _, src, _ in binds})
    assert bw[bw.index("--seccomp") + 1] == "9"  # the fd the privileged shell opened the filter on


@pytest.mark.parametrize("tmpdir", ["/tmp/a/b", "/var/tmp/x"])
def test_wrap_creates_the_scratch_dirs_missing_parents_open(tmpdir: str) -> None:
    """The argv alone: every parent of the scratch bind that the sandbox's root lacks is created
    with mode 0755 before the bind (bwrap would make it 0700, which the kernel's user cannot enter)."""
    scratch = Path(tmpdir) / "grade-abc"
    sandbox = Sandbox(scratch, POLICY, Isolation(sandboxed=True, layers=list(LAYERS)))
    argv = sandbox.wrap([sys.executable], str(scratch / "connection.json"))
    bw = argv[argv.index("bwrap"):argv.index("setpriv")]
    created = [Path(bw[i + 3]) for i in range(len(bw) - 3) if bw[i:i + 3] == ["--perms", "0755", "--dir"]]
    expected = [p for p in reversed(scratch.parents) if p not in (Path("/"), Path("/tmp"))]
    assert [p for p in created if p in expected] == expected
    bind = max(i for i, arg in enumerate(bw) if arg == "--bind")
    assert bw[bind + 1:bind + 3] == [str(scratch), str(scratch)]
    for parent in expected:  # created before the bind that needs them
        assert max(i for i in range(len(bw) - 3) if bw[i + 3] == str(parent) and bw[i + 2] == "--dir") < bind
    assert bw.index("--tmpfs") < bind  # /tmp/a/b lives in the private /tmp


def test_wrap_without_layers_leaves_the_command_alone(tmp_path: Path) -> None:
    kernel_argv = [sys.executable, "-m", "ipykernel_launcher", "-f", str(tmp_path / "connection.json")]
    none = Isolation(sandboxed=False, layers=[], missing={"all": "turned off"})
    assert Sandbox(tmp_path, POLICY, none).wrap(list(kernel_argv), kernel_argv[-1]) == kernel_argv


def test_a_batch_is_refused_when_a_layer_is_missing(tmp_path: Path, monkeypatch, capsys) -> None:
    """Simulated here (this machine has every layer): no kernel starts, one line says why."""
    import grader.sandbox.layers
    from grader.cli import main

    partial = grader.sandbox.layers.Detected(layers=("rlimits",), missing={"namespaces": "bubblewrap is not installed"})
    monkeypatch.setattr(grader.sandbox.layers, "detect", lambda: partial)
    for name in ("alice", "bob"):
        (tmp_path / f"{name}.py").write_text("x = 1\n", encoding="utf-8")
    code = main([str(tmp_path / "alice.py"), str(tmp_path / "bob.py"), "-o", str(tmp_path / "reports")])
    err = capsys.readouterr().err
    assert code == 2
    assert "bubblewrap is not installed" in err and "--no-sandbox" in err and "Traceback" not in err
    assert not (tmp_path / "reports").exists()


# ============================================================================= D. without bubblewrap

def _container_sandbox(tmp_path: Path, layers: list[str]) -> Sandbox:
    """A sandbox as a container that refuses namespaces gives it (Gradescope's, Docker's)."""
    missing = {layer: "refused here" for layer in LAYERS if layer not in layers}
    return Sandbox(tmp_path, POLICY, Isolation(sandboxed=False, layers=layers, missing=missing))


def test_without_bubblewrap_the_wrapper_loads_the_filter_drops_the_user_and_clears_the_environment(
        tmp_path: Path) -> None:
    argv = _container_sandbox(tmp_path, ["user", "seccomp", "rlimits"]).wrap(["kernel"], "conn.json")
    loader, env, setpriv = argv.index("-I"), argv.index("env"), argv.index("setpriv")
    assert "bwrap" not in argv and argv.index("prlimit") < loader < env < setpriv < argv.index("kernel")
    assert argv[env + 1] == "-i" and not any(a.startswith("GRADER") for a in argv[env:setpriv])
    limits = argv[argv.index("prlimit") + 1:argv.index("--")]
    assert f"--as={2 * POLICY.memory_bytes}:{2 * POLICY.memory_bytes}" in limits  # no memory cgroup
    assert f"--nproc={POLICY.pids}:{POLICY.pids}" in limits  # no pids cgroup: the user's processes


@pytest.mark.skipif(os.geteuid() != 0 or "seccomp" not in ISOLATION.layers, reason="needs root and a filter")
def test_without_bubblewrap_the_filter_is_in_force(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The wrapper's own loader: the command runs with the filter and no_new_privs, and a refused
    call (add_key) answers EPERM; without a network namespace, so does any socket but a unix or
    netlink one (inet, inet6, packet); nothing of the grader's environment reaches it."""
    monkeypatch.setenv("GRADER_SECRET_FOR_THE_TEST", "answer key")
    sandbox = _container_sandbox(tmp_path, ["seccomp", "rlimits"])
    code = ("import ctypes, os, json; libc = ctypes.CDLL(None, use_errno=True); "
            "r = libc.syscall(248, b'user', b'k', b'v', 1, -3); error = ctypes.get_errno(); "  # add_key (x86_64)
            "import socket; socket.socket(socket.AF_UNIX).close(); "  # the kernel's own transport
            "inet = [libc.socket(family, 1, 0) == -1 and ctypes.get_errno() for family in (2, 10, 17)]; " 
            "status = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\\t' in l); "
            "print(json.dumps([status['Seccomp'].strip(), status['NoNewPrivs'].strip(), r, error, "
            "sorted(os.environ), inet]))")
    if os.uname().machine != "x86_64":
        pytest.skip("the add_key number is x86_64's")
    done = subprocess.run(sandbox.wrap([sys.executable, "-c", code]), capture_output=True, text=True, timeout=60,
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    seccomp_mode, no_new_privs, result, error, names, inet = json.loads(done.stdout)
    assert (seccomp_mode, no_new_privs, result, error) == ("2", "1", -1, errno.EPERM)
    assert inet == [errno.EPERM] * 3  # no network namespace: no inet, inet6 or packet socket
    assert "GRADER_SECRET_FOR_THE_TEST" not in names and "HOME" in names
