"""Which exercises a hand-written mutant can change (grader/course/reach.py): validate grades it
on those alone, so every way a cell reaches an exercise must be found, or the mutant graded whole."""

from __future__ import annotations

import pytest

from grader.course.reach import exercises_reached

REFERENCE = '''# %% [setup]
import jax.numpy as jnp
SCALE = 2.0
history = []

# %% [loss]
def loss(w):
    return jnp.sum(w ** 2) * SCALE

# %% [step]
def step(w):
    return w - 0.1 * grad_of(w)

def grad_of(w):
    return 2 * w * SCALE

# %% [train]
def train(w, n):
    for _ in range(n):
        w = step(w)
    return w

# %% [log]
def logged(w):
    return len(history), w
'''
EXERCISES = ["loss", "step", "train", "log"]


@pytest.mark.parametrize("cell, reached", [
    ("def loss(w):\n    return jnp.sum(w ** 2)\n", ("loss",)),
    # a helper of one exercise's function reaches every exercise that calls it, transitively
    ("def grad_of(w):\n    return w\n", ("step", "train")),
    ("train = lambda w, n: w\n", ("train",)),
    # what the setup binds is read by every exercise that reads it
    ("SCALE = 3.0\n", ("loss", "step", "train")),
    ("import numpy as jnp\n", ("loss",)),
    # a function that rebinds a module-level name when called, or changes shared data in place
    ("def loss(w):\n    global SCALE\n    SCALE = 1.0\n    return w\n", ("loss", "step", "train")),
    ("def loss(w):\n    history.append(w)\n    return jnp.sum(w ** 2)\n", ("loss", "log")),
    ("def unused(w):\n    return w\n", ()),
])
def test_a_cell_reaches_the_exercises_that_read_what_it_binds(cell: str, reached: tuple[str, ...]) -> None:
    assert exercises_reached(cell, REFERENCE, EXERCISES) == reached


@pytest.mark.parametrize("cell", [
    "history.append(1)\n",  # a call for its effect
    "jnp.sum = lambda x: 0\n",  # an attribute of a shared module
    "history[0] = 1\n",
    "for i in range(2):\n    SCALE = i\n",
])
def test_a_cell_that_does_more_than_bind_names_is_graded_whole(cell: str) -> None:
    assert exercises_reached(cell, REFERENCE, EXERCISES) is None


def test_a_reference_whose_cells_do_not_name_the_exercises_grades_every_mutant_whole() -> None:
    unnamed = REFERENCE.replace("# %% [train]", "# %% [training]")
    assert exercises_reached("def loss(w):\n    return w\n", unnamed, EXERCISES) is None
    assert exercises_reached("def loss(w):\n    return w\n", REFERENCE + "\n# %% [loss]\nx = 1\n", EXERCISES) is None
