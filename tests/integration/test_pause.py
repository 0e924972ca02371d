"""Pause and resume (in memory: the cgroup freezer), and the timeout policy, through the real
daemon with the Python SDK.

A paused sandbox's processes are looked at from the host (its files through
/proc/<init>/root, its freezer's state in the cgroup), since the API refuses to reach into it."""

import json
import os
import re
import threading
import time
from datetime import datetime, timezone

import pytest

BACKENDS = ("ns", "gvisor")  # every test on the module's daemon runs on both (conftest.py)

import warren
from conftest import CGROUP_PARENT, Daemon, delete_all, warren as warren_cli

COUNTER = ("i=0; while :; do i=$((i+1)); echo \"$$ $i\" > /tmp/c.new && mv /tmp/c.new /tmp/c; "
           "echo $i; sleep 0.1; done")


def init_pid(sid):
    for path in ("/sys/fs/cgroup/pids/%s/%s/cgroup.procs" % (CGROUP_PARENT, sid),
                 "/sys/fs/cgroup/%s/%s/cgroup.procs" % (CGROUP_PARENT, sid)):
        if os.path.exists(path):
            with open(path) as f:
                return min(int(l) for l in f)
    raise AssertionError("no cgroup for sandbox %s" % sid)


def host_read(sid, path):
    """A file of the sandbox, read from the host (works while it is frozen)."""
    with open("/proc/%d/root%s" % (init_pid(sid), path)) as f:
        return f.read()


def frozen(sid):
    """The sandbox's cgroup freezer state: True (frozen), False (thawed)."""
    v1 = "/sys/fs/cgroup/freezer/%s/%s/freezer.state" % (CGROUP_PARENT, sid)
    if os.path.exists(v1):
        with open(v1) as f:
            return f.read().strip() == "FROZEN"
    with open("/sys/fs/cgroup/%s/%s/cgroup.events" % (CGROUP_PARENT, sid)) as f:
        return "frozen 1" in f.read().split("\n")


def counter_value(sid):
    """(shell pid, count) of the counter, read from the host."""
    pid, n = host_read(sid, "/tmp/c").split()
    return int(pid), int(n)


