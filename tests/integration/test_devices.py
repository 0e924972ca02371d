"""Devices from CDI specs (docs/devices.md): a spec the test writes for two real devices of every
machine (/dev/fuse and /dev/net/tun), given to a sandbox at create (`devices`), one sandbox at a
time; the node works inside, every other device stays refused (the device cgroup), a device
held elsewhere is 503, specs that fail their checks are skipped, hooks are refused."""

import json
import os

import pytest

import warren
from conftest import Daemon, daemon_on, delete_all

KIND = "warren.test/dev"
FUSE, TUN, BOTH = KIND + "=fuse", KIND + "=tun", KIND + "=tun-open"

SPEC_JSON = {
    "cdiVersion": "0.2.0",  # replaced below: below 0.3.0 is refused, so this file is the bad one
    "kind": KIND,
    "devices": [{"name": "x", "containerEdits": {}}],
}

SPEC_YAML = """\
cdiVersion: "0.6.0"
kind: warren.test/dev
containerEdits:
  env: [WARREN_CDI_SPEC=1]
devices:
  - name: fuse
    containerEdits:
      env: ["WARREN_TEST_DEVICE=fuse"]
      deviceNodes:
        - path: /dev/fuse
          type: c
          major: 10
          minor: 229
      # a device's tools and libraries: read-only, whatever the options say
      mounts:
        - {hostPath: @DIR@/tool, containerPath: /usr/local/bin/warren-test-tool, options: [rw]}
        - {hostPath: @DIR@/lib, containerPath: /opt/warren-test/lib, type: bind}
      # NVIDIA's two hooks, done by Warren itself (no hook program runs)
      hooks:
        - hookName: createContainer
          path: /usr/bin/nvidia-cdi-hook
          args: [nvidia-cdi-hook, create-symlinks, --link, "warren-test-tool::/usr/local/bin/wt-link",
                 "--link=libwarren-test.so.1::/opt/warren-test/links/libwarren-test.so"]
        - hookName: createContainer
          path: /usr/bin/nvidia-ctk
          args: [nvidia-ctk, hook, update-ldcache, --folder, /opt/warren-test/lib,
                 --folder=/usr/lib/x86_64-linux-gnu]
  # its node is given, its access is not: the device cgroup refuses the open
  - name: tun
    containerEdits:
      deviceNodes:
        - {path: /dev/net/tun, permissions: ""}
  - name: tun-open
    containerEdits:
      deviceNodes:
        - {path: /dev/net/tun, fileMode: 0o600, uid: 0, gid: 0}
  - name: hooked
    containerEdits:
      hooks:
        - {hookName: createContainer, path: /usr/bin/true, args: [true]}
"""


@pytest.fixture(scope="module")
def specs(tmp_path_factory):
    d = tmp_path_factory.mktemp("cdi")
    os.chmod(str(d), 0o755)
    (d / "tool").write_text("#!/bin/sh\necho tool ran\n")
    os.chmod(str(d / "tool"), 0o755)
    (d / "lib").mkdir()
    (d / "lib" / "libwarren-test.so.1").write_text("not really\n")
    (d / "a-test.yaml").write_text(SPEC_YAML.replace("@DIR@", str(d)))
    bad = dict(SPEC_JSON, kind="other.test/bad")
    (d / "b-bad.json").write_text(json.dumps(bad))
    # A good spec, writable by others: skipped whole.
    loose = dict(SPEC_JSON, cdiVersion="1.0.0", kind="other.test/loose")
    (d / "c-loose.json").write_text(json.dumps(loose))
    os.chmod(str(d / "c-loose.json"), 0o666)
    # An unknown field: skipped whole, as the CDI library does.
    (d / "d-unknown.yaml").write_text("cdiVersion: 1.0.0\nkind: other.test/unknown\n"
                                      "devices: [{name: x, containerEdits: {}}]\nextra: 1\n")
    for f in ("a-test.yaml", "b-bad.json", "d-unknown.yaml"):
        os.chmod(str(d / f), 0o644)
    return str(d)


@pytest.fixture(scope="module")
def dev_daemon(specs, tmp_path_factory):
    with daemon_on(str(tmp_path_factory.mktemp("devd")), "--cdi-spec-dirs",
                   specs + ":/nonexistent/cdi") as d:
        yield d


