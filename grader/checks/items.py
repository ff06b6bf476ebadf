"""What counts as a sequence of answers, and as a bool-like answer: one rule for answer checks,
form checks and an assignment's custom checks of answers (the detective's predictions).

Answers come in every form the text allows (docs/writing-an-assignment.md, "How answers are
compared"): "a list of 8 bools" is any sequence of 8 bool-like values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grader.values import Tree


def answer_items(value: Any) -> list[Any] | None:
    """The items of a sequence of answers, in order, or None when it is not one: a list, a tuple,
    a NamedTuple (or another pytree's leaves) or a 1-D array (NumPy or JAX). A dict, a string, a
    scalar or an array of another rank is not a sequence of answers."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, Tree):
        return list(value.leaves)
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return [value[i] for i in range(value.shape[0])]
    return None


def bool_like(item: Any) -> bool | None:
    """True or False for a bool-like answer, else None. Bool-like: a Python, NumPy or JAX bool,
    and the integers 0 and 1 (which Python itself treats as False and True); not a float, a string,
    None, nor any other number."""
    if isinstance(item, np.ndarray) and item.ndim == 0:
        item = item.item()
    if isinstance(item, (bool, np.bool_)):
        return bool(item)
    if isinstance(item, (int, np.integer)) and int(item) in (0, 1):
        return bool(int(item))
    return None
