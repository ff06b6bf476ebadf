"""NumPy references and hidden-input generators for ch2-jit (run in the grader, never in a kernel).

Generators take a NumPy Generator seeded from the run's seed and return the calls to make; the
references compute in float64 on exactly those inputs.
"""

from __future__ import annotations

import numpy as np

from grader import Case

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


def _hidden_incomes(rng: np.random.Generator, n_random: int) -> np.ndarray:
    edges = EDGES[1:, None] + np.array([-1.0, -0.5, 0.0, 0.5, 1.0])  # on and around each edge
    large = 10.0 ** rng.uniform(6.0, 8.0, size=4)
    spread = rng.uniform(0.0, 250_000.0, size=n_random)
    return np.concatenate([edges.ravel(), large, spread]).astype(np.float32)


def tax_scalars(rng: np.random.Generator, n_random: int = 20) -> list[Case]:
    """One call per income, each a strongly typed float32 scalar (like jnp.float32(v))."""
    return [Case(args=(np.float32(v),)) for v in rng.permutation(_hidden_incomes(rng, n_random))]


def tax_vector(rng: np.random.Generator, n_random: int = 17, size: int = 12) -> list[Case]:
    """Calls on 1-D float32 arrays of `size` incomes (the notebook's length: one compilation)."""
    incomes = rng.permutation(_hidden_incomes(rng, n_random))
    incomes = np.resize(incomes, -(-incomes.size // size) * size)  # pad by repeating
    return [Case(args=(chunk,)) for chunk in incomes.reshape(-1, size)]


# ----------------------------------------------------------------------------- newton


def sqrt(a, tol):
    return np.sqrt(np.float64(a))


def newton_inputs(rng: np.random.Generator, count: int = 8) -> list[Case]:
    """Python-float a (weakly typed, like the notebook's calls) spread over 1e-3 .. 1e4."""
    return [Case(args=(float(a), 1e-6)) for a in 10.0 ** rng.uniform(-3.0, 4.0, size=count)]


def newton_compile_runs(rng: np.random.Generator, count: int = 3) -> list[Case]:
    """Calls with a and tol the notebook cannot know in advance: a traced tol compiles once."""
    a = rng.uniform(1.5, 500.0, size=count)
    tol = 10.0 ** -rng.uniform(2.0, 6.0, size=count)
    return [Case(args=(float(x), float(t))) for x, t in zip(a, tol)]


def newton_tolerances(rng: np.random.Generator, count: int = 3) -> list[Case]:
    """Pairs of calls on the same a: a loose tol, then a tight one; one a below 1 (x0 = 1)."""
    cases = []
    for a in [5.0, *rng.uniform(2.0, 1000.0, size=count), 10.0 ** rng.uniform(-3.0, 0.0)]:
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


def step_cases(rng: np.random.Generator, count: int = 3) -> list[Case]:
    cases = []
    for _ in range(count):
        _, _, x, y = _regression(rng)
        w0, b0 = rng.normal(size=2).astype(np.float32)
        cases.append(Case(args=(w0, b0, x, y, float(rng.uniform(0.05, 0.5)))))
    return cases


def training_runs(rng: np.random.Generator, steps: list[int]) -> list[Case]:
    """train_*(w0, b0, x, y, lr, n) for each n in steps, on freshly drawn data, from drawn
    parameters and with a drawn lr: a function that ignores any of them gives other values."""
    _, _, x, y = _regression(rng)
    cases = []
    for n in steps:
        w0, b0 = rng.normal(size=2).astype(np.float32)
        cases.append(Case(args=(w0, b0, x, y, float(rng.uniform(0.05, 0.5)), n)))
    return cases


def learning_runs(rng: np.random.Generator, count: int = 2) -> list[Case]:
    """300 small steps from zero must land on the parameters the data was drawn from."""
    cases = []
    for _ in range(count):
        w_true, b_true, x, y = _regression(rng)
        zero = np.float32(0.0)
        cases.append(Case(args=(zero, zero, x, y, 0.05, 300), expected=(w_true, b_true)))
    return cases


def frozen_runs(rng: np.random.Generator) -> list[Case]:
    """lr = 0 from random parameters: nothing may move."""
    _, _, x, y = _regression(rng)
    w0, b0 = rng.normal(size=2).astype(np.float32)
    return [Case(args=(w0, b0, x, y, 0.0, 50))]


def compile_runs(rng: np.random.Generator) -> list[Case]:
    """Same data, lr and num_steps drawn per run: a traced num_steps and lr compile once."""
    _, _, x, y = _regression(rng)
    zero = np.float32(0.0)
    lrs = rng.uniform(0.05, 0.5, size=3)
    steps = rng.choice(np.arange(5, 60), size=3, replace=False)
    return [Case(args=(zero, zero, x, y, float(lr), int(n))) for lr, n in zip(lrs, steps)]
