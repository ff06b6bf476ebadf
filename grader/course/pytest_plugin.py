"""A pytest plugin: `pytest` in a course repository validates its assignments, item by item.

Registered as the `pytest11` entry point `grade-assignments`, so installing the grader is
enough: every `assignments/<id>/assignment.toml` under the paths pytest collects becomes one
test file, whose items are what `grade validate` checks (the spec, the requirements, each
reference solution, the template, each hand-written mutant, each derived mutant and honest
variant, "every check can fail"). The whole assignment is validated once, when the first item
runs, through the batch path, together with every other assignment of its course folder that
has a selected item (one pool of workers for all); each item then passes or fails with its row,
and a failing item names the mutant, the checks that should have killed it and the requirement
they verify.

    pytest assignments                       # every assignment
    pytest assignments -k "derived and tax"  # a selection still validates the whole assignment
    pytest assignments --grade-jobs 4        # submissions graded at once
    pytest assignments --junitxml v.xml --grade-json v.json --grade-html v.html
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from grader.assignment import SPEC_FILE


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("grade-assignments", "validating course assignments (jax-course-grader)")
    group.addoption("--grade-jobs", type=int, default=2, help="submissions graded at once (default 2)")
    group.addoption("--grade-json", type=Path, metavar="FILE", help="write the rows and kill matrices as JSON")
    group.addoption("--grade-html", type=Path, metavar="FILE", help="write the rows and kill matrices as a page")


_VALIDATED: list[Any] = []  # every assignment validated in this session, for --grade-json / --grade-html
_TOGETHER = pytest.StashKey[dict[Path, list["AssignmentFile"]]]()  # course folder -> its selected assignments


def pytest_sessionfinish(session: pytest.Session) -> None:
    json_file, html_file = session.config.getoption("grade_json"), session.config.getoption("grade_html")
    if not _VALIDATED or not (json_file or html_file):
        return
    from grader.course import validation_outputs as outputs
    from grader.course.validate import Validation

    validation = Validation(assignments=list(_VALIDATED))
    if json_file:
        outputs.write(json_file, validation.model_dump_json(indent=2) + "\n")
    if html_file:
        outputs.write(html_file, outputs.page(validation))


@pytest.hookimpl(trylast=True)  # after `-k` and `-m` deselected what they deselect
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The assignments of one course folder that have selected items are validated together,
    in one pool of workers (`validate_all`)."""
    together: dict[Path, list[AssignmentFile]] = {}
    for item in items:
        if isinstance(item.parent, AssignmentFile):
            files = together.setdefault(item.parent.path.parent.parent, [])
            if item.parent not in files:
                files.append(item.parent)
    config.stash[_TOGETHER] = together


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name == SPEC_FILE and file_path.parent.parent.name == "assignments":
        return AssignmentFile.from_parent(parent, path=file_path)
    return None


@contextmanager
def _assignments_at(folder: Path) -> Iterator[None]:
    """Validate the collected folder's assignments, not the grader's own."""
    kept = os.environ.get("GRADER_ASSIGNMENTS")
    os.environ["GRADER_ASSIGNMENTS"] = str(folder)
    try:
        yield
    finally:
        if kept is None:
            os.environ.pop("GRADER_ASSIGNMENTS", None)
        else:
            os.environ["GRADER_ASSIGNMENTS"] = kept


class AssignmentFile(pytest.File):
    """One assignment: its validation items, validated together on first use."""

    _rows: dict[str, Any] | None = None
    planned: frozenset[str] = frozenset()

    @property
    def assignment_id(self) -> str:
        return self.path.parent.name

    def collect(self) -> Iterator[pytest.Item]:
        from grader.course.validate import planned_items

        with _assignments_at(self.path.parent.parent):
            keys = planned_items(self.assignment_id)
        self.planned = frozenset(keys)
        for key in keys:
            yield ValidationItem.from_parent(self, name=key)
        yield ValidationItem.from_parent(self, name="nothing else is wrong")

    def rows(self) -> dict[str, Any]:
        """Its rows, validated on first use together with the other selected assignments of its
        course folder: one pool's start and one pool's last grading for all of them."""
        if self._rows is None:
            from grader.course.validate import validate_all

            folder = self.path.parent.parent
            files = self.config.stash.get(_TOGETHER, {}).get(folder) or []
            files = files if self in files else [self]
            with _assignments_at(folder):
                found = validate_all([f.assignment_id for f in files], workers=self.config.getoption("grade_jobs"))
            _VALIDATED.extend(found.assignments)
            for file in files:
                file._rows = {r.item: r for r in found.rows if r.assignment == file.assignment_id}
        assert self._rows is not None
        return self._rows


class ValidationFailed(Exception):
    """An item whose row failed: its detail is the report."""


class ValidationItem(pytest.Item):
    def runtest(self) -> None:
        parent = self.parent
        assert isinstance(parent, AssignmentFile)
        rows = parent.rows()
        if self.name == "nothing else is wrong":
            others = [r for key, r in rows.items() if not r.ok and key not in parent.planned]
            if others:
                raise ValidationFailed("; ".join(f"{r.item}: {r.detail}" for r in others))
            return
        row = rows.get(self.name)
        if row is None:
            raise ValidationFailed("validating the assignment gave no result for this item")
        if not row.ok:
            raise ValidationFailed(row.detail)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, ValidationFailed):
            return f"{self.name}: {excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"{self.parent.name if self.parent else ''}::{self.name}"
