"""GET /v1/sandboxes/{id}/diff through the real daemon: what a sandbox added, changed and deleted
against its template (its writable layer, walked on the host), against a snapshot of it, and
between two forks of one parent; one file's unified diff; bad input; `warren diff`. Sandboxes run
on the busybox test image (conftest's `base`): /etc/motd, /etc/passwd, /etc/group, /bin/* links
to /bin/busybox (a static binary of about 2 MB)."""

import json

import pytest

import warren
from conftest import warren as run_warren

BACKENDS = ("ns", "gvisor")  # every test on the module's daemon runs on both (conftest.py)


def api(client, method, path, body=None, status=None):
    r = client.request(method, path, json_body=body, check=False)
    if status is not None:
        assert r.status == status, (r.status, r.body)
    return r


def create(client, template="base", timeout=120):
    body = dict(template=template, timeout=timeout)
    return api(client, "POST", "/v1/sandboxes", body, 201).json()["id"]


def out(client, sid, cmd):
    r = api(client, "POST", "/v1/sandboxes/%s/exec" % sid,
            {"cmd": ["/bin/sh", "-c", cmd]}, 200).json()
    assert r["exit_code"] == 0, r
    return r["stdout"]


def diff(client, sid, status=200, **q):
    qs = "&".join("%s=%s" % (k, v) for k, v in q.items())
    return api(client, "GET", "/v1/sandboxes/%s/diff%s" % (sid, "?" + qs if qs else ""),
               status=status).json()


def by_path(d):
    return {c["path"]: c for c in d["changes"]}


def changes(d, under="/"):
    """{path: change} of the listing below `under` (the sandbox's own /tmp, /dev and so on aside)."""
    return {c["path"]: c["change"] for c in d["changes"]
            if c["path"] == under or c["path"].startswith(under.rstrip("/") + "/")}


@pytest.fixture
def sid(client):
    s = create(client)
    yield s
    api(client, "DELETE", "/v1/sandboxes/" + s)


def test_fresh_sandbox_changed_nothing_under_etc(client, sid):
    d = diff(client, sid)
    assert d["sandbox_id"] == sid
    assert d["against"] == {"kind": "template", "name": "base"}
    assert d["truncated"] is False
    assert changes(d, "/etc") == {} and changes(d, "/bin") == {}
    paths = [c["path"] for c in d["changes"]]
    assert paths == sorted(paths)


def test_added_modified_deleted_chmod_symlink(client, sid):
    out(client, sid, "mkdir -p /work/sub && printf 'hello\\n' > /work/a.txt && echo deep > /work/sub/b && "
        "ln -s a.txt /work/link && echo extra >> /etc/motd && rm /etc/group && "
        "chmod 600 /etc/passwd && touch /bin/busybox && rm /bin/echo && ln -s /bin/busybox /bin/echo && "
        "rm /bin/cat && ln -s /nowhere /bin/cat")
    d = diff(client, sid)
    c = by_path(d)
    assert c["/work"]["change"] == "added" and c["/work"]["type"] == "dir"
    assert c["/work/a.txt"] == dict(c["/work/a.txt"], change="added", type="file", size=6, mode="0644")
    assert c["/work/sub/b"]["change"] == "added"
    assert c["/work/link"] == dict(c["/work/link"], change="added", type="symlink", size=5)
    motd = c["/etc/motd"]
    assert motd["change"] == "modified" and motd["type"] == "file"
    assert motd["size"] == motd["old_size"] + 6 and motd["mode"] == motd["old_mode"] == "0644"
    assert c["/etc/group"] == dict(c["/etc/group"], change="deleted", type="file")
    # A metadata-only copy-up: mode changed, content the same.
    pw = c["/etc/passwd"]
    assert pw["change"] == "modified" and pw["old_mode"] == "0644" and pw["mode"] == "0600"
    assert pw["size"] == pw["old_size"]
    # Copied up by touch, with nothing changed that a diff reports: not listed.
    assert "/bin/busybox" not in c
    # A symlink replaced by one with the same target is not a change; another target is.
    assert "/bin/echo" not in c
    assert c["/bin/cat"]["change"] == "modified" and c["/bin/cat"]["type"] == "symlink"
    # Directories whose entries changed are not listed themselves.
    assert "/etc" not in c and "/bin" not in c
    paths = [x["path"] for x in d["changes"]]
    assert paths == sorted(paths)


