"""A sandbox's isolation backend, `runtime` (docs/openapi.yaml `SandboxCreate.runtime`): what the
API, the CLI and the SDK say of it and refuse, without runsc. What a working gvisor sandbox does
is test_gvisor.py's."""

import json
import os
import subprocess

import pytest

import warren
from conftest import ENV, IMAGE, WARREN, Daemon, delete_all


def add_template(d, name, config):
    """A directory template NAME of daemon d (before it starts): the test image with config."""
    tdir = os.path.join(d.state, "templates", name)
    os.makedirs(tdir, exist_ok=True)
    os.symlink(os.path.abspath(IMAGE), os.path.join(tdir, "rootfs"))
    with open(os.path.join(tdir, "config.json"), "w") as f:
        json.dump(config, f)


@pytest.fixture(scope="module")
def nsd():
    """A daemon that allows only ns, with a template whose sandboxes default to gvisor and one
    whose config names a runtime that is none."""
    d = Daemon("--runtimes", "ns")
    add_template(d, "gv", {"runtime": "gvisor"})
    add_template(d, "bogus", {"runtime": "vm"})
    d.start()
    yield d
    try:
        delete_all(d)
    finally:
        d.cleanup()


def create(c, **body):
    return c.request("POST", "/v1/sandboxes", json_body=dict(timeout=60, **body), check=False)


def test_the_default_runtime_is_ns_and_is_reported(client):
    v = client.request("GET", "/v1/version").json()
    assert v["runtime"] == "ns" and "ns" in v["runtimes"], v
    sb = warren.Sandbox.create(client=client, timeout=60)
    try:
        assert sb.runtime == "ns" and sb.info.raw["runtime"] == "ns"
        assert sb.get_info().runtime == "ns"
        listed = {s.id: s for s in warren.Sandbox.list(client=client)}
        assert listed[sb.id].runtime == "ns"
    finally:
        sb.kill()
    sb = warren.Sandbox.create(client=client, timeout=60, runtime="ns")
    try:
        assert sb.runtime == "ns"
        assert sb.commands.run("echo ok").stdout == "ok\n"
    finally:
        sb.kill()


def test_runtimes_first_named_is_the_default():
    """`--runtimes gvisor,ns`: a create that names no runtime (and whose template names none)
    runs on gvisor, one that names ns on ns; /v1/version says gvisor."""
    d = Daemon("--runtimes", "gvisor,ns")
    d.start()
    try:
        c = d.client()
        v = c.request("GET", "/v1/version").json()
        assert v["runtime"] == "gvisor" and sorted(v["runtimes"]) == ["gvisor", "ns"], v
        for body, want in (({}, "gvisor"), ({"runtime": "ns"}, "ns")):
            r = create(c, **body)
            assert r.status == 201 and r.json()["runtime"] == want, (body, r.body)
            c.request("DELETE", "/v1/sandboxes/" + r.json()["id"])
    finally:
        try:
            delete_all(d)
        finally:
            d.cleanup()


@pytest.mark.parametrize("value", ["bogus", "", "NS", 7, ["ns"]])
def test_a_runtime_that_is_none_is_400_naming_the_choices(client, value):
    r = create(client, runtime=value)
    j = r.json()
    assert r.status == 400 and j["code"] == "invalid", j
    assert "runtime" in j["message"], j
    if isinstance(value, str):
        assert "ns or gvisor" in j["message"], j
    with pytest.raises(warren.InvalidArgumentError):
        warren.Sandbox.create(client=client, timeout=60, runtime="bogus")


def test_a_daemon_with_runtimes_ns_refuses_gvisor(nsd):
    c = nsd.client()
    v = c.request("GET", "/v1/version").json()
    assert v["runtime"] == "ns" and v["runtimes"] == ["ns"], v
    r = create(c, runtime="gvisor")
    j = r.json()
    assert r.status == 400 and j["code"] == "invalid", j
    assert j["message"] == "runtime gvisor is not allowed on this daemon (--runtimes ns)", j
    sb = warren.Sandbox.create(client=c, timeout=60, runtime="ns")
    sb.kill()


def test_a_template_sets_the_default_and_a_create_overrides_it(nsd):
    c = nsd.client()
    templates = {t["name"]: t for t in c.request("GET", "/v1/templates").json()["templates"]}
    assert templates["gv"]["runtime"] == "gvisor" and templates["base"]["runtime"] is None
    r = create(c, template="gv")
    j = r.json()
    assert r.status == 400 and j["code"] == "invalid", j
    assert j["message"] == "template `gv`: runtime gvisor is not allowed on this daemon (--runtimes ns)", j
    r = create(c, template="bogus")
    assert r.status == 400 and "template `bogus`" in r.json()["message"], r.json()
    sb = warren.Sandbox.create("gv", client=c, timeout=60, runtime="ns")
    try:
        assert sb.runtime == "ns" and sb.get_info().template == "gv"
        # Its copies run on its runtime, not their template's.
        fork = c.request("POST", "/v1/sandboxes/%s/fork" % sb.id, json_body={"count": 1}).json()
        kids = fork["sandboxes"]
        assert [k["runtime"] for k in kids] == ["ns"], fork
        for k in kids:
            c.request("DELETE", "/v1/sandboxes/" + k["id"])
    finally:
        sb.kill()


def test_a_build_sets_its_templates_runtime(nsd):
    c = nsd.client()
    r = c.request("POST", "/v1/templates/build", query={"name": "t-rt", "runtime": "gvisor"},
                  data=b"FROM base\nENV A=1\n", check=False)
    assert r.status == 400 and "--runtimes ns" in r.json()["message"], r.json()
    r = c.request("POST", "/v1/templates/build", query={"name": "t-rt", "runtime": "vm"},
                  data=b"FROM base\nENV A=1\n", check=False)
    assert r.status == 400 and "ns or gvisor" in r.json()["message"], r.json()
    t = warren.Template.build("t-rt", "FROM base\nENV A=1\n", runtime="ns", client=c)
    assert t.raw["runtime"] == "ns"
    sb = warren.Sandbox.create("t-rt", client=c, timeout=60)
    try:
        assert sb.runtime == "ns"
    finally:
        sb.kill()
    c.request("DELETE", "/v1/templates/t-rt")


def test_the_cli(nsd, tmp_path):
    env = {k: v for k, v in ENV.items() if k not in ("WARREN_API_URL", "WARREN_API_KEY")}
    env.update(HOME=str(tmp_path), WARREN_API_URL=nsd.url)

    def cli(*args):
        return subprocess.run([WARREN, *args], capture_output=True, timeout=60, env=env)

    r = cli("create", "--timeout", "60", "--runtime", "gvisor")
    assert r.returncode == 1 and b"runtime gvisor is not allowed" in r.stderr, r.stderr
    r = cli("create", "--timeout", "60", "--runtime", "ns")
    assert r.returncode == 0, r.stderr
    sid = r.stdout.decode().strip()
    try:
        info = cli("info", sid)
        assert b"\nruntime:    ns\n" in info.stdout, info.stdout
        assert json.loads(cli("info", sid, "-o", "json").stdout)["runtime"] == "ns"
    finally:
        cli("rm", sid)
    assert b"--runtime" in cli("create", "--help").stdout
