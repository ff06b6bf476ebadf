"""Every check of ch2-jit can fail: one wrong submission ("mutant") per check, each failing exactly
the checks it declares and passing all the others.

A mutant is a file in tests/fixtures/mutants/ch2-jit/ that starts with

    # fails: <exercise>.<check>[, <exercise>.<check> ...]
    # <one line saying what the wrong submission does>

followed by code that is appended to the reference solution as its last `# %%` cell, so the
names it defines replace the reference's. All submissions (the mutants and the reference itself)
are graded once per session, two kernels at a time, with one fixed seed.

The gradings run in worker processes, not threads: in a worker thread, jupyter_core's run_sync
(used by nbclient) leaves an unclosed asyncio event loop behind, which pytest reports as an
unraisable ResourceWarning (an error under this project's filterwarnings) when the thread ends.
"""

from __future__ import annotations

import multiprocessing
import re
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from grader import GradeOptions, Report, assignment, grade_one

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENT = "ch2-jit"
REFERENCE = ROOT / "solutions" / f"{ASSIGNMENT}.py"
MUTANTS_DIR = Path(__file__).resolve().parent / "fixtures" / "mutants" / ASSIGNMENT
SEED = 1  # hidden inputs are drawn from it; the mutants are built to fail whatever the seed
WORKERS = 2  # each grade_one runs its own kernel process
REFERENCE_KEY = "<reference solution>"

_FAILS = re.compile(r"#\s*fails:\s*(?P<ids>.+?)\s*$")


@dataclass(frozen=True)
class Mutant:
    name: str
    path: Path
    fails: frozenset[str]
    summary: str

    @property
    def code(self) -> str:
        return self.path.read_text(encoding="utf-8")


def read_mutant(path: Path) -> Mutant:
    """Parse the header: line 1 `# fails: ids`, line 2 `# what it does`."""
    lines = path.read_text(encoding="utf-8").splitlines()
    match = _FAILS.fullmatch(lines[0]) if lines else None
    if match is None:
        raise ValueError(f"{path.name}: line 1 should be '# fails: <exercise>.<check>, ...'")
    fails = frozenset(part.strip() for part in match["ids"].split(","))
    if len(lines) < 2 or not lines[1].startswith("# ") or not lines[1][2:].strip():
        raise ValueError(f"{path.name}: line 2 should be '# <what this wrong submission does>'")
    return Mutant(name=path.stem, path=path, fails=fails, summary=lines[1][2:].strip())


def all_mutants() -> list[Mutant]:
    return [read_mutant(p) for p in sorted(MUTANTS_DIR.glob("*.py"))]


MUTANTS = all_mutants()


def spec_check_ids() -> set[str]:
    spec = assignment.load(ASSIGNMENT).spec
    return {f"{ex.id}.{check.id}" for ex in spec.exercises for check in ex.checks}


def build_submission(mutant_code: str, directory: Path) -> Path:
    """The reference solution with the mutant appended as its last cell (its names win)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{ASSIGNMENT}.py"
    reference = REFERENCE.read_text(encoding="utf-8")
    path.write_text(reference + "\n# %% [mutant]\n" + mutant_code, encoding="utf-8")
    return path


def not_passed(report: Report) -> dict[str, str]:
    """Check id -> "status: message" for every check that did not pass."""
    return {check.id: f"{check.status}: {check.message}"
            for exercise in report.exercises for check in exercise.checks if check.status != "passed"}


@pytest.fixture(scope="session")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Report | BaseException]:
    """Every mutant and the reference, graded once; a grading that raised is kept as its exception."""
    root = tmp_path_factory.mktemp("mutants")
    paths = {m.name: build_submission(m.code, root / m.name) for m in MUTANTS}
    paths[REFERENCE_KEY] = REFERENCE

    options = GradeOptions(seed=SEED, assignment=ASSIGNMENT)
    spawn = multiprocessing.get_context("spawn")  # no fork of a process that may run JAX threads
    with ProcessPoolExecutor(max_workers=WORKERS, mp_context=spawn) as pool:
        futures = {key: pool.submit(grade_one, path, options) for key, path in paths.items()}
        return {key: _outcome(future) for key, future in futures.items()}


def _outcome(future: Future) -> Report | BaseException:
    try:
        return future.result()
    except Exception as exc:  # surfaced by the test of this submission only
        return exc


def report_of(reports: dict[str, Report | BaseException], key: str) -> Report:
    result = reports[key]
    if isinstance(result, BaseException):
        raise RuntimeError(f"grading {key} raised {result!r}") from result
    return result


# ----------------------------------------------------------------------------- no kernel


def test_there_are_mutants() -> None:
    assert len(MUTANTS) >= len(spec_check_ids())


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_mutant_declares_real_check_ids(mutant: Mutant) -> None:
    unknown = mutant.fails - spec_check_ids()
    assert mutant.fails and not unknown, f"{mutant.name} declares ids not in the spec: {sorted(unknown)}"


def test_mutants_cover_every_check() -> None:
    declared = set().union(*(m.fails for m in MUTANTS))
    missing = spec_check_ids() - declared
    assert not missing, f"no mutant declares these checks: {sorted(missing)}"


def test_build_submission_appends_a_last_cell(tmp_path: Path) -> None:
    path = build_submission("answer = 42\n", tmp_path)
    text = path.read_text(encoding="utf-8")
    assert text.startswith(REFERENCE.read_text(encoding="utf-8"))
    assert text.endswith("\n# %% [mutant]\nanswer = 42\n")
    assert path.name == f"{ASSIGNMENT}.py"


# ----------------------------------------------------------------------------- graded


@pytest.mark.kernel
def test_reference_passes_every_check(reports: dict[str, Report | BaseException]) -> None:
    report = report_of(reports, REFERENCE_KEY)
    assert not_passed(report) == {}
    assert {c.id for e in report.exercises for c in e.checks} == spec_check_ids()
    assert report.score == report.max_score == 100
    assert report.cell_problems == []


@pytest.mark.kernel
@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_mutant_fails_exactly_what_it_declares(mutant: Mutant, reports: dict[str, Report | BaseException]) -> None:
    report = report_of(reports, mutant.name)
    assert report.seed == SEED
    assert report.cell_problems == [], f"the mutant's cells did not all run: {report.cell_problems}"
    failing = not_passed(report)
    unexpected = {k: v for k, v in failing.items() if k not in mutant.fails}
    assert set(failing) == mutant.fails, (
        f"{mutant.name} ({mutant.summary})\n"
        f"  declared:   {sorted(mutant.fails)}\n"
        f"  not passed: {sorted(failing)}\n"
        f"  unexpected: {unexpected}"
    )
    assert report.score < report.max_score


@pytest.mark.kernel
def test_every_check_is_failed_by_a_mutant_that_declares_it(reports: dict[str, Report | BaseException]) -> None:
    """Coverage by what really happened, not only by the headers."""
    shown = set()
    for m in MUTANTS:
        result = reports[m.name]
        if isinstance(result, Report):
            shown |= set(not_passed(result)) & m.fails
    missing = spec_check_ids() - shown
    assert not missing, f"no mutant was seen failing these checks: {sorted(missing)}"
