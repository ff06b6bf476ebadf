"""What Gradescope's `run_autograder` runs for each submission: `python -m grader.gradescope.run`.

Gradescope's contract, from its "Autograder Specifications" (gradescope-autograders.readthedocs.io/
en/latest/specs/, source gradescope/autograder_samples docs/specs.md): the autograder zip is
unpacked into /autograder/source; for each submission the harness puts the student's files in
/autograder/submission, runs /autograder/run_autograder from /autograder, and uploads
/autograder/results/results.json, which `run_autograder` must write. What it prints is kept in
/autograder/results/stdout and shown to instructors only (`stdout_visibility` "hidden", the
default, kept explicit). The root is `$GRADESCOPE_ROOT`, /autograder unless set (for the tests).

The steps:

1. the assignment is the bundle's: the one folder under source/assignments, made the grader's
   assignments folder (`GRADER_ASSIGNMENTS`) and graded as the instructor's `-a`, so a notebook
   that names another assignment is refused as it is on the command line;
2. the submission is the one `.ipynb` or `.py` under submission/, at any depth (an uploaded zip of
   a folder lands one level down); hidden names, `__pycache__` and `.ipynb_checkpoints` are
   skipped and symbolic links are never followed (one named like a submission is refused by
   `read_submission`, as everywhere). Of several, the one named after the assignment
   (`ch2-jit.ipynb`, `ch2_jit.py`) is graded, else the one notebook: a helper module beside it
   (`utils.py`) is not the submission, and the output names the files not graded. None, or
   several that this does not decide (two named after the assignment, two modules): every check
   0 and one sentence saying what was expected, not a guess at which file was meant;
3. results.json is `grader.outputs.exports.gradescope_results(report)`, validated against the fields the
   specification documents (`GradescopeResults`) before it is written, atomically.

The sandbox. Gradescope grades each submission in a fresh Docker container, as root, that is
thrown away afterwards; its cgroups are read-only and it usually refuses namespaces (no
CAP_SYS_ADMIN), so bubblewrap cannot run. Every layer the container allows is used
(`grader.sandbox.layers.detect()` tries each): there, the student's code runs as an unprivileged user
(setpriv) under the seccomp filter (loaded by the wrapper itself) and rlimits (address space,
processes, file size, CPU time). Before grading, the folders that hold the assignment and the
results are made root's alone (`protect`): the student's user can read neither the bundle nor
write results.json or run_autograder. After grading, every process the submission left is
killed (this process is their subreaper, so a double-forked daemon is found too) before
results.json is written. The output says in one sentence per missing layer what it costs; a
sandboxed kernel that cannot start is the grader's fault (the log says why), never a reason to
grade without the sandbox.

Nothing here ends without a results.json, and a student never sees a traceback: a grader or
assignment fault gives score 0 and a sentence that it is not the student's work (the details go
to stdout, for the instructor, since an assignment's error may quote a hidden input), and
`run_autograder` writes one itself if this process dies. Every student-controlled string (file
names, the report's messages) reaches results.json through `grader.inert`.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from grader.atomic import write_atomic
from grader.errors import GraderError
from grader.inert import name, terminal, text
from grader.outputs.names import GRADESCOPE_RESULTS
from grader.report import Isolation, Report

ROOT_ENV = "GRADESCOPE_ROOT"
DEFAULT_ROOT = Path("/autograder")
ASSIGNMENTS_ENV = "GRADER_ASSIGNMENTS"  # grader.assignment.assignments_dir() reads it
SHOWN_FILES = 5  # file names listed when a submission holds several

GRADER_FAULT = ("The autograder could not grade this submission: the grader or the assignment is broken, not "
                "your work. Please tell your instructor (the details are in the autograder's log).")

Visibility = Literal["hidden", "after_due_date", "after_published", "visible"]
TextFormat = Literal["text", "html", "simple_format", "md", "ansi"]


class GradescopeTest(BaseModel):
    """One entry of results.json's `tests`, with the fields the specification documents."""

    model_config = ConfigDict(extra="forbid")

    name: str
    score: float = Field(allow_inf_nan=False)
    max_score: float = Field(allow_inf_nan=False)
    status: Literal["passed", "failed"]
    output: str
    visibility: Visibility = "visible"
    name_format: TextFormat | None = None
    output_format: TextFormat | None = None
    number: str | None = Field(default=None, description="shown instead of the position in `tests`")
    tags: list[str] | None = None
    extra_data: dict | None = None


