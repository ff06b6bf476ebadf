"""The library a kernel preloads so that libstdc++'s std::future waits sleep under the seccomp
filter instead of spinning (grader/sandbox/futex_shim.py).

Under the kernel's filter a shared futex wait is answered EAGAIN at once, so libstdc++'s own wait
cannot sleep: XLA's compiler, which waits on a future for every program, spun a core through
each compile (a 500-step program: 17 CPU s of kernel against 13 with the library). The library's
waits and wakes are private: they sleep, they wake each other, and none sleeps past its poll.
"""

from __future__ import annotations

import ctypes
import json
import threading
import time

import pytest

from grader.kernel.client import Kernel
from grader.sandbox import futex_shim
from grader.sandbox.layers import SHIM_INSIDE, SandboxPolicy, available

ISOLATION = available()
LIBRARY = futex_shim.library()
needs_library = pytest.mark.skipif(LIBRARY is None,
                                   reason="no C compiler here: the kernels' waits spin as before")

WAIT_ARGS = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint), ctypes.c_uint, ctypes.c_bool, ctypes.c_long,
             ctypes.c_long]


def _entry(library: ctypes.CDLL, name: str, argtypes: list, restype: type | None) -> ctypes._CFuncPtr:
    function = getattr(library, name)
    function.argtypes, function.restype = argtypes, restype
    return function


def _absolute(seconds_ahead: float, clock: int) -> tuple[int, int]:
    at = time.clock_gettime_ns(clock) + int(seconds_ahead * 1e9)
    return at // 10**9, at % 10**9


@needs_library
def test_a_wait_sleeps_until_its_deadline_or_a_wake_and_never_past_a_poll() -> None:
    assert LIBRARY is not None
    library = ctypes.CDLL(str(LIBRARY))
    wait = _entry(library, futex_shim.WAIT, WAIT_ARGS, ctypes.c_bool)
    steady = _entry(library, futex_shim.WAIT_STEADY, WAIT_ARGS, ctypes.c_bool)
    notify = _entry(library, futex_shim.NOTIFY_ALL, [ctypes.POINTER(ctypes.c_uint)], None)
    word = ctypes.c_uint(7)

    for function, clock in ((wait, time.CLOCK_REALTIME), (steady, time.CLOCK_MONOTONIC)):
        started, cpu, deadline = time.monotonic(), time.process_time(), _absolute(0.3, clock)
        while function(None, ctypes.byref(word), 7, True, *deadline):
            pass  # polls: the caller reads the word again, as libstdc++'s loop does
        assert time.monotonic() - started >= 0.29  # it waited to the deadline, then said so
        assert time.process_time() - cpu < 0.1  # asleep, not spinning
        assert not function(None, ctypes.byref(word), 7, True, -1, 0)  # a deadline before the epoch: at once

    def wake() -> None:
        time.sleep(0.2)
        word.value = 8
        notify(ctypes.byref(word))

    waker = threading.Thread(target=wake)
    started, calls = time.monotonic(), 0
    waker.start()
    while word.value == 7:  # an untimed wait, as a future's get() makes it
        calls += 1
        assert wait(None, ctypes.byref(word), 7, False, 0, 0)
    waker.join()
    assert 0.19 <= time.monotonic() - started < 2
    assert calls <= 40  # about 20 polls of 10 ms at most, not a spin's thousands


@needs_library
def test_a_library_left_writable_by_others_is_built_again(tmp_path, monkeypatch) -> None:
    """Every kernel loads it, so a file in its place that others could have written is not used."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    futex_shim.library.cache_clear()
    try:
        built = futex_shim.library()
        assert built is not None and built.parent.parent == tmp_path / "jax-course-grader"
        built.write_bytes(b"not a library")
        built.chmod(0o666)
        futex_shim.library.cache_clear()
        assert futex_shim.library() == built
        assert built.read_bytes()[:4] == b"\x7fELF" and built.stat().st_mode & 0o777 == 0o644
    finally:
        futex_shim.library.cache_clear()


@needs_library
@pytest.mark.kernel
@pytest.mark.skipif(not {"seccomp", "namespaces"} <= set(ISOLATION.layers),
                    reason=f"no seccomp filter or no namespaces here: {ISOLATION.missing}")
def test_in_a_kernel_libstdc_s_wait_is_refused_and_the_preloaded_one_sleeps() -> None:
    """Under the kernel's filter, libstdc++'s own wait returns at once (the spin); the one the
    kernel resolves its calls to, the preloaded library's, sleeps to its deadline."""
    cell = f'''
import ctypes, json, os, time
names = {{"wait": {futex_shim.WAIT!r}}}
args = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint), ctypes.c_uint, ctypes.c_bool, ctypes.c_long,
        ctypes.c_long]
def timed(library):
    wait = getattr(library, names["wait"])
    wait.argtypes, wait.restype = args, ctypes.c_bool
    word = ctypes.c_uint(7)
    at = time.clock_gettime_ns(time.CLOCK_REALTIME) + 300_000_000
    started, cpu, calls = time.monotonic(), time.process_time(), 0
    while calls < 100_000 and wait(None, ctypes.byref(word), 7, True, at // 10**9, at % 10**9):
        calls += 1
    return {{"seconds": time.monotonic() - started, "cpu": time.process_time() - cpu, "calls": calls}}
maps = open("/proc/self/maps").read()
facts = {{"preload": os.environ.get("LD_PRELOAD"), "mapped": os.environ.get("LD_PRELOAD", "?") in maps,
          "resolved": timed(ctypes.CDLL(None)), "libstdcxx": timed(ctypes.CDLL("libstdc++.so.6"))}}
raise RuntimeError(json.dumps(facts))
'''
    with Kernel(sandbox=SandboxPolicy()) as kernel:
        run = kernel.run(cell, 60)
    assert run.ename == "RuntimeError", (run.status, run.ename, run.evalue)
    facts = json.loads(run.evalue)
    assert facts["preload"] == str(SHIM_INSIDE) and facts["mapped"], facts
    assert facts["resolved"]["seconds"] >= 0.25 and facts["resolved"]["calls"] < 100, facts  # 30 polls
    assert facts["resolved"]["cpu"] < 0.15, facts
    # libstdc++'s own shared wait is refused (EAGAIN) every time: a thread spinning to the deadline
    assert facts["libstdcxx"]["calls"] > 1000 and facts["libstdcxx"]["cpu"] > 0.03, facts
