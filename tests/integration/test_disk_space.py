"""The state filesystem's space (src/core/space.h, docs/operations.md "Disk space"): a tenant that
fills it, through a sandbox or through the daemon's own copies (a snapshot, a build's context, an
imported archive), stops where the daemon's reserve begins; the daemon keeps recording deadlines
and deletes, and what would write for a tenant answers 507 `no_space`, never 500. Each test runs
a daemon on a small ext4 it made, with or without ext4's own reserved blocks."""

import gzip
import http.client
import io
import json
import os
import tarfile
import time

import pytest

from conftest import daemon_on, loop_fs

MiB = 1 << 20


@pytest.fixture(params=[0, 10], ids=["no-reserved-blocks", "reserved-blocks"])
def small(request):
    """(daemon, mount point) on a 256 MiB ext4 with `-m N`% of reserved blocks."""
    with loop_fs("space-", 256 * MiB, ["mkfs.ext4", "-q", "-F", "-m", str(request.param)]) as mnt:
        with daemon_on(os.path.join(mnt, "d")) as d:
            yield d, mnt, request.param


def fs_space(mnt):
    s = os.statvfs(mnt)
    return s.f_bfree * s.f_frsize, s.f_bavail * s.f_frsize


def sh(c, sid, cmd, timeout=120):
    return c.request("POST", "/v1/sandboxes/%s/exec" % sid,
                     json_body={"cmd": ["/bin/sh", "-c", cmd], "timeout": timeout},
                     timeout=timeout + 30).json()


def create(c, **body):
    body.setdefault("timeout", 300)
    return c.request("POST", "/v1/sandboxes", json_body=body, check=False)


FILL = ("dd if=/dev/zero of=/home/user/big bs=1M count=1000 2>/dev/null; "
        "i=0; while head -c 4096 /dev/zero > /home/user/f$i 2>/dev/null; do i=$((i+1)); done; "
        "echo $i")


def test_a_sandbox_that_fills_the_disk_leaves_the_daemon_working(small):
    d, mnt, reserved_pct = small
    c = d.client()
    a = create(c).json()["id"]
    b = create(c).json()["id"]
    p = create(c).json()["id"]
    c.request("POST", "/v1/sandboxes/%s/pause" % p, json_body={"mode": "disk"})
    free0, _ = fs_space(mnt)
    sh(c, a, FILL)
    free, avail = fs_space(mnt)
    assert avail == 0
    if reserved_pct:
        # ext4's reserved blocks stay out of the sandbox's reach: overlayfs never writes into
        # them, whoever mounted it.
        assert free > free0 * reserved_pct // 100 - 2 * MiB, (free, free0)
    # The daemon still records: a neighbour's deadline, a key, a delete.
    r = c.request("POST", "/v1/sandboxes/%s/timeout" % b, json_body={"timeout": 600},
                  check=False)
    assert r.status in (200, 204), r.body
    # New work for a tenant does not start: 507, with a message that says why.
    r = create(c)
    assert r.status == 507, r.body
    body = r.json()
    assert body["code"] == "no_space" and "left for sandboxes" in body["message"], body
    for path, body in [("/v1/sandboxes/%s/snapshots" % b, {}),
                       ("/v1/sandboxes/%s/fork" % b, {"count": 1}),
                       ("/v1/sandboxes/%s/resume" % p, {}),
                       ("/v1/templates/pull", {"name": "p", "image": "127.0.0.1:9/x:1"})]:
        r = c.request("POST", path, json_body=body, check=False)
        assert r.status == 507 and r.json()["code"] == "no_space", (path, r.body)
    # A write into the full sandbox: its own ENOSPC, 507 too.
    r = c.request("PUT", "/v1/sandboxes/%s/files" % a, query={"path": "/home/user/more"},
                  data=bytes(1 << 20), check=False)
    assert r.status == 507 and r.json()["code"] == "no_space", r.body
    # The E2B API says the same, not 500.
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
    conn.request("POST", "/sandboxes", body=json.dumps({"templateID": "base"}),
                 headers={"X-API-KEY": d.admin_key, "Content-Type": "application/json"})
    e = conn.getresponse()
    assert e.status == 507, e.read()
    conn.close()
    # The filling sandbox still answers; freeing its files lets new work start again.
    assert sh(c, a, "rm -rf /home/user/big /home/user/f*; echo ok")["stdout"] == "ok\n"
    r = create(c)
    assert r.status == 201, r.body
    for sid in (a, b, p, r.json()["id"]):
        c.request("DELETE", "/v1/sandboxes/" + sid)
    c.close()


@pytest.fixture
def reserved():
    """A daemon on a 512 MiB ext4 with 40% reserved blocks (and the daemon's own reserve, 5%,
    inside them): what tenants may take is the space left to ordinary writers."""
    with loop_fs("space-r-", 512 * MiB, ["mkfs.ext4", "-q", "-F", "-m", "40"]) as mnt:
        with daemon_on(os.path.join(mnt, "d")) as d:
            yield d, mnt


def free_at_least(mnt, want, wait=5.0):
    """Whether the filesystem's free space comes back to `want` (a file the daemon removed just
    after answering may take a moment)."""
    deadline = time.monotonic() + wait
    while fs_space(mnt)[0] < want and time.monotonic() < deadline:
        time.sleep(0.05)
    return fs_space(mnt)[0] >= want


