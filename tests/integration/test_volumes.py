"""Named volumes (docs/openapi.yaml /v1/volumes, docs/design/isolation.md "Volumes"): create,
list, get, delete; mounted at create read-write or read-only; shared by sandboxes with different
id ranges; their data outlives sandboxes and the daemon; a volume in use cannot be deleted; bad
input and faults leave nothing behind."""

import json
import os
import subprocess

import pytest

import warren
from conftest import IMAGE, WARREN, Daemon, delete_all, pool_pids
from test_api import raw

BACKENDS = ("ns", "gvisor")  # every test on the module's daemon runs on both (conftest.py)


def vol_dirs(daemon):
    root = os.path.join(daemon.state, "volumes")
    return sorted(os.listdir(root)) if os.path.isdir(root) else []


def vol_data(daemon, name, team="admin"):
    """Host path of a volume's files, through the database (tests only)."""
    import sqlite3
    db = sqlite3.connect(os.path.join(daemon.state, "warren.db"))
    try:
        (vid,) = db.execute("SELECT id FROM volumes WHERE team = ? AND name = ?",
                            (team, name)).fetchone()
    finally:
        db.close()
    return os.path.join(daemon.state, "volumes", vid, "data")


@pytest.fixture
def vol(client):
    name = "v%d" % os.getpid()
    v = warren.Volume.create(name, client=client)
    yield v
    try:
        warren.Volume.delete(name, client=client)
    except warren.NotFoundError:
        pass


# ---- the resource ----------------------------------------------------------------------------


def test_create_list_get_delete(daemon, client):
    before = vol_dirs(daemon)
    v = warren.Volume.create("data-1", client=client)
    assert v.name == "data-1" and v.created_at.year >= 2024
    try:
        assert "data-1" in [x.name for x in warren.Volume.list(client=client)]
        got = warren.Volume.get("data-1", client=client)
        assert got.name == "data-1" and got.disk_bytes is not None and got.disk_bytes >= 0
        with pytest.raises(warren.ConflictError):
            warren.Volume.create("data-1", client=client)
        # Disk use counts the files.
        path = vol_data(daemon, "data-1")
        assert os.stat(path).st_uid == 0 and os.stat(path).st_mode & 0o777 == 0o755
        with open(os.path.join(path, "big"), "wb") as f:
            f.write(b"x" * (1 << 20))
        assert warren.Volume.get("data-1", client=client).disk_bytes >= 1 << 20
    finally:
        warren.Volume.delete("data-1", client=client)
    assert "data-1" not in [x.name for x in warren.Volume.list(client=client)]
    with pytest.raises(warren.NotFoundError):
        warren.Volume.get("data-1", client=client)
    with pytest.raises(warren.NotFoundError):
        warren.Volume.delete("data-1", client=client)
    # Deleting removed its directory completely.
    assert vol_dirs(daemon) == before


@pytest.mark.parametrize("name", ["", ".hidden", "-opt", "a/b", "..", "x" * 65, "sp ace", "é"])
def test_bad_volume_names(daemon, name):
    st, _, body = raw(daemon, "POST", "/v1/volumes", json.dumps({"name": name}).encode())
    assert st == 400 and json.loads(body)["code"] == "invalid", body


def test_bad_create_bodies(daemon):
    for body in [b'{"name": 1}', b'{}', b'[]', b'{"name": "a", "size": 1}', b'nope']:
        st, _, out = raw(daemon, "POST", "/v1/volumes", body)
        assert st == 400 and set(json.loads(out)) >= {"code", "message"}, (body, out)
    st, _, _ = raw(daemon, "PUT", "/v1/volumes")
    assert st == 405
    st, _, _ = raw(daemon, "GET", "/v1/volumes/a/b")
    assert st == 404


