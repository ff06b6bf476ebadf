"""`grade`: parse arguments, grade, print, and map every error to an exit code.

Exit status: 0 graded; 1 a score below --fail-under; 2 bad usage or an unreadable submission;
3 the grader itself could not run (no kernel, a broken assignment, a grader bug met while
grading); 4 a batch in which some submissions could not be graded; 141 the output's reader left
(`| head`); 130 Ctrl-C; 143 SIGTERM. Interrupted or terminated, it removes what it made (kernels,
their scratch mounts and cgroups) before it exits. Every string a student controls is printed
through `grader.inert`.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from grader import interrupts
from grader.errors import UsageError
from grader.inert import MESSAGE_LIMIT, PATH_LIMIT, terminal
from grader.usage import Parser, exit_status

if TYPE_CHECKING:
    from grader.batch.run import BatchResult
    from grader.report import Report



SUBCOMMANDS_HELP = """\
subcommands:
  grade validate [ASSIGNMENT ...]  check that assignments are sound (kill matrix, --junit, --json)
  grade export OUTDIR              rebuild a batch's outputs; add --canvas ROSTER.csv, --moodle, --gradescope
  grade adjust OUTDIR STUDENT --points P --reason "..."   change a grade by hand (kept across regrades)
  grade remove OUTDIR STUDENT... [--reason "..."]   take students out of a batch (kept in its gradebook)
  grade report OUTDIR [--json]     what the class got wrong: per check, failure rates and groups
  grade gradescope-bundle ASSIGNMENT -o autograder.zip   the zip to upload to Gradescope
  grade pack ASSIGNMENT -o DIR     what students get: a self-check wheel without the answer key
  grade schema                     print the JSON Schema of assignment.toml
  grade serve OUT -a ASSIGNMENT --roster FILE   the hand-in service (--host, --port, -j, --rate, --public)
  grade tokens OUT --roster FILE   a token per student for grade serve (--reissue STUDENT..., -o FILE)
  --assignments DIR                any command: the folder of assignments (else $GRADER_ASSIGNMENTS, ./assignments)

exit codes:
  0  graded (every score at or above --fail-under); validate: everything holds
  1  a score below --fail-under; validate: something does not hold
  2  bad usage or input (one sentence on stderr)
  3  the grader or an assignment is broken (a grader bug is reported as such)
  4  batch: some submissions could not be graded (named at the end, by reason);
     export: a graded student matched no row of the Canvas export (each named on stderr)
  141  the reader of the output left (| head): the output stops there
  130, 143  interrupted (Ctrl-C), terminated (SIGTERM); finished reports are kept
"""


class _Version(argparse.Action):
    """`--version`, read only when asked: building the parser must not import the report's
    models, which would delay the kernel that `grade FILE` starts before its heavier imports."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: object):
        super().__init__(option_strings, dest=dest, nargs=0, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from grader.report import environment

        print(f"grade (jax-course-grader) {environment().grader}")
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="grade", description="Grade JAX course submissions (notebooks or modules).",
                epilog=SUBCOMMANDS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action=_Version)
    p.add_argument("paths", nargs="+", metavar="PATH", help="submission files (.ipynb or .py)")
    p.add_argument("-a", "--assignment", help="assignment id or folder (default: from the notebook or file name)")
    p.add_argument("--json", metavar="FILE", help="write the JSON report here ('-' prints only the JSON)")
    p.add_argument("-v", "--verbose", action="store_true", help="list the passed checks too")
    p.add_argument("--html", type=Path, metavar="PAGE", help="also write the feedback page to hand back (one file)")
    p.add_argument("-o", "--outdir", type=Path, help="write reports into this folder")
    p.add_argument("--seed", type=int,
                   help="seed of the hidden inputs (default: fresh; a batch keeps its own for every regrade; "
                        "recorded in each report)")
    p.add_argument("--new-seed", action="store_true",
                   help="batch: draw new hidden inputs for the batch, and regrade every submission on them")
    p.add_argument("--seed-per-student", action="store_true",
                   help="batch, at its first grading: draw a seed for each student at random (kept in OUT's "
                        "gradebook for their every regrade and hand-in) instead of one for the whole batch")
    p.add_argument("--timeout", type=float, help="seconds allowed per cell, per exercise's probe and per probe request (overrides the assignment's limits)")
    p.add_argument("--fail-under", type=float, metavar="PERCENT", help="exit 1 if a score is below this percentage")
    p.add_argument("--student", help="student id recorded in the report")
    p.add_argument("-j", "--jobs", type=int, default=1, help="submissions graded at once in batch mode")
    p.add_argument("--force", action="store_true", help="regrade even submissions with a stored result")
    p.add_argument("--only", nargs="+", metavar="STUDENT",
                   help="regrade only these students of the batch (and rebuild its outputs around them)")
    p.add_argument("--format", action="append", choices=["gradescope"], default=[],
                   help="also write these exports in batch mode")
    p.add_argument("--scheduler", metavar="ADDRESS", help="grade on a Dask cluster (pip install '.[cluster]')")
    p.add_argument("--no-sandbox", action="store_true",
                   help="run kernels without the sandbox (required for several files where bubblewrap's namespaces "
                        "or seccomp are missing)")
    p.add_argument("--require-sandbox", action="store_true",
                   help="refuse to grade unless every layer of the sandbox holds on this host")
    return p


