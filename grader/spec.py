"""Assignment specs: what an instructor writes (as TOML) to say what each exercise is checked on.

An assignment is a folder `assignments/<id>/` holding `assignment.toml` (validated by
`AssignmentSpec`), optionally `references.py` (NumPy references and input generators) and
`checks.py` (custom check functions). Nothing about a particular exercise lives in `grader/`.
`grade schema` prints `AssignmentSpec.model_json_schema()` so editors can validate specs.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, JsonValue, PrivateAttr, model_validator

SCHEMA_VERSION = 1

Identifier = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]
PythonName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
ArgType = Literal["py", "float32", "float64", "int32", "int64", "bool"]
Reveal = Literal["details", "pass_fail", "on_hand_in"]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Cases(_Spec):
    """The inputs a check calls with: literal rows, or a seeded generator in references.py."""

    rows: list[list[JsonValue]] | None = Field(
        default=None, description="literal calls: one list of positional arguments per call"
    )
    types: list[ArgType] | None = Field(
        default=None,
        description="how each positional literal is passed: 'py' as a Python scalar (weakly "
        "typed in JAX), a dtype name as an array of that dtype (nested lists give shapes)",
    )
    generator: PythonName | None = Field(
        default=None,
        description="function in references.py, called as f(rng, **params) with a NumPy "
        "Generator seeded from the run's seed; returns a list of grader.Case or argument tuples",
    )
    params: dict[str, JsonValue] = Field(default_factory=dict, description="keyword arguments for the generator")
    draws_as: Identifier | None = Field(default=None, description=(
        "the id of another check of this exercise with the same generator and params: these cases are its "
        "very draws (one seed stream), so that two checks of the same calls (a value check and a `calls` "
        "check of an eager function) cost the kernel one run of them, not two"))
    _domains: dict[str, ArgumentDomain] = PrivateAttr(default_factory=dict)  # the exercise's, set by ExerciseSpec
    _draw_key: str | None = PrivateAttr(default=None)  # "<exercise>.<draws_as>", set by ExerciseSpec

    @property
    def domains(self) -> dict[str, ArgumentDomain]:
        """The exercise's argument domains, by argument name: a generator that takes a `domains`
        keyword draws from them (the spec is their one source)."""
        return dict(self._domains)

    @property
    def draw_key(self) -> str | None:
        """The check whose seed stream draws these cases (`draws_as`), as '<exercise>.<id>'."""
        return self._draw_key

    @model_validator(mode="after")
    def _one_source(self) -> Cases:
        if (self.rows is None) == (self.generator is None):
            raise ValueError("give either rows (with types) or a generator, not both or neither")
        if self.draws_as is not None and self.generator is None:
            raise ValueError("draws_as shares a generator's draws: it needs a generator, not rows")
        if self.rows is not None:
            if self.types is None:
                raise ValueError("rows need types: one per positional argument")
            bad = [i for i, row in enumerate(self.rows) if len(row) != len(self.types)]
            if bad:
                raise ValueError(f"rows {bad} do not have {len(self.types)} arguments (one per type)")
        elif self.types is not None:
            raise ValueError("types only apply to rows; a generator returns typed values itself")
        return self


class Limits(_Spec):
    """Time limits; `--timeout` on the command line overrides `cell_timeout_s`, `probe_timeout_s`
    and `request_timeout_s`."""

    cell_timeout_s: float = Field(default=30.0, gt=0, description="one student cell")
    probe_timeout_s: float = Field(default=30.0, gt=0, description="all the requests of one exercise")
    request_timeout_s: float = Field(default=10.0, gt=0, description=(
        "one request of the probe (tracing and exporting a function, a call, a compile count): a "
        "function that hangs is stopped this soon, not at the end of its exercise's probe_timeout_s"))
    submission_timeout_s: float = Field(default=300.0, gt=0, description="the whole submission")


Judged = Literal["traced", "eager", "either"]
"""How a function is judged, as its exercise's text prescribes it (`FunctionSpec.judged`)."""


def public_field() -> Any:
    return Field(default=None, description=(
        "a traced function's arguments whose values may be sent to the kernel when the function cannot be "
        "traced with them abstract (a Python loop's count, an argument made static): it is then "
        "exported once per value. Default: none"))


class Requirement(_Spec):
    """One sentence of an exercise's text that a submission must satisfy: what a failed check
    shows the student, so they see which sentence they missed."""

    id: Identifier
    text: str = Field(min_length=1, description="one sentence, close to the exercise's own words")


class Equivalent(_Spec):
    """A generated mutant that no check can or should kill, and why (`grade validate` lists it)."""

    mutant: str = Field(min_length=1, description="the generated mutant's name, as `grade validate` prints it")
    reason: str = Field(min_length=1)


