"""A correct notebook's self-check confirms every point that reveals no hidden value or answer.

What reveals nothing is judged before the hand-in, by the self-check as by `grade`: the form of an
answer (`kind = "form"`: ch2-jit's `predictions`, ch2-practice's `quiz_answers`), every name an
exercise asks for, and what the chapter's own self-check cells assert on the notebook's inputs.
A wrong form is told once; the answers wait for it (`skipped`, `same_as` the form check) and
the totals `grade` gives are the ones it gave, unless the form is wrong.
"""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
from warm_grading import grade_warm

from grader import GradeOptions, Report
from grader import assignment as assignments
from grader.course.validate import mutants_of
from grader.judging.reveal import judged_now
from grader.selfcheck import check

ROOT = Path(__file__).resolve().parent.parent
SEED = 4
FORM_MESSAGE = "`predictions` must hold 8 values, one per call ①-⑧ (True means it compiles)"
CALLS = [f"detective.call_{k}" for k in range(1, 9)]
QUIZ = [f"quiz.q{k}" for k in range(1, 9)]
NEW_CHECKS = {"detective.form", "newton.iterations_chapter_calls", "training.python_loop_chapter_call",
              "training.fori_chapter_lr_and_steps", "quiz.form"}

# wrong forms of `predictions` (None: not defined), and what the form check says of each
WRONG_PREDICTIONS = {
    "seven": ("[True, False, True, True, True, True, True]", "; it holds 7"),
    "string": ('"TFTTTTTT"', "; it is a string"),
    "missing": (None, "Not answered yet: `predictions` is not defined."),
    "not_bools": ("[True, False, 2.0, True, True, True, True, 'yes']",
                  "; item 3 is 2.0, item 8 is 'yes', not True or False"),
}
# wrong forms of `quiz_answers`
WRONG_QUIZ = {
    "list": ('["B", "C", "B", "C", "B", "B", "D", "C"]', "; it is a list"),
    "named_keys": ('{"q1": "B", "q2": "C"}',
                   "; it has keys that are not among 1, 2, 3, 4, 5, 6, 7, 8: 'q1', 'q2'"),
    "sentences": ('{1: "B. Each jnp operation", 2: "C"}',
                  "; the answer to 1 is 'B. Each jnp operation', not one letter"),
}


def _namespace(name: str) -> dict:
    return runpy.run_path(str(ROOT / "solutions" / f"{name}.py"))


@pytest.fixture(scope="module")
def jit_ns() -> dict:
    return _namespace("ch2-jit")


@pytest.fixture(scope="module")
def practice_ns() -> dict:
    return _namespace("ch2-practice")


def _with(namespace: dict, name: str, code: str | None) -> dict:
    """The namespace with `name` set to `code` (evaluated in it), or without it (None)."""
    changed = dict(namespace)
    if code is None:
        del changed[name]
    else:
        exec(f"{name} = {code}", changed)  # noqa: S102 - the test's own literal
    return changed


def _mutant(assignment: str, name: str):
    return next(m for m in mutants_of(assignments.resolve(assignment)) if m.name == name)


def _with_mutant(assignment: str, name: str) -> dict:
    """The notebook's namespace with a course mutant as its last cell (run whole: the reference's
    functions must see the mutant's names, as in a notebook)."""
    source = _mutant(assignment, name).submission((ROOT / "solutions" / f"{assignment}.py").read_text())
    namespace: dict = {"__name__": "__main__"}
    exec(compile(source, f"{name}.py", "exec"), namespace)  # noqa: S102 - the course's reference and mutant
    return namespace


def _self_check(capsys, exercise: str, assignment: str, namespace: dict) -> str:
    check(exercise, assignment, namespace=namespace, seed=SEED)
    return capsys.readouterr().out


def _failure_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.strip().startswith(("✗", "!", "⏱"))]


# ----------------------------------------------------------------------------- what the self-check judges


def test_what_the_self_check_leaves_to_the_hand_in_reveals_a_hidden_value_or_an_answer() -> None:
    """Measured on the spec: every check the self-check leaves to the hand-in is hidden (drawn
    inputs, whose pass/fail would be an oracle) or judges an answer (a quiz letter, a prediction);
    the form checks and the chapter's cells are judged now."""
    seen = set()
    for name in ("ch2-jit", "ch2-practice"):
        for exercise in assignments.load(name).spec.exercises:
            for spec in exercise.checks:
                full_id = f"{exercise.id}.{spec.id}"
                seen.add(full_id)
                if full_id in NEW_CHECKS:
                    assert judged_now(spec, "self_check") and spec.points == 0, full_id
                if not judged_now(spec, "self_check"):
                    answer = spec.kind == "answer" or (spec.kind == "custom" and spec.call is None)
                    assert spec.hidden or answer, full_id
    assert NEW_CHECKS <= seen


