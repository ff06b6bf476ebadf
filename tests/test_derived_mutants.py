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
from warm_grading import validate_in_process

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

[[exercises.functions]]
name = "scale"
judged = "traced"
why = "k stays traced: new values of k do not recompile scale"
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
max_compiles = {max_compiles}
cases.types = ["float32", "py"]
cases.rows = [[[1.0, 2.0], 1.5], [[1.0, 2.0], 2.5], [[1.0, 2.0], 3.5]]
"""

REFERENCE = ("# %% [setup]\nimport jax\n\nFACTOR_NAME = 'k'\n\n\n# %% [scale]\n"
             "@jax.jit\ndef scale(x, k):\n    return k * x\n")
VARIED = "[[1.0, 2.0], [[1.0, 2.5], 3.0], [-4.0, 0.5]]"


def spec(*, rows: str = VARIED, rtol: float = 1e-5, atol: float = 1e-6,
         max_compiles: int = 1, compile_check: bool = True) -> str:
    text = HEAD.format(points=10 if compile_check else 6) + VALUES.format(rows=rows, rtol=rtol, atol=atol)
    if compile_check:
        text += COMPILES.format(max_compiles=max_compiles)
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


def test_helpers_renamed_keeps_the_helpers_the_spec_counts_by_name() -> None:
    """A `calls` rule counts a helper by its name (a setup cell's `damp`): the honest variant that
    renames the reference's own helpers keeps it (found by an author's assignment: the variant
    "lost points": `damp` is not defined)."""
    from grader.course.mutation.families import _Builder
    from grader.course.mutation.interface import FunctionUse, Interface

    source = "def damp(x):\n    return x * 0.5\n\ndef damp_n(x, n):\n    for _ in range(n):\n        x = damp(x)\n" \
             "    return x\n\ndef other(x):\n    return x\n"
    builder = _Builder.__new__(_Builder)
    builder.interface = Interface(helpers=["damp"], functions={"damp_n": FunctionUse(name="damp_n")})
    kept = rename_helpers(source, builder._interface_names())
    assert "def damp(x)" in kept and "x = damp(x)" in kept and "def damp_n" in kept and "def renamed_other" in kept
    # derive reads the helpers from the spec's functions
    assert derive(assignments.load("ch2-practice"), 1).helpers == ["bucket_size", "masked_mean"]


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
    # what an earlier test of this process planned for the same reference is not this test's
    monkeypatch.setattr(validate_module, "_introspected", {})
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
def test_argument_ignored_survives_a_check_that_never_varies_it(tiny, tmp_path, warm, capfd) -> None:
    """Weakened: the values check passes k = 2.0 only, and nothing else calls scale."""
    tiny(spec(rows="[[1.0, 2.0], [[1.0, 2.5], 2.0]]", compile_check=False))
    out = tmp_path / "out"
    done = validate_in_process(capfd, "tiny", "-j", "1", "--family", "argument_ignored",
                          "--json", str(out / "v.json"), "--junit", str(out / "v.xml"))
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
def test_construct_removed_is_killed_by_the_module_evidence_and_a_missing_jit_check_survives(tiny,
                                                                                            warm) -> None:
    """A compile limit reads the traced function's program: a static k is killed even where the
    count allows recompiling (3 compilations for 3 values of k)."""
    tiny(spec(max_compiles=3))
    weak = validate_all(["tiny"], workers=1, families={"construct_removed"})
    assert _row(weak, "derived scale.arg1_static").ok
    tiny_spec = assignments.assignments_dir() / "tiny" / "assignment.toml"
    tiny_spec.write_text(spec())  # the strong spec: module evidence, one compilation
    strong = validate_all(["tiny"], workers=1, families={"construct_removed"})
    assert _row(strong, "derived scale.arg1_static").ok
    # eager `k * x` compiles one multiply for every k: without an interface check asking for
    # jax.jit, nothing here requires it, and validate says so, naming the compile check
    without_jit = _row(strong, "derived scale.without_jit")
    assert "SURVIVES" in without_jit.detail and "scale.compiles_once" in without_jit.detail


@pytest.mark.kernel
def test_output_perturbed_survives_a_loose_tolerance(tiny, warm) -> None:
    """Weakened: rtol 1e-2 lets an output off by a relative 1e-3 through; 1e-1 is still caught."""
    tiny(spec(rtol=1e-2, compile_check=False))
    validation = validate_all(["tiny"], workers=1, families={"output_perturbed"})
    assert "SURVIVES" in _row(validation, "derived scale.out0_rel_1e-3").detail
    assert _row(validation, "derived scale.out0_rel_1e-1").ok
    assert _row(validation, "derived scale.out0_extra_axis").ok


@pytest.mark.kernel
def test_honest_variant_loses_points_on_a_check_too_strict(tiny, warm) -> None:
    """Weakened the other way: rtol = atol = 0 costs an equivalent formula its points."""
    tiny(spec(rtol=0.0, atol=0.0, compile_check=False))
    validation = validate_all(["tiny"], workers=1, families={"honest"})
    rounded = _row(validation, "honest scale.rounded_differently")
    assert not rounded.ok and "loses points on an honest variant" in rounded.detail
    assert _row(validation, "honest reference.helpers_renamed").ok
    # honest variants alone kill nothing: a partial run does not judge coverage (an author's run
    # of --family honest exited 1 on "no mutant fails ...")
    coverage = _row(validation, "every check can fail")
    assert coverage.ok and coverage.detail.startswith("not judged: --family")


@pytest.mark.kernel
def test_a_declared_equivalence_is_kept_and_a_stale_one_is_reported(tiny, warm) -> None:
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
    hand-written mutant (which must fail nothing else) on the exercises its cell can change
    (grader/course/reach.py), whole where its cell does more than bind names; the solutions, the
    template and an honest variant that must keep every point are graded whole."""
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
    assert graded_on["mutant tax_switch_with_select"] == ("tax",)  # it binds tax_switch alone
    assert graded_on["mutant detective_call_1_flipped"] is None  # it sets an item of a list
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
def test_an_argument_clipped_survives_hidden_inputs_drawn_inside_the_visible_range(tiny, warm) -> None:
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


