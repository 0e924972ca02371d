"""OCI images through the real daemon: docker-archive and oci-archive imports, pulls from local
registries (Debian's docker-registry, started here on loopback: open, htpasswd, and Bearer
tokens), gzip and zstd layers, an index resolved to linux/amd64, whiteouts and opaque
directories, and the faults (404, 401, a tampered blob, bad and unsafe archives), after each of
which nothing may be left: no layer directory, no temporary file, no row.

The image is built here with Debian's tools from busybox-static, no network: umoci makes the
first layer from a directory; the second is a tar written here (whiteout, opaque directory,
owners, links) and added with `umoci raw add-layer`; skopeo exports and pushes it."""

import gzip
import hashlib
import http.server
import io
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import tarfile
import tempfile
import threading
import time
import urllib.request

import pytest

from conftest import Daemon

BUSYBOX = "/bin/busybox"


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, timeout=120, **kw)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tar_bytes(entries):
    """An uncompressed tar of (TarInfo, data or None)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for ti, data in entries:
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def ti(name, type=tarfile.REGTYPE, data=b"", mode=0o644, uid=0, gid=0, link=""):
    t = tarfile.TarInfo(name)
    t.type = type
    t.mode = mode
    t.uid, t.gid = uid, gid
    t.mtime = 1700000000
    t.linkname = link
    if type == tarfile.REGTYPE:
        t.size = len(data)
        return t, data
    return t, None


# The second layer: deletes /data/old.txt (whiteout), replaces /opq (opaque), adds files with
# owners, a symlink and a hard link.
LAYER2 = [
    ti("data/", tarfile.DIRTYPE, mode=0o755),
    ti("data/.wh.old.txt"),
    ti("data/new.txt", data=b"layer2\n"),
    ti("data/owned.txt", data=b"mine\n", mode=0o640, uid=1234, gid=5678),
    ti("data/link", tarfile.SYMTYPE, link="new.txt"),
    ti("data/hard", tarfile.LNKTYPE, link="data/new.txt"),
    ti("opq/", tarfile.DIRTYPE, mode=0o755),
    ti("opq/.wh..wh..opq"),
    ti("opq/c.txt", data=b"new\n"),
]

CHECK = (
    "cat /data/keep.txt /data/new.txt; test -e /data/old.txt && echo old-exists; ls /opq; "
    "stat -c '%u:%g %a' /data/owned.txt; readlink /data/link; stat -c %h /data/new.txt; "
    "echo $HELLO; pwd"
)
EXPECTED = "keep\nlayer2\nc.txt\n1234:5678 640\nnew.txt\n2\nworld\n/data\n"


@pytest.fixture(scope="module")
def work():
    d = tempfile.mkdtemp(prefix="warren-oci-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def image(work):
    """An OCI layout <work>/oci with tag `img`: two layers and a config; archives of it."""
    lay = os.path.join(work, "oci")
    sh("umoci", "init", "--layout", lay)
    sh("umoci", "new", "--image", lay + ":img")
    bundle = os.path.join(work, "bundle")
    sh("umoci", "unpack", "--image", lay + ":img", bundle)
    r = os.path.join(bundle, "rootfs")
    for p in ("bin", "sbin", "usr/bin", "usr/sbin", "etc", "tmp", "root", "proc", "dev", "sys",
              "data", "opq"):
        os.makedirs(os.path.join(r, p), exist_ok=True)
    os.chmod(os.path.join(r, "tmp"), 0o1777)
    shutil.copy(BUSYBOX, os.path.join(r, "bin/busybox"))
    for applet in ("sh", "cat", "ls", "stat", "readlink", "echo", "test", "pwd", "env", "id"):
        os.symlink("busybox", os.path.join(r, "bin", applet))
    with open(os.path.join(r, "etc/passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")
    with open(os.path.join(r, "etc/group"), "w") as f:
        f.write("root:x:0:\nnogroup:x:65534:\n")
    for name, text in (("data/keep.txt", "keep\n"), ("data/old.txt", "old\n"),
                       ("opq/a.txt", "a\n"), ("opq/b.txt", "b\n")):
        with open(os.path.join(r, name), "w") as f:
            f.write(text)
    sh("umoci", "repack", "--image", lay + ":img", bundle)
    l2 = os.path.join(work, "layer2.tar")
    with open(l2, "wb") as f:
        f.write(tar_bytes(LAYER2))
    sh("umoci", "raw", "add-layer", "--image", lay + ":img", l2)
    sh("umoci", "config", "--image", lay + ":img", "--config.env", "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
       "--config.env", "HELLO=world", "--config.workingdir", "/data", "--config.cmd", "/bin/sh",
       "--os", "linux", "--architecture", "amd64")
    oci_tar = os.path.join(work, "img-oci.tar")
    docker_tar = os.path.join(work, "img-docker.tar")
    sh("skopeo", "copy", "-q", "oci:%s:img" % lay, "oci-archive:%s:img" % oci_tar)
    sh("skopeo", "copy", "-q", "oci:%s:img" % lay, "docker-archive:%s:test/img:1" % docker_tar)
    # The same image with zstd layers (skopeo reuses a gzip blob the registry has: recompress
    # into a layout first).
    zlay = os.path.join(work, "oci-zstd")
    sh("skopeo", "copy", "-q", "--dest-compress-format", "zstd", "oci:%s:img" % lay,
       "oci:%s:img" % zlay)
    return dict(layout=lay, zstd=zlay, oci_tar=oci_tar, docker_tar=docker_tar)


class Registry:
    """docker-registry on 127.0.0.1 with a temporary config and storage."""

    def __init__(self, work, name, auth=None):
        self.port = free_port()
        self.dir = os.path.join(work, "registry-" + name)
        os.makedirs(self.dir)
        cfg = {
            "version": 0.1,
            "log": {"level": "info"},
            "storage": {"filesystem": {"rootdirectory": os.path.join(self.dir, "data")},
                        "delete": {"enabled": True}},
            "http": {"addr": "127.0.0.1:%d" % self.port, "secret": "test-only"},
        }
        if auth:
            cfg["auth"] = auth
        self.config = os.path.join(self.dir, "config.yml")
        with open(self.config, "w") as f:
            json.dump(cfg, f)  # JSON is YAML
        self.log = open(os.path.join(self.dir, "log"), "wb")
        self.proc = subprocess.Popen(["docker-registry", "serve", self.config],
                                     stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert self.proc.poll() is None, "docker-registry exited"
                assert time.monotonic() < deadline, "docker-registry did not listen"
                time.sleep(0.05)

    @property
    def host(self):
        return "127.0.0.1:%d" % self.port

    def push(self, src, ref, *extra):
        sh("skopeo", "copy", "-q", "--dest-tls-verify=false", *extra, src,
           "docker://%s/%s" % (self.host, ref))

    def blob_path(self, digest):
        h = digest.split(":", 1)[1]
        return os.path.join(self.dir, "data/docker/registry/v2/blobs/sha256", h[:2], h, "data")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def registry(work, image):
    r = Registry(work, "open")
    r.push("oci:%s:img" % image["layout"], "test/img:1")
    r.push("oci:%s:img" % image["layout"], "test/img:docker", "--format", "v2s2")
    r.push("oci:%s:img" % image["zstd"], "test/img:zstd")
    yield r
    r.stop()


@pytest.fixture(scope="module")
def d():
    d = Daemon().start()
    yield d
    d.cleanup()


@pytest.fixture
def c(d):
    c = d.client()
    yield c
    c.close()


# ---- helpers --------------------------------------------------------------------------------


def layer_dirs(d):
    return sorted(x for x in os.listdir(os.path.join(d.state, "layers")) if not x.startswith("."))


def tmp_entries(d, wait=5.0):
    """What is under layers/.tmp, once a collection on a worker (which deletes what it moved
    there) had time to finish."""
    deadline = time.monotonic() + wait
    while True:
        left = os.listdir(os.path.join(d.state, "layers", ".tmp"))
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def rows(d):
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(d.state, "warren.db"), uri=True)
    try:
        return (db.execute("SELECT count(*) FROM layers").fetchone()[0],
                db.execute("SELECT count(*) FROM images").fetchone()[0])
    finally:
        db.close()


class Nothing:
    """Nothing new in the store: layer directories, temporary entries, rows."""

    def __init__(self, d):
        self.d = d

    def __enter__(self):
        self.before = (layer_dirs(self.d), rows(self.d))
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            assert tmp_entries(self.d) == []
            assert (layer_dirs(self.d), rows(self.d)) == self.before


def import_file(c, path, name, status=None, replace=False):
    with open(path, "rb") as f:
        body = f.read()
    return import_bytes(c, body, name, status, replace)


def import_bytes(c, body, name, status=None, replace=False):
    q = {"name": name}
    if replace:
        q["replace"] = "true"
    r = c.request("POST", "/v1/templates/import", query=q, data=body,
                  headers={"Content-Type": "application/x-tar"}, check=False, timeout=120)
    if status is not None:
        assert r.status == status, (r.status, r.body)
    return r


def pull(c, image, name, status=None, **kw):
    body = dict(name=name, image=image, insecure=True, **kw)
    r = c.request("POST", "/v1/templates/pull", json_body=body, check=False, timeout=120)
    if status is not None:
        assert r.status == status, (r.status, r.body)
    return r


def run_check(c, template):
    r = c.request("POST", "/v1/sandboxes", json_body={"template": template, "timeout": 60})
    sid = r.json()["id"]
    try:
        e = c.request("POST", "/v1/sandboxes/%s/exec" % sid,
                      json_body={"cmd": ["/bin/sh", "-c", CHECK]}).json()
        assert e["exit_code"] == 0 and e["stdout"] == EXPECTED, e
    finally:
        c.request("DELETE", "/v1/sandboxes/" + sid, check=False)


def delete_template(c, name):
    c.request("DELETE", "/v1/templates/" + name, check=False)


# ---- imports --------------------------------------------------------------------------------


def test_import_oci_and_docker_archives(d, c, image):
    t = import_file(c, image["oci_tar"], "oci-imp", 201).json()
    assert t["name"] == "oci-imp" and t["kind"] == "template" and t["layers"] == 2
    assert t["size_bytes"] > 0 and t["in_use"] == 0 and not t["created_at"].startswith("1970")
    run_check(c, "oci-imp")
    # The same image as a docker-archive (uncompressed layers): the same layers in the store.
    before = layer_dirs(d)
    t = import_file(c, image["docker_tar"], "docker-imp", 201).json()
    assert t["layers"] == 2
    assert layer_dirs(d) == before
    run_check(c, "docker-imp")
    assert c.request("GET", "/v1/templates/docker-imp").json()["layers"] == 2
    # The name is taken; replace says so.
    with Nothing(d):
        r = import_file(c, image["oci_tar"], "oci-imp", 409)
        assert r.json()["code"] == "conflict"
    import_file(c, image["docker_tar"], "oci-imp", 201, replace=True)
    run_check(c, "oci-imp")
    for n in ("oci-imp", "docker-imp"):
        delete_template(c, n)
    assert tmp_entries(d) == []


def test_import_leaves_out_empty_and_repeated_layers(d, c, image, work):
    """An image with an empty layer and a layer that comes twice makes a template of each
    non-empty layer once (the topmost copy), which starts (issue #14, item 13)."""
    lay = os.path.join(work, "oci-repeats")
    shutil.copytree(image["layout"], lay)
    empty = os.path.join(work, "empty.tar")
    with open(empty, "wb") as f:
        f.write(tar_bytes([]))
    l2 = os.path.join(work, "layer2.tar")
    sh("umoci", "raw", "add-layer", "--image", lay + ":img", empty)
    sh("umoci", "raw", "add-layer", "--image", lay + ":img", l2)
    arch = os.path.join(work, "img-repeats.tar")
    sh("skopeo", "copy", "-q", "oci:%s:img" % lay, "oci-archive:%s:img" % arch)
    t = import_file(c, arch, "repeats", 201).json()
    assert t["layers"] == 2, t
    run_check(c, "repeats")
    delete_template(c, "repeats")
    assert tmp_entries(d) == []


def test_import_bad_archives(d, c, image):
    with open(image["oci_tar"], "rb") as f:
        good = f.read()
    with Nothing(d):
        r = import_bytes(c, good[: len(good) // 2], "trunc", 422)
        assert r.json()["code"] == "bad_content"
        import_bytes(c, b"not a tar at all" * 100, "garbage", 422)
        import_bytes(c, b"", "empty", 422)
        # A tar, but no image in it.
        import_bytes(c, tar_bytes([ti("hello.txt", data=b"hi")]), "noimage", 422)
        # Bad names and requests.
        import_bytes(c, good, "bad/name", 400)
        r = c.request("POST", "/v1/templates/import", data=good, check=False)
        assert r.status == 400
    for n in ("trunc", "garbage", "empty", "noimage"):
        assert c.request("GET", "/v1/templates/" + n, check=False).status == 404


def oci_archive(layers, config=None, tamper=None):
    """An oci-archive written here: layers are tars (gzipped here); tamper(i, blob) may replace a
    layer's bytes after its digest was taken."""
    blobs = {}

    def add(data):
        dg = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[dg] = data
        return dg

    descs = []
    for i, raw in enumerate(layers):
        gz = gzip.compress(raw, mtime=0)
        dg = add(gz)
        if tamper:
            blobs[dg] = tamper(i, gz)
        descs.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": dg,
                      "size": len(gz)})
    cfg = json.dumps(config or {"architecture": "amd64", "os": "linux",
                                "config": {"Env": ["A=b"]},
                                "rootfs": {"type": "layers", "diff_ids": []}}).encode()
    cd = add(cfg)
    man = json.dumps({"schemaVersion": 2,
                      "mediaType": "application/vnd.oci.image.manifest.v1+json",
                      "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                 "digest": cd, "size": len(cfg)},
                      "layers": descs}).encode()
    md = add(man)
    index = json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md,
         "size": len(man)}]}).encode()
    entries = [ti("oci-layout", data=b'{"imageLayoutVersion":"1.0.0"}'),
               ti("index.json", data=index), ti("blobs/", tarfile.DIRTYPE, mode=0o755),
               ti("blobs/sha256/", tarfile.DIRTYPE, mode=0o755)]
    for dg, data in blobs.items():
        entries.append(ti("blobs/sha256/" + dg.split(":")[1], data=data))
    return tar_bytes(entries)


