# fails: ema.step_visible, ema.step_hidden, ema.ema_visible, ema.ema_hidden
# ema_step weighs the new value by decay and the old average by 1 - decay (decay read as the weight of x), so ema follows the series instead of smoothing it.
def ema_step(avg, x, decay):
    return (1 - decay) * avg + decay * x
