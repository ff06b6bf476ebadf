"""What the class got wrong, similarity that accuses no one honest, and names as written (issue 32).

- Per check, the share that failed and the failures grouped by message (numbers and quoted names
  set aside) and by compiled program (grader.outputs.classpage.analysis), on the class page and in
  `grade report OUT --json`; nothing of it reaches a student.
- With the reference's fingerprints (grader.term.reference_programs), students who wrote the
  reference's program, or each the same small change of it, are no group; copies of an unusual
  program, renamed or with independent lines reordered (the fingerprint's canonical order), are.
- Names in any script are shown as written on the class page, escaped, and only look-alikes marked.

Reports are built by hand except in the tests marked `kernel`, which grade real submissions.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export, lax
from test_classreport import make_report, not_answered, without_our_script, without_section
from warm_grading import grade_warm

from grader import GradeOptions
from grader.errors import UsageError
from grader.views.page import page as feedback_page
from grader.outputs.classpage.analysis import ClassAnalysis, analyze, merged_message, message_key
from grader.outputs.classpage.markup import looks_like_another
from grader.outputs.classreport import write_class_report
from grader.outputs.gradebook import Gradebook
from grader.outputs.names import OutputFolder, feedback_file_name, report_file_name
from grader.report import ProgramFingerprint, Report
from grader.term import reference_programs
from grader.term.report_command import analyze_batch
from grader.term.report_command import report as report_command
from grader.term.similarity import MIN_BEYOND, similar_groups
from grader.verifier.inside import fingerprint

# ============================================================================= what the class got wrong

TRACED = ("`f` could not be traced by jax.jit: TracerBoolConversionError at line {line} of its cell: "
          "`if {name} > 0:` is a Python `if` on a traced value")
VALUES = "f(x) should be right: f({x}) returned {got}, expected {want}"
B = ("b.one", "b.two")  # exercise b: everyone who answered passed it


def wrong_class() -> dict[str, Report]:
    """Exercise a: four students fail a.one two ways (two ways each of numbers and names), one
    passes, one left it blank, one is in error; c1 and c2 wrote the same program, ana and bo none."""
    def prints(digest: str) -> list[ProgramFingerprint]:
        return [ProgramFingerprint(exercise="a", function="f", digest=digest, shingles=[1, 2, 3]),
                ProgramFingerprint(exercise="a", function="g", digest="g-" + digest, shingles=[4])]

    return {
        "ana": make_report("ana", {"a.two", *B}, messages={"a.one": TRACED.format(line=4, name="x")}),
        "bo": make_report("bo", {"a.two", *B}, messages={"a.one": TRACED.format(line=7, name="income")}),
        "c1": make_report("c1", {"a.two", *B}, messages={"a.one": VALUES.format(x=3.0, got=7.5, want=9.0)},
                          programs=prints("d1")),
        "c2": make_report("c2", {"a.two", *B}, messages={"a.one": VALUES.format(x=4.0, got=8, want="16.0")},
                          programs=prints("d1")),
        "eve": make_report("eve", {"a.one", "a.two", *B}, programs=prints("ok")),
        "fay": make_report("fay", error="the notebook is not valid JSON"),
        "gus": make_report("gus", set(B), messages={"a.one": not_answered(), "a.two": not_answered()}),
    }


def test_the_share_that_failed_is_among_the_students_the_check_judged() -> None:
    analysis = analyze(wrong_class(), feedback_file=feedback_file_name)
    one = next(c for c in analysis.checks if c.id == "a.one")
    # fay's report in error ran no check, gus did not answer exercise a: neither is judged
    assert (one.judged, one.failed, one.share, one.statuses) == (5, 4, 0.8, {"failed": 4})
    assert analysis.checks[0].id == "a.one"  # the largest share first
    assert next(c for c in analysis.checks if c.id == "a.two").failed == 0


def test_failures_are_grouped_by_their_message_without_numbers_and_names() -> None:
    one = next(c for c in analyze(wrong_class(), feedback_file=feedback_file_name).checks if c.id == "a.one")
    traced, values = one.by_message
    assert (traced.students, traced.example) == (["ana", "bo"], "ana")
    assert traced.example_feedback == "feedback/ana.html"
    # what both got is kept word for word (`f`, `if`), what differs is "…" (the line, the student's code)
    assert traced.message == ("`f` could not be traced by jax.jit: TracerBoolConversionError at line … of "
                              "its cell: … is a Python `if` on a traced value")
    assert values.students == ["c1", "c2"]
    assert values.message == "f(x) should be right: f(…) returned …, expected …"
    assert message_key(TRACED.format(line=1, name="a")) == message_key(TRACED.format(line=22, name="b"))
    assert message_key(VALUES.format(x=1, got=2, want=3)) != message_key(TRACED.format(line=1, name="a"))
    # a run of numbers (an array) is one part; a name with digits (float32) is no number
    assert message_key("got [1. 2. 3.] as float32") == message_key("got [4, 5] as float32")
    assert message_key("got 1 as float32") != message_key("got 1 as float64")
    assert merged_message(["a 'x' and 1", "a 'y' and 1"]) == "a … and 1"


def test_failures_are_grouped_by_their_compiled_program() -> None:
    reports = wrong_class()
    reference = [ProgramFingerprint(exercise="a", function="f", digest="d1", shingles=[1, 2, 3])]
    one = next(c for c in analyze(reports, feedback_file=feedback_file_name, functions={"a.one": "f"},
                                  reference=reference).checks if c.id == "a.one")
    assert [(g.students, g.program, g.reference) for g in one.by_program] == [
        (["ana", "bo"], None, False), (["c1", "c2"], "d1", True)]
    assert one.function == "f"
    # without the check's function: the exercise's functions together (f and g), still alike for c1 and c2
    whole = next(c for c in analyze(reports, feedback_file=feedback_file_name).checks if c.id == "a.one")
    assert [g.students for g in whole.by_program] == [["ana", "bo"], ["c1", "c2"]]
    assert whole.by_program[1].program not in (None, "d1") and not whole.by_program[1].reference


def test_the_class_page_shows_what_the_class_got_wrong(tmp_path: Path) -> None:
    reports = wrong_class() | {"<i>x</i>": make_report("<i>x</i>", {"a.two", *B},
                                                        messages={"a.one": "no `<script>alert(1)</script>`"})}
    page = write_class_report(reports, tmp_path, report_file=report_file_name).read_text(encoding="utf-8")
    section = page.split('<h2 id="wrong">', 1)[1].split("<h2", 1)[0]
    assert '<a href="#wrong">What the class got wrong</a>' in page  # in the contents
    assert '<h3 class="wrong"><code>a.one</code> title of a.one</h3>' in section
    assert '<span class="count">5 of 6</span> failed (83.3%)' in section
    assert "at line … of its cell: … is a Python `if` on a traced value" in section
    first = re.search(r'<td class="n">2</td><td class="msg">`f` could not.*?</tr>', section).group(0)
    assert '<a class="who" href="feedback/ana.html">ana</a>' in first and "<summary>all 2</summary>" in first
    assert "no compiled program of the exercise" in section and "the same program of the exercise" in section
    rest = without_our_script(page)
    assert "<script>alert" not in rest and "<i>" not in rest
    assert "no `&lt;script&gt;alert(1)&lt;/script&gt;`" in section
    everyone_passed = {"eve": make_report("eve", {"a.one", "a.two", "b.one", "b.two"})}
    clean = write_class_report(everyone_passed, tmp_path).read_text(encoding="utf-8")
    assert 'id="wrong"' not in clean and "#wrong" not in clean


def test_nothing_of_it_reaches_a_student(tmp_path: Path) -> None:
    reports = wrong_class()
    before = {s: r.model_dump_json() for s, r in reports.items()}
    page = write_class_report(reports, tmp_path).read_text(encoding="utf-8")
    assert "What the class got wrong" in page
    assert {s: r.model_dump_json() for s, r in reports.items()} == before  # no report is changed
    for student, report in reports.items():
        seen = feedback_page(report, [])
        others = [s for s in reports if s != student and re.search(rf"\b{s}\b", seen)]
        assert others == [] and "got wrong" not in seen, student


def test_grade_report_prints_it_as_json_and_as_text(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with Gradebook(OutputFolder(out).gradebook) as book:
        for report in wrong_class().values():
            book.record(report)
    assert report_command(argparse.ArgumentParser, [str(out), "--json"]) == 0
    analysis = ClassAnalysis.model_validate_json(capsys.readouterr().out)
    assert analysis == analyze(wrong_class(), feedback_file=feedback_file_name)
    assert report_command(argparse.ArgumentParser, [str(out)]) == 0
    text = capsys.readouterr().out
    assert "a.one  4/5 failed (80%): title of a.one\n" in text
    assert f"e.g. {out / 'feedback' / 'ana.html'}" in text and "f(…) returned …, expected …" in text
    with pytest.raises(UsageError, match="gradebook.sqlite does not exist"):
        report_command(argparse.ArgumentParser, [str(tmp_path / "nowhere")])


# ============================================================================= names as written


def test_names_in_any_script_are_shown_as_written_and_escaped(tmp_path: Path) -> None:
    names = ["Zoë Ångström", "李雷", "محمد", "山田たろう", "e\u0301lodie", "<b>Zoë</b>"]
    page = write_class_report({n: make_report(n) for n in names}, tmp_path).read_text(encoding="utf-8")
    for name in names[:5]:
        assert f">{name}</a>" in page, name  # as written: no \\u escapes, no ASCII form, no mark
    assert ">&lt;b&gt;Zoë&lt;/b&gt;</a>" in page and "<b>" not in page
    assert not re.search(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4})", page)
    assert 'class="badge nonascii"' not in page
    assert ".who { overflow-wrap: break-word; unicode-bidi: isolate; }" in page  # right to left, in its place


def test_only_names_that_could_be_mistaken_for_another_are_marked(tmp_path: Path) -> None:
    lookalikes = ["\u0430lice", "\u0430\u0440\u0435", "\uff4a\uff4f\uff48\uff4e", "\U0001d41a\U0001d425",
                  "\u03a9mega"]  # Cyrillic а, Cyrillic only, fullwidth, mathematical bold, Greek and Latin
    assert [looks_like_another(n) for n in lookalikes] == [True] * 5
    honest = ("alice", "Zoë Ångström", "алиса", "Σωκράτης", "김민준", "O'Neil")
    assert [looks_like_another(n) for n in honest] == [False] * 6
    page = write_class_report({n: make_report(n) for n in lookalikes}, tmp_path).read_text(encoding="utf-8")
    assert page.count('class="badge nonascii"') == 5
    assert '<code class="ascii">\\u0430\\u0440\\u0435</code>' in page


# ============================================================================= similarity and the reference


def prints(function: str, shingles: list[int], digest: str) -> ProgramFingerprint:
    return ProgramFingerprint(exercise="e", function=function, shingles=sorted(set(shingles)), digest=digest)


def report_of(*programs: ProgramFingerprint) -> Report:
    return make_report("s", programs=list(programs))


def test_what_students_share_with_the_reference_is_no_evidence() -> None:
    ref = list(range(40))
    reference = [prints("f", ref, "R")]
    reports = {
        "same_change_a": report_of(prints("f", ref[:36] + [1000, 1001, 1002, 1003], "S")),  # 4 beyond it
        "same_change_b": report_of(prints("f", ref[:36] + [1000, 1001, 1002, 1003], "S")),
        "other_change_a": report_of(prints("f", ref[:38] + list(range(1100, 1106)), "A")),  # 6 beyond
        "other_change_b": report_of(prints("f", ref[:38] + list(range(1200, 1206)), "B")),
        "unusual": report_of(prints("f", ref[:10] + list(range(2000, 2030)), "U")),  # 30 beyond
        "unusual_copy": report_of(prints("f", ref[:10] + list(range(2000, 2030)), "U")),
        "unusual_edited": report_of(prints("f", ref[:10] + list(range(2000, 2028)) + [3000, 3001], "V")),
    }
    without = [g.students for g in similar_groups(reports)]  # the four honest ones are one group
    assert ["other_change_a", "other_change_b", "same_change_a", "same_change_b"] in without
    [group] = similar_groups(reports, reference=reference)
    assert group.students == ["unusual", "unusual_copy", "unusual_edited"]
    assert group.similarity == round(28 / 32, 4)  # on what lies beyond the reference only
    assert max(4, 6) < MIN_BEYOND < 28  # what each honest pair has beyond it, and the copies


def test_the_reference_is_graded_once_and_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from grader.assignment import load

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    graded: list[str] = []
    mine = [ProgramFingerprint(exercise="tax", function="tax_switch", digest="r" * 64, shingles=[1, 2])]

    def grading(path: Path, options: GradeOptions) -> Report:
        graded.append(Path(path).name)
        assert options.seed == 0 and options.student is None
        return make_report("reference", programs=mine)

    monkeypatch.setattr("grader.pipeline.grade_one", grading)
    assert reference_programs.cached("ch2-jit") is None
    options = GradeOptions(assignment="ch2-jit", seed=7, student="alice")
    assert reference_programs.ensure(load("ch2-jit"), options) == mine
    assert reference_programs.ensure(load("ch2-jit"), options) == mine
    assert graded == ["ch2-jit.ipynb"]  # once: then read from the cache, as a rebuild reads it
    assert reference_programs.cached("ch2-jit") == mine
    assert reference_programs.cached_for({"a": make_report("a", assignment="ch2-jit")}) == mine
    assert reference_programs.cached_for({"a": make_report("a", assignment="toy")}) is None

    def broken(path: Path, options: GradeOptions) -> Report:
        raise RuntimeError("no kernel")

    monkeypatch.setattr("grader.pipeline.grade_one", broken)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "other"))
    assert reference_programs.ensure(load("ch2-jit"), options) is None  # the batch goes on without it
    assert reference_programs.cached("ch2-jit") is None


def reordered_pair():
    def tidy(x, y):
        a = jnp.sin(x) * 2.0 + jnp.cos(y)
        b = jnp.exp(-x) / (1 + y * y)
        c = jnp.tanh(x * y) - jnp.log1p(jnp.abs(x))
        return a * b + c, jnp.sum(a - c)

    def shuffled(x, y):
        c = jnp.tanh(x * y) - jnp.log1p(jnp.abs(x))
        b = jnp.exp(-x) / (1 + y * y)
        a = jnp.sin(x) * 2.0 + jnp.cos(y)
        return a * b + c, jnp.sum(a - c)

    return tidy, shuffled


def loops():
    def loop(a, tol):
        def go_on(s):
            big = jnp.abs(s[1] - s[0]) >= tol
            few = s[2] < 100
            return big & few

        def advance(s):
            n = s[2] + 1
            nxt = (s[1] + a / s[1]) / 2
            return s[1], nxt, n

        return lax.while_loop(go_on, advance, (a, (a + 1.0) / 2, jnp.int32(1)))

    def reordered(a, tol):
        def go_on(s):
            few = s[2] < 100
            big = jnp.abs(s[1] - s[0]) >= tol
            return big & few

        def advance(s):
            nxt = (s[1] + a / s[1]) / 2
            n = s[2] + 1
            return s[1], nxt, n

        return lax.while_loop(go_on, advance, (a, (a + 1.0) / 2, jnp.int32(1)))

    return loop, reordered


def module_text(fn, *shapes) -> str:
    return export.export(jax.jit(fn))(*shapes).mlir_module()


def test_independent_lines_in_another_order_give_the_same_fingerprint() -> None:
    S, F32 = jax.ShapeDtypeStruct, np.float32
    tidy, shuffled = reordered_pair()
    shapes = (S((8,), F32), S((8,), F32))
    a, b = module_text(tidy, *shapes), module_text(shuffled, *shapes)
    assert a != b and fingerprint.fingerprint(a) == fingerprint.fingerprint(b)
    # in a loop's regions too, whose values MLIR numbers alike in `cond` and `do`
    loop, reordered = loops()
    a, b = module_text(loop, S((), F32), S((), F32)), module_text(reordered, S((), F32), S((), F32))
    assert a != b and fingerprint.fingerprint(a)["digest"] == fingerprint.fingerprint(b)["digest"]
    normalised = fingerprint.normalise(a)[0]
    assert "cond {" in normalised and "} do {" in normalised
    # what it does not understand keeps its order (a fingerprint still, order-dependent)
    odd = ["module {", "func.func public @main() {", "}", "}", "}"]
    assert fingerprint._canonical(odd) == odd


# ============================================================================= graded for real

NEWTON_VARIANT = '''@jax.jit
def newton_sqrt(a, tol):
    x0 = jnp.maximum(a, 1.0)

    def cond_fun(state):
        x, x_prev, k = state
        return jnp.logical_and(jnp.abs(x - x_prev) >= tol, k < 100)

    def body_fun(state):
        x, _, k = state
        return 0.5 * (x + a / x), x, k + 1

    x, _, k = lax.while_loop(cond_fun, body_fun, (x0, x0 + 1.0, 0))
    return x, k
'''

UNUSUAL = '''@jax.jit
def tax_switch(income):
    idx = (income >= 10000.0).astype(jnp.int32) + (income >= 40000.0) + (income >= 100000.0)
    def bracket(lo, rate, before):
        return lambda v: before + rate * (v - lo)
    return lax.switch(idx, [bracket(0.0, 0.0, 0.0), bracket(10000.0, 0.1, 0.0),
                            bracket(40000.0, 0.2, 3000.0), bracket(100000.0, 0.3, 15000.0)], income)


@jax.jit
def tax_vectorized(income):
    low = jnp.clip(income - 10000.0, 0.0, 30000.0) * 0.1
    mid = jnp.clip(income - 40000.0, 0.0, 60000.0) * 0.2
    high = jnp.maximum(income - 100000.0, 0.0) * 0.3
    return low + mid + high


@jax.jit
def newton_sqrt(a, tol):
    a = jnp.asarray(a, jnp.float32)
    x = lax.select(a < 1.0, jnp.ones_like(a), a)
    first = (x + a / x) / 2

    def go_on(s):
        big = jnp.abs(s[1] - s[0]) >= tol
        few = s[2] < 100
        return big & few

    def advance(s):
        n = s[2] + 1
        nxt = (s[1] + a / s[1]) / 2
        return s[1], nxt, n

    _, x, n = lax.while_loop(go_on, advance, (x, first, jnp.int32(1)))
    return x, n
'''


def reordered_copy(source: str) -> str:
    """The unusual program copied, its independent lines in another order and its names changed."""
    low, mid, high = ("    low = jnp.clip(income - 10000.0, 0.0, 30000.0) * 0.1\n",
                      "    mid = jnp.clip(income - 40000.0, 0.0, 60000.0) * 0.2\n",
                      "    high = jnp.maximum(income - 100000.0, 0.0) * 0.3\n")
    swaps = [(low + mid + high, high + low + mid),
             ("        big = jnp.abs(s[1] - s[0]) >= tol\n        few = s[2] < 100\n",
              "        few = s[2] < 100\n        big = jnp.abs(s[1] - s[0]) >= tol\n"),
             ("        n = s[2] + 1\n        nxt = (s[1] + a / s[1]) / 2\n",
              "        nxt = (s[1] + a / s[1]) / 2\n        n = s[2] + 1\n")]
    for before, after in swaps:
        assert before in source
        source = source.replace(before, after)
    return source.replace("income", "salary").replace("bracket", "band")


HONEST = ("renamed", "variant_a", "variant_b")
COPIES = ("unusual", "unusual_reordered")


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory, reference_sections: dict[str, str],
           reference_source: str) -> dict[str, Report]:
    """The reference, a student who wrote it with other names, two who made the same natural
    change to its Newton loop apart, an unusual program and its copy with lines reordered."""
    def with_(**own: str) -> str:
        return "\n\n".join(f"# %% [{tag}]\n{own.get(tag, body)}" for tag, body in reference_sections.items())

    def unusual(source: str) -> str:
        tax, newton = source.split("@jax.jit\ndef newton_sqrt")
        return with_(tax=tax, newton="@jax.jit\ndef newton_sqrt" + newton)

    renamed = reference_sections["newton"]
    for before, after in (("x_prev", "last"), ("state", "st"), ("x0", "start")):
        renamed = renamed.replace(before, after)
    sources = {"reference": reference_source, "renamed": with_(newton=renamed),
               "variant_a": with_(newton=NEWTON_VARIANT),
               "variant_b": with_(newton=NEWTON_VARIANT.replace("state", "s").replace("x_prev", "before")),
               "unusual": unusual(UNUSUAL), "unusual_reordered": unusual(reordered_copy(UNUSUAL))}
    folder = tmp_path_factory.mktemp("analysis")
    reports = {}
    for name, source in sources.items():
        path = folder / f"{name}.py"
        path.write_text(source, encoding="utf-8")
        reports[name] = grade_warm(path, GradeOptions(assignment="ch2-jit", seed=5))
    return reports


@pytest.mark.kernel
def test_the_reference_s_writers_are_no_group_and_a_reordered_copy_is_found(graded) -> None:
    for name, report in graded.items():
        assert report.score == 100, name
    klass = {s: graded[s] for s in HONEST + COPIES}
    reference = graded["reference"].programs
    with_reference = similar_groups(klass, reference=reference)
    assert {(g.exercise, tuple(g.students)) for g in with_reference} == {("tax", COPIES), ("newton", COPIES)}
    assert all(g.identical for g in with_reference)  # the reordered copy: the same program
    without = [g for g in similar_groups(klass) if not g.common]
    assert ("newton", ["variant_a", "variant_b"]) in [(g.exercise, g.students) for g in without]  # honest


@pytest.mark.kernel
def test_a_real_batch_shows_what_its_class_got_wrong(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     reference_sections: dict[str, str],
                                                     reference_source: str, graded) -> None:
    """Two students with a Python `if` in tax_switch (other names, other lines), one who wrote the
    reference; the reference's fingerprints kept as a batch keeps them."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    from grader.assignment import load, reference_solution

    assignment = load("ch2-jit")
    kept = reference_programs.cache_file(assignment, reference_solution(assignment))
    kept.parent.mkdir(parents=True)
    kept.write_text(reference_programs.ReferencePrograms(assignment="ch2-jit", solution="ch2-jit.ipynb",
                                                         programs=graded["reference"].programs).model_dump_json())
    from grader.batch.run import grade_many

    if_tax = '''@jax.jit
def tax_switch({v}):{doc}
    if {v} < 10000:
        return 0.0 * {v}
    return 0.1 * ({v} - 10000)
'''
    subs = tmp_path / "subs"
    subs.mkdir()
    for name, v, doc in (("ana", "income", ""), ("bo", "pay", '\n    """Two brackets."""')):
        tax = reference_sections["tax"] + "\n\n" + if_tax.format(v=v, doc=doc)
        text = "\n\n".join(f"# %% [{t}]\n{tax if t == 'tax' else b}" for t, b in reference_sections.items())
        (subs / f"{name}.py").write_text(text, encoding="utf-8")
    (subs / "cy.py").write_text(reference_source, encoding="utf-8")
    out = tmp_path / "out"
    grade_many([subs], out, GradeOptions(assignment="ch2-jit", seed=5))
    page = OutputFolder(out).class_page.read_text(encoding="utf-8")
    section = page.split('<h2 id="wrong">', 1)[1].split("<h2", 1)[0]
    assert '<code>tax.switch_visible</code>' in section and '<span class="count">2 of 3</span>' in section
    assert "TracerBoolConversionError at line …" in section  # bo's is a line further (a module's line)
    assert "no compiled program of <code>tax_switch</code>" in section
    example = re.search(r'<a class="who" href="(feedback/[^"]+)">ana</a>', section).group(1)
    assert (out / example).is_file()
    analysis = ClassAnalysis.model_validate_json(analyze_batch(out).model_dump_json())
    visible = next(c for c in analysis.checks if c.id == "tax.switch_visible")
    assert (visible.failed, visible.judged, visible.by_message[0].students) == (2, 3, ["ana", "bo"])
    for student in ("ana", "bo", "cy"):  # nothing of it in what a student gets
        for seen in (OutputFolder(out).report(student), OutputFolder(out).feedback(student)):
            text = seen.read_text(encoding="utf-8")
            assert "got wrong" not in text and "…" not in text, seen
            assert not [s for s in ("ana", "bo", "cy") if s != student and re.search(rf"\b{s}\b", text)], seen
    assert "Similar programs" not in without_section(page, "wrong")  # cy wrote the reference: no evidence
