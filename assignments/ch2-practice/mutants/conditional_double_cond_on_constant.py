# fails: conditional_double.uses_cond
# conditional_double answers with jnp.where and adds 0 times a lax.cond on the constant predicate True: its program has a case, but the case chooses nothing.
@jax.jit
def conditional_double(x, threshold):
    decoy = lax.cond(True, lambda v: v * 2, lambda v: v, x)
    return jnp.where(x > threshold, x * 2, x) + 0 * decoy
