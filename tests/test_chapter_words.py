"""Messages in the chapter's words (issue 31, part 4), the same from the self-check and from `grade`.

Each submission below is the reference with one mistake a student makes, graded both ways: by
the notebook's self-check (`grader.selfcheck.check`, on the module's namespace) and by `grade`.
Every text a student reads (the terminal view, the self-check's output, the checks' messages and
the cell notes) names the cause in the chapter's terms and holds none of: JAX's class names for
a traced value (`DynamicJaxprTracer`, `JitTracer`) or the grader's placeholder for one
(`ShapeDtypeStruct`), IPython's file name for a cell ("4245309719.py, line 7"), a literal `\\n`,
or a check's id ("newton.hidden", "call_1").
"""

from __future__ import annotations

import json
import re
import runpy
from pathlib import Path

import pytest
from warm_grading import grade_warm

from grader import GradeOptions
from grader import assignment as assignments
from grader.checks.base import CheckOutcome
from grader.judging.attribution import Failure, in_cells, live_notebook_cells, one_message_per_cause
from grader.kernel.inside import runtime
from grader.views.terminal import summary
from grader.report import Report
from grader.selfcheck import check
from grader.submission import SourceCell, read_submission

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "solutions" / "ch2-jit.py"
SEED = 5

TRACER_NAMES = re.compile(r"\b\w*Tracer\b|ShapeDtypeStruct|jax\._src")  # not TracerBoolConversionError
CELL_FILES = re.compile(r"\b\d{5,}\.py\b|ipykernel_\d+|<ipython-input-")


def check_ids() -> set[str]:
    """Every check's id as the report writes it, and the bare ids that are not plain words."""
    spec = assignments.load("ch2-jit").spec
    ids = {f"{e.id}.{c.id}" for e in spec.exercises for c in e.checks}
    return ids | {c.id for e in spec.exercises for c in e.checks if "_" in c.id}


def assert_in_the_chapter_s_words(text: str) -> None:
    assert not TRACER_NAMES.search(text), TRACER_NAMES.search(text)
    assert not CELL_FILES.search(text), CELL_FILES.search(text)
    assert "\\n" not in text, text
    named = [i for i in check_ids() if re.search(rf"(?<![\w.]){re.escape(i)}(?![\w])", text)]
    assert named == [], named


def module(tmp_path: Path, *changes: tuple[str, str], name: str = "submit") -> Path:
    """The reference module with each (old, new) replacement made (each must apply)."""
    text = REFERENCE.read_text(encoding="utf-8")
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    return path


def cells_run(path: Path) -> dict:
    """The namespace the notebook's kernel holds after Run All, as the self-check sees it: each
    cell compiled under the name IPython gives it and its lines kept where tracebacks find them;
    a cell that raises defines nothing after its error, and the cells after it still run."""
    import linecache

    namespace: dict = {"__name__": "__main__"}
    for cell in read_submission(path).cells:
        name = f"<ipython-input-{cell.number or cell.index + 1}-0>"
        linecache.cache[name] = (len(cell.source), None, cell.source.splitlines(keepends=True), name)
        try:
            exec(compile(cell.source, name, "exec"), namespace)
        except Exception:  # noqa: BLE001 - a student's cell that raises, as in a notebook
            pass
    return namespace


def self_check(namespace: dict, exercise: str, capsys: pytest.CaptureFixture) -> str:
    check(exercise, "ch2-jit", namespace=namespace, seed=SEED)
    return capsys.readouterr().out


def grade(path: Path, *exercises: str) -> tuple[Report, str]:
    """Graded whole, or on `exercises` alone: those whose mistake a test reads (the others are the
    reference's, and the cells all still run)."""
    report = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=SEED, exercises=exercises or None))
    return report, summary(report, width=100)


def student_texts(report: Report, terminal: str) -> list[str]:
    return [terminal, *(c.message or "" for e in report.exercises for c in e.checks),
            *(p.message for p in report.cell_problems)]


def by_id(report: Report) -> dict:
    return {c.id: c for e in report.exercises for c in e.checks}


