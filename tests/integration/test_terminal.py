"""The WebSocket terminal, GET /v1/sandboxes/{id}/terminal, through the real daemon.

Python's standard library has no WebSocket client, so the test is the peer: it does the opening
handshake (RFC 6455 section 4) and builds and parses frames (section 5) by hand. Client frames
are masked, as the protocol requires of a client.
"""

import base64
import hashlib
import json
import os
import re
import socket
import struct
import time
from urllib.parse import urlencode

import pytest

BACKENDS = ("ns", "gvisor")  # every test on the module's daemon runs on both (conftest.py)

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 section 1.3
TEXT, BINARY, CLOSE, PING, PONG = 1, 2, 8, 9, 10


def accept_of(key):
    return base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()


assert accept_of("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # the RFC's example


class HTTPError(Exception):
    def __init__(self, status, headers, body):
        super().__init__("HTTP %d: %r" % (status, body))
        self.status, self.headers, self.body = status, headers, body


class Terminal:
    """A minimal WebSocket client for the terminal endpoint, over the daemon's unix socket."""

    def __init__(self, daemon, sandbox_id, query=None, headers=None, key=None, timeout=20):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(timeout)
        self.sock.connect(daemon.sock)
        self.buf = b""
        self.output = b""  # terminal output (binary frames) so far
        self.texts = []  # text frames (control messages) so far
        self.close_code = None
        self.key = base64.b64encode(os.urandom(16)).decode() if key is None else key
        h = {"Host": "warren", "Upgrade": "websocket", "Connection": "Upgrade",
             "Sec-WebSocket-Key": self.key, "Sec-WebSocket-Version": "13"}
        if key is False:
            del h["Sec-WebSocket-Key"]
        h.update(headers or {})
        h = {k: v for k, v in h.items() if v is not None}
        path = "/v1/sandboxes/%s/terminal" % sandbox_id
        if query:
            path += "?" + urlencode(query)
        self.sock.sendall(("GET %s HTTP/1.1\r\n" % path).encode() +
                          "".join("%s: %s\r\n" % kv for kv in h.items()).encode() + b"\r\n")
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {l.split(":", 1)[0].strip().lower(): l.split(":", 1)[1].strip()
                        for l in lines[1:]}
        if self.status != 101:
            n = int(self.headers.get("content-length", "0"))
            while len(self.buf) < n:
                self._fill()
            body = self.buf[:n]
            self.sock.close()
            raise HTTPError(self.status, self.headers, body)

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("the server closed the connection")
        self.buf += chunk

    def _take(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    # ---- frames ----

    def send_frame(self, opcode, payload, fin=True, mask=True):
        head = bytes([(0x80 if fin else 0) | opcode])
        mbit = 0x80 if mask else 0
        n = len(payload)
        if n < 126:
            head += bytes([mbit | n])
        elif n < 65536:
            head += bytes([mbit | 126]) + struct.pack("!H", n)
        else:
            head += bytes([mbit | 127]) + struct.pack("!Q", n)
        if mask:
            k = os.urandom(4)
            head += k
            payload = bytes(b ^ k[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + payload)

    def recv_frame(self):
        """(fin, opcode, payload) of the next frame from the server."""
        b0, b1 = self._take(2)
        fin, opcode = bool(b0 & 0x80), b0 & 0x0F
        assert b0 & 0x70 == 0, "reserved bits set without an extension"
        assert not b1 & 0x80, "a server must not mask its frames"
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._take(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._take(8))[0]
        return fin, opcode, self._take(n)

    def recv_message(self):
        """The next whole message (opcode, payload); answers pings, records output and close."""
        while True:
            fin, opcode, payload = self.recv_frame()
            if opcode in (PING, PONG, CLOSE):
                assert fin and len(payload) <= 125, "a control frame is whole and short"
                if opcode == PING:
                    self.send_frame(PONG, payload)
                    continue
                if opcode == PONG:
                    continue
                self.close_code = struct.unpack("!H", payload[:2])[0] if payload else 1005
                return CLOSE, payload
            assert opcode in (TEXT, BINARY), opcode
            while not fin:
                fin, cont, more = self.recv_frame()
                assert cont == 0, "a data frame interleaved with a fragmented message"
                payload += more
            if opcode == BINARY:
                self.output += payload
            else:
                self.texts.append(json.loads(payload))
            return opcode, payload

    # ---- the terminal ----

    def type(self, keys):
        self.send_frame(BINARY, keys.encode() if isinstance(keys, str) else keys)

    def control(self, obj):
        self.send_frame(TEXT, json.dumps(obj).encode())

    def expect(self, pattern, timeout=15):
        """Read output until the regex matches it; returns the match."""
        rx = re.compile(pattern.encode() if isinstance(pattern, str) else pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.output)
            if m:
                self.output = self.output[m.end():]
                return m
            assert time.monotonic() < deadline, "no %r in terminal output %r" % (pattern, self.output)
            op, _ = self.recv_message()
            assert op != CLOSE, "closed before %r: %r" % (pattern, self.output)

    def prompt(self):
        """Wait for the shell's prompt (input sent before the shell has started is lost: see
        test_keystrokes_sent_at_once_are_not_lost)."""
        return self.expect(rb"[#$] ")

    def expect_exit(self, timeout=15):
        """Read to the end: the exit message, then the close frame (answered). Returns the exit."""
        deadline = time.monotonic() + timeout
        while True:
            assert time.monotonic() < deadline, "no exit message"
            op, payload = self.recv_message()
            if op == CLOSE:
                break
        self.send_frame(CLOSE, payload[:2])
        # After the close handshake the server closes the TCP connection.
        try:
            while True:
                self._fill()
        except EOFError:
            pass
        self.sock.close()
        exits = [t for t in self.texts if t.get("type") == "exit"]
        assert len(exits) == 1, self.texts
        return exits[0]

    def abort(self):
        """Hang up without a close frame."""
        self.sock.close()


def procs(client, sid):
    return client.request("GET", "/v1/sandboxes/%s/processes" % sid).json()["processes"]


# ---- a session ----------------------------------------------------------------------------------

def test_shell_session_resize_tty_and_exit(daemon, sandbox):
    t = Terminal(daemon, sandbox.sandbox_id, query={"rows": 30, "cols": 90})
    assert t.headers["upgrade"].lower() == "websocket"
    assert "upgrade" in t.headers["connection"].lower()
    assert t.headers["sec-websocket-accept"] == accept_of(t.key)
    assert t.headers["x-request-id"]

    # Keystrokes are binary frames; the output comes back as binary frames.
    t.prompt()
    t.type("echo S:$(stty size):E\n")
    t.expect(rb"S:30 90:E")
    t.control({"type": "resize", "rows": 40, "cols": 100})
    t.type("echo S:$(stty size):E\n")
    t.expect(rb"S:40 100:E")
    t.type("echo T:$(tty):E\n")
    t.expect(rb"T:/dev/pts/\d+:E")
    # A control message that is not understood changes nothing.
    t.send_frame(TEXT, b"not json")
    t.control({"type": "resize", "rows": 0, "cols": 5})
    t.type("echo S:$(stty size):E\n")
    t.expect(rb"S:40 100:E")
    # Input in pieces, and a message split into fragments.
    t.send_frame(BINARY, b"echo frag", fin=False)
    t.send_frame(0, b"mented:$((6*7))\n")
    t.expect(rb"fragmented:42")
    assert t.texts == []

    t.type("exit 3\n")
    ex = t.expect_exit()
    assert ex["type"] == "exit" and ex["exit_code"] == 3 and ex.get("signal") is None
    assert t.close_code == 1000
    # The session is a process of the API: a shell on a terminal, ended with 3.
    shells = [p for p in sandbox.commands.list() if p.pty]
    assert len(shells) == 1 and not shells[0].running and shells[0].exit_code == 3


def test_cmd_runs_that_command(daemon, sandbox):
    t = Terminal(daemon, sandbox.sandbox_id,
                 query={"cmd": "echo hello $(id -u) $(pwd); exit 5", "user": "user", "cwd": "/tmp"})
    ex = t.expect_exit()
    assert re.search(rb"hello 1000 /tmp\r?\n", t.output), t.output
    assert ex["exit_code"] == 5 and t.close_code == 1000


def test_a_signal_ends_the_session_with_its_number(daemon, sandbox):
    t = Terminal(daemon, sandbox.sandbox_id, query={"cmd": "echo up; kill -TERM $$"})
    ex = t.expect_exit()
    assert ex["exit_code"] is None and ex["signal"] == 15 and t.close_code == 1000


def test_a_client_that_disconnects_hangs_up_the_shell(daemon, client, sandbox):
    sid = sandbox.sandbox_id
    # A shell that records the hangup.
    t = Terminal(daemon, sid, query={
        "cmd": "trap 'echo hup > /tmp/hup; exit 7' HUP; echo ready; while :; do sleep 0.1; done"})
    t.expect(rb"ready")
    # And the default login shell.
    t2 = Terminal(daemon, sid)
    t2.prompt()
    t2.type("echo up:$((1+1))\n")
    t2.expect(rb"up:2")
    assert len([p for p in procs(client, sid) if p["running"]]) == 2
    t.abort()
    t2.abort()
    deadline = time.monotonic() + 15
    while any(p["running"] for p in procs(client, sid)):
        assert time.monotonic() < deadline, procs(client, sid)
        time.sleep(0.05)
    ended = sorted(procs(client, sid), key=lambda p: p["pid"])
    assert ended[0]["exit_code"] == 7, ended
    assert ended[1]["signal"] == 1, ended  # SIGHUP
    assert sandbox.files.read("/tmp/hup") == "hup\n"


def test_keystrokes_sent_at_once_are_not_lost(daemon, sandbox):
    t = Terminal(daemon, sandbox.sandbox_id, timeout=5)
    t.type("echo early:$((2+3))\n")
    try:
        t.expect(rb"early:5", timeout=5)
    finally:
        t.type("exit\n")
        t.expect_exit()


def test_default_command_is_the_users_shell(daemon, sandbox):
    sandbox.files.write("/bin/mysh", b"#!/bin/sh\necho MYSHELL:$(id -u)\nexit 4\n", mode=0o755)
    sandbox.commands.run("sed -i 's|^user:\\(.*\\):/bin/sh$|user:\\1:/bin/mysh|' /etc/passwd")
    assert "/bin/mysh" in sandbox.files.read("/etc/passwd")
    t = Terminal(daemon, sandbox.sandbox_id, query={"user": "user"}, timeout=5)
    try:
        t.expect(rb"MYSHELL:1000", timeout=5)
    finally:
        t.abort()


# ---- what is refused ----------------------------------------------------------------------------

def _refused(daemon, sid, status, **kw):
    with pytest.raises(HTTPError) as e:
        Terminal(daemon, sid, **kw)
    err = e.value
    assert err.status == status, err
    assert err.headers["x-request-id"]
    assert err.headers["content-type"].startswith("application/json")
    body = json.loads(err.body)
    assert set(body) == {"code", "message"} and body["message"]
    return err, body


@pytest.mark.parametrize("query", [{"rows": 0}, {"cols": 0}, {"rows": "abc"}, {"cols": 65536},
                                   {"rows": -1}, {"cwd": "relative"}])
def test_bad_query_is_400(daemon, client, sandbox, query):
    _, body = _refused(daemon, sandbox.sandbox_id, 400, query=query)
    assert body["code"] == "invalid"
    assert procs(client, sandbox.sandbox_id) == []


def test_unknown_sandbox_is_404(daemon):
    _, body = _refused(daemon, "no-such-sandbox", 404)
    assert body["code"] == "not_found"


@pytest.mark.parametrize("headers, key", [
    ({}, False),  # no Sec-WebSocket-Key
    ({}, "too-short=="),
    ({"Upgrade": None}, None),  # not an upgrade
    ({"Connection": "keep-alive"}, None),
    ({"Sec-WebSocket-Version": "8"}, None),
])
def test_bad_handshake_is_400(daemon, client, sandbox, headers, key):
    err, body = _refused(daemon, sandbox.sandbox_id, 400, headers=headers, key=key)
    assert body["code"] == "invalid"
    if headers.get("Sec-WebSocket-Version"):
        assert err.headers["sec-websocket-version"] == "13"
    assert procs(client, sandbox.sandbox_id) == []