# ----------------------------------------------------------------------------- loops other than while_loop

# An assignment whose references loop with lax.scan (a running sum) and choose with lax.cond only
# (a gate), each with a structure check, hidden checks and declared domains: what an author writes
# from the docs alone. Before the loop families knew scan, `running_sum.without_while` and
# `running_sum.loop_capped` replaced while_loop / fori_loop only, were the reference itself, and
# validate reported both as survivors.
LOOPS_SPEC = """
schema_version = 1
id = "loops"
title = "Loops other than while_loop"

[limits]
cell_timeout_s = 20
probe_timeout_s = 20
submission_timeout_s = 60

[[exercises]]
id = "running"
title = "A running sum with lax.scan"
points = 9

[[exercises.requirements]]
id = "values"
text = "running_sum(x) returns the running sums of x: element i is x[0] + ... + x[i]"

[[exercises.requirements]]
id = "scan"
text = "loop over x with lax.scan"

[[exercises.functions]]
name = "running_sum"
judged = "traced"
why = "loop over x with lax.scan"

[[exercises.domains]]
argument = "x"
functions = ["running_sum"]
position = 0
low = -100.0
high = 100.0
why = "any values"

[[exercises.checks]]
kind = "numeric"
id = "visible"
verifies = ["values"]
title = "running_sum on the notebook's arrays"
points = 3
message = "running_sum(x) should return the running sums of x"
function = "running_sum"
reference = "running_sum"
rtol = 1e-5
atol = 1e-4
cases.types = ["float32"]
cases.rows = [[[1.0, 2.0, 3.0]], [[0.5, -1.0, 2.0, 4.0]]]

[[exercises.checks]]
kind = "numeric"
id = "hidden"
verifies = ["values"]
title = "running_sum on hidden arrays"
points = 3
hidden = true
hint = "arrays of any length and values"
message = "running_sum(x) should be right for arrays of any length and values"
function = "running_sum"
reference = "running_sum"
rtol = 1e-5
atol = 1e-3
cases.generator = "running_cases"

[[exercises.checks]]
kind = "structure"
id = "uses_scan"
verifies = ["scan"]
title = "running_sum loops with lax.scan"
points = 3
message = "running_sum should loop over x with lax.scan"
function = "running_sum"
reference = "running_sum"
rtol = 1e-5
atol = 1e-4
contains = ["while"]
cases.types = ["float32"]
cases.rows = [[[1.0, 2.0, 3.0]]]

[[exercises]]
id = "gate"
title = "A gate with lax.cond"
points = 9

[[exercises.requirements]]
id = "values"
text = "gate(x, t) is x - t when x is greater than t, 0 otherwise"

[[exercises.requirements]]
id = "cond"
text = "choose with lax.cond"

[[exercises.functions]]
name = "gate"
judged = "traced"
why = "choose with lax.cond"

[[exercises.domains]]
argument = "x"
functions = ["gate"]
position = 0
low = -1000.0
high = 1000.0
values = [0.0]
why = "any x"

[[exercises.domains]]
argument = "t"
functions = ["gate"]
position = 1
low = -1000.0
high = 1000.0
values = [0.0]
why = "any t"

[[exercises.checks]]
kind = "numeric"
id = "visible"
verifies = ["values"]
title = "gate on the notebook's values"
points = 3
message = "gate(x, t) should return x - t when x > t, and 0 otherwise"
function = "gate"
reference = "gate"
rtol = 1e-6
atol = 1e-6
cases.types = ["float32", "float32"]
cases.rows = [[5.0, 1.0], [-2.0, 0.0], [3.0, 3.0]]

[[exercises.checks]]
kind = "numeric"
id = "hidden"
verifies = ["values"]
title = "gate on hidden values"
points = 3
hidden = true
hint = "any x and t"
message = "gate(x, t) should be right for any x and t"
function = "gate"
reference = "gate"
rtol = 1e-6
atol = 1e-4
cases.generator = "gate_cases"

[[exercises.checks]]
kind = "structure"
id = "uses_cond"
verifies = ["cond"]
title = "gate chooses with lax.cond"
points = 3
message = "gate should choose with lax.cond"
function = "gate"
reference = "gate"
rtol = 1e-6
atol = 1e-6
contains = ["case"]
case_chooses_output = true
cases.types = ["float32", "float32"]
cases.rows = [[5.0, 1.0]]
"""

