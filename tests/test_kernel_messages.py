"""Messages from the kernel: what the grader accepts, drops unread, or refuses (grader/kernel/zmtp.py,
messages.py, bounded_json.py), and what Kernel.run makes of it; Ctrl-C during a cell; the grader's
memory under an output flood.

The kernel is the student's process and holds the session key, so the hostile messages here are
sent from inside a cell with the kernel's own session: correctly signed unless the signature is
what is wrong.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from jupyter_client.session import DELIM, Session

from grader.kernel import bounded_json, messages, zmtp
from grader.kernel.bounded_json import MessageRejected, depth_of, loads_bounded, shape_of
from grader.kernel.client import Kernel
from grader.kernel.messages import GraderSession
from grader.kernel.protocol import MAX_NODES, MIME_TYPE
from grader.kernel.zmtp import KernelSocket

REPO_ROOT = Path(__file__).resolve().parent.parent
KEY = b"0123456789abcdef0123456789abcdef"
PREFIX = "the kernel sent a message the grader could not accept: "
OVER_THE_IOPUB_CAP = "its metadata, content and buffers are more than the 60.0 MiB accepted on iopub"


# ----------------------------------------------------------------------------- building messages


def sender() -> Session:
    return Session(key=KEY, username="kernel")


def receiver(*, observations: bool = False) -> GraderSession:
    session = GraderSession(key=KEY)
    session.begin_cell(observations=observations)
    session.request_id = "cell-1"  # the msg_id of PARENT: the running cell's execute_request
    return session


def signed(header: bytes, parent: bytes, metadata: bytes, content: bytes, *, signature: bytes | None = None,
           extra: list[bytes] | None = None) -> list[bytes]:
    """Wire frames (routing prefix, delimiter, signature, four parts, buffers) from raw parts."""
    parts = [header, parent, metadata, content]
    if signature is None:
        signature = sender().sign(parts)
    return [b"kernel.test", DELIM, signature, *parts, *(extra or [])]


def header(msg_type: str = "status", **fields) -> bytes:
    h = {"msg_id": f"id-{time.monotonic_ns()}", "msg_type": msg_type, "session": "s", "username": "kernel",
         "date": "2026-01-01T00:00:00.000000Z", "version": "5.4", **fields}
    return json.dumps(h).encode()


PARENT = json.dumps({"msg_id": "cell-1", "msg_type": "execute_request"}).encode()


def message(msg_type: str, content: object, *, metadata: object = None) -> list[bytes]:
    return signed(header(msg_type), PARENT, json.dumps(metadata or {}).encode(), json.dumps(content).encode())


def receive(frames: list, session: GraderSession | None = None) -> dict:
    session = session or receiver()
    _, rest = session.feed_identities(frames)
    return session.deserialize(rest)


def rejected(frames: list, session: GraderSession | None = None) -> str:
    with pytest.raises(MessageRejected) as info:
        receive(frames, session)
    assert str(info.value).startswith(PREFIX)
    return info.value.reason


# ----------------------------------------------------------------------------- (a) no kernel: accepted


def test_a_real_sessions_message_passes_and_keeps_what_nbclient_reads() -> None:
    s = sender()
    msg = s.msg("status", {"execution_state": "idle"}, parent=s.msg("execute_request", {}))
    frames = s.serialize(msg, ident=b"kernel.x.status")
    got = receive(frames)
    assert got["msg_type"] == "status" and got["msg_id"] == msg["header"]["msg_id"]
    assert got["content"] == {"execution_state": "idle"}
    assert got["parent_header"]["msg_id"] == msg["parent_header"]["msg_id"]
    assert messages.DROPPED not in got


def test_error_keeps_capped_ename_and_evalue_and_no_traceback() -> None:
    got = receive(message("error", {"ename": "ValueError", "evalue": "v" * 100_000, "traceback": ["a", "b"]}))
    assert got["content"]["ename"] == "ValueError"
    assert len(got["content"]["evalue"]) == messages.MAX_EVALUE and got["content"]["evalue"].endswith("…")
    assert got["content"]["traceback"] == []


def test_execute_and_kernel_info_replies_pass() -> None:
    reply = receive(message("execute_reply", {"status": "error", "execution_count": 3, "ename": "E",
                                              "evalue": "x", "traceback": ["t"], "payload": []}))
    assert reply["content"] == {"status": "error", "execution_count": 3, "ename": "E", "evalue": "x"}
    info = receive(message("kernel_info_reply", {"status": "ok", "protocol_version": "5.4",
                                                 "banner": "b" * 10_000}))
    assert info["content"]["protocol_version"] == "5.4"


@pytest.mark.parametrize("msg_type", ["stream", "execute_input", "execute_result", "update_display_data",
                                      "clear_output", "comm_open", "comm_msg", "something_new"])
def test_dropped_types_are_not_parsed(monkeypatch, msg_type) -> None:
    parsed: list[str] = []
    real = messages.loads_bounded

    def spy(data, **kw):
        parsed.append(kw["what"])
        return real(data, **kw)

    monkeypatch.setattr(messages, "loads_bounded", spy)
    # content the parser would refuse: it is never looked at
    got = receive(signed(header(msg_type), PARENT, b"{}", b'{"text": ' + b"1" * 5000 + b"}"))
    assert got[messages.DROPPED] is True and got["content"] == {} and got["buffers"] == []
    assert parsed == ["header", "parent header"]


def test_observations_are_parsed_only_when_asked() -> None:
    obs = {"id": "a", "status": "ok"}

    def frames() -> list[bytes]:
        return message("display_data", {"data": {MIME_TYPE: obs, "text/plain": "x"}, "metadata": {}})

    assert receive(frames())[messages.DROPPED] is True
    got = receive(frames(), receiver(observations=True))
    assert got["content"] == {"data": {MIME_TYPE: obs}, "metadata": {}}
    plain = receive(message("display_data", {"data": {"text/plain": "x"}, "metadata": {}}),
                    receiver(observations=True))
    assert plain[messages.DROPPED] is True


def test_depth_ignores_brackets_in_strings() -> None:
    assert depth_of('{"a": "[[[[{{{{", "b": [1, [2]]}') == 3
    assert depth_of(r'["\"[[[", "\\", [[]]]') == 3
    assert depth_of('"unterminated [[[[') == 0
    assert depth_of("[" * 100_000) == 100_000


# ----------------------------------------------------------------------------- (a) no kernel: refused


def _obs_too_big() -> list[bytes]:
    blob = "x" * (messages.MAX_CONTENT_BYTES["display_data"] + 1)
    content = {"data": {MIME_TYPE: {"id": "a", "blob": blob}}, "metadata": {}}
    return message("display_data", content)


IDLE = b'{"execution_state": "idle"}'

HOSTILE = {
    "bad signature": (lambda: signed(header(), PARENT, b"{}", IDLE, signature=b"0" * 64),
                      "its signature is wrong"),
    "unsigned": (lambda: signed(header(), PARENT, b"{}", IDLE, signature=b""), "it is not signed"),
    "content a list": (lambda: message("status", ["idle"]), "'status' content is a list, not an object"),
    "dropped content a list": (lambda: message("stream", ["x"]),
                               "content of its 'stream' message is not a JSON object"),
    "header a string": (lambda: signed(b'"status"', PARENT, b"{}", b"{}"), "its header is a string"),
    "msg_type missing": (lambda: signed(b'{"msg_id": "x"}', PARENT, b"{}", b"{}"),
                         "its header has no 'msg_type'"),
    "msg_id a number": (lambda: signed(b'{"msg_id": 1, "msg_type": "status"}', PARENT, b"{}", b"{}"),
                        "'msg_id' in its header is a number"),
    "parent a list": (lambda: signed(header(), b"[]", b"{}", IDLE), "its parent header is a list"),
    "metadata a list": (lambda: signed(header(), PARENT, b"[1]", IDLE), "its metadata is a list"),
    "execution_state a number": (lambda: message("status", {"execution_state": 3}),
                                 "'execution_state' in its 'status' content is a number"),
    "traceback not strings": (lambda: message("error", {"ename": "E", "evalue": "v", "traceback": [1, 2]}),
                              "'traceback' of its 'error' content is not a list of strings"),
    "traceback a string": (lambda: message("error", {"ename": "E", "evalue": "v", "traceback": "tb"}),
                           "not a list of strings"),
    "ename missing": (lambda: message("error", {"evalue": "v", "traceback": []}), "has no 'ename'"),
    "5000-digit integer": (lambda: signed(header(), PARENT, b"{}", b'{"execution_state": "idle", "n": '
                                          + b"7" * 5000 + b"}"), "an integer of 5000 digits"),
    "5000-digit float": (lambda: signed(header(), PARENT, b"{}", b'{"execution_state": "idle", "n": 1.'
                                        + b"7" * 5000 + b"}"), "a number of 5002 characters"),
    "100,000-deep nesting": (lambda: signed(header("error"), PARENT, b"{}", b'{"ename": "E", "traceback": '
                                            + b"[" * 100_000 + b"]" * 100_000 + b"}"),
                             "nested 100001 levels deep"),
    "deep nesting in the header": (lambda: signed(b'{"x": ' + b"[" * 70 + b"]" * 70 + b"}", PARENT, b"{}",
                                                  b"{}"),
                                   "its header is nested 71 levels deep"),
    "NaN": (lambda: signed(header(), PARENT, b"{}", b'{"execution_state": NaN}'),
            "NaN, which JSON does not allow"),
    "not JSON": (lambda: signed(header(), PARENT, b"{}", b'{"execution_state": "idle"'), "is not valid JSON"),
    "oversized status": (lambda: message("status", {"execution_state": "idle", "pad": "x" * 100_000}),
                         "more than the 64.0 KiB accepted"),
    "oversized header": (lambda: signed(header(pad="x" * 100_000), PARENT, b"{}", b"{}"),
                         "KiB, more than the 64.0 KiB accepted"),
    "old protocol": (lambda: signed(header(version="4.1"), PARENT, b"{}", IDLE), "protocol version '4.1'"),
    "too few parts": (lambda: [b"kernel", DELIM, b"sig", b"{}"], "fewer than the 5"),
    "too many parts": (lambda: message("stream", {}) + [b"b"] * (messages.MAX_BUFFERS + 1), "parts (at most"),
    "200,000 values in an error": (lambda: signed(header("error"), PARENT, b"{}",
                                                  b'{"ename": "E", "evalue": "v", "traceback": ['
                                                  + b"0," * 200_000 + b'0]}'),
                                   "its 'error' content holds 200,005 values (at most 100,000 are accepted)"),
    "no delimiter": (lambda: [b"kernel", b"sig", b"{}", b"{}", b"{}", b"{}"], "no '<IDS|MSG>' delimiter"),
    "huge routing frame": (lambda: [b"k" * 10_000, *message("status", {"execution_state": "idle"})[1:]],
                           "a routing frame larger than"),
}


@pytest.mark.parametrize("kind", HOSTILE)
def test_hostile_messages_are_refused_with_a_reason(kind) -> None:
    make, reason = HOSTILE[kind]
    assert reason in rejected(make(), receiver(observations=True))


def test_a_replayed_message_is_refused() -> None:
    session = receiver()
    frames = message("status", {"execution_state": "busy"})
    receive(list(frames), session)
    assert "repeats the signature of an earlier message" in rejected(list(frames), session)


def test_an_oversized_observation_is_refused_only_when_observations_are_read() -> None:
    assert receive(_obs_too_big())[messages.DROPPED] is True
    assert "its observation is 8.0 MiB, more than the 8.0 MiB accepted" in \
        rejected(_obs_too_big(), receiver(observations=True))


def test_observations_of_one_cell_are_capped_in_total(monkeypatch) -> None:
    monkeypatch.setattr(messages, "MAX_OBSERVATION_BYTES", 10_000)
    session = receiver(observations=True)

    def observation(rid: str) -> list[bytes]:
        return message("display_data", {"data": {MIME_TYPE: {"id": rid, "v": "x" * 4000}}, "metadata": {}})

    receive(observation("a"), session)
    receive(observation("b"), session)
    assert "observations add up to more than" in rejected(observation("c"), session)


def test_bounded_loads_is_linear_on_adversarial_strings() -> None:
    for text in ('"' + '\\"' * 2**20, '"a' * 2**20, "[[]]" * 2**19):
        started = time.process_time()
        with pytest.raises(MessageRejected):
            loads_bounded(text.encode(), limit=2**20, what="content")
        loads_bounded(b"[]", limit=10, what="content")
        assert time.process_time() - started < 5


# ----------------------------------------------------------------------------- (a) counting values


def _reference_count(value: object) -> int:
    """What json.loads builds: every value, not the keys."""
    if isinstance(value, dict):
        return 1 + sum(map(_reference_count, value.values()))
    if isinstance(value, list):
        return 1 + sum(map(_reference_count, value))
    return 1


@pytest.mark.parametrize("text, depth, values", [
    ("1", 0, 1), ('"a"', 0, 1), ("null", 0, 1), ("[]", 1, 1), ("{}", 1, 1), ("[1]", 1, 2),
    ("[[]]", 2, 2), ("[[],[]]", 2, 3), ('{"a": []}', 2, 2), ('{"a": 1, "b": {}}', 2, 3),
    (' [ 1 , -2.5e3 , true , "x,y:[]{}" , { } ] ', 2, 6), ('{"k": "\\"[", "l": [{"m": null}]}', 3, 5),
    ('"[],[],[]"', 0, 1),
])
def test_shape_counts_values_exactly(text, depth, values) -> None:
    assert shape_of(text) == (depth, values)
    assert _reference_count(json.loads(text)) == values


def test_shape_agrees_with_the_probe_protocol_on_random_documents() -> None:
    import random

    from grader.kernel.protocol import measure

    rng = random.Random(7)

    def make(level: int) -> object:
        kind = rng.randrange(7 if level < 6 else 4)
        if kind == 0:
            return rng.choice([0, -3, 1.5e-7, 12345678901234])
        if kind == 1:
            return rng.choice(["", "a", 'quote " and \\ and [{,:}]', "é ☃"])
        if kind == 2:
            return rng.choice([True, False, None])
        if kind == 3:
            return []
        if kind in (4, 5):
            return [make(level + 1) for _ in range(rng.randrange(5))]
        return {f"k{i}": make(level + 1) for i in range(rng.randrange(5))}

    for _ in range(300):
        doc = make(0)
        text = json.dumps(doc, indent=rng.choice([None, 1]), separators=rng.choice([None, (",", ":")]))
        assert shape_of(text)[1] == _reference_count(doc) == measure(doc, max_nodes=10**9, max_depth=99)


def test_values_are_counted_before_anything_is_parsed(monkeypatch) -> None:
    calls: list[int] = []
    real = json.loads
    monkeypatch.setattr(bounded_json.json, "loads", lambda text, **kw: calls.append(1) or real(text, **kw))
    text = b"[" + b"[]," * 200_000 + b"[]]"  # 600 KB that would be 200,002 lists
    with pytest.raises(MessageRejected) as info:
        loads_bounded(text, limit=2**20, what="content", max_nodes=100_000)
    assert info.value.reason == "its content holds 200,002 values (at most 100,000 are accepted)"
    assert calls == []
    assert loads_bounded(b"[[], [1, 2]]", limit=100, what="content", max_nodes=5) == [[], [1, 2]]


def _observation(values: int, *, rid: str = "a") -> list[bytes]:
    """An observation message whose content holds `values` + 6 JSON values (data, the MIME entry,
    its id and list, the content object and its metadata)."""
    return message("display_data", {"data": {MIME_TYPE: {"id": rid, "v": [0.5] * values}}, "metadata": {}})


def test_an_observation_over_the_value_cap_is_refused() -> None:
    fits = messages.MAX_OBSERVATION_NODES - 6
    got = receive(_observation(fits), receiver(observations=True))
    assert len(got["content"]["data"][MIME_TYPE]["v"]) == fits
    reason = rejected(_observation(fits + 1), receiver(observations=True))
    assert reason == f"its observation holds {messages.MAX_OBSERVATION_NODES + 1:,} values " \
                     f"(at most {messages.MAX_OBSERVATION_NODES:,} are accepted)"
    assert messages.MAX_OBSERVATION_NODES >= MAX_NODES  # an observation the session accepts fits


def test_observations_of_one_cell_are_capped_in_values(monkeypatch) -> None:
    monkeypatch.setattr(messages, "MAX_CELL_OBSERVATION_NODES", 1000)
    session = receiver(observations=True)
    receive(_observation(400, rid="a"), session)
    receive(_observation(400, rid="b"), session)
    assert session.observation_nodes == 812
    assert "its observations add up to more than 1,000 values in one cell" in \
        rejected(_observation(400, rid="c"), session)
    session.begin_cell(observations=True)  # the next cell starts from nothing
    assert (session.observation_nodes, session.observation_bytes, session.request_id) == (0, 0, None)


def test_an_observation_for_another_request_is_dropped_unparsed(monkeypatch) -> None:
    parsed: list[str] = []
    real = messages.loads_bounded
    monkeypatch.setattr(messages, "loads_bounded",
                        lambda data, **kw: parsed.append(kw["what"]) or real(data, **kw))
    monkeypatch.setattr(GraderSession, "_observation", lambda self, frame: parsed.append("observation"))
    content = json.dumps({"data": {MIME_TYPE: {"id": "a", "v": [[]] * 1000}}, "metadata": {}}).encode()
    other = json.dumps({"msg_id": "an-earlier-cell", "msg_type": "execute_request"}).encode()
    session = receiver(observations=True)
    got = receive(signed(header("display_data"), other, b"{}", content), session)
    assert got[messages.DROPPED] is True and parsed == ["header", "parent header"]
    assert session.observation_nodes == 0
    session.request_id = None  # between begin_cell and the execute_request: nothing is the cell's
    assert receive(message("display_data", {"data": {MIME_TYPE: {"id": "a"}}}), session)[messages.DROPPED]


def test_an_observation_without_the_cell_s_nonce_is_dropped_unparsed_and_keeps_no_request_alive() -> None:
    """A probe cell's observations carry its fresh nonce; observation-shaped output without it (a
    thread of the student's cells answering the probe's requests itself) is dropped as other
    display_data is: never parsed, never counted against the cell's bounds, and no sign of life
    from a request that hangs."""
    nonce = "5f" * 16
    session = GraderSession(key=KEY)
    session.begin_cell(observations=True, nonce=nonce)
    session.request_id = "cell-1"
    quiet_since = session.last_observation
    claim = {"id": "value-1", "status": "ok", "result": {"op": "value", "values": [{"t": "py", "v": 1}]}}
    for forged in (claim, {"nonce": "0" * 32, "observation": claim}):
        got = receive(message("display_data", {"data": {MIME_TYPE: forged}, "metadata": {}}), session)
        assert got[messages.DROPPED] is True
    assert (session.observation_nodes, session.observation_bytes) == (0, 0)
    assert session.last_observation == quiet_since
    real = receive(message("display_data", {"data": {MIME_TYPE: {"nonce": nonce, "observation": claim}},
                                            "metadata": {}}), session)
    assert messages.DROPPED not in real and real["content"]["data"][MIME_TYPE]["observation"] == claim
    assert session.observation_nodes > 0 and session.last_observation > quiet_since


def test_the_session_learns_the_cells_request_when_it_builds_it() -> None:
    session = GraderSession(key=KEY)
    session.begin_cell(observations=True)
    assert session.request_id is None
    session.msg("kernel_info_request")
    assert session.request_id is None
    request = session.msg("execute_request", {"code": "1"})
    assert session.request_id == request["header"]["msg_id"]


# ----------------------------------------------------------------------------- (a) the ZMTP socket


def _run(coro):
    return asyncio.run(coro)


def _receive(sock: KernelSocket, timeout: float = 5.0):
    return _run(sock.receive(timeout))


def _receive_until(sock: KernelSocket, send, within: float = 10.0) -> list:
    """Receive, calling `send` between attempts (a PUB drops what it sends before the handshake)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        send()
        got = _receive(sock, 0.1)
        if got is not None:
            return got
    raise AssertionError("nothing arrived")


