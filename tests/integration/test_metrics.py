"""GET /metrics on the metrics listener (--metrics-listen): the Prometheus text format checked by
promtool, counters that move with the daemon's real work, and label sets without ids."""

import http.client
import re
import shutil
import socket
import subprocess
import time

import pytest

import warren
from conftest import Daemon, delete_all

PROMTOOL = shutil.which("promtool")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def mdaemon():
    port = free_port()
    d = Daemon("--metrics-listen", "127.0.0.1:%d" % port).start()
    d.metrics_port = port
    yield d
    try:
        delete_all(d)
    finally:
        d.cleanup()


def scrape_raw(port, method="GET", path="/metrics"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request(method, path)
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, r.getheader("Content-Type"), body


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """{(name, frozenset(labels)): value}, and {name: type} from the TYPE lines."""
    samples, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            types[name] = typ
            continue
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample line: %r" % line
        labels = frozenset(LABEL.findall(m.group(3) or ""))
        samples[(m.group(1), labels)] = float(m.group(4))
    return samples, types


def scrape(d):
    status, ctype, body = scrape_raw(d.metrics_port)
    assert status == 200
    assert ctype.startswith("text/plain; version=0.0.4")
    return body.decode()


def value(samples, name, **labels):
    want = frozenset(labels.items())
    return sum(v for (n, l), v in samples.items() if n == name and want <= l)


@pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian package prometheus) is missing")
def test_promtool_accepts_the_scrape(mdaemon):
    c = mdaemon.client()
    sb = warren.Sandbox.create(client=c, timeout=60)
    try:
        sb.commands.run("true")
    finally:
        sb.kill()
    text = scrape(mdaemon)
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=text.encode(), capture_output=True,
                       timeout=30)
    assert r.returncode == 0 and r.stdout + r.stderr == b"", (r.stdout + r.stderr).decode()


def test_metric_families_and_units(mdaemon):
    samples, types = parse(scrape(mdaemon))
    names = [n for n in types if n.startswith("warrend_")]
    assert len(names) >= 25, names
    for n, t in types.items():
        if t == "counter":
            assert n.endswith("_total"), n
    for n in ("warrend_build_info", "warrend_sandboxes", "warrend_http_requests_total",
              "warrend_http_request_duration_seconds", "warrend_sandbox_creates_total",
              "warrend_sandbox_create_duration_seconds", "warrend_exec_start_duration_seconds",
              "warrend_limit_rejections_total", "warrend_warm_sandboxes",
              "warrend_layer_store_bytes", "warrend_committed_memory_bytes",
              "warrend_capacity_memory_bytes", "warrend_pool_children", "warrend_http_connections",
              "process_resident_memory_bytes"):
        assert n in types, n
    assert types["warrend_http_request_duration_seconds"] == "histogram"
    assert value(samples, "warrend_build_info") == 1
    assert value(samples, "process_resident_memory_bytes") > 1 << 20
    assert value(samples, "warrend_capacity_memory_bytes") > 0
    # --pool (4 by default) fills with children cloned ahead of creates.
    deadline = time.monotonic() + 15
    while value(samples, "warrend_pool_children") == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
        samples, _ = parse(scrape(mdaemon))
    assert value(samples, "warrend_pool_children") > 0