def test_team_isolation(daemon):
    admin = daemon.client(daemon.admin_key, tcp=True)
    ka = warren.admin.create_key("vol-team-a", client=admin)
    kb = warren.admin.create_key("vol-team-b", client=admin)
    ca, cb = daemon.client(ka.key, tcp=True), daemon.client(kb.key, tcp=True)
    warren.Volume.create("shared-name", client=ca)
    try:
        assert [v.name for v in warren.Volume.list(client=cb)] == []
        with pytest.raises(warren.NotFoundError):
            warren.Volume.get("shared-name", client=cb)
        st, _, body = raw(daemon, "DELETE", "/v1/volumes/shared-name", tcp=True, key=kb.key)
        assert st == 404 and json.loads(body)["code"] == "not_found"
        with pytest.raises(warren.NotFoundError):
            warren.Sandbox.create(client=cb, volumes=["shared-name:/data"])
        # The same name in another team is another volume.
        warren.Volume.create("shared-name", client=cb)
        sa = warren.Sandbox.create(client=ca, volumes=["shared-name:/data"], timeout=60)
        sb = warren.Sandbox.create(client=cb, volumes=["shared-name:/data"], timeout=60)
        try:
            sa.commands.run("echo a > /data/f")
            assert sb.commands.run("ls /data").stdout == ""
        finally:
            sa.kill()
            sb.kill()
        warren.Volume.delete("shared-name", client=cb)
        assert [v.name for v in warren.Volume.list(client=ca)] == ["shared-name"]
    finally:
        warren.Volume.delete("shared-name", client=ca)
        warren.admin.delete_key(ka.id, client=admin)
        warren.admin.delete_key(kb.id, client=admin)


# ---- mounted in sandboxes --------------------------------------------------------------------


def test_shared_between_id_ranges_and_outlives_sandboxes(daemon, client, vol, backend):
    """On ns the two sandboxes have their own host id ranges and the volume an idmapped mount
    each; on gvisor (no user namespace of Warren's) the ids are the stored ones through a bind
    mount. Either way both see the same files as their own ids."""
    ns = backend == "ns"
    a = warren.Sandbox.create(client=client, volumes=[vol.name + ":/data"], timeout=120)
    b = warren.Sandbox.create(client=client, volumes=[{"name": vol.name, "path": "/tmp/v"}],
                              timeout=120)
    try:
        assert a.get_info().volumes == [warren.VolumeMount(vol.name, "/data", False)]
        ua = a.commands.run("cat /proc/self/uid_map").stdout.split()
        ub = b.commands.run("cat /proc/self/uid_map").stdout.split()
        assert ua[1] != ub[1] or not ns, "the two sandboxes should have different host id ranges"
        a.commands.run("echo from-a > /data/a; mkdir /data/d; chown 1000:1000 /data/d")
        # Both see the volume's root, and each other's files, as their own ids.
        assert b.commands.run("cat /tmp/v/a").stdout == "from-a\n"
        assert b.commands.run("stat -c %u:%g /tmp/v /tmp/v/a /tmp/v/d").stdout.split() == [
            "0:0", "0:0", "1000:1000"]
        b.commands.run("echo from-b > /tmp/v/b")
        assert a.commands.run("cat /data/b; stat -c %u:%g /data/b").stdout == "from-b\n0:0\n"
        # A non-root user of the sandbox writes where it owns.
        a.commands.run("echo u > /data/d/u", user="1000")
        # On disk: sandbox-side ids, whatever range wrote them.
        path = vol_data(daemon, vol.name)
        assert (os.stat(os.path.join(path, "a")).st_uid, os.stat(os.path.join(path, "b")).st_uid,
                os.stat(os.path.join(path, "d/u")).st_uid) == (0, 0, 1000)
        # The idmapped mount is nosuid and nodev, and appears in the sandbox only.
        mi = a.commands.run("grep ' /data ' /proc/self/mountinfo").stdout
        # (gVisor shows its bind as a 9p mount of the gofer's, without the host's flags; what
        # the sandbox reaches through it is gVisor's to allow: isolation.md.)
        assert not ns or ("nosuid" in mi and "nodev" in mi and "idmapped" in mi), mi
        assert " /data " in mi
    finally:
        a.kill()
        b.kill()
    c = warren.Sandbox.create(client=client, volumes=[vol.name + ":/srv/x"], timeout=60)
    try:
        assert c.commands.run("cat /srv/x/a /srv/x/b /srv/x/d/u").stdout == "from-a\nfrom-b\nu\n"
    finally:
        c.kill()


