"""What an idle sandbox costs the daemon in file descriptors: none (docs/design/density.md).

Its end is seen through the kernel's process events (one socket for the host), its run
directory's and id range's locks are held by its warren-init alone, and its agent connection is
closed once idle (--agent-idle) and opened again by the next request. Checked here: the daemon's
fds do not grow with idle sandboxes, a dormant sandbox answers, a warren-init killed while its
connection is closed is seen at once, a background command keeps its connection and its exit,
a restart adopts without holding a socket per sandbox, and `--exits pidfd` (the fallback) still
sees ends."""

import os
import signal
import time

import pytest

import warren
from conftest import Daemon, delete_all, init_pid

N = 24
IDLE_MS = 300


def fds(d):
    return len(os.listdir("/proc/%d/fd" % d.proc.pid))


def settle(d, want, timeout=5.0):
    """The daemon's fd count once it is at most want (or what it is at the timeout)."""
    deadline = time.monotonic() + timeout
    n = fds(d)
    while n > want and time.monotonic() < deadline:
        time.sleep(0.05)
        n = fds(d)
    return n


def state(c, sid):
    return c.request("GET", "/v1/sandboxes/" + sid).json_object()["state"]


def wait_state(c, sid, want, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = state(c, sid)
        if s == want:
            return s
        time.sleep(0.05)
    return state(c, sid)


@pytest.fixture
def lean():
    d = Daemon("--agent-idle", str(IDLE_MS), "--warm", "0").start()
    yield d
    try:
        delete_all(d)
    finally:
        d.cleanup()


def test_idle_sandboxes_hold_no_fd_of_the_daemon(lean):
    c = lean.client()
    base = settle(lean, 0, timeout=1.0)
    boxes = [warren.Sandbox.create(client=c, timeout=120) for _ in range(N)]
    # Each holds its connection for IDLE_MS after its last request, then none.
    assert settle(lean, base + 2) <= base + 2, "idle sandboxes still hold the daemon's fds"
    for sb in boxes:  # every dormant one answers, its connection opened again
        r = sb.commands.run("echo $((6*7))")
        assert (r.exit_code, r.stdout) == (0, "42\n")
    assert fds(lean) >= base + 1  # the ones just used are connected again ...
    assert settle(lean, base + 2) <= base + 2  # ... and dormant again once idle


def test_an_init_killed_while_dormant_is_seen_at_once(lean):
    c = lean.client()
    sb = warren.Sandbox.create(client=c, timeout=120)
    base = settle(lean, 0, timeout=1.0)
    time.sleep(IDLE_MS / 1000 * 2)
    assert settle(lean, base) <= base
    os.kill(init_pid(sb.sandbox_id), signal.SIGKILL)
    assert wait_state(c, sb.sandbox_id, "stopped", timeout=3.0) == "stopped"


def test_a_background_command_keeps_its_connection_and_its_exit(lean):
    c = lean.client()
    sb = warren.Sandbox.create(client=c, timeout=120)
    h = sb.commands.run("sleep %.1f; echo done" % (IDLE_MS / 1000 * 4), background=True)
    r = h.wait()
    assert (r.exit_code, r.stdout) == (0, "done\n")


def test_a_restart_adopts_without_a_socket_per_sandbox(tmp_path):
    d = Daemon("--agent-idle", str(IDLE_MS), "--warm", "0").start()
    try:
        c = d.client()
        ids = [warren.Sandbox.create(client=c, timeout=120).sandbox_id for _ in range(N)]
        d.kill9()
        d.start()
        base = fds(d)
        # Adoption connected to each (a few at a time) and let the connections go.
        assert settle(d, base) <= base + 2
        c = d.client()
        for sid in ids:
            r = warren.Sandbox.connect(sid, client=c).commands.run("true")
            assert r.exit_code == 0
        os.kill(init_pid(ids[0]), signal.SIGKILL)
        assert wait_state(c, ids[0], "stopped", timeout=3.0) == "stopped"
    finally:
        try:
            delete_all(d)
        finally:
            d.cleanup()


def test_the_pidfd_fallback_still_sees_an_end():
    d = Daemon("--exits", "pidfd", "--agent-idle", str(IDLE_MS), "--warm", "0").start()
    try:
        c = d.client()
        base = settle(d, 0, timeout=1.0)
        boxes = [warren.Sandbox.create(client=c, timeout=120) for _ in range(4)]
        time.sleep(IDLE_MS / 1000 * 2)
        assert fds(d) >= base + 4  # a pidfd each
        os.kill(init_pid(boxes[0].sandbox_id), signal.SIGKILL)
        assert wait_state(c, boxes[0].sandbox_id, "stopped", timeout=3.0) == "stopped"
        assert boxes[1].commands.run("true").exit_code == 0
    finally:
        try:
            delete_all(d)
        finally:
            d.cleanup()


def test_a_bad_exits_value_is_refused():
    d = Daemon("--exits", "inotify")
    with pytest.raises(AssertionError):
        d.start()
    d.proc.wait(timeout=10)
    assert d.proc.returncode != 0
    d.cleanup()
