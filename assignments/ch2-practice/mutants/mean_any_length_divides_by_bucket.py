# fails: bucketing.mean_any_length_visible, bucketing.mean_any_length_hidden
# mean_any_length passes the padded size as the length, so the zeros of the padding count in the mean.
def mean_any_length(x):
    size = bucket_size(x.shape[0])
    return masked_mean(jnp.pad(x, (0, size - x.shape[0])), size)
