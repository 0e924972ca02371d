"""Multi-host Warren (node and gateway roles): three node daemons, each in a network namespace of
its own, and two gateways on 127.0.0.1 sharing one PostgreSQL database and a file:// object
store (clusterfix.py, pgfix.py). Everything goes through a gateway, as a client would: the
Python SDK, the CLI, E2B's wire; the nodes are reached directly only to check what they hold.

One cluster serves the module (it takes a few seconds to start); after each test every sandbox
is deleted and every daemon is up and seen healthy again (the `cl` fixture), so each test starts
from an empty cluster. A failed test's daemon logs are saved under BUILD/cluster-logs/.
"""
import http.client
import json
import os
import shutil
import threading
import time

import pytest

import clusterfix
import pgfix
from conftest import BUILD, warren as warren_cli
from clusterfix import wait_for

NODES, GATEWAYS = 3, 2
SB_TIMEOUT = 600  # sandboxes outlive any test: the fixture deletes them
DEAD = 15  # seconds: a node's death seen (--node-dead-after-ms 1500, health every 300 ms)
BACK = 40  # seconds: a node restarted on its state seen again, its sandboxes with it


# ---- the harness itself, without daemons (first: it uses the same names as the cluster) -----

def test_harness_self_check():
    """PostgreSQL, the switch and node namespaces for real: traffic host<->node and node<->node,
    then nothing left (clusterfix.self_check)."""
    if pgfix.available():
        pytest.fail(pgfix.available())
    clusterfix.self_check()


# ---- fixtures -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster():
    why = pgfix.available()
    if why:
        pytest.fail(why)
    c = clusterfix.Cluster(nodes=NODES, gateways=GATEWAYS)
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def keys(cluster):
    """Team keys made through gateway 0's POST /v1/keys with the admin key."""
    out = {}
    for team in ("team-a", "team-b"):
        st, j = call(cluster, "POST", "/v1/keys", cluster.admin_key, {"team": team, "name": "cluster-test"})
        assert st in (200, 201), "POST /v1/keys through the gateway: %s %r" % (st, j)
        assert j.get("key"), j
        out[team] = j["key"]
    return out


@pytest.fixture
def cl(cluster, request):
    """The module's cluster; afterwards every daemon up again, every sandbox deleted (through
    the gateway, then through each node directly), every node healthy to both gateways."""
    failed = request.session.testsfailed
    yield cluster
    if request.session.testsfailed > failed:
        save_logs(cluster, request.node.name)
    restore(cluster)


def restore(c):
    for n in c.nodes:
        if not n.running:
            n.start()
    for g in c.gateways:
        if not g.running:
            g.start()
    ids = {n.id for n in c.nodes}
    for g in c.gateways:
        c.wait_nodes(ids, gw=g.i, timeout=BACK)
    st, j = call(c, "GET", "/v1/sandboxes?all=1&limit=1000", c.admin_key)
    if st == 200:
        for s in j["sandboxes"]:
            call(c, "DELETE", "/v1/sandboxes/" + s["id"], c.admin_key)
    for n in c.nodes:
        n.delete_all()
    for n in c.nodes:
        wait_for("node %s to hold no sandbox" % n.id, lambda: not n.sandbox_ids(), 30, 0.2)


def save_logs(c, name):
    d = os.path.join(BUILD, "cluster-logs", name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d, exist_ok=True)
    for n in c.nodes:
        shutil.copyfile(os.path.join(n.d.dir, "warrend.log"), os.path.join(d, "node-%s.log" % n.id))
    for g in c.gateways:
        shutil.copyfile(os.path.join(g.dir, "warrend.log"), os.path.join(d, "gateway-%d.log" % g.i))
    print("daemon logs of %s: %s" % (name, d))


# ---- helpers --------------------------------------------------------------------------------

def call(c, method, path, key, body=None, gw=0, headers=None, timeout=60):
    """One request to gateway gw: (status, parsed JSON body or None)."""
    h = dict(headers or {})
    if key is not None:
        h["Authorization"] = "Bearer " + key
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    conn = http.client.HTTPConnection("127.0.0.1", c.gateway(gw).port, timeout=timeout)
    try:
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        raw = r.read()
    finally:
        conn.close()
    try:
        return r.status, json.loads(raw) if raw else None
    except ValueError:
        return r.status, raw


