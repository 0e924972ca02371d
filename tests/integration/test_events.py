"""Lifecycle events through a real daemon (core/events.h): what each step of a sandbox's life
records, per team, listed by cursor and followed as Server-Sent Events with Last-Event-ID."""

import http.client
import json
import time

import pytest

import warren
import warren.admin
from conftest import Daemon, delete_all, make_teams


@pytest.fixture(scope="module")
def d():
    dm = Daemon("--warm", "0").start()
    yield dm
    try:
        delete_all(dm)
    finally:
        dm.cleanup()


@pytest.fixture(scope="module")
def teams(d):
    return make_teams(d, "alpha", "beta")


def events(c, **query):
    r = c.request("GET", "/v1/events", query=query, check=False)
    return r.status, r.json()


def all_events(c, **query):
    out, cursor = [], None
    while True:
        status, body = events(c, **dict(query, after=cursor))
        assert status == 200, body
        out += body["events"]
        cursor = body.get("next_cursor")
        if not cursor:
            return out


@pytest.fixture(scope="module")
def life(teams):
    """Team alpha's sandbox: created, paused, resumed, snapshotted, forked into 2, killed."""
    c = teams["alpha"]
    sb = warren.Sandbox.create(client=c, timeout=120)
    sb.pause()
    sb.resume()
    snap = sb.snapshot()
    kids = sb.fork(count=2).sandboxes
    sid = sb.sandbox_id
    sb.kill()
    for k in kids:
        k.kill()
    return {"sid": sid, "snap": snap, "kids": [k.sandbox_id for k in kids]}


def test_each_step_is_an_event_in_order(teams, life):
    ev = all_events(teams["alpha"], sandbox=life["sid"])
    assert [e["type"] for e in ev] == [
        "sandbox.created", "sandbox.started", "sandbox.paused", "sandbox.resumed",
        "sandbox.snapshotted", "sandbox.forked", "sandbox.killed"], ev
    created, started, paused, _, snapped, forked, _ = ev
    assert created["data"] == {"template": "base", "warm": False}
    assert started["data"] == {"cause": "create"}
    assert paused["data"] == {"paused_mode": "memory"}
    assert snapped["data"]["snapshot_id"].startswith("snap-")
    assert sorted(forked["data"]["children"]) == sorted(life["kids"])
    assert all(e["team"] == "alpha" and e["sandbox_id"] == life["sid"] for e in ev)
    assert all(e["time"].endswith("Z") for e in ev)
    ids = [int(e["id"]) for e in ev]
    assert ids == sorted(ids)
    # The children have lives of their own: created, started, killed.
    for k in life["kids"]:
        assert [e["type"] for e in all_events(teams["alpha"], sandbox=k)] == [
            "sandbox.created", "sandbox.started", "sandbox.killed"]


def test_a_resume_from_disk_starts_again(teams):
    c = teams["alpha"]
    sb = warren.Sandbox.create(client=c, timeout=120)
    sb.pause(mode="disk")
    sb.resume()
    sb.kill()
    ev = all_events(c, sandbox=sb.sandbox_id)
    assert [(e["type"], e["data"]) for e in ev] == [
        ("sandbox.created", {"template": "base", "warm": False}),
        ("sandbox.started", {"cause": "create"}),
        ("sandbox.paused", {"paused_mode": "disk"}),
        ("sandbox.started", {"cause": "resume"}),
        ("sandbox.resumed", {"paused_mode": None}),
        ("sandbox.killed", {}),
    ], ev


def test_teams_see_only_their_own(teams, life):
    assert all_events(teams["beta"], sandbox=life["sid"]) == []
    st, body = events(teams["beta"], team="alpha")
    assert st == 403 and body["code"] == "forbidden"
    got = all_events(teams["admin"], team="alpha", sandbox=life["sid"])
    assert len(got) == 7


