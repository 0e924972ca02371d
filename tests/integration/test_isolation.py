"""Isolation, tested from inside: the probe tries to escape and every attempt must fail."""

import hashlib
import os
import socket
import subprocess
import threading
import time

import pytest

from conftest import IMAGE, run, warren, warren_popen, pool_pids


def tree_digest(root):
    """Hash of every path, owner, mode, size, mtime and content under root."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(root)):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            h.update(("%s %d %d %o %d %d\n" % (p, st.st_uid, st.st_gid, st.st_mode, st.st_size,
                                                st.st_mtime_ns)).encode())
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


@pytest.fixture
def host_secret(tmp_path):
    p = tmp_path / "host-secret"
    p.write_text("host secret\n")
    return str(p)


@pytest.fixture
def host_tcp():
    """A TCP server on the host's loopback that the sandbox must not reach."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    hits = []

    def serve():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = srv.accept()
                hits.append(1)
                c.close()
            except OSError:
                pass

    stop = threading.Event()
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1], hits
    stop.set()
    t.join()
    srv.close()


@pytest.fixture
def host_abstract():
    s = socket.socket(socket.AF_UNIX)
    name = "warren-test-%d" % os.getpid()
    s.bind("\0" + name)
    s.listen(1)
    yield name
    s.close()


def test_probe_every_escape_fails(host_secret, host_tcp, host_abstract):
    port, hits = host_tcp
    sleeper = subprocess.Popen(["sleep", "60"])
    before = tree_digest(IMAGE)
    try:
        r = run("/usr/bin/warren-probe", "escape", "--host-file", host_secret,
                "--host-port", str(port), "--layer-file", "/etc/motd",
                "--other-pid", str(sleeper.pid), "--host-abstract", host_abstract, timeout=120)
    finally:
        sleeper.kill()
        sleeper.wait()
    out = r.stdout.decode()
    assert "ESCAPED" not in out, out
    assert r.returncode == 0, out + r.stderr.decode()
    # Every family of attempt ran.
    for name in ["host_pids", "proc_root", "dotdot", "mountinfo", "proc_sys", "cgroup_write",
                 "remount_layer", "layer_write", "devices", "modules", "bpf", "perf", "clock",
                 "network", "kernel_misc", "caps", "uid"]:
        assert "HELD " + name in out, name + " missing:\n" + out
    assert hits == [], "the sandbox reached a host socket"
    # Writes inside went to the private upper layer: the image on disk is unchanged.
    assert tree_digest(IMAGE) == before


def test_image_writes_stay_private():
    before = tree_digest(IMAGE)
    r = run("/bin/sh", "-c",
            "echo changed > /etc/motd && rm /bin/ls && chmod 777 /bin/busybox && "
            "touch /newfile && cat /etc/motd")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"changed\n"
    assert tree_digest(IMAGE) == before
    r = run("/bin/cat", "/etc/motd")
    assert r.stdout == b"image motd\n"


def test_image_layer_cannot_be_remounted_writable():
    before = tree_digest(IMAGE)
    r = run("/bin/sh", "-c", "mount -o remount,rw / ; mount -o remount,bind,rw / ; touch /x")
    assert r.stderr.lower().count(b"permission denied") == 2, r.stderr
    assert tree_digest(IMAGE) == before


def test_mounts_inside():
    r = run("/bin/sh", "-c",
            "cat /proc/self/mountinfo; echo ---; touch /sys/x 2>&1; echo 1 > /proc/sys/kernel/pid_max 2>&1;"
            "ls /dev; ls -l /dev/ptmx; stat -c %a /tmp")
    assert r.returncode == 0, r.stderr
    mountinfo, rest = r.stdout.decode().split("---\n")
    assert "/run/warren" not in mountinfo and "images/busybox" not in mountinfo
    for m in [" / / ", " /proc ", " /sys ", " /dev ", " /dev/pts "]:
        assert m in mountinfo, m
    # /tmp is the writable layer's (a directory, mode 1777 below), not a tmpfs of its own, and
    # /dev/shm a directory of /dev's tmpfs; the sandbox's terminals are capped by its own devpts
    # instance.
    assert " /tmp " not in mountinfo and " /dev/shm " not in mountinfo
    # Superblocks of its own: the root, /proc, /sys, /dev, /dev/pts and one tmpfs for every
    # masked directory; each costs every memory cgroup on the host (docs/design/density.md).
    fs = {(l.split()[2], l.split(" - ")[1].split()[0]) for l in mountinfo.splitlines()}
    own = sorted(t for _, t in fs if t not in ("devtmpfs", "tmpfs"))
    assert own == ["devpts", "overlay", "proc", "sysfs"], own
    assert sum(1 for _, t in fs if t == "tmpfs") <= 2, fs
    assert "max=1024" in next(line for line in mountinfo.splitlines() if " /dev/pts " in line)
    assert "Read-only file system" in rest
    devs = rest.split()
    for d in ["null", "zero", "full", "random", "urandom", "tty", "pts", "shm", "ptmx"]:
        assert d in devs, d
    assert "kvm" not in devs and "mem" not in devs
    assert rest.strip().endswith("1777")


