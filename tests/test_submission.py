"""Reading submissions: which code runs, in which cells, and which files are refused (and why)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import nbformat
import pytest

from grader.errors import SubmissionUnreadable
from grader.submission import claim_text, read_submission

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


@pytest.mark.parametrize(("body", "says"), [
    ("cut", "the file ends in the middle of its JSON (cut short when it was saved or copied?)"),
    ('{"cells": [1,, 2]}', "its JSON is broken at line 1, column 14"),
    ("", "the file is empty"),
    ("null", "its JSON is null, where a notebook is an object holding its cells"),
])
def test_a_broken_notebook_is_told_in_words_never_by_the_parser_s_class(repo_root: Path, tmp_path: Path,
                                                                         body: str, says: str) -> None:
    """Before: "not a valid Jupyter notebook (JSONDecodeError)" for a notebook cut short, "(a JSON
    NoneType)" for `null`."""
    text = (repo_root / "solutions" / "ch2-jit.ipynb").read_text(encoding="utf-8")
    path = tmp_path / "submit.ipynb"
    for cut in ((len(text) // k for k in (2, 3, 5, 7)) if body == "cut" else (None,)):
        path.write_text(text[:cut] if cut else body, encoding="utf-8")
        reason = unreadable(path).reason
        assert reason.startswith("not a valid Jupyter notebook") and says in reason, reason
        assert "Error" not in reason and "NoneType" not in reason


def test_json_that_is_not_a_notebook(tmp_path: Path) -> None:
    path = tmp_path / "list.ipynb"
    path.write_text(json.dumps([1, 2, 3]), encoding="utf-8")
    assert unreadable(path).reason.startswith("not a valid Jupyter notebook")


@pytest.mark.parametrize("notebook", ["solutions/ch2-jit.ipynb", "student_template/ch2-jit.ipynb",
                                      "solutions/ch2-practice.ipynb"])
def test_a_v4_notebook_s_cells_are_nbformat_s(repo_root: Path, notebook: str) -> None:
    """v4 cells are read from the JSON itself (no nbformat, no schema validator): the same cells."""
    nb = nbformat.read(repo_root / notebook, as_version=4)
    expected = [c.source for c in nb.cells if c.cell_type == "code" and c.source.strip()
                and "selfcheck" not in c.metadata.get("tags", [])]
    assert [c.source for c in read_submission(repo_root / notebook).cells] == expected


@pytest.mark.parametrize(("cells", "read"), [
    ([1, "x", None, [], {"cell_type": "code", "source": "a = 1"}], ["a = 1"]),  # what is not a cell: skipped
    ([{"cell_type": ["code"], "source": "a = 1"}], []),
    ([{"cell_type": "code", "source": "a = 1", "metadata": "x"}], ["a = 1"]),
    ([{"cell_type": "code", "source": "a = 1", "metadata": {"tags": "selfcheck"}}], ["a = 1"]),
    ([{"cell_type": "code", "source": 5}], None),
    ([{"cell_type": "code", "source": ["a = 1", 2]}], None),
    ({"a": 1}, None),
    ("text", None),
])
def test_a_v4_notebook_of_strange_shapes_is_read_or_refused_in_one_sentence(tmp_path: Path, cells: object,
                                                                            read: list[str] | None) -> None:
    """Read from its JSON without nbformat, a v4 notebook's every field is the student's: odd
    shapes are skipped or refused as that submission's error, never the grader's crash."""
    path = tmp_path / "odd.ipynb"
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}), encoding="utf-8")
    if read is None:
        assert unreadable(path).reason.startswith("not a valid Jupyter notebook")
    else:
        assert [c.source for c in read_submission(path).cells] == read


def test_a_v3_notebook_is_converted(tmp_path: Path) -> None:
    path = tmp_path / "old.ipynb"
    v3 = {"nbformat": 3, "nbformat_minor": 0, "metadata": {"name": ""},
          "worksheets": [{"cells": [{"cell_type": "code", "input": ["x = 1\n", "y = 2"], "language": "python",
                                     "metadata": {}, "outputs": [], "collapsed": False}], "metadata": {}}]}
    path.write_text(json.dumps(v3), encoding="utf-8")
    assert [c.source for c in read_submission(path).cells] == ["x = 1\ny = 2"]


