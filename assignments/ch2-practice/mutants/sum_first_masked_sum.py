# fails: sum_first.uses_while
# sum_first adds the elements below index n with a mask (jnp.where) instead of looping with lax.fori_loop.
@jax.jit
def sum_first(arr, n):
    return jnp.sum(jnp.where(jnp.arange(arr.shape[0]) < n, arr, 0.0))
