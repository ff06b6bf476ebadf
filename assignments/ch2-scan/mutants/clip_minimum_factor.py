# fails: clip.uses_cond
# clip_by_norm scales by jnp.minimum(1, max_norm / norm), the branch-free textbook formula: right values (a zero gradient too), but no lax.cond.
@jax.jit
def clip_by_norm(g, max_norm):
    norm = jnp.sqrt(jnp.sum(g * g))
    return g * jnp.minimum(1.0, max_norm / norm)