# ----------------------------------------------------------------------------- 1. tracer errors

WRAPPED_STATIC = {
    # a plain function around a jax.jit that marks num_steps (tol) static: tracing it passes a traced value
    "training": (("@jax.jit\ndef train_fori(w, b, x, y, lr, num_steps):",
                  '@partial(jax.jit, static_argnames="num_steps")\n'
                  "def _train_fori(w, b, x, y, lr, num_steps):"),
                 ("    return lax.fori_loop(0, num_steps, body, (w, b))",
                  "    return lax.fori_loop(0, num_steps, body, (w, b))\n\n\n"
                  "def train_fori(w, b, x, y, lr, num_steps):\n"
                  "    return _train_fori(w, b, x, y, lr, num_steps)")),
    "newton": (("@jax.jit\ndef newton_sqrt(a, tol):",
                '@partial(jax.jit, static_argnames="tol")\ndef _newton(a, tol):'),
               ("    return x, k\n",
                "    return x, k\n\n\ndef newton_sqrt(a, tol):\n    return _newton(a, tol)\n")),
}
CALL_LINE = {"training": "`return _train_fori(w, b, x, y, lr, num_steps)`",
             "newton": "`return _newton(a, tol)`"}
TRACED_CHECK = {"training": "training.fori_uses_while", "newton": "newton.compiles_once"}


@pytest.mark.kernel
@pytest.mark.parametrize("exercise", ["training", "newton"])
def test_a_traced_value_given_to_a_static_argument_is_told_as_one(tmp_path: Path, capsys,
                                                                   exercise: str) -> None:
    """Before: "ValueError: Non-hashable static arguments are not supported. An error occurred while
    trying to hash an object of type <class '...DynamicJaxprTracer'>, JitTracer(~int32[]). The
    error was:" (cut at its colon). After: the static argument, the traced value, the line."""
    path = module(tmp_path, *WRAPPED_STATIC[exercise])
    report, terminal = grade(path, exercise)
    said = by_id(report)[TRACED_CHECK[exercise]].message or ""
    out = self_check(cells_run(path), exercise, capsys)
    for text in (said, out):
        assert "passes a traced value to an argument that a jax.jit function it calls marks static" in text
        assert "(static_argnums / static_argnames)" in text and CALL_LINE[exercise] in text, text
        assert not text.rstrip().endswith(":") and "The error was" not in text
    for text in [out, *student_texts(report, terminal)]:
        assert_in_the_chapter_s_words(text)


def test_jax_s_words_for_a_traced_value_become_the_chapter_s() -> None:
    """What the probe reports of an exception: never a tracer's class or the grader's placeholder,
    never a sentence stopped at its colon."""
    placeholder = runtime._raised(TypeError("'>=' not supported between instances of "
                                            "'DynamicJaxprTracer' and 'ShapeDtypeStruct'"))
    assert placeholder["ename"] == "StaticArgumentError"
    assert placeholder["evalue"].startswith("marks static (static_argnums / static_argnames) an argument")
    operand = runtime._raised(TypeError("unsupported operand type(s) for +: 'DynamicJaxprTracer' and 'str'"))
    assert operand == {"ename": "TypeError",
                       "evalue": "unsupported operand type(s) for +: a traced value and 'str'"}
    older = runtime._raised(TypeError("bad Traced<ShapedArray(float32[])>with<DynamicJaxprTrace(level=1/0)>"))
    assert older["evalue"] == "bad a traced value"
    colon = runtime._raised(AssertionError("tax_switch is wrong:\n  expected [0.]\n  got [1.]\nmore"))
    assert colon["evalue"] == "tax_switch is wrong: expected [0.] got [1.]"
    for raised in (placeholder, operand, older, colon):
        assert not TRACER_NAMES.search(raised["evalue"]) and "\n" not in raised["evalue"]


