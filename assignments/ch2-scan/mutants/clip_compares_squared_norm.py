# fails: clip.visible, clip.hidden
# clip_by_norm compares the squared norm with max_norm (a forgotten sqrt) before rescaling by the norm: for a norm between the two it scales the gradient up.
@jax.jit
def clip_by_norm(g, max_norm):
    sq = jnp.sum(g * g)
    return lax.cond(sq > max_norm, lambda v: v * (max_norm / jnp.sqrt(sq)), lambda v: v, g)
