"""Templates, snapshots, fork and pause to disk through the user surfaces: the `warren` verbs
(docs/cli.md) and the Python SDK (docs/sdk-python.md), against a real warrend.

The test daemon's `base` is a directory template (conftest.py: a symlink to the busybox image),
so it can be listed and shown but not deleted."""

import json
import re
import subprocess
import time
from datetime import datetime, timezone

import pytest

import warren
from conftest import ENV, WARREN, Daemon, delete_all

SNAP_ID = re.compile(r"snap-[A-Za-z0-9_-]+")
SB_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
# How many processes of the sandbox run `sleep 1000` (from its own /proc; the pipeline's own
# processes do not start with `sleep`).
SLEEPERS = ("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done "
            "| grep -c '^sleep 1000'; true")


class Cli:
    def __init__(self, url):
        self.env = {k: v for k, v in ENV.items()
                    if k not in ("WARREN_API_URL", "WARREN_API_KEY", "WARREN_REQUEST_ID")}
        self.env["WARREN_API_URL"] = url

    def __call__(self, *args, timeout=60):
        return subprocess.run([WARREN, *args], capture_output=True, timeout=timeout, env=self.env,
                              stdin=subprocess.DEVNULL)

    def ok(self, *args, **kw):
        r = self(*args, **kw)
        assert r.returncode == 0, (args, r.returncode, r.stderr)
        return r.stdout.decode()

    def json(self, *args):
        return json.loads(self.ok(*args, "-o", "json"))

    def create(self, *args):
        sid = self.ok("create", "--timeout", "120", *args).strip()
        assert SB_ID.fullmatch(sid), sid
        return sid

    def sh(self, sid, script):
        return self.ok("exec", sid, "--", "sh", "-c", script)


def fails(r, status, verb, *words):
    """r failed with `status`, printed nothing on stdout and one `warren: VERB...` line on stderr
    containing each of words."""
    err = r.stderr.decode()
    assert r.returncode == status, (r.returncode, err)
    assert r.stdout == b"", r.stdout
    assert err.startswith("warren: " + verb) and err.endswith("\n") and err.count("\n") == 1, err
    for w in words:
        assert w in err, (w, err)
    return err


@pytest.fixture
def cli(daemon):
    return Cli(daemon.url)


@pytest.fixture
def made(cli):
    """Sandbox ids to remove after the test, and snapshot refs to delete."""
    sandboxes, snaps = [], []
    yield sandboxes, snaps
    for s in snaps:
        cli("snapshot", "rm", s)
    if sandboxes:
        cli("rm", *sandboxes)


def wait_state(cli, sid, state, timeout=15):
    deadline = time.monotonic() + timeout
    while True:
        got = cli.json("info", sid)["state"]
        if got == state:
            return
        assert time.monotonic() < deadline, "%s stayed %s, want %s" % (sid, got, state)
        time.sleep(0.1)


# ---- templates -----------------------------------------------------------------------------------

def test_template_verbs(cli, made):
    sid = cli.create()  # so that base is in use
    made[0].append(sid)
    out = cli.ok("template", "ls")
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "KIND", "SIZE", "LAYERS", "IN_USE", "CREATED"], out
    assert any(l.split()[:2] == ["base", "dir"] for l in lines[1:]), out
    doc = cli.json("template", "ls")
    base = [t for t in doc["templates"] if t["name"] == "base"]
    assert len(base) == 1 and base[0]["kind"] == "dir" and base[0]["in_use"] >= 1, doc
    assert cli.ok("template", "list").splitlines()[0] == lines[0]

    text = cli.ok("template", "info", "base")
    assert "name:       base\n" in text and "kind:       dir\n" in text, text
    assert cli.json("template", "info", "base")["name"] == "base"

    fails(cli("template", "info", "no-such-template"), 1, "template info", "not_found")
    fails(cli("template", "rm", "no-such-template"), 1, "template rm", "not_found")
    # A directory template is the host's: the API refuses to delete it, and it stays.
    fails(cli("template", "rm", "base"), 1, "template rm base", "conflict")
    assert cli.json("template", "info", "base")["kind"] == "dir"
    assert cli.ok("exec", sid, "--", "echo", "still") == "still\n"

    # `build` (tests/integration/test_build_cli.py): a missing Dockerfile is one line, exit 1.
    fails(cli("template", "build", "-f", "/no/such/Dockerfile", "--name", "x"), 1,
          "template build", "No such file")
    assert b"usage: warren template build" in cli("template", "build", "--help").stdout
    for args in (["template"], ["template", "bogus"], ["template", "ls", "--bogus"],
                 ["template", "ls", "extra"], ["template", "info"], ["template", "rm"],
                 ["template", "info", "a", "b"], ["template", "ls", "-o", "yaml"]):
        r = cli(*args)
        assert r.returncode == 2 and r.stdout == b"", (args, r)
    r = cli("template", "--help")
    assert r.returncode == 0 and b"ls" in r.stdout and b"build" in r.stdout