def test_import_digest_mismatch_and_unsafe_layers(d, c, tmp_path):
    ok = tar_bytes([ti("a.txt", data=b"a\n")])
    other = gzip.compress(tar_bytes([ti("b.txt", data=b"evil\n")]), mtime=0)
    with Nothing(d):
        # The first layer is fine and unpacked; the second's blob is not what the manifest says.
        r = import_bytes(c, oci_archive([ok, ok + b"\0" * 1024],
                                        tamper=lambda i, b: other if i == 1 else b), "tampered", 422)
        assert "digest" in r.json()["message"], r.json()
        outside = tmp_path / "outside"
        outside.mkdir()
        for bad in (
            [ti("../escape.txt", data=b"x")],
            [ti("/abs.txt", data=b"x")],
            # A symlink out of the tree, then a file through it.
            [ti("evil", tarfile.SYMTYPE, link=str(outside)), ti("evil/x.txt", data=b"x")],
            # A hard link to a file outside, to a directory, to nothing.
            [ti("h", tarfile.LNKTYPE, link="../../../../etc/passwd")],
            [ti("d/", tarfile.DIRTYPE, mode=0o755), ti("h", tarfile.LNKTYPE, link="d")],
            [ti("h", tarfile.LNKTYPE, link="missing")],
            # A whiteout of nothing nameable.
            [ti("dir/.wh..", data=b"")],
        ):
            r = import_bytes(c, oci_archive([ok, tar_bytes(bad)]), "unsafe", 422)
            assert r.json()["code"] == "bad_content", r.json()
        assert os.listdir(outside) == []
    assert c.request("GET", "/v1/templates/tampered", check=False).status == 404


