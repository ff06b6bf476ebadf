"""`grade validate`: prove that an assignment folder is sound before students see it.

For each assignment: its spec loads, from a folder named as the spec's `id` (else a row says to
rename the folder); every requirement has a check and every check names the
requirement it verifies; every reference solution scores full marks; the template scores zero
with "not answered yet" on every exercise; every hand-written mutant (`assignments/<id>/mutants/`)
fails exactly the checks its header declares; every mutant the grader derives from the reference
and the interface (`grader.course.mutation`) loses points on its exercise, unless the spec declares it
equivalent with a reason; every honest variant keeps full marks; and every check is failed by
some mutant, so no check is one that cannot fail. A derived mutant the reference gives nothing to
change in (a loop family and a reference with no loop it knows) is a row "not applicable", with
the reason, never graded and never a survivor. `mutant_source` gives any mutant's whole source
(`grade validate --show ID`) without grading anything. Per exercise it reports the domain each declared
argument is drawn from and what the derived `overfit` and `lookalike` families killed. Everything
is graded through the batch path (warm kernels, the sandbox; a derived mutant on the exercises it
changes alone, where its kill is read; every assignment's items in one pool of workers), and the
kill matrix (mutant x check) is kept for the outputs.

A hand-written mutant is a Python file whose first lines are

    # fails: tax.switch_uses_cond, tax.switch_visible
    # tax_switch uses jnp.select instead of lax.switch

followed by code that is appended, as a last cell, to the reference module solutions/<id>.py.
"""

from __future__ import annotations

import difflib
import hashlib
import multiprocessing
import pickle
import re
import tempfile
import tomllib
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from grader import assignment as assignments
from grader import precompile
from grader.assignment import Assignment, reference_solutions
from grader.course.mutation import overfit
from grader.course.mutation.families import FAMILIES, DerivedMutant, Family, derive_mutants
from grader.course.mutation.interface import Interface, derive
from grader.course.mutation.introspect import ReferenceFacts, introspect
from grader.course.reach import exercises_reached
from grader.domains import describe
from grader.errors import GraderError, SpecInvalid, UsageError
from grader.faults import is_internal, one_line
from grader.inert import MESSAGE_LIMIT, name, terminal
from grader.options import GradeOptions
from grader.report import Report
from grader.spec import AssignmentSpec

if TYPE_CHECKING:
    from grader.batch.executors import Task

SEED = 1
_FAILS = re.compile(r"^#\s*fails:\s*(?P<ids>.+?)\s*$")
Kind = Literal["spec", "solution", "template", "mutant", "derived", "honest", "coverage"]


class Row(BaseModel):
    """One line of the validation table (and one test item of its JUnit file). `bug` marks a
    broken assignment (exit 3): its own code raised, or a check raised on the reference."""

    assignment: str
    item: str
    ok: bool
    detail: str = ""
    bug: bool = False
    kind: Kind = "spec"
    duration_s: float | None = Field(default=None, description="the grading of this item, as its report says")


class MatrixRow(BaseModel):
    """One mutant's line of the kill matrix: which checks of its exercises it fails."""

    mutant: str
    family: Family | Literal["hand_written"]
    summary: str = ""
    exercises: list[str]
    killed_by: list[str] = Field(description="checks of its exercises that did not pass")
    expected: list[str] = Field(default_factory=list, description="checks that should kill it")
    requirements: list[str] = Field(default_factory=list, description="the requirements those checks verify")
    survived: bool
    equivalent: str | None = Field(default=None, description="the spec's reason, when declared equivalent")
    not_applicable: str | None = Field(default=None, description=(
        "why it could not be made of the reference (it uses no construct its family can change): not graded"))


REPORTED_FAMILIES: tuple[Family, ...] = ("overfit", "lookalike")  # reported per exercise


class DomainReport(BaseModel):
    """Where one argument's hidden values are drawn from (the spec's `[[exercises.domains]]`)."""

    argument: str
    functions: list[str]
    position: int
    drawn_from: str = Field(description="the domain in one line: bounds, scale, fixed values, edges")
    why: str


class FamilyTally(BaseModel):
    """One derived family's mutants of one exercise, by verdict."""

    killed: list[str] = Field(default_factory=list)
    equivalent: list[str] = Field(default_factory=list)
    survived: list[str] = Field(default_factory=list)
    not_applicable: list[str] = Field(default_factory=list)


class ExerciseCoverage(BaseModel):
    """Per exercise: the domain each declared argument is drawn from, and what the derived
    overfit and look-alike families it was validated against did."""

    exercise: str
    domains: list[DomainReport] = Field(default_factory=list)
    families: dict[str, FamilyTally] = Field(default_factory=dict)

    @property
    def item(self) -> str:
        return exercise_item(self.exercise)

    def line(self) -> str:
        domains = "; ".join(f"{d.drawn_from} ({', '.join(d.functions)})" for d in self.domains) or "no domain declared"
        tallies = [f"{family} killed {len(t.killed)} of {len(t.killed) + len(t.survived) + len(t.equivalent)}"
                   + (f" ({len(t.equivalent)} equivalent)" if t.equivalent else "")
                   + (f", survivors {', '.join(t.survived)}" if t.survived else "")
                   + (f", not applicable {', '.join(t.not_applicable)}" if t.not_applicable else "")
                   for family, t in self.families.items()]
        return f"{domains}; " + ("; ".join(tallies) or "no overfit or lookalike mutant derived")


