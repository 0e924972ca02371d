"""The daemon itself: restarts (kill -9, SIGTERM), the pool of pre-cloned children, the zygote
and its huge pages, and what sandbox inits inherit from it."""

import os
import threading
import time

import pytest

import warren
from conftest import Daemon, delete_all, SANITIZED, WARREND

# ---- restart -----------------------------------------------------------------------------------

def test_kill_9_and_restart_lose_nothing():
    d = Daemon().start()
    try:
        c = d.client()
        boxes = [warren.Sandbox.create(client=c, timeout=600) for _ in range(3)]
        handles = []
        for i, b in enumerate(boxes):
            b.files.write("/tmp/state", ("box %d\n" % i).encode())
            handles.append(b.commands.run("sleep 1; echo finished-%d; exit %d" % (i, 10 + i),
                                          background=True))
        long = boxes[0].commands.run("sleep 300", background=True)
        # Load while the daemon dies.
        stop = threading.Event()

        def load():
            while not stop.is_set():
                try:
                    boxes[1].commands.run("true")
                except Exception:  # noqa: BLE001 - the daemon is being killed on purpose
                    pass

        t = threading.Thread(target=load)
        t.start()
        time.sleep(0.3)
        d.kill9()
        stop.set()
        t.join()
        time.sleep(1.5)  # the background commands finish while no daemon runs
        d.start()
        c = d.client()
        for i, b in enumerate(boxes):
            b2 = warren.Sandbox.connect(b.sandbox_id, client=c)
            assert b2.get_info().state == "running"
            assert b2.files.read("/tmp/state") == "box %d\n" % i
            p = c.request("GET", "/v1/sandboxes/%s/processes/%d" % (b.sandbox_id, handles[i].pid)).json()
            assert p["running"] is False and p["exit_code"] == 10 + i
        p = c.request("GET", "/v1/sandboxes/%s/processes/%d" % (boxes[0].sandbox_id, long.pid)).json()
        assert p["running"] is True
        out = c.request("GET", "/v1/sandboxes/%s/processes/%d/attach" % (boxes[1].sandbox_id,
                                                                         handles[1].pid)).body
        assert b"finished-1" in out
    finally:
        delete_all(d)
        d.cleanup()


def test_deadline_survives_a_restart_and_sandboxes_outlive_sigterm():
    d = Daemon().start()
    try:
        c = d.client()
        short = warren.Sandbox.create(client=c, timeout=3)
        keep = warren.Sandbox.create(client=c, timeout=600)
        d.stop()  # SIGTERM: the daemon goes, the sandboxes stay
        time.sleep(0.5)
        d.start()
        c = d.client()
        assert warren.Sandbox.connect(keep.sandbox_id, client=c).commands.run("echo up").stdout == "up\n"
        time.sleep(3.5)
        stopped = {s.sandbox_id: s for s in warren.Sandbox.list(client=c, state=["stopped"])}
        assert stopped[short.sandbox_id].reason == "timeout"
        assert warren.Sandbox.connect(keep.sandbox_id, client=c).get_info().state == "running"
    finally:
        delete_all(d)
        d.cleanup()


