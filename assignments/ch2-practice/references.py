"""NumPy references and hidden-input generators for ch2-practice (run in the grader, never in a kernel).

Generators take a NumPy Generator seeded from the run's seed and return the calls to make; the
references compute in float64 on exactly those inputs.

Shapes are chosen on purpose, so that few programs get compiled and the compile-count checks see
fresh traces where they need them:
- sum_first: the visible calls and the compile check use arrays of 10 elements; the hidden calls
  arrays as long as n's domain reaches (longer than the notebook's: a loop capped at its length fails);
- masked_mean: padded arrays of 8, 16 and 32 elements (the buckets of bucket_size); the lengths
  of its compile checks are kept out of every other check (see ONE_BUCKET_LENGTHS);
- update_weights_explicit: a different shape for each check that sets a global `learning_rate`,
  so that a jitted function reading that global is traced afresh while the global is set.

The arguments the text names (n, x and threshold, lr) are drawn from the domains assignment.toml
declares for them (`[[exercises.domains]]`, passed in as `domains`): the spec is their one source.
"""

from __future__ import annotations

import numpy as np

from grader import Case
from grader.domains import draw
from grader.spec import ArgumentDomain

Domains = dict[str, ArgumentDomain]

# ----------------------------------------------------------------------------- sum_first

SUM_SIZE = 10


def sum_first(arr, n):
    """Sum of the first n elements."""
    return float(np.sum(np.asarray(arr, dtype=np.float64)[: int(n)]))


def sum_first_cases(rng: np.random.Generator, domains: Domains, count: int = 6) -> list[Case]:
    """n from n's domain (0 and len(arr) included), Python ints like the notebook's calls, on one
    array as long as the domain's largest n."""
    domain = domains["n"]
    arr = rng.uniform(-10.0, 10.0, size=int(domain.high)).astype(np.float32)
    return [Case(args=(arr, int(n))) for n in draw(domain, rng, count)]


# ----------------------------------------------------------------------------- conditional_double


def conditional_double(x, threshold):
    """x * 2 when x > threshold, else x unchanged (the chapter's definition, section 2.5)."""
    x = np.float64(np.asarray(x, dtype=np.float32))
    return x * 2 if x > float(threshold) else x


def conditional_double_cases(rng: np.random.Generator, domains: Domains, count: int = 8) -> list[Case]:
    """Scalar float32 x against Python-float thresholds from their domains: above, below, and
    exactly equal; and x within less than 1 of a threshold that is not a whole number, on both
    sides of it and equal to it, for both signs (drawn pairs are almost never that close, and a
    domain's edges are whole numbers: a threshold rounded, truncated or cast to an integer before
    the comparison would pass every other case)."""
    xs = draw(domains["x"], rng, count).astype(np.float32)
    thresholds = draw(domains["threshold"], rng, count).astype(np.float32)
    cases = [Case(args=(x, float(t))) for x, t in zip(xs, thresholds)]
    x = xs[np.argmax(np.abs(xs))]  # not 0, whose double is itself
    cases.append(Case(args=(x, float(x))))  # equal: not greater, so x comes back unchanged
    cases += _close_to_a_fractional_threshold(rng, domains["threshold"])
    return [cases[i] for i in rng.permutation(len(cases))]


def _close_to_a_fractional_threshold(rng: np.random.Generator, domain: ArgumentDomain) -> list[Case]:
    """For a threshold t = k + f (k whole, f in [0.2, 0.8]) of each sign inside the domain: x equal
    to t, x just above t and x just below t, each less than 1 away, within t's own whole part or
    the next, so that every way of rounding t lands on a wrong side of one of them."""
    reach = min(abs(domain.low), abs(domain.high), 1000.0) - 1.0
    cases = []
    for sign in (1.0, -1.0):
        t = np.float32(sign * (np.floor(rng.uniform(1.0, reach)) + rng.uniform(0.2, 0.8)))
        step = np.float32(rng.uniform(0.05, 0.15))
        for x in (t, t + step, t - step):
            cases.append(Case(args=(np.float32(x), float(t))))
    return cases


# ----------------------------------------------------------------------------- bucketing


def bucket_size(n):
    """The next power of 2 at or above n, at least 8."""
    return max(8, 1 << (int(n) - 1).bit_length())


def masked_mean(x_padded, length):
    """Mean of the first `length` elements; whatever follows them is padding."""
    return float(np.mean(np.asarray(x_padded, dtype=np.float64)[: int(length)]))


