"""Find the submissions in folders: one per student, as a file or as a sub-folder.

`alice.ipynb` or `bob.py` directly in a folder is the submission of `alice` / `bob`; a
sub-folder `carol/` holding exactly one notebook or module is `carol`'s. Anything else is
skipped and listed. Two submissions for one student is an error for that student only.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel

from grader.submission import SUFFIXES

IGNORED = {"__pycache__", ".ipynb_checkpoints"}


class Found(BaseModel):
    student: str
    path: Path


class Discovery(BaseModel):
    submissions: list[Found]
    conflicts: dict[str, list[Path]]
    skipped: dict[str, str]  # path -> why


def _is_submission(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() in SUFFIXES


def _visible(path: Path) -> bool:
    return not path.name.startswith(".") and path.name not in IGNORED


def discover(paths: list[Path]) -> Discovery:
    by_student: dict[str, list[Path]] = defaultdict(list)
    skipped: dict[str, str] = {}
    for given in paths:
        if given.is_file():
            by_student[given.stem].append(given)
            continue
        if not given.is_dir():
            skipped[str(given)] = "no such file or folder"
            continue
        for entry in sorted(filter(_visible, given.iterdir())):
            if _is_submission(entry):
                by_student[entry.stem].append(entry)
            elif entry.is_dir():
                inside = sorted(p for p in entry.iterdir() if _visible(p) and _is_submission(p))
                if inside:
                    by_student[entry.name].extend(inside)
                else:
                    skipped[str(entry)] = "a folder without a notebook or module"
            else:
                skipped[str(entry)] = "not a .ipynb notebook or .py module"
    found = [Found(student=s, path=ps[0]) for s, ps in sorted(by_student.items()) if len(ps) == 1]
    conflicts = {s: ps for s, ps in sorted(by_student.items()) if len(ps) > 1}
    return Discovery(submissions=found, conflicts=conflicts, skipped=skipped)
