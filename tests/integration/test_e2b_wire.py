"""The E2B-compatible API on the wire (docs/e2b.md): the control plane's error bodies, envd's
Connect protocol (envelopes, end-stream frames, error codes), access tokens, routing by header and
by Host, and /files. The SDKs themselves run in tests/compat; these are the edges they never
reach. The test image (busybox) is enough here."""

import base64
import gzip
import hashlib
import http.client
import json
import struct
import time
import urllib.parse
import zlib

import pytest

from conftest import SANITIZED

BACKENDS = ("ns", "gvisor")  # every test on the module's daemon runs on both (conftest.py)


def req(daemon, method, path, body=None, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=30)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
    finally:
        c.close()


def api(daemon, method, path, obj=None, key=None):
    h = {"X-API-KEY": key or daemon.admin_key}
    body = None
    if obj is not None:
        body = json.dumps(obj).encode()
        h["Content-Type"] = "application/json"
    st, hd, b = req(daemon, method, path, body, h)
    return st, hd, json.loads(b) if b else None


@pytest.fixture
def sbx(daemon):
    st, _, j = api(daemon, "POST", "/sandboxes", {"templateID": "base", "timeout": 120})
    assert st == 201, j
    yield j
    api(daemon, "DELETE", "/sandboxes/" + j["sandboxID"])


def envd_headers(sbx, token=None, **extra):
    h = {"E2b-Sandbox-Id": sbx["sandboxID"], "E2b-Sandbox-Port": "49983",
         "X-Access-Token": token if token is not None else sbx["envdAccessToken"]}
    h.update(extra)
    return h


def unary(daemon, sbx, method, obj, **kw):
    h = envd_headers(sbx, **kw)
    h["Content-Type"] = "application/json"
    body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return req(daemon, "POST", "/" + method, body, h)


def envelope(obj, flags=0):
    p = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return struct.pack(">BI", flags, len(p)) + p


def frames(body):
    out = []
    while body:
        flags, n = struct.unpack(">BI", body[:5])
        out.append((flags, json.loads(body[5:5 + n])))
        body = body[5 + n:]
    return out


def stream(daemon, sbx, method, body, **extra):
    h = envd_headers(sbx, **extra)
    h.setdefault("Content-Type", "application/connect+json")
    return req(daemon, "POST", "/" + method, body, h)


# ---- control plane -------------------------------------------------------------------------------

def test_control_plane_shapes_and_errors(daemon, sbx):
    assert sbx["envdVersion"] == "0.5.7" and len(sbx["envdAccessToken"]) == 64
    assert sbx["templateID"] == "base" and sbx["clientID"]
    st, _, j = api(daemon, "GET", "/sandboxes/" + sbx["sandboxID"])
    assert st == 200 and j["state"] == "running" and j["envdAccessToken"] == sbx["envdAccessToken"]
    for k in ("startedAt", "endAt", "cpuCount", "memoryMB", "diskSizeMB", "envdVersion"):
        assert k in j
    st, _, j = api(daemon, "GET", "/sandboxes/nosuchsandbox00000")
    assert (st, j["code"]) == (404, 404) and j["message"]
    st, _, b = req(daemon, "GET", "/v2/sandboxes")
    assert st == 401 and json.loads(b)["code"] == 401
    st, _, b = req(daemon, "POST", "/sandboxes", b"{nope", {"X-API-KEY": daemon.admin_key})
    assert st == 400 and json.loads(b)["code"] == 400
    st, _, j = api(daemon, "POST", "/sandboxes", {"templateID": "nosuchtemplate"})
    assert st == 404 and j["code"] == 404
    st, _, j = api(daemon, "POST", "/sandboxes", {"templateID": "base", "metadata": {"a": 1}})
    assert st == 400 and j["code"] == 400
    st, _, j = api(daemon, "POST", "/sandboxes/%s/fork" % sbx["sandboxID"], {"count": 0})
    assert st == 400 and j["code"] == 400
    st, _, j = api(daemon, "PUT", "/sandboxes/%s/network" % sbx["sandboxID"], {"denyOut": ["x.test"]})
    assert st == 400 and j["code"] == 400 and j["message"] == "invalid denied CIDR x.test"
    st, _, j = api(daemon, "PUT", "/sandboxes/nosuchsandbox00000/network", {})
    assert st == 404 and j["code"] == 404
    st, _, j = api(daemon, "POST", "/sandboxes/nosuchsandbox00000/snapshots", {})
    assert st == 404 and j["code"] == 404
    st, _, j = api(daemon, "GET", "/sandboxes/nosuchsandbox00000/metrics")
    assert st == 404 and j["code"] == 404


def test_list_pagination(daemon, sbx):
    ids = []
    for i in range(2):
        st, _, j = api(daemon, "POST", "/v2/sandboxes",
                       {"templateID": "base", "metadata": {"page": "x", "i": str(i)}})
        assert st == 201, j
        ids.append(j["sandboxID"])
    try:
        seen, token = [], None
        while True:
            q = "/v2/sandboxes?metadata=page%3Dx&limit=1" + ("&nextToken=" + token if token else "")
            st, hd, j = api(daemon, "GET", q)
            assert st == 200 and len(j) <= 1
            seen += [s["sandboxID"] for s in j]
            token = hd.get("x-next-token")
            if not token:
                break
        assert seen == ids
        st, _, j = api(daemon, "GET", "/v2/sandboxes?metadata=page%3Dx%26i%3D1&state=running")
        assert [s["sandboxID"] for s in j] == ids[1:]
        st, _, j = api(daemon, "GET", "/v2/sandboxes?state=sleeping")
        assert st == 400 and j["code"] == 400
    finally:
        for i in ids:
            api(daemon, "DELETE", "/sandboxes/" + i)