def wait_for(pred, timeout=10.0, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()


def seconds_until(when):
    return (when - datetime.now(timezone.utc)).total_seconds()


def start_counter(sb):
    out = []
    h = sb.commands.run(COUNTER, background=True, on_stdout=out.append)
    assert wait_for(lambda: sb.files.exists("/tmp/c") and counter_value(sb.sandbox_id)[1] >= 3)
    return h, out


# ---- pause keeps the processes and their memory ------------------------------------------------

@pytest.mark.backends("ns", reason=(
    "Looks into the frozen sandbox from the host (/proc/<init>/root): its init is a host "
    "process on ns only (test_gvisor.py pauses gvisor sandboxes)."))
def test_pause_freezes_every_process_and_resume_goes_on(sandbox):
    sid = sandbox.sandbox_id
    h, out = start_counter(sandbox)
    info = sandbox.pause()
    assert info.state == "paused" and info.paused_mode == "memory" and info.reason is None
    assert frozen(sid)
    pid, n = counter_value(sid)
    streamed = len(out)
    time.sleep(1.0)  # ten ticks of the counter, had it run
    assert counter_value(sid) == (pid, n), "a paused process went on"
    assert len(out) == streamed, "a paused process wrote output"
    assert sandbox.get_info().state == "paused"

    info = sandbox.resume()
    assert info.state == "running" and info.paused_mode is None and info.remaining_ms is None
    assert not frozen(sid)
    assert wait_for(lambda: counter_value(sid)[1] >= n + 3)
    pid2, n2 = counter_value(sid)
    # The same process, counting on from where it stopped (not a restarted one from 1).
    assert pid2 == pid and n2 > n
    assert n2 < n + 15, "it counted while paused: %d -> %d" % (n, n2)
    # The output stream that was open across the pause carries on too.
    assert wait_for(lambda: len(out) > streamed)
    assert [p.pid for p in sandbox.commands.list() if p.running] == [h.pid]
    h.kill()


@pytest.mark.backends("ns", reason=(
    "Looks into the frozen sandbox from the host (/proc/<init>/root): its init is a host "
    "process on ns only (test_gvisor.py pauses gvisor sandboxes)."))
def test_shell_memory_survives(sandbox):
    h = sandbox.commands.run("sh", background=True)
    h.send_stdin('x=$(cat /proc/sys/kernel/random/uuid); echo "$$ $x" > /tmp/before\n')
    assert wait_for(lambda: sandbox.files.exists("/tmp/before"))
    before = sandbox.files.read("/tmp/before").split()
    sandbox.pause()
    time.sleep(0.3)
    sandbox.resume()
    h.send_stdin('echo "$$ $x"; exit 0\n')
    r = h.wait(timeout=10)
    assert r.stdout.split() == before, "the shell lost its variable or is another process"
    assert len(before[1]) == 36


def test_requests_while_paused_answer_409_and_resume_serves_them_again(sandbox, client):
    sid = sandbox.sandbox_id
    sandbox.files.write("/tmp/f", b"kept")
    sleeper = sandbox.commands.run("sleep 300", background=True)
    sandbox.pause()
    base = "/v1/sandboxes/%s" % sid
    calls = [
        ("POST", base + "/exec", {"json_body": {"cmd": "true"}}),
        ("GET", base + "/files", {"query": {"path": "/tmp/f"}}),
        ("PUT", base + "/files", {"query": {"path": "/tmp/g"}, "data": b"x"}),
        ("GET", base + "/files/list", {"query": {"path": "/tmp"}}),
        ("GET", base + "/processes", {}),
        ("POST", base + "/processes/%d/signal" % sleeper.pid, {"json_body": {"signal": 15}}),
        ("GET", base + "/terminal", {}),
    ]
    for method, path, kw in calls:
        t = time.monotonic()
        r = client.request(method, path, check=False, timeout=10, **kw)
        assert r.status == 409, (method, path, r.status, r.body)
        err = r.json()
        assert err["code"] == "conflict" and "paused" in err["message"], err
        assert time.monotonic() - t < 2, "answered only after %.1f s" % (time.monotonic() - t)
    with pytest.raises(warren.ConflictError):
        sandbox.commands.run("true")
    sandbox.resume()
    assert sandbox.commands.run("cat /tmp/f").stdout == "kept"
    assert not sandbox.files.exists("/tmp/g")
    assert sleeper.pid in [p.pid for p in sandbox.commands.list() if p.running]


def test_a_request_in_flight_is_not_lost_and_its_exec_timeout_stops_too(sandbox):
    # The command needs 1.5 s of running time and may run 2.5 s; it is paused for 3 s in the
    # middle, so a clock that ran on would kill it.
    result = {}

    def run():
        try:
            result["r"] = sandbox.commands.run("sleep 1.5; echo done", timeout=2.5, check=False)
        except Exception as e:  # noqa: BLE001 - reported below
            result["e"] = e

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.5)
    sandbox.pause()
    time.sleep(3)
    assert t.is_alive(), "the exec answered while its sandbox was paused: %r" % result
    sandbox.resume()
    t.join(10)
    assert "e" not in result, result
    r = result["r"]
    assert not r.timed_out and r.exit_code == 0 and r.stdout == "done\n", r


# ---- the deadline --------------------------------------------------------------------------------

def test_the_deadline_clock_stops_while_paused(client):
    sb = warren.Sandbox.create(client=client, timeout=3)
    try:
        time.sleep(0.5)
        info = sb.pause()
        left = info.remaining_ms
        assert 1500 < left <= 2600, left
        time.sleep(4)  # longer than the whole timeout
        info = sb.get_info()
        assert info.state == "paused" and info.remaining_ms == left
        # expires_at while paused: as if resumed now.
        assert abs(seconds_until(info.expires_at) - left / 1000) < 0.5
        info = sb.resume()
        t = time.monotonic()
        assert info.state == "running"
        assert abs(seconds_until(info.expires_at) - left / 1000) < 0.5
        assert sb.commands.run("echo alive").stdout == "alive\n"
        info = wait_for(lambda: (lambda i: i if i.state != "running" else None)(sb.get_info()),
                        timeout=10)
        took = time.monotonic() - t
        assert info and info.state == "stopped" and info.reason == "timeout", info
        assert abs(took - left / 1000) < 0.8, "killed %.2f s after resume, want %.2f" % (
            took, left / 1000)
    finally:
        client.request("DELETE", "/v1/sandboxes/" + sb.sandbox_id, check=False)


