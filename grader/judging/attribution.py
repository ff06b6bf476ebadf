"""Attribution: each failure told once, by what caused it, where the student finds it.

Which check tells a cause (`one_message_per_cause`): when several checks of one function fail
for one cause (its values are wrong, JAX cannot trace it, it raised, or it never finished), one of
them says why and the others point to it by its title. The one chosen names the cause most
closely, so that a global `lr` (or an `lr` ignored for a constant) is told by the check of
`lr = 0` ("use the lr argument, not a global") and not by "should not recompile", "exactly
num_steps steps" or "do not donate w and b"; between checks that say as much, a visible one
before a hidden one, so that the self-check and `grade` lead with the same sentence (`_rank` has
the order). A function that never finishes is told once, as the notebook's self-check cell says
it ("stopped after 30 s, `newton_sqrt` still running: does a loop never end?").

Why an exercise is "not answered" (`attribute`): a cell that raised (or hung, or killed the
kernel) defines nothing, so every check of the exercise whose names it held says "`X` is not
defined", which hides the real cause. This finds, for each such name (a check's
`not_answered`), the failed cell that assigns or defines it, and says so in those checks
(`not_answered.because`, and the message made from it), with the cell, the line and the error;
an ImportError also lists the packages the grading kernel has. The cell problem is then marked
with its exercise, so it is told once. A check whose code raised NameError for a name a failed cell
would have bound (`jnp`, after `import jaxx` failed in the cell that imports jax.numpy as jnp) is
"not answered" for that cause too, and its message leads with the cell (`NotAnswered.used`): the
cause first, the same sentence in every check it fails. A failed cell that raised NameError for a
name an earlier failed cell would have bound is told from that earlier cell: the first cause.

Cells as the student finds them (`in_cells`): "cell 5, line 7", the number Jupyter shows beside
the cell after Run All, never the file name IPython compiles a cell under ("4245309719.py").
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from importlib import metadata

from grader.checks.base import CheckOutcome
from grader.report import CellProblem, CheckResult, ExerciseResult, NotAnswered
from grader.spec import CheckSpec
from grader.submission import SourceCell

_DEFINES = re.compile(r"^(?:def|class)\s+([A-Za-z_]\w*)|^([A-Za-z_]\w*)\s*(?::[^=\n]*)?=(?!=)", re.MULTILINE)
_IMPORTS = re.compile(r"^(?:from\s+[\w.]+\s+)?import\s+\(?([^#\n]+)", re.MULTILINE)
_NAME_ERROR = re.compile(r"name '([A-Za-z_]\w*)' is not defined")
COURSE_PACKAGES = ("jax", "jaxlib", "numpy", "scipy", "matplotlib", "pandas", "optax", "flax", "equinox",
                   "chex")


def defined_names(source: str) -> set[str]:
    """Names a cell binds at module level (assignments, def, class, imports: `import jax.numpy as
    jnp` binds `jnp`, `import jax.numpy` binds `jax`), in the blocks of its `if`, `try`, `with` and
    `for` statements too, never inside a function or class. A cell that does not parse (a syntax
    error runs none of it) is read line by line: its definitions, assignments and imports."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # a cell that does not parse
        names = {m.group(1) or m.group(2) for m in _DEFINES.finditer(source)}
        for m in _IMPORTS.finditer(source):
            for alias in m.group(1).rstrip(" )\\").split(","):
                words = alias.split()
                if words and words[-1] != "*":
                    names.add(words[-1] if len(words) == 3 and words[1] == "as" else words[0].split(".")[0])
        return {n for n in names if n.isidentifier()}
    names: set[str] = set()
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)  # its body binds names of its own scope
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
            pending.extend(ast.iter_child_nodes(node))
        elif not isinstance(node, (ast.Lambda, ast.comprehension, ast.ListComp, ast.SetComp, ast.DictComp,
                                   ast.GeneratorExp)):
            pending.extend(ast.iter_child_nodes(node))
    return names


def undefined_name(ename: str | None, evalue: str | None) -> str | None:
    """The name a NameError was raised for ("name 'jnp' is not defined"), else None."""
    if ename != "NameError" or not evalue:
        return None
    found = _NAME_ERROR.search(evalue)
    return found.group(1) if found else None


def grading_packages() -> str:
    """The course's packages the grading environment has, with their versions."""
    found = []
    for name in COURSE_PACKAGES:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(found) + " and Python's standard library"


