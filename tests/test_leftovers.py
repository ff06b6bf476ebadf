"""Three leftovers of an outside attack round, each kept as the attack that found it.

(a) a plain function that borrows a decoy's `.trace`: its module has another signature than the
    one the grader asked for, and no check that reads a module may count it;
(b) a daemon alive during the probe: its main thread exits alone (a zombie leader) while a
    thread beats on, which the stray killer took for a dead process;
(c) a table of the notebook's answers passed the compile and structure checks: their evidence
    now includes drawn and hidden cases, which a table cannot know, without quoting them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from fake_modules import working
from warm_grading import grade_warm

from grader import GradeOptions, Report, assignment
from grader.checks import Check, Context, Planner, Seen, build
from grader.checks.base import ModuleFacts, RunOutcome
from grader.checks.program import ProgramCalls
from grader.kernel.client import Kernel
from grader.kernel.protocol import ExportResult, Observation
from grader.pipeline import grade_one
from grader.sandbox.layers import SandboxPolicy, available

SEED = 5

DECOY_TAX_SWITCH = '''
# %% [decoy] tax_switch is plain Python (an `if` on the income) that borrows the trace of a decoy:
# a jitted function of two float32[3] arrays with a lax.switch.
def tax_switch(income):
    if income < 10000:
        return 0.0
    return tax_vectorized(income)


def _decoy(x, y):
    return lax.switch(0, [lambda: x + y, lambda: x - y])


_decoy_trace = jax.jit(_decoy).trace
tax_switch.trace = lambda *args, **kwargs: _decoy_trace(jnp.zeros(3), jnp.zeros(3))
tax_switch.lower = lambda *args, **kwargs: _decoy_trace(jnp.zeros(3), jnp.zeros(3)).lower()
'''

LOOKUP_NEWTON = '''
# %% [table] newton_sqrt is a table of the notebook's answers (and of the structure check's a = 2),
# jitted, with a lax.while_loop beside it that computes nothing: it compiles once.
_KNOWN = [0.01, 0.5, 2.0, 3.0, 50.0]


@jax.jit
def newton_sqrt(a, tol):
    a = jnp.asarray(a, jnp.float32)
    root = jnp.select([a == k for k in _KNOWN], [jnp.float32(k ** 0.5) for k in _KNOWN], jnp.float32(1.0))
    _, k = lax.while_loop(lambda s: s[1] < 3, lambda s: (s[0] + tol, s[1] + 1), (root, 0))
    return root, k
'''

ZOMBIE_LEADER_DAEMON = '''
# %% [daemon] a daemon (double fork, new session) whose main thread exits alone (the exit system
# call, not exit_group): a zombie leader, and a thread that beats in the scratch. tax_switch,
# traced by the probe, answers wrong while it still beats.
import ctypes as _ctypes, os as _os, platform as _platform, threading as _threading, time as _time

_beat = _os.path.join(_os.getcwd(), "beat")
if _os.fork() == 0:
    try:
        _os.setsid()
        if _os.fork() == 0:
            def _beating():
                for _n in range(100000):
                    with open(_beat + ".new", "w") as _f:
                        _f.write(str(_n))
                    _os.replace(_beat + ".new", _beat)
                    _time.sleep(0.02)

            _threading.Thread(target=_beating).start()
            _ctypes.CDLL(None).syscall({"x86_64": 60, "aarch64": 93}[_platform.machine()], 0)
    finally:
        _os._exit(0)
_time.sleep(0.3)


def _beats():
    try:
        first = open(_beat).read()
        _time.sleep(0.2)
        return open(_beat).read() != first
    except OSError:
        return False


assert _beats(), "the daemon must beat while the cells run, or the test proves nothing"
_honest_switch = tax_switch


def tax_switch(income):
    if _beats():
        return _honest_switch(income) + 1000.0
    return _honest_switch(income)
'''


def submission(tmp_path: Path, reference_sections: dict[str, str], *parts: str) -> Path:
    """The reference solution's sections, with attack cells (given as text) in between."""
    chunks = [f"# %% [{p}]\n{reference_sections[p]}" if p in reference_sections else p for p in parts]
    path = tmp_path / "submission.py"
    path.write_text("\n\n".join(chunks), encoding="utf-8")
    return path


def checks(report: Report, exercise: str) -> dict[str, tuple[str, str]]:
    return {c.id: (c.status, c.message or "") for e in report.exercises if e.id == exercise for c in e.checks}


# ----------------------------------------------------------------------------- (a) signatures


@pytest.fixture(scope="module")
def ch2():
    return assignment.load("ch2-jit")


def make(ch2, full_id: str) -> Check:
    exercise_id, check_id = full_id.split(".")
    exercise = next(e for e in ch2.spec.exercises if e.id == exercise_id)
    spec = next(c for c in exercise.checks if c.id == check_id)
    return build(exercise_id, spec, Context(assignment=ch2, seed=SEED, planner=Planner()))


