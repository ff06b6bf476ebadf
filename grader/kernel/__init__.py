"""The grader's side of the student's kernel: start it, speak to it, read what it sends.

`inside/` is what runs in the kernel's sandbox (the probe, the kernels' fork server): the
only folder of the grader a kernel's sandbox binds."""

from pathlib import Path

INSIDE = Path(__file__).resolve().parent / "inside"
"""The kernel's `inside/`: bound read-only into its sandbox, hashed for the compiled-program store."""