def _cause(problem: CellProblem) -> str:
    cause = problem.message
    if problem.ename in ("ModuleNotFoundError", "ImportError"):
        cause += f" (the grading kernel has {grading_packages()}; nothing else can be imported)"
    return cause


# ipykernel names a cell's code `<tmp>/ipykernel_<pid>/<murmur2 of the code>.py` (ipykernel.compiler); the
# pack's runner `<ipython-input-N-0>` (N the cell's number); a SyntaxError says "(3861929179.py, line 3)"
_HASH_SEED = 0xC70F6907  # ipykernel.compiler.get_tmp_hash_seed()
_CELL_FILE = re.compile(
    r"(?P<space> ?)\((?:[^()\s]*[/\\])?(?P<said>\d+)\.py, line (?P<said_line>\d+)\)"
    r"|(?P<runner_space> ?)\(<ipython-input-(?P<runner>\d+)-\w+>, line (?P<runner_line>\d+)\)"
    r"|(?:[^\s'\"()<>,]*[/\\])?ipykernel_\d+[/\\](?P<hash>\d+)\.py(?::(?P<line>\d+))?"
    r"|<ipython-input-(?P<number>\d+)-\w+>(?::(?P<number_line>\d+))?")


def _cells_by_file(cells: list[SourceCell]) -> dict[str, SourceCell]:
    """Each cell by the name IPython gives its code's file (the hash of the code as the grader ran it)."""
    try:
        from ipykernel.compiler import murmur2_x86
    except ImportError:  # no ipykernel (the pack's runner): its own names carry the cell's number
        return {}
    return {str(murmur2_x86(cell.source, _HASH_SEED)): cell for cell in cells}


def _label(cell: SourceCell | None, line: str | None) -> str:
    """A place as the student finds it: "cell 5, line 7" (a module's cell: the file's "line 31"; a
    cell not found among the notebook's: "line 7 of its cell")."""
    if cell is not None and cell.number is None:
        return f"line {cell.first_line + int(line or 1) - 1}"
    if cell is None and line:
        return f"line {line} of its cell"
    where = f"cell {cell.number}" if cell is not None else "a cell"
    return where + (f", line {line}" if line else "")


def in_cells(text: str, cells: list[SourceCell], here: SourceCell | None = None) -> str:
    """`text` with IPython's names for cells' files ("/tmp/ipykernel_12/4245309719.py:7",
    "(4245309719.py, line 7)") as the student finds the cell: "cell 5, line 7". A SyntaxError's
    "(file, line)" about the cell `here`, which the message names already, is dropped."""
    if "ipykernel_" not in text and ".py, line" not in text and "<ipython-input-" not in text:
        return text
    by_file = _cells_by_file(cells)
    by_number = {str(cell.number): cell for cell in cells if cell.number is not None}

    def place(match: re.Match) -> str:
        if match["said"]:
            cell = by_file.get(match["said"])
            if cell is not None and cell is here:
                return ""
            return f"{match['space']}({_label(cell, match['said_line'])})"
        if match["runner"]:  # the pack's runner's SyntaxError: "(<ipython-input-4-0>, line 3)"
            cell = by_number.get(match["runner"])
            if cell is not None and cell is here:
                return ""
            return f"{match['runner_space']}({_label(cell, match['runner_line'])})"
        if match["hash"]:
            return _label(by_file.get(match["hash"]), match["line"])
        return _label(by_number.get(match["number"]), match["number_line"])

    return _CELL_FILE.sub(place, text)


def _told_in_cells(check: CheckResult, cells: list[SourceCell]) -> CheckResult:
    said = {"message": check.message, "counterexample": check.counterexample}
    told = {k: in_cells(v, cells) for k, v in said.items() if v is not None}
    changed = {k: v for k, v in told.items() if v != getattr(check, k)}
    return check.model_copy(update=changed) if changed else check


def live_notebook_cells() -> list[SourceCell]:
    """The cells the student's own kernel has run, numbered as Jupyter shows them ([5] is cell 5),
    for a self-check's messages; none outside IPython. A cell run again keeps its latest number."""
    try:
        from IPython import get_ipython
    except ImportError:
        return []
    shell = get_ipython()
    history = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None)
    if not isinstance(history, list):
        return []
    latest = {source: k for k, source in enumerate(history)
              if k and isinstance(source, str) and source.strip()}
    return [SourceCell(index=k, source=source, number=k) for source, k in latest.items()]