@pytest.mark.parametrize("suffix", [".py", ".ipynb"])
def test_non_utf8_bytes(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"latin1{suffix}"
    path.write_bytes("x = 'café'\n".encode("latin-1"))
    assert unreadable(path).reason == "is not UTF-8 text"


@pytest.mark.parametrize("header, body, encoding", [
    ("# -*- coding: latin-1 -*-\n", "x = 'café'\n", "latin-1"),
    ("#!/usr/bin/env python\n# vim: set fileencoding=cp1252 :\n", "x = 'café €'\n", "cp1252"),
    ("\ufeff# coding: utf-8\n", "x = 'café'\n", "utf-8"),
], ids=["latin-1", "cp1252-second-line", "bom-and-utf-8"])
def test_a_module_is_read_in_the_encoding_its_coding_line_declares(tmp_path: Path, header: str, body: str,
                                                                  encoding: str) -> None:
    path = tmp_path / "coded.py"
    path.write_bytes((header + body).encode(encoding))
    source = "".join(c.source for c in read_submission(path).cells)
    assert source == header.lstrip("\ufeff") + body  # as tokenize.open reads it, the byte-order mark dropped


@pytest.mark.parametrize("data, reason", [
    (b"# coding: klingon\nx = 1\n", "unknown encoding: klingon"),
    (b"\xef\xbb\xbf# coding: latin-1\nx = 1\n", "byte-order mark, and its coding line declares another"),
    (b"# coding: rot13\nx = 1\n", "declares the encoding 'rot13', which Python cannot read"),
    (b"# coding: ascii\nx = '\xe9'\n", "is not ascii text, the encoding its coding line declares"),
], ids=["unknown", "bom-beside-another", "not-a-text-encoding", "bytes-outside-it"])
def test_an_encoding_python_cannot_read_is_one_sentence(tmp_path: Path, data: bytes, reason: str) -> None:
    path = tmp_path / "coded.py"
    path.write_bytes(data)
    assert reason in unreadable(path).reason


def test_nul_bytes_in_a_module(tmp_path: Path) -> None:
    path = tmp_path / "binary.py"
    path.write_bytes(b"x = 1\n\x00\x00\x00")
    assert "NUL" in unreadable(path).reason


def test_unreadable_survives_pickling(tmp_path: Path) -> None:
    import pickle

    err = unreadable(tmp_path / "nope.py")
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.path, copy.reason, str(copy)) == (err.path, err.reason, str(err))


# ----------------------------------------------------------------------------- file quirks


BOM = "\ufeff"


def compiles(source: str) -> bool:
    try:
        compile(source, "<cell>", "exec")
        return True
    except SyntaxError:
        return False


def test_bom_and_crlf_module_reads_as_python_reads_it(tmp_path: Path, reference_source: str) -> None:
    path = tmp_path / "sub.py"
    path.write_bytes((BOM + reference_source).replace("\n", "\r\n").encode("utf-8"))
    sub = read_submission(path)
    assert "".join(c.source for c in sub.cells) == reference_source
    assert all("\r" not in c.source and BOM not in c.source and compiles(c.source) for c in sub.cells)
    assert [c.source.splitlines()[0] for c in sub.cells if c.source.startswith("# %%")] == [
        "# %% [setup]", "# %% [tax]", "# %% [newton]", "# %% [detective]", "# %% [training]"]
    assert sub.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()  # of the bytes as they are


def test_lone_cr_line_endings_are_lines(tmp_path: Path) -> None:
    path = tmp_path / "mac.py"
    path.write_bytes(b"import math\rx = math.pi\r\rdef f():\r    return x\r")
    sub = read_submission(path)
    assert [c.source for c in sub.cells] == ["import math\n", "x = math.pi\n\n", "def f():\n    return x\n"]
    assert [c.first_line for c in sub.cells] == [1, 2, 4]


