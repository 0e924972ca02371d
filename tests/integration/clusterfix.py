"""A multi-host Warren on one machine for the tests: a PostgreSQL server (pgfix.py), a "switch"
network namespace holding a bridge, one network namespace per node with a real `warrend --role
node` inside, and gateways (`warrend --role gateway`) in the host's namespace on 127.0.0.1.

Addresses (198.18.0.0/15, the benchmarking block no real network routes; J = pid % 240 + 8, the
third octet netfix.py uses too, whose 198.18.J.254/255 and 198.19.J.x stay clear of ours):

    host  wcl<pid> 198.18.J.16/31 --- 198.18.J.17/31 up0  [switch wcs-<pid>: br0 198.18.J.25/29,
                                                           ip_forward on]
    node i (wcn-<pid>-<i>): eth0 198.18.J.(26+i)/29 on br0, default via 198.18.J.25, lo up

The host's namespace routes no range: one /31 link and a /32 host route per node address (via
the switch), each removed at the end only if it still points at our link. A node daemon listens
on its address and a fixed port (NODE_PORT), so a node restarted on its state directory keeps
the address the gateways' static discovery names.

Node daemons run with `nsenter --net=/run/netns/wcn-...`: the network namespace alone, not the
mount namespace `ip netns exec` makes (its mounts would be invisible to the host and lost to a
node daemon restarted in another one, and its fresh /sys has no cgroup2), so the conftest's
leftover checks see a node's mounts and cgroups as those of any test daemon.

    c = Cluster(nodes=3, gateways=2).start()
    c.client(key)                  # a warren.Client on gateway 0 (c.client(key, gw=1): gateway 1)
    c.admin_key                    # the gateways' admin key (their --admin-key-file)
    c.node(0).kill9(); c.node(0).start()     # SIGKILL, then again on the same state
    c.gateway(1).kill9(); c.gateway(1).start()
    c.stop()                       # every sandbox deleted through its node, everything removed

`python3 clusterfix.py` (as root) is the harness's self-check: PostgreSQL, the switch and three
node namespaces without daemons, traffic host<->node and node<->node, then everything removed.
"""
import json
import os
import re
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pgfix  # noqa: E402

NODE_PORT = 7860
MAX_NODES = 5  # 198.18.J.26-30 in the /29
S3_BUCKET = "warren-cluster"
DOMAIN = "warren.test"
READY_TIMEOUT = 90.0  # a daemon's ready line