def test_counters_move_with_creates_execs_and_errors(mdaemon):
    c = mdaemon.client()
    before, _ = parse(scrape(mdaemon))
    sb = warren.Sandbox.create(client=c, timeout=60)
    sb.commands.run("echo hi")
    sb.commands.run("true")
    mid, _ = parse(scrape(mdaemon))
    assert value(mid, "warrend_sandboxes", state="running") >= 1
    assert value(mid, "warrend_committed_memory_bytes") > 0
    sb.kill()
    # A failed create (no such template) and a 404.
    with pytest.raises(warren.WarrenError):
        warren.Sandbox.create(client=c, template="no-such-template")
    r = c.request("GET", "/v1/sandboxes/sb_nonexistent0000000", check=False)
    assert r.status == 404
    after, _ = parse(scrape(mdaemon))

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("warrend_sandbox_creates_total", result="ok") == 1
    assert delta("warrend_sandbox_creates_total", result="error") == 1
    assert delta("warrend_sandbox_create_failures_total", reason="not_found") == 1
    assert delta("warrend_sandbox_create_duration_seconds_count") == 1
    assert delta("warrend_execs_total", result="ok") == 2
    assert delta("warrend_exec_start_duration_seconds_count") == 2
    assert delta("warrend_sandbox_deletes_total") == 1
    assert delta("warrend_sandbox_exits_total", reason="deleted") == 1
    assert delta("warrend_http_requests_total", api="native", route="/v1/sandboxes", method="POST",
                 code="2xx") == 1
    assert delta("warrend_http_requests_total", route="/v1/sandboxes/{id}/exec",
                 code="2xx") == 2
    assert delta("warrend_http_requests_total", route="/v1/sandboxes/{id}", method="GET",
                 code="4xx") == 1
    assert delta("warrend_http_request_duration_seconds_count",
                 route="/v1/sandboxes/{id}/exec") == 2
    # Counters never go down.
    for (n, l), v in before.items():
        if n.endswith("_total") and (n, l) in after:
            assert after[(n, l)] >= v, (n, l)


def test_no_sandbox_id_in_any_label(mdaemon):
    c = mdaemon.client()
    ids = []
    for _ in range(2):
        sb = warren.Sandbox.create(client=c, timeout=60)
        ids.append(sb.sandbox_id)
        sb.commands.run("true")
        sb.files.write("/tmp/x", "y")
        sb.kill()
    text = scrape(mdaemon)
    for sid in ids:
        assert sid not in text
    samples, _ = parse(text)
    for (n, labels) in samples:
        for k, v in labels:
            assert k not in ("sandbox", "sandbox_id", "id", "request_id"), (n, k)
            assert not re.search(r"sb_[0-9a-z]{8,}", v), (n, k, v)


def test_metrics_listener_serves_only_metrics(mdaemon):
    status, _, body = scrape_raw(mdaemon.metrics_port, path="/v1/sandboxes")
    assert status == 404
    status, _, _ = scrape_raw(mdaemon.metrics_port, method="POST")
    assert status == 405
    # The API's own port has no /metrics.
    r = mdaemon.client().request("GET", "/metrics", check=False)
    assert r.status == 404


def test_metrics_listener_is_off_by_default(daemon):
    with open(daemon.dir + "/warrend.log") as f:
        assert "metrics: serving" not in f.read()
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    ports = {int(l.split()[3].rsplit(":", 1)[1]) for l in out.splitlines()
             if "pid=%d," % daemon.proc.pid in l}
    assert daemon.port in ports
    # None of the daemon's TCP listeners (the API, and its egress services) serves metrics.
    for port in ports:
        try:
            status, _, body = scrape_raw(port)
        except (OSError, http.client.HTTPException):
            continue
        assert not (status == 200 and b"warrend_" in body), port


def test_bad_metrics_listen_is_refused():
    for arg in ("nohostport", "127.0.0.1:99999", ":"):
        d = Daemon("--metrics-listen", arg)
        try:
            r = subprocess.run([d.binary, "--state-dir", d.state, "--socket", d.sock,
                                "--metrics-listen", arg], capture_output=True, text=True,
                               timeout=20)
            assert r.returncode == 2, (arg, r.returncode, r.stderr)
            assert "--metrics-listen" in r.stderr
        finally:
            shutil.rmtree(d.dir, ignore_errors=True)


def test_connections_gauge(mdaemon):
    before, _ = parse(scrape(mdaemon))
    conns = []
    for _ in range(3):
        c = http.client.HTTPConnection("127.0.0.1", mdaemon.port, timeout=10)
        c.request("GET", "/v1/health")
        c.getresponse().read()  # keep-alive: the connection stays open
        conns.append(c)
    try:
        during, _ = parse(scrape(mdaemon))
        assert value(during, "warrend_http_connections", kind="tcp") >= \
            value(before, "warrend_http_connections", kind="tcp") + 3
    finally:
        for c in conns:
            c.close()
