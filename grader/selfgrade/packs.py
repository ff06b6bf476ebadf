"""A course's student packs side by side: one distribution per assignment (`jax-course-ch2-jit`,
import package `jax_course_ch2_jit`), each a private copy of the grader's runtime with its
assignment's public part (grader/course/pack.py), so packs made at different times, from
different grader versions, install in any order and share no file but the `grade` script.

Each pack registers itself in the entry point group `jax_course.packs` (name: its assignment
id, value: its package); the package's root has `grade(argv) -> int`, that pack's own `grade`,
and `check(exercise, ...)`, its self-check. Every pack installs the same `grade` command: whichever
pack's script pip wrote last, it reads which assignment the notebook is for as the instructor's
`grade` does (`-a`, the notebook's `grader.assignment`, its file name, the only one there is),
among the packs installed (`grader.assignment.choice.choose_pack`), and runs that pack's `grade`
(`grade_of`). A notebook of an
assignment no pack here holds is one sentence that says which pack to install (`PackMissing`).

Run from this checkout (no pack: no `_assignments/` beside the code), nothing is chosen here:
the instructor's assignments are graded as before.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from grader import assignment as assignments
from grader.assignment.choice import ASSIGNMENT_ID, PackMissing, choose_pack
from grader.errors import GraderError
from grader.submission import pack_distribution, pack_package

GROUP = "jax_course.packs"
COURSE_FILE = "course.json"
"""What the pack says of its course, beside its assignment folders: the JAX it grades with, the
hand-in service's address."""


def this_pack() -> str | None:
    """The assignment this pack holds (the one folder of its `_assignments/`); None outside a
    pack (this checkout)."""
    try:
        found = [p.name for p in assignments.PACKED_DIR.iterdir()
                 if (p / assignments.PACKED_SPEC_FILE).is_file()]
    except OSError:
        return None
    return found[0] if len(found) == 1 else None


def packed_folder(assignment: str) -> Path:
    """This pack's folder of its assignment: a pack grades with its own, never with an
    `assignments/` folder of the working directory or `$GRADER_ASSIGNMENTS`."""
    return assignments.PACKED_DIR / assignment


def hand_in_url() -> str | None:
    """The address of the course's hand-in service this pack was made with (`grade pack
    --hand-in-url`, kept in its course.json); None without one, and in this checkout."""
    import json

    try:
        said = json.loads((assignments.PACKED_DIR / COURSE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    url = said.get("hand_in_url") if isinstance(said, dict) else None
    return url if isinstance(url, str) and url else None


def installed() -> dict[str, str]:
    """Assignment id -> package of every pack installed in this Python, this one included."""
    from importlib import metadata

    found: dict[str, str] = {}
    try:
        points = list(metadata.entry_points(group=GROUP))
    except Exception:  # noqa: BLE001 - broken metadata of another distribution: this pack still counts
        points = []
    for point in points:
        if ASSIGNMENT_ID.fullmatch(point.name) and point.value.isidentifier():
            found.setdefault(point.name, point.value)
    own = this_pack()
    if own is not None:
        found[own] = __name__.split(".")[0]
    return dict(sorted(found.items()))


class PackBroken(GraderError):
    """An installed pack that does not load (exit 3: a broken install, not the student's work)."""

    exit_code = 3


def pack_of(assignment: str, known: dict[str, str]) -> ModuleType:
    """The package of the pack of `assignment` (another installed pack), whose root has `check`
    and `grade`: PackBroken when it does not load."""
    package = known[assignment]
    try:
        module = importlib.import_module(package)
        missing = [name for name in ("check", "grade") if not callable(getattr(module, name, None))]
        if missing:
            raise AttributeError(f"{package} has no {missing[0]}")
    except Exception as exc:  # noqa: BLE001 - a broken install is one sentence, never a traceback
        raise PackBroken(f"the pack of {assignment} ({pack_distribution(assignment)}) is installed but does "
                         f"not load ({type(exc).__name__}: {exc}); install it again: pip install "
                         f"--force-reinstall --no-deps {pack_package(assignment)}-*.whl") from None
    return module


def grade_of(assignment: str, known: dict[str, str]) -> Callable[[list[str]], int]:
    """The `grade` of the pack of `assignment` (another installed pack): PackBroken when it does
    not load."""
    return pack_of(assignment, known).grade


def load(assignment: str) -> assignments.Assignment:
    """The assignment a self-check or `grade` of this pack judges: its own folder in a pack (an
    id of another assignment is PackMissing), the instructor's assignments in this checkout."""
    own = this_pack()
    if own is None:
        return assignments.load(assignment)
    if assignment != own:
        raise PackMissing(assignment, installed())
    return assignments.load(str(packed_folder(own)))