def _schema(argv: list[str]) -> int:
    if argv:
        raise UsageError("grade schema takes no arguments")
    from grader.spec import AssignmentSpec

    print(json.dumps(AssignmentSpec.model_json_schema(), indent=2))
    return 0


def _report_path(args: argparse.Namespace, submission: Path) -> Path:
    if args.outdir:
        args.outdir.mkdir(parents=True, exist_ok=True)
        return args.outdir / f"{submission.stem}.json"
    return submission.with_name(f"{submission.stem}.report.json")


def _emit(report: Report, args: argparse.Namespace, submission: Path) -> None:
    from grader.views.terminal import summary
    if args.json == "-":
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
        return
    tty = sys.stdout.isatty()
    print(summary(report, color=tty, verbose=args.verbose, width=shutil.get_terminal_size().columns if tty else None))
    from grader.views.kept import keep

    keep(report, Path(args.json) if args.json else _report_path(args, submission), "report", "the report")


def _below(report: Report, fail_under: float | None) -> bool:
    if fail_under is None or report.max_score == 0:
        return False
    return 100.0 * report.score / report.max_score < fail_under


def _check_isolation(args: argparse.Namespace, batch: bool = False) -> bool:
    """Whether to sandbox; says once, a sentence a layer, what the host lacks and what that costs.

    A batch grades with the layers the host gives, so long as the core holds (bubblewrap's
    namespaces and the seccomp filter: strangers' code then sees none of the machine); without the
    core it refuses unless --no-sandbox says so. --require-sandbox refuses any missing layer."""
    from grader.sandbox.layers import CORE_LAYERS, detect

    if args.no_sandbox:
        if args.require_sandbox:
            raise UsageError("--no-sandbox and --require-sandbox contradict each other: pass one")
        return False
    isolation = detect()
    missing = isolation.missing
    if missing and args.require_sandbox:
        raise UsageError(f"--require-sandbox: this host ({isolation.backend}) lacks "
                         + "; ".join(f"{k} ({v})" for k, v in missing.items()))
    core = [layer for layer in CORE_LAYERS if layer in missing]
    if batch and core:
        raise UsageError("grading several submissions needs at least bubblewrap's namespaces and the seccomp "
                         "filter, and this host lacks " + "; ".join(f"{k} ({missing[k]})" for k in core)
                         + ": fix that, or pass --no-sandbox to grade without any sandbox")
    if missing:
        print(f"grade: sandbox ({isolation.backend}), layers missing here:", file=sys.stderr)
        for layer, why in missing.items():
            print(f"  {layer}: {why}.", file=sys.stderr)
    return True