def test_a_kernel_socket_talks_to_a_libzmq_router_queueing_until_it_listens(tmp_path) -> None:
    import zmq

    url = f"ipc://{tmp_path}/shell"
    sock = KernelSocket(url, "shell", identity=b"grader-session")
    sock.send_multipart([b"<IDS|MSG>", b"first"])  # before the kernel listens: queued, as libzmq does
    assert _receive(sock, 0.2) is None  # nobody listens yet: retried, no error
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.bind(url)
    try:
        assert _receive(sock, 0.5) is None  # connects, handshakes, sends what was queued
        assert router.poll(5000)
        assert router.recv_multipart() == [b"grader-session", b"<IDS|MSG>", b"first"]
        router.send_multipart([b"grader-session", b"x" * 300, b"", b"y"])  # long and empty frames
        assert [bytes(f) for f in _receive(sock)] == [b"x" * 300, b"", b"y"]
        sock.send_multipart([b"second", b"z" * 70_000])
        assert router.poll(5000) and router.recv_multipart() == [b"grader-session", b"second", b"z" * 70_000]
    finally:
        sock.close()
        router.close(linger=0)
        ctx.term()


def test_a_kernel_socket_subscribes_to_a_libzmq_pub(tmp_path) -> None:
    import zmq

    url = f"ipc://{tmp_path}/iopub"
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.bind(url)
    sock = KernelSocket(url, "iopub")
    sock.setsockopt(zmq.SUBSCRIBE, b"")
    try:
        got = _receive_until(sock, lambda: pub.send_multipart([b"kernel.status", b"<IDS|MSG>", b"m"]))
        assert [bytes(f) for f in got] == [b"kernel.status", b"<IDS|MSG>", b"m"]
    finally:
        sock.close()
        pub.close(linger=0)
        ctx.term()


