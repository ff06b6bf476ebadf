"""The public surface of `grader`: exactly the names in __all__, each of them real."""

from __future__ import annotations

import types

import grader

EXPECTED = {"Case", "GradeOptions", "Report", "Verdict", "grade_one"}


def test_all_lists_exactly_the_public_names() -> None:
    assert sorted(grader.__all__) == sorted(EXPECTED)
    assert len(grader.__all__) == len(set(grader.__all__))


def test_every_name_in_all_exists() -> None:
    for name in grader.__all__:
        assert hasattr(grader, name), name


def test_nothing_public_is_left_out_of_all() -> None:
    """Every public name the package defines is in __all__. The exports are imported on first use
    (PEP 562), so they are loaded here first: the test must not depend on an earlier test having
    touched them (run alone, or first in an xdist worker, vars() holds none of them)."""
    for name in grader.__all__:
        getattr(grader, name)
    public = {name for name, value in vars(grader).items()
              if not name.startswith("_") and not isinstance(value, types.ModuleType)}
    assert public == set(grader.__all__)
    listed = {name for name in dir(grader)
              if not name.startswith("_") and not isinstance(getattr(grader, name), types.ModuleType)}
    assert listed == set(grader.__all__)


def test_exported_names_come_from_their_modules() -> None:
    from grader.cases import Case
    from grader.checks.custom import Verdict
    from grader.options import GradeOptions
    from grader.pipeline import grade_one
    from grader.report import Report

    assert (grader.Case, grader.GradeOptions, grader.Report, grader.Verdict, grader.grade_one) == (
        Case, GradeOptions, Report, Verdict, grade_one)
    assert callable(grader.grade_one)