LOOPS_REFERENCES = """import numpy as np

from grader.domains import draw


def running_sum(x):
    return np.cumsum(np.asarray(x, np.float64))


def gate(x, t):
    x, t = float(x), float(t)
    return x - t if x > t else 0.0


def running_cases(rng, domains):
    return [(draw(domains["x"], rng, n).astype(np.float32),) for n in (1, 6, 17, 40)]


def gate_cases(rng, domains):
    xs, ts = draw(domains["x"], rng, 12), draw(domains["t"], rng, 12)
    return [(np.float32(x), np.float32(t)) for x, t in zip(xs, ts)]
"""

LOOPS_REFERENCE = """# %% [setup]
import jax
import jax.numpy as jnp
from jax import lax


# %% [running]
@jax.jit
def running_sum(x):
    def step(total, v):
        total = total + v
        return total, total

    _, sums = lax.scan(step, jnp.zeros((), x.dtype), x)
    return sums


# %% [gate]
@jax.jit
def gate(x, t):
    return lax.cond(x > t, lambda v: v - t, lambda v: jnp.zeros_like(v), x)
"""


def make_loops(root: Path, reference: str = LOOPS_REFERENCE, spec_text: str = LOOPS_SPEC) -> Path:
    folder = root / "assignments" / "loops"
    folder.mkdir(parents=True)
    (folder / "assignment.toml").write_text(spec_text)
    (folder / "references.py").write_text(LOOPS_REFERENCES)
    (root / "solutions").mkdir()
    (root / "solutions" / "loops.py").write_text(reference)
    (root / "student_template").mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import jax"), nbformat.v4.new_code_cell("# your answer")]
    nbformat.write(nb, root / "student_template" / "loops.ipynb")
    return folder


@pytest.fixture
def loops(tmp_path: Path, monkeypatch):
    def build(reference: str = LOOPS_REFERENCE, spec_text: str = LOOPS_SPEC) -> Path:
        folder = make_loops(tmp_path, reference, spec_text)
        monkeypatch.setenv("GRADER_ASSIGNMENTS", str(tmp_path / "assignments"))
        return folder
    return build


def _loops_derived(reference: str = LOOPS_REFERENCE) -> tuple[dict, object]:
    """The derived mutants of `loops` (the overfit family too), introspected in this process."""
    from grader.course.mutation import overfit

    loaded = assignments.load("loops")
    interface = derive(loaded, 1)
    facts = introspect(reference, {k: v.sample for k, v in interface.functions.items()}, list(interface.names))
    with overfit.sampled(overfit.sampling(loaded, 1)):
        return {m.name: m for m in derive_mutants(reference, interface, facts)}, facts


def test_loop_and_case_families_change_the_constructs_the_reference_uses(loops) -> None:
    loops()
    made, facts = _loops_derived()
    assert facts.functions["running_sum"].constructs == ["scan", "jit"]
    assert facts.functions["gate"].constructs == ["cond", "jit"]
    # a scan unrolled, capped to the longest visible array (4 elements): the scan is what they change
    assert "with _replaced(scan=_scan):" in made["running_sum.without_while"].submission
    assert made["running_sum.without_while"].summary.endswith("(no lax.scan)")
    capped = made["running_sum.loop_capped"]
    assert "with _replaced(scan=_scan):" in capped.submission and "cap = 4 if" in capped.submission
    assert capped.summary == "running_sum scans only the first 4 elements (12 steps of a scan over a length)"
    assert "with _replaced(cond=_cond):" in made["gate.without_case"].submission
    assert "with _replaced(cond=_cond):" in made["gate.lookalike_constant_case"].submission
    # the one variant the reference gives nothing to change in: a switch written as nested conds
    skipped = {n: m.not_applicable for n, m in made.items() if m.not_applicable}
    assert skipped == {"gate.lookalike_nested_cond":
                       "gate uses no switch this variant can write as nested lax.cond (it knows switch)"}
    for mutant in made.values():
        if not mutant.not_applicable:
            compile(mutant.submission, mutant.name, "exec")


CUMSUM_REFERENCE = LOOPS_REFERENCE.replace('''    def step(total, v):
        total = total + v
        return total, total

    _, sums = lax.scan(step, jnp.zeros((), x.dtype), x)
    return sums''', "    return jnp.cumsum(x)")
SCAN_BY_NAME_REFERENCE = LOOPS_REFERENCE.replace(
    "from jax import lax\n", "from jax import lax\nfrom jax.lax import scan\n").replace("lax.scan(step", "scan(step")


