"""The native desktop and browser API (src/api/desktop.c, src/core/desktop.c) and the Python SDK's
``sb.desktop`` / ``sb.browser``, on real sandboxes of the `desktop` template
(scripts/templates/desktop.sh): Xvfb + XFCE started by the daemon, screenshots decoded, the
pointer moved, text typed into a real window and read back from a file, windows listed, bad
input refused with 4xx JSON errors, and the CDP endpoint (json/version rewritten, the
WebSocket proxied to Chromium inside). Sandboxes here have no internet (conftest's daemons).
"""

import base64
import hashlib
import json
import os
import socket
import struct
import time
import zlib

import pytest

import warren
from conftest import Daemon, delete_all, template_dir, wait_clean


# One desktop sandbox serves the module's tests (its XFCE session takes seconds to start), so
# conftest's check for leftovers after every test is made once, after the module.
@pytest.fixture(autouse=True)
def leftovers():
    yield


@pytest.fixture(scope="module", autouse=True)
def module_leftovers():
    yield
    left = wait_clean()
    assert not any(left.values()), "left behind: %r" % left


@pytest.fixture(scope="module")
def daemon():
    template_dir("desktop")
    d = Daemon(templates=("desktop",)).start()
    yield d
    try:
        delete_all(d)
    finally:
        d.cleanup()


@pytest.fixture(scope="module")
def client(daemon):
    c = daemon.client()
    yield c
    c.close()


@pytest.fixture(scope="module")
def sb(client):
    s = warren.Sandbox.create(client=client, template="desktop", timeout=600)
    info = s.desktop.start()
    assert info == {"running": True, "display": ":0", "width": 1024, "height": 768}
    yield s
    try:
        s.kill()
    except warren.NotFoundError:
        pass