@pytest.mark.kernel
def test_the_reference_s_self_check_confirms_52_of_100_points_and_every_new_check(jit_ns, capsys,
                                                                                 monkeypatch) -> None:
    import grader.selfcheck

    results = []
    shown = grader.selfcheck.summary_exercise
    monkeypatch.setattr(grader.selfcheck, "summary_exercise", lambda ex: results.append(ex) or shown(ex))
    for exercise in ("tax", "newton", "detective", "training"):
        out = _self_check(capsys, exercise, "ch2-jit", jit_ns)
        assert _failure_lines(out) == [], out
    assert [r.score for r in results] == [18, 17, 0, 17]  # 52 of 100; the other 48: hidden inputs and answers
    judged = {c.id: c.status for r in results for c in r.checks if c.reason != "on_hand_in"}
    assert set(judged.values()) == {"passed"} and NEW_CHECKS - {"quiz.form"} <= set(judged)
    later = [c for r in results for c in r.checks if c.reason == "on_hand_in"]
    assert sum(c.max_score for c in later) == 48 and all(c.hidden or c.reveal == "on_hand_in" for c in later)


@pytest.mark.parametrize("wrong", list(WRONG_PREDICTIONS))
def test_a_wrong_form_of_predictions_is_one_message_in_the_self_check(jit_ns, capsys, wrong: str) -> None:
    code, said = WRONG_PREDICTIONS[wrong]
    out = _self_check(capsys, "detective", "ch2-jit", _with(jit_ns, "predictions", code))
    if code is None:
        assert "not answered yet" in out.lower() and "predictions" in out and _failure_lines(out) == []
        return
    (line,) = _failure_lines(out)  # one message, not one per call
    assert f"{FORM_MESSAGE}{said}" in line
    assert out.splitlines()[0].endswith(": checked when you hand in")  # its 20 points: the answers


def test_the_self_check_says_the_same_of_any_predictions_in_the_right_form(jit_ns, capsys) -> None:
    """The form passes for every 8 bool-likes: it tells nothing about which are right."""
    outputs = {_self_check(capsys, "detective", "ch2-jit", _with(jit_ns, "predictions", code))
               for code in ("[True] * 8", "[False] * 8", "predictions", "tuple(int(p) for p in predictions)",
                            "__import__('numpy').asarray(predictions)")}
    (out,) = outputs
    assert _failure_lines(out) == [] and "predicted" not in out
    nine = _with(jit_ns, "predictions", "[True] * 9")
    assert _failure_lines(_self_check(capsys, "detective", "ch2-jit", nine))


def test_a_missing_train_python_loop_is_reported_by_the_self_check(jit_ns, capsys) -> None:
    out = _self_check(capsys, "training", "ch2-jit", _with(jit_ns, "train_python_loop", None))
    lines = _failure_lines(out)
    assert lines and all("Not answered yet: `train_python_loop` is not defined." in line for line in lines)
    assert len(lines) == 2  # the two checks calling it as the chapter's cell does: one counts, one values


@pytest.mark.parametrize(("mutant", "exercise", "said"), [
    ("newton_count_always_one", "newton", "a smaller tol should take more iterations"),
    ("newton_zero_trip_from_closed_form", "newton", "less than 1"),
    ("training_fori_ignores_lr_zero", "training", "with lr=0 the parameters shouldn't change"),
    ("training_fori_five_extra_steps", "training", "different num_steps should give different results"),
    ("training_step_donates_w_and_b", "training", "train_python_loop should give the same result"),
])
def test_the_chapter_s_own_cells_are_judged_by_the_self_check(capsys, mutant: str, exercise: str,
                                                              said: str) -> None:
    """Each was judged only by a hidden check (or not before the hand-in) until now."""
    out = _self_check(capsys, exercise, "ch2-jit", _with_mutant("ch2-jit", mutant))
    assert any(said in line for line in _failure_lines(out)), out


@pytest.mark.parametrize("wrong", list(WRONG_QUIZ))
def test_a_wrong_form_of_the_quiz_is_one_message_in_the_self_check(practice_ns, capsys, wrong: str) -> None:
    code, said = WRONG_QUIZ[wrong]
    out = _self_check(capsys, "quiz", "ch2-practice", _with(practice_ns, "quiz_answers", code))
    (line,) = _failure_lines(out)
    assert "`quiz_answers` must be a dict that maps each question number" in line and said in line


