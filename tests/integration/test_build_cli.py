"""Template builds through the user surfaces, against a real warrend: `warren template build`
(docs/cli.md) with a build context directory, and the Python SDK's Template.build
(docs/sdk-python.md)."""

import json
import os
import pathlib
import subprocess

import pytest

import warren
from conftest import ENV, WARREN


class Cli:
    def __init__(self, url):
        self.env = {k: v for k, v in ENV.items()
                    if k not in ("WARREN_API_URL", "WARREN_API_KEY", "WARREN_REQUEST_ID")}
        self.env["WARREN_API_URL"] = url

    def __call__(self, *args, cwd=None, env=None, timeout=300):
        return subprocess.run([WARREN, *args], capture_output=True, timeout=timeout,
                              env=dict(self.env, **(env or {})), stdin=subprocess.DEVNULL, cwd=cwd)


@pytest.fixture
def cli(daemon):
    return Cli(daemon.url)


@pytest.fixture
def templates(client):
    """Template names to delete after the test."""
    names = []
    yield names
    for n in names:
        client.request("DELETE", "/v1/templates/" + n, check=False)


def write(root, files):
    for path, data in files.items():
        p = root / path
        if data is None:
            p.mkdir(parents=True, exist_ok=True)
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)


def sh(client, template, script):
    sid = client.request("POST", "/v1/sandboxes",
                         json_body={"template": template, "timeout": 120}).json()["id"]
    try:
        r = client.request("POST", "/v1/sandboxes/%s/exec" % sid,
                           json_body={"cmd": ["/bin/sh", "-c", script]}).json()
        return r["stdout"]
    finally:
        client.request("DELETE", "/v1/sandboxes/" + sid)


APP_DOCKERFILE = b"""\
FROM base
WORKDIR /app
COPY main.py ./
COPY conf /etc/myconf
COPY .dockerignore /app/
RUN echo building; echo warn >&2; cat /app/main.py
"""


def app_context(tmp_path, name="My App!"):
    root = tmp_path / name
    write(root, {
        "Dockerfile": APP_DOCKERFILE,
        "main.py": b"print('hi')\n",
        "conf/a.ini": b"a=1\n",
        "conf/sub/b.ini": b"b=2\n",
        # Not honoured: sent and copied like any other file.
        ".dockerignore": b"main.py\nconf\n",
    })
    return root


def test_cli_builds_from_a_context_dir_then_from_the_cache(cli, client, templates, tmp_path):
    root = app_context(tmp_path)
    # The name defaults to the Dockerfile's directory's, cleaned: "My App!" -> "my-app".
    templates.append("my-app")
    r = cli("template", "build", "-f", str(root / "Dockerfile"))
    out, err = r.stdout.decode(), r.stderr.decode()
    assert r.returncode == 0, (out, err)
    lines = out.splitlines()
    assert lines[0] == "Step 1/6 (line 1): FROM base", out
    assert "Step 2/6 (line 2): WORKDIR /app" in lines
    assert "Step 6/6 (line 6): RUN echo building; echo warn >&2; cat /app/main.py" in lines
    assert "building" in lines and "print('hi')" in lines
    assert "warn\n" in err and "warren:" not in err
    # base + WORKDIR and the 3 COPYs; the RUN writes nothing, so it adds no layer
    assert lines[-1] == "built template my-app (5 layers)", out
    assert sh(client, "my-app", "cat /app/main.py /etc/myconf/a.ini /etc/myconf/sub/b.ini "
                                "/app/.dockerignore") == "print('hi')\na=1\nb=2\nmain.py\nconf\n"

    # Again, with --replace: every step from the cache, nothing runs.
    r = cli("template", "build", "-f", str(root / "Dockerfile"), "--replace")
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr
    steps = [l for l in out.splitlines() if l.startswith("Step ")]
    assert len(steps) == 6 and all(l.endswith("(cached)") for l in steps[1:]), out
    assert "building" not in out.splitlines() and r.stderr == b""
    # Without --replace the name is taken.
    r = cli("template", "build", "-f", str(root / "Dockerfile"))
    err = r.stderr.decode()
    assert r.returncode == 1 and err.startswith("warren: template build: ") and "exists" in err
    assert err.count("\n") == 1

    # A changed file: every COPY (their cache key has the whole context's digest) and what
    # follows runs again; WORKDIR stays cached. --name, -o json, the context given as ".".
    (root / "conf/a.ini").write_bytes(b"a=2\n")
    templates.append("app2")
    r = cli("template", "build", "-f", "Dockerfile", "--name", "app2", "-o", "json", ".",
            cwd=str(root))
    assert r.returncode == 0, r.stderr
    events = [json.loads(l) for l in r.stdout.decode().splitlines()]
    steps = [e for e in events if e["type"] == "step"]
    assert [e["cached"] for e in steps] == [False, True, False, False, False, False]
    assert events[-1]["type"] == "done" and events[-1]["template"]["name"] == "app2"
    assert sh(client, "app2", "cat /etc/myconf/a.ini") == "a=2\n"


