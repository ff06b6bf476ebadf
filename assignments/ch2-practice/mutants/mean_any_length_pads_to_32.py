# fails: bucketing.mean_any_length_hidden, bucketing.mean_any_length_pads_and_masks
# mean_any_length always pads to 32 elements, not to bucket_size(len(x)), so any x longer than 32 cannot be padded (the notebook's lengths are all shorter).
def mean_any_length(x):
    n = x.shape[0]
    return masked_mean(jnp.pad(x, (0, 32 - n)), n)
