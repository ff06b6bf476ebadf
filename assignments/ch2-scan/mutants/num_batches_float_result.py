# fails: batches.returns_int, batches.returns_int_hidden
# num_batches counts right but returns a float (4.0, not 4), unusable as a range() bound or a scan length.
def num_batches(n, batch_size, drop_last):
    return float(n // batch_size) if drop_last else float(-(-n // batch_size))