def test_masked_paths():
    # /proc/kcore and /proc/sysrq-trigger exist only on some kernels; where they do, they are
    # masked too (see the probe's proc_sys attempt).
    r = run("/bin/sh", "-c", "find /sys/firmware /proc/acpi -mindepth 1 | wc -l; cat /proc/keys /proc/timer_list | wc -c;"
            "grep -c -E ' /proc/(keys|timer_list|acpi) ' /proc/self/mountinfo")
    assert r.stdout.split() == [b"0", b"0", b"3"], r.stdout + r.stderr


def test_two_sandboxes_see_neither_processes_nor_files():
    a = warren_popen("run", "--rootfs", IMAGE, "--", "/usr/bin/warren-probe", "hold-file",
                     "/tmp/marker", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while not pool_pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        a_pids = pool_pids()
        assert a_pids
        a_uids = set()
        for p in a_pids:
            with open("/proc/%d/status" % p) as f:
                a_uids |= {int(l.split()[1]) for l in f if l.startswith("Uid:")}
        b = run("/bin/sh", "-c",
                "/usr/bin/warren-probe find-file /tmp/marker; ls /proc | grep -c '^[0-9]'; "
                "cat /proc/self/uid_map; /usr/bin/warren-probe escape --other-pid %d >/dev/null; "
                "echo escape=$?" % a_pids[0])
        out = b.stdout.decode().split()
        assert out[0] == "absent"
        assert int(out[1]) <= 4  # init, sh, ls, grep: nothing of sandbox A
        b_base = int(out[3])
        assert b_base not in a_uids and all(not (b_base <= u < b_base + 65536) for u in a_uids)
        assert "escape=0" in out
    finally:
        a.terminate()  # forwarded to the command; warren run then tears the sandbox down
        a.wait()


def test_fork_bomb_stops_at_the_pid_limit():
    r = warren("run", "--rootfs", IMAGE, "--pids", "64", "--", "/usr/bin/warren-probe",
               "forkbomb", timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    forks = int(r.stdout.decode().split("forks=")[1].split()[0])
    assert 30 < forks < 64


def test_memory_hog_is_killed_inside_and_others_keep_answering():
    other = warren_popen("run", "--rootfs", IMAGE, "--", "/bin/sh", "-c",
                         "for i in 1 2 3 4 5 6 7 8 9 10; do echo alive; sleep 0.3; done",
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    r = warren("run", "--rootfs", IMAGE, "--memory", "64M", "--", "/usr/bin/warren-probe",
               "memhog", "1024", timeout=120)
    assert r.returncode == 128 + 9, r.stdout + r.stderr
    assert b"done" not in r.stdout
    out, _ = other.communicate(timeout=60)
    assert other.returncode == 0 and out.count(b"alive") == 10
    # The host answers too: this process, and a fresh sandbox.
    assert run("/bin/echo", "ok").stdout == b"ok\n"


def test_cgroup_v2_without_controllers_is_refused_cleanly():
    r = warren("run", "--rootfs", IMAGE, "--", "/bin/true",
               env={"WARREN_CGROUP": "v2", "WARREN_CGROUP_V2_ROOT": "/sys/fs/cgroup/unified"})
    assert r.returncode == 125
    assert r.stderr.startswith(b"warren: ") and b"memory" in r.stderr


def init_children(parent):
    """The warren-inits among parent's children (a sandbox's PID 1 is its creator's child)."""
    with open("/proc/%d/task/%d/children" % (parent, parent)) as f:
        kids = [int(p) for p in f.read().split()]
    out = []
    for k in kids:
        try:
            with open("/proc/%d/comm" % k) as f:
                if f.read().strip() == "warren-init":
                    out.append(k)
        except FileNotFoundError:
            pass
    return out


def assert_clean_init(pid, secret):
    """PID 1 became warren-init in place (a clone of its creator, no exec): the creator's
    environment strings are cleared and its command line reads warren-init."""
    with open("/proc/%d/environ" % pid, "rb") as f:
        env = f.read()
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        cmdline = f.read()
    assert secret.encode() not in env
    assert env.strip(b"\0") == b"", env[:200]
    with open("/proc/%d/status" % pid) as f:
        caught = [l.split()[1] for l in f if l.startswith("SigCgt:")]
    assert caught == ["0000000000000000"], caught  # no handler of the creator's
    # (an ASan build execs warren-init, whose own arguments follow)
    assert cmdline.split(b"\0")[0] == b"warren-init", cmdline[:200]
    assert b"--rootfs" not in cmdline and b"sleep" not in cmdline, cmdline[:200]


def test_warren_run_init_keeps_nothing_of_the_callers_environment():
    secret = "s3cret-%d" % os.getpid()
    p = warren_popen("run", "--rootfs", IMAGE, "--", "/bin/sh", "-c", "echo up; sleep 30",
                     env={"WARREN_TEST_SECRET": secret}, stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"up\n"
        inits = init_children(p.pid)
        assert len(inits) == 1, inits
        assert_clean_init(inits[0], secret)
        # From inside, PID 1's memory and environment stay closed (non-dumpable, owned by the
        # host's user namespace) although it never exec'd.
        r = run("/bin/sh", "-c", "cat /proc/1/environ; head -c1 /proc/1/mem;"
                " readlink /proc/1/exe || echo exe-denied; cat /proc/1/comm")
        assert r.stdout == b"exe-denied\nwarren-init\n", r.stdout + r.stderr
        assert r.stderr.count(b"Permission denied") == 2, r.stderr
    finally:
        p.terminate()
        p.wait()
