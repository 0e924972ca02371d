"""The audit trail: every state-changing API request, per team, in the state database, and
GET /v1/audit with its filters and cursor pagination, through the real daemon."""

import json
import os
import sqlite3
import subprocess
import time

import pytest

import warren
import warren.admin
from conftest import ENV, WARREN, Daemon, delete_all, make_teams


@pytest.fixture(scope="module")
def d():
    dm = Daemon().start()
    yield dm
    try:
        delete_all(dm)
    finally:
        dm.cleanup()


@pytest.fixture(scope="module")
def teams(d):
    return make_teams(d, "alpha", "beta")


def audit(c, **query):
    r = c.request("GET", "/v1/audit", query=query, check=False)
    return r.status, r.json()


def all_events(c, **query):
    """Every page, following next_cursor."""
    out, cursor = [], None
    while True:
        q = dict(query)
        if cursor:
            q["cursor"] = cursor
        status, body = audit(c, **q)
        assert status == 200, body
        out += body["events"]
        cursor = body.get("next_cursor")
        if not cursor:
            return out


@pytest.fixture(scope="module")
def session(d, teams):
    """A scripted session of team alpha over TCP: create, exec, write a file, pause, resume,
    delete, and a failed request (an exec on the deleted sandbox)."""
    c = teams["alpha"]
    t0 = int(time.time() * 1000)
    sb = warren.Sandbox.create(client=c, timeout=120)
    sb.commands.run("echo hi")
    sb.files.write("/tmp/f.txt", "content")
    sb.pause()
    sb.resume()
    sid = sb.sandbox_id
    sb.kill()
    r = c.request("POST", "/v1/sandboxes/%s/exec" % sid, json_body={"cmd": ["true"]}, check=False)
    assert r.status == 404
    # Reads are not audited.
    c.request("GET", "/v1/sandboxes")
    t1 = int(time.time() * 1000) + 1
    return {"sid": sid, "t0": t0, "t1": t1}


EXPECTED = [
    ("sandbox.create", "POST", "/v1/sandboxes", 201),
    ("exec.start", "POST", "/v1/sandboxes/{id}/exec", 200),
    ("file.write", "PUT", "/v1/sandboxes/{id}/files", 201),
    ("sandbox.pause", "POST", "/v1/sandboxes/{id}/pause", 200),
    ("sandbox.resume", "POST", "/v1/sandboxes/{id}/resume", 200),
    ("sandbox.delete", "DELETE", "/v1/sandboxes/{id}", 204),
    ("exec.start", "POST", "/v1/sandboxes/{id}/exec", 404),
]


def test_the_session_is_in_the_trail(teams, session):
    ev = [e for e in all_events(teams["alpha"]) if e["object"]["id"] == session["sid"]]
    got = [(e["action"], e["request"]["method"], e["request"]["route"], e["result"]["status"])
           for e in ev]
    assert got == EXPECTED, got
    key = teams["alpha_key"]
    for e in ev:
        assert e["who"] == {"team": "alpha", "key_id": key.id}
        assert e["from"] == "tcp:127.0.0.1"
        assert e["object"]["kind"] == "sandbox"
        assert e["request_id"]
    assert ev[-1]["result"]["code"] == "not_found"
    assert ev[0]["result"]["code"] is None
    # Ids ascend; times are RFC 3339.
    ids = [int(e["id"]) for e in ev]
    assert ids == sorted(ids)
    assert all(e["time"].endswith("Z") for e in ev)


def test_no_secret_and_no_reads_in_the_trail(d, teams, session):
    body = json.dumps(all_events(teams["admin"]))
    assert teams["alpha_key"].key not in body
    assert teams["beta_key"].key not in body
    assert '"GET"' not in body
    # In the database itself too: the rows hold key ids, never a secret.
    db = sqlite3.connect("file:%s/warren.db?mode=ro" % d.state, uri=True)
    try:
        rows = db.execute("SELECT * FROM audit").fetchall()
    finally:
        db.close()
    assert rows
    assert teams["alpha_key"].key not in repr(rows)


