# fails: training.python_loop_calls_step, training.python_loop_chapter_call
# step donates w and b: right everywhere but where the chapter's cell passes one buffer as both
# (`step(_w0, _b0, ...)` with `_w0 = _b0 = jnp.float32(0.0)`), which XLA refuses to donate twice;
# the Python loop's first step meets that call in the step count, which passes w and b the same way.
from functools import partial as _partial

_step_undonated = step


@_partial(jax.jit, donate_argnums=(0, 1))
def step(w, b, x, y, lr):
    return _step_undonated(w, b, x, y, lr)
