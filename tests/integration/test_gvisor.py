"""The gvisor backend (`runtime: "gvisor"`): the same sandbox inside gVisor's user-space kernel
(runsc, ptrace platform), through the real daemon with the Python SDK.

What is checked from the host: the sandbox's processes are gVisor's sentry and gofer under
warren-shim, in the sandbox's cgroups, and nothing of them is left after a delete or a daemon
restart. What is checked from inside: the kernel answering is gVisor's, and the escape probe
fails at every attempt."""

import json
import os
import shutil
import subprocess
import time

import pytest

import warren
from conftest import CGROUP_PARENT, RUN_DIR, Daemon, delete_all, internet

pytestmark = pytest.mark.skipif(shutil.which("runsc") is None and not os.environ.get("CI"),
                                reason="runsc is not installed (scripts/deps.sh test installs it)")


def gvisor_pids(sid=""):
    """Host processes of this session's gvisor sandboxes (runsc, its sentry and gofer, the
    shim), or of sandbox sid's: their command lines name its run directory."""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if (RUN_DIR + "/sandboxes/" + sid).encode() in cmd:
            found.append(int(p))
    return found


def wait_for(pred, timeout=10.0, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


# The module's daemon and its client are conftest's `daemon` and `client`.
@pytest.fixture
def gsb(client):
    sb = warren.Sandbox.create(client=client, runtime="gvisor", timeout=120)
    yield sb
    try:
        sb.kill()
    except warren.NotFoundError:
        pass
    assert wait_for(lambda: not gvisor_pids(sb.sandbox_id)), \
        "gVisor processes left: %r" % gvisor_pids(sb.sandbox_id)


def test_the_kernel_inside_is_gvisors(gsb):
    assert gsb.get_info().runtime == "gvisor"
    r = gsb.commands.run("uname -r; cat /proc/1/cmdline | tr '\\0' ' '; echo; id -u")
    release, init, uid = r.stdout.splitlines()
    assert release != os.uname().release, "the host's kernel answered"
    assert init.startswith("/dev/.warren/init --listen"), init
    assert uid == "0"
    # On the host: warren-shim heads the sandbox, with runsc's sentry and gofer below it, all in
    # the sandbox's cgroups.
    with open("/sys/fs/cgroup/memory/%s/%s/cgroup.procs" % (CGROUP_PARENT, gsb.sandbox_id)) as f:
        pids = [int(line) for line in f]
    names = set()
    for p in pids:
        with open("/proc/%d/cmdline" % p, "rb") as f:
            names.add(os.path.basename(f.read().split(b"\0")[0]).decode())
    assert {"warren-shim", "runsc-sandbox", "runsc-gofer"} <= names, names


def test_commands_and_files(gsb):
    gsb.files.write("/tmp/hello.txt", b"from the host\n")
    r = gsb.commands.run("cat /tmp/hello.txt; echo $FOO; pwd", env={"FOO": "bar"}, cwd="/etc")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "from the host\nbar\n/etc\n"
    gsb.commands.run("mkdir -p /work/d && echo inside > /work/d/f")
    assert gsb.files.read("/work/d/f") == "inside\n"
    assert [e.name for e in gsb.files.list("/work/d")] == ["f"]
    r = gsb.commands.run("exit 3", check=False)
    assert r.exit_code == 3
    # A background process reading its stdin.
    h = gsb.commands.run("read x; echo got $x", background=True)
    h.send_stdin("line\n")
    assert h.wait(timeout=20).stdout == "got line\n"
    assert [p for p in gsb.commands.list() if p.running] == []


def test_what_gvisor_cannot_do_answers_501(gsb, client):
    # A port of a sandbox without a network (gVisor's sockets cannot be handed to the host:
    # ports are reached through the network slot, test_a_network_goes_through_the_slot...)
    r = client.request("GET", "/v1/sandboxes/%s/ports/8080/" % gsb.sandbox_id, check=False)
    assert r.status == 501 and "gvisor" in r.json()["message"], (r.status, r.body)
    # A command's own cgroup
    r = client.request("POST", "/v1/sandboxes/%s/exec" % gsb.sandbox_id, json_body={
        "cmd": ["true"], "memory_mb": 64}, check=False)
    assert r.status == 501, (r.status, r.body)


def test_pause_in_memory_keeps_a_shells_variable(gsb):
    h = gsb.commands.run("sh", background=True)
    h.send_stdin('x=$RANDOM$RANDOM$RANDOM$$; echo "$x" > /tmp/before\n')
    assert wait_for(lambda: gsb.files.exists("/tmp/before"))
    before = gsb.files.read("/tmp/before").strip()
    info = gsb.pause()
    assert info.state == "paused" and info.paused_mode == "memory"
    time.sleep(0.3)
    gsb.resume()
    h.send_stdin('echo "$x"; exit 0\n')
    r = h.wait(timeout=20)
    assert r.stdout.strip() == before and len(before) >= 4


# The probe's families that test the host's boundary. The others look at the kernel the sandbox
# runs on, which here is gVisor's own: its PID 1, its id maps (0 maps to gVisor's 0, not the
# host's), its devices and io_uring are gVisor's emulations, and a write to / goes through the
# gofer into the writable layer (the image on disk is checked below). docs/design/isolation.md,
# "The gvisor backend", says what each backend isolates.
HOST_FAMILIES = ["dotdot", "mountinfo", "proc_sys", "cgroup_write", "modules", "bpf", "clock",
                 "network"]


def test_pause_in_memory_freezes_every_time(gsb):
    """A v1 freeze of gVisor's sentry and its ptrace stubs sometimes left one out of the
    refrigerator and timed out (2 pauses in 15 did); the runtime writes FROZEN again until every
    task is in. Regression test: ten pauses with processes running, each answered."""
    gsb.commands.run("sleep 300", background=True)
    gsb.commands.run("sleep 300 &", background=True)
    for _ in range(10):
        gsb.pause()
        gsb.resume()
    assert gsb.commands.run("echo alive").stdout == "alive\n"


def test_pause_to_disk_keeps_the_processes_and_their_memory(gsb):
    """runsc checkpoint on pause to disk, restore on resume: a shell's variable and a counter
    in memory go on from where they were; nothing of the sandbox runs while it is on disk."""
    sid = gsb.sandbox_id
    h = gsb.commands.run("sh", background=True)
    h.send_stdin('x=$RANDOM$RANDOM$$; i=0; echo "$x" > /tmp/before\n')
    assert wait_for(lambda: gsb.files.exists("/tmp/before"))
    before = gsb.files.read("/tmp/before").strip()
    info = gsb.pause(mode="disk")
    assert info.state == "paused" and info.paused_mode == "disk"
    assert wait_for(lambda: not gvisor_pids()), "gVisor still runs: %r" % gvisor_pids()
    assert not os.path.exists(os.path.join(RUN_DIR, "sandboxes", sid))
    info = gsb.resume()
    assert info.state == "running" and info.processes_kept is True
    # The same shell (its stdin reached through the same handle), its variable in memory.
    procs = [p for p in gsb.commands.list() if p.running]
    assert [p.pid for p in procs] == [h.pid], procs
    h.send_stdin('echo "$x" > /tmp/after\n')
    assert wait_for(lambda: gsb.files.exists("/tmp/after"))
    assert gsb.files.read("/tmp/after").strip() == before
    # Twice: the image of the first pause was spent by its resume.
    gsb.pause(mode="disk")
    assert gsb.resume().processes_kept is True
    assert [p.pid for p in gsb.commands.list() if p.running] == [procs[0].pid]


def test_fork_keeps_the_memory_and_the_parent_goes_on(gsb):
    """Copies restored from one checkpoint of the running parent: each continues its shell,
    with the variable it held; the parent goes on too; each copy has its own files."""
    h = gsb.commands.run("sh", background=True)
    h.send_stdin('x=$RANDOM$RANDOM$$; echo "$x" > /tmp/before\n')
    assert wait_for(lambda: gsb.files.exists("/tmp/before"))
    before = gsb.files.read("/tmp/before").strip()
    r = gsb.fork(count=2)
    assert r.ok and r.processes_kept and len(r.sandboxes) == 2, r
    assert r.freeze_ms > 0
    for sb in [gsb] + r.sandboxes:
        assert sb.get_info().runtime == "gvisor"
        assert wait_for(lambda: [p.pid for p in sb.commands.list() if p.running] == [h.pid])
        out = "/tmp/after-%s" % sb.sandbox_id
        sb.commands.send_stdin(h.pid, 'echo "$x" > %s\n' % out)
    for sb in [gsb] + r.sandboxes:
        out = "/tmp/after-%s" % sb.sandbox_id
        assert wait_for(lambda: sb.files.exists(out)), sb.sandbox_id
        assert sb.files.read(out).strip() == before
        # Its own files: what one writes, no other sees.
        assert [x for x in ("/tmp/after-" + o.sandbox_id for o in [gsb] + r.sandboxes)
                if sb.files.exists(x)] == [out]
    for sb in r.sandboxes:
        sb.kill()


def test_the_escape_probe_fails_inside_gvisor(gsb, tmp_path):
    from test_isolation import tree_digest
    from conftest import IMAGE
    secret = tmp_path / "host-secret"
    secret.write_text("host secret\n")
    before = tree_digest(IMAGE)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        r = gsb.commands.run("/usr/bin/warren-probe escape --host-file %s --other-pid %d "
                             "--layer-file /etc/motd" % (secret, sleeper.pid), timeout=120,
                             check=False)
    finally:
        sleeper.kill()
        sleeper.wait()
    out = r.stdout
    for name in HOST_FAMILIES:
        line = next((l for l in out.splitlines() if l.split(" ", 2)[1:2] == [name + ":"]), "")
        assert line.startswith("HELD "), name + ":\n" + out
    # The host's file, the host's processes and the image on disk stay out of reach.
    assert "host secret" not in out
    # warren-init's stdio is /dev/null: nothing the sandbox writes there lands in the host's
    # /run (runsc's own log is beside the sandbox's run directory).
    gsb.commands.run("echo from-the-sandbox > /proc/1/fd/2; echo x > /proc/1/fd/1", check=False,
                     user="root")
    with open(os.path.join(RUN_DIR, "sandboxes", gsb.sandbox_id, "runsc.log"), "rb") as f:
        assert b"from-the-sandbox" not in f.read()
    assert str(sleeper.pid) not in gsb.commands.run("ls /proc").stdout.split()
    assert tree_digest(IMAGE) == before


def test_an_images_tmp_symlink_reaches_nothing_of_the_host(daemon, client):
    """The runtime binds the root's own /tmp over runsc's tmpfs, and a bind's source is followed
    on the host: an image whose /tmp is a symbolic link to / must not bind the host's root
    there (regression: it was not checked). The link is then the sandbox's own."""
    from conftest import IMAGE
    root = os.path.join(daemon.state, "templates", "tmplink", "rootfs")
    if not os.path.isdir(root):
        os.makedirs(os.path.dirname(root), exist_ok=True)
        subprocess.run(["cp", "-a", IMAGE + "/.", root + ".tmp"], check=True)
        shutil.rmtree(os.path.join(root + ".tmp", "tmp"), ignore_errors=True)
        os.symlink("/", os.path.join(root + ".tmp", "tmp"))
        os.rename(root + ".tmp", root)
    marker = "/warren-gvisor-tmplink-%d" % os.getpid()
    sb = warren.Sandbox.create("tmplink", client=client, runtime="gvisor", timeout=120)
    try:
        listing = sb.commands.run("ls /tmp/", user="root").stdout.split()
        assert "bin" in listing and "work" not in listing, listing
        sb.commands.run("echo x > /tmp%s" % marker, user="root", check=False)
        assert not os.path.exists(marker)
    finally:
        sb.kill()


def test_limits_apply_to_the_whole_sandbox(client):
    sb = warren.Sandbox.create(client=client, runtime="gvisor", memory_mb=256, cpus=0.5,
                               timeout=120)
    try:
        base = "/sys/fs/cgroup/%%s/%s/%s/" % (CGROUP_PARENT, sb.sandbox_id)
        with open(base % "memory" + "memory.limit_in_bytes") as f:
            assert int(f.read()) == 256 << 20
        with open(base % "cpu" + "cpu.cfs_quota_us") as f:
            assert int(f.read()) == 50000
    finally:
        sb.kill()
    assert wait_for(lambda: not gvisor_pids())


def test_the_pids_limit_ends_only_its_sandbox():
    """The pids limit holds the host tasks gVisor runs a sandbox on (about 11 per process
    inside, on the ptrace platform): a sandbox that spawns past it ends, its record says why,
    the host never held more of its tasks than the limit, and the daemon serves the next."""
    d = Daemon("--pids-max", "300").start()
    try:
        c = d.client()
        sb = warren.Sandbox.create(client=c, runtime="gvisor", timeout=120)
        pids = "/sys/fs/cgroup/pids/%s/%s/" % (CGROUP_PARENT, sb.sandbox_id)
        with open(pids + "pids.max") as f:
            assert f.read().strip() == "300"
        with pytest.raises(warren.WarrenError):
            sb.commands.run("for i in $(seq 100); do sleep 60 >/dev/null 2>&1 & done; wait",
                            timeout=60)
        info = sb.get_info()
        assert info.state == "stopped"
        assert "limit of 300 tasks" in info.reason, info.reason
        assert wait_for(lambda: not gvisor_pids(sb.sandbox_id)), gvisor_pids(sb.sandbox_id)
        other = warren.Sandbox.create(client=c, runtime="gvisor", timeout=120)
        assert other.commands.run("echo still").stdout == "still\n"
        other.kill()
    finally:
        try:
            delete_all(d)
        finally:
            d.cleanup()


def test_delete_leaves_nothing(client):
    sb = warren.Sandbox.create(client=client, runtime="gvisor", timeout=120)
    d = os.path.join(RUN_DIR, "sandboxes", sb.sandbox_id)
    assert os.path.exists(os.path.join(d, "ctl.sock"))
    assert gvisor_pids()
    sb.kill()
    assert wait_for(lambda: not gvisor_pids()), gvisor_pids()
    assert not os.path.exists(d)
    # (the autouse `leftovers` fixture checks mounts, cgroups and the run directory)


def test_a_daemon_killed_and_restarted_adopts_it():
    d = Daemon().start()
    try:
        c = d.client()
        sb = warren.Sandbox.create(client=c, runtime="gvisor", timeout=120)
        sb.commands.run("echo kept > /tmp/kept")
        shim = [p for p in gvisor_pids() if open("/proc/%d/comm" % p).read().strip() == "warren-shim"]
        d.kill9()
        assert wait_for(lambda: all(os.path.exists("/proc/%d" % p) for p in shim))
        d.start()
        c = d.client()
        sb = warren.Sandbox.connect(sb.sandbox_id, client=c)
        assert sb.get_info().state == "running" and sb.get_info().runtime == "gvisor"
        assert sb.commands.run("cat /tmp/kept").stdout == "kept\n"
        sb.kill()
        assert wait_for(lambda: not gvisor_pids()), gvisor_pids()
    finally:
        try:
            delete_all(d)
        finally:
            d.cleanup()


def test_paused_to_disk_then_restarted_resumes_its_processes():
    """A checkpoint outlives the daemon: paused to disk, the daemon killed with -9 and
    started again, the resume continues the same shell."""
    d = Daemon().start()
    try:
        c = d.client()
        sb = warren.Sandbox.create(client=c, runtime="gvisor", timeout=120)
        h = sb.commands.run("sh", background=True)
        h.send_stdin('x=$RANDOM$RANDOM$$; echo "$x" > /tmp/before\n')
        assert wait_for(lambda: sb.files.exists("/tmp/before"))
        before = sb.files.read("/tmp/before").strip()
        assert sb.pause(mode="disk").paused_mode == "disk"
        d.kill9()
        d.start()
        sb = warren.Sandbox.connect(sb.sandbox_id, client=d.client())
        assert sb.get_info().state == "paused"
        assert sb.resume().processes_kept is True
        sb.commands.send_stdin(h.pid, 'echo "$x" > /tmp/after\n')
        assert wait_for(lambda: sb.files.exists("/tmp/after"))
        assert sb.files.read("/tmp/after").strip() == before
        sb.kill()
        assert wait_for(lambda: not gvisor_pids(sb.sandbox_id))
    finally:
        try:
            delete_all(d)
        finally:
            d.cleanup()


# ---- networking: gVisor's own network stack on the sandbox's network slot ----------------------

@pytest.fixture(scope="module")
def ndaemon():
    """A daemon on the Debian base template (curl, python3), with the session's test internet."""
    import tempfile
    base = os.environ.get("WARREN_BASE_TEMPLATE", "/var/cache/warren/test-templates/base")
    if not os.path.exists(os.path.join(base, "rootfs", "bin", "bash")):
        pytest.skip("the Debian base template is not built (test.sh builds it)")
    top = tempfile.mkdtemp(prefix="warrend-gvnet-")
    tdir = os.path.join(top, "state", "templates", "base")
    os.makedirs(tdir)
    os.symlink(os.path.join(base, "rootfs"), os.path.join(tdir, "rootfs"))
    shutil.copy(os.path.join(base, "config.json"), tdir)
    d = Daemon(state_dir=top).start()
    yield d
    try:
        delete_all(d)
    finally:
        d.cleanup()


def gv_net(c, **net):
    r = c.request("POST", "/v1/sandboxes", json_body={
        "template": "base", "runtime": "gvisor", "timeout": 120, "network": net})
    return warren.Sandbox.connect(r.json()["id"], client=c)


def curl(sb, url):
    r = sb.commands.run(["curl", "-sS", "--max-time", "5", url], check=False, timeout=30)
    return r.stdout if r.exit_code == 0 else None


def test_a_network_goes_through_the_slot_and_its_policy(ndaemon):
    inet = internet()
    c = ndaemon.client()
    sb = gv_net(c, internet=True)
    off = gv_net(c, enabled=True)
    try:
        n = sb.get_info().network
        assert n.enabled and n.address.startswith("10.")
        ifaces = sb.commands.run("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '").stdout
        assert sorted(ifaces.split()) == ["eth0", "lo"]
        # gVisor's own network stack is in the checkpoint: a pause to disk keeps a server
        # listening on the slot's interface, and so does a fork, whose copies each have the
        # address of a slot of their own (the host's anti-spoofing would drop the parent's).
        sb.commands.run("mkdir -p /tmp/www && echo hello-gvisor > /tmp/www/index.html")
        h = sb.commands.run("exec python3 -m http.server 8080 -d /tmp/www", background=True)
        assert sb.pause(mode="disk").paused_mode == "disk"
        info = sb.resume()
        assert info.processes_kept is True and info.network.address == n.address
        assert [p.pid for p in sb.commands.list() if p.running] == [h.pid]
        r = sb.fork(count=2)
        assert r.ok and r.processes_kept and len(r.sandboxes) == 2, r
        copies = r.sandboxes
        addrs = {n.address} | {x.get_info().network.address for x in copies}
        assert len(addrs) == 3, addrs
        # Out through the slot, masqueraded by the host (the peer sees the host's uplink), and
        # names through the host's DNS stub.
        got = json.loads(curl(sb, "http://%s/x" % inet.addr("web")))
        assert got["peer"] == inet.host_end
        assert json.loads(curl(sb, "http://example.test/y"))["host"] == "example.test"
        # The same from a sandbox whose policy has no internet: the host drops it.
        assert curl(off, "http://%s/x" % inet.addr("web")) is None
        # Each one's server, reached through its slot's address; each goes out as itself.
        for x in [sb] + copies:
            assert get_port(c, x) == b"hello-gvisor\n", x.sandbox_id
            assert json.loads(curl(x, "http://example.test/w"))["host"] == "example.test"
        # This gVisor cannot save a TCP connection through the slot's interface, open or in
        # TIME_WAIT (a minute after it closed; the server above closed first): such a pause
        # keeps the files only, and says so.
        assert sb.pause(mode="disk").paused_mode == "disk"
        assert sb.resume().processes_kept is False
        assert curl(sb, "http://example.test/z") is not None
        for x in copies:
            x.kill()
    finally:
        for s in (sb, off):
            s.kill()
        c.close()


def test_a_slot_gvisor_used_serves_the_next_sandbox(tmp_path):
    """gVisor's stack takes the slot's address off the host's stack; the slot gets it back
    before it is used again. A daemon whose pool has two slots: two gvisor sandboxes, then two
    ns ones, then two gvisor ones, each reaching the test internet through its slot."""
    base = os.environ.get("WARREN_BASE_TEMPLATE", "/var/cache/warren/test-templates/base")
    if not os.path.exists(os.path.join(base, "rootfs", "bin", "bash")):
        pytest.skip("the Debian base template is not built (test.sh builds it)")
    inet = internet()
    tdir = tmp_path / "state" / "templates" / "base"
    tdir.mkdir(parents=True)
    os.symlink(os.path.join(base, "rootfs"), str(tdir / "rootfs"))
    shutil.copy(os.path.join(base, "config.json"), str(tdir))
    d = Daemon(state_dir=str(tmp_path))
    i = d.net.index("--net-pool") + 1
    d.net[i] = d.net[i].replace("/24", "/30")  # two slots
    d.net[d.net.index("--net-ready") + 1] = "1"
    d.start()
    c = d.client()

    def create(runtime):
        for _ in range(100):  # a slot rests 3 s after its sandbox
            r = c.request("POST", "/v1/sandboxes", check=False, json_body={
                "template": "base", "runtime": runtime, "timeout": 60,
                "network": {"internet": True}})
            if r.status != 503:
                break
            time.sleep(0.1)
        assert r.status == 201, (r.status, r.body)
        return warren.Sandbox.connect(r.json()["id"], client=c)

    try:
        for runtime in ("gvisor", "ns", "gvisor"):
            pair = [create(runtime), create(runtime)]
            try:
                assert len({x.get_info().network.address for x in pair}) == 2
                for x in pair:
                    got = curl(x, "http://%s/x" % inet.addr("web"))
                    assert got is not None and json.loads(got)["peer"] == inet.host_end, runtime
            finally:
                for x in pair:
                    x.kill()
    finally:
        c.close()
        d.cleanup()


def get_port(c, sb, port=8080):
    r = None
    for _ in range(100):
        r = c.request("GET", "/v1/sandboxes/%s/ports/%d/index.html" % (sb.sandbox_id, port),
                      check=False)
        if r.status == 200:
            return r.body
        time.sleep(0.1)
    return (r.status, r.body)
