# Reference solutions of the ch2-scan exercises (Chapter 2 extension: loops that carry state with
# lax.scan). `grade solutions/ch2-scan.py` must give 100/100. Cells are marked with `# %% [name]`:
# the setup cell, then one cell per exercise id of assignments/ch2-scan.

# %% [setup]
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

# %% [batches]
def num_batches(n, batch_size, drop_last):
    # plain Python integers: exact for any n, and usable as a loop count or a static length
    if drop_last:
        return n // batch_size
    return -(-n // batch_size)  # ceil(n / batch_size) without a float


# %% [ema]
def ema_step(avg, x, decay):
    return decay * avg + (1 - decay) * x


@jax.jit
def ema(xs, decay):
    def body(avg, x):
        new_avg = ema_step(avg, x, decay)
        return new_avg, new_avg  # (carry for the next step, output of this step)

    _, averages = lax.scan(body, xs[0], xs)
    return averages


# %% [clip]
@jax.jit
def clip_by_norm(g, max_norm):
    norm = jnp.sqrt(jnp.sum(g * g))
    # only the branch the traced predicate picks runs: no division when the norm is small enough
    return lax.cond(norm > max_norm, lambda v: v * (max_norm / norm), lambda v: v, g)
