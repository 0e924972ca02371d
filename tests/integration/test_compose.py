"""Compose files (docs/compose.md): one sandbox holding every service, each in a root of its own
made from its image (PostgreSQL and Redis from Debian's packages: the compose-test template that
test.sh builds, tests/templates/), sharing the sandbox's network, names resolving to it,
started in depends_on order behind healthchecks and restarted by policy by warren-init; exec,
files and logs per service; snapshot and fork of the whole stack; every refused key named with
its line."""

import os
import time

import pytest

import warren
from conftest import Daemon, delete_all, template_dir

# The app: reaches the database and the cache by their service names, counts its visits in both,
# and answers with what it read. Python's standard library only; psql and redis-cli from the
# image do the talking.
APP = r'''
import http.server, subprocess

def sh(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip()

class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/health":
            return self.answer(b"ok\n")
        sh("psql", "-h", "db", "-U", "postgres", "-qAt", "-c",
           "CREATE TABLE IF NOT EXISTS visits (n int); INSERT INTO visits VALUES (1)")
        rows = sh("psql", "-h", "db", "-U", "postgres", "-qAt", "-c", "SELECT count(*) FROM visits")
        hits = sh("redis-cli", "-h", "cache", "incr", "hits")
        self.answer(("db=%s cache=%s\n" % (rows, hits)).encode())

    def answer(self, body):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

http.server.ThreadingHTTPServer(("0.0.0.0", 8000), H).serve_forever()
'''

# Trust on loopback: the services share the sandbox's network namespace and nothing else reaches it.
HBA = "local all all trust\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n"

COMPOSE = """\
name: shop
x-check: &check {interval: 200ms, timeout: 10s, retries: 150}
services:
  web:
    image: compose-test
    command: python3 /app/app.py
    volumes: ["./app:/app:ro"]
    environment: {GREETING: "${GREETING:-hello}"}
    ports: ["8000"]
    depends_on:
      db: {condition: service_healthy}
      cache: {condition: service_healthy}
    healthcheck:
      test: ["CMD", "python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health')"]
      <<: *check
  db:
    image: compose-test
    user: postgres
    command: >-
      /usr/lib/postgresql/15/bin/postgres -D /var/lib/postgresql/15/main
      -c config_file=/etc/postgresql/15/main/postgresql.conf -c hba_file=/conf/pg_hba.conf
      -c listen_addresses=127.0.0.1 -c unix_socket_directories= -c ssl=off
    volumes: ["./conf:/conf:ro"]
    healthcheck:
      test: pg_isready -h 127.0.0.1 -U postgres
      <<: *check
  cache:
    image: compose-test
    command: ["redis-server", "--port", "6379", "--save", "", "--bind", "127.0.0.1"]
    healthcheck:
      test: ["CMD", "redis-cli", "ping"]
      <<: *check
  flaky:
    image: compose-test
    command: ["sh", "-c", "echo flaky ran; exit 3"]
    restart: on-failure:2
"""

CONTEXT = {"app/app.py": APP, "conf/pg_hba.conf": HBA}


@pytest.fixture(scope="module")
def d():
    template_dir("compose-test")  # skips, saying so, when test.sh has not built it
    dm = Daemon(templates=("compose-test",)).start()
    yield dm
    try:
        delete_all(dm)
    finally:
        dm.cleanup()


def create(c, compose, **kw):
    r = c.request("POST", "/v1/sandboxes", json_body=dict({"compose": compose, "timeout": 600}, **kw))
    return r.json()


def services(c, sid):
    return {s["name"]: s for s in c.request("GET", "/v1/sandboxes/%s/services" % sid).json()["services"]}


def wait_states(c, sid, want, timeout=90):
    """Until every named service is in one of its wanted states; the last listing either way."""
    deadline = time.monotonic() + timeout
    while True:
        now = services(c, sid)
        if all(now[n]["state"] in w for n, w in want.items()):
            return now
        assert time.monotonic() < deadline, "services not %r after %d s: %r" % (want, timeout, now)
        time.sleep(0.2)


def run(sb, cmd, service=None, **kw):
    r = sb.commands.run(cmd, service=service, timeout=60, **kw)
    assert r.exit_code == 0, (cmd, service, r.stdout, r.stderr)
    return r.stdout


def fails(sb, cmd, service=None):
    return sb.commands.run(cmd, service=service, timeout=60, check=False).exit_code != 0