def test_directory_removed_and_recreated_is_opaque(client, sid):
    out(client, sid, "mkdir -p /data/keep && echo 1 > /data/keep/x && echo 2 > /data/y")
    snap = api(client, "POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": "with-data"}, 201).json()
    s2 = create(client, template="with-data")
    try:
        out(client, s2, "rm -rf /data && mkdir /data && echo new > /data/z && rm -rf /usr/sbin")
        d = diff(client, s2)
        assert d["against"] == {"kind": "snapshot", "name": snap["id"]}
        assert changes(d, "/data") == {
            "/data/keep": "deleted", "/data/keep/x": "deleted", "/data/y": "deleted",
            "/data/z": "added"}
        # A directory of the template deleted: it and everything in it.
        sbin = changes(d, "/usr/sbin")
        assert sbin["/usr/sbin"] == "deleted" and len(sbin) > 1
        assert set(sbin.values()) == {"deleted"}
    finally:
        api(client, "DELETE", "/v1/sandboxes/" + s2)
        api(client, "DELETE", "/v1/snapshots/" + snap["id"])


def test_renames(client, sid):
    out(client, sid, "mv /etc/motd /etc/motd.old && mkdir /moved && mv /etc/group /moved/grp && "
        "rm /bin/cat && echo text > /bin/cat && mv /etc/passwd /etc/pw && echo changed >> /etc/pw && "
        "echo mine > /mine && mv /mine /mine2")
    c = by_path(diff(client, sid))
    assert c["/etc/motd.old"]["change"] == "renamed" and c["/etc/motd.old"]["from"] == "/etc/motd"
    assert "/etc/motd" not in c
    g = c["/moved/grp"]
    assert g["change"] == "renamed" and g["from"] == "/etc/group" and g["size"] == g["old_size"]
    assert "/etc/group" not in c and c["/moved"]["change"] == "added"
    # A symlink replaced by a file: a type change.
    assert c["/bin/cat"]["change"] == "modified" and c["/bin/cat"]["type"] == "file"
    assert c["/bin/cat"]["old_type"] == "symlink"
    # Changed as it moved: not provable, added + deleted.
    assert c["/etc/pw"]["change"] == "added" and c["/etc/passwd"]["change"] == "deleted"
    # Made in the sandbox and renamed there: only the new name exists.
    assert c["/mine2"]["change"] == "added" and "/mine" not in c


def test_content_diff(client, sid):
    out(client, sid, "echo extra >> /etc/motd && printf 'a\\nb\\n' > /new.txt && rm /etc/group && "
        "printf 'x\\0y' > /bin.dat && head -c 2000000 /dev/zero | tr '\\0' a > /big.txt && "
        "printf '\\377\\376' > /latin && chmod 600 /etc/passwd && ln -s /etc/motd /lnk")
    motd = diff(client, sid, path="/etc/motd", content=1)
    assert motd["change"] == "modified" and motd["binary"] is False and motd["too_large"] is False
    lines = motd["diff"].splitlines()
    assert lines[0] == "--- a/etc/motd" and lines[1] == "+++ b/etc/motd"
    assert lines[2].startswith("@@ ") and "+extra" in lines
    new = diff(client, sid, path="/new.txt", content=1)
    assert new["change"] == "added"
    assert new["diff"].splitlines()[:3] == ["--- /dev/null", "+++ b/new.txt", "@@ -0,0 +1,2 @@"]
    gone = diff(client, sid, path="/etc/group", content="true")
    assert gone["change"] == "deleted" and gone["diff"].splitlines()[1] == "+++ /dev/null"
    for p in ("/bin.dat", "/latin"):
        b = diff(client, sid, path=p, content=1)
        assert b["binary"] is True and b["diff"] is None, b
    big = diff(client, sid, path="/big.txt", content=1)
    assert big["too_large"] is True and big["diff"] is None and big["size"] == 2000000
    # Only its mode changed: an empty diff, the modes say it.
    pw = diff(client, sid, path="/etc/passwd", content=1)
    assert pw["diff"] == "" and pw["old_mode"] == "0644" and pw["mode"] == "0600"
    lnk = diff(client, sid, path="/lnk", content=1)
    assert lnk["type"] == "symlink" and "+/etc/motd" in lnk["diff"].splitlines()
    # A scope: the listing below one path only.
    d = diff(client, sid, path="/etc")
    assert set(changes(d)) == {"/etc/motd", "/etc/group", "/etc/passwd"}


