"""The code interpreter: the native API (POST /v1/sandboxes/{id}/code and .../code/contexts,
src/api/h_code.c through the port proxy), the Python SDK's run_code and contexts, and `warren
run-code`, against a real daemon and real sandboxes of the Debian template code-interpreter-v1
(scripts/templates/code-interpreter-v1.sh) running warren-interp (src/interp/) on Debian's
ipykernel.

The template's start command has the server up when the create answers. On a daemon without
template start support the fixture starts it through a background exec and waits for it; with
start support it finds it up and starts nothing (test_started_with_the_sandbox says which).
"""

import http.client
import json
import os
import socket
import subprocess
import time

import pytest

import warren
from conftest import Daemon, ENV, WARREN, delete_all, template_dir, wait_clean

TEMPLATE = "code-interpreter-v1"
PROBE = "curl -s -o /dev/null -w %{http_code} http://127.0.0.1:49999/health"


def ensure_server(sb):
    """True when the server was up at create (the template's start command), else start it."""
    if sb.commands.run(PROBE, check=False).stdout == "200":
        return True
    sb.commands.run("/usr/lib/warren/warren-interp --port 49999", background=True)
    end = time.monotonic() + 60
    while sb.commands.run(PROBE, check=False).stdout != "200":
        assert time.monotonic() < end, "warren-interp did not come up"
        time.sleep(0.05)
    return False


@pytest.fixture(autouse=True)
def leftovers():
    """The sandbox here lives for the whole module (its kernel takes seconds to start): what
    it leaves behind is checked once, when the module's daemon is gone."""
    yield


@pytest.fixture(scope="module")
def cid():
    template_dir(TEMPLATE)
    d = Daemon(templates=(TEMPLATE,)).start()
    try:
        yield d
    finally:
        try:
            delete_all(d)
        finally:
            d.cleanup()
    left = wait_clean()
    assert not any(left.values()), "left behind: %r" % left


@pytest.fixture(scope="module")
def client(cid):
    c = cid.client()
    yield c
    c.close()


@pytest.fixture(scope="module")
def sb(cid, client):
    s = warren.Sandbox.create(template=TEMPLATE, client=client, timeout=600)
    s.started_by_template = ensure_server(s)
    yield s
    s.kill()


