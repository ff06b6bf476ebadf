# fails: ema.uses_scan
# ema unrolls a Python loop over xs while tracing (calling ema_step each time) and stacks the averages: right values, but no lax.scan.
@jax.jit
def ema(xs, decay):
    avg, out = xs[0], []
    for t in range(xs.shape[0]):
        avg = ema_step(avg, xs[t], decay)
        out.append(avg)
    return jnp.stack(out)
