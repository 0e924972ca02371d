"""Sandbox networking through a real daemon, real sandboxes (the `base` template) and the test
internet (netfix.py): egress on and off, allow and deny by CIDR and by name, live replacement,
DNS through the stub, rebinding, /etc/hosts, QUIC, the always-blocked destinations probed from
inside as root, spoofing, sandbox to sandbox, the connection cap, a daemon restart, and E2B's
fields. Nothing here sends a packet past the namespaces the tests made: the daemons default to
internet off, their DNS upstream is the test internet's server, and every "blocked" destination
is made local in the test internet first.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

import warren
from conftest import Daemon, delete_all, init_pid, internet

BASE = os.environ.get("WARREN_BASE_TEMPLATE")
if not BASE:
    if os.environ.get("CI") == "true":
        pytest.fail("WARREN_BASE_TEMPLATE is not set", pytrace=False)
    pytest.skip("WARREN_BASE_TEMPLATE is not set (run ./test.sh)", allow_module_level=True)


def base_state():
    top = tempfile.mkdtemp(prefix="warrend-net-")
    tdir = os.path.join(top, "state", "templates", "base")
    os.makedirs(tdir)
    os.symlink(os.path.join(os.path.abspath(BASE), "rootfs"), os.path.join(tdir, "rootfs"))
    shutil.copy(os.path.join(BASE, "config.json"), tdir)
    return top


@pytest.fixture(scope="module")
def inet():
    return internet()


@pytest.fixture(scope="module")
def d(inet):
    daemon = Daemon("--net-max-connections", "64", state_dir=base_state()).start()
    yield daemon
    try:
        delete_all(daemon)
    finally:
        daemon.cleanup()


@pytest.fixture(scope="module")
def c(d):
    client = d.client()
    yield client
    client.close()


def make(c, **net):
    return warren.Sandbox.create(client=c, timeout=120, **net)


# A probe run inside the sandbox: prints one JSON line with what happened.
PROBE = r"""
import json, socket, sys, errno
what, args = sys.argv[1], sys.argv[2:]
def out(**kw): print(json.dumps(kw)); sys.exit(0)
def err(e): return errno.errorcode.get(e.errno, str(e)) if isinstance(e, OSError) and e.errno else type(e).__name__
if what == "tcp":                      # tcp HOST PORT [payload]: connect, send, read
    try:
        s = socket.create_connection((args[0], int(args[1])), timeout=3)
        if len(args) > 2:
            s.sendall(args[2].encode().decode("unicode_escape").encode("latin-1"))
        s.settimeout(3)
        data = b""
        try:
            while len(data) < 65536:
                b = s.recv(65536)
                if not b: break
                data += b
                if b"\r\n\r\n" in data and b"Content-Length" in data:
                    head, _, body = data.partition(b"\r\n\r\n")
                    n = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
                    if len(body) >= n: break
        except socket.timeout:
            pass
        out(ok=True, data=data.decode("latin-1"))
    except Exception as e:
        out(ok=False, error=err(e))
if what == "udp":                      # udp HOST PORT: send, wait for an answer
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1.5)
    try:
        s.sendto(b"ping", (args[0], int(args[1]))); out(ok=True, data=s.recv(512).decode())
    except Exception as e:
        out(ok=False, error=err(e))
