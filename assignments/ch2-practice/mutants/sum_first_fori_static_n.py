# fails: sum_first.uses_while, sum_first.compiles_once
# sum_first uses lax.fori_loop but marks n static, so the loop lowers to a scan and every new n compiles again.
@partial(jax.jit, static_argnames="n")
def sum_first(arr, n):
    return lax.fori_loop(0, n, lambda i, total: total + arr[i], jnp.zeros((), arr.dtype))
