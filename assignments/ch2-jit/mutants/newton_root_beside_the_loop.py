# fails: newton.uses_while
# newton_sqrt counts its iterations with a real lax.while_loop, but returns jnp.sqrt(a): the root does not come out of the loop.
@jax.jit
def newton_sqrt(a, tol):
    x0 = jnp.where(a < 1.0, 1.0, a)

    def cond_fun(state):
        x, x_prev, k = state
        return (jnp.abs(x - x_prev) >= tol) & (k < 100)

    def body_fun(state):
        x, _, k = state
        return 0.5 * (x + a / x), x, k + 1

    _, _, k = lax.while_loop(cond_fun, body_fun, (x0, x0 + 1.0, 0))
    return jnp.sqrt(a), k