class GradescopeResults(BaseModel):
    """results.json: what Gradescope reads, field by field as its specification documents them.

    `output_format` matters: the top-level output's default is `simple_format`, which renders
    HTML, and the output carries student text (`gradescope_results` sets `text`)."""

    model_config = ConfigDict(extra="forbid")

    score: float = Field(allow_inf_nan=False, description="overrides the tests' total")
    execution_time: float | None = Field(default=None, ge=0, description="seconds")
    output: str
    output_format: TextFormat | None = None
    test_output_format: TextFormat | None = None
    test_name_format: TextFormat | None = None
    visibility: Visibility | None = None
    stdout_visibility: Visibility | None = None
    extra_data: dict | None = None
    tests: list[GradescopeTest] = Field(default_factory=list)


class Layout(BaseModel):
    """Gradescope's folders, under the root it runs the autograder in."""

    model_config = ConfigDict(frozen=True)

    root: Path

    @classmethod
    def from_env(cls) -> Layout:
        return cls(root=Path(os.environ.get(ROOT_ENV) or DEFAULT_ROOT))

    @property
    def assignments(self) -> Path:
        return self.root / "source" / "assignments"

    @property
    def submission(self) -> Path:
        return self.root / "submission"

    @property
    def results(self) -> Path:
        return self.root / "results" / GRADESCOPE_RESULTS


# ------------------------------------------------------------------ the assignment and the file


def bundled_assignment(layout: Layout) -> str:
    """The id of the one assignment the bundle holds, made the grader's assignments folder (so a
    notebook's `grader.assignment` is checked against it, and nothing else can be loaded)."""
    from grader import assignment as assignments
    from grader.assignment.choice import only_assignment

    os.environ[ASSIGNMENTS_ENV] = str(layout.assignments)
    found = assignments.available()
    only_one = only_assignment(found)
    if only_one is None:
        raise GraderError(f"the bundle should hold one assignment in {layout.assignments}, and it holds "
                          f"{len(found)}: rebuild it with `grade gradescope-bundle`")
    return only_one


def _skipped(entry: str) -> bool:
    from grader.batch.discovery import IGNORED

    return entry in IGNORED or entry.startswith(".")


def find_submissions(folder: Path) -> list[Path]:
    """Every notebook or module under `folder`, in order; a linked folder is not entered."""
    from grader.submission import SUFFIXES

    found: list[Path] = []
    for top, dirs, files in os.walk(folder):  # followlinks=False
        dirs[:] = sorted(d for d in dirs if not _skipped(d))
        found += [Path(top) / f for f in sorted(files)
                  if not _skipped(f) and Path(f).suffix.lower() in SUFFIXES]
    return found


def _names_assignment(path: Path, assignment: str) -> bool:
    """`ch2-jit.ipynb`, `CH2_JIT.py`: the file's name is the assignment's id (`_` for `-` allowed)."""
    def key(text: str) -> str:
        return text.casefold().replace("_", "-")
    return key(path.stem) == key(assignment)


def choose_submission(found: list[Path], assignment: str) -> Path | None:
    """The file to grade: the only one; else the one named after the assignment; else, when none
    is, the one notebook (the modules beside it are its helpers). None when that does not decide."""
    if len(found) == 1:
        return found[0]
    named = [p for p in found if _names_assignment(p, assignment)]
    if named:
        return named[0] if len(named) == 1 else None
    notebooks = [p for p in found if p.suffix.lower() == ".ipynb"]
    return notebooks[0] if len(notebooks) == 1 else None


