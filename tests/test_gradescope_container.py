"""run_autograder in a simulated Gradescope container (tests/gradescope_container.py: root without
CAP_SYS_ADMIN, read-only cgroups, its own pid namespace, /autograder readable by all as the zip
unpacks it), grading a hostile submission.

Found by an attack: where cgroups were read-only, gradescope_run graded with no sandbox layer at
all, and the student's code read the assignment, edited the running run_autograder and wrote
results.json itself (100, with no tests in it). In the container the student's code must run as
an unprivileged user under every layer the container allows, read neither the bundle nor write
the results, leave no process running when results.json is written, and results.json must say
which layers were missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from test_gradescope_bundle import documented, unzip

from grader.gradescope.bundle import build_bundle
from grader.sandbox.layers import available

HERE = Path(__file__).resolve().parent
REFERENCE = (HERE.parent / "solutions" / "ch2-jit.py").read_text(encoding="utf-8")
pytestmark = [pytest.mark.kernel,
              pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("setpriv"),
                                 reason="simulating the container needs root, unshare and setpriv"),
              pytest.mark.skipif("seccomp" not in available().layers, reason="no seccomp filter for this machine")]

# Every attack that succeeds leaves a mark in MARKS (a folder the student's user may write, on the
# host: the container has no mount namespace of the kernel's own); "ran" proves the cell ran.
ATTACK = '''
# %% [attack]
import os, time
def _mark(name, text=""):  # whole or not at all: the daemon may be killed mid-write
    with open(os.path.join(MARKS, ".partial-" + name), "w") as f:
        f.write(text)
    os.replace(os.path.join(MARKS, ".partial-" + name), os.path.join(MARKS, name))
_mark("ran", str(os.getuid()))
for _what, _path in (("assignment", ROOT + "/source/assignments/ch2-jit/references.py"),
                     ("bundle", ROOT + "/source/run_autograder"), ("environ", "/proc/1/environ")):
    try:
        with open(_path, "rb") as _f:
            _f.read(64)
        _mark("read-" + _what)
    except OSError:
        pass
for _what, _path in (("run_autograder", ROOT + "/source/run_autograder"), ("results", ROOT + "/results/results.json")):
    try:
        with open(_path, "a") as _f:
            _f.write('{"score": 100}')
        _mark("wrote-" + _what)
    except OSError:
        pass
import socket
for _family in (socket.AF_INET, socket.AF_INET6):
    try:
        socket.socket(_family, socket.SOCK_STREAM).close()
        _mark("network-%d" % _family)
    except OSError:
        pass
if os.fork() == 0:  # a daemon that waits for the grading to end, then writes the results
    os.setsid()
    if os.fork() == 0:
        for _ in range(1200):
            try:
                with open(ROOT + "/results/results.json", "w") as _f:
                    _f.write('{"score": 100, "output": "the daemon"}')
                _mark("daemon-wrote")
            except OSError:
                pass
            _mark("daemon-alive", str(time.time()))
            time.sleep(0.05)
        os._exit(0)
    os._exit(0)
for _ in range(200):  # the cell ends once the daemon has shown a sign of life, so that it surely ran
    if os.path.exists(os.path.join(MARKS, "daemon-alive")):
        break
    time.sleep(0.01)
'''


@pytest.fixture
def container_root(tmp_path_factory: pytest.TempPathFactory):
    """/autograder as Gradescope lays it out, in a folder every user may enter (as in the
    container), with the bundle unzipped in source/."""
    bundle = build_bundle("ch2-jit", tmp_path_factory.mktemp("bundle") / "autograder.zip")
    base = Path(tempfile.mkdtemp(prefix="grade-test-gradescope-"))
    base.chmod(0o755)
    root = base / "autograder"
    unzip(bundle, root / "source")
    for folder in [root, *root.rglob("*")]:  # as the zip unpacks: readable by all
        if folder.is_dir():
            folder.chmod(0o755)
    (root / "submission").mkdir()
    marks = base / "marks"
    marks.mkdir()
    marks.chmod(0o777)
    try:
        yield root, marks
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_hostile_submission_is_graded_in_the_layers_the_container_allows(container_root) -> None:
    root, marks = container_root
    run_autograder = root / "source" / "run_autograder"
    script_before = run_autograder.read_bytes()
    attack = ATTACK.replace("MARKS", repr(str(marks))).replace("ROOT", repr(str(root)))
    (root / "submission" / "ch2-jit.py").write_text(REFERENCE + "\n\n" + attack, encoding="utf-8")
    env = {**os.environ, "GRADESCOPE_ROOT": str(root), "GRADER_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, str(HERE / "gradescope_container.py"), str(root), "--",
                           str(run_autograder)], cwd=root, env=env, capture_output=True, text=True, timeout=900)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    assert (marks / "ran").read_text() == "65534", log  # the student's code ran, unprivileged
    assert sorted(p.name for p in marks.iterdir() if p.name.startswith(("read-", "wrote-", "daemon-wrote", "network-"))) == []
    assert run_autograder.read_bytes() == script_before
    results = documented(root / "results" / "results.json")
    tests = results.tests or []
    assert results.score == sum(t.max_score for t in tests) == 100, results.output
    output = results.output or ""
    assert "with the sandbox layers it allows (user, seccomp, rlimits)" in output
    for layer in ("namespaces", "cgroups", "scratch"):
        assert f"{layer}: " in output
    alive = (marks / "daemon-alive").read_text() if (marks / "daemon-alive").exists() else None
    assert alive is not None  # the daemon did run
    # and was stopped before results.json was written: the property the grader's last sweep ("stopped N
    # process(es) ... before writing results.json") is there for; whether that sweep or an earlier
    # cleanup of the grading's processes catches it varies from run to run (a fresh clone's run saw
    # no sweep line once), so the test reads the daemon's own last sign of life against the file
    assert float(alive) <= (root / "results" / "results.json").stat().st_mtime, log
    assert "stopped" not in log or "before writing results.json" in log
