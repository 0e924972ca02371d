"""Moving a sandbox paused to disk from one node to another through a shared object store
(POST /node/sandboxes/{id}/export on the node that holds it, POST /node/sandboxes/import on the
other; src/core/move.h): two node daemons on loopback share a file:// store."""

import json
import os
import shutil
import tempfile
import threading
import time
import urllib.error
import urllib.request

import pytest

import warren
from conftest import Daemon, daemon_on, delete_all, loop_fs

TOKEN = "move-test-node-token-0123456789"
NODE_ARGS = []  # the nodes' arguments (their token file and store), set by the fixture


@pytest.fixture(scope="module")
def nodes():
    """Two node daemons (A, B) sharing a file:// object store: (A, B, the store's directory)."""
    top = tempfile.mkdtemp(prefix="warren-move-")
    store = os.path.join(top, "store")
    os.mkdir(store)
    token = os.path.join(top, "token")
    with open(token, "w") as f:
        f.write(TOKEN + "\n")
    args = ("--role", "node", "--node-token-file", token, "--object-store", "file://" + store)
    NODE_ARGS[:] = args
    a = Daemon(*args).start()
    b = Daemon(*args).start()
    try:
        yield a, b, store
    finally:
        for d in (a, b):
            try:
                delete_all(d)
            finally:
                d.cleanup()
        shutil.rmtree(top, ignore_errors=True)


def node_post(d, path, body, token=TOKEN, team=None):
    """POST a node route on d's TCP listener: (status, JSON answer)."""
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = "Bearer " + token
    if team is not None:
        headers["Warren-Team"] = team
    req = urllib.request.Request(d.tcp_url + path, data=json.dumps(body).encode(), headers=headers,
                                 method="POST")
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def paused_on_disk(d, content, **kw):
    """A sandbox on d with /root/moved.txt holding content, paused to disk."""
    c = d.client()
    sb = warren.Sandbox.create(client=c, timeout=300, metadata={"job": "move"}, env={"WHO": "a"}, **kw)
    sb.files.write("/root/moved.txt", content)
    # A whiteout (a file of the image deleted), an opaque directory (one of the image's made
    # again), a hard link and a symlink.
    r = sb.commands.run("rm /etc/motd && rm -rf /usr && mkdir -p /usr/only /root/d && echo x > /root/d/f"
                        " && ln /root/d/f /root/d/hard && ln -s f /root/d/link")
    assert r.exit_code == 0, r
    assert sb.pause(mode="disk").paused_mode == "disk"
    return sb


def test_move_between_nodes(nodes):
    a, b, store = nodes
    sb = paused_on_disk(a, b"moved across nodes\n", network=True, internet=False,
                        allow_out=["192.0.2.1"])
    sid = sb.sandbox_id

    st, r = node_post(a, "/node/sandboxes/%s/export" % sid, {})
    assert st == 200, r
    assert r["manifest"].startswith("sandboxes/%s/" % sid) and r["manifest"].endswith(".json")
    assert r["layers"] >= 2 and r["bytes"] > 0
    with open(os.path.join(store, r["manifest"])) as f:
        man = json.load(f)
    assert man["id"] == sid and man["team"] == "admin"
    assert man["metadata"] == {"job": "move"} and man["env"] == {"WHO": "a"}
    assert man["writable"]["digest"].startswith("sha256:")
    for blob in man["layers"] + [man["writable"]]:
        assert os.path.exists(os.path.join(store, "blobs/sha256", blob["digest"][7:]))
    # The sandbox is still A's, paused to disk; a second export writes the same manifest.
    st, r2 = node_post(a, "/node/sandboxes/%s/export" % sid, {})
    assert st == 200 and r2["manifest"] == r["manifest"], r2

    st, imp = node_post(b, "/node/sandboxes/import", {"manifest": r["manifest"]})
    assert st == 200, imp
    assert imp["id"] == sid and imp["state"] == "paused" and imp["paused_mode"] == "disk"
    assert imp["metadata"] == {"job": "move"}
    assert 0 < imp["remaining_ms"] <= 300000 and imp["timeout"] == 300
    # Its network comes along with its policy, on a slot of B's pool.
    assert man["network"]["enabled"] and man["network"]["allow_out"] == ["192.0.2.1"]
    assert imp["network"]["enabled"] and imp["network"]["allow_out"] == ["192.0.2.1"], imp
    assert imp["network"]["address"] not in (None, man["network"]["address"]), imp

    # Importing it again on B: it is there already.
    st, again = node_post(b, "/node/sandboxes/import", {"manifest": r["manifest"]})
    assert st == 409, again

    # A's copy goes (the gateway deletes it once B has it); B resumes it with its files.
    sb.kill()
    cb = b.client()
    moved = warren.Sandbox.connect(sid, client=cb)
    info = moved.resume()
    assert info.state == "running"
    addr = imp["network"]["address"]
    r = moved.commands.run("ip -4 addr 2>/dev/null || ifconfig")
    assert addr in r.stdout, (addr, r.stdout)
    assert moved.files.read("/root/moved.txt") == "moved across nodes\n"
    out = moved.commands.run("cat /root/d/link; echo $WHO; test -e /etc/motd && echo motd || echo gone;"
                             " ls /usr; stat -c %i /root/d/f /root/d/hard | uniq | wc -l;"
                             " cat /etc/passwd | head -1 | cut -d: -f1")
    assert out.stdout.split() == ["x", "a", "gone", "only", "1", "root"], out
    moved.kill()


