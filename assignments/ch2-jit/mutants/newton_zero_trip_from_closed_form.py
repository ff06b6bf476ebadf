# fails: newton.iterations, newton.uses_while, newton.iterations_chapter_calls
# newton_sqrt starts its lax.while_loop at jnp.sqrt(a) twice: the stop reads the values the loop computes, but it is false from the start, so the loop runs no step and the closed form is the answer.
@jax.jit
def newton_sqrt(a, tol):
    root = jnp.sqrt(a)

    def cond_fun(state):
        x, x_prev, k = state
        return jnp.abs(x - x_prev) >= tol

    def body_fun(state):
        x, _, k = state
        return 0.5 * (x + a / x), x, k + 1

    x, _, k = lax.while_loop(cond_fun, body_fun, (root, root, 0))
    return x, k
