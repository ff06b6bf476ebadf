"""NumPy references and hidden-input generators for ch2-scan (run in the grader, never in a kernel).

Generators take a NumPy Generator seeded from the run's seed and return the calls to make; the
references compute in float64 (or in Python integers) on exactly those inputs. The arguments the
texts name (n, batch_size; decay; max_norm) are drawn from the domains assignment.toml declares
for them (`[[exercises.domains]]`, passed in as `domains`): the spec is their one source.

Shapes are chosen so that few programs get compiled:
- ema: the hidden calls use arrays of 1, 2, EMA_LENGTH and a longer length (the compile check
  uses the notebook's length 4, so the module it inspects is one the visible check judged);
- clip_by_norm: hidden gradients of CLIP_SHAPE and of a 2-D shape (the compile check uses the
  notebook's gradient).
"""

from __future__ import annotations

import numpy as np

from grader import Case
from grader.domains import draw
from grader.spec import ArgumentDomain

Domains = dict[str, ArgumentDomain]

# ----------------------------------------------------------------------------- batches


def num_batches(n, batch_size, drop_last):
    """Batches of batch_size in an epoch of n examples: the partial last one counts unless dropped."""
    n, batch_size = int(n), int(batch_size)
    return n // batch_size if drop_last else -(-n // batch_size)


def num_batches_cases(rng: np.random.Generator, domains: Domains, count: int = 12) -> list[Case]:
    """n and batch_size from their domains (0 examples, a batch of 1, both far beyond the notebook's),
    each pair with drop_last False and True; then, for a few batch sizes, n on and beside a multiple
    of batch_size (where ceil and floor part), small and large multiples alike."""
    ns = [int(n) for n in draw(domains["n"], rng, count)]
    sizes = [int(b) for b in draw(domains["batch_size"], rng, count)]
    sizes = [sizes[i] for i in rng.permutation(len(sizes))]
    pairs = list(zip(ns, sizes))
    high = int(domains["n"].high)
    for size in sizes[:4]:
        for k in (1, int(rng.integers(2, 1000)), max(1, high // size - 1)):
            pairs += [(k * size - 1, size), (k * size, size), (k * size + 1, size)]
    cases = [Case(args=(n, size, drop)) for n, size in pairs if n >= 0 for drop in (False, True)]
    return [cases[i] for i in rng.permutation(len(cases))]


# ----------------------------------------------------------------------------- ema

EMA_LENGTH = 16


def ema_step(avg, x, decay):
    """One step of the exponential moving average."""
    return float(decay) * np.asarray(avg, np.float64) + (1.0 - float(decay)) * np.asarray(x, np.float64)


def ema(xs, decay):
    """The average after each element, starting from avg = xs[0]."""
    xs = np.asarray(xs, np.float64)
    out = np.empty_like(xs)
    avg = xs[0]
    for t in range(xs.shape[0]):
        avg = float(decay) * avg + (1.0 - float(decay)) * xs[t]
        out[t] = avg
    return out


def ema_step_cases(rng: np.random.Generator, domains: Domains, count: int = 6) -> list[Case]:
    """Scalars and vectors for avg and x, decay (a Python float) from its domain: 0, 1 and between."""
    cases = []
    for i, decay in enumerate(draw(domains["decay"], rng, count)):
        shape = () if i % 2 == 0 else (5,)
        avg = np.asarray(rng.normal(0.0, 10.0, size=shape), np.float32)
        x = np.asarray(rng.normal(0.0, 10.0, size=shape), np.float32)
        cases.append(Case(args=(avg, x, float(decay))))
    return cases


LONG_EMA = 64  # "of any length": the longest series of every hidden ema check


def ema_cases(rng: np.random.Generator, domains: Domains, count: int = 8) -> list[Case]:
    """Series of several lengths: 1 and 2, the notebook's EMA_LENGTH and always LONG_EMA, so that a
    loop capped below it fails on every seed, not on the seeds that drew a long enough series (a
    Python loop unrolls each length into its program: one long length, not two); decay from its
    domain; the series do not start at 0, so the start value shows."""
    lengths = [1, 2, EMA_LENGTH, LONG_EMA]
    cases = []
    for i, decay in enumerate(draw(domains["decay"], rng, count)):
        xs = rng.normal(rng.uniform(-20.0, 20.0), 5.0, size=lengths[i % len(lengths)]).astype(np.float32)
        cases.append(Case(args=(xs, float(decay))))
    return [cases[i] for i in rng.permutation(len(cases))]


# ----------------------------------------------------------------------------- clip

CLIP_SHAPE = (8,)


def clip_by_norm(g, max_norm):
    """g rescaled to norm max_norm when its norm is greater, else g unchanged."""
    g = np.asarray(g, np.float64)
    norm = float(np.sqrt(np.sum(g * g)))
    return g * (float(max_norm) / norm) if norm > float(max_norm) else g


def _with_norm(rng: np.random.Generator, shape, norm: float) -> np.ndarray:
    g = rng.normal(size=shape)
    return (g * (norm / np.sqrt(np.sum(g * g)))).astype(np.float32)


def clip_cases(rng: np.random.Generator, domains: Domains, count: int = 6) -> list[Case]:
    """max_norm (a Python float) from its domain; for each, gradients whose norm is well below,
    just below, just above and far above it (on both sides of where the answer changes form),
    and a zero gradient; of the compile check's shape, a 2-D, a 3-D and a 0-D shape ("g of any
    shape": a norm of g[0] alone beyond two dimensions kept full marks)."""
    cases = []
    shapes = (CLIP_SHAPE, (3, 4), (2, 3, 4), ())
    for i, max_norm in enumerate(draw(domains["max_norm"], rng, count)):
        shape = shapes[i % len(shapes)]
        for factor in (0.3, 0.99, 1.01, 5.0, 1000.0):
            cases.append(Case(args=(_with_norm(rng, shape, factor * float(max_norm)), float(max_norm))))
    cases.append(Case(args=(np.zeros(CLIP_SHAPE, np.float32), float(rng.uniform(0.5, 2.0)))))
    return [cases[i] for i in rng.permutation(len(cases))]