@pytest.fixture
def stack(d):
    """The shop's stack, running (every service but flaky healthy), killed after the test."""
    c = d.client()
    sid = create(c, {"file": COMPOSE, "context": CONTEXT})["id"]
    sb = warren.Sandbox.connect(sid, client=c)
    try:
        wait_states(c, sid, {"web": ("healthy",), "db": ("healthy",), "cache": ("healthy",)})
        yield c, sb
    finally:
        sb.kill()
        c.close()


def test_the_stack_starts_behind_its_healthchecks_and_the_app_reaches_db_and_cache_by_name(stack):
    c, sb = stack
    now = services(c, sb.sandbox_id)
    assert list(now) == ["cache", "db", "flaky", "web"]  # dependencies first, ties by name
    assert sb.get_info().services == list(now)
    assert now["web"]["ports"] == [8000] and now["web"]["image"] == "compose-test"
    assert now["db"]["pid"] > 1 and now["web"]["restarts"] == 0
    # From the sandbox's own root (busybox here), through the app, to PostgreSQL and Redis.
    assert run(sb, ["wget", "-qO-", "http://127.0.0.1:8000/"]).strip() == "db=1 cache=1"
    # Service names resolve in the sandbox's root too.
    assert run(sb, ["wget", "-qO-", "http://web:8000/"]).strip() == "db=2 cache=2"
    # Each service runs in a root of its own: the app's files are in web's, not in db's ...
    assert "import http.server" in run(sb, ["cat", "/app/app.py"], service="web")
    assert fails(sb, ["cat", "/app/app.py"], service="db")
    # ... with its user and its environment (the file's, interpolated: GREETING's default).
    assert run(sb, ["id", "-un"], service="db").strip() == "postgres"
    assert run(sb, ["sh", "-c", "echo $GREETING"], service="web").strip() == "hello"
    assert run(sb, ["psql", "-h", "db", "-U", "postgres", "-qAt", "-c", "SELECT 40+2"],
               service="web").strip() == "42"
    # A read-only bind of the context.
    assert fails(sb, ["sh", "-c", "echo x > /app/new"], service="web")


def test_a_crashing_service_is_restarted_by_its_policy_then_failed(stack):
    c, sb = stack
    now = wait_states(c, sb.sandbox_id, {"flaky": ("failed",)})
    assert now["flaky"]["restarts"] == 2 and now["flaky"]["exit_code"] == 3, now["flaky"]
    log = c.request("GET", "/v1/sandboxes/%s/services/flaky/logs" % sb.sandbox_id).body
    assert log.count(b"flaky ran") == 3, log
    assert b"restarting in" in log


def test_logs_files_and_exec_per_service(stack):
    c, sb = stack
    sid = sb.sandbox_id
    log = c.request("GET", "/v1/sandboxes/%s/services/db/logs" % sid).body
    assert b"database system is ready to accept connections" in log
    r = c.request("GET", "/v1/sandboxes/%s/services/nope/logs" % sid, check=False)
    assert r.status == 404
    # Files in a service's root: written there, seen by its commands, not in the sandbox's root.
    c.request("PUT", "/v1/sandboxes/%s/files" % sid, query={"path": "/tmp/from-api", "service": "cache"},
              data=b"in the cache's root")
    assert run(sb, ["cat", "/tmp/from-api"], service="cache") == "in the cache's root"
    assert fails(sb, ["cat", "/tmp/from-api"])
    r = c.request("GET", "/v1/sandboxes/%s/files" % sid, query={"path": "/tmp/from-api", "service": "cache"})
    assert r.body == b"in the cache's root"
    with pytest.raises(warren.WarrenError, match="no service `nope`"):
        sb.commands.run(["true"], service="nope", timeout=30)


def test_a_fork_of_the_stack_keeps_its_data_and_runs_its_services(stack):
    c, sb = stack
    assert run(sb, ["wget", "-qO-", "http://127.0.0.1:8000/"]).split()[0] == "db=1"
    copies = c.request("POST", "/v1/sandboxes/%s/fork" % sb.sandbox_id, json_body={"count": 1}).json()
    copy = warren.Sandbox.connect(copies["sandboxes"][0]["id"], client=c)
    try:
        wait_states(c, copy.sandbox_id, {"web": ("healthy",), "db": ("healthy",), "cache": ("healthy",)})
        # The row written before the fork is in the copy's database, which goes on on its own.
        assert run(copy, ["wget", "-qO-", "http://127.0.0.1:8000/"]).split()[0] == "db=2"
        assert run(copy, ["wget", "-qO-", "http://127.0.0.1:8000/"]).split()[0] == "db=3"
        assert run(sb, ["wget", "-qO-", "http://127.0.0.1:8000/"]).split()[0] == "db=2"
    finally:
        copy.kill()


