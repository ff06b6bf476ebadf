# fails: bucketing.bucket_size, bucketing.bucket_size_hidden
# bucket_size rounds up to a power of 2 but forgets the minimum of 8 (bucket_size(3) is 4).
def bucket_size(n):
    return 1 << (n - 1).bit_length()