class _CheckBase(_Spec):
    id: Identifier = Field(description="unique within its exercise; reported as '<exercise>.<id>'")
    title: str = Field(description="what the check verifies, in a few words")
    verifies: list[Identifier] = Field(
        default_factory=list, description="ids of the exercise's requirements this check verifies")
    points: float = Field(ge=0)
    message: str = Field(description="shown to the student when the check fails: what to fix")
    hidden: bool = Field(
        default=False, description="its inputs are drawn per run from the seed (not in the notebook)"
    )
    reveal: Reveal | None = Field(default=None, description=(
        "what a student sees of a failure. 'details': the message with the call and the values; "
        "'pass_fail': the message and `hint`, never an input or expected value (the instructor's report "
        "keeps the counterexample); 'on_hand_in': not judged by the self-check, only when handed in. "
        "Default: 'on_hand_in' for answers and predictions (answer checks, custom checks that only "
        "observe names), 'pass_fail' for hidden checks, 'details' otherwise"))
    hint: str | None = Field(default=None, description=(
        "shown with a 'pass_fail' failure: a coarse hint the instructor writes, naming no hidden value"))

    @model_validator(mode="after")
    def _hidden_stays_hidden(self) -> _CheckBase:
        if self.hidden and self.reveal == "details":
            raise ValueError("a hidden check cannot have reveal = 'details': its failure would show the hidden "
                             "inputs to the student (use 'pass_fail' with a `hint`, or 'on_hand_in')")
        return self

    @property
    def revealed(self) -> Reveal:
        """The reveal policy in force (the field, else its default)."""
        if self.reveal is not None:
            return self.reveal
        if self.kind == "answer" or (self.kind == "custom" and getattr(self, "call", None) is None):
            return "on_hand_in"
        return "pass_fail" if self.hidden else "details"


ReturnKind = Literal["float", "int", "bool", "python_int", "any"]


class ReturnShape(_Spec):
    """The structure a function must return: a sequence of `length` scalars of these kinds, or
    (no `length`) one scalar of `kinds[0]`."""

    cases: Cases
    public: list[Annotated[int, Field(ge=0)]] | None = public_field()
    length: int | None = Field(default=None, ge=1, description=(
        "a sequence of this many values (what `a, b = f(...)` unpacks); none: one value, not a sequence"))
    kinds: list[ReturnKind] | None = Field(default=None, description=(
        "per value: 'float', 'int', 'bool' (a scalar of that dtype kind: an array, a NumPy or Python scalar), "
        "'python_int' (a Python int, as \"returns a plain Python int\" asks: only a function judged 'eager' "
        "can return one), 'any'"))

    @model_validator(mode="after")
    def _kinds_fit(self) -> ReturnShape:
        if self.kinds is not None and len(self.kinds) != (self.length or 1):
            raise ValueError(f"kinds lists {len(self.kinds)} kinds for {self.length or 1} values")
        if self.length is not None and "python_int" in (self.kinds or []):
            raise ValueError("python_int is the kind of one value returned alone (no length)")
        return self


class InterfaceCheck(_CheckBase):
    """A name exists and is callable; optionally jitted, with an arity, and a return structure."""

    kind: Literal["interface"] = "interface"
    name: PythonName
    jitted: bool = Field(default=False, description="must be a jax.jit result: jax.export accepts it and "
                         "exports it for `cases` (the module's evidence, not an attribute)")
    cases: Cases | None = Field(default=None, description="the call `jitted` exports the function for")
    arity: int | None = Field(default=None, ge=0, description="must accept this many positional arguments")
    returns: ReturnShape | None = None

    @model_validator(mode="after")
    def _jitted_needs_a_call(self) -> InterfaceCheck:
        if self.jitted and self.cases is None:
            raise ValueError("jitted needs cases: the call to export the function for")
        return self


class NumericCheck(_CheckBase):
    """Values returned by `function` agree with a reference within rtol/atol, shapes included."""

    kind: Literal["numeric"] = "numeric"
    function: PythonName
    cases: Cases
    public: list[Annotated[int, Field(ge=0)]] | None = public_field()
    reference: PythonName | None = Field(default=None, description="NumPy function in references.py")
    output: int | None = Field(default=None, ge=0, description="compare only this item of the result")
    set_globals: dict[PythonName, JsonValue] = Field(
        default_factory=dict,
        description="globals the probe sets in the student's namespace while it calls (and then restores): "
        "the answer must follow the arguments, not these",
    )
    rtol: float = Field(default=1e-5, ge=0)
    atol: float = Field(default=1e-8, ge=0)

    @model_validator(mode="after")
    def _expectation(self) -> NumericCheck:
        if not (self.reference or self.cases.generator):
            raise ValueError("needs a reference, or a generator giving expected values")
        if self.hidden and self.cases.generator is None:
            raise ValueError("a hidden check must draw its inputs from a generator")
        return self


