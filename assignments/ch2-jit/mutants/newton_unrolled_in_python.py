# fails: newton.uses_while
# newton_sqrt unrolls 40 Newton steps in Python (no loop in its program) and counts the steps whose change was >= tol.
@jax.jit
def newton_sqrt(a, tol):
    x = jnp.where(a < 1.0, 1.0, a)
    k = jnp.int32(0)
    for _ in range(40):
        x_new = 0.5 * (x + a / x)
        k = k + (jnp.abs(x_new - x) >= tol).astype(jnp.int32)
        x = x_new
    return x, k
