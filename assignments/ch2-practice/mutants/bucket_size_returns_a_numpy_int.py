# fails: bucketing.bucket_size_python_int, bucketing.bucket_size_python_int_hidden
# bucket_size computes the right size with NumPy and returns a NumPy integer, not the plain Python int the text asks for.
def bucket_size(n):
    return np.maximum(8, 2 ** np.ceil(np.log2(n)).astype(np.int64))
