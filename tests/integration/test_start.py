"""Template start commands (config.json `start`) and per-template warm pools (warrend --warm NAME=N).

A template made here from the busybox test image, with a `start` that runs busybox's httpd or
nc: a create answers only once the readiness check has (the port is open the moment the create
returns), the start process is listed with tag "start", a start that never becomes ready or
exits at once fails the create with 502 start_failed naming the template and its output, and
leaves nothing behind; a warm pool of such a template hands out sandboxes whose start command
already runs, and refills."""

import json
import os
import time

import pytest

import warren
from conftest import IMAGE, Daemon, delete_all, homes, wait_clean


def make_template(d, name, start, env=None):
    tdir = os.path.join(d.state, "templates", name)
    os.makedirs(tdir, exist_ok=True)
    if not os.path.exists(os.path.join(tdir, "rootfs")):
        os.symlink(os.path.abspath(IMAGE), os.path.join(tdir, "rootfs"))
    cfg = {"env": env or {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}}
    if start is not None:
        cfg["start"] = start
    with open(os.path.join(tdir, "config.json"), "w") as f:
        json.dump(cfg, f)


# A web server that comes up only after a while: a create that did not wait would find it closed.
HTTPD = {"cmd": "mkdir -p /tmp/www && echo ok > /tmp/www/health && sleep 0.4 && "
                "echo httpd starting && exec httpd -f -p 127.0.0.1:8000 -h /tmp/www",
         "ready": {"port": 8000, "path": "/health", "timeout_s": 20}}


def listening(sb, port):
    """Whether something listens on port inside sb, as the daemon sees it (GET .../ports)."""
    r = sb._client.request("GET", "/v1/sandboxes/%s/ports" % sb.sandbox_id).json_object()
    return any(p.get("port") == port for p in r.get("ports", []))


def start_procs(c, sid):
    procs = c.request("GET", "/v1/sandboxes/%s/processes" % sid).json_object()["processes"]
    return [p for p in procs if p.get("tag") == "start"]


def create_raw(c, template, **body):
    """POST /v1/sandboxes, answered whole: (status, JSON)."""
    r = c.request("POST", "/v1/sandboxes", json_body=dict({"template": template, "timeout": 60},
                                                           **body), check=False)
    return r.status, r.json()


def assert_nothing_left(d, c):
    assert c.request("GET", "/v1/sandboxes").json_object()["sandboxes"] == []
    assert homes(d) == []
    left = wait_clean()
    assert not any(left.values()), "left behind: %r" % left


@pytest.fixture(scope="module")
def d():
    # No warm sandboxes of base here: the leftover checks then see only what a test made.
    d = Daemon("--warm", "0")
    make_template(d, "web", HTTPD)
    make_template(d, "readycmd", {"cmd": "sleep 0.3; touch /tmp/up; exec sleep 1000",
                                  "ready": {"cmd": "test -e /tmp/up", "timeout_s": 20}})
    make_template(d, "never", {"cmd": "echo never listening; echo on stderr >&2; exec sleep 1000",
                               "ready": {"port": 8001, "timeout_s": 2}})
    make_template(d, "exits", {"cmd": "echo bad config; exit 3",
                               "ready": {"port": 8002, "timeout_s": 20}})
    make_template(d, "noready", {"cmd": "exec sleep 1000", "user": "root", "env": {"K": "V"}})
    make_template(d, "badstart", {"ready": {"port": 1}})
    d.start()
    yield d
    try:
        delete_all(d)
    finally:
        d.cleanup()


def test_a_create_answers_once_the_port_answers(d):
    c = d.client()
    t0 = time.monotonic()
    sb = warren.Sandbox.create("web", client=c, timeout=60)
    took = time.monotonic() - t0
    try:
        # Open the moment the create returned: nothing listened for the first 0.4 s.
        assert listening(sb, 8000)
        assert took >= 0.4
        assert sb.commands.run("wget -q -O - http://127.0.0.1:8000/health").stdout == "ok\n"
        (p,) = start_procs(c, sb.sandbox_id)
        assert p["running"] and p["cmd"][:2] == ["/bin/sh", "-c"] and "httpd" in p["cmd"][2]
    finally:
        sb.kill()


