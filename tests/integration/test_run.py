"""`warren run`: stdio and exit status pass through, bad input gets one readable line."""

import os
import signal
import subprocess
import time

import pytest

from conftest import IMAGE, UID_BASE, UID_SLOTS, run, warren, warren_popen, wait_clean


def test_stdout_stderr_and_exit_code():
    r = run("/bin/sh", "-c", "echo out; echo err >&2; exit 3")
    assert r.returncode == 3
    assert r.stdout == b"out\n"
    assert r.stderr == b"err\n"


def test_stdin_passes_through():
    data = os.urandom(300000)
    r = run("/bin/cat", input=data)
    assert r.returncode == 0
    assert r.stdout == data


def test_large_output_with_backpressure():
    # 20 MiB through the output window, checked byte for byte.
    r = run("/bin/sh", "-c", "head -c 20971520 /dev/zero", timeout=120)
    assert r.returncode == 0
    assert len(r.stdout) == 20971520 and r.stdout.count(b"\0") == 20971520


def test_signal_exit_status_is_128_plus_n():
    r = run("/bin/sh", "-c", "kill -9 $$")
    assert r.returncode == 128 + 9
    r = run("/bin/sh", "-c", "kill -TERM $$")
    assert r.returncode == 128 + 15


def test_env_user_cwd_hostname():
    r = warren("run", "--rootfs", IMAGE, "--env", "FOO=bar baz", "--user", "user", "--cwd", "/tmp",
               "--hostname", "box1", "--", "/bin/sh", "-c", 'echo "$FOO|$(id -u)|$(pwd)|$(hostname)|$HOME"')
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"bar baz|1000|/tmp|box1|/home/user\n"


def test_default_hostname_is_the_sandbox_id():
    r = run("/bin/hostname")
    assert r.returncode == 0
    assert r.stdout.startswith(b"run-")


def test_root_inside_maps_to_a_private_host_range():
    r = run("/bin/sh", "-c", "id -u; cat /proc/self/uid_map; ls -ln /bin/busybox")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    assert lines[0] == "0"
    inside, outside, count = lines[1].split()
    assert inside == "0" and UID_BASE <= int(outside) < UID_BASE + UID_SLOTS * 65536 and count == "65536"
    # Image files keep their owner (root) through the idmapped layer.
    assert lines[2].split()[2:4] == ["0", "0"]


def test_tty():
    r = warren("run", "--rootfs", IMAGE, "-t", "--", "/bin/sh", "-c", "tty; stty size")
    assert r.returncode == 0, r.stderr
    out = r.stdout.replace(b"\r", b"").decode().splitlines()
    assert out[0].startswith("/dev/pts/")
    assert out[1] == "24 80"


def test_timeout_kills_and_exits_124():
    t = time.monotonic()
    r = warren("run", "--rootfs", IMAGE, "--timeout", "1", "--", "/bin/sleep", "30")
    assert r.returncode == 124
    assert time.monotonic() - t < 10
    assert b"timed out after 1 s" in r.stderr


def test_command_not_found_is_127():
    r = run("/no/such/command")
    assert r.returncode == 127
    assert r.stderr.count(b"\n") == 1 and r.stderr.startswith(b"warren: ")


def test_not_executable_is_126():
    r = run("/etc/motd")
    assert r.returncode == 126
    assert r.stderr.startswith(b"warren: ")


@pytest.mark.parametrize(
    "args, needle",
    [
        (["run", "--memory", "lots", "--", "true"], b"not a size"),
        (["run", "--cpus", "0", "--", "true"], b"not a CPU count"),
        (["run", "--pids", "-1", "--", "true"], b"pids"),
        (["run", "--timeout", "soon", "--", "true"], b"not a whole number"),
        (["run", "--env", "NOEQUALS", "--", "true"], b"KEY=VALUE"),
        (["run", "--cwd", "relative", "--", "true"], b"absolute"),
        (["run", "--bogus", "--", "true"], b"unknown option"),
        (["run"], b"no command"),
        (["run", "--rootfs", "/nonexistent", "--", "true"], b"not a directory"),
        (["frobnicate"], b"unknown command"),
    ],
)
def test_bad_input_one_readable_line(args, needle):
    r = warren(*args)
    assert r.returncode != 0
    assert r.stderr.startswith(b"warren: "), r.stderr
    assert r.stderr.count(b"\n") == 1, r.stderr
    assert needle in r.stderr


def test_unknown_user_is_an_error():
    r = warren("run", "--rootfs", IMAGE, "--user", "nosuchuser", "--", "true")
    assert r.returncode == 125
    assert b"nosuchuser" in r.stderr


@pytest.mark.slow
def test_killed_client_takes_its_sandbox_along():
    p = warren_popen("run", "--rootfs", IMAGE, "--", "/bin/sleep", "100",
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    p.send_signal(signal.SIGKILL)
    p.wait()
    # warren-init notices its creator's connection is gone and ends the sandbox; the next
    # `warren run` sweeps the cgroup and run directory once they are old enough.
    left = wait_clean(timeout=5)
    assert not left["pids"], left
    time.sleep(10.5)
    assert run("/bin/true").returncode == 0


def test_forwarded_signal():
    p = warren_popen("run", "--rootfs", IMAGE, "--", "/bin/sleep", "100",
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == 128 + 15


@pytest.mark.parametrize("step", ["uids", "maps", "cgroup", "overlay", "attach", "child-early",
                                  "child-rootfs", "child-exec", "hello"])
def test_a_create_failing_at_any_step_leaves_nothing(step):
    # The autouse `leftovers` fixture then checks: no process, cgroup, run directory or mount.
    r = warren("run", "--rootfs", IMAGE, "--", "/bin/true", env={"WARREN_FAULT": step})
    assert r.returncode == 125
    assert r.stderr.startswith(b"warren: ") and b"injected fault" in r.stderr, r.stderr
    assert r.stderr.count(b"\n") == 1