def in_live_cells(exercise: ExerciseResult) -> ExerciseResult:
    """A self-check's verdicts with cells named as the student's notebook numbers them (`in_cells`)."""
    said = " ".join(c.message or "" for c in exercise.checks)
    if in_cells(said, []) == said:  # no cell's file named: nothing to look up
        return exercise
    cells = live_notebook_cells()
    return exercise.model_copy(update={"checks": [_told_in_cells(c, cells) for c in exercise.checks]})


def as_python_says(problem: CellProblem, cell: SourceCell | None) -> CellProblem:
    """A cell that does not parse, as Python says it: Python 3.13's kernel compiles a cell that
    ends inside a bracket or a block as "incomplete input" and names the class it raises for it
    (`_IncompleteInputError`), where `python` itself, and the pack's runner, say "SyntaxError: '['
    was never closed" at the line of the bracket. The cell is compiled again here (never run),
    its IPython magics blanked, for that sentence and line; else "SyntaxError: incomplete input"."""
    if problem.status != "error" or problem.ename not in _INCOMPLETE_INPUT:
        return problem
    said, line = "incomplete input", problem.line
    if cell is not None:
        plain = "".join("\n" if text.lstrip().startswith(("%", "!")) else text
                        for text in cell.source.splitlines(keepends=True))
        try:
            compile(plain, "<cell>", "exec", dont_inherit=True)
        except SyntaxError as exc:
            if exc.msg and exc.lineno:
                said, line = exc.msg, exc.lineno
        except Exception:  # noqa: BLE001 - too deep, too large, a NUL: the kernel's words stand
            pass
    where = problem.where
    if line is not None:
        first = cell.first_line if cell is not None else 1
        where = f"line {first + line - 1}" if where.startswith("line ") else f"{where}, line {line}"
    return problem.model_copy(update={"ename": "SyntaxError", "line": line,
                                      "message": f"{where} raised SyntaxError: {said}"})


_INCOMPLETE_INPUT = frozenset({"_IncompleteInputError"})  # Python 3.13's SyntaxError for code that ends too soon