class _RunsItsModule(_Spec):
    """For checks that read a module's facts: the module is also run on the check's cases and
    must agree with a reference, so the program whose structure (or inputs) is judged is a
    correct one, not any module a tampered probe sends."""

    reference: PythonName | None = Field(
        default=None, description="NumPy function in references.py the module's values must agree with")
    output: int | None = Field(default=None, ge=0, description="compare only this item of the result")
    rtol: float = Field(default=1e-5, ge=0)
    atol: float = Field(default=1e-5, ge=0)


MIN_GROWTH_SIZES = 3
"""constant_size judges growth over at least this many input sizes: with two, a program one
operation longer for the larger input (a vectorized program's lowering may differ that much) could
not be told from one that grows with every element."""


def _elements(value: Any) -> int:
    """How many numbers a literal argument holds (a scalar 1, a nested list its leaves)."""
    return sum(_elements(v) for v in value) if isinstance(value, list) else 1


def too_few_sizes(sizes: list[int]) -> str:
    """The sentence refusing a constant_size check whose cases give too few input sizes."""
    given = ", ".join(str(s) for s in sizes) or "none"
    return (f"constant_size needs cases of at least {MIN_GROWTH_SIZES} distinct input sizes (numbers of "
            "elements, e.g. 3, 12 and 48) to tell a program that grows with every element from one that "
            f"differs by an operation; these give {len(sizes)} ({given})")


class StructureCheck(_CheckBase, _RunsItsModule):
    """The exported module (or, observed in the kernel, the jaxpr or lowered text) of the
    function for these calls contains / lacks given operations."""

    kind: Literal["structure"] = "structure"
    function: PythonName
    representation: Literal["module", "jaxpr", "lowered"] = Field(
        default="module", description="'module': StableHLO op names (while, case, select...) of the module "
        "the value checks execute; 'jaxpr' / 'lowered': primitives the kernel reports (forgeable)")
    public: list[Annotated[int, Field(ge=0)]] | None = public_field()
    cases: Cases = Field(description="the calls whose modules are inspected (one, for jaxpr / lowered)")
    contains: list[str] = []
    absent: list[str] = []
    constant_size: bool = Field(default=False, description=(
        "the modules for the cases (inputs of at least three different sizes) do not grow with the input: "
        "neither their number of operations nor their loops' trip counts follow the size (rise from each "
        "size to the next, by at least one per extra element): the function handles arrays directly, with no "
        "Python loop, fori_loop or scan over their elements"))
    loop: Literal["value_dependent", "counted_by_input", "over_input"] | None = Field(default=None, description=(
        "with contains = [\"while\"]: a while loop of that kind computes what the function returns. "
        "'value_dependent' (lax.while_loop): its stop reads a value the loop computes from the inputs, "
        "not only a counter (a fori_loop or scan with a fixed trip count fails); 'counted_by_input' "
        "(lax.fori_loop over a traced count): a counter against a bound that comes from an input (a "
        "scan or fori_loop of a length fixed when traced fails; a while_loop counting to the traced "
        "bound lowers to the same program and passes); 'over_input' (lax.scan over an input's elements): "
        "a loop of as many steps as an input array's length, for every case (give cases of two or more "
        "lengths; a Python loop, a loop of a fixed length or a vectorized jnp.cumsum fails; a fori_loop "
        "over range(len(xs)) is the same program and passes)"))
    case_chooses_output: bool = Field(default=False, description=(
        "with contains = [\"case\"]: a case (lax.switch / lax.cond) whose index is computed from the "
        "inputs chooses what the function returns, not one on a constant index or predicate, nor a "
        "dead one beside a jnp.select that computes the answer, nor one that takes the same branch on "
        "every call the check's program gets (give rows that take more than one branch)"))

    @model_validator(mode="after")
    def _something_to_check(self) -> StructureCheck:
        if not (self.contains or self.absent or self.constant_size):
            raise ValueError("needs contains, absent or constant_size")
        if self.constant_size and self.representation != "module":
            raise ValueError("constant_size reads modules: representation must be 'module'")
        if self.constant_size and self.cases.rows is not None:
            sizes = sorted({sum(_elements(arg) for arg in row) for row in self.cases.rows})
            if len(sizes) < MIN_GROWTH_SIZES:
                raise ValueError(too_few_sizes(sizes))
        if self.loop is not None and ("while" not in self.contains or self.representation != "module"):
            raise ValueError("loop reads a module's while loops: contains must list \"while\" and "
                             "representation be 'module'")
        if self.loop == "over_input" and self.cases.rows is not None:
            lengths = {len(arg) for row in self.cases.rows for arg in row if isinstance(arg, list)}
            if len(lengths) < 2:
                raise ValueError("loop = \"over_input\" needs cases whose arrays have two or more lengths (a "
                                 "loop of a fixed length must not pass by matching the one length asked)")
        if self.case_chooses_output and ("case" not in self.contains or self.representation != "module"):
            raise ValueError("case_chooses_output reads a module's cases: contains must list \"case\" and "
                             "representation be 'module'")
        if self.representation != "module" and self.cases.rows is not None and len(self.cases.rows) != 1:
            raise ValueError("a jaxpr or lowered structure check traces exactly one call")
        return self


