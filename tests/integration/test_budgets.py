"""Budgets (docs/usage.md, "Budgets"): a team's and a sandbox's spend caps over the usage
ledger, through the real daemon and real sandboxes. The ledger closes intervals every
INTERVAL_MS (--usage-interval-ms, a test build's flag) and bills the measured CPU time
(--billed-seconds measured), so what a sandbox spends is what its busy loop burns, never a
sleep of the test's."""

import json
import time

import pytest

import warren
import warren.admin
from conftest import Daemon, delete_all, warren as warren_cli
from test_ratelimits import raw

INTERVAL_MS = 300
PRICE_VCPU = 0.5  # EUR per vCPU-second
PRICE_GIB = 0.25  # EUR per GiB-second
BURN = "sh -c 'while :; do :; done' >/dev/null 2>&1 &"


@pytest.fixture(scope="module")
def d():
    dm = Daemon("--usage-interval-ms", str(INTERVAL_MS), "--billed-seconds", "measured",
                "--price-vcpu-second", str(PRICE_VCPU), "--price-gib-second", str(PRICE_GIB),
                "--currency", "EUR", "--warm", "0").start()
    yield dm
    try:
        delete_all(dm)
    finally:
        dm.cleanup()


@pytest.fixture(scope="module")
def keys(d):
    admin = d.client()
    return {t: warren.admin.create_key(t, client=admin).key
            for t in ("soft", "hard", "own", "money", "bad")}


def team_client(d, keys, team):
    return warren.Client(d.tcp_url, keys[team])


def put_budget(d, team, body):
    return raw(d, "PUT", "/v1/teams/%s/budget" % team, body, key=d.admin_key)


def get_budget(d, team):
    st, _, body = raw(d, "GET", "/v1/teams/%s/budget" % team, key=d.admin_key)
    assert st == 200, body
    return json.loads(body)


