# fails: bucketing.mean_any_length_pads_and_masks
# mean_any_length calls masked_mean on x as it is, never padded to bucket_size: one compilation per length.
def mean_any_length(x):
    return masked_mean(x, x.shape[0])