def test_pause_to_disk_and_resume_start_the_stack_again_on_its_files(stack):
    c, sb = stack
    assert run(sb, ["wget", "-qO-", "http://127.0.0.1:8000/"]).split()[0] == "db=1"
    c.request("POST", "/v1/sandboxes/%s/pause" % sb.sandbox_id, json_body={"mode": "disk"})
    c.request("POST", "/v1/sandboxes/%s/resume" % sb.sandbox_id, json_body={})
    wait_states(c, sb.sandbox_id, {"web": ("healthy",), "db": ("healthy",), "cache": ("healthy",)})
    assert run(sb, ["wget", "-qO-", "http://127.0.0.1:8000/"]).split()[0] == "db=2"


# Every Compose key outside the subset, in a service (line 4) and at the top level (line 4):
# refused with its path and line, nothing made.
SERVICE_KEYS = ["build: .", "networks: [x]", "network_mode: host", "privileged: true", "cap_add: [ALL]",
                "cap_drop: [ALL]", "pid: host", "ipc: host", "security_opt: [x]", "sysctls: {a: 1}",
                "devices: [/dev/x]", "secrets: [x]", "configs: [x]", "extends: {service: b}",
                "links: [b]", "scale: 2", "profiles: [x]", "platform: linux/amd64", "ulimits: {n: 1}",
                "tmpfs: /t", "logging: {driver: none}", "dns: 1.1.1.1", "extra_hosts: [a:1.2.3.4]",
                "container_name: x", "hostname: x", "deploy: {replicas: 2}", "gpus: all",
                "runtime: runc", "volumes_from: [b]", "userns_mode: host", "cgroup_parent: x",
                "stdin_open: true", "tty: true", "read_only: true", "shm_size: 1g", "no_such_key: 1"]
TOP_KEYS = ["networks: {x: {}}", "secrets: {x: {file: f}}", "configs: {x: {file: f}}", "include: [x.yaml]",
            "volumes: {v: {driver: local}}", "bogus: 1"]
REFUSED = [("services:\n  a:\n    image: base\n    %s\n" % k, "services.a.%s" % k.split(":")[0])
           for k in SERVICE_KEYS]
REFUSED += [("services:\n  a:\n    image: base\n%s\n" % k, "%s" % k.split(":")[0]) for k in TOP_KEYS]
REFUSED += [
    ("services:\n  a:\n    image: base\n    volumes: [\"/etc:/x\"]\n", "services.a.volumes"),
    ("services:\n  a:\n    image: base\n    depends_on: [b]\n", "services.a.depends_on"),
    ("services:\n  a:\n    image: base\n    depends_on: [b]\n  b:\n    image: base\n    depends_on: [a]\n",
     "cycle"),
    ("services:\n  a:\n    image: base\n    ports: [\"53/udp\"]\n", "services.a.ports"),
]


@pytest.mark.parametrize("text,named", REFUSED)
def test_a_refused_key_is_named_with_its_line_and_leaves_nothing(d, text, named):
    c = d.client()
    before = len(list(warren.Sandbox.list(client=c)))
    r = c.request("POST", "/v1/sandboxes", json_body={"compose": text}, check=False)
    assert r.status == 400, r.body.decode()
    assert named in r.json()["message"] and "line" in r.json()["message"], r.json()
    assert len(list(warren.Sandbox.list(client=c))) == before


def test_an_unknown_image_is_a_404_naming_the_service(d):
    c = d.client()
    r = c.request("POST", "/v1/sandboxes", json_body={"compose": "services:\n  a:\n    image: nope\n"},
                  check=False)
    assert r.status == 404 and "service `a`" in r.json()["message"], r.body.decode()


VOLUME_COMPOSE = """\
services:
  box:
    image: base
    command: ["sh", "-c", "echo up; sleep 1000"]
    volumes: ["data:/data", "./ctx:/ctx"]
volumes:
  data:
"""


