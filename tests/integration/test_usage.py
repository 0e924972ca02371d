"""The usage ledger: intervals per sandbox closed at every state change and every
--usage-interval-ms while running, GET /v1/usage per team in JSON and CSV, and the ledger across
a kill -9 of the daemon, through the real daemon and real sandboxes."""

import csv
import io
import os
import re
import sqlite3
import subprocess
import time

import pytest

import warren
import warren.admin
from conftest import Daemon, delete_all, make_teams, warren as warren_cli

INTERVAL_MS = 500


@pytest.fixture(scope="module")
def d():
    dm = Daemon("--usage-interval-ms", str(INTERVAL_MS), "--usage-storage-ms", "1000").start()
    yield dm
    try:
        delete_all(dm)
    finally:
        dm.cleanup()


@pytest.fixture(scope="module")
def teams(d):
    return make_teams(d, "alpha", "beta")


def intervals(state_dir, sid):
    # read-only: a read-write connection's close could checkpoint the daemon's WAL away
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(state_dir, "warren.db"), uri=True)
    try:
        return db.execute(
            "SELECT seq, start_ms, end_ms, running, vcpu_seconds, cpu_seconds FROM usage_intervals"
            " WHERE sandbox = ? ORDER BY seq", (sid,)).fetchall()
    finally:
        db.close()


def row_of(c, sid, **q):
    u = c.usage(group_by="sandbox", **q)
    rows = [r for r in u.rows if r.key == sid]
    return rows[0] if rows else None


def contiguous(iv):
    """Seqs 1..n with each interval starting where the one before ended."""
    assert [r[0] for r in iv] == list(range(1, len(iv) + 1)), iv
    for a, b in zip(iv, iv[1:]):
        assert b[1] == a[2], (a, b)
        assert b[2] >= b[1]


@pytest.fixture(scope="module")
def burned(d, teams):
    """Team alpha: a sandbox that burns a CPU for 2 s, and an idle one, both killed."""
    c = teams["alpha"]
    t0 = time.time()
    busy = warren.Sandbox.create(client=c, cpus=1, memory_mb=256, timeout=120)
    idle = warren.Sandbox.create(client=c, cpus=2, memory_mb=512, timeout=120)
    try:
        # the shell's `times`: its children's user and system CPU time (the loop's)
        r = busy.commands.run("""sh -c 'timeout 2 sh -c "while :; do :; done"; times'""",
                              timeout=30)
        m = re.findall(r"(\d+)m([\d.]+)s", r.stdout.splitlines()[-1])
        used = sum(int(a) * 60 + float(b) for a, b in m)
        assert used > 0.5, r.stdout
        time.sleep(0.5)
    finally:
        busy.kill()
        idle.kill()
    wall = time.time() - t0
    return {"busy": busy.sandbox_id, "idle": idle.sandbox_id, "wall": wall, "used": used}


def test_measured_cpu_and_allocated_seconds(d, teams, burned):
    c = teams["alpha"]
    busy = row_of(c, burned["busy"])
    idle = row_of(c, burned["idle"])
    assert busy is not None and idle is not None
    assert busy.team == "alpha" and busy.template == "base"
    # what the cgroup measured against what the loop itself used (the host's cores are shared)
    assert busy.cpu_seconds == pytest.approx(burned["used"], abs=0.25), (busy, burned["used"])
    assert idle.cpu_seconds < 0.3, idle
    for row, cpus, gib in ((busy, 1, 0.25), (idle, 2, 0.5)):
        assert 1.5 < row.sandbox_seconds <= burned["wall"] + 0.5, row
        assert row.vcpu_seconds == pytest.approx(cpus * row.sandbox_seconds, rel=0.01)
        assert row.gib_seconds == pytest.approx(gib * row.sandbox_seconds, rel=0.01)
        assert row.billed_vcpu_seconds == pytest.approx(row.vcpu_seconds)
        assert row.peak_memory_bytes > 0
        assert 0 < row.memory_gib_seconds_measured < row.gib_seconds
    # intervals close at least every INTERVAL_MS while running, and they tile the sandbox's life
    iv = intervals(d.state, burned["busy"])
    contiguous(iv)
    assert len(iv) >= 4
    assert all(r[2] - r[1] <= INTERVAL_MS + 400 for r in iv), iv
    assert busy.intervals == len(iv)


def test_pause_closes_intervals_and_is_not_billed(d, teams):
    c = teams["alpha"]
    sb = warren.Sandbox.create(client=c, cpus=1, timeout=120)
    try:
        time.sleep(1)
        sb.pause()
        time.sleep(2)
        sb.resume()
        time.sleep(1)
    finally:
        sb.kill()
    iv = intervals(d.state, sb.sandbox_id)
    contiguous(iv)
    runs = [r[3] for r in iv]
    assert 0 in runs, iv
    # running ..., paused ..., running ...
    first_paused, last_paused = runs.index(0), len(runs) - 1 - runs[::-1].index(0)
    assert all(runs[:first_paused]) and not any(runs[first_paused:last_paused + 1])
    assert all(runs[last_paused + 1:]) and last_paused + 1 < len(runs)
    assert all(r[4] == 0 for r in iv if not r[3])
    row = row_of(c, sb.sandbox_id)
    assert 1.6 <= row.paused_seconds <= 2.8, row
    assert 1.6 <= row.sandbox_seconds <= 3.0, row
    assert row.vcpu_seconds == pytest.approx(row.sandbox_seconds, rel=0.01)