def test_a_sandbox_being_exported_is_busy(nodes):
    """While its export runs (its tars are being written in the layer store's .tmp), the sandbox
    can neither be resumed nor exported again (409); once it is done, it resumes."""
    a, _, _ = nodes
    c = a.client()
    tmp = os.path.join(a.state, "layers", ".tmp")
    sb = warren.Sandbox.create(client=c, timeout=120)
    try:
        sb.commands.run("dd if=/dev/urandom of=/root/big bs=1M count=256 2>/dev/null")
        sb.pause(mode="disk")
        done = {}
        t = threading.Thread(target=lambda: done.update(
            r=node_post(a, "/node/sandboxes/%s/export" % sb.sandbox_id, {})))
        t.start()
        while t.is_alive() and not os.listdir(tmp):
            time.sleep(0.005)
        busy = t.is_alive()
        if busy:
            with pytest.raises(warren.ConflictError):
                sb.resume()
            st, r = node_post(a, "/node/sandboxes/%s/export" % sb.sandbox_id, {})
        t.join()
        assert done["r"][0] == 200, done
        if not busy:
            pytest.skip("the export was over before the test saw it run")
        assert st == 409 and "being" in r["message"], r
        assert sb.resume().state == "running"
    finally:
        sb.kill()


def test_export_refusals(nodes):
    a, b, _ = nodes
    c = a.client()
    sb = warren.Sandbox.create(client=c, timeout=120)
    try:
        # Running: not paused to disk.
        st, r = node_post(a, "/node/sandboxes/%s/export" % sb.sandbox_id, {})
        assert st == 409 and "paused to disk" in r["message"], r
        # Paused in memory: neither.
        sb.pause()
        st, r = node_post(a, "/node/sandboxes/%s/export" % sb.sandbox_id, {})
        assert st == 409, r
        # Unknown sandbox.
        st, r = node_post(a, "/node/sandboxes/nosuchsandbox/export", {})
        assert st == 404, r
        # Another team's sandbox is not found for that team.
        sb.resume()
        sb.pause(mode="disk")
        st, r = node_post(a, "/node/sandboxes/%s/export" % sb.sandbox_id, {}, team="other")
        assert st == 404, r
        # No node token: refused before anything.
        st, r = node_post(a, "/node/sandboxes/%s/export" % sb.sandbox_id, {}, token=None)
        assert st in (401, 403), r
        st, r = node_post(a, "/node/sandboxes/%s/export" % sb.sandbox_id, {}, token="wrong-token-0123456789")
        assert st in (401, 403), r
    finally:
        sb.kill()