# ---- pulls --------------------------------------------------------------------------------


def test_pull_gzip_zstd_docker_and_index(d, c, registry):
    for tag in ("1", "zstd", "docker"):
        name = "pulled-" + tag
        t = pull(c, "%s/test/img:%s" % (registry.host, tag), name, 201).json()
        assert t["layers"] == 2 and t["kind"] == "template"
        run_check(c, name)
    # An index with two platforms: linux/amd64 is the one pulled.
    def manifest(tag):
        req = urllib.request.Request(
            "http://%s/v2/test/img/manifests/%s" % (registry.host, tag),
            headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
        with urllib.request.urlopen(req) as r:
            body = r.read()
        return {"mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": "sha256:" + hashlib.sha256(body).hexdigest(), "size": len(body)}
    amd, other = manifest("1"), manifest("zstd")
    index = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                        "manifests": [dict(other, platform={"os": "linux", "architecture": "arm64"}),
                                      dict(amd, platform={"os": "linux", "architecture": "amd64"})]})
    req = urllib.request.Request("http://%s/v2/test/img/manifests/multi" % registry.host,
                                 data=index.encode(), method="PUT",
                                 headers={"Content-Type": "application/vnd.oci.image.index.v1+json"})
    urllib.request.urlopen(req).close()
    pull(c, "%s/test/img:multi" % registry.host, "pulled-multi", 201)
    run_check(c, "pulled-multi")
    # By digest.
    pull(c, "%s/test/img@%s" % (registry.host, amd["digest"]), "pulled-digest", 201)
    with Nothing(d):
        pull(c, "%s/test/img:1" % registry.host, "pulled-1", 409)
    for n in ("1", "zstd", "docker", "multi", "digest"):
        delete_template(c, "pulled-" + n)