def _validate(argv: list[str]) -> int:
    from grader import assignment as assignments
    from grader.course.mutation.families import FAMILIES

    p = Parser(prog="grade validate", description="Check that assignments are sound: every requirement has "
                "a check, solutions score full marks, templates zero, every hand-written mutant fails exactly "
                "what it declares, every mutant derived from the reference is killed (or declared equivalent) "
                "and every honest variant keeps full marks. Prints each row as it is judged, then the kill matrix.")
    p.add_argument("assignments", nargs="*", metavar="ASSIGNMENT",
                   help="an id, or a folder: one assignment's, or a folder of them (default: every assignment)")
    p.add_argument("-j", "--jobs", type=int, default=2, help="submissions graded at once (default 2)")
    p.add_argument("--family", action="append", choices=FAMILIES, metavar="FAMILY",
                   help="derive only these mutant families (repeatable): " + ", ".join(FAMILIES))
    p.add_argument("--junit", type=Path, metavar="FILE", help="write one JUnit test case per validated item")
    p.add_argument("--json", type=Path, metavar="FILE", help="write the rows and the kill matrix as JSON")
    p.add_argument("--html", type=Path, metavar="FILE", help="write the rows and the kill matrix as a page")
    p.add_argument("--show", metavar="ID", help="print the whole source of the mutant or honest variant ID (its "
                   "name in the kill matrix) and stop: nothing is graded")
    args = p.parse_args(argv)
    if args.jobs < 1:
        raise UsageError("-j must be at least 1")
    names = assignments.select(args.assignments)
    if args.show is not None:
        from grader.course.validate import mutant_source

        chosen = names or assignments.available()
        if len(chosen) != 1:
            raise UsageError("--show prints a mutant of one assignment: name it, as in "
                             "`grade validate ch2-jit --show newton_sqrt.loop_capped`")
        print(mutant_source(chosen[0], args.show, set(args.family) if args.family else None), end="")
        return 0
    from grader.course import validation_outputs as outputs
    from grader.course.validate import validate_all

    live = outputs.Live()
    try:
        validation = validate_all(names or None, workers=args.jobs, families=set(args.family) if args.family else None,
                                  on_row=live.row, on_status=live.status)
    finally:
        live.close()
    matrices = outputs.matrices(validation)
    if matrices:
        print("\n" + matrices)
    for path, content in ((args.junit, outputs.junit), (args.json, None), (args.html, outputs.page)):
        if path is not None:
            outputs.write(path, validation.model_dump_json(indent=2) + "\n" if content is None else content(validation))
    rows = validation.rows
    if any(r.bug for r in rows):
        print("grade validate: an assignment is broken (its own code raised): see the rows marked FAILED",
              file=sys.stderr)
        return 3
    return 0 if all(r.ok for r in rows) else 1


def _batch(args: argparse.Namespace) -> int:
    """Several submissions, or one graded into a batch's folder: reports, gradebook, summary,
    class page and exports in -o OUT, updated in one commit; resumable."""
    if not args.outdir:
        raise UsageError("batch mode writes a folder of reports: pass -o OUTDIR")
    if args.json:
        raise UsageError("--json FILE takes one submission without -o; batch reports go to -o OUTDIR")
    if args.html:
        raise UsageError("--html PAGE takes one submission without -o; -o OUTDIR writes OUTDIR/feedback/<student>.html")
    missing = [p for p in args.paths if not os.path.lexists(p)]
    if missing:
        raise UsageError(f"{missing[0]} does not exist: pass the folder of submissions (or the files) to grade")
    single = len(args.paths) == 1 and Path(args.paths[0]).is_file()
    sandboxed = _check_isolation(args, batch=not single)
    from grader.batch.run import grade_many, not_graded_lines
    from grader.options import GradeOptions

    options = GradeOptions(assignment=args.assignment, seed=args.seed, cell_timeout=args.timeout,
                           sandbox=sandboxed, student=args.student)
    result = grade_many([Path(p) for p in args.paths], args.outdir, options, jobs=args.jobs,
                        force=args.force or single, formats=set(args.format), scheduler=args.scheduler,
                        fail_under=args.fail_under, only=args.only, new_seed=args.new_seed,
                        per_student=args.seed_per_student)
    if single:
        _print_single(args)
    for path, why in sorted(result.skipped.items()):
        print(f"skipped {terminal(path, PATH_LIMIT)}: {terminal(why, MESSAGE_LIMIT)}")
    skipped = f"; {len(result.skipped)} other file(s) skipped" if result.skipped else ""
    print(f"{result.found} submission(s): {result.graded} graded, {result.errors} not graded, "
          f"{result.resumed} unchanged since the last run{skipped}")
    _print_seed(result, args)
    if result.errors:
        print("not graded, by reason (their reports say more):")
        for line in not_graded_lines(result):
            print(terminal(line, MESSAGE_LIMIT))
    if result.died:
        print(f"graded, but a cell killed the kernel: {', '.join(terminal(s, 40) for s in sorted(result.died)[:8])}"
              + (", …" if len(result.died) > 8 else ""))
    print(f"reports, feedback/, summary.csv, gradebook.sqlite and index.html in {terminal(args.outdir, PATH_LIMIT)}")
    if result.gone:
        print(_gone(result.gone, args))
    for warning in result.warnings:
        print(f"grade: {terminal(warning, MESSAGE_LIMIT)}", file=sys.stderr)
    if result.interrupted:
        word, code = ("terminated", 143) if result.terminated else ("interrupted", 130)
        print(f"grade: {word}; finished reports are kept, rerun the same command to resume", file=sys.stderr)
        return code
    if result.internal:
        shown = ", ".join(terminal(s, 40) for s in result.internal[:5]) + (", …" if len(result.internal) > 5 else "")
        print(f"grade: the grader failed on {len(result.internal)} submission(s) ({shown}), a grader bug: "
              "their reports say so; please report it", file=sys.stderr)
        return 3
    if result.errors:
        return 4
    return 1 if result.below else 0


