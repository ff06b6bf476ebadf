# fails: bucketing.mean_any_length_pads_and_masks
# mean_any_length takes jnp.mean of x itself: the right values, but no padding to bucket_size and no masked_mean.
def mean_any_length(x):
    return jnp.mean(x)
