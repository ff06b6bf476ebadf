"""The JSON report (schema_version 1, as in DESIGN.md), its models and its writer."""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from grader.checks.base import CheckStatus
from grader.sandbox import Isolation
from grader.session import CellProblem

REPORT_SCHEMA_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SubmissionRef(_Model):
    path: str
    sha256: str | None
    kind: Literal["notebook", "module"] | None


class CheckResult(_Model):
    id: str
    title: str
    status: CheckStatus
    score: float
    max_score: float
    hidden: bool
    message: str | None


class ExerciseResult(_Model):
    id: str
    title: str
    score: float
    max_score: float
    checks: list[CheckResult]


class Environment(_Model):
    grader: str
    python: str
    jax: str | None


class Report(_Model):
    schema_version: Literal[1] = REPORT_SCHEMA_VERSION
    assignment: str
    submission: SubmissionRef
    student: str | None = None
    status: Literal["graded", "error"]
    error: str | None = None
    score: float
    max_score: float
    exercises: list[ExerciseResult]
    seed: int
    duration_s: float
    environment: Environment
    cell_problems: list[CellProblem] = Field(
        default_factory=list, description="student cells that raised, hung or killed the kernel"
    )
    isolation: Isolation = Field(description="the sandbox layers in force while grading")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def environment() -> Environment:
    return Environment(grader=_version("jax-course-grader") or "0+unknown",
                       python=platform.python_version(), jax=_version("jax"))


def write(report: Report, path: Path) -> None:
    """Write atomically: a reader never sees half a report."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
