"""The derived mutant families, and the honest variants that must keep full marks.

- `argument_ignored`: an argument of an interface function replaced by a constant (each value
  the checks pass there, up to three, and its default): a check must vary it enough to notice.
- `construct_removed`: what the spec requires (jax.jit, a traced argument, a `case` or a `while`
  in the program, whole-array code) taken away while the values stay right: only a structure or
  compile check can catch it. Also the function computed in a host callback.
- `lookalike`: the construct the text names replaced by one that lowers the same way (a
  `fori_loop` or `scan` for a `while_loop`, a `switch` that does not choose the answer beside a
  `jnp.select` that does): `grader/course/mutation/lookalike.py`.
- `overfit`: right on the inputs the checks are known to sample, wrong elsewhere in the domain
  the text implies (an argument clipped, an iteration count capped, an iteration peeled, the
  visible inputs special-cased): `grader/course/mutation/overfit.py`.
- `output_perturbed`: each output leaf off by a relative 1e-3 and 1e-1, an integer leaf off by
  one, two leaves swapped, a leaf given an extra axis or transposed; a value read by a check
  (a prediction, a quiz answer) changed item by item.
- `honest`: the reference in another container (a tuple for a list and a list for a tuple,
  NamedTuple, registered dataclass), with its helpers renamed, with x64 enabled, rounded
  differently, and in the forms each function's mode allows (un-jitted, on the host, a Python
  loop, `from jax import numpy as np`: `grader/course/mutation/honest_forms.py`): these must keep
  full marks.

A family that changes a construct declares the constructs it knows how to change (`REMOVES_CASE`,
`REMOVES_LOOP` here, the tuples of overfit.py and lookalike.py) and changes those the reference's
function uses (`introspect.FunctionFacts.uses`). Where the spec asks for a mutant the reference gives
it nothing to change in, the mutant is recorded as not applicable, with the reason, and never graded;
so is, as a safety net, any cell whose replacements (`with _replaced(...)`) touch no construct the
function uses: it would be the reference itself.
"""

from __future__ import annotations

import io
import keyword
import re
import tokenize

from pydantic import BaseModel, Field

from grader.course.mutation import honest_forms, lookalike, overfit, snippets
from grader.course.mutation.interface import FunctionUse, Interface, NameUse
from grader.course.mutation.introspect import FunctionFacts, ReferenceFacts, changeable, unchangeable
from grader.course.mutation.sink import Family

FAMILIES: tuple[Family, ...] = ("argument_ignored", "construct_removed", "lookalike", "overfit", "output_perturbed",
                                "honest")

WHILE_UNROLL = 100  # steps a while loop is unrolled to when it is removed (the checks' loops stop sooner)
MAX_FORI_BOUND = 1000
REMOVES_CASE = ("switch", "cond")  # without_case computes them as a select
REMOVES_LOOP = ("while_loop", "fori_loop", "scan", "map")  # without_while unrolls them in Python
REMOVES_VMAP = ("vmap",)  # without_vmap maps with lax.map instead: a loop over the elements
_REPLACED = re.compile(r"with _replaced\((?P<names>[^)]*)\):")


class DerivedMutant(BaseModel):
    """A submission derived from the reference: `submission` is its whole text."""

    name: str = Field(description="<target>.<what changed>: what an `equivalent` declaration names")
    family: Family
    summary: str
    exercises: list[str] = Field(description="where it must lose points (an honest variant: keep them all)")
    expected: list[str] = Field(default_factory=list, description=(
        "a mutant: the checks that should kill it; an honest variant: the checks it must pass (all when empty)"))
    submission: str
    not_applicable: str | None = Field(default=None, description=(
        "why this mutant cannot be made of the reference (it uses no construct the family can change): "
        "then it is never graded, and `submission` is empty or the cell that would change nothing"))

    @property
    def honest(self) -> bool:
        return self.family == "honest"


def _label(code: str) -> str:
    """A constant's name in a mutant's name: its number, or `array`."""
    number = re.fullmatch(r"(?:_np\.\w+\()?(-?[\w.+-]+)\)?", code)
    return number.group(1) if number and not code.startswith("_np.asarray") else "array"


