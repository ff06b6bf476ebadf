# fails: bucketing.masked_mean_visible, bucketing.masked_mean_hidden, bucketing.mean_any_length_visible, bucketing.mean_any_length_hidden, bucketing.one_bucket_compiles_once, bucketing.three_buckets_compile_three_times
# masked_mean masks the padding but divides by the padded size (jnp.mean) instead of by length.
@jax.jit
def masked_mean(x_padded, length):
    return jnp.mean(jnp.where(jnp.arange(x_padded.shape[0]) < length, x_padded, 0.0))
