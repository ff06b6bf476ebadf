# fails: training.fori_uses_while
# train_fori scans a fixed 1000 steps (lax.scan of a length fixed when traced), masked to the traced num_steps: right values up to 1000 steps, but the loop does not count to num_steps.
@jax.jit
def train_fori(w, b, x, y, lr, num_steps):
    def body(wb, i):
        nw, nb = step(wb[0], wb[1], x, y, lr)
        keep = i < num_steps
        return (jnp.where(keep, nw, wb[0]), jnp.where(keep, nb, wb[1])), None

    (w, b), _ = lax.scan(body, (w, b), jnp.arange(1000))
    return w, b
