"""The submissions folder is hostile data: links, special files, OS errors, huge files and odd ids
are each that student's error report (or a safe file name), never the grader's crash."""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

from grader import submission
from grader.batch.discovery import NOT_UTF8, discover, student_file_stem
from grader.batch.run import grade_many
from grader.errors import SubmissionUnreadable
from grader.options import GradeOptions
from grader.outputs.names import report_file_name
from grader.report import Report
from grader.submission import MAX_BYTES, SYMLINK, peek, read_bytes, read_submission

ROOT = Path(__file__).resolve().parent.parent
SOLUTION = ROOT / "solutions" / "ch2-jit.py"
OPTIONS = GradeOptions(assignment="ch2-jit", seed=3, cell_timeout=5, sandbox=False)




def reports_in(out: Path) -> dict[str, Report]:
    return {r.student: r for r in (Report.model_validate_json(p.read_text(encoding="utf-8"))
                                   for p in out.glob("*.json"))}


@pytest.fixture
def alarm():
    """Fail instead of hanging: a blocking open or read is interrupted after `seconds`."""
    def handler(signum, frame):
        raise TimeoutError("blocked")

    previous = signal.signal(signal.SIGALRM, handler)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


# ----------------------------------------------------------------------------- symbolic links


def make_links(subs: Path, elsewhere: Path) -> None:
    subs.mkdir()
    elsewhere.mkdir()
    (subs / "ok.py").write_text("x = 1\n")
    (subs / "alice.py").symlink_to(SOLUTION)  # a link to the solutions
    (subs / "bob.ipynb").symlink_to(ROOT / "solutions" / "ch2-jit.ipynb")
    (subs / "proc.py").symlink_to("/proc/self/environ")  # the grader's environment
    (subs / "dangling.py").symlink_to(subs / "nowhere.py")
    (subs / "loop.py").symlink_to(subs / "loop.py")  # ELOOP when followed
    (elsewhere / "frank").mkdir()
    (elsewhere / "frank" / "work.py").write_text(SOLUTION.read_text())
    (subs / "frank").symlink_to(elsewhere / "frank")  # a linked student folder
    (subs / "carol").mkdir()
    (subs / "carol" / "work.ipynb").symlink_to(ROOT / "solutions" / "ch2-jit.ipynb")  # a link inside
    (subs / "dave").mkdir()
    (subs / "dave" / "answer.py").write_text("y = 2\n")
    (subs / "dave" / "data").symlink_to("/etc")  # not a submission: ignored, never followed
    (subs / "erin").mkdir()
    (subs / "erin" / "real.py").write_text("z = 3\n")
    (subs / "erin" / "copy.py").symlink_to(SOLUTION)  # a link beside a real one: a conflict


def test_discovery_never_follows_a_link(tmp_path: Path) -> None:
    make_links(tmp_path / "subs", tmp_path / "elsewhere")
    found = discover([tmp_path / "subs"])
    assert [(f.student, f.path.name) for f in found.submissions] == [("dave", "answer.py"), ("ok", "ok.py")]
    problems = {p.student: p.reason for p in found.problems}
    assert problems == {s: SYMLINK for s in ("alice", "bob", "carol", "dangling", "frank", "loop", "proc")}
    assert found.conflicts == {"erin": [tmp_path / "subs" / "erin" / "copy.py",
                                        tmp_path / "subs" / "erin" / "real.py"]}


@pytest.mark.parametrize("name", ["alice.py", "bob.ipynb", "proc.py", "dangling.py", "loop.py"])
def test_reading_never_follows_a_link(tmp_path: Path, name: str) -> None:
    make_links(tmp_path / "subs", tmp_path / "elsewhere")
    path = tmp_path / "subs" / name
    for read in (read_submission, peek, read_bytes):
        with pytest.raises(SubmissionUnreadable) as info:
            read(path)
        assert info.value.reason == SYMLINK and str(info.value) == f"{path}: {SYMLINK}"


