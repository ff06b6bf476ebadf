"""What a family of derived mutants adds its mutants to: the protocol the builder in
families.py meets, so that each family module depends on it and not on families.py."""

from __future__ import annotations

from typing import Literal, Protocol

from grader.course.mutation.interface import FunctionUse, Interface, NameUse
from grader.course.mutation.introspect import ReferenceFacts

Family = Literal["argument_ignored", "construct_removed", "lookalike", "overfit", "output_perturbed", "honest"]


class MutantSink(Protocol):
    """The reference's source, its interface and facts, and `add` for each mutant derived."""

    reference: str
    interface: Interface
    facts: ReferenceFacts

    def add(self, name: str, family: Family, summary: str, use: FunctionUse | NameUse, body: str,
            expected: list[str] | None = None, target: str | None = None) -> None: ...

    def not_applicable(self, name: str, family: Family, use: FunctionUse | NameUse, reason: str,
                       expected: list[str] | None = None, summary: str = "") -> None:
        """Record that the mutant `name`, which the spec asks for, cannot be made of this
        reference (it uses no construct the family can change), and why: never graded."""
