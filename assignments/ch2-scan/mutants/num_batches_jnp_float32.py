# fails: batches.hidden
# num_batches divides with jnp (float32 by default): exact for the notebook's small epochs, off by one or more once n is beyond float32's exact integers.
def num_batches(n, batch_size, drop_last):
    ratio = jnp.float32(n) / jnp.float32(batch_size)
    return int(jnp.floor(ratio)) if drop_last else int(jnp.ceil(ratio))
