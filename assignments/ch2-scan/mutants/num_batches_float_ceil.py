# fails: batches.hidden
# num_batches divides in floating point and rounds up with math.ceil: right for small n, off by one beyond float64's exact integers (2**53), where the text says "exact for any n".
import math


def num_batches(n, batch_size, drop_last):
    if drop_last:
        return n // batch_size
    return int(math.ceil(n / batch_size))