def _print_seed(result: BatchResult, args: argparse.Namespace) -> None:
    """Which hidden inputs the submissions graded now met: the batch's seed, drawn now or before,
    or each student's own."""
    if result.per_student_chosen and not result.graded:
        print("hidden inputs will be drawn per student, each at their first grading, and kept in the gradebook "
              "(every later command on it, grade serve included, draws them so)")
    if not result.graded:
        return
    line = _per_student_line(result) if result.per_student else _batch_seed_line(result, args)
    if line:
        print(line)
    behind = result.other_seed
    if behind and not result.interrupted:
        print(f"{len(behind)} student(s) still graded with an earlier seed: "
              + ", ".join(terminal(s, 40) for s in behind[:8]) + (", …" if len(behind) > 8 else ""))


def _batch_seed_line(result: BatchResult, args: argparse.Namespace) -> str | None:
    draw = result.seed_draw
    if draw is None:
        return None
    if result.seed_new and draw.redrawn:
        return (f"hidden inputs drawn again with seed {draw.seed} (was {result.seed_before}): every submission "
                "found regraded on them")
    if result.seed_new and args.seed is None:
        return (f"hidden inputs drawn with seed {draw.seed}, the same for every submission (--seed {draw.seed} "
                "draws them again; kept with the batch for every regrade, --new-seed draws new ones)")
    if not result.seed_new:
        return (f"hidden inputs from the batch's seed {draw.seed} (drawn on {draw.drawn_at[:10]}), as for "
                "every submission before (--new-seed draws new ones and regrades all)")
    return None


def _per_student_line(result: BatchResult) -> str:
    """What a batch with a seed per student says about the hidden inputs of what it graded now."""
    if result.seeds_redrawn:
        return (f"hidden inputs drawn again for each of {result.seeds_redrawn} student(s), a new seed of their own: "
                "every submission found regraded on them")
    first = (f"; {result.seeds_first} student(s) got their first seed now, drawn at random" if result.seeds_first
             else "")
    return ("hidden inputs drawn per student: each student's own seed, kept in the gradebook for their every "
            f"regrade{first} (--new-seed draws new ones for everyone)")


GONE_SHOWN = 8  # students named, and put in the `grade remove` command, at a batch's end


def _gone(gone: list[str], args: argparse.Namespace) -> str:
    """The sentence naming the students of OUT whose file is gone, with the command that removes them."""
    shown = gone[:GONE_SHOWN]
    more = f" and {len(gone) - GONE_SHOWN} more" if len(gone) > GONE_SHOWN else ""
    folders = " ".join(terminal(p, PATH_LIMIT) for p in args.paths)
    command = " ".join(["grade", "remove", shlex.quote(str(args.outdir)), *(shlex.quote(s) for s in shown)])
    return (f"{len(gone)} student(s) of {terminal(args.outdir, PATH_LIMIT)} have no file in {folders} any "
            f"more: {', '.join(terminal(s, 40) for s in shown)}{more}. They stay in summary.csv, the class "
            f"page and the exports until removed: {terminal(command, MESSAGE_LIMIT)} --reason \"...\"")