class _Builder:
    def __init__(self, reference: str, interface: Interface, facts: ReferenceFacts):
        self.reference = reference.rstrip("\n") + "\n\n"
        self.interface = interface
        self.facts = facts
        self.made: list[DerivedMutant] = []

    def add(self, name: str, family: Family, summary: str, use: FunctionUse | NameUse, body: str,
            expected: list[str] | None = None, target: str | None = None) -> None:
        taken = {m.name for m in self.made}
        base, n = name, 2
        while name in taken:  # two constants with one label (two arrays)
            name, n = f"{base}_{n}", n + 1
        code = snippets.cell(name, target or use.name, body)
        replaced = _REPLACED.search(code)
        if replaced is not None:  # the safety net: a cell that replaces nothing the function calls
            names = re.findall(r"(\w+)=", replaced["names"])
            facts = self.facts.functions.get(target or use.name)
            used = facts.uses() if facts is not None else None
            if used is not None and not used & set(names):
                self.not_applicable(name, family, use, (
                    f"its cell replaces {', '.join(names)}, which {target or use.name} never calls: it would be the "
                    "reference itself"), expected, summary, submission=self.reference + code)
                return
        self.made.append(DerivedMutant(name=name, family=family, summary=summary, exercises=list(use.exercises),
                                       expected=sorted(expected if expected is not None else use.checks),
                                       submission=self.reference + code))

    def not_applicable(self, name: str, family: Family, use: FunctionUse | NameUse, reason: str,
                       expected: list[str] | None = None, summary: str = "", submission: str = "") -> None:
        self.made.append(DerivedMutant(name=name, family=family, summary=summary or reason,
                                       exercises=list(use.exercises),
                                       expected=sorted(expected if expected is not None else use.checks),
                                       submission=submission, not_applicable=reason))

    # ------------------------------------------------------------------ argument ignored

    def arguments_ignored(self, use: FunctionUse, facts: FunctionFacts | None) -> None:
        defaults = facts.defaults if facts else {}
        for position in range(use.arity):
            constants = list(use.constants.get(position, []))
            if position in defaults and defaults[position] not in constants:
                constants.append(defaults[position])
            for constant in constants:
                label = _label(constant)
                self.add(f"{use.name}.arg{position}_fixed_{label}", "argument_ignored",
                         f"{use.name} ignores argument {position + 1} and uses {label} instead", use,
                         snippets.argument_fixed(use.name, position, constant))

    # ------------------------------------------------------------------ construct removed

    def constructs_removed(self, use: FunctionUse, facts: FunctionFacts | None) -> None:
        name = use.name
        requires_jit = use.jitted_checks + use.compile_checks
        if requires_jit and facts is not None and facts.jitted:
            self.add(f"{name}.without_jit", "construct_removed", f"{name} is not wrapped in jax.jit", use,
                     snippets.without_jit(name), requires_jit)
        elif requires_jit and facts is not None and not facts.error:
            self.not_applicable(f"{name}.without_jit", "construct_removed", use,
                                f"{name} is not a jax.jit result in the reference: there is no jit to take away",
                                requires_jit)
        for position in use.varying:
            self.add(f"{name}.arg{position}_static", "construct_removed",
                     f"{name} marks argument {position + 1} static", use,
                     snippets.made_static(name, position), use.compile_checks)
        ops = {op: [n.check for n in use.structure if op in n.contains] for n in use.structure for op in n.contains}
        if "case" in ops:
            cases = changeable(facts, REMOVES_CASE)
            if cases:
                self.add(f"{name}.without_case", "construct_removed",
                         f"{name} computes every branch and selects (no {' / '.join('lax.' + c for c in cases)})",
                         use, snippets.without_case(name, cases), ops["case"])
            else:
                self.not_applicable(f"{name}.without_case", "construct_removed", use, unchangeable(
                    name, facts, REMOVES_CASE, "case this family can compute as a select"), ops["case"])
        if "while" in ops:
            loops = changeable(facts, REMOVES_LOOP)
            if loops:
                bound = min(max(use.largest_int, 1), MAX_FORI_BOUND)
                self.add(f"{name}.without_while", "construct_removed",
                         f"{name} unrolls its loop in Python (no {' / '.join('lax.' + c for c in loops)})", use,
                         snippets.without_while(name, WHILE_UNROLL, bound, loops), ops["while"])
            else:
                self.not_applicable(f"{name}.without_while", "construct_removed", use, unchangeable(
                    name, facts, REMOVES_LOOP, "loop this family can unroll"), ops["while"])
        sized = [n.check for n in use.structure if n.constant_size]
        if sized:
            self.add(f"{name}.loop_over_elements", "construct_removed",
                     f"{name} loops over the array's elements in Python", use,
                     snippets.loop_over_elements(name), sized)
            used = facts.uses() if facts is not None else None
            if used is not None and used & set(REMOVES_VMAP):  # an extra form of the same mutant, where it can be
                self.add(f"{name}.without_vmap", "construct_removed",
                         f"{name} maps over the elements with lax.map (a loop) instead of jax.vmap", use,
                         snippets.without_vmap(name), sized)
        if use.structure:
            self.add(f"{name}.host_callback", "construct_removed",
                     f"{name} computes its values in a host callback", use,
                     snippets.host_callback(name), [n.check for n in use.structure])

    # ------------------------------------------------------------------ output perturbed

    def outputs_perturbed(self, use: FunctionUse, facts: FunctionFacts | None) -> None:
        if facts is None or facts.error or not facts.leaves:
            return
        name = use.name
        for j, leaf in enumerate(facts.leaves):
            if leaf.kind == "float":
                for rel in ("1e-3", "1e-1"):
                    self.add(f"{name}.out{j}_rel_{rel}", "output_perturbed",
                             f"output {j} of {name} is off by a relative {rel}", use,
                             snippets.output_changed(name, f"leaves[{j}] = leaves[{j}] * (1 + {rel})"))
            if leaf.kind == "int":
                for sign, word in (("+", "plus"), ("-", "minus")):
                    self.add(f"{name}.out{j}_{word}_1", "output_perturbed",
                             f"output {j} of {name} is off by {sign}1", use,
                             snippets.output_changed(name, f"leaves[{j}] = leaves[{j}] {sign} 1"))
            if leaf.kind != "other":
                self.add(f"{name}.out{j}_extra_axis", "output_perturbed",
                         f"output {j} of {name} has an extra leading axis", use,
                         snippets.output_changed(name, snippets.extra_axis(j, leaf.ndim)))
            if leaf.ndim >= 2:
                self.add(f"{name}.out{j}_transposed", "output_perturbed", f"output {j} of {name} is transposed",
                         use, snippets.output_changed(name, f"leaves[{j}] = _jnp.swapaxes(leaves[{j}], -1, -2)"))
        if len(facts.leaves) >= 2:
            self.add(f"{name}.out0_out1_swapped", "output_perturbed", f"outputs 0 and 1 of {name} are swapped",
                     use, snippets.output_changed(name, "leaves[0], leaves[1] = leaves[1], leaves[0]"))

    def values_changed(self, use: NameUse) -> None:
        value = self.facts.values.get(use.name)
        if value is None:
            return
        if use.keys:  # answers: each key given an answer it does not accept
            for key, accepted in use.keys.items():
                wrong = _wrong_answer(accepted)
                if key == "None":
                    new = wrong
                else:
                    new = f"{{**{use.name}, {key}: {wrong}}}" if value.startswith("{") else \
                        f"[{wrong} if _k == {key} else _v for _k, _v in enumerate({use.name})]"
                self.add(f"{use.name}.answer_{_label(key)}_changed", "output_perturbed",
                         f"{use.name}[{key}] answered {wrong}", use, snippets.value_changed(use.name, new),
                         [c for c in use.checks])
            return
        items = re.findall(r"\b(True|False)\b", value)
        if value.startswith("[") and items:
            for k in range(len(items)):
                new = f"[(not _v) if _k == {k} else _v for _k, _v in enumerate({use.name})]"
                self.add(f"{use.name}.item{k + 1}_flipped", "output_perturbed",
                         f"item {k + 1} of {use.name} flipped", use, snippets.value_changed(use.name, new))

    # ------------------------------------------------------------------ honest variants

    def honest_containers(self, use: FunctionUse, facts: FunctionFacts | None) -> None:
        if facts is None or facts.error or facts.container not in ("tuple", "list") or len(facts.leaves) < 2:
            return
        # judged by the checks that call it: the reference's other functions may rely on its
        # container (train_fori's fori_loop carries step's tuple)
        for kind in snippets.CONTAINERS:
            if kind == facts.container:
                continue
            self.add(f"{use.name}.as_{kind}", "honest", f"{use.name} returns its outputs as a {kind}", use,
                     snippets.container(use.name, kind, len(facts.leaves)))

    def honest_whole(self) -> None:
        every = NameUse(name="reference", exercises=self._all_exercises())
        renamed = rename_helpers(self.reference, self._interface_names())
        if renamed != self.reference:
            self.made.append(DerivedMutant(name="reference.helpers_renamed", family="honest",
                                           summary="the reference with every helper renamed", exercises=every.exercises,
                                           submission=renamed))
        self.made.append(DerivedMutant(name="reference.x64", family="honest", summary="the reference with x64 enabled",
                                       exercises=every.exercises, submission=snippets.X64 + self.reference))
        for use in self.interface.functions.values():
            facts = self.facts.functions.get(use.name)
            if facts and not facts.error and any(leaf.kind == "float" for leaf in facts.leaves):
                floats = [j for j, leaf in enumerate(facts.leaves) if leaf.kind == "float"]
                code = "; ".join(f"leaves[{j}] = leaves[{j}] * (1 + 2e-7)" for j in floats)
                # judged by the checks that call it: a constant bias compounds in the reference's loops
                self.add(f"{use.name}.rounded_differently", "honest",
                         f"{use.name}'s float outputs off by a relative 2e-7 (float32 rounding of an "
                         "equivalent formula)", use, snippets.output_changed(use.name, code))

    def _all_exercises(self) -> list[str]:
        seen: list[str] = []
        for use in [*self.interface.functions.values(), *self.interface.names.values()]:
            seen += [e for e in use.exercises if e not in seen]
        return seen

    def _interface_names(self) -> set[str]:
        return set(self.interface.functions) | set(self.interface.names) | set(self.interface.helpers)