def attribute(exercises: list[ExerciseResult], cells: list[SourceCell],
              problems: list[CellProblem]) -> tuple[list[ExerciseResult], list[CellProblem]]:
    """Exercises whose undefined names a failed cell would have defined say so; those cell
    problems are marked with the exercise. Every message names cells as the student finds them
    (`in_cells`), never by the file names IPython gives their code."""
    by_index = {cell.index: cell for cell in cells}
    problems = [as_python_says(p, by_index.get(p.cell)) for p in problems]
    problems = [p.model_copy(update={"message": in_cells(p.message, cells, by_index.get(p.cell))})
                for p in problems]
    exercises = [e.model_copy(update={"checks": [_told_in_cells(c, cells) for c in e.checks]})
                 for e in exercises]
    failed_cells = {p.cell: p for p in problems if p.status in ("error", "timeout", "died")}
    if not failed_cells:
        return exercises, problems
    definers: dict[str, CellProblem] = {}
    earlier: dict[int, dict[str, CellProblem]] = {}  # per failed cell, the names failed cells before it bind
    for cell in cells:
        problem = failed_cells.get(cell.index)
        if problem is not None:
            earlier[cell.index] = dict(definers)
            for name in defined_names(cell.source):
                definers.setdefault(name, problem)
    told: dict[int, str] = {}

    def cause(problem: CellProblem, exercise: str) -> str:
        """What the cell `problem` raised, told from its first cause: a cell that raised NameError for a
        name an earlier failed cell would have bound failed because of that cell ("cell 1, line 3 raised
        ModuleNotFoundError: ..., so `np` is not defined in cell 2"). Every cell it names is marked told."""
        chain, lacked = [problem], []  # the first cause first; lacked[k]: the name chain[k + 1] raised for
        while (name := undefined_name(chain[0].ename, chain[0].message)) is not None:
            before = earlier.get(chain[0].cell, {}).get(name)
            if before is None or before in chain:
                break
            chain.insert(0, before)
            lacked.insert(0, name)
        for p in chain:
            told.setdefault(p.cell, exercise)
        said = _cause(chain[0])
        for p, name in zip(chain[1:], lacked):
            said += f", so `{name}` is not defined {'at' if p.where.startswith('line ') else 'in'} {p.where}"
        return said

    def not_answered_for(check: CheckResult, used: NotAnswered) -> CheckResult:
        return check.model_copy(update={"status": "failed", "message": used.message, "reason": "not_answered",
                                        "not_answered": used, "same_as": None,
                                        "requirements": [],  # not a sentence missed: a cell failed
                                        "counterexample": check.counterexample or check.message})

    # a name a check may tell: one that a check showing its exception's text raised for. A `pass_fail`
    # check's own NameError could name a hidden value (code run on it may build the name it looks up)
    tellable = {c.undefined for e in exercises for c in e.checks if c.undefined and c.reveal != "pass_fail"}
    out = []
    for exercise in exercises:
        checks = []
        for check in exercise.checks:
            missing = check.not_answered  # a name not defined, whose cause is not told yet
            untold = missing is not None and not missing.defined and missing.because is None
            problem = definers.get(missing.name) if missing is not None and untold else None
            if missing is not None and problem is not None:
                missing = missing.model_copy(update={"because": cause(problem, exercise.id)})
                check = check.model_copy(update={"message": missing.message, "not_answered": missing})
            elif (check.status != "passed" and check.reason != "not_answered" and check.undefined in definers
                  and check.undefined in tellable):
                # the student's code raised NameError for a name a failed cell would have bound: that
                # cell is the cause, told first, the same in every check it fails (never the NameError)
                assert check.undefined is not None
                check = not_answered_for(check, NotAnswered(
                    name=check.undefined, because=cause(definers[check.undefined], exercise.id), used=True))
            checks.append(check)
        out.append(exercise.model_copy(update={"checks": checks}))
    # a check that points to one of those for its cause (`same_cause`) has that cause too
    used_by = {c.id: c.not_answered for e in out for c in e.checks if c.not_answered and c.not_answered.used}
    out = [e.model_copy(update={"checks": [not_answered_for(c, used_by[c.same_as])
                                           if c.reason == "same_cause" and c.same_as in used_by else c
                                           for c in e.checks]}) for e in out]
    marked = [p.model_copy(update={"exercise": told[p.cell]}) if p.cell in told else p for p in problems]
    return out, marked


# ----------------------------------------------------------------------------- one cause, one message


@dataclass(frozen=True)
class Failure:
    """A judged check, for choosing which of the checks failed by one cause tells it."""

    check_id: str
    spec: CheckSpec
    outcome: CheckOutcome
    echo: bool = False  # a value check that only re-tests inputs an earlier one found wrong
    shown: bool = False  # a value check that saw its own cause: the globals it sets changed the answers


def subject(spec: CheckSpec) -> str | None:
    """The student function a check judges (a custom check's `function` is the instructor's)."""
    if spec.kind == "custom":
        return spec.call
    return getattr(spec, "function", None) if spec.kind != "interface" else spec.name


def _lead(members: list[tuple[int, Failure]]) -> tuple[int, Failure]:
    support = _support(members)
    return min(members, key=lambda m: _rank(*m, support))


def _helper_root(function: str, cause: str, leads: dict, helpers: dict[str, list[str]]) -> tuple | None:
    """The helper (and its lead failure) whose failure by `cause` is the root of `function`'s: the
    last of a chain of helpers that failed so (step fails, so train_python_loop does), or None."""
    found, seen = None, {function}
    current = function
    while True:
        nxt = next((h for h in helpers.get(current, []) if (h, cause) in leads and h not in seen), None)
        if nxt is None:
            return found
        found, current = (nxt, leads[nxt, cause]), nxt
        seen.add(nxt)


def _quoted(title: str) -> str:
    return f"“{title}”"


