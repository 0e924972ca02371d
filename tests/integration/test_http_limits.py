"""warrend under slow and flooding TCP clients (docs/design/http.md, "Limits and timeouts";
docs/operations.md, "TCP connections"): thousands of connections that trickle their heads or
bodies must not take the daemon's file descriptors, GET /health over TCP and a create over the
unix socket answer meanwhile, the slow connections are closed at their deadlines, and what must
last (a command's output stream, a terminal's stdin) still does. Request smuggling through the
real daemon: a chunked body whose chunk data is not followed by CRLF writes nothing.

Every connection goes to 127.0.0.1; the flood comes from 40 other loopback addresses (127/8 is
all this host), as many clients would."""

import json
import os
import resource
import select
import socket
import subprocess
import time

import pytest

import warren
from conftest import WARREN, Daemon, delete_all

N_SLOW = 1100   # of each kind, as in issue #14
SOURCES = 40    # client addresses the flood comes from
TIMEOUT_S = 8   # --header-timeout and --body-timeout of the flood's daemon


@pytest.fixture
def many_fds():
    """This process holds a few thousand sockets."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 16384)), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def fds_of(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def open_slow(port, src, payload):
    """A connection from `src` that sends `payload` and then nothing; None if the server
    refused it at once."""
    s = socket.socket()
    try:
        s.bind((src, 0))
        s.settimeout(10)
        s.connect(("127.0.0.1", port))
        s.sendall(payload)
    except OSError:
        s.close()
        return None
    s.setblocking(False)
    return s


def wait_all_closed(socks, deadline):
    """Read and drop until every socket saw its end; returns those still open at deadline."""
    left = {s.fileno(): s for s in socks}
    poll = select.poll()
    for fd in left:
        poll.register(fd, select.POLLIN)
    while left and time.monotonic() < deadline:
        for fd, _ in poll.poll(200):
            try:
                data = left[fd].recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                poll.unregister(fd)
                left.pop(fd).close()
    return list(left.values())


def raw_tcp(port, request, timeout=10.0):
    """Send request bytes to the daemon's TCP port; (status, headers, body) of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        assert data, "no answer: the connection was closed"
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        hdrs = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:]}
        want = int(hdrs.get("content-length", "0"))
        while len(body) < want:
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
    return int(lines[0].split()[1]), hdrs, body


def test_slow_clients_leave_health_and_the_unix_socket_alone(many_fds):
    """Issue #14 item 8, as reported: Debian's default limit (1024:1024, which this daemon
    cannot raise without CAP_SYS_RESOURCE), 1,100 connections that trickle their heads with no
    key and 1,100 that trickle a create's body with a team key."""
    d = Daemon("--header-timeout", str(TIMEOUT_S), "--body-timeout", str(TIMEOUT_S),
               prefix=["prlimit", "--nofile=1024:1024"]).start()
    slow = []
    try:
        admin = d.client()
        key = warren.admin.create_key("flood", client=admin).key
        time.sleep(0.5)
        base_fds = fds_of(d.proc.pid)

        head = b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: a"
        body = ("POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"templ"
                % key).encode()
        t_open = time.monotonic()
        for i in range(N_SLOW):
            for payload in (head, body):
                s = open_slow(d.port, "127.0.0.%d" % (10 + i % SOURCES), payload)
                if s is not None:
                    slow.append(s)
        opened = time.monotonic() - t_open

        # The flood is in place (some of it already answered 503 or closed: that is the cap).
        t0 = time.monotonic()
        try:
            st, h, b = raw_tcp(d.port, b"GET /v1/health HTTP/1.1\r\nHost: x\r\n"
                                       b"Connection: close\r\n\r\n", timeout=5)
            health = (st, json.loads(b), round(time.monotonic() - t0, 1))
        except (OSError, AssertionError) as e:
            health = repr(e)
        t0 = time.monotonic()
        unix = warren.Client(d.url)
        try:
            sb = warren.Sandbox.create(client=unix, timeout=60, request_timeout=20)
            created = (sb.commands.run("echo up").stdout, round(time.monotonic() - t0, 1))
            sb.kill()
        except (OSError, warren.WarrenError) as e:
            created = repr(e)
        finally:
            unix.close()
        assert health[:2] == (200, {"status": "ok"}) and health[2] < 5 and \
            created[0] == "up\n" and created[1] < 20, (health, created)

        # Every slow connection is closed by its deadline (counted from its open).
        still = wait_all_closed(slow, t_open + opened + TIMEOUT_S + 15)
        assert not still, "%d of %d slow connections still open" % (len(still), len(slow))
        slow = []
        deadline = time.monotonic() + 10
        while fds_of(d.proc.pid) > base_fds + 8 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert fds_of(d.proc.pid) <= base_fds + 8, (fds_of(d.proc.pid), base_fds)
        with open(os.path.join(d.dir, "warrend.log")) as f:
            log = f.read()
        # The daemon says how it shares the limit it got (docs/operations.md, "fds").
        assert "fds: limit 1024;" in log or "RLIMIT_NOFILE raised" in log, log[-2000:]
    finally:
        for s in slow:
            s.close()
        delete_all(d)
        d.cleanup()


def module_daemon(*args):
    d = Daemon(*args).start()
    yield d
    try:
        delete_all(d)
    finally:
        d.cleanup()


@pytest.fixture(scope="module")
def tight():
    """A daemon with 1 s head and body timeouts."""
    yield from module_daemon("--header-timeout", "1", "--body-timeout", "1")