def test_lines_are_split_only_where_python_splits_them(tmp_path: Path) -> None:
    """Form feeds, U+2028 and the other characters str.splitlines splits at are not line ends."""
    text = 's = "a\u2028b\x0cc\x1cd\x85e"\n\x0c\nt = 1\nu = """\u2029"""\n'
    sub = read_submission(write_module(tmp_path, text))
    assert [c.source for c in sub.cells] == ['s = "a\u2028b\x0cc\x1cd\x85e"\n\x0c\n', "t = 1\n",
                                             'u = """\u2029"""\n']
    assert all(compiles(c.source) for c in sub.cells)


def test_compound_statements_stay_whole(tmp_path: Path) -> None:
    text = ("if x:\n    a = 1\nelif y:\n    a = 2\nelse:\n    a = 3\n"
            "try:\n    b = 1\nexcept Exception:\n    b = 2\nfinally:\n    c = 3\n"
            "for i in []: pass\nelse: d = 4\n"
            "(\n); e = 5\n"
            "class K:\n    pass\n")
    sub = read_submission(write_module(tmp_path, text))
    assert [c.first_line for c in sub.cells] == [1, 7, 13, 15, 17]
    assert all(compiles(c.source) for c in sub.cells)


def test_notebook_with_a_bom_reads(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "nb.ipynb", [code("a = 1\r\nb = 2")],
                          {"grader": {"assignment": "ch2-jit"}})
    path.write_bytes(BOM.encode() + path.read_bytes())
    sub = read_submission(path)
    assert [c.source for c in sub.cells] == ["a = 1\nb = 2"] and sub.assignment_hint == "ch2-jit"


@pytest.mark.parametrize("metadata", [{"grader": "ch2-jit"}, {"grader": ["ch2-jit"]}, {"grader": None},
                                      {"grader": {"assignment": None}}])
def test_odd_grader_metadata_names_nothing(tmp_path: Path, metadata: dict) -> None:
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": metadata, "cells": [
        {"cell_type": "code", "id": "a", "metadata": {"tags": 5}, "source": ["x = 1\n", "y = 2"],
         "outputs": [], "execution_count": None},
        {"cell_type": "code", "id": "b", "metadata": {"tags": "selfcheck-not-a-list"}, "source": "z = 3",
         "outputs": [], "execution_count": None}]}), encoding="utf-8")
    sub = read_submission(path)
    assert sub.assignment_hint is None and [c.source for c in sub.cells] == ["x = 1\ny = 2", "z = 3"]


# ----------------------------------------------------------------------------- bounds


@pytest.mark.kernel
def test_a_module_of_300000_statements_runs_as_at_most_max_cells_cells(tmp_path: Path) -> None:
    from grader.submission import MAX_CELLS

    text = "".join(f"x{i} = {i}\n" for i in range(300_000))
    sub = read_submission(write_module(tmp_path, text))
    assert len(sub.cells) == MAX_CELLS == 500
    assert "".join(c.source for c in sub.cells) == text
    assert [c.first_line for c in sub.cells] == list(range(1, 300_000, 600))  # 600 statements each
    assert compiles(sub.cells[0].source) and compiles(sub.cells[-1].source)
    assert len(sub.model_dump_json()) < 6_000_000  # the source itself, no more


def test_many_marked_sections_are_grouped_too(tmp_path: Path) -> None:
    text = "".join(f"# %% [s{i}]\nx = {i}\n" for i in range(1200))
    sub = read_submission(write_module(tmp_path, text))
    assert len(sub.cells) == 400 and "".join(c.source for c in sub.cells) == text


def test_a_notebook_of_100000_cells_is_refused_in_one_sentence(tmp_path: Path) -> None:
    from grader.submission import MAX_NOTEBOOK_CELLS

    path = tmp_path / "huge.ipynb"
    cell = {"cell_type": "code", "metadata": {}, "source": "x = 1", "outputs": [], "execution_count": None}
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 4, "metadata": {},
                                "cells": [cell] * 100_000}), encoding="utf-8")
    assert MAX_NOTEBOOK_CELLS == 2000
    assert unreadable(path).reason == "has 100000 cells, more than the 2000 a notebook may have"


