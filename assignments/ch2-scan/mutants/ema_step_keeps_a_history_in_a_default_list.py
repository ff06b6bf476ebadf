# fails: ema.step_pure
# ema_step appends every average to a list that is its own default argument: one list all calls share, so it changes something outside the call.
def ema_step(avg, x, decay, _history=[]):
    new = decay * avg + (1 - decay) * x
    _history.append(new)
    return new
