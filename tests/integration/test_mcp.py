"""The MCP server's wire (docs/mcp.md), byte by byte: /mcp's methods and statuses, JSON-RPC
errors, auth, Origin and CORS, a client that leaves mid-call, large messages, and `warren mcp`'s
stdio framing. tests/compat/mcp.test.mjs drives the same server with the TypeScript SDK."""

import base64
import http.client
import json
import os
import socket
import subprocess
import time

import pytest

from conftest import ENV, WARREN, Daemon, delete_all

ORIGIN = "http://ok.example:8080"


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=60):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


@pytest.fixture(scope="module")
def d():
    dm = Daemon("--mcp-origin", ORIGIN).start()
    yield dm
    try:
        delete_all(dm)
    finally:
        dm.cleanup()


def post(d, body, headers=None, tcp=False, key=None, method="POST", timeout=60):
    """(status, headers, parsed body or None)."""
    c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=timeout) if tcp else \
        UnixConnection(d.sock, timeout)
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    h.update(headers or {})
    if key:
        h["Authorization"] = "Bearer " + key
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    try:
        c.request(method, "/mcp", body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        return r.status, hdrs, (json.loads(data) if data else None)
    finally:
        c.close()


def rpc(d, method, params=None, id=1, **kw):
    msg = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        msg["params"] = params
    return post(d, msg, **kw)


def call(d, name, args, **kw):
    s, h, b = rpc(d, "tools/call", {"name": name, "arguments": args}, **kw)
    assert s == 200, (s, b)
    return b["result"]


def test_initialize_negotiates_and_gives_a_session(d):
    s, h, b = rpc(d, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "t", "version": "1"}})
    assert s == 200 and h["content-type"] == "application/json"
    assert len(h["mcp-session-id"]) == 32
    r = b["result"]
    assert b["id"] == 1 and b["jsonrpc"] == "2.0"
    assert r["protocolVersion"] == "2025-11-25"
    assert r["capabilities"] == {"tools": {"listChanged": False}}
    assert r["serverInfo"]["name"] == "warren" and r["serverInfo"]["version"]
    for v in ("2025-06-18", "2025-03-26"):
        assert rpc(d, "initialize", {"protocolVersion": v})[2]["result"]["protocolVersion"] == v
    # A version the server does not speak: it answers with its own.
    assert rpc(d, "initialize", {"protocolVersion": "2024-01-01"})[2]["result"]["protocolVersion"] == "2025-11-25"
    # A string id comes back as it was.
    assert rpc(d, "ping", id="a-b")[2] == {"jsonrpc": "2.0", "id": "a-b", "result": {}}


def test_methods_and_statuses(d):
    for msg in ({"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}},
                {"jsonrpc": "2.0", "id": 9, "result": {}}):
        s, h, b = post(d, msg)
        assert (s, b) == (202, None), msg
    s, h, b = post(d, None, method="GET", headers={"Accept": "text/event-stream"})
    assert s == 405 and h["allow"] == "POST, DELETE" and b["error"]["code"] == -32600
    s, h, b = post(d, None, method="PUT")
    assert s == 405
    s, h, b = post(d, None, method="DELETE", headers={"Mcp-Session-Id": "whatever"})
    assert (s, b) == (204, None)
    # No OAuth discovery is offered.
    c = UnixConnection(d.sock)
    for p in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server",
              "/.well-known/oauth-protected-resource/mcp"):
        c.request("GET", p)
        r = c.getresponse()
        r.read()
        assert r.status == 404, p
    c.close()


