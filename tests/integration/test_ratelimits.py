"""Per-team limits, host capacity and the headers on every response, through the real daemon.

The buckets' clock is a file the test writes (--test-clock, a WR_TESTING build's flag): refill is
driven by moving that clock, never by sleeping."""

import json
import os
import re
import socket

import pytest

from conftest import LIVE_DAEMONS, Daemon, net_cleanup, warren

# ---- helpers -----------------------------------------------------------------------------------


def raw(daemon, method, path, body=b"", key=None, headers=None, tcp=True):
    """One HTTP/1.1 request; returns (status, headers with lowercase names, body bytes)."""
    if tcp:
        s = socket.create_connection(("127.0.0.1", daemon.port))
    else:
        s = socket.socket(socket.AF_UNIX)
        s.connect(daemon.sock)
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    h = {"Host": "x", "Content-Length": str(len(body)), "Connection": "close"}
    if key:
        h["Authorization"] = "Bearer " + key
    h.update(headers or {})
    req = "%s %s HTTP/1.1\r\n" % (method, path) + "".join("%s: %s\r\n" % kv for kv in h.items())
    s.sendall(req.encode() + b"\r\n" + body)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for l in lines[1:]:
        k, v = l.split(":", 1)
        assert k.lower() not in hdrs, "header %s sent twice" % k
        hdrs[k.lower()] = v.strip()
    if hdrs.get("transfer-encoding") == "chunked":
        out = b""
        while rest:
            n, _, rest = rest.partition(b"\r\n")
            n = int(n, 16)
            if n == 0:
                break
            out += rest[:n]
            rest = rest[n + 2:]
        rest = out
    return status, hdrs, rest


# A structured-field List of Items whose bare item is a String, with parameters whose values
# are Integers or Strings (RFC 9651 3.1, 3.1.2): what draft-ietf-httpapi-ratelimit-headers uses.
_KEY = r"[a-z*][a-z0-9_\-.*]*"
_PARAM = r";\s*(%s)=(-?\d{1,15}|\"[^\"\\]*\")" % _KEY
_ITEM = r"\"([^\"\\]*)\"((?:%s)*)" % _PARAM


def sf_list(value):
    """Parse value as an SF List of String items with parameters: {name: {param: value}}."""
    out = {}
    pos = 0
    while True:
        m = re.compile(_ITEM).match(value, pos)
        assert m, "not a structured-field list item at %d: %r" % (pos, value)
        params = {}
        for k, v in re.findall(_PARAM, m.group(2)):
            assert k not in params
            params[k] = v.strip('"') if v.startswith('"') else int(v)
        assert m.group(1) not in out
        out[m.group(1)] = params
        pos = m.end()
        if pos == len(value):
            return out
        sep = re.compile(r"\s*,\s*").match(value, pos)
        assert sep and sep.end() < len(value), "bad list separator in %r" % value
        pos = sep.end()


def limits_of(h):
    """(policy, current) of a response's RateLimit-Policy and RateLimit fields, checked."""
    pol = sf_list(h["ratelimit-policy"])
    cur = sf_list(h["ratelimit"])
    assert set(pol) == set(cur)
    for name, p in pol.items():
        assert isinstance(p["q"], int) and p["q"] > 0 and p["w"] >= 1
        assert 0 <= cur[name]["r"] <= p["q"]
    return pol, cur


def assert_base_headers(h, region="local"):
    assert h["warren-region"] == region
    assert re.fullmatch(r"[!-~]{1,128}", h["x-request-id"])


def team_key(daemon, team):
    st, _, body = raw(daemon, "POST", "/v1/keys", {"team": team, "name": "t"}, tcp=False)
    assert st == 201, body
    return json.loads(body)["key"]


