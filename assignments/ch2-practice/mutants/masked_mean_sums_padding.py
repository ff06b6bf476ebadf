# fails: bucketing.masked_mean_visible, bucketing.masked_mean_hidden, bucketing.one_bucket_compiles_once, bucketing.three_buckets_compile_three_times
# masked_mean sums the whole padded array, right only when the padding is zeros (as jnp.pad makes it).
@jax.jit
def masked_mean(x_padded, length):
    return jnp.sum(x_padded) / length
