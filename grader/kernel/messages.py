"""Messages from the kernel, checked: the grader's side of the Jupyter message protocol.

The kernel is the student's process and knows the session key, so whatever it sends may be
correctly signed and still hostile: a list where an object belongs, an integer of 5,000 digits, a
message of a thousand frames, a flood of output. Every message the grader reads passes through
`GraderSession.deserialize` (jupyter_client's hook between the socket and the message dict), which
either returns a message that nbclient can handle without surprises or raises `MessageRejected`
with one sentence saying why; `grader.kernel.client` turns that into a dead kernel for the cell
that was running. (The frames reach it already bounded by `grader.kernel.zmtp`, and every JSON part
is read by `grader.kernel.bounded_json`.)

    signature    HMAC checked on every message, replays refused
    headers      header, parent header and metadata: bounded JSON objects with the fields of the
                 right types
    dropped      output the grader does not keep (stream, execute_result, execute_input,
                 display_data that is not an observation of the running cell's request,
                 update_display_data, clear_output, comm_*, anything unknown) is recognised from
                 its headers and its content frame is never parsed: the message reaches nbclient
                 as `DROPPED`, with empty content
    kept         status, error (ename and evalue, capped; no traceback), execute_reply,
                 kernel_info_reply and, for probe cells only, observation display_data: parsed
                 with size, depth, number-length and value-count limits, checked, and cut to what
                 is used; a cell's observations are bounded in bytes and in values together

The MAX_* caps here are those of a message's parts; the sockets check them too, from each frame's
size, before the frame is read.
"""

from __future__ import annotations

import json
import re
import time
from hmac import compare_digest
from typing import Any

from jupyter_client.session import DELIM, Session

from grader.kernel.bounded_json import (
    MessageRejected,
    decode_bounded,
    describe_size,
    loads_bounded,
    measure,
    parse_measured,
)
from grader.kernel.protocol import MAX_NODES, MAX_SUBMISSION_NODES, MIME_TYPE

__all__ = ["DROPPED", "GraderSession", "MessageRejected", "cell_line", "check_content", "check_header",
           "check_parent"]

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
MAX_OBSERVATION_NODES = MAX_NODES + 64
"""JSON values in one observation message: the probe's MAX_NODES and its few wrapping values."""
MAX_CELL_OBSERVATION_NODES = MAX_SUBMISSION_NODES
"""JSON values of all the observations of one cell together (a whole submission's worth)."""
MAX_BUFFERS = 16
MAX_IDENTS = 16
MAX_IDENT_BYTES = 1024
MAX_SIGNATURE_BYTES = 256
MAX_ENAME = 256
MAX_EVALUE = 4096
DROPPED = "grader_dropped"
"""Key set on a message whose content the grader skipped: nbclient's client ignores it."""

PARSED_TYPES = frozenset(MAX_CONTENT_BYTES)
_MIME_BYTES = re.compile(re.escape(json.dumps(MIME_TYPE).encode()))
_VERSION = re.compile(r"\d{1,4}(?:\.\d{1,4}){0,3}")


