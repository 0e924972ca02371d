"""The native API v1 through the real daemon, with the Python SDK as the client."""

import base64
import hashlib
import json
import os
import socket
import stat
import threading
import time

import pytest

BACKENDS = ("ns", "gvisor")  # every test on the module's daemon runs on both (conftest.py)

import warren
from conftest import Daemon, delete_all, IMAGE, SANITIZED, WARREND


def raw(daemon, method, path, body=b"", headers=None, tcp=False, key=None):
    """One raw HTTP/1.1 request; returns (status, headers dict, body bytes)."""
    if tcp:
        s = socket.create_connection(("127.0.0.1", daemon.port))
    else:
        s = socket.socket(socket.AF_UNIX)
        s.connect(daemon.sock)
    h = {"Host": "x", "Content-Length": str(len(body)), "Connection": "close"}
    if key:
        h["Authorization"] = "Bearer " + key
    h.update(headers or {})
    req = "%s %s HTTP/1.1\r\n" % (method, path) + "".join("%s: %s\r\n" % kv for kv in h.items())
    s.sendall(req.encode() + b"\r\n" + body)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:]}
    if hdrs.get("transfer-encoding") == "chunked":
        out = b""
        while rest:
            n, _, rest = rest.partition(b"\r\n")
            n = int(n, 16)
            if n == 0:
                break
            out += rest[:n]
            rest = rest[n + 2:]
        rest = out
    return status, hdrs, rest


# ---- basics ------------------------------------------------------------------------------------

def test_health_version_and_request_ids(daemon, backend):
    st, h, body = raw(daemon, "GET", "/v1/health")
    assert st == 200 and json.loads(body) == {"status": "ok"}
    assert len(h["x-request-id"]) > 0
    st, h, body = raw(daemon, "GET", "/v1/version", headers={"X-Request-Id": "my-req.1"})
    assert st == 200 and h["x-request-id"] == "my-req.1"
    v = json.loads(body)
    assert v["api"] == "1" and v["runtime"] == backend and v["cgroup"] in ("v1", "v2")


@pytest.mark.parametrize("method, path, status, code", [
    ("GET", "/v1/nope", 404, "not_found"),
    ("GET", "/nope", 404, "not_found"),
    ("PUT", "/v1/health", 405, "method_not_allowed"),
    ("PATCH", "/v1/sandboxes", 405, "method_not_allowed"),
    ("GET", "/v1/sandboxes/unknown123", 404, "not_found"),
    ("DELETE", "/v1/sandboxes/unknown123", 404, "not_found"),
    ("POST", "/v1/sandboxes/unknown123/exec", 404, "not_found"),
    ("GET", "/v1/sandboxes/unknown123/files?path=/etc/passwd", 404, "not_found"),
])
def test_errors_are_json_with_a_code(daemon, method, path, status, code):
    st, h, body = raw(daemon, method, path)
    assert st == status
    err = json.loads(body)
    assert err["code"] == code and err["message"]
    assert "x-request-id" in h


@pytest.mark.parametrize("method, path, message", [
    ("PUT", "/v1/health", "use GET"),
    ("PATCH", "/v1/sandboxes", "use GET or POST"),
    ("POST", "/v1/keys/k1", "use DELETE"),
    ("PUT", "/v1/templates/build", "use POST, GET or DELETE"),
    ("PATCH", "/v1/sandboxes/{id}/files?path=/tmp", "use GET, PUT or DELETE"),
    ("POST", "/v1/sandboxes/{id}/processes/{pid}/wait", "use GET"),
    ("GET", "/v1/sandboxes/{id}/processes/{pid}/stdin", "use POST"),
])
def test_a_wrong_method_is_405_with_the_allowed_ones(daemon, sandbox, method, path, message):
    """The router's table answers 405 for a known path, naming the methods it has."""
    st, _, body = raw(daemon, "POST", "/v1/sandboxes/%s/exec" % sandbox.sandbox_id,
                      b'{"cmd": "true", "mode": "background"}')
    assert st == 201, body
    pid = json.loads(body)["pid"]
    st, _, body = raw(daemon, method, path.format(id=sandbox.sandbox_id, pid=pid))
    err = json.loads(body)
    assert st == 405 and err["code"] == "method_not_allowed" and err["message"] == message, err