def test_a_static_argument_jax_itself_refuses_is_told_in_the_chapter_s_words() -> None:
    """JAX's own exception, raised in this process: a jitted function with a static `n` called from
    inside another jit."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    static = jax.jit(lambda x, n: lax.fori_loop(0, n, lambda i, y: y + x, x), static_argnums=1)
    with pytest.raises(ValueError) as caught:
        jax.jit(lambda x, n: static(x, n))(jnp.float32(1.0), 3)
    assert "DynamicJaxprTracer" in str(caught.value) or "Tracer" in str(caught.value)  # what JAX says
    raised = runtime._raised(caught.value)
    assert raised["ename"] == "StaticArgumentError" and "traced value" in raised["evalue"]
    assert not TRACER_NAMES.search(raised["evalue"])


# ----------------------------------------------------------------------------- 2. one cause, its message

GLOBAL_LR = (("@jax.jit\ndef step(", "LR = 0.05\n\n\n@jax.jit\ndef step("),
             ("        return step(wb[0], wb[1], x, y, lr)", "        return step(wb[0], wb[1], x, y, LR)"))


@pytest.mark.kernel
def test_a_global_lr_is_told_by_the_check_that_names_it(tmp_path: Path, capsys) -> None:
    """Before: `grade` led with fori_agrees ("apply step exactly num_steps times") and the
    self-check with fori_compiles_once ("should not recompile"); fori_lr_zero's own sentence ("use
    the lr argument, not a global") was "same wrong values as training.fori_agrees". After: the
    check that names the cause leads, the others point to it by its title, both ways."""
    path = module(tmp_path, *GLOBAL_LR)
    report, terminal = grade(path, "training")
    fori = [c for c in by_id(report).values()
            if c.id.startswith("training.") and "train_fori" in c.title and c.status != "passed"]
    leads = [c for c in fori if c.reason != "same_cause"]
    assert len(leads) == 1, [(c.id, c.message) for c in fori]
    (lead,) = leads
    assert "global" in (lead.message or ""), lead.message
    for follower in fori:
        if follower is not lead:
            assert follower.same_as == lead.id and f"“{lead.title}”" in (follower.message or "")
    compiles = by_id(report)["training.fori_compiles_once"]
    assert "recompile" not in (compiles.message or "") and compiles.same_as == lead.id
    out = self_check(cells_run(path), "training", capsys)
    assert "global" in out and "should not recompile" not in out, out
    assert lead.hidden or f"{lead.title} ({lead.max_score:g} pts): " in out  # the same lead, when visible
    for text in [out, *student_texts(report, terminal)]:
        assert_in_the_chapter_s_words(text)


def _failure(check_id: str, outcome: CheckOutcome) -> Failure:
    exercise, cid = check_id.split(".")
    spec = next(c for e in assignments.load("ch2-jit").spec.exercises if e.id == exercise for c in e.checks
                if c.id == cid)
    return Failure(check_id, spec, outcome)


def test_the_most_specific_failed_check_leads_and_a_compile_check_never_blames_recompiling() -> None:
    wrong = CheckOutcome(status="failed", message="its own sentence", cause="values")
    agrees, lr_zero, compiles = (_failure(i, wrong) for i in ("training.fori_agrees", "training.fori_lr_zero",
                                                               "training.fori_compiles_once"))
    out = one_message_per_cause([agrees, lr_zero, None, compiles])
    assert out[1] is wrong and out[2] is None  # fori_lr_zero verifies "arguments" alone: it tells the cause
    assert out[0].same_as == out[3].same_as == "training.fori_lr_zero"
    assert "“train_fori with lr = 0 changes nothing”" in (out[0].message or "")
    alone = one_message_per_cause([compiles])[0]  # the self-check: no value check of train_fori judged
    assert alone.message.startswith("`train_fori` computes the right values for too few of this check's")
    assert "recompile" not in alone.message and alone.counterexample == "its own sentence"


# ----------------------------------------------------------------------------- 3. cells as students see them

NOTEBOOK = ROOT / "solutions" / "ch2-jit.ipynb"


def notebook(tmp_path: Path, old: str, new: str) -> Path:
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    changed = 0
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and old in source:
            cell["source"], changed = source.replace(old, new), changed + 1
    assert changed == 1
    path = tmp_path / "submit.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def jupyter_number(path: Path, needle: str) -> int:
    """The number Jupyter shows beside the code cell holding `needle` after Run All: code cells
    that are not blank, the self-check cells included."""
    cells = [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"]
             if c["cell_type"] == "code" and "".join(c["source"]).strip()]
    return next(n for n, c in enumerate(cells, 1) if needle in "".join(c["source"]))


@pytest.mark.kernel
def test_a_cell_is_named_by_its_number_never_by_ipython_s_file_name(tmp_path: Path, capsys) -> None:
    """Before: "cell 3, line 3 raised SyntaxError: '(' was never closed (3861929179.py, line 3)",
    where Jupyter shows that cell as [4] (the tax exercise's self-check cell runs before it)."""
    path = notebook(tmp_path, "x0 = jnp.where(a < 1.0, 1.0, a)", "x0 = jnp.where(a < 1.0, 1.0, a")
    number = jupyter_number(path, "def newton_sqrt")
    assert number == 4
    report, terminal = grade(path, "newton")
    (problem,) = report.cell_problems
    assert problem.message == f"cell {number}, line 3 raised SyntaxError: '(' was never closed", \
        problem.message
    # the student answered: told so, once for the exercise (before: "not answered yet: define newton_sqrt",
    # and on the page "Not answered yet: ... because cell 4 ... raised SyntaxError" under each of 8 checks)
    told = (f"✗ cell {number}, line 3 raised SyntaxError: '(' was never closed, so `newton_sqrt` is not defined: "
            "fix that cell first")
    assert told in summary(report) and terminal.count("SyntaxError") == 1 and "not answered yet" not in terminal
    from grader.views.page import page

    shown = page(report, read_submission(path).cells)
    newton = shown.split("data-exercise='newton'")[1].split("</section>")[0]
    assert newton.count("SyntaxError") == 1 and "Not answered yet" not in newton, newton
    from grader.outputs.classpage.analysis import analyze

    counted = {c.id: c for c in analyze({"s": report}, feedback_file=lambda s: f"{s}.html").checks}
    assert counted["newton.visible"].judged == counted["newton.visible"].failed == 1  # before: left out
    out = self_check(cells_run(path), "newton", capsys)
    assert "not answered yet: define newton_sqrt" in out
    for text in [out, *student_texts(report, terminal)]:
        assert_in_the_chapter_s_words(text)


@pytest.mark.kernel
def test_a_cell_that_ends_inside_a_bracket_is_a_syntax_error_with_its_line(tmp_path: Path) -> None:
    """Python 3.13's kernel raises `_IncompleteInputError: incomplete input` for a cell that ends
    inside a bracket; `python` and the pack's `grade` say "SyntaxError: '[' was never closed" at
    the bracket's line, and so does the report."""
    path = notebook(tmp_path, "    return x, k\n", "    return x, k\n\nextra = jnp.array([1.0,\n")
    number = jupyter_number(path, "def newton_sqrt")
    report = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=SEED, exercises=("newton",)))
    (problem,) = report.cell_problems
    (cell,) = [c for c in read_submission(path).cells if "def newton_sqrt" in c.source]
    line = next(k for k, text in enumerate(cell.source.splitlines(), 1) if text.startswith("extra"))
    assert problem.message == f"cell {number}, line {line} raised SyntaxError: '[' was never closed"
    assert problem.ename == "SyntaxError" and problem.line == line
    assert "_Incomplete" not in summary(report) and "incomplete input" not in summary(report)


