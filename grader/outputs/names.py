"""The names of the files in a batch's folder OUT, each decided here once.

    OUT/
      gradebook.sqlite                     every report and adjustment (outputs/gradebook.py)
      <student>.json                       each student's final report
      feedback/<student>.html              each student's feedback page
      index.html                           the class page (outputs/classreport.py)
      summary.csv                          one row per student (outputs/exports.py)
      gradescope/<student>/results.json    Gradescope's results (--format gradescope)
      canvas.csv, moodle.csv               the LMS exports (grade export --canvas, --moodle)
      late.toml                            the instructor's late policy, read, never written
      hand-ins/<student>/<id>.ipynb|.py    what `grade serve` accepted, one file a hand-in (grader/serve)
      .staging/COMMIT                      an update being committed (outputs/staging.py)
      .staging/DELETE                      the files that update deletes (a removed student's)
      .lock                                held by the command updating OUT

<student> is `student_file_stem(id)` (grader/batch/discovery.py): safe, and distinct for distinct
ids. The module-level names are relative to OUT (what a `Staging` writes); `OutputFolder` joins
them to one OUT. tests/test_one_owner.py checks that no other module spells one of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grader.batch.discovery import student_file_stem

GRADEBOOK = "gradebook.sqlite"
CLASS_PAGE = "index.html"
SUMMARY_CSV = "summary.csv"
FEEDBACK = "feedback"
GRADESCOPE = "gradescope"
GRADESCOPE_RESULTS = "results.json"
"""The file Gradescope reads: OUT/gradescope/<student>/ holds one, as does a Gradescope container."""
CANVAS_CSV = "canvas.csv"
"""The filled copy of the Canvas export."""
MOODLE_CSV = "moodle.csv"
"""Moodle's grade import."""
LATE_POLICY = "late.toml"
HAND_INS = "hand-ins"
"""What `grade serve` keeps of each hand-in: the file as uploaded, under a name of the service's."""
STAGING = ".staging"
MANIFEST = "COMMIT"
"""Inside STAGING: the staged files, one a line; written last, it is the commit point."""
DELETIONS = "DELETE"
"""Inside STAGING: the files of OUT the commit deletes, one a line (written before MANIFEST)."""
LOCK = ".lock"


def report_file_name(student: str) -> str:
    """`OUT/<this>`: the student's JSON report, beside index.html."""
    return student_file_stem(student) + ".json"


def feedback_file_name(student: str) -> str:
    """`OUT/<this>`: the student's feedback page, below index.html."""
    return f"{FEEDBACK}/{student_file_stem(student)}.html"


def gradescope_results_name(student: str) -> str:
    """`OUT/<this>`: the student's Gradescope results (the id itself is inside)."""
    return f"{GRADESCOPE}/{student_file_stem(student)}/{GRADESCOPE_RESULTS}"


def hand_in_file_name(student: str, hand_in: str, suffix: str) -> str:
    """`OUT/<this>`: one hand-in's file (`hand_in` is the service's random id, `suffix` .ipynb or
    .py): never a name the student chose."""
    return f"{HAND_INS}/{student_file_stem(student)}/{hand_in}{suffix}"


@dataclass(frozen=True)
class OutputFolder:
    """One batch's folder OUT, its files by what they hold."""

    root: Path

    @property
    def gradebook(self) -> Path:
        return self.root / GRADEBOOK

    @property
    def class_page(self) -> Path:
        return self.root / CLASS_PAGE

    @property
    def summary_csv(self) -> Path:
        return self.root / SUMMARY_CSV

    @property
    def gradescope(self) -> Path:
        return self.root / GRADESCOPE

    @property
    def canvas_csv(self) -> Path:
        return self.root / CANVAS_CSV

    @property
    def moodle_csv(self) -> Path:
        return self.root / MOODLE_CSV

    @property
    def late_policy(self) -> Path:
        return self.root / LATE_POLICY

    @property
    def staging(self) -> Path:
        return self.root / STAGING

    @property
    def lock(self) -> Path:
        return self.root / LOCK

    def report(self, student: str) -> Path:
        return self.root / report_file_name(student)

    def hand_in(self, student: str, hand_in: str, suffix: str) -> Path:
        return self.root / hand_in_file_name(student, hand_in, suffix)

    def feedback(self, student: str) -> Path:
        return self.root / feedback_file_name(student)
