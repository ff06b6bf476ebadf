# fails: bucketing.mean_any_length_pads_and_masks
# mean_any_length pads and calls masked_mean as asked, but returns jnp.mean of x, not what masked_mean gave.
def mean_any_length(x):
    n = x.shape[0]
    masked_mean(jnp.pad(x, (0, bucket_size(n) - n)), n)
    return jnp.mean(x)