def _print_single(args: argparse.Namespace) -> None:
    """The student's own verdict, for one file graded into a batch folder."""
    from grader.outputs.gradebook import Gradebook
    from grader.outputs.names import OutputFolder
    from grader.views.terminal import summary

    folder = OutputFolder(args.outdir)
    with Gradebook(folder.gradebook) as gradebook:
        student = args.student or gradebook.student_at(os.path.abspath(args.paths[0]))
    if student is None:
        return
    from grader.report import Report

    report = Report.model_validate_json(folder.report(student).read_text(encoding="utf-8"))
    tty = sys.stdout.isatty()
    print(summary(report, color=tty, verbose=args.verbose, width=shutil.get_terminal_size().columns if tty else None))


def _pack(argv: list[str]) -> int:
    p = Parser(prog="grade pack", description="Write what students get: a wheel of the self-check with the "
                "assignment's public checks only, the template notebook and STUDENTS.md.")
    p.add_argument("assignment", metavar="ASSIGNMENT")
    p.add_argument("-o", "--outdir", type=Path, required=True, help="the folder to hand out")
    p.add_argument("--hand-in-url", metavar="URL", help=(
        "the course's hand-in service (grade serve), where the pack's `grade NOTEBOOK --hand-in` hands in"))
    args = p.parse_args(argv)
    from grader import assignment as assignments
    from grader.course.pack import build_pack

    if args.assignment not in assignments.available():
        raise assignments.not_found(args.assignment)
    wheel = build_pack(args.assignment, args.outdir, hand_in_url=args.hand_in_url)
    print(f"{terminal(wheel, PATH_LIMIT)}\n{terminal(args.outdir / 'STUDENTS.md', PATH_LIMIT)}")
    return 0


def _export(argv: list[str]) -> int:
    from grader.term.commands import export

    return export(Parser, argv)


def _adjust(argv: list[str]) -> int:
    from grader.term.commands import adjust

    return adjust(Parser, argv)


def _remove(argv: list[str]) -> int:
    from grader.term.remove import remove

    return remove(Parser, argv)


def _report(argv: list[str]) -> int:
    from grader.term.report_command import report

    return report(Parser, argv)


def _gradescope_bundle(argv: list[str]) -> int:
    from grader.gradescope.bundle import cli_bundle

    return cli_bundle(argv)


def _serve(argv: list[str]) -> int:
    from grader.serve.command import serve_command

    return serve_command(Parser, argv, sandbox=lambda args: _check_isolation(args, batch=True))


def _tokens(argv: list[str]) -> int:
    from grader.serve.tokens import tokens_command

    return tokens_command(Parser, argv)


def _take_assignments(argv: list[str]) -> list[str]:
    """Apply and remove `--assignments DIR` / `--assignments=DIR` wherever it stands (before or
    after a subcommand or the paths, up to a `--`), so that every subcommand and the grading
    workers it starts read that folder; the last one given wins."""
    rest: list[str] = []
    chosen = None
    args = iter(argv)
    for arg in args:
        if arg == "--":
            rest += [arg, *args]
        elif arg == "--assignments":
            chosen = next(args, None)
            if chosen is None:
                raise UsageError("--assignments needs a folder: --assignments DIR")
        elif arg.startswith("--assignments="):
            chosen = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    if chosen is not None:
        from grader.assignment import use

        use(chosen)
    return rest


GRADED_SUFFIXES = (".ipynb", ".py")  # grader.submission's SUFFIXES, without importing it (pydantic: 0.1 s)


def _may_be_graded(path: Path) -> bool:
    """Whether a kernel is worth starting before the file is read: a file that is not there,
    not readable or not a notebook or module gets its one sentence without a JAX booted for it."""
    return path.is_file() and path.suffix.lower() in GRADED_SUFFIXES and os.access(path, os.R_OK)


