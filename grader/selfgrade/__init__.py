"""`grade submit.ipynb` from the student pack: the notebook run in a child Python process on the
student's own machine (no kernel, no sandbox: it is the student's own code), judged with the
self-check's judging, and shown as the instructor's `grade` shows a report.

`inside/` is what runs in that child (loaded by path, importing nothing of the grader): it runs
the cells and answers the probe's requests with the kernel's own probe (`grader/kernel/inside`)."""

from pathlib import Path

INSIDE = Path(__file__).resolve().parent / "inside"
"""The child's side: `cells.py`, started by path."""
