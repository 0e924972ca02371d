"""Walks of the trees a sandbox controls (src/util/walk.c, docs/design/images.md "Walking a
sandbox's files"): trees made inside sandboxes (deep, deeper than the fds, with paths past
PATH_MAX, wide, hard-linked) are snapshotted, forked, measured, paused to disk and resumed,
listed and removed through the real daemon, which must answer /v1/health after each and leave
nothing on disk: no writable layer under sandboxes/, nothing under layers/.tmp.

Trees are made by the probe (`warren-probe tree`), which works from open directories so that
its paths may be longer than PATH_MAX. A capture, digest or disk use of a tree deeper than
1024 directories answers 400 `invalid`; a removal never fails for depth."""

import os
import tempfile
import time

import pytest

import warren
from conftest import daemon_on, delete_all, homes, loop_fs

# Trees of thousands of directories and links: most of the suite's time.
pytestmark = pytest.mark.slow

LIMIT = 1024  # WR_WALK_MAX_DEPTH
LONG = 255  # the longest name


def api(client, method, path, body=None, status=None, timeout=300):
    r = client.request(method, path, json_body=body, check=False, timeout=timeout)
    if status is not None:
        assert r.status == status, (method, path, r.status, r.body[:600])
    return r


def healthy(client):
    assert api(client, "GET", "/v1/health").status == 200, "the daemon does not answer"


def create(client, template="base", **kw):
    body = dict(template=template, timeout=600, **kw)
    return api(client, "POST", "/v1/sandboxes", body, 201).json()["id"]


def run(client, sid, *cmd):
    r = api(client, "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": list(cmd)}, 200).json()
    return r


def out(client, sid, script):
    r = run(client, sid, "/bin/sh", "-c", script)
    assert r["exit_code"] == 0, r
    return r["stdout"]


def tree(client, sid, kind, path, n, length=1):
    """Make a tree of one shape in the sandbox (warren-probe tree)."""
    r = run(client, sid, "/usr/bin/warren-probe", "tree", kind, path, str(n), str(length))
    assert r["exit_code"] == 0 and r["stdout"] == "made %d\n" % n, r
    return r


def has_deep(client, sid, path, n, length=1):
    r = run(client, sid, "/usr/bin/warren-probe", "tree", "check", path, str(n), str(length))
    return r["exit_code"] == 0 and r["stdout"] == "found %d\n" % n


def tmp_entries(d):
    return os.listdir(os.path.join(d.state, "layers", ".tmp"))


def layer_dirs(d):
    p = os.path.join(d.state, "layers")
    return sorted(x for x in os.listdir(p) if not x.startswith("."))


def delete(client, d, sid):
    """Delete the sandbox; its writable layer goes, whatever it held."""
    api(client, "DELETE", "/v1/sandboxes/" + sid, status=204)
    deadline = time.monotonic() + 60
    while sid in homes(d) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sid not in homes(d), "the writable layer of %s is left" % sid
    healthy(client)


def snapshot(client, sid, status):
    r = api(client, "POST", "/v1/sandboxes/%s/snapshots" % sid, {}, status)
    return r.json()


def refused_for_depth(r):
    body = r.json()
    assert r.status == 400 and body["code"] == "invalid", (r.status, r.body[:600])
    assert "deeper than %d directories" % LIMIT in body["message"], body["message"]