def sandbox_json(c, key, sid, gw=0):
    st, j = call(c, "GET", "/v1/sandboxes/" + sid, key, gw=gw)
    assert st == 200, "GET /v1/sandboxes/%s through gateway %d: %s %r" % (sid, gw, st, j)
    return j


def create(c, key, gw=0):
    """A sandbox made through gateway gw with the SDK; (warren.Sandbox, its JSON)."""
    import warren
    sb = warren.Sandbox.create(client=c.client(key, gw=gw), timeout=SB_TIMEOUT)
    j = sandbox_json(c, key, sb.id, gw=gw)
    assert j["state"] == "running", j
    assert j.get("node") in {n.id for n in c.nodes}, "the sandbox's node is not one of the cluster's: %r" % j
    return sb, j


def cluster_spec():
    import yaml
    with open(os.path.join(os.path.dirname(__file__), "../../docs/openapi-cluster.yaml")) as f:
        return yaml.safe_load(f)


def validate(body, spec, path):
    """body against the 200 answer's schema of GET path in the document (its references to
    #/components/schemas inlined, properties it does not declare refused)."""
    import jsonschema

    def inline(x):
        if isinstance(x, dict):
            if "$ref" in x:
                return inline(spec["components"]["schemas"][x["$ref"].rsplit("/", 1)[1]])
            y = {k: inline(v) for k, v in x.items()}
            if y.get("type") == "object" and "properties" in y:
                y.setdefault("additionalProperties", False)
            return y
        if isinstance(x, list):
            return [inline(v) for v in x]
        return x

    schema = spec["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    jsonschema.validate(body, inline(schema))


def node_counts(sandboxes):
    counts = {}
    for j in sandboxes:
        counts[j["node"]] = counts.get(j["node"], 0) + 1
    return counts


# ---- the tests ------------------------------------------------------------------------------

def test_sdk_through_gateway(cl, keys):
    import warren
    a, b = cl.client(keys["team-a"]), cl.client(keys["team-b"])
    sb, j = create(cl, keys["team-a"])
    sid = sb.id
    node = cl.node_by_id(j["node"])
    assert sid in node.sandbox_ids(), "%s says it runs on %s, whose /node/sandboxes lacks it" % (sid, node.id)

    # on its node, the sandbox is the team's: the node token acting as team-a sees it, as team-b not
    st, body = node.api("GET", "/v1/sandboxes/" + sid, headers={"Warren-Team": "team-a"})
    assert st == 200 and body["id"] == sid, "node %s, as team-a: %s %r" % (node.id, st, body)
    st, body = node.api("GET", "/v1/sandboxes/" + sid, headers={"Warren-Team": "team-b"})
    assert st == 404, "node %s, as team-b: %s %r" % (node.id, st, body)

    r = sb.commands.run("echo hi")
    assert r.stdout == "hi\n" and r.exit_code == 0, r
    sb.files.write("/root/note.txt", "through the gateway\n")
    assert sb.files.read("/root/note.txt") == "through the gateway\n"
    assert sid in [s.id for s in warren.Sandbox.list(client=a)]

    # another team sees nothing of it
    assert sid not in [s.id for s in warren.Sandbox.list(client=b)]
    for method, path in (("GET", "/v1/sandboxes/" + sid), ("DELETE", "/v1/sandboxes/" + sid)):
        st, body = call(cl, method, path, keys["team-b"])
        assert st == 404, "team-b %s %s: %s %r" % (method, path, st, body)
    with pytest.raises(warren.NotFoundError):
        warren.Sandbox(sid, client=b).commands.run("echo no")
    with pytest.raises(warren.NotFoundError):
        warren.Sandbox(sid, client=b).files.read("/root/note.txt")

    # a bad key is 401, for the list and for the sandbox
    for path in ("/v1/sandboxes", "/v1/sandboxes/" + sid):
        st, body = call(cl, "GET", path, "wr_not_a_key")
        assert st == 401, "a bad key on %s: %s %r" % (path, st, body)
        st, body = call(cl, "GET", path, None)
        assert st == 401, "no key on %s: %s %r" % (path, st, body)
    with pytest.raises(warren.AuthenticationError):
        warren.Sandbox.create(client=cl.client("wr_not_a_key"), timeout=60)

    assert sb.kill() is True
    st, body = call(cl, "GET", "/v1/sandboxes/" + sid, keys["team-a"])
    assert st == 404, (st, body)
    assert sid not in [s.id for s in warren.Sandbox.list(client=a)]
    wait_for("%s gone from node %s" % (sid, node.id), lambda: sid not in node.sandbox_ids(), 10)


def test_health_and_nodes(cl, keys):
    st, _ = call(cl, "GET", "/healthz", None)
    assert st == 200
    st, body = call(cl, "GET", "/v1/nodes", keys["team-a"])
    assert st in (401, 403), "a team key read GET /v1/nodes: %s %r" % (st, body)
    view = cl.nodes_view()
    assert set(view) == {n.id for n in cl.nodes}, view
    tables = cl.pg.psql("SELECT count(*) FROM information_schema.tables "
                        "WHERE table_schema NOT IN ('pg_catalog', 'information_schema')")
    assert int(tables) > 0, "the gateways made no table in their database"
    for n in cl.nodes:
        assert view[n.id]["state"] == "healthy", view
        assert n.addr in view[n.id]["addr"], view
    # a node's own API: its token, or nothing
    n = cl.node(0)
    st, info = n.api("GET", "/node/info")
    assert st == 200 and info["id"] == n.id and info["state"] == "ready", info
    assert "base" in info["templates"] and info["capacity"]["sandboxes"] == 0, info
    # the object store is S3 (s3rver) when tests/s3 is installed, as scripts/deps.sh test does
    if cl.s3 is not None:
        assert info["object_store"].startswith("s3://"), info
    # the answers are what docs/openapi-cluster.yaml says
    spec = cluster_spec()
    validate(info, spec, "/node/info")
    st, listed = n.api("GET", "/node/sandboxes")
    assert st == 200
    validate(listed, spec, "/node/sandboxes")
    st, nodes = call(cl, "GET", "/v1/nodes", cl.admin_key)
    assert st == 200
    validate(nodes, spec, "/v1/nodes")
    for path in ("/node/info", "/node/sandboxes"):
        st, body = n.api("GET", path, token=False)
        assert st == 401, "node %s %s without the token: %s %r" % (n.id, path, st, body)
        st, body = n.api("GET", path, token=False, headers={"Authorization": "Bearer " + "0" * 48})
        assert st == 401, "node %s %s with a wrong token: %s %r" % (n.id, path, st, body)


def test_placement_spreads(cl, keys):
    made = [create(cl, keys["team-a"]) for _ in range(6)]
    js = [j for _, j in made]
    counts = node_counts(js)
    assert len(counts) == NODES, "6 creates on %d healthy nodes landed on %s" % (NODES, counts)
    for n in cl.nodes:
        held = n.sandbox_ids()
        assert held == {j["id"] for j in js if j["node"] == n.id}, \
            "node %s holds %s; the gateway placed %s there" % (n.id, held, counts.get(n.id, 0))

    def agree():
        view = cl.nodes_view()
        got = {i: v["sandboxes"] for i, v in view.items()}
        return got if got == {n.id: counts.get(n.id, 0) for n in cl.nodes} else None
    try:
        wait_for("GET /v1/nodes to count %s" % counts, agree, 5, 0.2)
    except AssertionError as e:
        raise AssertionError("%s; GET /v1/nodes: %r" % (e, cl.nodes_view())) from None
    for sb, _ in made:
        sb.kill()


def test_cli_through_gateway(cl, keys):
    env = {"WARREN_API_URL": cl.gateway(0).url, "WARREN_API_KEY": keys["team-a"]}

    def cli(*args):
        r = warren_cli(*args, env=env, timeout=120)
        assert r.returncode == 0, "warren %s: exit %d: %s%s" % (
            " ".join(args), r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace"))
        return r.stdout.decode()

    sid = cli("create", "--timeout", str(SB_TIMEOUT)).strip()
    assert sid, "warren create printed no id"
    j = sandbox_json(cl, keys["team-a"], sid)
    assert j["node"] in {n.id for n in cl.nodes}, j
    assert cli("exec", sid, "--", "echo", "hi") == "hi\n"
    assert sid in cli("ls")
    assert cli("rm", sid) == sid + "\n"
    st, body = call(cl, "GET", "/v1/sandboxes/" + sid, keys["team-a"])
    assert st == 404, (st, body)
    r = warren_cli("ls", env=dict(env, WARREN_API_KEY="wr_not_a_key"), timeout=60)
    assert r.returncode == 1, r


def test_two_gateways(cl, keys):
    import warren
    sb, j = create(cl, keys["team-a"], gw=0)
    other = warren.Sandbox.connect(sb.id, client=cl.client(keys["team-a"], gw=1))
    assert other.commands.run("echo via-gateway-2").stdout == "via-gateway-2\n"
    other.files.write("/root/x", "2")
    assert sb.files.read("/root/x") == "2"
    assert sandbox_json(cl, keys["team-a"], sb.id, gw=1)["node"] == j["node"]
    assert sb.id in [s.id for s in warren.Sandbox.list(client=cl.client(keys["team-a"], gw=1))]
    other.kill()
    st, body = call(cl, "GET", "/v1/sandboxes/" + sb.id, keys["team-a"], gw=0)
    assert st == 404, "deleted through gateway 2, gateway 1 answers %s %r" % (st, body)


def test_gateway_killed_and_restarted(cl, keys):
    import warren
    made = [create(cl, keys["team-a"], gw=0) for _ in range(2)]
    g = cl.gateway(0)
    g.kill9()
    # the other gateway serves meanwhile
    for sb, j in made:
        assert sandbox_json(cl, keys["team-a"], sb.id, gw=1)["state"] == "running"
    g.start()
    wait_for("gateway 0 to answer /healthz again", g.healthy, 10)
    cl.wait_nodes({n.id for n in cl.nodes}, gw=0)
    a = cl.client(keys["team-a"], gw=0)
    listed = {s.id for s in warren.Sandbox.list(client=a)}
    for sb, j in made:
        assert sb.id in listed, "%s (on %s) is not listed after the gateway's restart: %s" % (
            sb.id, j["node"], listed)
        again = sandbox_json(cl, keys["team-a"], sb.id)
        assert again["state"] == "running" and again["node"] == j["node"], (j, again)
        s = warren.Sandbox.connect(sb.id, client=a)
        assert s.commands.run("echo still").stdout == "still\n"
        s.kill()


def test_resume_from_disk_on_another_node(cl, keys):
    key = keys["team-a"]
    sb, j = create(cl, key)
    a = cl.node_by_id(j["node"])
    sb.files.write("/root/k", "kept across nodes\n")
    st, body = call(cl, "POST", "/v1/sandboxes/%s/pause" % sb.id, key, {"mode": "disk"})
    assert st == 200 and body["state"] == "paused" and body.get("paused_mode") == "disk", (st, body)
    assert sb.id in a.sandbox_ids(), "node %s no longer lists its sandbox paused to disk" % a.id

    a.kill9()
    others = {n.id for n in cl.nodes} - {a.id}
    cl.wait_nodes(others, timeout=DEAD)
    wait_for("%s (paused on %s) to be reported lost" % (sb.id, a.id),
             lambda: sandbox_json(cl, key, sb.id)["state"] == "lost", DEAD, 0.2)
    st, body = call(cl, "POST", "/v1/sandboxes/%s/resume" % sb.id, key, {})
    assert st == 200, "resume with its node %s dead: %s %r" % (a.id, st, body)
    assert body["state"] == "running" and body["node"] in others, \
        "resumed on %r, expected one of %s: %r" % (body.get("node"), sorted(others), body)
    b = cl.node_by_id(body["node"])
    assert sb.id in b.sandbox_ids()
    assert sb.files.read("/root/k") == "kept across nodes\n"
    assert sb.commands.run("echo moved").stdout == "moved\n"

    # node A comes back holding its old copy: the gateway has it removed there
    a.start()
    cl.wait_nodes({n.id for n in cl.nodes}, timeout=BACK)
    wait_for("the old copy of %s to leave node %s" % (sb.id, a.id), lambda: sb.id not in a.sandbox_ids(), BACK, 0.3)
    after = sandbox_json(cl, key, sb.id)
    assert after["state"] == "running" and after["node"] == b.id, after
    assert sb.id in b.sandbox_ids()
    assert sb.files.read("/root/k") == "kept across nodes\n"
    sb.kill()


def test_create_from_snapshot_on_another_node(cl, keys):
    """A snapshot is exported as it is taken: a create from it goes to its node, and to another
    node (which imports it) once its node is gone; a fork's copies share the parent's node."""
    key = keys["team-a"]
    sb, j = create(cl, key)
    a = cl.node_by_id(j["node"])
    sb.files.write("/root/s", "in the snapshot\n")
    st, snap = call(cl, "POST", "/v1/sandboxes/%s/snapshots" % sb.id, key, {"name": "cross"})
    assert st in (200, 201), (st, snap)
    st, forked = call(cl, "POST", "/v1/sandboxes/%s/fork" % sb.id, key, {"count": 2})
    assert st in (200, 201) and len(forked["sandboxes"]) == 2, (st, forked)
    for f in forked["sandboxes"]:
        fj = sandbox_json(cl, key, f["id"])
        assert fj["node"] == a.id, fj
        call(cl, "DELETE", "/v1/sandboxes/" + f["id"], key)
    st, first = call(cl, "POST", "/v1/sandboxes", key, {"template": "cross", "timeout": SB_TIMEOUT})
    assert st in (200, 201) and first["node"] == a.id, \
        "a create from a snapshot goes to its node %s while it is up: %s %r" % (a.id, st, first)
    st, _ = call(cl, "DELETE", "/v1/sandboxes/" + first["id"], key)
    assert st in (200, 204)

    a.kill9()
    others = {n.id for n in cl.nodes} - {a.id}
    cl.wait_nodes(others, timeout=DEAD)
    wait_for("node %s to be unhealthy" % a.id, lambda: all(
        n["state"] == "unhealthy" for n in call(cl, "GET", "/v1/nodes", cl.admin_key)[1]["nodes"]
        if n["id"] == a.id), DEAD, 0.2)
    st, moved = call(cl, "POST", "/v1/sandboxes", key, {"template": snap["id"], "timeout": SB_TIMEOUT})
    assert st in (200, 201), "a create from %s with its node %s dead: %s %r" % (snap["id"], a.id, st, moved)
    assert moved["node"] in others, moved
    import warren
    m = warren.Sandbox.connect(moved["id"], client=cl.client(key))
    assert m.files.read("/root/s") == "in the snapshot\n"
    m.kill()
    # every copy goes with a delete of the snapshot (the dead node's with its node's return)
    st, _ = call(cl, "DELETE", "/v1/snapshots/" + snap["id"], key)
    assert st in (200, 204), st
    st, _ = call(cl, "GET", "/v1/snapshots/" + snap["id"], key)
    assert st == 404, st
    a.start()
    cl.wait_nodes({n.id for n in cl.nodes}, timeout=BACK)


def test_node_killed_mid_load(cl, keys):
    import warren
    key = keys["team-a"]
    first = [create(cl, key) for _ in range(NODES)]
    victim = cl.node_by_id(first[0][1]["node"])
    made, failed = [], []
    stop = threading.Event()

    def load():
        c = cl.client(key)
        deadline = time.monotonic() + 60
        while not stop.is_set() and len(made) < 5 and time.monotonic() < deadline:
            try:
                sb = warren.Sandbox.create(client=c, timeout=SB_TIMEOUT)
                made.append(sb.id)
            except warren.WarrenError as e:  # a create placed on the dying node may fail
                failed.append(e)
                time.sleep(0.1)
    t = threading.Thread(target=load, daemon=True)
    t.start()
    try:
        wait_for("a create of the load to succeed", lambda: made, 60, 0.05)
        victim.kill9()
        t.join(90)
        assert not t.is_alive(), "the load's creates did not end"
    finally:
        stop.set()
    others = {n.id for n in cl.nodes} - {victim.id}
    cl.wait_nodes(others, timeout=DEAD)

    every = [sb.id for sb, _ in first] + made
    lost, alive = [], []
    for sid in every:
        j = sandbox_json(cl, key, sid)
        (lost if j["node"] == victim.id else alive).append(sid)
    assert first[0][0].id in lost
    print("creates under load: %d made, %d failed (%s)" % (len(made), len(failed), failed[:3]))

    def lost_state(sid):
        j = sandbox_json(cl, key, sid)
        return j if j["state"] == "lost" else None
    for sid in lost:
        j = wait_for("%s (on %s) to be reported lost" % (sid, victim.id), lambda: lost_state(sid), DEAD, 0.2)
        assert victim.id in (j.get("reason") or ""), "the reason does not name node %s: %r" % (victim.id, j)
    listed = {s["id"]: s for s in call(cl, "GET", "/v1/sandboxes?limit=1000", key)[1]["sandboxes"]}
    for sid in lost:
        assert sid in listed and listed[sid]["state"] == "lost", "GET /v1/sandboxes on %s: %r" % (
            sid, listed.get(sid))
    st, body = call(cl, "POST", "/v1/sandboxes/%s/exec" % lost[0], key, {"cmd": ["true"]})
    assert st == 409, "exec on a lost sandbox: %s %r" % (st, body)
    with pytest.raises(warren.ConflictError):
        warren.Sandbox(lost[0], client=cl.client(key)).commands.run("true")
    for sid in alive:
        assert sandbox_json(cl, key, sid)["state"] == "running", sid

    # new creates go to the others
    for _ in range(2):
        sb, j = create(cl, key)
        assert j["node"] in others, "a create went to the dead node %s: %r" % (victim.id, j)
        alive.append(sb.id)

    # the node comes back with its sandboxes (they outlived its daemon)
    victim.start()
    cl.wait_nodes({n.id for n in cl.nodes}, timeout=BACK)
    for sid in lost:
        j = wait_for("%s back to running on %s" % (sid, victim.id),
                     lambda: (lambda j: j if j["state"] == "running" else None)(sandbox_json(cl, key, sid)),
                     BACK, 0.3)
        assert j["node"] == victim.id and not j.get("reason"), j
    s = warren.Sandbox.connect(lost[0], client=cl.client(key))
    assert s.commands.run("echo back").stdout == "back\n"
    for sid in set(every) | set(alive):
        st, body = call(cl, "DELETE", "/v1/sandboxes/" + sid, key)
        assert st in (200, 204), "DELETE %s: %s %r" % (sid, st, body)


def test_lost_sandbox_can_be_deleted(cl, keys):
    """DELETE of a lost sandbox removes it; when its node answers again, the gateway has the copy
    the node still holds removed (as it does for a sandbox resumed elsewhere), not brought back."""
    key = keys["team-a"]
    sb, j = create(cl, key)
    n = cl.node_by_id(j["node"])
    n.kill9()
    wait_for("%s to be reported lost" % sb.id, lambda: sandbox_json(cl, key, sb.id)["state"] == "lost", DEAD, 0.2)
    st, body = call(cl, "DELETE", "/v1/sandboxes/" + sb.id, key)
    assert st in (200, 204), "DELETE of a lost sandbox: %s %r" % (st, body)
    st, body = call(cl, "GET", "/v1/sandboxes/" + sb.id, key)
    assert st == 404, (st, body)
    # its node comes back: the copy it still holds is removed, not resurrected
    n.start()
    cl.wait_nodes({x.id for x in cl.nodes}, timeout=BACK)
    wait_for("the deleted %s to leave node %s" % (sb.id, n.id), lambda: sb.id not in n.sandbox_ids(), BACK, 0.3)
    st, body = call(cl, "GET", "/v1/sandboxes/" + sb.id, key)
    assert st == 404, (st, body)


def e2b(c, method, path, key, obj=None, headers=None):
    h = {"X-API-KEY": key}
    h.update(headers or {})
    return call(c, method, path, None, obj, headers=h)


def test_e2b_through_gateway(cl, keys):
    key = keys["team-a"]
    st, j = e2b(cl, "POST", "/sandboxes", key, {"templateID": "base", "timeout": 300})
    assert st == 201, "E2B POST /sandboxes through the gateway: %s %r" % (st, j)
    sid, tok = j["sandboxID"], j["envdAccessToken"]
    try:
        assert sandbox_json(cl, key, sid)["node"] in {n.id for n in cl.nodes}
        host = {"Host": "49983-%s.%s" % (sid, clusterfix.DOMAIN), "X-Access-Token": tok}
        st, body = call(cl, "GET", "/health", None, headers=host)
        assert st == 204, "envd GET /health by Host through the gateway: %s %r" % (st, body)
        st, body = call(cl, "POST", "/process.Process/List", None, {}, headers=host)
        assert st == 200 and "processes" in body, (st, body)
        st, body = call(cl, "GET", "/health", None, headers={"Host": host["Host"]})
        assert st == 401, "envd /health without a credential: %s %r" % (st, body)
        st, body = e2b(cl, "GET", "/sandboxes/" + sid, key)
        assert st == 200 and body["sandboxID"] == sid, (st, body)
    finally:
        st, body = e2b(cl, "DELETE", "/sandboxes/" + sid, key)
    assert st == 204, "E2B DELETE /sandboxes/%s: %s %r" % (sid, st, body)
