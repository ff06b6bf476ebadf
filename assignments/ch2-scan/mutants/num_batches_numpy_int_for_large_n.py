# fails: batches.returns_int_hidden
# num_batches returns a NumPy int64 past a trillion examples: exact values (int64 holds 9e18), a Python int for the notebook's.
import numpy as _np


def num_batches(n, batch_size, drop_last):
    full, rest = divmod(n, batch_size)
    count = full + (1 if rest and not drop_last else 0)
    return _np.int64(count) if n > 10**12 else count
