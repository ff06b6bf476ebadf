"""Mutants the grader derives from a spec and its reference: each family, and validate's verdicts.

Each family has a test in which a deliberately weakened check lets one of its mutants survive
(or, for honest variants, a check too strict costs an honest variant its points), and validate
fails naming it. The assignment is a tiny one built in tmp_path: `scale(x, k) = k * x`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
import pytest

from grader import assignment as assignments
from grader.course.mutation.families import derive_mutants, rename_helpers
from grader.course.mutation.interface import derive
from grader.course.mutation.introspect import introspect
from grader.course.validate import MatrixRow, Validation, validate_all
from grader.course.validation_outputs import junit, matrix_table, page

HEAD = """
schema_version = 1
id = "tiny"
title = "A tiny assignment"

[limits]
cell_timeout_s = 20
probe_timeout_s = 20
submission_timeout_s = 60

[[exercises]]
id = "scale"
title = "Scale it"
points = {points}

[[exercises.requirements]]
id = "values"
text = "scale(x, k) returns k * x"

[[exercises.requirements]]
id = "traced_k"
text = "k stays traced: new values of k do not recompile scale"
"""

VALUES = """
[[exercises.checks]]
kind = "numeric"
id = "values"
verifies = ["values"]
title = "scale(x, k) is k x"
points = 6
message = "scale(x, k) should return k * x"
function = "scale"
reference = "scale"
public = [1]
rtol = {rtol}
atol = {atol}
cases.types = ["float32", "py"]
cases.rows = {rows}
"""

COMPILES = """
[[exercises.checks]]
kind = "compile_limit"
id = "compiles_once"
verifies = ["traced_k"]
title = "scale compiles once while k varies"
points = 4
message = "new k should not recompile scale: keep k traced"
function = "scale"
source = "{source}"
max_compiles = {max_compiles}
cases.types = ["float32", "py"]
cases.rows = [[[1.0, 2.0], 1.5], [[1.0, 2.0], 2.5], [[1.0, 2.0], 3.5]]
"""

REFERENCE = ("# %% [setup]\nimport jax\n\nFACTOR_NAME = 'k'\n\n\n# %% [scale]\n"
             "@jax.jit\ndef scale(x, k):\n    return k * x\n")
VARIED = "[[1.0, 2.0], [[1.0, 2.5], 3.0], [-4.0, 0.5]]"


def spec(*, rows: str = VARIED, rtol: float = 1e-5, atol: float = 1e-6, source: str = "module",
         max_compiles: int = 1, compile_check: bool = True) -> str:
    text = HEAD.format(points=10 if compile_check else 6) + VALUES.format(rows=rows, rtol=rtol, atol=atol)
    if compile_check:
        text += COMPILES.format(source=source, max_compiles=max_compiles)
    else:
        text = text.replace('\n[[exercises.requirements]]\nid = "traced_k"\n'
                            'text = "k stays traced: new values of k do not recompile scale"\n', "")
    return text


def make_assignment(root: Path, spec_text: str) -> Path:
    folder = root / "assignments" / "tiny"
    folder.mkdir(parents=True)
    (folder / "assignment.toml").write_text(spec_text)
    (folder / "references.py").write_text(
        "import numpy as np\n\ndef scale(x, k):\n    return k * np.asarray(x, float)\n")
    (root / "solutions").mkdir()
    (root / "solutions" / "tiny.py").write_text(REFERENCE)
    (root / "student_template").mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import jax"), nbformat.v4.new_code_cell("# your answer")]
    nbformat.write(nb, root / "student_template" / "tiny.ipynb")
    return folder


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch):
    def build(spec_text: str) -> Path:
        folder = make_assignment(tmp_path, spec_text)
        monkeypatch.setenv("GRADER_ASSIGNMENTS", str(tmp_path / "assignments"))
        return folder
    return build


# ----------------------------------------------------------------------------- derivation (no kernels)


def _derived(tiny_folder: Path) -> list:
    loaded = assignments.load("tiny")
    interface = derive(loaded, 1)
    facts = introspect(REFERENCE, {k: v.sample for k, v in interface.functions.items()}, list(interface.names))
    return derive_mutants(REFERENCE, interface, facts)


def test_every_family_is_derived_from_the_spec_and_the_reference(tiny) -> None:
    made = {m.name: m for m in _derived(tiny(spec()))}
    # values the checks pass for k (the first, middle and last of the six distinct), and each argument
    assert {n for n in made if n.startswith("scale.arg1_fixed_")} == {
        "scale.arg1_fixed_2.0", "scale.arg1_fixed_1.5", "scale.arg1_fixed_3.5"}
    assert any(n.startswith("scale.arg0_fixed_") for n in made)
    # what the spec requires: jax.jit (a compile check), a traced k (varied by the compile check)
    assert {"scale.without_jit", "scale.arg1_static"} <= set(made)
    assert {"scale.out0_rel_1e-3", "scale.out0_rel_1e-1", "scale.out0_extra_axis"} <= set(made)
    assert {"scale.rounded_differently", "reference.x64", "reference.helpers_renamed"} <= set(made)
    assert made["scale.arg1_static"].expected == ["scale.compiles_once"]
    assert made["scale.out0_rel_1e-3"].exercises == ["scale"]
    for mutant in made.values():  # every one is a whole, valid module: the reference plus a cell
        compile(mutant.submission, mutant.name, "exec")
        assert mutant.submission.startswith("# %% [setup]") or mutant.name == "reference.x64"


def test_no_construct_mutant_without_a_requirement_for_it(tiny) -> None:
    made = {m.name for m in _derived(tiny(spec(compile_check=False)))}
    assert not {n for n in made if n.endswith(("without_jit", "_static", "without_while", "without_case"))}


def test_an_assignment_planned_twice_is_introspected_once_until_its_reference_changes(tiny, monkeypatch) -> None:
    """The pytest plugin plans an assignment's items when it collects them and again when it
    validates them: one process importing JAX for both, and a new one for a new reference."""
    import grader.course.validate as validate_module

    folder = tiny(spec())
    calls = []
    real = validate_module._introspect_in_worker
    monkeypatch.setattr(validate_module, "_introspect_in_worker",
                        lambda reference, interface: calls.append(reference) or real(reference, interface))
    first = validate_module.planned_items("tiny")
    assert "derived scale.arg1_static" in first and "derived mutants" not in first  # derived, no error row
    assert validate_module.planned_items("tiny") == first and len(calls) == 1
    reference = folder.parent.parent / "solutions" / "tiny.py"
    reference.write_text(reference.read_text() + "\nEXTRA = 1\n")
    validate_module.planned_items("tiny")
    assert len(calls) == 2


def test_helpers_are_renamed_token_by_token() -> None:
    renamed = rename_helpers(REFERENCE, {"scale"})
    assert "renamed_FACTOR_NAME = 'k'" in renamed and "# %% [scale]" in renamed and "def scale(x, k)" in renamed
    assert rename_helpers("x = 1\ny = x.x\n", set()) == "renamed_x = 1\nrenamed_y = renamed_x.x\n"


def _validation(rows: list[MatrixRow]) -> Validation:
    from grader.course.validate import AssignmentValidation, Row

    return Validation(assignments=[AssignmentValidation(
        assignment="tiny", checks=["scale.values", "scale.compiles_once", "other.values"], matrix=rows,
        rows=[Row(assignment="tiny", item="derived scale.arg1_fixed_2.0", ok=False, kind="derived",
                  detail="SURVIVES: <b>\x1b[2J")])])


def test_the_matrix_marks_kills_passes_and_other_exercises() -> None:
    rows = [MatrixRow(mutant="scale.out0_rel_1e-3", family="output_perturbed", exercises=["scale"],
                      killed_by=["scale.values"], survived=False),
            MatrixRow(mutant="scale.arg1_fixed_2.0", family="argument_ignored", exercises=["scale"],
                      killed_by=[], survived=True)]
    text = matrix_table(_validation(rows).assignments[0])
    lines = {line.split()[0]: line for line in text.splitlines() if line.startswith("  scale.")}
    # columns: scale.values, scale.compiles_once, other.values (blank: another exercise)
    assert lines["scale.out0_rel_1e-3"].endswith("x.   killed")
    assert lines["scale.arg1_fixed_2.0"].endswith("..   SURVIVES")
    assert "survivors: scale.arg1_fixed_2.0" in text


def test_junit_and_the_page_carry_failures_inert() -> None:
    validation = _validation([])
    tree = ET.fromstring(junit(validation))
    case = tree.find("testsuite/testcase")
    assert case is not None and case.get("name") == "derived scale.arg1_fixed_2.0"
    failure = case.find("failure")
    assert failure is not None and "SURVIVES" in failure.get("message", "") and "\x1b" not in failure.get("message", "")
    html_page = page(validation)
    assert "<b>" not in html_page and "&lt;b&gt;" in html_page and "\x1b" not in html_page


# ----------------------------------------------------------------------------- one per family, graded


def _row(validation: Validation, item: str):
    return next(r for r in validation.rows if r.item == item)


@pytest.mark.kernel
def test_argument_ignored_survives_a_check_that_never_varies_it(tiny, tmp_path) -> None:
    """Weakened: the values check passes k = 2.0 only, and nothing else calls scale."""
    tiny(spec(rows="[[1.0, 2.0], [[1.0, 2.5], 2.0]]", compile_check=False))
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "grader", "validate", "tiny", "-j", "1", "--family",
                           "argument_ignored", "--json", str(out / "v.json"), "--junit", str(out / "v.xml")],
                          capture_output=True, text=True, env={**os.environ})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "derived scale.arg1_fixed_2.0" in done.stdout and "SURVIVES" in done.stdout
    assert "survivors: scale.arg1_fixed_2.0" in done.stdout  # the kill matrix, in the terminal
    matrix = json.loads((out / "v.json").read_text())["assignments"][0]["matrix"]
    survivor = next(m for m in matrix if m["mutant"] == "scale.arg1_fixed_2.0")
    assert survivor["survived"] and survivor["expected"] == ["scale.values"]
    assert survivor["requirements"] == ["scale.values"]
    assert all(not m["survived"] for m in matrix if m["mutant"].startswith("scale.arg0_"))
    failures = [c for c in ET.parse(out / "v.xml").iter("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failures] == ["derived scale.arg1_fixed_2.0"]
    message = failures[0].find("failure").get("message")  # type: ignore[union-attr]
    assert "scale.values" in message and "requirements: scale.values" in message


@pytest.mark.kernel
def test_construct_removed_survives_a_compile_limit_that_allows_recompiling(tiny) -> None:
    """Weakened: the kernel's count may reach 3 for 3 values of k, so a static k passes."""
    tiny(spec(source="kernel", max_compiles=3))
    validation = validate_all(["tiny"], workers=1, families={"construct_removed"})
    static = _row(validation, "derived scale.arg1_static")
    assert not static.ok and "SURVIVES" in static.detail and "scale.compiles_once" in static.detail
    tiny_spec = assignments.assignments_dir() / "tiny" / "assignment.toml"
    tiny_spec.write_text(spec())  # the strong spec: module evidence, one compilation
    strong = validate_all(["tiny"], workers=1, families={"construct_removed"})
    assert _row(strong, "derived scale.arg1_static").ok
    # eager `k * x` compiles one multiply for every k: without an interface check asking for
    # jax.jit, nothing here requires it, and validate says so, naming the compile check
    without_jit = _row(strong, "derived scale.without_jit")
    assert "SURVIVES" in without_jit.detail and "scale.compiles_once" in without_jit.detail