def test_image_verbs_over_tcp_need_a_key(daemon):
    tcp = Cli(daemon.tcp_url)
    for args in (["template", "ls"], ["snapshot", "ls"], ["snapshot", "info", "x"],
                 ["fork", "sb-x"], ["snapshot", "sb-x"]):
        fails(tcp(*args), 1, args[0], "unauthorized")
    tcp.env["WARREN_API_KEY"] = daemon.admin_key
    assert "base" in [t["name"] for t in tcp.json("template", "ls")["templates"]]
    assert isinstance(tcp.json("snapshot", "ls")["snapshots"], list)


def test_template_sdk(client, sandbox):
    names = {t.name: t for t in warren.Template.list(client=client)}
    assert names["base"].kind == "dir" and names["base"].in_use >= 1
    t = warren.Template.get("base", client=client)
    assert t.name == "base" and t.kind == "dir" and isinstance(t.layers, int)
    with pytest.raises(warren.NotFoundError):
        warren.Template.get("no-such-template", client=client)
    with pytest.raises(warren.NotFoundError):
        warren.Template.delete("no-such-template", client=client)
    with pytest.raises(warren.ConflictError):
        warren.Template.delete("base", client=client)
    assert warren.Template.get("base", client=client).kind == "dir"
    # A Template object works as create's template.
    with warren.Sandbox.create(t, client=client, timeout=60) as sb:
        assert sb.info.template == "base"


# ---- snapshots -----------------------------------------------------------------------------------

