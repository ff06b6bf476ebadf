"""Kernels forked from a warm kernel server (grader/kernel/server.py, grader/sandbox/forking.py).

Each test attacks what a fork shares with the server and with the kernels before and after it:
the kernel must be as isolated as a fresh one (user, filter, cgroups of its own), must not see
what the last one left (files in its scratch and /tmp, processes, IPC objects), must not reach
the server's memory, and a server it kills or stops is replaced. JAX is imported already, but
its backend starts in the kernel, so the XLA_FLAGS a student sets still apply.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from grader.kernel.client import Kernel
from grader.kernel.server import KernelServer
from grader.sandbox.layers import SandboxPolicy, available
from grader.sandbox.layers import _exited as _gone  # gone, or a zombie

ISOLATION = available()
POLICY = SandboxPolicy()
pytestmark = [pytest.mark.kernel,
              pytest.mark.skipif(not ISOLATION.sandboxed,
                                 reason=f"the full sandbox is not available here: {ISOLATION.missing}")]


@pytest.fixture
def server():
    s = KernelServer(POLICY).start()
    try:
        yield s
    finally:
        s.kill()


def _value(kernel: Kernel, expression: str) -> object:
    """Evaluate in the kernel; the value comes back as the error text of a deliberate raise."""
    run = kernel.run(f"import json as _j\nraise ValueError(_j.dumps({expression}))", 60)
    assert run.status == "error" and run.ename == "ValueError", run
    return json.loads(run.evalue)


def test_a_forked_kernel_is_isolated_as_a_fresh_one(server: KernelServer) -> None:
    with Kernel(sandbox=POLICY, server=server) as kernel:
        facts = _value(kernel, """{
            "uid": __import__("os").getuid(),
            "status": [l.split(":")[0] + l.split(":")[1].strip() for l in open("/proc/self/status")
                       if l.startswith(("Seccomp:", "NoNewPrivs:"))],
            "cwd": __import__("os").getcwd(), "path0": __import__("sys").path[0],
            "jax_imported": "jax" in __import__("sys").modules,
            "frozen": __import__("gc").get_freeze_count(),
            "backends": len(__import__("jax")._src.xla_bridge._backends)}""")
        process = kernel._km.provisioner.process
        groups = process.child.groups
        own = {name: (g / "cgroup.procs").read_text().split() for name, g in groups.items()}
        server_procs = (server.sandbox.cgroup("pids") / "cgroup.procs").read_text().split()
    assert facts["uid"] == 65534 and sorted(facts["status"]) == ["NoNewPrivs1", "Seccomp2"]
    assert facts["cwd"] == str(server.scratch) and facts["path0"] == ""
    assert facts["jax_imported"] is True and facts["backends"] == 0  # no backend before first use
    assert facts["frozen"] > 100_000  # the server's objects: the child's collections never touch their pages
    assert own["pids"] == [str(process.pid)] and own["memory"] == [str(process.pid)]
    assert str(process.pid) not in server_procs
    assert not any(g.exists() for g in groups.values())


def test_a_forked_kernel_has_no_debugger_and_debugpy_stays_importable(server: KernelServer) -> None:
    """ipykernel's debugger is loaded without debugpy (0.1 s a boot): nobody debugs a grading
    kernel; the student's own `import debugpy` still works."""
    with Kernel(sandbox=POLICY, server=server) as kernel:
        facts = _value(kernel, """{"debugger": __import__("ipykernel.debugger").debugger._is_debugpy_available,
                                   "debugpy": isinstance(__import__("debugpy").__version__, str)}""")
    assert facts == {"debugger": False, "debugpy": True}


def test_the_students_xla_flags_still_apply(server: KernelServer) -> None:
    with Kernel(sandbox=POLICY, server=server) as kernel:
        run = kernel.run("import os\nos.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=3'\n"
                         "import jax\nassert len(jax.devices()) == 3, jax.devices()", 60)
        assert run.status == "ok", run


LEAVE_BEHIND = r"""
import ctypes, errno, os, subprocess
open("planted.py", "w").write("LEFT = 1")
open("/tmp/left.txt", "w").write("secret")
os.mkdir("/tmp/dir")
subprocess.Popen(["sleep", "300"], start_new_session=True)
libc = ctypes.CDLL(None, use_errno=True)
ipc = {"shmget": libc.shmget(0, 4096, 0o1666), "semget": libc.semget(0, 1, 0o1666),
       "msgget": libc.msgget(0, 0o1666)}
errors = {name: ctypes.get_errno() if value < 0 else 0 for name, value in ipc.items()}
"""