class Clock:
    """The daemon's bucket clock: milliseconds in a file it reads at each check."""

    def __init__(self, d):
        self.path = os.path.join(d, "clock")
        self.ms = 1000000
        self.set(self.ms)

    def set(self, ms):
        self.ms = ms
        with open(self.path + ".tmp", "w") as f:
            f.write(str(ms))
        os.rename(self.path + ".tmp", self.path)

    def advance(self, s):
        self.set(self.ms + int(s * 1000))


def limited(clock_dir, *args):
    clock = Clock(clock_dir)
    return clock, Daemon("--test-clock", clock.path, *args)


def create(daemon, key, **body):
    body.setdefault("timeout", 120)
    return raw(daemon, "POST", "/v1/sandboxes", body, key=key)


def assert_limit(st, h, body, status, reason, policy=None):
    assert st == status, body
    j = json.loads(body)
    assert j["code"] == "limit" and j["reason"] == reason, j
    if policy is not None:
        assert j["policy"] == policy, j
    ra = int(h["retry-after"])
    assert ra >= 1 and j["retry_after"] == ra
    return j, ra


def delete_all(d):
    """Delete the sandboxes of every team (the admin's list with all=1)."""
    st, _, body = raw(d, "GET", "/v1/sandboxes?all=1&limit=1000", tcp=False)
    assert st == 200, body
    for sb in json.loads(body)["sandboxes"]:
        raw(d, "DELETE", "/v1/sandboxes/" + sb["id"], tcp=False)


@pytest.fixture
def tmp_dir(tmp_path):
    return str(tmp_path)


# ---- the header set --------------------------------------------------------------------------


def test_headers_on_success_and_every_error(tmp_dir):
    clock, d = limited(tmp_dir, "--region", "eu-test-1", "--team-rate-requests", "10/s:5")
    d.start()
    try:
        key = team_key(d, "hdr")
        st, h, _ = raw(d, "GET", "/v1/version", key=key)
        assert st == 200
        assert_base_headers(h, "eu-test-1")
        pol, cur = limits_of(h)
        assert pol["requests"] == {"q": 5, "w": 1}
        assert pol["creates"] == {"q": 20, "w": 4}
        assert pol["bytes"]["qu"] == "content-bytes"
        assert cur["requests"] == {"r": 4, "t": 1}
        assert cur["creates"] == {"r": 20}  # full: no t
        # The client's request id is echoed.
        st, h, _ = raw(d, "GET", "/v1/version", key=key, headers={"X-Request-Id": "my-id-1"})
        assert h["x-request-id"] == "my-id-1"
        clock.advance(10)
        # 404 of the router, 400 of a handler, 403, 405: the same fields.
        for method, path, body, status in [
            ("GET", "/v1/no/such/route", b"", 404),
            ("GET", "/v1/sandboxes/nosuchsandbox", b"", 404),
            ("POST", "/v1/sandboxes", b"{not json", 400),
            ("POST", "/v1/keys", {"team": "other", "admin": True}, 403),
            ("PATCH", "/v1/sandboxes", b"", 405),
        ]:
            st, h, b = raw(d, method, path, body, key=key)
            assert st == status, (path, b)
            assert_base_headers(h, "eu-test-1")
            limits_of(h)
            assert "code" in json.loads(b)
        # 401: no team is known, so no limits are told; region and request id still are.
        for k in ("wr_" + "0" * 64, None):
            st, h, _ = raw(d, "GET", "/v1/sandboxes", key=k)
            assert st == 401
            assert_base_headers(h, "eu-test-1")
            assert "ratelimit" not in h and "ratelimit-policy" not in h
        # A public route and a path outside /v1.
        st, h, _ = raw(d, "GET", "/v1/health")
        assert st == 200
        assert_base_headers(h, "eu-test-1")
        st, h, _ = raw(d, "GET", "/nothing/here", key=key)
        assert_base_headers(h, "eu-test-1")
        # A server-made error (the request head too large): region and request id.
        st, h, _ = raw(d, "GET", "/v1/version", key=key, headers={"X-Big": "a" * 70000})
        assert st == 431
        assert_base_headers(h, "eu-test-1")
        # 429 carries them too, with r=0 and t equal to Retry-After.
        clock.advance(10)
        for _ in range(5):
            assert raw(d, "GET", "/v1/version", key=key)[0] == 200
        st, h, b = raw(d, "GET", "/v1/version", key=key)
        _, ra = assert_limit(st, h, b, 429, "rate", "requests")
        assert_base_headers(h, "eu-test-1")
        _, cur = limits_of(h)
        assert cur["requests"]["r"] == 0 and cur["requests"]["t"] == ra
    finally:
        d.stop()
        d.cleanup()