def tmp_empty(d, wait=10.0):
    tmp = os.path.join(d.state, "layers", ".tmp")
    deadline = time.monotonic() + wait
    while os.listdir(tmp) and time.monotonic() < deadline:
        time.sleep(0.1)
    return os.listdir(tmp) == []


def test_a_snapshot_copy_cannot_take_the_reserved_blocks(reserved):
    """On ext4 a snapshot copies the sandbox's files as the daemon (root): the copy runs with an
    ordinary fsuid and without CAP_SYS_RESOURCE, so it stops where the sandbox itself did."""
    d, mnt = reserved
    c = d.client()
    sid = create(c).json()["id"]
    _, avail = fs_space(mnt)
    # More than half of what ordinary writers may take: its copy cannot fit beside it, though it
    # would below the line, in the 200 MiB kept for root.
    size = (avail // MiB) * 6 // 10
    out = sh(c, sid, "dd if=/dev/zero of=/home/user/big bs=1M count=%d 2>&1; sync" % size)
    assert out["exit_code"] == 0, out
    free_before, avail = fs_space(mnt)
    assert avail > 16 * MiB and avail < size * MiB
    r = c.request("POST", "/v1/sandboxes/%s/snapshots" % sid, json_body={}, check=False,
                  timeout=120)
    assert r.status == 507, r.body
    assert r.json()["code"] == "no_space"
    assert tmp_empty(d)
    assert free_at_least(mnt, free_before - 2 * MiB)
    # The sandbox goes on; with its file gone, a snapshot works again.
    assert sh(c, sid, "rm /home/user/big; echo small > /home/user/s; cat /home/user/s")[
        "stdout"] == "small\n"
    r = c.request("POST", "/v1/sandboxes/%s/snapshots" % sid, json_body={}, timeout=120)
    assert r.status == 201, r.body
    c.request("DELETE", "/v1/snapshots/" + r.json()["id"], check=False)
    c.request("DELETE", "/v1/sandboxes/" + sid)
    c.close()


@pytest.mark.slow
def test_a_build_context_cannot_inflate_into_the_reserve(reserved):
    d, mnt = reserved
    c = d.client()
    _, avail = fs_space(mnt)
    # A gzip of zeros: a few hundred KiB that unpack to more than ordinary writers may take.
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        class Zeros(io.RawIOBase):
            def __init__(self, n):
                self.left = n

            def readable(self):
                return True

            def readinto(self, b):
                n = min(len(b), self.left)
                b[:n] = bytes(n)
                self.left -= n
                return n
        info = tarfile.TarInfo("zeros")
        info.size = avail + 64 * MiB
        t.addfile(info, io.BufferedReader(Zeros(info.size)))
        df = b"FROM base\nCOPY zeros /zeros\n"
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(df)
        t.addfile(info, io.BytesIO(df))
    free_before, _ = fs_space(mnt)
    r = c.request("POST", "/v1/templates/build", query={"name": "bomb"}, data=buf.getvalue(),
                  headers={"Content-Type": "application/x-tar"}, check=False, timeout=300)
    if r.status == 200:
        ev = [json.loads(l) for l in r.body.decode().splitlines() if l]
        assert ev[-1]["type"] == "error" and ev[-1].get("status") == 507, ev[-1]
    else:
        assert r.status == 507, r.body
    assert tmp_empty(d)
    assert free_at_least(mnt, free_before - 2 * MiB)
    r = c.request("GET", "/v1/templates/bomb", check=False)
    assert r.status == 404
    c.close()


@pytest.mark.slow
def test_an_imported_archive_stops_at_the_room(reserved):
    d, mnt = reserved
    c = d.client()
    _, avail = fs_space(mnt)
    free_before, _ = fs_space(mnt)
    body = bytes(avail + 32 * MiB)
    r = c.request("POST", "/v1/templates/import", query={"name": "huge"}, data=body,
                  headers={"Content-Type": "application/x-tar"}, check=False, timeout=300)
    assert r.status == 507, r.body[:300]
    assert r.json()["code"] == "no_space"
    assert tmp_empty(d)
    assert free_at_least(mnt, free_before - 2 * MiB)
    c.close()


def test_the_database_keeps_room_of_its_own(small):
    """With the filesystem full to the last block (no reserved blocks), the database still
    takes new rows: keys, deadlines."""
    d, mnt, reserved_pct = small
    if reserved_pct:
        pytest.skip("the reserved blocks hold the database's room already")
    c = d.client()
    a = create(c).json()["id"]
    sh(c, a, FILL)
    # What little the sandbox could not take, a file of the test's takes (as root).
    with open(os.path.join(mnt, "filler"), "wb") as f:
        try:
            while True:
                f.write(bytes(4096))
                f.flush()
        except OSError:
            pass
    assert fs_space(mnt)[0] < 8 * MiB  # ext4 keeps a few MiB that nobody may write
    import warren.admin as admin
    for i in range(20):
        admin.create_key("full-%d-%d" % (os.getpid(), i), client=c)
    r = c.request("POST", "/v1/sandboxes/%s/timeout" % a, json_body={"timeout": 900},
                  check=False)
    assert r.status in (200, 204), r.body
    os.unlink(os.path.join(mnt, "filler"))
    c.request("DELETE", "/v1/sandboxes/" + a)
    c.close()