@pytest.mark.kernel
def test_a_message_of_several_lines_reads_as_one_on_a_terminal(tmp_path: Path, capsys) -> None:
    """A cell's own assertion, written as the chapter writes its self-check cells
    (`f"...:\\n  expected {a}\\n  got {b}"`). Before: "predictions look wrong:\\n  expected 1\\n  got
    2" on the terminal, and the self-check's "...: newton_sqrt is wrong:" stopped at its colon."""
    path = notebook(tmp_path, "predictions = [",
                    'assert False, "predictions look wrong:\\n  expected 1\\n  got 2"\npredictions = [')
    report, terminal = grade(path, "detective")  # the cell of `predictions`: told under detective
    number = jupyter_number(path, "predictions = [")
    assert (f"✗ cell {number}, line 2 raised AssertionError: predictions look wrong: expected 1 got 2"
            in summary(report)), terminal
    raising = module(tmp_path, ("    x0 = jnp.where(a < 1.0, 1.0, a)",
                                '    assert False, "newton_sqrt is wrong:\\n  expected 1\\n  got 2"'),
                     name="raising")
    newton_report, newton_terminal = grade(raising, "newton")
    out = self_check(cells_run(raising), "newton", capsys)
    whole = re.compile(r"AssertionError at (?:line \d+(?: of its cell)?|cell \d+, line \d+): newton_sqrt is wrong: "
                       r"expected 1 got 2")  # a module's file line, a notebook's cell and line
    for text in (newton_terminal, out):  # before: "... at line 4 of its cell: newton_sqrt is wrong:"
        assert whole.search(text), text
    for text in [out, *student_texts(report, terminal), *student_texts(newton_report, newton_terminal)]:
        assert_in_the_chapter_s_words(text)