def test_a_sandbox_with_a_network_slot(d):
    # Its own address in a slot, no internet: the check dials the slot address first, then
    # falls back to warren-init (httpd listens on 127.0.0.1 only).
    c = d.client()
    sb = warren.Sandbox.create("web", client=c, timeout=60, network=True, internet=False)
    try:
        assert listening(sb, 8000)
        assert len(start_procs(c, sb.sandbox_id)) == 1
    finally:
        sb.kill()
    status, body = create_raw(c, "exits", network={"enabled": True, "internet": False})
    assert status == 502 and body["code"] == "start_failed", body
    assert_nothing_left(d, c)


def test_a_ready_command(d):
    c = d.client()
    sb = warren.Sandbox.create("readycmd", client=c, timeout=60)
    try:
        assert sb.commands.run("test -e /tmp/up && echo up").stdout == "up\n"
        assert len(start_procs(c, sb.sandbox_id)) == 1
        # The checks' own processes are not left in the list.
        procs = c.request("GET", "/v1/sandboxes/%s/processes" % sb.sandbox_id).json_object()
        assert [p for p in procs["processes"] if p["cmd"][-1] == "test -e /tmp/up"] == []
    finally:
        sb.kill()


def test_no_ready_check_answers_once_started(d):
    c = d.client()
    sb = warren.Sandbox.create("noready", client=c, timeout=60)
    try:
        (p,) = start_procs(c, sb.sandbox_id)
        assert p["running"]
        assert "sleep 1000" in sb.commands.run("ps -o args").stdout
    finally:
        sb.kill()


def test_a_start_that_never_becomes_ready_fails_and_leaves_nothing(d):
    c = d.client()
    t0 = time.monotonic()
    status, body = create_raw(c, "never")
    took = time.monotonic() - t0
    assert status == 502 and body["code"] == "start_failed", body
    assert "`never`" in body["message"] and "not ready after 2 s" in body["message"]
    assert "never listening" in body["message"] and "on stderr" in body["message"]
    assert 2 <= took < 6
    assert_nothing_left(d, c)


def test_a_delete_while_the_start_command_runs(d):
    import threading
    c = d.client()
    make_template(d, "slowready", {"cmd": "exec sleep 1000", "ready": {"port": 8003, "timeout_s": 30}})
    got = {}
    t = threading.Thread(target=lambda: got.update(r=create_raw(d.client(), "slowready")))
    t0 = time.monotonic()
    t.start()
    sid = None
    while sid is None and time.monotonic() - t0 < 10:
        sbs = c.request("GET", "/v1/sandboxes", query={"state": "creating"}).json_object()["sandboxes"]
        sid = sbs[0]["id"] if sbs else None
        time.sleep(0.02)
    assert sid is not None
    r = c.request("DELETE", "/v1/sandboxes/%s" % sid, check=False)
    assert r.status == 204, r.body
    t.join(10)
    status, body = got["r"]
    assert status == 409 and "deleted" in body["message"], body
    assert time.monotonic() - t0 < 10  # not the 30 s of its timeout
    assert_nothing_left(d, c)


def test_a_start_that_exits_at_once_fails_at_once(d):
    c = d.client()
    t0 = time.monotonic()
    status, body = create_raw(c, "exits")
    took = time.monotonic() - t0
    assert status == 502 and body["code"] == "start_failed", body
    assert "exited with code 3" in body["message"] and "bad config" in body["message"]
    assert took < 5  # not the 20 s of its timeout
    assert_nothing_left(d, c)


def test_the_sdk_raises_start_failed(d):
    c = d.client()
    with pytest.raises(warren.WarrenError) as e:
        warren.Sandbox.create("exits", client=c, timeout=60)
    assert e.value.code == "start_failed" and e.value.status == 502
    assert_nothing_left(d, c)


def test_a_malformed_start_is_refused(d):
    c = d.client()
    status, body = create_raw(c, "badstart")
    assert status == 400 and "start.cmd" in body["message"], body
    assert_nothing_left(d, c)