def test_malformed_and_oversized_bodies(daemon):
    st, _, body = raw(daemon, "POST", "/v1/sandboxes", b"{not json")
    assert st == 400 and json.loads(body)["code"] == "invalid"
    st, _, body = raw(daemon, "POST", "/v1/sandboxes", b'{"cpus": "many"}')
    assert st == 400 and "cpus" in json.loads(body)["message"]
    st, _, body = raw(daemon, "POST", "/v1/sandboxes", b'{"bogus": 1}')
    assert st == 400 and "bogus" in json.loads(body)["message"]
    st, _, body = raw(daemon, "POST", "/v1/sandboxes", b'{"template": "no-such"}')
    assert st == 404
    st, _, body = raw(daemon, "POST", "/v1/sandboxes", b'{"template": "../etc"}')
    assert st == 400
    # Past the create's body limit (24 MiB: a Compose file's context fits).
    st, _, body = raw(daemon, "POST", "/v1/sandboxes", b"x" * ((24 << 20) + 1))
    assert st == 413


# ---- auth and teams ------------------------------------------------------------------------------

def test_tcp_needs_a_key_and_teams_are_isolated(daemon):
    key_file = os.path.join(daemon.state, "admin.key")
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    st, _, body = raw(daemon, "GET", "/v1/sandboxes", tcp=True)
    assert st == 401 and json.loads(body)["code"] == "unauthorized"
    st, _, _ = raw(daemon, "GET", "/v1/sandboxes", tcp=True, key="wr_" + "0" * 64)
    assert st == 401
    st, _, _ = raw(daemon, "GET", "/v1/sandboxes", tcp=True, key=daemon.admin_key)
    assert st == 200

    admin = daemon.client(daemon.admin_key, tcp=True)
    ka = warren.admin.create_key("team-a", client=admin)
    kb = warren.admin.create_key("team-b", client=admin)
    assert ka.key.startswith("wr_")
    ca, cb = daemon.client(ka.key, tcp=True), daemon.client(kb.key, tcp=True)
    sb = warren.Sandbox.create(client=ca, timeout=60)
    try:
        assert sb.commands.run("echo mine").stdout == "mine\n"
        with pytest.raises(warren.NotFoundError):
            warren.Sandbox.connect(sb.sandbox_id, client=cb)
        st, _, _ = raw(daemon, "POST", "/v1/sandboxes/%s/exec" % sb.sandbox_id,
                       b'{"cmd": "id"}', tcp=True, key=kb.key)
        assert st == 404
        st, _, _ = raw(daemon, "DELETE", "/v1/sandboxes/%s" % sb.sandbox_id, tcp=True, key=kb.key)
        assert st == 404
        assert [s.sandbox_id for s in warren.Sandbox.list(client=cb)] == []
        assert sb.sandbox_id in [s.sandbox_id for s in warren.Sandbox.list(client=ca)]
        # A team key cannot make keys.
        with pytest.raises(warren.WarrenError) as e:
            warren.admin.create_key("team-c", client=ca)
        assert e.value.status == 403
    finally:
        sb.kill()
    warren.admin.delete_key(kb.id, client=admin)
    st, _, _ = raw(daemon, "GET", "/v1/sandboxes", tcp=True, key=kb.key)
    assert st == 401


# ---- sandboxes ------------------------------------------------------------------------------------

