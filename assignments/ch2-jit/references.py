"""NumPy references and hidden-input generators for ch2-jit (run in the grader, never in a kernel).

Generators take a NumPy Generator seeded from the run's seed and return the calls to make; the
references compute in float64 on exactly those inputs. The hidden arguments the text names
(income, a, lr, num_steps) are drawn from the domains assignment.toml declares for them
(`[[exercises.domains]]`, passed in as `domains`): the spec is their one source.
"""

from __future__ import annotations

import numpy as np

from grader import Case
from grader.domains import draw, random_points
from grader.spec import ArgumentDomain

Domains = dict[str, ArgumentDomain]

# ----------------------------------------------------------------------------- tax

EDGES = np.array([0.0, 10_000.0, 40_000.0, 100_000.0])
RATES = np.array([0.0, 0.10, 0.20, 0.30])
BASE = np.concatenate([[0.0], np.cumsum(np.diff(EDGES) * RATES[:-1])])  # 0, 0, 3000, 15000
VISIBLE_INCOMES = [0.0, 5000.0, 9999.5, 10000.0, 10001.0, 39999.0, 40000.0, 55555.0, 99999.0,
                   100000.0, 123456.0, 1e6]


def tax(income):
    """Progressive tax, bracket by bracket, for any shape."""
    inc = np.asarray(income, dtype=np.float64)
    k = np.clip(np.searchsorted(EDGES, inc, side="right") - 1, 0, 3)
    return BASE[k] + (inc - EDGES[k]) * RATES[k]


def tax_scalars(rng: np.random.Generator, domains: Domains, count: int = 48) -> list[Case]:
    """One call per income of the domain (every edge and its neighbours, far above the last),
    each a strongly typed float32 scalar (like jnp.float32(v))."""
    return [Case(args=(np.float32(v),)) for v in draw(domains["income"], rng, count)]


