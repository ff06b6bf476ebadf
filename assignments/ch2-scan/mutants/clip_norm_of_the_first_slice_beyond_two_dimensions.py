# fails: clip.hidden
# clip_by_norm takes the norm of g[0] alone when g has more than two dimensions: right for the vectors and matrices of the notebook, wrong for "g of any shape".
@jax.jit
def clip_by_norm(g, max_norm):
    norm = jnp.sqrt(jnp.sum(g[0] * g[0])) if g.ndim > 2 else jnp.sqrt(jnp.sum(g * g))
    return lax.cond(norm > max_norm, lambda v: v * (max_norm / norm), lambda v: v, g)
