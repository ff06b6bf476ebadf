# fails: clip.compiles_once
# clip_by_norm marks max_norm static: right values and a lax.cond, but every new max_norm compiles again.
@partial(jax.jit, static_argnames="max_norm")
def clip_by_norm(g, max_norm):
    norm = jnp.sqrt(jnp.sum(g * g))
    return lax.cond(norm > max_norm, lambda v: v * (max_norm / norm), lambda v: v, g)