def run(argv: list[str]) -> int:
    argv = _take_assignments(argv)
    subcommands = {"schema": _schema, "validate": _validate, "export": _export, "pack": _pack,  # a file: ./schema
                   "adjust": _adjust, "remove": _remove, "report": _report,
                   "gradescope-bundle": _gradescope_bundle, "serve": _serve, "tokens": _tokens}
    if argv and argv[0] in subcommands:
        return subcommands[argv[0]](argv[1:])
    if not argv:
        print(_parser().format_usage() + "\n" + SUBCOMMANDS_HELP + "\n`grade --help` says more.", file=sys.stderr)
        return 2
    first = argv[0]
    if not first.startswith("-") and not Path(first).exists():
        close = difflib.get_close_matches(first, list(subcommands), n=1, cutoff=0.75)
        if close:
            raise UsageError(f"{first!r} is neither a file nor a subcommand: did you mean `grade {close[0]}`?")
    args = _parser().parse_args(argv)
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if args.seed is not None and args.seed < 0:
        raise UsageError("--seed must be a non-negative integer")
    if args.jobs < 1:
        raise UsageError("-j must be at least 1")
    batch = len(args.paths) > 1 or any(Path(p).is_dir() for p in args.paths) or args.outdir is not None
    if args.only and not batch:
        raise UsageError("--only regrades students of a batch: pass the submissions folder and -o OUTDIR")
    if args.seed_per_student and not batch:
        raise UsageError("--seed-per-student draws the hidden inputs of a batch's students: pass the submissions "
                         "folder and -o OUTDIR (one file without -o has a seed of its own anyway)")
    if args.new_seed and not batch:
        raise UsageError("--new-seed draws new hidden inputs for a batch: pass the submissions folder and -o "
                         "OUTDIR (one file without -o draws fresh inputs anyway)")
    if batch:
        return _batch(args)
    if args.scheduler or args.format:
        raise UsageError("--scheduler and --format are for batch mode (several files or a folder)")
    sandboxed = _check_isolation(args)
    # Start the first kernel before the heavier imports (jupyter_client above all): it boots
    # while the grader gets ready, and is adopted by the first Kernel.
    from grader.kernel.launch import KERNEL_ARGS, WARM_ARGS, LaunchedKernel
    from grader.sandbox.executables import sandbox_policy

    policy = sandbox_policy(sandboxed)
    first = LaunchedKernel(policy, KERNEL_ARGS + WARM_ARGS) if _may_be_graded(Path(args.paths[0])) else None
    kernels = None
    try:
        from grader.kernel.client import Prelaunched

        if first is not None:
            kernels = Prelaunched(sandbox=policy, first=first)
            first = None
        from grader import precompile
        from grader.options import GradeOptions
        from grader.pipeline import grade_one

        options = GradeOptions(assignment=args.assignment, seed=args.seed, cell_timeout=args.timeout,
                               student=args.student, sandbox=sandboxed)
        from grader.batch.progress import StageLine

        path = Path(args.paths[0])
        stages = StageLine()
        try:
            report = grade_one(path, options, kernel_factory=kernels, on_stage=stages, on_assignment=precompile.ensure_for)
        finally:
            stages.close()
        _emit(report, args, path)
        if args.html:
            from grader.views.page import write_page
            from grader.submission import read_submission

            shown = write_page(report, read_submission(path).cells, args.html)
            print(f"feedback: {terminal(shown, PATH_LIMIT)}", file=sys.stderr if args.json == "-" else sys.stdout)
        return 1 if _below(report, args.fail_under) else 0
    finally:
        if first is not None:  # never adopted (jupyter_client failed to import)
            first.discard()
        if kernels is not None:
            kernels.close()


def main(argv: list[str] | None = None) -> int:
    def handled() -> int:
        with interrupts.handled():
            return run(sys.argv[1:] if argv is None else argv)

    return exit_status(handled, terminated="terminated; kernels and their files were removed")


def entry() -> None:
    """Console script: exit without tearing down JAX's runtime, which only costs time here.

    Everything that matters is already done when main() returns: reports written and flushed,
    kernels killed, scratch directories removed.
    """
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
