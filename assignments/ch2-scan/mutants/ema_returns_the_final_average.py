# fails: ema.ema_visible, ema.ema_hidden, ema.uses_scan, ema.compiles_once
# ema returns only the final carry of the scan (one number) instead of the stacked average after each element.
@jax.jit
def ema(xs, decay):
    def body(avg, x):
        new_avg = ema_step(avg, x, decay)
        return new_avg, new_avg

    final, _ = lax.scan(body, xs[0], xs)
    return final
