# fails: ema.ema_hidden
# ema scans only the first 50 elements of xs and repeats the last average after them: right for the notebook's series and every series of up to 50 elements (found by an attack: it kept full marks on the seeds whose drawn series were 50 long or shorter).
@jax.jit
def ema(xs, decay):
    def body(avg, x):
        new_avg = ema_step(avg, x, decay)
        return new_avg, new_avg

    head = xs[:50]
    _, averages = lax.scan(body, xs[0], head)
    return jnp.concatenate([averages, jnp.full(xs.shape[0] - head.shape[0], averages[-1])])