if what == "dns":                      # dns NAME [SERVER] [tcp]: one A query, the answer's rcode and addresses
    import struct, random
    name, server = args[0], (args[1] if len(args) > 1 else None)
    q = struct.pack(">HHHHHH", random.randrange(65536), 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
    if server is None:
        server = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
    try:
        if len(args) > 2 and args[2] == "tcp":
            s = socket.create_connection((server, 53), timeout=3)
            s.sendall(struct.pack(">H", len(q)) + q)
            n = struct.unpack(">H", s.recv(2))[0]; r = b""
            while len(r) < n: r += s.recv(n - len(r))
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
            s.sendto(q, (server, 53)); r = s.recv(4096)
    except Exception as e:
        out(ok=False, error=err(e))
    rcode = r[3] & 15; an = struct.unpack(">H", r[6:8])[0]
    i = 12
    while r[i]: i += r[i] + 1
    i += 5; addrs = []
    for _ in range(an):
        if r[i] & 0xc0 == 0xc0: i += 2
        else:
            while r[i]: i += r[i] + 1
            i += 1
        t, _, _, l = struct.unpack(">HHIH", r[i:i + 10]); i += 10
        if t == 1: addrs.append(socket.inet_ntoa(r[i:i + 4]))
        i += l
    out(ok=True, rcode=rcode, addrs=addrs)
if what == "raw":                      # what root cannot do in a host-owned network namespace
    res = {}
    for name, fam, typ, proto in (("raw", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW),
                                  ("packet", 17, socket.SOCK_RAW, 0)):
        try:
            socket.socket(fam, typ, proto).close(); res[name] = "ok"
        except OSError as e:
            res[name] = err(e)
    try:
        open("/proc/sys/net/ipv4/ip_forward", "w").write("1"); res["sysctl"] = "ok"
    except OSError as e:
        res["sysctl"] = err(e)
    import fcntl, struct
    try:  # SIOCSIFADDR on eth0: give ourselves another address
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        req = struct.pack("16sH2s4s8s", b"eth0", socket.AF_INET, b"\0\0", socket.inet_aton(args[0]), b"\0" * 8)
        fcntl.ioctl(s, 0x8916, req); res["addr"] = "ok"
    except OSError as e:
        res["addr"] = err(e)
    out(**res)
if what == "spoof":                    # spoof SRC HOST PORT: a datagram from an address not ours
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, 15, 1)  # IP_FREEBIND: bind an address we do not have
    try:
        s.bind((args[0], 0)); s.sendto(b"spoofed", (args[1], int(args[2]))); out(ok=True)
    except OSError as e:
        out(ok=False, error=err(e))
if what == "conns":                    # conns HOST PORT N: open N connections, count the successes
    socks, fails = [], []
    for _ in range(int(args[2])):
        try:
            socks.append(socket.create_connection((args[0], int(args[1])), timeout=2))
        except OSError as e:
            fails.append(err(e))
    out(ok=True, opened=len(socks), errors=fails[:3])
"""


def probe(sb, *args, user="root"):
    r = sb.commands.run(["python3", "-c", PROBE, *[str(a) for a in args]], user=user, timeout=30)
    return json.loads(r.stdout.strip().splitlines()[-1])


def http(sb, host, path="/", port=80, ip=None, user="root"):
    """GET path from host (connecting to ip if given, else the name as the sandbox resolves it)."""
    req = "GET %s HTTP/1.1\\r\\nHost: %s\\r\\nConnection: close\\r\\n\\r\\n" % (path, host)
    r = probe(sb, "tcp", ip or host, port, req, user=user)
    if not r["ok"] or not r["data"].startswith("HTTP/1.1 200 ") or "\r\n\r\n" not in r["data"]:
        return None  # refused, reset, or answered by the egress proxy (403)
    return json.loads(r["data"].partition("\r\n\r\n")[2])


def curl(sb, url, *opts):
    r = sb.commands.run(["curl", "-sS", "--max-time", "5", *opts, url], check=False, timeout=30)
    return json.loads(r.stdout) if r.exit_code == 0 else None


# ---- the model ---------------------------------------------------------------------------------

def test_default_is_loopback_only(c):
    with make(c) as sb:
        n = sb.get_info().network
        assert n is not None and not n.enabled and n.address is None
        ifaces = sb.commands.run("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '").stdout.split()
        assert ifaces == ["lo"]
        with pytest.raises(warren.ConflictError):
            sb.update_network(internet=True)


def test_internet_on_reaches_the_test_internet_through_nat(c, inet):
    with make(c, internet=True) as sb:
        n = sb.get_info().network
        assert n.enabled and n.internet and n.address.startswith("10.")
        got = http(sb, inet.addr("web"))
        assert got is not None and got["server"] == inet.addr("web")
        assert got["peer"] == inet.host_end  # masqueraded to the host's uplink address
        # names resolve through the stub (the sandbox's resolv.conf names its gateway)
        assert curl(sb, "http://example.test/x")["host"] == "example.test"
        assert sb.network_stats().packets_out > 0


ECHO = r"""
import socket, sys
s = socket.create_connection((sys.argv[1], 7), timeout=10)
data, got = b"x" * (1 << 20), 0
s.sendall(data)
s.shutdown(socket.SHUT_WR)
while True:
    b = s.recv(65536)
    if not b:
        break
    got += len(b)
