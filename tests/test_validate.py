"""`grade validate` on a small assignment built in tmp_path: what passes, and each way to fail."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from warm_grading import validate_in_process

from grader.course.validate import Row, read_mutant, table, validate
from grader.errors import GraderError

SPEC = """
schema_version = 1
id = "tiny"
title = "A tiny assignment"

[limits]
cell_timeout_s = 20
probe_timeout_s = 20
submission_timeout_s = 60

[[exercises]]
id = "double"
title = "Double it"
points = 10

[[exercises.requirements]]
id = "doubles"
text = "double(x) returns 2 * x"

[[exercises.requirements]]
id = "jitted_once"
text = "double is jitted once, not re-traced on every call"

[[exercises.functions]]
name = "double"
judged = "traced"
why = "double is jitted once"

[[exercises.checks]]
kind = "numeric"
id = "values"
verifies = ["doubles"]
title = "double(x) is 2x"
points = 6
message = "double(x) should return 2 * x"
function = "double"
reference = "double"
cases.types = ["float32"]
cases.rows = [[1.0], [[1.0, 2.5]]]

[[exercises.checks]]
kind = "compile_limit"
id = "compiles_once"
verifies = ["jitted_once"]
title = "double compiles once for one shape"
points = 4
message = "double should be jitted once, not re-traced on every call"
function = "double"
max_compiles = 1
cases.types = ["float32"]
cases.rows = [[[1.0, 2.0]], [[3.0, 4.0]]]
"""

REFERENCE = "# %% [setup]\nimport jax\n\n# %% [double]\n@jax.jit\ndef double(x):\n    return 2 * x\n"
WRONG_VALUES = "# fails: double.values\n# triples instead of doubling\n@jax.jit\ndef double(x):\n    return 3 * x\n"
NEW_JIT_EACH_CALL = ("# fails: double.compiles_once\n# builds a new jit wrapper on every call\n"
                     "def double(x):\n    return jax.jit(lambda v: 2 * v)(x)\n")


def make_assignment(root: Path, mutants: dict[str, str]) -> None:
    folder = root / "assignments" / "tiny"
    (folder / "mutants").mkdir(parents=True)
    (folder / "assignment.toml").write_text(SPEC)
    (folder / "references.py").write_text("import numpy as np\n\ndef double(x):\n    return 2 * np.asarray(x, float)\n")
    for name, text in mutants.items():
        (folder / "mutants" / f"{name}.py").write_text(text)
    (root / "solutions").mkdir()
    (root / "solutions" / "tiny.py").write_text(REFERENCE)
    (root / "student_template").mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import jax"), nbformat.v4.new_code_cell("# your answer")]
    nbformat.write(nb, root / "student_template" / "tiny.ipynb")




def results(rows: list[Row]) -> dict[str, bool]:
    """The rows of everything but the derived mutants (tests/test_derived_mutants.py has those)."""
    return {r.item: r.ok for r in rows if r.kind not in ("derived", "honest")}


@pytest.mark.kernel
def test_a_sound_assignment_validates(tmp_path: Path, monkeypatch) -> None:
    make_assignment(tmp_path, {"wrong_values": WRONG_VALUES, "new_jit_each_call": NEW_JIT_EACH_CALL})
    monkeypatch.setenv("GRADER_ASSIGNMENTS", str(tmp_path / "assignments"))
    # one validation, through the command line: its rows (the JSON), a table and exit 0
    out = tmp_path / "validation.json"
    done = subprocess.run([sys.executable, "-m", "grader", "validate", "tiny", "-j", "1", "--family",
                           "output_perturbed", "--json", str(out)], capture_output=True, text=True)
    (assignment,) = json.loads(out.read_text())["assignments"]
    rows = [Row.model_validate(r) for r in assignment["rows"]]
    assert results(rows) == {
        "spec loads": True,
        "every requirement has a check": True,
        "every function says how it is judged": True,
        "every hidden check's hint names no hidden value": True,
        "solutions/tiny.py scores full marks": True,
        "template scores 0, every exercise 'not answered yet'": True,
        "mutant new_jit_each_call": True,
        "mutant wrong_values": True,
        "exercise double: domains drawn from, overfit and lookalike families": True,
        "every check can fail": True,
    }
    assert done.returncode == 0, done.stdout + done.stderr
    assert "derived double.out0_rel_1e-3" in done.stdout and "kill matrix of tiny" in done.stdout
    assert "every check can fail" in done.stdout and "FAILED" not in done.stdout


@pytest.mark.kernel
def test_a_mutant_that_fails_something_else_and_an_uncovered_check_are_reported(tmp_path, monkeypatch, warm,
                                                                               capfd) -> None:
    mislabelled = WRONG_VALUES.replace("# fails: double.values", "# fails: double.compiles_once")
    make_assignment(tmp_path, {"mislabelled": mislabelled})
    monkeypatch.setenv("GRADER_ASSIGNMENTS", str(tmp_path / "assignments"))
    # one whole validation (a --family run judges no coverage), through the command line's code in
    # this process, of the hand-written mutants only: nothing derived
    monkeypatch.setattr("grader.course.validate.derived_mutants", lambda *args, **kwargs: [])
    out = tmp_path / "validation.json"
    done = validate_in_process(capfd, "tiny", "-j", "1", "--json", str(out))
    (assignment,) = json.loads(out.read_text())["assignments"]
    rows = {r["item"]: Row.model_validate(r) for r in assignment["rows"]}
    assert not [r for r in rows.values() if r.kind in ("derived", "honest")]
    bad = rows["mutant mislabelled"]
    assert not bad.ok
    assert "passes double.compiles_once although it declares failing it" in bad.detail
    assert "double.values" in bad.detail  # what it failed instead, with the message
    cover = rows["every check can fail"]
    assert not cover.ok and "double.compiles_once" in cover.detail and "double.values" in cover.detail
    assert done.returncode == 1 and "FAILED" in done.stdout


def test_a_bad_spec_is_one_row_with_the_field_path(tmp_path: Path, monkeypatch) -> None:
    make_assignment(tmp_path, {})
    spec = tmp_path / "assignments" / "tiny" / "assignment.toml"
    spec.write_text(SPEC.replace('points = 6\nmessage = "double(x)', 'points = 6\nrtol = -1\nmessage = "double(x)'))
    monkeypatch.setenv("GRADER_ASSIGNMENTS", str(tmp_path / "assignments"))
    rows = validate(["tiny"], workers=1)
    assert [(r.item, r.ok) for r in rows] == [("spec loads", False)]
    assert "exercises[0].checks[0].rtol: must be >= 0" in rows[0].detail
    assert "FAILED" in table(rows)


def test_a_mutant_without_a_header_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("x = 1\n")
    with pytest.raises(GraderError, match="fails:"):
        read_mutant(path)


RAISING_CHECK = """
[[exercises]]
id = "judged"
title = "Judged by a custom check that is broken"
points = 1