class FakeKernel:
    """The kernel side of one connection, in raw bytes: a unix socket that accepts once, sends what
    it is given (its ZMTP greeting and handshake, unless told otherwise) and reads what comes."""

    def __init__(self, path: Path, socket_type: bytes = b"PUB", *, handshake: bool = True):
        import socket
        import threading

        self.path = path
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(str(path))
        self.listener.listen(1)
        self.conn: socket.socket | None = None
        self.received = bytearray()
        self.sent_all = threading.Event()
        self._chunks: list[bytes] = []
        self._more = threading.Condition()
        if handshake:
            self.send(zmtp._GREETING, zmtp._frame(b"\x05READY" + b"\x0bSocket-Type"
                                                  + len(socket_type).to_bytes(4, "big") + socket_type,
                                                  command=True))
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"ipc://{self.path}"

    def send(self, *chunks: bytes) -> None:
        with self._more:
            self._chunks.extend(chunks)
            self._more.notify()

    def _serve(self) -> None:
        import socket
        import threading

        self.listener.settimeout(20)
        try:
            self.conn, _ = self.listener.accept()
        except OSError:
            return
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()
        try:
            while True:
                with self._more:
                    while not self._chunks:
                        if not self._more.wait(20):
                            return
                    chunk = self._chunks.pop(0)
                if chunk is None:
                    self.conn.shutdown(socket.SHUT_RDWR)  # close() alone waits for the reader thread
                    return
                self.conn.sendall(chunk)
                if not self._chunks:
                    self.sent_all.set()
        except OSError:  # the grader closed the connection: what was left is never read
            return

    def _drain(self) -> None:
        try:
            while data := self.conn.recv(65536):
                self.received += data
        except OSError:
            pass

    def hang_up(self) -> None:
        self.send(None)  # type: ignore[arg-type]

    def close(self) -> None:
        import socket

        self.hang_up()
        self.listener.close()
        if self.conn is not None:
            try:
                self.conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(20)
        if self.conn is not None:
            self._drainer.join(20)
            self.conn.close()


