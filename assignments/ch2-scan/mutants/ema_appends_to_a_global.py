# fails: ema.ema_pure
# ema's scan body appends each average to a global list (a side effect that runs while tracing): right values, but not a pure function.
history = []


@jax.jit
def ema(xs, decay):
    def body(avg, x):
        new_avg = ema_step(avg, x, decay)
        history.append(new_avg)
        return new_avg, new_avg

    _, averages = lax.scan(body, xs[0], xs)
    return averages
