"""One owner per decision (issue 29): the names of OUT's files (grader/outputs/names.py), replacing
a file (grader/atomic.py), where things live on the machine (grader/runtime_paths.py) and which
assignment is graded (grader/pipeline.py) are each decided in one module, which the others call."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader import atomic, runtime_paths
from grader.atomic import atomic_file, temporary_path, write_atomic
from grader.outputs import names

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "grader"

OUT_FILES = (names.GRADEBOOK, names.CLASS_PAGE, names.SUMMARY_CSV, names.GRADESCOPE_RESULTS, names.CANVAS_CSV,
             names.MOODLE_CSV, names.LATE_POLICY, names.STAGING, names.MANIFEST, names.LOCK)
OUT_FOLDERS = (names.FEEDBACK, names.GRADESCOPE)

# Renames that are not writes, each with its reason.
MOVES = {
    "grader/outputs/staging.py": "the commit moves files already written and synced into place",
}


def _modules() -> dict[str, ast.Module]:
    return {path.relative_to(ROOT).as_posix(): ast.parse(path.read_text(encoding="utf-8"))
            for path in sorted(PACKAGE.rglob("*.py"))}


MODULES = _modules()


def _strings(tree: ast.Module) -> list[str]:
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def _spells(value: str, name: str) -> bool:
    return value == name or value.startswith(name + "/") or value.endswith("/" + name)


# ----------------------------------------------------------------------------- OUT's names


@pytest.mark.parametrize("name", OUT_FILES)
def test_each_file_of_out_is_named_in_one_module(name: str) -> None:
    spelled = {module for module, tree in MODULES.items() if any(_spells(s, name) for s in _strings(tree))}
    assert spelled == {"grader/outputs/names.py"}


@pytest.mark.parametrize("folder", OUT_FOLDERS)
def test_no_module_spells_a_path_into_outs_folders(folder: str) -> None:
    spelled = {module for module, tree in MODULES.items()
               if any(s.startswith(folder + "/") for s in _strings(tree))}
    assert spelled == set()
    assert folder in _strings(MODULES["grader/outputs/names.py"])


def test_the_name_check_would_see_a_second_spelling() -> None:
    tree = ast.parse('target = out_dir / "summary.csv"\nlink = f"feedback/{stem}.html"')
    assert any(_spells(s, names.SUMMARY_CSV) for s in _strings(tree))
    assert any(s.startswith(names.FEEDBACK + "/") for s in _strings(tree))


def test_the_output_folder_joins_the_names(tmp_path: Path) -> None:
    folder = names.OutputFolder(tmp_path)
    assert folder.summary_csv == tmp_path / "summary.csv"
    assert folder.gradebook == tmp_path / "gradebook.sqlite"
    assert folder.report("Алиса") == tmp_path / names.report_file_name("Алиса")
    assert folder.feedback("bob") == tmp_path / "feedback" / "bob.html"
    assert names.gradescope_results_name("bob") == "gradescope/bob/results.json"


# ----------------------------------------------------------------------------- replacing a file


def _renames(tree: ast.Module) -> list[int]:
    """Lines that replace or rename a file: os.replace/os.rename/shutil.move, and a one-argument
    `.replace(x)` or `.rename(x)` (Path's; str.replace takes two)."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        attr, owner = node.func.attr, node.func.value
        by_module = isinstance(owner, ast.Name) and (owner.id, attr) in {("os", "replace"), ("os", "rename"),
                                                                         ("shutil", "move")}
        by_path = attr in ("replace", "rename") and len(node.args) == 1 and not node.keywords
        if by_module or by_path:
            found.append(node.lineno)
    return found


def test_files_are_replaced_only_by_the_atomic_module() -> None:
    renaming = {module for module, tree in MODULES.items() if _renames(tree)}
    assert renaming == {"grader/atomic.py", *MOVES}


def test_the_rename_check_would_see_a_copy() -> None:
    copy = ast.parse('tmp.write_text(text)\ntmp.replace(path)\nos.replace(a, b)\ns = s.replace("a", "b")')
    assert _renames(copy) == [2, 3]


def test_write_atomic_replaces_the_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "summary.csv"
    target.write_text("old")
    assert write_atomic(target, "new ✓") == target
    assert target.read_text(encoding="utf-8") == "new ✓"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.csv"]


def test_a_crash_between_write_and_rename_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "index.html"
    target.write_bytes(b"old page")
    code = textwrap.dedent(f"""
        import os
        from pathlib import Path
        from grader import atomic

        atomic.os.replace = lambda *args: os._exit(9)  # the process dies just before the rename
        atomic.write_atomic(Path({str(target)!r}), b"new page")
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 9, done.stderr
    assert target.read_bytes() == b"old page"
    left = [p for p in tmp_path.iterdir() if p != target]
    assert [p.name.endswith(atomic.TEMPORARY_SUFFIX) for p in left] == [True]  # a staging commit skips it
    assert left[0].read_bytes() == b"new page"


def test_an_error_while_writing_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "canvas.csv"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_file(target, text=True) as f:
        f.write("half")
        raise RuntimeError("the writer failed")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["canvas.csv"]


def test_the_bytes_reach_the_disk_before_the_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(atomic.os, "fsync", lambda fd: calls.append("fsync") or real_fsync(fd))
    monkeypatch.setattr(atomic.os, "replace", lambda a, b: calls.append("replace") or real_replace(a, b))
    write_atomic(tmp_path / "results.json", b"{}")
    assert calls == ["fsync", "replace"]


def test_a_mode_is_set_exactly(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        entry = write_atomic(tmp_path / "entry-cache", b"x", mode=0o644)
    finally:
        os.umask(old)
    assert entry.stat().st_mode & 0o777 == 0o644


def test_the_temporary_file_is_never_a_followed_link(tmp_path: Path) -> None:
    target, elsewhere = tmp_path / "filter.bpf", tmp_path / "elsewhere"
    temporary_path(target).symlink_to(elsewhere)
    with pytest.raises(OSError):
        write_atomic(target, b"code")
    assert not elsewhere.exists() and not target.exists()


# ----------------------------------------------------------------------------- runtime paths


def test_the_cache_and_scratch_folders_are_decided_in_one_module() -> None:
    deciding = {module for module, tree in MODULES.items()
                if {"XDG_CACHE_HOME", "/tmp"} & set(_strings(tree))
                or any(isinstance(n, ast.Attribute) and n.attr in ("mkdtemp", "gettempdir")
                       for n in ast.walk(tree))}
    sandbox_side = {"grader/sandbox/layers.py", "grader/sandbox/forking.py"}  # /tmp inside the sandbox
    seccomp = {"grader/sandbox/seccomp.py"}  # its root-only folder: /run, else the temporary folder
    assert deciding - sandbox_side - seccomp == {"grader/runtime_paths.py"}


def test_the_cache_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert runtime_paths.cache_dir() == tmp_path / "jax-course-grader"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert runtime_paths.cache_dir() == Path.home() / ".cache" / "jax-course-grader"


def test_scratch_is_tagged_for_the_sweep_and_short_enough_for_sockets(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 90)
    deep.mkdir()
    monkeypatch.setattr(runtime_paths.tempfile, "tempdir", str(deep))
    roomy = runtime_paths.scratch_directory("verify")
    short = runtime_paths.scratch_directory(socket_room=40)
    try:
        assert roomy.parent == deep and roomy.name.startswith(f"grade-{os.getpid()}-verify-")
        assert short.parent == Path("/tmp") and short.name.startswith(runtime_paths.scratch_tag())
    finally:
        roomy.rmdir()
        short.rmdir()


# ----------------------------------------------------------------------------- which assignment


def test_the_assignment_is_chosen_in_one_module() -> None:
    deciders = {"choose_assignment", "decide_assignment", "wrong_claim", "only_assignment"}
    defined = {(module, node.name) for module, tree in MODULES.items() for node in ast.walk(tree)
               if isinstance(node, ast.FunctionDef) and node.name in deciders}
    assert defined == {("grader/assignment/choice.py", name) for name in deciders}
    refusing = {module for module, tree in MODULES.items() for node in ast.walk(tree)
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "WrongAssignment"}
    # submission.py refuses a claim that is not a string at all, while reading the notebook
    assert refusing == {"grader/assignment/choice.py", "grader/submission.py"}