def frames(*bodies: bytes, command: bool = False) -> bytes:
    """A whole message (or one command) in ZMTP frames."""
    return b"".join(zmtp._frame(b, more=i < len(bodies) - 1, command=command) for i, b in enumerate(bodies))


def opening(*bodies: bytes) -> bytes:
    """The first frames of a message that goes on (each has the MORE flag)."""
    return b"".join(zmtp._frame(b, more=True) for b in bodies)


def frame_head(size: int, *, more: bool = True) -> bytes:
    """Only the flags and size of a frame: what the grader must refuse without reading the body."""
    return bytes([2 | int(more)]) + size.to_bytes(8, "big")


PARTS = [b"kernel.x", DELIM, b"0" * 64, b"{}", b"{}"]  # routing, delimiter, signature, header, parent

REFUSED_STREAMS = {
    "routing frame of 50 MiB": (lambda: frame_head(50 << 20), "it has a routing frame larger than 1.0 KiB"),
    "17 routing frames": (lambda: opening(*[b"r"] * 17), "no '<IDS|MSG>' delimiter among its first 17"),
    "22 parts after the delimiter": (lambda: frames(*PARTS, *[b"{}"] * 2, *[b"b"] * 16, b"b"),
                                     "more than 21 parts after its '<IDS|MSG>' delimiter"),
    "signature of 1 KiB": (lambda: opening(b"k", DELIM) + frame_head(1024),
                           "its signature is 1.0 KiB, more than the 256 bytes accepted"),
    "header of 1 MiB": (lambda: opening(b"k", DELIM, b"sig") + frame_head(2**20),
                        "its header is 1.0 MiB, more than the 64.0 KiB accepted"),
    "content over the cap": (lambda: opening(*PARTS, b"{}") + frame_head(zmtp.MAX_FRAME_BYTES),
                             OVER_THE_IOPUB_CAP),
    "a frame of 2**63 bytes": (lambda: opening(*PARTS) + frame_head(2**63),
                               "are more than the 60.0 MiB accepted"),
    "reserved flag bits": (lambda: b"\x08\x01x", "a frame that ZMTP does not allow"),
    "a command inside a message": (lambda: opening(b"k", DELIM) + zmtp._frame(b"\x04PING", command=True),
                                   "a ZMTP command inside a message"),
    "a command of 1 MiB": (lambda: bytes([6]) + (2**20).to_bytes(8, "big"), "a ZMTP command of 1.0 MiB"),
}


