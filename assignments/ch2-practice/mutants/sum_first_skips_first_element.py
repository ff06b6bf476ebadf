# fails: sum_first.hidden
# sum_first starts the loop at 1, skipping arr[0]: invisible on the notebook's jnp.arange(10.0), whose arr[0] is 0.
@jax.jit
def sum_first(arr, n):
    return lax.fori_loop(1, n, lambda i, total: total + arr[i], jnp.zeros((), arr.dtype))