def tax_vector(rng: np.random.Generator, domains: Domains, count: int = 48, size: int = 12) -> list[Case]:
    """Calls on 1-D float32 arrays of `size` incomes (the notebook's length: one compilation)."""
    incomes = draw(domains["income"], rng, count).astype(np.float32)
    incomes = np.resize(incomes, -(-incomes.size // size) * size)  # pad by repeating
    return [Case(args=(chunk,)) for chunk in incomes.reshape(-1, size)]


# ----------------------------------------------------------------------------- newton


def sqrt(a, tol):
    return np.sqrt(np.float64(a))


def newton_inputs(rng: np.random.Generator, domains: Domains, count: int = 14) -> list[Case]:
    """Python-float a (weakly typed, like the notebook's calls) from a's domain."""
    return [Case(args=(float(a), 1e-6)) for a in draw(domains["a"], rng, count)]


def newton_compile_runs(rng: np.random.Generator, count: int = 3) -> list[Case]:
    """Calls with a and tol the notebook cannot know in advance: a traced tol compiles once."""
    a = rng.uniform(1.5, 500.0, size=count)
    tol = 10.0 ** -rng.uniform(2.0, 6.0, size=count)
    return [Case(args=(float(x), float(t))) for x, t in zip(a, tol)]


def newton_tolerances(rng: np.random.Generator, domains: Domains, count: int = 11) -> list[Case]:
    """Pairs of calls on the same a: a loose tol, then a tight one; the notebook's a = 5, then a's
    domain (its bounds and x0's edge at 1: the longest and the shortest loops)."""
    cases = []
    for a in [5.0, *draw(domains["a"], rng, count)]:
        cases += [Case(args=(float(a), 1e-1)), Case(args=(float(a), 1e-6))]
    return cases


# ----------------------------------------------------------------------------- training


def step(w, b, x, y, lr):
    """One gradient-descent step of the mean squared error of y ≈ w x + b."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    err = float(w) * x + float(b) - y
    return (float(w) - lr * np.mean(2 * err * x), float(b) - lr * np.mean(2 * err))


def train(w, b, x, y, lr, num_steps):
    for _ in range(int(num_steps)):
        w, b = step(w, b, x, y, lr)
    return (float(w), float(b))


def unchanged(w, b, x, y, lr, num_steps):
    return (float(w), float(b))


def _regression(rng: np.random.Generator, n: int = 300):
    w_true, b_true = rng.uniform(-3.0, 3.0), rng.uniform(-2.0, 2.0)
    x = rng.uniform(-1.0, 1.0, size=n).astype(np.float32)
    y = (w_true * x + b_true + 0.05 * rng.standard_normal(n)).astype(np.float32)
    return float(w_true), float(b_true), x, y


def step_cases(rng: np.random.Generator, domains: Domains, count: int = 4) -> list[Case]:
    cases = []
    for lr in draw(domains["lr"], rng, count):
        _, _, x, y = _regression(rng)
        w0, b0 = rng.normal(size=2).astype(np.float32)
        cases.append(Case(args=(w0, b0, x, y, float(lr))))
    return cases


def training_runs(rng: np.random.Generator, domains: Domains, steps: list[int] | None = None,
                  count: int = 5) -> list[Case]:
    """train_*(w0, b0, x, y, lr, n) on freshly drawn data, from drawn parameters and with lr from
    its domain: a function that ignores any of them gives other values. n is each of `steps`
    when given (the notebook's count, for a check that reads the program), else `count` draws
    from num_steps' domain (0 and 1 among them, and more than the notebook's)."""
    _, _, x, y = _regression(rng)
    counts = sorted(int(n) for n in (steps if steps is not None else draw(domains["num_steps"], rng, count)))
    lrs = sorted(float(lr) for lr in draw(domains["lr"], rng, len(counts)))
    # the largest count learns slowest (its last steps still move w and b), the smallest (0 steps)
    # with the largest lr (a step too many shows), the others the slower the more steps they make:
    # a run that has converged hides a loop that stops early or a count special-cased (the
    # notebook's 300 answered with the least-squares fit); lr = 0 moves nothing only with steps
    slowest = min((lr for lr in lrs if lr > 0), default=lrs[0])
    lrs.remove(slowest)
    fastest = lrs.pop()
    middle = sorted(lrs, reverse=True)[: max(len(counts) - 2, 0)]
    lrs = ([fastest] + middle + [slowest])[-len(counts):] if len(counts) > 1 else [slowest]
    cases = []
    for n, lr in zip(counts, lrs):
        w0, b0 = rng.normal(size=2).astype(np.float32)
        cases.append(Case(args=(w0, b0, x, y, lr, n)))
    return [cases[i] for i in rng.permutation(len(cases))]


def notebook_runs(rng: np.random.Generator, steps: list[int]) -> list[Case]:
    """Runs like the notebook's (the count given, lr in the notebook's 0.05 .. 0.5), for checks
    that read train_fori's program: the hidden checks draw from the domains instead."""
    _, _, x, y = _regression(rng)
    cases = []
    for n in steps:
        w0, b0 = rng.normal(size=2).astype(np.float32)
        cases.append(Case(args=(w0, b0, x, y, float(rng.uniform(0.05, 0.5)), int(n))))
    return cases


def learning_runs(rng: np.random.Generator, count: int = 2) -> list[Case]:
    """300 small steps from zero must land on the parameters the data was drawn from."""
    cases = []
    for _ in range(count):
        w_true, b_true, x, y = _regression(rng)
        zero = np.float32(0.0)
        cases.append(Case(args=(zero, zero, x, y, 0.05, 300), expected=(w_true, b_true)))
    return cases


def frozen_runs(rng: np.random.Generator, domains: Domains) -> list[Case]:
    """lr = 0 from random parameters, for a count drawn from num_steps' domain: nothing may move."""
    _, _, x, y = _regression(rng)
    w0, b0 = rng.normal(size=2).astype(np.float32)
    return [Case(args=(w0, b0, x, y, 0.0, int(random_points(domains["num_steps"], rng, 1)[0])))]


def compile_runs(rng: np.random.Generator) -> list[Case]:
    """Same data, lr and num_steps drawn per run: a traced num_steps and lr compile once. Eight
    points, the size of the chapter's small example that the other visible checks of train_fori
    call it with: what is counted is compilations, which the data's size does not change, and
    the probe then loads the program those checks compiled instead of compiling one for 300
    points (60 ms of every grading)."""
    _, _, x, y = _regression(rng, n=8)
    zero = np.float32(0.0)
    lrs = rng.uniform(0.05, 0.5, size=3)
    steps = rng.choice(np.arange(5, 60), size=3, replace=False)
    return [Case(args=(zero, zero, x, y, float(lr), int(n))) for lr, n in zip(lrs, steps)]