@pytest.mark.parametrize("kind", REFUSED_STREAMS)
def test_a_kernel_socket_refuses_a_frame_by_its_place_before_reading_it(tmp_path, kind) -> None:
    import tracemalloc

    make, reason = REFUSED_STREAMS[kind]
    peer = FakeKernel(tmp_path / "iopub")
    peer.send(make())
    sock = KernelSocket(peer.url, "iopub")
    sock.setsockopt(__import__("zmq").SUBSCRIBE, b"")
    tracemalloc.start()
    try:
        with pytest.raises(MessageRejected) as info:
            _receive(sock)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        peer.close()
    assert reason in info.value.reason, info.value.reason
    assert sock.rejected == info.value.reason and sock._sock is None
    assert peak < 2 * 2**20, peak  # nothing of the announced frame was allocated
    assert _receive(sock, 0.1) is None  # the connection is over; nothing is read from it again


BROKEN_HANDSHAKES = {
    "not ZMTP": (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + b" " * 64,
                 "does not speak ZMTP 3 with the NULL mechanism"),
    "CURVE": (zmtp._GREETING.replace(b"NULL", b"CURV"), "does not speak ZMTP 3 with the NULL mechanism"),
    "ZMTP 2": (zmtp._GREETING[:10] + b"\x01" + zmtp._GREETING[11:], "does not speak ZMTP 3"),
    "a REQ socket": (zmtp._GREETING + frames(b"\x05READY\x0bSocket-Type\x00\x00\x00\x03REQ", command=True),
                     "is of type 'REQ', which a SUB socket does not talk to"),
    "a message first": (zmtp._GREETING + frames(b"hello"),
                        "sent a message before the ZMTP handshake was done"),
    "ERROR": (zmtp._GREETING + frames(b"\x05ERROR\x06denied", command=True),
              "did not complete the ZMTP handshake"),
    "a broken READY": (zmtp._GREETING + frames(b"\x05READY\x0bSocket-Type\x00\x00\x00\x09PUB", command=True),
                       "a malformed ZMTP command"),
}


@pytest.mark.parametrize("kind", BROKEN_HANDSHAKES)
def test_a_kernel_socket_refuses_a_peer_that_is_not_a_jupyter_socket(tmp_path, kind) -> None:
    data, reason = BROKEN_HANDSHAKES[kind]
    peer = FakeKernel(tmp_path / "iopub", handshake=False)
    peer.send(data)
    sock = KernelSocket(peer.url, "iopub")
    try:
        with pytest.raises(MessageRejected) as info:
            _receive(sock)
    finally:
        sock.close()
        peer.close()
    assert reason in info.value.reason, info.value.reason


def test_a_multipart_message_is_refused_after_its_first_oversized_part(tmp_path) -> None:
    """The attack as a libzmq kernel sends it: one 50 MiB buffer twenty times in one message (the
    kernel holds it once); the grader reads the first 50 MiB buffer and refuses the second by its
    size, where libzmq received all 1000 MiB before handing over the first frame."""
    import tracemalloc

    import zmq

    url = f"ipc://{tmp_path}/iopub"
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.bind(url)
    sock = KernelSocket(url, "iopub")
    sock.setsockopt(zmq.SUBSCRIBE, b"")
    buf = b"x" * (50 << 20)
    try:
        _receive_until(sock, lambda: pub.send_multipart([b"kernel.x", b"hello"]))
        pub.send_multipart([*PARTS, b"{}", b"{}", *[buf] * 20], copy=False)
        tracemalloc.start()
        with pytest.raises(MessageRejected) as info:
            while (got := _receive(sock, 20)) is not None:
                assert [bytes(f) for f in got] == [b"kernel.x", b"hello"]  # the warm-up's, first
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    finally:
        sock.close()
        pub.close(linger=0)
        ctx.term()
    assert OVER_THE_IOPUB_CAP in info.value.reason
    assert 50 << 20 <= peak < (50 << 20) + 4 * 2**20, peak