class CompileLimitCheck(_CheckBase, _RunsItsModule):
    """At most `max_compiles` XLA compilations while `function` runs over the call sequence.

    From the module (the default): the function is a jax.jit result exported with every argument
    traced, and the calls have at most `max_compiles` distinct shapes and dtypes, which is what
    JAX compiles once each. From the kernel: compilations counted there on cleared caches."""

    kind: Literal["compile_limit"] = "compile_limit"
    function: PythonName
    cases: Cases
    max_compiles: int = Field(ge=0)


class CustomCheck(_CheckBase):
    """A function of checks.py judges values from the student's namespace and/or calls.

    It is called as f(observed, **params): `observed` maps each name in `observe` to its value,
    and, when `call` is set, the key "calls" to a list of (Case, result) pairs.
    """

    kind: Literal["custom"] = "custom"
    function: PythonName = Field(description="function in checks.py returning a grader.Verdict")
    observe: list[PythonName] = Field(default_factory=list, description="names whose values it judges")
    call: PythonName | None = Field(default=None, description="a student function to call on `cases`")
    cases: Cases | None = None
    public: list[Annotated[int, Field(ge=0)]] | None = public_field()
    params: dict[str, JsonValue] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _needs_input(self) -> CustomCheck:
        if not self.observe and self.call is None:
            raise ValueError("needs observe (names) or call (a function with cases)")
        if (self.call is None) != (self.cases is None):
            raise ValueError("call and cases go together")
        return self


def same_object_field() -> Any:
    return Field(default_factory=list, description=(
        "groups of argument positions passed one object (the first's), as `_w0 = _b0 = jnp.float32(0.0)` "
        "passes one buffer as w and b; the cases give those positions equal values"))


def _distinct_groups(groups: list[list[int]]) -> None:
    if any(len(group) < 2 or len(set(group)) != len(group) for group in groups):
        raise ValueError("each same_object group names two or more distinct positions")


class EagerCheck(_CheckBase):
    """`function` called eagerly in the kernel, as the chapter's own cells call it (whatever the
    function's mode: the call a self-check cell makes), for what only a call shows: its values
    against a reference, what the cell asserts of a result without a reference value (`at_least`,
    `increasing`), and `same_object` arguments. Values come from the student's process; a hidden
    one's failure shows pass or fail only."""

    kind: Literal["eager"] = "eager"
    function: PythonName
    cases: Cases
    reference: PythonName | None = Field(default=None, description="NumPy function in references.py")
    output: int | None = Field(default=None, ge=0, description="compare only this item of the result")
    rtol: float = Field(default=1e-5, ge=0)
    atol: float = Field(default=1e-8, ge=0)
    same_object: list[list[Annotated[int, Field(ge=0)]]] = same_object_field()
    at_least: float | None = Field(default=None, description=(
        "item `output` of every result is a number at least this (the chapter's \"at least 1 iteration\")"))
    increasing: bool = Field(default=False, description=(
        "item `output` grows strictly from each case's result to the next's (\"a smaller tol should take "
        "more iterations\")"))

    @model_validator(mode="after")
    def _what_it_judges(self) -> EagerCheck:
        if not (self.reference or self.cases.generator or self.at_least is not None or self.increasing):
            raise ValueError("needs a reference, at_least, increasing, or a generator giving expected values "
                             "(the calls a function must make are a `calls` check)")
        if self.hidden and self.cases.generator is None:
            raise ValueError("a hidden check must draw its inputs from a generator")
        _distinct_groups(self.same_object)
        return self


