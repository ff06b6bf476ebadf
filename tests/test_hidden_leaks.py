"""Nothing of a hidden input reaches a student: not its values (baked into a program, the
student's code can raise or stash them), not how many hidden inputs failed, not their shapes.

One submission attacks every way at once, graded end to end; every student-facing output (the
terminal, the report's messages, the feedback page, Gradescope's results.json) is searched for
the hidden values the instructor's side draws for the report's seed, and for counts. The
instructor's JSON keeps all of it (`counterexample`, `tally`).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from warm_grading import grade_warm

from grader import GradeOptions, Report
from grader import assignment as assignments
from grader.cases import materialize
from grader.checks.base import CheckOutcome, not_answered, not_available
from grader.views.page import page
from grader.judging.plan import observe_all, plan
from grader.judging.reveal import revealed
from grader.judging.scoring import score_check
from grader.kernel.protocol import ExportRequest, Observation, Raised, Request
from grader.outputs.exports import gradescope_results
from grader.views.terminal import summary
from grader.report import CheckResult, Environment, ExerciseResult, Isolation, SubmissionRef
from grader.report import Report as ReportModel
from grader.spec import NumericCheck
from grader.submission import read_submission

SEED = 5
COUNT = re.compile(r"\b\d+ of \d+\b")  # "wrong on 11 of 39 hidden inputs", "2 of 12 elements differ"


def _numbers(text: str) -> set[str]:
    return set(re.findall(r"\d+(?:\.\d+)?", text))


def _spellings(value: float) -> set[str]:
    """How a hidden float may be printed: repr, in a class name, rounded as a message rounds it."""
    spelled = {repr(value), str(value).replace(".", "_"), f"{value:.6g}", f"{value:.4g}"}
    return {s for s in spelled if ("." in s or "_" in s) and len(s) >= 5}  # "100000" is the spec's own


def hidden_floats(report: Report) -> set[float]:
    """The hidden checks' drawn scalar arguments (lr, w0, b0, a...), from the instructor's side:
    the cases materialized for the report's seed, minus any that a visible check also uses."""
    loaded = assignments.load(report.assignment)
    hidden, visible = set(), set()
    for exercise in loaded.spec.exercises:
        for spec in exercise.checks:
            cases = getattr(spec, "cases", None)
            if cases is None:
                continue
            drawn = materialize(cases, loaded.references, report.seed, f"{exercise.id}.{spec.id}")
            values = {float(np.asarray(a)) for case in drawn for a in case.args if np.ndim(a) == 0}
            (hidden if spec.hidden else visible).update(values)
    return {v for v in hidden - visible if v != int(v)}  # whole numbers (steps, edges) are the spec's own


def student_facing(report: Report, path) -> dict[str, str]:
    return {"terminal": summary(report, verbose=True),
            "messages": "\n".join(c.message or "" for e in report.exercises for c in e.checks),
            "html": page(report, read_submission(path).cells),
            "gradescope": "\n".join(t["output"] + t["name"] for t in gradescope_results(report)["tests"])
            + gradescope_results(report)["output"]}


@pytest.mark.kernel
def test_hidden_values_and_counts_reach_no_student(submission_from_reference) -> None:
    path = submission_from_reference("setup", "tax", "tax_wrong_only_on_hidden_incomes_and_prints_a_stash.py",
                                     "newton", "detective", "training_raises_with_its_baked_values.py")
    report = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=SEED))
    checks = {c.id: c for e in report.exercises for c in e.checks}
    # the attacks happened: the instructor's JSON holds what the student's code said, and the counts
    assert "LEAKTEXT lr=" in (checks["training.python_loop"].counterexample or "")
    agrees = checks["training.fori_agrees"]
    assert "LeakType_" in (agrees.counterexample or "") and "raised" not in (agrees.message or "")
    assert (agrees.message or "").startswith(
        "`train_fori` could not be traced by jax.jit on a hidden input: an exception")
    assert checks["tax.switch_hidden"].status == "failed" and checks["tax.switch_visible"].status == "passed"
    tally = checks["tax.switch_hidden"].tally
    assert tally is not None and 0 < tally.failed < tally.calls == 48
    assert COUNT.search(checks["tax.vectorized_hidden"].counterexample or "")  # "(k of 12 elements differ)"
    secrets = hidden_floats(report)
    assert len(secrets) > 10
    spelled = set().union(*map(_spellings, secrets))
    assert any(f"lr={v!r}" in (checks["training.python_loop"].counterexample or "") for v in secrets)
    assert "execution_time" not in gradescope_results(report)  # time spent can spell a hidden value
    lines = {f"line {round(v * 1e6)} " for v in secrets}  # the made-up cell's line that spells lr
    assert any(line in (checks["training.python_loop"].counterexample or "") for line in lines)
    for where, text in student_facing(report, path).items():
        for marker in ("LEAKTEXT", "STASHED", "PRINTEDLEAK"):  # LeakType_ names visible draws too (fori_compiles_once)
            assert marker not in text, (where, marker)
        assert not {s for s in spelled if s in text}, where
        assert not {line for line in lines if line in text}, where
    for check in checks.values():
        if check.hidden:  # no count, shape, line or number but the spec's own
            shown = check.message or ""
            assert not COUNT.search(shown) and "shape" not in shown, (check.id, shown)
            spec_text = _spec_text(report, check.id) + check.title + " ".join(checks)
            assert _numbers(shown) <= _numbers(spec_text), (check.id, shown)