def post_code(d, sid, body, path="/code", method="POST"):
    """A raw request over TCP: (status, content type, body lines or bytes)."""
    c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=60)
    c.request(method, "/v1/sandboxes/%s%s" % (sid, path),
              body=json.dumps(body) if body is not None else None,
              headers={"Authorization": "Bearer " + d.admin_key, "Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, r.getheader("Content-Type"), data


def lines(data):
    return [json.loads(x) for x in data.decode().splitlines() if x.strip()]


# ---- the native API ---------------------------------------------------------------------------

def test_started_with_the_sandbox(client, sb):
    print("server up at create (template start):", sb.started_by_template)
    # A daemon with template start support (it has GET /v1/warm-pools) must have started it.
    if client.request("GET", "/v1/warm-pools", check=False).status == 200:
        assert sb.started_by_template, "the template's start command did not run"
        procs = client.request("GET", "/v1/sandboxes/%s/processes" % sb.id).json()["processes"]
        assert [p["cmd"][-1] for p in procs if p.get("tag") == "start"] == [
            "/usr/lib/warren/warren-interp --port 49999"]
    r = sb.commands.run("curl -s http://127.0.0.1:49999/health")
    assert r.stdout == "OK"


def test_native_execute_lines(cid, sb):
    st, ct, data = post_code(cid, sb.id, {"code": "y = 6\nprint('out')\ny * 7"})
    assert st == 200 and ct == "application/x-ndjson"
    ls = lines(data)
    assert [x["type"] for x in ls] == ["number_of_executions", "stdout", "result", "end_of_execution"]
    assert ls[0]["execution_count"] >= 1
    assert ls[1]["text"] == "out\n" and ls[1]["timestamp"].endswith("+00:00")
    assert ls[2] == {"type": "result", "is_main_result": True, "text": "42"}
    st, _, data = post_code(cid, sb.id, {"code": "y"})
    assert lines(data)[1]["text"] == "6"


def test_native_streams_as_it_runs(cid, sb):
    c = http.client.HTTPConnection("127.0.0.1", cid.port, timeout=60)
    c.request("POST", "/v1/sandboxes/%s/code" % sb.id,
              body=json.dumps({"code": "import time\nprint('a', flush=True)\ntime.sleep(1.5)\nprint('b')"}),
              headers={"Authorization": "Bearer " + cid.admin_key})
    t0 = time.monotonic()
    r = c.getresponse()
    first = None
    got = []
    while True:
        line = r.readline()
        if not line:
            break
        j = json.loads(line)
        got.append(j)
        if j["type"] == "stdout" and first is None:
            first = time.monotonic() - t0
    total = time.monotonic() - t0
    c.close()
    assert [x.get("text") for x in got if x["type"] == "stdout"] == ["a\n", "b\n"]
    assert first < 1.0 and total >= 1.5, (first, total)


def test_native_errors_are_json(cid, sb):
    st, ct, data = post_code(cid, sb.id, {"code": "1", "context_id": "00000000-0000-0000-0000-000000000000"})
    assert st == 404 and ct == "application/json", data
    assert json.loads(data) == {"code": "not_found",
                                "message": "Context 00000000-0000-0000-0000-000000000000 not found"}
    st, _, data = post_code(cid, sb.id, {"code": "1", "context_id": "x", "language": "python"})
    assert st == 400 and json.loads(data)["code"] == "invalid"
    st, _, data = post_code(cid, sb.id, {"code": "1", "language": "cobol"})
    assert st == 400 and json.loads(data) == {"code": "invalid", "message": "unsupported language cobol"}
    st, _, data = post_code(cid, sb.id, {"nocode": 1})
    assert st == 400 and json.loads(data)["code"] == "invalid"
    st, _, data = post_code(cid, sb.id, None, "/code/contexts/not%2Fan-id", "DELETE")
    assert st == 404 and json.loads(data)["code"] == "not_found"
    st, _, data = post_code(cid, "nosuchsandbox", {"code": "1"})
    assert st == 404 and json.loads(data)["code"] == "not_found"


def test_native_error_and_result_formats(cid, sb):
    _, _, data = post_code(cid, sb.id, {"code": "raise ValueError('no good')"})
    err = [x for x in lines(data) if x["type"] == "error"]
    assert len(err) == 1 and err[0]["name"] == "ValueError" and err[0]["value"] == "no good"
    assert "ValueError" in err[0]["traceback"] and "\x1b[" not in err[0]["traceback"]
    _, _, data = post_code(cid, sb.id, {"code": "from IPython.display import SVG, JSON, display\n"
                                                "display(JSON({'a': 1}))\n"
                                                "SVG('<svg xmlns=\"http://www.w3.org/2000/svg\"/>')"})
    res = [x for x in lines(data) if x["type"] == "result"]
    assert res[0]["json"] == {"a": 1} and res[0]["is_main_result"] is False
    assert res[1]["svg"].startswith("<svg") and res[1]["is_main_result"] is True


def test_native_env_and_timeout(cid, sb):
    _, _, data = post_code(cid, sb.id, {"code": "import os; os.environ['WC_X']", "env": {"WC_X": "it's"}})
    assert lines(data)[1]["text"] == "it's"
    _, _, data = post_code(cid, sb.id, {"code": "import os; 'WC_X' in os.environ"})
    assert lines(data)[1]["text"] == "False"
    t0 = time.monotonic()
    _, _, data = post_code(cid, sb.id, {"code": "import time; time.sleep(30)", "timeout": 1})
    ls = lines(data)
    assert time.monotonic() - t0 < 8
    assert ls[-1]["type"] == "end_of_execution"
    assert [x["name"] for x in ls if x["type"] == "error"] == ["TimeoutError"]
    t0 = time.monotonic()
    _, _, data = post_code(cid, sb.id, {"code": "y"})
    assert lines(data)[1]["text"] == "6" and time.monotonic() - t0 < 2


def test_native_interrupt_is_sent_again(cid, sb):
    """An interrupt the cell does not act on (here the first SIGINT is swallowed, as one that
    lands before the cell starts is ignored by ipykernel) is sent again: the cell ends well
    within the grace, and the context is not restarted (its state is kept)."""
    code = ("import signal, time\n"
            "signal.signal(signal.SIGINT, lambda *a: signal.signal(signal.SIGINT, signal.default_int_handler))\n"
            "time.sleep(30)")
    t0 = time.monotonic()
    _, _, data = post_code(cid, sb.id, {"code": code, "timeout": 1})
    assert [x["name"] for x in lines(data) if x["type"] == "error"] == ["TimeoutError"]
    assert time.monotonic() - t0 < 4, "the cell ran into the grace (5 s) and a restart"
    _, _, data = post_code(cid, sb.id, {"code": "y"})
    assert lines(data)[1]["text"] == "6"


def test_native_disconnect_interrupts(cid, sb):
    s = socket.create_connection(("127.0.0.1", cid.port))
    body = json.dumps({"code": "import time\nprint('sleeping', flush=True)\ntime.sleep(60)"}).encode()
    s.sendall(b"POST /v1/sandboxes/%s/code HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
              b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
              % (sb.id.encode(), cid.admin_key.encode(), len(body), body))
    got = b""
    while b"sleeping" not in got:
        got += s.recv(4096)
    s.close()
    t0 = time.monotonic()
    st, _, data = post_code(cid, sb.id, {"code": "y + 1"})
    assert st == 200 and [x.get("text") for x in lines(data)][1:2] == ["7"], (st, data)
    assert time.monotonic() - t0 < 5, "the next cell waited for the abandoned one"


def test_the_cell_after_an_error_runs(cid, sb):
    """A cell sent the moment an errored one ends is run, not aborted: with stop_on_error the
    kernel aborted what reached it before its stop-aborting event (an empty answer, seen under
    load in test_native_disconnect_interrupts). Ten quick pairs make the window likely."""
    for i in range(10):
        _, _, data = post_code(cid, sb.id, {"code": "1/0"})
        assert [x["name"] for x in lines(data) if x["type"] == "error"] == ["ZeroDivisionError"]
        st, _, data = post_code(cid, sb.id, {"code": "%d + 1" % i})
        assert st == 200 and [x.get("text") for x in lines(data)][1:2] == [str(i + 1)], (i, data)


def test_native_contexts(cid, sb):
    st, _, data = post_code(cid, sb.id, {"cwd": "/tmp"}, "/code/contexts")
    assert st == 200
    ctx = json.loads(data)
    assert ctx["language"] == "python" and ctx["cwd"] == "/tmp" and len(ctx["id"]) == 36
    st, _, data = post_code(cid, sb.id, None, "/code/contexts", "GET")
    assert ctx in json.loads(data)
    _, _, data = post_code(cid, sb.id, {"code": "import os; z = 1; os.getcwd()", "context_id": ctx["id"]})
    assert lines(data)[1]["text"] == "/tmp"
    st, _, _ = post_code(cid, sb.id, None, "/code/contexts/%s/restart" % ctx["id"])
    assert st == 200
    _, _, data = post_code(cid, sb.id, {"code": "z", "context_id": ctx["id"]})
    assert [x["name"] for x in lines(data) if x["type"] == "error"] == ["NameError"]
    st, _, _ = post_code(cid, sb.id, None, "/code/contexts/%s" % ctx["id"], "DELETE")
    assert st == 200
    st, _, data = post_code(cid, sb.id, None, "/code/contexts/%s" % ctx["id"], "DELETE")
    assert st == 404 and json.loads(data)["code"] == "not_found"
    st, _, data = post_code(cid, sb.id, None, "/code/contexts", "GET")
    assert ctx not in json.loads(data)


def test_no_interpreter(cid, client):
    # The base template (busybox in this suite) runs no interpreter: 409 no_interpreter.
    with warren.Sandbox.create(client=client) as plain:
        st, _, data = post_code(cid, plain.id, {"code": "1"})
        assert st == 409 and json.loads(data)["code"] == "no_interpreter", data
        with pytest.raises(warren.ConflictError) as e:
            plain.run_code("1")
        assert e.value.code == "no_interpreter"


def test_bash_context(sb):
    assert sb.run_code("export WC_B=5; cd /tmp", language="bash").error is None
    e = sb.run_code("echo $WC_B; pwd", language="bash")
    assert e.logs.stdout == ["5\n/tmp\n"], e
    ctx = sb.create_code_context(language="bash", cwd="/")
    assert ctx.language == "bash"
    assert sb.run_code("pwd; echo ${WC_B:-none}", context=ctx).logs.stdout == ["/\nnone\n"]
    sb.remove_code_context(ctx)


def test_kernel_death_recovers(sb):
    ctx = sb.create_code_context()
    e = sb.run_code("import os; os._exit(3)", context=ctx)
    assert e.error is not None and e.error.name == "DeadKernelError", e
    assert sb.run_code("1 + 1", context=ctx).text == "2"
    sb.remove_code_context(ctx)


# ---- the Python SDK ---------------------------------------------------------------------------

def test_sdk_run_code(sb):
    out, err, res = [], [], []
    e = sb.run_code("import sys\nprint('o1')\nprint('e1', file=sys.stderr)\nimport matplotlib.pyplot as plt\n"
                    "plt.plot([1, 2])\nplt.show()\n'done'",
                    on_stdout=out.append, on_stderr=err.append, on_result=res.append)
    assert e.error is None
    assert e.text == "done"
    assert e.logs.stdout == ["o1\n"] and e.logs.stderr == ["e1\n"]
    assert out[0].line == "o1\n" and not out[0].error and err[0].error and out[0].timestamp
    pngs = [r for r in e.results if r.png]
    assert len(pngs) == 1 and not pngs[0].is_main_result and "png" in pngs[0].formats()
    assert res == e.results
    assert e.execution_count and e.execution_count > 0
    e = sb.run_code("1/0")
    assert e.error.name == "ZeroDivisionError" and e.error.value == "division by zero"
    assert e.text is None
    assert sb.run_code("import os; os.environ['Q']", env={"Q": "'quoted'"}).text == "'quoted'"
    e = sb.run_code("import time; time.sleep(20)", timeout=1)
    assert e.error.name == "TimeoutError"


def test_sdk_contexts(sb):
    ctx = sb.create_code_context(cwd="/")
    assert isinstance(ctx, warren.CodeContext) and ctx.cwd == "/"
    assert ctx in sb.list_code_contexts()
    sb.run_code("w = 3", context=ctx)
    assert sb.run_code("w", context=ctx.id).text == "3"
    assert sb.run_code("w").error.name == "NameError"
    sb.restart_code_context(ctx)
    assert sb.run_code("w", context=ctx).error.name == "NameError"
    sb.remove_code_context(ctx)
    with pytest.raises(warren.NotFoundError):
        sb.run_code("1", context=ctx)
    with pytest.raises(warren.NotFoundError):
        sb.remove_code_context(ctx)
    with pytest.raises(ValueError):
        sb.run_code("1", context=ctx, language="python")


# ---- the CLI ----------------------------------------------------------------------------------

def run_cli(d, *args, input=None):
    return subprocess.run([WARREN, *args], input=input, capture_output=True, timeout=60,
                          env=dict(ENV, WARREN_API_URL=d.url, WARREN_API_KEY=""))


def test_cli_run_code(cid, sb, tmp_path):
    r = run_cli(cid, "run-code", sb.id, "-", input=b"import sys\nprint('hello')\nprint('warn', file=sys.stderr)\n6 * 7\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"hello\n42\n" and r.stderr == b"warn\n"
    f = tmp_path / "cell.py"
    f.write_text("v = 'from a file'\nv")
    r = run_cli(cid, "run-code", sb.id, str(f))
    assert r.returncode == 0 and r.stdout == b"from a file\n", r.stderr
    r = run_cli(cid, "run-code", sb.id, "-", input=b"1/0")
    assert r.returncode == 1 and b"ZeroDivisionError: division by zero" in r.stderr
    r = run_cli(cid, "run-code", "--env", "K=v", sb.id, "-", input=b"import os; os.environ['K']")
    assert r.stdout == b"v\n", r.stderr
    r = run_cli(cid, "run-code", "--json", sb.id, "-", input=b"print(1)")
    types = [json.loads(x)["type"] for x in r.stdout.splitlines()]
    assert types == ["number_of_executions", "stdout", "end_of_execution"]
    r = run_cli(cid, "run-code", "--language", "bash", sb.id, "-", input=b"echo from bash")
    assert r.returncode == 0 and r.stdout == b"from bash\n", r.stderr
    ctx = sb.create_code_context()
    run_cli(cid, "run-code", "--context", ctx.id, sb.id, "-", input=b"cv = 9")
    r = run_cli(cid, "run-code", "-c", ctx.id, sb.id, "-", input=b"cv")
    assert r.stdout == b"9\n"
    sb.remove_code_context(ctx)
    r = run_cli(cid, "run-code", "-c", ctx.id, sb.id, "-", input=b"cv")
    assert r.returncode == 1 and b"not found" in r.stderr
    r = run_cli(cid, "run-code", "--timeout", "1", sb.id, "-", input=b"import time; time.sleep(10)")
    assert r.returncode == 1 and b"TimeoutError" in r.stderr
    r = run_cli(cid, "run-code", "--language", "python", "--context", "x", sb.id)
    assert r.returncode == 2


def test_javascript_context(sb):
    assert sb.run_code("let jv = 40", language="js").error is None
    e = sb.run_code("console.log('out'); console.error('err'); jv + 2", language="javascript")
    assert e.text == "42" and e.logs.stdout == ["out\n"] and e.logs.stderr == ["err\n"], e
    e = sb.run_code("await new Promise((r) => setTimeout(r, 50)); console.log('later')", language="js")
    assert e.logs.stdout == ["later\n"] and e.error is None
    assert sb.run_code("Promise.resolve({a: [1]})", language="js").text == "{ a: [ 1 ] }"
    e = sb.run_code("null.x", language="js")
    assert e.error.name == "TypeError" and "reading 'x'" in e.error.value
    assert "at cell.js:1" in e.error.traceback and "node:vm" not in e.error.traceback
    assert sb.run_code("process.env.JV", language="js", env={"JV": "set"}).text == "set"
    assert sb.run_code("String(process.env.JV)", language="js").text == "undefined"
    t0 = time.monotonic()
    e = sb.run_code("while (true) {}", language="js", timeout=1)
    assert e.error.name == "TimeoutError" and time.monotonic() - t0 < 5
    assert sb.run_code("jv", language="js").text == "40"
    ctx = sb.create_code_context(language="javascript", cwd="/tmp")
    assert sb.run_code("process.cwd() + ' ' + typeof jv", context=ctx).text == "/tmp undefined"
    sb.remove_code_context(ctx)