def same_cause(outcome: CheckOutcome, spec: CheckSpec, root: str,
               root_title: str | None = None, through: tuple[str, str] | None = None) -> CheckOutcome:
    """One root cause, one message: a check that failed only because the function's values are
    wrong, or because JAX cannot trace it (which the check `root` already says, with the call or
    the line), gives no advice of its own and names that check by its title (`root_title`; the id
    stays in `same_as`). A structure or compile check fails so only when its program is no
    evidence (`grader.checks.evidence`): wrong on too much, or right only on the examples."""
    other = _quoted(root_title) if root_title else "another check of this function"
    if through is not None:  # the root is a helper's check: (the function, the helper it calls)
        other += f", which `{through[0]}` gets from `{through[1]}`"
    if outcome.status == "timeout" and outcome.cause is None:
        function = subject(spec)
        who = f"`{function}`" if function else "the function"
        message, cause = f"did not finish either, as in {other}; this check is judged once {who} finishes", None
    elif outcome.cause == "values" and spec.kind in ("structure", "compile_limit"):
        message, cause = (f"same wrong values as {other}; this check counts once the program computes the "
                          "right values for enough inputs, not only the notebook's examples"), "same_values"
    elif outcome.cause == "values":
        message, cause = f"same wrong values as {other}; this check is judged once they are right", \
            "same_values"
    elif outcome.cause == "raised":
        message, cause = f"same error as {other}; this check is judged once it runs", "same_raised"
    elif outcome.cause == "static":
        message, cause = (f"same static argument as {other}; this check is judged once that argument is traced",
                          "same_static")
    else:
        message, cause = f"same tracing error as {other}; this check is judged once it traces", "same_trace"
    return outcome.model_copy(update={"message": message, "cause": cause, "reason": "same_cause",
                                      "same_as": root,
                                      "counterexample": outcome.counterexample or outcome.message})


def _no_evidence(failure: Failure) -> bool:
    """A structure or compile check failed on values: its program is no evidence, which says
    only that the values are wrong; a value check of the function says which."""
    return failure.outcome.cause == "values" and failure.spec.kind in ("structure", "compile_limit")


def _aliased(failure: Failure) -> bool:
    """A check that passes one array as several arguments (`same_object`, as the chapter's cell
    passes `_w0 = _b0`): what it alone finds is a donated buffer, an error raised, not wrong values;
    its sentence ("do not donate them") would send a student with wrong values the wrong way."""
    return bool(getattr(failure.spec, "same_object", None))


def _support(members: list[tuple[int, Failure]]) -> dict[str, int]:
    """For each requirement, how many of the failed checks verify it: a wrong value fails every
    check of the requirement it breaks, so the one most of them share is the likely cause."""
    counts: dict[str, int] = {}
    for _, failure in members:
        for requirement in failure.spec.verifies:
            counts[requirement] = counts.get(requirement, 0) + 1
    return counts


def _ran_out(failure: Failure) -> bool:
    """A timeout of a check that did not run the function itself past its time: it hung in an
    earlier check and is not called again, the submission's time ran out before it, or what ran
    out was a run of the check's own (a knockout of its loop)."""
    said = failure.outcome.message or ""
    ran = _RAN_FOR.search(said)
    return ran is None or ran["function"] != subject(failure.spec) or "in an earlier check" in said \
        or "not run:" in said


def _rank(position: int, failure: Failure, support: dict[str, int] | None = None) -> tuple:
    """Which failed check tells a cause. Wrong values: a value check before a structure or compile
    check whose program is no evidence, and before one that only re-tests another's inputs (a check
    of globals whose globals changed nothing, too); first of them, a check that saw its cause itself
    (`Failure.shown`: the globals it sets changed the answers, so "use the lr argument, not a
    global" is what to fix); then one whose own cause is not another (`_aliased`: a donated
    buffer); then the most specific, the one verifying fewest of the exercise's requirements
    (`train_fori` with lr = 0, which verifies
    only "lr is an argument", names an ignored lr where "train_fori runs exactly num_steps steps"
    cannot tell it from a wrong count, and "train_fori learns the true parameters" fails for any
    wrong value); of those, the one whose requirement most of the failed checks verify (`_support`);
    then a visible check, which the self-check judges too (the same check tells the cause before
    and at the hand-in, quoting a call the student can run); then the spec's order. A tracing error
    is the same error in every check: the first tells it; an exception, the first visible call; a
    function that never finished, the first visible check that ran it past its time."""
    if failure.outcome.cause in ("trace", "static"):
        return (False, False, False, 0, 0, False, position)
    if failure.outcome.cause == "raised":  # the same exception everywhere: the first visible call tells it
        return (False, False, False, 0, 0, failure.spec.hidden, position)
    if failure.outcome.cause is None:  # timed out
        return (_ran_out(failure), False, False, 0, 0, failure.spec.hidden, position)
    follows = _no_evidence(failure) or failure.echo
    verifies = failure.spec.verifies
    shared = max((support or {}).get(r, 0) for r in verifies) if verifies else 0
    return (follows, not failure.shown, _aliased(failure), len(verifies) or 99, -shared, failure.spec.hidden,
            position)