def _run(*cmd, check=True, timeout=60):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError("%s failed (exit %d): %s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r


def wait_for(what, fn, timeout, interval=0.1):
    """fn()'s first truthy value within timeout seconds; else AssertionError naming `what` and
    fn's last value (or the exception it last raised)."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - reported if it lasts
            last = e
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.1fs waiting for %s; last: %r" % (timeout, what, last))
        time.sleep(interval)


def read_ready(proc, timeout, log_path):
    """The first stdout line of proc (a daemon's ready line), waiting at most timeout seconds;
    AssertionError with the end of its log when it exits or stays silent."""
    fd = proc.stdout.fileno()
    buf = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            proc.kill()
            proc.wait()
            raise AssertionError("no ready line in %.0fs (got %r); log %s:\n%s" % (
                timeout, buf, log_path, log_tail(log_path)))
        r, _, _ = select.select([fd], [], [], min(left, 0.5))
        if r:
            chunk = os.read(fd, 4096)
            if not chunk:
                proc.wait()
                raise AssertionError("exited (status %s) before its ready line (got %r); log %s:\n%s" % (
                    proc.returncode, buf, log_path, log_tail(log_path)))
            buf += chunk
    return buf.split(b"\n", 1)[0].decode(errors="replace")


def log_tail(path, n=3000):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return "(no log)"


# ---- the network -----------------------------------------------------------------------------


class Switch:
    """The switch namespace, its bridge, the host's link to it and the nodes' namespaces."""

    def __init__(self, pid=None):
        pid = os.getpid() if pid is None else pid
        self.pid = pid
        j = pid % 240 + 8
        self.j = j
        self.ns = "wcs-%d" % pid
        self.ifname = "wcl%d" % (pid % 10000000)
        self.host_end = "198.18.%d.16" % j
        self.sw_end = "198.18.%d.17" % j
        self.bridge_addr = "198.18.%d.25" % j
        self.nodes = []  # (netns, address)
        self.routes = []
        self.made = False

    def node_ns(self, i):
        return "wcn-%d-%d" % (self.pid, i)

    def node_addr(self, i):
        assert 0 <= i < MAX_NODES, "at most %d nodes" % MAX_NODES
        return "198.18.%d.%d" % (self.j, 26 + i)

    def _ns(self, ns, *cmd, check=True):
        return _run("ip", "netns", "exec", ns, *cmd, check=check)

    def _check_free(self):
        """Our addresses must be nobody's on this machine: not the host's, not routed by it."""
        mine = [self.host_end, self.sw_end, self.bridge_addr] + [self.node_addr(i) for i in range(MAX_NODES)]
        have = _run("ip", "-4", "-o", "addr", "show").stdout
        for a in mine:
            assert not re.search(r"inet %s/" % re.escape(a), have), \
                "%s is already an address of this machine: another session with the same pid %% 240?" % a
        routes = _run("ip", "-4", "route", "show").stdout
        for a in mine:
            assert not re.search(r"^%s(/32)? " % re.escape(a), routes, re.M), \
                "the host already routes %s: %s" % (a, routes)
        ns = _run("ip", "netns", "list").stdout
        assert not re.search(r"^%s\b" % re.escape(self.ns), ns, re.M), "netns %s exists already" % self.ns

    def start(self):
        self._check_free()
        self.made = True
        try:
            _run("ip", "netns", "add", self.ns)
            _run("ip", "link", "add", self.ifname, "type", "veth", "peer", "name", "up0", "netns", self.ns)
            _run("sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=1" % self.ifname)
            _run("ip", "addr", "add", self.host_end + "/31", "dev", self.ifname)
            _run("ip", "link", "set", self.ifname, "up")
            self._ns(self.ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
            self._ns(self.ns, "sysctl", "-qw", "net.ipv4.ip_forward=1")
            _run("ip", "-n", self.ns, "link", "set", "lo", "up")
            _run("ip", "-n", self.ns, "addr", "add", self.sw_end + "/31", "dev", "up0")
            _run("ip", "-n", self.ns, "link", "set", "up0", "up")
            _run("ip", "-n", self.ns, "link", "add", "br0", "type", "bridge")
            _run("ip", "-n", self.ns, "addr", "add", self.bridge_addr + "/29", "dev", "br0")
            _run("ip", "-n", self.ns, "link", "set", "br0", "up")
        except BaseException:
            self.stop()
            raise
        return self

    def add_node(self, i):
        """Make node i's namespace on the bridge; (its netns name, its address)."""
        ns, addr = self.node_ns(i), self.node_addr(i)
        self.nodes.append((ns, addr))
        _run("ip", "netns", "add", ns)
        _run("ip", "-n", self.ns, "link", "add", "n%d" % i, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _run("ip", "-n", self.ns, "link", "set", "n%d" % i, "master", "br0")
        _run("ip", "-n", self.ns, "link", "set", "n%d" % i, "up")
        self._ns(ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        _run("ip", "-n", ns, "link", "set", "lo", "up")
        _run("ip", "-n", ns, "addr", "add", addr + "/29", "dev", "eth0")
        _run("ip", "-n", ns, "link", "set", "eth0", "up")
        _run("ip", "-n", ns, "route", "add", "default", "via", self.bridge_addr)
        _run("ip", "route", "replace", addr + "/32", "via", self.sw_end, "dev", self.ifname)
        self.routes.append(addr)
        return ns, addr

    def stop(self):
        """Remove all of it; the errors (a namespace that would not go) as a list of strings."""
        errors = []
        for a in self.routes:
            # only our own route: a concurrent session may have replaced it with its own
            _run("ip", "route", "del", a + "/32", "via", self.sw_end, "dev", self.ifname, check=False)
        self.routes = []
        if self.made:
            _run("ip", "link", "del", self.ifname, check=False)
        for ns, _ in self.nodes:
            r = _run("ip", "netns", "del", ns, check=False)
            if r.returncode != 0 and "No such file" not in r.stderr:
                errors.append("ip netns del %s: %s" % (ns, r.stderr.strip()))
        self.nodes = []
        if self.made:
            r = _run("ip", "netns", "del", self.ns, check=False)
            if r.returncode != 0 and "No such file" not in r.stderr:
                errors.append("ip netns del %s: %s" % (self.ns, r.stderr.strip()))
        self.made = False
        return errors

    def leftovers(self):
        """What of ours is still on the machine: namespaces, the host link, host routes."""
        left = []
        ns = _run("ip", "netns", "list").stdout
        left += [l.split()[0] for l in ns.splitlines()
                 if l.split() and (l.split()[0] == self.ns or l.split()[0].startswith("wcn-%d-" % self.pid))]
        if _run("ip", "link", "show", self.ifname, check=False).returncode == 0:
            left.append("link " + self.ifname)
        routes = _run("ip", "-4", "route", "show").stdout
        for i in range(MAX_NODES):
            if re.search(r"^%s(/32)? " % re.escape(self.node_addr(i)), routes, re.M):
                left.append("route " + self.node_addr(i))
        return left


# ---- the daemons -----------------------------------------------------------------------------


class Node:
    """Node i: its namespace and a conftest Daemon (`--role node`) run inside it on a state
    directory kept across kill9()/start()."""

    def __init__(self, cluster, i):
        import conftest
        self.cluster = cluster
        self.i = i
        self.id = "n%d" % (i + 1)
        self.ns, self.addr = cluster.switch.add_node(i)
        self.port = NODE_PORT
        # Each node is a host of its own: its run directory, cgroup parent and share of the
        # session's uid pool (so that a node taking back its sandboxes at a restart never
        # touches another node's copy of a sandbox that moved). The pool's uids are the
        # conftest's to check; the run directory and cgroup parent are checked and removed by
        # cleanup_host().
        self.run_dir = "%s-%s" % (conftest.RUN_DIR, self.id)
        self.cgroup_parent = "%s-%s" % (conftest.CGROUP_PARENT, self.id)
        slots = conftest.UID_SLOTS // MAX_NODES
        self.d = conftest.Daemon(
            *self.role_args(),
            prefix=("nsenter", "--net=/run/netns/" + self.ns),
            listen="%s:%d" % (self.addr, self.port),
            env={"WARREN_RUN_DIR": self.run_dir, "WARREN_CGROUP_PARENT": self.cgroup_parent,
                 "WARREN_UID_BASE": str(conftest.UID_BASE + i * slots * 65536),
                 "WARREN_UID_SLOTS": str(slots),
                 # s3rver's fixed keys (start_s3)
                 "AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER"})

    def role_args(self):
        """What makes warrend a node of this cluster."""
        c = self.cluster
        return ["--role", "node", "--node-id", self.id, "--node-token-file", c.token_file,
                "--object-store", c.object_store, "--domain", DOMAIN]

    @property
    def spec(self):
        return "%s@%s:%d" % (self.id, self.addr, self.port)

    @property
    def url(self):
        return "http://%s:%d" % (self.addr, self.port)

    @property
    def running(self):
        return self.d.proc is not None and self.d.proc.poll() is None

    def start(self):
        d = self.d
        d.log = open(os.path.join(d.dir, "warrend.log"), "ab")
        import conftest
        d.proc = subprocess.Popen(
            [*d.prefix, d.binary, "--state-dir", d.state, "--socket", d.sock, "--listen", d.listen,
             "--run-dir", self.run_dir, *d.net, *d.extra],
            stdout=subprocess.PIPE, stderr=d.log, env=d.env)
        conftest.LIVE_DAEMONS.add(d)
        line = read_ready(d.proc, READY_TIMEOUT, os.path.join(d.dir, "warrend.log"))
        d.host, d.port = conftest.ready_tcp(line)
        assert d.host == self.addr and d.port == self.port, \
            "node %s: its ready line names tcp=%s:%s, not its --listen %s: %r" % (
                self.id, d.host, d.port, d.listen, line)
        return self

    def kill9(self):
        self.d.kill9()

    def stop(self):
        self.d.stop()

    def log(self):
        return log_tail(os.path.join(self.d.dir, "warrend.log"))

    def api(self, method, path, token=True, headers=None, body=None, timeout=10):
        """One request to the node's TCP API (with the node token unless token=False):
        (status, parsed JSON or raw bytes)."""
        import http.client
        h = dict(headers or {})
        if token:
            h["Authorization"] = "Bearer " + self.cluster.node_token
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        c = http.client.HTTPConnection(self.addr, self.port, timeout=timeout)
        try:
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            raw = r.read()
        finally:
            c.close()
        try:
            return r.status, json.loads(raw) if raw else None
        except ValueError:
            return r.status, raw

    def sandbox_ids(self):
        """Ids in the node's GET /node/sandboxes (raises when it does not answer 200)."""
        st, j = self.api("GET", "/node/sandboxes")
        assert st == 200, "node %s: GET /node/sandboxes answered %s: %r" % (self.id, st, j)
        return {s["id"] for s in j["sandboxes"]}

    def delete_all(self):
        """Delete every sandbox the node holds, through its unix socket (the admin: every team's,
        every state) and its /node/sandboxes."""
        import warren
        c = warren.Client(self.d.url, timeout=60)
        try:
            ids = set()
            r = c.request("GET", "/v1/sandboxes", check=False,
                          query=[("all", "1"), ("state", "creating,running,paused,stopped,error"),
                                 ("limit", 1000)])
            if r.status == 200:
                ids |= {s["id"] for s in r.json()["sandboxes"]}
            try:
                ids |= self.sandbox_ids()
            except Exception:  # noqa: BLE001 - the unix socket's list is enough
                pass
            for sid in sorted(ids):
                c.request("DELETE", "/v1/sandboxes/" + sid, check=False)
        finally:
            c.close()

    def cleanup(self):
        """Every sandbox deleted (the daemon started again on its state if it is down: the
        sandboxes outlive it), the daemon stopped, its state and networking removed (its nftables
        table inside its namespace). Errors are returned, not raised."""
        import conftest
        errors = []
        try:
            if not self.running and self.d.proc is not None:
                self.start()
            if self.running:
                self.delete_all()
        except Exception as e:  # noqa: BLE001
            errors.append("node %s: deleting its sandboxes: %s" % (self.id, e))
        _run("nsenter", "--net=/run/netns/" + self.ns, "nft", "delete", "table", "inet", self.d.table,
             check=False)
        try:
            self.d.cleanup()
        except Exception as e:  # noqa: BLE001
            errors.append("node %s: %s" % (self.id, e))
        conftest.LIVE_DAEMONS.discard(self.d)
        errors += self.cleanup_host()
        return errors

    def cleanup_host(self):
        """The node's cgroup parent, in every hierarchy, and its run directory: empty by now
        (a sandbox's cgroup left is an error), then removed."""
        errors = []
        for h in os.listdir("/sys/fs/cgroup"):
            p = os.path.join("/sys/fs/cgroup", h, self.cgroup_parent)
            if not os.path.isdir(p):
                continue
            left = [e for e in os.listdir(p) if os.path.isdir(os.path.join(p, e))]
            if left:
                errors.append("node %s: cgroups left in %s: %s" % (self.id, p, left))
                continue
            try:
                os.rmdir(p)
            except OSError as e:
                errors.append("node %s: remove %s: %s" % (self.id, p, e))
        sb = os.path.join(self.run_dir, "sandboxes")
        if os.path.isdir(sb) and os.listdir(sb):
            errors.append("node %s: run directory entries left: %s" % (self.id, os.listdir(sb)))
            return errors
        # The network slots outlive a daemon on purpose (conftest.net_cleanup's job, here in the
        # node's run directory).
        slots = os.path.join(self.run_dir, "net", self.d.table)
        for e in os.listdir(slots) if os.path.isdir(slots) else []:
            _run("umount", "-l", os.path.join(slots, e), check=False)
        shutil.rmtree(self.run_dir, ignore_errors=True)
        return errors


class Gateway:
    """Gateway i: `warrend --role gateway` in the host's namespace on 127.0.0.1 (a new port at
    each start), sharing the cluster's database, admin key file and node token."""

    def __init__(self, cluster, i):
        self.cluster = cluster
        self.i = i
        self.dir = tempfile.mkdtemp(prefix="warren-gw%d-" % i, dir=cluster.dir)
        self.proc = None
        self.port = None

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def args(self):
        import conftest
        c = self.cluster
        return [conftest.WARREND, "--role", "gateway", "--database", c.pg.dsn,
                "--discovery", "static:" + ",".join(n.spec for n in c.nodes),
                "--node-token-file", c.token_file, "--admin-key-file", c.admin_key_file,
                "--listen", "127.0.0.1:0", "--domain", DOMAIN, "--object-store", c.object_store,
                "--health-interval-ms", "300", "--node-dead-after-ms", "1500",
                # never the host's own: /var/lib/warren, /run/warrend/warrend.sock, /run/warren
                "--state-dir", os.path.join(self.dir, "state"), "--socket", os.path.join(self.dir, "gw.sock"),
                "--run-dir", conftest.RUN_DIR]

    def start(self):
        import conftest
        log = os.path.join(self.dir, "warrend.log")
        self.proc = subprocess.Popen(self.args(), stdout=subprocess.PIPE, stderr=open(log, "ab"),
                                     env=conftest.ENV)
        line = read_ready(self.proc, READY_TIMEOUT, log)
        host, self.port = conftest.ready_tcp(line)
        assert host == "127.0.0.1" and self.port, "gateway %d: no tcp=127.0.0.1:PORT in %r" % (self.i, line)
        return self

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.running:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log(self):
        return log_tail(os.path.join(self.dir, "warrend.log"))

    def sanitizer_report(self):
        """Under `make asan`, the sanitizers' report in the gateway's log, as a list (as conftest's
        Daemon.cleanup checks a node's)."""
        import conftest
        if not conftest.SANITIZED:
            return []
        try:
            with open(os.path.join(self.dir, "warrend.log"), errors="replace") as f:
                log = f.read()
        except OSError:
            return []
        for marker in ("ERROR: LeakSanitizer", "ERROR: AddressSanitizer", "runtime error:"):
            if marker in log:
                at = log.index(marker)
                return ["gateway %d reported under the sanitizers:\n%s" % (
                    self.i, log[log.rfind("\n", 0, at) + 1:][:4000])]
        return []

    def healthy(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                return s.recv(64).startswith(b"HTTP/1.1 200")
        except OSError:
            return False


class Cluster:
    def __init__(self, nodes=3, gateways=2):
        self.n_nodes = nodes
        self.n_gateways = gateways
        self.dir = None
        self.pg = None
        self.switch = None
        self.nodes = []
        self.gateways = []

    # ---- start and stop --------------------------------------------------------------------

    def start(self, daemons=True):
        """PostgreSQL, the network, then (daemons=True) the nodes and gateways; every gateway
        sees every node healthy before this returns."""
        self.dir = tempfile.mkdtemp(prefix="warren-cluster-")
        try:
            self.token_file = os.path.join(self.dir, "node.token")
            self.node_token = secrets.token_hex(24)
            fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(self.node_token + "\n")
            self.admin_key_file = os.path.join(self.dir, "admin.key")
            os.mkdir(os.path.join(self.dir, "objects"))
            self.pg = pgfix.Postgres().start()
            self.switch = Switch().start()
            self.object_store = self.start_s3()
            if daemons:
                for i in range(self.n_nodes):
                    self.nodes.append(Node(self, i))
                for n in self.nodes:
                    n.start()
                for i in range(self.n_gateways):
                    self.gateways.append(Gateway(self, i))
                for g in self.gateways:  # one after the other: the first makes the admin key
                    g.start()
                for g in self.gateways:
                    self.wait_nodes({n.id for n in self.nodes}, gw=g.i)
            else:
                for i in range(self.n_nodes):
                    self.switch.add_node(i)
        except BaseException:
            self.stop(check=False)
            raise
        return self

    def start_s3(self):
        """The object store: s3rver (tests/s3, an S3-compatible server from npm) on the host's
        end of the switch link, where every node reaches it, signed with its fixed keys; without
        node or tests/s3/node_modules, a directory every node sees (file://)."""
        self.s3 = None
        js = os.path.join(HERE, "../s3/node_modules/s3rver/bin/s3rver.js")
        if shutil.which("node") is None or not os.path.exists(js):
            return "file://" + os.path.join(self.dir, "objects")
        self.s3 = subprocess.Popen(
            ["node", "--openssl-legacy-provider", js, "-d", os.path.join(self.dir, "objects"),
             "-a", self.switch.host_end, "-p", "0", "--silent", "--configure-bucket", S3_BUCKET],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out, m = b"", None
        deadline = time.monotonic() + READY_TIMEOUT
        while m is None:
            r, _, _ = select.select([self.s3.stdout], [], [], 0.5)
            chunk = os.read(self.s3.stdout.fileno(), 4096) if r else b""
            if (r and not chunk) or time.monotonic() > deadline:
                self.s3.kill()
                self.s3.wait()
                raise AssertionError("s3rver did not start: %r" % out)
            out += chunk
            m = re.search(rb"listening on [0-9.]+:(\d+)", out)
        port = int(m.group(1))
        return "s3://%s/cluster?endpoint=http://%s:%d" % (S3_BUCKET, self.switch.host_end, port)

    def stop(self, check=True):
        """Delete every sandbox through its node, stop everything, remove everything. With check,
        AssertionError naming what could not be cleaned."""
        errors = []
        for g in self.gateways:
            try:
                g.stop()
                errors += g.sanitizer_report()
            except Exception as e:  # noqa: BLE001
                errors.append("gateway %d: %s" % (g.i, e))
        for n in self.nodes:
            errors += n.cleanup()
        self.gateways, self.nodes = [], []
        if self.pg is not None:
            try:
                self.pg.stop()
            except Exception as e:  # noqa: BLE001
                errors.append("postgres: %s" % e)
        if getattr(self, "s3", None) is not None:
            self.s3.kill()
            self.s3.wait()
            self.s3 = None
        if self.switch is not None:
            errors += self.switch.stop()
            errors += ["left: %s" % x for x in self.switch.leftovers()]
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            if os.path.exists(self.dir):
                errors.append("%s could not be removed" % self.dir)
            self.dir = None
        if check:
            assert not errors, "cluster cleanup: %s" % "; ".join(errors)
        return errors

    # ---- access ----------------------------------------------------------------------------

    def node(self, i):
        return self.nodes[i]

    def node_by_id(self, node_id):
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise AssertionError("no node %r in %s" % (node_id, [n.id for n in self.nodes]))

    def gateway(self, i):
        return self.gateways[i]

    @property
    def admin_key(self):
        with open(self.admin_key_file) as f:
            return f.read().strip()

    def client(self, key=None, gw=0, **kw):
        """A warren.Client on gateway gw with key (default: the admin key)."""
        import warren
        return warren.Client(self.gateways[gw].url, key if key is not None else self.admin_key, **kw)

    def nodes_view(self, gw=0):
        """GET /v1/nodes on gateway gw: {node id: its record}."""
        c = self.client(gw=gw)
        try:
            return {n["id"]: n for n in c.request("GET", "/v1/nodes").json()["nodes"]}
        finally:
            c.close()

    def wait_nodes(self, healthy, gw=0, timeout=20):
        """Wait until gateway gw's GET /v1/nodes says exactly the node ids `healthy` are healthy."""
        healthy = set(healthy)

        def ok():
            v = self.nodes_view(gw)
            now = {i for i, n in v.items() if n.get("state") == "healthy"}
            return v if now == healthy else None
        return wait_for("gateway %d to see healthy nodes %s" % (gw, sorted(healthy)), ok, timeout, 0.2)

    def logs(self):
        """The end of every daemon's log, for a failure's message."""
        out = []
        for n in self.nodes:
            out.append("--- node %s (%s) ---\n%s" % (n.id, "up" if n.running else "down", n.log()))
        for g in self.gateways:
            out.append("--- gateway %d (%s) ---\n%s" % (g.i, "up" if g.running else "down", g.log()))
        return "\n".join(out)


# ---- self-check ------------------------------------------------------------------------------

_SERVE = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(8)
print("ready", flush=True)
for _ in range(int(sys.argv[3])):
    c, a = s.accept(); c.sendall(("hello from %s to %s\n" % (sys.argv[1], a[0])).encode()); c.close()
"""

_CONNECT = r"""
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
print(c.recv(100).decode().strip())
"""


def self_check():
    """PostgreSQL and the network for real, without daemons: a server in node 0's namespace
    reached from the host and from node 1, the database answering; then nothing left."""
    c = Cluster(nodes=3, gateways=0)
    c.start(daemons=False)
    sw = c.switch
    pg_pid, pg_dir, cdir = c.pg.pid(), c.pg.dir, c.dir
    srv = None
    try:
        assert c.pg.psql("select current_database()") == "warren"
        assert c.pg.psql("show fsync") == "off"
        ns0, a0 = sw.nodes[0]
        ns1, a1 = sw.nodes[1]
        srv = subprocess.Popen(["nsenter", "--net=/run/netns/" + ns0, sys.executable, "-c", _SERVE, a0,
                                str(NODE_PORT), "2"], stdout=subprocess.PIPE, text=True)
        assert srv.stdout.readline().strip() == "ready"
        with socket.create_connection((a0, NODE_PORT), timeout=5) as s:
            got = s.recv(100).decode()
        assert got == "hello from %s to %s\n" % (a0, sw.host_end), got
        r = _run("nsenter", "--net=/run/netns/" + ns1, sys.executable, "-c", _CONNECT, a0, str(NODE_PORT))
        assert r.stdout.strip() == "hello from %s to %s" % (a0, a1), r.stdout
        srv.wait(timeout=5)
        # the host routes no range: our link's /31 and a /32 per node
        routes = _run("ip", "-4", "route", "show", "dev", sw.ifname).stdout.splitlines()
        for line in routes:
            dst = line.split()[0]
            assert dst.endswith("/31") or "/" not in dst, "a range routed on the host: %r" % line
        # nsenter --net keeps the host's mount namespace (see the module's docstring)
        r = _run("nsenter", "--net=/run/netns/" + ns0, "readlink", "/proc/self/ns/mnt")
        assert r.stdout.strip() == os.readlink("/proc/self/ns/mnt"), r.stdout
    finally:
        if srv is not None and srv.poll() is None:
            srv.kill()
            srv.wait()
        c.stop()
    left = sw.leftovers()
    assert not left, "left behind: %s" % left
    assert not os.path.exists(pg_dir) and not os.path.exists(cdir), "directories left"
    assert pg_pid and not os.path.exists("/proc/%d" % pg_pid), "postgres %s still runs" % pg_pid
    return {"pg_pid": pg_pid, "nodes": [a for _, a in sw.nodes] or "(removed)", "j": sw.j}


if __name__ == "__main__":
    os.environ.setdefault("WARREN_BUILD", os.path.join(HERE, "../../build"))
    print("self-check ok:", self_check())
