#!/usr/bin/env python3
"""The gateway benchmark (issue 22; docs/benchmarks.md "Through a gateway"). Not a test.

Starts PostgreSQL 15 (Debian's, as the `postgres` user, on a unix socket), three node daemons
(`warrend --role node`) and two gateways (`--role gateway`: one in front of the three nodes, one
in front of the first node only), all on loopback, then measures, in the same run:

  1. create -> first output of `echo hi` -> delete, N times one after the other, through the
     gateway against the same on a node directly (its API with the node token);
  2. the exec round trip (POST exec ["true"], wait mode) in one sandbox, NEXEC times, through
     the gateway against the node directly;
  3. creates per second (create -> delete cycles, C clients, SECS seconds) through the gateway
     to three nodes against the gateway to one node.

Usage: bench/cluster.py [BUILD_DIR]   (as root; N, NEXEC, C, SECS from the environment)
"""
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
N = int(os.environ.get("N", "30"))
NEXEC = int(os.environ.get("NEXEC", "300"))
C = int(os.environ.get("C", "4"))
SECS = float(os.environ.get("SECS", "15"))
PG = "/usr/lib/postgresql/15/bin"
TOKEN = "tok_bench_%d_0123456789" % os.getpid()


def start(args, env=None, cwd=None):
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=open(os.path.join(cwd, "log"), "ab"),
                         env=dict(os.environ, **(env or {})))
    line = p.stdout.readline().decode()
    m = re.search(r"tcp=127\.0\.0\.1:(\d+)", line)
    if not m:
        p.kill()
        sys.exit("did not start: %r (log in %s)" % (line, cwd))
    return p, int(m.group(1))


class Client:
    """HTTP/1.1 with keep-alive (a gateway's tunnelled answers close: it reconnects)."""

    def __init__(self, port, headers):
        self.port, self.headers = port, headers
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        for attempt in (0, 1):
            try:
                self.conn.request(method, path, data, self.headers)
                r = self.conn.getresponse()
                out = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                return r.status, out
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.conn.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")