def test_pool_refills_after_creates_take_its_children():
    """The pool is refilled when a create takes a child (no polling): after three creates from
    a pool of two, two pre-cloned children wait again, and the sandboxes work."""
    d = Daemon("--pool", "2", "--warm", "0").start()

    def waiting():
        kids = [int(p) for p in
                open("/proc/%d/task/%d/children" % (d.proc.pid, d.proc.pid)).read().split()]
        return [k for k in kids if open("/proc/%d/comm" % k).read().strip() == "warren-zygote"]

    def wait_for(n):
        deadline = time.monotonic() + 10
        while len(waiting()) != n + 1 and time.monotonic() < deadline:  # + the zygote
            time.sleep(0.05)
        return len(waiting()) - 1

    try:
        assert wait_for(2) == 2
        before = set(waiting())
        c = d.client()
        sbs = [warren.Sandbox.create(client=c) for _ in range(3)]
        assert [sb.commands.run("echo ok").stdout for sb in sbs] == ["ok\n"] * 3
        assert wait_for(2) == 2
        assert set(waiting()) - before, "the pool's children were not replaced"
        for sb in sbs:
            sb.kill()
    finally:
        delete_all(d)
        d.cleanup()


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def test_zygote_and_pre_cloned_children_end_with_the_daemon():
    d = Daemon("--pool", "3", "--warm", "0").start()
    try:
        deadline = time.monotonic() + 10
        kids = []
        while time.monotonic() < deadline:
            # the zygote and 3 pre-cloned children (not the warm sandboxes' warren-inits, which
            # outlive the daemon like any sandbox: test_warm.py)
            kids = [int(p) for p in open("/proc/%d/task/%d/children" % (d.proc.pid, d.proc.pid)).read().split()]
            kids = [k for k in kids if comm(k) == "warren-zygote"]
            if len(kids) >= 4:
                break
            time.sleep(0.05)
        assert len(kids) >= 4, kids
        # The zygote is the static warren-zygote, not a fork of the daemon: a clone copies a
        # dozen mappings, not the daemon's libraries.
        zyg = [k for k in kids if os.readlink("/proc/%d/exe" % k).endswith("/warren-zygote")]
        assert zyg, kids
        if not SANITIZED:  # an ASan build links it dynamically
            with open("/proc/%d/maps" % zyg[0]) as f:
                assert len(f.readlines()) < 40
        names = sorted(open("/proc/%d/comm" % k).read().strip() for k in kids)
        assert names.count("warren-zygote") >= 4, names
        d.kill9()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(os.path.exists("/proc/%d" % k) for k in kids):
            time.sleep(0.05)
        alive = [k for k in kids if os.path.exists("/proc/%d" % k) and
                 open("/proc/%d/stat" % k).read().split()[2] != "Z"]
        assert alive == [], "left running after kill -9 of warrend: %r" % alive
    finally:
        if d.proc.poll() is not None:
            d.start()
        delete_all(d)
        d.cleanup()


def _mappings(pid):
    """[(perms, path or "", AnonHugePages kB)] from /proc/pid/smaps."""
    out = []
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and len(parts) >= 5 and ":" in parts[3]:
                out.append([parts[1], parts[5] if len(parts) > 5 else "", 0])
            elif parts[0] == "AnonHugePages:":
                out[-1][2] = int(parts[1])
    return out


@pytest.mark.skipif(SANITIZED, reason="an ASan build links warren-zygote dynamically, unaligned")
def test_zygote_code_is_on_huge_pages_and_sandboxes_run_from_it():
    """warren-zygote moves its code and constants onto transparent huge pages at start
    (src/zygote/hugetext.c): its clones, every sandbox's setup and warren-init, run from them."""
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
        if "[never]" in f.read():
            pytest.skip("transparent huge pages are off on this host")
    d = Daemon("--warm", "0").start()
    try:
        # A sandbox's PID 1 is a clone of the zygote and runs from the same code. (Once the
        # zygote has cloned, it is past the move: the daemon does not wait for its start.)
        sb = warren.Sandbox.create(client=d.client(), timeout=60)
        r = sb.commands.run("echo ok; cat /proc/1/cmdline")
        assert r.stdout.startswith("ok\nwarren-init"), r.stdout
        kids = [int(p) for p in open("/proc/%d/task/%d/children" % (d.proc.pid, d.proc.pid)).read().split()]
        zyg = [k for k in kids if comm(k) == "warren-zygote" and
               os.readlink("/proc/%d/exe" % k).endswith("/warren-zygote") and
               open("/proc/%d/status" % k).read().count("NSpid:\t%d\n" % k) == 1]
        assert len(zyg) == 1, kids
        maps = _mappings(zyg[0])
        # No code left mapped from the file; the code and the constants are anonymous, on
        # 2 MiB pages.
        assert not [m for m in maps if m[0] == "r-xp" and m[1].endswith("warren-zygote")], maps
        moved = [m for m in maps if m[1] == "" and m[0] in ("r-xp", "r--p") and m[2] >= 2048]
        assert [m[0] for m in moved] == ["r-xp", "r--p"], maps
        sb.kill()
    finally:
        delete_all(d)
        d.cleanup()


