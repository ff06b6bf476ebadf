"""Options of one grading run (what the command line or a caller can change)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class GradeOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    assignment: str | None = Field(
        default=None, description="assignment id or folder; None: from the notebook's metadata or file name"
    )
    seed: int | None = Field(default=None, ge=0, description="seed of hidden inputs; None: a fresh one")
    exercises: tuple[str, ...] | None = Field(default=None, min_length=1, description=(
        "grade only these exercises (`grade validate` grades a derived mutant on the exercises it "
        "changes, where alone its verdict is read); None: every exercise"))
    cell_timeout: float | None = Field(default=None, gt=0, description="overrides the spec's cell, probe and request limits")
    student: str | None = None
    kernel_name: str = "python3"
    sandbox: bool = Field(default=True, description="run kernels in the sandbox, with the layers this machine has")