def test_a_compose_services_image_is_pulled_once_into_a_template(d, c, registry):
    """A Compose service's image that is an OCI reference (docs/compose.md): pulled into a
    template of the team's the first time, found there the next."""
    ref = "%s/test/img:1" % registry.host
    f = ('services:\n  a:\n    image: "%s"\n'
         '    command: ["sh", "-c", "echo pulled $$HELLO in $$(pwd)"]\n' % ref)
    for _ in range(2):
        r = c.request("POST", "/v1/sandboxes", timeout=120, json_body={
            "compose": {"file": f, "pull": {"insecure": True}}, "timeout": 60})
        sid = r.json()["id"]
        try:
            deadline = time.monotonic() + 30
            while True:
                s = c.request("GET", "/v1/sandboxes/%s/services" % sid).json()["services"][0]
                if s["state"] == "exited":
                    break
                assert time.monotonic() < deadline, s
                time.sleep(0.1)
            assert s["image"] == ref
            log = c.request("GET", "/v1/sandboxes/%s/services/a/logs" % sid).body
            assert log.startswith(b"pulled world in /data\n"), log  # the image's env and cwd
        finally:
            c.request("DELETE", "/v1/sandboxes/" + sid, check=False)
    pulled = [t["name"] for t in c.request("GET", "/v1/templates").json()["templates"]
              if t["name"].startswith("pulled-") and len(t["name"]) == 23]
    assert len(pulled) == 1, pulled
    with open(os.path.join(d.dir, "warrend.log")) as lf:
        assert lf.read().count("pulling `%s`" % ref) == 1
    # A registry that answers 404: the create fails naming the service and the reference.
    r = c.request("POST", "/v1/sandboxes", check=False, timeout=120, json_body={
        "compose": {"file": f.replace("img:1", "img:nope"), "pull": {"insecure": True}}})
    assert r.status == 404 and "service `a`: pull" in r.json()["message"], r.body
    delete_template(c, pulled[0])


