"""Why an exercise is not answered: the cell that would have defined its names raised."""

from __future__ import annotations

import json

import pytest
from warm_grading import grade_warm

from grader import GradeOptions
from grader.judging.attribution import attribute, defined_names
from grader.kernel.messages import cell_line
from grader.views.terminal import summary
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
    # training alone: the others are the reference's, and none of their checks uses a name of its cell
    report = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=3, exercises=("training",)))
    (problem,) = report.cell_problems
    assert problem.exercise == "training" and problem.ename == "ModuleNotFoundError"
    text = summary(report)
    assert "- not answered yet: define train_fori, train_python_loop\n" in text  # no cell of them
    line = next(x for x in text.splitlines() if "ModuleNotFoundError" in x)
    assert line.endswith(", so `step` is not defined: fix that cell first")  # the cell of step failed
    assert "raised ModuleNotFoundError: No module named 'matplotlib'" in line and "jax 0." in line
    lines_of_module = path.read_text().splitlines()
    number = int(line.split("✗ line ")[1].split()[0])
    assert lines_of_module[number - 1] == "import matplotlib.pyplot as plt"  # the line, in the student's file
    assert "note:" not in text  # told once, under its exercise


# ----------------------------------------------------------------------------- the cause first


def test_names_bound_in_blocks_and_by_a_cell_that_does_not_parse() -> None:
    assert defined_names("try:\n    import jax.numpy as jnp\nexcept ImportError:\n    jnp = None\n"
                         "if True:\n    from jax import lax, numpy as np2\nobj.attr = 1\n") == {"jnp", "lax", "np2"}
    assert defined_names("import jax\nimport jax.numpy as jnp\nfrom jax import lax\nx = (1,\n") == {
        "jax", "jnp", "lax", "x"}  # a syntax error runs none of the cell


MISSING_PACKAGE = "from functools import partial\nimport jax\nimport jaxx\nimport jax.numpy as jnp\n" \
                  "import numpy as np\nfrom jax import lax\n"


@pytest.mark.kernel
def test_a_failed_import_is_the_cause_each_check_leads_with(reference_sections, tmp_path) -> None:
    """Cell 1 fails at `import jaxx`, so `jnp`, `np` and `lax` are never bound: newton_sqrt's checks
    raise NameError for `jnp`, and the tax cell itself fails on `np`. Every check leads with cell 1's
    error, and no message repeats the NameError."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["grader"] = {"assignment": "ch2-jit"}
    nb.cells = [nbformat.v4.new_code_cell(source) for source in
                (MISSING_PACKAGE, reference_sections["tax"], reference_sections["newton"])]
    path = tmp_path / "submit.ipynb"
    nbformat.write(nb, path)
    report = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=3, exercises=("tax", "newton")))
    first = "cell 1, line 3 raised ModuleNotFoundError: No module named 'jaxx'"
    checks = {c.id: c for e in report.exercises for c in e.checks}
    for check in checks.values():
        assert check.reason == "not_answered" and check.status == "failed", (check.id, check.message)
        assert "is not defined" in check.message and "name '" not in check.message, check.message
    newton = [c for c in checks.values() if c.id.startswith("newton.")]
    for check in newton:  # one root cause, one message, the same in every check
        assert check.message.startswith(first) and check.message.endswith(
            ", so `jnp` is not defined: fix that cell first"), check.message
        assert check.not_answered.used and check.not_answered.name == "jnp"
    assert checks["tax.switch_visible"].message.startswith(
        f"Not answered yet: `tax_switch` is not defined, because {first}")
    assert checks["tax.switch_visible"].message.endswith(", so `np` is not defined in cell 2")
    assert {p.cell: p.exercise for p in report.cell_problems} == {0: "tax", 1: "tax"}
    text = summary(report)
    assert f"✗ {first}" in text and "so `jnp` is not defined: fix that cell first" in text
    assert "note:" not in text and "NameError" not in text


def test_a_name_error_for_a_name_no_failed_cell_binds_stays_the_student_s_own() -> None:
    cells = [SourceCell(index=0, source="import jaxx\nimport jax.numpy as jnp\nx37 = 1\n", number=1)]
    problem = CellProblem(cell=0, where="cell 1", status="error", ename="ModuleNotFoundError", line=1,
                          message="cell 1, line 1 raised ModuleNotFoundError: No module named 'jaxx'")
    typo = CheckResult(id="e.a", title="a", status="error", score=0, max_score=1, hidden=False,
                       message="`f` could not be traced by jax.jit: NameError: name 'jnpp' is not defined",
                       undefined="jnpp")
    caused = typo.model_copy(update={"id": "e.b", "undefined": "jnp"})
    pointer = CheckResult(id="e.c", title="c", status="error", score=0, max_score=1, hidden=False,
                          message="same tracing error as “b”", reason="same_cause", same_as="e.b")
    hidden = [typo.model_copy(update={"id": f"e.{k}", "reveal": "pass_fail", "hidden": True, "undefined": name})
              for k, name in (("d", "jnp"), ("e", "x37"))]  # x37: a name code run on a hidden value built
    out, problems = attribute([ExerciseResult(id="e", title="E", score=0, max_score=5,
                                              checks=[typo, caused, pointer, *hidden])], cells, [problem])
    kept, told, pointed, hidden_told, hidden_kept = out[0].checks
    assert hidden_told.message == told.message and hidden_kept == hidden[1]  # a name no visible check raised
    assert kept == typo  # a typo of the student's: its own tracing error
    assert told.message == ("cell 1, line 1 raised ModuleNotFoundError: No module named 'jaxx' (the grading kernel "
                            f"has {told.message.split('(the grading kernel has ')[1].split(')')[0]}), so `jnp` is "
                            "not defined: fix that cell first")
    assert pointed.not_answered == told.not_answered and pointed.same_as is None and pointed.message == told.message
    assert problems[0].exercise == "e"


@pytest.mark.kernel
def test_a_module_has_its_file_and_a_file_beside_it_is_not_handed_in(reference_source, tmp_path) -> None:
    """`submit.py` run statement by statement has the `__file__` Python gives it: its own name, in a
    folder that exists; a file it reads beside itself is missing, as the student would see it, and the
    message names it without the grader's temporary folder."""
    reads = ("from pathlib import Path\n"
             "RATES = (Path(__file__).parent / 'rates.txt').read_text()\n")
    where = "import os\nraise RuntimeError(os.path.basename(__file__), os.path.isdir(os.path.dirname(__file__)))\n"
    path = tmp_path / "my_tax.py"
    path.write_text(reference_source.replace("# %% [tax]\n", f"# %% [tax]\n{reads}", 1)
                    + f"\n# %% [where]\n{where}", encoding="utf-8")
    report = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=3, exercises=("tax",)))
    reading, naming = report.cell_problems
    assert reading.ename == "FileNotFoundError", reading.message
    assert reading.message.endswith("No such file or directory: 'rates.txt'; the grader runs the submitted file "
                                    "alone (files beside it are not handed in)"), reading.message
    assert naming.message.endswith("raised RuntimeError: ('my_tax.py', True)"), naming.message
    told = summary(report).split("\n", 1)[1]  # what it says below the file's own path
    assert "✗ line 15 raised FileNotFoundError" in told and "grade-" not in told and "/tmp" not in told


