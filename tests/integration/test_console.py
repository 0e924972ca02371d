"""The web console's static files, /console/ (src/api/console.c, docs/console.md), and the key a
browser's WebSocket names in its subprotocols (src/api/router.c).

Each request is written by hand on a TCP socket, so that a path reaches the daemon exactly as
given (`..`, `%2e%2e`, `//`, a backslash): none of them may read a file outside the console's
directory, follow a symlink in it, or open a FIFO. The directory is made by the test, with an
outside file, symlinks and a FIFO beside the app's files.
"""

import base64
import json
import os
import shutil
import socket
import tempfile

import pytest

from conftest import Daemon, make_teams

SECRET = "outside the console: never served"
INDEX = "<!doctype html><title>console</title><div id=app></div>\n"
SCRIPT = "console.log('app');\n"


def raw(daemon, method, target, headers=None):
    """Send one request as written; return (status, headers (lower-case names), body)."""
    s = socket.create_connection(("127.0.0.1", daemon.port), timeout=10)
    try:
        h = {"Host": "127.0.0.1", "Connection": "close"}
        h.update(headers or {})
        s.sendall(("%s %s HTTP/1.1\r\n" % (method, target)).encode("latin-1") +
                  "".join("%s: %s\r\n" % kv for kv in h.items()).encode("latin-1") + b"\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            if b"\r\n\r\n" in data and h.get("Upgrade"):
                break  # a 101 stays open: the head is enough
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {l.split(":", 1)[0].strip().lower(): l.split(":", 1)[1].strip() for l in lines[1:]}
    if method == "HEAD" or status in (101, 204, 304):
        body = b""
    return status, hdrs, body


@pytest.fixture(scope="module")
def console():
    """A daemon serving a console directory the test made, beside a secret file, symlinks out of
    it and a FIFO in it."""
    top = tempfile.mkdtemp(prefix="warren-console-test-")
    d = os.path.join(top, "console")
    os.makedirs(os.path.join(d, "assets"))
    os.makedirs(os.path.join(d, "dir"))
    with open(os.path.join(top, "secret.txt"), "w") as f:
        f.write(SECRET)
    files = {"index.html": INDEX, "assets/index-AbC_e-12.js": SCRIPT,
             "assets/plain.css": "body{}", "favicon.svg": "<svg/>", ".hidden": SECRET,
             "dir/inner.txt": "inner"}
    for name, text in files.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    os.symlink(os.path.join(top, "secret.txt"), os.path.join(d, "link.js"))
    os.symlink(top, os.path.join(d, "up"))
    os.symlink("/etc", os.path.join(d, "etc"))
    os.mkfifo(os.path.join(d, "fifo.js"))
    daemon = Daemon("--console-dir", d).start()
    try:
        yield daemon
    finally:
        daemon.cleanup()
        shutil.rmtree(top, ignore_errors=True)


def test_the_index_and_the_app_files_need_no_key_and_carry_the_security_headers(console):
    status, h, body = raw(console, "GET", "/console")
    assert status == 301 and h["location"] == "/console/"
    status, h, body = raw(console, "GET", "/console/")
    assert status == 200 and body.decode() == INDEX
    assert h["content-type"] == "text/html; charset=utf-8"
    assert h["cache-control"] == "no-cache"
    assert h["x-content-type-options"] == "nosniff"
    assert h["x-frame-options"] == "DENY"
    csp = h["content-security-policy"]
    for part in ("default-src 'none'", "script-src 'self'", "connect-src 'self'",
                 "frame-ancestors 'none'", "base-uri 'none'"):
        assert part in csp, csp
    assert "unsafe-eval" not in csp and "script-src 'self' 'unsafe-inline'" not in csp
    # A hashed asset is cached for good; others are revalidated; each has its type.
    status, h, body = raw(console, "GET", "/console/assets/index-AbC_e-12.js")
    assert (status, body.decode()) == (200, SCRIPT)
    assert h["content-type"] == "text/javascript; charset=utf-8"
    assert h["cache-control"] == "public, max-age=31536000, immutable"
    etag = h["etag"]
    status, h, body = raw(console, "GET", "/console/assets/index-AbC_e-12.js", {"If-None-Match": etag})
    assert status == 304 and body == b""
    status, h, _ = raw(console, "GET", "/console/assets/plain.css")
    assert (status, h["content-type"], h["cache-control"]) == (200, "text/css; charset=utf-8", "no-cache")
    status, h, _ = raw(console, "GET", "/console/favicon.svg")
    assert (status, h["content-type"]) == (200, "image/svg+xml")
    status, h, body = raw(console, "HEAD", "/console/")
    assert status == 200 and h["content-length"] == str(len(INDEX)) and body == b""
    status, h, _ = raw(console, "POST", "/console/")
    assert status == 405 and h["allow"] == "GET, HEAD"


def test_the_apps_own_routes_get_the_index_and_missing_assets_are_404(console):
    for path in ("/console/sandboxes", "/console/sandboxes/", "/console/sandboxes/sb-1/terminal",
                 "/console/templates/python3.11", "/console/dir"):
        status, h, body = raw(console, "GET", path)
        assert (status, body.decode()) == (200, INDEX), path
        assert h["cache-control"] == "no-cache", path
    for path in ("/console/assets/gone-AbCdEf12.js", "/console/gone.js", "/console/assets/x"):
        status, h, body = raw(console, "GET", path)
        assert status == 404, path
        assert json.loads(body)["code"] == "not_found", path
    status, _, body = raw(console, "GET", "/console/dir/inner.txt")
    assert (status, body) == (200, b"inner")


@pytest.mark.parametrize("target", [
    "/console/../secret.txt", "/console/%2e%2e/secret.txt", "/console/%2E%2E/secret.txt",
    "/console/assets/..%2f..%2fsecret.txt", "/console/assets/%2e%2e/%2e%2e/secret.txt",
    "/console/./index.html", "/console//etc/passwd", "/console/assets//index-AbC_e-12.js",
    "/console/dir/..", "/console/..", "/console/a\\..\\secret.txt", "/console/%5c..%5csecret.txt",
    "/console/x%09y", "http://127.0.0.1/console/../secret.txt",
])
def test_a_path_that_could_leave_the_directory_is_refused(console, target):
    status, h, body = raw(console, "GET", target)
    assert status == 400, (target, status, body)
    assert json.loads(body)["code"] == "invalid"
    assert SECRET.encode() not in body


def test_nul_symlinks_fifos_and_hidden_files_are_never_served(console):
    status, _, body = raw(console, "GET", "/console/index.html%00.js")
    assert status == 400 and SECRET.encode() not in body
    for path in ("/console/link.js", "/console/fifo.js", "/console/.hidden", "/console/up/secret.txt",
                 "/console/etc/passwd", "/console/etc/hostname"):
        status, _, body = raw(console, "GET", path)
        # A symlink is followed nowhere: an asset's name is 404; another name is one of the
        # app's routes, which gets the index, never the file.
        assert status in (200, 404), (path, status)
        assert SECRET.encode() not in body and b"root:" not in body, path
        if status == 200:
            assert body.decode() == INDEX, path
    status, _, _ = raw(console, "GET", "/console/link.js")
    assert status == 404
    status, _, _ = raw(console, "GET", "/console/fifo.js")
    assert status == 404


def test_without_the_directory_the_console_says_it_is_not_installed():
    d = Daemon("--console-dir", "/nonexistent/warren-console").start()
    try:
        status, _, body = raw(d, "GET", "/console/")
        assert status == 404
        doc = json.loads(body)
        assert doc["code"] == "not_found" and "not installed" in doc["message"], doc
        assert "/nonexistent/warren-console" in doc["message"]
    finally:
        d.cleanup()


def upgrade(daemon, sid, protocols, key_header=None):
    h = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
         "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode()}
    if protocols is not None:
        h["Sec-WebSocket-Protocol"] = protocols
    if key_header is not None:
        h["Authorization"] = "Bearer " + key_header
    return raw(daemon, "GET", "/v1/sandboxes/%s/terminal" % sid, h)


def test_a_browsers_websocket_names_its_key_in_its_subprotocols(console):
    import warren
    teams = make_teams(console, "console-a", "console-b")
    a_key, b_key = teams["console-a_key"].key, teams["console-b_key"].key
    sb = warren.Sandbox.create(client=teams["console-a"], timeout=120)
    try:
        status, h, _ = upgrade(console, sb.sandbox_id, "warren, warren.key." + a_key)
        assert status == 101 and h["sec-websocket-protocol"] == "warren"
        status, h, _ = upgrade(console, sb.sandbox_id, "warren.key.%s, warren" % a_key)
        assert status == 101 and h["sec-websocket-protocol"] == "warren"
        # A header's key still works, and names no subprotocol.
        status, h, _ = upgrade(console, sb.sandbox_id, None, key_header=a_key)
        assert status == 101 and "sec-websocket-protocol" not in h
        # Refusals: without `warren` offered, a bad key, none, another team's sandbox.
        status, _, body = upgrade(console, sb.sandbox_id, "warren.key." + a_key)
        assert status == 400 and "warren" in json.loads(body)["message"]
        status, _, body = upgrade(console, sb.sandbox_id, "warren, warren.key.wr_" + "0" * 64)
        assert status == 401 and json.loads(body)["message"] == "the API key is not valid"
        status, _, _ = upgrade(console, sb.sandbox_id, "warren")
        assert status == 401
        status, _, _ = upgrade(console, sb.sandbox_id, "warren, warren.key." + b_key)
        assert status == 404
        status, _, _ = upgrade(console, sb.sandbox_id, "warren, warren.key." + "x" * 300)
        assert status == 401
        # Only a WebSocket of a route that takes it: a plain request's subprotocol is no key.
        status, _, _ = raw(console, "GET", "/v1/sandboxes",
                           {"Sec-WebSocket-Protocol": "warren, warren.key." + a_key})
        assert status == 401
    finally:
        sb.kill()
