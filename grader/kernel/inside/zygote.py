"""The kernels' fork server: imports IPython, ipykernel and JAX once, then forks one kernel per
request (grader/sandbox/forking.py has the protocol, and why each child is isolated as a fresh kernel).

A fresh kernel spends about 1 of its 1.2 CPU s of boot importing. This process, started in the
kernel's sandbox, imports what a warm kernel imports (ipykernel's app and debugger, IPython, zmq,
JAX, jax.numpy, NumPy) *without* creating a JAX backend, a zmq context or an event loop, which a
fork must not inherit; then, for each request (one JSON line on fd 0, {"argv": [...]}, the
arguments `python -m ipykernel_launcher` would get), it forks. The child becomes that kernel:
its own session, the default SIGCHLD again, `sys.argv` as the launcher's, and ipykernel's app on
the connection file the grader wrote. A student's `import jax` is then already done, as in a
warm kernel (`--IPKernelApp.exec_lines=__import__('jax.numpy')`), and the XLA_FLAGS a student
sets still apply: the backend starts in the child, on first use.

This process runs no student code: only the grader talks to it. It is non-dumpable, which its
children inherit, so no kernel can open its memory through /proc.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import signal
import socket
import sys

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
MAX_REQUEST = 64 * 1024  # grader/sandbox/forking.py's
MAX_ARGS = 64


def _prctl(option: int, value: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _receive(control: socket.socket) -> bytes:
    """One request line (empty when the grader has closed the socket)."""
    line = bytearray()
    while not line.endswith(b"\n") and len(line) <= MAX_REQUEST:
        data = control.recv(MAX_REQUEST)
        if not data:
            return b""
        line += data
    return bytes(line)


def _argv(line: bytes) -> list[str] | None:
    try:
        request = json.loads(line)
    except (ValueError, RecursionError):
        return None
    argv = request.get("argv") if isinstance(request, dict) else None
    if not (isinstance(argv, list) and len(argv) <= MAX_ARGS and all(isinstance(a, str) for a in argv)):
        return None
    return argv


def _child(control: socket.socket, argv: list[str]) -> None:
    """In the forked child: become the kernel; never returns."""
    code = 70
    try:
        control.close()
        os.setsid()
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as a fresh Python has it
        from ipykernel import kernelapp

        site = os.path.dirname(os.path.dirname(kernelapp.__file__))
        sys.argv = [os.path.join(site, "ipykernel_launcher.py"), *argv]  # as `python -m` sets it
        kernelapp.launch_new_instance(argv=argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - a child must never return into the server's loop
        code = 70
    finally:
        os._exit(code)


def main() -> int:
    control = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    _prctl(PR_SET_DUMPABLE, 0)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    # The namespace's first process (bwrap --as-pid-1): a signal from a child reaches it only
    # where it has a handler, and Python's own is SIGINT's; a child gets it back at fork.
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    import IPython  # noqa: F401

    # ipykernel's debugger without debugpy (which it would import, 0.1 s): no grading kernel
    # answers debug requests. debugpy itself stays importable for the student's code.
    sys.modules["debugpy"] = None  # type: ignore[assignment]
    import ipykernel.debugger  # noqa: F401 - a kernel loads it at start
    del sys.modules["debugpy"]
    import pdb  # noqa: F401
    import sqlite3  # noqa: F401

    import ipykernel.ipkernel  # noqa: F401
    import ipykernel.kernelapp  # noqa: F401

    # What every child would import on its own, none of which starts a thread or a JAX backend:
    # the dialect the probe's exports lower through (JAX loads it lazily, 0.07 s), and what a
    # kernel imports as it starts (pdb, the %store magic, the completer, the history's sqlite3).
    import IPython.core.completerlib  # noqa: F401
    import IPython.extensions.storemagic  # noqa: F401
    import jax
    import jax.numpy  # noqa: F401
    import jaxlib.mlir.extras.meta  # noqa: F401
    import numpy  # noqa: F401
    import zmq  # noqa: F401
    from jax._src.lib.mlir.dialects import builtin, mhlo  # noqa: F401

    try:  # the first MLIR context loads every dialect (0.03 s): a child's first lowering starts from this one
        from jax._src.interpreters import mlir

        mlir.make_ir_context()
    except (ImportError, AttributeError):
        pass

    gc.freeze()  # what is imported is never collected: a child's collections leave its pages shared
    control.sendall((json.dumps({"ready": True, "jax": jax.__version__, "pid": os.getpid()}) + "\n").encode())
    while True:
        try:
            line = _receive(control)
        except OSError:
            return 1
        if not line:
            return 0  # the grader closed its end
        argv = _argv(line)
        if argv is None:
            control.sendall(b'{"pid": null}\n')
            continue
        pid = os.fork()
        if pid == 0:
            _child(control, argv)
        control.sendall((json.dumps({"pid": pid}) + "\n").encode())


if __name__ == "__main__":
    sys.exit(main())