def test_the_quiz_s_form_passes_on_the_reference_and_a_partial_dict(practice_ns, capsys) -> None:
    for code in ("quiz_answers", '{1: " b", 3: "B"}'):  # a question left out: not answered, not a wrong form
        out = _self_check(capsys, "quiz", "ch2-practice", _with(practice_ns, "quiz_answers", code))
        assert _failure_lines(out) == [], out
    ninth = _with(practice_ns, "quiz_answers", '{9: "B"}')
    assert _failure_lines(_self_check(capsys, "quiz", "ch2-practice", ninth))


# ----------------------------------------------------------------------------- the same in `grade`


def _grade(tmp_path: Path, assignment: str, extra: str = "", name: str = "submission") -> Report:
    path = tmp_path / f"{name}.py"
    path.write_text((ROOT / "solutions" / f"{assignment}.py").read_text(encoding="utf-8")
                    + (f"\n\n# %% [changed]\n{extra}\n" if extra else ""), encoding="utf-8")
    return grade_warm(path, GradeOptions(assignment=assignment, seed=SEED))


def _checks(report: Report) -> dict:
    return {c.id: c for e in report.exercises for c in e.checks}


@pytest.mark.kernel
@pytest.mark.parametrize("assignment", ["ch2-jit", "ch2-practice"])
def test_grade_passes_the_new_checks_on_the_reference(tmp_path: Path, assignment: str) -> None:
    report = _grade(tmp_path, assignment)
    checks = _checks(report)
    assert report.score == report.max_score == 100
    new = sorted(NEW_CHECKS & set(checks))
    assert new and [checks[i].status for i in new] == ["passed"] * len(new)


@pytest.mark.kernel
@pytest.mark.parametrize("wrong", list(WRONG_PREDICTIONS))
def test_grade_gates_the_predictions_on_their_form(tmp_path: Path, wrong: str) -> None:
    code, said = WRONG_PREDICTIONS[wrong]
    report = _grade(tmp_path, "ch2-jit", "del predictions" if code is None else f"predictions = {code}")
    checks = _checks(report)
    assert report.score == 80  # the detective's 20, as a wrong form always cost; nothing else
    form = checks["detective.form"]
    assert form.status == "failed" and form.score == 0
    if code is None:
        assert form.message == said and all(checks[c].reason == "not_answered" for c in CALLS)
        return
    assert form.message == f"{FORM_MESSAGE}{said}"
    for call in CALLS:  # not judged: one message (the form's), each answer pointing to it
        assert (checks[call].status, checks[call].reason, checks[call].same_as) == ("skipped", "same_cause",
                                                                                    "detective.form")
        assert checks[call].requirements == []  # the sentence missed is said once, by the form check


@pytest.mark.kernel
def test_grade_judges_right_and_wrong_answers_in_the_right_form_as_before(tmp_path: Path) -> None:
    report = _grade(tmp_path, "ch2-jit", "predictions = [int(not p) if k == 2 else int(p) for k, p in "
                                         "enumerate(predictions)]")
    checks = _checks(report)
    assert report.score == 97.5 and checks["detective.form"].status == "passed"
    assert [c for c in CALLS if checks[c].status != "passed"] == ["detective.call_3"]
    assert checks["detective.call_3"].reason is None  # judged, and wrong


@pytest.mark.kernel
@pytest.mark.parametrize("wrong", list(WRONG_QUIZ))
def test_grade_gates_the_quiz_on_its_form(tmp_path: Path, wrong: str) -> None:
    code, said = WRONG_QUIZ[wrong]
    report = _grade(tmp_path, "ch2-practice", f"quiz_answers = {code}")
    checks = _checks(report)
    assert report.score == 80 and checks["quiz.form"].status == "failed"
    assert said in (checks["quiz.form"].message or "")
    assert all(checks[q].status == "skipped" and checks[q].same_as == "quiz.form" for q in QUIZ)


@pytest.mark.kernel
@pytest.mark.parametrize(("mutant", "check_id"), [
    ("newton_count_always_one", "newton.iterations_chapter_calls"),
    ("training_fori_ignores_lr_zero", "training.fori_chapter_lr_and_steps"),
    ("training_step_donates_w_and_b", "training.python_loop_chapter_call"),
])
def test_grade_fails_the_chapter_s_cells_where_the_self_check_does_at_no_cost(tmp_path: Path, mutant: str,
                                                                             check_id: str) -> None:
    """Worth 0 points: the total is the one the mutant's other failures give."""
    code = _mutant("ch2-jit", mutant).path.read_text(encoding="utf-8")
    report = _grade(tmp_path, "ch2-jit", code, name=mutant)
    checks = _checks(report)
    failing = {i for i, c in checks.items() if c.status != "passed"}
    assert check_id in failing and checks[check_id].score == checks[check_id].max_score == 0
    assert report.score == 100 - sum(c.max_score for c in checks.values() if c.status != "passed")
