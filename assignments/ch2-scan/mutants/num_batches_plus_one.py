# fails: batches.visible, batches.hidden
# num_batches adds a batch for the remainder even when there is none: one too many on an exact multiple of batch_size, and 1 for an empty epoch.
def num_batches(n, batch_size, drop_last):
    return n // batch_size if drop_last else n // batch_size + 1
