# fails: sum_first.uses_while, sum_first.compiles_once
# sum_first is the chapter's unrolled Python loop with n static (static_argnums=1): right values, but no while loop and one compilation per n.
@partial(jax.jit, static_argnums=1)
def sum_first(arr, n):
    total = 0.0
    for i in range(n):
        total = total + arr[i]
    return total
