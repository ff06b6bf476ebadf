"""Every shape that crosses the service's boundaries: the HTTP bodies (docs/hand-in-service.md has
the API) and a row of the job table.

The bodies are what a student's client reads, so they carry sentences for people (`message`,
`error`) and the report as a student sees it (grader/serve/student_view.py), never a path on the
grading machine, a worker or anything else of the service's own.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from grader.report import StudentReport

JobState = Literal["queued", "running", "graded", "not_graded", "superseded"]
LIVE: tuple[JobState, ...] = ("queued", "running")
"""The states of a hand-in still to be graded (at most one of each per student)."""


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(_Body):
    """Every refusal: one sentence (with the status code that says which kind)."""

    error: str


class HandInReply(_Body):
    """202 to POST /api/hand-ins: the hand-in is kept and queued."""

    id: str
    state: Literal["queued"] = "queued"
    student: str
    superseded: str | None = Field(default=None, description=(
        "the id of this student's hand-in that was still queued and is replaced by this one"))
    message: str


class HandInSummary(_Body):
    """One hand-in in the student's list: its state and score, without the report."""

    id: str
    state: JobState
    message: str
    position: int | None = Field(default=None, description="hand-ins ahead of it, while queued")
    score: float | None = None
    max_score: float | None = None


class HandInStatus(HandInSummary):
    """GET /api/hand-ins/{id}: the summary, and the report as a student sees it once graded."""

    report: StudentReport | None = None


class HandInList(_Body):
    """GET /api/hand-ins: whose token this is, what is graded, and their hand-ins, oldest first."""

    student: str
    assignment: str
    hand_ins: list[HandInSummary]


class Health(_Body):
    ok: bool = True


class Job(BaseModel):
    """A row of the job table (grader/serve/jobs.py), without the report it may hold."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    seq: int
    student: str
    assignment: str
    path: str = Field(description="the stored upload, OUT/hand-ins/<student>/<id>.<ext>")
    file_name: str = Field(description="the name the student's file had, made inert and cut: shown, never used")
    sha256: str
    state: JobState
    accepted_at: str
    started_at: str | None = None
    deadline_at: str | None = None
    finished_at: str | None = None
    worker: str | None = Field(default=None, description="the service run and worker that holds it while running")
    reason: str | None = Field(default=None, description="why it was not graded (a sentence for the student)")
    superseded_by: str | None = None
    attempts: int = Field(default=0, description="how many times a worker took it")
    score: float | None = None
    max_score: float | None = None
