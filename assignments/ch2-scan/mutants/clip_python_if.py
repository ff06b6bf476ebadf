# fails: clip.visible, clip.hidden, clip.uses_cond, clip.compiles_once
# clip_by_norm tests the traced norm with a Python if: it cannot be traced by jax.jit (TracerBoolConversionError).
@jax.jit
def clip_by_norm(g, max_norm):
    norm = jnp.sqrt(jnp.sum(g * g))
    if norm > max_norm:
        return g * (max_norm / norm)
    return g