@pytest.fixture(scope="module")
def capped():
    """A daemon with small connection caps."""
    yield from module_daemon("--max-connections", "40", "--max-connections-per-client", "10")


def test_timeouts_cut_silence_not_streams(tight):
    d = tight
    # A head trickled byte by byte is cut at its deadline, not moved by each byte.
    s = open_slow(d.port, "127.0.0.2", b"GET /v1/health HTTP/1.1\r\nX-Slow: ")
    t0 = time.monotonic()
    s.setblocking(True)
    s.settimeout(1)
    closed_after = None
    while closed_after is None and time.monotonic() - t0 < 10:
        try:
            s.sendall(b"a")
            if s.recv(1) == b"":
                closed_after = time.monotonic() - t0
        except socket.timeout:
            pass
        except OSError:
            closed_after = time.monotonic() - t0
    s.close()
    assert closed_after is not None and 0.9 < closed_after < 5, closed_after

    # A body that stops: 408 with the API's error shape.
    key = d.admin_key
    st, h, b = raw_tcp(d.port, ("POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                                "%s\r\nContent-Length: 100\r\n\r\n{" % key).encode())
    assert st == 408 and json.loads(b)["code"] == "timeout" and h["connection"] == "close"

    # A command whose output takes longer than every timeout streams to its end.
    c = warren.Client(d.tcp_url, key)
    try:
        sb = warren.Sandbox.create(client=c, timeout=60)
        try:
            got = []
            r = sb.commands.run("for i in 1 2 3 4; do echo $i; sleep 1; done",
                                on_stdout=got.append)
            assert r.stdout == "1\n2\n3\n4\n" and "".join(got) == r.stdout
        finally:
            sb.kill()
    finally:
        c.close()


def test_a_terminal_stdin_may_pause(tight, tmp_path):
    """`warren exec` streams stdin as one chunked POST that is silent while the user is: the
    body timeout (1 s here) does not cut it."""
    d = tight
    c = d.client()
    sb = warren.Sandbox.create(client=c, timeout=60)
    try:
        env = dict(os.environ, HOME=str(tmp_path), WARREN_API_URL=d.tcp_url,
                   WARREN_API_KEY=d.admin_key)
        env.pop("XDG_CONFIG_HOME", None)
        p = subprocess.Popen([WARREN, "exec", sb.sandbox_id, "--", "cat"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        p.stdin.write(b"before\n")
        p.stdin.flush()
        time.sleep(3)
        out, err = p.communicate(b"after\n", timeout=30)
        assert p.returncode == 0 and out == b"before\nafter\n", (p.returncode, out, err)
    finally:
        sb.kill()
        c.close()


def test_caps_answer_503_and_keep_health(capped):
    d = capped
    # One client past its cap: 503 with Retry-After; another client is served meanwhile.
    mine = [open_slow(d.port, "127.0.0.3", b"") for _ in range(10)]
    try:
        st, h, b = raw_tcp(d.port, b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert st == 200
        s = socket.socket()
        s.bind(("127.0.0.3", 0))
        s.settimeout(10)
        s.connect(("127.0.0.1", d.port))
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
        s.close()
        assert answer.startswith(b"HTTP/1.1 503 ") and b"\r\nRetry-After: 1\r\n" in answer, answer
        assert json.loads(answer.partition(b"\r\n\r\n")[2])["code"] == "limit"
    finally:
        for s in mine:
            s.close()

    # 60 unfinished heads from 6 clients against a cap of 40: health still gets in.
    heads = [open_slow(d.port, "127.0.0.%d" % (20 + i % 6), b"GET / HTTP/1.1\r\n")
             for i in range(60)]
    try:
        st, h, b = raw_tcp(d.port, b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert st == 200
    finally:
        for s in heads:
            if s is not None:
                s.close()


def test_smuggled_chunk_framing_writes_nothing(tight):
    """Issue #14 item 11: chunk data not followed by CRLF (`5\\r\\nhelloXX3\\r\\nabc...`) was
    read as `helloabc`; now it is refused and nothing is written."""
    d = tight
    key = d.admin_key
    c = d.client()
    sb = warren.Sandbox.create(client=c, timeout=60)
    try:
        req = ("PUT /v1/sandboxes/%s/files?path=/tmp/smuggled HTTP/1.1\r\nHost: x\r\n"
               "Authorization: Bearer %s\r\nTransfer-Encoding: chunked\r\n\r\n"
               % (sb.sandbox_id, key)).encode() + b"5\r\nhelloXX3\r\nabc\r\n0\r\n\r\n"
        st, h, b = raw_tcp(d.port, req)
        assert st == 400 and json.loads(b)["code"] == "invalid", (st, b)
        with pytest.raises(warren.NotFoundError):
            sb.files.read("/tmp/smuggled")
        for name, framing in [
            ("obs-fold", b"X-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok"),
            ("space before the colon", b"Content-Length : 2\r\n\r\nok"),
            ("two lengths", b"Content-Length: 2\r\nContent-Length: 2\r\n\r\nok"),
            ("a coding before chunked", b"Transfer-Encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"),
        ]:
            req = ("PUT /v1/sandboxes/%s/files?path=/tmp/smuggled HTTP/1.1\r\nHost: x\r\n"
                   "Authorization: Bearer %s\r\n" % (sb.sandbox_id, key)).encode() + framing
            st, h, b = raw_tcp(d.port, req)
            assert st in (400, 501) and h["connection"] == "close", (name, st, b)
            with pytest.raises(warren.NotFoundError):
                sb.files.read("/tmp/smuggled")
    finally:
        sb.kill()
        c.close()
