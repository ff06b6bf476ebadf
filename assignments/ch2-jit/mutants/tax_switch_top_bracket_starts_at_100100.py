# fails: tax.switch_hidden
# tax_switch chooses the 30% bracket from 100100 (a typo) though each branch is right: too low by up to 10 between 100000 and 100100, a tenth of the gap, under the check's tolerance at the edge's neighbours.
_starts = np.array([0.0, 10000.0, 40000.0, 100100.0], dtype=np.float32)


@jax.jit
def tax_switch(income):
    idx = jnp.searchsorted(_starts, income, side="right") - 1
    branches = [(lambda inc, k=k: base_tax[k] + (inc - brackets[k]) * rates[k]) for k in range(4)]
    return lax.switch(idx, branches, income)