def time_left(daemon, sid):
    """Seconds until the sandbox's endAt (E2B's SandboxDetail)."""
    import datetime
    st, _, j = api(daemon, "GET", "/sandboxes/" + sid)
    assert st == 200, j
    end = datetime.datetime.strptime(j["endAt"], "%Y-%m-%dT%H:%M:%S.%fZ")
    return (end.replace(tzinfo=datetime.timezone.utc) -
            datetime.datetime.now(datetime.timezone.utc)).total_seconds()


def test_connect_and_refreshes_never_shorten(daemon):
    # E2B's connect and refreshes keep a sandbox alive at least that long (KeepAliveFor with
    # allowShorter false); only /timeout sets the deadline earlier.
    st, _, j = api(daemon, "POST", "/sandboxes", {"templateID": "base", "timeout": 3600})
    assert st == 201, j
    sid = j["sandboxID"]
    try:
        for path in ("/sandboxes/%s/connect", "/v2/sandboxes/%s/connect"):
            st, _, j = api(daemon, "POST", path % sid, {"timeout": 300})  # what every SDK sends
            assert st == 200 and j["sandboxID"] == sid, j
            assert 3590 < time_left(daemon, sid) <= 3600
        st, _, b = req(daemon, "POST", "/sandboxes/%s/refreshes" % sid, None,
                       {"X-API-KEY": daemon.admin_key})
        assert st == 204, b
        assert 3590 < time_left(daemon, sid) <= 3600
        st, _, j = api(daemon, "POST", "/sandboxes/%s/refreshes" % sid, {"duration": 60})
        assert st == 204 and 3590 < time_left(daemon, sid) <= 3600
        # /timeout shortens; refreshes and connect then extend, by their own amount only.
        st, _, j = api(daemon, "POST", "/sandboxes/%s/timeout" % sid, {"timeout": 120})
        assert st == 204 and 110 < time_left(daemon, sid) <= 120
        st, _, j = api(daemon, "POST", "/sandboxes/%s/refreshes" % sid, {})
        assert st == 204 and 110 < time_left(daemon, sid) <= 120
        st, _, j = api(daemon, "POST", "/sandboxes/%s/refreshes" % sid, {"duration": 600})
        assert st == 204 and 590 < time_left(daemon, sid) <= 600
        st, _, j = api(daemon, "POST", "/sandboxes/%s/connect" % sid, {"timeout": 900})
        assert st == 200 and 890 < time_left(daemon, sid) <= 900
        st, _, j = api(daemon, "POST", "/sandboxes/%s/connect" % sid, {})
        assert st == 200 and 880 < time_left(daemon, sid) <= 900
        st, _, j = api(daemon, "POST", "/sandboxes/%s/refreshes" % sid, {"duration": 3601})
        assert st == 400 and j["code"] == 400
        # A paused sandbox keeps its time left through a connect with less.
        st, _, j = api(daemon, "POST", "/sandboxes/%s/pause" % sid, {})
        assert st == 204, j
        st, _, j = api(daemon, "POST", "/sandboxes/%s/connect" % sid, {"timeout": 300})
        assert st == 201, j
        assert 870 < time_left(daemon, sid) <= 900
        st, _, j = api(daemon, "POST", "/sandboxes/%s/pause" % sid, {})
        st, _, j = api(daemon, "POST", "/sandboxes/%s/connect" % sid, {"timeout": 1800})
        assert st == 201 and 1790 < time_left(daemon, sid) <= 1800
    finally:
        api(daemon, "DELETE", "/sandboxes/" + sid)
    # Refreshes without a body keep a short-lived sandbox for E2B's default of 15 s.
    st, _, j = api(daemon, "POST", "/sandboxes", {"templateID": "base", "timeout": 5})
    assert st == 201, j
    try:
        st, _, b = req(daemon, "POST", "/sandboxes/%s/refreshes" % j["sandboxID"], None,
                       {"X-API-KEY": daemon.admin_key})
        assert st == 204 and 10 < time_left(daemon, j["sandboxID"]) <= 15
    finally:
        api(daemon, "DELETE", "/sandboxes/" + j["sandboxID"])


# ---- envd: auth and routing ----------------------------------------------------------------------

def test_access_token(daemon, sbx):
    st, _, b = unary(daemon, sbx, "process.Process/List", {}, token="")
    assert st == 401 and json.loads(b)["code"] == "unauthenticated"
    h = envd_headers(sbx)
    del h["X-Access-Token"]
    h["Content-Type"] = "application/json"
    st, _, b = req(daemon, "POST", "/process.Process/List", b"{}", h)
    assert st == 401 and json.loads(b)["code"] == "unauthenticated"
    st, _, b = req(daemon, "GET", "/files?path=/etc/passwd", None, envd_headers(sbx, token="0" * 64))
    assert st == 401 and json.loads(b)["code"] == 401
    # Another sandbox's token does not open this one.
    st, _, other = api(daemon, "POST", "/sandboxes", {"templateID": "base"})
    try:
        st, _, b = unary(daemon, sbx, "process.Process/List", {}, token=other["envdAccessToken"])
        assert st == 401
    finally:
        api(daemon, "DELETE", "/sandboxes/" + other["sandboxID"])


