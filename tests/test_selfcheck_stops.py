"""A self-check always stops (issue 31): a `lax.while_loop` that never ends runs inside XLA, where
neither an alarm nor Ctrl-C reaches it, so the exported programs run in a child process of the
notebook, killed at the exercise's limit or on Ctrl-C; and nothing the grader sets while it
observes (JAX's cache-miss explanations) prints into the student's notebook."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import terminal_ctrl_c

from grader.judging import local
from grader.judging.local import LocalProber
from grader.kernel.protocol import Call, CompileCountRequest
from grader.selfcheck import check
from grader.values import to_wire

ROOT = Path(__file__).resolve().parent.parent

ENDLESS_NEWTON = '''
import jax, jax.numpy as jnp
from jax import lax

@jax.jit
def newton_sqrt(a, tol):  # its condition never turns false: the loop never ends, inside XLA
    def cond(state):
        return jnp.abs(state[0]) >= 0
    def body(state):
        return (state[0] + 1.0, state[1] + 1)
    return lax.while_loop(cond, body, (jnp.float32(a), 0))
'''
TITLE = "Exercise 2: Newton's square root with lax.while_loop"
LIMIT = 2
"""The limit the tests give the endless loop (seconds the child spins a core through): the check
never ends, so any limit takes the same path; it is counted from the child's readiness, not its boot."""
AT_THE_LIMIT = (f"⏱ {TITLE}: stopped after {LIMIT} s, `newton_sqrt` still running: does a loop never end? "
                "(the grader gives each exercise the same time)")
INTERRUPTED = f"⏹ {TITLE}: stopped, as you asked, while `newton_sqrt` was running; nothing was checked"


# ------------------------------------------------------------------------ the limit, in a namespace


