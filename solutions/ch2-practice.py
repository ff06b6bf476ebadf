# Reference solutions of the ch2-practice exercises (Chapter 2, sections 2.4-2.7, and its quiz).
# `grade solutions/ch2-practice.py -a ch2-practice` must give 100/100. Cells are marked with
# `# %% [name]`: the setup cell, then one cell per exercise id of assignments/ch2-practice.

# %% [setup]
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

# %% [sum_first]
@jax.jit
def sum_first(arr, n):
    # n is traced: fori_loop with a traced upper bound becomes one while loop, compiled once.
    return lax.fori_loop(0, n, lambda i, total: total + arr[i], jnp.zeros((), arr.dtype))


# %% [conditional_double]
@jax.jit
def conditional_double(x, threshold):
    # x > threshold is a traced boolean: lax.cond picks the branch at run time.
    return lax.cond(x > threshold, lambda v: v * 2, lambda v: v, x)


# %% [bucketing]
@jax.jit
def masked_mean(x_padded, length):
    # length is traced, so no x_padded[:length]: a mask keeps the first `length` elements.
    mask = jnp.arange(x_padded.shape[0]) < length
    return jnp.sum(jnp.where(mask, x_padded, 0.0)) / length


def bucket_size(n):
    return max(8, 1 << (n - 1).bit_length())  # next power of 2, at least 8


def mean_any_length(x):
    n = x.shape[0]
    padded = jnp.pad(x, (0, bucket_size(n) - n))  # one padded shape per bucket
    return masked_mean(padded, n)


# %% [update_weights]
@jax.jit
def update_weights_explicit(params, grads, lr):
    return params - lr * grads


# %% [quiz]
quiz_answers = {1: "B", 2: "C", 3: "B", 4: "C", 5: "B", 6: "B", 7: "D", 8: "C"}
