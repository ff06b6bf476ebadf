"""`grade`: parse arguments, grade, print, and map every error to an exit code.

Exit status: 0 graded; 1 a score below --fail-under; 2 bad usage or an unreadable submission;
3 the grader itself could not run (no kernel, a broken custom check).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from typing import TYPE_CHECKING

from grader.errors import GraderError, UsageError

if TYPE_CHECKING:
    from grader.report import Report

SUBCOMMANDS = {"schema", "validate"}  # reach a file of that name as ./schema


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one sentence and exit 2, as for any bad usage
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="grade", description="Grade JAX course submissions (notebooks or modules).")
    p.add_argument("paths", nargs="+", metavar="PATH", help="submission files (.ipynb or .py)")
    p.add_argument("-a", "--assignment", help="assignment id or folder (default: from the notebook or file name)")
    p.add_argument("--json", metavar="FILE", help="write the JSON report here ('-' prints only the JSON)")
    p.add_argument("-o", "--outdir", type=Path, help="write reports into this folder")
    p.add_argument("--seed", type=int, help="seed of the hidden inputs (default: fresh; recorded in the report)")
    p.add_argument("--timeout", type=float, help="seconds allowed per cell (overrides the assignment's limit)")
    p.add_argument("--fail-under", type=float, metavar="PERCENT", help="exit 1 if a score is below this percentage")
    p.add_argument("--student", help="student id recorded in the report")
    p.add_argument("--no-sandbox", action="store_true",
                   help="run kernels without the sandbox (required for several files where it is incomplete)")
    return p


def _schema() -> int:
    from grader.spec import AssignmentSpec

    print(json.dumps(AssignmentSpec.model_json_schema(), indent=2))
    return 0


def _report_path(args: argparse.Namespace, submission: Path) -> Path:
    if args.outdir:
        args.outdir.mkdir(parents=True, exist_ok=True)
        return args.outdir / f"{submission.stem}.json"
    return submission.with_name(f"{submission.stem}.report.json")


def _emit(report: Report, args: argparse.Namespace, submission: Path) -> None:
    from grader.render import summary
    from grader.report import write

    if args.json == "-":
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
        return
    print(summary(report, color=sys.stdout.isatty()))
    target = Path(args.json) if args.json and len(args.paths) == 1 else _report_path(args, submission)
    try:
        write(report, target)
        print(f"report: {target}")
    except OSError as exc:
        print(f"grade: could not write the report to {target} ({exc.strerror})", file=sys.stderr)


def _below(report: Report, fail_under: float | None) -> bool:
    if fail_under is None or report.max_score == 0:
        return False
    return 100.0 * report.score / report.max_score < fail_under


def _check_isolation(args: argparse.Namespace) -> bool:
    """Whether to sandbox; says once what is missing; refuses a batch without the full sandbox."""
    from grader.sandbox import available

    if args.no_sandbox:
        return False
    isolation = available()
    if isolation.missing:
        if len(args.paths) > 1:
            raise UsageError("grading several submissions needs the full sandbox, and this machine lacks "
                             + "; ".join(f"{k} ({v})" for k, v in isolation.missing.items())
                             + ": fix that, or pass --no-sandbox to grade without it")
        print("grade: sandbox layers missing here: "
              + "; ".join(f"{k}: {v}" for k, v in isolation.missing.items()), file=sys.stderr)
    return True


def _validate(argv: list[str]) -> int:
    p = _Parser(prog="grade validate", description="Check that assignments are sound: solutions score "
                "full marks, templates zero, every mutant fails exactly what it declares.")
    p.add_argument("assignments", nargs="*", metavar="ASSIGNMENT", help="default: every assignment")
    p.add_argument("-j", "--jobs", type=int, default=2, help="submissions graded at once (default 2)")
    args = p.parse_args(argv)
    if args.jobs < 1:
        raise UsageError("-j must be at least 1")
    from grader.validate import table, validate

    rows = validate(args.assignments or None, workers=args.jobs)
    print(table(rows))
    return 0 if all(r.ok for r in rows) else 1


def run(argv: list[str]) -> int:
    if argv and argv[0] == "schema":
        return _schema()
    if argv and argv[0] == "validate":
        return _validate(argv[1:])
    args = _parser().parse_args(argv)
    if args.json and args.json != "-" and len(args.paths) > 1:
        raise UsageError("--json FILE takes one submission; use -o DIR for several")
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if args.seed is not None and args.seed < 0:
        raise UsageError("--seed must be a non-negative integer")
    sandboxed = _check_isolation(args)
    # Start the first kernel before the heavier imports: it boots while the grader gets ready.
    from grader.kernel import Prelaunched
    from grader.sandbox import SandboxPolicy

    policy = SandboxPolicy() if sandboxed else None
    kernels = Prelaunched(sandbox=policy) if Path(args.paths[0]).is_file() else None
    try:
        from grader.options import GradeOptions
        from grader.pipeline import grade_one

        options = GradeOptions(assignment=args.assignment, seed=args.seed, cell_timeout=args.timeout,
                               student=args.student, sandbox=sandboxed)
        status = 0
        for raw in args.paths:
            path = Path(raw)
            report = grade_one(path, options, kernel_factory=kernels)
            _emit(report, args, path)
            if _below(report, args.fail_under):
                status = 1
        return status
    finally:
        if kernels is not None:
            kernels.close()


def main(argv: list[str] | None = None) -> int:
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except GraderError as exc:
        print(f"grade: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("grade: interrupted", file=sys.stderr)
        return 130


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