def test_the_next_kernel_sees_nothing_the_last_one_left(server: KernelServer) -> None:
    with Kernel(sandbox=POLICY, server=server) as first:
        assert first.run(LEAVE_BEHIND, 60).status == "ok"
        errors = _value(first, "errors")
        server_pid = server.server_pid
        reads = _value(first, '(lambda os: [os.access(f"/proc/{os.getppid()}/{name}", os.R_OK) '
                              'for name in ("mem", "environ")])(__import__("os"))')
        first_pid = first._km.provisioner.process.pid
    assert errors == {"shmget": 1, "semget": 1, "msgget": 1}  # EPERM: IPC objects would outlive it
    assert reads == [False, False]  # the server (its parent) is non-dumpable
    assert server_pid is not None and os.stat(f"/proc/{server_pid}/mem").st_uid == 0  # non-dumpable
    assert _gone(first_pid)
    with Kernel(sandbox=POLICY, server=server) as second:
        seen = _value(second, """{
            "files": sorted(__import__("os").listdir(".")), "tmp": sorted(__import__("os").listdir("/tmp")),
            "sleepers": [p for p in __import__("os").listdir("/proc") if p.isdigit()
                         and open(f"/proc/{p}/cmdline", "rb").read().startswith(b"sleep")]}""")
        planted = second.run("import planted", 30)
    assert "planted.py" not in seen["files"] and "left.txt" not in seen["tmp"] and "dir" not in seen["tmp"]
    assert seen["sleepers"] == []
    assert planted.status == "error" and planted.ename == "ModuleNotFoundError"
    assert server.starts == 1 and server.forks == 2


@pytest.mark.parametrize("signal_name", ["SIGKILL", "SIGSTOP", "SIGTERM", "SIGINT"])
def test_a_kernel_cannot_kill_or_stop_the_server(server: KernelServer, signal_name: str) -> None:
    """The server is the first process of its pid namespace: a signal its child sends it is dropped
    (it keeps no handler), so a submission that kills its kernel's parent is graded on as `grade
    FILE` grades it, and the next kernel comes from the same server."""
    with Kernel(sandbox=POLICY, server=server) as first:
        sent = first.run(f"import os, signal\nos.kill(os.getppid(), signal.{signal_name})", 30)
        parent = _value(first, "__import__('os').getppid()")
        assert first.run("x = 1 + 1", 30).status == "ok"
    assert sent.status == "ok" and parent == 1
    server_pid = server.server_pid
    with Kernel(sandbox=POLICY, server=server) as second:
        assert second.run("x = 1 + 1", 30).status == "ok"
    assert server.starts == 1 and server.server_pid == server_pid


def test_a_server_killed_from_outside_is_replaced_at_the_next_fork(server: KernelServer) -> None:
    with Kernel(sandbox=POLICY, server=server) as first:
        assert first.run("x = 1", 30).status == "ok"
        assert server.server_pid is not None
        os.kill(server.server_pid, signal.SIGKILL)
    with Kernel(sandbox=POLICY, server=server) as second:
        assert second.run("x = 1 + 1", 30).status == "ok"
    assert server.starts == 2


def test_a_dying_kernel_and_its_strays(server: KernelServer) -> None:
    with Kernel(sandbox=POLICY, server=server) as kernel:
        assert kernel.run("import subprocess\np = subprocess.Popen(['sleep', '300'])", 30).status == "ok"
        assert kernel.stop_strays() == 1
        assert kernel.run("assert p.wait(timeout=5) < 0", 30).status == "ok"  # killed, the kernel lives
        died = kernel.run("import os\nos._exit(3)", 30)
        assert died.status == "died"
    with Kernel(sandbox=POLICY, server=server) as kernel:
        assert kernel.run("x = 1", 30).status == "ok"


def test_nothing_remains_after_the_server_is_killed() -> None:
    server = KernelServer(POLICY).start()
    kernel = Kernel(sandbox=POLICY, server=server).start()
    process = kernel._km.provisioner.process
    groups = [*process.child.groups.values(), server.sandbox.cgroup("memory"), server.sandbox.cgroup("pids")]
    pids = [int(p) for p in (groups[-1] / "cgroup.procs").read_text().split()] + [process.pid]
    scratch = server.scratch
    server.kill()
    deadline = time.monotonic() + 5
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(p) for p in pids)
    assert not any(g.exists() for g in groups)
    assert str(scratch) not in Path("/proc/self/mounts").read_text() and not scratch.exists()
    kernel.close()  # after its server: nothing left to do, no error


CHANGE_THE_SERVER = {  # found by an attack: what a kernel can do to its parent, the server (same uid)
    "limits": "import os, resource\nresource.prlimit(os.getppid(), resource.RLIMIT_NOFILE, (24, 24))",
    "priority": "import os\nos.setpriority(os.PRIO_PROCESS, os.getppid(), 19)",
    "cpus": "import os\nos.sched_setaffinity(os.getppid(), {0})",
}


