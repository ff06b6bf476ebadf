"""What the verifier says of a module that does the work, for tests that answer checks with fake
module facts instead of running a kernel and a verifier."""

from __future__ import annotations

from grader.verifier.protocol import CaseFacts, Constructs, LoopFacts


def working(ops: tuple[str, ...]) -> Constructs:
    """Constructs that do the work for the ops listed: a loop of each stop a spec may ask for,
    feeding the output; a case that chooses it from the input (test_constructs.py judges the rest)."""
    loops = [LoopFacts(stop=stop, feeds_output=True) for stop in ("value_dependent", "counted_by_input")]
    return Constructs(loops=loops if "while" in ops else [],
                      cases=[CaseFacts(index_from_input=True, feeds_output=True, branches_differ=True)]
                      if "case" in ops else [])
