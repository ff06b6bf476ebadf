# fails: tax.switch_uses_cond
# tax_switch chooses a branch from the income with lax.switch, but every branch computes the whole tax with jnp.select (each written its own way, so their last bits differ): whichever branch it takes, the answer is the same, so the switch chooses nothing.
@jax.jit
def tax_switch(income):
    def by_bracket_start(v):
        conds = [v < 10000, v < 40000, v < 100000]
        choices = [jnp.zeros_like(v), (v - 10000) * 0.10, 3000 + (v - 40000) * 0.20]
        return jnp.select(conds, choices, default=15000 + (v - 100000) * 0.30)

    def by_rate(v):
        conds = [v >= 100000, v >= 40000, v >= 10000]
        choices = [v * 0.30 - 15000, v * 0.20 - 5000, v * 0.10 - 1000]
        return jnp.select(conds, choices, default=jnp.zeros_like(v))

    index = jnp.searchsorted(jnp.array([10000.0, 40000.0, 100000.0]), income, side="right")
    return lax.switch(index, [by_bracket_start, by_rate, by_bracket_start, by_rate], income)
