"""Images through the real daemon: writable layers on disk, snapshots, forks, pause to disk and
the layer store's collection, on the plain disk (ext4 here) and on a loop-mounted btrfs made by
the test. The API is driven with the SDK's raw client, so these tests do not depend on the CLI
or on SDK helpers for the same routes."""

import json
import os
import tempfile
import time

import pytest

import warren
from conftest import Daemon, LoopMountError, cgroup_dirs, daemon_on, delete_all, homes, loop_fs

BACKENDS = ("ns", "gvisor")  # every test on the module's daemon runs on both (conftest.py)


def api(client, method, path, body=None, status=None):
    r = client.request(method, path, json_body=body, check=False)
    if status is not None:
        assert r.status == status, (r.status, r.body)
    return r


def create(client, template="base", timeout=120, **kw):
    body = dict(template=template, timeout=timeout, **kw)
    return api(client, "POST", "/v1/sandboxes", body, 201).json()["id"]


def sh(client, sid, cmd, user=None):
    body = {"cmd": ["/bin/sh", "-c", cmd]}
    if user:
        body["user"] = user
    r = api(client, "POST", "/v1/sandboxes/%s/exec" % sid, body, 200).json()
    return r


def out(client, sid, cmd):
    r = sh(client, sid, cmd)
    assert r["exit_code"] == 0, (cmd, r)
    return r["stdout"]


def layer_dirs(d):
    p = os.path.join(d.state, "layers")
    return sorted(x for x in os.listdir(p) if not x.startswith("."))


PREPARE = (
    "mkdir -p /work/sub /gone-dir/inner && echo hello > /work/a.txt && echo deep > /work/sub/b && "
    "ln /work/a.txt /work/hard && ln -s a.txt /work/link && chmod 4755 /work/sub/b && "
    "chown 1000:1000 /work/sub && rm /bin/true && rm -rf /gone-dir && mkdir /etc/opaque-test && "
    "mkfifo /work/fifo"
)
CHECK = (
    "cat /work/a.txt /work/sub/b; stat -c '%u:%g %a' /work/sub /work/sub/b; "
    "test -e /bin/true && echo true-exists; test -e /gone-dir && echo gone-exists; "
    "readlink /work/link; stat -c %h /work/hard; test -p /work/fifo && echo fifo"
)
EXPECTED = "hello\ndeep\n1000:1000 755\n0:0 4755\na.txt\n2\nfifo\n"