def test_region_default_and_bad_flags(tmp_dir):
    d = Daemon()
    d.start()
    try:
        st, h, _ = raw(d, "GET", "/v1/health")
        assert h["warren-region"] == "local"
    finally:
        d.stop()
        d.cleanup()
    for args in (["--region", "a b"], ["--team-rate-requests", "10"], ["--team-rate-creates", "x/s:1"],
                 ["--team-rate-requests", "1/s:0"], ["--size", "tiny"], ["--size", "tiny=0:1G"],
                 ["--limits", "no"], ["--audit", "1"], ["--metering", ""]):
        bad = Daemon(*args)
        import subprocess
        p = subprocess.run([bad.binary, "--state-dir", bad.state, *args], capture_output=True, timeout=10)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.decode().count("\n") == 1 and "warrend:" in p.stderr.decode()


def test_limits_audit_and_metering_off(tmp_dir):
    """The switches the benchmark compares against (docs/benchmarks.md): with --limits off a
    team's bucket of 1 request and its quota of 1 sandbox are not checked and no RateLimit
    header is sent; with --audit off and --metering off nothing is recorded and their reads
    answer 501, not an empty list."""
    _, d = limited(tmp_dir, "--limits", "off", "--audit", "off", "--metering", "off",
                   "--team-rate-requests", "1/s:1", "--team-max-sandboxes", "1")
    d.start()
    try:
        key = team_key(d, "off")
        for _ in range(5):
            st, h, _ = raw(d, "GET", "/v1/sandboxes", key=key)
            assert st == 200
            assert_base_headers(h)
            assert "ratelimit" not in h and "ratelimit-policy" not in h
        ids = []
        for _ in range(2):
            st, _, body = create(d, key)
            assert st == 201, body
            ids.append(json.loads(body)["id"])
        for path in ("/v1/audit", "/v1/usage"):
            st, _, body = raw(d, "GET", path, key=key)
            assert st == 501 and json.loads(body)["code"] == "unsupported", (path, body)
        for sid in ids:
            assert raw(d, "DELETE", "/v1/sandboxes/" + sid, key=key)[0] == 204
        d.stop()
        import sqlite3
        c = sqlite3.connect(os.path.join(d.state, "warren.db"))
        assert c.execute("SELECT count(*) FROM audit").fetchone()[0] == 0
        assert c.execute("SELECT count(*) FROM usage_intervals").fetchone()[0] == 0
        c.close()
    finally:
        d.cleanup()


# ---- buckets -----------------------------------------------------------------------------------


