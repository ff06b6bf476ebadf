# fails: newton.iterations, newton.uses_while
# newton_sqrt returns jnp.sqrt(a) with a made-up count that only grows as tol shrinks.
@jax.jit
def newton_sqrt(a, tol):
    return jnp.sqrt(a), (-jnp.log10(tol)).astype(jnp.int32) + 1
