"""From module runs to verifier jobs: a module's facts come with its run, and a module whose run
hung or killed the verifier still has its facts read, by a job that runs nothing; knockouts are
jobs of their own, after the values, and one that hangs costs only the check that asked."""

from __future__ import annotations

import base64

import pytest

from grader.checks import ModuleRun
from grader.judging.verification import verify_all
from grader.kernel.protocol import ExportRequest, ExportResult, Observation, PyScalar
from grader.verifier.protocol import Aval, Constructs, LoopFacts, ModuleFacts, VerifierJob, VerifierResult

MODULE = base64.b64encode(b"a module").decode("ascii")
FACTS = ModuleFacts(fun_name="f", platforms=["cpu"], in_avals=[Aval(shape=[], dtype="float32", weak=False)],
                    out_avals=[Aval(shape=[], dtype="float32", weak=False)], in_tree="*", out_tree="*",
                    nr_devices=1, ops=["while"], custom_calls=[])


class FakeVerifier:
    """Answers a job that runs nothing with the facts, a run as `run_status` says; keeps what it was sent."""

    def __init__(self, run_status: str):
        self.run_status = run_status
        self.sent: list[list[VerifierJob]] = []

    def run(self, jobs: list[VerifierJob], timeout: float) -> dict[str, VerifierResult]:
        self.sent.append(jobs)
        results = {}
        for job in jobs:
            if not job.calls:
                results[job.id] = VerifierResult(id=job.id, status="ok", facts=FACTS, values=[])
            elif self.run_status == "ok":
                values = [[{"t": "array", "dtype": "float32", "shape": [], "data": 1.0}] for _ in job.calls]
                results[job.id] = VerifierResult.model_validate(
                    {"id": job.id, "status": "ok", "facts": FACTS.model_dump(), "values": values})
            else:
                results[job.id] = VerifierResult(id=job.id, status=self.run_status, detail="it hung")
        return results


class Check:
    """Two checks' worth of runs of one module: a value check's and a structure check's."""

    def __init__(self, export: ExportRequest):
        self._runs = [ModuleRun(export=export, inputs=[[PyScalar(v=2.0)], [PyScalar(v=3.0)]]),
                      ModuleRun(export=export, inputs=[], judged=False)]

    def runs(self) -> list[ModuleRun]:
        return self._runs


def verified(run_status: str) -> tuple[FakeVerifier, list]:
    """The value run's and the structure run's outcomes, and the jobs the verifier was sent."""
    export = ExportRequest(id="e1", target="f", args=[])
    observations = {"e1": Observation(id="e1", status="ok", result=ExportResult(
        module=MODULE, direct=True, jitted=True, out_tree="*", fun_name="f"))}
    verifier = FakeVerifier(run_status)
    check = Check(export)
    outcomes = verify_all(verifier, [check], observations, timeout=5.0)
    return verifier, [outcomes[id(run)] for run in check.runs()]


def test_a_module_that_runs_is_sent_once_with_its_calls() -> None:
    verifier, (values, inspected) = verified("ok")
    assert [[len(job.calls) for job in jobs] for jobs in verifier.sent] == [[2]]  # no job that runs nothing
    assert values.status == "ok" and len(values.values) == 2 and values.facts.ops == ["while"]
    assert inspected.status == "ok" and inspected.facts.ops == ["while"]


def test_a_module_whose_run_hung_still_has_its_facts_read() -> None:
    for status in ("timeout", "crashed"):
        verifier, (values, inspected) = verified(status)
        assert [[len(job.calls) for job in jobs] for jobs in verifier.sent] == [[2], [0]]
        assert values.status == status and values.facts is not None and values.facts.ops == ["while"]
        assert inspected.status == "ok" and inspected.facts.ops == ["while"]


