"""Shared kernel limits, tested from inside: what one sandbox takes of a host-wide count must not
be taken from the other sandboxes or from the host, and filling the sandbox's own memory must not
end it (docs/design/isolation.md, "Shared kernel counters")."""

import ctypes
import fcntl
import os
import pty
import struct
import subprocess
import tempfile
import time

import pytest

from conftest import IMAGE, warren, warren_popen

BACKENDS = ("ns", "gvisor")  # every test on the module's daemon runs on both (conftest.py)

NS_GET_OWNER_UID = 0xB704
PROBE = "/usr/bin/warren-probe"


def init_pid(sandbox_id):
    """Host pid of the sandbox's warren-init (found by its cgroup)."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/comm" % d) as f:
                if f.read().strip() != "warren-init":
                    continue
            with open("/proc/%s/cgroup" % d) as f:
                if sandbox_id in f.read():
                    return int(d)
        except OSError:
            pass
    raise AssertionError("no warren-init for %s" % sandbox_id)


def userns_owner_and_root(pid):
    """(owner uid of pid's user namespace, host uid of the namespace's root)."""
    fd = os.open("/proc/%d/ns/user" % pid, os.O_RDONLY)
    try:
        buf = bytearray(4)
        fcntl.ioctl(fd, NS_GET_OWNER_UID, buf)
    finally:
        os.close(fd)
    with open("/proc/%d/uid_map" % pid) as f:
        inside, outside, _ = f.readline().split()
    assert inside == "0"
    return struct.unpack("I", buf)[0], int(outside)


def start_in(sb, cmd):
    """Start cmd in a daemon sandbox in the background, its output into a file; returns the
    file's path inside."""
    out = "/tmp/warren-test-%d.out" % time.monotonic_ns()
    sb.commands.run("%s > %s 2>&1 &" % (cmd, out))
    return out


def wait_line(sb, out, what, timeout=240):
    """Wait until the background command's output holds `what`; returns the output."""
    deadline = time.monotonic() + timeout
    while True:
        text = sb.commands.run(["cat", out]).stdout
        if what in text:
            return text
        assert time.monotonic() < deadline, text
        time.sleep(0.5)


def host_inotify():
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    assert fd >= 0, "host: inotify_init1: %s" % os.strerror(ctypes.get_errno())
    try:
        with tempfile.TemporaryDirectory() as d:
            wd = libc.inotify_add_watch(fd, d.encode(), 0x2)  # IN_MODIFY
            assert wd >= 0, "host: inotify_add_watch: %s" % os.strerror(ctypes.get_errno())
    finally:
        os.close(fd)


def read_sysctl(name):
    with open("/proc/sys/" + name.replace(".", "/")) as f:
        return int(f.read())


@pytest.mark.backends("ns", reason=(
    "Host user namespaces and id ranges are the ns backend's; a gvisor sandbox has none of "
    "Warren's."))
