"""The grader's sockets to the kernel: ZMTP 3.0 spoken by the grader itself, every frame bounded.

The grader speaks ZMTP 3.0 (NULL mechanism, as Jupyter uses) to the kernel's sockets itself,
through `KernelSocket`, not through libzmq: libzmq receives a multipart message whole before the
application sees its first frame, and its only bounds (ZMQ_MAXMSGSIZE per frame, RCVHWM in whole
messages) leave the number of frames unbounded, so a kernel sending one buffer of 50 MiB twenty
times in one message (zero-copy: 50 MiB in the kernel) cost the grader 1 GB. A KernelSocket reads
only while the grader waits for a message, one message at a time, and checks every frame's size
from its header before reading it: at most MAX_PARTS parts, routing frames of MAX_IDENT_BYTES, a
signature of MAX_SIGNATURE_BYTES, header and parent header of MAX_HEADER_BYTES, and metadata,
content and buffers of FRAME_CAPS[channel] together. What it has not read waits in the kernel (its
socket buffer, then its PUB's high-water mark). A message over a bound ends the connection with
`MessageRejected`.

`BoundedSockets`, `BoundedChannel` and `GraderClient` fit KernelSockets under jupyter_client's
classes, and hand every message to `grader.kernel.messages.GraderSession`. This module knows
jupyter_client and pyzmq; `grader.kernel.client` is the only module that uses it.
"""

from __future__ import annotations

import asyncio
import errno
import select
import socket as _socket
import time
from queue import Empty
from typing import Any

import zmq
import zmq.asyncio
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.session import DELIM
from traitlets import Type

from grader.kernel.bounded_json import MessageRejected, describe_size
from grader.kernel.messages import (
    MAX_BUFFERS,
    MAX_HEADER_BYTES,
    MAX_IDENT_BYTES,
    MAX_IDENTS,
    MAX_SIGNATURE_BYTES,
    GraderSession,
)

MAX_FRAME_BYTES = 60 * 2**20
"""iopub: a message's metadata, content and buffers together (a cell printing 50 MB at once makes
one ~52 MB stream message)."""
FRAME_CAPS = {"iopub": MAX_FRAME_BYTES, "shell": 8 * 2**20, "control": 2**20, "stdin": 2**20}
"""Per channel: a message's metadata, content and buffers together (replies are small; their
content is parsed, see grader.kernel.messages.MAX_CONTENT_BYTES)."""
MAX_PARTS = MAX_IDENTS + 1 + 5 + MAX_BUFFERS
"""Frames of one message: routing frames, the delimiter, signature, four parts, buffers."""
MAX_COMMAND_BYTES = 4096
"""A ZMTP command (READY, PING, ...): a few short properties."""
SOCKET_TYPES = {"shell": "DEALER", "control": "DEALER", "stdin": "DEALER", "iopub": "SUB"}
_PEER_TYPES = {"DEALER": (b"ROUTER", b"DEALER", b"REP"), "SUB": (b"PUB", b"XPUB")}
_GREETING = b"\xff" + bytes(8) + b"\x7f" + bytes([3, 0]) + b"NULL".ljust(20, b"\0") + b"\0" + bytes(31)
READ_CHUNK = 256 * 2**10
READS_PER_STEP = 64
FRAMES_PER_STEP = 256
"""Reads and frames handled before the event loop runs again (timeouts, the other channels): a
kernel flooding a socket with tiny frames or ZMTP commands cannot starve the grader."""
RETRY_S = 0.05
"""Between attempts to connect (the kernel binds its sockets a moment after it starts)."""


def _frame(body: bytes | memoryview, *, more: bool = False, command: bool = False) -> bytes:
    """One ZMTP 3.0 frame: flags, a 1- or 8-byte size, the body."""
    body = bytes(body)
    flags = (1 if more else 0) | (4 if command else 0)
    if len(body) > 255:
        return bytes([flags | 2]) + len(body).to_bytes(8, "big") + body
    return bytes([flags, len(body)]) + body


