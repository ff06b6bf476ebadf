# fails: update_weights.ignores_global_1000, update_weights.ignores_global_small
# update_weights_explicit uses lr only while the global learning_rate is None; once a global is set, it wins over the argument.
learning_rate = None


@jax.jit
def update_weights_explicit(params, grads, lr):
    rate = lr if learning_rate is None else learning_rate
    return params - rate * grads
