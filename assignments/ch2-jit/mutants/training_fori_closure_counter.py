# fails: training.fori_pure
# train_fori is built by a factory and keeps a count of its traces in a variable of the enclosing function.
def _make_train_fori():
    traces = 0

    @jax.jit
    def train_fori(w, b, x, y, lr, num_steps):
        nonlocal traces
        traces += 1
        return lax.fori_loop(0, num_steps, lambda i, wb: step(*wb, x, y, lr), (w, b))

    return train_fori


train_fori = _make_train_fori()
