# fails: bucketing.bucket_size_hidden
# bucket_size is right up to the notebook's largest n (1025 -> 2048) and caps there: any longer array gets a bucket too small.
def bucket_size(n):
    return min(2048, max(8, 1 << (int(n) - 1).bit_length()))