def test_routing(daemon, sbx):
    sid, tok = sbx["sandboxID"], sbx["envdAccessToken"]
    st, _, b = req(daemon, "POST", "/process.Process/List", b"{}",
                   {"Host": "49983-%s.warren.test" % sid, "X-Access-Token": tok,
                    "Content-Type": "application/json"})
    assert st == 200 and "processes" in json.loads(b)
    st, _, b = req(daemon, "POST", "/process.Process/List", b"{}",
                   {"Novita-Sandbox-Id": sid, "X-Access-Token": tok,
                    "Content-Type": "application/json"})
    assert st == 200
    st, _, b = req(daemon, "GET", "/", None, {"Host": "8080-%s.warren.test" % sid})
    j = json.loads(b)
    # Other ports are proxied (tests/integration/test_ports.py): nothing listens on this one.
    assert st == 502 and j == {"sandboxId": sid, "port": 8080, "code": 502,
                               "message": "The sandbox is running but port is not open"}
    st, _, b = req(daemon, "GET", "/health", None, envd_headers(sbx))
    assert st == 204
    h = envd_headers(sbx, token="x")
    h["E2b-Sandbox-Id"] = "nosuchsandbox00000"
    st, _, b = req(daemon, "POST", "/process.Process/List", b"{}", h)
    assert st == 401  # the token is checked before anything is said of the sandbox
    # The native API is untouched.
    st, _, b = req(daemon, "GET", "/v1/health")
    assert st == 200


def test_health_says_nothing_without_a_credential(daemon, sbx):
    # envd's /health tells a running sandbox (204) from one that is not (502) only to a caller
    # with its access token or a key of its team; to anyone else every id looks the same.
    sid = sbx["sandboxID"]
    st, _, gone = api(daemon, "POST", "/sandboxes", {"templateID": "base"})
    assert st == 201
    api(daemon, "DELETE", "/sandboxes/" + gone["sandboxID"])
    answers = set()
    for i in (sid, gone["sandboxID"], "nosuchsandbox00000"):
        for extra in ({}, {"X-Access-Token": "0" * 64}, {"X-Access-Token": "x"}):
            st, _, b = req(daemon, "GET", "/health", None, dict({"E2b-Sandbox-Id": i}, **extra))
            answers.add((st, b.replace(i.encode(), b"ID")))
    assert len(answers) == 2 and {a[0] for a in answers} == {401}, answers  # missing or wrong
    st, _, b = req(daemon, "GET", "/health", None, {"Host": "49983-%s.warren.test" % sid})
    assert st == 401
    # The sandbox's own token (also one of a sandbox that is gone): it is said.
    st, _, b = req(daemon, "GET", "/health", None, envd_headers(sbx))
    assert st == 204
    st, _, b = req(daemon, "GET", "/health", None, envd_headers(gone))
    j = json.loads(b)
    assert st == 502 and j["code"] == 502 and j["sandboxId"] == gone["sandboxID"]
    # A key of the team that owns it; another team's key sees no sandbox; a bad key is refused.
    st, _, b = req(daemon, "GET", "/health", None, {"E2b-Sandbox-Id": sid, "X-API-KEY": daemon.admin_key})
    assert st == 204
    st, _, b = req(daemon, "GET", "/health", None,
                   {"E2b-Sandbox-Id": "nosuchsandbox00000", "X-API-KEY": daemon.admin_key})
    assert st == 502
    st, _, b = native(daemon, "POST", "/v1/keys", json.dumps({"team": "healthother", "name": "k"}).encode())
    assert st == 201, b
    other = json.loads(b)["key"]
    st, _, b = req(daemon, "GET", "/health", None, {"E2b-Sandbox-Id": sid, "X-API-KEY": other})
    assert st == 502
    st, _, b = req(daemon, "GET", "/health", None, {"E2b-Sandbox-Id": sid, "X-API-KEY": "wr_nope"})
    assert st == 401


# ---- envd: the Connect protocol ------------------------------------------------------------------

def test_unary_errors(daemon, sbx):
    st, hd, b = unary(daemon, sbx, "filesystem.Filesystem/Stat", b"{bad json")
    assert st == 400 and json.loads(b)["code"] == "invalid_argument"
    assert hd["content-type"].startswith("application/json")
    st, _, b = unary(daemon, sbx, "filesystem.Filesystem/Stat", {"path": "/nope"})
    assert st == 404 and json.loads(b)["code"] == "not_found"
    st, _, b = unary(daemon, sbx, "filesystem.Filesystem/Frobnicate", {})
    assert st == 501 and json.loads(b)["code"] == "unimplemented"
    h = envd_headers(sbx, **{"Content-Type": "application/proto"})
    st, _, b = req(daemon, "POST", "/filesystem.Filesystem/Stat", b"\x0a\x01/", h)
    assert st == 400 and json.loads(b)["code"] == "invalid_argument"
    st, _, b = unary(daemon, sbx, "process.Process/SendSignal",
                     {"process": {"pid": 99999}, "signal": "SIGNAL_SIGKILL"})
    assert st == 404 and json.loads(b)["code"] == "not_found"
    st, _, b = unary(daemon, sbx, "filesystem.Filesystem/MakeDir", {"path": "/tmp"})
    assert st == 409 and json.loads(b)["code"] == "already_exists"
    st, _, b = unary(daemon, sbx, "filesystem.Filesystem/ListDir", {"path": "/etc/passwd"})
    assert st == 400 and json.loads(b)["code"] == "invalid_argument"


def test_errno_answers_agree_with_the_native_api(daemon, sbx):
    # A move onto a non-empty directory (ENOTEMPTY) and one across filesystems (EXDEV) are a
    # conflict natively (409) and failed_precondition over Connect, not the caller's bad argument.
    sid = sbx["sandboxID"]
    for d in ("/tmp/agree/a", "/tmp/agree/b/c", "/tmp/agree/d"):
        st, _, b = unary(daemon, sbx, "filesystem.Filesystem/MakeDir", {"path": d})
        assert st == 200, b
    for src, dst in (("/tmp/agree/a", "/tmp/agree/b"), ("/tmp/agree/d", "/dev/shm/d")):
        st, _, b = native(daemon, "POST", f"/v1/sandboxes/{sid}/files/move",
                          json.dumps({"from": src, "to": dst}).encode())
        assert st == 409 and json.loads(b)["code"] == "conflict", (src, dst, b)
        st, _, b = unary(daemon, sbx, "filesystem.Filesystem/Move",
                         {"source": src, "destination": dst})
        assert st == 400 and json.loads(b)["code"] == "failed_precondition", (src, dst, b)