@pytest.mark.kernel
def test_an_endless_while_loop_stops_at_the_limit_and_the_next_self_check_works(tmp_path: Path) -> None:
    """In a process of its own (a hang fails the test instead of hanging it): the limit stops the
    loop with one sentence, the child that ran it is gone, and the next self-check is judged."""
    script = tmp_path / "endless.py"
    script.write_text(
        "import os, runpy, sys, time\n"
        "from grader.selfcheck import check\n"
        "from grader.judging import local\n"
        f"ns = runpy.run_path({str(ROOT / 'solutions' / 'ch2-jit.py')!r})\n"
        f"exec({ENDLESS_NEWTON!r}, ns)\n"
        "check('tax', 'ch2-jit', namespace=ns, seed=1)\n"
        "first = local._child.popen.pid\n"
        "started = time.monotonic()\n"
        f"check('newton', 'ch2-jit', namespace=ns, seed=1, timeout={LIMIT})\n"
        "print('SECONDS', time.monotonic() - started)\n"
        "try:\n"
        "    os.kill(first, 0)\n"
        "    print('ALIVE', first)\n"
        "except ProcessLookupError:\n"
        "    print('GONE', first)\n"
        "check('tax', 'ch2-jit', namespace=ns, seed=1)\n",
        encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240,
                          cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    stopped = [line for line in lines if line.startswith("⏱")]
    assert stopped == [AT_THE_LIMIT]
    seconds = float(next(line for line in lines if line.startswith("SECONDS")).split()[1])
    assert LIMIT <= seconds < LIMIT + 20  # the limit, and the child's boot at most (not counted in the limit)
    assert any(line.startswith("GONE") for line in lines), lines  # killed and reaped
    judged = [line for line in lines if line.startswith("⏳ Exercise 1")]
    assert len(judged) == 2 and judged[0] == judged[1] and "✗" not in done.stdout, done.stdout
    assert "CACHE MISS" not in done.stderr


def test_the_child_is_started_once_and_serves_every_later_self_check(capsys) -> None:
    import runpy

    ns = runpy.run_path(str(ROOT / "solutions" / "ch2-jit.py"))
    check("tax", "ch2-jit", namespace=ns, seed=1)
    child = local._child
    assert child is not None and child.ready and child.alive()  # the programs ran there, not here
    check("newton", "ch2-jit", namespace=ns, seed=1)
    check("tax", "ch2-jit", namespace=ns, seed=2)
    assert local._child is child and child.alive()
    out = capsys.readouterr().out
    assert out.count("⏳ Exercise 1") == 2 and "⏳ Exercise 2" in out and "✗" not in out


# ------------------------------------------------------------------------ Ctrl-C and the limit, in Jupyter


@pytest.fixture
def kernel():
    from jupyter_client import KernelManager

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GRADER_ASSIGNMENTS")}
    env["PYTHONPATH"] = str(ROOT)
    manager = KernelManager(kernel_name="python3")  # this Python's ipykernel
    manager.start_kernel(env=env, cwd=str(ROOT))
    client = manager.client()
    client.start_channels()
    client.wait_for_ready(timeout=60)
    try:
        yield manager, client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def _run(manager, client, code: str, interrupt_when: Callable[[], bool] | None = None
         ) -> tuple[list, float | None]:
    """The cell's stream texts and errors ((ename, traceback)); and, when it was interrupted
    (as Jupyter's stop button does: SIGINT to the kernel's process group, once `interrupt_when()`
    is true), how long it took to end after that."""
    import queue

    msg_id = client.execute(code)
    started, interrupted, out = time.monotonic(), None, []
    while True:
        try:
            msg = client.get_iopub_msg(timeout=0.1)
        except queue.Empty:
            due = interrupt_when is not None and interrupt_when()
            if due and interrupted is None:
                manager.interrupt_kernel()
                interrupted = time.monotonic()
            assert time.monotonic() - started < 240, out
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            out.append(content["text"])
        elif kind == "error":
            out.append((content["ename"], content["traceback"]))
        elif kind == "status" and content["execution_state"] == "idle":
            return out, None if interrupted is None else time.monotonic() - interrupted


@pytest.mark.kernel
def test_in_jupyter_the_limit_and_ctrl_c_stop_an_endless_while_loop_with_a_sentence(kernel) -> None:
    manager, client = kernel
    setup = ("import runpy\nglobals().update(runpy.run_path('solutions/ch2-jit.py'))\n" + ENDLESS_NEWTON
             + "from grader.selfcheck import check\nimport grader.judging.local as local\n")
    assert _run(manager, client, setup)[0] == []
    tax = 'check("tax", "ch2-jit", seed=1)'
    out, _ = _run(manager, client, tax)
    assert len(out) == 1 and out[0].startswith("⏳ Exercise 1") and "✗" not in out[0]

    out, _ = _run(manager, client, f'check("newton", "ch2-jit", timeout={LIMIT})')
    assert out == [AT_THE_LIMIT + "\n"]
    assert _run(manager, client, tax)[0][0].startswith("⏳ Exercise 1")  # the next self-check works

    out, _ = _run(manager, client, "local.LocalVerifier()._ready(); print(local._child.popen.pid)")
    running = int(out[0])
    # stopped once the child has spent a second of CPU on this cell (loading and compiling the
    # exported loop take a fraction of that: the rest is the loop, inside XLA); its limit: 30 s
    spent = terminal_ctrl_c.cpu_seconds(running) or 0.0
    out, after = _run(manager, client, 'check("newton", "ch2-jit")',
                      interrupt_when=lambda: (terminal_ctrl_c.cpu_seconds(running) or spent + 1) - spent >= 1)
    assert out == [("Stopped", [INTERRUPTED])]
    assert after is not None and after < 2  # at once
    out, _ = _run(manager, client, f"import os\ntry:\n    os.kill({running}, 0)\nexcept ProcessLookupError:\n"
                                   "    print('gone')")
    assert out == ["gone\n"]  # the child that ran the loop was killed
    out, _ = _run(manager, client, tax)
    assert len(out) == 1 and out[0].startswith("⏳ Exercise 1") and "✗" not in out[0]


# ------------------------------------------------------------------------ no grader setting prints


def _retraced(capsys) -> tuple:
    """A compile count over two shapes (a retrace JAX explains), and what reached stderr."""
    import jax

    @jax.jit
    def doubled(x):
        return x * 2

    request = CompileCountRequest(id="c", target="doubled", calls=[
        Call(args=[to_wire(np.ones(3, np.float32))]), Call(args=[to_wire(np.ones(4, np.float32))])])
    observation = LocalProber({"doubled": doubled}).observe([request], timeout=0)["c"]
    assert observation.status == "ok" and observation.result.compiles == 2
    return observation.result.why, capsys.readouterr().err


def test_jax_s_cache_miss_explanations_never_reach_stderr(capsys) -> None:
    """JAX 0.6.2 gives the `jax` logger a stderr handler of its own (and a student may give the
    root logger one): while the probe turns `jax_explain_cache_misses` on, each retrace logs a
    "TRACING CACHE MISS" paragraph, which the probe reads and the notebook must never show."""
    import jax

    jax_logger, root = logging.getLogger("jax"), logging.getLogger()
    printer, student = logging.StreamHandler(sys.stderr), logging.StreamHandler(sys.stderr)
    jax_logger.addHandler(printer)  # as JAX 0.6.2 does
    root.addHandler(student)  # as logging.basicConfig() in the notebook does
    before = (jax_logger.handlers[:], root.handlers[:])
    try:
        why, err = _retraced(capsys)
        handlers = (jax_logger.handlers[:], root.handlers[:])
    finally:
        jax_logger.removeHandler(printer)
        root.removeHandler(student)
    assert "CACHE MISS" not in err and err == ""
    assert why == ["at x, now f32[4] and before f32[3]"]  # read all the same
    assert handlers == before  # and put back
    assert jax.config.jax_explain_cache_misses is False


def test_the_explanations_are_read_whatever_the_student_set_and_all_is_put_back(capsys) -> None:
    """A student who quietened JAX's loggers (a level, a disabled logger, no propagation) still
    gets the explanation in the verdict, and finds every logger as they left it."""
    # the `jax` logger, and where JAX 0.6 and JAX 0.12 log the explanations from
    names = ("jax", "jax._src.pjit", "jax._src.interpreters.partial_eval")
    loggers = [logging.getLogger(name) for name in names]
    settings = [(lg.level, lg.propagate, lg.disabled) for lg in loggers]
    loggers[0].setLevel(logging.CRITICAL)
    loggers[1].propagate = False
    loggers[2].disabled = True
    before = [(lg.handlers[:], lg.level, lg.propagate, lg.disabled) for lg in loggers]
    try:
        why, err = _retraced(capsys)
        after = [(lg.handlers[:], lg.level, lg.propagate, lg.disabled) for lg in loggers]
    finally:
        for lg, (level, propagate, disabled) in zip(loggers, settings):
            lg.setLevel(level)
            lg.propagate, lg.disabled = propagate, disabled
    assert why == ["at x, now f32[4] and before f32[3]"] and err == ""
    assert after == before
