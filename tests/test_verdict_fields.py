"""What a verdict means travels as fields (issue 29): each reader decides from a check's `reason`
(and its data: `not_answered`, `same_as`) or a report's `fault`, never from the words of its
`message` or `error`, which are only the sentences made from those fields. Each test gives a
reader a field and a sentence that disagree, and checks that the field wins."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from warm_grading import grade_warm

from grader import GradeOptions
from grader.checks.base import CheckOutcome, not_answered, not_available
from grader.errors import MachineOverloaded, SubmissionUnreadable, WrongAssignment
from grader.faults import INTERNAL_PREFIX, grade_guarded, is_internal
from grader.judging.attribution import attribute, same_cause
from grader.judging.reveal import not_judged_yet, revealed
from grader.judging.scoring import score_check
from grader.kernel.protocol import Observation
from grader.outputs.classpage.summary import answered, kernel_death, summarize, unanswered
from grader.views.terminal import summary, summary_exercise
from grader.report import (
    CHECKED_ON_HAND_IN,
    CellProblem,
    CheckResult,
    Environment,
    ExerciseResult,
    Isolation,
    NotAnswered,
    Report,
    SubmissionRef,
)
from grader.spec import AnswerCheck, NumericCheck
from grader.submission import SourceCell

FIXTURES = Path(__file__).parent / "fixtures" / "reports"
OLD_NOT_ANSWERED = "Not answered yet: `f` is not defined."  # the sentence readers used to look for


def check(cid: str = "a.one", status: str = "failed", message: str | None = "no",
          **fields: object) -> CheckResult:
    return CheckResult(id=cid, title=f"title of {cid}", status=status, max_score=1.0, hidden=False,
                       score=1.0 if status == "passed" else 0.0, message=message, **fields)


def missing(name: str = "f", message: str | None = None, **fields: object) -> CheckResult:
    """A "Not answered yet" verdict, whose sentence is `message` when given (else the grader's)."""
    data = NotAnswered(name=name, **fields)
    return check(message=message or data.message, reason="not_answered", not_answered=data)


def report(*checks: CheckResult, status: str = "graded", **fields: object) -> Report:
    exercise = ExerciseResult(id="a", title="Exercise A", score=sum(c.score for c in checks),
                              max_score=sum(c.max_score for c in checks), checks=list(checks))
    return Report(assignment="toy", submission=SubmissionRef(path="s.py", sha256=None, kind="module"),
                  status=status, score=exercise.score, max_score=exercise.max_score, exercises=[exercise],
                  seed=1, duration_s=0.1, environment=Environment(grader="0", python="3", jax=None),
                  isolation=Isolation(sandboxed=False, layers=[]), **fields)


def numeric(**extra: object) -> NumericCheck:
    fields = {"id": "v", "title": "values", "points": 1, "message": "f(x) should be 2x", "function": "f",
              "reference": "f", "cases": {"generator": "g"} if extra.get("hidden") else
              {"rows": [[1.0]], "types": ["py"]}}
    return NumericCheck(**{**fields, **extra})


# ----------------------------------------------------------------------------- the fields themselves


def test_the_sentences_are_made_from_the_fields_in_the_words_students_already_read() -> None:
    assert NotAnswered(name="f").message == "Not answered yet: `f` is not defined."
    assert NotAnswered(name="f", because="cell 2 raised NameError: x").message == \
        "Not answered yet: `f` is not defined, because cell 2 raised NameError: x"
    assert NotAnswered(name="q", defined=True, item=1).message == "Not answered yet: `q` has no answer 1."
    assert NotAnswered(name="q", defined=True, item="b").message == "Not answered yet: `q` has no answer 'b'."


def test_a_reason_comes_with_its_data_and_data_with_its_reason() -> None:
    with pytest.raises(ValidationError, match="not_answered"):
        check(reason="not_answered")
    with pytest.raises(ValidationError, match="not_answered"):
        check(not_answered=NotAnswered(name="f"))
    with pytest.raises(ValidationError, match="same_as"):
        check(reason="same_cause")
    with pytest.raises(ValidationError, match="same_as"):
        CheckOutcome(status="failed", same_as="a.one")
    assert check(reason="kernel_died", status="error").reason == "kernel_died"


@pytest.mark.parametrize("name", ["written_before_verdict_fields", "error_written_before_verdict_fields"])
def test_a_report_written_before_the_fields_still_loads(name: str) -> None:
    """Reports kept in a batch's folder were written without the fields: they load, with none set
    (their sentences are not read back into fields)."""
    text = (FIXTURES / f"{name}.report.json").read_text(encoding="utf-8")
    assert '"reason"' not in text and '"fault"' not in text  # truly from before
    old = Report.model_validate_json(text)
    assert old.schema_version == 1 and old.fault is None and old.error_kind is None
    assert all(c.reason is None and c.not_answered is None and c.same_as is None
               for e in old.exercises for c in e.checks)
    assert Report.model_validate_json(old.model_dump_json()) == old


def test_the_fields_survive_the_report_file() -> None:
    written = report(missing(because="cell 1 raised"), check("a.two", reason="same_cause", same_as="a.one"),
                     check("a.three", status="error", reason="kernel_died"), status="error", error="x",
                     fault="internal", error_kind="grader_bug")
    again = Report.model_validate_json(written.model_dump_json())
    assert again == written and again.exercises[0].checks[0].not_answered.because == "cell 1 raised"


# ----------------------------------------------------------------------------- who sets them


def test_the_checks_say_not_answered_in_fields() -> None:
    outcome = not_available(Observation(id="r", status="missing", detail="f"), "`f`", "hint")
    assert outcome.reason == "not_answered" and outcome.not_answered == NotAnswered(name="f")
    assert outcome.message == OLD_NOT_ANSWERED


def test_a_kernel_death_is_a_field_of_the_observation_not_words_in_its_detail() -> None:
    died = not_available(Observation(id="r", status="crashed", died=True, detail="gone"), "`f`", "hint")
    assert died.status == "error" and died.reason == "kernel_died"
    words = "the Python kernel died during this check"
    said = not_available(Observation(id="r", status="crashed", detail=words), "`f`", "hint")
    assert said.status == "error" and said.reason is None


def test_an_answer_without_its_item_is_not_answered() -> None:
    from grader import assignment
    from grader.checks import Context, Planner, Seen, build
    from grader.kernel.protocol import ValuesResult
    from grader.values import to_wire

    spec = AnswerCheck(id="q1", title="question 1", points=1, message="question 1 is wrong", name="quiz",
                       key=2, accept=["B"])
    quiz = build("quiz", spec, Context(assignment=assignment.load("ch2-jit"), seed=1, planner=Planner()))
    (request,) = quiz.requests()
    seen = Seen(observations={request.id: Observation(id=request.id, status="ok", result=ValuesResult(
        op="value", values=[to_wire({1: "B"})]))})
    outcome = quiz.judge(seen)
    assert outcome.reason == "not_answered"
    assert outcome.not_answered == NotAnswered(name="quiz", defined=True, item=2)
    assert outcome.message == "Not answered yet: `quiz` has no answer 2."


def test_the_self_check_s_hand_in_checks_say_so_in_a_field() -> None:
    later = not_judged_yet(numeric())
    assert later.reason == "on_hand_in" and later.message == CHECKED_ON_HAND_IN
    assert score_check("ex.v", numeric(), later).reason == "on_hand_in"


def test_a_shared_root_cause_names_its_check_in_a_field() -> None:
    wrong = CheckOutcome(status="failed", message="f(1) is 3", cause="values")
    outcome = same_cause(wrong, numeric(), "ex.first", "f on the first inputs")
    assert (outcome.reason, outcome.same_as, outcome.cause) == ("same_cause", "ex.first", "same_values")
    result = score_check("ex.v", numeric(), outcome)
    assert (result.reason, result.same_as) == ("same_cause", "ex.first")
    assert "f on the first inputs" in result.message and "ex.first" not in result.message  # words, not ids


def test_the_fault_boundary_puts_whose_fault_and_why_in_fields() -> None:
    def fails(exc: BaseException):
        def grade() -> Report:
            raise exc
        return grade

    def error_report(reason: str) -> Report:
        return report(check(status="skipped"), status="error", error=reason)

    cases = [(RuntimeError("boom"), "internal", "grader_bug"),
             (SubmissionUnreadable("s.py", "is a FIFO"), "student", "unreadable"),
             (WrongAssignment("s.ipynb", "ch9", "ch2-jit"), "student", "wrong_assignment"),
             (MachineOverloaded("cell 2", "others had the CPU"), "machine", "overloaded")]
    for exc, fault, kind in cases:
        graded = grade_guarded(fails(exc), error_report)
        assert (graded.status, graded.fault, graded.error_kind) == ("error", fault, kind), exc
        assert is_internal(graded) == (fault == "internal")


# ----------------------------------------------------------------------------- who reads them


def test_is_internal_reads_the_fault_not_the_sentence() -> None:
    student = report(check(status="skipped"), status="error", fault="student",
                     error=INTERNAL_PREFIX + "RuntimeError: a student's file name can say anything")
    internal = report(check(status="skipped"), status="error", fault="internal", error="worded otherwise")
    assert not is_internal(student) and is_internal(internal)
    older = report(check(status="skipped"), status="error", error=INTERNAL_PREFIX + "a report from before")
    assert not is_internal(older)


def test_the_terminal_groups_not_answered_by_the_field() -> None:
    plain = summary_exercise(report(missing("step", message="something else entirely"), missing(
        "train", message="and another", because="cell 3 raised")).exercises[0])
    # a name no cell defines is not answered yet; one a failed cell would have defined was answered: that cell
    assert "- not answered yet: define step\n" in plain and "✗ cell 3 raised, so `train` is not defined" in plain
    assert "something else" not in plain and "define step, train" not in plain
    worded = summary_exercise(report(check(message=OLD_NOT_ANSWERED)).exercises[0])
    assert "not answered yet: define" not in worded
    assert f"title of a.one (1 pt): {OLD_NOT_ANSWERED}" in worded  # before: "(1 pts)"


def test_the_terminal_counts_hand_in_checks_by_the_field() -> None:
    later = check(status="skipped", message="worded otherwise", reason="on_hand_in")
    shown = summary_exercise(report(check("a.two", status="passed", message=None), later).exercises[0])
    assert "1 checked when you hand in (1 pt): title of a.one" in shown and shown.startswith("⏳")
    worded = summary_exercise(report(check("a.two", status="passed", message=None),
                                     check(status="skipped", message=CHECKED_ON_HAND_IN)).exercises[0])
    assert "checked when you hand in (" not in worded and worded.startswith("❌")


def test_the_class_page_s_answered_reads_the_field() -> None:
    blank = report(missing(message="worded otherwise"))
    assert unanswered(blank.exercises[0].checks[0]) and not answered(blank, blank.exercises[0])
    worded = report(check(message=OLD_NOT_ANSWERED))
    assert not unanswered(worded.exercises[0].checks[0]) and answered(worded, worded.exercises[0])
    rows = {r.student: r for r in summarize({"blank": blank, "worded": worded}).rows}
    assert rows["blank"].unanswered == ["a"] and rows["worded"].unanswered == []


def test_the_class_page_s_kernel_death_reads_the_field() -> None:
    """A message the student's code can fill (an exception's text) saying the kernel died is no
    death; a check whose reason is `kernel_died` is one, whatever its words."""
    words = "could not be checked on a hidden input"
    died = report(check(status="error", reason="kernel_died", message=words))
    assert kernel_death(died) == f"a.one: {words}"
    said = report(check(status="error", message="f raised ValueError: the Python kernel died (kernel died)"))
    assert kernel_death(said) is None
    rows = {r.student: r for r in summarize({"died": died, "said": said}).rows}
    assert (rows["died"].state, rows["said"].state) == ("died", "graded")


def test_attribution_reads_the_missing_name_from_the_field() -> None:
    cells = [SourceCell(index=2, source="def step(): ...")]
    problem = CellProblem(cell=2, where="cell 2", status="error", message="cell 2 raised NameError: x")
    exercise = ExerciseResult(id="a", title="A", score=0, max_score=3, checks=[
        missing("step", message="a sentence in other words"),
        check("a.two", message="Not answered yet: `step` is not defined."),  # the words alone
        missing("step", defined=True, item=1)])  # defined: no cell failed to define it
    (out,), marked = attribute([exercise], cells, [problem])
    told, worded, defined = out.checks
    assert told.not_answered.because == "cell 2 raised NameError: x"
    assert told.message == "Not answered yet: `step` is not defined, because cell 2 raised NameError: x"
    assert worded == exercise.checks[1] and defined == exercise.checks[2]
    assert marked[0].exercise == "a"


def test_the_hidden_check_s_missing_name_field_is_the_spec_s_name() -> None:
    """A pass_fail verdict's data is shown like its sentence: the name the probe reported could
    spell a hidden value, so the field holds the spec's name too."""
    shown = revealed(not_answered("lr_0_0743"), numeric(hidden=True))
    assert shown.not_answered == NotAnswered(name="f") and shown.message == OLD_NOT_ANSWERED
    assert "lr_0_0743" in (shown.counterexample or "")


def test_a_hidden_check_s_hand_in_verdict_is_read_from_the_field() -> None:
    later = CheckOutcome(status="skipped", reason="on_hand_in", message="worded otherwise")
    assert revealed(later, numeric(hidden=True)).message == CHECKED_ON_HAND_IN


def test_validate_s_template_row_reads_the_field(tmp_path: Path) -> None:
    from grader.course.validate import _Item, _Validator

    validator = _Validator("ch2-jit", tmp_path, 1, None)
    item = _Item(key="template", kind="template", path=tmp_path / "t.ipynb")
    validator._check_template(item, report(missing(message="worded otherwise")))
    validator._check_template(item, report(check(message=OLD_NOT_ANSWERED)))
    blank, worded = validator.rows
    assert blank.ok and not worded.ok and "not 'not answered yet': a" in worded.detail
    student = report(check(status="skipped"), status="error", fault="student", error=INTERNAL_PREFIX + "x")
    internal = report(check(status="skipped"), status="error", fault="internal", error="y")
    assert not validator._graded(item, student) and not validator._graded(item, internal)
    assert [r.bug for r in validator.rows[2:]] == [False, True]


def test_a_batch_counts_grader_bugs_by_the_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from grader.batch.executors import Task, error_report
    from grader.batch.run import grade_many

    def graded(task: Task, warm: bool = False) -> Report:
        def grade() -> Report:
            if task.student == "bug":
                raise RuntimeError("a grader bug")
            raise SubmissionUnreadable(task.path, INTERNAL_PREFIX + "in the student's own words")
        return grade_guarded(grade, lambda reason: error_report(task, reason))

    monkeypatch.setattr("grader.batch.executors.grade_task", graded)
    monkeypatch.setattr("grader.precompile.ensure", lambda *args, **kwargs: None)
    subs = tmp_path / "subs"
    subs.mkdir()
    for student in ("bug", "words"):
        (subs / f"{student}.py").write_text("x = 1\n", encoding="utf-8")
    result = grade_many([subs], tmp_path / "out", GradeOptions(assignment="ch2-jit", seed=1))
    assert result.errors == 2 and result.internal == ["bug"]


# ----------------------------------------------------------------------------- end to end


@pytest.mark.kernel
def test_a_graded_report_carries_the_fields(tmp_path: Path, reference_sections: dict[str, str]) -> None:
    """Exercise 2's cell raised before defining `newton_sqrt`, exercise 4 was never written, and
    `tax_switch` kills the kernel when called: the report says each in fields."""
    killer = "def tax_switch(income):\n    import os\n    os._exit(1)\n"
    path = tmp_path / "fields.py"
    path.write_text(f"# %% [setup]\n{reference_sections['setup']}\n# %% [tax]\n{reference_sections['tax']}\n"
                    f"{killer}\n# %% [newton]\nraise ValueError('not yet')\n{reference_sections['newton']}\n"
                    "# %% [detective]\npredictions = [True] * 8\n", encoding="utf-8")
    graded = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=3))
    by_id = {e.id: e for e in graded.exercises}
    newton = by_id["newton"].checks
    assert all(c.reason == "not_answered" and c.not_answered.name == "newton_sqrt" for c in newton)
    assert all("raised ValueError: not yet" in (c.not_answered.because or "") for c in newton)
    training, tax = by_id["training"].checks, by_id["tax"].checks
    assert all(c.not_answered is not None and c.not_answered.because is None for c in training)
    assert any(c.reason == "kernel_died" for c in tax), [c.message for c in tax]
    assert all(c.reason is None for c in by_id["detective"].checks)
    assert kernel_death(graded) is not None
    told = summary(graded)  # newton's cell raised before defining it: that cell; training was never written
    assert "raised ValueError: not yet, so `newton_sqrt` is not defined: fix that cell first" in told
    assert "not answered yet: define step, train_fori, train_python_loop" in told