class CallsCheck(_CheckBase):
    """The helpers the text says `function` uses (its `[[exercises.functions]]` entry's `calls`)
    are called while it runs on these cases: called eagerly in the kernel, JAX's caches cleared
    before each call so that a jitted function traces (and calls its helpers) again. "A Python
    loop calling step num_steps times" is a count equal to an argument; "by calling masked_mean"
    is at least one call per call."""

    kind: Literal["calls"] = "calls"
    function: PythonName
    cases: Cases
    same_object: list[list[Annotated[int, Field(ge=0)]]] = same_object_field()

    @model_validator(mode="after")
    def _visible_calls(self) -> CallsCheck:
        if self.hidden and self.cases.generator is None:
            raise ValueError("a hidden check must draw its inputs from a generator")
        _distinct_groups(self.same_object)
        return self


class PureCheck(_CheckBase):
    """`function` changes nothing outside itself while it runs on these cases, traced or eager
    (its `[[exercises.functions]]` entry says `pure = true`): no global of the notebook bound,
    rebound or mutated (a list appended to, a dict, an array or an object changed), no argument
    mutated, no variable of an enclosing function (a closure) changed, NumPy's and Python's global
    random state untouched. Called eagerly in the kernel with JAX's caches cleared first, so a
    jitted function traces during the call: what it does at trace time and at call time both
    show. Printing is not state."""

    kind: Literal["pure"] = "pure"
    function: PythonName
    cases: Cases

    @model_validator(mode="after")
    def _visible_cases(self) -> PureCheck:
        if self.hidden and self.cases.generator is None:
            raise ValueError("a hidden check must draw its inputs from a generator")
        return self


class FormCheck(_CheckBase):
    """The form of a written answer, before what it says: how many values the notebook's `name`
    holds and of which kind ("a list of 8 bools"). It reveals no answer, so the self-check judges
    it; the answer and custom checks of its exercise that read `name` are judged only once it
    holds (until then they are `skipped`, pointing to it: one message, not one per answer)."""

    kind: Literal["form"] = "form"
    name: PythonName = Field(description="the variable holding the answers")
    items: Literal["bool", "letter"] = Field(description=(
        "what each answer must be: 'bool' a bool-like value (True/False, a NumPy or JAX bool, the ints 0 and "
        "1), 'letter' a string of one letter (case and spaces do not matter)"))
    length: int | None = Field(default=None, ge=1, description=(
        "a sequence (list, tuple, 1-D array) of exactly this many answers"))
    keys: list[str | int] | None = Field(default=None, min_length=1, description=(
        "a dict whose keys are among these (an int key matches its str form); a key left out is an answer "
        "not given yet, which the answer checks say, not a wrong form"))

    @model_validator(mode="after")
    def _one_shape(self) -> FormCheck:
        if (self.length is None) == (self.keys is None):
            raise ValueError("give either length (a sequence) or keys (a dict), not both or neither")
        return self


class AnswerCheck(_CheckBase):
    """A written answer (e.g. a quiz): item `key` of the notebook's `name` is one of `accept`."""

    kind: Literal["answer"] = "answer"
    name: PythonName = Field(description="the variable holding the answers: a dict, or a list/tuple")
    key: str | int | None = Field(
        default=None, description="dict key (int keys match their str form) or list index; None: the value itself"
    )
    accept: list[JsonValue] = Field(min_length=1, description="accepted answers; strings compare case- and space-insensitively")


CHECK_SPECS = (InterfaceCheck, NumericCheck, StructureCheck, CompileLimitCheck, CustomCheck, AnswerCheck,
               EagerCheck, FormCheck, CallsCheck, PureCheck)
"""Every kind of check: the one list (grader/checks/ pairs each with its implementation)."""
CHECK_KINDS = frozenset(spec.model_fields["kind"].default for spec in CHECK_SPECS)

CheckSpec = Annotated[Union[CHECK_SPECS], Field(discriminator="kind")]


