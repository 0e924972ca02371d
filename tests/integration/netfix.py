"""The tests' own "internet": a network namespace made by the test, reached from the host over a
veth pair, holding web, TLS, echo and DNS servers on addresses of 198.18.0.0/15 (the benchmarking
block, which no real network routes), plus the "blocked" destinations a test checks (a private
address, the metadata address 169.254.169.254) made local in the same namespace with /32 host
routes, so that a block that fails reaches this namespace and never leaves the machine.

Nothing here routes a range in the host's namespace: one /31 link and /32 host routes, each
removed at the end only if it still points at this namespace's link.

    inet = Internet().start()
    inet.addr("web")          # "198.19.J.1", the server of example.test
    inet.names                # {"example.test": "198.19.J.1", ...}
    inet.dns                  # "198.19.J.53", for warrend --dns-upstream
    inet.ca                   # the test CA's certificate (PEM text)
    inet.stop()
"""
import json
import os
import shutil
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def _run(*cmd, check=True):
    return subprocess.run(cmd, check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class Internet:
    def __init__(self):
        j = os.getpid() % 240 + 8  # concurrent test sessions get distinct addresses
        self.j = j
        self.ns = "wtnet-%d" % os.getpid()
        self.ifname = "wtn%d" % (os.getpid() % 10000000)
        self.host_end = "198.18.%d.254" % j
        self.ns_end = "198.18.%d.255" % j
        base = "198.19.%d." % j
        self.servers = {"web": base + "1", "web2": base + "2", "evil": base + "3", "other": base + "4"}
        self.dns = base + "53"
        # Blocked destinations, made local here: a private address and the metadata address.
        self.private = "10.99.%d.1" % j
        self.metadata = "169.254.169.254"
        self.names = {
            "example.test": self.servers["web"],
            "a.example.test": self.servers["web2"],
            "b.c.example.test": self.servers["web2"],
            "evil-example.test": self.servers["evil"],
            "other.test": self.servers["other"],
            # DNS rebinding: allowed-looking names whose answers are private
            "rebind.example.test": self.private,
            "meta.example.test": self.metadata,
        }
        self.dir = None
        self.procs = []
        self.routes = []

    def addr(self, name):
        return self.servers[name]

    # ---- setup -----------------------------------------------------------------------------

    def _certs(self):
        d = self.dir
        ca_key, ca_crt = os.path.join(d, "ca.key"), os.path.join(d, "ca.crt")
        key, csr, crt = os.path.join(d, "srv.key"), os.path.join(d, "srv.csr"), os.path.join(d, "srv.crt")
        _run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", ca_key, "-out", ca_crt, "-days", "2", "-subj", "/CN=Warren test CA")
        _run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", key, "-out", csr, "-subj", "/CN=example.test")
        ext = os.path.join(d, "ext.cnf")
        sans = ",".join(["DNS:" + n for n in self.names] + ["DNS:*.example.test"] +
                        ["IP:" + a for a in self.servers.values()])
        with open(ext, "w") as f:
            f.write("subjectAltName=%s\n" % sans)
        _run("openssl", "x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial",
             "-out", crt, "-days", "2", "-extfile", ext)
        with open(ca_crt) as f:
            self.ca = f.read()
        self.ca_path = ca_crt
        return crt, key

    def _nsrun(self, *cmd, check=True):
        return _run("ip", "netns", "exec", self.ns, *cmd, check=check)

    def _route(self, addr):
        _run("ip", "route", "replace", addr + "/32", "via", self.ns_end, "dev", self.ifname)
        self.routes.append(addr)

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="warren-inet-")
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self):
        crt, key = self._certs()
        _run("ip", "netns", "add", self.ns)
        _run("ip", "link", "add", self.ifname, "type", "veth", "peer", "name", "eth0", "netns", self.ns)
        _run("sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=1" % self.ifname)
        _run("ip", "addr", "add", self.host_end + "/31", "dev", self.ifname)
        _run("ip", "link", "set", self.ifname, "up")
        self._nsrun("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        self._nsrun("ip", "link", "set", "lo", "up")
        self._nsrun("ip", "addr", "add", self.ns_end + "/31", "dev", "eth0")
        self._nsrun("ip", "link", "set", "eth0", "up")
        self._nsrun("ip", "route", "add", "default", "via", self.host_end)
        local = list(self.servers.values()) + [self.dns, self.private, self.metadata]
        for a in local:
            self._nsrun("ip", "addr", "add", a + "/32", "dev", "lo")
            self._route(a)
        cfg = os.path.join(self.dir, "srv.json")
        with open(cfg, "w") as f:
            json.dump({"addresses": list(self.servers.values()) + [self.private, self.metadata],
                       "cert": crt, "key": key}, f)
        srv = subprocess.Popen(["ip", "netns", "exec", self.ns, "python3", os.path.join(HERE, "netfix_srv.py"), cfg],
                               stdout=subprocess.PIPE, stderr=open(os.path.join(self.dir, "srv.log"), "wb"))
        self.procs.append(srv)
        line = srv.stdout.readline().decode()
        assert line.strip() == "ready", "test internet servers did not start: %r (see %s)" % (line, self.dir)
        # dnsmasq: exact names only (host-record), nothing forwarded anywhere (no-resolv).
        args = ["dnsmasq", "--keep-in-foreground", "--no-daemon", "--no-resolv", "--no-hosts",
                "--no-poll", "--bind-interfaces", "--listen-address=" + self.dns, "--port=53",
                "--user=root", "--pid-file=" + os.path.join(self.dir, "dnsmasq.pid"),
                "--log-facility=" + os.path.join(self.dir, "dnsmasq.log"), "--log-queries",
                "--local=/test/"]
        for name, a in self.names.items():
            args.append("--host-record=%s,%s" % (name, a))
        dns = subprocess.Popen(["ip", "netns", "exec", self.ns, *args],
                               stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.dir, "dns.err"), "wb"))
        self.procs.append(dns)
        if dns.poll() is not None:
            raise AssertionError("dnsmasq exited: " + open(os.path.join(self.dir, "dns.err")).read())
        self._nsrun("python3", "-c", _WAIT_DNS % self.dns)

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        self.procs = []
        for a in self.routes:
            # only our own route: a concurrent session may have replaced it with its own
            _run("ip", "route", "del", a + "/32", "via", self.ns_end, "dev", self.ifname, check=False)
        self.routes = []
        _run("ip", "link", "del", self.ifname, check=False)
        _run("ip", "netns", "del", self.ns, check=False)
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


# Wait until dnsmasq answers a query for example.test (it binds after a moment).
_WAIT_DNS = r"""
import socket, struct, time
q = struct.pack(">HHHHHH", 1, 0x0100, 1, 0, 0, 0) + b"\x07example\x04test\x00" + struct.pack(">HH", 1, 1)
for _ in range(200):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.05)
    try:
        s.sendto(q, ("%s", 53)); s.recv(512); break
    except OSError:
        time.sleep(0.02)
else:
    raise SystemExit("dnsmasq does not answer")
"""