@pytest.mark.parametrize("reference, why", [
    (CUMSUM_REFERENCE, ""),
    (SCAN_BY_NAME_REFERENCE, "; its source names scan, but not called as jax.lax.scan while it is traced, the "
                             "attribute a derived cell replaces"),
], ids=["cumsum", "scan_imported_by_name"])
def test_a_family_with_nothing_to_change_in_the_reference_says_not_applicable(loops, tmp_path, reference,
                                                                             why) -> None:
    """The spec asks for a while loop (and hidden checks), the reference loops with no construct the
    loop families know: their mutants are rows "not applicable" with the reason, never graded."""
    from grader.course.validate import _Validator

    loops(reference)
    made, _ = _loops_derived(reference)
    assert made["running_sum.without_while"].not_applicable == (
        "running_sum uses no loop this family can unroll (it knows while_loop, fori_loop, scan, map)" + why)
    assert made["running_sum.loop_capped"].not_applicable == (
        "running_sum uses no loop this family can cap (it knows while_loop, fori_loop, scan, map)" + why)
    validator = _Validator("loops", tmp_path / "scratch", 1, None)
    _, items = validator.plan()  # type: ignore[misc]
    rows = {r.item: r for r in validator.rows}
    assert rows["derived running_sum.loop_capped"].ok
    assert rows["derived running_sum.loop_capped"].detail.startswith("not applicable: running_sum uses no loop")
    assert not [i for i in items if i.key in ("derived running_sum.loop_capped", "derived running_sum.without_while")]
    assert validator.not_applicable == {**dict.fromkeys(validator.not_applicable, 0), "construct_removed": 1,
                                        "overfit": 1, "honest": 1}
    matrix = {r.mutant: r for r in validator.matrix}
    assert matrix["running_sum.without_while"].expected == ["running.uses_scan"]
    assert not matrix["running_sum.without_while"].survived


def test_declaring_a_mutant_that_is_not_applicable_equivalent_is_stale(loops, tmp_path) -> None:
    from grader.course.validate import _Validator

    declared = LOOPS_SPEC.replace('[[exercises.functions]]\nname = "running_sum"', '[[exercises.equivalent]]\n'
                                  'mutant = "running_sum.loop_capped"\nreason = "it is the reference"\n\n'
                                  '[[exercises.functions]]\nname = "running_sum"', 1)
    loops(CUMSUM_REFERENCE, declared)
    validator = _Validator("loops", tmp_path / "scratch", 1, None)
    validator.plan()
    row = next(r for r in validator.rows if r.item == "derived running_sum.loop_capped")
    assert not row.ok and row.detail.endswith("it is declared equivalent: remove the declaration")


def test_a_cell_that_replaces_nothing_the_function_calls_is_not_applicable(loops) -> None:
    """The safety net: whatever the family, a cell whose `_replaced(...)` names no construct the
    function uses would be the reference itself."""
    from grader.course.mutation import snippets
    from grader.course.mutation.families import _Builder

    loops()
    made, facts = _loops_derived()
    interface = derive(assignments.load("loops"), 1)
    build = _Builder(LOOPS_REFERENCE, interface, facts)
    use = interface.functions["running_sum"]
    build.add("running_sum.while_only", "construct_removed", "unrolls while loops", use,
              snippets.without_while("running_sum", 100, 10))  # while_loop and fori_loop only
    [mutant] = build.made
    assert mutant.not_applicable == ("its cell replaces while_loop, fori_loop, which running_sum never calls: it "
                                     "would be the reference itself")
    assert "with _replaced(while_loop=_while_loop, fori_loop=_fori_loop):" in mutant.submission


SCANS = """
import jax
import jax.numpy as jnp
from jax import lax


@jax.jit
def running(x):
    return lax.scan(lambda c, v: (c + v, c + v), jnp.zeros((), x.dtype), x)[1]


@jax.jit
def from_the_end(x):
    return lax.scan(lambda c, v: (c + v, c * v), jnp.zeros((), x.dtype), x, reverse=True)


def powers(a, n):
    return lax.scan(lambda c, _: (c * a, c), jnp.ones(()), None, length=n)


@jax.jit
def squares(x):
    return lax.map(lambda v: v * v, x)


@jax.jit
def shifted_squares(x, k):
    return jax.vmap(lambda v, k: v * v + k, in_axes=(0, None))(x, k)


def step(w, b):
    return w * 0.5, b + 1.0


def rows(x):
    return x * 2.0, x.shape[0]
"""


def _as_mutant(target: str, body: str):
    from grader.course.mutation import snippets

    namespace: dict = {}
    exec(SCANS + snippets.cell("m", target, body), namespace)  # noqa: S102 - a derived cell on a test's reference
    return namespace[target]


def _same(a, b) -> bool:
    import jax
    import numpy as np

    pairs = zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True)
    return all(np.shape(x) == np.shape(y) and np.allclose(x, y) for x, y in pairs)


@pytest.mark.parametrize("target, args", [
    ("running", ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0],)), ("from_the_end", ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0],)),
    ("powers", (2.0, 5)), ("powers", (2.0, 0)), ("squares", ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0],))])
