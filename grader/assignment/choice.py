"""Which assignment a submission or a batch is graded as: every such choice is made here (the
instructor's `grade`, a batch, the Gradescope bundle and the student pack's `grade` all ask).

A notebook's claim (`grader.assignment = "..."`) is the student's: it may only name an assignment
of the assignments folder, never a path, so nothing in a submissions folder is loaded as
instructor code. Light on purpose: the student pack imports it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import re

from grader import assignment as assignments
from grader.errors import SubmissionUnreadable, UsageError, WrongAssignment
from grader.options import GradeOptions
from grader.submission import Submission, claim_text, display_path, pack_distribution, pack_package, peek

ASSIGNMENT_ID = re.compile(r"[a-z][a-z0-9_-]*")  # grader/spec.py's pattern of an assignment id


def only_assignment(known: list[str]) -> str | None:
    """The one assignment there is, when the assignments folder holds exactly one: the last resort
    of every choice (and the whole of a Gradescope bundle's, which holds one)."""
    return known[0] if len(known) == 1 else None


def wrong_claim(path: str, hint: str | None, graded_id: str, graded_folder: Path, known: list[str], *,
                graded_as: str = "this batch grades") -> WrongAssignment | None:
    """Why what a notebook names (`hint`) keeps it from being graded as the instructor's assignment
    (`graded_id`, in `graded_folder`), or None.

    What a notebook names is the student's: it may only be the id of an assignment in the
    assignments folder (never a path, so nothing in the submissions folder is loaded as instructor
    code), and it must be the one graded.
    """
    if hint is None or hint == graded_id:
        return None
    if hint not in known:
        return WrongAssignment(path, claim_text(hint))
    if assignments.resolve(hint).resolve() != graded_folder:
        return WrongAssignment(path, hint, graded_id, graded=graded_as)
    return None


def choose_assignment(submission: Submission, options: GradeOptions) -> str:
    """-a (the instructor's: an id or a folder), else the notebook's `grader.assignment`, else the
    file name, else the only one.

    A notebook's claim that `wrong_claim` refuses makes the submission not gradable:
    WrongAssignment (an error report in a batch, exit 2 for one file).
    """
    known = assignments.available()
    hint = submission.assignment_hint
    if options.assignment:  # the instructor's, also a folder outside the assignments folder
        if hint is not None:
            wanted = assignments.resolve(options.assignment).resolve()
            wanted_id = assignments.load(options.assignment).spec.id  # loaded once a process
            wrong = wrong_claim(submission.path, hint, wanted_id, wanted, known,
                                graded_as="it is being graded as")
            if wrong is not None:
                raise wrong
        return options.assignment
    if hint is not None and hint not in known:
        raise WrongAssignment(submission.path, claim_text(hint))
    if hint is not None:
        return str(assignments.assignments_dir() / hint)  # the instructor's folder, never one elsewhere
    stem = Path(submission.path).stem
    if stem in known:
        return str(assignments.assignments_dir() / stem)
    only_one = only_assignment(known)
    if only_one is not None:
        return str(assignments.assignments_dir() / only_one)
    if not known:
        raise assignments.not_found(stem)
    raise UsageError(f"cannot tell which assignment {submission.path} is for; pass -a ({', '.join(known)})")


def decide_assignment(requested: str | None, hints: list[str | None], *, needed: bool = True) -> str | None:
    """The one assignment a batch grades: -a, else the one that a strict majority of the readable
    submissions names, else the only assignment there is; otherwise the batch asks for -a.

    `hints` has one entry per readable submission: what its notebook names, or None. A majority,
    not any claim: one notebook naming another assignment in a class of modules cannot decide
    what the others are graded as; it gets its own error report (`wrong_claim`). Returns None when
    nothing is `needed` (no readable submission) and nothing tells.
    """
    if requested:
        return requested
    known = assignments.available()
    counts = Counter(h for h in hints if h in known)
    if counts:
        top, votes = counts.most_common(1)[0]
        if 2 * votes > len(hints):
            return top
        listed = ", ".join(f"{n} for {a}" for a, n in sorted(counts.items()))
        unnamed = len(hints) - sum(counts.values())
        raise UsageError(f"the submissions do not agree on an assignment ({listed}"
                         + (f", {unnamed} naming none" if unnamed else "")
                         + "): pass -a to say which one this batch grades")
    only_one = only_assignment(known)
    if only_one is not None:
        return only_one
    if not needed:
        return None
    raise UsageError("cannot tell which assignment this batch grades (no notebook names one): pass -a"
                     + (f" ({', '.join(known)})" if known else ""))


# ----------------------------------------------------------------------------- the student packs


def _listed(known: dict[str, str]) -> str:
    return ", ".join(pack_distribution(a) for a in known) or "none"


class PackMissing(UsageError):
    """A notebook (or `-a`, or a self-check call) names an assignment whose pack is not installed
    in this Python: which pack to install, in one sentence (exit 2)."""

    def __init__(self, claimed: str, known: dict[str, str], *, path: str | None = None,
                 asked: str = "", pip: str = "pip"):
        installed_now = f"installed: {_listed(known)}"
        if not ASSIGNMENT_ID.fullmatch(claimed):  # a notebook's claim is the student's: quoted, never a name
            said = (f"{path}: this notebook says it is for {claim_text(claimed)}, which" if path else
                    f"{asked}{claim_text(claimed)}")
            message = f"{said} is not an assignment of the course's packs ({installed_now})"
        else:
            which = (f"{path}: this notebook is for {claimed}, whose pack" if path else
                     f"{asked}{claimed}: the pack of {claimed}" if asked else f"The pack of {claimed}")
            message = (f"{which} ({pack_distribution(claimed)}) is not installed in this Python "
                       f"({installed_now}); ask your instructor for the pack of {claimed}, then install it: "
                       f"{pip} install {pack_package(claimed)}-*.whl")
        super().__init__(message)
        self.claimed = claimed


def choose_pack(path: Path, requested: str | None, known: dict[str, str], own: str | None = None) -> str:
    """The assignment `grade` checks `path` as, among the packs installed (`known`): `-a`, else
    the notebook's `grader.assignment`, else the file's name, else the only pack there is (the
    instructor's order, `choose_assignment`). A file that cannot be read is left to the pack's
    own `grade` (`own`, the pack whose script runs), which says why in its sentence."""
    if requested is not None and requested not in known:
        raise PackMissing(requested, known, asked="-a ")
    try:
        seen = peek(path)
    except SubmissionUnreadable:
        return requested or (own if own in known else next(iter(known)))
    hint = seen.assignment_hint
    if requested is not None:
        if hint is not None and hint != requested:
            shown = hint if hint in known else claim_text(hint)
            raise WrongAssignment(seen.path, shown, requested, graded="-a asks for")
        return requested
    if hint is not None:
        if hint in known:
            return hint
        raise PackMissing(hint, known, path=seen.path)
    if path.stem in known:
        return path.stem
    only_one = only_assignment(list(known))
    if only_one is not None:
        return only_one
    raise UsageError(f"cannot tell which assignment {display_path(path)} is for; pass -a "
                     f"({', '.join(known)})")
