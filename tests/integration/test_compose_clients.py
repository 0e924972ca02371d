"""Compose files through the Python SDK and the CLI (docs/compose.md, docs/sdk-python.md,
docs/cli.md): Sandbox.create(compose=...) with compose_context, services(), service_logs(),
commands.run(service=) and files(service=); `warren create -f --compose-env --context`,
`warren services`, `warren logs`, `warren exec --service`; a refused key named with its line
by both."""

import json
import os
import time

import pytest

import warren
from conftest import Daemon, delete_all, template_dir
from conftest import warren as cli

# compose-test: the Debian template test.sh builds (python3 in it).
COMPOSE = """\
services:
  web:
    image: compose-test
    command: ["python3", "-m", "http.server", "8080"]
    ports: ["8080"]
    healthcheck:
      test: ["CMD", "python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080')"]
      interval: 200ms
  client:
    image: compose-test
    command: ["sh", "-c", "sleep 1000"]
    environment:
      GREETING: ${GREETING}
    env_file: client.env
    depends_on:
      web: {condition: service_healthy}
"""

REFUSED = "services:\n  web:\n    image: compose-test\n    privileged: true\n"


@pytest.fixture(scope="module")
def d():
    template_dir("compose-test")
    dm = Daemon(templates=("compose-test",)).start()
    yield dm
    try:
        delete_all(dm)
    finally:
        dm.cleanup()


