"""From module runs to verifier jobs: a module's facts come with its run, and a module whose run
hung or killed the verifier still has its facts read, by a job that runs nothing."""

from __future__ import annotations

import base64

from grader.checks import ModuleRun
from grader.judging.verification import verify_all
from grader.kernel.protocol import ExportRequest, ExportResult, Observation, PyScalar
from grader.verifier.protocol import Aval, ModuleFacts, VerifierJob, VerifierResult

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