def _spec_text(report: Report, check_id: str) -> str:
    exercise_id, own = check_id.split(".", 1)
    exercise = next(e for e in assignments.load(report.assignment).spec.exercises if e.id == exercise_id)
    spec = next(s for s in exercise.checks if s.id == own)
    return " ".join([spec.message, spec.hint or "", spec.title])


# ----------------------------------------------------------------------------- grader.judging.reveal alone


def hidden_numeric(**extra) -> NumericCheck:
    return NumericCheck(**{"id": "h", "title": "f on hidden values", "points": 1, "message": "f(x) should be 2x",
                           "function": "f", "reference": "f", "cases": {"generator": "g"}, "hidden": True,
                           "hint": "x runs from 0 to 1", **extra})


def test_a_wrong_hidden_check_says_pass_or_fail_and_the_hint_never_a_count() -> None:
    outcome = CheckOutcome(status="failed", message="f(x) should be 2x: f(array of 39 (shape (39,))) element 7 "
                           "is 0.07431, expected 0.1486 (11 of 39 elements differ)", tally=(11, 39), cause="values")
    shown = revealed(outcome, hidden_numeric())
    assert shown.message == "f(x) should be 2x; x runs from 0 to 1"
    assert shown.counterexample == outcome.message and shown.tally == (11, 39)
    result = score_check("ex.h", hidden_numeric(), shown)
    assert result.tally is not None and (result.tally.failed, result.tally.calls) == (11, 39)


@pytest.mark.parametrize("ename, named", [("ValueError", "ValueError"), ("LeakType_1_0_0743", "an exception"),
                                          ("ConcretizationTypeError", "ConcretizationTypeError")])
def test_what_hidden_code_raised_is_named_by_its_kind_never_its_text(ename: str, named: str) -> None:
    """A `source = "kernel"` check runs the student's code on hidden inputs in the kernel: it may
    raise with them in its text or in its class's name."""
    obs = Observation(id="call-1", status="raised", raised=Raised(ename=ename, evalue="lr=0.0743 num_steps=1", line=4))
    outcome = not_available(obs, "`f`", "f(x) should be 2x")
    assert outcome is not None and "0.0743" in (outcome.message or "")
    shown = revealed(outcome, hidden_numeric())
    assert shown.message == f"f(x) should be 2x: `f` raised {named} on a hidden input"
    assert "0.0743" in (shown.counterexample or "")


def test_a_hidden_check_shows_no_line_a_visible_pass_fail_check_does() -> None:
    """Code run on a hidden value can raise from a code object it compiled under a cell's file
    name, at a line that spells the value (`lr = 0.106514` raised at line 106514): a hidden
    check's message names no line; a visible one's (a prediction, a quiz) still does."""
    leak = Raised(ename="ValueError", evalue="x", line=106514)
    outcome = not_available(Observation(id="call-1", status="raised", raised=leak), "`f`", "f(x) should be 2x")
    assert outcome is not None
    assert "106514" not in revealed(outcome, hidden_numeric()).message
    assert "106514" in (revealed(outcome, hidden_numeric()).counterexample or "")
    visible = revealed(outcome, hidden_numeric(hidden=False, reveal="pass_fail", cases={"rows": [[1.0]], "types": ["py"]}))
    assert "at line 106514 of its cell" in visible.message


def test_a_trace_error_on_baked_hidden_values_keeps_the_chapter_s_lesson_not_the_text() -> None:
    from grader.checks.program import HINTS, could_not_trace

    raised = Raised(ename="TracerBoolConversionError", evalue="Attempted boolean conversion of lr=0.0743", line=3)
    shown = revealed(could_not_trace("f", raised, "f(x) should be 2x"), hidden_numeric())
    assert shown.message == ("`f` could not be traced by jax.jit on a hidden input: TracerBoolConversionError"
                             f": {HINTS['TracerBoolConversionError']}")
    assert "0.0743" not in shown.message and "0.0743" in (shown.counterexample or "")


@pytest.mark.parametrize("outcome, expected", [
    (CheckOutcome(status="timeout", message="f(x) should be 2x: `f` did not finish (stopped at lr=0.0743)"),
     "f(x) should be 2x: it did not finish on a hidden input"),
    (CheckOutcome(status="error", message="f(x) should be 2x: the program of `f` cannot be run by the grader "
                  "(custom call leak_0_0743)"), "f(x) should be 2x: it could not be checked on a hidden input"),
    (not_answered("lr_0_0743"), "Not answered yet: `f` is not defined."),
    (not_answered("f"), "Not answered yet: `f` is not defined."),
])
def test_every_other_failure_of_a_hidden_check_is_the_grader_s_sentence(outcome: CheckOutcome, expected: str) -> None:
    assert revealed(outcome, hidden_numeric()).message == expected


