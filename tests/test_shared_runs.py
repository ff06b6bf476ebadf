"""The same calls asked twice in one batch run once (`runtime.SharedRuns`), and the spec says when
two checks ask the same calls (`cases.draws_as`).

ch2-jit's hidden value check of `train_python_loop` and its hidden `calls` check draw the very same
runs; the kernel then runs them once, counted, in the first one's turn, and the second makes only
its moved run. What each answer says is what the two requests alone would have said."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import pytest

from grader import assignment
from grader.cases import materialize
from grader.kernel.inside import runtime
from grader.kernel.protocol import Observation
from test_spec import problems_of, write_spec


@pytest.fixture(autouse=True)
def _the_test_process_s_children_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve` kills every descendant of its process, as a kernel must: not the test process's."""
    monkeypatch.setattr(runtime, "stop_leftover_processes", lambda: None)


def _loop_namespace() -> tuple[dict, list[int]]:
    """A Python loop calling `step` once per step; `ran` counts every call of step's body."""
    ran: list[int] = []
    ns: dict = {"ran": ran}
    exec(  # noqa: S102 - a notebook's functions
        "def step(w):\n    ran.append(1)\n    return w * 0.5 + 1.0\n"
        "def loop(w, n):\n    for _ in range(n):\n        w = step(w)\n    return w\n"
        "def inline(w, n):\n    for _ in range(n):\n        w = w * 0.5 + 1.0\n    return w\n", ns)
    return ns, ran


STEPS = (0, 1, 3, 7)


def _calls() -> list[dict]:
    return [{"args": [{"t": "py", "v": 2.0}, {"t": "py", "v": n}]} for n in STEPS]


def _plain(rid: str = "plain", target: str = "loop") -> dict:
    return {"op": "call", "id": rid, "target": target, "calls": _calls()}


def _counting(rid: str = "counted", target: str = "loop") -> dict:
    return {"op": "call", "id": rid, "target": target, "calls": _calls(), "count_calls": "step", "perturb": True}


def _serve(requests: list[dict], ns: dict) -> dict[str, dict]:
    out: list[dict] = []
    runtime.serve(json.dumps(requests), ns, emit=out.append)
    answers = {o["observation"]["id"]: o["observation"] for o in out}
    for answer in answers.values():
        Observation.model_validate(answer)  # the grader must be able to read every answer
    return answers


def _alone(request: dict) -> dict:
    ns, _ = _loop_namespace()
    return _serve([request], ns)[request["id"]]


@pytest.mark.parametrize("order", ["plain first", "counting first"])
def test_a_value_request_and_a_counting_one_of_the_same_calls_run_them_once(order) -> None:
    ns, ran = _loop_namespace()
    requests = [_plain(), _counting()] if order == "plain first" else [_counting(), _plain()]
    answers = _serve(requests, ns)
    steps = sum(STEPS)
    # Once counted, once moved (every call with a step), not a third time for the values.
    assert len(ran) == 2 * steps
    assert answers["plain"] == _alone(_plain())
    assert answers["counted"] == _alone(_counting())
    assert answers["counted"]["result"]["counts"] == list(STEPS)
    assert answers["counted"]["result"]["uses"] == [n > 0 for n in STEPS]
    assert "counts" not in answers["plain"]["result"]  # the plain request's answer is a plain one


def test_in_separate_batches_nothing_is_shared() -> None:
    ns, ran = _loop_namespace()
    _serve([_plain()], ns)
    _serve([_counting()], ns)
    assert len(ran) == 3 * sum(STEPS)


def test_other_calls_or_a_watching_request_share_nothing() -> None:
    ns, ran = _loop_namespace()
    other = {**_counting(), "calls": _calls()[:2]}
    watching = {**_plain("watched"), "watch": True}
    answers = _serve([_plain(), other, watching], ns)
    assert {a["status"] for a in answers.values()} == {"ok"}
    assert len(ran) == sum(STEPS) + 2 * sum(STEPS[:2]) + 2 * sum(STEPS)  # the watch calls again on the host


