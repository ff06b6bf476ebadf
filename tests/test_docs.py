"""The pages a newcomer reads stay true: short, opening with the two commands, pointing at what exists.

README.md is read first: at most 250 lines, and its first two commands are `make demo` and `make
test`. Every relative link in it and in docs/*.md reaches a file, and an anchor a heading of that
file (GitHub's slugs). Its layout block lists exactly what `ls grader/` shows, its command table
every option and subcommand of `grade --help`, and docs/report-format.md every field of the
report's models. Each rule is a function of a text, also run on a broken example, so that a rule
that could never fail would show here.
"""

from __future__ import annotations

import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from pydantic import BaseModel

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = REPO / "docs"
README_MAX_LINES = 250
FIRST_COMMANDS = ["make demo", "make test"]

_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_INLINE_CODE = re.compile(r"(`+).*?\1")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def _split(text: str) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The lines outside fenced code blocks, and each block's info string and lines, in order."""
    prose: list[str] = []
    blocks: list[tuple[str, list[str]]] = []
    fence: str | None = None
    for line in text.splitlines():
        opened = _FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)
            blocks.append((line.strip()[3:].strip(), []))
        elif fence is not None and line.strip().startswith(fence) and not line.strip()[3:].strip():
            fence = None
        elif fence is not None:
            blocks[-1][1].append(line)
        else:
            prose.append(line)
    return prose, blocks


def first_commands(text: str, count: int = 2) -> list[str]:
    """The first commands of a page's code blocks: lines that are not blank or comments, without a
    shell prompt (`$ `) or a trailing comment; in a `console` block only the prompted lines."""
    found: list[str] = []
    for info, lines in _split(text)[1]:
        for line in lines:
            line = line.strip()
            if info == "console":
                if not line.startswith("$ "):
                    continue
            if not line or line.startswith("#"):
                continue
            command = re.sub(r"\s+#.*$", "", line.removeprefix("$ ")).strip()
            found.append(command)
            if len(found) == count:
                return found
    return found


def readme_problems(text: str) -> list[str]:
    """What keeps a text from being this README's opening: its length, and its first two commands."""
    problems = []
    lines = len(text.splitlines())
    if lines > README_MAX_LINES:
        problems.append(f"{lines} lines, more than {README_MAX_LINES}")
    if first_commands(text) != FIRST_COMMANDS:
        problems.append(f"its first commands are {first_commands(text)}, not {FIRST_COMMANDS}")
    return problems


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text (links as their text), lowercased, without what is
    neither a letter, a digit, a space, `-` nor `_`, spaces made hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor; a repeated one gets `-1`, `-2`, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for line in _split(text)[0]:
        match = _HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(text: str) -> list[str]:
    """Targets of the page's links that point into the repository (no scheme), code left out."""
    targets = []
    for line in _split(text)[0]:
        for target in _LINK.findall(_INLINE_CODE.sub("", line)):
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                targets.append(target)
    return targets


def broken_links(page: Path) -> list[str]:
    """Each relative link of a page whose file does not exist, or whose anchor is no heading of it."""
    broken = []
    for target in relative_links(page.read_text(encoding="utf-8")):
        path_part, _, anchor = target.partition("#")
        file = (page.parent / path_part).resolve() if path_part else page
        if not file.exists():
            broken.append(f"{target}: no file {file}")
        elif anchor and (file.suffix != ".md" or anchor not in anchors(file.read_text(encoding="utf-8"))):
            broken.append(f"{target}: no heading #{anchor} in {file.name}")
    return broken