@pytest.mark.kernel
def test_the_pack_s_grade_gives_a_module_its_own_file(reference_sections, tmp_path) -> None:
    """The pack's `grade` runs a module in its own folder, where the files beside it are: its
    `__file__` is the file's own path, so what it reads beside itself is read, as `python` would."""
    import subprocess
    import sys

    (tmp_path / "rates.txt").write_text("0 0.1 0.2 0.3\n", encoding="utf-8")
    path = tmp_path / "my_tax.py"
    path.write_text(f"# %% [setup]\n{reference_sections['setup']}\n# %% [tax]\nfrom pathlib import Path\n"
                    "RATES = (Path(__file__).parent / 'rates.txt').read_text()\n"
                    f"{reference_sections['tax']}\n# %% [where]\nraise RuntimeError(__file__)\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "grader.selfgrade", path.name, "-a", "ch2-jit", "--json", "out.json"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / "out.json").read_text())
    (where,) = report["cell_problems"]  # the tax cell read rates.txt
    assert where["message"].endswith(f"raised RuntimeError: {path.resolve()}"), where["message"]
    tax = [c for e in report["exercises"] if e["id"] == "tax" for c in e["checks"] if c["reason"] != "on_hand_in"]
    assert tax and all(c["status"] == "passed" for c in tax), tax


def test_python_3_13_s_incomplete_input_is_the_syntax_error_python_gives_the_cell() -> None:
    """Python 3.13's kernel: "cell 4, line 16 raised _IncompleteInputError: incomplete input". The
    report: the SyntaxError `python` (and the pack's runner) gives the cell, at its bracket's line."""
    source = "def f(a):\n    return a\n\n%time f(1)\nextra = [1.0,\n"
    cells = [SourceCell(index=6, source=source, number=4),
             SourceCell(index=9, source="x = (\n", first_line=30)]
    kernel = CellProblem(cell=6, where="cell 4", status="error", ename="_IncompleteInputError", line=6,
                         message="cell 4, line 6 raised _IncompleteInputError: incomplete input")
    in_module = CellProblem(cell=9, where="line 30", status="error", ename="_IncompleteInputError", line=2,
                            message="line 31 raised _IncompleteInputError: incomplete input")
    _, (told, module_told) = attribute([], cells, [kernel, in_module])
    assert told.message == "cell 4, line 5 raised SyntaxError: '[' was never closed"  # the magic is not Python's
    assert (told.ename, told.line) == ("SyntaxError", 5)
    assert module_told.message == "line 30 raised SyntaxError: '(' was never closed"
    runner = CellProblem(cell=6, where="cell 4", status="error", ename="SyntaxError", line=5,
                         message="cell 4, line 5 raised SyntaxError: '[' was never closed (<ipython-input-4-0>, line 5)")
    _, (said,) = attribute([], cells, [runner])  # the pack's runner names the cell the message names already
    assert said.message == "cell 4, line 5 raised SyntaxError: '[' was never closed"


def test_the_class_analysis_counts_an_answer_whose_cell_did_not_run() -> None:
    """A syntax error in the answer cell: every check "not answered" because of that cell. Before:
    the student was left out of the class analysis, as one who left the exercise blank."""
    from test_classreport import make_report, not_answered

    from grader.outputs.classpage.analysis import analyze

    because = "cell 4, line 3 raised SyntaxError: '(' was never closed"
    broken = make_report("syn", messages={"a.one": not_answered(because=because), "a.two": not_answered(because=because)})
    blank = make_report("blank", messages={"a.one": not_answered(), "a.two": not_answered()})
    one = next(c for c in analyze({"syn": broken, "blank": blank}, feedback_file=str).checks if c.id == "a.one")
    assert (one.judged, one.failed) == (1, 1) and "SyntaxError" in (one.by_message[0].message or "")
