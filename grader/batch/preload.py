"""A Dask worker that is warm before its first task: `dask worker ADDRESS --preload grader.batch.preload`.

Dask runs `dask_setup` as the worker starts, before it joins the scheduler. It starts the
worker's kernel and verifier fork servers (grader/batch/early_servers.py: they boot while the
rest imports), then imports the grader and JAX, so a batch's first submission or the hand-in
service's first hand-in (grader/serve/dask_backend.py) waits for neither. The servers are for
the sandboxed grading, the default; `dask worker ADDRESS --preload grader.batch.preload
--no-sandbox` starts none (a grading without the sandbox keeps a spare kernel instead). The
first task's thread adopts them (grader/batch/warm_worker.py); those nobody adopted die with
the worker.
"""

from __future__ import annotations

from typing import Any

import click


@click.command()
@click.option("--no-sandbox", is_flag=True, help="the workers grade without the sandbox: no fork servers")
def dask_setup(worker: Any, no_sandbox: bool) -> None:
    from grader.batch import early_servers

    if not no_sandbox:
        early_servers.start(True)
    import grader.pipeline  # noqa: F401 - what every grading imports
    from grader.batch import cluster, warm_worker  # noqa: F401 - the task function and its warm worker

    try:
        import jax  # noqa: F401 - its import is not paid by the first task
    except ImportError:  # a worker without JAX: the worker check says so, in one sentence
        pass
