"""The egress log's API through the real daemon: GET /v1/sandboxes/{id}/network/log (pages and
the NDJSON stream), its errors, team scoping, the log outliving the sandbox while its record
stays, the stream ending when the record goes; the SDK's Sandbox.network_log and the CLI's
`warren net-log`.

Entries from real traffic need the networking slots (a sandbox with an address, the kernel's
conntrack events and the DNS stub and proxy): that test belongs with them. Here every sandbox has
loopback only, so its log is empty."""

import json
import socket
import subprocess
import threading
import time

import pytest

import warren
from conftest import ENV, WARREN
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