print(got)
"""


def test_bytes_each_way_in_the_stats_and_the_ledger(c, inet):
    """1 MiB sent to the test internet's echo and back: the slot's counters and the usage
    ledger's interval (closed by the kill) count it each way, headers and all."""
    sb = make(c, internet=True)
    try:
        r = sb.commands.run(["python3", "-c", ECHO, inet.addr("web")], timeout=60)
        assert int(r.stdout) == 1 << 20
        st = sb.network_stats()
        assert (1 << 20) <= st.bytes_out < (1 << 20) * 1.2 and st.packets_out > 0
        assert (1 << 20) <= st.bytes_in < (1 << 20) * 1.2 and st.packets_in > 0
    finally:
        sb.kill()
    row = [x for x in c.usage().rows if x.key == sb.id][0]
    assert (1 << 20) <= row.net_bytes_in < (1 << 20) * 1.2, row
    assert (1 << 20) <= row.net_bytes_out < (1 << 20) * 1.2, row


def test_internet_off_has_a_slot_and_reaches_nothing(c, inet):
    with make(c, internet=False) as sb:
        assert sb.get_info().network.enabled
        assert http(sb, inet.addr("web")) is None
        assert probe(sb, "dns", "example.test")["rcode"] == 5  # REFUSED: nothing may be named
        # both refusals are in its egress log, with what refused them
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            log = list(sb.network_log())
            denied = [e for e in log if not e.allowed and e.address == inet.addr("web")]
            dns = [e for e in log if e.proto == "dns" and e.name == "example.test"]
            if denied and dns:
                break
            time.sleep(0.2)
        assert denied and denied[0].port == 80 and denied[0].rule, log
        assert dns and not dns[0].allowed, log


def test_allow_and_deny_by_cidr(c, inet):
    with make(c, internet=False, allow_out=[inet.addr("web") + "/32"]) as sb:
        assert http(sb, inet.addr("web"))["server"] == inet.addr("web")
        assert http(sb, inet.addr("web2")) is None
    with make(c, internet=True, deny_out=[inet.addr("web2")]) as sb:
        assert http(sb, inet.addr("web"))["server"] == inet.addr("web")
        assert http(sb, inet.addr("web2")) is None
    # allow beats deny, as on E2B
    with make(c, internet=True, allow_out=[inet.addr("web2")], deny_out=["0.0.0.0/0"]) as sb:
        assert http(sb, inet.addr("web2")) is not None
        assert http(sb, inet.addr("web")) is None


def test_allow_by_name_http_host_and_tls_sni(c, inet):
    with make(c, internet=True, allow_out=["example.test"], deny_out=["0.0.0.0/0"]) as sb:
        sb.files.write("/tmp/ca.pem", inet.ca)
        assert curl(sb, "http://example.test/a")["host"] == "example.test"
        got = curl(sb, "https://example.test/b", "--cacert", "/tmp/ca.pem")
        assert got is not None and got["host"] == "example.test"
        # another name: the stub refuses to resolve it, and the proxy refuses its Host/SNI even
        # when the sandbox names the address itself
        assert probe(sb, "dns", "other.test")["rcode"] == 5
        assert http(sb, "other.test", ip=inet.addr("other")) is None
        assert curl(sb, "https://other.test/", "--cacert", "/tmp/ca.pem", "--resolve",
                    "other.test:443:" + inet.addr("other")) is None
        # an address without a name falls back to the CIDR rules: denied
        assert http(sb, inet.addr("web")) is None


def test_wildcards_match_below_the_name_only(c, inet):
    with make(c, internet=True, allow_out=["*.example.test"], deny_out=["0.0.0.0/0"]) as sb:
        assert curl(sb, "http://a.example.test/")["host"] == "a.example.test"
        assert curl(sb, "http://b.c.example.test/")["host"] == "b.c.example.test"
        for name, server in (("example.test", "web"), ("evil-example.test", "evil")):
            assert probe(sb, "dns", name)["rcode"] == 5
            assert http(sb, name, ip=inet.addr(server)) is None


def test_live_replacement(c, inet):
    with make(c, internet=False) as sb:
        assert http(sb, inet.addr("web")) is None
        n = sb.update_network(allow_out=[inet.addr("web")], internet=False)
        assert n.allow_out == [inet.addr("web")] and not n.internet
        assert http(sb, inet.addr("web")) is not None
        sb.update_network(internet=True, deny_out=[inet.addr("web")])
        assert http(sb, inet.addr("web")) is None
        assert http(sb, inet.addr("web2")) is not None
        assert sb.network().deny_out == [inet.addr("web")]
        with pytest.raises(warren.InvalidArgumentError):
            sb.update_network(deny_out=["example.test"])
        assert sb.network().deny_out == [inet.addr("web")]  # a bad update changes nothing