def test_create_get_list_filter_paginate_delete(client):
    made = []
    try:
        for i in range(5):
            made.append(warren.Sandbox.create(client=client, timeout=60, cpus=0.5, memory_mb=128,
                                              metadata={"batch": "b1", "i": str(i)},
                                              env={"GREETING": "hi %d" % i}))
        info = made[0].get_info()
        assert info.state == "running" and info.cpus == 0.5 and info.memory_mb == 128
        assert info.metadata == {"batch": "b1", "i": "0"}
        assert made[2].commands.run("echo $GREETING").stdout == "hi 2\n"
        got = [s.sandbox_id for s in warren.Sandbox.list(client=client, metadata={"batch": "b1"},
                                                          page_size=2)]
        assert got == [s.sandbox_id for s in made]
        got = [s.sandbox_id for s in warren.Sandbox.list(client=client, metadata={"i": "3"})]
        assert got == [made[3].sandbox_id]
        st = client.request("GET", "/v1/sandboxes", query={"limit": 2, "metadata": "batch=b1"}).json()
        assert len(st["sandboxes"]) == 2 and st["next_cursor"]
        made[4].kill()
        with pytest.raises(warren.NotFoundError):
            made[4].get_info()
    finally:
        for s in made:
            try:
                s.kill()
            except warren.NotFoundError:
                pass


def test_idempotency_key_returns_the_same_sandbox(client):
    a = warren.Sandbox.create(client=client, timeout=60, idempotency_key="job-42")
    try:
        b = warren.Sandbox.create(client=client, timeout=60, idempotency_key="job-42")
        assert a.sandbox_id == b.sandbox_id
    finally:
        a.kill()


def test_timeout_kills_at_the_deadline_and_can_be_extended(client):
    short = warren.Sandbox.create(client=client, timeout=2)
    extended = warren.Sandbox.create(client=client, timeout=2)
    extended.set_timeout(30)
    time.sleep(3.5)
    info = warren.Sandbox.list(client=client, state=["stopped"])
    stopped = {s.sandbox_id: s for s in info}
    assert short.sandbox_id in stopped and stopped[short.sandbox_id].reason == "timeout"
    assert extended.get_info().state == "running"
    assert extended.commands.run("echo alive").stdout == "alive\n"
    extended.kill()
    client.request("DELETE", "/v1/sandboxes/" + short.sandbox_id)


def test_capacity_answers_503_with_retry_after():
    d = Daemon("--max-sandboxes", "2").start()
    try:
        c = d.client()
        a = warren.Sandbox.create(client=c, timeout=60)
        b = warren.Sandbox.create(client=c, timeout=60)
        r = c.request("POST", "/v1/sandboxes", json_body={}, check=False)
        assert r.status == 503 and int(r.headers["Retry-After"]) >= 1
        assert r.json()["code"] == "limit"
        a.kill()
        b.kill()
        warren.Sandbox.create(client=c, timeout=60).kill()
    finally:
        delete_all(d)
        d.cleanup()


def test_memory_commit_limit():
    d = Daemon("--max-memory", "300M").start()
    try:
        c = d.client()
        a = warren.Sandbox.create(client=c, timeout=60, memory_mb=256)
        with pytest.raises(warren.RateLimitError):
            warren.Sandbox.create(client=c, timeout=60, memory_mb=256)
        a.kill()
    finally:
        delete_all(d)
        d.cleanup()


def test_memory_overcommit_and_reserve():
    """A limit is a cap, not a reservation: --max-memory defaults to RAM x --memory-overcommit
    (here 1 %: a 512 MiB limit does not fit, 64 MiB does), and whatever the commit, nothing
    starts while the host's available memory is below --memory-reserve: 503 capacity, each
    naming why."""
    import subprocess
    d = Daemon("--memory-overcommit", "0.01").start()
    try:
        c = d.client()
        with pytest.raises(warren.RateLimitError) as e:
            warren.Sandbox.create(client=c, timeout=60, memory_mb=512)
        assert "commit" in str(e.value)
        warren.Sandbox.create(client=c, timeout=60, memory_mb=64).kill()
    finally:
        delete_all(d)
        d.cleanup()
    d = Daemon("--memory-reserve", "64T").start()
    try:
        r = d.client().request("POST", "/v1/sandboxes", json_body={"timeout": 60}, check=False)
        j = r.json()
        assert r.status == 503 and j["reason"] == "capacity" and "--memory-reserve" in j["message"], j
        assert int(r.headers["Retry-After"]) >= 1
    finally:
        delete_all(d)
        d.cleanup()
    for args in (["--memory-overcommit", "0"], ["--memory-overcommit", "x"], ["--memory-reserve", "lots"]):
        bad = Daemon(*args)
        p = subprocess.run([bad.binary, "--state-dir", bad.state, *args], capture_output=True, timeout=10)
        assert p.returncode == 2 and p.stderr.decode().count("\n") == 1, (args, p.stderr)
        bad.cleanup()


