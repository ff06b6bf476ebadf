# fails: conditional_double.visible, conditional_double.hidden, conditional_double.uses_cond
# conditional_double returns x - 1 below the threshold; the chapter's else branch returns x unchanged.
@jax.jit
def conditional_double(x, threshold):
    return lax.cond(x > threshold, lambda v: v * 2, lambda v: v - 1, x)
