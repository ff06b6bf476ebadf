"""The child process of the pack's `grade`: a notebook's code cells run one at a time in one
namespace, and the probe's requests answered in it, as a Jupyter kernel does for `grade`.

Started by path as `python -c BOOT cells.py runtime.py` in the notebook's folder (so `''` is on
`sys.path`, as in a kernel); imports nothing of the grader. It speaks JSON lines on the stdin and
stdout it was started with, which it keeps for itself: the student's code gets /dev/null for its
input and its prints (grading keeps no output). One message in, one answer out:

    {"op": "cell", "source": ..., "filename": ...}  ->  {"status": "ok"} or {"status": "error", ...}
    {"op": "probe", "requests": "<JSON>"}           ->  {"observation": ...} per request, then
                                                        {"done": true} (with "ename", "evalue" if it broke)

The parent kills it at a deadline; nothing here keeps time.
"""

from __future__ import annotations

import builtins
import json
import linecache
import os
import sys
import types
from importlib.machinery import SourceFileLoader
from typing import Any, Callable


def _channel() -> tuple[Any, Any]:
    """The protocol's ends (this process's original stdin and stdout), and /dev/null in their
    place for the student's code (its stderr too, once started)."""
    incoming = os.fdopen(os.dup(0), "r", encoding="utf-8")
    outgoing = os.fdopen(os.dup(1), "w", encoding="utf-8")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    return incoming, outgoing


def _main_module() -> dict:
    """The notebook's namespace: a fresh `__main__`, as IPython gives one."""
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    return main.__dict__


def _display(*objects: Any, **kwargs: Any) -> None:
    """IPython's `display`, which notebooks call without importing it (a print without IPython)."""
    try:
        from IPython.display import display
    except ImportError:
        print(*objects)
        return
    display(*objects, **kwargs)


def _line(exc: BaseException, filename: str) -> int | None:
    """The line of the cell where it raised: the innermost frame of the cell, or a SyntaxError's."""
    if isinstance(exc, SyntaxError) and exc.filename == filename:
        return exc.lineno
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


class Cells:
    def __init__(self, namespace: dict):
        self.namespace = namespace
        self._shell: Any = None

    def _ipython(self, source: str, filename: str) -> Any:
        """A cell with IPython's syntax (`%timeit`, `!ls`): compiled as IPython transforms it,
        with a shell for its magics; None without IPython."""
        try:
            from IPython.core.inputtransformer2 import TransformerManager
            from IPython.core.interactiveshell import InteractiveShell
        except ImportError:
            return None
        if self._shell is None:
            self._shell = InteractiveShell.instance(user_module=sys.modules["__main__"],
                                                    user_ns=self.namespace)
        return compile(TransformerManager().transform_cell(source), filename, "exec")

    def run(self, source: str, filename: str) -> dict:
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        try:
            try:
                code = compile(source, filename, "exec")
            except SyntaxError:
                code = self._ipython(source, filename)
                if code is None:
                    raise
            exec(code, self.namespace)
        except BaseException as exc:  # noqa: BLE001 - the student's: reported, as a kernel does (SystemExit too)
            answer = {"status": "error", "ename": type(exc).__name__, "evalue": str(exc)}
            line = _line(exc, filename)
            if line is not None:
                answer["line"] = line
            return answer
        return {"status": "ok"}


def _probe(path: str) -> Callable[..., None]:
    """The kernel's probe, loaded by path as a grading kernel loads it, its `serve`."""
    namespace = {"__name__": "grader_probe", "__file__": path}
    exec(SourceFileLoader("grader_probe", path).get_code("grader_probe"), namespace)
    return namespace["serve"]


def main(probe_path: str) -> None:
    incoming, outgoing = _channel()

    def send(message: dict) -> None:
        outgoing.write(json.dumps(message) + "\n")
        outgoing.flush()

    serve = _probe(probe_path)
    try:  # JAX while the grader gets ready, as a grading kernel warms up; no name is left behind
        __import__("jax.numpy")
    except Exception:  # noqa: BLE001 - the notebook's own import says what is wrong
        pass
    namespace = _main_module()
    if not hasattr(builtins, "display"):
        builtins.display = _display  # type: ignore[attr-defined]
    cells = Cells(namespace)
    send({"ready": os.getpid()})
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 2)  # started: what the student's code writes to stderr goes nowhere either
    for line in incoming:
        message = json.loads(line)
        if message["op"] == "cell":
            send(cells.run(message["source"], message["filename"]))
        elif message["op"] == "probe":
            try:
                serve(message["requests"], namespace,
                      emit=lambda item: send({"observation": item["observation"]}))
            except BaseException as exc:  # noqa: BLE001 - the student's code broke the probe
                send({"done": True, "ename": type(exc).__name__, "evalue": str(exc)})
                continue
            send({"done": True})
        else:
            return


if __name__ == "__main__":
    main(sys.argv[1])
