"""Shapes the class-level tools hand each other (the class page reads them, the gradebook keeps
them): groups of students whose programs are alike."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SimilarGroup(BaseModel):
    """Students whose exported programs for one exercise are identical or nearly so."""

    model_config = ConfigDict(extra="forbid")

    exercise: str
    students: list[str] = Field(min_length=2)
    similarity: float = Field(ge=0, le=1, description="the lowest similarity between two members (1: identical)")
    threshold: float = Field(ge=0, le=1, description="the similarity at or above which students are grouped")
    identical: bool = Field(description="every member's normalised program is byte-identical")
    common: bool = Field(default=False, description=(
        "one exact program written by a large share of the class: perhaps what the exercise dictates, "
        "perhaps a ring of copies; shown apart, for the instructor to judge"))