def test_stream_envelopes(daemon, sbx):
    body = envelope({"process": {"cmd": "/bin/sh", "args": ["-c", "echo hi; echo err >&2; exit 3"]}})
    st, hd, b = stream(daemon, sbx, "process.Process/Start", body)
    assert st == 200 and hd["content-type"] == "application/connect+json"
    fr = frames(b)
    assert fr[0][1]["event"]["start"]["pid"] > 0
    out = b"".join(base64.b64decode(f[1]["event"]["data"]["stdout"]) for f in fr
                   if "data" in f[1].get("event", {}) and "stdout" in f[1]["event"]["data"])
    assert out == b"hi\n"
    end = [f[1]["event"]["end"] for f in fr if "end" in f[1].get("event", {})]
    # usage: Warren's, beside envd's fields (the SDKs ignore fields they do not know)
    usage = end[0].pop("usage")
    assert set(usage) == {"cpuSeconds", "memoryPeakBytes", "wallSeconds", "source"}
    assert usage["source"] == "rusage" and usage["memoryPeakBytes"] > 0
    assert 0 <= usage["cpuSeconds"] <= usage["wallSeconds"] + 0.1
    assert end == [{"exitCode": 3, "exited": True, "status": "exit status 3",
                    "error": "exit status 3"}]
    assert fr[-1] == (2, {})


def test_stream_errors(daemon, sbx):
    def end_error(body, **h):
        st, _, b = stream(daemon, sbx, "process.Process/Start", body, **h)
        assert st == 200
        fr = frames(b)
        assert fr[-1][0] == 2
        return fr[-1][1]["error"]["code"]

    ok = {"process": {"cmd": "/bin/true"}}
    assert end_error(envelope(ok, flags=1)) == "unimplemented"  # compressed
    assert end_error(envelope(ok)[:-1]) == "invalid_argument"  # truncated
    assert end_error(envelope(ok) + envelope(ok)) == "invalid_argument"  # two messages
    assert end_error(envelope(b"[1,2]")) == "invalid_argument"
    assert end_error(envelope({"process": {}})) == "invalid_argument"
    assert end_error(envelope({"process": {"cmd": "/bin/true", "cwd": "/nonexistent"}})) == \
        "invalid_argument"
    assert end_error(envelope(ok), **{"Content-Type": "application/json"}) == "invalid_argument"
    assert end_error(envelope({"process": {"pid": 4242}})) == "invalid_argument"  # no cmd
    # A command line over the protocol's frame (1 MiB) is too large, not a rate limit to retry.
    assert end_error(envelope({"process": {"cmd": "/bin/true", "args": ["x" * (2 << 20)]}})) == \
        "invalid_argument"
    st, _, b = native(daemon, "POST", "/v1/sandboxes/%s/exec" % sbx["sandboxID"],
                      json.dumps({"cmd": ["/bin/true", "x" * (2 << 20)]}).encode())
    assert st == 413 and json.loads(b)["code"] == "too_large", b
    # Oversized: the server refuses the body before reading it all.
    big = envelope({"process": {"cmd": "/bin/true", "args": ["x" * (5 << 20)]}})
    st, _, b = stream(daemon, sbx, "process.Process/Start", big)
    assert st == 413
    st, _, b = stream(daemon, sbx, "process.Process/Connect", envelope({"process": {"pid": 4242}}))
    assert frames(b)[-1][1]["error"]["code"] == "not_found"


def test_timeout_kills(daemon, sbx):
    body = envelope({"process": {"cmd": "/bin/sh", "args": ["-c", "sleep 30"]}})
    st, _, b = stream(daemon, sbx, "process.Process/Start", body, **{"Connect-Timeout-Ms": "300"})
    fr = frames(b)
    end = [f[1]["event"]["end"] for f in fr if "end" in f[1].get("event", {})]
    assert end and end[0]["exited"] is False and end[0]["status"] == "signal: killed"
    assert fr[-1][1]["error"]["code"] == "deadline_exceeded"


# ---- /files ---------------------------------------------------------------------------------------

def test_files_upload_download(daemon, sbx):
    h = envd_headers(sbx)
    boundary = "XyZ"
    parts = b""
    for path, data in (("/tmp/up/a.txt", b"aaa"), ("/tmp/up/b.bin", bytes(range(256)))):
        parts += (b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%s\"\r\n"
                  b"Content-Type: application/octet-stream\r\n\r\n" % path.encode()) + data + b"\r\n"
    parts += b"--XyZ--\r\n"
    st, _, b = req(daemon, "POST", "/files", parts,
                   dict(h, **{"Content-Type": "multipart/form-data; boundary=" + boundary}))
    assert st == 200, b
    assert json.loads(b) == [{"name": "a.txt", "type": "file", "path": "/tmp/up/a.txt"},
                             {"name": "b.bin", "type": "file", "path": "/tmp/up/b.bin"}]
    st, _, b = req(daemon, "GET", "/files?path=/tmp/up/b.bin", None, h)
    assert st == 200 and b == bytes(range(256))
    # gzip, octet-stream, chunked
    c = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=30)
    c.putrequest("POST", "/files?path=/tmp/up/z.txt")
    for k, v in dict(h, **{"Content-Type": "application/octet-stream", "Content-Encoding": "gzip",
                           "Transfer-Encoding": "chunked"}).items():
        c.putheader(k, v)
    c.endheaders()
    z = gzip.compress(b"zipped " * 1000)
    for i in range(0, len(z), 100):
        piece = z[i:i + 100]
        c.send(b"%x\r\n%s\r\n" % (len(piece), piece))
    c.send(b"0\r\n\r\n")
    r = c.getresponse()
    assert r.status == 200, r.read()
    r.read()
    c.close()
    st, _, b = req(daemon, "GET", "/files?path=/tmp/up/z.txt", None, h)
    assert b == b"zipped " * 1000
    st, _, b = req(daemon, "GET", "/files?path=/tmp/up/missing", None, h)
    assert st == 404 and json.loads(b)["code"] == 404
    st, _, b = req(daemon, "POST", "/files?path=/tmp/x", b"--nope",
                   dict(h, **{"Content-Type": "multipart/form-data; boundary=XyZ"}))
    assert st == 400 and json.loads(b)["code"] == 400
    st, _, b = req(daemon, "POST", "/files?path=/tmp/x", b"not gzip",
                   dict(h, **{"Content-Type": "application/octet-stream", "Content-Encoding": "gzip"}))
    assert st == 400