def test_the_probe_asks_first_about_the_exercises_with_the_most_programs(repo_root) -> None:
    """So that the verifier's backlog when the kernel's last answer comes is the smallest
    exercise's; the plan itself, and so the report, keeps the assignment's order."""
    from grader import assignment as assignments
    from grader.judging.plan import plan, probe_order

    checks_plan = plan(assignments.load(str(repo_root / "assignments" / "ch2-jit")), seed=1)
    exports = {ex.id: len({r.export.id for c in checks for r in c.runs()}) for ex, checks in checks_plan}
    assert [ex.id for ex, _ in checks_plan] == ["tax", "newton", "detective", "training"]
    assert exports["training"] > exports["tax"] > exports["newton"] > exports["detective"] == 0
    assert [ex.id for ex, _ in probe_order(checks_plan)] == ["training", "tax", "newton", "detective"]
    tied = [(ex, []) for ex, _ in checks_plan]  # no programs anywhere: the assignment's order
    assert [ex.id for ex, _ in probe_order(tied)] == ["tax", "newton", "detective", "training"]


# ----------------------------------------------------------------------------- knockouts: jobs of their own

LOOPING = FACTS.model_copy(update={"constructs": Constructs(loops=[LoopFacts(stop="value_dependent", feeds_output=True)])})


class Tolerant:
    """What a structure check's spec says of values: its tolerance."""

    rtol, atol = 1e-5, 1e-2


class KnockingVerifier(FakeVerifier):
    """Values as FakeVerifier's; a knockout job answered as `knockout` says (ok: the loop does no work)."""

    def __init__(self, knockout: str):
        super().__init__("ok")
        self.knockout = knockout

    def run(self, jobs: list[VerifierJob], timeout: float) -> dict[str, VerifierResult]:
        self.sent.append(jobs)
        results = {}
        for job in jobs:
            if job.outputs is None:
                values = [[{"t": "array", "dtype": "float32", "shape": [], "data": 1.5}] for _ in job.calls]
                results[job.id] = VerifierResult.model_validate(
                    {"id": job.id, "status": "ok", "facts": LOOPING.model_dump(), "values": values})
            elif self.knockout == "ok":
                idle = LOOPING.constructs.model_copy(update={"loops": [LOOPING.constructs.loops[0].model_copy(
                    update={"does_work": False})]})
                results[job.id] = VerifierResult(id=job.id, status="ok", values=[],
                                                 facts=LOOPING.model_copy(update={"constructs": idle}))
            else:
                results[job.id] = VerifierResult(id=job.id, status=self.knockout, detail="still running after 5 s")
        return results


class StructureAndValues:
    """A value check's run of one module and a structure check's run of it that asks for its loop's knockout."""

    spec = Tolerant()

    def __init__(self, export: ExportRequest):
        self._runs = [ModuleRun(export=export, inputs=[[PyScalar(v=2.0)], [PyScalar(v=3.0)]]),
                      ModuleRun(export=export, inputs=[[PyScalar(v=2.0)]], judged=False, knockouts=frozenset({"loop"}))]

    def runs(self) -> list[ModuleRun]:
        return self._runs


def knocked_out(knockout: str) -> tuple[KnockingVerifier, list]:
    export = ExportRequest(id="e1", target="newton_sqrt", args=[])
    observations = {"e1": Observation(id="e1", status="ok", result=ExportResult(
        module=MODULE, direct=True, jitted=True, out_tree="*", fun_name="newton_sqrt"))}
    verifier = KnockingVerifier(knockout)
    check = StructureAndValues(export)
    outcomes = verify_all(verifier, [check], observations, timeout=5.0)
    return verifier, [outcomes[id(run)] for run in check.runs()]