def test_readonly(daemon, client, vol):
    w = warren.Sandbox.create(client=client, volumes=[vol.name + ":/data"], timeout=60)
    try:
        w.commands.run("echo keep > /data/f")
    finally:
        w.kill()
    sb = warren.Sandbox.create(client=client, volumes=[vol.name + ":/data:ro"], timeout=60)
    try:
        assert sb.get_info().volumes == [warren.VolumeMount(vol.name, "/data", True)]
        assert sb.commands.run("cat /data/f").stdout == "keep\n"
        for cmd in ["echo x > /data/f", "touch /data/new", "rm /data/f", "mkdir /data/d",
                    "chmod 777 /data", "mount -o remount,rw /data",
                    "mount -o remount,bind,rw /data", "umount /data",
                    "mount -t tmpfs none /data"]:
            r = sb.commands.run(cmd, check=False)
            assert r.exit_code != 0, (cmd, r)
        assert sb.commands.run("cat /data/f; ls /data").stdout == "keep\nf\n"
        r = sb.commands.run("/usr/bin/warren-probe escape --only volume_ro --volume /data",
                            check=False, user="root")
        assert r.exit_code == 0 and "HELD volume_ro" in r.stdout, r.stdout + r.stderr
        # No process of the sandbox holds an fd of the idmapped mount (research P2): its fds
        # are sockets, pipes, locks and /dev/null; a mount fd would read as a directory.
        sb.commands.run("sleep 30", background=True)
        for pid in pool_pids():
            for fd in os.listdir("/proc/%d/fd" % pid):
                try:
                    target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
                except OSError:
                    continue
                assert target != "/" and "/data" not in target and "volumes" not in target, (
                    pid, fd, target)
    finally:
        sb.kill()
    with open(os.path.join(vol_data(daemon, vol.name), "f")) as f:
        assert f.read() == "keep\n"


def test_in_use_cannot_be_deleted(daemon, client, vol):
    sb = warren.Sandbox.create(client=client, volumes=[vol.name + ":/data"], timeout=60)
    try:
        st, _, body = raw(daemon, "DELETE", "/v1/volumes/" + vol.name)
        err = json.loads(body)
        assert st == 409 and err["code"] == "conflict", body
        assert sb.sandbox_id in err["message"] and vol.name in err["message"]
        sb.pause()
        with pytest.raises(warren.ConflictError):
            warren.Volume.delete(vol.name, client=client)
        sb.resume()
        assert sb.commands.run("ls /data").stdout == ""
    finally:
        sb.kill()
    # A stopped sandbox does not hold it.
    warren.Volume.delete(vol.name, client=client)


BAD_MOUNTS = [
    ("relative", [{"name": "V", "path": "data"}]),
    ("dotdot", [{"name": "V", "path": "/data/../etc"}]),
    ("dot", [{"name": "V", "path": "/./data"}]),
    ("empty component", [{"name": "V", "path": "/data//x"}]),
    ("trailing slash", [{"name": "V", "path": "/data/"}]),
    ("root", [{"name": "V", "path": "/"}]),
    ("proc", [{"name": "V", "path": "/proc"}]),
    ("under proc", [{"name": "V", "path": "/proc/sys"}]),
    ("sys", [{"name": "V", "path": "/sys/fs"}]),
    ("dev", [{"name": "V", "path": "/dev"}]),
    ("too long", [{"name": "V", "path": "/" + "x" * 300}]),
    ("duplicate", [{"name": "V", "path": "/data"}, {"name": "V", "path": "/data"}]),
    ("nested", [{"name": "V", "path": "/data"}, {"name": "V", "path": "/data/x"}]),
    ("too many", [{"name": "V", "path": "/d%d" % i} for i in range(17)]),
    ("no path", [{"name": "V"}]),
    ("readonly not bool", [{"name": "V", "path": "/data", "readonly": "yes"}]),
    ("unknown key", [{"name": "V", "path": "/data", "size": 3}]),
    ("bad name", [{"name": "../x", "path": "/data"}]),
    ("not a list", {"name": "V", "path": "/data"}),
    ("not an object", ["V:/data"]),
]