def test_cli_dockerfile_outside_the_context(cli, client, templates, tmp_path):
    ctx = tmp_path / "ctx"
    write(ctx, {"data/x.txt": b"x\n"})
    df = tmp_path / "build" / "Dockerfile.prod"
    write(tmp_path, {"build/Dockerfile.prod": b"FROM base\nCOPY data /data\n"})
    templates.append("outside")
    r = cli("template", "build", "-f", str(df), "--name", "outside", str(ctx))
    assert r.returncode == 0, r.stderr
    assert sh(client, "outside", "cat /data/x.txt") == "x\n"


def test_cli_without_copy_sends_no_context(cli, client, templates, tmp_path):
    """A Dockerfile without COPY next to things tar cannot send (a fifo, which the daemon
    refuses) builds: its directory is not sent at all. Regression: `-f /tmp/Dockerfile` used
    to tar all of /tmp."""
    write(tmp_path, {"Dockerfile": b"FROM base\nRUN echo alone > /alone\n"})
    os.mkfifo(tmp_path / "a-fifo")
    templates.append("alone")
    r = cli("template", "build", "-f", str(tmp_path / "Dockerfile"), "--name", "alone")
    assert r.returncode == 0, r.stderr
    assert sh(client, "alone", "cat /alone") == "alone\n"
    # With a COPY, the directory is the context, and the fifo is refused.
    write(tmp_path, {"Dockerfile": b"FROM base\nCOPY Dockerfile /d\n"})
    r = cli("template", "build", "-f", str(tmp_path / "Dockerfile"), "--name", "alone",
            "--replace")
    assert r.returncode != 0 and b"a-fifo" in r.stderr, r.stderr
    assert not [p for p in os.listdir(os.environ.get("TMPDIR", "/tmp"))
                if p.startswith("warren-build-")]


def test_cli_failing_run_passes_its_exit_code(cli, client, tmp_path):
    root = tmp_path / "broken"
    write(root, {"Dockerfile": b"FROM base\nRUN echo ok\n\nRUN echo bad >&2; exit 3\nRUN echo never\n"})
    r = cli("template", "build", "-f", str(root / "Dockerfile"))
    out, err = r.stdout.decode(), r.stderr.decode()
    assert r.returncode == 3, (out, err)
    assert "Step 3/4 (line 4): RUN echo bad >&2; exit 3" in out and "never" not in out
    assert "bad\n" in err
    last = err.splitlines()[-1]
    assert last.startswith("warren: build failed at step 3 (line 4): ") and "exit code 3" in last
    assert len([l for l in err.splitlines() if l.startswith("warren:")]) == 1, err
    assert client.request("GET", "/v1/templates/broken", check=False).status == 404


def test_cli_unsupported_instruction_names_the_line(cli, tmp_path):
    root = tmp_path / "bad"
    write(root, {"Dockerfile": b"FROM base\nRUN true\nADD x /x\n"})
    r = cli("template", "build", "-f", str(root / "Dockerfile"))
    err = r.stderr.decode()
    assert r.returncode != 0 and r.stdout == b""
    assert err.count("\n") == 1 and err.startswith("warren: template build: ")
    assert "line 3" in err and "ADD" in err