def cycle(cl, first_output=True):
    st, b = cl.call("POST", "/v1/sandboxes", {"template": "base", "timeout": 120})
    assert st == 201 or st == 200, (st, b)
    sid = json.loads(b)["id"]
    if first_output:
        st, b = cl.call("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["echo", "hi"]})
        assert st == 200 and json.loads(b)["stdout"] == "hi\n", (st, b)
    st, _ = cl.call("DELETE", "/v1/sandboxes/" + sid)
    assert st in (200, 204), st


def timed(fn, n):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def stats(xs):
    xs = sorted(xs)
    return statistics.median(xs), xs[min(len(xs) - 1, int(len(xs) * 0.99))]


def rate(port, headers):
    done = [0]
    stop = time.monotonic() + SECS
    lock = threading.Lock()

    def worker():
        cl = Client(port, headers)
        while time.monotonic() < stop:
            cycle(cl, first_output=False)
            with lock:
                done[0] += 1

    ts = [threading.Thread(target=worker) for _ in range(C)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return done[0] / (time.monotonic() - t0)


def main():
    if os.geteuid() != 0:
        sys.exit("bench: run as root")
    top = tempfile.mkdtemp(prefix="warren-bench-cluster-")
    os.chmod(top, 0o755)
    procs = []
    pgdir = os.path.join(top, "pg")
    os.mkdir(pgdir)
    shutil.chown(pgdir, "postgres")
    try:
        pg = ["runuser", "-u", "postgres", "--"]
        subprocess.run(pg + [PG + "/initdb", "-D", pgdir + "/data", "-A", "trust", "-U", "postgres"],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run(pg + [PG + "/pg_ctl", "-D", pgdir + "/data", "-w", "-l", pgdir + "/log", "-o",
                             "-c listen_addresses='' -c unix_socket_directories=%s -c fsync=off" % pgdir,
                             "start"], check=True, stdout=subprocess.DEVNULL)
        token = os.path.join(top, "token")
        with open(token, "w") as f:
            f.write(TOKEN + "\n")
        base = os.environ.get("WARREN_BASE_TEMPLATE", os.path.join(BUILD, "images/busybox"))
        rootfs = os.path.join(base, "rootfs") if os.path.isdir(os.path.join(base, "rootfs")) else base
        nodes = []
        for i in range(1, 4):
            d = os.path.join(top, "n%d" % i)
            os.makedirs(os.path.join(d, "state/templates/base"))
            os.symlink(rootfs, os.path.join(d, "state/templates/base/rootfs"))
            env = {"WARREN_RUN_DIR": "/run/wbench-%d-%d" % (os.getpid(), i),
                   "WARREN_CGROUP_PARENT": "wbench-%d-%d" % (os.getpid(), i),
                   "WARREN_UID_BASE": str(0x58000000 + i * 64 * 65536), "WARREN_UID_SLOTS": "64"}
            p, port = start([BUILD + "/warrend", "--role", "node", "--node-id", "n%d" % i,
                             "--node-token-file", token, "--state-dir", d + "/state",
                             "--socket", d + "/sock", "--listen", "127.0.0.1:0",
                             "--run-dir", env["WARREN_RUN_DIR"], "--net-pool", "none",
                             "--pool", "4", "--warm", "0", "--limits", "off"], env, d)
            procs.append(p)
            nodes.append(port)
        gws = []
        for name, members in (("g3", nodes), ("g1", nodes[:1])):
            d = os.path.join(top, name)
            os.mkdir(d)
            disc = ",".join("n%d@127.0.0.1:%d" % (i + 1, p) for i, p in enumerate(members))
            p, port = start([BUILD + "/warrend", "--role", "gateway", "--database",
                             "host=%s dbname=postgres user=postgres" % pgdir,
                             "--discovery", "static:" + disc, "--node-token-file", token,
                             "--admin-key-file", os.path.join(top, "admin.key"),
                             "--listen", "127.0.0.1:0"], None, d)
            procs.append(p)
            gws.append(port)
        with open(os.path.join(top, "admin.key")) as f:
            admin = {"Authorization": "Bearer " + f.read().strip(), "Content-Type": "application/json"}
        node = {"Authorization": "Bearer " + TOKEN, "Warren-Team": "admin", "Warren-Admin": "1",
                "Content-Type": "application/json"}
        gw, direct = Client(gws[0], admin), Client(nodes[0], node)
        cycle(gw), cycle(direct)  # warm up
        print("== create -> first output -> delete, %d times" % N)
        a = timed(lambda: cycle(gw), N)
        b = timed(lambda: cycle(direct), N)
        (ma, pa), (mb, pb) = stats(a), stats(b)
        print("gateway   median %.2f ms  p99 %.2f ms" % (ma, pa))
        print("node      median %.2f ms  p99 %.2f ms" % (mb, pb))
        print("ratio     %.2f (gateway / node)" % (ma / mb))
        print("== exec round trip (POST exec true, wait), %d times" % NEXEC)
        st, body = direct.call("POST", "/v1/sandboxes", {"template": "base", "timeout": 300})
        sid = json.loads(body)["id"]
        path = "/v1/sandboxes/%s/exec" % sid
        a = timed(lambda: gw.call("POST", path, {"cmd": ["true"]}), NEXEC)
        b = timed(lambda: direct.call("POST", path, {"cmd": ["true"]}), NEXEC)
        direct.call("DELETE", "/v1/sandboxes/" + sid)
        (ma, pa), (mb, pb) = stats(a), stats(b)
        print("gateway   median %.3f ms  p99 %.3f ms" % (ma, pa))
        print("node      median %.3f ms  p99 %.3f ms" % (mb, pb))
        print("ratio     %.2f (gateway / node)" % (ma / mb))
        print("== creates per second, %d clients, %.0f s each (create -> delete)" % (C, SECS))
        r3 = rate(gws[0], admin)
        r1 = rate(gws[1], admin)
        print("3 nodes   %.1f/s" % r3)
        print("1 node    %.1f/s" % r1)
        print("ratio     %.2f (3 nodes / 1 node; the nodes share this machine's %d cores)"
              % (r3 / r1, os.cpu_count()))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
        subprocess.run(["runuser", "-u", "postgres", "--", PG + "/pg_ctl", "-D", pgdir + "/data",
                        "-m", "immediate", "stop"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for i in range(1, 4):
            for h in os.listdir("/sys/fs/cgroup"):
                try:
                    os.rmdir("/sys/fs/cgroup/%s/wbench-%d-%d" % (h, os.getpid(), i))
                except OSError:
                    pass
            shutil.rmtree("/run/wbench-%d-%d" % (os.getpid(), i), ignore_errors=True)
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