@pytest.mark.parametrize("what,mounts", BAD_MOUNTS, ids=[b[0] for b in BAD_MOUNTS])
def test_bad_mounts_are_refused(daemon, client, vol, what, mounts):
    body = json.dumps({"volumes": mounts}).replace('"V"', json.dumps(vol.name)).encode()
    st, _, out = raw(daemon, "POST", "/v1/sandboxes", body)
    err = json.loads(out)
    assert st == 400 and err["code"] == "invalid" and err["message"], (what, out)
    assert list(warren.Sandbox.list(client=client)) == []


def test_unknown_volume(daemon, client):
    st, _, out = raw(daemon, "POST", "/v1/sandboxes",
                     b'{"volumes": [{"name": "no-such-volume", "path": "/data"}]}')
    assert st == 404 and "no-such-volume" in json.loads(out)["message"]
    assert list(warren.Sandbox.list(client=client)) == []


def test_sixteen_volumes_and_mount_points_in_tmp(daemon, client):
    names = ["many-%d" % i for i in range(16)]
    for n in names:
        warren.Volume.create(n, client=client)
    try:
        sb = warren.Sandbox.create(client=client, timeout=60,
                                   volumes=["%s:/m/%d" % (n, i) for i, n in enumerate(names[:15])]
                                   + [names[15] + ":/tmp/last:ro"])
        try:
            out = sb.commands.run("for i in $(seq 0 14); do echo $i > /m/$i/f; done; "
                                  "ls /m | wc -l; ls -d /tmp/last").stdout
            assert out == "15\n/tmp/last\n"
        finally:
            sb.kill()
    finally:
        for n in names:
            warren.Volume.delete(n, client=client)


def test_mount_point_through_a_symlink_is_refused(daemon, client, vol):
    """A mount point is never reached through a symbolic link of the image (or of a writable
    layer): one pointing at / would otherwise place the mount in the host's tree, which is still
    the root while the child sets up."""
    root = os.path.join(daemon.state, "templates", "linky", "rootfs")
    if not os.path.isdir(root):
        os.makedirs(os.path.dirname(root), exist_ok=True)
        subprocess.run(["cp", "-a", IMAGE + "/.", root + ".tmp"], check=True)
        os.symlink("/", os.path.join(root + ".tmp", "escape"))
        os.rename(root + ".tmp", root)
    for path in ["/escape/tmp/x", "/escape", "/bin/sh/x"]:
        with pytest.raises(warren.WarrenError) as e:
            warren.Sandbox.create("linky", client=client, timeout=60,
                                  volumes=[vol.name + ":" + path])
        assert "mount point" in e.value.message or "volume" in e.value.message, e.value
    assert list(warren.Sandbox.list(client=client)) == []
    assert not os.path.exists("/tmp/x")


# ---- faults and restarts ----------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["volumes", "child-rootfs", "hello"])
def test_create_failing_after_the_mounts_leaves_nothing(fault):
    """The leftovers fixture checks that no mount, process, cgroup or run directory remains."""
    d = Daemon(env={"WARREN_FAULT": fault}).start()
    try:
        c = d.client()
        warren.Volume.create("f", client=c)
        with pytest.raises(warren.WarrenError):
            warren.Sandbox.create(client=c, volumes=["f:/data", "f:/ro:ro"], timeout=30)
        assert list(warren.Sandbox.list(client=c)) == []
        # The failed sandbox does not hold the volume.
        warren.Volume.delete("f", client=c)
        assert vol_dirs(d) == []
    finally:
        delete_all(d)
        d.cleanup()