class ArgumentDomain(_Spec):
    """The values an argument takes in the domain the exercise's text implies ("any positive a",
    "num_steps steps"): hidden checks draw from it, and `grade validate` reports it. A draw holds
    every `values` entry, each edge with its `around` neighbours, both bounds, then random points
    between the bounds (on `scale`) up to the check's count."""

    argument: Identifier = Field(description="the argument's name in the exercise's text")
    functions: list[PythonName] = Field(min_length=1, description="the student functions that take it")
    position: int = Field(ge=0, description="its position in their calls")
    positions: dict[PythonName, Annotated[int, Field(ge=0)]] = Field(default_factory=dict, description=(
        "where a function takes it at another position than `position` (`decay` is ema_step's third "
        "argument and ema's second: position = 2, positions = {ema = 1})"))
    low: float = Field(description="the smallest value drawn")
    high: float = Field(description="the largest value drawn (beyond the notebook's, where the text allows)")
    scale: Literal["linear", "log"] = Field(default="linear", description=(
        "how random points spread between low and high: 'log' for a range of magnitudes"))
    integer: bool = Field(default=False, description="whole numbers only (a count)")
    values: list[float] = Field(default_factory=list, description=(
        "always drawn, inside or outside [low, high]: 0 and 1 for a count, 0 for a learning rate"))
    edges: list[float] = Field(default_factory=list, description=(
        "where the answer changes form (a bracket's start, x0 = 1 below a = 1): drawn on and around"))
    around: list[float] = Field(default_factory=list, description="offsets drawn beside each edge (absolute)")
    why: str = Field(min_length=1, description="why these bounds: what the text says, or what was measured")

    def position_in(self, function: str) -> int:
        """Its position in `function`'s calls."""
        return self.positions.get(function, self.position)

    @model_validator(mode="after")
    def _bounds(self) -> ArgumentDomain:
        strays = sorted(set(self.positions) - set(self.functions))
        if strays:
            raise ValueError(f"positions names functions not in functions: {', '.join(strays)}")
        if self.low > self.high:
            raise ValueError(f"low {self.low:g} is above high {self.high:g}")
        if self.scale == "log" and self.low <= 0:
            raise ValueError("a log scale needs low > 0 (put 0 in values)")
        if self.integer and not all(float(v).is_integer() for v in [self.low, self.high, *self.values,
                                                                      *self.edges, *self.around]):
            raise ValueError("an integer domain takes whole numbers only")
        return self


class CallRule(_Spec):
    """A helper the text says a function uses ("a Python loop calling step", "by calling
    masked_mean"): a `calls` check counts its calls while the function runs."""

    name: PythonName = Field(description="the helper, as the notebook names it")
    count_argument: int | None = Field(default=None, ge=0, description=(
        "the argument position whose value the count must equal (\"calling step num_steps times\"); "
        "none: at least one call each time the function runs"))
    uses_result: bool = Field(default=False, description=(
        "what the function returns depends on what the helper returns: called again with the helper's "
        "results moved by one, its answer must change (a loop that calls step and throws its results away, "
        "computing the answer some other way, fails). Not for a helper whose result only shapes the work "
        "(bucket_size: any padding gives the same mean)"))


class FunctionSpec(_Spec):
    """How the text prescribes a function, so that it is judged that way and no other: every
    function a check calls is declared once, in the exercise whose text defines it."""

    name: PythonName
    judged: Judged = Field(description=(
        "'traced': the text requires jax.jit or a construct (lax.while_loop, lax.switch...): its values come "
        "from its exported program, and structure, compile and jitted checks read that program. 'eager': the "
        "text prescribes plain Python (a Python loop, a Python int): it is called in the kernel as a cell "
        "calls it, never traced. 'either': the text allows both (\"it may be jitted\", a helper it never asks to "
        "jit): traced when it traces, else called eagerly, with the same value checks; no check may require "
        "its program"))
    why: str = Field(min_length=1, description="the words of the text that decide `judged`")
    pure: bool = Field(default=False, description=(
        "the text calls it pure: a `pure` check verifies that it changes no global, argument or closure"))
    calls: list[CallRule] = Field(default_factory=list, description=(
        "the helpers the text says it calls: a `calls` check verifies them"))

    @model_validator(mode="after")
    def _distinct_helpers(self) -> FunctionSpec:
        names = [rule.name for rule in self.calls]
        if len(set(names)) != len(names):
            raise ValueError("each helper once in calls")
        if self.name in names:
            raise ValueError("a function cannot be its own helper")
        return self


PROGRAM_CHECKS = ("structure", "compile_limit")
"""Check kinds that read a function's program (or trace it): only for a function judged 'traced'."""


def called_functions(check: Any) -> list[str]:
    """The student functions a check calls (an interface check's name, a custom check's `call`)."""
    if check.kind == "interface":
        return [check.name]
    found = [getattr(check, "function", None)] if check.kind != "custom" else [check.call]
    return [name for name in found if name]


def _mode_conflicts(check: Any, function: FunctionSpec) -> str | None:
    """Why a check cannot judge a function of this mode, or None."""
    returns = getattr(check, "returns", None)
    if function.judged != "eager" and returns is not None and "python_int" in (returns.kinds or []):
        return (f"asks `{function.name}` for a Python int, but `{function.name}` is judged {function.judged!r}: "
                "only a function called as plain Python returns one (a traced program returns arrays)")
    if function.judged == "traced":
        return None
    needs_program = (check.kind in PROGRAM_CHECKS or (check.kind == "interface" and check.jitted))
    if needs_program:
        return (f"judges `{function.name}`'s program, but `{function.name}` is judged {function.judged!r} "
                "(its text does not require jax.jit): only a 'traced' function has a program to check")
    public = getattr(check, "public", None) or (returns.public if returns is not None else None)
    if public:
        return (f"bakes public values into `{function.name}`'s program, but `{function.name}` is judged "
                f"{function.judged!r}: remove `public`")
    return None


