"""The course material itself: solutions score full marks, the template zero, notebooks are current."""

from __future__ import annotations

import importlib.util
import runpy
from pathlib import Path
from types import ModuleType

import pytest

from warm_grading import grade_warm

from grader import GradeOptions, Report
from grader.selfcheck import check
from grader.submission import selfcheck_source

EXERCISES = ("tax", "newton", "detective", "training")


def all_checks(report: Report):
    return [c for e in report.exercises for c in e.checks]


# ----------------------------------------------------------------------------- grading (real kernels)
# Through tests/warm_grading.py's worker (grade_one with kernels and verifiers forked from its
# servers): the fresh path of `grade FILE` is the sandbox, CLI and kernel tests'.


@pytest.mark.kernel
@pytest.mark.parametrize(("relative", "seed"), [("solutions/ch2-jit.ipynb", 11), ("solutions/ch2-jit.py", 12)])
def test_reference_solutions_score_full_marks(repo_root: Path, relative: str, seed: int) -> None:
    report = grade_warm(repo_root / relative, GradeOptions(seed=seed))  # the assignment found by grade_one
    assert report.assignment == "ch2-jit"  # found from the notebook metadata / the file name
    assert report.status == "graded"
    not_passed = [(c.id, c.status, c.message) for c in all_checks(report) if c.status != "passed"]
    assert not_passed == []
    assert (report.score, report.max_score) == (100, 100)
    assert {e.id: e.score for e in report.exercises} == {"tax": 25, "newton": 25, "detective": 20, "training": 30}
    assert report.cell_problems == []
    assert report.seed == seed


@pytest.mark.kernel
def test_template_scores_zero_with_helpful_messages(repo_root: Path) -> None:
    report = grade_warm(repo_root / "student_template" / "ch2-jit.ipynb", GradeOptions(seed=13))
    assert report.status == "graded"
    assert (report.score, report.max_score) == (0, 100)
    for c in all_checks(report):
        assert c.status == "failed", (c.id, c.status, c.message)
        assert c.message.startswith("Not answered yet"), (c.id, c.message)
    assert report.cell_problems == []  # the template runs cleanly: nothing is the student's fault yet


# ----------------------------------------------------------------------------- self-check (in process)


@pytest.fixture(scope="module")
def reference_namespace(repo_root: Path) -> dict:
    return runpy.run_path(str(repo_root / "solutions" / "ch2-jit.py"))


def test_selfcheck_passes_on_the_reference_namespace(reference_namespace: dict, capsys) -> None:
    """Every visible check passes; the hidden ones are left to the hand-in, and say so."""
    check("tax", "ch2-jit", namespace=reference_namespace, seed=1)
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("⏳ ") and first.endswith("18 of the 18 points checked here"), out
    assert ("2 checked when you hand in (7 pts): tax_switch on hidden incomes (edges, large values, random); "
            "tax_vectorized on hidden incomes") in out
    assert "not answered" not in out.lower() and "✗" not in out


@pytest.mark.parametrize(("exercise", "visible", "points"), [("newton", 17, 17), ("detective", 0, 0),
                                                             ("training", 17, 17)])
def test_selfcheck_of_the_other_exercises(reference_namespace: dict, capsys, exercise: str, visible: int,
                                          points: int) -> None:
    check(exercise, "ch2-jit", namespace=reference_namespace, seed=2)
    out = capsys.readouterr().out
    said = f"{visible} of the {points} points checked here" if points else "checked when you hand in"
    assert out.splitlines()[0].startswith("⏳ ") and out.splitlines()[0].endswith(said), out
    assert "checked when you hand in" in out and "✗" not in out


def test_selfcheck_on_an_empty_namespace_says_not_answered_yet(capsys) -> None:
    check("tax", "ch2-jit", namespace={}, seed=1)
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("❌ ") and "0 of the 18 points checked here" in out
    assert "not answered yet: define tax_switch, tax_vectorized" in out