@pytest.mark.parametrize("change", sorted(CHANGE_THE_SERVER))
def test_a_server_a_kernel_changed_is_replaced(server: KernelServer, change: str) -> None:
    with Kernel(sandbox=POLICY, server=server) as first:
        assert first.run(CHANGE_THE_SERVER[change], 30).status == "ok"
    with Kernel(sandbox=POLICY, server=server) as second:
        facts = _value(second, """{
            "nofile": __import__("resource").getrlimit(__import__("resource").RLIMIT_NOFILE)[0],
            "nice": __import__("os").getpriority(__import__("os").PRIO_PROCESS, 0),
            "cpus": len(__import__("os").sched_getaffinity(0))}""")
    assert facts == {"nofile": POLICY.open_files, "nice": 0, "cpus": len(os.sched_getaffinity(0))}
    assert server.starts == 2


def test_the_scratch_directory_is_given_back_as_it_was(server: KernelServer) -> None:
    with Kernel(sandbox=POLICY, server=server) as first:
        assert first.run("import os\nos.setxattr('.', 'user.planted', b'from the last student')\n"
                         "os.chmod('.', 0o000)", 30).status == "ok"
    with Kernel(sandbox=POLICY, server=server) as second:  # it could not read its connection file
        facts = _value(second, """{"xattrs": __import__("os").listxattr("."),
                                   "mode": oct(__import__("os").stat(".").st_mode & 0o7777)}""")
    assert facts == {"xattrs": [], "mode": oct(server._scratch_mode)}
    assert server.starts == 1


def test_a_pid_that_is_no_longer_the_server_is_never_cleaned(server: KernelServer) -> None:
    """After a server dies its pid may be reused by a process whose root is the host's: the
    grader empties /proc/PID/root/tmp only while PID is the server, in the server's cgroup."""
    with Kernel(sandbox=POLICY, server=server):
        pid = server.server_pid
        assert pid is not None and server._is_server(pid)
        assert not server._is_server(os.getpid())


LEFT_FOR_THE_NEXT = {  # found by an attack: more than the grader will walk, or a socket that lingers
    "deep": "import os\nfor base in ('.', '/tmp'):\n    os.chdir(base)\n    for _ in range(3000):\n"
            "        os.mkdir('d')\n        os.chdir('d')\n    open('secret', 'w').write('x')\nos.chdir(START)",
    "many": "import os\nfor i in range(3000):\n    open(f'f{i}', 'w').close()",
    "tcp": "import socket\nserver = socket.create_server(('127.0.0.1', 0))\n"
           "client = socket.create_connection(server.getsockname())\nconn, _ = server.accept()\n"
           "client.close(); conn.close(); server.close()",
}


@pytest.mark.parametrize("left", sorted(LEFT_FOR_THE_NEXT))
def test_what_the_grader_will_not_walk_goes_with_the_server(server: KernelServer, left: str) -> None:
    with Kernel(sandbox=POLICY, server=server) as first:
        code = "import os\nSTART = os.getcwd()\n" + LEFT_FOR_THE_NEXT[left]
        assert first.run(code, 60).status == "ok"
    with Kernel(sandbox=POLICY, server=server) as second:
        seen = _value(second, """{"files": [n for n in __import__("os").listdir(".") if n != "connection.json"
                                            and n != ".ipython" and not n.startswith("kernel-ipc-")],
                                  "tmp": sorted(__import__("os").listdir("/tmp")),
                                  "tcp": [l.split()[3] for l in open("/proc/net/tcp").read().splitlines()[1:]
                                          if l.split()[3] != "0A"]}""")  # but its own listener
    kept = list(server._tmp_keep())  # the directories bwrap made for its mounts under /tmp
    assert seen == {"files": [], "tmp": kept, "tcp": []}
    assert server.starts == 2


def test_a_few_files_are_removed_without_a_new_server(server: KernelServer) -> None:
    with Kernel(sandbox=POLICY, server=server) as first:
        assert first.run("import os\nfor i in range(50):\n    os.makedirs(f'd{i}/e', exist_ok=True)\n"
                         "    open(f'd{i}/e/f', 'w').close()", 30).status == "ok"
    with Kernel(sandbox=POLICY, server=server) as second:
        assert _value(second, '[n for n in __import__("os").listdir(".") if n.startswith("d")]') == []
    assert server.starts == 1


@pytest.mark.skipif("cgroups" not in ISOLATION.layers, reason="a forked kernel's memory cgroup needs cgroups")
def test_a_forked_kernel_killed_at_its_memory_limit_is_told_so_and_another_death_is_not() -> None:
    """The cell's death names the memory bound when the child's own cgroup hit it (the batch's
    path; a fresh kernel's is tests/test_sandbox.py's memory bomb), and not when it died another way."""
    policy = SandboxPolicy(memory_bytes=2**30)
    server = KernelServer(policy).start()
    try:
        with Kernel(sandbox=policy, server=server) as kernel:
            bomb = kernel.run("import numpy as np\nheld = [np.ones(2**25) for _ in range(12)]", 60)
        with Kernel(sandbox=policy, server=server) as kernel:
            killed = kernel.run("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", 60)
    finally:
        server.kill()
    assert (bomb.status, bomb.memory_limit_bytes) == ("died", 2**30), bomb
    assert (killed.status, killed.memory_limit_bytes) == ("died", None), killed
