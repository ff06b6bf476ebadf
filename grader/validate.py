"""`grade validate`: prove that an assignment folder is sound before students see it.

For each assignment: its spec loads; every reference solution scores full marks; the template
scores zero with "not answered yet" on every exercise; every mutant (a wrong submission in
`assignments/<id>/mutants/`) fails exactly the checks its header declares and passes all others;
and every check is failed by some mutant, so no check is one that cannot fail.

A mutant is a Python file whose first lines are

    # fails: tax.switch_uses_cond, tax.switch_visible
    # tax_switch uses jnp.select instead of lax.switch

followed by code that is appended, as a last cell, to the reference module solutions/<id>.py.
"""

from __future__ import annotations

import multiprocessing
import re
import tempfile
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from grader import assignment as assignments
from grader.errors import GraderError, SpecInvalid
from grader.faults import classify, student_reason
from grader.inert import MESSAGE_LIMIT, name, terminal
from grader.options import GradeOptions
from grader.report import Report

SEED = 1
_FAILS = re.compile(r"^#\s*fails:\s*(?P<ids>.+?)\s*$")


class Row(BaseModel):
    """One line of the validation table. `bug` marks a broken assignment (exit 3): its own code
    raised, or one of its checks raised on the reference solution."""

    assignment: str
    item: str
    ok: bool
    detail: str = ""
    bug: bool = False


@dataclass(frozen=True)
class Mutant:
    name: str
    path: Path
    fails: frozenset[str]
    summary: str

    def submission(self, reference: str) -> str:
        return reference.rstrip("\n") + "\n\n# %% [mutant]\n" + self.path.read_text(encoding="utf-8")


def read_mutant(path: Path) -> Mutant:
    """Parse a mutant's header; a file without `# fails:` is a broken assignment."""
    lines = path.read_text(encoding="utf-8").splitlines()
    match = _FAILS.match(lines[0]) if lines else None
    if not match:
        raise GraderError(f"{path}: the first line must be '# fails: <check id>, ...'")
    fails = frozenset(x.strip() for x in match["ids"].split(",") if x.strip())
    summary = lines[1].lstrip("# ").strip() if len(lines) > 1 and lines[1].startswith("#") else ""
    return Mutant(name=path.stem, path=path, fails=fails, summary=summary)


def mutants_of(folder: Path) -> list[Mutant]:
    return [read_mutant(p) for p in sorted((folder / "mutants").glob("*.py"))]


def _grade(path: str, assignment: str) -> Report:
    """Worker: grade one file (a top-level function, so process pools can run it)."""
    from grader.pipeline import grade_one

    return grade_one(path, GradeOptions(assignment=assignment, seed=SEED))


def _not_passed(report: Report) -> set[str]:
    return {c.id for e in report.exercises for c in e.checks if c.status != "passed"}


def _describe(report: Report, ids: set[str]) -> str:
    messages = {c.id: c.message for e in report.exercises for c in e.checks}
    return "; ".join(f"{i}: {messages.get(i) or 'passed'}" for i in sorted(ids))


