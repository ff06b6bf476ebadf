# fails: conditional_double.hidden
# conditional_double compares x with its threshold cast to an integer: right for every whole-number threshold (the notebook's 0, 3 and 10, and the domain's edges), wrong for x within 1 of any other (found by an attack: the hidden pairs were never that close).
@jax.jit
def conditional_double(x, threshold):
    return lax.cond(x > threshold.astype(jnp.int32), lambda v: v * 2, lambda v: v, x)