def wait_for(pred, timeout=20.0, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    pytest.fail("timed out waiting for " + what)


def events(c, type_):
    return list(c.events(type=type_))


def team_sandboxes(d, team):
    """Every record of the team's, whatever its state (the unix socket: an admin)."""
    st, _, body = raw(d, "GET", "/v1/sandboxes?all=1&state=creating,running,paused,stopped,error",
                      key=d.admin_key)
    assert st == 200
    return [s for s in json.loads(body)["sandboxes"] if s.get("metadata", {}).get("team") == team]


def burner(c, team, **kw):
    sb = warren.Sandbox.create(client=c, cpus=1, memory_mb=256, timeout=120,
                               metadata={"team": team}, **kw)
    sb.commands.run(BURN, timeout=10)
    return sb


# ---- bad input ---------------------------------------------------------------------------------


def test_bad_input_is_400(d, keys):
    c = team_client(d, keys, "bad")
    for body in ({"hard": -1}, {"soft": -0.5}, {"unit": "furlongs", "hard": 1},
                 {"hard": 1, "period": "week"}, {"hard": 1, "color": "red"}, {},
                 {"soft": 5, "hard": 1}, {"hard": "10"}, {"hard": 1e300}, []):
        st, _, resp = put_budget(d, "bad", body)
        assert st == 400, (body, resp)
        err = json.loads(resp)
        assert err["code"] == "invalid" and err["message"], err
    assert get_budget(d, "bad")["budget"] is None
    # a team's key reads its own budget, never sets one, nor reads another's
    st, _, _ = raw(d, "PUT", "/v1/teams/bad/budget", {"hard": 5}, key=keys["bad"])
    assert st == 403
    st, _, _ = raw(d, "GET", "/v1/teams/soft/budget", key=keys["bad"])
    assert st == 403
    st, _, resp = raw(d, "GET", "/v1/teams/bad/budget", key=keys["bad"])
    assert st == 200 and json.loads(resp)["budget"] is None
    # a create's own budget is checked before anything is made
    for b in ({"hard": -2}, {"unit": "parsecs", "hard": 1}, "ten", {"hard": 1, "period": "month"},
              {"soft": 3, "hard": 2}):
        st, _, resp = raw(d, "POST", "/v1/sandboxes", {"budget": b, "metadata": {"team": "bad"}},
                          key=keys["bad"])
        assert st == 400, (b, resp)
        assert "budget" in json.loads(resp)["message"]
    assert team_sandboxes(d, "bad") == []
    with pytest.raises(warren.PermissionDeniedError):
        c.set_budget("bad", hard=1)


def test_money_needs_prices():
    """Without --price-vcpu-second or --price-gib-second a budget in money is refused."""
    dm = Daemon("--warm", "0").start()
    try:
        st, _, resp = raw(dm, "PUT", "/v1/teams/t/budget", {"unit": "money", "hard": 1},
                          key=dm.admin_key)
        assert st == 400 and "--price-vcpu-second" in json.loads(resp)["message"]
        st, _, resp = raw(dm, "PUT", "/v1/teams/t/budget", {"hard": 1}, key=dm.admin_key)
        assert st == 200 and json.loads(resp)["currency"] == "USD"
    finally:
        dm.cleanup()


def test_no_budgets_without_a_ledger():
    dm = Daemon("--warm", "0", "--metering", "off").start()
    try:
        st, _, resp = raw(dm, "PUT", "/v1/teams/t/budget", {"hard": 1}, key=dm.admin_key)
        assert st == 501 and json.loads(resp)["code"] == "unsupported", resp
        st, _, resp = raw(dm, "POST", "/v1/sandboxes", {"budget": {"hard": 1}}, key=dm.admin_key)
        assert st == 400 and "--metering off" in json.loads(resp)["message"], resp
    finally:
        dm.cleanup()


# ---- a team's soft cap -------------------------------------------------------------------------


def test_team_soft_cap_header_and_event(d, keys):
    c = team_client(d, keys, "soft")
    admin = d.client()
    b = admin.set_budget("soft", soft=0.3, hard=1000)
    assert b["budget"] == {"unit": "vcpu_seconds", "soft": 0.3, "hard": 1000.0, "period": "month"}
    assert b["state"] == "ok" and b["period_start"].endswith("-01T00:00:00Z")
    st, h, _ = raw(d, "GET", "/v1/sandboxes", key=keys["soft"])
    assert st == 200 and "warren-budget" not in h
    sb = burner(c, "soft")
    try:
        wait_for(lambda: get_budget(d, "soft")["state"] == "soft", what="the soft cap")
        st, h, _ = raw(d, "GET", "/v1/sandboxes", key=keys["soft"])
        assert st == 200
        level, *params = [p.strip() for p in h["warren-budget"].split(";")]
        params = dict(p.split("=", 1) for p in params)
        assert level == "soft" and params["unit"] == "vcpu_seconds"
        assert float(params["limit"]) == 0.3 and float(params["used"]) >= 0.3
        # errors carry it too
        st, h, _ = raw(d, "GET", "/v1/sandboxes/nope", key=keys["soft"])
        assert st == 404 and h["warren-budget"].startswith("soft;")
        ev = wait_for(lambda: events(c, "team.budget"), what="the team.budget event")
        assert len(ev) == 1 and ev[0].team == "soft"
        assert ev[0].data["level"] == "soft" and ev[0].data["used"] >= 0.3
        # below the hard cap creates still pass
        warren.Sandbox.create(client=c, metadata={"team": "soft"}).kill()
        # another team hears nothing of it
        st, h, _ = raw(d, "GET", "/v1/sandboxes", key=keys["own"])
        assert "warren-budget" not in h
    finally:
        sb.kill()
    admin.delete_budget("soft")
    st, h, _ = raw(d, "GET", "/v1/sandboxes", key=keys["soft"])
    assert "warren-budget" not in h


# ---- a team's hard cap -------------------------------------------------------------------------


def test_team_hard_cap_refuses_creates(d, keys):
    c = team_client(d, keys, "hard")
    admin = d.client()
    admin.set_budget("hard", hard=0.4, period="total")
    sb = burner(c, "hard")
    try:
        b = wait_for(lambda: (lambda b: b if b["state"] == "hard" else None)(get_budget(d, "hard")),
                     what="the hard cap")
        assert b["used"] >= 0.4 and b["period_end"] is None
        before = team_sandboxes(d, "hard")
        st, h, resp = raw(d, "POST", "/v1/sandboxes", {"metadata": {"team": "hard"}},
                          key=keys["hard"])
        assert st == 429, resp
        err = json.loads(resp)
        assert err["code"] == "limit" and err["reason"] == "budget" and err["policy"] == "budget"
        assert "budget" in err["message"]
        assert 1 <= int(h["retry-after"]) <= 86400 and err["retry_after"] == int(h["retry-after"])
        assert h["warren-budget"].startswith("hard;")
        # the SDK's error says which
        with pytest.raises(warren.RateLimitError) as e:
            warren.Sandbox.create(client=c, metadata={"team": "hard"})
        assert e.value.reason == "budget" and e.value.retry_after >= 1
        # a fork is a create (of N)
        st, _, resp = raw(d, "POST", "/v1/sandboxes/%s/fork" % sb.id, {"count": 1},
                          key=keys["hard"])
        assert st == 429 and json.loads(resp)["reason"] == "budget", resp
        # nothing made, nothing left behind
        assert team_sandboxes(d, "hard") == before
        ev = [e.data["level"] for e in events(c, "team.budget")]
        assert ev[-1] == "hard"
        # the sandbox already running is the team's: a team cap stops creates, not it
        assert sb.get_info().state == "running"
        # an admin is not held by a team's budget; raising the cap lets the team create again
        admin.set_budget("hard", hard=1e6, period="total")
        warren.Sandbox.create(client=c, metadata={"team": "hard"}).kill()
    finally:
        sb.kill()


# ---- a sandbox's own cap -----------------------------------------------------------------------


def test_sandbox_own_cap_pauses_it(d, keys):
    c = team_client(d, keys, "own")
    sb = warren.Sandbox.create(client=c, cpus=1, memory_mb=256, timeout=120,
                               metadata={"team": "own"}, budget=0.6)
    try:
        assert sb.get_info().raw["budget"]["budget"] == {"unit": "vcpu_seconds", "soft": None,
                                                          "hard": 0.6}
        sb.files.write("/home/user/kept.txt", "still here\n")
        sb.commands.run(BURN, timeout=10)
        info = wait_for(lambda: (lambda i: i if i.state == "paused" else None)(sb.get_info()),
                        what="the budget's pause")
        assert info.paused_reason == "budget" and info.paused_mode == "disk"
        assert info.raw["budget"]["state"] == "hard" and info.raw["budget"]["used"] >= 0.6
        ev = wait_for(lambda: events(c, "sandbox.budget"), what="the sandbox.budget event")
        assert ev[-1].sandbox_id == sb.id and ev[-1].data["action"] == "paused"
        # written once its processes have ended (the record says paused before)
        paused = wait_for(lambda: [e for e in events(c, "sandbox.paused") if e.sandbox_id == sb.id],
                          what="the sandbox.paused event")
        assert paused[-1].data == {"paused_mode": "disk", "reason": "budget"}
        # paused, never deleted: a resume over the cap is refused with the reason
        with pytest.raises(warren.RateLimitError) as e:
            sb.resume()
        assert e.value.reason == "budget"
        # paused: no more spend
        used = sb.budget()["used"]
        time.sleep(3 * INTERVAL_MS / 1000)
        assert sb.budget()["used"] == pytest.approx(used, abs=0.02)
        # raise the cap, resume: its files are there
        nb = sb.set_budget(1000)
        assert nb["budget"]["hard"] == 1000 and nb["state"] == "ok"
        assert sb.resume().state == "running"
        assert sb.files.read("/home/user/kept.txt") == "still here\n"
        assert sb.get_info().paused_reason is None
    finally:
        sb.kill()


def test_sandbox_budget_update_and_bad_input(d, keys):
    c = team_client(d, keys, "own")
    sb = warren.Sandbox.create(client=c, metadata={"team": "own"})
    try:
        assert sb.budget()["budget"] is None
        for body in ({"hard": -1}, {"unit": "yen", "hard": 1}, {"hard": 1, "period": "total"}):
            st, _, resp = raw(d, "PUT", "/v1/sandboxes/%s/budget" % sb.id, body, key=keys["own"])
            assert st == 400, resp
        st, _, _ = raw(d, "PUT", "/v1/sandboxes/%s/budget" % sb.id, {"hard": 5}, key=keys["soft"])
        assert st == 404  # another team's sandbox does not exist for it
        assert sb.set_budget(soft=2, hard=5)["budget"] == {"unit": "vcpu_seconds", "soft": 2.0,
                                                           "hard": 5.0}
        assert sb.set_budget(None)["budget"] is None and sb.budget()["budget"] is None
        # set again after a spell without one: its whole life's spend counts (the ledger's)
        sb.commands.run(BURN, timeout=10)
        wait_for(lambda: sum(r.billed_vcpu_seconds for r in c.usage().rows if r.key == sb.id) > 0.2,
                 what="some spend")
        spent = sum(r.billed_vcpu_seconds for r in c.usage().rows if r.key == sb.id)
        assert sb.set_budget(1000)["used"] >= spent - 1e-6
    finally:
        sb.kill()


# ---- money -------------------------------------------------------------------------------------


def test_money_budget_at_the_operators_prices(d, keys):
    c = team_client(d, keys, "money")
    admin = d.client()
    b = admin.set_budget("money", unit="money", hard=0.5, period="month")
    assert b["currency"] == "EUR"
    assert b["prices"] == {"vcpu_second": PRICE_VCPU, "gib_second": PRICE_GIB}
    sb = burner(c, "money")
    try:
        b = wait_for(lambda: (lambda b: b if b["state"] == "hard" else None)(get_budget(d, "money")),
                     what="the money cap")
        assert b["used"] == pytest.approx(b["vcpu_seconds"] * PRICE_VCPU
                                          + b["gib_seconds"] * PRICE_GIB, rel=1e-9)
        assert b["gib_seconds"] > 0 and b["used"] >= 0.5
        # the running totals are the ledger's: GET /v1/usage between two reads of them
        u = admin.usage(group_by="sandbox", team="money")
        b2 = get_budget(d, "money")
        billed = sum(r.billed_vcpu_seconds for r in u.rows)
        assert b["vcpu_seconds"] - 1e-6 <= billed <= b2["vcpu_seconds"] + 1e-6
        st, _, resp = raw(d, "POST", "/v1/sandboxes", {"metadata": {"team": "money"}},
                          key=keys["money"])
        assert st == 429 and json.loads(resp)["reason"] == "budget"
    finally:
        sb.kill()


# ---- the CLI ----------------------------------------------------------------------------------


def test_cli(d, keys):
    env = {"WARREN_API_URL": d.url}  # the unix socket: an admin
    r = warren_cli("budget", "clit", "--soft", "5", "--hard", "10", "--period", "total", env=env)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert "soft: 5\n" in out and "hard: 10\n" in out and "state: ok" in out, out
    r = warren_cli("budget", "clit", "--json", env=env)
    assert json.loads(r.stdout)["budget"] == {"unit": "vcpu_seconds", "soft": 5.0, "hard": 10.0,
                                              "period": "total"}
    r = warren_cli("budget", "clit", "--hard", "-3", env=env)
    assert r.returncode == 2 and b"cap" in r.stderr
    r = warren_cli("budget", "clit", "--hard", "1", "--unit", "furlongs", env=env)
    assert r.returncode == 1 and b"unit" in r.stderr
    assert warren_cli("budget", "clit", "--delete", env=env).returncode == 0
    assert warren_cli("budget", "clit", env=env).stdout == b"no budget\n"
    # create --budget N[:UNIT]
    r = warren_cli("create", "--budget", "2.5", "--metadata", "team=admin", "-o", "json", env=env)
    assert r.returncode == 0, r.stderr
    sid = json.loads(r.stdout)["id"]
    try:
        r = warren_cli("budget", "--sandbox", sid, "--json", env=env)
        assert json.loads(r.stdout)["budget"]["hard"] == 2.5
        r = warren_cli("budget", "--sandbox", sid, "--hard", "7", "--unit", "money", env=env)
        assert r.returncode == 0 and "hard: 7\n" in r.stdout.decode() and "EUR" in r.stdout.decode()
    finally:
        warren_cli("rm", sid, env=env)
    r = warren_cli("create", "--budget", "x:money", env=env)
    assert r.returncode != 0 and b"--budget" in r.stderr
    r = warren_cli("create", "--budget", "3:yen", env=env)
    assert r.returncode == 1 and b"budget" in r.stderr


# ---- across a restart --------------------------------------------------------------------------


def test_budgets_survive_a_restart(d, keys):
    c = team_client(d, keys, "own")
    sb = warren.Sandbox.create(client=c, cpus=1, memory_mb=256, timeout=120,
                               metadata={"team": "own"}, budget={"hard": 0.5})
    sb.commands.run(BURN, timeout=10)
    wait_for(lambda: sb.get_info().state == "paused", what="the budget's pause")
    before = get_budget(d, "money")
    own = sb.budget()
    d.stop()
    d.start()
    after = get_budget(d, "money")
    assert after["budget"] == before["budget"] and after["state"] == "hard"
    assert after["used"] == pytest.approx(before["used"], abs=0.05)
    st, _, resp = raw(d, "POST", "/v1/sandboxes", {"metadata": {"team": "money"}},
                      key=keys["money"])
    assert st == 429 and json.loads(resp)["reason"] == "budget"
    c = team_client(d, keys, "own")
    sb = warren.Sandbox.connect(sb.id, client=c)
    info = sb.get_info()
    assert info.state == "paused" and info.paused_reason == "budget"
    assert info.raw["budget"]["budget"] == own["budget"]
    assert info.raw["budget"]["used"] == pytest.approx(own["used"], abs=0.05)
    with pytest.raises(warren.RateLimitError):
        sb.resume()
    sb.kill()
