"""Autograder for the JAX course: `grade submit.ipynb`, or `grade_one()` from Python.

The names below are imported on first use (PEP 562), so that `import grader.kernel.client` or the
command line's first steps do not pay for the whole package.
"""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from grader.cases import Case
    from grader.checks.custom import Verdict
    from grader.options import GradeOptions
    from grader.pipeline import grade_one
    from grader.report import Report

_EXPORTS = {
    "Case": "grader.cases",
    "GradeOptions": "grader.options",
    "Report": "grader.report",
    "Verdict": "grader.checks.custom",
    "grade_one": "grader.pipeline",
}

__all__ = ["Case", "GradeOptions", "Report", "Verdict", "grade_one"]  # = sorted(_EXPORTS)


def __getattr__(name: str) -> _typing.Any:
    if name in _EXPORTS:
        value = getattr(_importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'grader' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
