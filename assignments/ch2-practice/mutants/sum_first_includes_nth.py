# fails: sum_first.visible, sum_first.hidden, sum_first.compiles_once, sum_first.uses_while
# sum_first loops up to n inclusive, adding one element too many.
@jax.jit
def sum_first(arr, n):
    return lax.fori_loop(0, n + 1, lambda i, total: total + arr[i], jnp.zeros((), arr.dtype))
