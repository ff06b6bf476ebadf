"""The exported program is the answer: attacks on what the kernel reports, graded end to end.

Each submission is the reference solution (100 points) with one part replaced by a fixture from
tests/fixtures/submissions/. Before, each of these forged a verdict through a report of the
student's own process; now the grader judges the exported program, executed by its verifier.
"""

from __future__ import annotations

import pytest
from warm_grading import grade_warm

from grader import GradeOptions, Report

pytestmark = pytest.mark.kernel

SEED = 5


def grade(path, *exercises: str) -> Report:
    """Graded whole, or on `exercises` alone where a test reads only theirs (the cells all still run)."""
    return grade_warm(path, GradeOptions(assignment="ch2-jit", seed=SEED, exercises=exercises or None))


def statuses(report: Report, exercise: str) -> dict[str, str]:
    return {c.id: c.status for e in report.exercises if e.id == exercise for c in e.checks}


def messages(report: Report) -> str:
    return "\n".join(c.message or "" for e in report.exercises for c in e.checks)


def test_borrowed_jit_attributes_do_not_make_numpy_code_a_program(submission_from_reference) -> None:
    path = submission_from_reference("setup", "tax", "numpy_tax_vectorized_with_borrowed_jit_attributes.py",
                                     "newton", "detective", "training")
    tax = statuses(grade(path, "tax"), "tax")
    for cid in ("tax.vectorized_visible", "tax.vectorized_hidden", "tax.vectorized_keeps_shape",
                "tax.vectorized_under_jit"):
        assert tax[cid] != "passed", cid
    assert tax["tax.switch_visible"] == "passed"


def test_a_switch_only_for_the_structure_check_s_inputs_is_seen(submission_from_reference) -> None:
    path = submission_from_reference("setup", "tax", "tax_switch_only_for_weak_scalars.py", "newton",
                                     "detective", "training")
    report = grade(path, "tax")
    tax = statuses(report, "tax")
    assert tax["tax.switch_uses_cond"] == "failed"
    assert tax["tax.switch_visible"] == "passed" and tax["tax.switch_hidden"] == "passed"


def test_functions_are_compared_with_the_reference_not_with_each_other(submission_from_reference) -> None:
    path = submission_from_reference("setup", "tax", "newton", "detective", "python_loop_borrows_train_fori.py")
    training = statuses(grade(path, "training"), "training")
    assert training["training.python_loop"] == "failed"
    assert training["training.fori_agrees"] == "failed"


def test_no_hidden_input_reaches_the_kernel(submission_from_reference) -> None:
    """The tax functions raise, naming their argument, for any concrete value the notebook does
    not use: the kernel only traced them, so nothing was raised and the hidden checks passed."""
    path = submission_from_reference("setup", "tax", "tells_hidden_values_apart.py", "newton", "detective",
                                     "training")
    report = grade(path)
    assert "hidden value reached the kernel" not in messages(report)
    assert all(s == "passed" for s in statuses(report, "tax").values()), statuses(report, "tax")
    assert report.score == 100


def test_debugging_aids_cost_nothing(submission_from_reference) -> None:
    path = submission_from_reference("setup", "tax", "debugging_aids_inside_jit.py", "detective", "training")
    report = grade(path)
    assert report.score == 100, [(c.id, c.message) for e in report.exercises for c in e.checks
                                 if c.status != "passed"]


def test_a_python_callback_is_refused_with_a_sentence(submission_from_reference) -> None:
    path = submission_from_reference("setup", "tax", "newton_with_a_python_callback.py", "detective", "training")
    report = grade(path, "tax", "newton")  # the callback must not cost tax its points
    newton = {c.id: c for e in report.exercises if e.id == "newton" for c in e.checks}
    assert newton["newton.visible"].status == "error"
    explained = [c for c in newton.values() if "calls back into Python" in (c.message or "")]
    assert len(explained) == 1  # one root cause, one message; the other checks point to it
    assert "same tracing error as" in newton["newton.visible"].message or explained[0].id == "newton.visible"
    assert {e.id: e.score for e in report.exercises}["tax"] == 25