def test_sandbox_inits_keep_nothing_of_the_daemons_environment():
    """warren-zygote is exec'd with no environment, and each sandbox's PID 1, a clone of it that
    becomes warren-init in place, clears its copy of the zygote's command line."""
    secret = "s3cret-%d" % os.getpid()
    d = Daemon("--warm", "1", env={"WARREN_TEST_SECRET": secret}).start()
    try:
        c = d.client()
        sb = warren.Sandbox.create(client=c, timeout=60)
        r = sb.commands.run("cat /proc/1/cmdline")
        assert r.stdout.split("\0")[0] == "warren-init" and "--run-dir" not in r.stdout, r.stdout
        with open("/proc/%d/task/%d/children" % (d.proc.pid, d.proc.pid)) as f:
            kids = [int(p) for p in f.read().split()]
        inits = [k for k in kids if comm(k) == "warren-init"]
        zyg = [k for k in kids if comm(k) == "warren-zygote"]
        assert inits and zyg, kids
        for k in inits + zyg:
            with open("/proc/%d/environ" % k, "rb") as f:
                env = f.read()
            assert secret.encode() not in env and env.strip(b"\0") == b"", (k, env[:200])
        for k in inits:
            with open("/proc/%d/cmdline" % k, "rb") as f:
                cmdline = f.read()
            assert cmdline.split(b"\0")[0] == b"warren-init" and b"--run-dir" not in cmdline
        sb.kill()
    finally:
        delete_all(d)
        d.cleanup()


def test_without_warren_zygote_the_daemon_forks_one_and_sandboxes_exec_warren_init(tmp_path):
    """A fork of warrend holds the daemon's memory (keys, every sandbox's env), so a sandbox
    cloned from it must exec warren-init, never become it in place."""
    import shutil
    bindir = tmp_path / "bin"
    bindir.mkdir()
    build = os.path.dirname(WARREND)
    for name in ("warrend", "warren-init"):  # and no warren-zygote
        shutil.copy2(os.path.join(build, name), bindir / name)
    d = Daemon("--warm", "1", binary=str(bindir / "warrend")).start()
    try:
        sb = warren.Sandbox.create(client=d.client(), timeout=60)
        assert sb.commands.run("echo ok").stdout == "ok\n"
        with open("/proc/%d/task/%d/children" % (d.proc.pid, d.proc.pid)) as f:
            kids = [int(p) for p in f.read().split()]
        inits = [k for k in kids if comm(k) == "warren-init"]
        zyg = [k for k in kids if comm(k) == "warren-zygote"]
        assert inits and zyg, kids
        assert all(os.readlink("/proc/%d/exe" % k) == str(bindir / "warrend") for k in zyg)
        for k in inits:
            assert os.readlink("/proc/%d/exe" % k) == str(bindir / "warren-init"), k
        sb.kill()
    finally:
        delete_all(d)
        d.cleanup()


@pytest.mark.skipif(not SANITIZED, reason="only make asan reads daemon logs for sanitizer reports")
def test_a_sanitizer_report_in_a_daemon_log_fails_the_test(tmp_path):
    """Daemon.cleanup fails the test whose daemon logged a sanitizer report (here written by a
    wrapper in front of the real warrend, as ASan writes one to stderr)."""
    wrapper = tmp_path / "warrend"
    wrapper.write_text("#!/bin/sh\necho '==1==ERROR: AddressSanitizer: heap-use-after-free' >&2\n"
                       "exec %s \"$@\"\n" % WARREND)
    wrapper.chmod(0o755)
    d = Daemon(binary=str(wrapper)).start()
    with pytest.raises(AssertionError, match="reported under the sanitizers"):
        d.cleanup()