@pytest.mark.kernel
def test_output_perturbed_survives_a_loose_tolerance(tiny) -> None:
    """Weakened: rtol 1e-2 lets an output off by a relative 1e-3 through; 1e-1 is still caught."""
    tiny(spec(rtol=1e-2, compile_check=False))
    validation = validate_all(["tiny"], workers=1, families={"output_perturbed"})
    assert "SURVIVES" in _row(validation, "derived scale.out0_rel_1e-3").detail
    assert _row(validation, "derived scale.out0_rel_1e-1").ok
    assert _row(validation, "derived scale.out0_extra_axis").ok


@pytest.mark.kernel
def test_honest_variant_loses_points_on_a_check_too_strict(tiny) -> None:
    """Weakened the other way: rtol = atol = 0 costs an equivalent formula its points."""
    tiny(spec(rtol=0.0, atol=0.0, compile_check=False))
    validation = validate_all(["tiny"], workers=1, families={"honest"})
    rounded = _row(validation, "honest scale.rounded_differently")
    assert not rounded.ok and "loses points on an honest variant" in rounded.detail
    assert _row(validation, "honest reference.helpers_renamed").ok


@pytest.mark.kernel
def test_a_declared_equivalence_is_kept_and_a_stale_one_is_reported(tiny) -> None:
    text = spec(rows="[[1.0, 2.0], [[1.0, 2.5], 2.0]]", compile_check=False).replace(
        'points = 6\n\n[[exercises.requirements]]',
        'points = 6\n\n[[exercises.equivalent]]\nmutant = "scale.arg1_fixed_2.0"\nreason = "k is always 2 here"\n\n'
        '[[exercises.equivalent]]\nmutant = "scale.arg0_fixed_array"\nreason = "wrong: this one is killed"\n\n'
        '[[exercises.requirements]]', 1)
    tiny(text)
    validation = validate_all(["tiny"], workers=1, families={"argument_ignored"})
    assert _row(validation, "derived scale.arg1_fixed_2.0").ok
    assert "declared equivalent: k is always 2 here" in _row(validation, "derived scale.arg1_fixed_2.0").detail
    stale = _row(validation, "derived scale.arg0_fixed_array")
    assert not stale.ok and "remove the declaration" in stale.detail


