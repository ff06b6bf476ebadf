# fails: bucketing.one_bucket_compiles_once, bucketing.three_buckets_compile_three_times
# masked_mean slices x_padded[:length] with length static: right values, but one compilation per length.
@partial(jax.jit, static_argnames="length")
def masked_mean(x_padded, length):
    return jnp.mean(x_padded[:length])
