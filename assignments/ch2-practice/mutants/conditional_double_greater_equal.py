# fails: conditional_double.visible, conditional_double.hidden
# conditional_double doubles x also when x equals the threshold (>= instead of >).
@jax.jit
def conditional_double(x, threshold):
    return lax.cond(x >= threshold, lambda v: v * 2, lambda v: v, x)