@pytest.mark.kernel
def test_pytest_collects_an_assignment_as_items(tiny, tmp_path) -> None:
    """The plugin: `pytest assignments` in a course repository; a survivor is a failing item."""
    folder = tiny(spec(rows="[[1.0, 2.0], [[1.0, 2.5], 2.0]]", compile_check=False))
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--grade-jobs", "1",
                           "--rootdir", str(tmp_path), str(folder.parent), "--grade-json", str(tmp_path / "v.json")],
                          capture_output=True, text=True, cwd=tmp_path, env={**os.environ})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED" in done.stdout and "derived scale.arg1_fixed_2.0" in done.stdout
    assert "scale.values" in done.stdout  # the check that should have killed it
    passed = int(done.stdout.split(" passed")[0].split()[-1])
    assert passed >= 6  # spec, requirements, solution, template, killed mutants, honest variants
    assert json.loads((tmp_path / "v.json").read_text())["assignments"][0]["assignment"] == "tiny"


@pytest.mark.kernel
def test_a_while_loop_unrolled_by_its_mutant_is_killed_by_the_while_check_alone(repo_root, tmp_path) -> None:
    """ch2-jit's newton_sqrt without its while loop, unrolled to the reference's cap of 100 steps:
    only the while check fails it. Its compile count finishes within the request limit (XLA took
    12 s on the unrolled chain before each step got an optimization barrier, and timed out)."""
    from warm_grading import grade_warm

    from grader import GradeOptions
    from grader.course.validate import derived_mutants

    made = derived_mutants(assignments.load("ch2-jit"), repo_root / "solutions" / "ch2-jit.py", {"construct_removed"})
    mutant = next(m for m in made if m.name == "newton_sqrt.without_while")
    assert mutant.expected == ["newton.uses_while"]
    path = tmp_path / "newton_without_while.py"
    path.write_text(mutant.submission, encoding="utf-8")
    report = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=3))
    failed = {check.id: check.status for exercise in report.exercises for check in exercise.checks
              if check.status != "passed"}
    assert failed == {"newton.uses_while": "failed"}


