# fails: conditional_double.uses_cond
# conditional_double picks with jnp.where (both sides computed) instead of lax.cond: right values, no cond.
@jax.jit
def conditional_double(x, threshold):
    return jnp.where(x > threshold, x * 2, x)
