"""The verifier: runs the StableHLO modules that kernels export, in a sandboxed process of its
own that runs no student Python (`runtime.py`, loaded by path inside the sandbox), and reports
facts and values that the grader validates (`client.py`)."""

from grader.verifier.client import (
    ALLOWED_CUSTOM_CALLS,
    Aval,
    ModuleFacts,
    Verifier,
    VerifierJob,
    VerifierProcess,
    VerifierResult,
    VerifierStartFailed,
)

__all__ = ["ALLOWED_CUSTOM_CALLS", "Aval", "ModuleFacts", "Verifier", "VerifierJob", "VerifierProcess",
           "VerifierResult", "VerifierStartFailed"]