def test_a_batch_groups_the_students_not_graded_by_the_kind_not_by_slicing_the_sentence() -> None:
    from grader.batch.run import reason_group

    one = report(status="error", error="alice.py: not a notebook (line 3: Expecting value)",
                 error_kind="unreadable", fault="student")
    other = report(status="error", error="bob.py: the file is empty", error_kind="unreadable",
                   fault="student")
    assert reason_group(one) == reason_group(other) == "not a notebook or module the grader can read"
    lookalike = report(status="error", error="not a notebook or module the grader can read: ours")
    assert reason_group(lookalike) != reason_group(one)  # no kind: the sentence whole, never cut apart


def test_checks_one_failed_form_holds_back_are_one_line_and_the_self_check_says_it_failed() -> None:
    """`predictions` with 7 values: the form check fails and the eight calls it holds back are one
    line, not eight (one cause, one message); the self-check's heading is ❌ although the failed
    form check is worth 0 points."""
    from grader.views.terminal import summary_exercise
    from grader.report import CheckResult, ExerciseResult

    form = CheckResult(id="detective.form", title="predictions holds 8 True/False values", status="failed",
                       score=0, max_score=0, hidden=False, message="`predictions` must hold 8 values; it holds 7")
    calls = [CheckResult(id=f"detective.call_{i}", title=f"call {i}", status="skipped", score=0, max_score=2.5,
                         hidden=False, reason="same_cause", same_as="detective.form",
                         message="not judged until `predictions` has the form the exercise asks for")
             for i in range(1, 9)]
    exercise = ExerciseResult(id="detective", title="the detective", score=0, max_score=20, checks=[form, *calls])
    text = summary_exercise(exercise)
    assert text.splitlines()[0].startswith("❌")
    assert text.count("not judged until") == 1 and "8 checks, 20 pts" in text
    assert "call 3" not in text
    judged = exercise.model_copy(update={"checks": [form.model_copy(update={"status": "passed", "message": None}),
                                                   *(c.model_copy(update={"status": "skipped", "reason": "on_hand_in",
                                                                          "same_as": None}) for c in calls)]})
    assert summary_exercise(judged).startswith("⏳")
