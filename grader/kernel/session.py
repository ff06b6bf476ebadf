"""A submission run in a sandboxed Jupyter kernel: `Session`, the shared `Driver`
(grader/kernel/driver.py: the cells, the probe's requests, restarts and replays) over
`KernelProcess`, which runs sources and the probe in a `grader.kernel.client.Kernel`.

What is the kernel's own is here: the probe cell (`probe_code`, its nonce), strays stopped in the
kernel's sandbox before every probe cell, and an exception's text told without the kernel's
temporary folder (`as_handed_in`).
"""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path
from typing import Callable

from grader.kernel import INSIDE as KERNEL_INSIDE
from grader.kernel.client import CellRun, Kernel
from grader.kernel.driver import MAX_RESTARTS as MAX_RESTARTS
from grader.kernel.driver import Driver
from grader.kernel.messages import REQUESTS_KEY
from grader.kernel.protocol import Request
from grader.submission import Submission, file_statement

PROBE_PATH = KERNEL_INSIDE / "runtime.py"
COMPILED = ".grader-compiled"
"""The folder of the kernel's scratch where its probe keeps what XLA compiled for it; the scratch,
and so the folder, is the kernel's alone and goes (or is emptied) with it."""


def probe_payload(requests: list[Request]) -> str:
    """The requests of a probe cell, as the probe reads them (JSON)."""
    return json.dumps([r.model_dump(mode="json") for r in requests])


IN_MESSAGE = ("__import__('IPython').get_ipython().kernel.get_parent()['content']"
              f"[{REQUESTS_KEY!r}]")
"""Where a probe cell finds its requests when they ride in its execute_request
(grader.kernel.messages.REQUESTS_KEY): the message ipykernel is answering."""


def probe_code(requests: list[Request] | None, nonce: str = "", probe_path: Path = PROBE_PATH,
               compiled: Path | None = None) -> str:
    """The cell that asks the probe: load it fresh by path, answer in the user namespace.

    Fresh means a new namespace for every cell, never a module kept in `sys.modules` where the
    student's code could reach it between cells. Its code comes from the bytecode cached beside
    it when that is current (the grader's install compiles it; the sandbox binds it read-only),
    as an import would: compiling the probe's source costs 17 ms a cell, four cells a submission.

    The probe wraps each observation with `nonce`, fresh for each probe cell, so output that a
    thread of the student's earlier cells prints in the shape of an observation is not taken for
    one. (Code that the probe itself calls can still read the nonce: what it reports about itself
    is a claim, which docs/security.md says.)

    `compiled`: a folder of the kernel's scratch where the probe keeps the programs XLA compiled
    for it (`keep_compiled` in the probe): a check that clears JAX's caches then loads a program
    compiled before instead of compiling it again.

    `requests=None`: the cell reads its requests from its execute_request (`IN_MESSAGE`, sent by
    `Kernel.run(..., requests=probe_payload(...))`), so that its source stays a line long
    whatever the inputs weigh.
    """
    payload = IN_MESSAGE if requests is None else repr(probe_payload(requests))
    path = str(probe_path)
    return ("(lambda path, namespace: (exec(__import__('importlib.machinery').machinery.SourceFileLoader("
            "'grader_probe', path).get_code('grader_probe'), namespace), namespace)[1])"
            f"({path!r}, {{'__name__': 'grader_probe', '__file__': {path!r}}})['serve']"
            f"({payload}, globals(), nonce={nonce!r}"
            + (f", compiled={str(compiled)!r})" if compiled is not None else ")"))


_KERNEL_FOLDER = re.compile(r"/(?:[^\s'\"/]+/)*grade-\d+-[^\s'\"/]*/")
"""A kernel's working folder in a path (grader/runtime_paths.py names it `grade-<pid>-...`): where a
module's `__file__` lies (`file_statement`), the student's code's HOME too."""
ALONE = "the grader runs the submitted file alone (files beside it are not handed in)"


def as_handed_in(ename: str | None, evalue: str) -> str:
    """An exception's text as the student can read it: the paths it names without the kernel's
    temporary folder (a file beside the submission is 'data.csv', as the code names it), and a file
    not found told as what it is: not handed in."""
    said = _KERNEL_FOLDER.sub("", evalue)
    return f"{said}; {ALONE}" if ename == "FileNotFoundError" else said


class KernelProcess:
    """The `Process` of a kernel session: kernels from `factory`, one at a time."""

    noun = "the Python kernel"

    def __init__(self, factory: Callable[[], Kernel]):
        self._factory = factory
        self._kernel: Kernel | None = None
        self._launched: Kernel | None = None  # spawned early, adopted by the first `fresh()`

    def launch(self) -> None:
        """Spawn the first kernel now, so that it boots while the grader does other work."""
        if self._kernel is None and self._launched is None:
            self._launched = self._factory().launch()

    @property
    def alive(self) -> bool:
        return self._kernel is not None and self._kernel.alive

    def fresh(self) -> None:
        launched, self._launched = self._launched, None
        if self._kernel is not None:
            self._kernel.close()
        self._kernel = launched or self._factory()
        self._kernel.start()

    def run(self, source: str, filename: str, budget: float) -> CellRun:
        if self._kernel is None:
            return CellRun(status="died", evalue="the kernel is not running")
        return self._kernel.run(source, budget)  # the kernel names its cells itself

    def probe(self, requests: list[Request], budget: float, request_timeout: float | None) -> CellRun:
        """One probe cell; only the observations wrapped with its fresh nonce are its own."""
        if self._kernel is None:
            return CellRun(status="died", evalue="the kernel is not running")
        nonce = secrets.token_hex(16)
        kernel = self._kernel
        if isinstance(kernel, Kernel):
            code = probe_code(None, nonce, compiled=kernel.scratch / COMPILED)
            run = kernel.run(code, budget, observations=True, quiet=request_timeout,
                             requests=probe_payload(requests), nonce=nonce)
        else:  # a test's stand-in kernel: the requests in the cell's source
            run = kernel.run(probe_code(requests, nonce), budget, observations=True, quiet=request_timeout)
        own = [raw.get("observation") for raw in run.observations
               if isinstance(raw, dict) and raw.get("nonce") == nonce]
        return run.model_copy(update={"observations": own})

    @staticmethod
    def as_told(ename: str | None, evalue: str) -> str:
        return as_handed_in(ename, evalue)

    def stop_strays(self) -> None:
        if self._kernel is not None:
            self._kernel.stop_strays()

    def close(self) -> None:
        for kernel in (self._launched, self._kernel):
            if kernel is not None:
                kernel.close()
        self._launched = self._kernel = None


class Session(Driver):
    """One submission's kernel (and its replacements)."""

    process: KernelProcess

    def __init__(
        self,
        submission: Submission,
        *,
        cell_timeout: float,
        submission_timeout: float,
        request_timeout: float | None = None,
        kernel_factory: Callable[[], Kernel] = Kernel,
    ):
        super().__init__(submission, KernelProcess(kernel_factory), cell_timeout=cell_timeout,
                         submission_timeout=submission_timeout, request_timeout=request_timeout,
                         file_statement=file_statement(submission))

    def launch(self) -> None:
        """Spawn the first kernel now, so that it boots while the grader does other work."""
        self.process.launch()

    def __enter__(self) -> Session:
        return self
