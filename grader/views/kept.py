"""A report written where the command keeps it, and the line that says where: `grade FILE`'s, the
pack's check here and its hand-in's."""

from __future__ import annotations

import sys
from pathlib import Path

from grader.inert import PATH_LIMIT, terminal
from grader.report import Report, write


def keep(report: Report, target: Path, label: str, what: str) -> None:
    """Write `report` to `target` and say where (`label: PATH`); a folder it cannot be written to
    is one line on stderr naming `what`, and costs the verdict nothing."""
    try:
        write(report, target)
    except OSError as exc:
        print(f"grade: could not write {what} to {terminal(target, PATH_LIMIT)} ({terminal(exc.strerror)})",
              file=sys.stderr)
        return
    print(f"{label}: {terminal(target, PATH_LIMIT)}")  # a closed stdout is not the report's fault