@pytest.mark.kernel
def test_grading_some_exercises_probes_judges_and_scores_those_alone(repo_root, tmp_path) -> None:
    """What `grade validate` grades a derived mutant with: its exercises only. A broken tax does
    not show when newton alone is graded, and newton's programs are the only ones run."""
    from warm_grading import grade_warm

    from grader import GradeOptions
    from grader.errors import UsageError

    path = tmp_path / "tax_broken.py"
    path.write_text((repo_root / "solutions" / "ch2-jit.py").read_text(encoding="utf-8")
                    + "\n\ntax_vectorized = jax.jit(lambda income: income * 0.1)\n", encoding="utf-8")
    newton = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=3, exercises=("newton",)))
    assert [e.id for e in newton.exercises] == ["newton"]
    assert (newton.score, newton.max_score) == (25, 25)
    assert newton.programs and {p.function for p in newton.programs} == {"newton_sqrt"}
    tax = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=3, exercises=("tax",)))
    assert [e.id for e in tax.exercises] == ["tax"] and tax.score < tax.max_score == 25
    with pytest.raises(UsageError, match="no exercise taxes"):
        grade_warm(path, GradeOptions(assignment="ch2-jit", seed=3, exercises=("taxes",)))


def test_validate_grades_a_derived_mutant_on_its_exercises_and_the_rest_whole(monkeypatch) -> None:
    """The kill of a derived mutant is read on its exercises alone, so only those are graded; a
    hand-written mutant (which must fail nothing else), the solutions, the template and an honest
    variant that must keep every point are graded whole."""
    from grader.batch.executors import error_report

    tasks = []

    class Recording:
        def map(self, given):
            for task in given:
                tasks.append(task)
                yield task, error_report(task, "-").model_copy(update={"status": "graded", "error": None})

    monkeypatch.setattr("grader.batch.executors.SerialExecutor", Recording)
    validate_all(["ch2-jit"], workers=1, families={"output_perturbed", "honest"})
    graded_on = {task.student: task.options.exercises for task in tasks}
    assert graded_on["derived step.out0_rel_1e-3"] == ("training",)
    assert graded_on["derived newton_sqrt.out0_rel_1e-3"] == ("newton",)
    assert graded_on["honest step.as_list"] == ("training",)  # it must pass these checks only
    assert graded_on["honest reference.helpers_renamed"] is None
    assert graded_on["mutant tax_switch_with_select"] is None
    assert graded_on["solutions/ch2-jit.py scores full marks"] is None
    assert any(key.startswith("template") and on is None for key, on in graded_on.items())


