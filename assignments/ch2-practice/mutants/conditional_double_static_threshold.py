# fails: conditional_double.compiles_once
# conditional_double uses lax.cond but marks threshold static, so every new threshold compiles again.
@partial(jax.jit, static_argnames="threshold")
def conditional_double(x, threshold):
    return lax.cond(x > threshold, lambda v: v * 2, lambda v: v, x)
