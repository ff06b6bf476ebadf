# fails: bucketing.mean_any_length_pads_and_masks
# mean_any_length pads and calls masked_mean only for inputs of up to 16 elements, and takes jnp.mean of longer ones.
def mean_any_length(x):
    n = x.shape[0]
    if n > 16:
        return jnp.mean(x)
    return masked_mean(jnp.pad(x, (0, bucket_size(n) - n)), n)