def test_ipython_s_file_names_become_the_cells_the_student_sees() -> None:
    from ipykernel.compiler import get_tmp_hash_seed, murmur2_x86

    cells = [SourceCell(index=1, source="import jax\n", number=1),
             SourceCell(index=6, source="def f():\n  1 +\n", number=4)]
    name = murmur2_x86(cells[1].source, get_tmp_hash_seed())
    said = f"invalid syntax ({name}.py, line 2)"
    assert in_cells(said, cells, here=cells[1]) == "invalid syntax"  # the message names the cell already
    assert in_cells(said, cells) == "invalid syntax (cell 4, line 2)"
    traced = f"tracing f at /tmp/ipykernel_812/{name}.py:2 for jit"
    assert in_cells(traced, cells) == "tracing f at cell 4, line 2 for jit"
    assert in_cells("in <ipython-input-4-0>", cells) == "in cell 4"  # the pack's runner names cells so
    module_cell = SourceCell(index=2, source="def f():\n  1 +\n", first_line=30)
    assert in_cells(said, [module_cell]) == "invalid syntax (line 31)"  # a module's lines are the file's
    assert in_cells("/tmp/ipykernel_1/1.py:3", cells) == "line 3 of its cell"


def test_a_self_check_names_cells_by_the_numbers_jupyter_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    import IPython

    class History:
        input_hist_raw = ["", "import jax\n", "def f():\n  return 1\n", "x = 2\n", "def f():\n  return 1\n"]

    class Shell:
        history_manager = History()

    monkeypatch.setattr(IPython, "get_ipython", lambda: Shell())
    cells = live_notebook_cells()
    assert {c.source: c.number for c in cells} == {"import jax\n": 1, "def f():\n  return 1\n": 4,
                                                   "x = 2\n": 3}


# ----------------------------------------------------------------------------- 4. the exercise's words

def test_the_self_check_names_checks_by_their_titles(capsys) -> None:
    """Before: "2 checked when you hand in (8 pts): hidden, iterations" and "call_1, call_2, ..."."""
    reference = runpy.run_path(str(REFERENCE))
    for exercise, title in (("newton", "newton_sqrt on hidden values of a"),
                            ("detective", "call ① detective(jnp.ones(3))")):
        out = self_check(reference, exercise, capsys)
        (later,) = [line for line in out.splitlines() if "checked when you hand in (" in line]
        assert title in later, later
        assert_in_the_chapter_s_words(out)
    wrong = dict(reference, newton_sqrt=lambda a, tol: (a, 1))
    out = self_check(wrong, "newton", capsys)
    assert "✗ newton_sqrt is wrapped in jax.jit (3 pts): " in out
    assert_in_the_chapter_s_words(out)


# ----------------------------------------------------------------------------- 5. the lead tells the cause

IGNORED_LR = "\n\n# %%\n@jax.jit\ndef train_fori(w, b, x, y, lr, num_steps):\n    def body(i, wb):\n" \
             "        return step(wb[0], wb[1], x, y, 0.01)\n\n    return lax.fori_loop(0, num_steps, body, (w, b))\n"