def test_in_use_across_kill_9(tmp_path):
    d = Daemon().start()
    try:
        c = d.client()
        warren.Volume.create("keep", client=c)
        sb = warren.Sandbox.create(client=c, volumes=["keep:/data"], timeout=300)
        sb.commands.run("echo before > /data/f")
        d.kill9()
        d.start()
        c = d.client()
        with pytest.raises(warren.ConflictError):
            warren.Volume.delete("keep", client=c)
        sb = warren.Sandbox.connect(sb.sandbox_id, client=c)
        assert sb.get_info().volumes[0].name == "keep"
        assert sb.commands.run("cat /data/f").stdout == "before\n"
        sb.kill()
        d.stop()
        d.start()
        c = d.client()
        with warren.Sandbox.create(client=c, volumes=["keep:/data"], timeout=60) as s2:
            assert s2.commands.run("cat /data/f").stdout == "before\n"
        warren.Volume.delete("keep", client=c)
        assert vol_dirs(d) == []
    finally:
        delete_all(d)
        d.cleanup()


def test_orphan_directories_are_swept_at_start():
    d = Daemon().start()
    try:
        d.stop()
        os.makedirs(os.path.join(d.state, "volumes", "orphan", "data", "x"))
        d.start()
        assert vol_dirs(d) == []
    finally:
        d.cleanup()


# ---- the CLI ------------------------------------------------------------------------------------