def test_a_forged_compile_count_cannot_pass_a_static_argument(submission_from_reference) -> None:
    """The kernel's count is a claim (here silenced to 0); the module's inputs are evidence."""
    path = submission_from_reference("setup", "tax", "newton", "static_tol_with_a_silenced_compile_count.py",
                                     "detective", "training")
    report = grade(path, "newton")
    newton = {c.id: c for e in report.exercises if e.id == "newton" for c in e.checks}
    assert newton["newton.compiles_once"].status == "failed", newton["newton.compiles_once"].message
    # a static tol costs the compile check only: the value checks bake the public tol in
    for cid in ("newton.visible", "newton.hidden", "newton.iterations", "newton.jitted"):
        assert newton[cid].status == "passed", (cid, newton[cid].message)


def test_modules_read_for_structure_and_compile_evidence_are_run_too(submission_from_reference) -> None:
    """A fake probe answered the exports only those checks read with nonsense modules (a while
    loop, every argument an input) and scored 100 for a static tol and a Python training loop."""
    # train_fori's chapter call (a Python loop unrolled under jit) compiles until its request's limit:
    # 6 s, as test_faults.py's HANG_TIMEOUT (which the rest of a submission's grading stays within on a
    # loaded machine), rather than the spec's 10 s of a compile that burns a core
    report = grade_warm(submission_from_reference("setup", "tax", "detective",
                                                  "fake_probe_answers_inspect_only_exports.py", "fake_probe_via_exec.py"),
                        GradeOptions(assignment="ch2-jit", seed=SEED, cell_timeout=6.0))
    # honestly 91; a hidden check's export is asked abstract first, which the fake answers with
    # nonsense too (the retry with the public values never comes): the hidden value checks fail
    assert report.score == 79, [(c.id, c.message) for e in report.exercises for c in e.checks
                                if c.status != "passed"]
    failing = {c.id for e in report.exercises for c in e.checks if c.status != "passed"}
    assert {"newton.compiles_once", "training.fori_uses_while", "training.fori_compiles_once"} <= failing


def test_a_module_that_is_not_base64_is_that_check_s_error(submission_from_reference) -> None:
    report = grade(submission_from_reference("setup", "tax", "newton", "detective", "training",
                                             "fake_probe_sends_bad_base64.py", "fake_probe_via_exec.py"),
                   "tax", "newton")  # tax_switch's bad module must not cost newton its points
    assert report.status == "graded"
    tax = {c.id: c.status for e in report.exercises if e.id == "tax" for c in e.checks}
    assert tax["tax.switch_visible"] == "error" and {e.id: e.score for e in report.exercises}["newton"] == 25


def test_x64_enabled_by_the_student_costs_nothing(submission_from_reference) -> None:
    """Found by the derived honest variant `reference.x64`: the traced Python scalars were
    exported as 32-bit, and train_fori's `fori_loop(0, num_steps)` refused int64 against int32."""
    report = grade(submission_from_reference("enables_x64.py", "setup", "tax", "newton", "detective", "training"))
    assert report.score == report.max_score, messages(report)


def test_no_hidden_value_in_any_student_facing_output(submission_from_reference) -> None:
    """A hidden check's failure names how many hidden inputs are wrong, never one of them or its
    expected value: not in the report's messages, the terminal, or Gradescope's output. The
    instructor's report keeps the counterexample."""
    import re

    from grader.outputs.exports import gradescope_results
    from grader.views.terminal import summary

    report = grade(submission_from_reference("setup", "tax", "newton", "detective", "training",
                                             "wrong_detective_and_tax_vectorized.py"))
    hidden = {c.id: c for e in report.exercises for c in e.checks if c.hidden and c.status == "failed"}
    assert "tax.vectorized_hidden" in hidden
    check = hidden["tax.vectorized_hidden"]
    # the visible check already shows the wrong values: this one points to it, and names no hidden value
    assert check.reveal == "pass_fail"
    assert check.message.startswith("same wrong values as “tax_vectorized on the notebook's incomes”")
    assert check.counterexample and "expected" in check.counterexample
    def numbers(text: str) -> set[str]:
        return set(re.findall(r"\d+\.\d+(?:e[+-]\d+)?", text))

    visible = set().union(*(numbers(c.message or "") for e in report.exercises for c in e.checks if not c.hidden))
    secret = numbers(check.counterexample) - visible  # the hidden incomes and their taxes
    assert secret
    student_facing = [summary(report), *(t["output"] for t in gradescope_results(report)["tests"]),
                      *(c.message or "" for e in report.exercises for c in e.checks)]
    for text in student_facing:
        assert not secret & numbers(text), text
    visible_root = next(c for e in report.exercises for c in e.checks if c.id == "tax.vectorized_visible")
    assert visible_root.counterexample is None and "expected" in visible_root.message  # a visible check teaches