def _stopped(failure: Failure) -> CheckOutcome:
    """The check that tells a function never finished, in the words of the notebook's self-check
    cell: how long it ran and which function, once (the instructor keeps the check's own words)."""
    said = failure.outcome.message or ""
    ran = _RAN_FOR.search(said)
    function = subject(failure.spec)
    if ran is None or _ran_out(failure):
        return failure.outcome  # not the function itself that ran past its time (a run the check made of it)
    what = f"tracing `{function}`" if ran["tracing"] else f"`{function}`"
    return failure.outcome.model_copy(update={
        "message": f"stopped after {ran['seconds']} s, {what} still running: does a loop never end?",
        "counterexample": failure.outcome.counterexample or said})


_RAN_FOR = re.compile(r"(?P<tracing>tracing )?`(?P<function>[A-Za-z_]\w*)` did not finish "
                      r"\(still running after (?P<seconds>\d+(?:\.\d+)?) s\)")


def _told_by_its_values(failure: Failure) -> CheckOutcome:
    """A structure or compile check that tells wrong values itself (no value check of the function
    failed): the values first, then what the check would have judged, so that a global `lr` is not
    blamed on "should not recompile"."""
    function = subject(failure.spec)
    who = f"`{function}`" if function else "the function"
    return failure.outcome.model_copy(update={
        "message": f"{who} computes the right values for too few of this check's inputs, or only for the "
                   "notebook's examples: this check is judged once its values are right",
        "counterexample": failure.outcome.counterexample or failure.outcome.message})


def _raised_as(failure: Failure, lead: Failure) -> bool:
    """A check that called the function and got the very exception its trace raised (the chapter's
    own calls, run eagerly): the same cause as the tracing error."""
    mine, theirs = failure.outcome.raised, lead.outcome.raised
    return (failure.outcome.cause is None and failure.outcome.status == "error" and mine is not None
            and theirs is not None and mine.ename == theirs.ename)


def one_message_per_cause(failures: list[Failure | None],
                          helpers: dict[str, list[str]] | None = None) -> list[CheckOutcome | None]:
    """Each (function, cause) told once: the check `_rank` chooses says it, every other check
    of that function failed by the same cause (or, called eagerly, by the exception its trace
    raised; or timed out on it) points to it by its title. A function whose result the spec says
    comes from a helper it calls (`helpers`: a `calls` rule with `uses_result`) and whose helper
    failed by the same cause points to the helper's check instead: a wrong `masked_mean` makes
    `mean_any_length` wrong, and the student fixes it in `masked_mean`. `None` (a check not judged
    at this stage) stays None."""
    groups: dict[tuple[str, str], list[tuple[int, Failure]]] = {}
    for position, failure in enumerate(failures):
        if failure is None:
            continue
        timed_out = failure.outcome.status == "timeout" and failure.outcome.cause is None \
            and failure.outcome.reason is None
        if failure.outcome.cause not in ("values", "trace", "static", "raised") and not timed_out:
            continue
        function = subject(failure.spec)
        if function:
            groups.setdefault((function, failure.outcome.cause or "timeout"), []).append((position, failure))
    out = [f.outcome if f is not None else None for f in failures]
    leads = {key: _lead(members) for key, members in groups.items()}
    for (function, cause), members in groups.items():
        root = _helper_root(function, cause, leads, helpers or {})
        if root is not None:
            helper, (_, helper_lead) = root
            for position, failure in members:
                out[position] = same_cause(failure.outcome, failure.spec, helper_lead.check_id,
                                           helper_lead.spec.title, through=(function, helper))
            continue
        lead_position, lead = leads[function, cause]
        if _no_evidence(lead):
            out[lead_position] = _told_by_its_values(lead)
        if cause == "timeout":
            out[lead_position] = _stopped(lead)
        if cause in ("trace", "static", "raised"):
            members = members + [(position, failure) for position, failure in enumerate(failures)
                                 if failure is not None and subject(failure.spec) == function
                                 and _raised_as(failure, lead)]
        for position, failure in members:
            if position != lead_position:
                out[position] = same_cause(failure.outcome, failure.spec, lead.check_id, lead.spec.title)
    return out
