# fails: training.python_loop_calls_step_hidden
# train_python_loop loops in Python for up to 10 steps, and hands longer runs to train_fori: not the Python loop calling step num_steps times the text asks for.
def train_python_loop(w, b, x, y, lr, num_steps):
    if num_steps > 10:
        return train_fori(w, b, x, y, lr, num_steps)
    for _ in range(num_steps):
        w, b = step(w, b, x, y, lr)
    return w, b