def _ready(socket_type: str, identity: bytes) -> bytes:
    properties = [(b"Socket-Type", socket_type.encode())]
    if socket_type == "DEALER":
        properties.append((b"Identity", identity))
    body = b"\x05READY" + b"".join(bytes([len(k)]) + k + len(v).to_bytes(4, "big") + v for k, v in properties)
    return _frame(body, command=True)


def _command(body: bytes) -> tuple[bytes, dict[bytes, bytes]]:
    """A command's name and (for READY) its properties, lower-cased names; ValueError if malformed."""
    if not body or len(body) < 1 + body[0]:
        raise ValueError("truncated")
    name, data, properties, i = body[1 : 1 + body[0]], body[1 + body[0] :], {}, 0
    if name != b"READY":
        return name, properties
    while i < len(data):
        key = data[i + 1 : i + 1 + data[i]]
        i += 1 + data[i]
        if i + 4 > len(data):
            raise ValueError("truncated")
        size = int.from_bytes(data[i : i + 4], "big")
        if i + 4 + size > len(data):
            raise ValueError("truncated")
        properties[key.lower()] = data[i + 4 : i + 4 + size]
        i += 4 + size
    return name, properties


def _address(url: str) -> tuple[int, Any]:
    transport, _, rest = url.partition("://")
    if transport == "ipc":
        return _socket.AF_UNIX, rest
    if transport == "tcp":
        host, _, port = rest.rpartition(":")
        host = host.strip("[]")
        return (_socket.AF_INET6 if ":" in host else _socket.AF_INET), (host, int(port))
    raise ValueError(f"the grader connects to kernels over ipc or tcp, not {url!r}")