@pytest.fixture
def ctx(tmp_path):
    (tmp_path / "client.env").write_text("FROM_FILE=yes\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / "empty").mkdir()
    return tmp_path


def wait_ready(sb, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        now = {s.name: s for s in sb.services()}
        if now["web"].state == "healthy" and now["client"].state == "running":
            return now
        assert time.monotonic() < deadline, now
        time.sleep(0.2)


def test_compose_context_reads_a_directory_by_the_cli_rules(ctx):
    assert warren.compose_context(ctx) == {"client.env": "FROM_FILE=yes\n", "empty/": ""}
    (ctx / "empty" / "bad.bin").write_bytes(b"\xff\xfe")
    with pytest.raises(ValueError, match=r"bad\.bin is not UTF-8"):
        warren.compose_context(ctx)
    (ctx / "empty" / "bad.bin").unlink()
    for i in range(warren.CONTEXT_MAX_FILES):
        (ctx / ("f%d" % i)).write_text("x")
    with pytest.raises(ValueError, match="more than 512 files"):
        warren.compose_context(ctx)


def test_the_sdk_runs_a_compose_file(d, ctx):
    c = d.client()
    sb = warren.Sandbox.create(client=c, timeout=300, compose={
        "file": COMPOSE, "env": {"GREETING": "hello"}, "context": warren.compose_context(ctx)})
    try:
        now = wait_ready(sb)
        assert [s.name for s in sb.services()] == ["web", "client"]
        assert now["web"].ports == [8080] and now["web"].image == "compose-test"
        assert now["web"].pid and now["web"].restarts == 0 and now["web"].exit_code is None
        # The service's environment: interpolated from env, and its context's env_file.
        r = sb.commands.run('echo "$GREETING $FROM_FILE"', service="client")
        assert r.stdout == "hello yes\n"
        got = []
        sb.commands.run('echo "$FROM_FILE"', service="client", on_stdout=got.append)
        assert "".join(got) == "yes\n"
        assert sb.commands.run('echo "$GREETING"', service="client", background=True).wait().stdout == "hello\n"
        # Files in a service's root, not in another's.
        sb.files.write("/tmp/proof.txt", "in client\n", service="client")
        assert sb.files.read("/tmp/proof.txt", service="client") == "in client\n"
        assert sb.commands.run("cat /tmp/proof.txt", service="client").stdout == "in client\n"
        assert not sb.files.exists("/tmp/proof.txt", service="web")
        assert sb.files.make_dir("/tmp/d", service="client")
        sb.files.rename("/tmp/proof.txt", "/tmp/d/moved.txt", service="client")
        assert [e.name for e in sb.files.list("/tmp/d", service="client")] == ["moved.txt"]
        assert sb.files.stat("/tmp/d/moved.txt", service="client").size == 10
        sb.files.remove("/tmp/d", recursive=True, service="client")
        # Logs: bytes, the healthchecks' requests among them.
        log = sb.service_logs("web")
        assert isinstance(log, bytes) and b'"GET / HTTP/1.1" 200' in log, log
        with pytest.raises(warren.NotFoundError):
            sb.service_logs("nope")
    finally:
        sb.kill()
        c.close()


def test_the_sdk_names_a_refused_key_and_its_line(d):
    c = d.client()
    with pytest.raises(warren.UnsupportedError, match=r"services\.web\.privileged \(line 4\)"):
        warren.Sandbox.create(client=c, compose=REFUSED)
    with pytest.raises(ValueError):
        warren.Sandbox.create(client=c, compose={"file": COMPOSE, "bogus": 1})
    c.close()


def test_the_cli_runs_a_compose_file(d, ctx, tmp_path_factory):
    env = {"WARREN_API_URL": d.url}
    f = tmp_path_factory.mktemp("compose") / "compose.yml"
    f.write_text(COMPOSE)
    r = cli("create", "-f", str(f), "--compose-env", "GREETING=hello", "--context", str(ctx), env=env)
    assert r.returncode == 0, r.stderr
    sid = r.stdout.decode().strip()
    sb = warren.Sandbox.connect(sid, client=d.client())
    wait_ready(sb)
    r = cli("services", sid, env=env)
    lines = r.stdout.decode().splitlines()
    assert lines[0].split() == ["NAME", "STATE", "PID", "RESTARTS", "IMAGE", "PORTS", "MESSAGE"]
    assert lines[1].split()[:2] == ["web", "healthy"] and "8080" in lines[1].split()
    assert lines[2].split()[:2] == ["client", "running"]
    j = json.loads(cli("services", sid, "-o", "json", env=env).stdout)
    assert [s["name"] for s in j["services"]] == ["web", "client"]
    r = cli("logs", sid, "web", env=env)
    assert r.returncode == 0 and b'"GET / HTTP/1.1" 200' in r.stdout
    r = cli("logs", sid, "nope", env=env)
    assert r.returncode == 1 and b"not_found" in r.stderr
    r = cli("exec", "--service", "client", sid, "--", "sh", "-c", 'echo "$GREETING $FROM_FILE"', env=env)
    assert (r.returncode, r.stdout) == (0, b"hello yes\n"), r.stderr
    r = cli("exec", sid, "--service", "web", "--", "sh", "-c", "exit 3", env=env)
    assert r.returncode == 3
    r = cli("exec", sid, "--service", "client", "--", "cat", input=b"piped\n", env=env)  # streamed stdin
    assert r.stdout == b"piped\n", r.stderr
    r = cli("exec", sid, "--service", "Bad/x", "--", "true", env=env)
    assert r.returncode == 2
    assert cli("rm", sid, env=env).returncode == 0


def test_the_cli_refuses_bad_input_before_sending(d, ctx, tmp_path):
    env = {"WARREN_API_URL": d.url}
    r = cli("create", "-f", "-", input=REFUSED.encode(), env=env)
    assert r.returncode == 1 and b"services.web.privileged (line 4): not supported (unsupported)" in r.stderr
    r = cli("create", "--context", str(ctx), env=env)
    assert r.returncode == 2 and b"go with -f" in r.stderr
    (ctx / "bad.bin").write_bytes(b"\xff")
    r = cli("create", "-f", "-", "--context", str(ctx), input=COMPOSE.encode(), env=env)
    assert r.returncode == 2 and b"bad.bin is not UTF-8 text" in r.stderr
    os.unlink(ctx / "bad.bin")
    big = tmp_path / "big"
    big.mkdir()
    (big / "a").write_bytes(b"a" * (9 << 20))
    r = cli("create", "-f", "-", "--context", str(big), input=COMPOSE.encode(), env=env)
    assert r.returncode == 2 and b"more than 8 MiB" in r.stderr
    assert list(warren.Sandbox.list(client=d.client())) == []