def test_the_trail_is_append_only(d, session):
    db = sqlite3.connect("%s/warren.db" % d.state)
    try:
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            db.execute("UPDATE audit SET status = 200")
    finally:
        db.close()


def test_a_team_reads_only_its_own_trail(teams, session):
    beta = teams["beta"]
    assert [e for e in all_events(beta) if e["who"]["team"] != "beta"] == []
    assert all(e["object"]["id"] != session["sid"] for e in all_events(beta))
    status, body = audit(beta, team="alpha")
    assert status == 403 and body["code"] == "forbidden"
    # Its own team by name is allowed.
    status, _ = audit(beta, team="beta")
    assert status == 200


def test_admin_reads_any_team(teams, session):
    admin = teams["admin"]
    ev = all_events(admin, team="alpha")
    assert ev and all(e["who"]["team"] == "alpha" for e in ev)
    everyone = all_events(admin)
    assert {e["who"]["team"] for e in everyone} >= {"alpha", "admin"}
    # The admin's own key creations, on the unix socket.
    mine = [e for e in everyone if e["action"] == "key.create"]
    assert len(mine) >= 2
    assert all(e["who"] == {"team": "admin", "key_id": "unix"} and e["from"] == "unix"
               for e in mine)


def test_filters(teams, session):
    c = teams["alpha"]
    sid = session["sid"]
    ev = all_events(c, action="sandbox.pause")
    assert [e["object"]["id"] for e in ev] == [sid]
    ev = all_events(c, action="sandbox.", object=sid)
    assert [e["action"] for e in ev] == ["sandbox.create", "sandbox.pause", "sandbox.resume",
                                        "sandbox.delete"]
    assert len(all_events(c, object=sid)) == len(EXPECTED)
    assert all_events(c, object="sb_none") == []
    assert all_events(c, to=session["t0"] - 60000) == []
    assert all_events(c, **{"from": session["t1"] + 60000}) == []
    win = all_events(c, **{"from": session["t0"], "to": session["t1"], "object": sid})
    assert len(win) == len(EXPECTED)
    # RFC 3339 bounds.
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(session["t0"] / 1000 - 5))
    assert len(all_events(c, **{"from": iso, "object": sid})) == len(EXPECTED)


def test_pagination(teams, session):
    c = teams["alpha"]
    everything = all_events(c, limit=1000)
    pages, cursor = [], None
    while True:
        q = {"limit": 2}
        if cursor:
            q["cursor"] = cursor
        status, body = audit(c, **q)
        assert status == 200
        assert len(body["events"]) <= 2
        pages.append(body["events"])
        cursor = body.get("next_cursor")
        if not cursor:
            break
    walked = [e for p in pages for e in p]
    assert [e["id"] for e in walked] == [e["id"] for e in everything]
    assert len(pages) >= len(EXPECTED) // 2


@pytest.mark.parametrize("query", [{"limit": "0"}, {"limit": "1001"}, {"cursor": "abc"},
                                   {"from": "yesterday"}, {"to": "2026-13-01T00:00:00Z"}])
def test_bad_queries(teams, query):
    status, body = audit(teams["alpha"], **query)
    assert status == 400 and body["code"] == "invalid", body


def test_unauthenticated_is_refused(d):
    c = warren.Client(d.tcp_url, "wr_" + "0" * 64)
    r = c.request("GET", "/v1/audit", check=False)
    assert r.status == 401


def test_retention_flag(tmp_path):
    import subprocess
    dm = Daemon("--audit-retention-days", "0")
    try:
        r = subprocess.run([dm.binary, "--state-dir", dm.state, "--socket", dm.sock,
                            "--audit-retention-days", "0"], capture_output=True, text=True,
                           timeout=20)
        assert r.returncode == 2 and "must be at least 1" in r.stderr, r.stderr
    finally:
        import shutil
        shutil.rmtree(dm.dir, ignore_errors=True)


