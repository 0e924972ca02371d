#!/usr/bin/env python3
"""Code-interpreter benchmark (issue 17): on a real warrend with the Debian templates `base` and
`code-interpreter-v1` (test.sh builds them into /var/cache/warren/test-templates),

 1. create on `base` -> the first `echo` through exec answered (the baseline);
 2. create on `code-interpreter-v1` -> the first /execute result (POST /v1/sandboxes/{id}/code
    "1 + 1" until its `result` line): the create answers once the template's start command
    (warren-interp, its default Python kernel) is ready, so this is create + kernel + a cell;
 3. the same with warm pools (`--warm base=2 --warm code-interpreter-v1=2`; every pool is
    full before each create, but the refill after it, a kernel's start, runs while the first
    cell does);
 4. a cell round trip on a warm kernel (POST .../code "1 + 1", the whole NDJSON answer) against
    `python3 -c 'print(1 + 1)'` through exec, in the same sandbox.

Each sandbox is deleted before the next create. Medians and p90 in ms. Internet off (loopback
only), a network pool and nftables table of its own.

Usage: bench/code-interpreter.py [BUILD_DIR] [ROUNDS] [CELLS]   (root; see docs/benchmarks.md)"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "sdk", "python"))
import warren  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 10
CELLS = int(sys.argv[3]) if len(sys.argv) > 3 else 100
TEMPLATES = os.environ.get("WARREN_TEST_TEMPLATES", "/var/cache/warren/test-templates")
INTERP = "code-interpreter-v1"


class Daemon:
    def __init__(self, top, *extra):
        self.top = top
        self.state = os.path.join(top, "state")
        for name in ("base", INTERP):
            src, dst = os.path.join(TEMPLATES, name), os.path.join(self.state, "templates", name)
            os.makedirs(dst)
            os.symlink(os.path.join(src, "rootfs"), os.path.join(dst, "rootfs"))
            shutil.copy(os.path.join(src, "config.json"), dst)
        self.sock = os.path.join(top, "w.sock")
        self.run_dir = "/run/warren-bench-interp-%d" % os.getpid()
        self.table = "wbi%d" % os.getpid()
        env = dict(os.environ, WARREN_CGROUP_PARENT="warren-bench-interp-%d" % os.getpid(),
                   WARREN_UID_BASE=str(0x74000000), WARREN_UID_SLOTS="64",
                   WARREN_RUN_DIR=self.run_dir)
        self.proc = subprocess.Popen(
            [os.path.join(BUILD, "warrend"), "--state-dir", self.state, "--socket", self.sock,
             "--listen", "", "--run-dir", self.run_dir, "--log-level", "warn",
             "--net-pool", "10.250.%d.0/24" % (os.getpid() % 256), "--net-table", self.table,
             "--net-default", "off", "--net-ready", "2", "--dns-upstream", "127.0.0.1:9",
             *extra],
            stdout=subprocess.PIPE, env=env)
        line = self.proc.stdout.readline().decode()
        assert "ready" in line, line
        self.c = warren.Client("unix://" + self.sock)

    def req(self, method, path, body=None, status=None):
        r = self.c.request(method, path, json_body=body, check=False, timeout=120)
        if status is not None and r.status != status:
            raise SystemExit("%s %s: %d %s" % (method, path, r.status, r.body[:300]))
        return r.json() if r.body else None

    def create(self, template):
        return self.req("POST", "/v1/sandboxes", {"template": template, "timeout": 600}, 201)["id"]

    def echo(self, sid):
        r = self.req("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["echo", "hi"]}, 200)
        assert r["stdout"] == "hi\n", r

    def python_c(self, sid):
        r = self.req("POST", "/v1/sandboxes/%s/exec" % sid,
                     {"cmd": ["python3", "-c", "print(1 + 1)"]}, 200)
        assert r["stdout"] == "2\n", r

    def cell(self, sid):
        """POST .../code "1 + 1": ms to the result line, and to the end of the answer."""
        t0 = time.perf_counter()
        first = None
        with self.c.stream("POST", "/v1/sandboxes/%s/code" % sid, json_body={"code": "1 + 1"}) as s:
            for line in s.iter_json():
                if line["type"] == "result":
                    assert line["text"] == "2", line
                    first = ms(t0)
                if line["type"] == "end_of_execution":
                    break
        assert first is not None
        return first, ms(t0)

    def wait_pools(self):
        """Until every warm pool is full (a refill's kernel start would compete for the CPU)."""
        end = time.monotonic() + 120
        while time.monotonic() < end:
            pools = self.req("GET", "/v1/warm-pools", status=200)["pools"]
            if all(p["ready"] >= p["target"] for p in pools):
                return
            time.sleep(0.05)
        raise SystemExit("the warm pools did not fill: %r" % pools)

    def delete(self, sid):
        self.req("DELETE", "/v1/sandboxes/" + sid, status=204)

    def stop(self):
        for s in self.req("GET", "/v1/sandboxes?state=running,paused,creating", status=200)["sandboxes"]:
            self.delete(s["id"])
        self.c.close()
        self.proc.terminate()
        self.proc.wait()
        net = os.path.join(self.run_dir, "net", self.table)
        if os.path.isdir(net):
            for e in os.listdir(net):
                subprocess.run(["umount", "-l", os.path.join(net, e)], stderr=subprocess.DEVNULL)
        subprocess.run(["nft", "delete", "table", "inet", self.table], stderr=subprocess.DEVNULL)
        shutil.rmtree(self.run_dir, ignore_errors=True)


def ms(t0):
    return (time.perf_counter() - t0) * 1000


def stats(v):
    v = sorted(v)
    return "median %7.1f  p90 %7.1f  (n=%d)" % (statistics.median(v), v[int(0.9 * (len(v) - 1))], len(v))


def creates(d, template, first, warm=0):
    total, create = [], []
    for _ in range(ROUNDS):
        if warm:
            d.wait_pools()
        t0 = time.perf_counter()
        sid = d.create(template)
        t1 = ms(t0)
        first(sid)
        total.append(ms(t0))
        create.append(t1)
        d.delete(sid)
    return create, total


def main():
    for name in ("base", INTERP):
        if not os.path.exists(os.path.join(TEMPLATES, name, "rootfs", "bin", "bash")):
            raise SystemExit("no %s template in %s: run ./test.sh (or scripts/build-base.sh)" % (name, TEMPLATES))
    top = tempfile.mkdtemp(prefix="warren-bench-interp-")
    rows = []
    try:
        d = Daemon(os.path.join(top, "cold"))
        try:
            d.echo(d.create("base"))  # a first create warms the page cache
            c, t = creates(d, "base", d.echo)
            rows.append(("base: create", c))
            rows.append(("base: create -> first echo answered", t))
            c, t = creates(d, INTERP, lambda sid: d.cell(sid))
            rows.append(("code-interpreter-v1: create (start command ready)", c))
            rows.append(("code-interpreter-v1: create -> first /execute result", t))
            sid = d.create(INTERP)
            d.cell(sid)
            cells = [d.cell(sid) for _ in range(CELLS)]
            rows.append(("cell round trip '1 + 1' (to the result line)", [a for a, _ in cells]))
            rows.append(("cell round trip '1 + 1' (whole answer)", [b for _, b in cells]))
            py = []
            for _ in range(CELLS):
                t0 = time.perf_counter()
                d.python_c(sid)
                py.append(ms(t0))
            rows.append(("exec python3 -c 'print(1 + 1)' (same sandbox)", py))
            d.delete(sid)
        finally:
            d.stop()
        d = Daemon(os.path.join(top, "warm"), "--warm", "base=2", "--warm", INTERP + "=2")
        try:
            c, t = creates(d, "base", d.echo, warm=2)
            rows.append(("warm pool base=2: create -> first echo answered", t))
            c, t = creates(d, INTERP, lambda sid: d.cell(sid), warm=2)
            rows.append(("warm pool code-interpreter-v1=2: create", c))
            rows.append(("warm pool code-interpreter-v1=2: create -> first /execute result", t))
        finally:
            d.stop()
    finally:
        shutil.rmtree(top, ignore_errors=True)
    print("code-interpreter benchmark, %d creates and %d cells per row, ms" % (ROUNDS, CELLS))
    for name, v in rows:
        print("  %-68s %s" % (name, stats(v)))
    print(json.dumps({name: round(statistics.median(v), 1) for name, v in rows}))


if __name__ == "__main__":
    main()