class ExerciseSpec(_Spec):
    id: Identifier
    title: str
    points: float = Field(ge=0)
    requirements: list[Requirement] = Field(
        default_factory=list, description="the exercise's sentences; `grade validate` fails when one has no check")
    checks: list[CheckSpec] = Field(min_length=1)
    equivalent: list[Equivalent] = Field(
        default_factory=list, description="generated mutants that keep full marks on purpose, each with its reason")
    domains: list[ArgumentDomain] = Field(default_factory=list, description=(
        "per argument, the domain the text implies: generators that take `domains` draw hidden inputs from it"))
    functions: list[FunctionSpec] = Field(default_factory=list, description=(
        "the functions this exercise's text defines, each with how it is judged (traced, eager or either), "
        "whether it is pure and the helpers it must call"))

    def requirement(self, requirement_id: str) -> Requirement:
        return next(r for r in self.requirements if r.id == requirement_id)

    @model_validator(mode="after")
    def _consistent(self) -> ExerciseSpec:
        total = sum(c.points for c in self.checks)
        if abs(total - self.points) > 1e-9:
            raise ValueError(f"check points add up to {total:g}, not the exercise's {self.points:g}")
        ids = [c.id for c in self.checks]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate check ids: {', '.join(dupes)}")
        known = [r.id for r in self.requirements]
        if len(set(known)) != len(known):
            raise ValueError("requirement ids must be unique within an exercise")
        unknown = sorted({f"{c.id} -> {r}" for c in self.checks for r in c.verifies if r not in known})
        if unknown:
            raise ValueError(f"checks verify requirements the exercise does not list: {', '.join(unknown)}")
        arguments = [d.argument for d in self.domains]
        if len(set(arguments)) != len(arguments):
            raise ValueError("one domain per argument within an exercise")
        called = {getattr(c, f, None) for c in self.checks for f in ("function", "name", "call")}
        strays = sorted({f"{d.argument} -> {f}" for d in self.domains for f in d.functions if f not in called})
        if strays:
            raise ValueError(f"domains name functions no check of the exercise calls: {', '.join(strays)}")
        for domain in self.domains:
            for check in self.checks:
                name = next(iter(called_functions(check)), None)
                rows = getattr(getattr(check, "cases", None), "types", None)
                if name in domain.functions and rows is not None and domain.position_in(name) >= len(rows):
                    raise ValueError(f"domain {domain.argument}: position {domain.position_in(name)} is beyond "
                                     f"`{name}`'s arguments ({check.id} passes {len(rows)}); give positions = "
                                     f"{{{name} = ...}} where it takes {domain.argument} elsewhere")
        domains = {d.argument: d for d in self.domains}
        for check in self.checks:
            returns = getattr(check, "returns", None)
            for cases in (getattr(check, "cases", None), returns.cases if returns is not None else None):
                if cases is not None:
                    cases._domains = domains
        self._shared_draws()
        return self

    def _shared_draws(self) -> None:
        """`cases.draws_as` names another check of this exercise that draws from the same
        generator with the same params (so the shared draws are what both checks say they are)."""
        by_id = {c.id: c for c in self.checks}
        for check in self.checks:
            cases = getattr(check, "cases", None)
            if cases is None or cases.draws_as is None:
                continue
            named = by_id.get(cases.draws_as)
            other = getattr(named, "cases", None)
            if cases.draws_as == check.id or other is None or other.generator is None:
                raise ValueError(f"{check.id}: draws_as names no other check of this exercise with a generator "
                                 f"({cases.draws_as!r})")
            if named.hidden != check.hidden:  # type: ignore[union-attr]
                raise ValueError(f"{check.id}: draws_as {cases.draws_as}: a hidden check and a visible one never "
                                 "share draws (the visible one would show the hidden inputs)")
            if other.draws_as is not None:
                raise ValueError(f"{check.id}: draws_as names {cases.draws_as}, which draws as "
                                 f"{other.draws_as} itself: name {other.draws_as}")
            if (other.generator, other.params) != (cases.generator, cases.params):
                raise ValueError(f"{check.id}: draws_as {cases.draws_as} needs its generator and params "
                                 f"({other.generator}, {other.params}); these are {cases.generator}, {cases.params}")
            cases._draw_key = f"{self.id}.{cases.draws_as}"


Lesson = Literal["control_flow", "static_arguments"]


