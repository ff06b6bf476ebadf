"""The seed chapter's self-checks can be fooled by hard-coded answers; the grader cannot.

tests/fixtures/submissions/hardcoded_answers.py answers exercises 1 and 2 with lookup tables of
the notebook's visible inputs (still using lax.switch, jnp.select, lax.while_loop and jax.jit).
The chapter's own self-check cells (tests/fixtures/seed_selfchecks.py, copied verbatim) all pass
on it; the grader's hidden checks fail it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from warm_grading import grade_warm

from grader import GradeOptions

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SUBMISSION = FIXTURES / "submissions" / "hardcoded_answers.py"
SEED_SELFCHECKS = FIXTURES / "seed_selfchecks.py"
SEED = 1
# newton.iterations: its made-up count (one per decade of tol) is not the stopping rule's count.
# The structure and compile checks run the same modules on the hidden checks' draws too: a
# program is evidence of a `case`, a `while` or one compilation only if it computes the right
# values beyond the notebook's examples, which a table of them does not.
CAUGHT_BY_HIDDEN_CHECKS = {"tax.switch_hidden", "tax.vectorized_hidden", "newton.hidden", "newton.iterations",
                           "tax.switch_uses_cond", "tax.vectorized_handles_arrays", "newton.uses_while",
                           "newton.compiles_once"}

# Runs each file given on the command line in one namespace, in order, as a notebook would.
RUN_IN_ORDER = """
import sys
namespace = {"__name__": "__main__"}
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        exec(compile(f.read(), path, "exec"), namespace)
"""


def run_seed_selfchecks(submission: Path) -> subprocess.CompletedProcess[str]:
    """The submission, then the seed's helpers and self-check cells, in a fresh Python process."""
    return subprocess.run(
        [sys.executable, "-c", RUN_IN_ORDER, str(submission), str(SEED_SELFCHECKS)],
        capture_output=True, text=True, encoding="utf-8", timeout=300, check=False,
    )


@pytest.mark.kernel
def test_seed_selfchecks_pass_on_hardcoded_answers() -> None:
    run = run_seed_selfchecks(SUBMISSION)
    assert run.returncode == 0, f"the self-checks raised:\n{run.stderr[-3000:]}"
    verdicts = re.findall(r"^(✅|⏳) Exercise (\d)\b.*$", run.stdout, flags=re.M)
    assert verdicts == [("✅", "1"), ("✅", "2"), ("✅", "3"), ("✅", "4")], run.stdout


@pytest.mark.kernel
def test_grader_catches_hardcoded_answers() -> None:
    report = grade_warm(SUBMISSION, GradeOptions(seed=SEED, assignment="ch2-jit"))
    statuses = {c.id: c.status for e in report.exercises for c in e.checks}
    assert report.cell_problems == []
    assert {k for k, s in statuses.items() if s != "passed"} == CAUGHT_BY_HIDDEN_CHECKS
    assert all(statuses[k] == "failed" for k in CAUGHT_BY_HIDDEN_CHECKS)
    assert report.max_score == 100
    assert report.score < report.max_score