def test_snapshot_verbs(cli, made):
    sids, snaps = made
    sid = cli.create()
    sids.append(sid)
    cli.sh(sid, "mkdir -p /root/w && echo before-snapshot > /root/w/f")

    out = cli.ok("snapshot", sid, "--name", "cli-snap")
    snap_id = out.strip()
    assert SNAP_ID.fullmatch(snap_id) and out == snap_id + "\n", out
    snaps.append(snap_id)
    # Changes after the snapshot are not in it.
    cli.sh(sid, "echo after > /root/w/f")

    text = cli.ok("snapshot", "ls")
    assert text.splitlines()[0].split()[:3] == ["ID", "NAME", "SANDBOX"]
    row = [l for l in text.splitlines() if l.startswith(snap_id)]
    assert len(row) == 1 and row[0].split()[1:3] == ["cli-snap", sid], text
    mine = cli.json("snapshot", "ls", "--sandbox", sid)["snapshots"]
    assert [s["id"] for s in mine] == [snap_id]
    assert cli.json("snapshot", "ls", "--sandbox", "sb-nobody")["snapshots"] == []

    for ref in (snap_id, "cli-snap"):
        s = cli.json("snapshot", "info", ref)
        assert s["id"] == snap_id and s["name"] == "cli-snap" and s["sandbox_id"] == sid
        assert s["layers"] >= 2 and s["size_bytes"] > 0, s
    text = cli.ok("snapshot", "info", "cli-snap")
    assert "id:         %s\n" % snap_id in text and "name:       cli-snap\n" in text, text

    # -o json on create (which alone says how it was captured); an unnamed snapshot.
    s2 = cli.json("snapshot", sid)
    snaps.append(s2["id"])
    assert SNAP_ID.fullmatch(s2["id"]) and s2["name"] is None and s2["sandbox_id"] == sid
    assert s2["capture"] in ("btrfs-snapshot", "reflink-copy", "copy") and s2["freeze_ms"] >= 0

    # Sandboxes from the snapshot, by name and by id, start with its files.
    for ref in ("cli-snap", snap_id):
        copy = cli.create("--template", ref)
        sids.append(copy)
        assert cli.ok("exec", copy, "--", "cat", "/root/w/f") == "before-snapshot\n"

    # Bad input.
    fails(cli("snapshot", sid, "--name", "cli-snap"), 1, "snapshot", "conflict")
    fails(cli("snapshot", sid, "--name", "bad name!"), 1, "snapshot", "invalid")
    fails(cli("snapshot", sid, "--name", "snap-reserved"), 1, "snapshot", "invalid")
    fails(cli("snapshot", "sb-nosuch"), 1, "snapshot", "not_found")
    fails(cli("snapshot", "info", "snap-nosuch"), 1, "snapshot info", "not_found")
    fails(cli("create", "--template", "snap-nosuch"), 1, "create", "not_found")
    for args in (["snapshot"], ["snapshot", sid, "extra"], ["snapshot", "bad/id"],
                 ["snapshot", "--bogus", sid], ["snapshot", "ls", "--sandbox"],
                 ["snapshot", "ls", "extra"], ["snapshot", "info"], ["snapshot", "rm"],
                 ["snapshot", sid, "-o", "yaml"], ["snapshot", sid, "--name", ""]):
        r = cli(*args)
        assert r.returncode == 2 and r.stdout == b"", (args, r)
    assert b"usage: warren snapshot" in cli("snapshot", "--help").stdout

    # rm by name and by id; each is then gone; rm goes on past a failure.
    r = cli("snapshot", "rm", "cli-snap", "no-such-snap", s2["id"])
    assert r.returncode == 1 and r.stdout.decode() == "cli-snap\n%s\n" % s2["id"], r
    assert "no-such-snap" in r.stderr.decode() and r.stderr.decode().count("\n") == 1
    fails(cli("snapshot", "info", snap_id), 1, "snapshot info", "not_found")
    fails(cli("snapshot", "info", s2["id"]), 1, "snapshot info", "not_found")
    fails(cli("create", "--template", "cli-snap"), 1, "create", "not_found")
    # Sandboxes made from a deleted snapshot keep running, files and all.
    assert cli.ok("exec", sids[1], "--", "cat", "/root/w/f") == "before-snapshot\n"
    snaps.clear()


def test_snapshot_and_fork_of_stopped_and_paused_sandboxes(cli, made):
    sid = cli.create("--timeout", "1")
    made[0].append(sid)
    wait_state(cli, sid, "stopped")
    fails(cli("snapshot", sid), 1, "snapshot", "conflict")
    fails(cli("fork", sid), 1, "fork", "conflict")

    # A paused sandbox (in memory, or to disk) can be captured and forked; it stays paused.
    for how in ([], ["--disk"]):
        paused = cli.create()
        made[0].append(paused)
        cli.sh(paused, "echo paused-data > /root/d")
        cli.ok("pause", *how, paused)
        snap = cli.ok("snapshot", paused).strip()
        made[1].append(snap)
        copies = cli.ok("fork", "-n", "2", paused).split()
        made[0].extend(copies)
        assert len(copies) == 2
        assert cli.json("info", paused)["state"] == "paused"
        for c in copies:
            assert cli.ok("exec", c, "--", "cat", "/root/d") == "paused-data\n"
        c = cli.create("--template", snap)
        made[0].append(c)
        assert cli.ok("exec", c, "--", "cat", "/root/d") == "paused-data\n"


