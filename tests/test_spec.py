"""Assignment specs: the ch2-jit spec loads as designed; broken specs fail with plain, located lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader import assignment
from grader.errors import SpecInvalid
from grader.spec import SCHEMA_VERSION, AssignmentSpec

# ----------------------------------------------------------------------------- ch2-jit


@pytest.fixture(scope="module")
def ch2_spec() -> AssignmentSpec:
    return assignment.load("ch2-jit").spec


def test_ch2_loads_with_its_four_exercises(ch2_spec: AssignmentSpec) -> None:
    assert ch2_spec.id == "ch2-jit"
    assert ch2_spec.schema_version == SCHEMA_VERSION
    assert [e.id for e in ch2_spec.exercises] == ["tax", "newton", "detective", "training"]


def test_ch2_points_per_exercise(ch2_spec: AssignmentSpec) -> None:
    assert {e.id: e.points for e in ch2_spec.exercises} == {
        "tax": 25, "newton": 25, "detective": 20, "training": 30,
    }
    assert ch2_spec.max_score == 100
    for exercise in ch2_spec.exercises:
        assert sum(c.points for c in exercise.checks) == pytest.approx(exercise.points), exercise.id


def test_ch2_check_ids_are_unique(ch2_spec: AssignmentSpec) -> None:
    full_ids = [f"{e.id}.{c.id}" for e in ch2_spec.exercises for c in e.checks]
    assert len(full_ids) == len(set(full_ids))
    for exercise in ch2_spec.exercises:
        ids = [c.id for c in exercise.checks]
        assert len(ids) == len(set(ids)), exercise.id


def test_ch2_every_check_has_a_message_and_hidden_checks_draw_from_generators(ch2_spec: AssignmentSpec) -> None:
    for exercise in ch2_spec.exercises:
        for check in exercise.checks:
            assert check.message.strip(), check.id
            if check.hidden:
                cases = getattr(check, "cases", None)
                assert cases is not None and cases.generator is not None, f"{exercise.id}.{check.id}"


def test_ch2_references_and_custom_checks_exist() -> None:
    loaded = assignment.load("ch2-jit")
    for exercise in loaded.spec.exercises:
        for check in exercise.checks:
            if getattr(check, "reference", None):
                assert hasattr(loaded.references, check.reference), check.id
            cases = getattr(check, "cases", None)
            if cases is not None and cases.generator:
                assert hasattr(loaded.references, cases.generator), check.id
            if check.kind == "custom":
                assert hasattr(loaded.checks, check.function), check.id


# ----------------------------------------------------------------------------- invalid specs

CHECK = """
[[exercises.checks]]
kind = "numeric"
id = "{check_id}"
title = "f on one value"
points = {check_points}
message = "f(x) should be right"
function = "f"
reference = "f"
rtol = {rtol}
{extra_check}
cases.types = ["py"]
cases.rows = [[1.0]]
"""

SPEC = """schema_version = {version}
id = "mini"
title = "A minimal assignment"
{extra_top}
[[exercises]]
id = "one"
title = "Exercise one"
points = {exercise_points}
{checks}
"""


def write_spec(root: Path, *, version: object = 1, extra_top: str = "", exercise_points: float = 5,
               check_points: float = 5, rtol: float = 1e-5, extra_check: str = "",
               check_ids: tuple[str, ...] = ("a",)) -> Path:
    """A one-exercise spec in its own folder, with the given fields changed."""
    folder = root / "mini"
    folder.mkdir()
    checks = "".join(CHECK.format(check_id=i, check_points=check_points, rtol=rtol, extra_check=extra_check)
                     for i in check_ids)
    (folder / "assignment.toml").write_text(
        SPEC.format(version=version, extra_top=extra_top, exercise_points=exercise_points, checks=checks),
        encoding="utf-8",
    )
    (folder / "references.py").write_text("def f(x):\n    return x\n", encoding="utf-8")
    return folder


def problems_of(folder: Path) -> list[str]:
    with pytest.raises(SpecInvalid) as info:
        assignment.load(str(folder))
    assert info.value.assignment == "mini"
    assert info.value.problems, "a SpecInvalid must say what is wrong"
    for line in info.value.problems:
        assert "\n" not in line and "pydantic" not in line.lower() and "errors.pydantic" not in line
    return info.value.problems


def test_minimal_spec_is_valid(tmp_path: Path) -> None:
    loaded = assignment.load(str(write_spec(tmp_path)))
    assert loaded.spec.id == "mini"
    assert loaded.references is not None and loaded.references.f(2.0) == 2.0
    assert loaded.checks is None


def test_negative_rtol_names_the_field(tmp_path: Path) -> None:
    problems = problems_of(write_spec(tmp_path, rtol=-1))
    assert len(problems) == 1
    assert problems[0].startswith("exercises[0].checks[0].rtol: must be >= 0")


def test_negative_rtol_of_a_later_check_names_its_index(tmp_path: Path) -> None:
    folder = write_spec(tmp_path, check_ids=("a", "b"), check_points=2.5)
    text = (folder / "assignment.toml").read_text()
    last = text.rindex("rtol = ")
    (folder / "assignment.toml").write_text(text[:last] + "rtol = -0.5" + text[text.index("\n", last):])
    assert problems_of(folder) == ["exercises[0].checks[1].rtol: must be >= 0.0"]


def test_unknown_key_in_a_check(tmp_path: Path) -> None:
    problems = problems_of(write_spec(tmp_path, extra_check='colour = "red"'))
    assert problems == ["exercises[0].checks[0].colour: is not a known field"]


def test_unknown_key_at_top_level(tmp_path: Path) -> None:
    problems = problems_of(write_spec(tmp_path, extra_top="deadline = 3"))
    assert problems == ["deadline: is not a known field"]


def test_points_that_do_not_add_up(tmp_path: Path) -> None:
    problems = problems_of(write_spec(tmp_path, exercise_points=7))
    assert len(problems) == 1
    assert problems[0].startswith("exercises[0]: ")
    assert "add up to 5" in problems[0] and "7" in problems[0]


def test_duplicate_check_ids(tmp_path: Path) -> None:
    problems = problems_of(write_spec(tmp_path, check_ids=("a", "a"), check_points=2.5))
    assert problems == ["exercises[0]: duplicate check ids: a"]


def test_unknown_check_kind(tmp_path: Path) -> None:
    folder = write_spec(tmp_path)
    path = folder / "assignment.toml"
    path.write_text(path.read_text().replace('kind = "numeric"', 'kind = "vibes"'))
    (line,) = problems_of(folder)
    assert line.startswith("exercises[0].checks[0]")
    assert "'vibes'" in line and "'numeric'" in line  # what was written, and what is allowed


def test_missing_required_field(tmp_path: Path) -> None:
    folder = write_spec(tmp_path)
    path = folder / "assignment.toml"
    path.write_text(path.read_text().replace('message = "f(x) should be right"\n', ""))
    assert problems_of(folder) == ["exercises[0].checks[0].message: is required"]


def test_schema_version_too_new(tmp_path: Path) -> None:
    (line,) = problems_of(write_spec(tmp_path, version=SCHEMA_VERSION + 1))
    assert f"schema_version is {SCHEMA_VERSION + 1}" in line
    assert "grader is too old" in line


def test_schema_version_too_old(tmp_path: Path) -> None:
    (line,) = problems_of(write_spec(tmp_path, version=SCHEMA_VERSION - 1))
    assert f"schema_version is {SCHEMA_VERSION - 1}" in line
    assert "spec needs upgrading" in line


def test_unreadable_toml(tmp_path: Path) -> None:
    folder = tmp_path / "mini"
    folder.mkdir()
    (folder / "assignment.toml").write_text("schema_version = = 1\n")
    (line,) = problems_of(folder)
    assert line.startswith("assignment.toml is not readable TOML")


def test_several_problems_give_one_line_each(tmp_path: Path) -> None:
    problems = problems_of(write_spec(tmp_path, rtol=-1, extra_check="colour = 1"))
    assert sorted(p.split(":")[0] for p in problems) == [
        "exercises[0].checks[0].colour", "exercises[0].checks[0].rtol",
    ]


def test_spec_invalid_message_joins_the_problems(tmp_path: Path) -> None:
    with pytest.raises(SpecInvalid) as info:
        assignment.load(str(write_spec(tmp_path, rtol=-1)))
    assert str(info.value).startswith("assignment 'mini' has an invalid spec: exercises[0].checks[0].rtol")
    assert info.value.exit_code == 2


# ----------------------------------------------------------------------------- JSON Schema


def test_grade_schema_prints_a_json_schema() -> None:
    out = subprocess.run([sys.executable, "-m", "grader", "schema"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    schema = json.loads(out.stdout)
    assert "properties" in schema
    assert {"schema_version", "id", "title", "exercises"} <= set(schema["properties"])
    assert schema == AssignmentSpec.model_json_schema()


def test_reference_missing_from_references_py_is_reported(tmp_path: Path) -> None:
    folder = write_spec(tmp_path)
    (folder / "references.py").write_text("def g(x):\n    return x\n", encoding="utf-8")
    (line,) = problems_of(folder)
    assert line.startswith("exercises[0].checks[0].reference")
    assert "'f'" in line or "`f`" in line or " f " in line
