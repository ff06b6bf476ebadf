"""Verifiers forked from a warm fork server, and answers reused for identical jobs.

A. Without a process: the answer cache (grader/verifier/result_cache.py): a hit only for the same
   module bytes and inputs, under the asking job's id; only the verifier's own statuses kept;
   bounded. The probe's export strips locations, so the same program from two cells is the
   same bytes.
B. With real processes (marked `kernel`, most in the full sandbox): each forked verifier runs as
   a fresh one would (its own cgroups, the unprivileged user, the filter, non-dumpable), a hang
   and a memory bomb cost their own job, the files a child leaves are gone before the next, a
   server that dies is replaced, and nothing remains after it is killed.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export, lax

from grader.kernel.protocol import ArrayValue, PyScalar
from grader.sandbox.layers import SandboxPolicy, available
from grader.sandbox.layers import _exited as _gone  # gone, or a zombie
from grader.values import from_wire, to_wire
from grader.verifier.client import Verifier
from grader.verifier.forkserver import VerifierServer
from grader.verifier.protocol import VerifierJob, VerifierResult
from grader.verifier.result_cache import ResultCache, job_key

ISOLATION = available()
POLICY = SandboxPolicy()
S = jax.ShapeDtypeStruct
F32 = jnp.float32
kernel = pytest.mark.kernel
full_sandbox = pytest.mark.skipif(not ISOLATION.sandboxed,
                                  reason=f"the full sandbox is not available here: {ISOLATION.missing}")


def serialized(fn, *avals) -> bytes:
    return bytes(export.export(jax.jit(fn))(*avals).serialize())


def arr(x, dtype=np.float32) -> ArrayValue:
    return ArrayValue.model_validate(to_wire(np.asarray(x, dtype)))


QUICK = serialized(lambda x: x + 1.0, S((2,), F32))


def quick_job(id: str = "quick", values=(1.0, 2.0)) -> VerifierJob:
    return VerifierJob(id=id, module=QUICK, calls=[[arr(list(values))]])


def _status(pid: int) -> dict[str, str]:
    text = Path(f"/proc/{pid}/status").read_text()
    return {k: v.strip() for k, v in (line.split(":", 1) for line in text.splitlines() if ":" in line)}


def _wait_gone(pids: list[int]) -> bool:
    deadline = time.monotonic() + 5
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return all(_gone(p) for p in pids)


# ----------------------------------------------------------------------------- A. no process


def test_the_cache_answers_only_the_same_module_and_inputs() -> None:
    cache = ResultCache()
    answered = VerifierResult(id="first", status="ok", values=[[arr([2.0, 3.0])]], seconds=0.4)
    cache.put(quick_job("first"), answered, 100)
    again = cache.get(quick_job("again"))
    assert again is not None and again.id == "again" and again.seconds == 0.0
    assert again.values == answered.values
    assert cache.get(quick_job("other inputs", (1.0, 2.5))) is None
    other_module = VerifierJob(id="m", module=QUICK + b"\0", calls=quick_job().calls)
    assert cache.get(other_module) is None
    no_calls = VerifierJob(id="n", module=QUICK)
    assert cache.get(no_calls) is None and job_key(no_calls) != job_key(quick_job())
    assert (cache.hits, cache.misses) == (1, 3)


@pytest.mark.parametrize("status", ["error", "timeout", "crashed"])
def test_the_cache_keeps_only_the_verifiers_own_answers(status: str) -> None:
    cache = ResultCache()
    cache.put(quick_job("a"), VerifierResult(id="a", status=status, detail="x"), 10)
    assert cache.get(quick_job("b")) is None and len(cache) == 0


def test_the_cache_is_bounded_least_recently_used_first() -> None:
    cache = ResultCache(max_bytes=250)
    jobs = [quick_job(f"j{i}", (float(i), 0.0)) for i in range(3)]
    for job in jobs[:2]:
        cache.put(job, VerifierResult(id=job.id, status="ok", values=[[arr([0.0, 0.0])]]), 100)
    assert cache.get(jobs[0]) is not None  # j0 is now the most recent
    cache.put(jobs[2], VerifierResult(id="j2", status="ok", values=[[arr([0.0, 0.0])]]), 100)
    assert cache.get(jobs[1]) is None and cache.get(jobs[0]) is not None and cache.get(jobs[2]) is not None
    cache.put(quick_job("huge", (9.0, 9.0)), VerifierResult(id="huge", status="ok"), 10_000)
    assert cache.get(quick_job("huge", (9.0, 9.0))) is None


def test_the_probe_exports_the_same_program_as_the_same_bytes() -> None:
    """Two cells that define the same function at other lines and under other names: the
    module's locations differ, so without stripping them the bytes would too. The probe strips
    them before JAX serializes (`op_export`); the fallback that strips afterwards
    (`_without_locations`) gives the very same bytes."""
    import base64

    from grader.kernel.inside.runtime import _without_locations, begin_batch, op_export

    made, probed = [], []
    for padding, arg in (("", "x"), ("\n\n\n", "value")):
        namespace: dict = {"jax": jax, "jnp": jnp}
        code = compile(f"{padding}@jax.jit\ndef f({arg}):\n    return jnp.sin({arg}) * 2 + 1\n", f"/tmp/cell{len(made)}.py", "exec")
        exec(code, namespace)
        made.append(export.export(namespace["f"])(S((3,), F32)))
        begin_batch()
        request = {"op": "export", "id": "e", "target": "f", "args": [{"t": "abstract", "shape": [3], "dtype": "float32"}]}
        probed.append(base64.b64decode(op_export(request, namespace)["module"]))
    assert bytes(made[0].serialize()) != bytes(made[1].serialize())
    stripped = [bytes(_without_locations(e).serialize()) for e in made]
    assert stripped[0] == stripped[1]
    assert probed[0] == probed[1] == stripped[0]
    again = export.deserialize(bytearray(probed[0]))
    np.testing.assert_allclose(again.call(jnp.arange(3.0, dtype=F32)), np.sin(np.arange(3.0)) * 2 + 1, rtol=1e-6)
    from jax._src.export import _export
    assert _export._module_to_bytecode.__name__ == "_module_to_bytecode"  # JAX's own again after the export


# ----------------------------------------------------------------------------- B. processes


@pytest.fixture
def server():
    s = VerifierServer(POLICY).start()
    try:
        yield s
    finally:
        s.kill()


@kernel
@full_sandbox
def test_each_forked_verifier_is_isolated_as_a_fresh_one(server: VerifierServer) -> None:
    seen = []
    for value in (1.0, 10.0):
        with Verifier(POLICY, server=server) as v:
            results = v.run([quick_job(values=(value, 2.0))], timeout=30)
            assert results["quick"].status == "ok"
            assert from_wire(results["quick"].values[0][0]).tolist() == [value + 1.0, 3.0]
            child = v.process
            status = _status(child.host_pid)
            assert status["Uid"].split()[0] == "65534" and status["NoNewPrivs"] == "1" and status["Seccomp"] == "2"
            for private in ("mem", "environ"):  # non-dumpable: root's, not the sandbox user's
                assert os.stat(f"/proc/{child.host_pid}/{private}").st_uid == 0
                assert os.stat(f"/proc/{server.server_pid}/{private}").st_uid == 0
            own = {name: (group / "cgroup.procs").read_text().split() for name, group in child.groups.items()}
            assert own == {name: [str(child.host_pid)] for name in ("memory", "pids", "cpu", "cpuacct")}
            servers = (server.sandbox.cgroup("pids") / "cgroup.procs").read_text().split()
            assert str(child.host_pid) not in servers
            seen.append((child.host_pid, list(child.groups.values())))
        assert _wait_gone([seen[-1][0]]) and not any(g.exists() for g in seen[-1][1])
    assert seen[0][0] != seen[1][0] and server.forks == 2 and server.starts == 1


@kernel
@full_sandbox
def test_a_hang_and_a_memory_bomb_cost_their_own_job() -> None:
    forever = serialized(lambda x: lax.while_loop(lambda c: True, lambda c: c + 1.0, x), S((), F32))
    n = 2**15  # an outer product of 4 GiB in a 1 GiB sandbox
    bomb = serialized(lambda x: (jnp.outer(x, x) + 1.0).cumsum(axis=0)[-1, :3], S((n,), F32))
    policy = SandboxPolicy(memory_bytes=2**30)
    server = VerifierServer(policy).start()
    try:
        with Verifier(policy, server=server) as v:
            results = v.run([VerifierJob(id="forever", module=forever, calls=[[PyScalar(v=1.0)]]),
                             VerifierJob(id="bomb", module=bomb, calls=[[arr(np.ones(n))]]),
                             quick_job()], timeout=15.0)  # a third each: the hang spins 5 s, the bomb dies in ~1
        assert results["forever"].status == "timeout"
        assert results["bomb"].status in ("crashed", "error"), results["bomb"]
        if results["bomb"].status == "crashed":
            assert "memory limit" in results["bomb"].detail
        assert results["quick"].status == "ok"
        assert server.starts == 1 and server.forks >= 3  # the server outlived both
    finally:
        server.kill()


@kernel
@full_sandbox
def test_what_a_child_leaves_is_gone_before_the_next(server: VerifierServer) -> None:
    v = Verifier(POLICY, server=server).wait_ready()
    tmp = Path(f"/proc/{server.server_pid}/root/tmp")
    (server.scratch / "planted.py").write_text("print('hello')")  # as the child could
    (tmp / "dir").mkdir()
    (tmp / "dir" / "f").write_text("x")
    os.symlink("/etc", tmp / "escape")  # a link out must be unlinked, not followed
    v.close()
    assert list(server.scratch.iterdir()) == []
    # what is left of /tmp is the directory bwrap made for the scratch mount, if it is under /tmp
    assert sorted(p.name for p in tmp.iterdir()) == list(server._tmp_keep())
    assert Path("/etc/passwd").exists()
    with Verifier(POLICY, server=server) as again:  # the scratch is still mounted for the next
        assert again.run([quick_job()], timeout=30)["quick"].status == "ok"


@kernel
@full_sandbox
def test_a_server_that_dies_is_replaced(server: VerifierServer) -> None:
    with Verifier(POLICY, server=server) as v:
        assert v.run([quick_job()], timeout=30)["quick"].status == "ok"
    os.kill(server.server_pid, signal.SIGKILL)  # as a child of the same user could
    with Verifier(POLICY, server=server) as v:
        assert v.run([quick_job()], timeout=30)["quick"].status == "ok"
    assert server.starts == 2


@kernel
@full_sandbox
def test_a_stopped_server_is_replaced(server: VerifierServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from grader.sandbox import forking

    monkeypatch.setattr(forking, "FORK_TIMEOUT_S", 2.0)
    Verifier(POLICY, server=server).wait_ready().close()
    os.kill(server.server_pid, signal.SIGSTOP)
    with Verifier(POLICY, server=server) as v:
        assert v.run([quick_job()], timeout=30)["quick"].status == "ok"
    assert server.starts == 2


@kernel
@full_sandbox
def test_nothing_remains_after_the_server_is_killed() -> None:
    server = VerifierServer(POLICY).start()
    child = Verifier(POLICY, server=server).wait_ready().process
    groups = [*child.groups.values(), server.sandbox.cgroup("memory"), server.sandbox.cgroup("pids")]
    pids = [int(p) for p in (groups[-1] / "cgroup.procs").read_text().split()] + [child.host_pid]
    scratch = server.scratch
    server.kill()
    assert _wait_gone(pids)
    assert not any(g.exists() for g in groups)
    assert str(scratch) not in Path("/proc/self/mounts").read_text() and not scratch.exists()
    server.kill()  # twice is fine


@kernel
def test_an_answered_job_starts_no_verifier() -> None:
    server = VerifierServer(None).start()
    answers = ResultCache()
    try:
        with Verifier(None, server=server, answers=answers) as v:
            assert v.run([quick_job("a")], timeout=30)["a"].status == "ok"
        with Verifier(None, server=server, answers=answers) as v:
            result = v.run([quick_job("b")], timeout=30)["b"]
            assert result.status == "ok" and from_wire(result.values[0][0]).tolist() == [2.0, 3.0]
            assert v.process is None
        assert server.forks == 1 and answers.hits == 1
    finally:
        server.kill()


@kernel
@full_sandbox
def test_a_checkout_under_tmp_is_kept_and_the_server_too(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A venv or checkout under /tmp (a CI runner's clone) is bound into the sandbox, so bwrap
    makes its parents in the sandbox's /tmp: those stay, and the server is not replaced for them."""
    from grader.sandbox.layers import Sandbox

    bound = tmp_path / "venv"
    bound.mkdir()
    original = Sandbox._readonly_paths
    monkeypatch.setattr(Sandbox, "_readonly_paths", lambda self: sorted({*original(self), bound}))
    server = VerifierServer(POLICY).start()
    try:
        v = Verifier(POLICY, server=server).wait_ready()
        (Path(f"/proc/{server.server_pid}/root/tmp") / "planted").write_text("x")
        v.close()
        left = sorted(p.name for p in Path(f"/proc/{server.server_pid}/root/tmp").iterdir())
        assert "planted" not in left and bound.parts[2] in left
        with Verifier(POLICY, server=server) as again:
            assert again.run([quick_job()], timeout=30)["quick"].status == "ok"
        assert server.starts == 1
    finally:
        server.kill()