class AssignmentSpec(_Spec):
    """An assignment: its exercises, their checks, and its time limits."""

    schema_version: int = Field(description=f"format version of this file; this grader reads {SCHEMA_VERSION}")
    id: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]*$")]
    title: str
    limits: Limits = Limits()
    sections: dict[Lesson, Annotated[str, Field(min_length=1, max_length=60)]] = Field(
        default_factory=dict, description=(
            "where the course teaches what the grader's advice on tracing errors cites, as the advice cites "
            "it: control_flow (lax.cond / lax.switch / lax.while_loop for a traced value), static_arguments "
            "(static_argnums and what they cost), e.g. {control_flow = \"section 2.4\"}; none: no citation"))
    exercises: list[ExerciseSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_exercises(self) -> AssignmentSpec:
        ids = [e.id for e in self.exercises]
        if len(set(ids)) != len(ids):
            raise ValueError("exercise ids must be unique")
        return self

    @model_validator(mode="after")
    def _functions_declared(self) -> AssignmentSpec:
        """Every function is declared once, and judged only as its mode allows."""
        names = [f.name for e in self.exercises for f in e.functions]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"functions declared twice: {', '.join(twice)} (declare each in the exercise that "
                             "defines it)")
        declared = self.functions
        problems = []
        judged: dict[str, set[str]] = {}
        for exercise in self.exercises:
            for check in exercise.checks:
                for name in called_functions(check):
                    judged.setdefault(name, set()).add(check.kind)
                    function = declared.get(name)
                    if function is not None and (conflict := _mode_conflicts(check, function)) is not None:
                        problems.append(f"{exercise.id}.{check.id} {conflict}")
                    if function is not None and check.kind == "calls" and check.cases.rows is not None:
                        arity = min((len(row) for row in check.cases.rows), default=0)
                        problems += [f"`{function.name}`'s count_argument {rule.count_argument} for {rule.name} names "
                                     f"no argument of {exercise.id}.{check.id}'s rows, which pass {arity} (positions "
                                     "count from 0)" for rule in function.calls
                                     if rule.count_argument is not None and rule.count_argument >= arity]
        for function in declared.values():
            kinds = judged.get(function.name, set())
            if function.pure != ("pure" in kinds):
                problems.append(f"`{function.name}` is declared pure but no `pure` check judges it" if function.pure
                                else f"a `pure` check judges `{function.name}`, which is not declared pure = true")
            if bool(function.calls) != ("calls" in kinds):
                problems.append(f"`{function.name}` declares helpers it calls but no `calls` check judges them"
                                if function.calls else
                                f"a `calls` check judges `{function.name}`, which declares no helpers in calls")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def undeclared(self) -> list[str]:
        """What `grade validate` refuses: each function a check calls that no `[[exercises.functions]]`
        declares (the spec still loads, judging it 'traced', as specs did before modes were declared)."""
        declared = self.functions
        said = []
        for exercise in self.exercises:
            for check in exercise.checks:
                for name in called_functions(check):
                    if name not in declared and not any(f"`{name}`" in line for line in said):
                        said.append(f"{exercise.id}.{check.id} calls `{name}`, which no [[exercises.functions]] "
                                    "declares: say how its text has it judged (judged = \"traced\", \"eager\" or "
                                    "\"either\", with why)")
        return said

    @property
    def functions(self) -> dict[str, FunctionSpec]:
        """Every declared function, by name."""
        return {f.name: f for e in self.exercises for f in e.functions}

    def judged(self, function: str) -> Judged:
        """How `function` is judged (a function no check declares: 'traced', the spec's default
        before modes were declared; validation requires a declaration for every function a check calls)."""
        declared = self.functions.get(function)
        return declared.judged if declared is not None else "traced"

    @property
    def max_score(self) -> float:
        return sum(e.points for e in self.exercises)


def describe_errors(errors: list[dict[str, Any]]) -> list[str]:
    """Pydantic errors as plain lines: `exercises[2].checks[0].rtol: must be >= 0`."""
    lines = []
    for err in errors:
        path = ""
        for part in err["loc"]:
            if isinstance(part, int):
                path += f"[{part}]"
            elif part in CHECK_KINDS:
                continue  # the union tag pydantic inserts; the kind is already in the file
            else:
                path += f".{part}" if path else str(part)
        msg = err["msg"]
        ctx = err.get("ctx") or {}
        if err["type"] == "greater_than_equal":
            msg = f"must be >= {ctx.get('ge')}"
        elif err["type"] == "greater_than":
            msg = f"must be > {ctx.get('gt')}"
        elif err["type"] == "extra_forbidden":
            msg = "is not a known field"
        elif err["type"] == "missing":
            msg = "is required"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        lines.append(f"{path or '(top level)'}: {msg}")
    return lines
