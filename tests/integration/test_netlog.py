"""The egress log's API through the real daemon: GET /v1/sandboxes/{id}/network/log (pages and
the NDJSON stream), its errors, team scoping, the log outliving the sandbox while its record
stays, the stream ending when the record goes; the SDK's Sandbox.network_log and the CLI's
`warren net-log`.

The first tests use sandboxes with loopback only (an empty log); the last one sends real traffic
to the test internet (netfix.py) and reads the kernel's connections back."""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import pytest

import warren
from conftest import ENV, WARREN, Daemon, delete_all, internet
from test_api import raw


def log_path(sb_id, query=""):
    return "/v1/sandboxes/%s/network/log%s" % (sb_id, query)


def test_empty_log_pages_and_bad_parameters(daemon, sandbox):
    st, h, body = raw(daemon, "GET", log_path(sandbox.sandbox_id))
    assert st == 200 and h["content-type"].startswith("application/json")
    assert json.loads(body) == {"entries": [], "next": "0"}
    # An empty page gives back the cursor it was asked from: a client polls with it.
    st, _, body = raw(daemon, "GET", log_path(sandbox.sandbox_id, "?after=42&limit=1000"))
    assert st == 200 and json.loads(body) == {"entries": [], "next": "42"}
    for q in ("?limit=0", "?limit=1001", "?limit=x", "?after=-1", "?after=1x", "?follow=2"):
        st, _, body = raw(daemon, "GET", log_path(sandbox.sandbox_id, q))
        assert st == 400 and json.loads(body)["code"] == "invalid", q
    st, _, body = raw(daemon, "GET", log_path("nosuchsandbox"))
    assert st == 404 and json.loads(body)["code"] == "not_found"
    st, _, body = raw(daemon, "GET", log_path("nosuchsandbox", "?follow=1"))
    assert st == 404 and json.loads(body)["code"] == "not_found"
    st, _, _ = raw(daemon, "POST", log_path(sandbox.sandbox_id))
    assert st == 405
    assert list(sandbox.network_log()) == []


def test_another_teams_sandbox_is_not_found(daemon):
    admin = daemon.client(daemon.admin_key, tcp=True)
    ka = warren.admin.create_key("netlog-a", client=admin)
    kb = warren.admin.create_key("netlog-b", client=admin)
    sb = warren.Sandbox.create(client=daemon.client(ka.key, tcp=True), timeout=60)
    try:
        for q in ("", "?follow=1"):
            st, _, body = raw(daemon, "GET", log_path(sb.sandbox_id, q), tcp=True, key=kb.key)
            assert st == 404 and json.loads(body)["code"] == "not_found", q
        st, _, _ = raw(daemon, "GET", log_path(sb.sandbox_id), tcp=True, key=ka.key)
        assert st == 200
        st, _, _ = raw(daemon, "GET", log_path(sb.sandbox_id), tcp=True, key=daemon.admin_key)
        assert st == 200
        other = warren.Sandbox(sb.sandbox_id, client=daemon.client(kb.key, tcp=True))
        with pytest.raises(warren.NotFoundError):
            other.network_log()
    finally:
        sb.kill()
        warren.admin.delete_key(ka.id, client=admin)
        warren.admin.delete_key(kb.id, client=admin)