@pytest.mark.backends("ns", reason=(
    "Reads the frozen sandbox's counter from the host (/proc/<init>/root): its init is a host "
    "process on ns only."))
def test_on_timeout_pause(client):
    sb = warren.Sandbox.create(client=client, timeout=2, on_timeout="pause")
    sid = sb.sandbox_id
    try:
        assert sb.info.on_timeout == "pause" and sb.info.timeout == 2
        h, out = start_counter(sb)
        info = wait_for(lambda: (lambda i: i if i.state != "running" else None)(sb.get_info()),
                        timeout=6)
        assert info.state == "paused" and info.reason == "timeout", info
        assert info.paused_mode == "memory" and info.remaining_ms == 2000
        assert frozen(sid)
        assert sid in [s.sandbox_id for s in warren.Sandbox.list(client=client, state="paused")]
        assert sid not in [s.sandbox_id for s in warren.Sandbox.list(client=client, state="running")]
        n = counter_value(sid)[1]
        time.sleep(0.5)
        assert counter_value(sid)[1] == n

        # Resumed, it has its whole timeout again, and its processes go on.
        info = sb.resume()
        assert info.state == "running" and info.reason is None
        assert abs(seconds_until(info.expires_at) - 2) < 0.5
        assert wait_for(lambda: counter_value(sid)[1] > n)
        # ... until the next deadline pauses it again.
        info = wait_for(lambda: (lambda i: i if i.state != "running" else None)(sb.get_info()),
                        timeout=6)
        assert info.state == "paused" and info.reason == "timeout"

        # A resume's own timeout wins.
        info = sb.resume(timeout=30)
        assert abs(seconds_until(info.expires_at) - 30) < 1
        assert sb.commands.run("echo up").stdout == "up\n"
        h.kill()
    finally:
        client.request("DELETE", "/v1/sandboxes/" + sid, check=False)


def test_set_timeout_of_a_paused_sandbox_sets_its_time_left(sandbox):
    sandbox.pause()
    info = sandbox.set_timeout(50)
    assert info.state == "paused" and info.remaining_ms == 50000
    info = sandbox.resume()
    assert abs(seconds_until(info.expires_at) - 50) < 1


# ---- errors ----------------------------------------------------------------------------------

def test_wrong_states_are_409(client, sandbox):
    with pytest.raises(warren.ConflictError, match="not paused"):
        sandbox.resume()
    sandbox.pause()
    with pytest.raises(warren.ConflictError, match="already paused"):
        sandbox.pause()
    sandbox.resume()
    with pytest.raises(warren.ConflictError):
        sandbox.resume()
    with pytest.raises(warren.NotFoundError):
        warren.Sandbox(sandbox_id="nosuchsandbox", client=client).pause()
    with pytest.raises(warren.NotFoundError):
        warren.Sandbox(sandbox_id="nosuchsandbox", client=client).resume()
    # A stopped sandbox (its deadline passed) can be neither paused nor resumed.
    gone = warren.Sandbox.create(client=client, timeout=1)
    try:
        assert wait_for(lambda: gone.get_info().state == "stopped", timeout=5)
        with pytest.raises(warren.ConflictError, match="stopped"):
            gone.pause()
        with pytest.raises(warren.ConflictError, match="stopped"):
            gone.resume()
    finally:
        client.request("DELETE", "/v1/sandboxes/" + gone.sandbox_id)


def test_bad_bodies_are_400(client, sandbox):
    base = "/v1/sandboxes/%s" % sandbox.sandbox_id
    for path, body in [("/pause", {"mode": "swap"}), ("/pause", {"mode": 1}),
                       ("/pause", {"bogus": 1}), ("/resume", {"timeout": 0}),
                       ("/resume", {"timeout": "soon"}), ("/resume", {"mode": "memory"})]:
        r = client.request("POST", base + path, json_body=body, check=False)
        assert r.status == 400 and r.json()["code"] == "invalid", (path, body, r.body)
    r = client.request("POST", "/v1/sandboxes", json_body={"on_timeout": "explode"}, check=False)
    assert r.status == 400 and "on_timeout" in r.json()["message"]
    r = client.request("GET", base + "/pause", check=False)
    assert r.status == 405
    assert sandbox.get_info().state == "running"


