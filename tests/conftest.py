"""Shared fixtures: where the repository is, and submissions built from the reference solution.

Fixture names are specific on purpose (`repo_root`, `reference_source`, ...), so that test
modules can define their own fixtures without clashing with these.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from typing import Callable

import nbformat
import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SUBMISSION_FIXTURES = REPO_ROOT / "tests" / "fixtures" / "submissions"
REFERENCE_MODULE = REPO_ROOT / "solutions" / "ch2-jit.py"


def _sections(text: str) -> dict[str, str]:
    """The reference module's `# %% [name]` sections: setup, tax, newton, detective, training."""
    parts = re.split(r"^# %% \[(\w+)\]\n", text, flags=re.M)
    return {name: body.strip() + "\n" for name, body in zip(parts[1::2], parts[2::2])}


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def reference_source() -> str:
    """The text of solutions/ch2-jit.py (scores 100)."""
    return REFERENCE_MODULE.read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def reference_sections(reference_source: str) -> dict[str, str]:
    sections = _sections(reference_source)
    assert list(sections) == ["setup", "tax", "newton", "detective", "training"]
    return sections


SubmissionMaker = Callable[..., Path]


@pytest.fixture
def submission_from_reference(tmp_path: Path, reference_sections: dict[str, str]) -> SubmissionMaker:
    """Build a submission in tmp_path from reference sections and fixture files.

    `parts` names reference sections ("setup", "tax", ...) or fixture files under
    tests/fixtures/submissions/ (e.g. "endless_loop_cell.py"), in the order they should run.
    A .py result is a module with one `# %%` cell per part; a .ipynb result is a notebook with one
    code cell per reference section, and the cells (outputs included) of fixture notebooks.
    """

    def make(*parts: str, suffix: str = ".py", name: str = "submission") -> Path:
        target = tmp_path / f"{name}{suffix}"
        if suffix == ".py":
            chunks = []
            for part in parts:
                if part in reference_sections:
                    chunks.append(f"# %% [{part}]\n{reference_sections[part]}")
                else:
                    text = (SUBMISSION_FIXTURES / part).read_text(encoding="utf-8")
                    chunks.append(text if text.startswith("# %%") else f"# %% [{part}]\n{text}")
            target.write_text("\n\n".join(chunks), encoding="utf-8")
            return target
        nb = nbformat.v4.new_notebook()
        nb.metadata["grader"] = {"assignment": "ch2-jit"}
        for part in parts:
            if part in reference_sections:
                nb.cells.append(nbformat.v4.new_code_cell(reference_sections[part]))
            elif part.endswith(".ipynb"):
                nb.cells.extend(nbformat.read(SUBMISSION_FIXTURES / part, as_version=4).cells)
            else:
                nb.cells.append(nbformat.v4.new_code_cell((SUBMISSION_FIXTURES / part).read_text(encoding="utf-8")))
        for i, cell in enumerate(nb.cells):
            cell["id"] = f"cell-{i}"
        nbformat.write(nb, target)
        return target

    return make


class Recorder:
    """An executor that grades nothing: it records the tasks and returns a 'graded' report."""

    def __init__(self) -> None:
        self.tasks: list = []

    def map(self, tasks):
        from grader.batch.executors import error_report

        for task in tasks:
            self.tasks.append(task)
            yield task, error_report(task, "-").model_copy(update={"status": "graded", "error": None})


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    """Batches in this test grade nothing: `recorder.tasks` is what they would have graded."""
    rec = Recorder()
    monkeypatch.setattr("grader.batch.run.executor_for", lambda jobs, scheduler: rec)
    return rec


@pytest.fixture(scope="module")
def warm():
    """The warm worker (tests/warm_grading.py's) started for a module's tests: what they grade in
    this process, a serial validation among it, goes through its servers, where a validation that
    makes its own boots a kernel and a verifier server and closes them at its end. Closed with the
    session (pytest_sessionfinish)."""
    from grader.batch import warm_worker

    return warm_worker.current()


_BYTECODE = pytest.StashKey[bool]()  # sys.dont_write_bytecode before collection


def pytest_configure(config: pytest.Config) -> None:
    """The suite's store of compiled programs (grader/sandbox/executables.py) is its own, in a temporary
    directory the workers and every `grade` a test starts inherit (or the one `make test` gives its
    three runs): the assignments tests copy and change are built into it, never into the user's ~/.cache."""
    import os
    import tempfile

    from grader.sandbox import executables

    if not hasattr(config, "workerinput") and executables.ENV not in os.environ:
        os.environ[executables.ENV] = tempfile.mkdtemp(prefix="grader-test-executables-")
        config.add_cleanup(lambda: shutil.rmtree(os.environ.pop(executables.ENV), ignore_errors=True))
    # Collection imports every test module through pytest's assertion rewriting, which keeps what
    # it rewrote only where bytecode may be written: with PYTHONDONTWRITEBYTECODE set (as the
    # sandbox and some hosts set it), every pytest process rewrote all of them again (3 s each).
    # Written while collecting only: nothing a test grades or copies gets a __pycache__ of it.
    config.stash[_BYTECODE] = sys.dont_write_bytecode
    sys.dont_write_bytecode = False


FIRST = ("test_serve.py", "test_serve_dask.py")
"""Modules run first, whole (their module fixtures set up once): their tests start services and wait
on their deadlines, up to 13 s each. Collected near the end, they ended a `-n 2` run with one worker
alone on them for 19 s while the other had nothing left to run."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.path.name not in FIRST)  # stable: every other order is kept


def pytest_collection_finish(session: pytest.Session) -> None:
    sys.dont_write_bytecode = session.config.stash.get(_BYTECODE, sys.dont_write_bytecode)


_built_here = False


def pytest_runtest_setup(item: pytest.Item) -> None:
    """The reference solutions' compiled programs are built once, before the first test that
    starts kernels (`kernel` marker), not by every pytest run: a run of unit tests grades nothing.
    Each assignment is built by one process of the session while the others wait on its lock, so
    that a test that kills its grader never kills a build and no reference is graded twice; a
    process first builds those no other is building (two workers build two assignments at once,
    where one built all three while the other waited), then waits for the rest."""
    global _built_here
    if _built_here or item.get_closest_marker("kernel") is None:
        return
    import fcntl
    import os

    from grader import assignment, precompile
    from grader.sandbox import executables

    _built_here = True
    store = executables.store()
    if store is None:
        return
    folder = Path(os.environ.get(executables.ENV) or store)
    waiting = []
    for name in assignment.available():
        with open(folder / f".tests-building-{name}", "w") as lock:
            try:
                fcntl.lockf(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # another process builds it: build the next, wait for this one after
                waiting.append(name)
                continue
            precompile.ensure(assignment.load(name))
    for name in waiting:
        with open(folder / f".tests-building-{name}", "w") as lock:
            fcntl.lockf(lock, fcntl.LOCK_EX)
            precompile.ensure(assignment.load(name))  # built by the other: its marker is there


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The warm worker's servers (tests/warm_grading.py) end with the session. A session that never
    imported it has none, and does not pay for importing it (the kernel client, jupyter_client:
    0.1 to 0.35 s) to find out."""
    import sys

    warm_worker = sys.modules.get("grader.batch.warm_worker")
    if warm_worker is not None:
        warm_worker.close_all()
