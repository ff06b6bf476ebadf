"""Nothing a student wrote is dropped silently: code typed into a template's self-check cell.

The template's self-check cells (tagged `selfcheck`, written by scripts/make_notebooks.py) hold a
call to the student pack's self-check, which `grade` leaves out: it runs the same checks itself.
Whatever else a student writes there is graded like an answer cell's (Run All in Jupyter runs it
too), and the report says so in a note naming the cell.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from warm_grading import grade_warm

from grader import GradeOptions
from grader.submission import read_submission, selfcheck_source

ROOT = Path(__file__).resolve().parent.parent


def notebook(tmp_path: Path, source: Path, move: dict[str, str] | None = None, extra: dict[str, str] | None = None
             ) -> Path:
    """`source` with, per exercise in `move`, its answer cell's code moved into its self-check
    cell (`move[exercise]`: "before" or "after" the template's call), and `extra` code appended to
    the self-check cell of an exercise."""
    nb = json.loads(source.read_text(encoding="utf-8"))
    cells = nb["cells"]
    for i, cell in enumerate(cells):
        if "selfcheck" not in cell.get("metadata", {}).get("tags", []):
            continue
        call = "".join(cell["source"])
        exercise = call.split('check("')[1].split('"')[0]
        if move and exercise in move:
            answer = "".join(cells[i - 1]["source"])
            cells[i - 1]["source"] = ""
            cell["source"] = f"{answer}\n{call}\n" if move[exercise] == "before" else f"{call}\n{answer}"
        if extra and exercise in extra:
            cell["source"] = "".join(cell["source"]) + "\n" + extra[exercise]
    path = tmp_path / "ch2-jit.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def test_the_template_s_own_self_check_cells_run_nothing_and_say_nothing() -> None:
    for name in ("student_template/ch2-jit.ipynb", "solutions/ch2-jit.ipynb", "solutions/ch2-practice.ipynb"):
        cells = read_submission(ROOT / name).cells
        assert not any("grader.selfcheck" in c.source or c.notice for c in cells), name


def test_the_lines_left_out_are_the_ones_the_template_writes() -> None:
    nb = json.loads((ROOT / "student_template" / "ch2-jit.ipynb").read_text(encoding="utf-8"))
    written = ["".join(c["source"]) for c in nb["cells"] if "selfcheck" in c.get("metadata", {}).get("tags", [])]
    assert written == [selfcheck_source(e, "ch2-jit") for e in ("tax", "newton", "detective", "training")]


def test_code_in_a_self_check_cell_is_kept_without_the_call_and_noted(tmp_path: Path) -> None:
    path = notebook(tmp_path, ROOT / "student_template" / "ch2-jit.ipynb",
                    extra={"newton": "def newton_sqrt(a, tol):\n    return check('x')\nroot = 1\n"})
    (cell,) = [c for c in read_submission(path).cells if c.notice]
    lines = cell.source.splitlines()
    template = selfcheck_source("newton", "ch2-jit").count("\n") + 1  # the guarded import and the call
    assert lines[:template + 1] == [""] * template + ["def newton_sqrt(a, tol):"]  # empty lines: numbers hold
    assert "    return check('x')" in lines  # not the template's line: indented, the student's own
    assert cell.notice.startswith("is exercise newton's self-check cell: the code you wrote there was graded")
    assert "answer cell above it" in cell.notice


@pytest.mark.kernel
@pytest.mark.parametrize("where", ["before", "after"])
def test_an_answer_written_in_the_self_check_cell_is_graded_with_a_note(tmp_path: Path, where: str) -> None:
    path = notebook(tmp_path, ROOT / "solutions" / "ch2-jit.ipynb", move={"tax": where})
    report = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=3))
    tax = next(e for e in report.exercises if e.id == "tax")
    assert tax.score == tax.max_score and report.score == 100
    (note,) = report.cell_problems
    assert note.status == "skipped" and note.exercise is None  # shown as a note of its own
    assert note.where.startswith("cell ") and note.message.startswith(f"{note.where} is exercise tax's self-check cell")
    assert "answer cell above it" in note.message
    assert "Not answered yet" not in " ".join(c.message or "" for c in tax.checks)


def test_the_pack_s_grade_says_the_jax_differs_as_the_self_check_cells_do(tmp_path: Path, monkeypatch,
                                                                          capsys) -> None:
    """Before: only the notebook's self-check cells said "you have JAX X; the course grades with JAX Y"."""
    import argparse
    from importlib import metadata

    from grader import assignment as assignments
    from grader.report import Environment, Isolation, Report, SubmissionRef
    from grader.selfcheck import jax_note
    from grader.selfgrade import cli

    monkeypatch.setattr(assignments, "PACKED_DIR", tmp_path)  # the pack's folder, which holds course.json
    (tmp_path / "course.json").write_text(json.dumps({"jax": "0.4.0"}), encoding="utf-8")
    report = Report(assignment="ch2-jit", submission=SubmissionRef(path="s.ipynb", sha256=None, kind="notebook"),
                    student=None, status="graded", score=0, max_score=0, exercises=[], seed=1, duration_s=1.0,
                    environment=Environment(grader="0", python="3", jax=None),
                    isolation=Isolation(sandboxed=False, layers=[]))
    cli._emit(report, argparse.Namespace(json=str(tmp_path / "r.json"), verbose=False), tmp_path / "s.ipynb")
    note = f"note: you have JAX {metadata.version('jax')}; the course grades with JAX 0.4.0."
    assert capsys.readouterr().out.count(note) == 1
    (tmp_path / "course.json").write_text(json.dumps({"jax": metadata.version("jax")}), encoding="utf-8")
    assert jax_note() is None
