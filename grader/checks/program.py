"""Checks on the exported program: from a check's cases to exports and module runs, and from
what came back to the student's answers, with verdicts that teach when JAX could not trace.

Each case is exported for its arguments' abstract values (shape, dtype, weak type): a Python
float is a weakly typed float32 scalar, as JAX sees `f(1.0)`; a NumPy array keeps its shape and
its dtype (64-bit ones become 32-bit, as JAX does without x64). Cases of one signature share
one export; the values go only to the verifier, as the module's inputs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from grader.cases import Case, materialize, to_calls
from grader.checks.base import (
    CheckOutcome,
    Context,
    ModuleRun,
    Planner,
    RaisedKind,
    RunOutcome,
    Seen,
    not_answered,
    result_of,
)
from grader.errors import AssignmentBug
from grader.kernel.protocol import (
    Abstract,
    CallRequest,
    ExportArg,
    ExportRequest,
    ExportResult,
    OpaqueValue,
    Raised,
    Request,
    Value,
    ValuesResult,
)
from grader.values import Tree, from_wire, to_wire

_NARROW = {"float64": "float32", "int64": "int32", "uint64": "uint32", "complex128": "complex64"}

HINTS = {
    "TracerBoolConversionError": "a Python `if` or `while` on a traced value; use lax.cond, lax.switch or "
                                 "lax.while_loop",
    "ConcretizationTypeError": "a traced value used where Python needs a concrete one (a shape, a range, a "
                               "Python condition); use lax control flow, or keep that argument static",
    "TracerIntegerConversionError": "a traced value used as a Python int (range(n), a list index); use "
                                    "lax.fori_loop or jnp indexing",
    "TracerArrayConversionError": "NumPy called on a traced value (np.asarray, np.where...); use jax.numpy",
    "NonConcreteBooleanIndexError": "a boolean mask used as an index (its size is unknown when traced); use "
                                    "jnp.where",
    "UnexpectedTracerError": "a traced value escaped the function (stored in a global or a list outside it)",
    "StaticArgumentError": "this check needs it traced: a static argument (static_argnums / static_argnames) "
                           "is baked into the program and every new value of it compiles again",
}
LESSONS = {"TracerBoolConversionError": "control_flow", "ConcretizationTypeError": "control_flow",
           "TracerIntegerConversionError": "control_flow", "StaticArgumentError": "static_arguments"}
"""Which of the assignment's `sections` each piece of advice cites (`AssignmentSpec.sections`)."""


def lesson(ename: str, sections: dict[str, str] | None = None) -> str | None:
    """The advice for an error JAX raised while tracing, citing where the assignment's course
    teaches it (its spec's `sections`: "section 2.4" in the JAX chapter's), or nothing."""
    text = HINTS.get(ename)
    where = (sections or {}).get(LESSONS.get(ename, ""))
    return f"{text} ({where})" if text and where else text


def _abstract(value: Any) -> Abstract:
    if type(value) is bool:
        return Abstract(shape=[], dtype="bool")
    if type(value) is int:
        return Abstract(shape=[], dtype="int32", weak=True)
    if type(value) is float:
        return Abstract(shape=[], dtype="float32", weak=True)
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        dtype = _NARROW.get(str(arr.dtype), str(arr.dtype))
        return Abstract(shape=list(arr.shape), dtype=dtype)
    raise AssignmentBug("cases", f"a {type(value).__name__} argument cannot be exported: use arrays and scalars")


def _concrete(value: Any) -> ExportArg:
    wire = to_wire(value)
    assert not isinstance(wire, (list, dict)), "cases give scalars and arrays"
    return wire  # type: ignore[return-value]