def test_a_link_is_that_students_error_report_and_the_batch_goes_on(tmp_path: Path,
                                                                    recorder) -> None:
    make_links(tmp_path / "subs", tmp_path / "elsewhere")
    out = tmp_path / "out"
    result = grade_many([tmp_path / "subs"], out, OPTIONS)
    assert sorted(Path(t.path).name for t in recorder.tasks) == ["answer.py", "ok.py"]
    reports = reports_in(out)
    for student in ("alice", "bob", "carol", "dangling", "frank", "loop", "proc"):
        assert reports[student].status == "error"
        assert reports[student].error.endswith(": a symbolic link, not a submission")
        assert reports[student].score == 0 and reports[student].max_score == 100
    assert "two submissions for one student" in reports["erin"].error
    assert (result.graded, result.errors) == (2, 8)


# ----------------------------------------------------------------------------- special files


def test_a_fifo_is_refused_without_blocking(tmp_path: Path, alarm) -> None:
    fifo = tmp_path / "alice.py"
    os.mkfifo(fifo)
    (tmp_path / "bob").mkdir()
    os.mkfifo(tmp_path / "bob" / "work.ipynb")
    os.mkfifo(tmp_path / "pipe")  # not named like a submission
    found = discover([tmp_path])
    assert {p.student: p.reason for p in found.problems} == {
        "alice": "not a regular file (a FIFO)", "bob": "not a regular file (a FIFO)"}
    assert found.skipped == {str(tmp_path / "pipe"): "not a .ipynb notebook or .py module"}
    for read in (read_submission, peek):
        with pytest.raises(SubmissionUnreadable, match=r"not a regular file \(a FIFO\)"):
            read(fifo)


def test_a_socket_and_a_device_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, alarm) -> None:
    monkeypatch.chdir(tmp_path)  # a unix socket's path must be short
    server = socket.socket(socket.AF_UNIX)
    server.bind("sock.py")
    try:
        with pytest.raises(SubmissionUnreadable, match=r"not a regular file \(a socket\)"):
            read_submission(tmp_path / "sock.py")
        expected = {"sock": "not a regular file (a socket)"}
        try:
            os.mknod(tmp_path / "dev.py", stat.S_IFCHR | 0o600, os.makedev(1, 3))  # like /dev/null
            expected["dev"] = "not a regular file (a character device)"
            with pytest.raises(SubmissionUnreadable, match=r"a character device"):
                read_submission(tmp_path / "dev.py")
        except PermissionError:
            pass  # no CAP_MKNOD here: the socket covers special files
        assert {p.student: p.reason for p in discover([tmp_path]).problems} == expected
    finally:
        server.close()


# ----------------------------------------------------------------------------- OS errors


@pytest.mark.parametrize("code", [errno.EACCES, errno.EIO, errno.EINVAL, errno.ENAMETOOLONG, errno.ELOOP])
def test_an_os_error_opening_a_file_is_one_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    code: int) -> None:
    path = tmp_path / "alice.py"
    path.write_text("x = 1\n")
    real_open = os.open

    def failing(p, *args, **kwargs):
        if os.fspath(p) == str(path):
            raise OSError(code, os.strerror(code))
        return real_open(p, *args, **kwargs)

    monkeypatch.setattr(os, "open", failing)
    with pytest.raises(SubmissionUnreadable) as info:
        read_submission(path)
    assert info.value.reason == f"cannot be read ({os.strerror(code)})"


def test_an_os_error_reading_is_one_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "alice.py"
    path.write_text("x = 1\n")
    def failing(fd, n):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "read", failing)
    with pytest.raises(SubmissionUnreadable, match=r"cannot be read \(Input/output error\)"):
        peek(path)


def test_os_errors_are_the_students_error_reports_in_a_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            recorder) -> None:
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("alice", "bob", "carol"):
        (subs / f"{name}.py").write_text("x = 1\n")
    (subs / "dave").mkdir()
    (subs / "dave" / "work.py").write_text("x = 1\n")
    real_open, real_scandir = os.open, os.scandir

    def failing_open(p, *args, **kwargs):
        if not isinstance(p, int) and os.fspath(p) == str(subs / "bob.py"):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real_open(p, *args, **kwargs)

    def failing_scandir(p="."):
        if not isinstance(p, int) and os.fspath(p) == str(subs / "dave"):  # rmtree scans by fd
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        return real_scandir(p)

    monkeypatch.setattr(os, "open", failing_open)
    monkeypatch.setattr(os, "scandir", failing_scandir)
    result = grade_many([subs], tmp_path / "out", OPTIONS)
    reports = reports_in(tmp_path / "out")
    assert reports["bob"].error == f"{subs / 'bob.py'}: cannot be read (Input/output error)"
    assert reports["dave"].error == f"{subs / 'dave'}: cannot be read (Permission denied)"
    assert [Path(t.path).name for t in recorder.tasks] == ["alice.py", "carol.py"]
    assert (result.graded, result.errors) == (2, 2)