def test_scan_and_map_unrolled_capped_and_peeled(target, args) -> None:
    """Unrolled: the same values, no while in the program. Capped at 4 elements (3 steps of a
    length): right up to there, wrong beyond. Peeled: right for any length but 0."""
    import jax
    import jax.numpy as jnp

    from grader.course.mutation import snippets

    args = tuple(jnp.asarray(a, jnp.float32) if isinstance(a, list) else a for a in args)
    namespace: dict = {}
    exec(SCANS, namespace)  # noqa: S102
    reference = namespace[target](*args)
    unrolled = _as_mutant(target, snippets.without_while(target, 100, 10, ("scan", "map")))
    assert _same(unrolled(*args), reference)
    if target != "powers":
        assert "while" not in jax.jit(unrolled).lower(*args).as_text()
    steps = args[1] if target == "powers" else 6
    capped = _as_mutant(target, snippets.loops_capped(target, 12, 3, 4, ("scan", "map")))(*args)
    assert _same(capped, reference) == (steps <= (3 if target == "powers" else 4))
    if target != "squares":
        for which in ("first", "last"):
            peeled = _as_mutant(target, snippets.iteration_peeled(target, which, ("scan",)))(*args)
            assert _same(peeled, reference) == (steps > 0), which


def test_vmap_mapped_with_lax_map_is_a_loop_with_the_same_values() -> None:
    import jax.numpy as jnp

    from grader.course.mutation import snippets

    x = jnp.arange(6.0)
    namespace: dict = {}
    exec(SCANS, namespace)  # noqa: S102
    looped = _as_mutant("shifted_squares", snippets.without_vmap("shifted_squares"))
    assert _same(looped(x, 1.5), namespace["shifted_squares"](x, 1.5))
    assert "while" in looped.lower(x, 1.5).as_text()


def test_an_extra_axis_fed_back_by_a_loop_stays_one_axis() -> None:
    """`out0_extra_axis` adds a leading axis to every call's output, also to one of a higher rank than
    the reference's (a batch), but a loop feeding it back keeps one axis, not one more each step (each
    a new shape to compile: `step` in a 300-step loop ran out of its time in every grading)."""
    import jax.numpy as jnp

    from grader.course.mutation import snippets

    step = _as_mutant("step", snippets.output_changed("step", snippets.extra_axis(0, 0)))
    w, b = step(jnp.float32(0.0), jnp.float32(1.0))
    assert jnp.shape(w) == (1,) and jnp.shape(b) == ()
    for _ in range(3):
        w, b = step(w, b)
    assert jnp.shape(w) == (1,)
    rows = _as_mutant("rows", snippets.output_changed("rows", snippets.extra_axis(0, 1)))
    assert jnp.shape(rows(jnp.ones((3, 4)))[0]) == (1, 3, 4)  # a rank above the reference's: not a loop's


@pytest.mark.kernel
def test_show_prints_a_mutant_s_source_and_names_near_matches(loops, capfd) -> None:
    folder = loops()
    (folder / "mutants").mkdir()
    (folder / "mutants" / "gate_inverted.py").write_text(
        "# fails: gate.visible, gate.hidden\n# the other branch\n@jax.jit\ndef gate(x, t):\n"
        "    return lax.cond(x > t, lambda v: jnp.zeros_like(v), lambda v: v - t, x)\n")
    root = str(folder.parent)

    def show(ident: str):
        """`grade validate loops --assignments ROOT --show IDENT`, run in this process: one
        introspection of the reference serves every call."""
        return validate_in_process(capfd, "loops", "--assignments", root, "--show", ident)

    capped = show("running_sum.loop_capped")
    assert capped.returncode == 0, capped.stderr
    assert capped.stdout.startswith(LOOPS_REFERENCE) and "with _replaced(scan=_scan):" in capped.stdout
    assert show("derived running_sum.loop_capped").stdout == capped.stdout  # as a row names it
    hand = show("gate_inverted")
    assert hand.returncode == 0 and hand.stdout.endswith("lambda v: v - t, x)\n") and "# %% [mutant]" in hand.stdout
    skipped = show("gate.lookalike_nested_cond")
    assert skipped.returncode == 0 and skipped.stdout.startswith("# gate.lookalike_nested_cond: not applicable: ")
    wrong = show("running_sum.loop_caped")
    assert wrong.returncode == 2 and wrong.stdout == ""
    assert wrong.stderr.strip().splitlines() == [
        "grade: loops has no mutant or honest variant 'running_sum.loop_caped'; did you mean "
        "running_sum.loop_capped or running_sum.jnp_as_np or running_sum.arg0_clipped?"]


def test_the_matrix_shows_a_mutant_that_is_not_applicable_blank() -> None:
    rows = [MatrixRow(mutant="scale.loop_capped", family="overfit", exercises=["scale"], killed_by=[],
                      survived=False, not_applicable="scale uses no loop this family can cap")]
    validation = _validation(rows)
    text = matrix_table(validation.assignments[0])
    line = next(line for line in text.splitlines() if line.startswith("  scale.loop_capped"))
    assert line.endswith("overfit                 not applicable")
    assert "survivors: none; not applicable: 1" in text
    assert "scale uses no loop this family can cap" in page(validation)