class KernelSocket:
    """One connection to one of the kernel's sockets, spoken in ZMTP 3.0 (NULL mechanism) by the
    grader itself, so that nothing the kernel sends is buffered unless the grader is reading it
    and every frame is bounded before it is read (see the module docstring).

    As a DEALER (shell, control) or SUB (iopub) socket of libzmq would: connecting is retried until
    the kernel listens, and messages sent before the handshake are queued. Unlike libzmq: nothing
    happens in the background (reading, connecting and the rest of a large send happen while a
    `receive` waits), a connection that ends after its handshake is not reopened (`broken` says
    so), and a message over a bound ends the connection with `MessageRejected`. One message at a
    time is read, and a wait that is cancelled loses nothing: all state lives here, and it changes
    only between awaits.
    """

    def __init__(self, url: str, channel: str, identity: bytes | None = None):
        if channel not in SOCKET_TYPES:
            raise ValueError(f"the grader does not open the {channel} channel")
        self.url, self.channel, self.socket_type = url, channel, SOCKET_TYPES[channel]
        self.identity = identity or b""
        self.cap = FRAME_CAPS[channel]
        self.linger = 0  # set by jupyter_client; nothing lingers here
        self.closed = False
        self.broken: str | None = None  # the connection ended after its handshake
        self.rejected: str | None = None  # the kernel sent what the grader refused
        self._sock: _socket.socket | None = None
        self._phase = "idle"  # idle, connecting, greeting, handshake, open, dead
        self._retry_at = 0.0
        self._subscriptions: list[bytes] = []
        self._queued: list[bytes] = []  # messages sent before the handshake
        self._out = bytearray()
        self._in = bytearray()
        self._chunk = bytearray(READ_CHUNK)
        self._body: bytearray | None = None  # the large frame being read, and how much of it is
        self._got = 0
        self._flags = 0
        self._frames: list[Any] = []
        self._delimiter: int | None = None
        self._tail = 0
        self._early: list[Any] | None = None  # a message msg_ready() read
        self._budget = FRAMES_PER_STEP
        self._waiters: list[asyncio.Future] = []
        self._watched: set[tuple[asyncio.AbstractEventLoop, int]] = set()

    def __repr__(self) -> str:
        return f"<KernelSocket {self.channel} {self._phase} {self.url}>"

    # ------------------------------------------------------------------ what jupyter_client calls

    def setsockopt(self, option: int, value: Any) -> None:
        if option == zmq.SUBSCRIBE and self.socket_type == "SUB":
            topic = value.encode() if isinstance(value, str) else bytes(value)
            self._subscriptions.append(topic)
            if self._phase == "open":
                self._out += _frame(b"\x01" + topic)
                self._flush()
        elif option == zmq.LINGER:
            self.linger = value
        else:
            raise ValueError(f"KernelSocket has no option {option}")

    def send_multipart(self, frames: Any, copy: bool = True, **kwargs: Any) -> None:
        parts = [memoryview(f) if not isinstance(f, memoryview) else f for f in frames]
        data = b"".join(_frame(p, more=i < len(parts) - 1) for i, p in enumerate(parts))
        if self.closed or self._phase == "dead":
            return  # as libzmq would, for a peer that is gone: the message is lost
        if self._phase != "open":
            self._queued.append(data)
            return
        self._out += data
        self._flush()
        if self._out:
            for loop, fd in self._watched:
                loop.add_writer(fd, self._wake)

    def close(self, linger: int | None = None) -> None:
        self.closed = True
        self._drop()
        self._phase = "dead"
        self._queued.clear()

    async def receive(self, timeout: float | None = None) -> list[Any] | None:
        """The frames of the next message, or None once `timeout` seconds passed without one (or
        the socket is closed). Raises MessageRejected (and ends the connection) for a message over
        a bound or a peer that breaks the protocol."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + max(0.0, timeout)
        await asyncio.sleep(0)  # a kernel that floods this socket does not starve the event loop
        while not self.closed:
            message = self._step()
            if message is not None:
                return message
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return None
            if self._budget <= 0:  # frames are waiting to be parsed: let the loop run, then go on
                await asyncio.sleep(0)
            else:
                await self._wait(loop, remaining)
        return None

    async def poll_ready(self) -> bool:
        """Whether a message is there now (it is kept for the next `receive`)."""
        if self._early is None:
            self._early = await self.receive(0)
        return self._early is not None

    # ------------------------------------------------------------------ the connection

    def _step(self) -> list[Any] | None:
        """Whatever can be done now without waiting: connect, send, read, parse one message."""
        self._budget = FRAMES_PER_STEP
        if self._early is not None:
            message, self._early = self._early, None
            return message
        if self._phase == "idle" and time.monotonic() >= self._retry_at:
            self._connect()
        if self._phase == "connecting":
            self._check_connected()
        if self._phase not in ("greeting", "handshake", "open"):
            return None
        self._flush()
        message = None
        for _ in range(READS_PER_STEP):
            if self._sock is None:
                break
            message = self._parse()
            # Read only once every whole frame read so far is parsed: what is held stays bounded.
            if message is not None or self._budget <= 0 or not self._read():
                break
        self._flush()
        return message

    def _connect(self) -> None:
        try:
            family, address = _address(self.url)
            sock = _socket.socket(family, _socket.SOCK_STREAM)
        except OSError:
            self._retry_at = time.monotonic() + RETRY_S
            return
        sock.setblocking(False)
        try:
            err = sock.connect_ex(address)
        except OSError as exc:
            err = exc.errno or errno.EINVAL
        if err not in (0, errno.EINPROGRESS):
            sock.close()
            self._retry_at = time.monotonic() + RETRY_S
            return
        self._sock = sock
        if err == 0:
            self._greet()
        else:
            self._phase = "connecting"

    def _check_connected(self) -> None:
        assert self._sock is not None
        poller = select.poll()
        poller.register(self._sock, select.POLLOUT)
        if not poller.poll(0):
            return
        if self._sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_ERROR):
            self._lost("refused")
        else:
            self._greet()

    def _greet(self) -> None:
        self._phase = "greeting"
        self._in.clear()
        self._out = bytearray(_GREETING + _ready(self.socket_type, self.identity))

    def _open(self) -> None:
        self._phase = "open"
        for topic in self._subscriptions:
            self._out += _frame(b"\x01" + topic)
        for data in self._queued:
            self._out += data
        self._queued.clear()

    def _flush(self) -> None:
        while self._out and self._sock is not None:
            try:
                sent = self._sock.send(self._out, _socket.MSG_NOSIGNAL)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._lost(exc.strerror or type(exc).__name__)
                return
            del self._out[:sent]

    def _read(self) -> bool:
        """One read from the connection; False when nothing more is there now."""
        assert self._sock is not None
        try:
            if self._body is not None:  # straight into the frame: it was admitted at its full size
                n = self._sock.recv_into(memoryview(self._body)[self._got :])
                self._got += n
            else:
                n = self._sock.recv_into(self._chunk)
                self._in += memoryview(self._chunk)[:n]
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as exc:
            self._lost(exc.strerror or type(exc).__name__)
            return False
        if n == 0:
            self._lost("closed")
            return False
        return True

    def _lost(self, why: str) -> None:
        """The connection ended: before its handshake it is tried again (as libzmq does while a
        kernel starts), after it the socket is broken for good."""
        opened = self._phase == "open"
        self._drop()
        if opened:
            self._phase = "dead"
            self.broken = f"its {self.channel} connection ended ({why})"
        else:
            self._phase = "idle"
            self._retry_at = time.monotonic() + RETRY_S

    def _reject(self, reason: str) -> None:
        self._drop()
        self._phase = "dead"
        self.rejected = reason
        raise MessageRejected(reason)

    def _drop(self) -> None:
        self._wake()
        for loop, fd in self._watched:
            try:
                loop.remove_reader(fd)
                loop.remove_writer(fd)
            except Exception:  # a loop that is closed has nothing registered any more
                pass
        self._watched.clear()
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._out.clear()
        self._in.clear()
        self._body, self._got, self._frames, self._delimiter, self._tail = None, 0, [], None, 0

    # ------------------------------------------------------------------ waiting

    def _wake(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _wait(self, loop: asyncio.AbstractEventLoop, timeout: float | None) -> None:
        """Until the connection can be read (or written, while output waits), the next attempt to
        connect is due, or `timeout` passes."""
        waiter = loop.create_future()
        if self._phase == "idle":
            due = max(0.0, self._retry_at - time.monotonic())
            timeout = due if timeout is None else min(timeout, due)
        timer = None if timeout is None else loop.call_later(timeout, _resolve, waiter)
        if self._sock is not None:
            fd = self._sock.fileno()
            self._watched.add((loop, fd))
            loop.add_reader(fd, self._wake)
            if self._out or self._phase == "connecting":
                loop.add_writer(fd, self._wake)
            else:
                loop.remove_writer(fd)
        self._waiters.append(waiter)
        try:
            await waiter
        finally:
            self._waiters.remove(waiter)
            if timer is not None:
                timer.cancel()
            if not self._waiters:
                for watched_loop, fd in self._watched:
                    watched_loop.remove_reader(fd)
                    watched_loop.remove_writer(fd)
                self._watched.clear()

    # ------------------------------------------------------------------ frames

    def _parse(self) -> list[Any] | None:
        """The next complete message from what was read, if there is one; handshake frames and
        commands are handled on the way."""
        while True:
            if self._phase == "greeting":
                if len(self._in) < len(_GREETING):
                    return None
                greeting = bytes(self._in[: len(_GREETING)])
                del self._in[: len(_GREETING)]
                if (greeting[0] != 0xFF or not greeting[9] & 1 or greeting[10] < 3
                        or greeting[12:32].rstrip(b"\0") != b"NULL"):
                    self._reject(f"its {self.channel} connection does not speak ZMTP 3 "
                                 f"with the NULL mechanism")
                self._phase = "handshake"
            if self._budget <= 0:
                return None
            body = self._frame()
            if body is None:
                return None
            self._budget -= 1
            if self._flags & 4:
                self._handle_command(bytes(body))
                continue
            frames = self._frames
            frames.append(body)
            if self._delimiter is None:
                if len(body) == len(DELIM) and body == DELIM:
                    self._delimiter = len(frames) - 1
                elif len(frames) > MAX_IDENTS:
                    self._reject(f"it has no '<IDS|MSG>' delimiter among its first {MAX_IDENTS + 1} parts")
            if not self._flags & 1:
                self._frames, self._delimiter, self._tail = [], None, 0
                return frames

    def _handle_command(self, body: bytes) -> None:
        try:
            name, properties = _command(body)
        except ValueError:
            self._reject(f"its {self.channel} connection sent a malformed ZMTP command")
        if self._phase == "handshake":
            if name != b"READY":
                self._reject(f"its {self.channel} socket did not complete the ZMTP handshake "
                             f"({name[:20].decode('ascii', 'replace')!r})")
            peer = properties.get(b"socket-type", b"").upper()
            if peer not in _PEER_TYPES[self.socket_type]:
                kind = peer[:20].decode("ascii", "replace")
                self._reject(f"its {self.channel} socket is of type {kind!r}, "
                             f"which a {self.socket_type} socket does not talk to")
            self._open()
        # After the handshake: PING, PONG, ... need no answer from a peer without heartbeats.

    def _frame(self) -> Any:
        """The next whole frame (its flags in `_flags`), or None until more is read. A frame's size
        is checked against its place in the message before any of it is kept."""
        if self._body is not None:
            if self._got < len(self._body):
                return None
            body, self._body = self._body, None
            return body
        data = self._in
        if len(data) < 2:
            return None
        flags = data[0]
        head = 9 if flags & 2 else 2
        if len(data) < head:
            return None
        size = int.from_bytes(data[1:head], "big")
        if flags & 0xF8 or (flags & 4 and flags & 1):
            self._reject(f"its {self.channel} connection sent a frame that ZMTP does not allow")
        self._admit(flags, size)
        del data[:head]
        self._flags = flags
        if size <= len(data):
            body = bytes(data[:size])
            del data[:size]
            return body
        self._body = bytearray(size)
        self._body[: len(data)] = data
        self._got = len(data)
        data.clear()
        return None

    def _admit(self, flags: int, size: int) -> None:
        if flags & 4:
            if self._frames:
                self._reject(f"its {self.channel} connection sent a ZMTP command inside a message")
            if size > MAX_COMMAND_BYTES:
                self._reject(f"its {self.channel} connection sent a ZMTP command of {describe_size(size)}")
            return
        if self._phase != "open":
            self._reject(f"its {self.channel} socket sent a message before the ZMTP handshake was done")
        n = len(self._frames)
        if n >= MAX_PARTS:
            self._reject(f"it has more than {MAX_PARTS} parts")
        if self._delimiter is None:
            if size > MAX_IDENT_BYTES:
                self._reject(f"it has a routing frame larger than {describe_size(MAX_IDENT_BYTES)}")
            return
        k = n - self._delimiter - 1  # 0 signature, 1 header, 2 parent, 3 metadata, 4 content, 5... buffers
        if k >= 5 + MAX_BUFFERS:
            self._reject(f"it has more than {5 + MAX_BUFFERS} parts after its '<IDS|MSG>' delimiter")
        if k <= 2:
            limit, what = [(MAX_SIGNATURE_BYTES, "signature"), (MAX_HEADER_BYTES, "header"),
                           (MAX_HEADER_BYTES, "parent header")][k]
            if size > limit:
                self._reject(f"its {what} is {describe_size(size)}, "
                             f"more than the {describe_size(limit)} accepted")
            return
        self._tail += size
        if self._tail > self.cap:
            self._reject(f"its metadata, content and buffers are more than the {describe_size(self.cap)} "
                         f"accepted on {self.channel}")


def _resolve(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(None)


def bounded_context() -> zmq.asyncio.Context:
    """The context jupyter_client's classes keep; no socket to the kernel is made from it (they are
    KernelSockets), so it holds nothing a kernel can fill."""
    return zmq.asyncio.Context()


class BoundedSockets:
    """Mixin for jupyter_client's connection classes (client, manager): every socket to the kernel
    is a KernelSocket."""

    def _create_connected_socket(self, channel: str, identity: bytes | None = None) -> KernelSocket:
        if getattr(self, "curve_publickey", None) is not None:
            raise ValueError("the grader's sockets speak the NULL mechanism only (no CURVE)")
        return KernelSocket(self._make_url(channel), channel, identity)  # type: ignore[attr-defined]


class BoundedChannel:
    """A channel over a KernelSocket, with the API of jupyter_client's AsyncZMQSocketChannel that
    jupyter_client and nbclient use; every message goes through the session's bounded deserialize."""

    def __init__(self, socket: KernelSocket, session: GraderSession, loop: Any = None):
        self.socket: KernelSocket | None = socket
        self.session = session

    async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:
        assert self.socket is not None
        frames = await self.socket.receive(timeout)
        if frames is None:
            raise Empty
        _, message = self.session.feed_identities(frames, copy=False)
        return self.session.deserialize(message, copy=False)

    async def get_msgs(self) -> list[dict[str, Any]]:
        messages = []
        while True:
            try:
                messages.append(await self.get_msg(timeout=0))
            except Empty:
                return messages

    async def msg_ready(self) -> bool:
        assert self.socket is not None
        return await self.socket.poll_ready()

    def send(self, msg: dict[str, Any]) -> None:
        assert self.socket is not None
        self.session.send(self.socket, msg)

    def start(self) -> None:
        pass

    def close(self) -> None:
        if self.socket is not None:
            self.socket.close()
            self.socket = None

    stop = close

    def is_alive(self) -> bool:
        return self.socket is not None