def exercise_item(exercise: str) -> str:
    return f"exercise {exercise}: domains drawn from, overfit and lookalike families"


class AssignmentValidation(BaseModel):
    assignment: str
    rows: list[Row]
    checks: list[str] = Field(default_factory=list, description="every check id, the matrix's columns")
    matrix: list[MatrixRow] = Field(default_factory=list)
    generated: dict[str, int] = Field(default_factory=dict, description="derived mutants per family")
    not_applicable: dict[str, int] = Field(default_factory=dict, description=(
        "per family, the derived mutants the reference gives nothing to change in (matrix rows with a reason)"))
    exercises: list[ExerciseCoverage] = Field(default_factory=list, description=(
        "per exercise: the domain each argument is drawn from, the overfit and lookalike families' verdicts"))


class Validation(BaseModel):
    """What `grade validate --json` writes."""

    assignments: list[AssignmentValidation]

    @property
    def rows(self) -> list[Row]:
        return [r for a in self.assignments for r in a.rows]


@dataclass(frozen=True)
class Status:
    """Where the validation of one assignment stands, for a progress line: `total` is None while
    its items are still being planned (deriving mutants takes a while of its own)."""

    assignment: str
    done: int = 0
    total: int | None = None
    running: int = 0


RowListener = Callable[[Row], None]
StatusListener = Callable[[Status], None]


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
    try:  # a mutant that does not parse would only pass checks: "survives", and never say why
        compile("\n".join(lines) + "\n", path.name, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise GraderError(f"{path.name}, line {exc.lineno}: {exc.msg}: a mutant must be Python that runs as a "
                          "cell after the reference's") from None
    return Mutant(name=path.stem, path=path, fails=fails, summary=summary)


def mutants_of(folder: Path) -> list[Mutant]:
    return [read_mutant(p) for p in sorted((folder / "mutants").glob("*.py"))]


def _reaches(mutant: Mutant, reference: str, exercises: list[str]) -> tuple[str, ...] | None:
    """The exercises a hand-written mutant is graded on: those it declares failing and those its
    cell can change (None: all of them, or not known)."""
    reached = exercises_reached(mutant.path.read_text(encoding="utf-8"), reference, exercises)
    if reached is None:
        return None
    declared = {check.split(".", 1)[0] for check in mutant.fails}
    chosen = tuple(e for e in exercises if e in declared or e in reached)
    return chosen if chosen and len(chosen) < len(exercises) else None


def _not_passed(report: Report, exercises: Iterable[str] | None = None) -> set[str]:
    keep = set(exercises) if exercises is not None else None
    return {c.id for e in report.exercises for c in e.checks
            if c.status != "passed" and (keep is None or e.id in keep)}


def _describe(report: Report, ids: set[str]) -> str:
    """The instructor's view of the failures: with the counterexamples a student does not see."""
    messages = {c.id: c.counterexample or c.message for e in report.exercises for c in e.checks}
    return "; ".join(f"{i}: {messages.get(i) or 'passed'}" for i in sorted(ids))


# ----------------------------------------------------------------------------- deriving


def _introspect_in_worker(reference: str, interface: Interface) -> ReferenceFacts:
    """The reference's facts, from a fresh process (JAX stays out of the validating one)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        samples = {k: v.sample for k, v in interface.functions.items()}
        return pool.submit(introspect, reference, samples, list(interface.names)).result()


_introspected: dict[tuple[str, bytes], ReferenceFacts] = {}


def _reference_facts(reference: str, interface: Interface) -> ReferenceFacts:
    """The reference's facts, introspected once per process for one reference text and interface:
    the pytest plugin plans an assignment's items when it collects them and again when it
    validates them (2-3 s each time, a process importing JAX)."""
    key = (reference, hashlib.sha256(pickle.dumps(interface)).digest())  # it holds NumPy samples
    if key not in _introspected:
        _introspected[key] = _introspect_in_worker(reference, interface)
    return _introspected[key].model_copy(deep=True)


def derived_mutants(loaded: Assignment, reference: Path, families: set[str] | None = None) -> list[DerivedMutant]:
    """Every mutant and honest variant derived from the assignment's spec and reference."""
    interface = derive(loaded, SEED)
    text = reference.read_text(encoding="utf-8")
    facts = _reference_facts(text, interface)
    with overfit.sampled(overfit.sampling(loaded, SEED)):  # what the visible checks sample, from the spec
        made = derive_mutants(text, interface, facts)
    return [m for m in made if families is None or m.family in families]


# ----------------------------------------------------------------------------- one assignment


@dataclass(frozen=True)
class _Item:
    key: str
    kind: Kind
    path: Path
    mutant: Mutant | None = None
    derived: DerivedMutant | None = None
    reaches: tuple[str, ...] | None = None  # a hand-written mutant: the exercises it declares or can change

    @property
    def graded_on(self) -> tuple[str, ...] | None:
        """The exercises its verdict reads, graded alone: a derived mutant is judged on the
        exercises it changes and an honest variant with `expected` on those checks' exercises,
        so probing and verifying the others would be work nobody reads. A hand-written mutant must
        fail nothing beyond what it declares: it is graded on those exercises and every other one
        that reads what its cell binds (grader/course/reach.py), whole when that is not known.
        Solutions and the template are graded whole."""
        if self.mutant is not None:
            return self.reaches
        d = self.derived
        if d is None:
            return None
        if not d.honest:
            return tuple(d.exercises) or None
        return tuple(dict.fromkeys(check.split(".", 1)[0] for check in d.expected)) or None


class _Validator:
    """Validates one assignment: builds its items, grades them, judges each as it comes back.

    Each row goes to `on_row` the moment it is made (a validation takes minutes); the result
    still lists rows and matrix in the order of the items, whatever order the gradings finished
    in, so the outputs do not depend on timing. `_rank` is where the rows made now belong.
    """

    def __init__(self, assignment_name: str, scratch: Path, workers: int, families: set[str] | None,
                 on_row: RowListener | None = None, on_status: StatusListener | None = None):
        self.name = assignment_name
        self.scratch = scratch / assignment_name
        self.workers = workers
        self.families = families
        self.rows: list[Row] = []
        self.matrix: list[MatrixRow] = []
        self.generated: dict[str, int] = {}
        self.not_applicable: dict[str, int] = {}
        self.exercises: list[ExerciseCoverage] = []
        self.check_ids: list[str] = []
        self._on_row = on_row
        self._on_status = on_status
        self._rank = 0  # 0 while planning, 1 + an item's index while judging it, then after the items
        self._ranks: dict[int, int] = {}  # id() of a row or matrix row -> its rank
        self._duration: float | None = None  # the grading of the item being judged, as its report says
        self._grading_failed = False
        self._loaded: Assignment | None = None
        self._items_planned: list[_Item] = []
        self._seen_failing: set[str] = set()
        self._done = 0

    def row(self, item: str, ok: bool, detail: str = "", bug: bool = False, kind: Kind = "spec") -> None:
        made = Row(assignment=self.name, item=item, ok=ok, detail=detail, bug=bug, kind=kind,
                   duration_s=self._duration)
        self.rows.append(made)
        self._ranks[id(made)] = self._rank
        if self._on_row is not None:
            self._on_row(made)

    def _add_matrix(self, row: MatrixRow) -> None:
        self.matrix.append(row)
        self._ranks[id(row)] = self._rank

    def _status(self, done: int = 0, total: int | None = None) -> None:
        if self._on_status is not None:
            running = 0 if total is None else min(self.workers, total - done)
            self._on_status(Status(assignment=self.name, done=done, total=total, running=running))

    def _in_item_order(self) -> None:
        """Rows and matrix as if every grading had finished in the order of the items."""
        self.rows.sort(key=lambda r: self._ranks[id(r)])  # stable: within an item, as made
        self.matrix.sort(key=lambda r: self._ranks[id(r)])

    def result(self) -> AssignmentValidation:
        return AssignmentValidation(assignment=self.name, rows=self.rows, checks=self.check_ids,
                                    matrix=self.matrix, generated=self.generated, exercises=self.exercises,
                                    not_applicable=self.not_applicable)

    def plan(self) -> tuple[Assignment, list[_Item]] | None:
        """The assignment and what will be graded (None when its spec does not load)."""
        try:
            loaded = assignments.load(self.name)
        except SpecInvalid as exc:
            self.row("spec loads", False, "; ".join(exc.problems))
            return None
        spec = loaded.spec
        self.check_ids = [f"{e.id}.{c.id}" for e in spec.exercises for c in e.checks]
        self.row("spec loads", True, f"{len(self.check_ids)} checks")
        mismatch = folder_name_mismatch(loaded.folder, spec.id)
        if mismatch is not None:
            self.row(FOLDER_NAME_ITEM, False, mismatch)
        self._requirements(loaded)
        self._functions(loaded)
        self._hints(loaded)
        self._notebook_texts(loaded)
        return loaded, self._items(loaded)

    def prepare(self) -> None:
        """Plan what will be graded (`tasks`) and compile the reference's programs once for every
        item; nothing to grade when the spec does not load."""
        self._status()
        planned = self.plan()
        if planned is None:
            return
        self._loaded, self._items_planned = planned
        precompile.ensure(self._loaded)  # the reference's programs compiled once for every item
        self._rank = len(self._items_planned) + 1
        self._status(0, len(self._items_planned))

    def judge(self, index: int, report: Report) -> None:
        """One item's report, in whatever order the gradings finish."""
        assert self._loaded is not None
        after, self._done = self._rank, self._done + 1
        self._rank, self._duration = index + 1, report.duration_s
        self._judge_item(self._loaded, self._items_planned[index], report, self._seen_failing)
        self._rank, self._duration = after, None
        self._status(self._done, len(self._items_planned))

    def pending(self) -> bool:
        return self._done < len(self._items_planned)

    def grading_failed(self, exc: Exception) -> None:
        self._grading_failed = True
        self.row("grading", False, f"the grader could not grade this assignment: {one_line(exc)}", bug=True)

    def finish(self) -> AssignmentValidation:
        """The rows that read every item's verdict at once, then the result in the items' order."""
        loaded, items = self._loaded, self._items_planned
        if loaded is None:
            return self.result()
        self._in_item_order()
        if self._grading_failed:
            return self.result()
        self._stale_declarations(loaded, items)
        self._per_exercise(loaded)
        uncovered = set(self.check_ids) - self._seen_failing
        mutants = sum(1 for i in items if i.kind in ("mutant", "derived"))
        if self.families is not None:  # a partial run cannot tell a check no mutant fails (as stale declarations)
            self.row(COVERAGE_ITEM, True, f"not judged: --family grades only some mutants ({mutants} here)",
                     kind="coverage")
            return self.result()
        self.row(COVERAGE_ITEM, not uncovered,
                 f"{len(self.check_ids)} checks, {mutants} mutants" if not uncovered
                 else "no mutant fails " + ", ".join(sorted(uncovered)), kind="coverage")
        return self.result()

    def _judge_item(self, loaded: Assignment, item: _Item, report: Report, seen_failing: set[str]) -> None:
        if item.kind == "solution":
            self._check_solution(item, report)
        elif item.kind == "template":
            self._check_template(item, report)
        elif item.mutant is not None:
            seen_failing |= self._check_mutant(item, item.mutant, report, set(self.check_ids))
        elif item.derived is not None:
            seen_failing |= self._check_derived(loaded, item, item.derived, report)

    # ------------------------------------------------------------------ what is graded

    def _requirements(self, loaded: Assignment) -> None:
        unchecked = [f"{e.id}.{r.id}" for e in loaded.spec.exercises for r in e.requirements
                     if not any(r.id in c.verifies for c in e.checks)]
        unlinked = [f"{e.id}.{c.id}" for e in loaded.spec.exercises for c in e.checks if not c.verifies]
        missing = [e.id for e in loaded.spec.exercises if not e.requirements]
        problems = ([f"exercises without requirements: {', '.join(missing)}"] if missing else []) + \
                   ([f"requirements no check verifies: {', '.join(unchecked)}"] if unchecked else []) + \
                   ([f"checks that name no requirement: {', '.join(unlinked)}"] if unlinked else [])
        count = sum(len(e.requirements) for e in loaded.spec.exercises)
        self.row("every requirement has a check", not problems,
                 "; ".join(problems) or f"{count} requirements", kind="coverage")

    def _hints(self, loaded: Assignment) -> None:
        """A hidden check's hint (what a student reads of its failure) names no number the
        exercise's own words do not: a number there would be a hidden value or its range."""
        problems = [f"{exercise_id}.{check_id}: {problem}" for exercise_id, check_id, problem in hint_problems(loaded.spec)]
        hidden = sum(1 for e in loaded.spec.exercises for c in e.checks if c.hidden)
        self.row(HINTS_ITEM, not problems, "; ".join(problems) or f"{hidden} hidden checks", kind="coverage")

    def _notebook_texts(self, loaded: Assignment) -> None:
        """`notebook.toml` (where the assignment has one: the notebooks are made from it) and the
        reference module's cells name exactly the spec's exercises: a text or cell for an exercise
        the spec lacks makes a self-check cell the pack cannot answer ("has no exercise 'bogus'")."""
        texts_file = loaded.folder / "notebook.toml"
        if not texts_file.is_file():
            return
        exercises = [e.id for e in loaded.spec.exercises]
        problems = []
        try:
            texts = tomllib.loads(texts_file.read_text(encoding="utf-8"))
            named = list(texts.get("exercises", {})) if isinstance(texts.get("exercises"), dict) else None
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            named, problems = None, [f"notebook.toml does not read: {exc}"]
        if named is None and not problems:
            problems.append("notebook.toml has no [exercises] table (exercise id -> the text above its answer cell)")
        if named is not None and named != exercises:
            problems.append(_named_apart("notebook.toml's [exercises]", named, exercises))
        reference = loaded.folder.parent.parent / "solutions" / f"{loaded.spec.id}.py"
        if reference.is_file():
            cells = [c for c in re.findall(r"^# %% \[([\w-]+)\]", reference.read_text(encoding="utf-8"), flags=re.M)
                     if c != "setup"]
            if cells != exercises:
                problems.append(_named_apart(f"solutions/{loaded.spec.id}.py's cells", cells, exercises))
        self.row(NOTEBOOK_ITEM, not problems, "; ".join(problems) or f"{len(exercises)} exercises, in the spec's order",
                 kind="coverage")

    def _functions(self, loaded: Assignment) -> None:
        """How each function is judged, as the spec declares it from its text: one row, listing
        them ("tax_switch traced, step either, pure, ..."), failed when a function a check calls is
        not declared."""
        undeclared = loaded.spec.undeclared()
        said = []
        for function in loaded.spec.functions.values():
            rules = [function.judged] + (["pure"] if function.pure else []) + \
                    [f"calls {', '.join(rule.name for rule in function.calls)}"] * bool(function.calls)
            said.append(f"{function.name} {', '.join(rules)}")
        self.row(FUNCTIONS_ITEM, not undeclared, "; ".join(undeclared) or "; ".join(said) or "no functions",
                 kind="coverage")

    def _items(self, loaded: Assignment) -> list[_Item]:
        root = loaded.folder.parent.parent  # the course: assignments/<id>/ beside solutions/, student_template/
        items: list[_Item] = []
        solutions = reference_solutions(loaded)
        if not solutions:
            self.row("reference solution", False, f"no solutions/{self.name}.py or .ipynb", kind="solution")
        items += [_Item(key=f"{p.relative_to(root)} scores full marks", kind="solution", path=p) for p in solutions]
        template = root / "student_template" / f"{self.name}.ipynb"
        if template.is_file():
            items.append(_Item(key="template scores 0, every exercise 'not answered yet'", kind="template",
                               path=template))
        else:
            self.row("template", False, f"no student_template/{self.name}.ipynb", kind="template")
        mutants = []
        for path in sorted((loaded.folder / "mutants").glob("*.py")):
            try:
                mutants.append(read_mutant(path))
            except GraderError as exc:  # that mutant's row; the others are graded
                self.row(f"mutant {path.stem}", False, str(exc), kind="mutant")
        reference = root / "solutions" / f"{self.name}.py"
        if not reference.is_file():
            if mutants:
                self.row("mutants", False, f"mutants need the reference module solutions/{self.name}.py", kind="mutant")
            self.row("derived mutants", False, f"deriving mutants needs the reference module solutions/{self.name}.py",
                     kind="derived")
            return items
        text = reference.read_text(encoding="utf-8")
        exercises = [e.id for e in loaded.spec.exercises]
        for m in mutants:
            items.append(_Item(key=f"mutant {m.name}", kind="mutant", mutant=m, reaches=_reaches(m, text, exercises),
                               path=self._write(f"mutant-{m.name}", m.submission(text))))
        try:
            derived = derived_mutants(loaded, reference, self.families)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the reference or its generators are broken: exit 3
            self.row("derived mutants", False, f"the reference could not be introspected: {one_line(exc)}",
                     bug=True, kind="derived")
            return items
        for family in FAMILIES:
            self.generated[family] = sum(1 for m in derived if m.family == family and m.not_applicable is None)
            self.not_applicable[family] = sum(1 for m in derived if m.family == family and m.not_applicable)
        for index, d in enumerate(derived):
            kind: Kind = "honest" if d.honest else "derived"
            if d.not_applicable is not None:
                planning, self._rank = self._rank, len(items) + 1  # in the results, where its item would be
                self._not_applicable(loaded, d, kind)
                self._rank = planning
                continue
            items.append(_Item(key=f"{'honest' if d.honest else 'derived'} {d.name}", kind=kind, derived=d,
                               path=self._write(f"derived-{index:03d}", d.submission)))
        return items

    def _not_applicable(self, loaded: Assignment, d: DerivedMutant, kind: Kind) -> None:
        """A row (and a matrix row) for a mutant the reference gives nothing to change in: it is
        not graded, and a declaration that it is equivalent is stale."""
        declared = _equivalences(loaded).get(d.name)
        self.row(f"{kind} {d.name}", declared is None, f"not applicable: {d.not_applicable}" + (
            "; it is declared equivalent: remove the declaration" if declared is not None else ""), kind=kind)
        self._add_matrix(MatrixRow(mutant=d.name, family=d.family, summary=d.summary, exercises=d.exercises,
                                   killed_by=[], expected=d.expected,
                                   requirements=self._requirements_of(loaded, d.expected), survived=False,
                                   not_applicable=d.not_applicable))

    def _write(self, folder: str, text: str) -> Path:
        path = self.scratch / folder / f"{self.name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def tasks(self) -> list[Task]:
        """One task per planned item, named by its key (its assignment tells it from another's)."""
        from grader.batch.executors import Task

        options = GradeOptions(assignment=self.name, seed=SEED)
        return [Task(student=i.key, path=str(i.path),
                     options=options.model_copy(update={"exercises": i.graded_on})) for i in self._items_planned]

    # ------------------------------------------------------------------ verdicts

    def _graded(self, item: _Item, report: Report) -> bool:
        if report.status == "error":
            self.row(item.key, False, f"could not be graded: {report.error}", bug=is_internal(report), kind=item.kind)
            return False
        return True

    def _check_solution(self, item: _Item, report: Report) -> None:
        if not self._graded(item, report):
            return
        raised = {c.id: c.judge_error for e in report.exercises for c in e.checks if c.judge_error}
        if raised:
            self.row(item.key, False, "checks raised on the reference solution (an assignment bug): "
                     + "; ".join(f"{k}: {v}" for k, v in sorted(raised.items())), bug=True, kind="solution")
            return
        failing = _not_passed(report)
        self.row(item.key, not failing, f"{report.score:g}/{report.max_score:g}"
                 + (f": {_describe(report, failing)}" if failing else ""), kind="solution")

    def _check_template(self, item: _Item, report: Report) -> None:
        if not self._graded(item, report):
            return
        answered = [e.id for e in report.exercises if not all(c.reason == "not_answered" for c in e.checks)]
        ok = report.score == 0 and not answered
        detail = f"{report.score:g}/{report.max_score:g}"
        if answered:
            detail += "; not 'not answered yet': " + ", ".join(answered)
        self.row(item.key, ok, detail, kind="template")

    def _check_mutant(self, item: _Item, mutant: Mutant, report: Report, spec_ids: set[str]) -> set[str]:
        unknown = mutant.fails - spec_ids
        if unknown:
            self.row(item.key, False, "declares unknown checks: " + ", ".join(sorted(unknown)), kind="mutant")
            return set()
        if not self._graded(item, report):
            return set()
        failing = _not_passed(report)
        missed, extra = mutant.fails - failing, failing - mutant.fails
        detail = f"fails {', '.join(sorted(mutant.fails))}"
        if missed:
            detail = f"passes {', '.join(sorted(missed))} although it declares failing it"
        if extra:
            detail += ("; " if missed else "; but also fails ") + _describe(report, extra)
        self.row(item.key, not missed and not extra, detail, kind="mutant")
        exercises = sorted({i.split(".", 1)[0] for i in mutant.fails})
        self._add_matrix(MatrixRow(mutant=mutant.name, family="hand_written", summary=mutant.summary,
                                   exercises=exercises, killed_by=sorted(failing), expected=sorted(mutant.fails),
                                   survived=not failing))
        return failing & mutant.fails

    def _check_derived(self, loaded: Assignment, item: _Item, mutant: DerivedMutant, report: Report) -> set[str]:
        if not self._graded(item, report):
            return set()
        broken = report.cell_problems  # the reference runs clean: a problem is the derived code's
        if broken:
            self.row(item.key, False, f"its derived code did not run (a grader bug): {broken[0].message}",
                     bug=True, kind=item.kind)
            return set()
        if mutant.honest:
            failing = _not_passed(report)
            if mutant.expected:
                failing &= set(mutant.expected)
            self.row(item.key, not failing, f"{mutant.summary}: " + (
                f"loses points on an honest variant: {_describe(report, failing)}" if failing
                else f"{report.score:g}/{report.max_score:g}"
                + (f" on {', '.join(item.graded_on)}" if item.graded_on else "")), kind="honest")
            self._add_matrix(self._matrix_row(loaded, mutant, failing, None))
            return set()
        killed = _not_passed(report, mutant.exercises)
        reason = _equivalences(loaded).get(mutant.name)
        self._add_matrix(self._matrix_row(loaded, mutant, killed, reason))
        if reason is not None:
            ok = not killed
            detail = (f"declared equivalent: {reason}" if ok else
                      f"declared equivalent, but {', '.join(sorted(killed))} kill it: remove the declaration")
        else:
            ok = bool(killed)
            requirements = "; ".join(self._requirements_of(loaded, mutant.expected))
            detail = (f"killed by {', '.join(sorted(killed))}" if ok else
                      f"SURVIVES: {mutant.summary}, and keeps full marks on {', '.join(mutant.exercises)}; "
                      f"checks that should kill it: {', '.join(mutant.expected) or 'none'}"
                      + (f" (requirements: {requirements})" if requirements else "")
                      + "; add a check, or declare it equivalent with its reason")
        self.row(item.key, ok, detail, kind="derived")
        return killed

    def _matrix_row(self, loaded: Assignment, mutant: DerivedMutant, killed: set[str], reason: str | None) -> MatrixRow:
        return MatrixRow(mutant=mutant.name, family=mutant.family, summary=mutant.summary, exercises=mutant.exercises,
                         killed_by=sorted(killed), expected=mutant.expected,
                         requirements=self._requirements_of(loaded, mutant.expected),
                         survived=not killed, equivalent=reason)

    @staticmethod
    def _requirements_of(loaded: Assignment, checks: list[str]) -> list[str]:
        found: list[str] = []
        for exercise in loaded.spec.exercises:
            for check in exercise.checks:
                if f"{exercise.id}.{check.id}" in checks:
                    found += [f"{exercise.id}.{r}" for r in check.verifies if f"{exercise.id}.{r}" not in found]
        return found

    def _stale_declarations(self, loaded: Assignment, items: list[_Item]) -> None:
        if self.families is not None:
            return  # a partial run cannot tell a stale declaration
        made = {i.derived.name for i in items if i.derived is not None}
        made |= {r.mutant for r in self.matrix if r.not_applicable}  # their rows say so
        declared = set(_equivalences(loaded))
        unknown = sorted(declared - made)
        honest = sorted(declared & {i.derived.name for i in items if i.derived is not None and i.derived.honest})
        if unknown or honest:  # an honest variant must keep full marks: nothing excuses it (found by an author)
            self.row("equivalent declarations name derived mutants", False, "; ".join(
                (["no derived mutant is called " + ", ".join(unknown)] if unknown else [])
                + ([", ".join(honest) + (" is an honest variant" if len(honest) == 1 else " are honest variants")
                    + ", which must keep full marks: a declaration cannot excuse one; loosen the check it fails"]
                   if honest else [])), kind="derived")


    def _per_exercise(self, loaded: Assignment) -> None:
        """One row per exercise: its declared domains and its overfit and lookalike verdicts."""
        for exercise in loaded.spec.exercises:
            coverage = ExerciseCoverage(exercise=exercise.id, domains=[
                DomainReport(argument=d.argument, functions=list(d.functions), position=d.position,
                             drawn_from=describe(d), why=d.why) for d in exercise.domains])
            for row in self.matrix:
                if row.family in REPORTED_FAMILIES and exercise.id in row.exercises:
                    tally = coverage.families.setdefault(row.family, FamilyTally())
                    verdict = (tally.not_applicable if row.not_applicable else tally.equivalent if row.equivalent
                               else tally.survived if row.survived else tally.killed)
                    verdict.append(row.mutant)
            self.exercises.append(coverage)
            survivors = [m for t in coverage.families.values() for m in t.survived]
            self.row(coverage.item, not survivors, coverage.line(), kind="coverage")


def _equivalences(loaded: Assignment) -> dict[str, str]:
    return {e.mutant: e.reason for ex in loaded.spec.exercises for e in ex.equivalent}


COVERAGE_ITEM = "every check can fail"
FOLDER_NAME_ITEM = "folder named as the spec's id"
FUNCTIONS_ITEM = "every function says how it is judged"
NOTEBOOK_ITEM = "the notebook texts and the reference's cells name the spec's exercises"


def _named_apart(what: str, named: list[str], exercises: list[str]) -> str:
    """How a list of exercise ids differs from the spec's: the unknown, the missing, or the order."""
    unknown = [n for n in named if n not in exercises]
    missing = [e for e in exercises if e not in named]
    if unknown or missing:
        return what + "".join([f" name exercises the spec lacks: {', '.join(unknown)}" if unknown else "",
                               ";" if unknown and missing else "",
                               f" lack {', '.join(missing)}" if missing else ""])
    return f"{what} are in another order than the spec's ({', '.join(exercises)})"
HINTS_ITEM = "every hidden check's hint names no hidden value"
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*(?:e-?\d+)?")


def hint_problems(spec: AssignmentSpec) -> list[tuple[str, str, str]]:
    """(exercise, check, why) for each hidden check without a hint, or whose hint names a number
    that the exercise's own words (its title, its requirements, the check's title) do not."""
    found = []
    for exercise in spec.exercises:
        words = " ".join([exercise.title, *(r.text for r in exercise.requirements)])
        for check in exercise.checks:
            if not check.hidden:
                continue
            if not check.hint:
                found.append((exercise.id, check.id, "no hint (what a student reads when it fails)"))
                continue
            strays = sorted(set(_NUMBER.findall(check.hint)) - set(_NUMBER.findall(words + " " + check.title)))
            if strays:
                found.append((exercise.id, check.id, f"its hint names {', '.join(strays)}, which the exercise's "
                                                     "title and requirements do not (a hidden value or range?)"))
    return found


def folder_name_mismatch(folder: Path, spec_id: str) -> str | None:
    """The sentence when an assignment's folder is not named as its spec's `id` (None when it is).
    The folder is what to rename: the id is what handed-out notebooks, solutions/<id>.* and every
    report name, while `-a`, `grade validate` and a notebook's claim find an assignment by its
    folder's name, so a batch of its notebooks could not find it without -a."""
    if folder.name == spec_id:
        return None
    return (f"the folder is named {folder.name!r} but its spec's id is {spec_id!r}: rename the folder to "
            f"{spec_id} (notebooks, solutions/{spec_id}.* and reports name the id; the folder is found by "
            "its name)")


_ROW_PREFIXES = ("derived ", "honest ", "mutant ")  # a row's item names a mutant so


def mutant_source(assignment_name: str, ident: str, families: set[str] | None = None) -> str:
    """The whole source of the mutant or honest variant `ident` of an assignment (its name in the
    kill matrix; a row's `derived ` / `honest ` / `mutant ` prefix is accepted): the reference with
    its cell appended. Nothing is graded (a derived one costs the reference's introspection, a
    process importing JAX). A mutant the reference gives nothing to change in is a comment with the
    reason, before the cell it would append, if any. An unknown `ident` is a UsageError naming the
    near matches."""
    loaded = assignments.load(assignment_name)
    wanted = ident.strip()
    for prefix in _ROW_PREFIXES:
        wanted = wanted.removeprefix(prefix)
    reference = loaded.folder.parent.parent / "solutions" / f"{assignment_name}.py"
    text = reference.read_text(encoding="utf-8") if reference.is_file() else None
    hand = {m.name: m for m in mutants_of(loaded.folder)}
    if text is None:
        raise UsageError(f"{assignment_name}'s mutants are cells appended to solutions/{assignment_name}.py, "
                         "which does not exist")
    if wanted in hand:
        return hand[wanted].submission(text)
    derived = {d.name: d for d in derived_mutants(loaded, reference, families)}
    if wanted in derived:
        found = derived[wanted]
        if found.not_applicable is None:
            return found.submission
        return f"# {found.name}: not applicable: {found.not_applicable}\n" + found.submission
    close = difflib.get_close_matches(wanted, [*hand, *derived], n=3, cutoff=0.6)
    raise UsageError(f"{assignment_name} has no mutant or honest variant {ident!r}" + (
        f"; did you mean {' or '.join(close)}?" if close else
        f"; `grade validate {assignment_name}` names them all in its kill matrix"))


def planned_items(assignment_name: str, families: set[str] | None = None) -> list[str]:
    """The names of the rows validating an assignment will give, without grading anything
    (the pytest plugin collects them as test items)."""
    with tempfile.TemporaryDirectory(prefix="grade-validate-plan-") as tmp:
        validator = _Validator(assignment_name, Path(tmp), 1, families)
        planned = validator.plan()
        keys = [r.item for r in validator.rows]
        if planned is not None:
            keys += [i.key for i in planned[1]] + [exercise_item(e.id) for e in planned[0].spec.exercises]
            keys += [COVERAGE_ITEM]
        return list(dict.fromkeys(keys))


def validate_all(names: list[str] | None = None, *, workers: int = 2, families: set[str] | None = None,
                 on_row: RowListener | None = None, on_status: StatusListener | None = None) -> Validation:
    """Validate the named assignments (all when None); every grading runs in a fresh kernel.

    `on_row` gets each row as soon as it is judged, in the order the gradings finish (the result
    keeps the items' order); `on_status` gets each step of the progress. What they raise stops
    the validation (its workers too) and propagates: a closed stdout ends the run."""
    names = names or assignments.available()
    with tempfile.TemporaryDirectory(prefix="grade-validate-") as tmp:
        validators = [_Validator(n, Path(tmp), workers, families, on_row, on_status) for n in names]
        for validator in validators:
            validator.prepare()
        _grade_together(validators, workers)
        return Validation(assignments=[v.finish() for v in validators])


def _grade_together(validators: list[_Validator], workers: int) -> None:
    """Every assignment's items in one pool of workers with warm kernels, each report judged
    by its validator as it comes: the pool's start and the wait for its last grading are paid
    once, not once an assignment. Within an assignment, items graded whole go first (the
    longest), so that the last gradings are short ones. What a listener raises propagates (a
    closed stdout ends the run); what the pool raises is a row of every assignment not done."""
    from grader.batch.executors import LocalExecutor, SerialExecutor

    owner: dict[tuple[str | None, str], tuple[_Validator, int]] = {}  # (assignment, item) -> its validator
    tasks = []
    for validator in validators:
        made = validator.tasks()
        for index, task in enumerate(made):
            owner[task.options.assignment, task.student] = (validator, index)
        tasks += sorted(made, key=lambda t: t.options.exercises is not None)
    if not tasks:
        return
    executor = LocalExecutor(workers) if workers > 1 else SerialExecutor()
    reports = executor.map(tasks)
    try:
        while True:
            try:
                task, report = next(reports)
            except StopIteration:
                return
            except Exception as exc:  # noqa: BLE001 - a broken machine or spec: one row an assignment, exit 3
                for validator in validators:
                    if validator.pending():
                        validator.grading_failed(exc)
                return
            validator, index = owner[task.options.assignment, task.student]
            validator.judge(index, report)  # outside the try: what a listener raises is not the pool's
    finally:
        reports.close()  # its workers stopped, whatever ended the loop


def validate(names: list[str] | None = None, *, workers: int = 2, families: set[str] | None = None) -> list[Row]:
    """The rows of `validate_all`."""
    return validate_all(names, workers=workers, families=families).rows


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
