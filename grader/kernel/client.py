"""One fresh Jupyter kernel for one submission: start it, run cells with deadlines, kill it.

This is the only module that knows nbclient, and with grader.kernel.messages and
grader.kernel.zmtp (which read the kernel's messages for it) the only one that knows
jupyter_client. Their timeouts and dead-kernel errors become a `CellRun` status here, so the rest
of the grader sees plain results. Outputs are not kept except errors and the probe's observations:
a student cell that prints 50 MB costs nothing but its own time, and stale or fake output can
never reach a verdict.

Every message is read through `grader.kernel.zmtp` (bounded sockets) and `grader.kernel.messages`
(a strict Session): output that is not kept is dropped before it is parsed, and a message the
grader cannot authenticate or parse ends the cell as if the kernel had died
(`CellRun.status == "died"`, the reason in `evalue`), and the kernel is killed. Ctrl-C
(KeyboardInterrupt) during a cell kills the kernel and propagates at once; the kernel runs in its
own session, so the terminal's Ctrl-C reaches only the grader.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import ensure_event_loop, run_sync
from grader import interrupts
from grader.errors import KernelStartFailed
from grader.kernel.driver import CellRun
from grader.kernel.launch import KERNEL_ARGS, WARM_ARGS, LaunchedKernel, kernel_command, scratch_directory
from grader.kernel.messages import DROPPED, GraderSession, MessageRejected
from grader.kernel.protocol import MIME_TYPE
from grader.kernel.zmtp import BoundedSockets, bounded_context
from grader.sandbox import lifetime
from grader.sandbox.layers import Sandbox, SandboxPolicy, available
from grader.sandbox.starvation import CpuMeter, starved_window

STARTUP_TIMEOUT_S = 60
HARD_DEADLINE_GRACE_S = 5.0  # past nbclient's own cell timeout, our wall-clock bound ends the cell


@functools.cache
def _client_class() -> type:
    """nbclient (and nbformat's validator) load only once a kernel is launched: they are slow
    to import, and the kernel boots meanwhile."""
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError
    from nbformat import NotebookNode

    class QuietClient(NotebookClient):
        """Keeps only the first error output and the probe's observations. Messages come checked
        and cut down by grader.kernel.messages; the ones it dropped unparsed are ignored here."""

        rejected: MessageRejected | None = None  # why the current cell's kernel is to be killed

        def process_message(self, msg, cell, cell_index):
            if msg.get(DROPPED):
                return None  # stream, clear_output, comm_*, ...: never parsed, never acted on
            return super().process_message(msg, cell, cell_index)

        def output(self, outs, msg, display_id, cell_index):
            msg_type, content = msg["msg_type"], msg["content"]
            if msg_type == "error" and not any(o["output_type"] == "error" for o in outs):
                out = NotebookNode(output_type="error", ename=content["ename"], evalue=content["evalue"],
                                   traceback=[], line=content.get("line"))
            elif msg_type == "display_data" and MIME_TYPE in content.get("data", {}):
                out = NotebookNode(output_type="display_data", data=content["data"], metadata={})
            else:
                return None
            outs.append(out)
            return out

        async def _async_poll_output_msg(self, parent_msg_id, cell, cell_index):
            try:
                await super()._async_poll_output_msg(parent_msg_id, cell, cell_index)
            except MessageRejected as exc:
                # End the cell now, as nbclient does for a dead kernel (not when the reply comes).
                self.rejected = exc
                if self.task_poll_for_reply is not None:
                    self.task_poll_for_reply.cancel()

        async def _async_check_alive(self):
            broken = self.kc.broken_connection() if self.kc is not None else None
            if broken:
                # A kernel that exits closes its sockets too: give it a moment to be seen dead.
                for _ in range(10):
                    if not await self.kc.is_alive():
                        break
                    await asyncio.sleep(0.05)
                else:
                    self.rejected = _dropped_connection(broken)
                    raise DeadKernelError("the kernel sent a message the grader could not accept")
            await super()._async_check_alive()

    return QuietClient


def _dropped_connection(channel: str) -> MessageRejected:
    return MessageRejected(f"its {channel} connection dropped while the kernel was running (it closed "
                           f"its {channel} socket)")


class _Sigint:
    """While a cell runs in the main thread, Ctrl-C cancels it through the event loop (which wakes
    at once) instead of raising KeyboardInterrupt wherever the loop happens to be; SIGTERM wakes
    the loop too and runs the process's own handler there (the CLI's raises, a batch worker's
    cleans up and exits), instead of waiting for the loop's next timeout."""

    def __init__(self, loop: asyncio.AbstractEventLoop, task: asyncio.Future):
        self.fired = False
        self._loop, self._task = loop, task
        main = threading.current_thread() is threading.main_thread()
        self._installed = main and interrupts.is_ctrl_c_handler(signal.getsignal(signal.SIGINT))
        self._previous = signal.getsignal(signal.SIGINT)
        if self._installed:
            try:
                loop.add_signal_handler(signal.SIGINT, self._fire)
            except (ValueError, RuntimeError, NotImplementedError):
                self._installed = False
        self._term = signal.getsignal(signal.SIGTERM) if main else None
        if not callable(self._term):
            self._term = None
        if self._term is not None:
            try:
                loop.add_signal_handler(signal.SIGTERM, self._terminate)
            except (ValueError, RuntimeError, NotImplementedError):
                self._term = None

    def _fire(self) -> None:
        self.fired = True
        interrupts.latch()
        self._task.cancel()

    def _terminate(self) -> None:
        assert self._term is not None
        self._term(signal.SIGTERM, None)  # raises (a KeyboardInterrupt: the loop lets it out) or exits

    def remove(self) -> None:
        if self._installed:
            self._loop.remove_signal_handler(signal.SIGINT)  # asyncio leaves default_int_handler
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False
        if self._term is not None:
            self._loop.remove_signal_handler(signal.SIGTERM)
            signal.signal(signal.SIGTERM, self._term)  # asyncio would leave SIG_DFL
            self._term = None


