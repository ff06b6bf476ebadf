"""A command run with the Ctrl-C a terminal gives it, whatever this test process's is.

A runner started in the background (`make test &`, a CI step without a terminal) ignores SIGINT;
its children inherit that, and the grader rightly keeps an ignored Ctrl-C ignored (`grade DIR &`),
so a test that sends SIGINT would wait out the command's limits instead. Not `preexec_fn`: a fork
of this process, where JAX runs threads, is refused.
"""

from __future__ import annotations

import sys


def python_module(module: str) -> list[str]:
    """`python -m MODULE` (arguments follow) with SIGINT raising KeyboardInterrupt, as in a terminal."""
    return [sys.executable, "-c", "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
                                  f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"]
