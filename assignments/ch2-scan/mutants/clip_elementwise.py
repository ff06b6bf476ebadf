# fails: clip.visible, clip.hidden, clip.uses_cond
# clip_by_norm clips each element to [-max_norm, max_norm] (jnp.clip) instead of rescaling the whole gradient by its norm.
@jax.jit
def clip_by_norm(g, max_norm):
    return jnp.clip(g, -max_norm, max_norm)
