"""A check's points follow what it measures (docs/writing-an-assignment.md, "How answers are compared").

One root cause, one message; but a check whose own property holds earns its points when the
values are wrong: the shape is kept, the program has no per-element switch, it runs under
jax.jit. A structure or compile check's program counts as evidence when it is the student's
attempt at the function (grader/checks/evidence.py), which a table of the notebook's answers is
not (tests/test_hardcoded.py grades the complete one).
"""

from __future__ import annotations

import pytest
from warm_grading import grade_warm

from grader import GradeOptions, Report
from grader.assignment import load
from grader.cases import Case
from grader.checks.evidence import RightValues, is_evidence
from grader.checks.numeric import agreeing, covers, mismatch
from grader.judging.plan import plan

SEED = 3
TAX_VALUE_CHECKS = {"tax.switch_visible": 4, "tax.switch_hidden": 4, "tax.vectorized_visible": 3,
                    "tax.vectorized_hidden": 3}


def grade(path, exercises: tuple[str, ...] | None = None) -> Report:
    """`exercises`: grade only those (a test that reads no other exercise's checks or score need
    not pay for them; the notebook's cells all still run)."""
    return grade_warm(path, GradeOptions(assignment="ch2-jit", seed=SEED, exercises=exercises))


def tax_checks(report: Report) -> dict:
    return {c.id: c for e in report.exercises if e.id == "tax" for c in e.checks}


# ---------------------------------------------------------------------------- the rule, on counts


@pytest.mark.parametrize("visible, drawn, evidence", [
    ((11, 13), (25, 39), True),    # one wrong bracket: wrong on the examples in it as on the draws in it
    ((5, 13), (16, 39), True),     # a wrong rate the later brackets' base derives from: still an attempt
    ((13, 13), (23, 39), False),   # a table of the examples: right on all of them, on 59 % beyond
    ((12, 13), (23, 39), False),   # the same table made wrong on one example on purpose
    ((1, 13), (3, 39), False),     # a decoy beside the construct: right on almost nothing
    ((1, 1), (0, 0), True),        # no draws (the self-check): the check's own cases decide
    ((0, 0), (0, 3), False),       # a compile check whose own calls are drawn, all wrong
    ((0, 0), (3, 3), True),
], ids=["one-bracket", "derived-base", "table", "table-one-wrong", "decoy", "no-draws", "drawn-wrong",
        "drawn-right"])
def test_a_program_is_evidence_when_it_is_an_attempt_not_a_table(visible, drawn, evidence) -> None:
    assert is_evidence(RightValues(*visible), RightValues(*drawn)) is evidence


def test_values_are_counted_number_by_number_and_a_wrong_form_counts_as_wrong() -> None:
    import numpy as np

    expected = np.array([0.0, 1.0, 2.0])
    assert agreeing(np.array([0.0, 1.0, 5.0]), expected, 1e-5, 1e-2) == 2
    assert agreeing(np.array([[0.0, 1.0, 2.0]]), expected, 1e-5, 1e-2) == 0  # another shape
    assert agreeing((np.array(1.0), np.array(9.0)), (1.0, 2.0), 1e-5, 1e-5) == 1
    assert agreeing(np.array(1.0), (1.0, 2.0), 1e-5, 1e-5) == 0  # one value where two were asked
    assert mismatch(np.array([0.0, 1.0, 5.0]), expected, 1e-5, 1e-2, values=False) is None
    assert "shape" in mismatch(np.array([0.0, 1.0]), expected, 1e-5, 1e-2, values=False)


def test_a_check_re_tests_values_only_on_inputs_another_check_called() -> None:
    import numpy as np

    twelve = Case(args=(np.arange(12, dtype=np.float32),))
    assert covers(Case(args=(np.arange(12, dtype=np.float32).reshape(3, 4),)), twelve)
    assert covers(Case(args=(np.float32(5.0),)), twelve)
    assert not covers(Case(args=(np.float32(12.0),)), twelve)
    assert not covers(Case(args=(np.float32(5.0), 1e-6)), twelve)


