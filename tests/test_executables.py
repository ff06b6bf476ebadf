"""The store of the reference solution's compiled programs (grader/sandbox/executables.py).

What must hold: every sandboxed verifier reads it and none can write it; no kernel sees it (its
programs are the answer key: tests/test_kernel_reach.py lists what a kernel can open); nothing a
student compiles ever lands in it; the build adopts only JAX's regular entry files; a program
found there is used (JAX reports a persistent-cache hit); verdicts are the same with and without
it; it is built once per assignment version.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

import pytest

from grader import assignment as assignments
from grader import precompile
from grader.kernel.client import Kernel
from grader.options import GradeOptions
from grader.pipeline import grade_one
from grader.sandbox import executables
from grader.sandbox.layers import available

ROOT = Path(__file__).resolve().parent.parent
SOLUTION = ROOT / "solutions" / "ch2-jit.ipynb"
REFERENCE = (ROOT / "solutions" / "ch2-jit.py").read_text(encoding="utf-8")

pytestmark = [pytest.mark.kernel, pytest.mark.skipif("namespaces" not in available().layers,
                                reason="the store is bound read-only, which needs bwrap's namespaces")]


@pytest.fixture(scope="module")
def built_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of its own, built once for these tests from the ch2-jit reference solution."""
    root = tmp_path_factory.mktemp("executables")
    previous = os.environ.get(executables.ENV)
    os.environ[executables.ENV] = str(root)
    try:
        path = executables.store()
        assert path is not None and path.is_relative_to(root)
        added = precompile.ensure(assignments.load("ch2-jit"))
        assert added > 0
        yield path
    finally:
        if previous is None:
            os.environ.pop(executables.ENV, None)
        else:
            os.environ[executables.ENV] = previous


def _contents(path: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in path.iterdir() if p.is_file()}


def test_the_build_holds_the_verifiers_programs_alone(built_store: Path) -> None:
    names = {name.rsplit("-", 2)[0] for name in _contents(built_store)}
    assert "jit_flat_call" in names  # the verifier's wrapper around an exported module
    assert "jit_newton_sqrt" not in names  # a compile of the kernel's: no kernel reads the store
    assert list((built_store / executables.BUILT).glob("ch2-jit-*.json"))


def test_a_second_ensure_builds_nothing(built_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    monkeypatch.setattr(precompile, "build", lambda *a: calls.append(a) or 0)
    assert precompile.ensure(assignments.load("ch2-jit")) == 0
    assert calls == []


def test_off_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(executables.ENV, "off")
    assert executables.store() is None
    assert executables.sandbox_policy(True).executables is None
    assert executables.sandbox_policy(False) is None


def test_a_verifier_finds_the_references_programs_and_cannot_write_the_store(built_store: Path) -> None:
    """The reference's programs, run again in a verifier, are persistent-cache hits; writing,
    replacing or deleting an entry fails (a read-only bind), and JAX writes nothing."""
    before = _contents(built_store)
    victim = sorted(before)[0]
    facts = _in_verifier(built_store, f"""
import os, jax, jax.numpy as jnp
store = os.environ["JAX_COMPILATION_CACHE_DIR"]
hits = []
jax.monitoring.register_event_listener(lambda event, **kw: hits.append(event))
jax.block_until_ready(jax.jit(lambda v: v * 17.0 + 0.25)(jnp.ones(5)))  # a program of its own
attempts = []
for attack in (lambda: open(os.path.join(store, "planted-cache"), "wb").write(b"x"),
               lambda: open(os.path.join(store, {victim!r}), "r+b").write(b"x"),
               lambda: os.remove(os.path.join(store, {victim!r})),
               lambda: os.rename(os.path.join(store, {victim!r}), os.path.join(store, "moved"))):
    try:
        attack()
        attempts.append("succeeded")
    except OSError as exc:
        attempts.append(type(exc).__name__)
print(repr((store, attempts)))
""")
    store, attempts = eval(facts)
    assert store == str(built_store)
    assert "succeeded" not in attempts
    assert _contents(built_store) == before  # its own program was not written either
    report = grade_one(SOLUTION, GradeOptions(assignment="ch2-jit", seed=3))
    assert report.score == report.max_score


def _in_verifier(store: Path, code: str) -> str:
    """Run `code` with the verifier's sandbox (its runtime directory, the store bound) and
    return what it printed."""
    import subprocess
    import tempfile

    from grader.sandbox.layers import VERIFIER_INSIDE, Sandbox, SandboxPolicy, launch_environment

    with tempfile.TemporaryDirectory(prefix="grade-test-verifier-") as scratch:
        sandbox = Sandbox(Path(scratch), SandboxPolicy(executables=store), available(), runtime_dir=VERIFIER_INSIDE)
        sandbox.prepare()
        try:
            argv = sandbox.wrap([sys.executable, "-I", "-c", code])
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                                  env=launch_environment(Path(scratch)))
        finally:
            sandbox.cleanup()
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_a_kernel_is_given_no_store(built_store: Path) -> None:
    """The store is compiled from the reference solution: a kernel runs the student's Python,
    so it must neither see the store nor be told where it is."""
    kernel = Kernel(sandbox=executables.sandbox_policy(True)).start()
    try:
        run = kernel.run(f"import os\nassert 'JAX_COMPILATION_CACHE_DIR' not in os.environ\n"
                         f"assert not os.path.exists({str(built_store)!r})", 60)
    finally:
        kernel.close()
    assert run.status == "ok", run.evalue


