# fails: tax.switch_uses_cond
# tax_switch computes the tax with jnp.select and adds 0 times a lax.switch on the constant index 0: its program has a case, but the case chooses nothing.
@jax.jit
def tax_switch(income):
    conds = [income < 10000, income < 40000, income < 100000]
    choices = [jnp.zeros_like(income), (income - 10000) * 0.10, 3000 + (income - 40000) * 0.20]
    answer = jnp.select(conds, choices, default=15000 + (income - 100000) * 0.30)
    decoy = lax.switch(0, [lambda v: v, lambda v: 2 * v], income)
    return answer + 0 * decoy
