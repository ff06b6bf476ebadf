"""Drawing hidden inputs from an argument's declared domain (`[[exercises.domains]]` in a spec).

The domain is the one source of an argument's hidden values: a generator in references.py that
takes a `domains` keyword gets its exercise's domains and draws each argument with `draw`, so
widening what the text implies is one edit of the spec, and `grade validate` reports what was
drawn from. A draw is deterministic in its parts that matter most (the declared values, every
edge and its neighbours, both bounds) and random in the rest, from the check's own Generator.
"""

from __future__ import annotations

import numpy as np

from grader.spec import ArgumentDomain


NEAR_EDGE = (1e-4, 1e-3, 1e-2)
"""On a continuous domain each edge is also drawn this far off, relatively, on both sides: a
function that changes slope at an edge (a tax bracket) whose edge is moved (100100 for 100000) is
wrong only between the two, by the slopes' difference times the distance to the right edge: under
any tolerance at the edge's absolute neighbours, beyond it at one of these (fourth red-team round:
such a typo kept full marks on every seed; now any move of 100000 past 10 is seen). A generator
asks for more values than there are fixed points, so that random ones are drawn too."""


def fixed_points(domain: ArgumentDomain) -> list[float]:
    """What every draw holds: the declared values, each edge, its neighbours and (on a continuous
    domain) its points NEAR_EDGE off, both bounds."""
    points = [*domain.values]
    for edge in domain.edges:
        points += [edge, *(edge + offset for offset in domain.around)]
        if not domain.integer:
            points += [edge * (1 + sign * near) for near in NEAR_EDGE for sign in (-1, 1)
                       if domain.low <= edge * (1 + sign * near) <= domain.high]
    points += [domain.low, domain.high]
    return list(dict.fromkeys(points))


def random_points(domain: ArgumentDomain, rng: np.random.Generator, count: int) -> np.ndarray:
    """`count` points between the bounds, spread on the domain's scale."""
    if count <= 0:
        return np.zeros(0)
    if domain.integer:
        return rng.integers(int(domain.low), int(domain.high) + 1, size=count).astype(np.float64)
    if domain.scale == "log":
        return 10.0 ** rng.uniform(np.log10(domain.low), np.log10(domain.high), size=count)
    return rng.uniform(domain.low, domain.high, size=count)


def draw(domain: ArgumentDomain, rng: np.random.Generator, count: int) -> np.ndarray:
    """`count` values of the argument (float64, whole numbers for an integer domain), in a drawn
    order: the fixed points first (all of them, even when they alone exceed `count`), then
    random ones. The order is shuffled so no position in a check's calls is special."""
    fixed = np.asarray(fixed_points(domain), dtype=np.float64)
    drawn = np.concatenate([fixed, random_points(domain, rng, count - fixed.size)])
    return rng.permutation(drawn)


def describe(domain: ArgumentDomain) -> str:
    """One line for an instructor: `a in [1e-07, 1e+07] (log), edges 1 (±0.001)`."""
    text = f"{domain.argument} in [{domain.low:g}, {domain.high:g}]"
    text += " (integers)" if domain.integer else f" ({domain.scale})"
    if domain.values:
        text += ", and " + ", ".join(f"{v:g}" for v in domain.values)
    if domain.edges:
        text += ", edges " + ", ".join(f"{e:g}" for e in domain.edges)
        if domain.around:
            text += " (" + ", ".join(f"{o:+g}" for o in domain.around) + ")"
        if not domain.integer:
            text += f" and {NEAR_EDGE[0]:g}-{NEAR_EDGE[-1]:g} of it off"
    return text