def test_e2b_create_waits_for_the_start_command(d):
    # POST /sandboxes (E2B's create, templateID) goes through the same core create.
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=60)
    key = d.admin_key
    conn.request("POST", "/sandboxes", body=json.dumps({"templateID": "web", "timeout": 60}),
                 headers={"X-API-Key": key, "Content-Type": "application/json"})
    r = conn.getresponse()
    body = json.loads(r.read())
    assert r.status == 201, body
    sid = body["sandboxID"]
    c = d.client()
    sb = warren.Sandbox.connect(sid, client=c)
    try:
        assert listening(sb, 8000)
    finally:
        sb.kill()
    conn.request("POST", "/sandboxes", body=json.dumps({"templateID": "exits"}),
                 headers={"X-API-Key": key, "Content-Type": "application/json"})
    r = conn.getresponse()
    body = json.loads(r.read())
    assert r.status == 502 and "exited with code 3" in body["message"], body
    conn.close()
    assert_nothing_left(d, c)


def test_a_fork_runs_the_start_command_again(d):
    c = d.client()
    sb = warren.Sandbox.create("web", client=c, timeout=60)
    try:
        res = sb.fork(count=1)
        assert res.errors == [], res.errors
        (kid,) = res.sandboxes
        try:
            assert listening(kid, 8000)
            assert len(start_procs(c, kid.sandbox_id)) == 1
        finally:
            kid.kill()
    finally:
        sb.kill()


def test_a_resume_from_disk_runs_the_start_command_again(d):
    c = d.client()
    sb = warren.Sandbox.create("web", client=c, timeout=60)
    try:
        sb.pause(mode="disk")
        sb.resume()
        assert listening(sb, 8000)
        (p,) = start_procs(c, sb.sandbox_id)
        assert p["running"]
    finally:
        sb.kill()


def test_a_resume_whose_start_fails_answers_502_and_keeps_the_sandbox(d):
    c = d.client()
    make_template(d, "fragile", {"cmd": "if [ -e /tmp/broken ]; then echo broken; exit 3; fi; "
                                        "exec httpd -f -p 127.0.0.1:8000 -h /tmp",
                                 "ready": {"port": 8000, "timeout_s": 20}})
    sb = warren.Sandbox.create("fragile", client=c, timeout=60)
    try:
        assert listening(sb, 8000)
        sb.files.write("/tmp/broken", "1")
        sb.pause(mode="disk")
        r = c.request("POST", "/v1/sandboxes/%s/resume" % sb.sandbox_id, json_body={}, check=False)
        body = r.json()
        assert r.status == 502 and body["code"] == "start_failed", body
        assert "exited with code 3" in body["message"] and "broken" in body["message"]
        # Its files are the caller's: it runs on, without the service.
        assert sb.get_info().state == "running"
        assert sb.commands.run("cat /tmp/broken").stdout == "1"
    finally:
        sb.kill()


def test_a_template_built_from_one_with_a_start_command_keeps_it(d):
    c = d.client()
    # The build's steps run without it (a RUN step is not held up by the server, and does not
    # capture its files); the built template's sandboxes run it.
    df = "FROM web\nRUN ps -o args > /tmp/during-build\n"
    r = c.request("POST", "/v1/templates/build", query={"name": "web-built"}, data=df.encode(),
                  headers={"Content-Type": "text/plain"}, check=False, timeout=120)
    assert r.status == 200, r.body
    events = [json.loads(l) for l in r.body.decode().splitlines() if l]
    assert events[-1].get("type") != "error", events[-1]
    sb = warren.Sandbox.create("web-built", client=c, timeout=60)
    try:
        assert listening(sb, 8000)
        assert len(start_procs(c, sb.sandbox_id)) == 1
        during = sb.commands.run("cat /tmp/during-build").stdout
        assert "ps -o args" in during and "httpd" not in during
    finally:
        sb.kill()
        c.request("DELETE", "/v1/templates/web-built")


def test_the_start_process_keeps_its_tag_across_a_daemon_restart():
    d = Daemon("--warm", "0")
    make_template(d, "web", HTTPD)
    d.start()
    try:
        sb = warren.Sandbox.create("web", client=d.client(), timeout=60)
        (before,) = start_procs(d.client(), sb.sandbox_id)
        d.stop()
        d.start()
        (after,) = start_procs(d.client(), sb.sandbox_id)
        assert after["pid"] == before["pid"] and after["running"]
    finally:
        delete_all(d)
        d.cleanup()


