"""Ctrl-C as a terminal gives it: the command's SIGINT raising, and when to send it.

`python_module`: a command run with the Ctrl-C a terminal gives it, whatever this test process's is.

A runner started in the background (`make test &`, a CI step without a terminal) ignores SIGINT;
its children inherit that, and the grader rightly keeps an ignored Ctrl-C ignored (`grade DIR &`),
so a test that sends SIGINT would wait out the command's limits instead. Not `preexec_fn`: a fork
of this process, where JAX runs threads, is refused.
"""

from __future__ import annotations

import os
import sys


def python_module(module: str) -> list[str]:
    """`python -m MODULE` (arguments follow) with SIGINT raising KeyboardInterrupt, as in a terminal."""
    return [sys.executable, "-c", "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
                                  f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"]


def cpu_seconds(pid: int) -> float | None:
    """The CPU time a process has used (user and system, all its threads), None once it is gone: a
    test sends its Ctrl-C once an endless loop has run for a while, not after a fixed wait."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
