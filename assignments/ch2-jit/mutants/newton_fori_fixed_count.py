# fails: newton.uses_while
# newton_sqrt runs 60 Newton steps with lax.fori_loop, masked once |x_(k+1) - x_k| < tol: right root and count, but its loop stops after a fixed count, not on the values (a while_loop's stop).
@jax.jit
def newton_sqrt(a, tol):
    x0 = jnp.where(a < 1.0, 1.0, a)

    def body(_, state):
        x, x_prev, k = state
        go = jnp.abs(x - x_prev) >= tol
        return jnp.where(go, 0.5 * (x + a / x), x), jnp.where(go, x, x_prev), k + go.astype(jnp.int32)

    x, _, k = lax.fori_loop(0, 60, body, (x0, x0 + 1.0, jnp.int32(0)))
    return x, k