def with_cell(tmp_path: Path, cell: str, name: str = "submit") -> Path:
    """The reference module with a cell appended (it redefines a function, as a student's last cell may)."""
    path = tmp_path / f"{name}.py"
    path.write_text(REFERENCE.read_text(encoding="utf-8") + cell, encoding="utf-8")
    return path


@pytest.mark.kernel
def test_a_wrong_shape_is_one_cause_every_other_check_of_the_function_points_to(repo_root: Path,
                                                                                  tmp_path: Path) -> None:
    """An `ema` whose carry is `xs[:1]` returns shape (n, 1): the notebook's check says so, and the
    hidden one, the scan and the compile checks point to it (found by an attack: four messages,
    one of them "right values for too few inputs, or only for the notebook's examples")."""
    source = (repo_root / "solutions" / "ch2-scan.py").read_text()
    path = tmp_path / "shape.py"
    path.write_text(source.replace("lax.scan(body, xs[0], xs)", "lax.scan(body, xs[:1], xs)"))
    report = grade_warm(path, GradeOptions(assignment="ch2-scan", seed=SEED, exercises=("ema",)))
    failed = {c.id: c for e in report.exercises for c in e.checks if c.status != "passed"}
    leads = [c for c in failed.values() if c.reason != "same_cause"]
    assert [c.id for c in leads] == ["ema.ema_visible"] and "returned shape (4, 1), expected shape (4,)" in leads[0].message
    assert {"ema.ema_hidden", "ema.uses_scan"} <= set(failed)
    assert all(c.same_as == "ema.ema_visible" for c in failed.values() if c is not leads[0])


@pytest.mark.kernel
def test_an_ignored_lr_is_told_by_the_check_of_lr_0_never_by_donated_buffers(tmp_path: Path, capsys) -> None:
    """A train_fori that uses a constant instead of its lr. Before: `grade` led with "train_fori called
    as the chapter's self-check calls it" ("the same array may be passed as w and b (do not donate
    them)"), and "train_fori with lr = 0 changes nothing" was "same wrong values as" it. After: the
    check of lr = 0 leads at the hand-in, the chapter's lr = 0 call in the self-check; no message
    speaks of donating."""
    path = with_cell(tmp_path, IGNORED_LR)
    report = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=SEED, exercises=("training",)))
    terminal = summary(report, width=100)
    checks = by_id(report)
    lead = checks["training.fori_lr_zero"]
    assert lead.status == "failed" and lead.reason is None and "use the lr argument" in (lead.message or "")
    for check in checks.values():
        if check.status != "passed" and check.id != lead.id and "train_fori" in check.title:
            assert check.same_as == lead.id, (check.id, check.message)
    assert checks["training.fori_chapter_call"].status == "failed"  # it fails too, and points to the lead
    out = self_check(cells_run(path), "training", capsys)
    assert "train_fori with lr = 0, and with 5 and 6 steps, as the chapter's self-check calls it (0 pts): " \
           "train_fori called as the chapter's self-check calls it: with lr=0" in out, out
    for text in [out, *student_texts(report, terminal)]:
        assert "donate" not in text, text
        assert_in_the_chapter_s_words(text)


def test_the_check_that_isolates_one_argument_leads_and_a_donation_check_never_explains_values() -> None:
    """The checks of train_fori that a constant lr fails on values, as `grade` and the self-check
    judge them: the check of one requirement whose inputs isolate lr leads, before the visible ones
    that fail for any wrong value and before "learns the true parameters" (one requirement too, but
    one fewer failed checks share); the check that passes one array as w and b (its own cause is a
    donated buffer) never leads on values."""
    wrong = CheckOutcome(status="failed", message="its own sentence", cause="values")
    ids = ("training.fori_learns", "training.fori_chapter_call", "training.fori_chapter_lr_and_steps",
           "training.fori_agrees", "training.fori_lr_zero", "training.fori_compiles_once")
    out = one_message_per_cause([_failure(i, wrong) for i in ids])
    assert out[4] is wrong and {o.same_as for k, o in enumerate(out) if k != 4} == {"training.fori_lr_zero"}
    visible = one_message_per_cause([_failure(i, wrong) for i in ids if i in (ids[1], ids[2], ids[5])])
    assert visible[1] is wrong and visible[0].same_as == visible[2].same_as == ids[2]  # the self-check's lead
    alone = one_message_per_cause([_failure(ids[1], wrong)])  # the only one failed: it says what it found
    assert alone[0] is wrong