def open_follow(daemon, sb_id):
    """A raw follow request on the unix socket; returns the socket once the head is in."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(daemon.sock)
    s.settimeout(10)
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
               % log_path(sb_id, "?follow=1")).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        assert chunk, "no answer"
        head += chunk
    return s, head


def test_follow_streams_until_the_record_goes(daemon, client):
    sb = warren.Sandbox.create(client=client, timeout=60)
    s, head = open_follow(daemon, sb.sandbox_id)
    try:
        status = head.split(b"\r\n")[0]
        assert b" 200 " in status
        assert b"application/x-ndjson" in head.lower()
        # Open, and nothing to say: no bytes while the sandbox is there.
        s.settimeout(1.5)
        with pytest.raises(socket.timeout):
            rest = head.partition(b"\r\n\r\n")[2]
            assert rest == b""
            s.recv(4096)
        # Deleting the sandbox forgets its record: the stream ends (the last chunk), within the
        # sink's second.
        sb.kill()
        s.settimeout(5)
        t0 = time.monotonic()
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        assert data.endswith(b"0\r\n\r\n"), data
        assert time.monotonic() - t0 < 3
    finally:
        s.close()


def test_log_stays_while_the_record_does(client):
    sb = warren.Sandbox.create(client=client, timeout=1)
    deadline = time.monotonic() + 10
    while sb.get_info().state != "stopped":
        assert time.monotonic() < deadline, "the deadline did not stop it"
        time.sleep(0.2)
    # Stopped, its record kept: the log answers.
    assert list(sb.network_log()) == []
    client.request("DELETE", "/v1/sandboxes/" + sb.sandbox_id)
    with pytest.raises(warren.NotFoundError):
        sb.network_log()


def test_sdk_follow_ends_with_the_sandbox(client):
    sb = warren.Sandbox.create(client=client, timeout=60)
    got, done = [], threading.Event()

    def follow():
        for e in sb.network_log(follow=True):
            got.append(e)
        done.set()

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    time.sleep(0.5)
    assert not done.is_set()
    warren.Sandbox.connect(sb.sandbox_id, client=client).kill()
    assert done.wait(5), "the follow did not end when the sandbox was deleted"
    assert got == []


def cli(daemon, *args, timeout=20):
    env = dict(ENV, WARREN_API_URL=daemon.url)
    env.pop("WARREN_API_KEY", None)
    return subprocess.run([WARREN, *args], env=env, capture_output=True, timeout=timeout)


def test_cli_net_log(daemon, client, sandbox):
    r = cli(daemon, "net-log", sandbox.sandbox_id)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:4] == [b"ID", b"TIME", b"PROTO", b"DESTINATION"]
    assert len(r.stdout.splitlines()) == 1
    r = cli(daemon, "net-log", sandbox.sandbox_id, "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == []
    r = cli(daemon, "net-log", "nosuchsandbox")
    assert r.returncode == 1 and b"not found" in r.stderr
    r = cli(daemon, "net-log")
    assert r.returncode == 2
    r = cli(daemon, "net-log", sandbox.sandbox_id, "--after", "x")
    assert r.returncode == 2
    # --follow ends (status 0) when the sandbox is deleted.
    sb = warren.Sandbox.create(client=client, timeout=60)
    env = dict(ENV, WARREN_API_URL=daemon.url)
    p = subprocess.Popen([WARREN, "net-log", sb.sandbox_id, "--follow", "--json"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)
        assert p.poll() is None
        sb.kill()
        out, err = p.communicate(timeout=5)
        assert p.returncode == 0, err
        assert out == b""
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


# ---- real traffic: the kernel's connection tracking ----------------------------------------------
# A sandbox on the network (internet on) talks to the test internet (netfix.py); the test then
# ends its tracked connections the way the slot's release does (`conntrack -D -s ADDR`: only this
# sandbox's address, in this daemon's pool; no packet is sent), and the kernel's DESTROY events
# become entries with their bytes.

BASE = os.environ.get("WARREN_BASE_TEMPLATE")

TRAFFIC = r"""
import socket, sys
host = sys.argv[1]
s = socket.create_connection((host, 7), timeout=5)   # TCP echo: 3000 bytes there and back
s.sendall(b"x" * 3000)
s.shutdown(socket.SHUT_WR)
got = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    got += b
s.close()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)   # UDP echo
u.settimeout(3)
u.sendto(b"p" * int(sys.argv[2]), (host, 7))
print(len(got), len(u.recv(4096)))
"""


def base_state():
    top = tempfile.mkdtemp(prefix="warrend-netlog-")
    tdir = os.path.join(top, "state", "templates", "base")
    os.makedirs(tdir)
    os.symlink(os.path.join(os.path.abspath(BASE), "rootfs"), os.path.join(tdir, "rootfs"))
    shutil.copy(os.path.join(BASE, "config.json"), tdir)
    return top


@pytest.fixture(scope="module")
def netd():
    if not BASE:
        pytest.skip("WARREN_BASE_TEMPLATE is not set (run ./test.sh)")
    inet = internet()
    d = Daemon(state_dir=base_state()).start()
    yield d, inet
    try:
        delete_all(d)
    finally:
        d.cleanup()


def end_tracked(addr):
    """End the address's tracked connections, as the release of its slot does."""
    subprocess.run(["conntrack", "-D", "-s", addr], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def wait_entries(sb, want, after=None, timeout=5.0):
    deadline = time.monotonic() + timeout
    while True:
        got = list(sb.network_log(after=after))
        if want(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def test_kernel_connections_are_logged_with_their_bytes(netd):
    d, inet = netd
    c = d.client()
    web = inet.addr("web")
    sb = warren.Sandbox.create(client=c, timeout=120, internet=True)
    try:
        addr = sb.get_info().network.address
        t0 = time.time()
        r = sb.commands.run(["python3", "-c", TRAFFIC, web, "500"], timeout=30)
        n_tcp, n_udp = map(int, r.stdout.split())
        assert n_tcp == 3000 and n_udp == 500
        end_tracked(addr)

        def both(es):
            return any(e.proto == "tcp" and e.port == 7 for e in es) and \
                any(e.proto == "udp" and e.port == 7 for e in es)
        got = wait_entries(sb, both)
        assert both(got), got
        tcp = [e for e in got if e.proto == "tcp" and e.port == 7][0]
        udp = [e for e in got if e.proto == "udp" and e.port == 7][0]
        assert tcp.address == web and tcp.allowed and tcp.rule == "kernel" and tcp.name is None
        # 3000 bytes each way, plus the IP and TCP headers of a handful of packets.
        assert 3000 < tcp.bytes_out < 3000 + 1500 and 3000 < tcp.bytes_in < 3000 + 1500, tcp
        assert udp.bytes_out == 500 + 28 and udp.bytes_in == 500 + 28, udp
        assert abs(tcp.time.timestamp() - t0) < 30
        # The same through the raw API and the CLI.
        st, _, body = raw(d, "GET", log_path(sb.sandbox_id, "?limit=1"))
        page = json.loads(body)
        assert st == 200 and len(page["entries"]) == 1 and page["next"] == page["entries"][0]["id"]
        r = cli(d, "net-log", sb.sandbox_id)
        assert r.returncode == 0 and (b"%s:7 " % web.encode()) in r.stdout and b"kernel" in r.stdout

        # Followed: the next connections arrive on the stream.
        last = got[-1].id
        stream = sb.network_log(follow=True, after=last)
        seen, found = [], threading.Event()

        def follow():
            for e in stream:
                seen.append(e)
                if e.proto == "udp" and e.bytes_out == 128:
                    found.set()
                    return

        t = threading.Thread(target=follow, daemon=True)
        t.start()
        sb.commands.run(["python3", "-c", TRAFFIC, web, "100"], timeout=30)
        end_tracked(addr)
        assert found.wait(10), seen
        stream.close()
        assert all(int(e.id) > int(last) for e in seen)
    finally:
        sb.kill()
    # Its entries go with its record.
    st, _, _ = raw(d, "GET", log_path(sb.sandbox_id))
    assert st == 404


# ---- the DNS stub's and the egress proxy's decisions, and the release ---------------------------

HOLD = r"""
import socket, sys, time
s = socket.create_connection((sys.argv[1], 7), timeout=5)
s.sendall(b"h" * 1000)
s.recv(4096)
print("held", flush=True)
time.sleep(600)
"""


def test_dns_and_proxy_decisions_are_logged_with_their_names(netd):
    d, inet = netd
    c = d.client()
    sb = warren.Sandbox.create(client=c, timeout=120, internet=True, allow_out=["example.test"],
                               deny_out=["0.0.0.0/0"])
    try:
        r = sb.commands.run(["curl", "-sS", "--max-time", "5", "http://example.test/netlog"],
                            check=False, timeout=30)
        assert r.exit_code == 0, r.stderr
        r = sb.commands.run(["curl", "-sS", "--max-time", "5", "http://other.test/"],
                            check=False, timeout=30)
        assert r.exit_code != 0  # the stub refuses the name

        def done(es):
            return any(e.proto == "tcp" and e.name == "example.test" for e in es) and \
                any(e.proto == "dns" and e.name == "other.test" for e in es)
        got = wait_entries(sb, done)
        assert done(got), got
        q = [e for e in got if e.proto == "dns" and e.name == "example.test"]
        assert q and q[0].allowed and q[0].address == inet.names["example.test"], got
        px = [e for e in got if e.proto == "tcp" and e.name == "example.test"][0]
        assert px.allowed and px.port == 80 and px.address == inet.names["example.test"]
        assert "example.test" in px.rule and px.bytes_out > 0 and px.bytes_in > 0, px
        refused = [e for e in got if e.proto == "dns" and e.name == "other.test"][0]
        assert not refused.allowed and refused.rule, refused
        # The proxied connection is the proxy's entry only: the kernel's redirected flow is not
        # logged a second time.
        end_tracked(sb.get_info().network.address)
        time.sleep(1.5)
        again = list(sb.network_log())
        assert not any(e.rule == "kernel" and e.port == 80 for e in again), again
    finally:
        sb.kill()


def test_a_connection_open_at_the_end_is_logged_as_the_sandboxs(netd):
    d, inet = netd
    c = d.client()
    sb = warren.Sandbox.create(client=c, timeout=4, internet=True)
    try:
        p = sb.commands.run(["python3", "-c", HOLD, inet.addr("web")], background=True)
        deadline = time.monotonic() + 15
        while sb.get_info().state != "stopped":
            assert time.monotonic() < deadline, "the deadline did not stop it"
            time.sleep(0.2)
        # Stopped by its deadline: its slot was released and its connection flushed then.
        got = wait_entries(sb, lambda es: any(e.proto == "tcp" and e.port == 7 for e in es))
        tcp = [e for e in got if e.proto == "tcp" and e.port == 7]
        assert tcp and tcp[0].bytes_out > 1000 and tcp[0].rule == "kernel", got
        del p
    finally:
        c.request("DELETE", "/v1/sandboxes/" + sb.sandbox_id, check=False)