def layout_block(text: str) -> list[str]:
    """The first code block under the `## Layout` heading, as its lines."""
    section = re.search(r"^## Layout\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert section, "README.md has no '## Layout' section"
    blocks = _split(section.group(1))[1]
    assert blocks, "its Layout section has no code block"
    return blocks[0][1]


def layout_mismatches(block: list[str], package: Path) -> list[str]:
    """How a layout block differs from a package folder: one `grader/<entry>` line per entry of
    `ls` (a folder with a trailing `/`), without __init__, __main__ and __pycache__."""
    listed = []
    problems = []
    for line in block:
        match = re.match(rf"^{package.name}/(\S+)\s", line + " ")
        if match:
            listed.append(match.group(1))
        elif line.strip():
            problems.append(f"a line that names no entry: {line!r}")
    present = {p.name + "/" if p.is_dir() else p.name for p in package.iterdir()
               if not p.name.startswith(".") and p.name not in {"__pycache__", "__init__.py", "__main__.py"}}
    problems += [f"listed twice: {name}" for name in sorted({n for n in listed if listed.count(n) > 1})]
    problems += [f"not listed: {package.name}/{name}" for name in sorted(present - set(listed))]
    problems += [f"listed, not there: {package.name}/{name}" for name in sorted(set(listed) - present)]
    return problems


def documented_fields(text: str, model: str) -> set[str]:
    """The field names in the first column of the table under the heading `### `model``."""
    section = re.search(rf"^### `{model}`\n(.*?)(?=^#|\Z)", text, flags=re.M | re.S)
    if not section:
        return set()
    names: set[str] = set()
    for row in re.findall(r"^\| ([^|]+) \|", section.group(1), flags=re.M):
        names.update(re.findall(r"`(\w+)`", row))
    return names


def report_models() -> list[type[BaseModel]]:
    """Every pydantic model that grader/report.py defines, the report's building blocks."""
    import grader.report as report

    return [value for name, value in vars(report).items()
            if isinstance(value, type) and issubclass(value, BaseModel) and not name.startswith("_")
            and value.__module__ == report.__name__]


def help_words(help_text: str) -> set[str]:
    """The long options and subcommands that `grade --help` names."""
    words = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", help_text))
    words |= {f"grade {name}" for name in re.findall(r"^  grade ([a-z][a-z-]+)", help_text, flags=re.M)}
    return words - {"--help"}


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


# The rules, on this repository's pages.


def test_the_readme_is_short_and_opens_with_the_two_commands() -> None:
    assert readme_problems(README.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_reaches_a_file_and_a_heading(page: Path) -> None:
    assert broken_links(page) == []


def test_the_layout_block_is_ls_grader() -> None:
    assert layout_mismatches(layout_block(README.read_text(encoding="utf-8")), REPO / "grader") == []


def test_the_report_format_has_a_row_for_every_field_of_the_report() -> None:
    text = (DOCS / "report-format.md").read_text(encoding="utf-8")
    models = report_models()
    assert {m.__name__ for m in models} >= {"Report", "ExerciseResult", "CheckResult", "CellProblem",
                                            "Isolation"}
    def documented(model: type) -> set[str]:  # a subclass's own table, and its bases' (StudentReport)
        return set().union(*(documented_fields(text, c.__name__) for c in model.__mro__ if c in models))

    missing = {m.__name__: sorted(set(m.model_fields) - documented(m)) for m in models}
    assert {name: fields for name, fields in missing.items() if fields} == {}


def test_the_command_table_names_every_option_and_subcommand_of_grade_help() -> None:
    shown = subprocess.run([sys.executable, "-m", "grader", "--help"], capture_output=True, text=True,
                           check=True, cwd=REPO).stdout
    words = help_words(shown)
    assert {"--json", "--no-sandbox", "grade validate", "grade pack"} <= words
    readme = README.read_text(encoding="utf-8")
    assert sorted(w for w in words if f"`{w}" not in readme and f" {w}" not in readme) == []


# Each rule fails where it should.


def test_a_long_readme_or_another_first_command_is_a_problem() -> None:
    good = "# t\n\n```sh\nmake demo   # grade\nmake test\n```\n"
    assert readme_problems(good) == []
    too_long = good + "x\n" * README_MAX_LINES
    assert readme_problems(too_long) == [f"{README_MAX_LINES + 6} lines, more than 250"]
    pip_first = "```console\n$ pip install .\n```\n" + good
    assert first_commands(pip_first) == ["pip install .", "make demo"]
    assert len(readme_problems(pip_first)) == 1
    swapped = "```sh\n# comment\nmake test\n\nmake demo\n```\n"
    assert first_commands(swapped) == ["make test", "make demo"] and readme_problems(swapped)


def test_githubs_slugs() -> None:
    assert slug("Domains: what \"any a\" means") == "domains-what-any-a-means"
    assert slug("The `Report` (schema_version 1)") == "the-report-schema_version-1"
    assert slug("Forked kernels and verifiers (a batch worker's fork servers)") == (
        "forked-kernels-and-verifiers-a-batch-workers-fork-servers")
    assert slug("See [speed](speed.md) — fast") == "see-speed--fast"
    assert anchors("# A\n## A\n```\n# not a heading\n```\n### A ###\n") == {"a", "a-1", "a-2"}


def test_a_broken_link_or_anchor_is_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## A part\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[fine](other.md) [fine too](other.md#a-part) [here](#page) [web](https://example.org/x)\n"
        "`[in code](missing.md)`\n```\n[in a block](missing.md)\n```\n"
        "[gone](missing.md) [no part](other.md#b-part) [no heading](#nowhere)\n",
        encoding="utf-8")
    assert broken_links(page) == [
        f"missing.md: no file {tmp_path / 'missing.md'}",
        "other.md#b-part: no heading #b-part in other.md",
        "#nowhere: no heading #nowhere in page.md",
    ]


def test_a_layout_block_that_differs_from_the_folder_is_found(tmp_path: Path) -> None:
    package = tmp_path / "grader"
    (package / "wing" / "__pycache__").mkdir(parents=True)
    for name in ("__init__.py", "__main__.py", "cli.py", "new.py"):
        (package / name).write_text("", encoding="utf-8")
    (package / "__pycache__").mkdir()
    assert layout_mismatches(["grader/cli.py    the command", "grader/wing/   a wing", "grader/new.py  x"],
                             package) == []
    assert layout_mismatches(["grader/cli.py    the command", "grader/wing.py   not a folder",
                              "grader/gone.py  x", "grader/cli.py  again", "a stray line"], package) == [
        "a line that names no entry: 'a stray line'",
        "listed twice: cli.py",
        "not listed: grader/new.py",
        "not listed: grader/wing/",
        "listed, not there: grader/gone.py",
        "listed, not there: grader/wing.py",
    ]


def test_a_field_without_its_row_is_found() -> None:
    text = ("### `Tally`\n\n| field | meaning |\n| --- | --- |\n| `failed`, `other` | x |\n\n"
            "### `Next`\n| `calls` | y |\n")
    assert documented_fields(text, "Tally") == {"failed", "other"}
    assert documented_fields(text, "Missing") == set()


def test_an_option_missing_from_the_table_is_found() -> None:
    shown = ("usage: grade [--json FILE] [--new-flag]\n  --json FILE  x\n\n"
             "subcommands:\n  grade validate [A]  x\n")
    assert help_words(shown) == {"--json", "--new-flag", "grade validate"}