def test_the_instructor_s_counts_are_printed_by_no_student_facing_output() -> None:
    check = CheckResult(id="ex.h", title="f on hidden values", status="failed", score=0, max_score=1, hidden=True,
                        reveal="pass_fail", message="f(x) should be 2x", counterexample="f(0.0743) returned 1",
                        tally={"failed": 11, "calls": 39})
    report = ReportModel(assignment="ch2-jit", submission=SubmissionRef(path="s.py", sha256=None, kind="module"),
                         status="graded", score=0, max_score=1, seed=1, duration_s=1.0,
                         exercises=[ExerciseResult(id="ex", title="Ex", score=0, max_score=1, checks=[check])],
                         environment=Environment(grader="0", python="3", jax=None),
                         isolation=Isolation(sandboxed=True, layers=[]))
    outputs = [summary(report, verbose=True), page(report, []), str(gradescope_results(report))]
    for text in outputs:
        assert "39" not in text and "11" not in text and "0.0743" not in text
    assert '"calls": 39' in report.model_dump_json(indent=1)


class _Recorder:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def observe(self, requests: list[Request], timeout: float) -> dict[str, Observation]:
        self.asked += [r.id for r in requests]
        return {}


def test_the_kernel_meets_hidden_values_only_after_every_visible_check_is_answered(repo_root) -> None:
    """A value baked into a hidden check's export (or a kernel call on hidden inputs) can be kept
    by the student's code and printed by a later check: every visible check is asked first."""
    checks_plan = plan(assignments.load(str(repo_root / "assignments" / "ch2-jit")), seed=SEED)
    recorder = _Recorder()
    observe_all(recorder, checks_plan, probe_timeout=0)
    position = {request_id: i for i, request_id in enumerate(recorder.asked)}
    visible, hidden = set(), set()
    for exercise, checks in checks_plan:
        for spec, check in zip(exercise.checks, checks):
            (hidden if spec.hidden else visible).update(r.id for r in check.requests())
    assert hidden - visible and visible
    assert max(position[r] for r in visible) < min(position[r] for r in hidden - visible)
    assert sorted(position) == sorted(visible | hidden)  # each asked once




class _TracesAbstractlyButOne:
    """A kernel whose functions all trace with abstract arguments, but `untraceable`, which needs
    the values of the arguments at `needs` (a Python loop's count)."""

    def __init__(self, untraceable: str, needs: set[int]) -> None:
        self.untraceable, self.needs = untraceable, needs
        self.asked: list[Request] = []

    def observe(self, requests: list[Request], timeout: float) -> dict[str, Observation]:
        self.asked += requests
        raised = Raised(ename="TypeError", evalue="abstract")
        return {r.id: Observation(id=r.id, status="raised", raised=raised)
                if isinstance(r, ExportRequest) and r.target == self.untraceable and not self.needs <= set(r.fallback)
                else Observation(id=r.id, status="ok") for r in requests}


@pytest.mark.parametrize("needs, sent", [(set(), set()), ({5}, {5}), ({4, 5}, {4, 5})])
def test_a_hidden_value_enters_the_kernel_only_for_a_function_that_cannot_trace_without_it(
        repo_root, needs: set[int], sent: set[int]) -> None:
    """A hidden check's public values (drawn: hidden) reach the kernel only as far as its function
    needs them: asked with every argument abstract first, then with the Python integers alone (a
    loop's count), then with every public value. Code that traces never meets them, however it
    reads the request (a wrapped `json.loads`); a Python loop meets its count, never its `lr`."""
    checks_plan = plan(assignments.load(str(repo_root / "assignments" / "ch2-jit")), seed=SEED)

    def exports(hidden: bool) -> set[str]:
        return {r.id for exercise, checks in checks_plan for spec, check in zip(exercise.checks, checks)
                if spec.hidden is hidden for r in check.requests() if isinstance(r, ExportRequest) and r.fallback}

    hidden = exports(True) - exports(False)  # an export a visible check asks too has the notebook's values
    assert {r.target for _, checks in checks_plan for c in checks for r in c.requests() if r.id in hidden} \
        >= {"train_fori"}  # train_python_loop is plain Python: called in the kernel, never exported
    kernel = _TracesAbstractlyButOne("train_fori", needs)
    observe_all(kernel, checks_plan, probe_timeout=0)
    hidden_asks = [r for r in kernel.asked if isinstance(r, ExportRequest) and r.id in hidden]
    assert {r.target for r in hidden_asks if r.fallback} <= {"train_fori"}
    assert set().union(*(set(r.fallback) for r in hidden_asks)) == sent  # 4: lr, 5: num_steps
