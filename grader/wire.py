"""Messages from the kernel, read with bounds: the grader's side of the Jupyter wire protocol.

The kernel is the student's process and knows the session key, so whatever it sends may be
correctly signed and still hostile: a list where an object belongs, a 5,000-digit integer,
nesting 100,000 levels deep, a frame of a gigabyte, a flood of output. Every message the grader
reads passes through `GraderSession.deserialize` (jupyter_client's hook between the socket and
the message dict), which either returns a message that nbclient can handle without surprises or
raises `MessageRejected` with one sentence saying why; `grader.kernel` turns that into a dead
kernel for the cell that was running.

    sockets      every socket to the kernel has zmq.MAXMSGSIZE (a larger frame is never
                 received: libzmq drops the connection, which `GraderClient` watches for) and a
                 small RCVHWM (a backlog waits in the kernel's memory, not the grader's). The cap
                 is per frame: libzmq delivers a message whole, so one of many frames under the
                 cap arrives before it is refused for having too many parts
    signature    HMAC checked on every message, replays refused
    headers      header, parent header and metadata: bounded JSON objects with the fields of the
                 right types
    dropped      output the grader does not keep (stream, execute_result, execute_input,
                 display_data that is not an observation, update_display_data, clear_output,
                 comm_*, anything unknown) is recognised from its header and its content frame
                 is never parsed: the message reaches nbclient as `DROPPED`, with empty content
    kept         status, error (ename and evalue, capped; no traceback), execute_reply,
                 kernel_info_reply and, for probe cells only, observation display_data: parsed
                 with size, depth and number-length limits, checked, and cut to what is used

This module knows jupyter_client and pyzmq; `grader.kernel` is the only module that uses it.
"""

from __future__ import annotations

import json
import re
from hmac import compare_digest
from itertools import accumulate
from typing import Any

import zmq
import zmq.asyncio
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.session import DELIM, Session
from traitlets import Type
from zmq.utils.monitor import recv_monitor_message

from grader.probe.protocol import MIME_TYPE

MAX_FRAME_BYTES = 60 * 2**20
"""zmq.MAXMSGSIZE on iopub: a cell printing 50 MB at once makes one ~52 MB stream frame."""
FRAME_CAPS = {"iopub": MAX_FRAME_BYTES, "shell": 8 * 2**20, "control": 2**20, "stdin": 2**20, "hb": 2**10}
"""zmq.MAXMSGSIZE per channel: replies are small (their content is parsed, see MAX_CONTENT_BYTES)."""
RCV_HWM = 4
"""Messages queued in the grader per socket; more wait in the kernel (and its PUB drops them).
With FRAME_CAPS this bounds what a kernel can park in the grader's memory while no cell runs."""
MAX_HEADER_BYTES = 64 * 2**10
"""Header, parent header, and the metadata of a message that is parsed."""
MAX_CONTENT_BYTES = {
    "status": 64 * 2**10,
    "kernel_info_reply": 1 * 2**20,
    "execute_reply": 4 * 2**20,
    "error": 4 * 2**20,
    "display_data": 8 * 2**20,  # an observation: room for a few arrays at the probe's MAX_ELEMENTS
}
MAX_OBSERVATION_BYTES = 64 * 2**20
"""All observations of one cell together (the session resets the count per cell)."""
MAX_DEPTH = 64
MAX_NUMBER_CHARS = 100
MAX_BUFFERS = 16
MAX_IDENTS = 16
MAX_IDENT_BYTES = 1024
MAX_ENAME = 256
MAX_EVALUE = 4096
DROPPED = "grader_dropped"
"""Key set on a message whose content the grader skipped: nbclient's client ignores it."""