def post_chunked(daemon, path, headers, pieces):
    """POST with Transfer-Encoding: chunked, one chunk per piece; returns (status, body)."""
    c = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=120)
    try:
        c.putrequest("POST", path)
        for k, v in dict(headers, **{"Transfer-Encoding": "chunked"}).items():
            c.putheader(k, v)
        c.endheaders()
        for p in pieces:
            if p:
                c.send(b"%x\r\n%s\r\n" % (len(p), p))
        c.send(b"0\r\n\r\n")
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def sandbox_sha256(daemon, sbx, paths):
    st, _, b = stream(daemon, sbx, "process.Process/Start",
                      envelope({"process": {"cmd": "/usr/bin/sha256sum", "args": paths}}))
    out = b"".join(base64.b64decode(f[1]["event"]["data"]["stdout"]) for f in frames(b)
                   if "data" in f[1].get("event", {}) and "stdout" in f[1]["event"]["data"])
    return {p: h for h, p in (line.split() for line in out.decode().splitlines())}


def part_head(path, name="file"):
    return (b"--XyZ\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
            b"Content-Type: application/octet-stream\r\n\r\n" % (name.encode(), path.encode()))


def test_multipart_is_parsed_as_it_arrives(daemon, sbx):
    # Delimiters, part headers and data cut anywhere across reads; data that looks like a
    # delimiter but is not one; a part that is not a file; many files; gzip around it all.
    h = dict(envd_headers(sbx), **{"Content-Type": "multipart/form-data; boundary=XyZ"})
    # Not delimiters: the boundary without CRLF before it, or with a byte after it that is none
    # of "-", space, tab, CR (as Go's mime/multipart, which envd uses, reads them).
    tricky = b"\r\n--XyZz" + b"\r\n--Xy" + b"--XyZ" + b"\r\n-" * 50
    files = {"/tmp/mp/a": b"", "/tmp/mp/b": tricky * 37, "/tmp/mp/c": bytes(range(256)) * 99,
             "/tmp/mp/d": b"\r\n"}
    body = b"preamble to ignore\r\n"
    body += part_head("ignored", name="other") + b"not a file\r\n"
    for path, data in files.items():
        body += part_head(path) + data + b"\r\n"
    body += b"--XyZ--\r\nepilogue to ignore"
    want = [{"name": p.rsplit("/", 1)[1], "type": "file", "path": p} for p in files]
    for step in (3, 4096, len(body)):
        st, b = post_chunked(daemon, "/files", h, [body[i:i + step] for i in range(0, len(body), step)])
        assert st == 200 and json.loads(b) == want, (step, b)
        for path, data in files.items():
            st, _, got = req(daemon, "GET", "/files?path=" + path, None, envd_headers(sbx))
            assert st == 200 and got == data, (step, path, len(got))
    z = gzip.compress(body)
    st, b = post_chunked(daemon, "/files", dict(h, **{"Content-Encoding": "gzip"}),
                         [z[i:i + 5] for i in range(0, len(z), 5)])
    assert st == 200 and json.loads(b) == want, b
    # The query's path names the destination of every part, as envd's does: two parts are one
    # too many; the first is written.
    st, _, b = req(daemon, "POST", "/files?path=/tmp/mp/q", part_head("/elsewhere") + b"q\r\n--XyZ--\r\n", h)
    assert st == 200 and json.loads(b) == [{"name": "q", "type": "file", "path": "/tmp/mp/q"}], b
    st, _, b = req(daemon, "POST", "/files?path=/tmp/mp/q2",
                   part_head("x") + b"1\r\n" + part_head("y") + b"2\r\n--XyZ--\r\n", h)
    assert st == 400 and json.loads(b)["code"] == 400, b
    assert req(daemon, "GET", "/files?path=/tmp/mp/q2", None, envd_headers(sbx))[2] == b"1"
    # Unterminated, no file part, no boundary: 400; nothing half-written is left.
    for bad in (part_head("/tmp/mp/cut") + b"data without an end",
                b"--XyZ\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\nx\r\n--XyZ--\r\n",
                b"--XyZ\r\nno blank line after the headers"):
        st, b = post_chunked(daemon, "/files", h, [bad])
        assert st == 400 and json.loads(b)["code"] == 400, (bad, b)
    st, _, b = req(daemon, "POST", "/files", b"x", dict(h, **{"Content-Type": "multipart/form-data"}))
    assert st == 400
    # warren-init removes an abandoned write's temporary file when its connection closes.
    for _ in range(100):
        st, _, b = unary(daemon, sbx, "filesystem.Filesystem/ListDir", {"path": "/tmp/mp"})
        names = sorted(e["name"] for e in json.loads(b)["entries"])
        if names == ["a", "b", "c", "d", "q", "q2"]:
            break
        time.sleep(0.05)
    assert names == ["a", "b", "c", "d", "q", "q2"]