def test_snapshot_sdk(client, sandbox):
    sandbox.files.write("/root/state.txt", "sdk-before")
    snap = sandbox.snapshot(name="sdk-snap")
    try:
        assert isinstance(snap, warren.Snapshot) and SNAP_ID.fullmatch(snap.id)
        assert snap.name == "sdk-snap" and snap.sandbox_id == sandbox.sandbox_id
        assert snap.capture in ("btrfs-snapshot", "reflink-copy", "copy") and snap.freeze_ms >= 0
        assert snap.capture_ms is not None and snap.capture_ms >= 0
        assert snap.layers >= 1
        sandbox.files.write("/root/state.txt", "sdk-after")

        assert [s.id for s in warren.Snapshot.list(sandbox.sandbox_id, client=client)] == [snap.id]
        assert snap.id in [s.id for s in warren.Snapshot.list(client=client)]
        assert warren.Snapshot.list("sb-nobody", client=client) == []
        got = warren.Snapshot.get("sdk-snap", client=client)
        assert got.id == snap.id and got.sandbox_id == sandbox.sandbox_id
        assert got.layers == snap.layers and got.size_bytes == snap.size_bytes
        assert got.capture is None and got.freeze_ms is None  # only the making answer has them
        assert warren.Snapshot.get(snap.id, client=client).name == "sdk-snap"

        # Create from it: by id, by name, and from the object.
        for ref in (snap.id, "sdk-snap", snap):
            with warren.Sandbox.create(ref, client=client, timeout=60) as copy:
                assert copy.files.read("/root/state.txt") == "sdk-before"

        with pytest.raises(warren.ConflictError):
            sandbox.snapshot(name="sdk-snap")
        for bad in ("bad name!", "snap-x", ".hidden", "x" * 65):
            with pytest.raises(warren.InvalidArgumentError):
                sandbox.snapshot(name=bad)
        gone = warren.Sandbox("sb-nosuch", client=client)
        with pytest.raises(warren.NotFoundError):
            gone.snapshot()
    finally:
        warren.Snapshot.delete(snap.id, client=client)
    with pytest.raises(warren.NotFoundError):
        warren.Snapshot.get(snap.id, client=client)
    with pytest.raises(warren.NotFoundError):
        warren.Snapshot.delete("sdk-snap", client=client)
    with pytest.raises(warren.NotFoundError):
        warren.Sandbox.create("sdk-snap", client=client, timeout=60)


def test_the_answer_that_makes_a_snapshot_has_its_creation_time(client, sandbox):
    snap = sandbox.snapshot()
    try:
        got = warren.Snapshot.get(snap.id, client=client)
        assert abs((got.created_at - datetime.now(timezone.utc)).total_seconds()) < 120
        assert snap.created_at == got.created_at
    finally:
        warren.Snapshot.delete(snap.id, client=client)


def test_snapshot_sdk_of_a_stopped_sandbox(client):
    sb = warren.Sandbox.create(client=client, timeout=1)
    try:
        deadline = time.monotonic() + 15
        while sb.get_info().state != "stopped":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        with pytest.raises(warren.ConflictError):
            sb.snapshot()
        with pytest.raises(warren.ConflictError):
            sb.fork(1)
    finally:
        sb.kill()  # at once: a delete waits for a sandbox that is ending


# ---- fork ----------------------------------------------------------------------------------------

