"""Hostile and broken submissions, graded end to end in real kernels.

Each submission is the reference solution (solutions/ch2-jit.py, 100 points) with a faulty cell
from tests/fixtures/submissions/ added, so the honest score is known: a fault may cost the cell
it is in, never the exercises the reference code defines, and no trick changes a score.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from warm_grading import grade_warm

from grader import GradeOptions, Report
from grader.kernel.client import Kernel
from grader.kernel.protocol import MIME_TYPE

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parent.parent
HANG_TIMEOUT = 6.0  # seconds per cell (and per probe batch) when a fault hangs: above what the
# hidden training batch takes on a loaded machine (its calls checks trace `step` again and again)
CALM_TIMEOUT = 30.0  # when nothing should hang
SEED = 7
ALL = ("setup", "tax", "newton", "detective", "training")


def grade(path: Path, timeout: float = CALM_TIMEOUT) -> Report:
    return grade_warm(path, GradeOptions(assignment="ch2-jit", seed=SEED, cell_timeout=timeout))


def grade_within(path: Path, folder: Path, **limits: float) -> Report:
    """Graded by a copy of ch2-jit (in `folder`) whose [limits] are `limits` (the spec's own otherwise),
    so that a hang spends only the limit that stops it (a cell's, or a probe request's as in
    test_a_function_that_hangs_when_traced_costs_the_request_limit_not_the_exercise_s), while
    everything else keeps a limit as wide as before."""
    shutil.copytree(ROOT / "assignments" / "ch2-jit", folder, ignore=shutil.ignore_patterns("__pycache__"))
    spec = folder / "assignment.toml"
    text = spec.read_text()
    for name, value in limits.items():
        text, n = re.subn(rf"^{name} = .*$", f"{name} = {value:g}", text, count=1, flags=re.M)
        if n == 0:
            text = text.replace("[limits]\n", f"[limits]\n{name} = {value:g}\n", 1)
    spec.write_text(text)
    return grade_warm(path, GradeOptions(assignment=str(folder), seed=SEED))


def scores(report: Report) -> dict[str, float]:
    return {e.id: e.score for e in report.exercises}


def failing(report: Report) -> dict[str, str]:
    return {c.id: c.status for e in report.exercises for c in e.checks if c.status != "passed"}


def assert_full_marks(report: Report, *exercises: str) -> None:
    for ex in report.exercises:
        if ex.id in exercises:
            assert ex.score == ex.max_score, (ex.id, [(c.id, c.status, c.message) for c in ex.checks
                                                      if c.status != "passed"])


def problem_statuses(report: Report) -> list[str]:
    return [p.status for p in report.cell_problems]


# ----------------------------------------------------------------------------- hangs


def test_endless_loop_cell_times_out_and_the_rest_is_graded(submission_from_reference, tmp_path: Path) -> None:
    path = submission_from_reference("setup", "tax", "endless_loop_cell.py", "newton", "detective", "training",
                                     suffix=".ipynb")
    # 3 s a cell (the reference's cells each take a fraction of a second); the probe keeps the spec's limits
    report = grade_within(path, tmp_path / "ch2-jit", cell_timeout_s=3)
    assert report.status == "graded"
    (problem,) = report.cell_problems
    assert problem.status == "timeout" and problem.where == "cell 3"
    assert "stopped after 3 s" in problem.message
    assert failing(report) == {}
    assert report.score == 100


def test_cell_ignoring_sigint_is_killed_and_grading_goes_on(submission_from_reference, tmp_path: Path) -> None:
    path = submission_from_reference("setup", "tax", "ignores_sigint_and_sleeps.py", "newton", "detective",
                                     "training")
    report = grade_within(path, tmp_path / "ch2-jit", cell_timeout_s=3)  # the probe keeps the spec's limits
    assert problem_statuses(report) == ["timeout"]
    assert failing(report) == {}
    assert report.score == 100
    # The outer deadline held: the kernel was killed, not waited for (the cell sleeps 600 s).
    assert 3 <= report.duration_s < 600


def test_os_exit_in_the_middle_kills_the_kernel_which_is_replaced(submission_from_reference) -> None:
    path = submission_from_reference("setup", "tax", "newton", "kills_kernel_os_exit.py", "detective", "training")
    report = grade(path)
    (problem,) = report.cell_problems
    assert problem.status == "died"
    assert "killed the Python kernel" in problem.message
    assert failing(report) == {}  # cells before it were replayed, cells after it ran
    assert report.score == 100


def test_newton_that_never_terminates_costs_only_the_newton_checks_that_call_it(submission_from_reference,
                                                                               tmp_path: Path) -> None:
    path = submission_from_reference("setup", "tax", "newton_never_terminates.py", "detective", "training")
    # the kernel's request stopped at 2 s; the verifier's runs of the program at HANG_TIMEOUT
    report = grade_within(path, tmp_path / "ch2-jit", cell_timeout_s=HANG_TIMEOUT, probe_timeout_s=HANG_TIMEOUT,
                          request_timeout_s=2)
    assert report.status == "graded"
    assert_full_marks(report, "tax", "detective", "training")
    newton = {c.id: c for c in next(e for e in report.exercises if e.id == "newton").checks}
    # looking at it never runs the loop; its stop reads a counter only, not the values, so the
    # `while` that never ends is no lax.while_loop of the exercise (and computes nothing either)
    assert newton["newton.jitted"].status == "passed"
    for cid in ("newton.returns_pair", "newton.visible", "newton.hidden", "newton.iterations",
                "newton.compiles_once"):
        assert newton[cid].status in ("timeout", "error"), (cid, newton[cid].status, newton[cid].message)
    assert newton["newton.uses_while"].status == "failed"
    assert "depends on a traced value" in (newton["newton.uses_while"].message or "")
    assert newton["newton.visible"].status == "timeout"
    assert "did not finish" in newton["newton.visible"].message
    assert report.score == 100 - 25 + 3
    # (was test_answers_end_to_end.py's test_a_hanging_function_costs_one_probe_timeout, which graded
    # this same submission again) the verifier ran its program once for all the checks (one timeout,
    # one reason for all), and the kernel's compile count once: no check paid a timeout of its own
    timed_out = [c for c in newton.values() if c.status == "timeout"]
    assert len(timed_out) >= 4
    reasons = {(c.message or "").rsplit("did not finish", 1)[-1].replace(" in an earlier check; not called again", "")
               for c in timed_out}
    assert len(reasons) <= 2, [(c.id, c.message) for c in timed_out]


def test_function_hanging_in_python_costs_only_its_checks(submission_from_reference, tmp_path: Path) -> None:
    """The probe is interrupted on each hanging request; the kernel stays and answers the rest."""
    path = submission_from_reference(*ALL, "tax_switch_loops_in_python.py")
    report = grade_within(path, tmp_path / "ch2-jit", request_timeout_s=2)  # cells and probes: the spec's 30 s
    assert failing(report) == {"tax.switch_visible": "timeout", "tax.switch_hidden": "timeout",
                               "tax.switch_uses_cond": "timeout"}
    assert report.score == 100 - (4 + 4 + 4)  # switch_visible, switch_hidden, switch_uses_cond
    assert report.cell_problems == []


# ----------------------------------------------------------------------------- exits, input, output


def test_sys_exit_in_a_cell_is_an_error_of_that_cell(submission_from_reference) -> None:
    path = submission_from_reference("setup", "tax", "calls_sys_exit.py", "newton", "detective", "training")
    report = grade(path)
    (problem,) = report.cell_problems
    assert problem.status == "error" and "SystemExit" in problem.message
    assert report.score == 100


def test_input_in_a_cell_does_not_hang(submission_from_reference) -> None:
    path = submission_from_reference("setup", "tax", "calls_input.py", "newton", "detective", "training")
    report = grade(path)
    # It raised at once (no stdin in a grading kernel) instead of waiting into a timeout.
    assert problem_statuses(report) == ["error"]
    assert "StdinNotImplementedError" in report.cell_problems[0].message
    assert report.score == 100


def test_printing_50_mb_is_graded_and_the_report_stays_small(submission_from_reference) -> None:
    path = submission_from_reference("setup", "tax", "prints_50_mb.py", "newton", "detective", "training")
    report = grade(path)
    assert report.score == 100
    assert report.cell_problems == []
    assert len(report.model_dump_json(indent=2).encode()) < 100_000


# ----------------------------------------------------------------------------- fakes


def test_stale_outputs_and_fake_report_do_not_count(submission_from_reference) -> None:
    """Only tax is really answered; the saved outputs claim everything passed."""
    path = submission_from_reference("setup", "tax", "stale_outputs_claim_full_marks.ipynb", suffix=".ipynb")
    assert "Total 100 / 100" in path.read_text(encoding="utf-8")  # the lie is in the file
    report = grade(path)
    assert scores(report) == {"tax": 25, "newton": 0, "detective": 0, "training": 0}
    assert report.score == 25
    for ex in report.exercises[1:]:
        assert all(c.message.startswith("Not answered yet") for c in ex.checks), ex.id
    assert not (path.parent / "report.json").exists()  # the kernel ran elsewhere


def test_monkeypatched_numpy_and_fake_success_do_not_change_the_score(submission_from_reference) -> None:
    honest = submission_from_reference(*ALL, "wrong_detective_and_tax_vectorized.py", name="honest")
    faking = submission_from_reference(*ALL, "wrong_detective_and_tax_vectorized.py", "fakes_numpy_allclose.py",
                                       name="faking")
    expected_failures = {
        "tax.vectorized_visible", "tax.vectorized_hidden", "tax.vectorized_keeps_shape", "tax.vectorized_under_jit",
        "tax.vectorized_handles_arrays", *(f"detective.call_{i}" for i in (1, 3, 4, 5, 6, 7, 8)),
    }
    honest_report, faking_report = grade(honest), grade(faking)
    assert set(failing(honest_report)) == expected_failures
    assert honest_report.score == 100 - 13 - 17.5
    assert failing(faking_report) == failing(honest_report)
    assert faking_report.score == honest_report.score
    assert [c.message for e in faking_report.exercises for c in e.checks] == \
        [c.message for e in honest_report.exercises for c in e.checks]


def test_reports_of_faulty_submissions_validate(submission_from_reference) -> None:
    path = submission_from_reference("setup", "kills_kernel_os_exit.py", "tax")
    report = grade(path)
    again = Report.model_validate(json.loads(report.model_dump_json()))
    assert again == report
    assert scores(report) == {"tax": 25, "newton": 0, "detective": 0, "training": 0}


# ----------------------------------------------------------------------------- one request that hangs


def _probe_cell(body: str) -> str:
    """A cell that publishes observations as the probe does (each request's as it finishes)."""
    return ("import time\nfrom IPython import get_ipython\n"
            "def publish(i):\n"
            f"    get_ipython().display_pub.publish(data={{{MIME_TYPE!r}: {{'id': str(i)}}}}, metadata={{}})\n"
            + body)


def test_a_probe_cell_silent_for_a_request_s_limit_is_stopped_then() -> None:
    with Kernel() as kernel:
        run = kernel.run(_probe_cell("publish(0)\nwhile True:\n    pass\n"), 60, observations=True, quiet=1.5)
    assert run.status == "timeout" and run.evalue == "still running after 1.5 s"
    assert [o["id"] for o in run.observations] == ["0"]  # what came before the silence is kept


def test_a_probe_cell_that_keeps_answering_runs_past_a_request_s_limit() -> None:
    with Kernel() as kernel:
        run = kernel.run(_probe_cell("for i in range(6):\n    time.sleep(0.5)\n    publish(i)\n"), 60,
                         observations=True, quiet=1.5)
        student_cell = kernel.run("import time\ntime.sleep(2)", 60, quiet=1.5)  # no probe: no such limit
    assert run.status == "ok" and [o["id"] for o in run.observations] == [str(i) for i in range(6)]
    assert student_cell.status == "ok"


def test_a_function_that_hangs_when_traced_costs_the_request_limit_not_the_exercise_s(tmp_path: Path) -> None:
    folder = tmp_path / "ch2-jit"
    shutil.copytree(ROOT / "assignments" / "ch2-jit", folder, ignore=shutil.ignore_patterns("__pycache__"))
    spec = folder / "assignment.toml"
    spec.write_text(spec.read_text().replace("probe_timeout_s = 30\n", "probe_timeout_s = 60\nrequest_timeout_s = 2\n", 1))
    path = tmp_path / "hangs.py"
    path.write_text((ROOT / "solutions" / "ch2-jit.py").read_text() + "\n\n# %% [fault]\n"
                    "def newton_sqrt(a, tol):\n    while True:\n        pass\n")
    report = grade_warm(path, GradeOptions(assignment=str(folder), seed=SEED))
    newton = {c.id: c for c in next(e for e in report.exercises if e.id == "newton").checks}
    assert newton["newton.jitted"].status == "timeout"
    assert "stopped after 2 s" in newton["newton.jitted"].message
    assert {c.status for c in newton.values()} == {"timeout"}
    assert_full_marks(report, "tax", "detective", "training")