def test_a_daemon_that_stops_while_a_start_command_runs_keeps_nothing_of_it():
    import threading
    d = Daemon("--warm", "0")
    make_template(d, "slowready", {"cmd": "exec sleep 1000", "ready": {"port": 8003, "timeout_s": 30}})
    d.start()
    try:
        c = d.client()
        got = {}

        def create():
            try:
                got["r"] = create_raw(d.client(), "slowready")
            except Exception as e:  # the daemon may close the connection first
                got["r"] = e
        t = threading.Thread(target=create)
        t.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not c.request(
                "GET", "/v1/sandboxes", query={"state": "creating"}).json_object()["sandboxes"]:
            time.sleep(0.02)
        t0 = time.monotonic()
        d.stop()
        assert time.monotonic() - t0 < 5
        t.join(10)
        assert not isinstance(got.get("r"), tuple) or got["r"][0] >= 400, got
        left = wait_clean()
        assert not any(left.values()), "left behind: %r" % left
        assert homes(d) == []
        d.start()
        assert d.client().request("GET", "/v1/sandboxes", query={
            "state": "creating,running,paused,stopped,error"}).json_object()["sandboxes"] == []
    finally:
        delete_all(d)
        d.cleanup()


# ---- warm pools ---------------------------------------------------------------------------------

def warm_ready(c):
    return {p["template"]: p for p in c.request("GET", "/v1/warm-pools").json_object()["pools"]}


def wait_pool(c, name, n, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p = warm_ready(c).get(name)
        if p and p["ready"] == n:
            return p
        time.sleep(0.05)
    raise AssertionError("pool %s: %r, wanted %d ready" % (name, warm_ready(c), n))


def test_a_warm_pool_of_a_template_with_a_start_command():
    d = Daemon("--warm", "1", "--warm", "web=1")
    make_template(d, "web", HTTPD)
    d.start()
    try:
        c = d.client()
        wait_pool(c, "web", 1)
        assert c.warm_pools() == [{"template": "base", "target": 1, "ready": 1},
                                  {"template": "web", "target": 1, "ready": 1}]
        assert c.request("GET", "/v1/warm-pools").json_object() == {"pools": [
            {"template": "base", "target": 1, "ready": 1},
            {"template": "web", "target": 1, "ready": 1}]}
        t0 = time.monotonic()
        sb = warren.Sandbox.create("web", client=c, timeout=60, metadata={"k": "v"})
        took = time.monotonic() - t0
        try:
            assert took < 0.4, took  # its start command waits 0.4 s: it ran before the create
            assert listening(sb, 8000)
            (p,) = start_procs(c, sb.sandbox_id)
            assert p["running"]
            assert sb.get_info().metadata == {"k": "v"}
            assert sb.commands.run("wget -q -O - http://127.0.0.1:8000/health").stdout == "ok\n"
            # The pool refills.
            wait_pool(c, "web", 1)
            # A create that asks for more (env) gets a sandbox of its own, its start run for it.
            t0 = time.monotonic()
            own = warren.Sandbox.create("web", client=c, timeout=60, env={"A": "1"})
            try:
                assert time.monotonic() - t0 >= 0.4
                assert listening(own, 8000)
                assert warm_ready(c)["web"]["ready"] == 1
            finally:
                own.kill()
        finally:
            sb.kill()
    finally:
        delete_all(d)
        d.cleanup()


def test_a_warm_pool_whose_start_fails_hands_out_nothing():
    d = Daemon("--warm", "0", "--warm", "exits=1")
    make_template(d, "exits", {"cmd": "echo bad config; exit 3",
                               "ready": {"port": 8002, "timeout_s": 20}})
    d.start()
    try:
        c = d.client()
        time.sleep(1)
        assert warm_ready(c) == {"exits": {"template": "exits", "target": 1, "ready": 0}}
        status, body = create_raw(c, "exits")
        assert status == 502 and body["code"] == "start_failed", body
        with open(os.path.join(d.dir, "warrend.log")) as f:
            assert "warm sandbox of `exits`" in f.read()
    finally:
        delete_all(d)
        d.cleanup()
