#!/usr/bin/env python3
"""Kernel memory of a networked sandbox against a loopback-only one, in the same run.

usage: sudo python3 bench/net-memory.py [BUILD_DIR] [N]

Starts its own warrend (busybox image, internet off, DNS to loopback's discard port: nothing
leaves the machine), then, N at a time: creates N loopback-only sandboxes and reads
/proc/meminfo before and after (MemAvailable, Slab, SUnreclaim, Percpu), deletes them, and does
the same with N sandboxes that each have a slot of their own (internet off): with only two slots
kept ready, nearly every create makes its slot (netns, veth pair, addresses, neighbours, table
elements), so what is measured is the sandbox with its slot. Prints the difference per sandbox.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "../build"))
N = int(sys.argv[2]) if len(sys.argv) > 2 else 200
sys.path.insert(0, os.path.join(HERE, "../sdk/python"))
import warren  # noqa: E402


def meminfo():
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":")
            out[k] = int(v.split()[0])
    return out


def settle():
    subprocess.run(["sync"])
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")
    time.sleep(2)


def measure(c, n, body):
    settle()
    before = meminfo()
    ids = [c.request("POST", "/v1/sandboxes", json_body=body).json_object()["id"] for _ in range(n)]
    settle()
    after = meminfo()
    for i in ids:
        c.request("DELETE", "/v1/sandboxes/" + i)
    return {k: (before[k] - after[k]) if k == "MemAvailable" else (after[k] - before[k])
            for k in ("MemAvailable", "Slab", "SUnreclaim", "Percpu")}


def main():
    tmp = tempfile.mkdtemp(prefix="warren-bench-netmem-")
    run = "/run/warren-bench-netmem-%d" % os.getpid()
    table = "wnetmem%d" % os.getpid()
    os.makedirs(os.path.join(tmp, "state/templates/base"))
    os.symlink(os.path.join(BUILD, "images/busybox"), os.path.join(tmp, "state/templates/base/rootfs"))
    env = dict(os.environ, WARREN_CGROUP_PARENT="warren-bench-netmem", WARREN_UID_BASE="1879048192",
               WARREN_UID_SLOTS=str(N + 16))
    d = subprocess.Popen([os.path.join(BUILD, "warrend"), "--state-dir", os.path.join(tmp, "state"),
                          "--socket", os.path.join(tmp, "sock"), "--listen", "", "--run-dir", run,
                          "--pool", "0", "--warm", "0", "--max-sandboxes", str(N + 16),
                          "--net-pool", "10.252.0.0/16", "--net-table", table, "--net-default", "off",
                          "--net-ready", "2", "--dns-upstream", "127.0.0.1:9", "--log-level", "warn"],
                         stdout=subprocess.PIPE, stderr=open(os.path.join(tmp, "log"), "w"), env=env)
    try:
        assert b"warrend ready" in d.stdout.readline()
        c = warren.Client("unix://" + os.path.join(tmp, "sock"))
        time.sleep(1)
        plain = measure(c, N, {"memory_mb": 64})
        net = measure(c, N, {"memory_mb": 64, "network": {"internet": False}})
        print("kernel memory per sandbox, %d of each (KiB; MemAvailable is what the host lost):" % N)
        for k in plain:
            print("  %-13s loopback only %7.1f   with a slot %7.1f   difference %7.1f"
                  % (k, plain[k] / N, net[k] / N, (net[k] - plain[k]) / N))
    finally:
        d.terminate()
        d.wait()
        d2 = os.path.join(run, "net", table)
        for e in os.listdir(d2) if os.path.isdir(d2) else []:
            subprocess.run(["umount", "-l", os.path.join(d2, e)])
        subprocess.run(["nft", "delete", "table", "inet", table], stderr=subprocess.DEVNULL)
        shutil.rmtree(run, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