def test_nothing_is_followed_or_opened(client, sid, backend):
    """The daemon reads the sandbox's layer on the host as root: a symlink is text, never a way
    out, and a FIFO is listed, never opened (the call would hang). On gvisor a FIFO made inside
    lives in gVisor's memory, not in the layer: it is not a change there."""
    out(client, sid, "ln -s /etc/shadow /leak && ln -s / /up && mkfifo /fifo && "
        "mkdir -p /d && ln -s ../../../../../../etc /d/etc")
    c = by_path(diff(client, sid))
    assert c["/leak"]["type"] == "symlink" and c["/leak"]["size"] == len("/etc/shadow")
    leak = diff(client, sid, path="/leak", content=1)
    assert leak["diff"].splitlines()[-2:] == ["+/etc/shadow", "\\ No newline at end of file"]
    if backend == "gvisor":
        assert "/fifo" not in c
    else:
        assert c["/fifo"]["type"] == "other"
        fifo = diff(client, sid, path="/fifo", content=1)
        assert fifo["change"] == "added" and fifo["diff"] == ""
    for p in ("/up/etc/passwd", "/d/etc/passwd", "/up/etc"):
        e = api(client, "GET", "/v1/sandboxes/%s/diff?path=%s&content=1" % (sid, p), status=404).json()
        assert e["code"] == "not_found", (p, e)
    assert changes(diff(client, sid, path="/up/etc")) == {}


def test_diff_against_snapshot(client, sid):
    out(client, sid, "echo one > /f1 && echo keep > /f2 && rm /etc/group")
    snap = api(client, "POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": "point"}, 201).json()
    try:
        out(client, sid, "echo two >> /f1 && rm /f2 && echo three > /f3 && echo g > /etc/group")
        d = diff(client, sid, against="point")
        assert d["against"] == {"kind": "snapshot", "name": "point"}
        c = changes(d)
        assert c.get("/f1") == "modified" and c.get("/f2") == "deleted" and c.get("/f3") == "added"
        assert c.get("/etc/group") == "added"
        assert "/etc/motd" not in c
        # By id as well.
        assert changes(diff(client, sid, against=snap["id"])) == c
        f1 = diff(client, sid, against="point", path="/f1", content=1)
        assert "+two" in f1["diff"].splitlines()
    finally:
        api(client, "DELETE", "/v1/snapshots/point", status=204)


def test_diff_between_two_forks(client, sid):
    out(client, sid, "echo parent > /p && echo base > /shared")
    r = api(client, "POST", "/v1/sandboxes/%s/fork" % sid, {"count": 2, "timeout": 60}, 201).json()
    a, b = [s["id"] for s in r["sandboxes"]]
    try:
        out(client, a, "echo a > /only-a && echo changed-a >> /shared && rm /p")
        out(client, b, "echo b > /only-b && chmod 700 /shared")
        d = diff(client, a, against=b)
        assert d["against"] == {"kind": "sandbox", "name": b}
        c = by_path(d)
        assert c["/only-a"]["change"] == "added"
        assert c["/only-b"]["change"] == "deleted"
        assert c["/p"]["change"] == "deleted"
        sh = c["/shared"]
        assert sh["change"] == "modified" and sh["old_mode"] == "0700" and sh["mode"] == "0644"
        assert sh["size"] > sh["old_size"]
        # A fork against its own image (the parent's files captured) shows only its own changes.
        own = changes(diff(client, a))
        assert own.get("/only-a") == "added" and own.get("/p") == "deleted"
        assert "/shared" in own and "/only-b" not in own
        # The parent against a fork: the fork's changes, reversed.
        pc = changes(diff(client, sid, against=a))
        assert pc.get("/only-a") == "deleted" and pc.get("/p") == "added"
    finally:
        for x in (a, b):
            api(client, "DELETE", "/v1/sandboxes/" + x)


def test_paused_sandbox_and_truncation(client, sid):
    out(client, sid, "mkdir /many && for i in 1 2 3 4 5 6 7 8 9; do echo $i > /many/f$i; done")
    api(client, "POST", "/v1/sandboxes/%s/pause" % sid, {}, 200)
    d = diff(client, sid, path="/many")
    assert len(changes(d)) == 10
    t = diff(client, sid, path="/many", limit=4)
    assert t["truncated"] is True and len(t["changes"]) == 4
    api(client, "POST", "/v1/sandboxes/%s/resume" % sid, {}, 200)
    # Paused to disk: its files are all there is.
    api(client, "POST", "/v1/sandboxes/%s/pause" % sid, {"mode": "disk"}, 200)
    assert changes(diff(client, sid, path="/many")) == changes(d)
    f = diff(client, sid, path="/many/f3", content=1)
    assert f["change"] == "added" and "+3" in f["diff"].splitlines()
    api(client, "POST", "/v1/sandboxes/%s/resume" % sid, {}, 200)