def test_filters_pages_and_bad_queries(teams, life):
    c = teams["alpha"]
    killed = all_events(c, type="sandbox.killed")
    assert {e["sandbox_id"] for e in killed} >= {life["sid"], *life["kids"]}
    assert all(e["type"].startswith("sandbox.") for e in all_events(c, type="sandbox."))
    st, body = events(c, sandbox=life["sid"], limit=4)
    assert st == 200 and len(body["events"]) == 4 and body["next_cursor"]
    st, rest = events(c, sandbox=life["sid"], limit=4, after=body["next_cursor"])
    assert [e["type"] for e in rest["events"]] == [
        "sandbox.snapshotted", "sandbox.forked", "sandbox.killed"]
    assert rest.get("next_cursor") is None
    for q in ({"limit": 0}, {"limit": 1001}, {"after": "x"}):
        st, body = events(c, **q)
        assert st == 400 and body["code"] == "invalid", (q, body)


def test_a_timeout_is_an_event(teams):
    c = teams["alpha"]
    sb = warren.Sandbox.create(client=c, timeout=1)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        got = [e["type"] for e in all_events(c, sandbox=sb.sandbox_id)]
        if "sandbox.timed_out" in got:
            break
        time.sleep(0.2)
    assert got == ["sandbox.created", "sandbox.started", "sandbox.timed_out"], got


class Sse:
    """An SSE client on http.client: the events as (id, type, data)."""

    def __init__(self, d, key, **headers):
        self.conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
        self.conn.request("GET", "/v1/events/stream", headers=dict(
            headers, Authorization="Bearer " + key, Accept="text/event-stream"))
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200
        assert self.resp.getheader("Content-Type").startswith("text/event-stream")

    def next(self):
        ev = {}
        while True:
            line = self.resp.readline().decode()
            assert line, "the stream ended"
            line = line.rstrip("\n")
            if line == "":
                if "data" in ev:
                    return ev["id"], ev["event"], json.loads(ev["data"])
                continue
            if line.startswith(":"):
                continue
            k, _, v = line.partition(": ")
            ev[k] = v

    def close(self):
        self.conn.close()


def test_the_stream_follows_and_resumes_with_last_event_id(d, teams):
    c = teams["alpha"]
    first = Sse(d, teams["alpha_key"].key, **{"Last-Event-ID": str(2 ** 62)})  # only what comes
    sb = warren.Sandbox.create(client=c, timeout=120)
    eid, typ, data = first.next()
    assert typ == "sandbox.created" and data["sandbox_id"] == sb.sandbox_id and data["id"] == eid
    assert first.next()[1] == "sandbox.started"
    sb.pause()
    eid2, typ, _ = first.next()
    assert typ == "sandbox.paused" and int(eid2) > int(eid)
    first.close()
    # Gone while the client was away: a reconnect with the last id it saw gets the rest, once.
    sb.resume()
    sb.kill()
    again = Sse(d, teams["alpha_key"].key, **{"Last-Event-ID": eid2})
    got = [again.next()[1:] for _ in range(2)]
    assert [(t, e["sandbox_id"]) for t, e in got] == [
        ("sandbox.resumed", sb.sandbox_id), ("sandbox.killed", sb.sandbox_id)]
    again.close()
    # Another team's stream never sees alpha's events.
    beta = Sse(d, teams["beta_key"].key, **{"Last-Event-ID": str(2 ** 62)})
    warren.Sandbox.create(client=c, timeout=120).kill()
    mine = warren.Sandbox.create(client=teams["beta"], timeout=120)
    _, typ, data = beta.next()
    assert (typ, data["sandbox_id"], data["team"]) == ("sandbox.created", mine.sandbox_id, "beta")
    mine.kill()
    beta.close()
    # A bad key is refused before any stream.
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
    conn.request("GET", "/v1/events/stream", headers={"Authorization": "Bearer nope"})
    assert conn.getresponse().status == 401
    conn.close()


def test_the_python_sdk_lists_and_follows(teams, life):
    c = teams["alpha"]
    got = list(c.events(sandbox_id=life["sid"], page_size=2))
    assert [e.type for e in got][:3] == [
        "sandbox.created", "sandbox.started", "sandbox.paused"] and len(got) == 7
    assert got[2].data == {"paused_mode": "memory"} and got[0].team == "alpha"
    newest = all_events(c)[-1]["id"]
    live = c.events(follow=True, after=newest, type="sandbox.created")
    sb = warren.Sandbox.create(client=c, timeout=120)
    e = next(live)
    assert e.type == "sandbox.created" and e.sandbox_id == sb.sandbox_id
    live.close()
    sb.kill()
    with pytest.raises(warren.PermissionDeniedError):
        c.events(team="beta")