[[exercises.checks]]
kind = "custom"
id = "broken"
title = "a check whose own code raises"
points = 1
message = "double should double"
function = "always_raises"
call = "double"
cases.types = ["float32"]
cases.rows = [[1.0]]
"""


@pytest.mark.kernel
def test_a_check_that_raises_on_the_reference_is_an_assignment_bug(tmp_path: Path, monkeypatch, warm,
                                                                   capfd) -> None:
    """On a student's answer a raising check is that check's error; on the reference solution it
    is the assignment's bug: validate marks it and exits 3."""
    make_assignment(tmp_path, {"wrong_values": WRONG_VALUES, "new_jit_each_call": NEW_JIT_EACH_CALL})
    folder = tmp_path / "assignments" / "tiny"
    (folder / "assignment.toml").write_text(SPEC + RAISING_CHECK)
    (folder / "checks.py").write_text("def always_raises(observed):\n    return observed['calls'][0][1]['nope']\n")
    monkeypatch.setenv("GRADER_ASSIGNMENTS", str(tmp_path / "assignments"))
    out = tmp_path / "validation.json"
    # lookalike derives nothing from this reference: the solution, the template and the two
    # hand-written mutants are graded, not the derived mutants, which no assertion here reads
    done = validate_in_process(capfd, "tiny", "-j", "1", "--family", "lookalike", "--json", str(out))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    (assignment,) = json.loads(out.read_text())["assignments"]
    rows = {r["item"]: Row.model_validate(r) for r in assignment["rows"]}
    solution = rows["solutions/tiny.py scores full marks"]
    assert not solution.ok and solution.bug and "judged.broken" in solution.detail
    assert "always_raises raised" in solution.detail