def not_graded_note(found: list[Path], chosen: Path, folder: Path) -> str | None:
    """The sentence naming the files beside the graded one, or None when there are none."""
    others = [name(p.relative_to(folder)) for p in found if p != chosen]
    if not others:
        return None
    more = f" and {len(others) - SHOWN_FILES} more" if len(others) > SHOWN_FILES else ""
    return (f"Graded {name(chosen.relative_to(folder))}; not graded, as it is not the submission: "
            f"{', '.join(others[:SHOWN_FILES])}{more}.")


def submission_problem(found: list[Path], folder: Path, assignment: str) -> str | None:
    """The sentence for a submission whose file to grade cannot be chosen, else None."""
    if not found:
        return (f"Your submission has no notebook (.ipynb) or Python module (.py): upload the one you worked "
                f"in (e.g. {assignment}.ipynb).")
    if choose_submission(found, assignment) is not None:
        return None
    shown = [name(p.relative_to(folder)) for p in found[:SHOWN_FILES]]
    more = f" and {len(found) - SHOWN_FILES} more" if len(found) > SHOWN_FILES else ""
    return (f"Your submission has {len(found)} notebooks or modules ({', '.join(shown)}{more}): upload only "
            "the one to grade.")


# ------------------------------------------------------------------ grading


MISSING_COSTS = {
    "namespaces": "the student's code shares the container's processes, files and network",
    "user": "the student's code runs as root",
    "seccomp": "the student's code may make any system call",
    "cgroups": "memory and processes are capped per user by rlimits, not per grading",
    "cpu": "the student's code gets no CPU share of its own",
    "rlimits": "file size, CPU time and open files are not capped",
    "scratch": "the student's files are not on a size-limited file system",
}


def isolation_note(isolation: Isolation) -> str | None:
    """One sentence per missing layer, saying what it costs; None with every layer."""
    if not isolation.missing:
        return None
    costs = "; ".join(f"{layer}: {MISSING_COSTS.get(layer, 'missing')}" for layer in isolation.missing)
    held = ", ".join(isolation.layers) or "none"
    return (f"Graded inside Gradescope's container with the sandbox layers it allows ({held}); "
            f"missing: {costs}.")


def protect(layout: Layout) -> None:
    """Make the bundle and the results root's alone before any student code runs: the student's
    user may neither read the assignment (references, hidden-input generators) nor write
    results.json or the scripts Gradescope runs."""
    layout.results.parent.mkdir(parents=True, exist_ok=True)
    for folder in (layout.root, layout.results.parent):
        os.chown(folder, 0, 0)
        os.chmod(folder, 0o755)
    source = layout.root / "source"
    if source.is_dir():
        os.chown(source, 0, 0)
        os.chmod(source, 0o700)
    for script in layout.root.glob("*"):
        if script.is_file() and not script.is_symlink():
            os.chmod(script, script.stat().st_mode & ~0o022)


def not_graded(path: Path, assignment: str, reason: str) -> Report:
    """Every check of the assignment at 0 with `reason`: Gradescope still sees the points."""
    from grader.batch.executors import Task, error_report
    from grader.options import GradeOptions

    task = Task(student=path.stem, path=str(path), options=GradeOptions(assignment=assignment))
    return error_report(task, reason)


def _graded(path: Path, assignment: str, sandbox: bool) -> Report:
    """grade_one behind the grader's fault boundary: the student's failures become the report."""
    from grader.faults import grade_guarded
    from grader.options import GradeOptions
    from grader.pipeline import grade_one

    options = GradeOptions(assignment=assignment, sandbox=sandbox)
    return grade_guarded(lambda: grade_one(path, options),
                         lambda reason: not_graded(path, assignment, reason))


