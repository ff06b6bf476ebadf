"""Build each assignment's template and solution notebooks from its reference module.

For every assignment folder with a `notebook.toml` (texts: intro, setup cell, one markdown text
per exercise), the template is: intro, setup, then per exercise its text, an empty answer cell
and a self-check cell (tagged `selfcheck`: it imports the assignment's own pack, `from
jax_course_<id> import check`, guarded; `grade` leaves its lines out and grades anything else a
student writes there, with a note); the solution notebook is the same
with the answer cells filled from solutions/<id>.py's `# %% [exercise]` sections. Run
`python scripts/make_notebooks.py` after editing either; tests fail when committed notebooks are
stale.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader.submission import selfcheck_source

ROOT = Path(__file__).resolve().parent.parent


def solution_sections(assignment: str) -> dict[str, str]:
    text = (ROOT / "solutions" / f"{assignment}.py").read_text(encoding="utf-8")
    parts = re.split(r"^# %% \[([\w-]+)\]\n", text, flags=re.M)
    return {name: body.strip() + "\n" for name, body in zip(parts[1::2], parts[2::2])}


def build(assignment: str, texts: dict, answers: dict[str, str] | None) -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["grader"] = {"assignment": assignment}
    nb.cells.append(new_markdown_cell(texts["intro"].strip()))
    nb.cells.append(new_code_cell(texts["setup"].strip()))
    for exercise, text in texts["exercises"].items():
        nb.cells.append(new_markdown_cell(text.strip()))
        answer = answers[exercise] if answers else f"# Your answer: exercise {exercise}\n"
        nb.cells.append(new_code_cell(answer))
        selfcheck = new_code_cell(selfcheck_source(exercise, assignment))  # the lines `grade` leaves out
        selfcheck.metadata["tags"] = ["selfcheck"]
        nb.cells.append(selfcheck)
    for i, cell in enumerate(nb.cells):  # stable ids keep regenerated files byte-identical
        cell["id"] = f"{assignment}-{i:02d}"
    return nb


def render(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


def targets() -> dict[Path, str]:
    out = {}
    for texts_file in sorted((ROOT / "assignments").glob("*/notebook.toml")):
        assignment = texts_file.parent.name
        texts = tomllib.loads(texts_file.read_text(encoding="utf-8"))
        sections = solution_sections(assignment)
        missing = [e for e in texts.get("exercises", {}) if e not in sections]
        if missing:  # `grade validate` names every difference from the spec
            raise SystemExit(f"solutions/{assignment}.py has no `# %% [{missing[0]}]` cell for the exercise "
                             f"notebook.toml names {missing[0]!r} (its cells: {', '.join(sections) or 'none'})")
        out[ROOT / "student_template" / f"{assignment}.ipynb"] = render(build(assignment, texts, None))
        out[ROOT / "solutions" / f"{assignment}.ipynb"] = render(build(assignment, texts, sections))
    return out


def main() -> int:
    for path, text in targets().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
