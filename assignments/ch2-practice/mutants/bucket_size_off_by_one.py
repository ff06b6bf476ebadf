# fails: bucketing.bucket_size, bucketing.bucket_size_hidden
# bucket_size uses n.bit_length() instead of (n - 1).bit_length(), doubling exact powers of 2 (bucket_size(16) is 32).
def bucket_size(n):
    return max(8, 1 << n.bit_length())