def grade(path: Path, assignment: str) -> tuple[Report, list[str]]:
    """The report, and the sentences the student should read about how it was graded."""
    from grader.sandbox.layers import available

    isolation = available()
    note = isolation_note(isolation)
    sandbox = bool(isolation.layers)
    return _graded(path, assignment, sandbox), [note] if note else []


# ------------------------------------------------------------------ results.json


def results_for(report: Report, notes: list[str]) -> GradescopeResults:
    from grader.outputs.exports import gradescope_results

    data = gradescope_results(report)
    data["output"] = "\n".join([data["output"], *(text(n) for n in notes)])
    return GradescopeResults.model_validate(data)


def fault_results() -> GradescopeResults:
    """When the grader or the assignment failed: nothing to grade with, and not the student's fault."""
    return GradescopeResults(score=0.0, output=GRADER_FAULT, output_format="text", stdout_visibility="hidden")


def write_results(results: GradescopeResults, path: Path) -> None:
    """Atomically: Gradescope never reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, results.model_dump_json(indent=2, exclude_none=True) + "\n")


def run(layout: Layout) -> GradescopeResults:
    """Find, grade, convert (raises GraderError for a grader or assignment fault)."""
    from grader.views.terminal import summary

    assignment = bundled_assignment(layout)
    found = find_submissions(layout.submission)
    problem = submission_problem(found, layout.submission, assignment)
    if problem is not None:
        print(f"gradescope_run: not graded: {terminal(problem)}")
        return results_for(not_graded(layout.submission, assignment, problem), [])
    chosen = choose_submission(found, assignment)
    assert chosen is not None  # submission_problem said so
    report, notes = grade(chosen, assignment)
    print(summary(report))  # for the instructor, in /autograder/results/stdout
    beside = not_graded_note(found, chosen, layout.submission)
    if beside is not None:
        print(f"gradescope_run: {terminal(beside)}")
        notes.insert(0, beside)
    return results_for(report, notes)


def stop_leftovers() -> int:
    """Kill every process the grading left (this process's descendants: it is their subreaper),
    until none is left; how many. Before results.json is written, so nothing of the student's
    runs when it is."""
    from grader.sandbox.layers import descendants, kill_strays

    killed = kill_strays(lambda: descendants(os.getpid()), set(), timeout=10.0)
    while True:  # reap them (orphans are this process's children now)
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    return killed


def prepare_image(layout: Layout) -> None:
    """setup.sh's last step: load the bundled assignment and run its checks.py `prepare()` once,
    so a broken bundle fails the image build instead of every grading, and what prepare() caches
    (ch2-jit's detective truth, in ~/.cache) is in the image each submission's container starts from."""
    from grader import assignment as assignments
    from grader.faults import instructor_code

    loaded = assignments.load(bundled_assignment(layout))
    with instructor_code("checks.py prepare()"):
        getattr(loaded.checks, "prepare", lambda: None)()
    print(f"gradescope_run: {loaded.spec.id} is ready to grade")


def main(argv: list[str]) -> int:
    """`python -m grader.gradescope.run` grades; with `--prepare`, setup.sh checks the bundle."""
    layout = Layout.from_env()
    if argv == ["--prepare"]:
        prepare_image(layout)
        return 0
    from grader.sandbox.layers import become_subreaper

    become_subreaper()
    try:
        protect(layout)
        results = run(layout)
    except GraderError as exc:
        print(f"gradescope_run: {terminal(exc)}")
        results = fault_results()
    except Exception:  # noqa: BLE001 - a grader bug still leaves a results.json, and its traceback in the log
        traceback.print_exc(file=sys.stdout)
        results = fault_results()
    stopped = stop_leftovers()
    if stopped:
        print(f"gradescope_run: stopped {stopped} process(es) the submission left running, before writing "
              "results.json")
    write_results(results, layout.results)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # as `grade` does: tearing down JAX's runtime only costs time here