def test_pull_faults(d, c, registry, work, image):
    with Nothing(d):
        r = pull(c, "%s/test/img:nope" % registry.host, "nope", 404)
        assert r.json()["code"] == "not_found"
        pull(c, "%s/test/nothing:1" % registry.host, "nope", 404)
        # Nobody listens there.
        r = pull(c, "127.0.0.1:%d/test/img:1" % free_port(), "nope", 502)
        assert r.json()["code"] == "upstream"
        pull(c, "Bad Ref!", "nope", 400)
        pull(c, "%s/test/img:1" % registry.host, "snap-x", 400)
        r = c.request("POST", "/v1/templates/pull", json_body={"name": "x"}, check=False)
        assert r.status == 400
        r = c.request("POST", "/v1/templates/pull", json_body={"name": "x", "image": 5},
                      check=False)
        assert r.status == 400

    # A tampered blob: an image of its own (one more layer, unique), whose last layer's file in
    # the registry's storage is replaced by another valid gzip tar.
    lay = os.path.join(work, "oci")
    extra = os.path.join(work, "extra.tar")
    with open(extra, "wb") as f:
        f.write(tar_bytes([ti("unique-%d.txt" % os.getpid(), data=os.urandom(64))]))
    sh("umoci", "raw", "add-layer", "--image", lay + ":img", "--tag", "tamper", extra)
    registry.push("oci:%s:tamper" % lay, "test/tamper:1")
    idx = json.load(open(os.path.join(lay, "index.json")))
    man_digest = [m["digest"] for m in idx["manifests"]
                  if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == "tamper"][0]
    man = json.load(open(os.path.join(lay, "blobs/sha256", man_digest.split(":")[1])))
    blob = registry.blob_path(man["layers"][-1]["digest"])
    with open(blob, "wb") as f:
        f.write(gzip.compress(tar_bytes([ti("evil.txt", data=b"evil")])))
    with Nothing(d):
        r = pull(c, "%s/test/tamper:1" % registry.host, "tampered", 422)
        assert "digest" in r.json()["message"], r.json()