class _Quiet(TimeoutError):
    """A probe cell sent no observation for its `quiet` seconds: the request it runs hangs."""


async def _watch_quiet(main: asyncio.Future, last: Callable[[], float], quiet: float) -> bool:
    """Cancel `main` once `quiet` seconds have passed since `last()` (the probe's last
    observation), and say so: each request answers as it finishes, so a silence that long is one
    request that hangs, found without waiting for the whole exercise's budget. (nbclient turns
    the cancellation into its own error; `_drive` tells them apart by this result.)"""
    while not main.done():
        left = last() + quiet - time.monotonic()
        if left <= 0:
            main.cancel()
            return True
        await asyncio.sleep(left)
    return False


def _drive(make: Callable[[], Awaitable[Any]], limit: float | None = None,
           quiet: tuple[Callable[[], float], float] | None = None) -> Any:
    """Run nbclient's coroutine to the end in this thread's loop (as nbclient's run_sync does), then
    cancel and settle every task it left behind, so none runs on into the next cell or reports an
    unretrieved exception later. Ctrl-C ends it within a moment, as KeyboardInterrupt. `limit`
    is a wall-clock bound of our own (TimeoutError): nbclient's deadline is checked only between
    messages, so a kernel that keeps sending replies to other requests would never reach it.
    `quiet` (the time of the last observation, and a number of seconds): `_Quiet` when the
    silence since that time is longer (`_watch_quiet`)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:  # inside a running loop (a notebook): jupyter_core runs it in its helper thread
        return run_sync(make)()
    interrupts.check()  # a Ctrl-C that landed in a finalizer since the last cell
    loop = ensure_event_loop()
    created: list[asyncio.Future] = []
    previous = loop.get_task_factory()

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Future:
        task = previous(loop, coro, **kwargs) if previous else asyncio.Task(coro, loop=loop, **kwargs)
        created.append(task)
        return task

    loop.set_task_factory(factory)
    try:
        main = loop.create_task(make())
        watch = loop.create_task(_watch_quiet(main, *quiet)) if quiet else None
        sigint = _Sigint(loop, main)
        try:
            result = loop.run_until_complete(asyncio.wait_for(main, limit) if limit else main)
        except BaseException as exc:
            if sigint.fired:
                raise KeyboardInterrupt from None
            if watch is not None and watch.done() and not watch.cancelled() and watch.result():
                raise _Quiet(f"no answer for {quiet[1]:g} s") from exc  # type: ignore[index]
            raise
        finally:
            sigint.remove()
        if sigint.fired:
            raise KeyboardInterrupt
        return result
    finally:
        loop.set_task_factory(previous)
        _settle(loop, created)


def _settle(loop: asyncio.AbstractEventLoop, tasks: list[asyncio.Future]) -> None:
    pending = [t for t in tasks if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.wait(pending, timeout=2))
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: nothing is logged about it later


def _code_cell(source: str) -> Any:
    """The cell nbformat.v4.new_code_cell makes, without its check against the notebook schema:
    the first check compiles the schema's validator, 0.14 s of the grader's CPU beside the booting
    kernel, and a cell the grader makes of a string always holds."""
    from nbformat import NotebookNode
    from nbformat.v4.nbbase import random_cell_id

    return NotebookNode(id=random_cell_id(), cell_type="code", metadata=NotebookNode(), execution_count=None,
                        source=source, outputs=[])


def _notebook() -> Any:
    """The empty notebook nbformat.v4.new_notebook makes, without its check (`_code_cell`)."""
    from nbformat import NotebookNode
    from nbformat.v4.nbbase import nbformat, nbformat_minor

    return NotebookNode(nbformat=nbformat, nbformat_minor=nbformat_minor, metadata=NotebookNode(), cells=[])


class _SandboxedKernelManager(BoundedSockets, AsyncKernelManager):
    """Starts the kernel command inside the sandbox's layers, or forks it from a kernel server
    (grader/kernel/server.py); talks to it through grader.kernel.zmtp."""

    sandbox: Sandbox | None = None
    server: Any = None  # a KernelServer: the kernel is forked, not started by a command
    adopted: Any = None  # the Popen of a kernel already started (grader.kernel.launch)

    def _context_default(self) -> Any:
        self._created_context = True
        return bounded_context()

    def _session_default(self) -> GraderSession:
        return GraderSession(parent=self)

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        cmd = super().format_kernel_cmd(extra_arguments)
        if self.server is None and cmd[1:4] == ["-m", "ipykernel_launcher", "-f"]:
            cmd = kernel_command(cmd[4], cmd[5:])  # the same kernel, without its debugger
        return self.sandbox.wrap(cmd, self.connection_file) if self.sandbox else cmd

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
        if self.server is None and self.adopted is None:
            return await super()._async_launch_kernel(kernel_cmd, **kw)
        assert self.provisioner is not None
        if self.adopted is not None:  # started already, with this connection file
            process, self.adopted = self.adopted, None
        else:
            process = self.server.fork_kernel(kernel_cmd, self.connection_file)
        provisioner: Any = self.provisioner
        provisioner.process, provisioner.pid, provisioner.pgid = process, process.pid, process.pid
        provisioner.cwd = kw.get("cwd")
        self._reconcile_connection_info(provisioner.connection_info)

    _launch_kernel = run_sync(_async_launch_kernel)


def adopted_spec() -> Any:
    """The kernel spec of a kernel that grader.kernel.launch started: jupyter_client's python3
    spec as ipykernel writes it (read for its interrupt mode and metadata; never run)."""
    from jupyter_client.kernelspec import KernelSpec

    return KernelSpec(argv=["python", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                      display_name="Python 3 (ipykernel)", language="python", interrupt_mode="signal",
                      metadata={"debugger": False})


class Kernel:
    """A kernel process in its own scratch directory (and sandbox); use as a context manager.

    With `server` (a batch worker's KernelServer), the kernel is forked from it, in the
    server's sandbox and scratch directory (grader/sandbox/forking.py says why that is as isolated);
    JAX is then imported already, as in a warm kernel. With `adopt`, the kernel is one that
    grader.kernel.launch started already, in its own scratch directory and sandbox."""

    def __init__(self, *, kernel_name: str = "python3", sandbox: SandboxPolicy | None = None,
                 warm: bool = False, server: Any = None, adopt: LaunchedKernel | None = None):
        self._server = server
        self._adopt = adopt
        if adopt is not None:
            self.scratch, self._sandbox = adopt.scratch, adopt.sandbox
        else:
            self.scratch = scratch_directory() if server is None else Path(os.devnull)  # set at launch
            self._sandbox = Sandbox(self.scratch, sandbox, available()) if sandbox and server is None else None
        self._kernel_name = kernel_name
        self._args = KERNEL_ARGS + (WARM_ARGS if warm and server is None else [])
        self._km: AsyncKernelManager | None = None
        self._client: Any = None
        self.alive = False
        self._retried = False

    def launch(self) -> Kernel:
        """Spawn the kernel process and return at once: it boots while the grader plans."""
        if self._km is not None:
            return self
        if self._server is None:
            return self._launch()
        try:
            return self._launch()
        except KernelStartFailed:
            self._server.kill()  # whatever the last child left in it: a new server, a new scratch
            return self._launch()

    def _launch(self) -> Kernel:
        if self._server is not None:
            self._server.vacate()  # the last kernel and its files go before this one's are written
            self._server.start()
            self.scratch = self._server.scratch
        km = _SandboxedKernelManager(
            kernel_name=self._kernel_name, transport="ipc", ip=str(self.scratch / "kernel-ipc"),
            client_class="grader.kernel.zmtp.GraderClient",
        )
        km.connection_file = str(self.scratch / "connection.json")  # never in a shared runtime dir
        self._km = km
        lifetime.track(self)
        adopt, self._adopt = self._adopt, None
        try:
            if adopt is not None:
                adopt.adopted()  # this Kernel kills it from now on
                km.sandbox = self._sandbox
                km.connection_file = adopt.connection_file
                km._kernel_spec = adopted_spec()  # the lookup would import IPython: 0.07 s
                km.load_connection_info(adopt.connection_info)  # as written: the file is the kernel's now
                km._connection_file_written = True  # the kernel may be reading it: never rewritten
                km.adopted = adopt.process
            elif self._sandbox:
                self._sandbox.prepare()
                km.sandbox = self._sandbox
            km.server = self._server
            # The kernel's own stdout/stderr are not the student's output (that comes over
            # iopub): keep them off the grader's terminal. Its own session (jupyter_client's
            # default too) keeps the terminal's Ctrl-C away from it: that is the grader's.
            run_sync(km.start_kernel)(extra_arguments=self._args, cwd=str(self.scratch),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True)
        except BaseException as exc:  # jupyter_client raises many kinds here; all mean "no kernel"
            self.kill()  # a process may have started (e.g. Ctrl-C came in the middle)
            if not isinstance(exc, Exception):
                raise
            raise KernelStartFailed(f"{type(exc).__name__}: {exc}") from None
        return self

    def start(self) -> Kernel:
        """Launch (if not yet) and wait until the kernel answers. A kernel that does not answer is
        tried once more, fresh, when it was forked (from a new server: the last child may have
        broken this one) or launched ahead of need (a spare that booted while another submission
        was graded may have died since, killed as it waited); one started here and now is not."""
        if self.alive:
            return self
        if (self._server is not None or self._km is not None) and not self._retried:
            try:
                return self._start()
            except KernelStartFailed:
                self._retried = True
                self.kill()
                if self._server is not None:
                    self._server.kill()
        return self._start()

    def _start(self) -> Kernel:
        self.launch()
        client = _client_class()(
            _notebook(),
            km=self._km,
            timeout=None,
            allow_errors=True,
            interrupt_on_timeout=False,
            record_timing=False,
            startup_timeout=STARTUP_TIMEOUT_S,
            shutdown_kernel="immediate",
            iopub_timeout=2,
        )
        self._client = client
        try:
            # through _drive, like a cell: Ctrl-C while the kernel starts leaves no task behind
            # to report an unretrieved exception later
            _drive(client.async_start_new_kernel_client)
            client.kc.watch_connections()
        except BaseException as exc:
            self.kill()
            if not isinstance(exc, Exception):
                raise
            raise KernelStartFailed(f"{type(exc).__name__}: {exc}") from None
        self.alive = True
        return self

    def run(self, code: str, timeout: float, *, observations: bool = False, quiet: float | None = None,
            requests: str | None = None, nonce: str | None = None) -> CellRun:
        """Run one cell. Never raises for what the code does (KeyboardInterrupt passes, with the
        kernel killed); a hung kernel is killed, and so is one that sends a message the grader
        cannot accept. The probe's observations are collected only with `observations=True`
        (probe cells): a student cell's observation-shaped output is dropped unread; with
        `quiet`, a probe cell that sends none for that many seconds is stopped as a timeout too
        (one request hangs). `requests`: a probe cell's requests, sent in its execute_request
        (grader.kernel.messages.REQUESTS_KEY) for the cell to read there; `nonce`: the probe
        cell's, without which observation-shaped output is dropped unread."""
        if not self.alive or self._client is None:
            return CellRun(status="died", evalue="the kernel is not running")
        from nbclient.exceptions import CellTimeoutError, DeadKernelError  # loaded by start()

        client = self._client
        cell = _code_cell(code)
        client.nb.cells = [cell]
        client.timeout = max(1, round(timeout))
        client.rejected = None
        session = client.kc.session
        session.begin_cell(observations=observations, requests=requests, nonce=nonce)
        started = time.monotonic()
        meter = CpuMeter(self._cpu_group())
        watch = (lambda: session.last_observation, quiet) if observations and quiet and quiet < timeout else None
        try:
            _drive(functools.partial(client.async_execute_cell, cell, 0), limit=timeout + HARD_DEADLINE_GRACE_S,
                   quiet=watch)
            broken = client.rejected or self._broken(client)
        except (CellTimeoutError, TimeoutError) as exc:
            broken = client.rejected
            if broken is None:
                # Kill rather than interrupt: an interrupt can be ignored, and nbclient leaves the
                # timed-out cell's output reader running, which would swallow later cells' output.
                starved = starved_window(meter)  # read before the kill takes its threads away
                self.kill()
                ran = quiet if isinstance(exc, _Quiet) else timeout
                return self._finish(CellRun(status="timeout", evalue=f"still running after {ran:g} s",
                                            starved=starved.describe() if starved else None), cell, started)
        except DeadKernelError:
            broken = client.rejected
            if broken is None:
                limit = self._memory_bound_hit()  # read before the kill removes its cgroups
                self.kill()  # release its channels; the process is already gone
                return self._finish(CellRun(status="died", evalue="the kernel process died",
                                            memory_limit_bytes=limit), cell, started)
        except MessageRejected as exc:
            broken = exc
        except Exception as exc:  # nbclient choked on a message that got through: still the kernel's
            broken = MessageRejected(f"handling it failed ({type(exc).__name__})")
        except BaseException:  # KeyboardInterrupt, SystemExit: the grader is stopping
            self.kill()
            raise
        if broken is not None:
            self.kill()
            return self._finish(CellRun(status="died", evalue=str(broken)), cell, started)
        errors = [o for o in cell.outputs if o.get("output_type") == "error"]
        if errors:
            run = CellRun(status="error", ename=errors[0].get("ename"), evalue=errors[0].get("evalue"),
                          line=errors[0].get("line"))
        else:
            run = CellRun(status="ok")
        return self._finish(run, cell, started)

    def _memory_bound_hit(self) -> int | None:
        """The memory bound of this kernel's sandbox, if that is what stopped it (its cgroup's
        limit, or the watcher's kill; a forked kernel's own cgroup, or its server's watcher)."""
        process = getattr(getattr(self._km, "provisioner", None), "process", None)
        child = getattr(process, "child", None)
        try:
            if child is not None:
                sandbox = child.server.sandbox
                hit = child.out_of_memory() or (sandbox is not None and sandbox.memory_bound_hit())
                policy = child.server.policy
            elif self._sandbox is not None:
                hit, policy = self._sandbox.memory_bound_hit(), self._sandbox.policy
            else:
                return None
        except OSError:
            return None
        return policy.memory_bytes if hit and policy is not None else None

    def _broken(self, client: Any) -> MessageRejected | None:
        """A dropped connection (an oversized frame) that the cell's end came before nbclient's
        check noticed; not when the kernel exited meanwhile (the next cell finds it dead)."""
        name = client.kc.broken_connection() if client.kc is not None else None
        if name is None:
            return None
        process = getattr(getattr(self._km, "provisioner", None), "process", None)
        deadline = time.monotonic() + 0.5
        while process is not None and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if process is not None and process.poll() is not None:
            return None
        return _dropped_connection(name)

    @staticmethod
    def _finish(run: CellRun, cell: Any, started: float) -> CellRun:
        observations = [
            dict(o["data"][MIME_TYPE])
            for o in cell.outputs
            if o.get("output_type") == "display_data" and MIME_TYPE in o.get("data", {})
        ]
        return run.model_copy(update={"observations": observations, "seconds": time.monotonic() - started})

    def _cpu_group(self) -> Path | None:
        """The cpuacct cgroup of the kernel's sandbox (a forked kernel's own), if it has one."""
        if self._server is not None:
            process = getattr(getattr(self._km, "provisioner", None), "process", None)
            child = getattr(process, "child", None)
            return child.cpu_group() if child is not None else None
        return self._sandbox.cgroup("cpuacct") if self._sandbox else None

    def stop_strays(self) -> int:
        """Kill every process of the kernel's sandbox but the kernel itself (daemons included);
        return how many were killed. 0 without a sandbox or its cgroup layer."""
        process = getattr(getattr(self._km, "provisioner", None), "process", None)
        if process is None or process.poll() is not None:
            return 0
        if self._server is not None:
            return process.stop_strays()
        if self._sandbox is None:
            return 0
        return self._sandbox.stop_strays(process.pid)

    def kill(self) -> None:
        """Kill the kernel now (no graceful shutdown: nothing in it is worth waiting for)."""
        km, client = self._km, self._client
        self._km, self._client, self.alive = None, None, False
        lifetime.untrack(self)
        if km is None:
            return
        process = getattr(getattr(km, "provisioner", None), "process", None)
        if process is not None and (process.poll() is None or self._server is not None):
            # SIGKILL: jupyter_client's shutdown would poll for a while first; a forked kernel is
            # killed even when dead, which also removes its cgroups
            process.kill()
            process.wait(timeout=10)
        try:
            if client is not None:
                client._cleanup_kernel()  # channels and connection files; the process is gone
            else:
                run_sync(km.cleanup_resources)()
        except Exception:
            pass
        if self._sandbox:
            self._sandbox.cleanup()  # whatever the kernel started, wherever it went

    def close(self) -> None:
        self.kill()
        if self._server is None:
            shutil.rmtree(self.scratch, ignore_errors=True)  # a server's is emptied by the server

    def __enter__(self) -> Kernel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class Prelaunched:
    """A kernel factory whose first kernel is already booting (started by grader.kernel.launch
    when given, else now); later ones are started fresh."""

    def __init__(self, kernel_name: str = "python3", sandbox: SandboxPolicy | None = None,
                 first: LaunchedKernel | None = None):
        self._make = functools.partial(Kernel, kernel_name=kernel_name, sandbox=sandbox)
        self._first: Kernel | None = (self._make(adopt=first) if first is not None else self._make()).launch()

    def __call__(self) -> Kernel:
        first, self._first = self._first, None
        return first or self._make()

    def close(self) -> None:
        """Discard the first kernel if nobody took it (e.g. the submission was unreadable)."""
        if self._first is not None:
            self._first.close()
            self._first = None