def test_a_function_wrong_through_the_helper_it_calls_points_to_the_helper_s_check() -> None:
    """`train_python_loop` gets its result from `step` (its `calls` rule says `uses_result`): when
    both are wrong, its checks point to step's (found by an attack: a wrong `step` led
    train_python_loop's checks with "should apply step exactly num_steps times", which it did);
    alone, or without the rule, it tells its own cause."""
    wrong = CheckOutcome(status="failed", message="its own sentence", cause="values")
    ids = ("training.step_visible", "training.step_hidden", "training.python_loop")
    helpers = {"train_python_loop": ["step"]}
    out = one_message_per_cause([_failure(i, wrong) for i in ids], helpers)
    assert out[0] is wrong and out[1].same_as == out[2].same_as == "training.step_visible"
    assert "which `train_python_loop` gets from `step`" in (out[2].message or "")
    assert "gets from" not in (out[1].message or "")  # step's own checks point within step
    assert one_message_per_cause([_failure(ids[2], wrong)], helpers)[0] is wrong  # step is right
    assert one_message_per_cause([_failure(i, wrong) for i in ids])[2] is wrong  # no rule: its own cause
    raised = CheckOutcome(status="failed", message="it raised", cause="raised")  # another cause: its own
    assert one_message_per_cause([_failure(ids[0], wrong), _failure(ids[2], raised)], helpers)[1] is raised


UPDATE = "@jax.jit\ndef update_weights_explicit(params, grads, lr):\n    return params - lr * grads\n"


@pytest.mark.kernel
@pytest.mark.parametrize("body, lead", [
    # wrong for lr above 1000 only, no global read: the value check tells it, the global checks point there
    ("    return params - jnp.minimum(lr, 1000.0) * grads\n", "update_weights.hidden"),
    ("    return params - jnp.where(lr == 0, 0.01, lr) * grads\n", "update_weights.hidden"),
    # the global read (defined in the module too): the check whose global changed the answers tells it
    ("    return params - learning_rate * grads\nlearning_rate = 0.01\n", "update_weights.ignores_global_1000"),
], ids=["capped", "lr-0-means-default", "global"])
def test_a_check_that_sets_a_global_blames_it_only_when_the_global_changed_the_answers(
        repo_root: Path, tmp_path: Path, body: str, lead: str) -> None:
    """The checks that define a global `learning_rate` while update_weights_explicit runs make the
    same calls without it: answers that are the same are the values' fault (found by an attack: an
    lr capped at 1000 was told "must use its lr argument: it gave another result while a global
    learning_rate = 1000.0 was defined", though it reads no global)."""
    source = (repo_root / "solutions" / "ch2-practice.py").read_text()
    assert UPDATE in source
    path = tmp_path / "update.py"
    path.write_text(source.replace(UPDATE, UPDATE.replace("    return params - lr * grads\n", body)))
    report = grade_warm(path, GradeOptions(assignment="ch2-practice", seed=SEED, exercises=("update_weights",)))
    failed = {c.id: c for e in report.exercises for c in e.checks if c.status != "passed"}
    leads = [i for i, c in failed.items() if c.reason != "same_cause"]
    assert leads == [lead] and all(c.same_as == lead for i, c in failed.items() if i != lead)
    assert {"update_weights.ignores_global_1000", "update_weights.hidden"} <= set(failed)
    said = " ".join(c.message or "" for c in failed.values())
    assert ("must use its lr argument" in said) == (lead != "update_weights.hidden")