@pytest.mark.slow
def test_gzip_bomb_is_too_large(daemon, sbx):
    # A body that inflates past 1 GiB is a request too large (413), not a capacity to retry
    # (503). Its bytes go to a part that is not a file, so the test writes nothing.
    # One gzip stream, built fast: once the window is all zeros, each flushed MiB of zeros
    # compresses to the same bytes. It never ends: the limit stops it first.
    z, zeros = zlib.compressobj(9, zlib.DEFLATED, 31), bytes(1 << 20)
    head = z.compress(part_head("x", name="other")) + z.flush(zlib.Z_SYNC_FLUSH)
    first = z.compress(zeros) + z.flush(zlib.Z_SYNC_FLUSH)
    mib = z.compress(zeros) + z.flush(zlib.Z_SYNC_FLUSH)
    body = head + first + mib * 1024
    assert len(body) < 2 << 20
    st, _, b = req(daemon, "POST", "/files?path=/tmp/bomb", body,
                   dict(envd_headers(sbx), **{"Content-Type": "multipart/form-data; boundary=XyZ",
                                              "Content-Encoding": "gzip"}))
    j = json.loads(b)
    assert st == 413 and j["code"] == 413 and "inflates" in j["message"], (st, j)


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.slow
def test_uploads_stream_with_bounded_memory(daemon, sbx):
    # Four concurrent uploads of 200 MiB each (two files of 100 MiB in one multipart body):
    # the daemon's memory must not grow by what they carry.
    import threading
    pid, mib = daemon.proc.pid, 1 << 20
    block = hashlib.sha256(b"seed").digest() * (mib // 32)
    want, errors, peak = {}, [], [0]

    def data(path):
        h = hashlib.sha256()
        for i in range(100):
            piece = path.encode() + b"%06d" % i + block[len(path) + 6:]
            h.update(piece)
            yield piece
        want[path] = h.hexdigest()

    def upload(n):
        paths = ["/up%d-%d.bin" % (n, k) for k in range(2)]

        def pieces():
            for p in paths:
                yield part_head(p)
                yield from data(p)
                yield b"\r\n"
            yield b"--XyZ--\r\n"
        try:
            st, b = post_chunked(daemon, "/files", dict(envd_headers(sbx), **{
                "Content-Type": "multipart/form-data; boundary=XyZ"}), pieces())
            assert st == 200 and [e["path"] for e in json.loads(b)] == paths, b
        except Exception as e:  # reported below
            errors.append(e)

    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], rss_kib(pid))
            time.sleep(0.01)

    before = rss_kib(pid)
    sampler = threading.Thread(target=sample)
    sampler.start()
    threads = [threading.Thread(target=upload, args=(n,)) for n in range(4)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    sampler.join()
    took = time.time() - t0
    assert not errors, errors
    grown = (peak[0] - before) / 1024
    print("4 x 200 MiB uploads in %.1f s: RSS %d -> peak %d KiB (+%.1f MiB)" %
          (took, before, peak[0], grown))
    assert sandbox_sha256(daemon, sbx, sorted(want)) == want
    stream(daemon, sbx, "process.Process/Start",
           envelope({"process": {"cmd": "/bin/rm", "args": sorted(want)}}))
    # Under ASan (make asan) freed memory sits in its quarantine: RSS says nothing there.
    if not SANITIZED:
        assert grown < 64, "the daemon's RSS grew by %.1f MiB" % grown


def native(daemon, method, path, body=None):
    return req(daemon, method, path, body, {"Authorization": "Bearer " + daemon.admin_key})


def test_bytes_that_are_not_utf8_always_encode(daemon, sbx):
    # Paths, names and messages carry the sandbox's and the client's bytes: every JSON the daemon
    # writes encodes them (U+FFFD in data, \xNN in messages) instead of failing with a 500.
    sid, h = sbx["sandboxID"], envd_headers(sbx)
    st, _, b = native(daemon, "GET", "/v1/sandboxes/%s/files?path=/tmp/%%ff%%fe" % sid)
    j = json.loads(b)
    assert st == 404 and j["code"] == "not_found" and "\\xff\\xfe" in j["message"], (st, j)
    st, _, b = req(daemon, "GET", "/files?path=/tmp/%ff%fe", None, h)
    j = json.loads(b)
    assert st == 404 and j["code"] == 404 and "\\xff\\xfe" in j["message"], (st, j)
    st, _, b = native(daemon, "GET", "/v1/no/such/%ff")
    assert st == 404 and json.loads(b)["code"] == "not_found"
    st, _, b = req(daemon, "GET", "/health", None, {"E2b-Sandbox-Id": "\xff"})
    assert st == 502 and json.loads(b)["code"] == 502
    # A message cut inside a character (a long path of two-byte characters) still encodes.
    long = "/tmp/" + "/".join(["\u00e9" * 100] * 4)
    st, _, b = unary(daemon, sbx, "filesystem.Filesystem/Stat", {"path": long})
    assert st == 404 and json.loads(b)["code"] == "not_found", b
    st, _, b = stream(daemon, sbx, "filesystem.Filesystem/WatchDir", envelope({"path": long}))
    assert frames(b)[-1][1]["error"]["code"] == "not_found"
    # A file whose name is not UTF-8: listed, stat'ed and watched with U+FFFD for the bytes.
    st, _, b = unary(daemon, sbx, "filesystem.Filesystem/CreateWatcher", {"path": "/tmp"})
    assert st == 200, b
    wid = json.loads(b)["watcherId"]
    st, _, b = native(daemon, "PUT", "/v1/sandboxes/%s/files?path=/tmp/u/%%ff%%fe.txt" % sid, b"x")
    assert st == 201, b
    assert json.loads(b)["name"] == "\ufffd\ufffd.txt"
    st, _, b = native(daemon, "GET", "/v1/sandboxes/%s/files/list?path=/tmp/u" % sid)
    assert st == 200, b
    assert [(e["name"], e["path"], e["type"]) for e in json.loads(b)["entries"]] == \
        [("\ufffd\ufffd.txt", "/tmp/u/\ufffd\ufffd.txt", "file")]
    st, _, b = unary(daemon, sbx, "filesystem.Filesystem/ListDir", {"path": "/tmp/u"})
    assert st == 200, b
    assert [(e["name"], e["path"], e["type"]) for e in json.loads(b)["entries"]] == \
        [("\ufffd\ufffd.txt", "/tmp/u/\ufffd\ufffd.txt", "FILE_TYPE_FILE")]
    st, _, b = unary(daemon, sbx, "filesystem.Filesystem/GetWatcherEvents", {"watcherId": wid})
    assert st == 200 and any(e["name"] == "u" for e in json.loads(b)["events"]), b
    unary(daemon, sbx, "filesystem.Filesystem/RemoveWatcher", {"watcherId": wid})
    st, _, b = unary(daemon, sbx, "filesystem.Filesystem/CreateWatcher", {"path": "/tmp/u"})
    wid = json.loads(b)["watcherId"]
    native(daemon, "PUT", "/v1/sandboxes/%s/files?path=/tmp/u/%%80" % sid, b"y")
    events = []
    for _ in range(100):
        st, _, b = unary(daemon, sbx, "filesystem.Filesystem/GetWatcherEvents", {"watcherId": wid})
        events += json.loads(b)["events"]
        if any(e["name"] == "\ufffd" for e in events):
            break
        time.sleep(0.05)
    assert any(e["name"] == "\ufffd" for e in events), events
    unary(daemon, sbx, "filesystem.Filesystem/RemoveWatcher", {"watcherId": wid})
    # A multipart upload to a name that is not UTF-8 answers its entry.
    body = (b"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/u/\xfa\"\r\n\r\n"
            b"z\r\n--B--\r\n")
    st, _, b = req(daemon, "POST", "/files", body,
                   dict(h, **{"Content-Type": "multipart/form-data; boundary=B"}))
    assert st == 200 and json.loads(b) == [{"name": "\ufffd", "type": "file", "path": "/tmp/u/\ufffd"}], b


def test_signed_download(daemon, sbx):
    path, tok = "/tmp/up/a.txt", sbx["envdAccessToken"]
    digest = hashlib.sha256(("%s:read::%s" % (path, tok)).encode()).digest()
    sig = urllib.parse.quote("v1_" + base64.b64encode(digest).decode().rstrip("="), safe="")
    h = {"E2b-Sandbox-Id": sbx["sandboxID"]}
    req(daemon, "POST", "/files?path=" + path, b"signed",
        dict(envd_headers(sbx), **{"Content-Type": "application/octet-stream"}))
    st, _, b = req(daemon, "GET", "/files?path=%s&signature=%s" % (path, sig), None, h)
    assert st == 200 and b == b"signed"
    st, _, b = req(daemon, "GET", "/files?path=%s&signature=%s" % (path, "v1_" + "A" * 43), None, h)
    assert st == 401


def test_keepalive_on_a_quiet_stream(daemon, sbx):
    body = envelope({"process": {"cmd": "/bin/sh", "args": ["-c", "sleep 1.5; echo late"]}})
    st, _, b = stream(daemon, sbx, "process.Process/Start", body, **{"Keepalive-Ping-Interval": "1"})
    events = [f[1].get("event", {}) for f in frames(b)]
    assert "start" in events[0]
    assert any("keepalive" in e for e in events)
    assert "end" in events[-2] or "end" in events[-1]


def test_polled_watcher(daemon, sbx):
    st, _, b = unary(daemon, sbx, "filesystem.Filesystem/MakeDir", {"path": "/tmp/polled"})
    assert st == 200 and json.loads(b)["entry"]["type"] == "FILE_TYPE_DIRECTORY"
    st, _, b = unary(daemon, sbx, "filesystem.Filesystem/CreateWatcher", {"path": "/tmp/polled"})
    assert st == 200, b
    wid = json.loads(b)["watcherId"]
    req(daemon, "POST", "/files?path=/tmp/polled/f", b"x",
        dict(envd_headers(sbx), **{"Content-Type": "application/octet-stream"}))
    events = []
    for _ in range(100):
        st, _, b = unary(daemon, sbx, "filesystem.Filesystem/GetWatcherEvents", {"watcherId": wid})
        assert st == 200
        events += json.loads(b)["events"]
        if any(e["name"] == "f" for e in events):
            break
        time.sleep(0.05)
    assert any(e["name"] == "f" and e["type"].startswith("EVENT_TYPE_") for e in events), events
    st, _, b = unary(daemon, sbx, "filesystem.Filesystem/RemoveWatcher", {"watcherId": wid})
    assert st == 200
    st, _, b = unary(daemon, sbx, "filesystem.Filesystem/GetWatcherEvents", {"watcherId": wid})
    assert st == 404 and json.loads(b)["code"] == "not_found"
    st, _, b = unary(daemon, sbx, "filesystem.Filesystem/CreateWatcher", {"path": "/tmp/nowhere"})
    assert st == 404 and json.loads(b)["code"] == "not_found"


def test_tags_list_and_a_client_that_leaves(daemon, sbx):
    # A Start whose client leaves: the process runs on, List shows it with its tag and config,
    # Connect by tag streams it, SendSignal by tag ends it.
    c = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=30)
    c.request("POST", "/process.Process/Start",
              envelope({"process": {"cmd": "/bin/sh", "args": ["-c", "sleep 30"], "envs": {"A": "b"}},
                        "tag": "sleeper"}),
              dict(envd_headers(sbx), **{"Content-Type": "application/connect+json"}))
    r = c.getresponse()
    assert r.status == 200
    r.read(5)
    c.close()
    st, _, b = unary(daemon, sbx, "process.Process/List", {})
    procs = json.loads(b)["processes"]
    mine = [p for p in procs if p.get("tag") == "sleeper"]
    assert mine and mine[0]["config"] == {"cmd": "/bin/sh", "args": ["-c", "sleep 30"], "envs": {"A": "b"}}
    c = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=30)
    c.request("POST", "/process.Process/Connect", envelope({"process": {"tag": "sleeper"}}),
              dict(envd_headers(sbx), **{"Content-Type": "application/connect+json"}))
    r = c.getresponse()
    st, _, b = unary(daemon, sbx, "process.Process/SendSignal",
                     {"process": {"tag": "sleeper"}, "signal": "SIGNAL_SIGTERM"})
    assert st == 200, b
    fr = frames(r.read())
    c.close()
    assert fr[0][1]["event"]["start"]["pid"] == mine[0]["pid"]
    end = [f[1]["event"]["end"] for f in fr if "end" in f[1].get("event", {})]
    assert end[0]["status"] == "signal: terminated"


