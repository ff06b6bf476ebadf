# fails: batches.visible, batches.hidden
# num_batches rounds n / batch_size to the nearest int instead of rounding the partial batch up (or dropping it).
def num_batches(n, batch_size, drop_last):
    return n // batch_size if drop_last else round(n / batch_size)
