"""Messages from the kernel: what the grader accepts, drops unread, or refuses (grader/wire.py),
and what Kernel.run makes of it; Ctrl-C during a cell; the grader's memory under an output flood.

The kernel is the student's process and holds the session key, so the hostile messages here are
sent from inside a cell with the kernel's own session: correctly signed unless the signature is
what is wrong.
"""

from __future__ import annotations

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

from grader import wire
from grader.kernel import Kernel
from grader.probe.protocol import MIME_TYPE
from grader.wire import GraderSession, MessageRejected, depth_of, loads_bounded

REPO_ROOT = Path(__file__).resolve().parent.parent
KEY = b"0123456789abcdef0123456789abcdef"
PREFIX = "the kernel sent a message the grader could not accept: "


# ----------------------------------------------------------------------------- building messages


def sender() -> Session:
    return Session(key=KEY, username="kernel")


def receiver(*, observations: bool = False) -> GraderSession:
    session = GraderSession(key=KEY)
    session.observations = observations
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
    assert wire.DROPPED not in got


def test_error_keeps_capped_ename_and_evalue_and_no_traceback() -> None:
    got = receive(message("error", {"ename": "ValueError", "evalue": "v" * 100_000, "traceback": ["a", "b"]}))
    assert got["content"]["ename"] == "ValueError"
    assert len(got["content"]["evalue"]) == wire.MAX_EVALUE and got["content"]["evalue"].endswith("…")
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
    real = wire.loads_bounded

    def spy(data, **kw):
        parsed.append(kw["what"])
        return real(data, **kw)

    monkeypatch.setattr(wire, "loads_bounded", spy)
    # content the parser would refuse: it is never looked at
    got = receive(signed(header(msg_type), PARENT, b"{}", b'{"text": ' + b"1" * 5000 + b"}"))
    assert got[wire.DROPPED] is True and got["content"] == {} and got["buffers"] == []
    assert parsed == ["header", "parent header"]


def test_observations_are_parsed_only_when_asked() -> None:
    obs = {"id": "a", "status": "ok"}

    def frames() -> list[bytes]:
        return message("display_data", {"data": {MIME_TYPE: obs, "text/plain": "x"}, "metadata": {}})

    assert receive(frames())[wire.DROPPED] is True
    got = receive(frames(), receiver(observations=True))
    assert got["content"] == {"data": {MIME_TYPE: obs}, "metadata": {}}
    plain = receive(message("display_data", {"data": {"text/plain": "x"}, "metadata": {}}),
                    receiver(observations=True))
    assert plain[wire.DROPPED] is True


def test_depth_ignores_brackets_in_strings() -> None:
    assert depth_of('{"a": "[[[[{{{{", "b": [1, [2]]}') == 3
    assert depth_of(r'["\"[[[", "\\", [[]]]') == 3
    assert depth_of('"unterminated [[[[') == 0
    assert depth_of("[" * 100_000) == 100_000


# ----------------------------------------------------------------------------- (a) no kernel: refused


def _obs_too_big() -> list[bytes]:
    content = {"data": {MIME_TYPE: {"id": "a", "blob": "x" * (wire.MAX_CONTENT_BYTES["display_data"] + 1)}},
               "metadata": {}}
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
    "too many parts": (lambda: message("stream", {}) + [b"b"] * (wire.MAX_BUFFERS + 1), "parts (at most"),
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
    assert receive(_obs_too_big())[wire.DROPPED] is True
    assert "its observation is 8.0 MiB, more than the 8.0 MiB accepted" in \
        rejected(_obs_too_big(), receiver(observations=True))


def test_observations_of_one_cell_are_capped_in_total(monkeypatch) -> None:
    monkeypatch.setattr(wire, "MAX_OBSERVATION_BYTES", 10_000)
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
                     "its iopub connection dropped"),
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
    from grader.sandbox import SandboxPolicy, available

    if not available().sandboxed:
        pytest.skip(f"sandbox layers missing: {available().missing}")
    with Kernel(sandbox=SandboxPolicy()) as kernel:
        assert kernel.run("print('fine')", 30).status == "ok"
        run = kernel.run(hostile_cell(SENT["5000-digit integer"][0]), 60)
        assert run.status == "died" and SENT["5000-digit integer"][1] in (run.evalue or ""), run
        assert not kernel.alive


@pytest.mark.kernel
def test_the_grader_reads_only_shell_and_iopub_through_bounded_sockets() -> None:
    import zmq

    with Kernel(sandbox=None) as kernel:
        kc = kernel._client.kc  # type: ignore[union-attr]
        assert isinstance(kc.session, GraderSession)
        assert kc.iopub_channel.socket.getsockopt(zmq.MAXMSGSIZE) == wire.MAX_FRAME_BYTES
        assert kc.shell_channel.socket.getsockopt(zmq.MAXMSGSIZE) == wire.FRAME_CAPS["shell"]
        assert kc.iopub_channel.socket.getsockopt(zmq.RCVHWM) == wire.RCV_HWM
        control = kernel._km._control_socket  # type: ignore[union-attr]
        assert control.getsockopt(zmq.MAXMSGSIZE) == wire.FRAME_CAPS["control"]
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
    from grader.kernel import Kernel

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
        # Paced to ~64 MB/s: every flush is a frame well below the cap, and every one is dropped.
        run = k.run(FLOOD.replace("PAUSE", "0.001").replace("SECONDS", "10"), 60)
        out["paced"], out["paced_mb"], out["paced_s"] = run.status, peak_mb(), run.seconds
    with Kernel(sandbox=None) as k:
        # Flat out: flushes outgrow the frame cap; the connection drops and the kernel is killed.
        run = k.run(FLOOD.replace("PAUSE", "0").replace("SECONDS", "10"), 60)
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
    assert out["paced"] == "ok" and out["paced_s"] >= 10
    assert out["paced_mb"] - out["baseline_mb"] < 100, out
    assert out["flat_out"] in ("ok", "died"), out
    assert out["flat_out_mb"] - out["baseline_mb"] < 100, out


# ----------------------------------------------------------------------------- (b) Ctrl-C

CTRL_C_SCRIPT = textwrap.dedent('''
    import signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (a test runner may ignore it)
    from grader.kernel import Kernel
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