@pytest.mark.kernel
def test_the_calls_without_the_globals_come_after_those_that_set_them(repo_root: Path, tmp_path: Path) -> None:
    """A function that reads the global only on every other call (found by re-attacking the calls
    without globals: asked between the checks' own, they took the calls the global reached, and it
    kept 16 of 16): the calls that set globals meet it where they did before those were added."""
    source = (repo_root / "solutions" / "ch2-practice.py").read_text()
    path = tmp_path / "alternate.py"
    path.write_text(source.replace(UPDATE, "_calls = [0]\n\n\ndef update_weights_explicit(params, grads, lr):\n"
                                           "    _calls[0] += 1\n    g = globals().get('learning_rate')\n"
                                           "    if g is not None and _calls[0] % 2 == 0:\n"
                                           "        return params - g * grads\n    return params - lr * grads\n"))
    report = grade_warm(path, GradeOptions(assignment="ch2-practice", seed=SEED, exercises=("update_weights",)))
    failed = {c.id: c for e in report.exercises for c in e.checks if c.status != "passed"}
    assert {i for i in failed if i.startswith("update_weights.ignores_global")}, failed
    assert any("must use its lr argument" in (c.message or "") for c in failed.values())


# ----------------------------------------------------------------------------- 6. an endless loop, once

ENDLESS = "\n\n# %%\n@jax.jit\ndef newton_sqrt(a, tol):\n    def cond_fun(state):\n        return state[2] >= 0\n\n" \
          "    def body_fun(state):\n        x, _, k = state\n        return 0.5 * (x + a / x), x, k + 1\n\n" \
          "    x, _, k = lax.while_loop(cond_fun, body_fun, (a, a + 1.0, 0))\n    return x, k\n"


def test_a_function_that_never_finishes_is_told_once_as_the_notebook_cell_says_it() -> None:
    """Before: "did not finish (still running after 30 s)" under each check that ran newton_sqrt,
    then "(still running after 10 s in an earlier check; not called again)". After: the first
    visible check that ran it says it, as the notebook's self-check cell does; every other check it
    held up is ⏱ and points there."""
    def hung(check_id: str, detail: str) -> Failure:
        spec = _failure(check_id, CheckOutcome(status="passed")).spec
        return _failure(check_id, CheckOutcome(status="timeout", message=f"{spec.message}: `newton_sqrt` did not "
                                                                         f"finish ({detail})"))

    earlier = "still running after 10 s in an earlier check; not called again"
    failures = [hung("newton.iterations_chapter_calls", earlier), hung("newton.hidden", "still running after 30 s"),
                hung("newton.visible", "still running after 30 s"), hung("newton.compiles_once", earlier)]
    out = one_message_per_cause(failures)
    lead = out[2]
    assert lead.message == "stopped after 30 s, `newton_sqrt` still running: does a loop never end?"
    assert lead.counterexample == failures[2].outcome.message  # the instructor keeps the check's words
    for k in (0, 1, 3):
        assert out[k].status == "timeout" and out[k].same_as == "newton.visible", out[k]
        assert out[k].message == ("did not finish either, as in “newton_sqrt on the notebook's values”; this check "
                                  "is judged once `newton_sqrt` finishes")


@pytest.mark.kernel
def test_an_endless_loop_is_one_sentence_on_the_terminal_and_the_page(tmp_path: Path) -> None:
    from grader.views.page import page

    path = with_cell(tmp_path, ENDLESS)
    report = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=SEED, exercises=("newton",), cell_timeout=2))
    terminal = summary(report)  # one line a check
    assert terminal.count("still running") == 1 and "earlier check" not in terminal, terminal
    assert "stopped after 2 s, `newton_sqrt` still running: does a loop never end?" in terminal
    timed_out = [c for c in by_id(report).values() if c.status == "timeout"]
    assert len(timed_out) >= 3 and sum(c.reason is None for c in timed_out) == 1
    shown = page(report, read_submission(path).cells)
    assert shown.count("still running") == 1 and '.timeout::before{content:"⏱ "' in shown
    for text in student_texts(report, terminal):
        assert_in_the_chapter_s_words(text)
