"""Why an exercise is not answered: the cell that would have defined its names raised."""

from __future__ import annotations

import pytest
from warm_grading import grade_warm

from grader import GradeOptions
from grader.judging.attribution import attribute, defined_names
from grader.kernel.messages import cell_line
from grader.render import summary
from grader.report import CellProblem, CheckResult, ExerciseResult, NotAnswered
from grader.submission import SourceCell


def test_defined_names_of_a_cell() -> None:
    source = "import numpy as np\nfrom jax import lax\nx, (y, z) = 1, (2, 3)\ndef f():\n    inner = 1\nclass C: ...\n"
    assert defined_names(source) == {"np", "lax", "x", "y", "z", "f", "C"}
    assert defined_names("def f(:\nstep = 1\ndef train(\n") == {"step", "f", "train"}  # does not parse


def test_the_line_of_the_cell_comes_from_a_bounded_look_at_the_traceback() -> None:
    tb = ["\x1b[0;31m----\x1b[0m", "Cell \x1b[0;32mIn[3], line 5\x1b[0m\n----> 5 import matplotlib", "Error"]
    assert cell_line(tb) == 5
    assert cell_line("not a list") is None and cell_line([1, {}]) is None
    assert cell_line(["Cell In[1], line 99999999999"]) is None  # not a line number anyone has


def _not_defined(name: str) -> CheckResult:
    return CheckResult(id=f"training.{name}", title=name, status="failed", score=0, max_score=1, hidden=False,
                       message=f"Not answered yet: `{name}` is not defined.", reason="not_answered",
                       not_answered=NotAnswered(name=name))


def test_a_raising_cell_is_told_under_the_exercise_it_would_have_defined() -> None:
    cells = [SourceCell(index=0, source="import jax"), SourceCell(index=2, source="import matplotlib\ndef step(): ...")]
    problem = CellProblem(cell=2, where="cell 2", status="error", ename="ModuleNotFoundError", line=1,
                          message="cell 2, line 1, raised ModuleNotFoundError: No module named 'matplotlib'")
    exercises = [ExerciseResult(id="training", title="T", score=0, max_score=2,
                                checks=[_not_defined("step"), _not_defined("train_fori")])]
    out, problems = attribute(exercises, cells, [problem])
    step, fori = out[0].checks
    assert step.message.startswith("Not answered yet: `step` is not defined, because cell 2, line 1, raised")
    assert "the grading kernel has jax" in step.message
    assert fori.message == "Not answered yet: `train_fori` is not defined."  # another cell's name
    assert problems[0].exercise == "training"


@pytest.mark.kernel
def test_an_import_the_kernel_lacks_is_one_sentence_under_its_exercise(submission_from_reference) -> None:
    path = submission_from_reference("setup", "tax", "newton", "detective", "imports_matplotlib_in_training.py")
    report = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=3))
    (problem,) = report.cell_problems
    assert problem.exercise == "training" and problem.ename == "ModuleNotFoundError"
    text = summary(report)
    assert "not answered yet: define step, train_fori, train_python_loop" in text
    line = next(x for x in text.splitlines() if "because" in x)
    assert "raised ModuleNotFoundError: No module named 'matplotlib'" in line and "jax 0." in line
    lines_of_module = path.read_text().splitlines()
    number = int(line.split("because line ")[1].split()[0])
    assert lines_of_module[number - 1] == "import matplotlib.pyplot as plt"  # the line, in the student's file
    assert "note:" not in text  # told once, under its exercise