class ProgramCalls:
    """A student function's program run on a list of cases: one export per distinct signature
    (and baked public values), one module run per export. `beyond`: more cases (drawn, hidden) the
    same modules are run on, never exported for: evidence that a program is not a table of the
    notebook's answers (`beyond_answers`). `knockouts`: the verifier also runs each module with each
    loop and case knocked out, to tell whether they do the work (grader/verifier/inside/knockout.py)."""

    def __init__(self, planner: Planner, function: str, cases: list[Case], public: set[int],
                 set_globals: dict[str, Value] | None = None, *, inspect_only: bool = False,
                 judged: bool = True, beyond: list[Case] | None = None,
                 knockouts: frozenset[str] = frozenset()):
        self.function = function
        self.cases = cases
        self.sections = planner.sections
        self._runs: dict[str, ModuleRun] = {}
        self._where: list[tuple[str, int]] = []
        grouped: dict[str, tuple[Any, list[list[Value]]]] = {}
        for case in cases:
            if case.kwargs:
                raise AssignmentBug(function, "a case with keyword arguments cannot be exported")
            args: list[ExportArg] = [_abstract(v) for v in case.args]
            fallback = {i: _concrete(v) for i, v in enumerate(case.args) if i in public}
            export = planner.export(function, args, fallback, set_globals)
            inputs = [] if inspect_only else [to_wire(v) for v in case.args]
            entry = grouped.setdefault(export.id, (export, []))
            self._where.append((export.id, len(entry[1])))
            if not inspect_only:
                entry[1].append(inputs)
        self.beyond: list[Case] = []
        self._beyond_where: list[tuple[str, int]] = []
        for case in [] if inspect_only else beyond or []:
            same = _export_of(case, public, [export for export, _ in grouped.values()])
            if same is not None:  # a case of another signature would need a module of its own
                self.beyond.append(case)
                self._beyond_where.append((same.id, len(grouped[same.id][1])))
                grouped[same.id][1].append([to_wire(v) for v in case.args])
        for export_id, (export, inputs) in grouped.items():
            self._runs[export_id] = ModuleRun(export=export, inputs=inputs, judged=judged and not inspect_only,
                                              knockouts=frozenset() if inspect_only else knockouts)
        self.exports = [run.export for run in self._runs.values()]

    def runs(self) -> list[ModuleRun]:
        return list(self._runs.values())

    # ------------------------------------------------------------------ what came back

    def exported(self, seen: Seen, hint: str) -> list[ExportResult] | CheckOutcome:
        """Every export's result, or the verdict that replaces them (not defined, not traceable...)."""
        results = []
        for export in self.exports:
            obs = seen.of(export)
            if obs is None:
                return CheckOutcome(status="error", message=f"{hint}: the grader got no answer about "
                                                            f"`{self.function}` (no program)")
            if obs.status == "missing":
                return not_answered(str(obs.detail))
            if obs.status == "raised" and obs.raised is not None:
                return could_not_trace(self.function, obs.raised, hint, self.sections)
            if obs.status != "ok":
                status = "timeout" if obs.status == "timeout" else "error"
                return CheckOutcome(status=status, message=f"{hint}: tracing `{self.function}` did not finish "
                                                           f"({obs.detail})",
                                    reason="kernel_died" if obs.died else None)
            if not isinstance(obs.result, ExportResult):
                return CheckOutcome(status="error", message=f"{hint}: the probe's program for `{self.function}` "
                                                            "was unreadable")
            results.append(obs.result)
        return results

    def misfit(self, seen: Seen, hint: str) -> CheckOutcome | None:
        """The refusal of a module whose signature is not the one the grader asked for (the
        ExportRequest's traced arguments, the public ones alone baked), else None. Every check
        that reads a module asks this first: a module of another signature (a decoy's trace
        borrowed as `.trace`) computes nothing the checks asked about, so it is no evidence."""
        exported = self.exported(seen, hint)
        if isinstance(exported, CheckOutcome):
            return exported
        for run, result in zip(self._runs.values(), exported):
            outcome = seen.run(run)
            facts = outcome.facts if outcome is not None else None
            allowed, asked = set(run.export.fallback), len(run.export.args)
            wrong = None
            if not set(result.baked) <= allowed:
                wrong = "arguments baked in that only their public values may be"
            elif facts is not None and facts.inputs != asked - len(result.baked):
                wrong = f"{facts.inputs} inputs for the {asked - len(result.baked)} traced arguments asked"
            if wrong:
                return CheckOutcome(status="failed", message=f"{hint}: the program given for `{self.function}` has "
                                                             f"{wrong}, so it is not `{self.function}`'s program for "
                                                             "these arguments and proves nothing")
        return None

    def outcomes(self, seen: Seen, hint: str) -> list[RunOutcome] | CheckOutcome:
        """What the verifier did with each export's module, or the verdict that replaces it."""
        exported = self.exported(seen, hint)
        if isinstance(exported, CheckOutcome):
            return exported
        refused = self.misfit(seen, hint)
        if refused is not None:
            return refused
        outcomes = []
        for run in self._runs.values():
            outcome = seen.run(run)
            if outcome is None:
                return CheckOutcome(status="error", message=f"{hint}: the verifier did not run `{self.function}`")
            if outcome.status == "timeout":
                return CheckOutcome(status="timeout", message=f"{hint}: `{self.function}` did not finish "
                                                              f"({outcome.detail})")
            if outcome.status == "refused":
                return CheckOutcome(status="error", message=f"{hint}: the program of `{self.function}` cannot be "
                                                            f"run by the grader ({outcome.detail})")
            if outcome.status != "ok":
                return CheckOutcome(status="error", message=f"{hint}: running `{self.function}` failed "
                                                            f"({outcome.detail})")
            outcomes.append(outcome)
        return outcomes

    def answers(self, seen: Seen, hint: str) -> list[Any] | CheckOutcome:
        """The student's answer for each case, in order: the module's output leaves, put back in
        the shape the function returned them (a leaf, or a tuple of leaves; a dict stays opaque)."""
        return self._answers(seen, hint, self._where)

    def beyond_answers(self, seen: Seen, hint: str) -> list[Any] | CheckOutcome:
        """The answers to the `beyond` cases, in order."""
        return self._answers(seen, hint, self._beyond_where)

    def _answers(self, seen: Seen, hint: str, where: list[tuple[str, int]]) -> list[Any] | CheckOutcome:
        exported = self.exported(seen, hint)
        if isinstance(exported, CheckOutcome):
            return exported
        outcomes = self.outcomes(seen, hint)
        if isinstance(outcomes, CheckOutcome):
            return outcomes
        trees = {e.id: r.out_tree for e, r in zip(self.exports, exported)}
        by_export = {export_id: outcome for export_id, outcome in zip(self._runs, outcomes)}
        answers = []
        for export_id, index in where:
            values = by_export[export_id].values or []
            if index >= len(values):
                return CheckOutcome(status="error", message=f"{hint}: the verifier returned too few results")
            answers.append(answer_of(values[index], trees[export_id]))
        return answers