def test_too_much_code_is_refused(tmp_path: Path) -> None:
    from grader.submission import MAX_SOURCE_CHARS

    module = write_module(tmp_path, "#" * (MAX_SOURCE_CHARS + 1) + "\n")
    assert unreadable(module).reason == (f"has {MAX_SOURCE_CHARS + 2} characters of code, "
                                         f"more than the {MAX_SOURCE_CHARS} a submission may run")
    chunk = "x = 1  # " + "#" * 2_000_000
    notebook = write_notebook(tmp_path / "nb.ipynb", [code(chunk), code(chunk), code(chunk)])
    assert unreadable(notebook).reason.startswith(f"has {3 * len(chunk)} characters of code")


# ------------------------------------------------------------------------ the assignment is the instructor's


from grader import assignment as assignments  # noqa: E402
from grader.errors import WrongAssignment  # noqa: E402
from grader.options import GradeOptions  # noqa: E402
from grader.pipeline import choose_assignment, grade_one  # noqa: E402


def evil_assignment(folder: Path, repo_root: Path, marker: Path) -> Path:
    """A complete assignment folder (the ch2-jit spec) whose checks.py writes `marker` if executed."""
    folder.mkdir(parents=True)
    for name in ("assignment.toml", "references.py"):
        (folder / name).write_bytes((repo_root / "assignments" / "ch2-jit" / name).read_bytes())
    (folder / "checks.py").write_text(f"open({str(marker)!r}, 'w').write('executed')\n"
                                      + (repo_root / "assignments" / "ch2-jit" / "checks.py").read_text())
    return folder


def no_kernel():
    raise AssertionError("no kernel may start for a submission that is not gradable")


