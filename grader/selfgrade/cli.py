"""The student pack's `grade` (and its `python -m jax_course_<id>`): `grade submit.ipynb` checks a
notebook as the instructor's `grade` grades it, on this machine, and prints the same view.

Every pack installs this same command: it checks the notebook with the pack of the notebook's
assignment, among the packs installed (`assignment_choice.choose_pack`), or says in one sentence which pack to
install.

Every visible check is judged; hidden checks, predictions and quiz answers say "checked when you
hand in". The options and exit codes are the instructor's `grade`'s for one file (grader/cli.py):
0 checked; 1 a score below --fail-under; 2 bad usage or an unreadable notebook; 3 the grader
could not run; 130 Ctrl-C; 143 SIGTERM; 141 the output's reader left. Ctrl-C stops the notebook's
process at once.

With `--hand-in`, the notebook checked here is then handed in to the course's hand-in service
(`grader.selfgrade.hand_in`), and the exit code is the verdict's: 0 graded (1 below --fail-under),
2 refused (the service's sentence), 3 not handed in or not graded, 130 (143) Ctrl-C (SIGTERM) while
waiting.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from grader import interrupts
from grader.errors import KernelStartFailed, UsageError
from grader.inert import MESSAGE_LIMIT, PATH_LIMIT, terminal
from grader.selfgrade import packs
from grader.usage import Parser, exit_status

if TYPE_CHECKING:
    from grader.report import Report

INSTRUCTOR_COMMANDS = ("validate", "export", "adjust", "gradescope-bundle", "pack", "schema")
EXIT_CODES = """\
exit codes:
  0  checked (the score at or above --fail-under)
  1  a score below --fail-under
  2  bad usage, or a file that is not a notebook of this assignment (one sentence on stderr)
  3  the grader could not run (Python could not start, or a bug: please report it)
  130, 143  interrupted (Ctrl-C), terminated (SIGTERM)
with --hand-in, the verdict's: 0 graded (1 below --fail-under), 2 the hand-in was refused (the
service's sentence), 3 the service could not be reached (nothing handed in) or did not grade it
(hand in again), 130 or 143 Ctrl-C or SIGTERM while waiting (the hand-in stays: its verdict is on
the hand-in page)
"""


class _Version(argparse.Action):
    """`--version`, read only when asked."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: object):
        super().__init__(option_strings, dest=dest, nargs=0, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from importlib import metadata

        from grader.selfgrade.grading import pack_environment
        from grader.submission import pack_distribution

        if packs.this_pack() is None:
            print(f"grade (the student pack: {pack_environment().grader})")
        else:
            shown = []
            for assignment in packs.installed():
                try:
                    version = metadata.version(pack_distribution(assignment))
                except metadata.PackageNotFoundError:
                    version = "not installed"
                shown.append(f"{pack_distribution(assignment)} {version}")
            print(f"grade (the student packs: {', '.join(shown)})")
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="grade", description=(
        "Check your notebook as the course's grader will: its cells run in a fresh Python process on "
        "this machine, every check on the notebook's own examples is given now, and the rest (hidden "
        "inputs, predictions) is checked when you hand in."),
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action=_Version)
    p.add_argument("paths", nargs="+", metavar="NOTEBOOK", help="your notebook (.ipynb) or module (.py)")
    p.add_argument("-a", "--assignment", help="assignment id (default: from the notebook)")
    p.add_argument("--json", metavar="FILE", help="write the JSON report here ('-' prints only the JSON)")
    p.add_argument("-v", "--verbose", action="store_true", help="list the passed checks too")
    p.add_argument("--html", type=Path, metavar="PAGE", help="also write the feedback page (one file)")
    p.add_argument("--timeout", type=float, help=(
        "seconds allowed per cell, per exercise's checks and per check (overrides the assignment's limits)"))
    p.add_argument("--fail-under", type=float, metavar="PERCENT",
                   help="exit 1 if the score is below this percentage")
    p.add_argument("--hand-in", nargs="?", const="", metavar="URL", help=(
        "after checking, hand the notebook in to the course's hand-in service and print its verdict "
        "(URL: the service's address; default: the one your pack was made with)"))
    p.add_argument("--token-file", type=Path, metavar="FILE", help=(
        "with --hand-in: the file holding your token (default: $GRADE_TOKEN, else ~/.config/jax-course/token)"))
    return p


def _hand_in_address(argv: list[str]) -> list[str]:
    """`--hand-in submit.ipynb`: the notebook, not an address (the pack's address is meant)."""
    out = list(argv)
    for i, arg in enumerate(out[:-1]):
        if arg == "--hand-in" and out[i + 1].lower().endswith((".ipynb", ".py")) and "://" not in out[i + 1]:
            out[i] = "--hand-in="
            break
    return out


def _later(report: Report) -> str | None:
    """The points this check leaves to the hand-in, in one sentence (None when there are none)."""
    points = sum(c.max_score for e in report.exercises for c in e.checks if c.reason == "on_hand_in")
    if not points:
        return None
    return (f"{points:g} of the {report.max_score:g} points are checked when you hand in (hidden inputs, "
            "predictions): your grade is the one the course's grader gives then")


