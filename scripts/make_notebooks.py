"""Build the ch2-jit template and solution notebooks from solutions/ch2-jit.py.

One source for both: the solution notebook is the template with the answer cells filled in from
the module's `# %% [exercise]` sections. Run `python scripts/make_notebooks.py` after editing the
module or the texts below; tests/test_content.py fails when the committed notebooks are stale.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENT = "ch2-jit"

INTRO = """# Chapter 2 exercises: `jax.jit`

Four exercises on compiling with `jax.jit`: branching with `lax.switch`, looping with
`lax.while_loop` and `lax.fori_loop`, and predicting when JAX recompiles.

Write each answer in the cell marked **Your answer**, then run the **Self-check** cell under it:
it runs the grader's own checks for that exercise on what you defined (some on random inputs).
Your grade comes from `grade <this notebook>`, which runs the whole notebook in a fresh Python
process, on inputs you have not seen, and scores it there."""

EXERCISES = {
    "tax": """## Exercise 1 (25 points): a progressive tax

Income is taxed bracket by bracket: nothing on the first 10,000; 10 % on the part between
10,000 and 40,000; 20 % on the part between 40,000 and 100,000; 30 % on everything above 100,000.
So an income of 50,000 owes 3,000 + 2,000 = 5,000.

* `tax_switch(income)` takes a **scalar** income, works out which bracket it is in as a traced
  index, and picks that bracket's formula with **`lax.switch`**.
* `tax_vectorized(income)` takes an array of **any shape** and returns the tax of each element,
  using `jnp.select` or `jnp.where`; it must also work under `jax.jit`.""",
    "newton": """## Exercise 2 (25 points): Newton's square root

Write `newton_sqrt(a, tol)`, **wrapped in `jax.jit`**, that starts from `x = a` (or from 1 when
`a < 1`), repeats `x ← (x + a / x) / 2` until one step changes `x` by less than `tol`, and returns
the pair `(root, number_of_iterations)`. Loop with **`lax.while_loop`**: whether to go on depends
on a traced value, which a Python `while` cannot test. Keep `tol` a traced argument, so that new
values of `a` or `tol` do not trigger a new compilation.""",
    "detective": """## Exercise 3 (20 points): the recompilation detective

```python
@partial(jax.jit, static_argnames=["mode"])
def detective(x, mode="a"):
    return x * 2 if mode == "a" else x + 1

detective(jnp.ones(3))                       # 1
detective(jnp.ones(3) * 5)                   # 2
detective(jnp.ones(4))                       # 3
detective(jnp.ones(3), mode="b")             # 4
detective(jnp.ones(3, dtype=jnp.int32))      # 5
detective(1.0)                               # 6
detective(jnp.float32(1.0))                  # 7
detective(jnp.ones(3), mode="a")             # 8
```

Without running it, decide for each call whether it makes XLA compile. Answer with
`predictions`, a list of 8 booleans (`True` = this call compiles). The table of section 2.3
(E1-E8) has everything you need.""",
    "training": """## Exercise 4 (30 points): a pure training loop

Fit `y ≈ w·x + b` by gradient descent on the mean squared error, without globals:

* `step(w, b, x, y, lr)` does one step: with `err = w·x + b − y`, it returns
  `(w − lr·mean(2·err·x), b − lr·mean(2·err))`;
* `train_python_loop(w, b, x, y, lr, num_steps)` calls `step` `num_steps` times from Python;
* `train_fori(w, b, x, y, lr, num_steps)`, **wrapped in `jax.jit`**, does the same in one
  compiled function with **`lax.fori_loop`**, with `lr` and `num_steps` both traced arguments
  (new values must not recompile). Both loops return `(w, b)`.""",
}

SETUP = "from functools import partial\n\nimport jax\nimport jax.numpy as jnp\nimport numpy as np\nfrom jax import lax"


def solution_sections() -> dict[str, str]:
    text = (ROOT / "solutions" / f"{ASSIGNMENT}.py").read_text()
    parts = re.split(r"^# %% \[(\w+)\]\n", text, flags=re.M)
    return {name: body.strip() + "\n" for name, body in zip(parts[1::2], parts[2::2])}


def build(answers: dict[str, str] | None) -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["grader"] = {"assignment": ASSIGNMENT}
    nb.cells.append(new_markdown_cell(INTRO))
    nb.cells.append(new_code_cell(SETUP))
    for exercise, text in EXERCISES.items():
        nb.cells.append(new_markdown_cell(text))
        answer = answers[exercise] if answers else f"# Your answer: exercise {exercise}\n"
        nb.cells.append(new_code_cell(answer))
        selfcheck = new_code_cell(f'from grader.selfcheck import check\ncheck("{exercise}")')
        selfcheck.metadata["tags"] = ["selfcheck"]
        nb.cells.append(selfcheck)
    for i, cell in enumerate(nb.cells):  # stable ids keep regenerated files byte-identical
        cell["id"] = f"{ASSIGNMENT}-{i:02d}"
    return nb


def render(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


def targets() -> dict[Path, str]:
    return {
        ROOT / "student_template" / f"{ASSIGNMENT}.ipynb": render(build(None)),
        ROOT / "solutions" / f"{ASSIGNMENT}.ipynb": render(build(solution_sections())),
    }


def main() -> int:
    for path, text in targets().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
