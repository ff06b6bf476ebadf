"""Judging: checks planned, observations verified, verdicts as a student may see them.

Imports no process code (no kernel, sandbox or batch module): the self-check and the student
pack judge with this package and the in-process prober and verifier (`local.py`)."""