def test_mcp_tool_calls_are_audited(d, teams):
    """An MCP tool is a sub-request of the native API with the caller's key: its state changes
    are in the trail under the caller's team and key, from the /mcp client's address."""
    import http.client
    key = teams["alpha_key"]
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=60)
    msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
           "params": {"name": "sandbox_create", "arguments": {"timeout_s": 60}}}
    conn.request("POST", "/mcp", body=json.dumps(msg), headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "Authorization": "Bearer " + key.key})
    r = conn.getresponse()
    body = json.loads(r.read())
    conn.close()
    assert r.status == 200, body
    sid = body["result"]["structuredContent"]["sandbox_id"]
    try:
        ev = all_events(teams["alpha"], object=sid)
        assert [e["action"] for e in ev] == ["sandbox.create"], ev
        assert ev[0]["who"] == {"team": "alpha", "key_id": key.id}
        assert ev[0]["from"] == "tcp:127.0.0.1"
        assert ev[0]["result"]["status"] == 201
    finally:
        teams["alpha"].request("DELETE", "/v1/sandboxes/" + sid, check=False)


def test_records_past_the_retention_are_pruned():
    """At start (and hourly) the prune deletes the records older than --audit-retention-days,
    on a worker, and keeps the rest."""
    dm = Daemon("--audit-retention-days", "30").start()
    try:
        dm.client().request("POST", "/v1/keys", json_body={"team": "prune"})
        dm.stop()
        now = int(time.time() * 1000)
        db = sqlite3.connect("%s/warren.db" % dm.state)
        try:
            for days, rid in ((31, "old"), (29, "recent")):
                db.execute("INSERT INTO audit (time_ms, request_id, team, key_id, peer, action,"
                           " object_kind, object_id, method, route, status) VALUES"
                           " (?, ?, 'prune', 'k', 'unix', 'key.create', 'key', '', 'POST',"
                           " '/v1/keys', 201)", (now - days * 86400 * 1000, rid))
            db.commit()
        finally:
            db.close()
        dm.start()
        admin = dm.client()
        deadline = time.monotonic() + 10
        while True:
            ids = {e["request_id"] for e in all_events(admin, team="prune")}
            if "old" not in ids or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert "old" not in ids and "recent" in ids, ids
        # The records of this daemon's own requests stay (the admin's key.create).
        assert [e["action"] for e in all_events(admin, team="admin")] == ["key.create"]
    finally:
        dm.cleanup()


def test_e2b_requests_are_audited(d, teams):
    """The E2B API's requests other than GET are in the trail as e2b.request, the path the
    object, with the caller's team and key."""
    import http.client
    key = teams["beta_key"]

    def e2b(method, path, obj=None):
        conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=60)
        h = {"X-API-KEY": key.key}
        body = None
        if obj is not None:
            body, h["Content-Type"] = json.dumps(obj), "application/json"
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        data = r.read()
        conn.close()
        return r.status, json.loads(data) if data else None

    st, sbx = e2b("POST", "/sandboxes", {"templateID": "base", "timeout": 60})
    assert st == 201, sbx
    sid = sbx["sandboxID"]
    assert e2b("GET", "/sandboxes/" + sid)[0] == 200
    assert e2b("DELETE", "/sandboxes/" + sid)[0] == 204
    ev = [e for e in all_events(teams["beta"], action="e2b.request")
          if e["object"]["id"] in ("/sandboxes", "/sandboxes/" + sid)]
    got = [(e["request"]["method"], e["object"]["id"], e["result"]["status"]) for e in ev]
    assert got[-2:] == [("POST", "/sandboxes", 201), ("DELETE", "/sandboxes/" + sid, 204)], got
    assert all(e["who"] == {"team": "beta", "key_id": key.id} and e["object"]["kind"] == "e2b"
               for e in ev)


# ---- the CLI and the SDK ------------------------------------------------------------------------

def warren_cli(d, key, *args):
    return subprocess.run([WARREN, "audit", *args], capture_output=True, timeout=60,
                          env=dict(ENV, WARREN_API_URL=d.tcp_url, WARREN_API_KEY=key))


