"""Grading in this test process as a batch worker grades: kernels and verifiers forked from one
warm worker's servers (grader/batch/warm_worker.py), answers reused for identical jobs.

The tests of what a submission's code does (faults, answers, verdicts, attribution) grade
through it, so they exercise the path a class is graded on, at a fraction of the cost of a
fresh kernel per grading; the fresh path of `grade FILE` stays covered by the sandbox, CLI and
kernel tests, which grade with `grade_one` alone. conftest.py closes the worker at the end.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from grader import GradeOptions, Report
from grader.batch import warm_worker
from grader.pipeline import grade_one


def grade_warm(path: str | Path, options: GradeOptions) -> Report:
    worker = warm_worker.current()
    return grade_one(path, options, kernel_factory=worker.kernels(options), verifier=worker.verifier(options))


def validate_in_process(capfd, *argv: str) -> SimpleNamespace:
    """`grade validate ARGV` run in this process as the console script runs it (cli.main): its exit
    status, stdout and stderr. A serial validation grades through the warm worker it finds (the
    `warm` fixture's), where one that makes its own boots a kernel and a verifier server and closes
    them at its end. test_validate.py's sound assignment runs the real command line."""
    from grader import cli

    capfd.readouterr()
    code = cli.main(["validate", *argv])
    out, err = capfd.readouterr()
    return SimpleNamespace(returncode=code, stdout=out, stderr=err)