def program_of(check: Check) -> ProgramCalls:
    program = getattr(check, "program", None) or check.calls.program  # type: ignore[attr-defined]
    assert isinstance(program, ProgramCalls)
    return program


def seen_with(check: Check, answer: Callable[[tuple], list], *, inputs: Callable[[int], int] = lambda n: n,
              baked: list[int] | None = None) -> Seen:
    """Every export answered with a module whose facts say `inputs(asked)` inputs, every call
    (the check's cases, then the beyond ones) answered by `answer(args)`."""
    program = program_of(check)
    seen = Seen()
    for request in check.requests():
        if request.op == "export":
            seen.observations[request.id] = Observation(id=request.id, status="ok", result=ExportResult(
                module="AA==", direct=True, jitted=True, out_tree="PyTreeDef(*)", fun_name="f", baked=baked or []))
        elif request.op == "compile_count":
            seen.observations[request.id] = Observation.model_validate(
                {"id": request.id, "status": "ok", "result": {"op": "compile_count", "compiles": 1,
                                                              "names": ["jit(f)"]}})
    calls: dict[str, list] = {}
    for case, (export_id, _) in [*zip(program.cases, program._where), *zip(program.beyond, program._beyond_where)]:
        calls.setdefault(export_id, []).append([np.asarray(v) for v in answer(case.args)])
    for export_id, run in program._runs.items():
        facts = ModuleFacts(ops=["case", "while", "add"], custom_calls=[], inputs=inputs(len(run.export.args)),
                            constructs=working(("case", "while")))
        seen.runs[id(run)] = RunOutcome(status="ok", facts=facts, values=calls.get(export_id, []), judged=True)
    return seen


def tax_answer(ch2) -> Callable[[tuple], list]:
    return lambda args: [np.float32(ch2.references.tax(*args))]


def newton_answer(args: tuple) -> list:
    return [np.float32(np.sqrt(args[0])), np.int32(5)]


@pytest.mark.parametrize("full_id", ["tax.switch_visible", "tax.switch_hidden", "tax.switch_uses_cond"])
def test_a_module_of_another_signature_is_refused_by_every_check_that_reads_it(ch2, full_id: str) -> None:
    """Right values, the right operations, and a value check that judges the same module: still
    no evidence when the module does not take the arguments the grader asked to export."""
    check = make(ch2, full_id)
    assert check.judge(seen_with(check, tax_answer(ch2))).status == "passed"
    decoy = check.judge(seen_with(check, tax_answer(ch2), inputs=lambda n: n + 1))
    assert decoy.status == "failed", decoy
    assert "has 2 inputs for the 1 traced arguments asked" in (decoy.message or "")
    assert "proves nothing" in (decoy.message or "")


def test_a_module_with_an_argument_baked_that_may_not_be_is_refused(ch2) -> None:
    """`baked` is the kernel's word: only the public arguments (the spec's `public`) may be."""
    check = make(ch2, "newton.uses_while")  # public = [1]: tol may be baked, a may not
    assert check.judge(seen_with(check, newton_answer, inputs=lambda n: n - 1, baked=[1])).status == "passed"
    baked_a = check.judge(seen_with(check, newton_answer, inputs=lambda n: n - 1, baked=[0]))
    assert baked_a.status == "failed" and "only their public values may be" in (baked_a.message or "")


@pytest.mark.kernel
def test_a_borrowed_decoy_trace_earns_no_structure_points(tmp_path, reference_sections) -> None:
    path = submission(tmp_path, reference_sections, "setup", "tax", DECOY_TAX_SWITCH, "newton", "detective",
                      "training")
    tax = checks(grade_warm(path, GradeOptions(assignment="ch2-jit", seed=SEED, exercises=("tax",))), "tax")
    for cid in ("tax.switch_visible", "tax.switch_uses_cond"):
        status, message = tax[cid]
        assert status == "failed" and "so it is not `tax_switch`'s program" in message, (cid, message)
    assert tax["tax.vectorized_handles_arrays"][0] == "passed"  # the rest of the exercise is judged as before


# ----------------------------------------------------------------------------- (c) a table of answers