PARSED_TYPES = frozenset(MAX_CONTENT_BYTES)
_MIME_BYTES = re.compile(re.escape(json.dumps(MIME_TYPE).encode()))
# Strings (an unterminated one runs to the end: every match attempt succeeds, so this stays
# linear) and everything that is not a bracket; what remains is the bracket skeleton.
_NOT_BRACKETS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[^\[\]{}"]+', re.S)
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1, '"': 0}
_VERSION = re.compile(r"\d{1,4}(?:\.\d{1,4}){0,3}")


class MessageRejected(Exception):
    """A message from the kernel that the grader will not accept; `reason` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return f"the kernel sent a message the grader could not accept: {self.reason}"


def _size(n: int) -> str:
    if n >= 2**20:
        return f"{n / 2**20:.1f} MiB"
    if n >= 2**10:
        return f"{n / 2**10:.1f} KiB"
    return f"{n} bytes"


def _kind(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


# ----------------------------------------------------------------------------- bounded JSON


class _Refused(Exception):
    pass


def _parse_int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        digits = len(text.lstrip("-"))
        raise _Refused(f"an integer of {digits} digits (at most {MAX_NUMBER_CHARS} are accepted)")
    return int(text)


def _parse_float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise _Refused(f"a number of {len(text)} characters (at most {MAX_NUMBER_CHARS} are accepted)")
    return float(text)


def _parse_constant(text: str) -> Any:
    raise _Refused(f"{text}, which JSON does not allow")


def depth_of(text: str) -> int:
    """How deeply the JSON text nests (brackets inside strings do not count); linear time."""
    skeleton = _NOT_BRACKETS.sub("", text)
    return max(accumulate(map(_DEPTH_STEP.__getitem__, skeleton)), default=0)


def loads_bounded(data: bytes | memoryview, *, limit: int, what: str) -> Any:
    """JSON from the kernel: at most `limit` bytes, MAX_DEPTH levels, MAX_NUMBER_CHARS per number."""
    size = len(data)
    if size > limit:
        raise MessageRejected(f"its {what} is {_size(size)}, more than the {_size(limit)} accepted")
    text = bytes(data).decode("utf-8", "replace")  # as jupyter_client decodes
    depth = depth_of(text)
    if depth > MAX_DEPTH:
        raise MessageRejected(f"its {what} is nested {depth} levels deep "
                              f"(at most {MAX_DEPTH} are accepted)")
    try:
        return json.loads(text, parse_int=_parse_int, parse_float=_parse_float,
                          parse_constant=_parse_constant)
    except _Refused as exc:
        raise MessageRejected(f"its {what} holds {exc}") from None
    except RecursionError:
        raise MessageRejected(f"its {what} is nested too deeply") from None
    except ValueError as exc:
        first = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise MessageRejected(f"its {what} is not valid JSON ({first})") from None


def _looks_like_object(frame: memoryview) -> bool:
    """A cheap check of a frame that is not parsed: it starts with '{' and ends with '}'."""
    return bytes(frame[:64]).lstrip()[:1] == b"{" and bytes(frame[-64:]).rstrip()[-1:] == b"}"


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ----------------------------------------------------------------------------- shapes


def _need(cond: bool, reason: str) -> None:
    if not cond:
        raise MessageRejected(reason)


def _str_field(obj: dict, key: str, where: str, *, required: bool = True, limit: int = 256) -> str | None:
    if key not in obj:
        _need(not required, f"its {where} has no '{key}'")
        return None
    value = obj[key]
    _need(isinstance(value, str), f"the '{key}' in its {where} is {_kind(value)}, not a string")
    _need(len(value) <= limit,
          f"the '{key}' in its {where} is {len(value)} characters long (at most {limit})")
    return value


def check_header(header: Any) -> tuple[str, str]:
    """(msg_type, msg_id) of a header that has the shape jupyter_client and nbclient rely on."""
    _need(isinstance(header, dict), f"its header is {_kind(header)}, not an object")
    msg_type = _str_field(header, "msg_type", "header", limit=64)
    msg_id = _str_field(header, "msg_id", "header")
    for key in ("session", "username", "date"):
        _str_field(header, key, "header", required=False)
    version = _str_field(header, "version", "header", required=False, limit=16)
    if version is not None:
        _need(_VERSION.fullmatch(version) is not None and version.split(".")[0] == "5",
              f"its header claims protocol version {version!r} (the grader speaks 5.x)")
    assert msg_type is not None and msg_id is not None
    return msg_type, msg_id


def check_parent(parent: Any) -> dict:
    _need(isinstance(parent, dict), f"its parent header is {_kind(parent)}, not an object")
    _str_field(parent, "msg_id", "parent header", required=False)
    _str_field(parent, "msg_type", "parent header", required=False, limit=64)
    return parent


def _object(value: Any, what: str) -> dict:
    _need(isinstance(value, dict), f"its {what} is {_kind(value)}, not an object")
    return value


def _optional_dict(content: dict, key: str, where: str) -> None:
    if content.get(key) is not None:
        _need(isinstance(content[key], dict),
              f"the '{key}' of its {where} is {_kind(content[key])}, not an object")


def _execution_count(content: dict, where: str) -> int | None:
    value = content.get("execution_count")
    _need(value is None or (type(value) is int), f"the 'execution_count' of its {where} is {_kind(value)}")
    return value


def check_content(msg_type: str, content: Any) -> dict | None:
    """The part of a parsed content that is kept, or None when the message is to be dropped after
    all (display_data that turns out not to carry an observation)."""
    where = f"'{msg_type}' content"
    content = _object(content, where)
    if msg_type == "status":
        state = _str_field(content, "execution_state", where, limit=32)
        return {"execution_state": state}
    if msg_type == "error":
        ename = _str_field(content, "ename", where, limit=MAX_CONTENT_BYTES["error"])
        evalue = _str_field(content, "evalue", where, limit=MAX_CONTENT_BYTES["error"])
        traceback = content.get("traceback", [])
        _need(isinstance(traceback, list) and all(isinstance(line, str) for line in traceback),
              f"the 'traceback' of its {where} is not a list of strings")
        assert ename is not None and evalue is not None
        return {"ename": _cap(ename, MAX_ENAME), "evalue": _cap(evalue, MAX_EVALUE), "traceback": []}
    if msg_type == "execute_reply":
        status = _str_field(content, "status", where, limit=32)
        kept: dict[str, Any] = {"status": status, "execution_count": _execution_count(content, where)}
        for key, limit in (("ename", MAX_ENAME), ("evalue", MAX_EVALUE)):
            value = _str_field(content, key, where, required=False, limit=MAX_CONTENT_BYTES[msg_type])
            if value is not None:
                kept[key] = _cap(value, limit)
        return kept
    if msg_type == "kernel_info_reply":
        version = _str_field(content, "protocol_version", where, limit=16)
        _need(_VERSION.fullmatch(version or "") is not None and (version or "").split(".")[0] == "5",
              f"the kernel speaks protocol version {version!r} (the grader speaks 5.x)")
        return {"status": _str_field(content, "status", where, required=False, limit=32) or "ok",
                "protocol_version": version}
    if msg_type == "display_data":
        data = _object(content.get("data"), f"{where} 'data'")
        _optional_dict(content, "metadata", where)
        _optional_dict(content, "transient", where)
        if MIME_TYPE not in data:
            return None
        observation = data[MIME_TYPE]
        _need(isinstance(observation, dict), f"its observation is {_kind(observation)}, not an object")
        return {"data": {MIME_TYPE: observation}, "metadata": {}}
    raise AssertionError(msg_type)  # only PARSED_TYPES come here


# ----------------------------------------------------------------------------- session


def _view(frame: Any) -> memoryview:
    if isinstance(frame, memoryview):
        return frame
    if isinstance(frame, bytes):
        return memoryview(frame)
    return frame.buffer  # a zmq.Frame, received with copy=False


class GraderSession(Session):
    """A Session whose deserialize is bounded and strict (see the module docstring).

    `observations` says whether observation display_data is wanted (probe cells only);
    `observation_bytes` counts what was kept since the caller last reset it.
    """

    observations = False
    observation_bytes = 0

    def feed_identities(self, msg_list: Any, copy: bool = True) -> tuple[list[bytes], list[Any]]:
        # Compare lengths first: jupyter_client's version copies every frame to compare it.
        for i, frame in enumerate(msg_list[: MAX_IDENTS + 1]):
            view = _view(frame)
            if len(view) == len(DELIM) and bytes(view) == DELIM:
                idents = [_view(f) for f in msg_list[:i]]
                if any(len(v) > MAX_IDENT_BYTES for v in idents):
                    raise MessageRejected(f"it has a routing frame larger than {_size(MAX_IDENT_BYTES)}")
                return [bytes(v) for v in idents], list(msg_list[i + 1 :])
        raise MessageRejected("it has no '<IDS|MSG>' delimiter where one belongs")

    def deserialize(self, msg_list: Any, content: bool = True, copy: bool = True) -> dict[str, Any]:
        """The message dict, as jupyter_client's (without buffers, dates left as strings); the
        grader never peeks, so `content` is always unpacked (or dropped, by msg_type)."""
        frames = [_view(f) for f in msg_list]
        n = len(frames)
        _need(n >= 5, f"it has {n} parts, fewer than the 5 of a Jupyter message")
        _need(n <= 5 + MAX_BUFFERS, f"it has {n} parts (at most {5 + MAX_BUFFERS} are accepted)")
        signature = bytes(frames[0][:256])
        if self.auth is not None:
            _need(bool(signature), "it is not signed")
            _need(compare_digest(signature, self.sign(frames[1:5])), "its signature is wrong")
            _need(signature not in self.digest_history, "it repeats the signature of an earlier message")
            self._add_digest(signature)
        header = loads_bounded(frames[1], limit=MAX_HEADER_BYTES, what="header")
        msg_type, msg_id = check_header(header)
        parent = check_parent(loads_bounded(frames[2], limit=MAX_HEADER_BYTES, what="parent header"))
        kept: dict | None = None
        metadata: dict = {}
        if msg_type in PARSED_TYPES and (msg_type != "display_data" or self._wants_observation(frames[4])):
            metadata = _object(loads_bounded(frames[3], limit=MAX_HEADER_BYTES, what="metadata"), "metadata")
            what = "observation" if msg_type == "display_data" else f"'{msg_type}' content"
            parsed = loads_bounded(frames[4], limit=MAX_CONTENT_BYTES[msg_type], what=what)
            kept = check_content(msg_type, parsed)
            if kept is not None and msg_type == "display_data":
                self.observation_bytes += len(frames[4])
                _need(self.observation_bytes <= MAX_OBSERVATION_BYTES,
                      f"its observations add up to more than {_size(MAX_OBSERVATION_BYTES)} in one cell")
        else:
            for part, frame in (("metadata", frames[3]), ("content", frames[4])):
                _need(_looks_like_object(frame),
                      f"the {part} of its '{msg_type}' message is not a JSON object")
        message: dict[str, Any] = {
            "header": header,
            "msg_id": msg_id,
            "msg_type": msg_type,
            "parent_header": parent,
            "metadata": metadata if kept is not None else {},
            "content": kept if kept is not None else {},  # a dropped message: a valid, empty content
            "buffers": [],
        }
        if kept is None:
            message[DROPPED] = True
        return message

    def _wants_observation(self, content: memoryview) -> bool:
        return self.observations and _MIME_BYTES.search(content) is not None


# ----------------------------------------------------------------------------- sockets


def bounded_context() -> zmq.asyncio.Context:
    """A context whose sockets queue little and refuse large frames (pyzmq applies a context's
    options to each socket it creates, before jupyter_client connects it)."""
    context = zmq.asyncio.Context()
    context.setsockopt(zmq.MAXMSGSIZE, min(FRAME_CAPS.values()))
    context.setsockopt(zmq.RCVHWM, RCV_HWM)
    return context


class BoundedSockets:
    """Mixin for jupyter_client's connection classes (client, manager): each channel's socket gets
    its frame cap, set as the context's default while jupyter_client creates and connects it."""

    context: zmq.Context

    def _create_connected_socket(self, channel: str, identity: bytes | None = None) -> zmq.Socket:
        defaults = self.context.sockopts
        saved = defaults.get(zmq.MAXMSGSIZE)
        defaults[zmq.MAXMSGSIZE] = FRAME_CAPS.get(channel, min(FRAME_CAPS.values()))
        try:
            return super()._create_connected_socket(channel, identity)  # type: ignore[misc]
        finally:
            if saved is None:
                defaults.pop(zmq.MAXMSGSIZE, None)
            else:
                defaults[zmq.MAXMSGSIZE] = saved