def test_knockouts_are_a_job_of_their_own_after_the_values() -> None:
    """The value job runs no knockout; then one job per kind asked, given the module's own outputs
    (nothing compiled twice) and the tightest tolerance of the checks that asked."""
    verifier, (values, structure) = knocked_out("ok")
    [[value_job], [knockout_job]] = verifier.sent
    assert value_job.knockouts == [] and len(value_job.calls) == 3 and value_job.functions == ["newton_sqrt"]
    assert knockout_job.knockouts == ["loop"] and knockout_job.calls == value_job.calls
    assert [[v.data for v in call] for call in knockout_job.outputs] == [[1.5]] * 3
    assert knockout_job.tolerance == (1e-5, 1e-2) and knockout_job.functions == ["newton_sqrt"]
    for outcome in (values, structure):
        assert outcome.status == "ok" and outcome.facts.constructs.loops[0].does_work is False
    assert [v[0].item() for v in values.values] == [1.5, 1.5]


def test_a_knockout_that_hangs_costs_only_the_check_that_asked() -> None:
    """A second loop that never stops once the first is knocked out: the values (and every value
    check) stand, the knockout is marked unfinished, and only the structure check reads it."""
    for status in ("timeout", "crashed"):
        _, (values, structure) = knocked_out(status)
        assert values.status == "ok" and [v[0].item() for v in values.values] == [1.5, 1.5]
        for outcome in (values, structure):
            unfinished = outcome.facts.constructs.unfinished["loop"]
            assert unfinished.status == status and "still running" in unfinished.detail
            assert outcome.facts.constructs.loops[0].does_work is None
    from grader.checks.structure import unfinished_knockout
    from grader.spec import StructureCheck

    spec = StructureCheck(id="s", title="s", points=1, message="m", function="f", contains=["while"],
                          loop="value_dependent", cases={"rows": [[1.0]], "types": ["py"]})
    _, (_, structure) = knocked_out("timeout")
    verdict = unfinished_knockout(spec, structure.facts.constructs, "its exported program")
    assert verdict.status == "timeout" and "loop running no step" in verdict.message
    assert "still running after 5 s" in verdict.message


TWO_LOOPS = '''@jax.jit
def newton_sqrt(a, tol):
    x0 = jnp.where(a < 1.0, 1.0, a)

    def cond_fun(state):
        x, x_prev, k = state
        return (jnp.abs(x - x_prev) >= tol) & (k < 100)

    def body_fun(state):
        x, _, k = state
        return 0.5 * (x + a / x), x, k + 1

    x, _, k = lax.while_loop(cond_fun, body_fun, (x0, x0 + 1.0, 0))
    # a second loop that stops at once after a first loop that ran: forever when that one is knocked out
    _, extra = lax.while_loop(lambda s: s[0] == 0, lambda s: (s[0], s[1] + 1), (k, 0))
    return x, k + extra
'''


@pytest.mark.kernel
def test_a_correct_newton_whose_knockout_hangs_keeps_its_value_checks(tmp_path, reference_sections) -> None:
    """Graded for real, with a 3 s limit a module: every value check passes; only uses_while,
    whose knockout never finishes, says so (before, the knockout ran inside the value job and its
    hang took the values: 'did not finish, still running after 30 s'). Newton alone is graded, as
    test_chapter_words.py's endless loop is with a 2 s limit; the knockout's hang spends the limit."""
    from warm_grading import grade_warm

    from grader import GradeOptions

    sections = dict(reference_sections)
    sections["newton"] = TWO_LOOPS
    path = tmp_path / "two_loops.py"
    path.write_text("\n\n".join(f"# %% [{name}]\n{text}" for name, text in sections.items()), encoding="utf-8")
    report = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=3, exercises=("newton",), cell_timeout=3))
    [newton] = [e for e in report.exercises if e.id == "newton"]
    verdicts = {c.id: c for c in newton.checks}
    assert verdicts["newton.uses_while"].status == "timeout", verdicts["newton.uses_while"]
    assert "did not finish (still running after" in verdicts["newton.uses_while"].message
    assert {i: c.status for i, c in verdicts.items() if i != "newton.uses_while"} == {
        i: "passed" for i in verdicts if i != "newton.uses_while"}