def test_bad_input(client, sid):
    for q, status, code in [
        (dict(against="no-such-thing"), 404, "not_found"),
        (dict(path="relative", content=1), 400, "invalid"),
        (dict(path="/../etc/passwd", content=1), 400, "invalid"),
        (dict(path="/etc/motd", content=1), 404, "not_found"),  # not changed
        (dict(path="/no/such/file", content=1), 404, "not_found"),
        (dict(content=1), 400, "invalid"),
        (dict(path="/etc", content=1), 400, "invalid"),
        (dict(content="maybe", path="/x"), 400, "invalid"),
        (dict(limit=0), 400, "invalid"),
        (dict(against=sid), 400, "invalid"),
    ]:
        r = api(client, "GET", "/v1/sandboxes/%s/diff?%s" % (
            sid, "&".join("%s=%s" % kv for kv in q.items())))
        assert r.status == status, (q, r.status, r.body)
        e = r.json()
        assert e["code"] == code and e["message"], (q, e)
    e = api(client, "GET", "/v1/sandboxes/nope/diff", status=404).json()
    assert e["code"] == "not_found"
    msg = api(client, "GET", "/v1/sandboxes/%s/diff?path=/etc/motd&content=1" % sid, status=404).json()
    assert "not changed" in msg["message"]


def test_sdk_and_cli(daemon, client, sid):
    out(client, sid, "echo extra >> /etc/motd && echo n > /n && rm /etc/group && mv /etc/passwd /etc/pw")
    sb = warren.Sandbox.connect(sid, client=client)
    d = sb.diff()
    assert d.against.kind == "template" and d.truncated is False
    kinds = {c.path: c.change for c in d.changes}
    assert kinds["/etc/motd"] == "modified" and kinds["/n"] == "added" and kinds["/etc/group"] == "deleted"
    assert [c for c in d.changes if c.path == "/etc/pw"][0].from_path == "/etc/passwd"
    f = sb.diff(path="/etc/motd", content=True)
    assert f.change == "modified" and "+extra" in f.diff.splitlines()
    assert {c.path for c in sb.diff(path="/etc").changes} == {"/etc/motd", "/etc/group", "/etc/pw"}

    env = {"WARREN_API_URL": daemon.url}
    r = run_warren("diff", sid, env=env)
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.decode().splitlines()]
    assert ["M", "/etc/motd"] == rows[[x[1] for x in rows].index("/etc/motd")][:2]
    assert ["D", "/etc/group"] in [x[:2] for x in rows]
    assert ["A", "/n"] in [x[:2] for x in rows]
    assert ["R", "/etc/passwd", "->", "/etc/pw"] in [x[:4] for x in rows]
    r = run_warren("diff", sid, "/etc/motd", env=env)
    assert r.returncode == 0 and "+extra" in r.stdout.decode().splitlines(), r
    r = run_warren("diff", sid, "/etc/", env=env)
    assert r.returncode == 0 and sorted(x.split()[1] for x in r.stdout.decode().splitlines()) == [
        "/etc/group", "/etc/motd", "/etc/passwd"], r
    r = run_warren("diff", sid, "--json", env=env)
    assert r.returncode == 0 and json.loads(r.stdout)["sandbox_id"] == sid
    r = run_warren("diff", sid, "--against", "no-such-snap", env=env)
    assert r.returncode != 0 and b"no-such-snap" in r.stderr
    # Against a real snapshot: only what changed since it (not the template's /etc/group etc.).
    api(client, "POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": "cli-point"}, 201)
    try:
        out(client, sid, "echo again >> /etc/motd && echo s > /since")
        r = run_warren("diff", sid, "--against", "cli-point", env=env)
        assert r.returncode == 0, r.stderr
        rows = sorted(line.split()[:2] for line in r.stdout.decode().splitlines())
        assert rows == [["A", "/since"], ["M", "/etc/motd"]], r.stdout
    finally:
        api(client, "DELETE", "/v1/snapshots/cli-point", status=204)


def test_cli_usage_errors(daemon):
    env = {"WARREN_API_URL": daemon.url}
    for args in ([], ["a", "b", "c"], ["--bogus", "sb-1"], ["not/an/id"], ["sb-1", "--limit", "0"], ["sb-1", ""], ["sb-1", "etc"]):
        r = run_warren("diff", *args, env=env)
        assert r.returncode == 2 and r.stdout == b"", (args, r)
    r = run_warren("diff", "nosuchsb", env=env)
    assert r.returncode == 1 and b"not_found" in r.stderr, r
    r = run_warren("diff", "--help", env=env)
    assert r.returncode == 0 and b"usage: warren diff" in r.stdout