def check_fs(daemon, capture, backend="ns"):
    """Snapshot a sandbox with every kind of change and start another from it. On gvisor a
    named pipe made inside lives in gVisor's memory, never in the writable layer (isolation.md),
    so the copy has none."""
    expected = EXPECTED if backend == "ns" else EXPECTED.replace("fifo\n", "")
    c = daemon.client()
    sid = create(c)
    out(c, sid, PREPARE)
    snap = api(c, "POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": "prepared"}, 201).json()
    assert snap["capture"] == capture and snap["sandbox_id"] == sid
    assert snap["layers"] == 2 and snap["freeze_ms"] >= 0
    # The parent goes on, unfrozen.
    assert out(c, sid, "echo alive") == "alive\n"
    # By id and by name.
    for ref in (snap["id"], "prepared"):
        child = create(c, template=ref)
        assert sh(c, child, CHECK)["stdout"] == expected
        api(c, "DELETE", "/v1/sandboxes/" + child, status=204)
    # The layer is stored with the sandbox's own ids (root 0:0), whatever its uid range was.
    (digest,) = layer_dirs(daemon)
    st = os.stat(os.path.join(daemon.state, "layers", digest, "fs", "work", "sub"))
    assert (st.st_uid, st.st_gid) == (1000, 1000)
    # Deleting the snapshot and the sandbox leaves no layer and no writable layer.
    api(c, "DELETE", "/v1/snapshots/prepared", status=204)
    api(c, "DELETE", "/v1/sandboxes/" + sid, status=204)
    deadline = time.monotonic() + 10
    while (layer_dirs(daemon) or homes(daemon)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert layer_dirs(daemon) == [] and homes(daemon) == []
    c.close()


def test_snapshot_on_plain_disk(daemon, backend):
    check_fs(daemon, "copy", backend)


def test_writable_layer_is_stored_with_sandbox_ids(daemon, client):
    sid = create(client)
    out(client, sid, "echo x > /root-file && su -s /bin/sh -c 'echo y > /tmp/u' nobody || true")
    st = os.stat(os.path.join(daemon.state, "sandboxes", sid, "upper", "root-file"))
    assert (st.st_uid, st.st_gid) == (0, 0)
    api(client, "DELETE", "/v1/sandboxes/" + sid, status=204)
    assert sid not in homes(daemon)


def test_fork_copies_files_and_parent_keeps_running(daemon, client):
    sid = create(client, metadata={"role": "parent"}, env={"FROM": "parent"})
    out(client, sid, "echo state > /root/s")
    api(client, "POST", "/v1/sandboxes/%s/exec" % sid,
        {"cmd": ["/bin/sh", "-c", "i=0; while :; do i=$((i+1)); echo $i > /tmp/tick; sleep 0.05; done"],
         "mode": "background"}, 201)
    r = api(client, "POST", "/v1/sandboxes/%s/fork" % sid, {"count": 3, "timeout": 60}, 201).json()
    assert len(r["sandboxes"]) == 3 and r["errors"] == [] and r["freeze_ms"] >= 0
    ids = [s["id"] for s in r["sandboxes"]]
    assert len(set(ids + [sid])) == 4
    # A copy shows its parent's template (the snapshot it came from is dropped).
    assert {s["template"] for s in r["sandboxes"]} == {"base"}
    for child in ids:
        assert out(client, child, "cat /root/s; echo $FROM") == "state\nparent\n"
        assert r["sandboxes"][0]["metadata"] == {"role": "parent"}
        # Its own writable layer: a change in one copy is not seen by another or the parent.
        out(client, child, "echo %s > /root/s" % child)
    assert out(client, sid, "cat /root/s") == "state\n"
    t1 = out(client, sid, "cat /tmp/tick")
    time.sleep(0.3)
    assert out(client, sid, "cat /tmp/tick") != t1, "the parent's process stopped"
    # The fork's snapshot is not kept; its layer lives while the copies do.
    assert api(client, "GET", "/v1/snapshots", status=200).json()["snapshots"] == []
    assert len(layer_dirs(daemon)) == 1
    for child in ids:
        api(client, "DELETE", "/v1/sandboxes/" + child, status=204)
    deadline = time.monotonic() + 10
    while layer_dirs(daemon) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert layer_dirs(daemon) == []
    api(client, "DELETE", "/v1/sandboxes/" + sid, status=204)


def test_fork_and_snapshot_bad_input(daemon, client):
    sid = create(client)
    base = "/v1/sandboxes/%s/" % sid
    for body in ({"count": 0}, {"count": 101}, {"count": "3"}, {"timeout": -1},
                 {"metadata": {"a": 1}}, {"colour": "red"}):
        r = api(client, "POST", base + "fork", body, 400)
        assert r.json()["code"] == "invalid"
    api(client, "POST", "/v1/sandboxes/nope/fork", {"count": 1}, 404)
    api(client, "POST", "/v1/sandboxes/nope/snapshots", {}, 404)
    for name in ("../x", "", "snap-abc", "a" * 65, ".hidden"):
        api(client, "POST", base + "snapshots", {"name": name}, 400)
    api(client, "POST", base + "snapshots", {"name": "one"}, 201)
    r = api(client, "POST", base + "snapshots", {"name": "one"}, 409)
    assert "exists" in r.json()["message"]
    api(client, "GET", "/v1/snapshots/nope", status=404)
    api(client, "DELETE", "/v1/snapshots/nope", status=404)
    api(client, "POST", "/v1/sandboxes", {"template": "no-such-snapshot"}, 404)
    # A stopped sandbox cannot be captured.
    api(client, "DELETE", "/v1/sandboxes/" + sid, status=204)
    api(client, "POST", base + "snapshots", {}, 404)
    api(client, "DELETE", "/v1/snapshots/one", status=204)


def test_snapshots_are_per_team(daemon, client):
    import warren.admin as admin
    other_key = admin.create_key("other-%d" % os.getpid(), client=client).key
    other = daemon.client(key=other_key, tcp=True)
    sid = create(client)
    snap = api(client, "POST", "/v1/sandboxes/%s/snapshots" % sid, {}, 201).json()
    api(other, "GET", "/v1/snapshots/" + snap["id"], status=404)
    api(other, "DELETE", "/v1/snapshots/" + snap["id"], status=404)
    api(other, "POST", "/v1/sandboxes", {"template": snap["id"]}, 404)
    assert api(other, "GET", "/v1/snapshots", status=200).json()["snapshots"] == []
    listed = api(client, "GET", "/v1/snapshots?sandbox_id=" + sid, status=200).json()
    assert [s["id"] for s in listed["snapshots"]] == [snap["id"]]
    api(client, "DELETE", "/v1/snapshots/" + snap["id"], status=204)
    api(client, "DELETE", "/v1/sandboxes/" + sid, status=204)
    other.close()


def test_pause_to_disk_keeps_files_ends_processes(daemon, client, backend):
    """On ns the processes end (files kept); on gvisor they are checkpointed and kept."""
    gv = backend == "gvisor"
    sid = create(client)
    out(client, sid, "echo kept > /root/f")
    api(client, "POST", "/v1/sandboxes/%s/exec" % sid,
        {"cmd": ["/bin/sleep", "1000"], "mode": "background"}, 201)
    r = api(client, "POST", "/v1/sandboxes/%s/pause" % sid, {"mode": "disk"}, 200).json()
    assert r["state"] == "paused" and r["paused_mode"] == "disk"
    # No process of it is left: its cgroups are gone with its init.
    assert not [c for c in cgroup_dirs() if c.endswith("/" + sid)]
    api(client, "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["true"]}, 409)
    r = api(client, "POST", "/v1/sandboxes/%s/resume" % sid, {}, 200).json()
    assert r["state"] == "running" and r["processes_kept"] is gv
    assert out(client, sid, "cat /root/f") == "kept\n"
    assert ("sleep 1000" in out(client, sid, "ps -eo args")) is gv
    # A memory pause keeps them, and says so.
    api(client, "POST", "/v1/sandboxes/%s/exec" % sid,
        {"cmd": ["/bin/sleep", "1001"], "mode": "background"}, 201)
    api(client, "POST", "/v1/sandboxes/%s/pause" % sid, {"mode": "memory"}, 200)
    r = api(client, "POST", "/v1/sandboxes/%s/resume" % sid, {}, 200).json()
    assert r["processes_kept"] is True
    assert "sleep 1001" in out(client, sid, "ps -eo args")
    api(client, "DELETE", "/v1/sandboxes/" + sid, status=204)


def test_delete_and_snapshot_while_paused_to_disk(daemon, client):
    sid = create(client)
    out(client, sid, "echo on-disk > /root/f")
    api(client, "POST", "/v1/sandboxes/%s/pause" % sid, {"mode": "disk"}, 200)
    snap = api(client, "POST", "/v1/sandboxes/%s/snapshots" % sid, {}, 201).json()
    assert snap["freeze_ms"] == 0
    child = create(client, template=snap["id"])
    assert out(client, child, "cat /root/f") == "on-disk\n"
    api(client, "DELETE", "/v1/sandboxes/" + sid, status=204)
    assert sid not in homes(daemon)
    api(client, "DELETE", "/v1/sandboxes/" + child, status=204)
    api(client, "DELETE", "/v1/snapshots/" + snap["id"], status=204)


def test_paused_to_disk_survives_daemon_restart():
    d = Daemon().start()
    try:
        c = d.client()
        sid = create(c)
        out(c, sid, "echo across > /root/f")
        api(c, "POST", "/v1/sandboxes/%s/pause" % sid, {"mode": "disk"}, 200)
        c.close()
        d.kill9()
        d.start()
        c = d.client()
        info = api(c, "GET", "/v1/sandboxes/" + sid, status=200).json()
        assert info["state"] == "paused" and info["paused_mode"] == "disk"
        api(c, "POST", "/v1/sandboxes/%s/resume" % sid, {}, 200)
        assert out(c, sid, "cat /root/f") == "across\n"
        c.close()
    finally:
        delete_all(d)
        d.cleanup()


def test_templates_list_and_directory_templates(daemon, client):
    ts = api(client, "GET", "/v1/templates", status=200).json()["templates"]
    base = [t for t in ts if t["name"] == "base"]
    assert base and base[0]["kind"] == "dir"
    assert api(client, "GET", "/v1/templates/base", status=200).json()["kind"] == "dir"
    api(client, "GET", "/v1/templates/nope", status=404)
    r = api(client, "DELETE", "/v1/templates/base", status=409)
    assert "directory" in r.json()["message"]
    api(client, "DELETE", "/v1/templates/nope", status=404)


# ---- btrfs: captures are subvolume snapshots ---------------------------------------------------


@pytest.fixture(scope="module")
def btrfs_dir():
    with loop_fs("layer-btrfs-", 1 << 30, ["mkfs.btrfs", "-q"]) as mnt:
        yield mnt


@pytest.fixture
def btrfs_daemon(btrfs_dir):
    with daemon_on(tempfile.mkdtemp(dir=btrfs_dir)) as d:
        yield d


@pytest.fixture(scope="module")
def xfs_dir():
    """A loop-mounted XFS with reflinks."""
    with loop_fs("layer-xfs-", 1 << 30, ["mkfs.xfs", "-q", "-m", "reflink=1"]) as mnt:
        yield mnt


def test_snapshot_on_xfs_clones_extents(xfs_dir):
    with daemon_on(tempfile.mkdtemp(dir=xfs_dir)) as d:
        check_fs(d, "reflink-copy")
        # A captured file shares its extents with the sandbox's: a 64 MB file costs (almost)
        # no new space in the layer store.
        c = d.client()
        sid = create(c)
        out(c, sid, "head -c 64000000 /dev/urandom > /root/big && sync")
        before = os.statvfs(xfs_dir)
        snap = api(c, "POST", "/v1/sandboxes/%s/snapshots" % sid, {}, 201).json()
        after = os.statvfs(xfs_dir)
        used = (before.f_bfree - after.f_bfree) * before.f_frsize
        assert snap["capture"] == "reflink-copy" and used < 16 << 20, used
        child = create(c, template=snap["id"])
        assert out(c, child, "wc -c < /root/big") == "64000000\n"
        c.close()


def test_snapshot_on_btrfs(btrfs_daemon):
    check_fs(btrfs_daemon, "btrfs-snapshot")


def test_fork_and_disk_pause_on_btrfs(btrfs_daemon):
    c = btrfs_daemon.client()
    sid = create(c)
    out(c, sid, "head -c 50000000 /dev/zero > /root/big && echo x > /root/small")
    r = api(c, "POST", "/v1/sandboxes/%s/fork" % sid, {"count": 2}, 201).json()
    assert r["capture"] == "btrfs-snapshot" and len(r["sandboxes"]) == 2
    for s in r["sandboxes"]:
        assert out(c, s["id"], "wc -c < /root/big; cat /root/small") == "50000000\nx\n"
    api(c, "POST", "/v1/sandboxes/%s/pause" % sid, {"mode": "disk"}, 200)
    api(c, "POST", "/v1/sandboxes/%s/resume" % sid, {}, 200)
    assert out(c, sid, "cat /root/small") == "x\n"
    c.close()


# ---- disk limits ------------------------------------------------------------------------------


def fill(client, sid, mb):
    """Write mb MiB into the sandbox's writable layer; the shell's answer."""
    return sh(client, sid, "dd if=/dev/zero of=/root/fill bs=1M count=%d 2>&1 && sync" % mb)


def test_disk_limit_is_refused_where_it_cannot_be_enforced(daemon, client):
    before = homes(daemon)
    r = api(client, "POST", "/v1/sandboxes", {"template": "base", "disk_mb": 64}, 501)
    assert r.json()["code"] == "unsupported"
    assert "quota" in r.json()["message"] and "cannot be enforced" in r.json()["message"]
    for bad in (0, 15, "64", -1):
        api(client, "POST", "/v1/sandboxes", {"template": "base", "disk_mb": bad}, 400)
    assert homes(daemon) == before
    # Without a limit, disk use is still reported.
    sid = create(client)
    out(client, sid, "head -c 3000000 /dev/zero > /root/three-mb")
    d = api(client, "GET", "/v1/sandboxes/%s/disk" % sid, status=200).json()
    assert d["limit_bytes"] is None and d["enforced_by"] is None
    assert 3000000 <= d["used_bytes"] < 4000000
    api(client, "GET", "/v1/sandboxes/nope/disk", status=404)
    api(client, "DELETE", "/v1/sandboxes/" + sid, status=204)


def check_limit(d, method):
    c = d.client()
    sid = create(c, disk_mb=32)
    assert api(c, "GET", "/v1/sandboxes/" + sid, status=200).json()["disk_mb"] == 32
    r = fill(c, sid, 64)
    assert r["exit_code"] != 0 and "quota" in r["stdout"].lower(), r
    disk = api(c, "GET", "/v1/sandboxes/%s/disk" % sid, status=200).json()
    assert disk["limit_bytes"] == 32 << 20 and disk["enforced_by"] == method
    assert disk["used_bytes"] <= (33 << 20)
    # Room comes back when files go; a fork keeps the limit.
    out(c, sid, "rm /root/fill && head -c 1000000 /dev/zero > /root/small")
    f = api(c, "POST", "/v1/sandboxes/%s/fork" % sid, {"count": 1}, 201).json()
    child = f["sandboxes"][0]["id"]
    assert f["sandboxes"][0]["disk_mb"] == 32
    assert fill(c, child, 64)["exit_code"] != 0
    # Another sandbox without a limit is not held by it.
    free = create(c)
    assert fill(c, free, 40)["exit_code"] == 0
    c.close()


def test_disk_limit_on_btrfs(btrfs_daemon):
    check_limit(btrfs_daemon, "btrfs-qgroup")


@pytest.fixture
def prjquota_daemon():
    """A daemon on an ext4 made by the test with project quotas on."""
    try:
        fs = loop_fs("layer-prjquota-", 512 << 20, ["mkfs.ext4", "-q", "-F", "-O", "quota,project"],
                     "loop,prjquota")
        mnt = fs.__enter__()
    except LoopMountError:
        # This machine's kernel is built without CONFIG_QUOTA ("EXT4-fs: The kernel was not
        # built with CONFIG_QUOTA and CONFIG_QFMT_V2"): ext4 cannot mount with project quotas.
        pytest.skip("this kernel cannot mount ext4 with project quotas (no CONFIG_QUOTA)")
    try:
        with daemon_on(os.path.join(mnt, "d")) as d:
            yield d
    finally:
        fs.__exit__(None, None, None)


def test_disk_limit_with_ext4_project_quotas(prjquota_daemon):
    check_limit(prjquota_daemon, "project-quota")


def test_disk_limit_through_cli_and_sdk(btrfs_daemon):
    import warren
    from conftest import warren as warren_cli
    c = btrfs_daemon.client()
    with warren.Sandbox.create(client=c, disk_mb=24, timeout=60) as sb:
        assert sb.get_info().disk_mb == 24
    env = {"WARREN_API_URL": btrfs_daemon.url}
    r = warren_cli("create", "--disk", "20M", "-o", "json", env=env)
    assert r.returncode == 0, r.stderr
    sid = json.loads(r.stdout)["id"]
    assert api(c, "GET", "/v1/sandboxes/" + sid, status=200).json()["disk_mb"] == 20
    assert warren_cli("rm", sid, env=env).returncode == 0
    r = warren_cli("create", "--disk", "lots", env=env)
    assert r.returncode != 0 and r.stderr.count(b"\n") == 1
    c.close()


def test_disk_limit_refused_by_cli_and_sdk_on_plain_disk(daemon, client):
    import warren
    from conftest import warren as warren_cli
    with pytest.raises(warren.UnsupportedError):
        warren.Sandbox.create(client=client, disk_mb=64)
    r = warren_cli("create", "--disk", "64M", env={"WARREN_API_URL": daemon.url})
    assert r.returncode != 0 and b"cannot be enforced" in r.stderr


# ---- metrics ---------------------------------------------------------------------------------


def test_metrics_sample_cpu_and_memory(daemon, client):
    sid = create(client, memory_mb=256, cpus=0.5)
    out(client, sid, "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done")
    m = api(client, "GET", "/v1/sandboxes/%s/metrics" % sid, status=200).json()["samples"]
    assert len(m) >= 1
    last = m[-1]
    assert last["cpu_count"] == 1 and last["memory_limit_bytes"] == 256 << 20
    assert 0 < last["memory_bytes"] < 256 << 20
    # The busy loop used a good part of its half CPU since the sample taken at create.
    assert last["cpu_pct"] > 5, last
    time.sleep(1)
    idle = api(client, "GET", "/v1/sandboxes/%s/metrics" % sid, status=200).json()["samples"]
    # One more sample (taken by this query), or two if the 5 s sampler ticked meanwhile.
    assert len(m) + 1 <= len(idle) <= len(m) + 2 and idle[-1]["cpu_pct"] < last["cpu_pct"]
    api(client, "GET", "/v1/sandboxes/nope/metrics", status=404)
    api(client, "DELETE", "/v1/sandboxes/" + sid, status=204)


# ---- stacks: never the same layer twice, never an empty one (issue #14, item 13) ------------


def stack_of(d, sid):
    """The layer refs a sandbox's record says it runs on, bottom first."""
    import sqlite3
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(d.state, "warren.db"), uri=True)
    try:
        (img,) = db.execute("SELECT image_json FROM sandboxes WHERE id = ?", (sid,)).fetchone()
    finally:
        db.close()
    return json.loads(img)["layers"]


def assert_clean_stack(d, sid):
    layers = stack_of(d, sid)
    assert len(set(layers)) == len(layers), layers
    for ref in layers:
        if ref.startswith("sha256:"):
            assert os.listdir(os.path.join(d.state, "layers", ref[7:], "fs")), "empty layer " + ref


def fork1(c, sid):
    r = api(c, "POST", "/v1/sandboxes/%s/fork" % sid, {"count": 1, "timeout": 120}, 201).json()
    assert r["errors"] == [] and len(r["sandboxes"]) == 1, r
    return r["sandboxes"][0]["id"]


def test_untouched_forks_and_snapshots_of_snapshots_start(daemon, client):
    """Forks of a sandbox that changed nothing, forks of forks, snapshots of sandboxes started
    from snapshots: each adds a layer only when something changed, never one the stack has,
    and every one of them starts and runs."""
    made = []
    sid = create(client)
    made.append(sid)
    f1 = fork1(client, sid)  # nothing changed: no layer
    made.append(f1)
    assert stack_of(daemon, f1) == stack_of(daemon, sid)
    f2 = fork1(client, f1)  # a fork of the fork
    made.append(f2)
    out(client, f2, "echo two > /root/two")
    f3 = fork1(client, f2)
    made.append(f3)
    f4 = fork1(client, f3)  # untouched again
    made.append(f4)
    assert out(client, f4, "cat /root/two") == "two\n"
    assert len(stack_of(daemon, f4)) == 2
    # A snapshot of an untouched sandbox started from a snapshot, and one of that.
    snap = api(client, "POST", "/v1/sandboxes/%s/snapshots" % f4, {}, 201).json()
    assert snap["layers"] == 2
    s1 = create(client, template=snap["id"])
    made.append(s1)
    snap2 = api(client, "POST", "/v1/sandboxes/%s/snapshots" % s1, {}, 201).json()
    s2 = create(client, template=snap2["id"])
    made.append(s2)
    # A change that gives again a layer lower in the stack (touch: times are not in a digest).
    out(client, s2, "touch /root/two")
    f5 = fork1(client, s2)
    made.append(f5)
    for x in made:
        assert out(client, x, "echo ok") == "ok\n"
        assert_clean_stack(daemon, x)
    # Paused to disk and resumed, a fork of an untouched sandbox still starts.
    api(client, "POST", "/v1/sandboxes/%s/pause" % f5, {"mode": "disk"}, 200)
    api(client, "POST", "/v1/sandboxes/%s/resume" % f5, {}, 200)
    assert out(client, f5, "cat /root/two") == "two\n"
    for x in made:
        api(client, "DELETE", "/v1/sandboxes/" + x, status=204)
    for s in (snap, snap2):
        api(client, "DELETE", "/v1/snapshots/" + s["id"], status=204)


def write_rows(d, sql, *args):
    import sqlite3
    db = sqlite3.connect(os.path.join(d.state, "warren.db"), timeout=10)
    try:
        with db:
            db.execute(sql, args)
    finally:
        db.close()


def test_stacks_recorded_with_duplicates_still_start(daemon, client):
    """Images and paused sandboxes an older daemon recorded with a layer twice (or an empty
    layer) start: the stack given to the runtime names each layer directory once, the topmost
    occurrence kept (what overlayfs shows: a lower copy under the same upper copy adds
    nothing)."""
    sid = create(client)
    out(client, sid, "echo one > /root/one")
    snap = api(client, "POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": "dups"}, 201).json()
    api(client, "DELETE", "/v1/sandboxes/" + sid, status=204)
    import sqlite3
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(daemon.state, "warren.db"), uri=True)
    (layers,) = db.execute("SELECT layers_json FROM images WHERE id = ?", (snap["id"],)).fetchone()
    db.close()
    base, top = json.loads(layers)
    # As an older daemon made them: the same layer twice, the base twice around it.
    write_rows(daemon, "UPDATE images SET layers_json = ? WHERE id = ?",
               json.dumps([base, top, base, top, top]), snap["id"])
    child = create(client, template="dups")
    assert out(client, child, "cat /root/one") == "one\n"
    # A sandbox paused to disk whose record has such a stack resumes.
    api(client, "POST", "/v1/sandboxes/%s/pause" % child, {"mode": "disk"}, 200)
    write_rows(daemon, "UPDATE sandboxes SET image_json = json_set(image_json, '$.layers', json(?))"
               " WHERE id = ?", json.dumps([base, top, top]), child)
    api(client, "POST", "/v1/sandboxes/%s/resume" % child, {}, 200)
    assert out(client, child, "cat /root/one") == "one\n"
    # A snapshot of it records a clean stack.
    out(client, child, "echo two > /root/two")
    snap2 = api(client, "POST", "/v1/sandboxes/%s/snapshots" % child, {}, 201).json()
    assert snap2["layers"] == 3
    api(client, "DELETE", "/v1/sandboxes/" + child, status=204)
    for s in (snap, snap2):
        api(client, "DELETE", "/v1/snapshots/" + s["id"], status=204)