@pytest.fixture
def c(dev_daemon):
    client = dev_daemon.client()
    yield client
    client.close()


def sh(sb, cmd):
    return sb.commands.run(cmd, check=False)


def test_the_devices_listed_are_the_good_specs(c, dev_daemon):
    got = {d["name"]: d for d in c.request("GET", "/v1/devices").json()["devices"]}
    assert set(got) == {FUSE, TUN, BOTH, KIND + "=hooked"}, got
    assert not got[FUSE]["in_use"] and got[FUSE]["kind"] == KIND
    assert "hook `/usr/bin/true`" in got[KIND + "=hooked"]["refused"]
    log = open(os.path.join(dev_daemon.dir, "warrend.log")).read()
    for f, why in (("b-bad.json", "cdiVersion"), ("c-loose.json", "writable by nobody else"),
                   ("d-unknown.yaml", "unknown field `extra`")):
        line = [x for x in log.splitlines() if f in x and "skipped" in x]
        assert line and why in line[0], (f, line)


def test_a_device_works_inside_and_no_other(c):
    sb = warren.Sandbox.create(client=c, timeout=60, devices=[FUSE])
    plain = warren.Sandbox.create(client=c, timeout=60)
    try:
        assert sb.get_info().devices == [FUSE]
        r = sh(sb, "exec 3<>/dev/fuse && echo opened; ls -l /dev/fuse; "
                   "echo $WARREN_TEST_DEVICE $WARREN_CDI_SPEC")
        assert r.stdout.splitlines()[0] == "opened", r
        assert r.stdout.split()[-2:] == ["fuse", "1"], r
        # Its mounts: the tool runs, the library reads, neither can be written.
        r = sh(sb, "warren-test-tool; cat /opt/warren-test/lib/libwarren-test.so.1; "
                   "echo x > /usr/local/bin/warren-test-tool || echo refused; "
                   "touch /opt/warren-test/lib/new || echo refused")
        assert r.stdout == "tool ran\nnot really\nrefused\nrefused\n", r
        assert "Read-only file system" in r.stderr, r
        # The hooks' links, and the library folder that is not a default one on the path.
        r = sh(sb, "wt-link; readlink /usr/local/bin/wt-link; "
                   "readlink /opt/warren-test/links/libwarren-test.so; echo $LD_LIBRARY_PATH")
        assert r.stdout == ("tool ran\nwarren-test-tool\nlibwarren-test.so.1\n"
                            "/opt/warren-test/lib\n"), r
        # Its root cannot make another node, nor reach another device through one.
        r = sh(sb, "mknod /tmp/tun c 10 200 && echo made")
        assert "made" not in r.stdout
        # A sandbox without it has no node and cannot make one.
        r = sh(plain, "ls /dev/fuse; mknod /tmp/fuse c 10 229 && echo made")
        assert r.exit_code != 0 and "made" not in r.stdout, r
    finally:
        sb.kill()
        plain.kill()


def test_the_device_cgroup_refuses_what_was_not_granted(c):
    with warren.Sandbox.create(client=c, timeout=60, devices=[TUN]) as sb:
        r = sh(sb, "ls /dev/net/tun && exec 3<>/dev/net/tun && echo opened")
        assert "opened" not in r.stdout and "not permitted" in r.stderr, r
    with warren.Sandbox.create(client=c, timeout=60, devices=[BOTH]) as sb:
        r = sh(sb, "exec 3<>/dev/net/tun && echo opened")
        assert r.stdout == "opened\n", r


