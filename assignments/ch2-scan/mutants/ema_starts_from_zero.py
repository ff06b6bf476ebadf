# fails: ema.ema_visible, ema.ema_hidden, ema.uses_scan, ema.compiles_once
# ema starts the running average from 0 instead of xs[0], so the first element is (1 - decay) * xs[0] (a bias that fades along the series).
@jax.jit
def ema(xs, decay):
    def body(avg, x):
        new_avg = ema_step(avg, x, decay)
        return new_avg, new_avg

    _, averages = lax.scan(body, jnp.zeros((), xs.dtype), xs)
    return averages