def test_delete_while_paused_leaves_nothing(client):
    sb = warren.Sandbox.create(client=client, timeout=60)
    sb.commands.run("sleep 300", background=True)
    sb.commands.run("sleep 300 &", background=True)
    sb.pause()
    assert frozen(sb.sandbox_id)
    t = time.monotonic()
    assert sb.kill() is True
    assert time.monotonic() - t < 5
    with pytest.raises(warren.NotFoundError):
        sb.get_info()
    # The autouse `leftovers` fixture checks that no process, cgroup or directory is left.


# ---- restart ------------------------------------------------------------------------------------

def test_paused_survives_kill_9_and_restart():
    d = Daemon().start()
    try:
        c = d.client()
        sb = warren.Sandbox.create(client=c, timeout=600)
        other = warren.Sandbox.create(client=c, timeout=600)
        sid = sb.sandbox_id
        h, _ = start_counter(sb)
        sb.commands.run("sh -c 'sleep 1; echo late > /tmp/late'", background=True)
        left = sb.pause().remaining_ms
        other.pause()
        n = counter_value(sid)
        d.kill9()
        time.sleep(1.5)  # the daemon is down longer than `late` would need
        t = time.monotonic()
        d.start()
        # Its readiness does not wait for the agents of paused sandboxes: they cannot answer.
        assert time.monotonic() - t < 3, "restart took %.1f s" % (time.monotonic() - t)
        c = d.client()
        sb = warren.Sandbox.connect(sid, client=c)
        info = sb.get_info()
        assert info.state == "paused" and info.remaining_ms == left
        assert frozen(sid) and counter_value(sid) == n
        with pytest.raises(warren.ConflictError, match="paused"):
            sb.commands.run("true")
        info = sb.resume()
        assert info.state == "running"
        assert abs(seconds_until(info.expires_at) - left / 1000) < 2
        # Right after the resume the new agent connection serves requests and knows the
        # processes started before the restart.
        assert sb.commands.run("echo up").stdout == "up\n"
        assert h.pid in [p.pid for p in sb.commands.list() if p.running]
        assert wait_for(lambda: counter_value(sid)[1] > n[1]) and counter_value(sid)[0] == n[0]
        assert wait_for(lambda: sb.files.exists("/tmp/late"), timeout=5)
        # The other one, adopted paused, is deleted without ever being resumed.
        assert warren.Sandbox.connect(other.sandbox_id, client=c).kill() is True
    finally:
        delete_all(d)
        d.cleanup()


# ---- the CLI ------------------------------------------------------------------------------------

def test_cli_pause_resume_and_on_timeout(daemon):
    env = {"WARREN_API_URL": daemon.url}
    r = warren_cli("create", "--on-timeout", "pause", "--timeout", "60", "-o", "json", env=env)
    assert r.returncode == 0, r.stderr
    sid = json.loads(r.stdout)["id"]
    try:
        assert json.loads(r.stdout)["on_timeout"] == "pause"
        r = warren_cli("pause", sid, env=env)
        assert r.returncode == 0 and sid in r.stdout.decode() and b"paused" in r.stdout, r
        r = warren_cli("pause", sid, env=env)
        assert r.returncode == 1 and b"already paused (conflict)" in r.stderr, r
        r = warren_cli("info", sid, env=env)
        assert re.search(rb"state:\s+paused", r.stdout) and b"memory" in r.stdout, r.stdout
        r = warren_cli("ls", "--state", "paused", env=env)
        assert sid.encode() in r.stdout
        r = warren_cli("resume", sid, "--timeout", "90", "-o", "json", env=env)
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout)
        assert got["state"] == "running" and abs(seconds_until(
            datetime.fromisoformat(got["expires_at"].replace("Z", "+00:00"))) - 90) < 2
        r = warren_cli("resume", sid, env=env)
        assert r.returncode == 1 and b"not paused" in r.stderr
        r = warren_cli("create", "--on-timeout", "sometimes", env=env)
        assert r.returncode == 2
        r = warren_cli("resume", sid, "--timeout", "0", env=env)
        assert r.returncode == 2
    finally:
        warren_cli("rm", sid, env=env)
