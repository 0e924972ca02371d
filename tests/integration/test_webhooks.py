"""Signed webhooks through a real daemon (core/webhooks.h): a team's lifecycle events POSTed to
receivers this test runs on loopback, each signature checked with the secret; retries with
backoff, the dead-letter record and its redelivery; teams kept apart; forbidden URLs refused at
registration; webhooks across a restart; and E2B's /events endpoints and webhook bodies."""

import base64
import hashlib
import hmac
import http.client
import http.server
import json
import subprocess
import threading
import time

import pytest

import warren
import warren.admin
from conftest import ENV, WARREN, Daemon, delete_all

ATTEMPTS = 3


class Receiver:
    """A loopback HTTP server recording every POST: /ok answers 204, /flaky fails each delivery
    FLAKY times with 500 then answers 200, /fail always answers 500."""

    FLAKY = 2

    def __init__(self):
        self.lock = threading.Lock()
        self.got = []
        self.tries = {}
        rx = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                path = self.path
                with rx.lock:
                    rx.got.append((path, {k.lower(): v for k, v in self.headers.items()}, body))
                    did = self.headers.get("Warren-Delivery-Id", "")
                    n = rx.tries[did] = rx.tries.get(did, 0) + 1
                if path.startswith("/hold"):
                    time.sleep(2)  # within the daemon's timeout (3 s)
                if path.startswith("/slow"):
                    time.sleep(5)  # beyond the daemon's timeout (3 s): pending a while
                if path.startswith("/fail") or (path.startswith("/flaky") and n <= rx.FLAKY):
                    self.send_response(500)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(204)
                self.end_headers()

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def posts(self, prefix):
        with self.lock:
            return [(h, b) for p, h, b in self.got if p.startswith(prefix)]

    def wait(self, prefix, pred, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.posts(prefix)
            if pred(got):
                return got
            time.sleep(0.05)
        raise AssertionError("receiver %s: %r" % (prefix, [json.loads(b) for _, b in self.posts(prefix)]))


def warren_sig_ok(secret, headers, body):
    parts = dict(p.split("=", 1) for p in headers["warren-signature"].split(","))
    want = hmac.new(secret.encode(), parts["t"].encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(parts["v1"], want) and abs(int(parts["t"]) - time.time()) < 300


def e2b_sig_ok(secret, headers, body):
    want = base64.b64encode(hashlib.sha256(secret.encode() + body).digest()).decode().rstrip("=")
    return headers.get("e2b-signature-version") == "v1" and hmac.compare_digest(
        headers["e2b-signature"], want)


@pytest.fixture(scope="module")
def rx():
    r = Receiver()
    yield r
    r.srv.shutdown()


@pytest.fixture(scope="module")
def d():
    dm = Daemon("--warm", "0", "--webhook-allow", "127.0.0.1", "--webhook-backoff-ms", "150",
                "--webhook-attempts", str(ATTEMPTS), "--webhook-timeout", "3").start()
    yield dm
    try:
        delete_all(dm)
    finally:
        dm.cleanup()


@pytest.fixture(scope="module")
def teams(d):
    admin = d.client()
    a = warren.admin.create_key("alpha", client=admin)
    b = warren.admin.create_key("beta", client=admin)
    return {"admin": admin, "alpha_key": a.key, "beta_key": b.key,
            "alpha": warren.Client(d.tcp_url, a.key), "beta": warren.Client(d.tcp_url, b.key)}


def e2b(d, key, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
    h = {"X-API-Key": key}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    raw = r.read()
    c.close()
    return r.status, (json.loads(raw) if raw else None)


@pytest.fixture(scope="module")
def hooks(d, teams, rx):
    """alpha's webhooks (every event to /ok, sandbox.created to /flaky and /fail, an E2B one to
    /e2b) and beta's to /beta, then alpha's session: create, pause, resume, kill."""
    a = teams["alpha"]
    h = {
        "ok": a.webhook_create(rx.url("/ok"), name="all"),
        "flaky": a.webhook_create(rx.url("/flaky"), events=["sandbox.created"],
                                  secret="flaky-secret-1"),
        "fail": a.webhook_create(rx.url("/fail"), events=["sandbox.created"]),
        "beta": teams["beta"].webhook_create(rx.url("/beta")),
        "slow": a.webhook_create(rx.url("/slow"), events=["sandbox.killed"]),
    }
    st, e2 = e2b(d, teams["alpha_key"], "POST", "/events/webhooks", {
        "name": "e2b hook", "url": rx.url("/e2b"), "enabled": True,
        "events": ["sandbox.lifecycle.created", "sandbox.lifecycle.paused",
                   "sandbox.lifecycle.resumed", "sandbox.lifecycle.killed"],
        "signatureSecret": "e2b-secret-xyz"})
    assert st == 201, e2
    h["e2b"] = e2
    sb = warren.Sandbox.create(client=a, timeout=120)
    sb.pause()
    sb.resume()
    sb.kill()
    h["sid"] = sb.sandbox_id
    return h


def test_session_is_delivered_signed(rx, hooks):
    ok = hooks["ok"]
    assert ok.secret and ok.secret.startswith("whsec_") and ok.format == "warren"
    got = rx.wait("/ok", lambda g: len(g) >= 5)
    assert len(got) == 5
    bodies = [json.loads(b) for _, b in got]
    assert [e["type"] for e in bodies] == [
        "sandbox.created", "sandbox.started", "sandbox.paused", "sandbox.resumed",
        "sandbox.killed"]
    assert all(e["sandbox_id"] == hooks["sid"] and e["team"] == "alpha" for e in bodies)
    for hd, b in got:
        assert warren_sig_ok(ok.secret, hd, b), hd
        assert e2b_sig_ok(ok.secret, hd, b)
        assert not warren_sig_ok("whsec_wrong", hd, b)
        assert hd["warren-webhook-id"] == hd["e2b-webhook-id"] == ok.id
        assert hd["content-type"] == "application/json"
    assert len({hd["warren-delivery-id"] for hd, _ in got}) == 5


def test_redeliver_in_flight_is_409(rx, teams, hooks):
    a = teams["alpha"]
    rx.wait("/slow", lambda g: len(g) >= 1)  # its receiver answers after the timeout
    (x,) = a.webhook_deliveries(hooks["slow"].id, state="pending")
    r = a.request("POST", "/v1/webhooks/%s/deliveries/%d/redeliver" % (hooks["slow"].id, x.id),
                  check=False)
    assert r.status == 409 and r.json()["code"] == "conflict", r.json()


def test_secret_not_listed(teams, hooks):
    ws = teams["alpha"].webhooks()
    assert {w.id for w in ws} == {hooks[k].id for k in ("ok", "flaky", "fail", "slow")} | {
        hooks["e2b"]["id"]}
    assert all(w.secret is None for w in ws)
    assert teams["alpha"].webhook(hooks["ok"].id).secret is None


def test_retries_with_backoff(rx, teams, hooks):
    got = rx.wait("/flaky", lambda g: len(g) >= Receiver.FLAKY + 1)
    assert len(got) == Receiver.FLAKY + 1
    assert [int(h["warren-attempt"]) for h, _ in got] == [1, 2, 3]
    assert len({h["warren-delivery-id"] for h, _ in got}) == 1
    assert all(warren_sig_ok("flaky-secret-1", h, b) for h, b in got)
    assert all(b == got[0][1] for _, b in got)  # the same bytes each time
    dl = teams["alpha"].webhook_deliveries(hooks["flaky"].id)
    assert [(x.state, x.attempts, x.last_status) for x in dl] == [("delivered", 3, 204)]


def test_dead_letter_listed_and_redelivered(rx, teams, hooks):
    a = teams["alpha"]
    rx.wait("/fail", lambda g: len(g) >= ATTEMPTS)
    deadline = time.monotonic() + 10
    while True:
        dead = a.webhook_deliveries(hooks["fail"].id, state="dead")
        if dead or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(dead) == 1, dead
    x = dead[0]
    assert x.attempts == ATTEMPTS and x.last_status == 500 and x.last_error == "HTTP 500"
    assert x.type == "sandbox.created" and x.body["sandbox_id"] == hooks["sid"]
    assert len(rx.posts("/fail")) == ATTEMPTS  # bounded: no attempt after the last
    # another team sees neither the webhook nor its deliveries
    with pytest.raises(warren.NotFoundError):
        teams["beta"].webhook_deliveries(hooks["fail"].id)
    a.webhook_redeliver(hooks["fail"].id, x.id)
    rx.wait("/fail", lambda g: len(g) >= 2 * ATTEMPTS)
    r = a.request("POST", "/v1/webhooks/%s/deliveries/999999/redeliver" % hooks["fail"].id,
                  check=False)
    assert r.status == 404 and r.json()["code"] == "not_found"


def test_teams_apart(rx, teams, hooks):
    rx.wait("/ok", lambda g: len(g) >= 5)
    assert rx.posts("/beta") == []
    assert [w.id for w in teams["beta"].webhooks()] == [hooks["beta"].id]
    r = teams["beta"].request("GET", "/v1/webhooks/" + hooks["ok"].id, check=False)
    assert r.status == 404
    r = teams["beta"].request("DELETE", "/v1/webhooks/" + hooks["ok"].id, check=False)
    assert r.status == 404


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/", "http://10.1.2.3/", "http://[::1]:80/",
    "http://localhost:8080/", "http://192.168.0.1/", "http://[::ffff:169.254.169.254]/",
    "ftp://example.com/", "http://user:pw@example.com/", "not a url", "http://metadata/"])
def test_forbidden_urls_refused(d, teams, url):
    r = teams["alpha"].request("POST", "/v1/webhooks", json_body={"url": url}, check=False)
    assert r.status == 400, (url, r.json())
    assert r.json()["code"] == "invalid" and r.json()["message"]
    st, body = e2b(d, teams["alpha_key"], "POST", "/events/webhooks",
                   {"name": "x", "url": url, "enabled": True, "events": [],
                    "signatureSecret": "secret-123"})
    assert st == 400, body


def test_bad_registrations(teams, rx):
    a = teams["alpha"]
    for body in ({"url": rx.url("/x"), "events": ["sandbox.exploded"]},
                 {"url": rx.url("/x"), "events": "sandbox.created"},
                 {"url": rx.url("/x"), "secret": "short"},
                 {"url": rx.url("/x"), "colour": "red"}, {}):
        r = a.request("POST", "/v1/webhooks", json_body=body, check=False)
        assert r.status == 400, (body, r.json())
    r = a.request("POST", "/v1/webhooks", json_body={"url": rx.url("/x"), "team": "beta"},
                  check=False)
    assert r.status == 403


def test_e2b_webhook_body_and_signature(d, rx, teams, hooks):
    got = rx.wait("/e2b", lambda g: len(g) >= 4)
    bodies = [json.loads(b) for _, b in got]
    assert [e["type"] for e in bodies] == [
        "sandbox.lifecycle.created", "sandbox.lifecycle.paused", "sandbox.lifecycle.resumed",
        "sandbox.lifecycle.killed"]
    for (hd, raw), e in zip(got, bodies):
        assert e2b_sig_ok("e2b-secret-xyz", hd, raw)
        assert hd["e2b-webhook-id"] == hooks["e2b"]["id"]
        assert set(e) >= {"version", "id", "type", "eventData", "sandboxBuildId",
                          "sandboxExecutionId", "sandboxId", "sandboxTeamId",
                          "sandboxTemplateId", "timestamp"}
        assert e["sandboxId"] == hooks["sid"] and e["sandboxTeamId"] == "alpha"
        assert e["sandboxTemplateId"] == "base" and e["version"] == "v1"
        assert e["timestamp"].endswith("Z")
    assert len({hd["e2b-delivery-id"] for hd, _ in got}) == 4


def test_e2b_webhook_crud(d, teams, rx, hooks):
    key = teams["alpha_key"]
    w = hooks["e2b"]
    assert set(w) == {"id", "teamID", "name", "createdAt", "enabled", "url", "events"}
    assert w["teamID"] == "alpha" and w["url"] == rx.url("/e2b") and w["enabled"] is True
    st, lst = e2b(d, key, "GET", "/events/webhooks")
    assert st == 200 and w["id"] in [x["id"] for x in lst]
    st, one = e2b(d, key, "GET", "/events/webhooks/" + w["id"])
    assert st == 200 and one == w
    st, up = e2b(d, key, "PATCH", "/events/webhooks/" + w["id"],
                 {"name": "renamed", "events": ["sandbox.lifecycle.killed"]})
    assert st == 200 and up["name"] == "renamed" and up["events"] == ["sandbox.lifecycle.killed"]
    st, _ = e2b(d, teams["beta_key"], "GET", "/events/webhooks/" + w["id"])
    assert st == 404
    st, body = e2b(d, key, "POST", "/events/webhooks", {"name": "n", "url": rx.url("/z"),
                                                        "enabled": True, "events": []})
    assert st == 400 and "signatureSecret" in body["message"]


def test_e2b_events_api(d, teams, hooks):
    key, sid = teams["alpha_key"], hooks["sid"]
    st, ev = e2b(d, key, "GET", "/events/sandboxes/" + sid)
    assert st == 200
    assert [e["type"] for e in ev] == [
        "sandbox.lifecycle.killed", "sandbox.lifecycle.resumed", "sandbox.lifecycle.paused",
        "sandbox.lifecycle.created"]  # newest first by default
    assert all(e["sandboxId"] == sid and e["sandboxTemplateId"] == "base" for e in ev)
    st, asc = e2b(d, key, "GET", "/events/sandboxes/%s?orderAsc=true&limit=2&offset=1" % sid)
    assert st == 200 and [e["type"] for e in asc] == [
        "sandbox.lifecycle.paused", "sandbox.lifecycle.resumed"]
    assert asc[0]["id"] == ev[2]["id"]
    st, typed = e2b(d, key, "GET", "/events/sandboxes?types=sandbox.lifecycle.paused"
                                   "&types=sandbox.lifecycle.killed")
    assert st == 200 and {e["type"] for e in typed} <= {
        "sandbox.lifecycle.paused", "sandbox.lifecycle.killed"} and typed
    st, team = e2b(d, key, "GET", "/events/sandboxes")
    assert st == 200 and 1 <= len(team) <= 10
    st, other = e2b(d, teams["beta_key"], "GET", "/events/sandboxes/" + sid)
    assert st == 200 and other == []
    for q in ("limit=0", "limit=101", "offset=-1", "orderAsc=maybe", "types=sandbox.created"):
        st, body = e2b(d, key, "GET", "/events/sandboxes?" + q)
        assert st == 400, (q, body)
        assert isinstance(body["code"], int)


def test_update(teams, rx):
    a = teams["alpha"]
    w = a.webhook_create(rx.url("/upd"), enabled=False)
    u = a.webhook_update(w.id, name="renamed", events=["sandbox.paused"])
    assert (u.name, u.events, u.enabled, u.secret) == ("renamed", ["sandbox.paused"], False, None)
    u = a.webhook_update(w.id, secret="a-new-secret-1")
    assert u.secret == "a-new-secret-1"
    r = a.request("PATCH", "/v1/webhooks/" + w.id, json_body={"url": "http://10.0.0.1/"},
                  check=False)
    assert r.status == 400
    assert a.webhook(w.id).url == rx.url("/upd")
    a.webhook_delete(w.id)
    assert rx.posts("/upd") == []


def test_e2b_webhook_delete(d, teams, rx):
    key = teams["alpha_key"]
    st, w = e2b(d, key, "POST", "/events/webhooks", {
        "name": "tmp", "url": rx.url("/tmp"), "enabled": False, "events": [],
        "signatureSecret": "tmp-secret-123"})
    assert st == 201 and w["enabled"] is False
    st, _ = e2b(d, key, "DELETE", "/events/webhooks/" + w["id"])
    assert st == 200
    st, _ = e2b(d, key, "GET", "/events/webhooks/" + w["id"])
    assert st == 404


def cli(d, key, *args):
    return subprocess.run([WARREN, "webhook", *args], capture_output=True, timeout=30, text=True,
                          env=dict(ENV, WARREN_API_URL=d.tcp_url, WARREN_API_KEY=key))


def test_cli(d, rx, teams, hooks):
    key = teams["beta_key"]
    r = cli(d, key, "add", rx.url("/cli"), "--event", "sandbox.killed", "--name", "c",
            "-o", "json")
    assert r.returncode == 0, r.stderr
    w = json.loads(r.stdout)
    assert w["secret"].startswith("whsec_") and w["events"] == ["sandbox.killed"]
    r = cli(d, key, "list")
    assert r.returncode == 0 and w["id"] in r.stdout and rx.url("/cli") in r.stdout
    r = cli(d, key, "add", "http://169.254.169.254/")
    assert r.returncode != 0 and "operator" in r.stderr
    r = cli(d, teams["alpha_key"], "deliveries", hooks["fail"].id, "--state", "dead")
    assert r.returncode == 0 and "dead" in r.stdout and "HTTP 500" in r.stdout, r.stdout
    r = cli(d, key, "deliveries", hooks["fail"].id)
    assert r.returncode != 0  # another team's
    r = cli(d, key, "rm", w["id"])
    assert r.returncode == 0, r.stderr
    assert w["id"] not in cli(d, key, "list", "-o", "json").stdout
    assert cli(d, key, "frobnicate").returncode == 2


def test_survive_restart(d, rx, teams, hooks):
    hold = teams["beta"].webhook_create(rx.url("/hold"), events=["sandbox.created"])
    sb = warren.Sandbox.create(client=teams["beta"], timeout=60)
    sb.kill()
    # the daemon stops while the attempt is in flight: after the restart it is sent again
    first = rx.wait("/hold", lambda g: len(g) >= 1)
    before = {w.id for w in teams["alpha"].webhooks()}
    dead = teams["alpha"].webhook_deliveries(hooks["fail"].id, state="dead")
    d.stop()
    d.start()
    a = warren.Client(d.tcp_url, teams["alpha_key"])
    again = rx.wait("/hold", lambda g: len(g) >= 2)
    assert again[1][0]["warren-delivery-id"] == first[0][0]["warren-delivery-id"]
    assert again[1][1] == first[0][1]
    b = warren.Client(d.tcp_url, teams["beta_key"])
    deadline = time.monotonic() + 10
    while (x := b.webhook_deliveries(hold.id))[0].state != "delivered":
        assert time.monotonic() < deadline, x
        time.sleep(0.1)
    assert x[0].attempts == 1  # the attempt cut short by the stop is not counted
    assert {w.id for w in a.webhooks()} == before
    assert [x.id for x in a.webhook_deliveries(hooks["fail"].id, state="dead")] == [
        x.id for x in dead]
    n = len(rx.posts("/ok"))
    sb = warren.Sandbox.create(client=a, timeout=60)
    sb.kill()
    got = rx.wait("/ok", lambda g: len(g) >= n + 3)
    new = [json.loads(b) for _, b in got[n:]]
    assert [e["type"] for e in new] == ["sandbox.created", "sandbox.started", "sandbox.killed"]
    assert all(warren_sig_ok(hooks["ok"].secret, h, b) for h, b in got[n:])
    a.webhook_delete(hooks["ok"].id)
    assert hooks["ok"].id not in {w.id for w in a.webhooks()}