def test_selfcheck_reports_a_wrong_answer(reference_namespace: dict, capsys) -> None:
    wrong = dict(reference_namespace, tax_switch=reference_namespace["tax_vectorized"], newton_sqrt=lambda a, tol: a)
    check("newton", "ch2-jit", namespace=wrong, seed=1)
    out = capsys.readouterr().out
    assert out.startswith("❌ ") and "newton_sqrt is wrapped in jax.jit" in out
    assert "newton_sqrt on the notebook's values" in out


def test_the_detective_s_selfcheck_reveals_nothing_per_item(reference_namespace: dict, capsys) -> None:
    """Predictions are checked when handed in: right, wrong or half right, the self-check says
    the same thing, so flipping answers until green teaches nothing."""
    outputs = set()
    for predictions in ([True, False] + [True] * 6, [False] * 8, [True] * 8, [False, True] * 4):
        check("detective", "ch2-jit", namespace=dict(reference_namespace, predictions=predictions), seed=1)
        outputs.add(capsys.readouterr().out)
    (out,) = outputs
    assert "8 checked when you hand in (20 pts)" in out and "predicted" not in out


def test_selfcheck_unknown_exercise(capsys) -> None:
    check("taxes", "ch2-jit", namespace={})  # one sentence in the notebook, never a traceback
    assert capsys.readouterr().out.startswith("⚠️ ch2-jit has no exercise 'taxes' (it has tax, ")


# ----------------------------------------------------------------------------- generated notebooks


def load_make_notebooks(repo_root: Path) -> ModuleType:
    path = repo_root / "scripts" / "make_notebooks.py"
    spec = importlib.util.spec_from_file_location("make_notebooks_under_test", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_notebooks_are_up_to_date(repo_root: Path) -> None:
    targets = load_make_notebooks(repo_root).targets()
    with_texts = sorted(p.parent.name for p in (repo_root / "assignments").glob("*/notebook.toml"))
    assert "ch2-jit" in with_texts
    assert {p.relative_to(repo_root).as_posix() for p in targets} == {
        f"{folder}/{a}.ipynb" for a in with_texts for folder in ("student_template", "solutions")
    }
    for path, text in targets.items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(repo_root)} is stale: run `python scripts/make_notebooks.py`")


def test_template_has_a_selfcheck_cell_per_exercise(repo_root: Path) -> None:
    import nbformat

    nb = nbformat.read(repo_root / "student_template" / "ch2-jit.ipynb", as_version=4)
    selfchecks = [c.source for c in nb.cells if "selfcheck" in c.metadata.get("tags", [])]
    assert selfchecks == [selfcheck_source(e, "ch2-jit") for e in EXERCISES]
    guarded = "try:\n    from jax_course_ch2_jit import check\nexcept ModuleNotFoundError:"  # its own pack
    assert all(s.startswith(guarded) for s in selfchecks)
    assert nb.metadata["grader"]["assignment"] == "ch2-jit"


def test_selfcheck_stops_an_endless_function_with_a_sentence(reference_namespace: dict, capsys) -> None:
    def newton_sqrt(a, tol):  # never returns: a Python loop the probe's tracing runs forever
        while True:
            pass

    check("newton", "ch2-jit", namespace=dict(reference_namespace, newton_sqrt=newton_sqrt), seed=1, timeout=1)
    out = capsys.readouterr().out
    assert out.startswith("⏱ Exercise 2") and "stopped after 1 s" in out


def test_selfcheck_lets_an_interrupt_through(reference_namespace: dict) -> None:
    """Ctrl-C in the notebook (a KeyboardInterrupt in the student's function) stops the
    self-check at once: nothing in the probe or the judging swallows it."""
    def newton_sqrt(a, tol):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        check("newton", "ch2-jit", namespace=dict(reference_namespace, newton_sqrt=newton_sqrt), seed=1)