def test_import_refusals(nodes):
    a, b, store = nodes
    before = sorted(os.listdir(os.path.join(b.state, "layers")))
    # A key the store does not have.
    st, r = node_post(b, "/node/sandboxes/import", {"manifest": "sandboxes/abc/" + "0" * 64 + ".json"})
    assert st == 404, r
    # Malformed keys and bodies.
    for body in ({"manifest": "../etc/passwd"}, {"manifest": "blobs/sha256/00"}, {}, {"manifest": 3}):
        st, r = node_post(b, "/node/sandboxes/import", body)
        assert st == 400, (body, r)
    # A manifest whose blob is missing: nothing of it stays on B.
    sb = paused_on_disk(a, b"x")
    try:
        st, exp = node_post(a, "/node/sandboxes/%s/export" % sb.sandbox_id, {})
        assert st == 200, exp
        with open(os.path.join(store, exp["manifest"])) as f:
            man = json.load(f)
        wblob = os.path.join(store, "blobs/sha256", man["writable"]["digest"][7:])
        os.rename(wblob, wblob + ".away")
        try:
            st, r = node_post(b, "/node/sandboxes/import", {"manifest": exp["manifest"]})
            assert st == 404, r
        finally:
            os.rename(wblob + ".away", wblob)
        assert list(warren.Sandbox.list(client=b.client())) == []
        assert sb.sandbox_id not in os.listdir(os.path.join(b.state, "sandboxes"))
        # A manifest that is not what its key says.
        bad = exp["manifest"].rsplit("/", 1)[0] + "/" + "1" * 64 + ".json"
        shutil.copyfile(os.path.join(store, exp["manifest"]), os.path.join(store, bad))
        st, r = node_post(b, "/node/sandboxes/import", {"manifest": bad})
        os.unlink(os.path.join(store, bad))
        assert st == 422 and r["code"] == "bad_content", r
        # Another team cannot import it.
        st, r = node_post(b, "/node/sandboxes/import", {"manifest": exp["manifest"]}, team="other")
        assert st == 404, r
        # Without the token.
        st, r = node_post(b, "/node/sandboxes/import", {"manifest": exp["manifest"]}, token=None)
        assert st in (401, 403), r
    finally:
        sb.kill()
    # The layers the failed import unpacked were collected again (the collector renames them
    # into layers/.tmp on the loop and removes them on a worker).
    for _ in range(100):
        now = sorted(os.listdir(os.path.join(b.state, "layers")))
        tmp = os.listdir(os.path.join(b.state, "layers", ".tmp"))
        if now == before and tmp == []:
            break
        time.sleep(0.1)
    assert now == before and tmp == []


def test_move_a_snapshot(nodes):
    """A snapshot moves as an image: its layers and its record (id, name, team); sandboxes start
    from it on the other node."""
    a, b, store = nodes
    ca, cb = a.client(), b.client()
    sb = warren.Sandbox.create(client=ca, timeout=120)
    try:
        sb.files.write("/root/snap.txt", b"from a snapshot\n")
        snap = sb.snapshot(name="moving-snap")
    finally:
        sb.kill()
    sid = None
    try:
        st, exp = node_post(a, "/node/images/export", {"image": "moving-snap"})
        assert st == 200, exp
        assert exp["manifest"].startswith("images/%s/" % snap.id) and exp["layers"] >= 2, exp
        st, imp = node_post(b, "/node/images/import", {"manifest": exp["manifest"]})
        assert st == 200, imp
        assert imp["id"] == snap.id and imp["kind"] == "snapshot" and imp["name"] == "moving-snap"
        st, again = node_post(b, "/node/images/import", {"manifest": exp["manifest"]})
        assert st == 409, again
        moved = warren.Sandbox.create(client=cb, template="moving-snap", timeout=120)
        sid = moved.sandbox_id
        assert moved.files.read("/root/snap.txt") == "from a snapshot\n"
        moved.kill()
        sid = None
        # Refusals: a directory template, an unknown image, a sandbox's key, no token.
        st, r = node_post(a, "/node/images/export", {"image": "base"})
        assert st == 409, r
        st, r = node_post(a, "/node/images/export", {"image": "nosuch"})
        assert st == 404, r
        st, r = node_post(b, "/node/images/import", {"manifest": "sandboxes/x/" + "0" * 64 + ".json"})
        assert st == 400, r
        st, r = node_post(a, "/node/images/export", {"image": "moving-snap"}, token=None)
        assert st in (401, 403), r
    finally:
        if sid is not None:
            warren.Sandbox.connect(sid, client=cb).kill()
        for c in (ca, cb):
            c.request("DELETE", "/v1/snapshots/" + snap.id, check=False)


