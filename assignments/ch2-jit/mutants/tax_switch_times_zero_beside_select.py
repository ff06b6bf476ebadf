# fails: tax.switch_uses_cond
# tax_switch computes the tax with jnp.select and adds 0 times a lax.switch whose index does come from the income: the case chooses a branch, but its result never changes the answer.
@jax.jit
def tax_switch(income):
    conds = [income < 10000, income < 40000, income < 100000]
    choices = [jnp.zeros_like(income), (income - 10000) * 0.10, 3000 + (income - 40000) * 0.20]
    answer = jnp.select(conds, choices, default=15000 + (income - 100000) * 0.30)
    index = jnp.searchsorted(jnp.array([10000.0, 40000.0, 100000.0]), income, side="right")
    decoy = lax.switch(index, [lambda v: 0.0 * v, lambda v: 0.1 * v, lambda v: 0.2 * v, lambda v: 0.3 * v], income)
    return answer + 0 * decoy