def tree_kind(out_tree: str) -> str:
    """The top of a tree as JAX writes it: PyTreeDef(*), PyTreeDef((*, *)), PyTreeDef({...})..."""
    inner = out_tree[len("PyTreeDef("):] if out_tree.startswith("PyTreeDef(") else out_tree
    if inner.startswith("*"):
        return "leaf"
    if inner.startswith("None"):
        return "none"
    if inner.startswith("{"):
        return "dict"
    if inner.startswith("CustomNode(namedtuple"):
        return "namedtuple"
    return {"(": "tuple", "[": "list"}.get(inner[:1], "other")


def answer_of(leaves: list[Any], out_tree: str) -> Any:
    kind = tree_kind(out_tree)
    if kind == "leaf" and len(leaves) == 1:
        return leaves[0]
    if kind == "none":
        return None
    if kind == "dict":
        return OpaqueValue(type="dict", repr=out_tree[len("PyTreeDef("):-1][:200])
    if kind in ("namedtuple", "other"):
        return Tree(type=out_tree[len("PyTreeDef("):].split("[", 1)[-1].split("]", 1)[0][:40] or "pytree",
                    leaves=tuple(leaves))
    return tuple(leaves) if kind == "tuple" else list(leaves)


def where_raised(function: str, raised: Raised | RaisedKind) -> str:
    """ " at <the cell's file>:7", which the report tells as the student finds it ("at cell 5,
    line 7", a module's "at line 31": grader.judging.attribution.in_cells), or " at line 7 of its
    cell" where the file is not a cell's; " in `bucket_size`, at ..." when the line is in another
    function of the student's that `function` called."""
    if not raised.line:
        return ""
    place = f"{raised.file}:{raised.line}" if cell_file(raised.file) else f"line {raised.line} of its cell"
    other = getattr(raised, "function", None)
    if other and other != function and other != "<lambda>":
        return f" in `{other}`, at {place}"
    return f" at {place}"


_CELL_FILE = re.compile(r"(?:[^\s'\"()<>,]*[/\\])?ipykernel_\d+[/\\]\d+\.py|<ipython-input-\d+-\w+>")


