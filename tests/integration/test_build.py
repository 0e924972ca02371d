"""Template builds from the Dockerfile subset, through the real daemon: the NDJSON stream, the
cache, COPY from a build context, and failures (a failing step, an unsupported instruction, a
context that escapes, a disk that fills) that leave nothing behind."""

import io
import json
import os
import tarfile
import time

import pytest

from conftest import daemon_on, homes, loop_fs


def build(client, name, dockerfile=None, context=None, replace=False, dockerfile_path=None):
    """POST /v1/templates/build; returns (status, events or error body)."""
    q = {"name": name}
    if replace:
        q["replace"] = "true"
    if dockerfile_path:
        q["dockerfile"] = dockerfile_path
    if context is not None:
        body, ctype = context, "application/x-tar"
    else:
        body, ctype = dockerfile.encode(), "text/plain"
    r = client.request("POST", "/v1/templates/build", query=q, data=body,
                       headers={"Content-Type": ctype}, check=False, timeout=300)
    if r.status != 200:
        return r.status, r.json()
    return 200, [json.loads(l) for l in r.body.decode().splitlines() if l]


def tar_of(files):
    """A tar archive (bytes) of {path: bytes | None (a directory)}."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            if data is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                t.addfile(info)
            else:
                info.size = len(data)
                info.mode = 0o644
                t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def sh(client, sid, cmd, user=None):
    body = {"cmd": ["/bin/sh", "-c", cmd]}
    if user:
        body["user"] = user
    r = client.request("POST", "/v1/sandboxes/%s/exec" % sid, json_body=body).json()
    return r


def create(client, template):
    return client.request("POST", "/v1/sandboxes",
                          json_body={"template": template, "timeout": 120}).json()["id"]


def layer_step(e):
    """A step event of an instruction that makes a layer (and so can come from the cache)."""
    return e["type"] == "step" and e["instruction"].split()[0] in ("RUN", "WORKDIR", "COPY")


def tmp_entries(daemon):
    return os.listdir(os.path.join(daemon.state, "layers", ".tmp"))


def sandboxes_left(client):
    return client.request("GET", "/v1/sandboxes").json()["sandboxes"]


DOCKERFILE = """\
# a template built from the test image
FROM base
RUN echo built > /built && echo to-stdout && echo to-stderr >&2
ENV GREETING="hello there" \\
    PATH=/opt/bin:/usr/bin:/bin