def clean_at_end(client, d, *sids):
    """Every sandbox deleted; their writable layers gone and the layers they held removed (a
    layer's last user gone, it is renamed into .tmp and removed on a worker: soon, not at once)."""
    for sid in sids:
        delete(client, d, sid)
    deadline = time.monotonic() + 60
    while (homes(d) or tmp_entries(d)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert homes(d) == [] and tmp_entries(d) == [], (homes(d), tmp_entries(d))


@pytest.fixture(autouse=True)
def no_sandbox_left(daemon):
    """A test that fails midway leaves no sandbox for the next ones (nor for `leftovers`)."""
    yield
    delete_all(daemon)


# ---- depth ---------------------------------------------------------------------------------


def test_the_issue_repro_150_levels(daemon, client):
    """The report: ~150 nested directories killed warrend (SIGSEGV) on snapshot or fork."""
    sid = create(client)
    out(client, sid, "mkdir -p ~/deep && cd ~/deep && for i in $(seq 150); do mkdir d; cd d; done"
                     " && echo bottom > b && mkfifo fifo && ln -s loop loop && ln -s x y && ln -s y x")
    snap = snapshot(client, sid, 201)
    healthy(client)
    child = create(client, template=snap["id"])
    deep = "/root/deep/" + "d/" * 150
    assert out(client, child, "cat %sb; test -p %sfifo && readlink %sloop" % (deep, deep, deep)) == \
        "bottom\nloop\n"
    forked = api(client, "POST", "/v1/sandboxes/%s/fork" % sid, {"count": 1}, 201).json()
    healthy(client)
    (copy,) = [s["id"] for s in forked["sandboxes"]]
    assert out(client, copy, "cat %sb" % deep) == "bottom\n"
    disk = api(client, "GET", "/v1/sandboxes/%s/disk" % sid, status=200).json()
    assert disk["used_bytes"] > 150 * 1024
    api(client, "DELETE", "/v1/snapshots/" + snap["id"], status=204)
    clean_at_end(client, daemon, child, copy, sid)


def test_deeper_than_the_limit(daemon, client):
    """5,000 levels: captures and disk use are refused naming the limit; pause to disk, resume,
    listing and delete work; nothing is left of the refused captures."""
    sid = create(client)
    tree(client, sid, "deep", "/root/t", 5000)
    layers = layer_dirs(daemon)
    refused_for_depth(api(client, "POST", "/v1/sandboxes/%s/snapshots" % sid, {}))
    healthy(client)
    refused_for_depth(api(client, "POST", "/v1/sandboxes/%s/fork" % sid, {"count": 2}))
    healthy(client)
    assert tmp_entries(daemon) == [] and layer_dirs(daemon) == layers
    assert api(client, "GET", "/v1/snapshots", status=200).json()["snapshots"] == []
    refused_for_depth(api(client, "GET", "/v1/sandboxes/%s/disk" % sid))
    healthy(client)
    # Listing goes at most 16 levels down, whatever is below.
    entries = api(client, "GET", "/v1/sandboxes/%s/files/list?path=/root/t&depth=16" % sid,
                  status=200).json()["entries"]
    assert [e["path"] for e in entries] == ["/root/t" + "/0" * i for i in range(1, 17)]
    api(client, "POST", "/v1/sandboxes/%s/pause" % sid, {"mode": "disk"}, 200)
    healthy(client)
    api(client, "POST", "/v1/sandboxes/%s/resume" % sid, {}, 200)
    assert has_deep(client, sid, "/root/t", 5000)
    clean_at_end(client, daemon, sid)


def test_paths_longer_than_path_max(daemon, client):
    """40 names of 255 bytes: paths of 10 KiB, within the depth limit: everything works."""
    sid = create(client)
    tree(client, sid, "deep", "/root/t", 40, LONG)
    snap = snapshot(client, sid, 201)
    healthy(client)
    child = create(client, template=snap["id"])
    assert has_deep(client, child, "/root/t", 40, LONG)
    disk = api(client, "GET", "/v1/sandboxes/%s/disk" % sid, status=200).json()
    assert disk["used_bytes"] > 40 * 1024
    forked = api(client, "POST", "/v1/sandboxes/%s/fork" % sid, {"count": 1}, 201).json()
    (copy,) = [s["id"] for s in forked["sandboxes"]]
    assert has_deep(client, copy, "/root/t", 40, LONG)
    entries = api(client, "GET", "/v1/sandboxes/%s/files/list?path=/root/t&depth=16" % sid,
                  status=200).json()["entries"]
    assert len(entries) == 16 and len(entries[-1]["path"]) == len("/root/t") + 16 * (LONG + 1)
    api(client, "POST", "/v1/sandboxes/%s/pause" % sid, {"mode": "disk"}, 200)
    api(client, "POST", "/v1/sandboxes/%s/resume" % sid, {}, 200)
    assert has_deep(client, sid, "/root/t", 40, LONG)
    api(client, "DELETE", "/v1/snapshots/" + snap["id"], status=204)
    clean_at_end(client, daemon, child, copy, sid)


def test_removal_deeper_than_the_fds(daemon, client):
    """30,000 levels, more than the daemon's 20,000 fds here and than a stack of frames holds:
    the sandbox's files go with it all the same, and warren-init removes such a tree too."""
    sid = create(client)
    tree(client, sid, "deep", "/root/t", 30000)
    tree(client, sid, "deep", "/root/u", 30000)
    # warren-init (the sandbox's PID 1) removes it for the files API.
    api(client, "DELETE", "/v1/sandboxes/%s/files?path=/root/u&recursive=true" % sid, status=204)
    assert out(client, sid, "test -e /root/u || echo gone") == "gone\n"
    clean_at_end(client, daemon, sid)


def test_init_makes_a_path_of_many_components(daemon, client):
    """mkdir -p in warren-init of a 4,092-byte path of 2,046 components: it recursed with a
    PATH_MAX buffer per component, 8.4 MB on PID 1's stack of 8 MB."""
    sid = create(client)
    path = "/m" * 2046
    api(client, "POST", "/v1/sandboxes/%s/files/mkdir" % sid, {"path": path, "parents": True},
        201)
    assert out(client, sid, "cd %s && echo alive" % path) == "alive\n"
    clean_at_end(client, daemon, sid)


def test_recursive_watch_of_a_huge_tree(daemon, client):
    """warren-init watches at most 10,000 directories; one directory of 50,000 subdirectories at
    a 3,800-byte path made it hold 50,000 such paths first (190 MB, past a 128 MiB sandbox's
    memory: PID 1 was killed with its sandbox). Now the watch is refused and init goes on."""
    sid = create(client, memory_mb=128)
    tree(client, sid, "deep", "/root/w", 15, 250)
    bottom = "/root/w" + ("/" + "d" * 249 + "0") * 15
    tree(client, sid, "dirs", bottom + "/many", 50000)
    sb = warren.Sandbox.connect(sid, client=client)
    with pytest.raises(warren.WarrenError) as e:
        sb.files.watch_dir("/root", lambda ev: None, recursive=True).stop()
    assert "more than 10000 directories" in str(e.value), e.value
    assert out(client, sid, "echo alive") == "alive\n"
    # A deep tree is watched down to the paths the protocol carries.
    tree(client, sid, "deep", "/root/t", 5000)
    sb.files.watch_dir("/root/t", lambda ev: None, recursive=True).stop()
    assert out(client, sid, "echo alive") == "alive\n"
    clean_at_end(client, daemon, sid)


# ---- width and links -------------------------------------------------------------------------


def test_wide_directory(daemon, client):
    sid = create(client)
    tree(client, sid, "wide", "/root/w", 50000, 100)
    snap = snapshot(client, sid, 201)
    healthy(client)
    child = create(client, template=snap["id"])
    assert out(client, child, "ls /root/w | wc -l") == "50000\n"
    entries = api(client, "GET", "/v1/sandboxes/%s/files/list?path=/root/w" % sid,
                  status=200).json()["entries"]
    assert len(entries) == 50000
    api(client, "GET", "/v1/sandboxes/%s/disk" % sid, status=200)
    api(client, "DELETE", "/v1/snapshots/" + snap["id"], status=204)
    clean_at_end(client, daemon, child, sid)


def user_cpu(d):
    """Seconds of user-space CPU the daemon has used: the work of a walk's bookkeeping, which
    waiting for the disk or for a loaded machine's cores does not inflate."""
    fields = open("/proc/%d/stat" % d.proc.pid).read().rsplit(")", 1)[1].split()
    return int(fields[11]) / os.sysconf("SC_CLK_TCK")


def test_many_hard_links_in_linear_time(daemon, client):
    """100,000 inodes with two links each. The old bookkeeping scanned every inode seen so far for
    each link: 1e10 comparisons, some 4 s of the daemon's CPU for the disk use and as many for
    the copy, against well under a second with a hash set (0.2 s and 1.9 s measured here). The
    bounds are several times what the fixed code takes."""
    n = 100000
    sid = create(client)
    tree(client, sid, "links", "/root/l", n)
    u0 = user_cpu(daemon)
    disk = api(client, "GET", "/v1/sandboxes/%s/disk" % sid, status=200).json()
    u1 = user_cpu(daemon)
    # Each inode once: 200,000 small files, not twice that.
    assert disk["used_bytes"] < n * 4096 * 1.5 + (64 << 20), disk
    snap = snapshot(client, sid, 201)
    u2 = user_cpu(daemon)
    healthy(client)
    assert u1 - u0 < 1.5 and u2 - u1 < 8, ("daemon CPU seconds: disk, snapshot", u1 - u0, u2 - u1)
    child = create(client, template=snap["id"])
    for i in (0, n // 2, n - 1):
        assert out(client, child, "stat -c '%%h %%i' /root/l/a/%d /root/l/b/%d | uniq | wc -l; "
                                  "stat -c %%h /root/l/b/%d" % (i, i, i)) == "1\n2\n"
    api(client, "DELETE", "/v1/snapshots/" + snap["id"], status=204)
    clean_at_end(client, daemon, child, sid)


def test_one_inode_linked_from_many_directories(daemon, client):
    n = 10000
    sid = create(client)
    tree(client, sid, "fanout", "/root/f", n)
    snap = snapshot(client, sid, 201)
    child = create(client, template=snap["id"])
    assert out(client, child, "stat -c %%h /root/f/a/file /root/f/%d/file | uniq" % (n - 1)) == \
        "%d\n" % (n + 1)
    api(client, "DELETE", "/v1/snapshots/" + snap["id"], status=204)
    clean_at_end(client, daemon, child, sid)


# ---- build contexts ----------------------------------------------------------------------------


def test_build_context_deep_and_long(daemon, client):
    """A context is digested (for COPY's cache keys) like a layer: 150 levels build; a path past
    PATH_MAX is refused before libarchive would chdir() down it (moving every thread's working
    directory)."""
    from test_build import build, tar_of
    deep = "d/" * 150 + "f"
    ctx = tar_of({"Dockerfile": b"FROM base\nCOPY . /ctx\n", deep: b"x"})
    status, ev = build(client, "walks-deep-ctx", context=ctx)
    assert status == 200 and ev[-1]["type"] == "done", ev
    healthy(client)
    sid = create(client, template="walks-deep-ctx")
    assert out(client, sid, "cat /ctx/" + deep) == "x"
    long = ("n" * 200 + "/") * 21 + "f"
    status, body = build(client, "walks-long-ctx",
                         context=tar_of({"Dockerfile": b"FROM base\n", long: b"y"}))
    assert status == 400 and body["code"] == "invalid" and "longer than" in body["message"], body
    healthy(client)
    assert tmp_entries(daemon) == []
    api(client, "DELETE", "/v1/templates/walks-deep-ctx", status=204)
    clean_at_end(client, daemon, sid)


# ---- volumes ---------------------------------------------------------------------------------


def test_volume_with_a_deep_tree(daemon, client):
    """A volume's disk use is refused past the limit (400) and its removal goes all the way."""
    name = "deep-%d" % os.getpid()
    api(client, "POST", "/v1/volumes", {"name": name}, 201)
    sid = create(client, volumes=[{"name": name, "path": "/data"}])
    tree(client, sid, "deep", "/data/t", 30000)
    delete(client, daemon, sid)
    refused_for_depth(api(client, "GET", "/v1/volumes/" + name))
    healthy(client)
    api(client, "DELETE", "/v1/volumes/" + name, status=204)
    deadline = time.monotonic() + 60
    vols = os.path.join(daemon.state, "volumes")
    while [v for v in os.listdir(vols) if not v.startswith(".")] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [v for v in os.listdir(vols) if not v.startswith(".")] == []
    healthy(client)


# ---- btrfs: captures are snapshots, then digested; homes are subvolumes -----------------------


@pytest.fixture(scope="module")
def btrfs_daemon():
    with loop_fs("walks-btrfs-", 1 << 30, ["mkfs.btrfs", "-q"]) as mnt:
        with daemon_on(tempfile.mkdtemp(dir=mnt)) as d:
            yield d


def test_deep_trees_on_btrfs(btrfs_daemon):
    d = btrfs_daemon
    c = d.client()
    sid = create(c)
    tree(c, sid, "deep", "/root/ok", 150)
    snap = snapshot(c, sid, 201)
    assert snap["capture"] == "btrfs-snapshot"
    healthy(c)
    tree(c, sid, "deep", "/root/t", 5000)
    refused_for_depth(api(c, "POST", "/v1/sandboxes/%s/snapshots" % sid, {}))
    healthy(c)
    assert tmp_entries(d) == []
    child = create(c, template=snap["id"])
    assert has_deep(c, child, "/root/ok", 150)
    api(c, "POST", "/v1/sandboxes/%s/pause" % sid, {"mode": "disk"}, 200)
    api(c, "POST", "/v1/sandboxes/%s/resume" % sid, {}, 200)
    tree(c, sid, "deep", "/root/u", 30000)
    api(c, "DELETE", "/v1/snapshots/" + snap["id"], status=204)
    clean_at_end(c, d, child, sid)
    deadline = time.monotonic() + 10
    while layer_dirs(d) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert layer_dirs(d) == []
    c.close()