def cell_file(file: str | None) -> bool:
    """Whether `file` is the name a cell's code is compiled under (a Jupyter kernel's, the pack's
    runner's): the only file a message may name, for the report to tell as its cell."""
    return bool(file) and _CELL_FILE.fullmatch(file) is not None


def is_tracing_error(raised: Raised) -> bool:
    """Whether JAX raised it because a traced value met Python (the chapter's 2.4-2.5 errors)."""
    return raised.ename in HINTS or "traced value" in raised.evalue


def could_not_trace(function: str, raised: Raised, hint: str, sections: dict[str, str] | None = None) -> CheckOutcome:
    """The verdict for a function JAX could not trace, in the chapter's words where it has them."""
    where = where_raised(function, raised)
    teach = lesson(raised.ename, sections)
    if raised.ename == "NotImplementedError" and "callback" in raised.evalue:
        teach = "it calls back into Python (jax.pure_callback / io_callback), which the grader does not run"
    detail = teach or raised.evalue
    # not the check's own advice (`hint`): the property it tests was never reached
    if raised.ename == "StaticArgumentError":  # a choice of the student's, not an exception: a failure
        return CheckOutcome(status="failed", message=f"`{function}` {raised.evalue}: {detail}", cause="static",
                            raised=RaisedKind(subject=f"`{function}`", ename=raised.ename, evalue=raised.evalue,
                                              line=raised.line, file=raised.file, teach=teach))
    said = f"`{function}` could not be traced by jax.jit: {raised.ename}{where}: {detail}"
    return CheckOutcome(status="error", message=said, cause="trace",
                        raised=RaisedKind(subject=f"`{function}`", ename=raised.ename, evalue=raised.evalue,
                                          line=raised.line, file=raised.file, teach=teach))


def _export_of(case: Case, public: set[int], exports: list[ExportRequest]) -> ExportRequest | None:
    """The export among `exports` that `case` would be exported as (its signature, its public
    values), if any."""
    if case.kwargs:
        return None
    try:
        args = [_abstract(v).model_dump() for v in case.args]
    except AssignmentBug:
        return None
    fallback = {i: _concrete(v).model_dump() for i, v in enumerate(case.args) if i in public}
    for export in exports:
        if ([a.model_dump() for a in export.args] == args
                and {i: v.model_dump() for i, v in export.fallback.items()} == fallback):
            return export
    return None


@dataclass(frozen=True)
class NotebookExample(Case):
    """A case of a visible value check, run beside a structure or compile check's own cases: what
    a table of the notebook's answers gets right (`grader.checks.evidence` compares the draws
    with these)."""


def drawn_beyond(ctx: Context, spec: Any) -> list[Case]:
    """Cases a table of the notebook's answers cannot know, for a structure or compile check
    whose own cases are the spec's literal rows: the draws of the hidden value checks of the
    same function against the same reference (the same seed draws the same inputs for them),
    after the visible value checks' cases (as `NotebookExample`s, the baseline they are compared
    with). None for the self-check: run on demand, hidden draws would be an oracle for the hidden
    inputs (and the student pack has no generators)."""
    if ctx.stage != "hand_in" or spec.cases.rows is None or not spec.reference:
        return []
    references = ctx.assignment.references
    examples: list[Case] = []
    drawn: list[Case] = []
    for exercise in ctx.assignment.spec.exercises:
        for other in exercise.checks:
            if (other.kind == "numeric"
                    and other.function == spec.function and other.reference == spec.reference
                    and not other.set_globals and (other.cases.rows is not None
                                                   or hasattr(references, other.cases.generator or ""))):
                cases = materialize(other.cases, references, ctx.seed, f"{exercise.id}.{other.id}")
                if other.hidden:
                    drawn += cases
                else:
                    examples += [NotebookExample(args=c.args, kwargs=c.kwargs) for c in cases]
    return examples + drawn if drawn else []


def public_positions(spec_public: list[int] | None, hidden: bool, cases: list[Case]) -> set[int]:
    """The arguments whose values may reach the kernel, to be baked into the program where the
    function cannot be traced with them abstract: only those the spec names (baking every
    argument would let code that JAX cannot trace, NumPy on the inputs, pass as a program).
    For a hidden check they are hidden draws, so the student's code sees them: the kernel is asked
    about hidden checks only after every visible one (`judging.observe_all`), and what it says of
    them (an exception's text) reaches no student-facing output (`grader.judging.reveal`)."""
    return set(spec_public or [])