class BoundedChannel(AsyncZMQSocketChannel):
    """Receives without copying (a dropped frame is never copied into a Python object)."""

    async def _recv(self, **kwargs: Any) -> dict[str, Any]:
        assert self.socket is not None
        frames = await self.socket.recv_multipart(copy=False)
        _, message = self.session.feed_identities(frames, copy=False)
        return self.session.deserialize(message, copy=False)


class GraderClient(BoundedSockets, AsyncKernelClient):
    """The kernel client: bounded sockets and sessions, only the shell and iopub channels (the
    heartbeat, stdin and control channels are never read, so they are never opened), and a
    watch on the connections for the disconnect that an oversized frame causes."""

    shell_channel_class = Type(BoundedChannel)  # type: ignore[assignment]
    iopub_channel_class = Type(BoundedChannel)  # type: ignore[assignment]

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._monitors: list[tuple[str, Any, Any]] = []

    def _context_default(self) -> zmq.asyncio.Context:
        self._created_context = True
        return bounded_context()

    def start_channels(self, shell: bool = True, iopub: bool = True, stdin: bool = False,
                       hb: bool = False, control: bool = False) -> None:
        super().start_channels(shell=shell, iopub=iopub, stdin=stdin, hb=hb, control=control)

    def watch_connections(self) -> None:
        """Start noticing disconnects on shell and iopub (call once the kernel has answered)."""
        if self._monitors:
            return
        for name, channel in (("shell", self.shell_channel), ("iopub", self.iopub_channel)):
            address = f"inproc://grader-monitor-{name}-{id(self)}"
            channel.socket.monitor(address, zmq.EVENT_DISCONNECTED)
            monitor = self.context.socket(zmq.PAIR)
            monitor.rcvhwm = 100  # the context's small default would be the same for events
            monitor.connect(address)
            self._monitors.append((name, channel.socket, monitor))

    def broken_connection(self) -> str | None:
        """The channel whose connection dropped since watching began ('iopub', 'shell'), if any."""
        broken = None
        for name, _, monitor in self._monitors:
            sync = zmq.Socket.shadow(monitor.underlying)
            try:
                recv_monitor_message(sync, zmq.NOBLOCK)
            except zmq.Again:
                continue
            broken = broken or name
        return broken

    def stop_channels(self) -> None:
        # jupyter_client's version opens every channel it was not using just to close it again.
        monitors, self._monitors = self._monitors, []
        for _, socket, monitor in monitors:
            try:
                socket.disable_monitor()
            except zmq.ZMQError:
                pass
            monitor.close(linger=0)
        for channel in (self._shell_channel, self._iopub_channel, self._stdin_channel,
                        self._hb_channel, self._control_channel):
            if channel is not None and channel.is_alive():
                channel.stop()
        if self._created_context and not self.context.closed:
            self.context.destroy(linger=100)