def test_fork_verb(cli, made):
    sids = made[0]
    sid = cli.create("--metadata", "role=parent")
    sids.append(sid)
    cli.sh(sid, "echo parent-data > /root/p; sleep 1000 > /dev/null 2>&1 &")

    out = cli.ok("fork", "-n", "3", sid)
    ids = out.split()
    sids.extend(ids)
    assert len(ids) == 3 and len(set(ids + [sid])) == 4 and out == "".join(i + "\n" for i in ids)
    for c in ids:
        info = cli.json("info", c)
        assert info["state"] == "running" and info["metadata"] == {"role": "parent"}
        assert info["template"] == "base", info  # the parent's template
        assert cli.ok("exec", c, "--", "cat", "/root/p") == "parent-data\n"
        # A copy's files are its own.
        cli.sh(c, "echo %s > /root/p" % c)
    # The parent keeps running, with its processes, and its files unchanged by the copies.
    assert cli.json("info", sid)["state"] == "running"
    assert cli.ok("exec", sid, "--", "cat", "/root/p") == "parent-data\n"
    assert cli.sh(sid, SLEEPERS).strip() == "1"

    # Default count 1; --timeout, --metadata and -o json.
    one = cli.ok("fork", sid).split()
    sids.extend(one)
    assert len(one) == 1
    res = cli.json("fork", "--count", "2", sid, "--timeout", "45", "--metadata", "role=copy")
    sids.extend(s["id"] for s in res["sandboxes"])
    assert len(res["sandboxes"]) == 2 and res["errors"] == [] and res["freeze_ms"] >= 0
    assert res["capture"] in ("btrfs-snapshot", "reflink-copy", "copy")
    for s in res["sandboxes"]:
        assert s["metadata"] == {"role": "copy"} and s["timeout"] == 45

    fails(cli("fork", "-n", "2", "sb-nosuch"), 1, "fork", "not_found")
    for args in (["fork", "-n", "0", sid], ["fork", "-n", "101", sid], ["fork", "-n", "x", sid],
                 ["fork", "-n", "-1", sid], ["fork"], ["fork", sid, "extra"],
                 ["fork", "--timeout", "0", sid], ["fork", "--metadata", "novalue", sid],
                 ["fork", "--bogus", sid], ["fork", "bad/id"]):
        r = cli(*args)
        assert r.returncode == 2 and r.stdout == b"", (args, r)
        assert r.stderr.decode().startswith("warren: fork"), (args, r.stderr)
    assert b"usage: warren fork" in cli("fork", "--help").stdout


def test_fork_sdk(client, sandbox):
    sandbox.files.write("/root/p", "from-parent")
    h = sandbox.commands.run("sleep 1000", background=True)
    res = sandbox.fork(2, timeout=60, metadata={"fork": "sdk"})
    try:
        assert isinstance(res, warren.ForkResult) and res.ok and res.errors == []
        assert len(res.sandboxes) == 2 and res.freeze_ms >= 0 and res.capture
        assert len({c.info.template for c in res.sandboxes}) == 1
        for c in res.sandboxes:
            assert isinstance(c, warren.Sandbox) and c.sandbox_id != sandbox.sandbox_id
            assert c.info.template == sandbox.get_info().template  # the parent's
            assert c.info.state == "running" and c.info.metadata == {"fork": "sdk"}
            assert c.info.timeout == 60
            assert c.files.read("/root/p") == "from-parent"
            # Fresh processes: the parent's background command is not in the copy.
            assert c.commands.list() == []
        assert sandbox.is_running()
        assert [p.pid for p in sandbox.commands.list() if p.running] == [h.pid]
    finally:
        res.kill_all()
    res = sandbox.fork()
    try:
        assert len(res.sandboxes) == 1 and res.sandboxes[0].files.read("/root/p") == "from-parent"
    finally:
        res.kill_all()
    for bad in (0, 101, -1):
        with pytest.raises(warren.InvalidArgumentError):
            sandbox.fork(bad)
    with pytest.raises(warren.NotFoundError):
        warren.Sandbox("sb-nosuch", client=client).fork(1)
    h.kill()


def test_fork_past_capacity_reports_each_failed_copy():
    d = Daemon("--max-sandboxes", "3").start()
    try:
        cli = Cli(d.url)
        sid = cli.create()
        r = cli("fork", "-n", "4", sid)
        ids = r.stdout.decode().split()
        errors = r.stderr.decode().splitlines()
        assert r.returncode == 1, r
        assert len(ids) <= 2 and len(ids) + len(errors) == 4, (ids, errors)
        assert all(e.startswith("warren: fork: ") and "(limit)" in e for e in errors), errors
        for c in ids:
            assert cli.json("info", c)["state"] == "running"
        cli.ok("rm", *ids)

        c = d.client()
        parent = warren.Sandbox.connect(sid, client=c)
        res = parent.fork(4)
        try:
            assert not res.ok and len(res.sandboxes) <= 2
            assert len(res.sandboxes) + len(res.errors) == 4
            assert all(isinstance(e, warren.RateLimitError) and e.code == "limit"
                       for e in res.errors), res.errors
        finally:
            res.kill_all()
        parent.kill()
    finally:
        delete_all(d)
        d.cleanup()