def test_a_name_too_long_is_one_sentence(tmp_path: Path) -> None:
    path = tmp_path / ("x" * 300 + ".py")
    with pytest.raises(SubmissionUnreadable, match=r"cannot be read \(File name too long\)"):
        read_submission(path)
    assert discover([path]).skipped == {str(path): "cannot be read (File name too long)"}


# ----------------------------------------------------------------------------- size


def test_a_file_over_the_cap_is_refused_in_one_sentence(tmp_path: Path) -> None:
    path = tmp_path / "big.ipynb"
    with path.open("wb") as f:
        f.truncate(MAX_BYTES + 1)
    for read in (read_submission, peek):
        with pytest.raises(SubmissionUnreadable) as info:
            read(path)
        assert info.value.reason == "larger than 20 MiB, the most the grader reads"


def test_the_read_is_bounded_even_when_the_size_lies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that grows after fstat (or reports a wrong size) is still read at most cap + 1 bytes."""
    path = tmp_path / "growing.py"
    path.write_bytes(b"#" * 5000)
    monkeypatch.setattr(submission, "MAX_BYTES", 1000)
    real_fstat, real_lstat, real_read = os.fstat, os.lstat, os.read
    small = lambda info: os.stat_result((*info[:6], 10, *info[7:]))  # noqa: E731 - st_size 10
    monkeypatch.setattr(os, "fstat", lambda fd: small(real_fstat(fd)))
    monkeypatch.setattr(os, "lstat", lambda p: small(real_lstat(p)))
    total = 0

    def counting(fd, n):
        nonlocal total
        data = real_read(fd, n)
        total += len(data)
        return data

    monkeypatch.setattr(os, "read", counting)
    with pytest.raises(SubmissionUnreadable, match="larger than"):
        read_bytes(path)
    assert total <= 1001


MEMORY_SCRIPT = """
import json, resource, sys
from pathlib import Path
from grader.batch.run import grade_many
from grader.options import GradeOptions

