"""Per-command usage and limits (docs/usage.md, "Per-command usage"): every exec's end carries
its CPU seconds, peak memory and wall time, natively and in E2B's end event; `cpus` and
`memory_mb` on an exec limit that command in a cgroup of its own below the sandbox's, which is
gone when the command ends. Through the real daemon and real sandboxes; the figures are checked
against what the command measured itself."""

import os
import time
import shutil
import tempfile

import pytest

import warren
from conftest import Daemon, delete_all

BASE = os.environ.get("WARREN_BASE_TEMPLATE")
if not BASE:
    if os.environ.get("CI") == "true":
        pytest.fail("WARREN_BASE_TEMPLATE is not set (test.sh builds the template and sets it)",
                    pytrace=False)
    pytest.skip("WARREN_BASE_TEMPLATE is not set (these tests need python3 in the sandbox)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def daemon():
    top = tempfile.mkdtemp(prefix="warrend-exec-usage-")
    tdir = os.path.join(top, "state", "templates", "base")
    os.makedirs(tdir)
    os.symlink(os.path.join(os.path.abspath(BASE), "rootfs"), os.path.join(tdir, "rootfs"))
    shutil.copy(os.path.join(BASE, "config.json"), tdir)
    d = Daemon(state_dir=top).start()
    yield d
    try:
        delete_all(d)
    finally:
        d.cleanup()


@pytest.fixture
def client(daemon):
    c = daemon.client()
    yield c
    c.close()


@pytest.fixture
def sandbox(client):
    with warren.Sandbox.create(client=client, cpus=1, memory_mb=512, timeout=300) as s:
        yield s

# A busy loop of about `secs` CPU seconds; prints the CPU time the process measured itself.
BUSY = ("import os, time\n"
        "end = time.process_time() + %s\n"
        "while time.process_time() < end: pass\n"
        "t = os.times(); print(t.user + t.system)\n")

# Allocate and touch `mib` MiB; prints the peak resident set the process measured itself.
HOG = ("import resource\n"
       "b = b'\\x01' * (%d << 20)\n"
       "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)\n")


def py(sb, code, **kw):
    return sb.commands.run(["python3", "-c", code], **kw)


def within(value, ref, frac=0.10):
    return abs(value - ref) <= frac * ref


def test_cpu_seconds_match_what_the_command_measured(sandbox):
    r = py(sandbox, BUSY % 1.0)
    measured = float(r.stdout)
    assert r.usage is not None and r.usage.source == "rusage"
    assert measured >= 0.95
    assert within(r.usage.cpu_seconds, measured), (r.usage, measured)
    assert r.usage.wall_seconds >= r.usage.cpu_seconds * 0.9
    assert r.usage.wall_seconds < 30


def test_memory_peak_matches_what_the_command_measured(sandbox):
    r = py(sandbox, HOG % 64)
    measured = int(r.stdout)
    assert measured >= 64 << 20
    assert within(r.usage.memory_peak_bytes, measured), (r.usage, measured)


def test_wall_time_of_a_sleep(sandbox):
    r = sandbox.commands.run(["sleep", "0.5"])
    assert 0.45 <= r.usage.wall_seconds < 5, r.usage
    assert r.usage.cpu_seconds < 0.2


def test_usage_through_a_shell_counts_what_it_waited_for(sandbox):
    # sh waits for python: python's CPU time is in sh's rusage
    sandbox.files.write("/tmp/busy.py", BUSY % 0.5)
    r = sandbox.commands.run("python3 /tmp/busy.py && true")
    assert within(r.usage.cpu_seconds, float(r.stdout), 0.15), (r.usage, r.stdout)


def test_stream_and_background_carry_usage(client, sandbox):
    sid = sandbox.sandbox_id
    with client.stream("POST", "/v1/sandboxes/%s/exec" % sid,
                       json_body={"cmd": ["sleep", "0.2"], "mode": "stream"}) as s:
        events = list(s.iter_json())
    end = events[-1]
    assert end["type"] == "exit" and end["exit_code"] == 0
    u = end["usage"]
    assert set(u) == {"cpu_seconds", "memory_peak_bytes", "wall_seconds", "source"}
    assert u["wall_seconds"] >= 0.19 and u["memory_peak_bytes"] > 0

    h = sandbox.commands.run(["sleep", "0.1"], background=True)
    res = h.wait()
    assert res.usage is None or res.usage.wall_seconds >= 0.09
    info = client.request("GET", "/v1/sandboxes/%s/processes/%d" % (sid, h.pid)).json_object()
    assert info["usage"]["wall_seconds"] >= 0.09


# ---- a command's own cgroup ---------------------------------------------------------------

CG_ROOT = "/sys/fs/cgroup"


def command_cgroups(sid):
    """The commands' cgroups under the sandbox's, in every hierarchy."""
    from conftest import CGROUP_PARENT
    left = []
    for hier in os.listdir(CG_ROOT):
        p = os.path.join(CG_ROOT, hier, CGROUP_PARENT, sid)
        if os.path.isdir(p):
            left += [os.path.join(p, c) for c in os.listdir(p)
                     if os.path.isdir(os.path.join(p, c))]
    return left


def test_cgroup_usage_cpu_and_memory(sandbox):
    r = py(sandbox, BUSY % 1.0, usage="cgroup")
    assert r.usage.source == "cgroup"
    assert within(r.usage.cpu_seconds, float(r.stdout)), (r.usage, r.stdout)
    r = py(sandbox, HOG % 64, usage="cgroup")
    # the cgroup counts the command's memory (64 MiB and the interpreter's own), not the
    # interpreter's files already cached by the sandbox: between the allocation and the RSS
    assert 64 << 20 <= r.usage.memory_peak_bytes <= int(r.stdout) * 1.10, (r.usage, r.stdout)
    assert command_cgroups(sandbox.sandbox_id) == []


def test_memory_limit_oom_kills_the_command_not_the_sandbox(sandbox):
    r = py(sandbox, HOG % 128, memory_mb=32, check=False)
    assert r.signal == 9 and r.exit_code is None, r
    assert r.usage.source == "cgroup"
    assert r.usage.memory_peak_bytes <= 33 << 20
    assert sandbox.commands.run("echo alive").stdout == "alive\n"
    assert command_cgroups(sandbox.sandbox_id) == []


def test_cpus_limit_throttles(sandbox):
    code = ("import time\n"
            "t0 = time.monotonic()\n"
            "while time.monotonic() - t0 < 2: pass\n")
    r = py(sandbox, code, cpus=0.3)
    ratio = r.usage.cpu_seconds / r.usage.wall_seconds
    assert 0.25 <= ratio <= 0.36, r.usage


def test_limits_above_the_sandbox_are_refused(client, sandbox):
    sid = sandbox.sandbox_id
    for body in ({"cpus": 2}, {"memory_mb": 1024}):
        with pytest.raises(warren.InvalidArgumentError) as ei:
            client.request("POST", "/v1/sandboxes/%s/exec" % sid,
                           json_body={"cmd": ["true"], **body})
        assert ei.value.code == "exceeds_sandbox", ei.value
    for body in ({"cpus": 0}, {"memory_mb": "1G"}, {"usage": "yes"},
                 {"usage": "rusage", "cpus": 0.5}):
        with pytest.raises(warren.InvalidArgumentError) as ei:
            client.request("POST", "/v1/sandboxes/%s/exec" % sid,
                           json_body={"cmd": ["true"], **body})
        assert ei.value.code == "invalid", (body, ei.value)
    assert command_cgroups(sid) == []


def test_a_failed_spawn_leaves_no_cgroup(sandbox):
    with pytest.raises(warren.InvalidArgumentError):
        sandbox.commands.run(["/nonexistent"], memory_mb=64)
    assert command_cgroups(sandbox.sandbox_id) == []


def test_leftover_processes_move_up_and_the_cgroup_goes(sandbox):
    r = sandbox.commands.run("sleep 30 >/dev/null 2>&1 & echo started", memory_mb=64)
    assert r.stdout == "started\n"
    assert command_cgroups(sandbox.sandbox_id) == []
    assert "sleep 30" in sandbox.commands.run("ps -eo args").stdout


def test_pause_and_kill_cover_a_limited_command(client, sandbox):
    h = sandbox.commands.run(["sleep", "60"], memory_mb=64, background=True)
    assert len(command_cgroups(sandbox.sandbox_id)) >= 1
    sandbox.pause()
    sandbox.resume()
    assert h.info().running
    sandbox.kill()


def test_cli_exec_limits_and_usage(daemon, sandbox):
    from conftest import warren as warren_cli
    env = {"WARREN_API_URL": daemon.url}
    p = warren_cli("exec", sandbox.sandbox_id, "--memory", "64M", "--cpus", "0.5", "--usage",
                   "--", "python3", "-c", HOG % 16, env=env)
    assert p.returncode == 0, p.stderr
    line = p.stderr.decode().strip().splitlines()[-1]
    assert line.startswith("usage: cpu ") and line.endswith("(cgroup)"), line
    p = warren_cli("exec", sandbox.sandbox_id, "--usage", "--", "true", env=env)
    assert p.returncode == 0 and p.stderr.decode().strip().endswith("(rusage)"), p.stderr
    p = warren_cli("exec", sandbox.sandbox_id, "--memory", "4G", "--", "true", env=env)
    assert p.returncode == 125 and b"more than its sandbox has" in p.stderr, p.stderr
    assert command_cgroups(sandbox.sandbox_id) == []


def test_a_limited_command_across_a_daemon_restart(daemon):
    c = daemon.client()
    sb = warren.Sandbox.create(client=c, cpus=1, memory_mb=512, timeout=300)
    sid = sb.sandbox_id
    try:
        running = sb.commands.run("sleep 2; echo done", memory_mb=64, background=True)
        ended = sb.commands.run("sleep 0.2", memory_mb=64, background=True)
        assert len({os.path.basename(p) for p in command_cgroups(sid)}) == 2
        daemon.kill9()  # it dies while both run; one ends while no daemon runs
        time.sleep(0.5)
        daemon.start()
        c = daemon.client()
        sb = warren.Sandbox.connect(sid, client=c)
        res = warren.CommandHandle(sb.commands, running.pid).wait(timeout=30)
        assert res.stdout == "done\n" and res.usage.source == "cgroup", res
        info = sb.commands.get(ended.pid)
        assert not info.running and info.raw["usage"]["source"] == "cgroup", info.raw
        deadline = time.monotonic() + 5
        while command_cgroups(sid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert command_cgroups(sid) == []
    finally:
        warren.Sandbox.connect(sid, client=daemon.client()).kill()