@pytest.mark.kernel
def test_a_scan_and_a_cond_reference_validate_with_no_equivalence_declared(loops, tmp_path, warm,
                                                                          capfd) -> None:
    """Every derived mutant of a lax.scan reference and a lax.cond-only one is killed or not
    applicable; validate passes with no [[exercises.equivalent]] (it reported running_sum's
    without_while and loop_capped as survivors when the loop families knew while_loop and
    fori_loop only)."""
    loops()
    done = validate_in_process(capfd, "loops", "-j", "1", "--json", str(tmp_path / "v.json"))
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "v.json").read_text())["assignments"][0]
    matrix = {m["mutant"]: m for m in result["matrix"]}
    assert all(m["killed_by"] or m["not_applicable"] for m in matrix.values() if m["family"] != "honest")
    assert matrix["running_sum.without_while"]["killed_by"] == ["running.uses_scan"]
    assert matrix["running_sum.loop_capped"]["killed_by"] == ["running.hidden"]
    assert matrix["gate.without_case"]["killed_by"] == ["gate.uses_cond"]
    assert {n for n, m in matrix.items() if m["not_applicable"]} == {"gate.lookalike_nested_cond"}
    assert result["not_applicable"]["honest"] == 1
    assert "survivors: none; not applicable: 1" in done.stdout
    assert "honest gate.lookalike_nested_cond  (not applicable: gate uses no switch" in done.stdout


def test_the_constructs_a_source_names_follow_its_helpers_and_jax_s_imports_only() -> None:
    """What stands for a function's constructs when it cannot be traced: `lax.<name>`, `jax.<name>`,
    a name imported from jax (by any alias), in its helpers too; not Python's `map` nor a variable
    called `cond`."""
    from grader.course.mutation.introspect import written_constructs

    source = ("import jax\nfrom jax import lax\nfrom jax.lax import scan as sc\n\n"
              "def helper(x):\n    return sc(lambda c, v: (c, v), 0, x)\n\n"
              "@jax.jit\ndef f(x):\n    cond = x > 0\n    return list(map(str, [1])), helper(x), lax.cond(cond, g, g)\n\n"
              "def g():\n    return map(abs, [1])\n")
    assert written_constructs(source, "f") == ["scan", "cond", "jit"]
    assert written_constructs(source, "g") == []
    assert written_constructs("def (", "f") is None


# ----------------------------------------------------------------------------- honest forms per mode (honest_forms.py)

# One function per mode and shape of reference: what the text allows each (`judged`) decides which
# honest forms it gets, and what the reference is (jitted, a def, a lax loop, NumPy too) where.
MODES = '''
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

OFFSET = np.float32(0.5)


@jax.jit
def traced_sum(x, n):
    return lax.fori_loop(0, n, lambda i, t: t + x[i], jnp.zeros((), x.dtype)) + OFFSET


@jax.jit
def either_sum(x, n):
    return lax.fori_loop(0, n, lambda i, t: t + x[i], jnp.zeros((), x.dtype))


def eager_halvings(a):
    return lax.while_loop(lambda s: s[0] > 1.0, lambda s: (s[0] / 2, s[1] + 1), (a, 0))


def either_scan(xs):
    return lax.scan(lambda c, v: (c + v, c * v), jnp.zeros((), xs.dtype), xs)


either_lambda = jax.jit(lambda x: jnp.cos(x))


def either_pair(x):
    return [jnp.sum(x), np.float32(2.0) * x]


@jax.jit
def helper_sum(x, n):
    return lax.fori_loop(0, n, lambda i, t: t + x[i], jnp.zeros((), x.dtype))


def eager_twice(x, n):
    return lax.fori_loop(0, 2, lambda i, t: t + helper_sum(x, n), jnp.zeros((), x.dtype))
'''

_X6 = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
MODE_USES = {  # name: (judged, sample arguments)
    "traced_sum": ("traced", lambda np: [np.asarray(_X6, np.float32), 4]),
    "either_sum": ("either", lambda np: [np.asarray(_X6, np.float32), 4]),
    "eager_halvings": ("eager", lambda np: [np.float32(37.0)]),
    "either_scan": ("either", lambda np: [np.asarray(_X6[:3], np.float32)]),
    "either_lambda": ("either", lambda np: [np.float32(0.3)]),
    "either_pair": ("either", lambda np: [np.asarray(_X6[:2], np.float32)]),
    "eager_twice": ("eager", lambda np: [np.asarray(_X6, np.float32), 3]),
}
NEW_FORMS = ("without_jit", "host_numpy", "python_loop", "jnp_as_np")


def _modes(reference: str = MODES, unwrapped: tuple[str, ...] = ()) -> tuple[dict, object]:
    """The derived honest variants of MODES (name -> variant), introspected in this process;
    `unwrapped` functions are told to have no __wrapped__ (then without_jit re-makes their def)."""
    import numpy as np

    from grader.course.mutation.interface import FunctionUse, Interface

    uses = {name: FunctionUse(name=name, exercises=["e"], checks=[f"e.{name}"],
                              own_checks=[f"e.{name}", f"e.{name}_pure"], judged=judged, sample=sample(np),
                              arity=len(sample(np)))
            for name, (judged, sample) in MODE_USES.items()}
    interface = Interface(functions=uses)
    facts = introspect(reference, {k: v.sample for k, v in uses.items()}, [])
    for name in unwrapped:
        facts.functions[name].wrapped = False
    return {m.name: m for m in derive_mutants(reference, interface, facts) if m.honest}, interface


def _forms(made: dict, function: str) -> set[str]:
    return {n.split(".", 1)[1] for n, m in made.items() if n.startswith(function + ".") and not m.not_applicable
            and n.endswith(NEW_FORMS + ("logs_with_float", "as_tuple"))}


