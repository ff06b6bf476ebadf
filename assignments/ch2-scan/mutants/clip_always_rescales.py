# fails: clip.visible, clip.hidden, clip.uses_cond
# clip_by_norm rescales every gradient to norm max_norm, also the short ones it should leave alone (and a zero gradient becomes NaN).
@jax.jit
def clip_by_norm(g, max_norm):
    return g * (max_norm / jnp.sqrt(jnp.sum(g * g)))