def test_sighup_reads_the_specs_again(c, dev_daemon, specs):
    """An operator adds a spec (or nvidia-cdi-refresh rewrites one) and sends SIGHUP: the new
    device is offered; what a sandbox holds stays its own."""
    import signal
    import time
    holder = warren.Sandbox.create(client=c, timeout=60, devices=[FUSE])
    extra = os.path.join(specs, "e-later.yaml")
    try:
        with open(extra, "w") as f:
            f.write("cdiVersion: 1.0.0\nkind: later.test/dev\n"
                    "devices: [{name: null0, containerEdits: {deviceNodes: [{path: /dev/null}]}}]\n")
        os.chmod(extra, 0o644)
        dev_daemon.proc.send_signal(signal.SIGHUP)
        listed = {}
        for _ in range(100):
            listed = {d["name"]: d for d in c.request("GET", "/v1/devices").json()["devices"]}
            if "later.test/dev=null0" in listed:
                break
            time.sleep(0.05)
        assert "later.test/dev=null0" in listed and listed[FUSE]["in_use"], listed
        r = c.request("POST", "/v1/sandboxes", check=False,
                      json_body={"timeout": 60, "devices": [FUSE]})
        assert r.status == 503, (r.status, r.body)
    finally:
        holder.kill()
        os.unlink(extra)
        dev_daemon.proc.send_signal(signal.SIGHUP)


def test_one_sandbox_at_a_time(c):
    sb = warren.Sandbox.create(client=c, timeout=60, devices=[FUSE])
    try:
        r = c.request("POST", "/v1/sandboxes", check=False,
                      json_body={"timeout": 60, "devices": [FUSE]})
        assert r.status == 503 and "in use" in r.json()["message"], (r.status, r.body)
        listed = {d["name"]: d for d in c.request("GET", "/v1/devices").json()["devices"]}
        assert listed[FUSE]["in_use"]
    finally:
        sb.kill()
    # Free again once its sandbox has gone.
    with warren.Sandbox.create(client=c, timeout=60, devices=[FUSE]) as again:
        assert again.get_info().devices == [FUSE]


@pytest.mark.parametrize("devices,code,text", [
    (["warren.test/dev=nope"], 400, "no device"),
    ([FUSE, FUSE], 400, "twice"),
    ([KIND + "=hooked"], 400, "hook"),
    ("fuse", 400, "list"),
    ([1], 400, "string"),
])
def test_bad_requests_are_refused_and_leave_nothing(c, devices, code, text):
    before = len(c.request("GET", "/v1/sandboxes").json()["sandboxes"])
    r = c.request("POST", "/v1/sandboxes", check=False,
                  json_body={"timeout": 60, "devices": devices})
    assert r.status == code and text in r.json()["message"], (r.status, r.body)
    assert len(c.request("GET", "/v1/sandboxes").json()["sandboxes"]) == before


def test_gvisor_answers_501(c):
    r = c.request("POST", "/v1/sandboxes", check=False,
                  json_body={"timeout": 60, "devices": [FUSE], "runtime": "gvisor"})
    assert r.status in (400, 501), (r.status, r.body)
    if r.status == 501:
        assert "gvisor" in r.json()["message"]
    listed = {d["name"]: d for d in c.request("GET", "/v1/devices").json()["devices"]}
    assert not listed[FUSE]["in_use"]


def test_a_restart_keeps_who_holds_what(specs, tmp_path):
    d = Daemon("--cdi-spec-dirs", specs, state_dir=str(tmp_path)).start()
    try:
        c = d.client()
        sb = warren.Sandbox.create(client=c, timeout=120, devices=[FUSE])
        c.close()
        d.stop()
        d.start()
        c = d.client()
        r = c.request("POST", "/v1/sandboxes", check=False,
                      json_body={"timeout": 60, "devices": [FUSE]})
        assert r.status == 503, (r.status, r.body)
        sb = warren.Sandbox.connect(sb.sandbox_id, client=c)
        assert sh(sb, "exec 3<>/dev/fuse && echo opened").stdout == "opened\n"
        sb.kill()
        c.close()
    finally:
        delete_all(d)
        d.cleanup()


def test_the_cli_names_devices(dev_daemon):
    from conftest import warren as cli
    env = {"WARREN_API_URL": dev_daemon.url}
    r = cli("devices", env=env)
    assert r.returncode == 0 and FUSE in r.stdout.decode(), r
    r = cli("create", "--device", FUSE, "-o", "json", env=env)
    assert r.returncode == 0, r
    sid = json.loads(r.stdout)["id"]
    try:
        assert json.loads(r.stdout)["devices"] == [FUSE]
        r = cli("create", "--device", FUSE, env=env)
        err = r.stderr.decode()
        assert r.returncode != 0 and "in use" in err and len(err.splitlines()) == 1, r
    finally:
        cli("rm", sid, env=env)