def test_a_service_root_a_tenant_rewires_is_refused_at_the_next_start_never_followed(d):
    """Probe, as the sandbox's root: the mount points and sources of a service's root are paths
    of the sandbox's own tree, which its code may replace by symbolic links before the sandbox
    starts again (a pause to disk, a fork). The runtime never follows one: the start fails
    cleanly, naming the step, and nothing of anywhere else is mounted."""
    c = d.client()
    sid = create(c, {"file": VOLUME_COMPOSE, "context": {"ctx/f": "context file"}})["id"]
    sb = warren.Sandbox.connect(sid, client=c)
    try:
        wait_states(c, sid, {"box": ("running",)})
        assert run(sb, ["cat", "/ctx/f"], service="box") == "context file"
        run(sb, ["sh", "-c", "echo kept > /data/x"], service="box")
        assert run(sb, ["cat", "/.warren/volumes/data/x"]) == "kept\n"  # the sandbox sees it
        # The volume's source becomes a link to the sandbox's /etc, the service's /proc a link
        # to /: followed, the next start would mount them there.
        run(sb, ["sh", "-c", "rm -rf /.warren/volumes/data && ln -s /etc /.warren/volumes/data"])
        c.request("POST", "/v1/sandboxes/%s/pause" % sid, json_body={"mode": "disk"})
        r = c.request("POST", "/v1/sandboxes/%s/resume" % sid, json_body={}, check=False)
        assert r.status >= 400 and "volume mount point" in r.json()["message"], r.body
        assert c.request("GET", "/v1/health").status == 200
    finally:
        c.request("DELETE", "/v1/sandboxes/" + sid, check=False)


def test_compose_on_gvisor_is_501_naming_why(d):
    c = d.client()
    r = c.request("POST", "/v1/sandboxes", check=False, json_body={
        "compose": {"file": VOLUME_COMPOSE, "context": {"ctx/f": "x"}}, "runtime": "gvisor"})
    assert r.status == 501 and "gvisor" in r.json()["message"], r.body


def test_a_context_too_large_is_413(d):
    c = d.client()
    ctx = {"f%d" % i: "x" for i in range(513)}
    r = c.request("POST", "/v1/sandboxes", json_body={"compose": {"file": VOLUME_COMPOSE, "context": ctx}},
                  check=False)
    assert r.status == 413, r.body


def test_a_context_path_both_file_and_directory_is_400(d):
    c = d.client()
    r = c.request("POST", "/v1/sandboxes", check=False, json_body={
        "compose": {"file": VOLUME_COMPOSE, "context": {"ctx": "a file", "ctx/f": "x"}}})
    assert r.status == 400 and "`ctx` is a file and a directory" in r.json()["message"], r.body


def test_a_prepare_that_fails_late_leaves_no_layer():
    """Regression: the layers made for a Compose file's services, installed before a later step
    of the same prepare failed (here the context's layer, by a test build's fault point), stayed
    in the layer store with no row referring to them, and collection, which goes by rows, never
    removed them."""
    template_dir("compose-test")
    dm = Daemon(templates=("compose-test",), env={"WARREN_FAULT": "compose-context"}).start()
    layers = os.path.join(dm.state, "layers")

    def stored():
        return sorted(e for e in os.listdir(layers) if not e.startswith("."))

    try:
        c = dm.client()
        before = stored()
        f = VOLUME_COMPOSE.replace("  box:", "  leaky:")
        r = c.request("POST", "/v1/sandboxes", check=False,
                      json_body={"compose": {"file": f, "context": {"ctx/f": "x"}}})
        assert r.status == 500 and "WARREN_FAULT=compose-context" in r.json()["message"], r.body
        deadline = time.monotonic() + 10
        while stored() != before and time.monotonic() < deadline:
            time.sleep(0.1)
        assert stored() == before, "layers left in the store: %s" % sorted(set(stored()) - set(before))
        assert c.request("GET", "/v1/sandboxes").json()["sandboxes"] == []
    finally:
        try:
            delete_all(dm)
        finally:
            dm.cleanup()


def test_an_external_volume_is_the_teams_warren_volume_and_outlives_the_sandbox(d):
    c = d.client()
    c.request("POST", "/v1/volumes", json_body={"name": "shop-data"})
    f = ("services:\n  box:\n    image: base\n    command: [\"sleep\", \"1000\"]\n"
         "    volumes: [\"data:/data\"]\nvolumes:\n  data:\n    external: true\n    name: shop-data\n")
    try:
        for want in ("", "kept\n"):
            sid = create(c, f)["id"]
            sb = warren.Sandbox.connect(sid, client=c)
            try:
                wait_states(c, sid, {"box": ("running",)})
                assert run(sb, ["sh", "-c", "cat /data/x 2>/dev/null; true"], service="box") == want
                run(sb, ["sh", "-c", "echo kept > /data/x"], service="box")
            finally:
                sb.kill()
        r = c.request("POST", "/v1/sandboxes", json_body={"compose": f.replace("shop-data", "no-such")},
                      check=False)
        assert r.status == 404 and "no-such" in r.json()["message"], r.body
    finally:
        c.request("DELETE", "/v1/volumes/shop-data", check=False)
