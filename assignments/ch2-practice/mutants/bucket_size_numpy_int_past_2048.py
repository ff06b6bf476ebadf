# fails: bucketing.bucket_size_python_int_hidden
# bucket_size returns a NumPy int64 past 2048: the right powers of 2, a Python int for the notebook's lengths.
import numpy as _np


def bucket_size(n):
    size = max(8, 1 << (n - 1).bit_length())
    return _np.int64(size) if n > 2048 else size
