# fails: tax.vectorized_handles_arrays
# tax_vectorized runs a lax.fori_loop over the elements, one jnp.select per income: right values and shape, and a program as long for 3 incomes as for 12, but its loop makes one step per element.
@jax.jit
def tax_vectorized(income):
    flat = jnp.ravel(income)

    def one(i, out):
        v = flat[i]
        t = jnp.select([v < 10000, v < 40000, v < 100000], [0.0 * v, (v - 10000) * 0.10, 3000 + (v - 40000) * 0.20],
                       default=15000 + (v - 100000) * 0.30)
        return out.at[i].set(t)

    return lax.fori_loop(0, flat.shape[0], one, jnp.zeros_like(flat)).reshape(jnp.shape(income))