# ---- exec ------------------------------------------------------------------------------------------

def test_exec_wait_argv_shell_env_cwd_user_stdin(sandbox):
    r = sandbox.commands.run(["sh", "-c", "echo out; echo err >&2; exit 3"], check=False)
    assert (r.exit_code, r.stdout, r.stderr) == (3, "out\n", "err\n")
    r = sandbox.commands.run('echo "$A|$(pwd)|$(id -u)"', env={"A": "x y"}, cwd="/tmp", user="user")
    assert r.stdout == "x y|/tmp|1000\n"
    r = sandbox.commands.run("cat", stdin=b"\x00\x01binary\xff")
    assert r.stdout_bytes == b"\x00\x01binary\xff"
    with pytest.raises(warren.CommandExitError) as e:
        sandbox.commands.run("exit 9")
    assert e.value.result.exit_code == 9


def test_exec_user_from_passwd_and_group(sandbox):
    """warren-init reads the sandbox's /etc/passwd and /etc/group itself: comments, malformed
    entries, a very long line, groups listing the user among others, and a last line with no
    newline all count as the usual parsers count them."""
    passwd = sandbox.files.read("/etc/passwd")
    group = sandbox.files.read("/etc/group")
    sandbox.files.write("/etc/passwd", passwd + "# a comment\nbad:x:notanumber:1:::\n"
                        "agent:x:1234:1235:An Agent:/home/agent:/bin/sh\n")
    sandbox.files.write("/etc/group", group + "# agent:x:4000:agent\n"
                        "long:x:4001:" + ",".join("m%d" % i for i in range(2000)) + ",agent\n"
                        "agent:x:1235:\ndev:x:4002:someone,agent,other\nlast:x:4003:agent")
    r = sandbox.commands.run("echo $(id -u) $(id -g) $(id -G) $HOME", user="agent")
    assert r.stdout == "1234 1235 1235 4001 4002 4003 /home/agent\n"
    r = sandbox.commands.run("id -G", user="agent:dev")
    assert r.stdout.split() == ["4002", "4001", "4003"]
    with pytest.raises(warren.WarrenError, match="unknown user `bad`"):
        sandbox.commands.run("true", user="bad")


def test_exec_timeout_and_signals(sandbox):
    t = time.monotonic()
    r = sandbox.commands.run("sleep 30", timeout=1, check=False)
    assert r.timed_out and r.signal == 9 and time.monotonic() - t < 10
    r = sandbox.commands.run("kill -TERM $$", check=False)
    assert r.signal == 15 and r.exit_code is None


