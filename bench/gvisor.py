#!/usr/bin/env python3
"""The gvisor backend against its peers, in one run (docs/benchmarks.md, "gVisor backend"):

- create -> first output and the exec round trip through the API, on gvisor and on ns (the
  ratio), and `runsc run` / `runsc exec` of the same template driven directly (the peer: Warren
  should be at or below them);
- pause to disk (a checkpoint), resume (a restore) and the image's size, for a small sandbox and
  one holding 256 MiB of data in memory;
- fork x10 of a running sandbox: the parent's stop and the time to ten running copies.

Usage: bench/gvisor.py BUILD_DIR [ROUNDS]   (root; runsc installed)"""

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
import warren  # noqa: E402,F401

import benchd  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 10
BASE = os.environ.get("WARREN_BASE_TEMPLATE", "/var/cache/warren/test-templates/base")
RUNSC = shutil.which("runsc") or "/usr/bin/runsc"


def ms(t0):
    return (time.perf_counter() - t0) * 1000


def med(v):
    return statistics.median(v)


def du(path):
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            total += os.lstat(os.path.join(dirpath, f)).st_blocks * 512
    return total


def api(d, runtime):
    """create -> first output, then exec round trips, through the API."""
    first, execs = [], []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        sid = d.req("POST", "/v1/sandboxes", {"template": "base", "timeout": 600,
                                              "runtime": runtime}, 201)["id"]
        d.sh(sid, "echo hi")
        first.append(ms(t0))
        for _ in range(10):
            t0 = time.perf_counter()
            d.sh(sid, "true")
            execs.append(ms(t0))
        d.delete(sid)
    return med(first), med(execs)


def peer(top):
    """runsc run of /bin/true, and runsc exec into a running container, of the same template
    (read-only root, no network, cgroups left alone: the flags Warren uses)."""
    root = os.path.join(top, "runsc")
    bundle = os.path.join(top, "bundle")
    os.makedirs(bundle)
    flags = [RUNSC, "--root=" + root, "--network=none", "--ignore-cgroups", "--platform=ptrace"]

    def config(args):
        cfg = {"ociVersion": "1.0.2",
               "process": {"terminal": False, "user": {"uid": 0, "gid": 0}, "args": args,
                           "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], "cwd": "/"},
               "root": {"path": os.path.join(BASE, "rootfs"), "readonly": True},
               "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
               "linux": {"namespaces": [{"type": t} for t in
                                        ("pid", "network", "ipc", "uts", "mount")]}}
        with open(os.path.join(bundle, "config.json"), "w") as f:
            json.dump(cfg, f)

    config(["/bin/echo", "hi"])
    runs = []
    for i in range(ROUNDS):
        t0 = time.perf_counter()
        subprocess.run(flags + ["run", "--bundle", bundle, "peer-run-%04d" % i], check=True,
                       stdout=subprocess.DEVNULL)
        runs.append(ms(t0))
    config(["/bin/sleep", "3600"])
    subprocess.run(flags + ["create", "--bundle", bundle, "peer-exec-0000"], check=True)
    subprocess.run(flags + ["start", "peer-exec-0000"], check=True)
    execs = []
    try:
        for _ in range(ROUNDS * 5):
            t0 = time.perf_counter()
            subprocess.run(flags + ["exec", "peer-exec-0000", "/bin/true"], check=True)
            execs.append(ms(t0))
    finally:
        subprocess.run(flags + ["kill", "peer-exec-0000", "KILL"], stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        subprocess.run(flags + ["delete", "-force", "peer-exec-0000"], stderr=subprocess.DEVNULL)
    return med(runs), med(execs)


def disk(d, data_mb):
    """Pause to disk and resume of a gvisor sandbox holding data_mb of random data in memory
    (a Python process's): times and the checkpoint's size."""
    pauses, resumes, sizes = [], [], []
    for _ in range(max(3, ROUNDS // 3)):
        sid = d.req("POST", "/v1/sandboxes", {"template": "base", "timeout": 600,
                                              "runtime": "gvisor", "memory_mb": 1024}, 201)["id"]
        d.sh(sid, "python3 -c 'import os, time; b = os.urandom(%d << 20); "
                  "open(\"/tmp/ready\", \"w\").close(); time.sleep(3600)' >/dev/null 2>&1 & "
                  "while [ ! -e /tmp/ready ]; do sleep 0.05; done" % data_mb
             if data_mb else "sleep 3600 >/dev/null 2>&1 &")
        t0 = time.perf_counter()
        d.req("POST", "/v1/sandboxes/%s/pause" % sid, {"mode": "disk"}, 200)
        pauses.append(ms(t0))
        home = [os.path.join(dp, "checkpoint") for dp, dn, _ in os.walk(d.state)
                if "checkpoint" in dn and dp.endswith(sid)]
        sizes.append(du(home[0]) if home else 0)
        t0 = time.perf_counter()
        r = d.req("POST", "/v1/sandboxes/%s/resume" % sid, {}, 200)
        resumes.append(ms(t0))
        assert r.get("processes_kept") is True, r
        d.delete(sid)
    return med(pauses), med(resumes), med(sizes)


def fork(d, n):
    sid = d.req("POST", "/v1/sandboxes", {"template": "base", "timeout": 600,
                                          "runtime": "gvisor"}, 201)["id"]
    d.sh(sid, "sleep 3600 >/dev/null 2>&1 &")
    t0 = time.perf_counter()
    r = d.req("POST", "/v1/sandboxes/%s/fork" % sid, {"count": n}, 201)
    total = ms(t0)
    assert r["processes_kept"] and len(r["sandboxes"]) == n, r
    for s in r["sandboxes"]:
        d.delete(s["id"])
    d.delete(sid)
    return r["freeze_ms"], total


def main():
    top = tempfile.mkdtemp(prefix="warren-bench-gvisor-")
    d = benchd.Daemon(top, BUILD, BASE)
    try:
        ns_first, ns_exec = api(d, "ns")
        gv_first, gv_exec = api(d, "gvisor")
        run_ms, exec_ms = peer(top)
        small = disk(d, 0)
        big = disk(d, 256)
        frozen, total = fork(d, 10)
    finally:
        d.stop()
        shutil.rmtree(top, ignore_errors=True)
    print("gvisor backend, %d rounds, medians (ms)" % ROUNDS)
    print("  create -> first output: gvisor %.1f, ns %.1f (gvisor/ns %.0fx), runsc run %.1f "
          "(gvisor/runsc run %.2f)" % (gv_first, ns_first, gv_first / ns_first, run_ms,
                                       gv_first / run_ms))
    print("  exec round trip: gvisor %.2f, ns %.2f (gvisor/ns %.1fx), runsc exec %.1f "
          "(gvisor/runsc exec %.2f)" % (gv_exec, ns_exec, gv_exec / ns_exec, exec_ms,
                                        gv_exec / exec_ms))
    for name, (p, r, size) in (("small", small), ("256 MiB in memory", big)):
        print("  pause to disk / resume, %s: %.0f / %.0f, checkpoint %.1f MB" %
              (name, p, r, size / 1e6))
    print("  fork x10 keeping memory: parent stopped %.0f, ten copies running after %.0f" %
          (frozen, total))


if __name__ == "__main__":
    main()
