"""Grading a class: discovering submissions, executors (local, Dask), warm workers, progress."""