class TokenServer:
    """A Bearer token issuer for the `silly` registry: it grants anything and records what was
    asked."""

    def __init__(self):
        self.asked = []
        srv = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                srv.asked.append((self.path, self.headers.get("Authorization")))
                body = json.dumps({"token": "tok-123"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_pull_with_auth(d, c, work, image):
    htpasswd = os.path.join(work, "htpasswd")
    with open(htpasswd, "wb") as f:
        f.write(sh("htpasswd", "-Bbn", "testuser", "testpass").stdout)
    basic = Registry(work, "basic", {"htpasswd": {"realm": "test-realm", "path": htpasswd}})
    tokens = TokenServer()
    silly = Registry(work, "silly", {"silly": {"realm": "http://127.0.0.1:%d/token" % tokens.port,
                                               "service": "silly-registry"}})
    try:
        basic.push("oci:%s:img" % image["layout"], "test/img:1", "--dest-creds",
                   "testuser:testpass")
        ref = "%s/test/img:1" % basic.host
        with Nothing(d):
            r = pull(c, ref, "authed", 502)
            assert r.json()["code"] == "upstream" and "credentials" in r.json()["message"]
            r = pull(c, ref, "authed", 502, username="testuser", password="wrong")
            assert r.json()["code"] == "upstream" and "401" in r.json()["message"], r.json()
        pull(c, ref, "authed", 201, username="testuser", password="testpass")
        run_check(c, "authed")
        delete_template(c, "authed")

        silly.push("oci:%s:img" % image["layout"], "test/img:1")
        tokens.asked.clear()
        pull(c, "%s/test/img:1" % silly.host, "tokened", 201, username="u", password="p")
        paths = [p for p, _ in tokens.asked]
        assert any("scope=repository%3Atest%2Fimg%3Apull" in p for p in paths), paths
        assert all("service=silly-registry" in p for p in paths), paths
        assert all(a and a.startswith("Basic ") for _, a in tokens.asked), tokens.asked
        delete_template(c, "tokened")
    finally:
        basic.stop()
        silly.stop()
        tokens.stop()


# ---- the CLI ------------------------------------------------------------------------------


def test_cli_template_import_and_pull(d, c, image, registry, tmp_path):
    from conftest import warren

    env = {"WARREN_API_URL": d.url, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    r = warren("template", "import", image["oci_tar"], "--name", "cli-imp", "-o", "json", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["layers"] == 2
    with open(image["docker_tar"], "rb") as f:
        r = warren("template", "import", "-", "--name", "cli-imp", "--replace", input=f.read(),
                   env=env)
    assert r.returncode == 0 and r.stdout.startswith(b"cli-imp: 2 layers"), r
    r = warren("template", "import", image["oci_tar"], "--name", "cli-imp", env=env)
    assert r.returncode != 0 and b"exists" in r.stderr, r
    r = warren("template", "pull", "%s/test/img:zstd" % registry.host, "--name", "cli-pull",
               "--insecure", env=env)
    assert r.returncode == 0 and r.stdout.startswith(b"cli-pull: 2 layers"), r
    run_check(c, "cli-pull")
    r = warren("template", "pull", "%s/test/img:nope" % registry.host, "--name", "cli-nope",
               "--insecure", env=env)
    assert r.returncode != 0 and b"not_found" in r.stderr, r
    r = warren("template", "pull", "x", env=env)
    assert r.returncode == 2, r
    for n in ("cli-imp", "cli-pull"):
        delete_template(c, n)


# ---- the SDK ------------------------------------------------------------------------------


def test_sdk_template_import_and_pull(d, c, image, registry):
    import warren

    t = warren.Template.import_archive(image["oci_tar"], "sdk-imp", client=c)
    assert t.name == "sdk-imp" and t.kind == "template" and t.layers == 2 and t.in_use == 0
    assert t.size_bytes and t.created_at is not None
    with pytest.raises(warren.ConflictError):
        warren.Template.import_archive(image["oci_tar"], "sdk-imp", client=c)
    t = warren.Template.import_archive(image["docker_tar"], "sdk-imp", replace=True, client=c)
    assert t.layers == 2
    with pytest.raises(warren.BadContentError) as e:
        warren.Template.import_archive(BUSYBOX, "sdk-bad", client=c)
    assert e.value.code == "bad_content" and e.value.status == 422
    t = warren.Template.pull("%s/test/img:1" % registry.host, "sdk-pull", insecure=True, client=c)
    assert t.layers == 2
    with warren.Sandbox.create(template="sdk-pull", client=c, timeout=60) as sb:
        assert sb.commands.run("cat /data/new.txt; echo $HELLO").stdout == "layer2\nworld\n"
    with pytest.raises(warren.NotFoundError):
        warren.Template.pull("%s/test/img:nope" % registry.host, "sdk-nope", insecure=True,
                             client=c)
    with pytest.raises(warren.UpstreamError) as e:
        warren.Template.pull("127.0.0.1:%d/a/b:1" % free_port(), "sdk-nope", insecure=True,
                             client=c)
    assert e.value.status == 502
    for n in ("sdk-imp", "sdk-pull"):
        delete_template(c, n)


def test_build_from_a_registry_image(d, c, registry):
    """FROM a registry reference pulls it (once: it is kept as a template) and builds on it."""
    def build(name, text):
        r = c.request("POST", "/v1/templates/build", query={"name": name},
                      data=text.encode(), headers={"Content-Type": "text/plain"},
                      check=False, timeout=120)
        assert r.status == 200, (r.status, r.body)
        return [json.loads(l) for l in r.body.decode().splitlines() if l]

    ref = "%s/test/img:1" % registry.host
    ev = build("from-reg", "FROM %s\nRUN echo built-on-it > /on-top\n" % ref)
    assert ev[-1]["type"] == "done", ev[-1]
    assert ev[0]["type"] == "step" and ev[0]["line"] == 1 and not ev[0]["cached"]
    # The build's template has the image's layers (2) plus its RUN's, and the image's files.
    assert ev[-1]["template"]["layers"] == 3
    run_check(c, "from-reg")
    r = c.request("POST", "/v1/sandboxes", json_body={"template": "from-reg", "timeout": 60})
    sid = r.json()["id"]
    e = c.request("POST", "/v1/sandboxes/%s/exec" % sid,
                  json_body={"cmd": ["/bin/cat", "/on-top"]}).json()
    c.request("DELETE", "/v1/sandboxes/" + sid)
    assert e["stdout"] == "built-on-it\n"
    # Again: FROM comes from the kept template, not a new pull; RUN from the build cache.
    ev = build("from-reg-2", "FROM %s\nRUN echo built-on-it > /on-top\n" % ref)
    assert ev[0]["cached"] and ev[-1]["type"] == "done"
    assert all(e["cached"] for e in ev if e["type"] == "step")
    # An image the registry does not have fails FROM, naming line 1.
    ev = build("from-missing", "FROM %s/test/img:no-such-tag\nRUN true\n" % registry.host)
    assert ev[-1]["type"] == "error" and ev[-1]["step"] == 1 and ev[-1]["line"] == 1, ev[-1]
    assert c.request("GET", "/v1/templates/from-missing", check=False).status == 404
    for t in c.request("GET", "/v1/templates").json()["templates"]:
        if t["name"].startswith("from-"):
            delete_template(c, t["name"])


def test_only_admins_pull_from_private_addresses(d, c, registry):
    """A team's key cannot turn a pull (or a build's FROM) against the daemon's own host or
    network: the registry here is on 127.0.0.1."""
    import warren.admin as admin
    key = admin.create_key("private-%d" % os.getpid(), client=c).key
    team = d.client(key=key, tcp=True)
    try:
        with Nothing(d):
            r = pull(team, "%s/test/img:1" % registry.host, "team-pull")
            assert r.status == 400 and "admin key" in r.json()["message"], r.body
            r = team.request("POST", "/v1/templates/build", query={"name": "team-build"},
                             data=("FROM %s/test/img:1\n" % registry.host).encode(),
                             headers={"Content-Type": "text/plain"}, check=False, timeout=60)
            ev = [json.loads(l) for l in r.body.decode().splitlines() if l]
            assert ev[-1]["type"] == "error" and ev[-1]["line"] == 1
            assert "admin key" in ev[-1]["message"]
        # An address that only resolves to loopback is refused as well.
        r = pull(team, "localhost:%d/test/img:1" % registry.port, "team-pull")
        assert r.status == 400 and "admin key" in r.json()["message"], r.body
    finally:
        team.close()


# ---- shared template names (issue #14, item 2) ------------------------------------------------


def test_no_team_can_take_a_shared_template_name(d, c, image, registry):
    """`base` (a directory template of the host) and a template an admin shared are every
    team's: no team builds, imports, pulls or snapshots over their names, with or without
    replace, nor deletes them; every team's default create (native and E2B) still runs the
    real base."""
    import warren.admin as admin
    from test_build import build
    keys = [admin.create_key("shared-%s-%d" % (t, os.getpid()), client=c) for t in "ab"]
    ta, tb = [d.client(key=k.key, tcp=True) for k in keys]
    evil = "FROM base\nRUN echo replaced > /replaced\n"
    sid = tb.request("POST", "/v1/sandboxes", json_body={"timeout": 60}).json()["id"]

    def refused(name):
        with Nothing(d):
            for replace in (False, True):
                st, body = build(tb, name, evil, replace=replace)
                assert st == 409 and "shared" in body["message"], (name, replace, st, body)
                r = import_file(tb, image["oci_tar"], name, 409, replace=replace)
                assert "shared" in r.json()["message"], r.body
                r = pull(tb, "%s/test/img:1" % registry.host, name, 409, replace=replace)
                assert "shared" in r.json()["message"], r.body
            r = tb.request("POST", "/v1/sandboxes/%s/snapshots" % sid, json_body={"name": name},
                           check=False)
            assert r.status == 409 and "shared" in r.json()["message"], r.body
            r = tb.request("DELETE", "/v1/templates/" + name, check=False)
            assert r.status == 409, r.body

    try:
        refused("base")
        # Every team's default create, and E2B's templateID base, run the real base.
        for cl, key in ((ta, keys[0].key), (tb, keys[1].key), (c, None)):
            made = [cl.request("POST", "/v1/sandboxes", json_body={"timeout": 60}).json()["id"]]
            if key is not None:
                e = cl.request("POST", "/sandboxes", json_body={"templateID": "base", "timeout": 60},
                               headers={"X-API-Key": key}).json()
                made.append(e["sandboxID"])
            for x in made:
                assert cl.request("GET", "/v1/sandboxes/" + x).json()["template"] == "base"
                e = cl.request("POST", "/v1/sandboxes/%s/exec" % x, json_body={
                    "cmd": ["/bin/sh", "-c", "test -e /replaced || echo real"]}).json()
                assert e["stdout"] == "real\n", e
                cl.request("DELETE", "/v1/sandboxes/" + x)
        # A template the admin shares is reserved the same way, and only an admin shares one.
        with Nothing(d):
            r = tb.request("POST", "/v1/templates/import", query={"name": "x", "shared": "true"},
                           data=b"", check=False)
            assert r.status == 403, r.body
            r = tb.request("POST", "/v1/templates/build", query={"name": "x", "shared": "true"},
                           data=b"FROM base\n", headers={"Content-Type": "text/plain"},
                           check=False)
            assert r.status == 403, r.body
            pull(tb, "%s/test/img:1" % registry.host, "x", 403, shared=True)
        r = c.request("POST", "/v1/templates/import", query={"name": "pub", "shared": "true"},
                      data=open(image["oci_tar"], "rb").read(),
                      headers={"Content-Type": "application/x-tar"}, check=False, timeout=120)
        assert r.status == 201 and r.json()["shared"] is True, r.body
        refused("pub")
        # The shared template is every team's, and the admin may replace it.
        run_check(tb, "pub")
        r = c.request("POST", "/v1/templates/import",
                      query={"name": "pub", "shared": "true", "replace": "true"},
                      data=open(image["docker_tar"], "rb").read(),
                      headers={"Content-Type": "application/x-tar"}, check=False, timeout=120)
        assert r.status == 201 and r.json()["shared"] is True, r.body
        run_check(ta, "pub")
        listed = {t["name"]: t for t in tb.request("GET", "/v1/templates").json()["templates"]}
        assert listed["pub"]["shared"] is True and listed["base"]["shared"] is True
    finally:
        tb.request("DELETE", "/v1/sandboxes/" + sid, check=False)
        for cl in (ta, tb):
            cl.close()
        for k in keys:
            admin.delete_key(k.id, client=c)
    assert c.request("DELETE", "/v1/templates/pub", check=False).status == 204