def test_snapshots_fork_and_pause_to_disk(daemon, sbx):
    sid, h = sbx["sandboxID"], envd_headers(sbx)
    st, _, b = req(daemon, "POST", "/files?path=/data/kept.txt", b"kept",
                   dict(h, **{"Content-Type": "application/octet-stream"}))
    assert st == 200, b
    st, _, snap = api(daemon, "POST", "/sandboxes/%s/snapshots" % sid, {"name": "wire1"})
    assert st == 201, snap
    assert snap["names"] == ["wire1"] and snap["snapshotID"]
    made = []
    try:
        st, _, j = api(daemon, "GET", "/snapshots?sandboxID=" + sid)
        assert st == 200 and [s["snapshotID"] for s in j] == [snap["snapshotID"]]
        st, _, j = api(daemon, "GET", "/snapshots?name=wire1&limit=1")
        assert [s["names"] for s in j] == [["wire1"]]
        # A sandbox from the snapshot has its files.
        st, _, new = api(daemon, "POST", "/sandboxes", {"templateID": snap["snapshotID"]})
        assert st == 201, new
        made.append(new["sandboxID"])
        st, _, b = req(daemon, "GET", "/files?path=/data/kept.txt", None, envd_headers(new))
        assert (st, b) == (200, b"kept")
        # Fork: one entry per copy.
        st, _, forks = api(daemon, "POST", "/sandboxes/%s/fork" % sid, {"count": 2, "timeout": 60})
        assert st == 201 and len(forks) == 2, forks
        for f in forks:
            made.append(f["sandbox"]["sandboxID"])
            st, _, b = req(daemon, "GET", "/files?path=/data/kept.txt", None, envd_headers(f["sandbox"]))
            assert (st, b) == (200, b"kept")
        st, _, j = api(daemon, "DELETE", "/templates/" + snap["snapshotID"])
        assert st == 204
        st, _, j = api(daemon, "DELETE", "/templates/" + snap["snapshotID"])
        assert st == 404 and j["code"] == 404
        # Pause to disk ({"memory": false}), then connect: the files are there, the processes not.
        st, _, j = api(daemon, "POST", "/sandboxes/%s/pause" % sid, {"memory": False})
        assert st == 204, j
        st, _, j = api(daemon, "GET", "/sandboxes/" + sid)
        assert j["state"] == "paused"
        st, _, j = api(daemon, "POST", "/sandboxes/%s/pause" % sid, {})
        assert st == 409 and j["code"] == 409
        st, _, j = api(daemon, "POST", "/sandboxes/%s/connect" % sid, {"timeout": 60})
        assert st == 201 and j["envdAccessToken"] == sbx["envdAccessToken"]
        st, _, b = req(daemon, "GET", "/files?path=/data/kept.txt", None, h)
        assert (st, b) == (200, b"kept")
        st, _, j = api(daemon, "POST", "/sandboxes/%s/connect" % sid, {})
        assert st == 200
    finally:
        for i in made:
            api(daemon, "DELETE", "/sandboxes/" + i)