WORKDIR /srv/app
RUN pwd > where && id -u > uid
USER user
RUN id -u > /tmp/x && cp /tmp/x /home/user/uid
"""


def test_build_runs_steps_and_makes_a_template(daemon, client):
    status, ev = build(client, "built", DOCKERFILE)
    assert status == 200, ev
    steps = [e for e in ev if e["type"] == "step"]
    assert [s["line"] for s in steps] == [2, 3, 4, 6, 7, 8, 9]
    assert all(s["of"] == 7 and not s["cached"] for s in steps)
    out = "".join(e["data"] for e in ev if e["type"] == "stdout")
    err = "".join(e["data"] for e in ev if e["type"] == "stderr")
    assert "to-stdout" in out and "to-stderr" in err
    assert ev[-1]["type"] == "done" and ev[-1]["template"]["name"] == "built"
    assert ev[-1]["template"]["layers"] == 1 + 4  # base + RUN, WORKDIR, RUN, RUN
    t = client.request("GET", "/v1/templates/built").json()
    assert t["kind"] == "template" and t["layers"] == 5

    sid = create(client, "built")
    r = sh(client, sid, "cat /built /srv/app/where /srv/app/uid /home/user/uid; pwd; id -u; "
                        "echo $GREETING; echo $PATH")
    assert r["stdout"] == "built\n/srv/app\n0\n1000\n/srv/app\n1000\nhello there\n/opt/bin:/usr/bin:/bin\n"
    client.request("DELETE", "/v1/sandboxes/" + sid)

    # Again with replace: every step comes from the cache.
    status, ev = build(client, "built", DOCKERFILE, replace=True)
    assert status == 200 and ev[-1]["type"] == "done"
    assert all(e["cached"] for e in ev if layer_step(e))
    assert not [e for e in ev if e["type"] == "stdout"]
    # A changed step runs again, and only from there on.
    status, ev = build(client, "built", DOCKERFILE.replace("id -u > uid", "id -u > uid2"),
                       replace=True)
    cached = [e["cached"] for e in ev if e["type"] == "step"]
    assert cached == [False, True, False, True, False, False, False], cached
    # The name is taken without replace.
    status, body = build(client, "built", DOCKERFILE)
    assert status == 409 and body["code"] == "conflict"
    assert sandboxes_left(client) == [] and tmp_entries(daemon) == []
    client.request("DELETE", "/v1/templates/built")


def test_a_failing_step_names_its_line_and_leaves_nothing(daemon, client):
    layers_before = sorted(os.listdir(os.path.join(daemon.state, "layers")))
    status, ev = build(client, "broken", "FROM base\nRUN echo ok\n\nRUN echo bad >&2; exit 3\nRUN echo never\n")
    assert status == 200
    err = ev[-1]
    assert err["type"] == "error" and err["step"] == 3 and err["line"] == 4
    assert err["exit_code"] == 3 and "exit code 3" in err["message"] and "line 4" in err["message"]
    assert "never" not in json.dumps(ev)
    r = client.request("GET", "/v1/templates/broken", check=False)
    assert r.status == 404
    deadline = time.monotonic() + 10
    while sandboxes_left(client) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sandboxes_left(client) == []
    assert tmp_entries(daemon) == []
    # Only the layer of the step that worked was added (it is cached).
    after = sorted(os.listdir(os.path.join(daemon.state, "layers")))
    assert len(after) <= len(layers_before) + 1


@pytest.mark.parametrize("text,line,word", [
    ("FROM base\nRUN true\nADD x /x\n", 3, "ADD"),
    ("FROM base\nCMD [\"sh\"]\n", 2, "CMD"),
    ("RUN true\n", 1, "FROM"),
    ("FROM base\nFROM base\n", 2, "multi-stage"),
    ("FROM base\nCOPY ../x /x\n", 2, "outside"),
])
def test_unsupported_or_malformed_is_400_naming_the_line(daemon, client, text, line, word):
    status, body = build(client, "bad", text)
    assert status == 400 and body["code"] == "invalid", body
    assert ("line %d" % line) in body["message"] and word in body["message"]


def test_bad_requests(daemon, client):
    assert build(client, "", "FROM base\n")[0] == 400
    assert build(client, "snap-x", "FROM base\n")[0] == 400
    assert build(client, "../x", "FROM base\n")[0] == 400
    status, body = build(client, "nofrom", "FROM no-such-template\n")
    assert status == 404 and "line 1" in body["message"]
    status, body = build(client, "nocontext", "FROM base\nCOPY a /a\n")
    assert status == 200 and body[-1]["type"] == "error" and body[-1]["line"] == 2
    assert "build context" in body[-1]["message"]
    r = client.request("GET", "/v1/templates/build", check=False)
    assert r.status == 404


def test_copy_from_a_context(daemon, client):
    ctx = tar_of({
        "Dockerfile": b"FROM base\nWORKDIR /app\nCOPY main.py ./\nCOPY conf /etc/myconf\n"
                      b"COPY --chown=user:user data.txt /home/user/\nCOPY main.py /renamed.py\n",
        "main.py": b"print('hi')\n",
        "conf": None,
        "conf/a.ini": b"a=1\n",
        "conf/sub": None,
        "conf/sub/b.ini": b"b=2\n",
        "data.txt": b"mine\n",
    })
    status, ev = build(client, "copied", context=ctx)
    assert status == 200 and ev[-1]["type"] == "done", ev
    sid = create(client, "copied")
    r = sh(client, sid, "cat /app/main.py /etc/myconf/a.ini /etc/myconf/sub/b.ini /renamed.py; "
                        "stat -c '%u %n' /app/main.py /home/user/data.txt; "
                        "test -e /tmp/.warren-build-context && echo context-visible; "
                        "test -e /dev/shm/.warren-build-context && echo context-visible")
    assert r["stdout"] == ("print('hi')\na=1\nb=2\nprint('hi')\n0 /app/main.py\n"
                           "1000 /home/user/data.txt\n"), r
    client.request("DELETE", "/v1/sandboxes/" + sid)
    # Same context: cached; a changed file: COPY runs again.
    status, ev = build(client, "copied", context=ctx, replace=True)
    assert all(e["cached"] for e in ev if layer_step(e))
    ctx2 = ctx.replace(b"a=1\n", b"a=9\n")
    status, ev = build(client, "copied", context=ctx2, replace=True)
    assert any(not e["cached"] for e in ev if layer_step(e))
    # A missing source fails its step.
    status, ev = build(client, "copied2", context=tar_of({
        "Dockerfile": b"FROM base\nCOPY nothere /x\n"}))
    assert ev[-1]["type"] == "error" and ev[-1]["line"] == 2
    assert "nothere" in "".join(e.get("data", "") for e in ev)
    # The Dockerfile may live elsewhere in the context.
    status, ev = build(client, "copied3", context=tar_of({
        "build/df": b"FROM base\nRUN true\n"}), dockerfile_path="build/df")
    assert ev[-1]["type"] == "done"
    status, body = build(client, "copied4", context=tar_of({"x": b""}))
    assert status == 400 and "Dockerfile" in body["message"]
    assert tmp_entries(daemon) == [] and sandboxes_left(client) == []
    for n in ("copied", "copied3"):
        client.request("DELETE", "/v1/templates/" + n)


def test_a_context_that_escapes_is_refused(daemon, client):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        t.addfile(tarfile.TarInfo("Dockerfile"), io.BytesIO(b""))
        evil = tarfile.TarInfo("../../escaped")
        evil.size = 4
        t.addfile(evil, io.BytesIO(b"evil"))
    status, body = build(client, "evil", context=buf.getvalue())
    assert status == 400 and "allowed" in body["message"], body
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        dev = tarfile.TarInfo("null")
        dev.type = tarfile.CHRTYPE
        t.addfile(dev)
    assert build(client, "evil", context=buf.getvalue())[0] == 400
    assert build(client, "evil", context=b"this is not a tar archive" * 100)[0] == 400
    assert tmp_entries(daemon) == []
    assert not os.path.exists(os.path.join(daemon.state, "layers", "escaped"))


@pytest.fixture
def small_disk_daemon():
    """A daemon whose state directory is a 96 MiB ext4 made by the test."""
    with loop_fs("small-disk-", 96 << 20, ["mkfs.ext4", "-q", "-F"]) as mnt:
        with daemon_on(os.path.join(mnt, "d")) as d:
            yield d


def test_a_disk_that_fills_during_a_build_leaves_no_half_layer(small_disk_daemon):
    d = small_disk_daemon
    c = d.client()
    layers = os.path.join(d.state, "layers")
    before = sorted(os.listdir(layers))
    # The step itself fills the disk: it fails.
    status, ev = build(c, "full", "FROM base\nRUN head -c 200000000 /dev/zero > /big\n")
    assert ev[-1]["type"] == "error" and ev[-1]["line"] == 2, ev[-1]
    # The step fits, but its capture (a copy: ext4) does not.
    status, ev = build(c, "full", "FROM base\nRUN head -c 55000000 /dev/zero > /big\n")
    assert ev[-1]["type"] == "error" and ev[-1]["line"] == 2, ev[-1]
    assert "No space left" in ev[-1]["message"]
    deadline = time.monotonic() + 10
    while (sandboxes_left(c) or homes(d)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sandboxes_left(c) == [] and homes(d) == []
    assert sorted(os.listdir(layers)) == before and tmp_entries(d) == []
    # And the disk is usable again.
    status, ev = build(c, "small", "FROM base\nRUN echo fits > /f\n")
    assert ev[-1]["type"] == "done"
    c.close()


def test_deleting_a_template_in_use(daemon, client):
    status, ev = build(client, "inuse", "FROM base\nRUN echo v1 > /version\n")
    assert ev[-1]["type"] == "done"
    sid = create(client, "inuse")
    t = client.request("GET", "/v1/templates/inuse").json()
    assert t["in_use"] == 1
    r = client.request("DELETE", "/v1/templates/inuse", check=False)
    assert r.status == 204
    # The sandbox goes on with the template's files; new sandboxes cannot use the name.
    assert sh(client, sid, "cat /version")["stdout"] == "v1\n"
    r = client.request("POST", "/v1/sandboxes", json_body={"template": "inuse"}, check=False)
    assert r.status == 404
    client.request("DELETE", "/v1/sandboxes/" + sid)


def test_the_build_cache_is_per_team(daemon, client):
    import warren.admin as admin
    text = "FROM base\nRUN echo $RANDOM > /r\n"
    status, ev = build(client, "team-a", text)
    assert ev[-1]["type"] == "done"
    other = daemon.client(key=admin.create_key("cache-b-%d" % os.getpid(), client=client).key,
                          tcp=True)
    status, ev = build(other, "team-b", text)
    assert ev[-1]["type"] == "done"
    steps = [e for e in ev if layer_step(e)]
    assert steps and not any(e["cached"] for e in steps), "another team's cached layer was used"
    # The same team gets its own cache.
    status, ev = build(client, "team-a", text, replace=True)
    assert all(e["cached"] for e in ev if layer_step(e))
    other.close()
    for n in ("team-a", "team-b"):
        client.request("DELETE", "/v1/templates/" + n)


def test_pruning_the_build_cache_frees_its_layers(daemon, client):
    import warren
    import warren.admin as admin
    from conftest import warren as warren_cli
    text = "FROM base\nRUN head -c 100000 /dev/urandom > /noise\n"
    status, ev = build(client, "pruned", text)
    assert ev[-1]["type"] == "done"
    layers = os.path.join(daemon.state, "layers")
    count = lambda: len([x for x in os.listdir(layers) if not x.startswith(".")])
    # The template and the cache both hold the step's layer.
    client.request("DELETE", "/v1/templates/pruned")
    assert count() >= 1
    # Another team's prune does not touch this team's cache.
    other = daemon.client(key=admin.create_key("prune-%d" % os.getpid(), client=client).key,
                          tcp=True)
    assert warren.Template.prune_cache(client=other) == 0
    other.close()
    status, ev = build(client, "pruned", text)
    assert all(e["cached"] for e in ev if layer_step(e))
    client.request("DELETE", "/v1/templates/pruned")
    # The CLI prunes (the unix socket is an admin: every team's cache); the layer goes.
    r = warren_cli("template", "prune", env={"WARREN_API_URL": daemon.url})
    assert r.returncode == 0 and b"forgot" in r.stdout, r.stderr
    deadline = time.monotonic() + 10
    while count() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert count() == 0
    status, ev = build(client, "pruned", text)
    assert not any(e["cached"] for e in ev if layer_step(e))
    client.request("DELETE", "/v1/templates/pruned")
    assert warren.Template.prune_cache(client=client) >= 1


@pytest.fixture
def two_teams(daemon, client):
    """Clients of two teams of their own (TCP, a team key each)."""
    import warren.admin as admin
    keys = [admin.create_key("names-%s-%d" % (t, os.getpid()), client=client) for t in "ab"]
    clients = [daemon.client(key=k.key, tcp=True) for k in keys]
    yield clients
    for cl, k in zip(clients, keys):
        cl.close()
        admin.delete_key(k.id, client=client)


def test_template_names_are_per_team(daemon, client, two_teams):
    """Two teams may each have a `myapp`: each resolves to its own, neither hears of the
    other's (no 409, no listing, no GET), and deleting one leaves the other (issue #14)."""
    ta, tb = two_teams
    for cl, who in ((ta, "a"), (tb, "b")):
        status, ev = build(cl, "myapp", "FROM base\nRUN echo %s > /who\n" % who)
        assert status == 200 and ev[-1]["type"] == "done", (who, ev)
    for cl, who in ((ta, "a"), (tb, "b")):
        sid = create(cl, "myapp")
        assert sh(cl, sid, "cat /who")["stdout"] == who + "\n"
        cl.request("DELETE", "/v1/sandboxes/" + sid)
        # A team's own name is taken for it, and only its own.
        status, body = build(cl, "myapp", "FROM base\n")
        assert status == 409 and body["code"] == "conflict", body
        listed = [t for t in cl.request("GET", "/v1/templates").json()["templates"]
                  if t["name"] == "myapp"]
        assert len(listed) == 1 and listed[0]["shared"] is False, listed
        # A build FROM the name builds on the team's own.
        status, ev = build(cl, "on-myapp", "FROM myapp\nRUN cat /who > /from\n")
        assert ev[-1]["type"] == "done", ev
        sid = create(cl, "on-myapp")
        assert sh(cl, sid, "cat /from")["stdout"] == who + "\n"
        cl.request("DELETE", "/v1/sandboxes/" + sid)
        cl.request("DELETE", "/v1/templates/on-myapp")
    # A team without one does not see the others'.
    import warren.admin as admin
    kc = admin.create_key("names-c-%d" % os.getpid(), client=client)
    tc = daemon.client(key=kc.key, tcp=True)
    try:
        assert tc.request("GET", "/v1/templates/myapp", check=False).status == 404
        assert "myapp" not in [t["name"] for t in tc.request("GET", "/v1/templates").json()["templates"]]
        r = tc.request("POST", "/v1/sandboxes", json_body={"template": "myapp"}, check=False)
        assert r.status == 404
        assert tc.request("DELETE", "/v1/templates/myapp", check=False).status == 404
        status, body = build(tc, "on-other", "FROM myapp\n")
        assert status == 404, body
    finally:
        tc.close()
        admin.delete_key(kc.id, client=client)
    # The admin sees both, with their teams, and can name one with ?team=.
    mine = [t for t in client.request("GET", "/v1/templates").json()["templates"]
            if t["name"] == "myapp"]
    assert sorted(t["team"] for t in mine) == ["names-a-%d" % os.getpid(), "names-b-%d" % os.getpid()]
    # Deleting one team's leaves the other's.
    assert ta.request("DELETE", "/v1/templates/myapp", check=False).status == 204
    assert ta.request("GET", "/v1/templates/myapp", check=False).status == 404
    sid = create(tb, "myapp")
    assert sh(tb, sid, "cat /who")["stdout"] == "b\n"
    tb.request("DELETE", "/v1/sandboxes/" + sid)
    r = client.request("DELETE", "/v1/templates/myapp", query={"team": "names-b-%d" % os.getpid()},
                       check=False)
    assert r.status == 204, r.body
    assert tb.request("GET", "/v1/templates/myapp", check=False).status == 404
    assert sandboxes_left(client) == [] and tmp_entries(daemon) == []


