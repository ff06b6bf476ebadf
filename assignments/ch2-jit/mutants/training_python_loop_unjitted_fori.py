# fails: training.python_loop_calls_step, training.python_loop_calls_step_hidden
# train_python_loop is an un-jitted lax.fori_loop around step: the right values, but no Python loop
# calling step num_steps times (fori_loop traces step once, whatever num_steps is).
def train_python_loop(w, b, x, y, lr, num_steps):
    return lax.fori_loop(0, num_steps, lambda i, wb: step(wb[0], wb[1], x, y, lr), (w, b))
