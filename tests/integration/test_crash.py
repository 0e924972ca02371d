"""A daemon killed with -9 in the middle of making a sandbox, and its restart.

The daemon is stopped at a named step by WARREN_CRASH (wr_runtime_config.crash: it SIGKILLs
itself when a create reaches the step), so each point is hit exactly, not by a race. After the
restart every half-made sandbox is either adopted (its warren-init answers; its record says
running) or torn down completely, and the host holds exactly what the daemon's records say is
alive: no other process in the pool's uid range, cgroup, run directory, home or locked id
range. A create retried with its Idempotency-Key gets a running sandbox (the adopted one, or a
new one), and the default listing shows no `error` record. Also here: the retry while the first
create still runs, and a delete during a create (the zygote is stopped with SIGSTOP to hold the
create at a point the test can see)."""

import fcntl
import os
import signal
import sqlite3
import threading
import time

import pytest

import warren
from conftest import (CGROUP_PARENT, RUN_DIR, Daemon, cgroup_dirs, delete_all, homes, pool_pids,
                      run_dir_entries)


# ---- what is on the host ------------------------------------------------------------------------

def locked_uid_slots():
    """How many of the pool's id ranges are taken (their lock files are locked)."""
    d = os.path.join(RUN_DIR, "uids")
    n = 0
    for name in os.listdir(d) if os.path.isdir(d) else []:
        fd = os.open(os.path.join(d, name), os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            n += 1
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    return n


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def cgroup_of(pid):
    try:
        with open("/proc/%d/cgroup" % pid) as f:
            return f.read()
    except OSError:
        return ""


def on_host(d):
    """What the host holds for d's sandboxes: ids with a cgroup, run directory or home, the
    pool's processes (by the sandbox id in their cgroup, "?" for none) and the taken id
    ranges."""
    ids = {os.path.basename(p) for p in cgroup_dirs()} | set(run_dir_entries()) | set(homes(d))
    procs = set()
    for pid in pool_pids():
        cg = cgroup_of(pid)
        procs.add(next((i for i in ids if "/%s/%s" % (CGROUP_PARENT, i) in cg), "?"))
    return {"ids": ids, "procs": procs, "uid_slots": locked_uid_slots()}


def settled(d, want_ids, timeout=10.0):
    """on_host(d), once it holds exactly want_ids (processes of a killed sandbox exit and its
    id range's lock goes with the last of them asynchronously), or as it is at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        h = on_host(d)
        if (h["ids"] == set(want_ids) and h["procs"] == set(want_ids)
                and h["uid_slots"] == len(want_ids)) or time.monotonic() > deadline:
            return h
        time.sleep(0.05)


def records(c, states=("creating", "running", "paused", "stopped", "error")):
    return {s.sandbox_id: s for s in warren.Sandbox.list(client=c, state=list(states))}


def create(c, key, **body):
    body.setdefault("timeout", 120)
    return c.request("POST", "/v1/sandboxes", json_body=body, headers={"Idempotency-Key": key},
                     check=False, timeout=60)


def exec_ok(c, sid):
    r = c.request("POST", "/v1/sandboxes/%s/exec" % sid,
                  json_body={"cmd": ["/bin/sh", "-c", "echo ok $(hostname)"]}).json()
    return r["stdout"] == "ok %s\n" % sid


def crash_daemon(step, *args):
    return Daemon("--pool", "0", "--warm", "0", *args, env={"WARREN_CRASH": step}).start()


def restart(d):
    """Start d again, without the crash step."""
    assert d.proc.wait(timeout=30) == -signal.SIGKILL, "the daemon did not crash"
    d.env.pop("WARREN_CRASH", None)
    return d.start()


# ---- a create cut short ----------------------------------------------------------------------

# Killed before "go" was sent, the child never becomes warren-init: torn down, the record says
# error, and the retry makes a new sandbox. From "go" on, warren-init starts by itself and
# answers the next daemon: adopted, and the retry gets it.
TORN_DOWN = ["recorded", "cloned", "attached"]
ADOPTED = ["go", "hello"]


@pytest.mark.parametrize("step", TORN_DOWN + ADOPTED)
def test_kill_9_during_a_create_then_the_retry_gets_a_running_sandbox(step):
    d = crash_daemon(step)
    try:
        c = d.client()
        with pytest.raises(warren.APIConnectionError):
            create(c, "job-" + step)
        c.close()
        restart(d)
        c = d.client()
        recs = records(c)
        assert len(recs) == 1, recs
        (first,) = recs
        if step in ADOPTED:
            assert recs[first].state == "running", recs[first]
            assert settled(d, {first}) == {"ids": {first}, "procs": {first}, "uid_slots": 1}
            assert exec_ok(c, first)
        else:
            assert recs[first].state == "error" and "restarted" in recs[first].reason, recs[first]
            assert settled(d, set()) == {"ids": set(), "procs": set(), "uid_slots": 0}
        assert [s.sandbox_id for s in warren.Sandbox.list(client=c)] == (
            [first] if step in ADOPTED else [])

        r = create(c, "job-" + step)
        sb = r.json()
        assert r.status == (200 if step in ADOPTED else 201), sb
        assert sb["state"] == "running"
        assert (sb["id"] == first) == (step in ADOPTED)
        assert exec_ok(c, sb["id"])
        assert [s.sandbox_id for s in warren.Sandbox.list(client=c)] == [sb["id"]]
        # The key names the new sandbox from now on.
        again = create(c, "job-" + step)
        assert again.status == 200 and again.json()["id"] == sb["id"]
        assert settled(d, {sb["id"]})["ids"] == {sb["id"]}
        c.request("DELETE", "/v1/sandboxes/" + sb["id"])
        assert settled(d, set()) == {"ids": set(), "procs": set(), "uid_slots": 0}
    finally:
        delete_all(d)
        d.cleanup()


def test_kill_9_while_a_warm_sandbox_is_taken():
    """The record of a create that took a warm sandbox is in the store, its marker not yet gone:
    the warm sandbox is the create's, adopted, not removed as an unused warm one."""
    d = Daemon("--pool", "0", "--warm", "1", env={"WARREN_CRASH": "recorded"}).start()
    try:
        deadline = time.monotonic() + 60
        warm_dir = os.path.join(d.state, "warm")
        while time.monotonic() < deadline and not any(
                open(os.path.join(warm_dir, i)).read() == "ready\n" for i in os.listdir(warm_dir)):
            time.sleep(0.05)
        (warm_id,) = os.listdir(warm_dir)
        c = d.client()
        with pytest.raises(warren.APIConnectionError):
            create(c, "warm-job")
        c.close()
        d.extra = ["--pool", "0", "--warm", "0"]
        restart(d)
        c = d.client()
        assert settled(d, {warm_id})["ids"] == {warm_id}
        assert os.listdir(warm_dir) == []
        r = create(c, "warm-job")
        assert r.status == 200 and r.json()["id"] == warm_id and r.json()["state"] == "running"
        assert exec_ok(c, warm_id)
        c.request("DELETE", "/v1/sandboxes/" + warm_id)
        assert settled(d, set()) == {"ids": set(), "procs": set(), "uid_slots": 0}
    finally:
        delete_all(d)
        d.cleanup()


@pytest.mark.slow
def test_kill_9_while_resuming_from_disk_keeps_it_paused():
    """A resume from disk starts a fresh warren-init on the kept files; killed before it is
    recorded, the new daemon removes that init and the sandbox is still paused to disk, with
    its files, and resumes."""
    d = Daemon("--pool", "0", "--warm", "0").start()
    try:
        c = d.client()
        sb = warren.Sandbox.create(client=c, timeout=120)
        sb.files.write("/root/kept", b"kept\n")
        c.request("POST", "/v1/sandboxes/%s/pause" % sb.sandbox_id, json_body={"mode": "disk"})
        c.close()
        d.stop()
        d.env["WARREN_CRASH"] = "hello"
        d.start()
        c = d.client()
        with pytest.raises(warren.APIConnectionError):
            c.request("POST", "/v1/sandboxes/%s/resume" % sb.sandbox_id, json_body={})
        c.close()
        restart(d)
        c = d.client()
        assert records(c)[sb.sandbox_id].state == "paused"
        h = settled(d, set())
        # Only its home is left: the files it was paused with.
        assert h == {"ids": {sb.sandbox_id}, "procs": set(), "uid_slots": 0}
        assert homes(d) == [sb.sandbox_id] and run_dir_entries() == [] and cgroup_dirs() == []
        r = c.request("POST", "/v1/sandboxes/%s/resume" % sb.sandbox_id, json_body={})
        assert r.json()["state"] == "running"
        assert warren.Sandbox.connect(sb.sandbox_id, client=c).files.read("/root/kept") == "kept\n"
        c.request("DELETE", "/v1/sandboxes/" + sb.sandbox_id)
        assert settled(d, set()) == {"ids": set(), "procs": set(), "uid_slots": 0}
    finally:
        delete_all(d)
        d.cleanup()


@pytest.mark.slow
def test_kill_9_during_a_pause_to_disk_keeps_its_files():
    """Killed after a pause to disk ended the sandbox's processes but before it said so, the
    daemon's next start finds the sandbox paused to disk with its files, not ended."""
    d = Daemon("--pool", "0", "--warm", "0", env={"WARREN_CRASH": "disk-paused"}).start()
    try:
        c = d.client()
        sb = warren.Sandbox.create(client=c, timeout=120)
        sb.files.write("/root/kept", b"kept\n")
        with pytest.raises(warren.APIConnectionError):
            c.request("POST", "/v1/sandboxes/%s/pause" % sb.sandbox_id, json_body={"mode": "disk"})
        c.close()
        restart(d)
        c = d.client()
        rec = records(c)[sb.sandbox_id]
        assert rec.state == "paused", rec
        assert settled(d, set()) == {"ids": {sb.sandbox_id}, "procs": set(), "uid_slots": 0}
        assert homes(d) == [sb.sandbox_id]
        r = c.request("POST", "/v1/sandboxes/%s/resume" % sb.sandbox_id, json_body={})
        assert r.json()["state"] == "running"
        assert warren.Sandbox.connect(sb.sandbox_id, client=c).files.read("/root/kept") == "kept\n"
        c.request("DELETE", "/v1/sandboxes/" + sb.sandbox_id)
        assert settled(d, set()) == {"ids": set(), "procs": set(), "uid_slots": 0}
    finally:
        delete_all(d)
        d.cleanup()


@pytest.mark.parametrize("step", ["hello", None])
def test_kill_9_during_a_build_leaves_no_step_sandbox(step):
    """A build's step sandbox is the build's alone: a restarted daemon has no build to give it
    back to, so it goes, record and all, whether its create was cut short ("hello") or its
    command was running (None: the daemon is killed while the step runs)."""
    d = Daemon("--pool", "0", "--warm", "0", env={"WARREN_CRASH": step} if step else {}).start()
    try:
        c = d.client()
        done = threading.Event()

        def build():
            try:
                c.request("POST", "/v1/templates/build", query={"name": "crashed"},
                          data=b"FROM base\nRUN echo step-started; sleep 60\n",
                          headers={"Content-Type": "text/plain"}, check=False, timeout=120)
            except warren.APIConnectionError:
                pass
            finally:
                done.set()

        t = threading.Thread(target=build)
        t.start()
        if step is None:
            # Kill the daemon once the step's command runs (its sleep is in the pool's range).
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not any(
                    comm(p) == "sleep" for p in pool_pids()):
                time.sleep(0.05)
            d.kill9()
        t.join(60)
        assert done.is_set()
        c.close()
        restart(d)
        c = d.client()
        assert records(c) == {}
        assert settled(d, set()) == {"ids": set(), "procs": set(), "uid_slots": 0}
        assert c.request("GET", "/v1/templates/crashed", check=False).status == 404
    finally:
        delete_all(d)
        d.cleanup()


# ---- idempotency and deletes while a create runs ---------------------------------------------

def zygote_of(d):
    with open("/proc/%d/task/%d/children" % (d.proc.pid, d.proc.pid)) as f:
        kids = [int(p) for p in f.read().split()]
    (z,) = [k for k in kids if os.readlink("/proc/%d/exe" % k).endswith("/warren-zygote")]
    return z


class Held:
    """Creates held before their child is cloned: the zygote, which clones every child of a
    daemon without pre-cloned ones (--pool 0), is stopped; the record is made (creating)."""

    def __init__(self, d):
        self.d, self.z = d, zygote_of(d)

    def __enter__(self):
        os.kill(self.z, signal.SIGSTOP)
        return self

    def __exit__(self, *exc):
        os.kill(self.z, signal.SIGCONT)

    def wait_creating(self, c, n=1):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            recs = records(c, ("creating",))
            if len(recs) >= n:
                return list(recs)
            time.sleep(0.02)
        raise AssertionError("no create is under way")


def in_thread(fn, *args):
    out = {}

    def run():
        try:
            out["r"] = fn(*args)
        except Exception as e:  # noqa: BLE001 - reported by the test
            out["e"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, out


def test_a_retry_while_the_first_create_runs_waits_for_it():
    d = Daemon("--pool", "0", "--warm", "0").start()
    try:
        c1, c2 = d.client(), d.client()
        with Held(d) as h:
            t1, o1 = in_thread(create, c1, "same")
            (sid,) = h.wait_creating(c2)
            t2, o2 = in_thread(create, c2, "same")
            t2.join(1.0)
            assert t2.is_alive(), "the retry answered before the first create was done: %r" % (
                o2.get("r") and o2["r"].json())
        t1.join(30)
        t2.join(30)
        r1, r2 = o1["r"], o2["r"]
        assert r1.status == 201 and r2.status == 200
        assert r1.json()["id"] == r2.json()["id"] == sid
        assert r2.json()["state"] == "running" and exec_ok(c2, sid)
        c1.request("DELETE", "/v1/sandboxes/" + sid)
    finally:
        delete_all(d)
        d.cleanup()


def test_a_delete_while_the_sandbox_is_created_removes_it():
    d = Daemon("--pool", "0", "--warm", "0").start()
    try:
        c1, c2 = d.client(), d.client()
        with Held(d) as h:
            t1, o1 = in_thread(create, c1, "deleted-early")
            (sid,) = h.wait_creating(c2)
            t2, o2 = in_thread(c2.request, "DELETE", "/v1/sandboxes/" + sid)
            t2.join(1.0)
            assert t2.is_alive(), "the delete answered while the create ran: %r" % (
                o2.get("e") or o2["r"].status)
        t1.join(30)
        t2.join(30)
        assert "e" not in o2, o2
        assert o2["r"].status == 204
        assert o1["r"].status == 409 and "deleted" in o1["r"].json()["message"], o1["r"].json()
        assert records(c1) == {}
        assert settled(d, set()) == {"ids": set(), "procs": set(), "uid_slots": 0}
    finally:
        delete_all(d)
        d.cleanup()


def test_delete_of_a_record_removes_what_an_earlier_daemon_left():
    """A state directory from before this fix: the restart marked a half-made sandbox `error`
    and let its warren-init run on. Its DELETE removes all of it, not only the record."""
    d = Daemon("--pool", "0", "--warm", "0").start()
    try:
        c = d.client()
        sb = warren.Sandbox.create(client=c, timeout=120)
        c.close()
        d.stop()  # the sandbox outlives the daemon
        db = sqlite3.connect(os.path.join(d.state, "warren.db"))
        with db:
            db.execute("UPDATE sandboxes SET state = 'error', reason = 'an earlier daemon'"
                       " WHERE id = ?", (sb.sandbox_id,))
        db.close()
        d.start()
        c = d.client()
        assert records(c)[sb.sandbox_id].state == "error"
        assert settled(d, {sb.sandbox_id})["ids"] == {sb.sandbox_id}
        assert c.request("DELETE", "/v1/sandboxes/" + sb.sandbox_id).status == 204
        assert records(c) == {}
        assert settled(d, set()) == {"ids": set(), "procs": set(), "uid_slots": 0}
    finally:
        delete_all(d)
        d.cleanup()
