# fails: training.fori_pure
# train_fori's loop body appends the loss to a global list: right values, but not the pure function the exercise asks for.
losses = []


@jax.jit
def train_fori(w, b, x, y, lr, num_steps):
    def body(i, wb):
        w, b = wb
        losses.append(jnp.mean((w * x + b - y) ** 2))
        return step(w, b, x, y, lr)

    return lax.fori_loop(0, num_steps, body, (w, b))
