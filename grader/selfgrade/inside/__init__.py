"""The child process of the pack's `grade` (loaded by path: nothing here imports the grader)."""