small, big, out = map(Path, sys.argv[1:4])
options = GradeOptions(assignment="ch2-jit", seed=1, sandbox=False)
grade_many([small], out / "warm", options)  # the same code path once, on a small class
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
result = grade_many([big], out / "big", options)
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
print(json.dumps({"grown_kib": grown, "errors": result.errors, "graded": result.graded}))
"""


def test_a_sparse_huge_file_is_never_read_into_memory(tmp_path: Path) -> None:
    small, big = tmp_path / "small", tmp_path / "big"
    small.mkdir()
    big.mkdir()
    (small / "link.py").symlink_to(SOLUTION)  # an error report, like the huge file's
    with (big / "huge.py").open("wb") as f:
        f.truncate(3 * 2**29)  # 1.5 GiB, sparse: no disk used
    done = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(small), str(big), str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["grown_kib"] < 64 * 1024, outcome  # not 1.5 GiB
    assert outcome["errors"] == 1 and outcome["graded"] == 0  # refused before any task
    report = Report.model_validate_json((tmp_path / "out" / "big" / "huge.json").read_text())
    assert report.error == f"{big / 'huge.py'}: larger than 20 MiB, the most the grader reads"


# ----------------------------------------------------------------------------- student ids and file names


ODD_IDS = ["s" * 250, "Алиса", "аlice", "alice", "Bob", "bob", "a..b", "x y", "semi;colon", 'quote"s',
           "new\nline", "=HYPERLINK(1)", "-rf", "~tilde", "index", "gradebook", "CON", "%2e%2e", "tab\tbed",
           "ali\u202eecod", "日本語の名前", "BOB", "s" * 249 + "S"]


def test_student_file_stems_are_safe_and_distinct() -> None:
    stems = [student_file_stem(s) for s in ODD_IDS]
    assert len({s.lower() for s in stems}) == len(ODD_IDS)  # distinct, case-insensitively too
    for stem in stems:
        assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.~-]*", stem) and len(stem) <= 64, stem
        assert not stem.startswith(".") and ".." not in stem.split("~")[0][:1]
    assert student_file_stem("alice") == "alice" and student_file_stem("bob_2.x-y") == "bob_2.x-y"
    assert student_file_stem("Bob") != student_file_stem("bob") == "bob"
    assert student_file_stem("bob~0123456789abcdef") != "bob~0123456789abcdef"  # never looks hashed
    assert report_file_name("Алиса").endswith(".json")


def test_odd_ids_are_kept_verbatim_and_stored_under_safe_names(tmp_path: Path, recorder) -> None:
    subs = tmp_path / "subs"
    subs.mkdir()
    for student in ODD_IDS:
        if len(student) > 200:  # too long for a file name with its suffix: a student folder
            (subs / student).mkdir()
            (subs / student / "work.py").write_text("x = 1\n")
        else:
            (subs / f"{student}.py").write_text("x = 1\n")
    out = tmp_path / "out"
    result = grade_many([subs], out, OPTIONS, formats={"gradescope"})
    assert (result.graded, result.errors) == (len(ODD_IDS), 0)
    assert sorted(t.student for t in recorder.tasks) == sorted(ODD_IDS)
    for student in ODD_IDS:
        report = Report.model_validate_json((out / report_file_name(student)).read_text(encoding="utf-8"))
        assert report.student == student
        data = json.loads((out / "gradescope" / student_file_stem(student) / "results.json").read_text())
        assert data["score"] == report.score
    names = [p.name for p in out.glob("*.json")]
    assert len(names) == len({n.lower() for n in names}) == len(ODD_IDS)
    assert all(len(n.encode()) <= 255 for n in names)
    db = sqlite3.connect(out / "gradebook.sqlite")
    try:
        assert sorted(s for (s,) in db.execute("SELECT id FROM students")) == sorted(ODD_IDS)
    finally:
        db.close()

    # every link of the class page opens that student's report, also after `grade export --html`
    def links(page: str) -> list[str]:
        return [unquote(h) for h in re.findall(r'<a [^>]*href="([^"]+)"', page)]

    page = (out / "index.html").read_text(encoding="utf-8")
    files = [h for h in links(page) if not h.startswith(("#", "?"))]  # not the sort and section links
    assert sorted(files) == sorted([report_file_name(s) for s in ODD_IDS]
                                   + [f"feedback/{student_file_stem(s)}.html" for s in ODD_IDS])
    assert all((out / name).is_file() for name in files)
    (out / "index.html").unlink()
    done = subprocess.run([sys.executable, "-m", "grader", "export", str(out), "--html"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert (out / "index.html").read_text(encoding="utf-8") == page


def test_a_name_that_is_not_utf8_is_that_students_error(tmp_path: Path, recorder) -> None:
    subs = tmp_path / "subs"
    subs.mkdir()
    fd = os.open(os.fsencode(subs) + b"/caf\xe9.py", os.O_WRONLY | os.O_CREAT)
    os.close(fd)
    (subs / "ok.py").write_text("x = 1\n")
    found = discover([subs])
    assert [(p.student, p.reason) for p in found.problems] == [("caf\\xe9", NOT_UTF8)]
    grade_many([subs], tmp_path / "out", OPTIONS)
    reports = reports_in(tmp_path / "out")
    assert reports["caf\\xe9"].error.endswith(NOT_UTF8) and "\\xe9.py" in reports["caf\\xe9"].error
    assert [t.student for t in recorder.tasks] == ["ok"]


def test_hidden_entries_are_listed_not_graded(tmp_path: Path) -> None:
    (tmp_path / ".sneaky.py").write_text("x = 1\n")
    (tmp_path / "...").mkdir()
    (tmp_path / "..." / "work.py").write_text("x = 1\n")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    found = discover([tmp_path])
    assert found.submissions == [] and found.problems == []
    assert sorted(found.skipped) == [str(tmp_path / "..."), str(tmp_path / ".sneaky.py")]