def png_size(data):
    """Width and height from the IHDR of a PNG, and check the PNG decodes (every IDAT)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:16]
    assert data[12:16] == b"IHDR"
    w, h = struct.unpack(">II", data[16:24])
    depth, ctype = data[24], data[25]
    idat, i = b"", 8
    while i < len(data):
        n = struct.unpack(">I", data[i:i + 4])[0]
        kind = data[i + 4:i + 8]
        if kind == b"IDAT":
            idat += data[i + 8:i + 8 + n]
        i += 12 + n
    channels = {2: 3, 6: 4, 0: 1, 4: 2}[ctype]
    raw = zlib.decompress(idat)
    assert depth == 8 and len(raw) == h * (1 + w * channels)
    return w, h


def api(client, method, path, body=None, **kw):
    return client.request(method, path, json_body=body if body is not None else warren.client.UNSET,
                          check=False, **kw)


def test_info_and_start_idempotent(sb, client):
    assert sb.desktop.info() == {"running": True, "display": ":0", "width": 1024, "height": 768}
    # A second start (another size) leaves the running display as it is.
    assert sb.desktop.start(width=800, height=600)["width"] == 1024
    procs = [" ".join(p.cmd) if hasattr(p, "cmd") else str(p) for p in sb.commands.list()]
    assert any("Xvfb" in p for p in procs), procs
    assert any("startxfce4" in p for p in procs), procs


def test_screenshot_is_png_of_screen(sb):
    assert png_size(sb.desktop.screenshot()) == (1024, 768)
    assert png_size(sb.desktop.screenshot(cursor=True)) == (1024, 768)


def test_pointer(sb):
    assert sb.desktop.move(100, 200) == (100, 200)
    assert sb.desktop.cursor() == (100, 200)
    assert sb.desktop.click(300, 310) == (300, 310)
    assert sb.desktop.scroll("down", 2) == (300, 310)
    assert sb.desktop.drag((10, 10), (40, 50)) == (40, 50)
    # Beyond the screen: xdotool clamps to it.
    x, y = sb.desktop.move(5000, 5000)
    assert (x, y) == (1023, 767)


def test_typed_text_arrives(sb):
    sb.files.write("/tmp/typed.sh", "cat > /tmp/typed\n")
    sb.commands.run("xfce4-terminal --disable-server --title=typing-here -x sh /tmp/typed.sh",
                    background=True)
    win = None
    for _ in range(150):
        win = [w for w in sb.desktop.windows() if w.title == "typing-here"]
        if win:
            break
        time.sleep(0.1)
    assert win, sb.desktop.windows()
    for _ in range(50):
        if [w for w in sb.desktop.windows() if w.title == "typing-here" and w.focused]:
            break
        time.sleep(0.1)
    assert win[0].window_class.lower().startswith("xfce4-terminal"), win
    sb.desktop.type("hello world\t'$(x)\"\n")
    sb.desktop.type("second")
    sb.desktop.key("enter")
    sb.desktop.key("ctrl", "d")
    for _ in range(100):
        r = sb.commands.run("cat /tmp/typed 2>/dev/null", check=False)
        if r.stdout == "hello world\t'$(x)\"\nsecond\n":
            break
        time.sleep(0.1)
    assert r.stdout == "hello world\t'$(x)\"\nsecond\n"


def test_windows_shape(sb, client):
    r = api(client, "GET", "/v1/sandboxes/%s/desktop/windows" % sb.id)
    assert r.status == 200
    ws = r.json()["windows"]
    assert isinstance(ws, list)
    for w in ws:
        assert set(w) == {"id", "title", "class", "focused"} and w["id"].isdigit()


@pytest.mark.parametrize("path,body,want", [
    ("mouse", {"action": "fly"}, "action"),
    ("mouse", {}, "action"),
    ("mouse", {"action": "move"}, "x"),
    ("mouse", {"action": "move", "x": -1, "y": 5}, "x"),
    ("mouse", {"action": "move", "x": 1.5, "y": 5}, "x"),
    ("mouse", {"action": "move", "x": "1", "y": 5}, "x"),
    ("mouse", {"action": "move", "x": 99999, "y": 5}, "x"),
    ("mouse", {"action": "click", "x": 1}, "together"),
    ("mouse", {"action": "click", "button": "thumb"}, "button"),
    ("mouse", {"action": "scroll", "direction": "left"}, "direction"),
    ("mouse", {"action": "scroll", "amount": 0}, "amount"),
    ("mouse", {"action": "drag", "x": 1, "y": 1}, "to_x"),
    ("mouse", {"action": "click", "to_x": 1}, "to_x"),
    ("mouse", {"action": "move", "x": 1, "y": 1, "extra": 1}, "extra"),
    ("keyboard", {}, "text"),
    ("keyboard", {"text": "a", "keys": ["a"]}, "text"),
    ("keyboard", {"text": ""}, "text"),
    ("keyboard", {"text": 5}, "text"),
    ("keyboard", {"text": "a\u0000b"}, "NUL"),
    ("keyboard", {"text": "bell\u0007"}, "control"),
    ("keyboard", {"text": "x" * 20000}, "text"),
    ("keyboard", {"keys": []}, "keys"),
    ("keyboard", {"keys": "ctrl"}, "keys"),
    ("keyboard", {"keys": ["ctrl", 5]}, "keys"),
    ("keyboard", {"keys": ["ctrl+c"]}, "ctrl+c"),
    ("keyboard", {"keys": ["$(reboot)"]}, "reboot"),
    ("keyboard", {"keys": ["a b"]}, "a b"),
    ("keyboard", {"keys": ["a"] * 9}, "keys"),
    ("start", {"width": 0}, "width"),
    ("start", {"height": 100000}, "height"),
    ("start", {"dpi": "96"}, "dpi"),
    ("start", {"depth": 24}, "depth"),
])
def test_bad_input_is_400(sb, client, path, body, want):
    r = api(client, "POST", "/v1/sandboxes/%s/desktop/%s" % (sb.id, path), body)
    assert r.status == 400, (r.status, r.body)
    j = r.json()
    assert j["code"] == "invalid" and want in j["message"], j


def test_bad_query_and_methods(sb, client):
    r = api(client, "GET", "/v1/sandboxes/%s/desktop/screenshot?cursor=maybe" % sb.id)
    assert r.status == 400 and r.json()["code"] == "invalid"
    r = api(client, "DELETE", "/v1/sandboxes/%s/desktop/mouse" % sb.id)
    assert r.status == 405
    r = api(client, "GET", "/v1/sandboxes/nosuch/desktop")
    assert r.status == 404 and r.json()["code"] == "not_found"
    # Not a WebSocket: a plain GET of /cdp says what it is.
    r = api(client, "GET", "/v1/sandboxes/%s/cdp" % sb.id)
    assert r.status == 400 and "WebSocket" in r.json()["message"]


def test_other_key_names_and_punctuation(sb):
    # Keysyms, E2B's names, single characters, F keys: all accepted (pressed in whatever has
    # focus; the terminal of the test above has ended).
    sb.desktop.key("shift")
    sb.desktop.key(["ctrl", "alt"])
    sb.desktop.key("F5")
    sb.desktop.key("/")
    sb.desktop.key("Escape")


def test_no_desktop_running(client):
    s = warren.Sandbox.create(client=client, template="desktop", timeout=120)
    try:
        assert s.desktop.info() == {"running": False, "display": ":0", "width": 0, "height": 0}
        with pytest.raises(warren.ConflictError) as e:
            s.desktop.screenshot()
        assert "not running" in str(e.value)
        with pytest.raises(warren.ConflictError):
            s.desktop.move(1, 1)
        with pytest.raises(warren.ConflictError) as e:
            s.browser.version()
        assert "browser/start" in str(e.value)
    finally:
        s.kill()


def test_base_template_has_no_desktop(client):
    s = warren.Sandbox.create(client=client, timeout=60)  # the busybox test image
    try:
        with pytest.raises(warren.WarrenError) as e:
            s.desktop.start()
        assert e.value.status == 409 and "desktop" in str(e.value), e.value
    finally:
        s.kill()


def ws_connect(port, path, key):
    """A WebSocket client handshake; returns the socket after the 101."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    k = base64.b64encode(os.urandom(16)).decode()
    s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n\r\n"
               % (path, port, k, key)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        assert chunk, head
        head += chunk
    assert head.startswith(b"HTTP/1.1 101"), head
    want = base64.b64encode(hashlib.sha1((k + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
    assert b"Sec-WebSocket-Accept: " + want in head, head
    return s, head.split(b"\r\n\r\n", 1)[1]


def ws_send_text(s, text):
    data = text.encode()
    mask = os.urandom(4)
    hdr = bytes([0x81])
    n = len(data)
    hdr += bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n)
    s.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))