def test_each_user_namespace_is_owned_by_its_own_range(client):
    """The kernel charges a user namespace's per-user counts to its owner on the host: every
    sandbox's is its own range's root, whoever created it (warren-zygote for the daemon, the
    process itself for `warren run`)."""
    import warren as w
    sb = w.Sandbox.create(client=client, timeout=120)
    p = warren_popen("run", "--rootfs", IMAGE, "--", PROBE, "sleep", "4",
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        owner, root = userns_owner_and_root(init_pid(sb.sandbox_id))
        assert owner == root != 0
        deadline = time.monotonic() + 30
        while True:
            runs = [int(d) for d in os.listdir("/proc") if d.isdigit() and
                    _comm(d) == "warren-init" and "run-" in _cgroup(d)]
            if runs or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert runs
        for pid in runs:
            owner, root = userns_owner_and_root(pid)
            assert owner == root != 0
    finally:
        p.wait(timeout=60)
        sb.kill()


def _comm(d):
    try:
        with open("/proc/%s/comm" % d) as f:
            return f.read().strip()
    except OSError:
        return ""


def _cgroup(d):
    try:
        with open("/proc/%s/cgroup" % d) as f:
            return f.read()
    except OSError:
        return ""


@pytest.mark.slow
@pytest.mark.backends("ns", reason=(
    "The host kernel's shared counters: gVisor's inotify is its own, it takes no host "
    "instance."))
def test_one_sandbox_cannot_take_inotify_from_the_others_or_the_host(client):
    """A sandbox takes every inotify instance and every watch it may: it gets the host's
    per-user limits for itself, and meanwhile another sandbox and the host still get both."""
    import warren as w
    sb = w.Sandbox.create(client=client, timeout=300)
    other = w.Sandbox.create(client=client, timeout=120)
    try:
        out = start_in(sb, "%s inotify-fill 60" % PROBE)
        text = wait_line(sb, out, "holding")
        assert ("instances=%d errno=EMFILE watches=%d errno=ENOSPC" %
                (read_sysctl("fs.inotify.max_user_instances"),
                 read_sysctl("fs.inotify.max_user_watches"))) in text, text
        assert other.commands.run([PROBE, "inotify-one", "/tmp"]).stdout == "ok\n"
        r = warren("run", "--rootfs", IMAGE, "--", PROBE, "inotify-one", "/tmp")
        assert r.stdout == b"ok\n", r.stdout + r.stderr
        host_inotify()
        # A directory watch through the API (warren-init's own inotify instance) works too.
        other.files.watch_dir("/tmp", lambda e: None).stop()
    finally:
        sb.kill()
        other.kill()


@pytest.mark.backends("ns", reason=(
    "The host kernel's shared counters: gVisor's ptys are its own, it takes no host pty."))
def test_one_sandbox_cannot_take_every_terminal(client):
    """Terminals are counted host-wide; a sandbox's own devpts instance stops it at its share,
    and another sandbox and the host still open theirs."""
    import warren as w
    sb = w.Sandbox.create(client=client, timeout=120)
    try:
        out = start_in(sb, "%s pty-fill 60" % PROBE)
        text = wait_line(sb, out, "holding")
        assert "ptys=1024 errno=ENOSPC" in text, text
        r = warren("run", "--rootfs", IMAGE, "--", PROBE, "pty-open", "64")
        assert r.returncode == 0 and b"ptys=64 " in r.stdout, r.stdout + r.stderr
        master, slave = pty.openpty()
        os.close(master)
        os.close(slave)
    finally:
        sb.kill()


def test_limits_are_the_sandboxes_own_not_its_creators(client):
    """rlimits are set in every sandbox, whatever its creator had, and the host-wide counts of
    memory-charged objects are out of the way."""
    import warren as w
    hard = subprocess.run(["sh", "-c", "ulimit -Hn"], capture_output=True).stdout.strip()
    want = b"1024 %d 8192\n" % min(524288, int(hard))
    r = warren("run", "--rootfs", IMAGE, "--", "/bin/sh", "-c",
               "echo $(ulimit -n) $(ulimit -Hn) $(ulimit -l)")
    assert r.stdout == want, r.stdout + r.stderr
    sb = w.Sandbox.create(client=client, timeout=120)
    try:
        assert sb.commands.run("echo $(ulimit -n) $(ulimit -Hn) $(ulimit -l)").stdout == \
            want.decode()
    finally:
        sb.kill()
    assert read_sysctl("fs.file-max") == 2**63 - 1
    assert read_sysctl("fs.aio-max-nr") == 2**63 - 1
    assert read_sysctl("kernel.pty.max") == 1048576


def test_filling_tmp_and_shm_leaves_the_sandbox_running(client, backend):
    """/tmp is on the writable layer (the disk), /dev/shm a tmpfs inside the memory limit: a
    writer of more than the memory limit finishes or gets ENOSPC, and the sandbox goes on."""
    import warren as w
    sb = w.Sandbox.create(client=client, timeout=300)
    try:
        pid = init_pid(sb.sandbox_id) if backend == "ns" else None
        r = sb.commands.run("dd if=/dev/zero of=/tmp/big bs=1M count=1100 2>&1; echo rc=$?",
                            timeout=280)
        assert "rc=0" in r.stdout, r.stdout
        r = sb.commands.run("dd if=/dev/zero of=/dev/shm/big bs=1M count=1100 2>&1; echo rc=$?",
                            timeout=120)
        assert "No space left on device" in r.stdout and "rc=1" in r.stdout, r.stdout
        assert sb.commands.run("echo alive; rm -f /tmp/big /dev/shm/big").stdout == "alive\n"
        assert pid is None or init_pid(sb.sandbox_id) == pid
    finally:
        sb.kill()
    # `warren run` keeps its writable layer (and so /tmp) on a tmpfs: at most half the memory.
    r = warren("run", "--rootfs", IMAGE, "--memory", "128M", "--", "/bin/sh", "-c",
               "dd if=/dev/zero of=/tmp/big bs=1M count=200 2>&1; echo rc=$?; echo alive",
               timeout=120)
    assert b"No space left on device" in r.stdout and r.stdout.endswith(b"alive\n"), \
        r.stdout + r.stderr


@pytest.mark.backends("ns", reason=(
    "The host's OOM killer inside the sandbox's cgroup; on gvisor the memory limit holds the "
    "sentry, which ends with the sandbox (test_gvisor.py, isolation.md)."))
def test_the_oom_killer_takes_a_process_before_pid_1(client):
    """Memory charged to the sandbox but in no process (an unmapped memfd here, tmpfs pages
    alike) fills the limit: the OOM killer kills the process that wrote it, never PID 1 (which
    is larger), and the sandbox keeps answering. Nothing inside can get below PID 1."""
    import warren as w
    sb = w.Sandbox.create(client=client, memory_mb=128, timeout=120)
    try:
        pid = init_pid(sb.sandbox_id)
        with open("/proc/%d/oom_score_adj" % pid) as f:
            assert f.read().strip() == "0"
        assert sb.commands.run("cat /proc/self/oom_score_adj; sh -c 'cat /proc/self/oom_score_adj'"
                               ).stdout == "1000\n1000\n"
        r = sb.commands.run([PROBE, "memfd-hog", "1024"], check=False, timeout=120)
        assert r.exit_code != 0 and "done" not in r.stdout, r
        assert sb.commands.run("echo alive").stdout == "alive\n"
        assert init_pid(sb.sandbox_id) == pid
        r = sb.commands.run([PROBE, "escape", "--only", "oom_immunity"], check=False)
        assert r.exit_code == 0 and "HELD oom_immunity" in r.stdout, r.stdout
    finally:
        sb.kill()
