"""Warm sandboxes (warrend --warm N): sandboxes of the base template started ahead of creates.

A create that asks for the defaults takes one (it answers with the warm sandbox's id, whose
hostname and cgroups were made for it); a create that asks for anything else gets a sandbox
made for it; a warm sandbox whose warren-init died is not handed out; warm sandboxes end with a
daemon that stops, and a daemon killed with -9 leaves them for the next one to remove."""

import os
import signal
import time

import pytest

import warren
from conftest import CGROUP_PARENT, RUN_DIR, Daemon, delete_all, init_pid, pool_pids


def warm(d):
    try:
        return set(os.listdir(os.path.join(d.state, "warm")))
    except OSError:
        return set()


def ready(d, sid):
    try:
        with open(os.path.join(d.state, "warm", sid)) as f:
            return f.read() == "ready\n"
    except OSError:
        return False


def wait_warm(d, n, timeout=30):
    """The ids of n warm sandboxes, once the daemon has them ready (their markers say so)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ids = warm(d)
        if len(ids) == n and all(ready(d, i) and init_pid(i) for i in ids):
            return ids
        time.sleep(0.05)
    raise AssertionError("warm sandboxes: %r, wanted %d ready" % (warm(d), n))


def gone(sid):
    return (init_pid(sid) is None and not os.path.exists(os.path.join(RUN_DIR, "sandboxes", sid))
            and not any(os.path.isdir(os.path.join("/sys/fs/cgroup", h, CGROUP_PARENT, sid))
                        for h in os.listdir("/sys/fs/cgroup")))


def wait_gone(ids, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all(gone(i) for i in ids):
        time.sleep(0.05)
    return [i for i in ids if not gone(i)]


@pytest.fixture
def warm_daemon():
    d = Daemon("--warm", "1").start()
    yield d
    try:
        delete_all(d)
    finally:
        d.cleanup()
    assert wait_gone(warm(d)) == []


def test_a_default_create_takes_the_warm_sandbox(warm_daemon):
    d = warm_daemon
    c = d.client()
    (first,) = wait_warm(d, 1)
    sb = warren.Sandbox.create(client=c, timeout=60, metadata={"k": "v"})
    assert sb.sandbox_id == first
    # It was made for this id: its hostname, its home; and it works like any other.
    assert sb.commands.run("hostname").stdout == first + "\n"
    assert os.path.isdir(os.path.join(d.state, "sandboxes", first))
    sb.files.write("/root/f", "x")
    assert sb.commands.run("cat /root/f").stdout == "x"
    info = sb.get_info()
    assert info.metadata == {"k": "v"} and info.state == "running"
    # Another takes its place, with an id of its own.
    (second,) = wait_warm(d, 1)
    assert second != first
    sb.kill()
    assert wait_gone([first]) == []


def test_a_create_that_asks_for_more_gets_a_sandbox_of_its_own(warm_daemon):
    d = warm_daemon
    c = d.client()
    (w,) = wait_warm(d, 1)
    made = [
        warren.Sandbox.create(client=c, timeout=60, env={"A": "1"}),
        warren.Sandbox.create(client=c, timeout=60, memory_mb=256),
        warren.Sandbox.create(client=c, timeout=60, cpus=0.5),
    ]
    try:
        assert w not in [sb.sandbox_id for sb in made]
        assert warm(d) == {w}
        assert made[0].commands.run("echo $A").stdout == "1\n"
    finally:
        for sb in made:
            sb.kill()


def test_a_warm_sandbox_whose_init_died_is_not_handed_out(warm_daemon):
    d = warm_daemon
    c = d.client()
    (w,) = wait_warm(d, 1)
    pid = init_pid(w)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5  # dead: a zombie until the daemon reaps it
    while open("/proc/%d/stat" % pid).read().split()[2] != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)
    sb = warren.Sandbox.create(client=c, timeout=60)
    try:
        assert sb.sandbox_id != w
        assert sb.commands.run("echo ok").stdout == "ok\n"
        assert wait_gone([w]) == []
        assert w not in warm(d)
    finally:
        sb.kill()


def test_warm_sandboxes_end_with_the_daemon_and_after_a_kill_9():
    d = Daemon("--warm", "2").start()
    try:
        c = d.client()
        old = wait_warm(d, 2)
        kept = warren.Sandbox.create(client=c, timeout=120)
        assert kept.sandbox_id in old
        old = wait_warm(d, 2)
        # kill -9: the warm ones outlive it (as every sandbox does), and the next daemon, which
        # has no record of them, removes them; the one a create took is adopted.
        d.kill9()
        assert all(init_pid(i) for i in old)
        d.start()
        assert wait_gone(old) == []
        assert all(not os.path.exists(os.path.join(d.state, "sandboxes", i)) for i in old)
        new = wait_warm(d, 2)
        assert not new & old
        kept = warren.Sandbox.connect(kept.sandbox_id, client=d.client())
        assert kept.commands.run("echo still").stdout == "still\n"
        kept.kill()
        # A daemon that stops destroys its warm sandboxes (the others keep running).
        d.stop()
        assert wait_gone(new) == []
        assert warm(d) == set()
        deadline = time.monotonic() + 5  # killed processes are reaped asynchronously
        while pool_pids(include_warm=True) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pool_pids(include_warm=True) == []
    finally:
        if d.proc.poll() is not None:
            d.start()
        delete_all(d)
        d.cleanup()


def test_a_changed_template_replaces_the_warm_sandboxes(warm_daemon):
    d = warm_daemon
    c = d.client()
    (old,) = wait_warm(d, 1)
    with open(os.path.join(d.state, "templates", "base", "config.json"), "w") as f:
        f.write('{"env": {"FROM_CONFIG": "yes"}}')
    sb = warren.Sandbox.create(client=c, timeout=60)
    try:
        assert sb.sandbox_id != old
        assert sb.commands.run("echo $FROM_CONFIG").stdout == "yes\n"
        assert wait_gone([old]) == []
        (new,) = wait_warm(d, 1)
        assert new != old
    finally:
        sb.kill()
    sb = warren.Sandbox.create(client=c, timeout=60)
    try:
        assert sb.sandbox_id == new
        assert sb.commands.run("echo $FROM_CONFIG").stdout == "yes\n"
    finally:
        sb.kill()
