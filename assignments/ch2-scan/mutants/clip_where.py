# fails: clip.uses_cond
# clip_by_norm picks with jnp.where, computing the rescaled gradient every time: right values, no lax.cond.
@jax.jit
def clip_by_norm(g, max_norm):
    norm = jnp.sqrt(jnp.sum(g * g))
    return jnp.where(norm > max_norm, g * (max_norm / norm), g)