def test_a_forks_copies_keep_the_parents_policy_in_slots_of_their_own(c, inet):
    with make(c, internet=False, allow_out=[inet.addr("web") + "/32"]) as sb, \
            make(c, network=False) as lo:
        r = sb.fork(count=2)
        assert r.ok and len(r.sandboxes) == 2, r
        try:
            addrs = {sb.get_info().network.address}
            for x in r.sandboxes:
                n = x.get_info().network
                assert n.enabled and not n.internet and n.allow_out == [inet.addr("web")]
                addrs.add(n.address)
                assert http(x, inet.addr("web"))["server"] == inet.addr("web")
                assert http(x, inet.addr("web2")) is None
            assert len(addrs) == 3, addrs
        finally:
            for x in r.sandboxes:
                x.kill()
        # A copy of a sandbox with loopback only has loopback only.
        r = lo.fork(count=1)
        try:
            assert r.ok and not r.sandboxes[0].get_info().network.enabled
        finally:
            r.sandboxes[0].kill()


def test_dns_goes_to_the_stub_whatever_server_is_named(c, inet):
    with make(c, internet=True) as sb:
        want = inet.names["a.example.test"]
        assert probe(sb, "dns", "a.example.test")["addrs"] == [want]
        # a "resolver" that serves no DNS (the web server's address), over UDP and TCP
        assert probe(sb, "dns", "a.example.test", inet.addr("web"))["addrs"] == [want]
        assert probe(sb, "dns", "a.example.test", inet.addr("web"), "tcp")["addrs"] == [want]
        # editing resolv.conf changes nothing either
        sb.commands.run("echo nameserver 192.0.2.53 > /etc/resolv.conf", user="root")
        assert probe(sb, "dns", "a.example.test")["addrs"] == [want]


def test_rebinding_and_etc_hosts(c, inet):
    with make(c, internet=True, allow_out=["*.example.test"], deny_out=["0.0.0.0/0"]) as sb:
        # an allowed name that answers a private or the metadata address: stripped by the stub...
        for name in ("rebind.example.test", "meta.example.test"):
            r = probe(sb, "dns", name)
            assert r["addrs"] == [], r
            # ...and refused by the proxy at dial time, whatever address the sandbox names
            assert http(sb, name, ip=inet.addr("web")) is None
        # /etc/hosts pointing an allowed name elsewhere: the proxy dials the name, not the address
        sb.commands.run("echo '%s a.example.test' >> /etc/hosts" % inet.addr("evil"), user="root")
        got = http(sb, "a.example.test")
        assert got is not None and got["server"] == inet.names["a.example.test"]


def test_quic_is_dropped_under_domain_rules(c, inet):
    with make(c, internet=True) as sb:
        assert probe(sb, "udp", inet.addr("web"), 443) == {"ok": True, "data": "quic"}
    with make(c, internet=True, allow_out=["example.test", inet.addr("web")],
              deny_out=["0.0.0.0/0"]) as sb:
        assert not probe(sb, "udp", inet.addr("web"), 443)["ok"]
        assert probe(sb, "udp", inet.addr("web"), 7) == {"ok": True, "data": "ping"}


def test_always_blocked_from_inside_as_root(c, d, inet):
    # listed in allow_out and internet on: still blocked
    blocked = [inet.private, inet.metadata]
    with make(c, internet=True, allow_out=[b + "/32" for b in blocked]) as sb:
        for a in blocked:
            assert http(sb, a) is None, a
        gw = sb.commands.run("awk '/nameserver/ {print $2}' /etc/resolv.conf").stdout.strip()
        # the host, through the gateway and through its other addresses: the daemon's API, the
        # test internet's host end
        assert not probe(sb, "tcp", gw, d.port)["ok"]
        assert not probe(sb, "tcp", inet.host_end, d.port)["ok"]
        assert not probe(sb, "tcp", "127.0.0.1", d.port)["ok"]
        r = probe(sb, "raw", "10.99.99.99")
        assert r == {"raw": "EPERM", "packet": "EPERM", "sysctl": r["sysctl"], "addr": "EPERM"}
        assert r["sysctl"] in ("EACCES", "EROFS", "EPERM")