# ---- pause to disk -------------------------------------------------------------------------------

def test_pause_to_disk_and_resume_verbs(cli, made):
    sid = cli.create()
    made[0].append(sid)
    cli.sh(sid, "echo kept > /root/k; sleep 1000 > /dev/null 2>&1 &")
    assert cli.sh(sid, SLEEPERS).strip() == "1"

    out = cli.ok("pause", "--disk", sid)
    assert out.startswith(sid + " paused to disk: processes stopped, files kept"), out
    info = cli.json("info", sid)
    assert info["state"] == "paused" and info["paused_mode"] == "disk"
    assert "paused:     to disk (processes stopped, files kept)" in cli.ok("info", sid)
    fails(cli("exec", sid, "--", "true"), 125, "exec", "conflict")
    fails(cli("pause", sid), 1, "pause", "conflict")

    out = cli.ok("resume", sid)
    assert out.startswith(sid + " running with new processes"), out
    assert cli.ok("exec", sid, "--", "cat", "/root/k") == "kept\n"
    assert cli.sh(sid, SLEEPERS).strip() == "0", "a process survived the pause to disk"

    # In memory (the default): the same processes go on, and resume says so.
    cli.sh(sid, "sleep 1000 > /dev/null 2>&1 &")
    out = cli.ok("pause", sid)
    assert out.startswith(sid + " paused in memory"), out
    assert cli.json("info", sid)["paused_mode"] == "memory"
    res = cli.json("resume", sid)
    assert res["state"] == "running" and res["processes_kept"] is True
    assert cli.sh(sid, SLEEPERS).strip() == "1"

    # -o json of a disk pause and its resume.
    res = cli.json("pause", "--disk", sid)
    assert res["paused_mode"] == "disk" and res["state"] == "paused"
    res = cli.json("resume", sid)
    assert res["processes_kept"] is False and res["state"] == "running"
    assert cli.ok("resume", "--help").startswith("usage: warren resume")

    fails(cli("pause", "--disk", "sb-nosuch"), 1, "pause", "not_found")
    fails(cli("resume", "sb-nosuch"), 1, "resume", "not_found")
    for args in (["pause", "--disk"], ["pause", "--bogus", sid], ["pause", sid, sid]):
        r = cli(*args)
        assert r.returncode == 2 and r.stdout == b"", (args, r)


def test_pause_to_disk_sdk(client, sandbox):
    sandbox.files.write("/root/k", "kept")
    h = sandbox.commands.run("sleep 1000", background=True)
    info = sandbox.pause(mode="disk")
    assert info.state == "paused" and info.paused_mode == "disk" and info.remaining_ms > 0
    assert sandbox.is_paused()
    with pytest.raises(warren.ConflictError):
        sandbox.commands.run("true")
    info = sandbox.resume()
    assert info.state == "running" and info.processes_kept is False
    assert info.paused_mode is None
    assert sandbox.files.read("/root/k") == "kept"
    assert sandbox.commands.run(SLEEPERS).stdout.strip() == "0"
    assert h.pid not in [p.pid for p in sandbox.commands.list() if p.running]
    # A sandbox resumed from disk works as any: snapshot, fork, pause in memory.
    assert sandbox.commands.run("echo again").stdout == "again\n"
    sandbox.commands.run("sleep 1000", background=True)
    assert sandbox.pause().paused_mode == "memory"
    info = sandbox.resume()
    assert info.processes_kept is True
    assert sandbox.commands.run(SLEEPERS).stdout.strip() == "1"
    # get_info carries no processes_kept: only a resume's answer does.
    assert sandbox.get_info().processes_kept is None

    with pytest.raises(ValueError):
        sandbox.pause(mode="sideways")
    with pytest.raises(warren.NotFoundError):
        warren.Sandbox("sb-nosuch", client=client).pause(mode="disk")
