# fails: ema.calls_step
# ema's scan body writes the formula again instead of calling ema_step: right values, but not the step function the text asks for.
@jax.jit
def ema(xs, decay):
    def body(avg, x):
        new_avg = decay * avg + (1 - decay) * x
        return new_avg, new_avg

    _, averages = lax.scan(body, xs[0], xs)
    return averages