def test_honest_forms_follow_how_each_function_is_judged() -> None:
    """jit optional ('either'): un-jitted, on the host, a Python loop; plain Python ('eager'): its
    forms and the last two; a 'traced' function, whose text requires jit: only jax.numpy as np."""
    made, _ = _modes()
    assert _forms(made, "traced_sum") == {"jnp_as_np"}
    assert _forms(made, "either_sum") == {"without_jit", "host_numpy", "python_loop", "jnp_as_np"}
    assert _forms(made, "eager_halvings") == {"logs_with_float", "host_numpy", "python_loop"}  # no jnp in it
    assert _forms(made, "either_scan") == {"host_numpy", "python_loop", "jnp_as_np"}
    assert _forms(made, "either_lambda") == {"without_jit", "host_numpy"}
    assert _forms(made, "either_pair") == {"host_numpy", "as_tuple"}  # a list asked: a tuple given
    assert _forms(made, "eager_twice") == {"logs_with_float", "host_numpy", "python_loop", "jnp_as_np"}
    skipped = {n: m.not_applicable for n, m in made.items() if m.not_applicable}
    assert skipped == {  # eager_twice is no 'either' function: never asked for without_jit
        "either_scan.without_jit": "either_scan is not a jax.jit result in the reference: the reference itself is "
                                   "its un-jitted form",
        "either_pair.without_jit": "either_pair is not a jax.jit result in the reference: the reference itself is "
                                   "its un-jitted form",
        "either_lambda.jnp_as_np": "either_lambda is bound by an assignment (a lambda, or a function a factory "
                                   "builds) in the reference, not by a def: there is no source of it to rewrite",
        "either_pair.jnp_as_np": "either_pair uses np (NumPy) as well as jnp: with np bound to jax.numpy it would "
                                 "be another function",
    }
    # what the others call as the reference wrote it stays graded whole; what they could not call, alone
    assert made["either_sum.without_jit"].expected == made["either_sum.jnp_as_np"].expected == []
    assert made["either_sum.host_numpy"].expected == ["e.either_sum", "e.either_sum_pure"]
    assert made["either_sum.python_loop"].expected == ["e.either_sum", "e.either_sum_pure"]
    for variant in made.values():
        if not variant.not_applicable:
            compile(variant.submission, variant.name, "exec")


def _as_kernel_passes(args: list) -> list:
    """A check's arguments as the kernel passes them: arrays as JAX arrays, Python numbers as they are."""
    import jax.numpy as jnp
    import numpy as np

    return [jnp.asarray(a) if isinstance(a, (np.ndarray, np.generic)) else a for a in args]


def _run(submission: str) -> dict:
    namespace: dict = {}
    exec(submission, namespace)  # noqa: S102 - the test's reference and a derived cell
    return namespace


def test_honest_forms_give_the_reference_s_values_in_their_own_form() -> None:
    import jax
    import numpy as np

    made, interface = _modes()
    reference = _run(MODES)
    for name, variant in sorted(made.items()):
        function, form = name.split(".", 1)
        if variant.not_applicable or form not in NEW_FORMS:
            continue
        args = _as_kernel_passes(interface.functions[function].sample)
        jax.clear_caches()  # a jitted helper traces again inside the variant's call
        space = _run(variant.submission)
        got = space[function](*args)
        assert _same(got, reference[function](*args)), name
        assert space["np"] is np, name  # the module's own np stays NumPy
        traces = True
        try:
            jax.jit(space[function]).trace(*args)
        except Exception:  # noqa: BLE001 - what cannot be traced is called eagerly
            traces = False
        if form == "host_numpy":
            assert not traces, name
            assert all(isinstance(v, (np.ndarray, int, float)) for v in jax.tree_util.tree_leaves(got)), name
        if form == "without_jit":
            assert not hasattr(space[function], "lower"), name
        if form == "python_loop":
            assert not hasattr(space[function], "lower"), name
            # a traced bound or predicate cannot drive a Python loop; a scan unrolls over its static length
            assert traces == (function not in ("either_sum", "eager_halvings")), name
        if form == "jnp_as_np":
            fn = getattr(space[function], "__wrapped__", space[function])
            assert fn.__globals__["np"] is jax.numpy, name
            assert hasattr(space[function], "lower") == hasattr(reference[function], "lower"), name  # as jitted


def test_a_python_loop_leaves_a_jitted_helper_s_loop_to_the_helper() -> None:
    """eager_twice loops twice in Python over helper_sum, whose own fori_loop is traced inside the call
    with a traced bound: the helper keeps its lax loop, the values stay the reference's."""
    import jax
    import numpy as np

    made, _ = _modes()
    args = _as_kernel_passes([np.asarray(_X6, np.float32), 3])
    jax.clear_caches()
    looped = _run(made["eager_twice.python_loop"].submission)["eager_twice"]
    assert float(looped(*args)) == 2 * (1.0 + 2.0 + 3.0)