def _emit(report: Report, args: argparse.Namespace, path: Path) -> None:
    from grader.views.terminal import summary

    if args.json == "-":
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
        return
    tty = sys.stdout.isatty()
    width = shutil.get_terminal_size().columns if tty else None
    print(summary(report, color=tty, verbose=args.verbose, width=width))
    later = _later(report)
    if later:
        print(later)
    from grader.selfcheck import jax_note

    note = jax_note()  # as the notebook's self-check cells say it
    if note:
        print(note)
    from grader.views.kept import keep

    keep(report, Path(args.json) if args.json else path.with_name(f"{path.stem}.report.json"), "report",
         "the report")


def run(argv: list[str]) -> int:
    if not argv:
        print(_parser().format_usage() + "\n`grade --help` says more.", file=sys.stderr)
        return 2
    if argv[0] in INSTRUCTOR_COMMANDS and not Path(argv[0]).exists():
        raise UsageError(f"`grade {argv[0]}` is the instructor's command; the student pack's grade checks "
                         "your notebook: grade NOTEBOOK.ipynb")
    args = _parser().parse_args(_hand_in_address(argv))
    if len(args.paths) > 1:
        raise UsageError("the student pack's grade checks one notebook at a time: grade NOTEBOOK.ipynb")
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    path = Path(args.paths[0])
    service = _service(args)
    assignment = args.assignment
    own = packs.this_pack()
    if own is not None:  # a pack grades with its own assignment folder, and only its assignment
        if assignment not in (None, own):
            raise packs.PackMissing(assignment, packs.installed(), asked="-a ")
        assignment = str(packs.packed_folder(own))
    first = None
    if path.is_file():  # Python boots (and imports JAX) while the grader imports and plans
        from grader.selfgrade.child import Child

        first = Child(path.resolve().parent)
    from grader.views.status_line import Progress

    progress = Progress()
    try:
        from grader.selfgrade.grading import grade_notebook

        report = grade_notebook(path, assignment=assignment, timeout=args.timeout, on_stage=progress,
                                first=first)
    except KernelStartFailed as exc:  # this machine's Python failed, not the notebook: the service may not
        if service is None:
            raise
        progress.close()
        print(f"grade: {terminal(exc, MESSAGE_LIMIT)}; handing in without checking here", file=sys.stderr)
        return _handed_in(path, service, args)
    finally:
        progress.close()
        if first is not None:
            first.kill()
    _emit(report, args, path)
    if args.html:
        from grader.views.page import write_page
        from grader.submission import read_submission

        shown = write_page(report, read_submission(path).cells, args.html)
        print(f"feedback: {terminal(shown, PATH_LIMIT)}", file=sys.stderr if args.json == "-" else sys.stdout)
    if service is not None:
        return _handed_in(path, service, args)
    return 1 if _below(report.score, report.max_score, args.fail_under) else 0


def _service(args: argparse.Namespace) -> tuple[str, str] | None:
    """(address, token) of the hand-in service when --hand-in asks for one, checked before the
    notebook is: a bad address or a missing token is said at once."""
    if args.hand_in is None:
        if args.token_file is not None:
            raise UsageError("--token-file is for handing in: add --hand-in")
        return None
    if args.json == "-":
        raise UsageError("--hand-in prints the verdict: write the report to a file with --json FILE, not -")
    from grader.selfgrade.hand_in import read_token, service_url

    return service_url(args.hand_in), read_token(args.token_file)


def _handed_in(path: Path, service: tuple[str, str], args: argparse.Namespace) -> int:
    """Hand `path` in and print the verdict: 0, or 1 when it is below --fail-under."""
    from grader.selfgrade.hand_in import hand_in

    print()
    score, max_score = hand_in(path, *service, verbose=args.verbose)
    return 1 if _below(score, max_score, args.fail_under) else 0


def _below(score: float, max_score: float, fail_under: float | None) -> bool:
    if fail_under is None or max_score == 0:
        return False
    return 100.0 * score / max_score < fail_under


def _elsewhere(argv: list[str]) -> tuple[str, dict[str, str]] | None:
    """(assignment, installed packs) when what `argv` names is checked by another installed pack
    than this one; None when this one runs it, or says why it cannot (bad usage, --help, an
    unreadable file: the same sentence whichever pack's `grade` the command is)."""
    own = packs.this_pack()
    if own is None or not argv or argv[0] in INSTRUCTOR_COMMANDS and not Path(argv[0]).exists():
        return None
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            # --help and --version exit here: this pack says them
            args = _parser().parse_args(_hand_in_address(argv))
    except (UsageError, SystemExit):
        return None
    if len(args.paths) != 1:
        return None
    known = packs.installed()
    chosen = packs.choose_pack(Path(args.paths[0]), args.assignment, known, packs.this_pack())
    return None if chosen == own else (chosen, known)


def main(argv: list[str] | None = None, *, dispatch: bool = True) -> int:
    """`grade`: with `dispatch`, a notebook of another installed pack's assignment is checked by
    that pack's `grade` (in this process, before this one's signal handlers are installed)."""
    argv = sys.argv[1:] if argv is None else argv

    def dispatched() -> int:
        other = _elsewhere(argv) if dispatch else None
        if other is not None:
            return packs.grade_of(*other)(argv)
        with interrupts.handled():
            return run(argv)

    stopped = "the notebook's Python was stopped"
    return exit_status(dispatched, terminated=f"terminated; {stopped}", interrupted=f"interrupted; {stopped}",
                       bug="please tell your instructor")


def entry() -> None:
    """Console script. A normal exit (no JAX to tear down in this process): the exit handlers
    stop the self-check's verifier child too."""
    sys.exit(main())