class _Validator:
    """Validates one assignment, grading its files through a shared process pool."""

    def __init__(self, name: str, pool: ProcessPoolExecutor, scratch: Path):
        self.name = name
        self.pool = pool
        self.scratch = scratch
        self.rows: list[Row] = []

    def row(self, item: str, ok: bool, detail: str = "", bug: bool = False) -> None:
        self.rows.append(Row(assignment=self.name, item=item, ok=ok, detail=detail, bug=bug))

    def submit(self, path: Path) -> Future:
        return self.pool.submit(_grade, str(path), self.name)

    def run(self) -> list[Row]:
        try:
            loaded = assignments.load(self.name)
        except SpecInvalid as exc:
            self.row("spec loads", False, "; ".join(exc.problems))
            return self.rows
        self.row("spec loads", True, f"{sum(len(e.checks) for e in loaded.spec.exercises)} checks")
        root = assignments.assignments_dir().parent
        solutions = sorted((root / "solutions").glob(f"{self.name}.*"))
        solutions = [p for p in solutions if p.suffix in (".py", ".ipynb")]
        template = root / "student_template" / f"{self.name}.ipynb"
        try:
            mutants = mutants_of(loaded.folder)
        except GraderError as exc:
            self.row("mutants readable", False, str(exc))
            mutants = []
        reference = root / "solutions" / f"{self.name}.py"

        graded = {p: self.submit(p) for p in solutions}
        template_job = self.submit(template) if template.is_file() else None
        mutant_jobs: dict[Mutant, Future] = {}
        if mutants and reference.is_file():
            text = reference.read_text(encoding="utf-8")
            for m in mutants:
                path = self.scratch / self.name / m.name / f"{self.name}.py"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(m.submission(text), encoding="utf-8")
                mutant_jobs[m] = self.submit(path)

        if not solutions:
            self.row("reference solution", False, f"no solutions/{self.name}.py or .ipynb")
        for path, job in graded.items():
            self._check_solution(path.relative_to(root), job)
        if template_job is None:
            self.row("template", False, f"no student_template/{self.name}.ipynb")
        else:
            self._check_template(template_job)
        spec_ids = {f"{e.id}.{c.id}" for e in loaded.spec.exercises for c in e.checks}
        seen_failing: set[str] = set()
        for m, job in mutant_jobs.items():
            seen_failing |= self._check_mutant(m, job, spec_ids)
        if mutants and not reference.is_file():
            self.row("mutants", False, f"mutants need the reference module solutions/{self.name}.py")
        uncovered = spec_ids - seen_failing
        self.row("every check can fail", not uncovered,
                 f"{len(spec_ids)} checks, {len(mutant_jobs)} mutants" if not uncovered
                 else "no mutant fails " + ", ".join(sorted(uncovered)))
        return self.rows

    def _result(self, item: str, job: Future) -> Report | None:
        try:
            return job.result()
        except Exception as exc:  # noqa: BLE001 - sorted by the one fault boundary
            if classify(exc) == "grader":
                self.row(item, False, f"could not be graded: {exc}", bug=True)
            else:
                self.row(item, False, f"could not be graded: {student_reason(exc)}")
            return None

    def _check_solution(self, path: Path, job: Future) -> None:
        item = f"{path} scores full marks"
        report = self._result(item, job)
        if report is None:
            return
        raised = {c.id: c.judge_error for e in report.exercises for c in e.checks if c.judge_error}
        if raised:
            self.row(item, False, "checks raised on the reference solution (an assignment bug): "
                     + "; ".join(f"{k}: {v}" for k, v in sorted(raised.items())), bug=True)
            return
        failing = _not_passed(report)
        self.row(item, not failing, f"{report.score:g}/{report.max_score:g}"
                 + (f": {_describe(report, failing)}" if failing else ""))

    def _check_template(self, job: Future) -> None:
        item = "template scores 0, every exercise 'not answered yet'"
        report = self._result(item, job)
        if report is None:
            return
        answered = [e.id for e in report.exercises
                    if not all((c.message or "").startswith("Not answered yet") for c in e.checks)]
        ok = report.score == 0 and not answered
        detail = f"{report.score:g}/{report.max_score:g}"
        if answered:
            detail += "; not 'not answered yet': " + ", ".join(answered)
        self.row(item, ok, detail)

    def _check_mutant(self, mutant: Mutant, job: Future, spec_ids: set[str]) -> set[str]:
        item = f"mutant {mutant.name}"
        unknown = mutant.fails - spec_ids
        if unknown:
            self.row(item, False, "declares unknown checks: " + ", ".join(sorted(unknown)))
            return set()
        report = self._result(item, job)
        if report is None:
            return set()
        failing = _not_passed(report)
        missed, extra = mutant.fails - failing, failing - mutant.fails
        detail = f"fails {', '.join(sorted(mutant.fails))}"
        if missed:
            detail = f"passes {', '.join(sorted(missed))} although it declares failing it"
        if extra:
            detail += ("; " if missed else "; but also fails ") + _describe(report, extra)
        self.row(item, not missed and not extra, detail)
        return failing & mutant.fails


def validate(names: list[str] | None = None, *, workers: int = 2) -> list[Row]:
    """Validate the named assignments (all when None); every grading runs in a fresh kernel."""
    names = names or assignments.available()
    context = multiprocessing.get_context("spawn")  # workers start clean: no inherited threads
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="grade-validate-") as tmp, \
            ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        for name in names:
            rows += _Validator(name, pool, Path(tmp)).run()
    return rows


def table(rows: list[Row]) -> str:
    """The rows for a terminal: details quote student-like text (mutants' messages), so inert."""
    cells = [(name(r.assignment), name(r.item), r) for r in rows]
    width_a = max([len("assignment")] + [len(a) for a, _, _ in cells])
    width_i = max([len("validated")] + [len(i) for _, i, _ in cells])
    lines = [f"{'assignment':<{width_a}}  {'validated':<{width_i}}  result"]
    for a, i, r in cells:
        lines.append(f"{a:<{width_a}}  {i:<{width_i}}  {'ok' if r.ok else 'FAILED'}"
                     + (f"  ({terminal(r.detail, MESSAGE_LIMIT)})" if r.detail else ""))
    return "\n".join(lines)