def ws_recv_text(s, buf):
    while True:
        if len(buf) >= 2:
            n, off = buf[1] & 0x7F, 2
            if n == 126:
                n, off = struct.unpack(">H", buf[2:4])[0], 4
            elif n == 127:
                n, off = struct.unpack(">Q", buf[2:10])[0], 10
            if len(buf) >= off + n:
                return buf[off:off + n].decode(), buf[off + n:]
        chunk = s.recv(65536)
        assert chunk
        buf += chunk


def test_browser_cdp(sb, client, daemon):
    url = sb.browser.start()
    assert url == "ws://127.0.0.1:%d/v1/sandboxes/%s/cdp" % (daemon.port, sb.id) or \
        url.endswith("/v1/sandboxes/%s/cdp" % sb.id), url
    assert sb.browser.start() == url  # idempotent
    # Over TCP with a key: the rewritten URL names this daemon's address.
    key = daemon.client().request("POST", "/v1/keys", json_body={"team": "t-desktop", "name": "x"}).json()
    tcp = warren.Client(daemon.tcp_url, daemon.admin_key)
    v = tcp.request("GET", "/v1/sandboxes/%s/cdp/json/version" % sb.id).json()
    assert v["webSocketDebuggerUrl"] == "ws://127.0.0.1:%d/v1/sandboxes/%s/cdp" % (daemon.port, sb.id)
    assert v["Browser"].startswith("Chrome/")
    # Playwright's form, with a trailing slash.
    assert tcp.request("GET", "/v1/sandboxes/%s/cdp/json/version/" % sb.id).json()["Browser"] == v["Browser"]
    # Another team's key does not see the sandbox.
    other = warren.Client(daemon.tcp_url, key.get("key") or key.get("secret"))
    assert other.request("GET", "/v1/sandboxes/%s/cdp/json/version" % sb.id, check=False).status == 404
    # The WebSocket reaches the browser endpoint: Browser.getVersion answers.
    s, rest = ws_connect(daemon.port, "/v1/sandboxes/%s/cdp" % sb.id, daemon.admin_key)
    try:
        ws_send_text(s, json.dumps({"id": 1, "method": "Browser.getVersion"}))
        msg, rest = ws_recv_text(s, rest)
        j = json.loads(msg)
        assert j["id"] == 1 and j["result"]["product"] == v["Browser"], j
        ws_send_text(s, json.dumps({"id": 2, "method": "Target.getTargets"}))
        msg, rest = ws_recv_text(s, rest)
        assert "targetInfos" in json.loads(msg)["result"]
    finally:
        s.close()
    # A browser on the desktop shows a window.
    for _ in range(100):
        if any("chromium" in w.window_class.lower() for w in sb.desktop.windows()):
            break
        time.sleep(0.1)
    assert any("chromium" in w.window_class.lower() for w in sb.desktop.windows()), sb.desktop.windows()
    tcp.close()
    other.close()


def test_concurrent_starts_make_one_desktop(client):
    import threading
    s = warren.Sandbox.create(client=client, template="desktop", timeout=120)
    try:
        got = []
        ts = [threading.Thread(target=lambda: got.append(s.desktop.start(width=800, height=600)))
              for _ in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert got == [{"running": True, "display": ":0", "width": 800, "height": 600}] * 3
        r = s.commands.run("pgrep -c -x Xvfb; pgrep -c -x xfce4-session; pgrep -c -x xfwm4")
        assert r.stdout.split() == ["1", "1", "1"], r.stdout
        assert png_size(s.desktop.screenshot()) == (800, 600)
    finally:
        s.kill()
