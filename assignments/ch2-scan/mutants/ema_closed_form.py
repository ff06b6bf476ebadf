# fails: ema.uses_scan, ema.calls_step
# ema computes every average at once from a triangular matrix of decay powers: right values, but no loop with lax.scan and no ema_step.
@jax.jit
def ema(xs, decay):
    t = jnp.arange(xs.shape[0])
    lag = t[:, None] - t[None, :]
    weights = jnp.where(lag >= 0, (1 - decay) * decay ** jnp.maximum(lag, 0), 0.0)
    return weights @ xs + decay ** (t + 1) * xs[0]
