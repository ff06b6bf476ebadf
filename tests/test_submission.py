"""Reading submissions: which code runs, in which cells, and which files are refused (and why)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import nbformat
import pytest

from grader.errors import SubmissionUnreadable
from grader.submission import read_submission

# ----------------------------------------------------------------------------- notebooks


def write_notebook(path: Path, cells: list, metadata: dict | None = None) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nb.metadata.update(metadata or {})
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"c{i}"
    nbformat.write(nb, path)
    return path


def code(source: str, *, tags: list[str] | None = None, outputs: list | None = None):
    cell = nbformat.v4.new_code_cell(source)
    if tags:
        cell.metadata["tags"] = tags
    if outputs:
        cell.outputs = outputs
    return cell


def test_notebook_code_cells_only_in_order(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "nb.ipynb", [
        nbformat.v4.new_markdown_cell("# Title\n```python\nx = 'markdown code never runs'\n```"),
        code("import math"),
        nbformat.v4.new_raw_cell("raw = 1"),
        code("x = math.pi"),
    ])
    sub = read_submission(path)
    assert sub.kind == "notebook"
    assert [c.source for c in sub.cells] == ["import math", "x = math.pi"]
    assert [c.index for c in sub.cells] == [1, 3]  # positions in the notebook, for messages


def test_notebook_outputs_are_ignored(tmp_path: Path) -> None:
    fake = nbformat.v4.new_output("stream", name="stdout", text="✅ passed: Total 100 / 100\n")
    result = nbformat.v4.new_output("execute_result", data={"text/plain": "100"}, execution_count=1)
    path = write_notebook(tmp_path / "nb.ipynb", [code("y = 1", outputs=[fake, result])])
    sub = read_submission(path)
    assert sub.cells[0].source == "y = 1"
    assert "passed" not in sub.model_dump_json()


def test_notebook_selfcheck_cells_are_skipped(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "nb.ipynb", [
        code("a = 1"),
        code('from grader.selfcheck import check\ncheck("tax")', tags=["selfcheck"]),
        code("b = 2", tags=["other", "tags"]),
    ])
    assert [c.source for c in read_submission(path).cells] == ["a = 1", "b = 2"]


def test_notebook_blank_cells_are_skipped(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "nb.ipynb", [code(""), code("   \n\n"), code("z = 3")])
    assert [c.source for c in read_submission(path).cells] == ["z = 3"]


def test_notebook_assignment_hint(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "anything.ipynb", [code("pass")], {"grader": {"assignment": "ch2-jit"}})
    assert read_submission(path).assignment_hint == "ch2-jit"
    bare = write_notebook(tmp_path / "bare.ipynb", [code("pass")])
    assert read_submission(bare).assignment_hint is None


def test_notebook_sha256_is_of_the_file_bytes(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "nb.ipynb", [code("pass")])
    assert read_submission(path).sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_template_and_solution_notebooks_read(repo_root: Path) -> None:
    template = read_submission(repo_root / "student_template" / "ch2-jit.ipynb")
    solution = read_submission(repo_root / "solutions" / "ch2-jit.ipynb")
    assert template.assignment_hint == solution.assignment_hint == "ch2-jit"
    assert not any("selfcheck" in c.source for c in template.cells + solution.cells)
    assert len(solution.cells) == 5  # setup + one answer cell per exercise


# ----------------------------------------------------------------------------- modules


def write_module(tmp_path: Path, text: str, name: str = "sub.py") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_module_split_at_top_level_statements(tmp_path: Path) -> None:
    text = "import math\nx = 1\n\ndef f(a):\n    return a + x\n\nprint(f(1))\n"
    sub = read_submission(write_module(tmp_path, text))
    assert sub.kind == "module"
    assert [c.source.strip() for c in sub.cells] == ["import math", "x = 1", "def f(a):\n    return a + x",
                                                     "print(f(1))"]
    assert [c.first_line for c in sub.cells] == [1, 2, 4, 7]
    assert "".join(c.source for c in sub.cells) == text


def test_module_decorators_stay_with_their_function(tmp_path: Path) -> None:
    text = ("import jax\n"
            "from functools import partial\n"
            "\n"
            "@partial(\n"
            "    jax.jit,\n"
            "    static_argnames=['mode'],\n"
            ")\n"
            "@jax.named_call\n"
            "def f(x, mode='a'):\n"
            "    return x\n"
            "\n"
            "y = f(1.0)\n")
    sub = read_submission(write_module(tmp_path, text))
    sources = [c.source.strip() for c in sub.cells]
    assert sources[2].startswith("@partial(\n    jax.jit,") and sources[2].endswith("return x")
    assert "@jax.named_call\ndef f" in sources[2]
    assert sub.cells[2].first_line == 4
    assert sources[3] == "y = f(1.0)"


def test_module_split_at_cell_markers(tmp_path: Path) -> None:
    text = ("# %% [setup]\nimport math\nx = 1\n"
            "# %% [answer]\ny = 2\nz = 3\n")
    sub = read_submission(write_module(tmp_path, text))
    assert [c.source for c in sub.cells] == ["# %% [setup]\nimport math\nx = 1\n", "# %% [answer]\ny = 2\nz = 3\n"]
    assert [c.first_line for c in sub.cells] == [1, 4]


def test_module_text_before_the_first_marker_is_a_cell(tmp_path: Path) -> None:
    text = "import math\n# %%\nx = math.pi\n"
    sub = read_submission(write_module(tmp_path, text))
    assert [c.source for c in sub.cells] == ["import math\n", "# %%\nx = math.pi\n"]


def test_reference_module_has_one_cell_per_section(repo_root: Path) -> None:
    sub = read_submission(repo_root / "solutions" / "ch2-jit.py")
    markers = [c.source.splitlines()[0] for c in sub.cells if c.source.startswith("# %%")]
    assert markers == ["# %% [setup]", "# %% [tax]", "# %% [newton]", "# %% [detective]", "# %% [training]"]


def test_module_with_a_syntax_error_still_reads(tmp_path: Path) -> None:
    text = "x = 1\ndef broken(:\n    pass\n"
    sub = read_submission(write_module(tmp_path, text))
    assert "".join(c.source for c in sub.cells) == text  # the kernel reports the error where it is


def test_module_with_a_syntax_error_in_one_marked_cell_keeps_the_others(tmp_path: Path) -> None:
    text = "# %%\nx = 1\n# %%\ndef broken(:\n# %%\ny = 2\n"
    sub = read_submission(write_module(tmp_path, text))
    assert len(sub.cells) == 3 and sub.cells[2].source == "# %%\ny = 2\n"


def test_empty_module(tmp_path: Path) -> None:
    assert read_submission(write_module(tmp_path, "")).cells == []


# ----------------------------------------------------------------------------- unreadable


def unreadable(path: Path) -> SubmissionUnreadable:
    with pytest.raises(SubmissionUnreadable) as info:
        read_submission(path)
    err = info.value
    assert err.path == str(path)
    assert str(err) == f"{path}: {err.reason}"
    assert "\n" not in str(err) and "Traceback" not in str(err)
    assert err.exit_code == 2
    return err


def test_missing_file(tmp_path: Path) -> None:
    assert unreadable(tmp_path / "nope.ipynb").reason == "no such file"
    assert unreadable(tmp_path / "nope.py").reason == "no such file"


def test_directory(tmp_path: Path) -> None:
    folder = tmp_path / "looks_like.ipynb"
    folder.mkdir()
    assert "directory" in unreadable(folder).reason


def test_wrong_suffix(tmp_path: Path) -> None:
    path = tmp_path / "answers.txt"
    path.write_text("x = 1\n")
    assert unreadable(path).reason == "expected a .ipynb notebook or a .py module"


def test_invalid_json_notebook(tmp_path: Path) -> None:
    path = tmp_path / "broken.ipynb"
    path.write_text('{"cells": [', encoding="utf-8")
    assert unreadable(path).reason.startswith("not a valid Jupyter notebook")


def test_json_that_is_not_a_notebook(tmp_path: Path) -> None:
    path = tmp_path / "list.ipynb"
    path.write_text(json.dumps([1, 2, 3]), encoding="utf-8")
    assert unreadable(path).reason.startswith("not a valid Jupyter notebook")


@pytest.mark.parametrize("suffix", [".py", ".ipynb"])
def test_non_utf8_bytes(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"latin1{suffix}"
    path.write_bytes("x = 'café'\n".encode("latin-1"))
    assert unreadable(path).reason == "is not UTF-8 text"


def test_nul_bytes_in_a_module(tmp_path: Path) -> None:
    path = tmp_path / "binary.py"
    path.write_bytes(b"x = 1\n\x00\x00\x00")
    assert "NUL" in unreadable(path).reason


def test_unreadable_survives_pickling(tmp_path: Path) -> None:
    import pickle

    err = unreadable(tmp_path / "nope.py")
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.path, copy.reason, str(copy)) == (err.path, err.reason, str(err))