def test_structure_and_compile_evidence_reaches_beyond_the_notebook(ch2) -> None:
    """A structure check of literal rows is also run on the notebook's examples and the hidden
    checks' draws of the same function (on its own modules: no new export), the examples first,
    marked as such (grader/checks/evidence.py compares the two); a compile check's own cases are
    drawn."""
    from grader.checks.program import NotebookExample

    uses_while, compiles = make(ch2, "newton.uses_while"), make(ch2, "newton.compiles_once")
    hidden, visible = make(ch2, "newton.hidden"), make(ch2, "newton.visible")
    beyond = program_of(uses_while).beyond
    examples = [c for c in beyond if isinstance(c, NotebookExample)]
    assert [c.args for c in beyond if c not in examples] == [c.args for c in hidden.cases]
    assert {c.args for c in examples} >= {c.args for c in visible.cases} and beyond[:len(examples)] == examples
    assert len(program_of(uses_while).exports) == 1
    assert program_of(compiles).beyond == []  # drawn per run already
    assert program_of(make(ch2, "tax.switch_uses_cond")).beyond  # tax_scalars' draws


def test_a_table_of_the_notebook_s_answers_is_no_evidence_and_no_hidden_input_is_quoted(ch2) -> None:
    visible = {0.01, 0.5, 2.0, 3.0, 50.0}

    def table(args: tuple) -> list:
        a = float(args[0])
        return [np.float32(np.sqrt(a) if a in visible else 1.0), np.int32(3)]

    for full_id in ("newton.uses_while", "newton.compiles_once"):
        check = make(ch2, full_id)
        assert check.judge(seen_with(check, newton_answer)).status == "passed"
        outcome = check.judge(seen_with(check, table))  # judged=True: a value check runs the same module
        assert outcome.status == "failed" and outcome.cause == "values", outcome
        assert "computes the right values for too few inputs, or only for the notebook's examples" in (
            outcome.message or "")
    uses_while = make(ch2, "newton.uses_while")
    outcome = uses_while.judge(seen_with(uses_while, table))
    assert outcome.message and outcome.message.endswith("only for the notebook's examples")
    assert outcome.counterexample  # the hidden call, for the instructor only
    from grader.checks.program import NotebookExample

    told = outcome.message.removeprefix(uses_while.spec.message)  # the instructor's text may hold a "1"
    for case in program_of(uses_while).beyond:
        if not isinstance(case, NotebookExample):  # a hidden draw
            assert f"{case.args[0]:.6g}"[:6] not in told


@pytest.mark.kernel
def test_a_lookup_table_newton_compiles_once_but_earns_no_compile_or_structure_points(
        tmp_path, reference_sections) -> None:
    path = submission(tmp_path, reference_sections, "setup", "tax", LOOKUP_NEWTON, "detective", "training")
    report = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=SEED, exercises=("newton",)))
    newton = checks(report, "newton")
    assert newton["newton.visible"][0] == "passed" and newton["newton.jitted"][0] == "passed"
    assert newton["newton.compiles_once"][0] == "failed", newton["newton.compiles_once"]
    assert newton["newton.uses_while"][0] == "failed", newton["newton.uses_while"]
    hidden_inputs = [c for e in report.exercises for c in e.checks if c.id == "newton.hidden"]
    assert hidden_inputs and hidden_inputs[0].status == "failed"
    for cid in ("newton.compiles_once", "newton.uses_while"):
        assert not re.search(r"newton_sqrt\(\d", newton[cid][1]), newton[cid]  # no call quoted


# ----------------------------------------------------------------------------- (b) strays


STARTS = ["fresh", "forked"]


@pytest.mark.kernel
@pytest.mark.skipif(not available().sandboxed, reason="needs the whole sandbox (cgroups, namespaces)")
@pytest.mark.parametrize("how", STARTS)
def test_a_daemon_with_a_zombie_leader_is_dead_before_the_first_probe_op(how: str, tmp_path,
                                                                         reference_sections) -> None:
    """The probe's first op traces tax_switch, which answers wrong while the daemon beats."""
    path = submission(tmp_path, reference_sections, "setup", "tax", ZOMBIE_LEADER_DAEMON)
    options = GradeOptions(assignment="ch2-jit", seed=SEED, exercises=("tax",))  # tax's op is still the first
    report = grade_warm(path, options) if how == "forked" else grade_one(path, options)
    assert not report.cell_problems, report.cell_problems  # the daemon beat while the cells ran
    tax = checks(report, "tax")
    assert tax["tax.switch_visible"][0] == "passed", tax["tax.switch_visible"]


@pytest.mark.kernel
@pytest.mark.skipif(not available().sandboxed, reason="needs the whole sandbox (cgroups, namespaces)")
def test_forks_are_held_off_while_strays_are_killed_and_allowed_again_after() -> None:
    with Kernel(sandbox=SandboxPolicy()) as kernel:
        assert kernel.run("import subprocess\np = subprocess.Popen(['sleep', '300'])", 30).status == "ok"
        group = kernel._sandbox.cgroup("pids")  # type: ignore[union-attr]
        before = (group / "pids.max").read_text()
        assert kernel.stop_strays() == 1
        assert (group / "pids.max").read_text() == before
        assert kernel.run("assert p.wait(timeout=5) < 0\nq = subprocess.run(['true'])", 30).status == "ok"