def _kind(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


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


_CELL_LINE = re.compile(r"(?:Cell In\[\d*\]|<cell line: ?)[^\d]{0,40}?(?:line )?(\d{1,6})(?!\d)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def cell_line(traceback: Any) -> int | None:
    """The line of the student's cell in an IPython traceback ("Cell In[3], line 5"): the last
    frame in the cell (hostile text: only a bounded number is taken from it)."""
    if not isinstance(traceback, list):
        return None
    found = None
    for entry in traceback[:50]:
        if isinstance(entry, str):
            for match in _CELL_LINE.finditer(_ANSI.sub("", entry[:4000])):
                found = int(match.group(1))
    return found


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
        return {"ename": _cap(ename, MAX_ENAME), "evalue": _cap(evalue, MAX_EVALUE), "traceback": [],
                "line": cell_line(traceback)}
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
    if isinstance(frame, (bytes, bytearray)):
        return memoryview(frame)
    return frame.buffer  # a zmq.Frame, received with copy=False


REQUESTS_KEY = "grader_requests"
"""The field of a probe cell's execute_request content that holds its requests (JSON)."""


class GraderSession(Session):
    """A Session whose deserialize is bounded and strict (see the module docstring).

    Per cell (`begin_cell`): `observations` says whether observation display_data is wanted
    (probe cells only), and only one whose parent is the cell's execute_request (`request_id`, set
    when it is built) and that carries the cell's `nonce` is parsed; `observation_bytes` and
    `observation_nodes` count what was kept. Observation-shaped output without the nonce (a thread
    of the student's cells printing forged answers) is dropped unread, as other display_data is:
    it is not counted, cannot crowd the probe's answers out of the cell's bounds, and does not
    keep a hanging request looking alive (`last_observation`).
    `requests`, a probe cell's requests (JSON), ride in its execute_request's content
    (`REQUESTS_KEY`), where the probe cell reads them, instead of in the cell's source: ipykernel
    hashes every cell's source in pure Python to name it (murmur2, 0.4 ms a kilobyte) and IPython
    transforms and parses it twice, which cost a kernel 0.1 s for a hidden batch's 160 KB of inputs.
    """

    observations = False
    observation_bytes = 0
    observation_nodes = 0
    request_id: str | None = None
    last_observation = 0.0  # time.monotonic() of the cell's start or its last observation

    requests: str | None = None
    nonce: re.Pattern[bytes] | None = None

    def begin_cell(self, *, observations: bool, requests: str | None = None, nonce: str | None = None) -> None:
        """Reset the per-cell state before a cell's execute_request is sent."""
        self.observations = observations
        self.requests = requests
        self.nonce = re.compile(re.escape(nonce.encode())) if nonce else None
        self.observation_bytes = 0
        self.observation_nodes = 0
        self.request_id = None
        self.last_observation = time.monotonic()

    def msg(self, msg_type: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        message = super().msg(msg_type, *args, **kwargs)
        if msg_type == "execute_request":
            self.request_id = message["header"]["msg_id"]
            if self.requests is not None:
                message["content"][REQUESTS_KEY] = self.requests
        return message

    def feed_identities(self, msg_list: Any, copy: bool = True) -> tuple[list[bytes], list[Any]]:
        # Compare lengths first: jupyter_client's version copies every frame to compare it.
        for i, frame in enumerate(msg_list[: MAX_IDENTS + 1]):
            view = _view(frame)
            if len(view) == len(DELIM) and bytes(view) == DELIM:
                idents = [_view(f) for f in msg_list[:i]]
                if any(len(v) > MAX_IDENT_BYTES for v in idents):
                    raise MessageRejected("it has a routing frame larger than "
                                          f"{describe_size(MAX_IDENT_BYTES)}")
                return [bytes(v) for v in idents], list(msg_list[i + 1 :])
        raise MessageRejected("it has no '<IDS|MSG>' delimiter where one belongs")

    def deserialize(self, msg_list: Any, content: bool = True, copy: bool = True) -> dict[str, Any]:
        """The message dict, as jupyter_client's (without buffers, dates left as strings); the
        grader never peeks, so `content` is always unpacked (or dropped, by msg_type)."""
        frames = [_view(f) for f in msg_list]
        n = len(frames)
        _need(n >= 5, f"it has {n} parts, fewer than the 5 of a Jupyter message")
        _need(n <= 5 + MAX_BUFFERS, f"it has {n} parts (at most {5 + MAX_BUFFERS} are accepted)")
        signature = bytes(frames[0][:MAX_SIGNATURE_BYTES])
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
        wanted = msg_type != "display_data" or self._wants_observation(parent, frames[4])
        if msg_type in PARSED_TYPES and wanted:
            metadata = _object(loads_bounded(frames[3], limit=MAX_HEADER_BYTES, what="metadata"), "metadata")
            if msg_type == "display_data":
                kept = check_content(msg_type, self._observation(frames[4]))
            else:
                what = f"'{msg_type}' content"
                kept = check_content(msg_type, loads_bounded(frames[4], limit=MAX_CONTENT_BYTES[msg_type],
                                                             what=what))
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

    def _wants_observation(self, parent: dict, content: memoryview) -> bool:
        return (self.observations and self.request_id is not None and parent.get("msg_id") == self.request_id
                and _MIME_BYTES.search(content) is not None
                and (self.nonce is None or self.nonce.search(content) is not None))

    def _observation(self, frame: memoryview) -> Any:
        """An observation's content, counted against the cell's totals before it is parsed."""
        text = decode_bounded(frame, limit=MAX_CONTENT_BYTES["display_data"], what="observation")
        nodes = measure(text, what="observation", max_nodes=MAX_OBSERVATION_NODES)
        self.observation_bytes += len(frame)
        self.observation_nodes += nodes
        _need(self.observation_bytes <= MAX_OBSERVATION_BYTES,
              f"its observations add up to more than {describe_size(MAX_OBSERVATION_BYTES)} in one cell")
        _need(self.observation_nodes <= MAX_CELL_OBSERVATION_NODES,
              f"its observations add up to more than {MAX_CELL_OBSERVATION_NODES:,} values in one cell")
        self.last_observation = time.monotonic()
        return parse_measured(text, what="observation")
