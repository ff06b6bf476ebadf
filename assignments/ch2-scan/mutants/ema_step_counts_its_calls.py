# fails: ema.step_pure, ema.ema_pure
# ema_step counts its calls in a global dict: right values, but neither ema_step nor ema (which calls it) is pure.
step_calls = {"count": 0}


def ema_step(avg, x, decay):
    step_calls["count"] += 1
    return decay * avg + (1 - decay) * x