def test_imported_sandbox_outlives_a_restart(nodes):
    a, b, _ = nodes
    sb = paused_on_disk(a, b"still here\n")
    try:
        st, exp = node_post(a, "/node/sandboxes/%s/export" % sb.sandbox_id, {})
        assert st == 200, exp
        st, imp = node_post(b, "/node/sandboxes/import", {"manifest": exp["manifest"]})
        assert st == 200, imp
    finally:
        sb.kill()
    b.stop()
    b.start()
    moved = warren.Sandbox.connect(sb.sandbox_id, client=b.client())
    assert moved.get_info().paused_mode == "disk"
    moved.resume()
    assert moved.files.read("/root/moved.txt") == "still here\n"
    moved.kill()


def test_kill_9_during_an_import_leaves_nothing(nodes):
    """A daemon killed once the home is made but before the record says paused tears the
    sandbox down at its next start (its record says error, as a create cut short); deleted,
    the import can be done again."""
    a, _, _ = nodes
    sb = paused_on_disk(a, b"again\n")
    c = Daemon(*NODE_ARGS, env={"WARREN_CRASH": "imported"}).start()
    try:
        st, exp = node_post(a, "/node/sandboxes/%s/export" % sb.sandbox_id, {})
        assert st == 200, exp
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            node_post(c, "/node/sandboxes/import", {"manifest": exp["manifest"]})
        assert c.proc.wait(timeout=30) == -9, "the daemon did not crash"
        c.env.pop("WARREN_CRASH")
        c.start()
        cc = c.client()
        info = warren.Sandbox.connect(sb.sandbox_id, client=cc).get_info()
        assert info.state == "error", info
        assert sb.sandbox_id not in os.listdir(os.path.join(c.state, "sandboxes"))
        cc.request("DELETE", "/v1/sandboxes/" + sb.sandbox_id)
        st, imp = node_post(c, "/node/sandboxes/import", {"manifest": exp["manifest"]})
        assert st == 200, imp
        moved = warren.Sandbox.connect(sb.sandbox_id, client=cc)
        moved.resume()
        assert moved.files.read("/root/moved.txt") == "again\n"
        moved.kill()
    finally:
        sb.kill()
        try:
            delete_all(c)
        finally:
            c.cleanup()


def test_move_keeps_the_disk_limit_on_btrfs():
    """Nodes whose homes are btrfs subvolumes with qgroups: the imported home gets the
    sandbox's disk limit before its files are unpacked into it, and the limit holds after the
    resume."""
    with loop_fs("move-btrfs-", 1 << 30, ["mkfs.btrfs", "-q"]) as mnt:
        store, token = os.path.join(mnt, "store"), os.path.join(mnt, "token")
        os.mkdir(store)
        with open(token, "w") as f:
            f.write(TOKEN + "\n")
        args = ("--role", "node", "--node-token-file", token, "--object-store", "file://" + store)
        with daemon_on(tempfile.mkdtemp(dir=mnt), *args) as a, \
                daemon_on(tempfile.mkdtemp(dir=mnt), *args) as b:
            sb = warren.Sandbox.create(client=a.client(), disk_mb=32, timeout=120)
            sb.files.write("/root/keep.txt", b"kept")
            sb.pause(mode="disk")
            st, exp = node_post(a, "/node/sandboxes/%s/export" % sb.sandbox_id, {})
            assert st == 200, exp
            st, imp = node_post(b, "/node/sandboxes/import", {"manifest": exp["manifest"]})
            assert st == 200 and imp["disk_mb"] == 32, imp
            sb.kill()
            cb = b.client()
            moved = warren.Sandbox.connect(sb.sandbox_id, client=cb)
            moved.resume()
            assert moved.files.read("/root/keep.txt") == "kept"
            disk = cb.request("GET", "/v1/sandboxes/%s/disk" % sb.sandbox_id).json()
            assert disk["limit_bytes"] == 32 << 20 and disk["enforced_by"] == "btrfs-qgroup", disk
            r = moved.commands.run("dd if=/dev/zero of=/root/fill bs=1M count=64 2>&1 && sync", check=False)
            assert r.exit_code != 0 and "quota" in r.stdout.lower(), r
            moved.kill()