def test_json_rpc_errors(d):
    s, h, b = post(d, b"{not json")
    assert s == 400 and b["id"] is None and b["error"]["code"] == -32700
    s, h, b = post(d, [{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    assert s == 400 and b["error"]["code"] == -32600
    s, h, b = post(d, {"jsonrpc": "1.0", "id": 1, "method": "ping"})
    assert s == 400 and b["error"]["code"] == -32600
    s, h, b = post(d, {"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"})
    assert s == 400 and b["error"]["code"] == -32600 and b["id"] is None
    s, h, b = rpc(d, "resources/list", id=5)
    assert s == 200 and b["id"] == 5 and b["error"]["code"] == -32601
    s, h, b = rpc(d, "tools/call", {"arguments": {}}, id=6)
    assert b["id"] == 6 and b["error"]["code"] == -32602
    s, h, b = rpc(d, "tools/call", {"name": "nope"}, id=7)
    assert b["error"]["code"] == -32602 and "unknown tool" in b["error"]["message"]
    s, h, b = rpc(d, "tools/call", {"name": "sandbox_list", "arguments": [1]}, id=8)
    assert b["error"]["code"] == -32602
    s, h, b = post(d, {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]})
    assert b["error"]["code"] == -32600
    s, h, b = rpc(d, "ping", headers={"MCP-Protocol-Version": "2099-01-01"})
    assert s == 400 and "MCP-Protocol-Version" in b["error"]["message"]
    s, h, b = rpc(d, "ping", headers={"MCP-Protocol-Version": "2025-06-18"})
    assert s == 200
    # Bad arguments are the tool's error, for the model to read.
    r = call(d, "sandbox_exec", {"sandbox_id": "x"})
    assert r["isError"] is True and "`command` is required" in r["content"][0]["text"]
    r = call(d, "sandbox_read_output", {"sandbox_id": "x", "pid": 1, "wait_s": 301})
    assert r["isError"] is True and "at most 300" in r["content"][0]["text"]
    r = call(d, "desktop_action", {"sandbox_id": "x", "action": "dance"})
    assert r["isError"] is True and "one of" in r["content"][0]["text"]


def test_auth(d):
    s, h, b = rpc(d, "ping", tcp=True)
    assert s == 401 and h["www-authenticate"] == 'Bearer realm="warren"'
    assert b["jsonrpc"] == "2.0" and b["id"] is None and b["error"]["message"]
    s, h, b = rpc(d, "ping", tcp=True, key="wr_bogus")
    assert s == 401 and "not valid" in b["error"]["message"]
    assert rpc(d, "ping", tcp=True, key=d.admin_key)[0] == 200
    assert rpc(d, "ping", tcp=True, headers={"X-API-Key": d.admin_key})[0] == 200
    # A team's key: its tools act for that team only.
    s, h, b = post(d, None, method="GET")  # GET is 405 whatever the key
    assert s == 405


def test_origin_and_cors(d):
    for bad in ("https://evil.example", "null", ORIGIN + "/", "http://ok.example"):
        s, h, b = rpc(d, "ping", headers={"Origin": bad})
        assert s == 403 and b["error"]["code"] == -32002, bad
        s, h, b = post(d, None, method="OPTIONS", headers={"Origin": bad})
        assert s == 403, bad
    s, h, b = rpc(d, "ping", headers={"Origin": ORIGIN})
    assert s == 200 and h["access-control-allow-origin"] == ORIGIN
    assert "Mcp-Session-Id" in h["access-control-expose-headers"]
    # The preflight needs no key.
    s, h, b = post(d, None, method="OPTIONS", tcp=True,
                   headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"})
    assert s == 204 and h["access-control-allow-origin"] == ORIGIN
    assert "Authorization" in h["access-control-allow-headers"]
    assert "MCP-Protocol-Version" in h["access-control-allow-headers"]


def test_tools_on_the_unix_socket_act_as_admin(d):
    made = call(d, "sandbox_create", {"timeout_s": 120})
    assert made["isError"] is False, made
    sid = made["structuredContent"]["sandbox_id"]
    try:
        # The same command as the REST API runs it (same user and directory, the template's).
        r = call(d, "sandbox_exec", {"sandbox_id": sid, "command": "id -un; pwd"})
        c = UnixConnection(d.sock)
        c.request("POST", "/v1/sandboxes/%s/exec" % sid, body=json.dumps({"cmd": "id -un; pwd"}),
                  headers={"Content-Type": "application/json"})
        want = json.loads(c.getresponse().read())["stdout"]
        c.close()
        assert r["structuredContent"]["stdout"] == want and want.count("\n") == 2
        # Large messages: a 6 MiB file in one message (base64 in JSON), written and read back.
        data = os.urandom(6 << 20)
        r = call(d, "sandbox_write_file", {"sandbox_id": sid, "path": "/tmp/big", "encoding": "base64",
                                           "content": base64.b64encode(data).decode()})
        assert r["structuredContent"]["bytes"] == len(data), r
        r = call(d, "sandbox_exec", {"sandbox_id": sid, "command": "sha256sum < /tmp/big | cut -c1-64"})
        import hashlib
        assert r["structuredContent"]["stdout"].strip() == hashlib.sha256(data).hexdigest()
        r = call(d, "sandbox_read_file", {"sandbox_id": sid, "path": "/tmp/big", "max_bytes": 1000})
        s = r["structuredContent"]
        assert s["truncated"] is True and s["encoding"] == "base64"
        assert base64.b64decode(s["content"]) == data[:1000]
        # stdin
        r = call(d, "sandbox_exec", {"sandbox_id": sid, "command": "tr a-z A-Z", "stdin": "shout\n"})
        assert r["structuredContent"]["stdout"] == "SHOUT\n"
        # env, cwd, user
        r = call(d, "sandbox_exec", {"sandbox_id": sid, "command": 'echo "$X $(pwd) $(id -un)"',
                                     "env": {"X": "y"}, "cwd": "/tmp", "user": "root"})
        assert r["structuredContent"]["stdout"] == "y /tmp root\n"
    finally:
        assert call(d, "sandbox_kill", {"sandbox_id": sid})["isError"] is False


def leave_mid_call(d, tool, args):
    """Send a tools/call and hang up 0.3 s later, before its answer."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(d.sock)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": tool, "arguments": args}}).encode()
    s.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    time.sleep(0.3)
    s.close()


def test_a_client_that_leaves_mid_call(d):
    sid = call(d, "sandbox_create", {"timeout_s": 120})["structuredContent"]["sandbox_id"]
    try:
        # The command of a sandbox_exec the client gave up on is killed.
        leave_mid_call(d, "sandbox_exec", {"sandbox_id": sid, "command": "echo $$ > /tmp/pid; sleep 2; touch /tmp/left"})
        time.sleep(3)
        r = call(d, "sandbox_exec", {"sandbox_id": sid, "command": "test -e /tmp/left || echo gone; kill -0 $(cat /tmp/pid) 2>/dev/null || echo dead"})
        assert r["structuredContent"]["stdout"] == "gone\ndead\n", r
        # A background process someone stopped reading from runs on.
        pid = call(d, "sandbox_start_process", {"sandbox_id": sid, "command": "sleep 1; touch /tmp/bg"})["structuredContent"]["pid"]
        leave_mid_call(d, "sandbox_read_output", {"sandbox_id": sid, "pid": pid, "wait_s": 30})
        r = call(d, "sandbox_read_output", {"sandbox_id": sid, "pid": pid, "wait_s": 30})
        assert r["structuredContent"]["running"] is False and r["structuredContent"]["exit_code"] == 0, r
        assert call(d, "sandbox_exec", {"sandbox_id": sid, "command": "test -e /tmp/bg"})["isError"] is False
    finally:
        call(d, "sandbox_kill", {"sandbox_id": sid})


def stdio(d, lines, env=None, timeout=60):
    e = dict(ENV, WARREN_API_URL=d.tcp_url, WARREN_API_KEY=d.admin_key, HOME=d.dir)
    e.update(env or {})
    p = subprocess.run([WARREN, "mcp"], input="".join(l + "\n" for l in lines).encode(),
                       capture_output=True, env=e, timeout=timeout)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def test_warren_mcp_stdio_framing(d):
    rc, out, err = stdio(d, [
        json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                    "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                               "clientInfo": {"name": "t", "version": "1"}}}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        "",
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        "{broken",
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "sandbox_list", "arguments": {}}}),
    ])
    assert rc == 0, err
    lines = out.split("\n")
    assert lines[-1] == ""
    msgs = [json.loads(l) for l in lines[:-1]]
    # One line per request (none for the notification or the blank line); initialize first, the
    # others as they finish.
    assert msgs[0]["id"] == 0 and msgs[0]["result"]["protocolVersion"] == "2025-11-25"
    by_id = {m.get("id"): m for m in msgs}
    assert sorted(by_id, key=str) == sorted([0, 1, None, 2], key=str), out
    assert len(by_id[1]["result"]["tools"]) == 18
    assert by_id[None]["error"]["code"] == -32700
    assert by_id[2]["result"]["isError"] is False


def test_warren_mcp_runs_requests_side_by_side_and_cancels(d):
    sid = call(d, "sandbox_create", {"timeout_s": 120})["structuredContent"]["sandbox_id"]
    try:
        e = dict(ENV, WARREN_API_URL=d.tcp_url, WARREN_API_KEY=d.admin_key, HOME=d.dir)
        p = subprocess.Popen([WARREN, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=e)

        def send(m):
            p.stdin.write((json.dumps(m) + "\n").encode())
            p.stdin.flush()

        def exec_(i, cmd):
            send({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                  "params": {"name": "sandbox_exec", "arguments": {"sandbox_id": sid, "command": cmd}}})

        send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "t", "version": "1"}}})
        assert json.loads(p.stdout.readline())["id"] == 0
        t0 = time.monotonic()
        exec_(1, "sleep 30; touch /tmp/cancelled")  # cancelled below
        exec_(2, "sleep 1; echo two")
        exec_(3, "sleep 1; echo three")
        time.sleep(0.3)
        send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "test"}})
        got = {}
        for _ in range(2):
            m = json.loads(p.stdout.readline())
            got[m["id"]] = m["result"]["structuredContent"]["stdout"]
        assert got == {2: "two\n", 3: "three\n"}
        assert time.monotonic() - t0 < 10, "the calls ran one after the other"
        # The cancelled call's command is gone, and its answer is never written.
        exec_(4, "sleep 1; test -e /tmp/cancelled && echo there; ps -o args | grep -c '[s]leep 30' || true")
        m = json.loads(p.stdout.readline())
        assert m["id"] == 4 and m["result"]["structuredContent"]["stdout"] == "0\n", m
        p.stdin.close()
        assert p.wait(timeout=30) == 0
        assert p.stdout.read() == b""
    finally:
        call(d, "sandbox_kill", {"sandbox_id": sid})


def test_cancelled_over_http_needs_the_session(d):
    sid = call(d, "sandbox_create", {"timeout_s": 120})["structuredContent"]["sandbox_id"]
    try:
        for session, killed in (("other", False), ("s-1", True)):
            s = socket.socket(socket.AF_UNIX)
            s.connect(d.sock)
            s.settimeout(30)
            body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                               "params": {"name": "sandbox_exec", "arguments": {"sandbox_id": sid, "command": "sleep 2; echo done"}}}).encode()
            s.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\nMcp-Session-Id: s-1\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            time.sleep(0.3)
            st, h, b = post(d, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}},
                            headers={"Mcp-Session-Id": session})
            assert st == 202
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
                if b'"id":7' in data and data.endswith(b"}"):
                    break
            s.close()
            assert (data == b"") == killed, data
    finally:
        call(d, "sandbox_kill", {"sandbox_id": sid})


def test_warren_mcp_errors_keep_the_request_id(d):
    msg = json.dumps({"jsonrpc": "2.0", "id": 41, "method": "ping"})
    rc, out, err = stdio(d, [msg], env={"WARREN_API_KEY": "wr_bogus"})
    m = json.loads(out)
    assert rc == 0 and m["id"] == 41 and "not valid" in m["error"]["message"]
    assert "401" in err
    # No daemon to forward to: nothing on stdout, the reason on stderr, a failing exit.
    rc, out, err = stdio(d, [msg], env={"WARREN_API_URL": "http://127.0.0.1:9"})
    assert rc == 1 and out == "" and "127.0.0.1:9" in err


def test_the_daemon_stops_with_calls_in_flight():
    """SIGTERM while tools wait (an exec, a read_output, a create): the daemon exits cleanly (no
    sanitizer report under `make asan`; Daemon.cleanup checks)."""
    dm = Daemon().start()
    try:
        sid = call(dm, "sandbox_create", {"timeout_s": 120})["structuredContent"]["sandbox_id"]
        pid = call(dm, "sandbox_start_process", {"sandbox_id": sid, "command": "sleep 60"})["structuredContent"]["pid"]
        socks = []
        for tool, args in (("sandbox_exec", {"sandbox_id": sid, "command": "sleep 60"}),
                           ("sandbox_read_output", {"sandbox_id": sid, "pid": pid, "wait_s": 60}),
                           ("sandbox_create", {})):
            s = socket.socket(socket.AF_UNIX)
            s.connect(dm.sock)
            body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                               "params": {"name": tool, "arguments": args}}).encode()
            s.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            socks.append(s)
        time.sleep(0.5)
        dm.stop()
        assert dm.proc.returncode == 0, dm.proc.returncode
        for s in socks:
            s.close()
    finally:
        dm.start()
        try:
            delete_all(dm)
        finally:
            dm.cleanup()


def test_warren_mcp_on_the_unix_socket_needs_no_key(d):
    rc, out, err = stdio(d, [json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                         "params": {"name": "sandbox_list", "arguments": {}}})],
                         env={"WARREN_API_URL": d.url, "WARREN_API_KEY": ""})
    assert rc == 0, err
    m = json.loads(out)
    assert m["id"] == 1 and m["result"]["isError"] is False, m
