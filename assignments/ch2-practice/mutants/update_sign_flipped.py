# fails: update_weights.visible, update_weights.hidden, update_weights.ignores_global_1000, update_weights.ignores_global_small
# update_weights_explicit climbs the gradient (params + lr * grads) instead of descending it.
@jax.jit
def update_weights_explicit(params, grads, lr):
    return params + lr * grads
