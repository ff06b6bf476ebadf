"""What runs inside the verifier's sandbox, loaded by file path (never as the `grader` package)."""
