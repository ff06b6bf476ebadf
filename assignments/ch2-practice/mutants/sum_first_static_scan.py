# fails: sum_first.uses_while
# sum_first scans every element with lax.scan (a length fixed when traced) and adds those below index n: right sums, but its loop does not count to the traced n.
@jax.jit
def sum_first(arr, n):
    def body(total, item):
        i, value = item
        return total + jnp.where(i < n, value, 0.0), None

    total, _ = lax.scan(body, jnp.zeros((), arr.dtype), (jnp.arange(arr.shape[0]), arr))
    return total
