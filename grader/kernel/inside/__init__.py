"""What runs inside a kernel's sandbox, loaded by file path (never as the `grader` package)."""
