"""The compiled-program store filled from an assignment's reference solution (grader/sandbox/
executables.py has the store, its trust and its checks): the reference is graded once, in a
sandbox whose cache directory is writable, and what it compiled is adopted.

It grades, so it lives beside `grade_one` (the store itself is the sandbox's and imports no
grading code). Batches, `grade validate` and a single `grade FILE` call `ensure` the first time
they need the store for an assignment.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from grader import runtime_paths
from grader.assignment import Assignment
from grader.options import GradeOptions
from grader.pipeline import grade_one
from grader.sandbox import executables


def ensure(assignment: Assignment, *, sandbox: bool = True) -> int:
    """Build the store for this assignment if it is not yet built (and can be); how many
    programs were added. Never raises: a failed build only means compiling as before."""
    from grader.assignment import reference_solution

    path = executables.store() if sandbox else None
    solution = reference_solution(assignment)
    try:
        if path is None or solution is None or executables.marker(path, assignment, solution).is_file():
            return 0
        return build(assignment, solution, path)
    except Exception:  # noqa: BLE001 - a cache: grading goes on compiling as before
        return 0


def ensure_for(assignment: Assignment, options: GradeOptions) -> None:
    """`ensure` for a grading with these options (grade_one's `on_assignment`)."""
    ensure(assignment, sandbox=options.sandbox)


def build(assignment: Assignment, solution: Path, path: Path) -> int:
    """Grade the reference solution with a writable cache, then adopt what it compiled."""
    from grader.kernel.client import Kernel
    from grader.sandbox.layers import SandboxPolicy
    from grader.verifier.client import Verifier

    if executables.size(path) > executables.MAX_STORE_BYTES:
        executables.empty(path)
    plain = SandboxPolicy()
    with runtime_paths.temporary_scratch("executables") as scratch:
        compiled = Path(scratch)
        if os.geteuid() == 0:  # an ordinary user's sandbox writes as the grader's own uid
            os.chown(compiled, plain.uid, plain.gid)
        os.chmod(compiled, 0o700)
        policy = SandboxPolicy(executables=compiled, executables_writable=True)
        options = GradeOptions(assignment=str(assignment.folder), seed=0)
        report = grade_one(solution, options, kernel_factory=lambda: Kernel(sandbox=policy),
                           verifier=Verifier(sandbox=policy))
        added = executables.adopt(compiled, path)
    # built even where the reference did not grade cleanly: what it compiled is still right, and
    # every later run would otherwise pay for the same build again
    built = {"solution": solution.name, "status": report.status, "programs": added}
    executables.marker(path, assignment, solution).write_text(json.dumps(built) + "\n")
    return added