@pytest.mark.kernel
def test_each_exercise_reports_its_domains_and_its_overfit_and_lookalike_verdicts(monkeypatch) -> None:
    """Per exercise, in the JSON and as a terminal row: the domain each declared argument is drawn
    from, and which overfit and lookalike mutants were killed. Here every grading is a report whose
    checks did not pass (a fake executor, no kernel), so every derived mutant counts as killed."""
    from grader.batch.executors import error_report
    from grader.course.validate import exercise_item, planned_items, validate_all

    class NothingPasses:
        def map(self, given):
            for task in given:
                yield task, error_report(task, "-").model_copy(update={"status": "graded", "error": None})

    monkeypatch.setattr("grader.batch.executors.SerialExecutor", NothingPasses)
    validation = validate_all(["ch2-jit"], workers=1, families={"overfit"})
    (result,) = validation.assignments
    by_id = {e.exercise: e for e in result.exercises}
    assert [d.argument for d in by_id["training"].domains] == ["lr", "num_steps"]
    assert by_id["training"].domains[1].drawn_from == "num_steps in [2, 500] (integers), and 0, 1, 300"
    assert by_id["newton"].domains[0].drawn_from.startswith("a in [1e-07, 1e+07] (log)")
    assert "newton_sqrt.loop_capped" in by_id["newton"].families["overfit"].killed
    assert not by_id["newton"].families["overfit"].survived and not by_id["detective"].domains
    rows = {r.item: r for r in result.rows}
    newton = rows[exercise_item("newton")]
    assert newton.ok and "a in [1e-07, 1e+07]" in newton.detail and "overfit killed 3 of 3" in newton.detail
    assert rows[exercise_item("detective")].ok and "no domain declared" in rows[exercise_item("detective")].detail
    dumped = json.loads(validation.model_dump_json())["assignments"][0]["exercises"]
    assert {e["exercise"] for e in dumped} == {"tax", "newton", "detective", "training"}
    assert exercise_item("training") in planned_items("ch2-jit", {"overfit"})


@pytest.mark.kernel
def test_assignments_are_graded_in_one_pool_and_each_keeps_its_own_rows(monkeypatch) -> None:
    """Two assignments validated at once hand their gradings to one executor (one pool's start,
    one pool's last grading), items graded whole before those graded on some exercises; each
    report reaches its own assignment's rows, in its items' order. A pool that breaks midway is a
    row of each assignment it left unfinished, not of one already done."""
    from grader.batch.executors import error_report
    from grader.course.validate import validate_all

    maps: list[list] = []

    class Recording:
        def map(self, given):
            maps.append(list(given))
            for task in maps[-1]:
                yield task, error_report(task, "-").model_copy(update={"status": "graded", "error": None})

    monkeypatch.setattr("grader.batch.executors.SerialExecutor", Recording)
    validation = validate_all(["ch2-practice", "ch2-scan"], workers=1, families={"lookalike"})
    (tasks,) = maps
    owners = [task.options.assignment for task in tasks]
    assert owners == sorted(owners) and set(owners) == {"ch2-practice", "ch2-scan"}
    for name in ("ch2-practice", "ch2-scan"):
        whole = [task.options.exercises is None for task in tasks if task.options.assignment == name]
        assert whole == sorted(whole, reverse=True) and any(whole) and not all(whole)
    practice, scan = validation.assignments
    assert {r.assignment for r in practice.rows} == {"ch2-practice"} and {r.assignment for r in scan.rows} == {"ch2-scan"}
    graded = [r.item for r in scan.rows if r.duration_s is not None]
    assert graded[0].startswith("solutions/") and graded[-1].startswith("derived ")  # the items' order

    class BreaksAfterTheFirstAssignment:
        def map(self, given):
            for task in given:
                if task.options.assignment != "ch2-practice":
                    raise RuntimeError("the pool broke")
                yield task, error_report(task, "-").model_copy(update={"status": "graded", "error": None})

    monkeypatch.setattr("grader.batch.executors.SerialExecutor", BreaksAfterTheFirstAssignment)
    broken = validate_all(["ch2-practice", "ch2-scan"], workers=1, families={"lookalike"})
    practice, scan = ([r for r in v.rows if r.item == "grading"] for v in broken.assignments)
    assert practice == [] and len(scan) == 1 and scan[0].bug and "the pool broke" in scan[0].detail
