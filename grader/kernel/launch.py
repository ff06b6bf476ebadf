"""Starting a kernel process without jupyter_client: the first kernel of `grade FILE`.

A kernel's boot (Python, ipykernel, then the student's `import jax`) is the longest step of
grading one file, so it should start as soon as the command line is read. jupyter_client, its
kernelspec lookup and the grader's models take half a second to import; this module needs only
the standard library and the sandbox. It writes the connection file itself (the ipc ports of a
fresh scratch directory, a new key) and starts the same command in the same sandbox that
jupyter_client would have; `grader.kernel.client.Kernel` later adopts the running process and connects to
it, as it adopts a kernel forked by a kernel server.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

from grader import runtime_paths
from grader.sandbox import lifetime
from grader.sandbox.layers import Sandbox, SandboxPolicy, detect, launch_environment

# No history database per kernel; plain tracebacks: the grader reads a traceback's exception and
# its "Cell In[n], line k" only, which the plain form has without analysing the cell's source for
# context (75 to 54 ms for a cell of 600 lines that raises).
KERNEL_ARGS = ["--HistoryManager.hist_file=:memory:", "--InteractiveShell.xmode=Plain"]
# A warm kernel imports JAX while it boots, ahead of need; no name is left in the namespace.
WARM_ARGS = ["--IPKernelApp.exec_lines=__import__('jax.numpy')"]
DEFAULT_KERNEL = "python3"  # the kernel this module can start: ipykernel with this interpreter

CHANNELS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


def scratch_directory(*, sweep: bool = True) -> Path:
    """A kernel's fresh scratch directory (grader/runtime_paths.py), with room for its ipc sockets,
    which live in it as `kernel-ipc-<port>`."""
    return runtime_paths.scratch_directory(socket_room=len("/grade-4194304-12345678/kernel-ipc-65535"),
                                           sweep=sweep)


KERNEL_MAIN = """\
import sys
if sys.path[0] == "":
    del sys.path[0]  # as ipykernel_launcher: the kernel puts it back once loaded
sys.modules["debugpy"] = None
import ipykernel.debugger
del sys.modules["debugpy"]
from ipykernel import kernelapp
kernelapp.launch_new_instance()
"""
"""`python -m ipykernel_launcher`, but with ipykernel's debugger loaded without debugpy (0.1 s
of every boot): no grading kernel answers debug requests. debugpy itself stays importable for
the student's code. jupyter_client's kernels are started with it too (grader/kernel/client.py), and the
kernel server's children are the same (grader/kernel/inside/zygote.py)."""


def kernel_command(connection_file: str, args: list[str]) -> list[str]:
    """The python3 kernel of this interpreter."""
    return [sys.executable, "-c", KERNEL_MAIN, "-f", connection_file, *args]


def write_connection_file(scratch: Path) -> tuple[Path, dict[str, str | int]]:
    """The kernel's ipc endpoints in `scratch` (fresh, so ports 1-5 are free, as jupyter_client
    would number them) and a new signing key; readable by its owner only, as jupyter_client
    writes it (the sandbox hands it to the kernel's user). The file and what was written to it:
    the grader keeps the latter, never reading back a file the kernel's user owns."""
    info: dict[str, str | int] = {name: port for port, name in enumerate(CHANNELS, start=1)}
    info.update(ip=str(scratch / "kernel-ipc"), transport="ipc", key=secrets.token_hex(32),
                signature_scheme="hmac-sha256", kernel_name=DEFAULT_KERNEL)
    path = scratch / "connection.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(info, f)
    return path, info


class LaunchedKernel:
    """A kernel process started in its own scratch directory (and sandbox), that no client has
    connected to yet. `grader.kernel.client.Kernel(adopt=...)` takes it over, files, sandbox and all;
    until then it is this object's to kill (`discard`)."""

    def __init__(self, policy: SandboxPolicy | None, args: list[str]):
        self.scratch = scratch_directory(sweep=False)  # swept once the kernel boots
        self.sandbox = Sandbox(self.scratch, policy, detect()) if policy is not None else None
        self.process: subprocess.Popen | None = None
        lifetime.track(self)
        try:
            if self.sandbox is not None:
                self.sandbox.prepare()
            path, self.connection_info = write_connection_file(self.scratch)
            self.connection_file = str(path)
            command = kernel_command(self.connection_file, args)
            if self.sandbox is not None:
                command = self.sandbox.wrap(command, self.connection_file)
            # As jupyter_client starts a kernel: its own session (the terminal's Ctrl-C is the
            # grader's), no stdin, its own stdout and stderr kept off the grader's terminal;
            # the grader's environment without the sandbox (bwrap clears it inside the sandbox).
            env = launch_environment(self.scratch) if self.sandbox is not None else dict(os.environ)
            self.process = subprocess.Popen(command, cwd=self.scratch, env=env,
                                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL, start_new_session=True)
        except BaseException:
            self.discard()
            raise
        runtime_paths.sweep_dead_scratch(once=True)  # what killed graders left, while the kernel boots

    def adopted(self) -> None:
        """A Kernel holds it now, and kills it."""
        lifetime.untrack(self)

    def kill(self) -> None:
        self.discard()

    def discard(self) -> None:
        """Kill the process and remove its sandbox and files (nobody took it)."""
        lifetime.untrack(self)
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        if self.sandbox is not None:
            self.sandbox.cleanup()
        runtime_paths.remove_scratch(self.scratch)