def test_spoofed_sources_are_refused(c, inet):
    # Without CAP_NET_ADMIN over its namespace (no IP_TRANSPARENT, no raw socket), a sandbox
    # cannot even send from an address it does not have; the table's anti-spoofing rule behind
    # that is tested with raw packets in tests/unit/test_nft.c.
    with make(c, internet=True) as sb, make(c, internet=True) as other:
        mine, theirs = sb.get_info().network.address, other.get_info().network.address
        assert probe(sb, "spoof", mine, inet.addr("web"), 8)["ok"]
        for src in (theirs, "198.18.77.77"):
            r = probe(sb, "spoof", src, inet.addr("web"), 8)
            assert not r["ok"] and r["error"] in ("EINVAL", "EPERM", "EADDRNOTAVAIL", "ENETUNREACH"), r
        time.sleep(0.3)
        got = probe(sb, "tcp", inet.addr("web"), 80,
                    "GET /udp-seen HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
        seen = json.loads(got["data"].partition("\r\n\r\n")[2])
        assert seen.count(inet.host_end) >= 1 and "198.18.77.77" not in seen and theirs not in seen


def test_sandboxes_cannot_reach_each_other(c):
    with make(c, internet=True) as a, make(c, internet=True) as b:
        a.commands.run("python3 -m http.server 8000 >/dev/null 2>&1", background=True)
        addr = a.get_info().network.address
        for _ in range(50):
            if probe(a, "tcp", "127.0.0.1", 8000)["ok"]:
                break
            time.sleep(0.1)
        assert not probe(b, "tcp", addr, 8000)["ok"]


def test_connection_cap(c, inet):
    with make(c, internet=True, max_connections=5) as sb:
        r = probe(sb, "conns", inet.addr("web"), 9, 8)
        assert r["opened"] == 5, r


def test_bad_policies_are_refused_with_e2b_texts(c):
    cases = [
        ({"internet": True, "allow_out": ["example.test"]}, "ALL_TRAFFIC"),
        ({"deny_out": ["example.test"]}, "invalid denied CIDR example.test"),
        ({"allow_out": ["not a name"]}, "not a name"),
        ({"allow_out": ["0.0.0.0"]}, "0.0.0.0"),
        ({"enabled": False, "internet": True}, "enabled"),
    ]
    for net, text in cases:
        r = c.request("POST", "/v1/sandboxes", json_body={"network": net}, check=False)
        assert r.status == 400 and text in r.json_object()["message"], (net, r.json_object())


WATCH = r"""
import socket, sys, time
end = time.time() + float(sys.argv[3])
with open("/tmp/watch", "w", buffering=1) as f:
    while time.time() < end:
        row = []
        for a in sys.argv[1:3]:
            try:
                socket.create_connection((a, 80), timeout=0.5).close(); row.append("open")
            except OSError:
                row.append("closed")
        f.write(" ".join(row) + "\n")
        time.sleep(0.1)
"""


def test_policy_survives_kill9_and_restart(inet):
    d = Daemon(state_dir=base_state()).start()
    try:
        c = d.client()
        sb = make(c, internet=False, allow_out=[inet.addr("web")])
        addr = sb.get_info().network.address
        assert http(sb, inet.addr("web")) is not None
        # a process inside watches both servers while the daemon is killed and restarted
        sb.commands.run(["python3", "-c", WATCH, inet.addr("web"), inet.addr("web2"), "4"],
                        background=True)
        time.sleep(0.5)
        d.kill9()
        time.sleep(1.5)
        d.start()
        c = d.client()
        sb = warren.Sandbox.connect(sb.sandbox_id, client=c)
        n = sb.get_info().network
        assert n.address == addr and n.allow_out == [inet.addr("web")] and not n.internet
        assert http(sb, inet.addr("web")) is not None
        assert http(sb, inet.addr("web2")) is None
        time.sleep(2.5)
        rows = sb.files.read("/tmp/watch").split("\n")
        rows = [r for r in rows if r]
        assert len(rows) >= 8 and set(rows) == {"open closed"}, rows  # never opened, never closed
        sb.kill()
    finally:
        delete_all(d)
        d.cleanup()


def test_e2b_fields(d, inet):
    import urllib.request
    key = d.admin_key

    def e2b(method, path, body=None):
        req = urllib.request.Request(d.tcp_url + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"X-API-Key": key, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req) as r:
                return r.status, (json.loads(r.read() or b"null"))
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    st, sb = e2b("POST", "/sandboxes", {"templateID": "base", "allow_internet_access": False,
                                        "network": {"allowOut": [inet.addr("web")],
                                                    "allowPublicTraffic": False}})
    assert st == 201, sb
    sid = sb["sandboxID"]
    assert len(sb["trafficAccessToken"]) == 64
    st, det = e2b("GET", "/sandboxes/" + sid)
    assert det["allowInternetAccess"] is False
    assert det["network"]["allowOut"] == [inet.addr("web")]
    assert det["network"]["allowPublicTraffic"] is False
    st, _ = e2b("PUT", "/sandboxes/%s/network" % sid, {"allowOut": [], "denyOut": [inet.addr("web2")]})
    assert st == 204
    st, det = e2b("GET", "/sandboxes/" + sid)
    assert det["allowInternetAccess"] is True and det["network"]["denyOut"] == [inet.addr("web2")]
    def refused(net, text):
        st, body = e2b("POST", "/sandboxes", {"templateID": "base", "network": net})
        if st == 201:
            e2b("DELETE", "/sandboxes/" + body["sandboxID"])
        assert st == 400 and text in body["message"], (net, body)

    refused({"rules": {"example.test": []}}, "rules")
    refused({"egressProxy": {"address": "x:1"}}, "egressProxy")
    refused({"allowOut": ["example.test"]}, "ALL_TRAFFIC")
    refused({"denyOut": ["example.test"]}, "invalid denied CIDR example.test")
    st, body = e2b("PUT", "/sandboxes/nosuch/network", {})
    assert st == 404
    e2b("DELETE", "/sandboxes/" + sid)


def test_default_internet_on_takes_children_pre_cloned_into_slots(inet):
    """With --net-default on, --pool's children wait in network slots: a create takes one (its
    resolver set when it was cloned), and the pool fills again."""
    d = Daemon("--net-default", "on", "--pool", "2", "--net-ready", "4", "--warm", "0",
               "--domain", "sandbox.test", state_dir=base_state()).start()
    try:
        c = d.client()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(os.listdir(os.path.join(
                "/run/warren-test-%d" % os.getpid(), "net", d.table))) < 4:
            time.sleep(0.05)
        time.sleep(0.5)  # the children are cloned once slots are ready
        # loopback only on a daemon whose default is internet on (warren create --no-network)
        with make(c, network=False) as sb:
            n = sb.get_info().network
            assert not n.enabled and not n.internet and n.address is None
        for _ in range(3):
            with make(c) as sb:
                n = sb.get_info().network
                assert n.enabled and n.internet
                gw = sb.commands.run("awk '/nameserver/ {print $2}' /etc/resolv.conf").stdout.strip()
                assert gw.split(".")[:3] == n.address.split(".")[:3]
                assert http(sb, inet.addr("web"))["server"] == inet.addr("web")
                assert curl(sb, "http://example.test/")["host"] == "example.test"
                assert sb.get_host(3000) == "3000-%s.sandbox.test" % sb.sandbox_id
    finally:
        delete_all(d)
        d.cleanup()


def test_warm_sandboxes_hold_slots_and_take_the_creates_policy(inet):
    """With --net-default on, warm sandboxes wait in network slots with no policy bound (nothing
    leaves them), and the create that takes one binds its own policy; a create that wants no
    network gets a sandbox of its own."""
    d = Daemon("--net-default", "on", "--warm", "1", state_dir=base_state()).start()
    warm_dir = os.path.join(d.state, "warm")

    def warm_one():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ids = os.listdir(warm_dir) if os.path.isdir(warm_dir) else []
            if len(ids) == 1 and open(os.path.join(warm_dir, ids[0])).read() == "ready\n":
                return ids[0]
            time.sleep(0.05)
        raise AssertionError("no warm sandbox ready")

    try:
        c = d.client()
        w = warm_one()
        # Before it is taken: it has its slot's interface, and nothing gets out of it.
        r = subprocess.run(["nsenter", "-t", str(init_pid(w)), "-n", "python3", "-c",
                            "import socket; socket.create_connection((%r, 80), timeout=2)"
                            % inet.addr("web")], capture_output=True, text=True)
        assert r.returncode != 0 and any(
            e in r.stderr for e in ("TimeoutError", "ConnectionRefused", "unreachable")), r.stderr
        with make(c) as sb:
            assert sb.sandbox_id == w
            n = sb.get_info().network
            assert n.enabled and n.internet and n.address.startswith("10.")
            assert http(sb, inet.addr("web"))["server"] == inet.addr("web")
        w = warm_one()
        with make(c, internet=False) as sb:
            assert sb.sandbox_id == w
            assert sb.get_info().network.enabled and not sb.get_info().network.internet
            assert http(sb, inet.addr("web")) is None
        w = warm_one()
        with make(c, network=False) as sb:
            assert sb.sandbox_id != w
            assert sb.get_info().network.address is None
    finally:
        delete_all(d)
        d.cleanup()