def test_group_by_template_and_day_and_csv(d, teams, burned):
    c = teams["alpha"]
    by_sb = c.usage(group_by="sandbox")
    total = sum(r.vcpu_seconds for r in by_sb.rows)
    tpl = c.usage(group_by="template")
    assert [r.key for r in tpl.rows] == ["base"]
    assert tpl.rows[0].vcpu_seconds == pytest.approx(total)
    day = c.usage(group_by="day")
    assert [r.key for r in day.rows] == [time.strftime("%Y-%m-%d", time.gmtime())]
    assert day.rows[0].vcpu_seconds == pytest.approx(total)
    assert day.rows[0].template is None
    assert by_sb.billed_seconds == "allocated"
    text = c.usage_csv(group_by="sandbox")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert {r["sandbox"] for r in rows} == {r.key for r in by_sb.rows}
    busy = [r for r in rows if r["sandbox"] == burned["busy"]][0]
    assert float(busy["cpu_seconds"]) == pytest.approx(row_of(c, burned["busy"]).cpu_seconds, abs=1e-3)
    r = c.request("GET", "/v1/usage", headers={"Accept": "text/csv"})
    assert r.headers.get("Content-Type", "").startswith("text/csv")
    assert r.headers.get("Warren-Billed-Seconds") == "allocated"
    assert r.body.decode().splitlines()[0].startswith("sandbox,team,template,")
    # from/to: nothing started in the future, everything after an hour ago
    now = int(time.time())
    assert c.usage(start=now + 3600).rows == []
    assert len(c.usage(start=now - 3600, end=now + 60).rows) == len(by_sb.rows)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 3600))
    assert len(c.usage(start=stamp).rows) == len(by_sb.rows)


def test_cli(d, teams, burned):
    env = {"WARREN_API_URL": d.url}
    r = warren_cli("usage", "--team", "alpha", "--group-by", "sandbox", env=env)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert out.startswith("billed seconds: allocated\n") and burned["busy"] in out
    r = warren_cli("usage", "--team", "alpha", "--csv", "--group-by", "template", env=env)
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout.decode())))
    assert [x["template"] for x in rows] == ["base"]
    r = warren_cli("usage", "--group-by", "week", env=env)
    assert r.returncode == 2 and b"--group-by" in r.stderr
    r = warren_cli("usage", "--from", "soon", env=env)
    assert r.returncode != 0 and b"from" in r.stderr and len(r.stderr.splitlines()) == 1


def test_teams_see_only_their_own_rows(d, teams, burned):
    beta, admin = teams["beta"], teams["admin"]
    assert [r for r in beta.usage().rows if r.team != "beta"] == []
    assert row_of(beta, burned["busy"]) is None
    r = beta.request("GET", "/v1/usage", query={"team": "alpha"}, check=False)
    assert r.status == 403 and r.json()["code"]
    assert row_of(admin, burned["busy"], team="alpha") is not None
    rows = teams["alpha"].usage().rows
    assert rows and all(r.team == "alpha" for r in rows)


@pytest.mark.parametrize("query", [
    {"group_by": "week"}, {"format": "xml"}, {"from": "yesterday"}, {"to": "2026-13-01T00:00:00Z"},
    {"from": "2000", "to": "1000"}, {"from": "2026-01-01T00:00:00+25:00"},
])
def test_bad_params_are_400(teams, query):
    r = teams["alpha"].request("GET", "/v1/usage", query=query, check=False)
    assert r.status == 400, (query, r.body)
    body = r.json()
    assert body["code"] and body["message"]


def test_storage_is_sampled(d, teams):
    c = teams["alpha"]
    v = warren.Volume.create("usage-vol", client=c)
    try:
        deadline = time.time() + 10
        kinds = set()
        while time.time() < deadline and "volume" not in kinds:
            time.sleep(0.5)
            kinds = {s.kind for s in c.usage().storage if s.team == "alpha"}
        assert "volume" in kinds
    finally:
        warren.Volume.delete("usage-vol", client=c)


def test_ledger_survives_kill9():
    dm = Daemon("--usage-interval-ms", str(INTERVAL_MS), "--billed-seconds", "measured").start()
    try:
        c = dm.client()
        t0 = time.time()
        sb = warren.Sandbox.create(client=c, cpus=1, timeout=120)
        time.sleep(1.7)
        dm.kill9()
        time.sleep(1.0)
        dm.start()
        c = dm.client()
        time.sleep(1.2)
        warren.Sandbox.connect(sb.sandbox_id, client=c).kill()
        wall = time.time() - t0
        iv = intervals(dm.state, sb.sandbox_id)
        contiguous(iv)  # no gap and no overlap: nothing counted twice
        running = sum(r[2] - r[1] for r in iv if r[3]) / 1000
        # the span while no daemon ran is in the first interval after the restart
        assert wall - INTERVAL_MS / 1000 - 0.6 <= running <= wall + 0.1, (running, wall, iv)
        row = row_of(c, sb.sandbox_id)
        assert row.sandbox_seconds == pytest.approx(running, abs=0.01)
        u = c.usage()
        assert u.billed_seconds == "measured"
        assert row.billed_vcpu_seconds == pytest.approx(row.cpu_seconds)
        assert row.billed_vcpu_seconds < row.vcpu_seconds
    finally:
        delete_all(dm)
        dm.cleanup()


def test_bad_billed_seconds_flag():
    dm = Daemon("--billed-seconds", "sometimes")
    try:
        r = subprocess.run([dm.binary, "--state-dir", dm.state, "--billed-seconds", "sometimes"],
                           capture_output=True, timeout=30)
        assert r.returncode != 0 and b"allocated, measured or max" in r.stderr, r.stderr
    finally:
        dm.cleanup()