def test_one_wrong_rate_is_one_message(submission_from_reference) -> None:
    """One root cause, one message: the first check the wrong values fail says which call and
    what was expected; the other value check points to it and gives no advice of its own (no
    "use jnp.select", no "keep the input's shape" to a student who did both). The checks of what
    the student did right (the shape is kept, no per-element switch, it runs under jax.jit) pass:
    one wrong rate costs the value checks' 6 points, not the exercise's 13."""
    report = grade(submission_from_reference("setup", "tax", "tax_vectorized_one_wrong_rate.py", "newton",
                                             "detective", "training"))
    tax = {c.id: c for e in report.exercises if e.id == "tax" for c in e.checks if c.status != "passed"}
    root = tax.pop("tax.vectorized_visible")
    assert "element 7 is 6888.75, expected 6111.0" in root.message and root.requirements
    assert set(tax) == {"tax.vectorized_hidden"}
    for follower in tax.values():
        root_words = "same wrong values as “tax_vectorized on the notebook's incomes”"
        assert follower.message.startswith(root_words), follower.message
        assert not follower.requirements
    advice = " ".join(c.message for c in tax.values())
    assert "jnp.select" not in advice and "shape" not in advice
    assert report.score == 100 - 3 - 3
    messages = [c.message or "" for e in report.exercises for c in e.checks]
    assert sum("6888.75" in m for m in messages) == 1  # the root cause, named once


def test_a_python_while_on_a_tracer_is_one_message_with_its_line_and_the_construct(submission_from_reference) -> None:
    report = grade(submission_from_reference("setup", "tax", "newton_python_while.py", "detective", "training"),
                   "newton")
    newton = [c for e in report.exercises if e.id == "newton" for c in e.checks if c.status != "passed"]
    explained = [c for c in newton if "TracerBoolConversionError" in (c.message or "")]
    assert len(explained) == 1, [c.message for c in newton]
    # a module's line is the file's: the fixture's `while` is line 9 of its cell, 40 of the module graded
    assert "at line 40:" in explained[0].message and "lax.while_loop" in explained[0].message
    others = [c for c in newton if c is not explained[0] and "could not be traced" not in (c.message or "")]
    assert all(c.message.startswith(f"same tracing error as “{explained[0].title}”") for c in others
               if c.message and "same" in c.message)
    assert sum(1 for c in newton if (c.message or "").startswith("same tracing error as")) >= 3


@pytest.mark.parametrize("ending", ["ends_with_x64_enabled.py", "ends_with_jit_disabled.py"])
def test_a_notebook_ending_with_x64_or_jit_disabled_is_graded_on_its_answers(submission_from_reference,
                                                                            ending: str) -> None:
    """JAX's global configuration is the student's to change; the probe sets what it relies on
    itself when it measures, so the reference with either switch at its end keeps
    every point, and a wrong answer still fails, with the message it has without the switch."""
    right = grade(submission_from_reference("setup", "tax", "newton", "detective", "training", ending,
                                            suffix=".ipynb"))
    assert (right.score, right.cell_problems) == (100, [])
    wrong = grade(submission_from_reference("setup", "tax", "tax_vectorized_one_wrong_rate.py", "newton",
                                            "detective", "training", ending, suffix=".ipynb"), "tax")
    tax = {c.id: c for e in wrong.exercises if e.id == "tax" for c in e.checks if c.status != "passed"}
    assert set(tax) == {"tax.vectorized_visible", "tax.vectorized_hidden"}
    assert "element 7 is 6888.75, expected 6111.0" in tax["tax.vectorized_visible"].message