# ----------------------------------------------------------------------------- overfit (grader/course/mutation/overfit.py)

HIDDEN_K = """
[[exercises.checks]]
kind = "numeric"
id = "hidden"
verifies = ["values"]
title = "scale on hidden k"
points = 2
hidden = true
hint = "any k"
message = "scale(x, k) should return k * x for any k"
function = "scale"
reference = "scale"
public = [1]
rtol = 1e-5
atol = 1e-6
cases.generator = "{generator}"

[[exercises.domains]]
argument = "k"
functions = ["scale"]
position = 1
low = -100.0
high = 100.0
values = [0.0]
why = "any k"
"""

K_GENERATORS = '''

from grader.domains import draw


def inside(rng):
    """k only where the visible rows put it: an overfit generator."""
    return [(np.asarray([1.0, 2.0], np.float32), float(k)) for k in rng.uniform(0.5, 3.0, size=4)]


def drawn(rng, domains):
    return [(np.asarray([1.0, 2.0], np.float32), float(k)) for k in draw(domains["k"], rng, 5)]
'''


def overfit_spec(generator: str) -> str:
    return HEAD.format(points=8) + VALUES.format(rows=VARIED, rtol=1e-5, atol=1e-6) + \
        HIDDEN_K.format(generator=generator)


def _tiny_with_k_domain(tiny, generator: str) -> Path:
    traced_k = ('\n[[exercises.requirements]]\nid = "traced_k"\n'
                'text = "k stays traced: new values of k do not recompile scale"\n')
    folder = tiny(overfit_spec(generator).replace(traced_k, ""))
    with (folder / "references.py").open("a") as refs:
        refs.write(K_GENERATORS)
    return folder


def test_overfit_mutants_are_derived_for_a_declared_argument_from_what_the_visible_checks_sample(tiny) -> None:
    from grader.course.mutation import overfit

    _tiny_with_k_domain(tiny, "drawn")
    assert not [m for m in _derived(Path()) if m.family == "overfit"]  # no spec read: none
    loaded = assignments.load("tiny")
    sampling = overfit.sampling(loaded, 1)
    k = sampling.functions["scale"].arguments[0]
    assert (k.position, k.seen) == (1, [0.5, 2.0, 3.0])
    assert sampling.functions["scale"].hidden_checks == ["scale.hidden"]
    with overfit.sampled(sampling):
        made = {m.name: m for m in _derived(Path()) if m.family == "overfit"}
    assert set(made) == {"scale.arg1_clipped", "scale.visible_special_cased"}  # no loop in scale's checks
    assert made["scale.arg1_clipped"].expected == ["scale.hidden"]
    assert "_clip(args[1], 0.5, 3.0)" in made["scale.arg1_clipped"].submission
    for mutant in made.values():
        compile(mutant.submission, mutant.name, "exec")


@pytest.mark.kernel
def test_an_argument_clipped_survives_hidden_inputs_drawn_inside_the_visible_range(tiny) -> None:
    """Weakened: the hidden check draws k where the visible rows do; drawn from k's domain, the
    same mutant is killed. Validate reports the domain and the family per exercise."""
    _tiny_with_k_domain(tiny, "inside")
    weak = validate_all(["tiny"], workers=1, families={"overfit"})
    clipped = _row(weak, "derived scale.arg1_clipped")
    assert not clipped.ok and "SURVIVES" in clipped.detail and "scale.hidden" in clipped.detail
    assert _row(weak, "derived scale.visible_special_cased").ok  # a random k is no visible one
    survivors = _row(weak, "exercise scale: domains drawn from, overfit and lookalike families")
    assert not survivors.ok and "survivors scale.arg1_clipped" in survivors.detail
    folder = assignments.assignments_dir() / "tiny"
    (folder / "assignment.toml").write_text((folder / "assignment.toml").read_text().replace('"inside"', '"drawn"'))
    strong = validate_all(["tiny"], workers=1, families={"overfit"})
    assert _row(strong, "derived scale.arg1_clipped").ok
    coverage = strong.assignments[0].exercises[0]
    assert coverage.domains[0].drawn_from == "k in [-100, 100] (linear), and 0"
    assert coverage.families["overfit"].killed == ["scale.arg1_clipped", "scale.visible_special_cased"]
    row = _row(strong, "exercise scale: domains drawn from, overfit and lookalike families")
    assert row.ok and "k in [-100, 100]" in row.detail and "overfit killed 2 of 2" in row.detail