def _wrong_answer(accepted: list[str]) -> str:
    """A plausible wrong answer: another letter of a multiple choice, else a changed value."""
    plain = [a.strip("'\"").strip().upper() for a in accepted]
    if all(len(a) == 1 and a.isalpha() for a in plain):
        return repr(next(c for c in "ABCDEFGH" if c not in plain))
    return repr("not " + plain[0])


def rename_helpers(source: str, keep: set[str]) -> str:
    """The module with every top-level name it defines (but the interface's and imports) renamed,
    token by token, so comments and cell markers stay."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    defined: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    helpers = {n for n in defined - keep if not keyword.iskeyword(n) and not n.startswith("__")}
    if not helpers:
        return source
    out: list[tokenize.TokenInfo] = []
    previous = None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.NAME and token.string in helpers and not (previous and previous.string == "."):
            token = token._replace(string=f"renamed_{token.string}")
        if token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            previous = token
        out.append(token)
    return tokenize.untokenize(out)


def derive_mutants(reference: str, interface: Interface, facts: ReferenceFacts) -> list[DerivedMutant]:
    """Every derived mutant and honest variant of an assignment, in a stable order."""
    build = _Builder(reference, interface, facts)
    for use in interface.functions.values():
        function_facts = facts.functions.get(use.name)
        build.arguments_ignored(use, function_facts)
        build.constructs_removed(use, function_facts)
        build.outputs_perturbed(use, function_facts)
        lookalike.derive(build, use, function_facts)
        overfit.derive(build, use, function_facts)
        build.honest_containers(use, function_facts)
    for name_use in interface.names.values():
        build.values_changed(name_use)
    honest_forms.derive_all(build, interface, facts)
    build.honest_whole()
    return build.made