def test_exec_errors(sandbox, client):
    with pytest.raises(warren.InvalidArgumentError):
        sandbox.commands.run(["/no/such/binary"])
    # A failure between clone and exec names its step, and init (whose memory the child shared
    # until then) goes on spawning with its own environment.
    with pytest.raises(warren.InvalidArgumentError, match="chdir"):
        sandbox.commands.run(["true"], cwd="/no/such/dir")
    with pytest.raises(warren.InvalidArgumentError, match="exec"):
        sandbox.commands.run(["no-such-command-on-path"], env={"PATH": "/nowhere"})
    r = sandbox.commands.run(["sh", "-c", "echo $PATH; pwd"])
    assert r.stdout.split() == ["/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                "/root"]
    r = client.request("POST", "/v1/sandboxes/%s/exec" % sandbox.sandbox_id,
                       json_body={"cmd": []}, check=False)
    assert r.status == 400
    r = client.request("POST", "/v1/sandboxes/%s/exec" % sandbox.sandbox_id,
                       json_body={"cmd": "true", "mode": "sideways"}, check=False)
    assert r.status == 400
    # A bad terminal size is refused, as the terminal endpoint and resize refuse it.
    for size in ({"rows": 0}, {"cols": 65536}, {"rows": "30"}):
        r = client.request("POST", "/v1/sandboxes/%s/exec" % sandbox.sandbox_id,
                           json_body={"cmd": "true", "pty": True, **size}, check=False)
        assert r.status == 400 and "`rows` and `cols`" in r.json()["message"], size


def test_a_script_without_a_shebang_runs_with_sh(sandbox):
    # As execvp does (glibc's, which warren-init is linked with; musl's would answer ENOEXEC).
    sandbox.files.write("/tmp/s", "echo from-script $0\n")
    sandbox.commands.run("chmod +x /tmp/s")
    assert sandbox.commands.run(["/tmp/s"]).stdout == "from-script /tmp/s\n"


def test_invalid_utf8_output(sandbox, client):
    r = client.request("POST", "/v1/sandboxes/%s/exec" % sandbox.sandbox_id,
                       json_body={"cmd": r"printf 'a\377b\303'"}).json()
    assert r["stdout"] == "a\ufffdb\ufffd"
    r = client.request("POST", "/v1/sandboxes/%s/exec" % sandbox.sandbox_id,
                       json_body={"cmd": r"printf 'a\377b\303'", "encoding": "base64"}).json()
    assert base64.b64decode(r["stdout"]) == b"a\xffb\xc3"
    # A multi-byte character split across output chunks stays whole.
    r = sandbox.commands.run(r"printf '\342'; sleep 0.2; printf '\202\254'")
    assert r.stdout == "\u20ac"


def test_exec_stream_callbacks_and_sse(sandbox, daemon):
    got = []
    r = sandbox.commands.run("for i in 1 2 3; do echo $i; sleep 0.1; done; echo e >&2",
                             on_stdout=got.append)
    assert "".join(got) == "1\n2\n3\n" and r.stderr == "e\n"
    st, h, body = raw(daemon, "POST", "/v1/sandboxes/%s/exec" % sandbox.sandbox_id,
                      json.dumps({"cmd": "echo sse", "mode": "stream"}).encode(),
                      headers={"Accept": "text/event-stream"})
    assert st == 200 and h["content-type"].startswith("text/event-stream")
    text = body.decode()
    assert "event: start" in text and "event: stdout" in text and "event: exit" in text


def test_background_attach_stdin_signal_wait_list(sandbox, client):
    h = sandbox.commands.run("echo ready; while read l; do echo got:$l; done; echo bye", background=True)
    h.send_stdin("one\n")
    h.send_stdin("two\n")
    h.close_stdin()
    r = h.wait()
    assert r.stdout == "ready\ngot:one\ngot:two\nbye\n"
    pids = [p.pid for p in sandbox.commands.list()]
    assert h.pid in pids
    h2 = sandbox.commands.run("sleep 100", background=True)
    assert sandbox.commands.kill(h2.pid)
    r2 = h2.wait(check=False)
    assert r2.signal == 9
    # A process that ended keeps its status until released.
    got = client.request("GET", "/v1/sandboxes/%s/processes/%d" % (sandbox.sandbox_id, h.pid)).json()
    assert got["running"] is False and got["exit_code"] == 0
    client.request("DELETE", "/v1/sandboxes/%s/processes/%d" % (sandbox.sandbox_id, h.pid))
    r = client.request("GET", "/v1/sandboxes/%s/processes/%d" % (sandbox.sandbox_id, h.pid), check=False)
    assert r.status == 404


def test_client_disconnect_mid_stream_leaves_the_command_running(sandbox, daemon, client):
    s = socket.socket(socket.AF_UNIX)
    s.connect(daemon.sock)
    body = json.dumps({"cmd": "echo start; sleep 1; echo done > /tmp/finished", "mode": "stream"}).encode()
    s.sendall(b"POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
              % (sandbox.sandbox_id.encode(), len(body)) + body)
    got = b""
    while b"start" not in got:
        chunk = s.recv(65536)
        assert chunk, got
        got += chunk
    s.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        procs = sandbox.commands.list()
        if procs and not any(p.running for p in procs):
            break
        time.sleep(0.1)
    assert sandbox.files.read("/tmp/finished") == "done\n"


@pytest.mark.slow
@pytest.mark.backends("ns", reason=(
    "A load test of the daemon's streams (1,000 commands in 5 sandboxes): on gVisor's ptrace "
    "platform 200 processes a sandbox take 40 s and most of its pids limit; the backend is "
    "not what it tests."))
def test_many_concurrent_streams(client):
    boxes = [warren.Sandbox.create(client=client, timeout=120) for _ in range(5)]
    errors, outs = [], []

    def one(sb, i):
        try:
            r = sb.commands.run("sleep 1; echo %d" % i, on_stdout=lambda s: None)
            outs.append(r.stdout)
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    try:
        threads = [threading.Thread(target=one, args=(boxes[i % 5], i)) for i in range(1000)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors[:3]
        assert sorted(int(o) for o in outs) == list(range(1000))
    finally:
        for b in boxes:
            b.kill()


# ---- files -----------------------------------------------------------------------------------------

def test_files_roundtrip_list_stat_mkdir_move_remove(sandbox):
    data = os.urandom(3 << 20)
    info = sandbox.files.write("/home/user/new/dir/blob.bin", data)
    assert info.size == len(data) and info.type == "file"
    assert sandbox.files.read("/home/user/new/dir/blob.bin", format="bytes") == data
    assert sandbox.files.exists("/home/user/new/dir")
    names = sorted(e.name for e in sandbox.files.list("/home/user/new", depth=2))
    assert names == ["blob.bin", "dir"]
    assert sandbox.files.make_dir("/tmp/m/n") is True
    sandbox.files.rename("/tmp/m", "/tmp/moved")
    assert sandbox.files.exists("/tmp/moved/n") and not sandbox.files.exists("/tmp/m")
    sandbox.files.remove("/tmp/moved", recursive=True)
    assert not sandbox.files.exists("/tmp/moved")
    with pytest.raises(warren.NotFoundError):
        sandbox.files.read("/no/such/file")
    with pytest.raises(warren.WarrenError):
        sandbox.files.remove("/home/user/new")  # a non-empty directory without recursive


def test_files_range_and_user(sandbox, client):
    sandbox.files.write("/tmp/r", b"0123456789")
    for rng, want, code in [("bytes=2-4", b"234", 206), ("bytes=7-", b"789", 206),
                            ("bytes=-3", b"789", 206)]:
        r = client.request("GET", "/v1/sandboxes/%s/files" % sandbox.sandbox_id,
                           query={"path": "/tmp/r"}, headers={"Range": rng})
        assert (r.status, r.body) == (code, want), rng
    r = client.request("GET", "/v1/sandboxes/%s/files" % sandbox.sandbox_id,
                       query={"path": "/tmp/r"}, headers={"Range": "bytes=50-"}, check=False)
    assert r.status == 416
    info = sandbox.files.write("/home/user/mine", b"x", user="user")
    assert info.uid == 1000
    with pytest.raises(warren.WarrenError) as e:
        sandbox.files.write("/root/nope", b"x", user="user")
    assert e.value.status == 403


def test_paths_resolve_inside_the_sandbox(sandbox, tmp_path):
    secret = tmp_path / "host-secret"
    secret.write_text("host only\n")
    # `..` cannot climb out of the sandbox's root, and a symlink to a host path resolves inside.
    assert "root:x:0:0" in sandbox.files.read("/../../../../etc/passwd")
    sandbox.commands.run("ln -s %s /tmp/link" % secret)
    with pytest.raises(warren.NotFoundError):
        sandbox.files.read("/tmp/link")
    sandbox.commands.run("ln -s /etc/motd /tmp/motd-link")
    assert sandbox.files.read("/tmp/motd-link") == "image motd\n"
    r = sandbox.client.request("GET", "/v1/sandboxes/%s/files" % sandbox.sandbox_id,
                               query={"path": "relative/path"}, check=False)
    assert r.status == 400


def test_watch_dir(sandbox):
    events = []
    sandbox.files.make_dir("/tmp/w")
    w = sandbox.files.watch_dir("/tmp/w", events.append)
    try:
        sandbox.commands.run("echo 1 > /tmp/w/a; chmod 600 /tmp/w/a; rm /tmp/w/a")
        # An upload is atomic: a temporary file renamed to its name.
        sandbox.files.write("/tmp/w/b", b"2")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not any(e.name == "b" for e in events):
            time.sleep(0.05)
    finally:
        w.stop()
    kinds = [(e.type, e.name) for e in events]
    for want in [("create", "a"), ("write", "a"), ("chmod", "a"), ("remove", "a"), ("rename", "b")]:
        assert want in kinds, kinds


@pytest.mark.slow
def test_large_file_streams_without_buffering(sandbox, daemon, tmp_path):
    size = 256 << 20
    src = tmp_path / "big"
    with open(src, "wb") as f:
        f.truncate(size)
        f.seek(size // 2)
        f.write(b"middle")
    with open(src, "rb") as f:
        sandbox.files.upload("/tmp/big", f)
    dst = tmp_path / "back"
    with open(dst, "wb") as f:
        assert sandbox.files.download("/tmp/big", f) == size
    h = hashlib.sha256()
    with open(dst, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    h2 = hashlib.sha256()
    with open(src, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h2.update(chunk)
    assert h.hexdigest() == h2.hexdigest()
    with open("/proc/%d/status" % daemon.proc.pid) as f:
        hwm = [int(l.split()[1]) for l in f if l.startswith("VmHWM:")][0]
    # Under ASan (make asan) freed memory sits in its quarantine, so peak RSS says nothing there.
    if not SANITIZED:
        assert hwm < 128 * 1024, "warrend peaked at %d KiB for a %d MiB transfer" % (hwm, size >> 20)


def test_a_sandbox_whose_init_dies_is_stopped_with_a_reason(client):
    from conftest import CGROUP_PARENT
    sb = warren.Sandbox.create(client=client, timeout=60)
    with open("/sys/fs/cgroup/pids/%s/%s/cgroup.procs" % (CGROUP_PARENT, sb.sandbox_id)) as f:
        init_pid = min(int(l) for l in f)
    os.kill(init_pid, 9)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        info = sb.get_info()
        if info.state != "running":
            break
        time.sleep(0.05)
    assert info.state == "stopped" and "init" in info.reason, info
    with pytest.raises(warren.ConflictError):
        sb.commands.run("true")
    client.request("DELETE", "/v1/sandboxes/" + sb.sandbox_id)


@pytest.mark.backends("ns", reason=(
    "gVisor's pipes cannot be given to another owner (fchown), so only root reopens them "
    "there."))
def test_exec_reopens_its_own_stdio_as_its_user(sandbox):
    # A process's pipes are its user's (as a shell's are), so reopening /dev/stdout or
    # /dev/stderr (scrot -, tee /dev/stderr, `echo x > /dev/stdout`) works without root.
    r = sandbox.commands.run("echo out >/dev/stdout; echo err >/dev/stderr; id -u", user="user")
    assert (r.stdout, r.stderr, r.exit_code) == ("out\n1000\n", "err\n", 0)
