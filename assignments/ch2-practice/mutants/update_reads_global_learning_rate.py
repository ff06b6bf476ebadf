# fails: update_weights.visible, update_weights.hidden, update_weights.ignores_global_1000, update_weights.ignores_global_small
# update_weights_explicit ignores lr and reads the global learning_rate, frozen into the program when it is traced.
learning_rate = 0.01


@jax.jit
def update_weights_explicit(params, grads, lr):
    return params - learning_rate * grads