def test_request_bucket_refills_with_the_clock_and_teams_are_apart(tmp_dir):
    clock, d = limited(tmp_dir, "--team-rate-requests", "2/s:3")
    d.start()
    try:
        a, b = team_key(d, "team-a"), team_key(d, "team-b")
        for i in range(3):
            st, h, _ = raw(d, "GET", "/v1/sandboxes", key=a)
            assert st == 200
            assert limits_of(h)[1]["requests"]["r"] == 2 - i
        st, h, body = raw(d, "GET", "/v1/sandboxes", key=a)
        j, ra = assert_limit(st, h, body, 429, "rate", "requests")
        assert ra == 1  # half a second to the next token, rounded up
        # Another team is untouched by a's exhaustion.
        st, h, _ = raw(d, "GET", "/v1/sandboxes", key=b)
        assert st == 200 and limits_of(h)[1]["requests"]["r"] == 2
        # Half a second later exactly one more passes.
        clock.advance(0.5)
        assert raw(d, "GET", "/v1/sandboxes", key=a)[0] == 200
        assert raw(d, "GET", "/v1/sandboxes", key=a)[0] == 429
        # The bucket refills to its burst and no more.
        clock.advance(100)
        codes = [raw(d, "GET", "/v1/sandboxes", key=a)[0] for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        # The admin is not limited.
        for _ in range(5):
            assert raw(d, "GET", "/v1/sandboxes", tcp=False)[0] == 200
    finally:
        d.stop()
        d.cleanup()


def test_request_bucket_steady_rate(tmp_dir):
    """Over 30 simulated seconds at 3 requests per step of 0.25 s (12/s offered), a 4/s bucket
    of burst 2 lets in its burst plus 4 per second, within one."""
    clock, d = limited(tmp_dir, "--team-rate-requests", "4/s:2")
    d.start()
    try:
        key = team_key(d, "steady")
        s = socket.create_connection(("127.0.0.1", d.port))
        f = s.makefile("rb")
        passed = 0
        for _ in range(120):
            for _ in range(3):
                s.sendall(b"GET /v1/version HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                          + key.encode() + b"\r\n\r\n")
                status = int(f.readline().split()[1])
                n = 0
                while True:
                    line = f.readline()
                    if line == b"\r\n":
                        break
                    if line.lower().startswith(b"content-length:"):
                        n = int(line.split(b":")[1])
                f.read(n)
                assert status in (200, 429)
                passed += status == 200
            clock.advance(0.25)
        s.close()
        assert abs(passed - (2 + 4 * 30)) <= 1, passed
    finally:
        d.stop()
        d.cleanup()


def test_creates_bucket_fork_of_n_costs_n(tmp_dir):
    clock, d = limited(tmp_dir, "--team-rate-creates", "1/s:4")
    d.start()
    try:
        key = team_key(d, "forker")
        st, h, body = create(d, key)
        assert st == 201, body
        sid = json.loads(body)["id"]
        assert limits_of(h)[1]["creates"]["r"] == 4  # the fields are those before the create
        st, h, body = raw(d, "GET", "/v1/version", key=key)
        assert limits_of(h)[1]["creates"]["r"] == 3
        # More than the burst can never pass.
        st, h, body = raw(d, "POST", "/v1/sandboxes/%s/fork" % sid, {"count": 5}, key=key)
        j, _ = assert_limit(st, h, body, 429, "rate", "creates")
        assert "never" in j["message"]
        st, _, body = raw(d, "POST", "/v1/sandboxes/%s/fork" % sid, {"count": 3}, key=key)
        assert st == 201, body
        assert len(json.loads(body)["sandboxes"]) == 3
        st, h, body = raw(d, "GET", "/v1/version", key=key)
        assert limits_of(h)[1]["creates"]["r"] == 0
        st, h, body = create(d, key)
        assert_limit(st, h, body, 429, "rate", "creates")
        st, h, body = raw(d, "POST", "/v1/sandboxes/%s/fork" % sid, {"count": 1}, key=key)
        assert_limit(st, h, body, 429, "rate", "creates")
        clock.advance(2)
        st, _, body = raw(d, "POST", "/v1/sandboxes/%s/fork" % sid, {"count": 2}, key=key)
        assert st == 201, body
        # A create that is refused as invalid costs nothing.
        clock.advance(100)
        for _ in range(6):
            assert create(d, key, cpus="x")[0] == 400
        st, h, _ = raw(d, "GET", "/v1/version", key=key)
        assert limits_of(h)[1]["creates"]["r"] == 4
    finally:
        delete_all(d)
        d.stop()
        d.cleanup()


def test_bytes_bucket_counts_file_transfers(tmp_dir):
    clock, d = limited(tmp_dir, "--team-rate-bytes", "1K/s:8K")
    d.start()
    try:
        key = team_key(d, "mover")
        st, _, body = create(d, key)
        sid = json.loads(body)["id"]
        path = "/v1/sandboxes/%s/files?path=/tmp/f" % sid
        st, h, body = raw(d, "PUT", path, b"x" * 6000, key=key)
        assert st in (200, 201, 204), body
        st, h, body = raw(d, "GET", "/v1/version", key=key)
        left = limits_of(h)[1]["bytes"]["r"]
        assert 8192 - 6000 - 1 <= left <= 8192 - 6000
        st, _, body = raw(d, "GET", path, key=key)
        assert st == 200 and body == b"x" * 6000
        # The download went below empty: the next transfer waits.
        st, h, body = raw(d, "GET", path, key=key)
        _, ra = assert_limit(st, h, body, 429, "rate", "bytes")
        assert ra >= 3
        # Requests that move no file bytes still pass.
        assert raw(d, "GET", "/v1/sandboxes/" + sid, key=key)[0] == 200
        clock.advance(ra)
        st, _, body = raw(d, "GET", path, key=key)
        assert st == 200 and len(body) == 6000
    finally:
        delete_all(d)
        d.stop()
        d.cleanup()


# ---- quotas and capacity -------------------------------------------------------------------


def test_quota_429_before_capacity_503(tmp_dir):
    clock, d = limited(tmp_dir, "--max-sandboxes", "3", "--team-max-sandboxes", "2")
    d.start()
    try:
        a, b = team_key(d, "qa"), team_key(d, "qb")
        assert create(d, a)[0] == 201
        assert create(d, a)[0] == 201
        st, h, body = create(d, a)
        j, _ = assert_limit(st, h, body, 429, "quota", "sandboxes")
        assert "2" in j["message"]
        limits_of(h)
        assert create(d, b)[0] == 201  # b's quota is its own; the host is now full
        st, h, body = create(d, b)
        assert_limit(st, h, body, 503, "capacity")
        assert_base_headers(h)
        limits_of(h)
        # a is over its own quota AND the host is full: 429 quota, what a can act on.
        st, h, body = create(d, a)
        assert_limit(st, h, body, 429, "quota")
        # E2B's create on a full host: 503 capacity too, E2B's numeric code.
        st, h, body = raw(d, "POST", "/sandboxes", {"templateID": "base"}, headers={"X-API-Key": b})
        assert st == 503, body
        j = json.loads(body)
        assert j["code"] == 503 and j["reason"] == "capacity" and int(h["retry-after"]) >= 1
    finally:
        delete_all(d)
        d.stop()
        d.cleanup()


def test_resume_from_disk_counts_against_the_quota(tmp_dir):
    """A sandbox paused to disk leaves its team's quota; resumed (native or E2B), it comes back
    into it, so a resume over the quota is 429 quota and the sandbox stays paused."""
    _, d = limited(tmp_dir, "--team-max-sandboxes", "1")
    d.start()
    try:
        key = team_key(d, "disk")
        st, _, body = create(d, key)
        assert st == 201, body
        a = json.loads(body)["id"]
        st, _, body = raw(d, "POST", "/v1/sandboxes/%s/pause" % a, {"mode": "disk"}, key=key)
        assert st == 200, body
        st, _, body = create(d, key)
        assert st == 201, body
        b = json.loads(body)["id"]
        st, h, body = raw(d, "POST", "/v1/sandboxes/%s/resume" % a, {}, key=key)
        assert_limit(st, h, body, 429, "quota", "sandboxes")
        st, h, body = raw(d, "POST", "/sandboxes/%s/resume" % a, {}, headers={"X-API-Key": key})
        assert st == 429 and json.loads(body)["reason"] == "quota", body
        st, _, body = raw(d, "GET", "/v1/sandboxes/" + a, key=key)
        assert json.loads(body)["state"] == "paused", body
        assert raw(d, "DELETE", "/v1/sandboxes/" + b, key=key)[0] == 204
        st, _, body = raw(d, "POST", "/v1/sandboxes/%s/resume" % a, {}, key=key)
        assert st == 200 and json.loads(body)["state"] == "running", body
    finally:
        delete_all(d)
        d.stop()
        d.cleanup()


def test_memory_quota(tmp_dir):
    clock, d = limited(tmp_dir, "--team-max-memory", "768M")
    d.start()
    try:
        key = team_key(d, "mem")
        assert create(d, key, memory_mb=512)[0] == 201
        st, h, body = create(d, key, memory_mb=512)
        j, _ = assert_limit(st, h, body, 429, "quota", "memory")
        assert create(d, key, memory_mb=256)[0] == 201
        # Another team has its own quota.
        assert create(d, team_key(d, "mem2"), memory_mb=512)[0] == 201
    finally:
        delete_all(d)
        d.stop()
        d.cleanup()


# ---- per-team overrides ------------------------------------------------------------------------


def test_admin_overrides_per_team_survive_a_restart(tmp_dir):
    clock, d = limited(tmp_dir, "--team-rate-requests", "100/s:200")
    d.start()
    try:
        a, b = team_key(d, "ov-a"), team_key(d, "ov-b")
        over = {"requests": {"rate": 1, "burst": 2}, "max_sandboxes": 1}
        st, _, body = raw(d, "PUT", "/v1/teams/ov-a/limits", over, key=a)
        assert st == 403, body
        st, h, body = raw(d, "PUT", "/v1/teams/ov-a/limits", over, key=d.admin_key)
        assert st == 200, body
        j = json.loads(body)
        assert j["requests"] == {"rate": 1.0, "burst": 2} and j["max_sandboxes"] == 1
        assert j["creates"]["burst"] == 20 and j["overrides"] == over
        for bad in ({"requests": {"rate": 1}}, {"nope": 1}, {"max_sandboxes": -1},
                    {"bytes": {"rate": "x", "burst": 1}}):
            st, _, body = raw(d, "PUT", "/v1/teams/ov-a/limits", bad, key=d.admin_key)
            assert st == 400 and json.loads(body)["code"] == "invalid", (bad, body)
        st, h, _ = raw(d, "GET", "/v1/teams/ov-a/limits", key=a)
        assert st == 200 and limits_of(h)[0]["requests"] == {"q": 2, "w": 2}
        assert raw(d, "GET", "/v1/version", key=a)[0] == 429
        st, h, _ = raw(d, "GET", "/v1/version", key=b)
        assert st == 200 and limits_of(h)[0]["requests"]["q"] == 200
        assert raw(d, "GET", "/v1/teams/ov-a/limits", key=b)[0] == 403
        assert create(d, b)[0] == 201 and create(d, b)[0] == 201
    finally:
        delete_all(d)
        d.stop()
        LIVE_DAEMONS.discard(d)
        net_cleanup(d.table)  # its state stays for the next daemon
    d2 = Daemon("--test-clock", clock.path, state_dir=d.dir)
    d2.start()
    try:
        clock.advance(100)
        st, h, body = raw(d2, "GET", "/v1/teams/ov-a/limits", tcp=False)
        assert st == 200 and json.loads(body)["requests"]["burst"] == 2
        st, h, _ = raw(d2, "GET", "/v1/version", key=a)
        assert limits_of(h)[0]["requests"] == {"q": 2, "w": 2}
        assert create(d2, a)[0] == 201
        clock.advance(100)
        st, h, body = create(d2, a)
        assert_limit(st, h, body, 429, "quota", "sandboxes")
        assert raw(d2, "DELETE", "/v1/teams/ov-a/limits", tcp=False)[0] == 204
        st, h, _ = raw(d2, "GET", "/v1/version", key=a)
        assert limits_of(h)[0]["requests"]["q"] == 200
    finally:
        delete_all(d2)
        d2.stop()
        d2.cleanup()


# ---- E2B ---------------------------------------------------------------------------------------


def test_cli_and_sdk_show_and_set_team_limits(tmp_dir):
    """`warren limits` and the Python SDK's team_limits/set_team_limits/reset_team_limits: a
    team's key reads its own (named by GET /v1/version), an admin merges flags into the
    overrides, a team's key may not, bad values are refused before any request."""
    import subprocess
    import warren as sdk
    from conftest import ENV, WARREN
    _, d = limited(tmp_dir, "--team-rate-requests", "100/s:200")
    d.start()

    def cli(key, *args):
        return subprocess.run([WARREN, "limits", *args], capture_output=True, timeout=60,
                              env=dict(ENV, WARREN_API_URL=d.tcp_url, WARREN_API_KEY=key))
    try:
        key = team_key(d, "cli-t")
        r = cli(d.admin_key, "cli-t", "--requests", "1000/s:1500", "--max-memory", "1G")
        assert r.returncode == 0, r.stderr
        r = cli(d.admin_key, "cli-t", "--max-sandboxes", "4", "--json")
        j = json.loads(r.stdout)
        assert j["requests"] == {"rate": 1000.0, "burst": 1500} and j["max_sandboxes"] == 4
        assert j["max_memory_mb"] == 1024 and sorted(j["overrides"]) == [
            "max_memory_mb", "max_sandboxes", "requests"]
        r = cli(key)  # the key's own team, from /v1/version
        out = r.stdout.decode()
        assert r.returncode == 0 and "team           cli-t" in out, (out, r.stderr)
        assert "1000/s, burst 1500" in out and "1024 MiB" in out and "bytes          64" not in out
        r = cli(key, "--max-sandboxes", "9")
        assert r.returncode == 1 and len(r.stderr.splitlines()) == 1 and b"admin" in r.stderr
        for bad in (["--requests", "fast"], ["--max-memory", "lots"], ["a", "b"], ["a b"]):
            r = cli(d.admin_key, *bad)
            assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, (bad, r.stderr)
        # the SDK
        c, admin = d.client(key=key, tcp=True), d.client(key=d.admin_key, tcp=True)
        try:
            assert c.version().team == "cli-t" and not c.version().admin
            assert admin.version().admin
            assert c.team_limits()["max_sandboxes"] == 4
            got = admin.set_team_limits("cli-t", requests=None, creates={"rate": 1, "burst": 1})
            assert got["requests"]["rate"] == 0 and got["creates"] == {"rate": 1.0, "burst": 1}
            assert got["max_sandboxes"] == 4  # kept
            with pytest.raises(sdk.PermissionDeniedError):
                c.set_team_limits("cli-t", max_sandboxes=9)
            with pytest.raises(TypeError):
                admin.set_team_limits("cli-t", nope=1)
            admin.reset_team_limits("cli-t")
            assert c.team_limits()["overrides"] == {}
        finally:
            c.close()
            admin.close()
        r = cli(key)
        assert r.returncode == 0 and "none (the daemon's defaults)" in r.stdout.decode()
    finally:
        d.stop()
        d.cleanup()


def test_e2b_routes_send_the_legacy_fields(tmp_dir):
    clock, d = limited(tmp_dir, "--team-rate-requests", "1/s:3")
    d.start()
    try:
        key = team_key(d, "e2b")
        st, h, body = raw(d, "GET", "/sandboxes", headers={"X-API-Key": key})
        assert st == 200, body
        assert_base_headers(h)
        limits_of(h)
        assert (h["ratelimit-limit"], h["ratelimit-remaining"], h["ratelimit-reset"]) == ("3", "2", "1")
        raw(d, "GET", "/sandboxes", headers={"X-API-Key": key})
        st, h, body = raw(d, "GET", "/sandboxes", headers={"X-API-Key": key})
        assert (h["ratelimit-remaining"], h["ratelimit-reset"]) == ("0", "3")
        st, h, body = raw(d, "GET", "/sandboxes", headers={"X-API-Key": key})
        assert st == 429 and json.loads(body) == {
            "code": 429, "message": "Rate limit exceeded", "reason": "rate", "policy": "requests",
            "retry_after": 1}
        assert h["retry-after"] == "1" and h["ratelimit-remaining"] == "0"
        # 404 of an E2B route carries them too; 401 only region and request id.
        clock.advance(10)
        st, h, _ = raw(d, "GET", "/sandboxes/nosuch", headers={"X-API-Key": key})
        assert st == 404 and "ratelimit-limit" in h
        st, h, _ = raw(d, "GET", "/sandboxes", headers={"X-API-Key": "wr_" + "0" * 64})
        assert st == 401 and "ratelimit-limit" not in h
        assert_base_headers(h)
        # The native routes do not send the legacy fields.
        st, h, _ = raw(d, "GET", "/v1/version", key=key)
        assert "ratelimit-limit" not in h
    finally:
        d.stop()
        d.cleanup()


# ---- size presets ------------------------------------------------------------------------------


def test_size_presets(tmp_dir):
    d = Daemon("--size", "medium=1.5:768M", "--size", "xl=3:1G")
    d.start()
    try:
        key = team_key(d, "sizes")
        st, _, body = create(d, key, size="small")
        assert st == 201, body
        j = json.loads(body)
        assert (j["cpus"], j["memory_mb"]) == (1, 512)
        st, _, body = create(d, key, size="medium")
        j = json.loads(body)
        assert (j["cpus"], j["memory_mb"]) == (1.5, 768)
        st, _, body = create(d, key, size="large", memory_mb=1024)
        j = json.loads(body)
        assert (j["cpus"], j["memory_mb"]) == (4, 1024)  # what the request names wins
        st, _, body = create(d, key, size="xl", cpus=0.5)
        j = json.loads(body)
        assert (j["cpus"], j["memory_mb"]) == (0.5, 1024)
        st, _, body = create(d, key, size="huge")
        assert st == 400 and "small, medium, large, xl" in json.loads(body)["message"]
        assert create(d, key, size=3)[0] == 400
        env = {"WARREN_API_URL": d.tcp_url, "WARREN_API_KEY": key}
        p = warren("create", "--size", "xl", "--timeout", "60", "-o", "json", env=env)
        assert p.returncode == 0, p.stderr
        j = json.loads(p.stdout)
        assert (j["cpus"], j["memory_mb"]) == (3, 1024)
        p = warren("create", "--size", "nope", env=env)
        assert p.returncode != 0 and b"small, medium" in p.stderr
        assert p.stderr.decode().strip().count("\n") == 0
    finally:
        delete_all(d)
        d.stop()
        d.cleanup()


def test_python_sdk_size_and_rate_limit_error(tmp_dir):
    import warren as sdk
    clock, d = limited(tmp_dir, "--team-max-sandboxes", "1")
    d.start()
    try:
        key = team_key(d, "sdk")
        c = d.client(key=key, tcp=True)
        sb = sdk.Sandbox.create(client=c, size="medium", timeout=60)
        assert sb.info is not None and (sb.info.cpus, sb.info.memory_mb) == (2, 2048)
        with pytest.raises(sdk.RateLimitError) as e:
            sdk.Sandbox.create(client=c, timeout=60)
        assert e.value.status == 429 and e.value.reason == "quota"
        assert e.value.policy == "sandboxes" and e.value.retry_after >= 1
        c.close()
    finally:
        delete_all(d)
        d.stop()
        d.cleanup()