def test_the_sdk_reads_the_trail(teams, session):
    c = teams["alpha"]
    got = [(r.action, r.method, r.route, r.status)
           for r in c.audit(object_id=session["sid"], page_size=2)]
    assert got == EXPECTED
    recs = list(c.audit(action="sandbox.", object_id=session["sid"]))
    assert [r.action for r in recs] == ["sandbox.create", "sandbox.pause", "sandbox.resume",
                                        "sandbox.delete"]
    r = recs[0]
    assert r.team == "alpha" and r.key_id == teams["alpha_key"].id and r.peer == "tcp:127.0.0.1"
    assert r.object_kind == "sandbox" and r.time is not None and r.code is None
    # A time window that ends before the session holds none of it.
    assert list(c.audit(until=session["t0"] - 1, object_id=session["sid"])) == []
    assert len(list(c.audit(since=r.time, object_id=session["sid"]))) == len(EXPECTED)
    with pytest.raises(warren.PermissionDeniedError):
        c.audit(team="beta")
    with pytest.raises(warren.InvalidArgumentError):
        c.audit(since="yesterday")
    assert [x.object_id for x in teams["admin"].audit(team="alpha", object_id=session["sid"])
            ][:1] == [session["sid"]]


def test_the_cli_prints_the_trail(d, teams, session):
    key = teams["alpha_key"].key
    r = warren_cli(d, key, "--object", session["sid"])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    assert lines[0].split()[:4] == ["TIME", "TEAM", "KEY", "ACTION"]
    assert [ln.split()[3] for ln in lines[1:]] == [a for a, _, _, _ in EXPECTED]
    assert lines[-1].split()[-2:] == ["404", "not_found"]
    r = warren_cli(d, key, "--object", session["sid"], "--json", "--limit", "3")
    assert r.returncode == 0, r.stderr
    assert [e["action"] for e in json.loads(r.stdout)] == [a for a, _, _, _ in EXPECTED[:3]]
    # Bad input: one readable line and a usage exit; a refusal of the daemon: its message.
    r = warren_cli(d, key, "--action", "a b")
    assert r.returncode == 2 and r.stderr.decode().count("\n") == 1, r.stderr
    r = warren_cli(d, key, "--limit", "0")
    assert r.returncode == 2 and b"--limit" in r.stderr
    r = warren_cli(d, key, "--team", "beta")
    assert r.returncode == 1 and r.stderr.decode().count("\n") == 1, r.stderr
    assert b"admin" in r.stderr


def test_records_are_written_within_the_batch_window_and_at_stop():
    """The trail is written in batches (src/core/audit.c): a record older than the window
    survives a kill -9, and a stop writes what is queued."""
    d = Daemon("--warm", "0").start()
    try:
        c = d.client()
        warren.admin.create_key("kept-by-timer", client=c)
        time.sleep(0.3)  # past WR_AUDIT_FLUSH_MS (20 ms), with no read to flush it
        d.kill9()
        d.start()
        warren.admin.create_key("kept-by-stop", client=d.client())
        d.stop()  # SIGTERM at once: the queue is written on the way down
        d.start()
        got = all_events(d.client(), action="key.create")
        assert [e["result"]["status"] for e in got] == [201, 201], got
    finally:
        delete_all(d)
        d.cleanup()


def test_the_prunes_connection_keeps_the_daemons_commits_visible():
    """Regression: the prune's connection (opened a second after start) once opened and closed a
    plain fd of warren.db, which drops every POSIX lock of the process on it; another process's
    connection closing then deleted the WAL file the daemon still wrote to, and the daemon's
    later commits were seen by no one else (and lost at its stop)."""
    d = Daemon("--warm", "0").start()
    try:
        time.sleep(1.5)  # the prune's first run has opened its connection
        path = os.path.join(d.state, "warren.db")
        db = sqlite3.connect(path, timeout=10)
        db.execute("SELECT count(*) FROM api_keys").fetchone()
        db.close()  # the last connection of this process: it checkpoints if it may
        key = warren.admin.create_key("after-close", client=d.client())
        db = sqlite3.connect(path, timeout=10)
        try:
            got = db.execute("SELECT team FROM api_keys WHERE id = ?", (key.id,)).fetchone()
        finally:
            db.close()
        assert got == ("after-close",)
        assert os.path.exists(path + "-wal")
    finally:
        delete_all(d)
        d.cleanup()