class GraderClient(BoundedSockets, AsyncKernelClient):
    """The kernel client: KernelSockets and a bounded session, only the shell and iopub channels
    (the heartbeat, stdin and control channels are never read, so they are never opened), and a
    watch on the connections for one that the kernel closes."""

    shell_channel_class = Type(BoundedChannel)  # type: ignore[assignment]
    iopub_channel_class = Type(BoundedChannel)  # type: ignore[assignment]

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._watching = False

    def _context_default(self) -> zmq.asyncio.Context:
        self._created_context = True
        return bounded_context()

    def start_channels(self, shell: bool = True, iopub: bool = True, stdin: bool = False,
                       hb: bool = False, control: bool = False) -> None:
        super().start_channels(shell=shell, iopub=iopub, stdin=stdin, hb=hb, control=control)

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        """jupyter_client's handshake (kernel_info until a reply, and an IOPub message to show
        IOPub is connected) without its last step, which waits until IOPub has been silent for
        0.2 s: pure idle on every kernel start. Whatever the handshake leaves on IOPub is read
        later and ignored, since every message the grader reads is matched to its request by
        its parent's id."""
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        while True:
            self.kernel_info()
            try:
                msg = await self.shell_channel.get_msg(timeout=1)
            except Empty:
                msg = None
            if msg is not None and msg["msg_type"] == "kernel_info_reply":
                try:
                    await self.iopub_channel.get_msg(timeout=0.2)
                except Empty:
                    pass
                else:
                    self._handle_kernel_info_reply(msg)
                    return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:.0f} seconds")

    def watch_connections(self) -> None:
        """Start noticing connections that end (call once the kernel has answered)."""
        self._watching = True

    def broken_connection(self) -> str | None:
        """The channel whose connection ended since watching began ('shell', 'iopub'), if any."""
        if not self._watching:
            return None
        for name, channel in (("shell", self._shell_channel), ("iopub", self._iopub_channel)):
            socket = getattr(channel, "socket", None)
            if socket is not None and socket.broken:
                return name
        return None

    def stop_channels(self) -> None:
        # jupyter_client's version opens every channel it was not using just to close it again.
        self._watching = False
        for channel in (self._shell_channel, self._iopub_channel, self._stdin_channel,
                        self._hb_channel, self._control_channel):
            if channel is not None and channel.is_alive():
                channel.stop()
        if self._created_context and not self.context.closed:
            self.context.destroy(linger=100)
