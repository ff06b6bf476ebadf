"""The verifier's fork server: imports JAX once, then forks one verifier per request.

A fresh verifier spends most of its boot importing JAX (about 0.55 of 1.2 CPU s). This process,
started in the same sandbox a verifier gets (grader/sandbox/layers.py: namespaces, unprivileged user,
seccomp, rlimits, cgroups, scratch), imports JAX, NumPy and the runtime *without creating a
backend* (a process that forks after XLA has started its threads gives children that hang), and
then waits on fd 0, a unix socket to the grader:

    request   one line of JSON (grader/sandbox/forking.py's protocol), with two file descriptors
              (SCM_RIGHTS): the new verifier's stdin (a pipe's read end) and stdout (a pipe's
              write end)
    reply     one JSON line, {"pid": <the child's pid in this sandbox's namespace>}

The child closes the socket, puts the two descriptors on fds 0 and 1 and runs `runtime.main()`,
which warms the backend up and speaks the verifier's protocol. The grader moves it into cgroups
of its own before it sends a job (grader/sandbox/forking.py), so each child has its own memory and
process limits and is killed with everything it started, as a fresh verifier is.

This process runs no module: only the grader talks to it, and only its children read jobs.
It makes itself non-dumpable, which its children inherit, so that no child (the same
unprivileged user) can open another's or this process's memory through /proc; ptrace and
process_vm_* are refused by the seccomp filter already. A child that kills this process only
ends its own sandbox's namespace (and itself): the grader starts a new fork server.

It is loaded by file path (`python -I zygote.py`), like runtime.py, and imports nothing but the
standard library and runtime.py's imports.
"""

from __future__ import annotations

import array
import ctypes
import gc
import json
import os
import signal
import socket
import sys

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
MAX_FDS = 2
MAX_REQUEST = 64 * 1024  # grader/sandbox/forking.py's


def _prctl(option: int, value: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _receive(control: socket.socket) -> tuple[bytes, list[int]]:
    """One request: its line (empty when the grader has closed the socket) and the descriptors
    that came with it (all closed unless there are exactly two)."""
    fds = array.array("i")
    line = bytearray()
    while not line.endswith(b"\n") and len(line) <= MAX_REQUEST:
        data, ancillary, _, _ = control.recvmsg(MAX_REQUEST, socket.CMSG_SPACE(MAX_FDS * fds.itemsize))
        if not data:
            break
        line += data
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    received = list(fds)
    if len(received) != MAX_FDS:
        for fd in received:
            os.close(fd)
        received = []
    return bytes(line), received


def _child(control: socket.socket, stdin_fd: int, stdout_fd: int) -> None:
    """In the forked child: become a verifier on the two descriptors; never returns."""
    code = 70
    try:
        control.close()
        os.setsid()  # its own session and process group, as a fresh verifier has
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # no orphan verifier if this process goes
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as a fresh Python has it
        os.dup2(stdin_fd, 0)
        os.dup2(stdout_fd, 1)
        for fd in (stdin_fd, stdout_fd):
            if fd > 2:
                os.close(fd)
        import runtime

        code = runtime.main()
    except BaseException:  # noqa: BLE001 - a child must never return into the server's loop
        code = 70
    finally:
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001
            pass
        os._exit(code if isinstance(code, int) else 70)


def main() -> int:
    control = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    _prctl(PR_SET_DUMPABLE, 0)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    # The namespace's first process (bwrap --as-pid-1): a signal from a child reaches it only
    # where it has a handler, and Python's own is SIGINT's; a child gets it back at fork.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

    import jax
    import jax.numpy  # noqa: F401 - imported once here, in every child for free
    import numpy  # noqa: F401
    from jax import export  # noqa: F401
    from jax._src.lib.mlir.dialects import mhlo  # noqa: F401 - lowering loads it lazily, in every child

    try:  # what a child initialises before a module that calls LAPACK (runtime.defer_lapack):
        import scipy.linalg.cython_lapack  # noqa: F401 - SciPy's kernels (0.17 CPU s a child)
    except ImportError:
        pass

    import runtime  # noqa: F401

    gc.freeze()  # what is imported is never collected: a child's collections leave its pages shared
    control.sendall((json.dumps({"ready": True, "jax": jax.__version__, "pid": os.getpid()}) + "\n").encode())
    while True:
        try:
            data, fds = _receive(control)
        except (OSError, ValueError):
            return 1
        if not data:
            return 0  # the grader closed its end
        if not data.endswith(b"\n") or not fds:
            control.sendall(b'{"pid": null}\n')
            continue
        pid = os.fork()
        if pid == 0:
            _child(control, *fds)
        for fd in fds:
            os.close(fd)
        control.sendall((json.dumps({"pid": pid}) + "\n").encode())


if __name__ == "__main__":
    sys.exit(main())