def mean_any_length(x):
    return float(np.mean(np.asarray(x, dtype=np.float64)))


def _padded(rng: np.random.Generator, length: int, size: int) -> np.ndarray:
    """`length` values, then padding that is NOT zero: it must be masked out, not summed."""
    x = rng.normal(2.0, 3.0, size=size)
    x[length:] = rng.uniform(100.0, 1000.0, size=size - length) * rng.choice([-1.0, 1.0], size=size - length)
    return x.astype(np.float32)


# Lengths kept for the compile-count checks: no other check calls masked_mean with them, so a
# masked_mean that compiles once per length (a static length) compiles on every one of these calls,
# whatever the other checks drew before them.
ONE_BUCKET_LENGTHS = [18, 21, 23, 24, 26, 28, 30, 31]                 # padded to 32
THREE_BUCKET_LENGTHS = [[2, 4, 6, 7], [10, 11, 14, 15], [17, 19, 22, 25]]  # padded to 8, 16, 32
_RESERVED = set(ONE_BUCKET_LENGTHS).union(*THREE_BUCKET_LENGTHS)


def _free(low: int, high: int) -> np.ndarray:
    return np.array([n for n in range(low, high + 1) if n not in _RESERVED])


def bucket_size_cases(rng: np.random.Generator, domains: Domains, count: int = 40) -> list[Case]:
    """Python ints from n's domain: every power of 2 of its edges and its neighbours, 1, far ones."""
    return [Case(args=(int(n),)) for n in draw(domains["n"], rng, count)]


def masked_mean_cases(rng: np.random.Generator, domains: Domains, sizes: tuple[int, ...] = (16, 32),
                      count: int = 5) -> list[Case]:
    """Padded arrays of each bucket size (the compile checks' programs are these: judged here),
    lengths from length's domain up to the size: 1 and the full size always, the others drawn
    among those no compile check keeps for itself."""
    cases = []
    for size in sizes:
        within = domains["length"].model_copy(update={"high": float(min(size, domains["length"].high))})
        drawn = [int(n) for n in draw(within, rng, 4 * count) if int(n) not in _RESERVED]
        lengths = list(dict.fromkeys([1, int(within.high), *drawn]))[:count]
        cases += [Case(args=(_padded(rng, n, size), n)) for n in rng.permutation(lengths).tolist()]
    return cases


def masked_mean_one_bucket(rng: np.random.Generator, count: int = 5) -> list[Case]:
    """Several lengths that all fall in the bucket of 32: one compilation is enough."""
    lengths = rng.choice(ONE_BUCKET_LENGTHS, size=count, replace=False)
    return [Case(args=(_padded(rng, int(n), 32), int(n))) for n in lengths]


def masked_mean_three_buckets(rng: np.random.Generator, per_bucket: int = 3) -> list[Case]:
    """Lengths from 1 to 32, padded to their bucket (8, 16 or 32): at most one compilation per bucket."""
    cases = []
    for choices in THREE_BUCKET_LENGTHS:
        for n in rng.choice(choices, size=per_bucket, replace=False):
            cases.append(Case(args=(_padded(rng, int(n), bucket_size(int(n))), int(n))))
    return cases


def mean_any_length_cases(rng: np.random.Generator, count: int = 5) -> list[Case]:
    """Unpadded arrays of a few random lengths up to 32, and one from 33 to 48 (bucket 64)."""
    lengths = [*rng.choice(_free(1, 32), size=count - 1, replace=False), rng.integers(33, 49)]
    return [Case(args=(rng.normal(0.0, 5.0, size=int(n)).astype(np.float32),))
            for n in rng.permutation(lengths)]


# ----------------------------------------------------------------------------- update_weights


def update(params, grads, lr):
    """One explicit step: params - lr * grads."""
    return np.asarray(params, dtype=np.float64) - float(lr) * np.asarray(grads, dtype=np.float64)


def update_cases(rng: np.random.Generator, shape: list[int], domains: Domains, count: int = 4) -> list[Case]:
    """Random float32 params and grads of `shape`, a Python-float lr per call from lr's domain."""
    cases = []
    for lr in draw(domains["lr"], rng, count):
        params = rng.normal(0.0, 2.0, size=shape).astype(np.float32)
        grads = rng.normal(0.0, 1.0, size=shape).astype(np.float32)
        cases.append(Case(args=(params, grads, float(lr))))
    return cases