def test_the_shape_and_jit_checks_re_test_the_notebook_s_incomes_and_the_hidden_one_does_not() -> None:
    checks = {c.full_id: c for _, built in plan(load("ch2-jit"), SEED) for c in built}
    visible = checks["tax.vectorized_visible"]
    assert checks["tax.vectorized_keeps_shape"].retests(visible)
    assert checks["tax.vectorized_under_jit"].retests(visible)
    assert not checks["tax.vectorized_hidden"].retests(visible)
    assert not checks["tax.switch_hidden"].retests(checks["tax.switch_visible"])
    assert not checks["tax.vectorized_keeps_shape"].retests(checks["tax.switch_visible"])  # another function


# ---------------------------------------------------------------------------- graded end to end


@pytest.mark.kernel
def test_one_wrong_bracket_rate_costs_only_the_value_checks(submission_from_reference, reference_sections) -> None:
    """The reference with 25 % instead of 20 % from 40,000, in both functions (the rate table
    tax_switch reads, and tax_vectorized's literal): 14 points, the four value checks', where the
    structure, shape and jit checks took 21 before."""
    path = submission_from_reference("setup", "tax", "newton", "detective", "training")
    text = path.read_text(encoding="utf-8")
    wrong = (text.replace("rates = np.array([0.0, 0.10, 0.20, 0.30]", "rates = np.array([0.0, 0.10, 0.25, 0.30]")
             .replace("3000 + (income - 40000) * 0.20", "3000 + (income - 40000) * 0.25"))
    assert wrong.count("0.25") == 2
    path.write_text(wrong, encoding="utf-8")
    report = grade(path)
    tax = tax_checks(report)
    assert {cid for cid, c in tax.items() if c.status != "passed"} == set(TAX_VALUE_CHECKS)
    assert report.score == 100 - sum(TAX_VALUE_CHECKS.values())
    assert tax["tax.switch_hidden"].message.startswith(
        "same wrong values as “tax_switch on the notebook's incomes”")
    assert tax["tax.vectorized_hidden"].message.startswith(
        "same wrong values as “tax_vectorized on the notebook's incomes”")


@pytest.mark.kernel
def test_never_vectorizing_loses_the_whole_array_points(submission_from_reference) -> None:
    report = grade(submission_from_reference("setup", "tax", "tax_vectorized_loops_over_elements.py", "newton",
                                             "detective", "training"))
    tax = tax_checks(report)
    assert {cid for cid, c in tax.items() if c.status != "passed"} == {"tax.vectorized_handles_arrays"}
    assert "loop over its elements" in tax["tax.vectorized_handles_arrays"].message
    assert report.score == 100 - 2


@pytest.mark.kernel
def test_a_lost_shape_is_its_own_cause_beside_wrong_values(submission_from_reference) -> None:
    # tax's checks alone are read: the other exercises need not be graded
    report = grade(submission_from_reference("setup", "tax", "tax_vectorized_wrong_rate_and_flattened.py", "newton",
                                             "detective", "training"), exercises=("tax",))
    tax = tax_checks(report)
    failing = {cid for cid, c in tax.items() if c.status != "passed"}
    assert failing == {"tax.vectorized_visible", "tax.vectorized_hidden", "tax.vectorized_keeps_shape"}
    shape = tax["tax.vectorized_keeps_shape"].message
    assert "returned shape (12,), expected shape (3, 4)" in shape and "same wrong values" not in shape
    assert tax["tax.vectorized_under_jit"].status == "passed"


@pytest.mark.kernel
def test_tables_earn_nothing_from_structure_checks_even_wrong_on_one_example(submission_from_reference) -> None:
    # tax's checks alone are read: the other exercises need not be graded
    report = grade(submission_from_reference("setup", "tax_tables_wrong_on_one_example.py", "newton", "detective",
                                             "training"), exercises=("tax",))
    tax = tax_checks(report)
    for cid in ("tax.switch_uses_cond", "tax.vectorized_handles_arrays"):
        assert tax[cid].status == "failed", cid
        assert tax[cid].message.startswith("same wrong values as"), tax[cid].message
    # the instructor's report says why: right on nearly every visible value, far less often beyond
    assert "right on 12 of 13 visible values" in (tax["tax.switch_uses_cond"].counterexample or "")
    assert "right on 80 of 87 visible values" in (tax["tax.vectorized_handles_arrays"].counterexample or "")