def test_without_jit_re_makes_a_def_whose_jit_result_has_no_wrapped() -> None:
    made, interface = _modes(unwrapped=("either_sum",))
    variant = made["either_sum.without_jit"]
    cell = variant.submission.split("# %% [derived mutant")[1]
    assert "def either_sum(x, n):" in cell and "@jax.jit" not in cell
    space = _run(variant.submission)
    assert not hasattr(space["either_sum"], "lower")
    args = _as_kernel_passes(interface.functions["either_sum"].sample)
    assert _same(space["either_sum"](*args), _run(MODES)["either_sum"](*args))
    lambda_only, _ = _modes(unwrapped=("either_lambda",))
    assert lambda_only["either_lambda.without_jit"].not_applicable == (
        "its jax.jit result has no __wrapped__, and either_lambda is bound by an assignment (a lambda, or a "
        "function a factory builds) in the reference, not by a def: there is no source of it to rewrite")


def test_a_tuple_of_bools_gets_the_list_form_and_a_list_the_tuple_form() -> None:
    from grader.course.mutation.interface import Interface, NameUse
    from grader.course.mutation.introspect import ReferenceFacts

    def names(value: str) -> set[str]:
        use = NameUse(name="answers", exercises=["d"], checks=["d.one"])
        facts = ReferenceFacts(values={"answers": value})
        made = derive_mutants("answers = 1\n", Interface(names={"answers": use}), facts)
        return {m.name for m in made if m.honest and m.name.startswith("answers.")}

    as_forms = {"answers.as_numpy_bool_array", "answers.as_zero_one_ints"}
    assert names("[True, False]") == as_forms | {"answers.as_tuple"}
    assert names("(True, False)") == as_forms | {"answers.as_list"}
    assert names("(True,)") == as_forms | {"answers.as_list"}
    assert names("'TF'") == set()


def test_a_hand_written_mutant_that_does_not_parse_is_its_own_failed_row(tiny, tmp_path) -> None:
    """Found by an author: a mutant with a syntax error passed the checks it declared failing (its
    cell only raised) and validate reported it as surviving, without a word of the syntax error.
    Now its row says where it does not parse, and the other mutants are still graded."""
    from grader.course.validate import _Validator

    folder = tiny(spec())
    (folder / "mutants").mkdir()
    (folder / "mutants" / "broken.py").write_text("# fails: scale.values\n# a typo\ndef scale(x, k)\n    return x\n")
    (folder / "mutants" / "fine.py").write_text("# fails: scale.values\n# k ignored\ndef scale(x, k):\n"
                                                "    return x\n")
    validator = _Validator("tiny", tmp_path / "scratch", 1, None)
    _, items = validator.plan()  # type: ignore[misc]
    row = next(r for r in validator.rows if r.item == "mutant broken")
    assert not row.ok and row.detail.startswith("broken.py, line 3: expected ':'")
    assert [i.key for i in items if i.kind == "mutant"] == ["mutant fine"]


@pytest.mark.parametrize("texts, solution_cell, said", [
    ("[exercises]\nscale = 'Scale x.'\n", "scale", None),
    ("[exercises]\nscale = 'Scale x.'\nbogus = 'What?'\n", "scale", "notebook.toml's [exercises] name exercises the "
                                                                    "spec lacks: bogus"),
    ("[exercises]\n", "scale", "notebook.toml's [exercises] lack scale"),
    ("[exercises]\nscale = 'Scale x.'\n", "scael", "solutions/tiny.py's cells name exercises the spec lacks: scael; "
                                                  "lack scale"),
], ids=["right", "bogus-text", "missing-text", "misspelt-cell"])
def test_the_notebook_texts_and_the_reference_cells_name_the_spec_s_exercises(tiny, tmp_path, texts,
                                                                              solution_cell, said) -> None:
    """Found by an author: an exercise id in notebook.toml that the spec lacks passed validate, and
    the student's self-check cell then said "ch3-vmap has no exercise 'bogus'"; a misspelt
    `# %% [dampin]` cell passed too, and the notebook script raised KeyError."""
    from grader.course.validate import NOTEBOOK_ITEM, _Validator

    folder = tiny(spec())
    (folder / "notebook.toml").write_text("intro = 'Tiny.'\nsetup = 'import jax'\n" + texts)
    solution = tmp_path / "solutions" / "tiny.py"
    solution.write_text(solution.read_text().replace("# %% [scale]", f"# %% [{solution_cell}]"))
    validator = _Validator("tiny", tmp_path / "scratch", 1, None)
    validator.plan()
    row = next(r for r in validator.rows if r.item == NOTEBOOK_ITEM)
    assert row.ok == (said is None) and (said is None or row.detail == said), row.detail


def test_an_equivalent_declaration_cannot_excuse_an_honest_variant(tiny, tmp_path) -> None:
    """Found by an author: declaring the honest variant that lost points equivalent was accepted and
    ignored (the row still failed, the declaration never said stale)."""
    from grader.course.validate import _Validator

    tiny(spec() + '\n[[exercises.equivalent]]\nmutant = "scale.rounded_differently"\nreason = "rounding"\n')
    validator = _Validator("tiny", tmp_path / "scratch", 1, None)
    loaded, items = validator.plan()  # type: ignore[misc]
    validator._stale_declarations(loaded, items)
    row = next(r for r in validator.rows if r.item == "equivalent declarations name derived mutants")
    assert not row.ok and row.detail.startswith("scale.rounded_differently is an honest variant, which must keep")
