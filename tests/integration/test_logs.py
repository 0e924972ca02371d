"""--log-format json: every line warrend writes is one JSON object, and each request has its
access line (method, route, status, bytes, duration, request id, team) once it is answered."""

import json
import os
import shutil
import subprocess
import time

import pytest

import warren
import warren.admin
from conftest import Daemon, delete_all


@pytest.fixture(scope="module")
def jd():
    d = Daemon("--log-format", "json", "--log-level", "info").start()
    yield d
    try:
        delete_all(d)
    finally:
        d.cleanup()


def log_lines(d):
    with open(os.path.join(d.dir, "warrend.log"), "rb") as f:
        return f.read().decode().splitlines()


def access_lines(d, request_id, timeout=5.0):
    deadline = time.monotonic() + timeout
    while True:
        found = [j for j in map(json.loads, log_lines(d))
                 if j.get("msg") == "access" and j.get("request_id") == request_id]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_json_lines_and_access_lines(jd):
    admin = jd.client()
    key = warren.admin.create_key("logteam", client=admin)
    c = warren.Client(jd.tcp_url, key.key)
    sb = warren.Sandbox.create(client=c, timeout=60)
    r = c.request("POST", "/v1/sandboxes/%s/exec" % sb.sandbox_id,
                  json_body={"cmd": ["echo", "hello"]}, request_id="req-exec-1")
    assert r.status == 200
    r404 = c.request("GET", "/v1/sandboxes/sb_missing000000000000", request_id="req-404-1",
                     check=False)
    assert r404.status == 404
    sb.kill()

    lines = log_lines(jd)
    assert lines
    for line in lines:
        j = json.loads(line)  # every line is one JSON object
        assert isinstance(j, dict), line
        assert {"time", "level", "msg"} <= set(j), line
        assert j["time"].endswith("Z")

    [a] = access_lines(jd, "req-exec-1")
    assert a["level"] == "info"
    assert a["method"] == "POST" and a["route"] == "/v1/sandboxes/{id}/exec"
    assert a["status"] == 200 and a["api"] == "native"
    assert a["bytes_out"] == len(r.body) and a["bytes_in"] > 0
    assert 0 < a["duration_s"] < 30
    assert a["team"] == "logteam" and a["key"] == key.id
    assert a["remote"] == "tcp:127.0.0.1"
    assert key.key not in "\n".join(lines)

    [b] = access_lines(jd, "req-404-1")
    assert b["status"] == 404 and b["route"] == "/v1/sandboxes/{id}" and b["method"] == "GET"


def test_text_is_the_default(daemon):
    c = daemon.client()
    c.request("GET", "/v1/health")
    with open(os.path.join(daemon.dir, "warrend.log")) as f:
        text = f.read()
    assert text and not text.lstrip().startswith("{")


def test_bad_log_format_is_refused():
    d = Daemon()
    try:
        r = subprocess.run([d.binary, "--state-dir", d.state, "--socket", d.sock,
                            "--log-format", "yaml"], capture_output=True, text=True, timeout=20)
        assert r.returncode == 2 and "must be text or json" in r.stderr, r.stderr
    finally:
        shutil.rmtree(d.dir, ignore_errors=True)
