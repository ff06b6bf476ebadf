"""The mutants of every assignment are well formed and, together, target every check.

Whether each mutant really fails exactly what it declares is proven by `grade validate`, which
`make test` runs for every assignment (and tests/test_validate.py tests on a small assignment).
"""

from __future__ import annotations

import pytest

from grader import assignment
from grader.course.validate import Mutant, mutants_of

ASSIGNMENTS = assignment.available()


def _check_ids(name: str) -> set[str]:
    spec = assignment.load(name).spec
    return {f"{e.id}.{c.id}" for e in spec.exercises for c in e.checks}


def _mutants() -> list[tuple[str, Mutant]]:
    return [(name, m) for name in ASSIGNMENTS for m in mutants_of(assignment.resolve(name))]


def test_every_assignment_has_mutants() -> None:
    assert ASSIGNMENTS
    for name in ASSIGNMENTS:
        assert len(mutants_of(assignment.resolve(name))) >= 1, name


@pytest.mark.parametrize(("name", "mutant"), _mutants(), ids=lambda x: getattr(x, "name", x))
def test_mutant_declares_real_checks_and_says_what_it_does(name: str, mutant: Mutant) -> None:
    unknown = mutant.fails - _check_ids(name)
    assert mutant.fails and not unknown, f"{mutant.name} declares ids not in the spec: {sorted(unknown)}"
    assert mutant.summary, f"{mutant.name}: line 2 should say what the wrong submission does"


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_mutants_target_every_check(name: str) -> None:
    declared = set().union(*(m.fails for m in mutants_of(assignment.resolve(name))))
    assert _check_ids(name) - declared == set()


def test_a_mutant_is_appended_to_the_reference_as_its_last_cell(tmp_path) -> None:
    path = tmp_path / "m.py"
    path.write_text("# fails: a.b\n# wrong\nanswer = 42\n")
    mutant = Mutant(name="m", path=path, fails=frozenset({"a.b"}), summary="wrong")
    text = mutant.submission("x = 1\n")
    assert text.startswith("x = 1\n") and text.endswith("# %% [mutant]\n# fails: a.b\n# wrong\nanswer = 42\n")
