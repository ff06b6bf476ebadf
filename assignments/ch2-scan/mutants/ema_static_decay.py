# fails: ema.compiles_once
# ema marks decay static: right values and a scan, but every new decay compiles again.
@partial(jax.jit, static_argnames="decay")
def ema(xs, decay):
    def body(avg, x):
        new_avg = ema_step(avg, x, decay)
        return new_avg, new_avg

    _, averages = lax.scan(body, xs[0], xs)
    return averages