def test_cli(daemon, tmp_path):
    from test_cli import Cli
    cli = Cli(daemon, tmp_path)
    assert cli.ok("volume", "create", "clivol") == "clivol\n"
    assert json.loads(cli.ok("volume", "create", "clivol2", "-o", "json"))["name"] == "clivol2"
    ls = cli.ok("volume", "ls")
    assert "clivol\n" in ls.replace(" ", "\n") or "clivol " in ls
    assert [v["name"] for v in json.loads(cli.ok("volume", "ls", "-o", "json"))["volumes"]] == [
        "clivol", "clivol2"]
    sb = cli.ok("create", "--volume", "clivol:/data", "--volume", "clivol2:/ro:ro",
                "--timeout", "60").strip()
    try:
        info = cli.ok("info", sb)
        assert "volume:     clivol at /data\n" in info
        assert "volume:     clivol2 at /ro (read-only)\n" in info
        cli.ok("exec", sb, "--", "sh", "-c", "echo hi > /data/f")
        assert cli("exec", sb, "--", "touch", "/ro/f").returncode != 0
        r = cli("volume", "rm", "clivol")
        assert r.returncode == 1 and b"in use by sandbox " + sb.encode() in r.stderr, r.stderr
    finally:
        cli.ok("rm", sb)
    out = cli.ok("volume", "info", "clivol")
    assert "name:       clivol\n" in out and "disk_bytes: " in out
    assert json.loads(cli.ok("volume", "info", "clivol", "-o", "json"))["disk_bytes"] > 0
    # Bad input.
    for args in [("create", "--volume", "clivol"), ("create", "--volume", "clivol:/d:rx"),
                 ("create", "--volume", ":/d"), ("volume",), ("volume", "frob"),
                 ("volume", "info"), ("volume", "info", "a", "b"), ("volume", "ls", "x"),
                 ("volume", "rm"), ("volume", "info", "a/b")]:
        r = cli(*args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
    r = cli("create", "--volume", "clivol:relative")
    assert r.returncode == 1 and b"absolute" in r.stderr
    r = cli("volume", "info", "nope")
    assert r.returncode == 1 and b"not found" in r.stderr
    assert cli.ok("volume", "rm", "clivol", "clivol2") == "clivol\nclivol2\n"
    assert json.loads(cli.ok("volume", "ls", "-o", "json"))["volumes"] == []


def test_pause_to_disk_keeps_the_volumes(daemon, client, vol):
    """A sandbox paused to disk starts again with the same volumes, and holds them meanwhile."""
    sb = warren.Sandbox.create(client=client, volumes=[vol.name + ":/data", vol.name + ":/ro:ro"],
                               timeout=60)
    try:
        sb.commands.run("echo kept > /data/f")
        sb.pause(mode="disk")
        with pytest.raises(warren.ConflictError):
            warren.Volume.delete(vol.name, client=client)
        sb.resume()
        assert sb.commands.run("cat /data/f /ro/f").stdout == "kept\nkept\n"
        assert sb.commands.run("touch /ro/x", check=False).exit_code != 0
    finally:
        sb.kill()


APP_USER = """\
FROM base
RUN echo 'app:x:1234:4321:app:/:/bin/sh' >> /etc/passwd && echo 'appg:x:4321:' >> /etc/group
USER app
"""


def test_a_new_volume_belongs_to_the_default_user(daemon, client, vol):
    """A new volume's root goes to the default user of the first sandbox that mounts it (its
    uid and primary group from the image's /etc/passwd), so that user writes there as E2B's and
    Docker's users expect; root does too, and so do later sandboxes, whatever their own
    default user (issue #14, item 14)."""
    from test_build import build
    status, ev = build(client, "vol-user", APP_USER)
    assert status == 200 and ev[-1]["type"] == "done", ev[-1]
    path = vol_data(daemon, vol.name)
    assert (os.stat(path).st_uid, os.stat(path).st_gid) == (0, 0)
    made = []
    try:
        a = warren.Sandbox.create(client=client, template="vol-user", timeout=60,
                                  volumes=[vol.name + ":/data"])
        made.append(a)
        # As the default user (no user given), then as root.
        r = a.commands.run("id -u; echo mine > /data/f; stat -c %u:%g /data /data/f")
        assert r.stdout.split() == ["1234", "1234:4321", "1234:4321"], r
        a.commands.run("echo r > /data/r", user="root")
        assert (os.stat(path).st_uid, os.stat(path).st_gid) == (1234, 4321)
        # Another sandbox (another id range) of the same template reads and writes.
        b = warren.Sandbox.create(client=client, template="vol-user", timeout=60,
                                  volumes=[vol.name + ":/mnt/v"])
        made.append(b)
        assert b.commands.run("cat /mnt/v/f /mnt/v/r; echo b > /mnt/v/b").stdout == "mine\nr\n"
        # A sandbox whose default user is root: the volume stays the first one's, root writes.
        c = warren.Sandbox.create(client=client, timeout=60, volumes=[vol.name + ":/data"])
        made.append(c)
        r = c.commands.run("id -u; stat -c %u:%g /data; echo c > /data/c; cat /data/b")
        assert r.stdout.split() == ["0", "1234:4321", "b"], r
        assert a.commands.run("cat /data/c").stdout == "c\n"
    finally:
        for sb in made:
            sb.kill()
        client.request("DELETE", "/v1/templates/vol-user")


def test_a_volume_in_use_keeps_its_owner(daemon, client):
    """Only a volume nobody has written to is given away: one whose files a root sandbox wrote
    first stays root's, and a read-only mount changes nothing."""
    from test_build import build
    status, ev = build(client, "vol-user2", APP_USER)
    assert ev[-1]["type"] == "done", ev[-1]
    name = "kept-%d" % os.getpid()
    warren.Volume.create(name, client=client)
    made = []
    try:
        path = vol_data(daemon, name)
        ro = warren.Sandbox.create(client=client, template="vol-user2", timeout=60,
                                   volumes=[name + ":/data:ro"])
        made.append(ro)
        assert os.stat(path).st_uid == 0
        w = warren.Sandbox.create(client=client, timeout=60, volumes=[name + ":/data"])
        made.append(w)
        w.commands.run("echo root > /data/f")
        u = warren.Sandbox.create(client=client, template="vol-user2", timeout=60,
                                  volumes=[name + ":/data"])
        made.append(u)
        assert u.commands.run("stat -c %u:%g /data").stdout == "0:0\n"
        assert u.commands.run("touch /data/x", check=False).exit_code != 0
    finally:
        for sb in made:
            sb.kill()
        warren.Volume.delete(name, client=client)
        client.request("DELETE", "/v1/templates/vol-user2")