def test_verdicts_are_the_same_without_the_store(built_store: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = tmp_path / "wrong.py"
    wrong.write_text(REFERENCE.replace("0.5 * (x + a / x)", "0.5 * (x + a / (x + 1e-3))"), encoding="utf-8")
    options = GradeOptions(assignment="ch2-jit", seed=7)

    def verdicts() -> list[tuple[str, str, str]]:
        out = []
        for path in (SOLUTION, wrong):
            report = grade_one(path, options)
            out += [(path.name, c.id, c.status) for e in report.exercises for c in e.checks]
        return out

    before = _contents(built_store)
    with_store = verdicts()
    assert _contents(built_store) == before  # grading a wrong answer added nothing
    monkeypatch.setenv(executables.ENV, "off")
    assert verdicts() == with_store
    assert all(status == "passed" for name, _, status in with_store if name == SOLUTION.name)
    assert any(status == "failed" for name, _, status in with_store if name == "wrong.py")


def test_only_jaxs_regular_entry_files_are_adopted(tmp_path: Path) -> None:
    compiled, store = tmp_path / "compiled", tmp_path / "store"
    compiled.mkdir()
    store.mkdir()
    good = compiled / ("jit_f-" + "a" * 64 + "-cache")
    good.write_bytes(b"program")
    (compiled / "not-an-entry.txt").write_bytes(b"x")
    outside = tmp_path / "outside-secret"
    outside.write_bytes(b"secret")
    (compiled / ("jit_link-" + "b" * 64 + "-cache")).symlink_to(outside)
    os.mkfifo(compiled / ("jit_fifo-" + "c" * 64 + "-cache"))
    (compiled / ("jit_dir-" + "d" * 64 + "-cache")).mkdir()
    with open(compiled / ("jit_huge-" + "e" * 64 + "-cache"), "wb") as f:
        f.truncate(executables.MAX_ENTRY_BYTES + 1)
    assert executables.adopt(compiled, store) == 1
    assert sorted(p.name for p in store.iterdir() if p.is_file()) == [good.name]
    assert (store / executables.SUMS / good.name).read_text() == hashlib.sha256(b"program").hexdigest()
    assert (store / good.name).read_bytes() == b"program"
    assert oct((store / good.name).stat().st_mode & 0o777) == "0o644"


def test_an_existing_entry_is_never_replaced(tmp_path: Path) -> None:
    """Entries are named by their key: the first one stays (a rebuild cannot swap it)."""
    compiled, store = tmp_path / "compiled", tmp_path / "store"
    compiled.mkdir()
    store.mkdir()
    name = "jit_f-" + "a" * 64 + "-cache"
    (store / name).write_bytes(b"first")
    (compiled / name).write_bytes(b"second")
    assert executables.adopt(compiled, store) == 0
    assert (store / name).read_bytes() == b"first"


def test_an_entry_holding_another_programs_bytes_is_removed_before_any_kernel_reads_it(
        built_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by an attack: JAX loads whatever bytes sit under a key, so the verifier's warm-up
    entry holding another executable stopped every verifier from starting (exit 3). Each entry's
    sha256 is kept at adoption and checked once per process; a mismatch removes the entry and the
    build markers (the next build puts it back), and grading is as before."""
    root = tmp_path / "root"
    copy = root / built_store.name
    shutil.copytree(built_store, copy)
    entries = sorted((p for p in copy.iterdir() if executables.ENTRY.fullmatch(p.name)),
                     key=lambda p: p.stat().st_size)
    victim, donor = entries[0], entries[-1]
    victim.write_bytes(donor.read_bytes())
    monkeypatch.setenv(executables.ENV, str(root))
    executables._verify.cache_clear()
    assert executables.store() == copy
    assert not victim.exists() and donor.exists()
    assert list((copy / executables.BUILT).iterdir()) == []  # rebuilt by the next ensure
    report = grade_one(SOLUTION, GradeOptions(assignment="ch2-jit", seed=3))
    assert report.score == report.max_score
    assert precompile.ensure(assignments.load("ch2-jit")) >= 1
    assert victim.exists() and victim.read_bytes() != donor.read_bytes()
