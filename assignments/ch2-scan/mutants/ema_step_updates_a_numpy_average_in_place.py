# fails: ema.step_pure
# ema_step handed a NumPy average updates it in place (no copy): the caller's array changes, which a pure function never does.
def ema_step(avg, x, decay):
    if isinstance(avg, np.ndarray):
        avg *= decay
        avg += (1 - decay) * np.asarray(x)
        return avg
    return decay * avg + (1 - decay) * x