@pytest.mark.parametrize("helper, status", [(None, "missing"), ("not a function", "raised")])
def test_a_helper_that_cannot_be_counted_costs_the_value_request_nothing(helper, status) -> None:
    """The value check's function may do without the helper (its text's rule is the `calls`
    check's to judge): the plain request still gets its values, the counting one says why not."""
    ns, _ = _loop_namespace()
    if helper is None:
        del ns["step"]
    else:
        ns["step"] = helper
    real_jit = jax.jit
    answers = _serve([_plain(target="inline"), _counting(target="inline")], ns)
    assert answers["plain"] == _alone(_plain(target="inline"))
    assert answers["counted"]["status"] == status
    assert jax.jit is real_jit  # what counting bound before it failed is put back


def test_a_value_request_answered_from_a_run_that_raised_raises_as_it_would() -> None:
    ns, ran = _loop_namespace()
    bad = [{"args": [{"t": "py", "v": "w"}, {"t": "py", "v": 2}]}]
    answers = _serve([{**_plain(), "calls": bad}, {**_counting(), "calls": bad}], ns)
    assert answers["plain"]["status"] == answers["counted"]["status"] == "raised"
    assert answers["plain"]["raised"]["ename"] == "TypeError"


# ----------------------------------------------------------------------------- the spec


def test_ch2_jit_s_hidden_calls_check_draws_the_value_check_s_runs() -> None:
    loaded = assignment.load("ch2-jit")
    training = next(e for e in loaded.spec.exercises if e.id == "training")
    checks = {c.id: c for c in training.checks}
    values, calls = checks["python_loop"].cases, checks["python_loop_calls_step_hidden"].cases
    assert calls.draws_as == "python_loop" and calls.draw_key == "training.python_loop"
    for seed in (1, 2):
        a = materialize(values, loaded.references, seed, "training.python_loop")
        b = materialize(calls, loaded.references, seed, "training.python_loop_calls_step_hidden")
        assert json.dumps([c.args for c in a], default=repr) == json.dumps([c.args for c in b], default=repr)


def _with_generators(tmp_path: Path, second: str) -> Path:
    folder = write_spec(tmp_path, check_ids=("a", "b"), check_points=2.5)
    path = folder / "assignment.toml"
    text = path.read_text()
    rows = 'cases.types = ["py"]\ncases.rows = [[1.0]]\n'
    first = text.index(rows)
    text = text[:first] + 'cases.generator = "draw"\n' + text[first + len(rows):]
    text = text.replace(rows, second)
    path.write_text(text)
    (folder / "references.py").write_text(
        "def f(x):\n    return x\n"
        "def draw(rng, count=2):\n    return [(float(v),) for v in rng.uniform(size=count)]\n")
    return folder


def test_draws_as_gives_the_very_draws_of_the_check_it_names(tmp_path: Path) -> None:
    loaded = assignment.load(str(_with_generators(tmp_path, 'cases.generator = "draw"\ncases.draws_as = "a"\n')))
    a, b = (c.cases for c in loaded.spec.exercises[0].checks)
    drawn = [materialize(cases, loaded.references, 7, f"one.{i}") for cases, i in ((a, "a"), (b, "b"))]
    assert [c.args for c in drawn[0]] == [c.args for c in drawn[1]]
    alone = materialize(a.model_copy(), loaded.references, 7, "one.b")  # b's own stream: other draws
    assert [c.args for c in alone] != [c.args for c in drawn[0]]


@pytest.mark.parametrize("second, said", [
    ('cases.generator = "draw"\ncases.draws_as = "zzz"\n', "draws_as names no other check"),
    ('cases.generator = "draw"\ncases.draws_as = "b"\n', "draws_as names no other check"),
    ('cases.generator = "draw"\ncases.params.count = 3\ncases.draws_as = "a"\n', "needs its generator and params"),
    ('cases.types = ["py"]\ncases.rows = [[1.0]]\ncases.draws_as = "a"\n', "needs a generator, not rows"),
    ('cases.generator = "draw"\ncases.draws_as = "a"\nhidden = true\nhint = "other values"\n',
     "a hidden check and a visible one never share draws"),
])
def test_draws_as_must_name_a_check_with_the_same_generator_and_params(tmp_path: Path, second, said) -> None:
    problems = problems_of(_with_generators(tmp_path, second))
    assert len(problems) == 1 and said in problems[0], problems