def test_a_notebook_naming_a_folder_runs_nothing_of_it(tmp_path: Path, repo_root: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    subs = tmp_path / "subs"
    marker = tmp_path / "EXECUTED"
    evil = evil_assignment(subs / "evil", repo_root, marker)
    monkeypatch.chdir(subs)
    for claim in (str(evil), "evil", "./evil", "../subs/evil", "../../evil", "..", "/",
                  "ch2-jit/../ch2-practice", "ch2-jit/", "CH2-JIT"):
        path = write_notebook(subs / "mallory.ipynb", [code("pass")], {"grader": {"assignment": claim}})
        sub = read_submission(path)
        with pytest.raises(WrongAssignment) as info:
            assignments.load(choose_assignment(sub, GradeOptions()))
        assert str(info.value) == \
            f"{path}: this notebook says it is for {claim_text(claim)}, which is not an assignment here"
        with pytest.raises(WrongAssignment):
            grade_one(path, GradeOptions(assignment="ch2-jit", sandbox=False), kernel_factory=no_kernel)
    assert not marker.exists()


def test_an_assignment_id_is_never_a_folder_of_the_working_directory(tmp_path: Path, repo_root: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "EXECUTED"
    evil_assignment(tmp_path / "subs" / "ch2-jit", repo_root, marker)  # a student folder named like the id
    monkeypatch.chdir(tmp_path / "subs")
    path = write_notebook(tmp_path / "subs" / "nb.ipynb", [code("pass")],
                          {"grader": {"assignment": "ch2-jit"}})
    loaded = assignments.load(choose_assignment(read_submission(path), GradeOptions()))
    assert loaded.folder == assignments.assignments_dir() / "ch2-jit"
    assert assignments.load("ch2-jit").folder == assignments.assignments_dir() / "ch2-jit"  # -a ch2-jit too
    assert not marker.exists()


@pytest.mark.parametrize("claim", [42, True, 1.5, ["ch2-jit"], {"id": "ch2-jit"}, [[[[[["deep"]]]]]],
                                   "a" * 100_000, "ch2-jit\x1b[2J\u202e", "x" * 79 + "\n"])
def test_a_claim_that_is_not_an_id_is_shown_safely(tmp_path: Path, claim: object) -> None:
    path = write_notebook(tmp_path / "nb.ipynb", [code("pass")], {"grader": {"assignment": claim}})
    with pytest.raises(WrongAssignment) as info:
        choose_assignment(read_submission(path), GradeOptions())
    message = str(info.value)
    assert message.startswith(f"{path}: this notebook says it is for ")
    assert message.endswith(", which is not an assignment here")
    assert len(message) < len(str(path)) + 200
    assert message.isprintable() and "\x1b" not in message and "\u202e" not in message


def test_with_a_the_notebook_must_name_that_assignment(tmp_path: Path, repo_root: Path) -> None:
    practice = write_notebook(tmp_path / "p.ipynb", [code("pass")],
                              {"grader": {"assignment": "ch2-practice"}})
    with pytest.raises(WrongAssignment) as info:
        choose_assignment(read_submission(practice), GradeOptions(assignment="ch2-jit"))
    assert info.value.reason == "this notebook says it is for ch2-practice, but it is being graded as ch2-jit"
    assert (info.value.claimed, info.value.expected) == ("ch2-practice", "ch2-jit")
    jit = write_notebook(tmp_path / "j.ipynb", [code("pass")], {"grader": {"assignment": "ch2-jit"}})
    folder = str(repo_root / "assignments" / "ch2-jit")  # -a may be a folder: the instructor's
    assert choose_assignment(read_submission(jit), GradeOptions(assignment=folder)) == folder
    module = write_module(tmp_path, "x = 1\n")
    assert choose_assignment(read_submission(module), GradeOptions(assignment=folder)) == folder


def test_wrong_assignment_is_a_submission_error_that_pickles() -> None:
    import pickle

    err = WrongAssignment("nb.ipynb", "ch2-practice", "ch2-jit")
    assert isinstance(err, SubmissionUnreadable) and err.exit_code == 2
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.path, copy.claimed, copy.expected, str(copy)) == \
        (err.path, err.claimed, err.expected, str(err))
    assert str(err) == "nb.ipynb: this notebook says it is for ch2-practice, but this batch grades ch2-jit"


def test_cli_one_notebook_naming_a_path_exits_2_with_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    write_notebook(tmp_path / "mallory.ipynb", [code("pass")], {"grader": {"assignment": "../../evil"}})
    done = subprocess.run([sys.executable, "-m", "grader", "mallory.ipynb", "--no-sandbox"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("grade: mallory.ipynb: this notebook says it is for '../../evil', "
                           "which is not an assignment here\n")


# ----------------------------------------------------------------------------- end to end


# Graded on the warm worker (tests/warm_grading.py), as the tests of what a submission's code does:
# what is read here is the file, which grade_one reads either way; `grade FILE`'s fresh path is the
# CLI and kernel tests'.
from warm_grading import grade_warm  # noqa: E402


@pytest.mark.kernel
def test_bom_and_crlf_reference_module_scores_100(tmp_path: Path, reference_source: str) -> None:
    path = tmp_path / "ch2-jit.py"
    path.write_bytes((BOM + reference_source).replace("\n", "\r\n").encode("utf-8"))
    report = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=3))
    assert (report.score, report.max_score, report.cell_problems) == (100, 100, [])


@pytest.mark.kernel
def test_a_latin_1_reference_module_scores_100(tmp_path: Path, reference_source: str) -> None:
    path = tmp_path / "ch2-jit.py"
    path.write_bytes(("# -*- coding: latin-1 -*-\n# Exercices corrigés, été\n" + reference_source).encode("latin-1"))
    report = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=3))
    assert (report.score, report.max_score, report.cell_problems) == (100, 100, [])


@pytest.mark.kernel
def test_30000_raising_statements_give_a_small_report(tmp_path: Path, reference_source: str) -> None:
    import re

    # 60 times MAX_CELLS (500) statements: merged into 500 cells of about 60 each, every one raising,
    # as 300 000 would be (600 each); a tenth of the kernel's parsing
    reference = re.sub(r"^# %%.*\n", "", reference_source, flags=re.M)  # top-level statements
    path = write_module(tmp_path, reference + "\n" + "1 / 0\n" * 30_000)
    report = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=3))
    assert report.score == 100  # the reference's statements come first, in the first group
    assert 0 < len(report.cell_problems) <= 500
    assert {p.status for p in report.cell_problems} <= {"error", "skipped"}
    assert len(report.model_dump_json(indent=2)) < 1_000_000