def test_a_cancelled_receive_loses_nothing(tmp_path) -> None:
    peer = FakeKernel(tmp_path / "iopub")
    whole = frames(*PARTS, b"{}", b"c" * 1_000_000, b"buf")
    peer.send(whole[:600_000])
    sock = KernelSocket(peer.url, "iopub")

    async def cancelled() -> None:
        task = asyncio.ensure_future(sock.receive(None))
        await asyncio.sleep(0.5)  # it has read the first part and waits for more
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        _run(cancelled())
        assert sock._body is not None and 0 < sock._got < len(sock._body)  # mid-frame, kept
        peer.send(whole[600_000:])
        got = _receive(sock)  # in another event loop, as nbclient's next cell may be
    finally:
        sock.close()
        peer.close()
    assert [bytes(f) for f in got] == [*PARTS, b"{}", b"c" * 1_000_000, b"buf"]


def test_a_connection_the_kernel_closes_is_broken_for_good(tmp_path) -> None:
    peer = FakeKernel(tmp_path / "iopub")
    peer.send(frames(b"kernel.x", DELIM, b"one"))
    sock = KernelSocket(peer.url, "iopub")
    try:
        assert [bytes(f) for f in _receive(sock)] == [b"kernel.x", DELIM, b"one"]
        peer.hang_up()
        assert _receive(sock, 0.5) is None
        assert sock.broken and "its iopub connection ended" in sock.broken
        started = time.process_time()
        assert _receive(sock, 0.5) is None
        assert time.process_time() - started < 0.2  # it waits, it does not spin
    finally:
        sock.close()
        peer.close()