def test_cli_usage_errors(cli, tmp_path):
    r = cli("template", "build", "-f", str(tmp_path / "nope" / "Dockerfile"))
    err = r.stderr.decode()
    assert r.returncode == 1 and err.count("\n") == 1
    assert "Dockerfile" in err and "No such file" in err
    r = cli("template", "build")
    assert r.returncode == 2 and "-f" in r.stderr.decode()
    (tmp_path / "Dockerfile").write_bytes(b"FROM base\n")
    r = cli("template", "build", "-f", str(tmp_path / "Dockerfile"), str(tmp_path / "no-dir"))
    assert r.returncode == 1 and "context" in r.stderr.decode()
    r = cli("template", "build", "--help")
    assert r.returncode == 0 and "lowercased" in r.stdout.decode()
    assert ".dockerignore" in r.stdout.decode()


def test_cli_without_tar(cli, tmp_path):
    root = tmp_path / "notar"
    write(root, {"Dockerfile": b"FROM base\n"})
    empty = tmp_path / "empty-path"
    empty.mkdir()
    r = cli("template", "build", "-f", str(root / "Dockerfile"), env={"PATH": str(empty)})
    err = r.stderr.decode()
    assert r.returncode == 1 and err.count("\n") == 1 and "`tar`" in err, err


# ---- the SDK ---------------------------------------------------------------------------------------

def test_sdk_build_with_callbacks_and_a_context(daemon, client, templates, tmp_path):
    root = app_context(tmp_path, "sdkctx")
    (root / "sdk.txt").write_bytes(b"a context of its own, so that COPY runs\n")
    steps, output = [], []
    templates.append("sdk-app")
    t = warren.Template.build("sdk-app", context=root, client=client, on_step=steps.append,
                              on_output=lambda s, d: output.append((s, d)))
    assert isinstance(t, warren.Template) and t.name == "sdk-app" and t.layers == 5
    assert [s.line for s in steps] == [1, 2, 3, 4, 5, 6] and all(s.of == 6 for s in steps)
    assert isinstance(steps[1], warren.BuildStep) and steps[1].instruction == "WORKDIR /app"
    assert "".join(d for s, d in output if s == "stdout") == "building\nprint('hi')\n"
    assert "".join(d for s, d in output if s == "stderr") == "warn\n"
    assert sh(client, "sdk-app", "cat /etc/myconf/sub/b.ini") == "b=2\n"

    # Cached, with replace; the Dockerfile given as text replaces the context's.
    steps.clear()
    t = warren.Template.build("sdk-app", context=str(root), replace=True, client=client,
                              on_step=steps.append)
    assert all(s.cached for s in steps[1:])
    t = warren.Template.build("sdk-app", "FROM base\nCOPY main.py /m.py\n", context=root,
                              replace=True, client=client)
    assert t.layers == 2 and sh(client, "sdk-app", "cat /m.py") == "print('hi')\n"
    # A path to a Dockerfile, no context.
    (tmp_path / "df").write_text("FROM base\nENV A=1\nRUN echo $A > /a\n")
    t = warren.Template.build("sdk-app", pathlib.Path(tmp_path / "df"), replace=True,
                              client=client)
    assert sh(client, "sdk-app", "cat /a") == "1\n"
    with pytest.raises(warren.ConflictError):
        warren.Template.build("sdk-app", "FROM base\n", client=client)


def test_sdk_build_errors(daemon, client):
    with pytest.raises(warren.BuildError) as e:
        warren.Template.build("sdk-broken", "FROM base\nRUN true\nRUN exit 7\n", client=client)
    assert (e.value.step, e.value.line, e.value.exit_code) == (3, 3, 7)
    assert isinstance(e.value, warren.WarrenError) and "exit code 7" in str(e.value)
    with pytest.raises(warren.BuildError) as e:
        warren.Template.build("sdk-broken", "FROM base\nCOPY a /a\n", client=client)
    assert e.value.line == 2 and e.value.exit_code is None
    with pytest.raises(warren.InvalidArgumentError) as e:
        warren.Template.build("sdk-broken", "FROM base\nCMD [\"sh\"]\n", client=client)
    assert "line 2" in str(e.value)
    with pytest.raises(warren.NotFoundError):
        warren.Template.build("sdk-broken", "FROM no-such-template\n", client=client)
    with pytest.raises(ValueError):
        warren.Template.build("sdk-broken", client=client)
    assert client.request("GET", "/v1/templates/sdk-broken", check=False).status == 404
