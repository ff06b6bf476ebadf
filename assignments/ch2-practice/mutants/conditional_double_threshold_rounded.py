# fails: conditional_double.hidden
# conditional_double compares x with its threshold rounded to the nearest whole number: right for the notebook's thresholds and the domain's edges, wrong for x near any other threshold.
@jax.jit
def conditional_double(x, threshold):
    return lax.cond(x > jnp.round(threshold), lambda v: v * 2, lambda v: v, x)