@dataclass(frozen=True)
class EagerFallback:
    """A call to ask the kernel only when one of `exports` could not be traced: how a function
    judged 'either' (the text allows jax.jit, does not require it) is run as plain Python."""

    exports: tuple[ExportRequest, ...]
    call: CallRequest


def raised_eagerly(function: str, raised: Raised, hint: str, judged: str) -> CheckOutcome:
    """The verdict for a function that raised when called as plain Python: its error, and where the
    error is one of tracing (a function the text does not ask to jit was jitted, or jits a helper,
    so a Python `if`, `float()` or `.bit_length()` met a traced value), the advice that fits: it need
    not be jitted. Never "could not be traced", which is a traced function's verdict."""
    where = where_raised(function, raised)
    teach = None
    if is_tracing_error(raised):
        optional = "plain Python" if judged == "eager" else "jax.jit is optional"
        jitted = f"`{raised.function}`" if raised.function and raised.function != function else "it"
        teach = (f"a traced value met Python code: the exercise does not ask for jax.jit here ({optional}); "
                 f"called without jax.jit, {jitted} gets concrete values that a Python `if`, `float()` or "
                 "NumPy call can use")
        said = f"`{function}` raised {raised.ename}{where}: {raised.evalue}; {teach}"
    else:
        said = f"`{function}` raised {raised.ename}{where}: {raised.evalue}"
    return CheckOutcome(status="error", message=f"{hint}: {said}", cause="raised",
                        raised=RaisedKind(subject=f"`{function}`", ename=raised.ename, evalue=raised.evalue,
                                          line=raised.line, file=raised.file, teach=teach))


class StudentCalls:
    """A student function's answers on a check's cases, the way its text has it judged
    (`FunctionSpec.judged`): 'traced', from its exported program, executed by the verifier;
    'eager', as the kernel reports them from calling it as plain Python; 'either', from its
    program when it traces, else from the eager call (`fallbacks`), asked only then."""

    def __init__(self, planner: Planner, function: str, cases: list[Case], *, judged: str,
                 public: set[int], set_globals: dict[str, Value] | None = None):
        self.function, self.judged = function, judged
        self.program = (ProgramCalls(planner, function, cases, public if judged == "traced" else set(), set_globals)
                        if judged != "eager" else None)
        self.call = (planner.call(function, to_calls(cases), set_globals=set_globals)
                     if judged != "traced" else None)

    def requests(self) -> list[Request]:
        return list(self.program.exports) if self.program else [self.call]  # type: ignore[list-item]

    def runs(self) -> list[ModuleRun]:
        return self.program.runs() if self.program else []

    def fallbacks(self) -> list[EagerFallback]:
        if self.program is None or self.call is None:
            return []
        return [EagerFallback(exports=tuple(self.program.exports), call=self.call)]

    def _eager(self, seen: Seen) -> bool:
        """Whether the answers come from the eager call: always for 'eager', for 'either' when
        an export raised and the call was asked."""
        if self.program is None:
            return True
        if self.call is None or seen.of(self.call) is None:
            return False
        return any((o := seen.of(e)) is not None and o.status == "raised" for e in self.program.exports)

    def wire_values(self, seen: Seen) -> list[Value] | None:
        """The values the eager call reported, as they came (a Python int stays one), or None when
        the answers come from a program."""
        obs = seen.of(self.call) if self.call is not None and self._eager(seen) else None
        return list(obs.result.values) if obs is not None and isinstance(obs.result, ValuesResult) else None

    def answers(self, seen: Seen, hint: str, subject: str | None = None) -> list[Any] | CheckOutcome:
        if not self._eager(seen):
            assert self.program is not None
            return self.program.answers(seen, hint)
        assert self.call is not None
        obs = seen.of(self.call)
        if obs is not None and obs.status == "raised" and obs.raised is not None:
            return raised_eagerly(self.function, obs.raised, hint, self.judged)
        result = result_of(seen, self.call, ValuesResult, subject or f"`{self.function}`", hint)
        if isinstance(result, CheckOutcome):
            return result
        if len(result.values) != len(self.call.calls):  # only a tampered probe answers fewer
            return CheckOutcome(status="error", message=f"{hint}: the probe's answer about `{self.function}` "
                                                        "was unreadable")
        return [from_wire(v) for v in result.values]