def test_a_snapshot_that_would_not_start_is_refused(daemon, client):
    """A stack deeper than a sandbox can mount (128 layers) is never recorded: the snapshot
    that would make it fails with a clear error and leaves nothing."""
    import hashlib
    import sqlite3
    sid = create(client)
    out(client, sid, "echo x > /root/x")
    snap = api(client, "POST", "/v1/sandboxes/%s/snapshots" % sid, {}, 201).json()
    api(client, "DELETE", "/v1/sandboxes/" + sid, status=204)
    db = sqlite3.connect(os.path.join(daemon.state, "warren.db"), timeout=10)
    (layers,) = db.execute("SELECT layers_json FROM images WHERE id = ?", (snap["id"],)).fetchone()
    base, top = json.loads(layers)
    # 126 more layers of one file each: 128 in all, the most a sandbox can stack.
    extra = []
    for i in range(126):
        h = hashlib.sha256(b"filler %d" % i).hexdigest()
        fs = os.path.join(daemon.state, "layers", h, "fs")
        os.makedirs(fs)
        with open(os.path.join(fs, "filler-%d" % i), "w") as f:
            f.write("%d\n" % i)
        extra.append("sha256:" + h)
    with db:
        for ref in extra:
            db.execute("INSERT INTO layers (digest, size_bytes, created_ms) VALUES (?, 1, 0)", (ref,))
        db.execute("UPDATE images SET layers_json = ? WHERE id = ?",
                   (json.dumps([base, top] + extra), snap["id"]))
    db.close()
    deep = create(client, template=snap["id"])
    assert out(client, deep, "cat /root/x /filler-125") == "x\n125\n"
    # Untouched, it forks (no layer added).
    f = fork1(client, deep)
    assert out(client, f, "cat /root/x") == "x\n"
    out(client, deep, "echo more > /root/more")
    before = layer_dirs(daemon)
    r = api(client, "POST", "/v1/sandboxes/%s/snapshots" % deep, {}, 409)
    assert "128" in r.json()["message"], r.json()
    r = api(client, "POST", "/v1/sandboxes/%s/fork" % deep, {"count": 1}, 409)
    assert "128" in r.json()["message"], r.json()
    tmp = os.path.join(daemon.state, "layers", ".tmp")
    deadline = time.monotonic() + 10
    while (layer_dirs(daemon) != before or os.listdir(tmp)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert layer_dirs(daemon) == before and os.listdir(tmp) == []
    for x in (deep, f):
        api(client, "DELETE", "/v1/sandboxes/" + x, status=204)
    api(client, "DELETE", "/v1/snapshots/" + snap["id"], status=204)
