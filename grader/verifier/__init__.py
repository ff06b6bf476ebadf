"""The verifier: runs the StableHLO modules that kernels export, in a sandboxed process of its
own that runs no student Python, and reports facts and values that the grader validates.

`inside/` is what runs in the verifier's sandbox (`runtime.py` and the modules it loads by path,
the verifier's fork server): the only folder of the grader the verifier's sandbox binds.
`protocol.py` holds the job and result models; `client.py` starts the process and reads it."""

from pathlib import Path

INSIDE = Path(__file__).resolve().parent / "inside"
"""The verifier's `inside/`: bound read-only into its sandbox, hashed for the compiled-program store."""