def test_volume_mounts(daemon):
    st, _, b = req(daemon, "POST", "/v1/volumes", json.dumps({"name": "e2bvol"}).encode(),
                   {"Authorization": "Bearer " + daemon.admin_key, "Content-Type": "application/json"})
    assert st == 201, b
    try:
        st, _, j = api(daemon, "POST", "/sandboxes", {"templateID": "base",
                                                      "volumeMounts": [{"name": "e2bvol", "path": "/mnt/vol"}]})
        assert st == 201, j
        try:
            st, _, b = req(daemon, "POST", "/files?path=/mnt/vol/x.txt", b"in the volume",
                           dict(envd_headers(j), **{"Content-Type": "application/octet-stream"}))
            assert st == 200, b
            st, _, d = api(daemon, "GET", "/sandboxes/" + j["sandboxID"])
            assert d["volumeMounts"] == [{"name": "e2bvol", "path": "/mnt/vol"}]
        finally:
            api(daemon, "DELETE", "/sandboxes/" + j["sandboxID"])
        st, _, j = api(daemon, "POST", "/sandboxes", {"templateID": "base",
                                                      "volumeMounts": [{"name": "nosuchvol", "path": "/mnt/v"}]})
        assert st == 404 and j["code"] == 404
        st, _, j = api(daemon, "POST", "/sandboxes", {"templateID": "base", "volumeMounts": {"x": 1}})
        assert st == 400 and j["code"] == 400
    finally:
        req(daemon, "DELETE", "/v1/volumes/e2bvol", None, {"Authorization": "Bearer " + daemon.admin_key})