def test_a_flood_of_commands_does_not_starve_the_event_loop(tmp_path) -> None:
    peer = FakeKernel(tmp_path / "iopub")
    ping = frames(b"\x04PING\x00\x00", command=True)
    for _ in range(400):
        peer.send(ping * 20_000)  # 400 x 160 KB of pings, faster than they are read
    sock = KernelSocket(peer.url, "iopub")

    async def timed() -> tuple[object, float, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        tick = asyncio.ensure_future(ticker())
        started = time.monotonic()
        got = await sock.receive(0.5)
        tick.cancel()
        return got, time.monotonic() - started, ticks

    try:
        got, took, ticks = _run(timed())
    finally:
        sock.close()
        peer.close()
    assert got is None and took < 2 and ticks >= 10, (took, ticks)


def test_a_kernel_socket_never_opens_the_heartbeat() -> None:
    with pytest.raises(ValueError, match="does not open the hb channel"):
        KernelSocket("ipc:///nowhere", "hb")


# ----------------------------------------------------------------------------- (b) real kernels

SEND = textwrap.dedent('''
    def _send(msg_type, content, *, bad_signature=False, shell=False):
        """A message on iopub (or, as if a reply, on shell) to the grader, the cell's parent."""
        from jupyter_client.session import extract_header
        k = get_ipython().kernel
        s = k.session
        parent = extract_header(k.get_parent())
        parts = [s.pack(s.msg_header(msg_type)), s.pack(parent), b"{}", content]
        signature = b"0" * 64 if bad_signature else s.sign(parts)
        frames = [b"<IDS|MSG>", signature, *parts]
        if shell:  # routed to the grader's shell socket, whose identity is its session id
            k.shell_stream.socket.send_multipart([parent["session"].encode(), *frames])
        else:
            k.iopub_socket.send_multipart([b"kernel.test", *frames])
''')

SENT = {
    "bad signature": ('_send("status", b\'{"execution_state": "busy"}\', bad_signature=True)',
                      "its signature is wrong"),
    "content a list": ('_send("status", b\'["busy"]\')', "'status' content is a list, not an object"),
    "5000-digit integer": ('_send("error", b\'{"ename": "E", "evalue": "v", "traceback": [], "n": \''
                           ' + b"9" * 5000 + b"}")', "an integer of 5000 digits"),
    "100,000-deep nesting": ('_send("error", b\'{"ename": "E", "traceback": \''
                             ' + b"[" * 100000 + b"]" * 100000 + b"}")', "nested 100001 levels deep"),
    "64 MiB frame": ('_send("stream", b\'{"name": "stdout", "text": "\' + b"x" * (64 << 20) + b\'"}\')',
                     OVER_THE_IOPUB_CAP),
    "traceback not a list": ('_send("error", b\'{"ename": "E", "evalue": "v", "traceback": "no"}\')',
                             "not a list of strings"),
    "reply content a list, on shell": ('_send("execute_reply", b\'["ok"]\', shell=True)',
                                       "'execute_reply' content is a list, not an object"),
}


def hostile_cell(send: str) -> str:
    return SEND + send + "\nimport time\ntime.sleep(30)\n"


def kernel_pid(kernel: Kernel) -> int:
    return kernel._km.provisioner.process.pid  # type: ignore[union-attr]


def gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ", 1)[1].startswith("Z"):  # a zombie is dead, not yet reaped
                    return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.kernel
@pytest.mark.parametrize("kind", SENT)
def test_a_hostile_message_from_a_cell_ends_it_as_died(kind) -> None:
    send, reason = SENT[kind]
    with Kernel(sandbox=None) as kernel:
        pid = kernel_pid(kernel)
        run = kernel.run(hostile_cell(send), 60)
        assert run.status == "died", run
        assert run.evalue is not None and run.evalue.startswith(PREFIX) and reason in run.evalue, run.evalue
        assert "\n" not in run.evalue
        assert run.seconds < 20  # the rejection ended the cell; it did not wait out the sleep
        assert not kernel.alive and gone(pid)
        assert kernel.run("1", 10).status == "died"  # and nothing is left to talk to


@pytest.mark.kernel
def test_a_replacement_kernel_works_after_a_rejection() -> None:
    with Kernel(sandbox=None) as kernel:
        assert kernel.run(hostile_cell(SENT["content a list"][0]), 60).status == "died"
    with Kernel(sandbox=None) as kernel:
        assert kernel.run("x = 1\nx", 10).status == "ok"


@pytest.mark.kernel
@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root")
def test_a_hostile_message_from_a_sandboxed_kernel() -> None:
    from grader.sandbox.layers import SandboxPolicy, available

    if not available().sandboxed:
        pytest.skip(f"sandbox layers missing: {available().missing}")
    with Kernel(sandbox=SandboxPolicy()) as kernel:
        assert kernel.run("print('fine')", 30).status == "ok"
        run = kernel.run(hostile_cell(SENT["5000-digit integer"][0]), 60)
        assert run.status == "died" and SENT["5000-digit integer"][1] in (run.evalue or ""), run
        assert not kernel.alive


@pytest.mark.kernel
def test_the_grader_reads_only_shell_and_iopub_through_bounded_sockets() -> None:
    with Kernel(sandbox=None) as kernel:
        kc = kernel._client.kc  # type: ignore[union-attr]
        assert isinstance(kc.session, GraderSession)
        # No libzmq socket is connected to the kernel: each is the grader's own ZMTP connection.
        for channel, socket in (("iopub", kc.iopub_channel.socket), ("shell", kc.shell_channel.socket),
                                ("control", kernel._km._control_socket)):  # type: ignore[union-attr]
            assert isinstance(socket, KernelSocket) and socket.channel == channel
            assert socket.cap == zmtp.FRAME_CAPS[channel]
        assert kc.iopub_channel.socket.cap == zmtp.MAX_FRAME_BYTES
        assert (kc._stdin_channel, kc._hb_channel, kc._control_channel) == (None, None, None)
        assert kernel.run("input()", 10).ename == "StdinNotImplementedError"


PUBLISH = "get_ipython().display_pub.publish(data={%r: {'id': %%r, 'status': 'ok'}}, metadata={})" % MIME_TYPE


@pytest.mark.kernel
def test_observations_are_collected_only_for_the_cells_that_ask() -> None:
    with Kernel(sandbox=None) as kernel:
        student = kernel.run(PUBLISH % "fake", 10)
        assert student.status == "ok" and student.observations == []
        # clear_output is dropped: it cannot erase what the probe already published
        probe = kernel.run(PUBLISH % "a" + "\nfrom IPython.display import clear_output\nclear_output()\n"
                           + PUBLISH % "b" + "\nprint('noise')\n1/0", 10, observations=True)
        assert probe.status == "error" and probe.ename == "ZeroDivisionError"
        assert [o["id"] for o in probe.observations] == ["a", "b"]
        big = kernel.run(PUBLISH.replace("'status': 'ok'", "'v': 'x' * (9 << 20)") % "x"
                         + "\nimport time\ntime.sleep(30)", 60, observations=True)
        assert big.status == "died" and "its observation is 9.0 MiB" in (big.evalue or ""), big


# ----------------------------------------------------------------------------- (b) memory under a flood

MEMORY_SCRIPT = textwrap.dedent('''
    import json, sys, time
    from grader.kernel.client import Kernel

    def peak_mb():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024

    FLOOD = """
    import sys, threading, time
    line = "x" * 65535 + "\\\\n"
    def spam():
        while True:
            sys.stdout.write(line)
            if PAUSE:
                time.sleep(PAUSE)
    threading.Thread(target=spam, daemon=True).start()
    time.sleep(SECONDS)
    """
    out = {}
    with Kernel(sandbox=None) as k:
        out["quiet"] = k.run("import time; time.sleep(2)", 30).status
        out["baseline_mb"] = peak_mb()
        # Paced to ~64 MB/s: every flush is a frame well below the cap, and every one is dropped. Five
        # seconds are 320 MB: kept, they would grow the grader far past the 100 MB the test allows.
        run = k.run(FLOOD.replace("PAUSE", "0.001").replace("SECONDS", "5"), 60)
        out["paced"], out["paced_mb"], out["paced_s"] = run.status, peak_mb(), run.seconds
    with Kernel(sandbox=None) as k:
        # Flat out: a flush that outgrows the iopub cap is refused as it arrives; the kernel is killed.
        run = k.run(FLOOD.replace("PAUSE", "0").replace("SECONDS", "5"), 60)
        out["flat_out"], out["flat_out_mb"], out["flat_out_s"] = run.status, peak_mb(), run.seconds
        out["flat_out_evalue"] = run.evalue
    print(json.dumps(out))
''')


@pytest.mark.kernel
def test_a_thread_printing_forever_does_not_grow_the_grader(tmp_path) -> None:
    result = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    print(json.dumps(out, indent=2))  # shown with -s: the measured numbers
    assert out["quiet"] == "ok"
    assert out["paced"] == "ok" and out["paced_s"] >= 5
    assert out["paced_mb"] - out["baseline_mb"] < 100, out
    assert out["flat_out"] in ("ok", "died"), out
    assert out["flat_out_mb"] - out["baseline_mb"] < 100, out


# ----------------------------------------------------------------------------- (b) memory, hostile messages

ATTACK_SCRIPT = textwrap.dedent('''
    import json, sys, time
    from grader.kernel.client import Kernel

    def status(key):
        for line in open("/proc/self/status"):
            if line.startswith(key):
                return int(line.split()[1]) / 1024

    SCENARIOS = json.loads(sys.argv[1])
    out = {}
    for name, (code, observations) in SCENARIOS.items():
        with Kernel(sandbox=None) as k:
            k.run("import time; time.sleep(0.5)", 30)  # everything a cell needs is loaded
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # the peak starts again from here (Linux)
            before = status("VmRSS:")
            run = k.run(code, 120, observations=observations)
            out[name] = {"status": run.status, "evalue": run.evalue, "seconds": round(run.seconds, 2),
                         "grew_mb": round(status("VmHWM:") - before, 1), "kept": len(run.observations)}
    print(json.dumps(out))
''')

ATTACK_SETUP = SEND + textwrap.dedent('''
    import time
    _k = get_ipython().kernel
    _s = _k.session
    from jupyter_client.session import extract_header
    _parent = extract_header(_k.get_parent())

    def _signed(msg_type, content, *extra):
        parts = [_s.pack(_s.msg_header(msg_type)), _s.pack(_parent), b"{}", content]
        return [b"kernel.x", b"<IDS|MSG>", _s.sign(parts), *parts, *extra]
''')

ATTACKS = {
    # The found attack: 80 zero-copy references to one 50 MiB buffer, as a routing prefix (4 GB
    # in the grader before: libzmq received it whole).
    "80 frames of 50 MiB": (ATTACK_SETUP + '_buf = b"x" * (50 << 20)\n'
                            '_k.iopub_socket.send_multipart([b"kernel.x"] + [_buf] * 80, copy=False)\n'
                            'time.sleep(8)', False),
    # The same, as a well-formed Jupyter message with 20 buffers: the first is read, the second refused.
    "a message with 20 buffers of 50 MiB": (ATTACK_SETUP + '_buf = b"x" * (50 << 20)\n'
                                            '_k.iopub_socket.send_multipart(_signed("stream", b"{}", '
                                            '*[_buf] * 20), copy=False)\ntime.sleep(8)', False),
    "a message of 100,000 parts": (ATTACK_SETUP + '_k.iopub_socket.send_multipart(_signed("stream", b"{}", '
                                   '*[b"b"] * 100_000))\ntime.sleep(8)', False),
    # The found attack: 7 observations of ~8 MiB of '[],' (under every byte cap): 2.8 million lists each.
    "7 observations of 8 MiB of []": (ATTACK_SETUP + textwrap.dedent(f'''
        n = (8 * 2**20 - 200) // 3
        content = (b'{{"data": {{"{MIME_TYPE}": {{"id": "x", "v": [' + b"[]," * (n - 1)
                   + b'[]]}}}}, "metadata": {{}}}}')
        for _ in range(7):
            _k.iopub_socket.send_multipart(_signed("display_data", content))
        time.sleep(5)
        '''), True),
    # Observations the probe could send (each under MAX_NODES), of the costliest value (an empty
    # object, ~70 bytes kept), until the cell's budget of values is spent: the bound is what is kept.
    "11 observations of 399,900 empty objects": (ATTACK_SETUP + textwrap.dedent(f'''
        content = (b'{{"data": {{"{MIME_TYPE}": {{"id": "x", "v": [' + b",".join([b"{{}}"] * 399_900)
                   + b']}}}}, "metadata": {{}}}}')
        for _ in range(11):
            _k.iopub_socket.send_multipart(_signed("display_data", content))
        time.sleep(5)
        '''), True),
    "quiet": ("import time; time.sleep(2)", True),
}


@pytest.mark.kernel
def test_hostile_messages_do_not_grow_the_grader(tmp_path) -> None:
    scenarios = json.dumps(ATTACKS)
    result = subprocess.run([sys.executable, "-c", ATTACK_SCRIPT, scenarios], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    print(json.dumps(out, indent=2))  # shown with -s: the measured numbers
    quiet = out["quiet"]
    assert quiet["status"] == "ok" and quiet["grew_mb"] < 50, quiet
    expected = {
        "80 frames of 50 MiB": ("it has a routing frame larger than 1.0 KiB", 20),
        "a message with 20 buffers of 50 MiB": (OVER_THE_IOPUB_CAP, 100),
        "a message of 100,000 parts": ("it has more than 21 parts after its '<IDS|MSG>' delimiter", 20),
        "7 observations of 8 MiB of []": ("its observation holds 2,796,142 values "
                                          "(at most 400,064 are accepted)", 100),
        "11 observations of 399,900 empty objects": ("its observations add up to more than 4,000,000 values "
                                                     "in one cell", 350),
    }
    for name, (reason, bound_mb) in expected.items():
        got = out[name]
        assert got["status"] == "died" and got["evalue"] == PREFIX + reason, (name, got)
        assert got["seconds"] < 20, (name, got)  # refused as it arrived, not at the cell's end
        assert got["grew_mb"] - quiet["grew_mb"] < bound_mb, (name, got, quiet)


# ----------------------------------------------------------------------------- (b) Ctrl-C

CTRL_C_SCRIPT = textwrap.dedent('''
    import signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (a test runner may ignore it)
    from grader.kernel.client import Kernel
    kernel = Kernel(sandbox=None).start()
    print(kernel._km.provisioner.process.pid, flush=True)
    try:
        kernel.run("while True: pass", 60)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        kernel.close()
        sys.exit(130)
    print("not interrupted", flush=True)
''')


def cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().split(") ", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


@pytest.mark.kernel
def test_ctrl_c_during_a_cell_stops_the_grader_at_once_and_kills_the_kernel() -> None:
    proc = subprocess.Popen([sys.executable, "-c", CTRL_C_SCRIPT], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        kernel = int(proc.stdout.readline())
        # The kernel is in a session of its own: a terminal's Ctrl-C (its process group) misses it.
        assert os.getsid(kernel) != os.getsid(proc.pid) and os.getpgid(kernel) != os.getpgid(proc.pid)
        deadline = time.monotonic() + 30
        first = cpu_ticks(kernel)
        while cpu_ticks(kernel) - first < 20:  # the endless loop is running (0.2 s of CPU)
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
        sent = time.monotonic()
        while proc.poll() is None and time.monotonic() - sent < 10:
            time.sleep(0.02)
        took = time.monotonic() - sent
        assert proc.poll() == 130, (proc.poll(), proc.stderr.read() if proc.poll() is not None else "")
        assert took < 3, took
        out, err = proc.communicate(timeout=5)
        assert out.strip() == "interrupted"
        assert err == "", err  # no traceback, no 'Task was destroyed', no nbclient log
        assert gone(kernel, within=2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