NOOP_STEPS = """\
FROM base
WORKDIR /usr
RUN true
RUN echo scratch > /dev/shm/scratch
RUN echo same > /f
RUN echo same > /f
WORKDIR /root
"""


def test_steps_that_change_nothing_add_no_layer(daemon, client):
    """A WORKDIR that exists, a RUN that writes nothing (or only /dev/shm) and a step that makes
    again a layer the stack has add nothing: the image starts (issue #14, item 13: an empty
    layer twice in a stack made overlayfs refuse to mount it)."""
    status, ev = build(client, "noop", NOOP_STEPS)
    assert status == 200 and ev[-1]["type"] == "done", ev[-1]
    assert ev[-1]["template"]["layers"] == 2, ev[-1]  # base + the one /f layer
    sid = create(client, "noop")
    assert sh(client, sid, "cat /f; pwd")["stdout"] == "same\n/root\n"
    # A fork of an untouched sandbox of it, and a fork of that fork, start and run.
    made = [sid]
    for _ in range(2):
        r = client.request("POST", "/v1/sandboxes/%s/fork" % made[-1],
                           json_body={"count": 1, "timeout": 120}).json()
        assert r["errors"] == [] and len(r["sandboxes"]) == 1, r
        made.append(r["sandboxes"][0]["id"])
        assert sh(client, made[-1], "cat /f; pwd")["stdout"] == "same\n/root\n"
    for x in made:
        client.request("DELETE", "/v1/sandboxes/" + x)
    # Cached, the same.
    status, ev = build(client, "noop", NOOP_STEPS, replace=True)
    assert all(e["cached"] for e in ev if layer_step(e)) and ev[-1]["template"]["layers"] == 2
    client.request("DELETE", "/v1/templates/noop")
