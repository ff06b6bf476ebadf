# fails: training.fori_agrees, training.fori_uses_while
# train_fori answers the notebook's 300 steps with the least-squares fit (what 300 steps of lr 0.5 converge to), whatever lr and start it is given; every other count runs the loop (found by a held-out set). Its loop does no work at the notebook's count, so the structure check, whose knockout runs its module on the check's own 300-step runs, fails it too (while the compile-count runs had 300 points, their module was byte for byte this one, and the knockout ran on their counts, 5 to 59).
@jax.jit
def train_fori(w, b, x, y, lr, num_steps):
    def body(i, wb):
        return step(wb[0], wb[1], x, y, lr)

    design = jnp.stack([x, jnp.ones_like(x)], axis=1)
    fit = jnp.linalg.solve(design.T @ design, design.T @ y)
    wf, bf = lax.fori_loop(0, num_steps, body, (w, b))
    return jnp.where(num_steps == 300, fit[0], wf), jnp.where(num_steps == 300, fit[1], bf)
