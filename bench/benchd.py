"""The warrend a benchmark runs (bench/images.py, bench/gvisor.py)."""

import os
import shutil
import subprocess

import warren


class Daemon:
    """A warrend of the benchmark's own in top (state, socket), on the `base` template at base,
    with networking off and a run directory, nftables table and cgroup parent of its own that
    stop() removes (slots outlive a daemon on purpose; the default table is a production
    daemon's)."""

    def __init__(self, top, build, base, extra=()):
        self.top = top
        self.state = os.path.join(top, "state")
        os.makedirs(os.path.join(self.state, "templates", "base"))
        os.symlink(os.path.join(base, "rootfs"), os.path.join(self.state, "templates", "base", "rootfs"))
        if os.path.exists(os.path.join(base, "config.json")):
            shutil.copy(os.path.join(base, "config.json"), os.path.join(self.state, "templates", "base"))
        self.sock = os.path.join(top, "w.sock")
        env = dict(os.environ, WARREN_CGROUP_PARENT="warren-bench-%d" % os.getpid(),
                   WARREN_UID_BASE=str(0x70000000), WARREN_UID_SLOTS="512")
        self.run_dir = os.path.join("/run", "warren-bench-%d" % os.getpid())
        self.table = "wimg%d" % os.getpid()
        self.proc = subprocess.Popen(
            [os.path.join(build, "warrend"), "--state-dir", self.state, "--socket", self.sock,
             "--listen", "", "--run-dir", self.run_dir, "--log-level", "warn",
             "--net-default", "off", "--net-ready", "1", "--net-pool", "10.250.0.0/24",
             "--net-table", self.table, "--dns-upstream", "127.0.0.1:9", *extra],
            stdout=subprocess.PIPE, env=env)
        line = self.proc.stdout.readline().decode()
        assert "ready" in line, line
        self.c = warren.Client("unix://" + self.sock)

    def req(self, method, path, body=None, status=None):
        r = self.c.request(method, path, json_body=body, check=False)
        if status is not None and r.status != status:
            raise SystemExit("%s %s: %d %s" % (method, path, r.status, r.body[:300]))
        return r.json() if r.body else None

    def create(self, template="base", memory_mb=128):
        return self.req("POST", "/v1/sandboxes", {"template": template, "timeout": 600,
                                                   "memory_mb": memory_mb}, 201)["id"]

    def sh(self, sid, cmd):
        r = self.req("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["/bin/sh", "-c", cmd]}, 200)
        assert r["exit_code"] == 0, r

    def delete(self, sid):
        self.req("DELETE", "/v1/sandboxes/" + sid, status=204)

    def stop(self):
        for s in self.req("GET", "/v1/sandboxes?state=running,paused,creating", status=200)["sandboxes"]:
            self.delete(s["id"])
        self.c.close()
        self.proc.terminate()
        self.proc.wait()
        slots = os.path.join(self.run_dir, "net", self.table)
        for e in os.listdir(slots) if os.path.isdir(slots) else []:
            subprocess.run(["umount", "-l", os.path.join(slots, e)], stderr=subprocess.DEVNULL)
        shutil.rmtree(self.run_dir, ignore_errors=True)
        subprocess.run(["nft", "delete", "table", "inet", self.table], stderr=subprocess.DEVNULL)
        for hier in os.listdir("/sys/fs/cgroup"):
            try:
                os.rmdir(os.path.join("/sys/fs/cgroup", hier, "warren-bench-%d" % os.getpid()))
            except OSError:
                pass
