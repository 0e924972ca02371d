"""The daemon matches its OpenAPI document (docs/openapi.yaml).

Every path and method of the document is routed; a real call of every operation answers a
documented status with a body that validates against the documented schema (JSON Schema 2020-12,
with `#/components/...` references inlined from the document); every documented 4xx answers the
Error schema with an X-Request-Id; and a few not-happy paths answer what the document says.

Response schemas are checked strictly: a property the schema does not declare is an error (the
document would be incomplete), although the document itself does not forbid them.
"""

import base64
import copy
import gzip
import http.client
import io
import json
import os
import re
import socket
import tarfile
import time
from urllib.parse import quote, urlencode

import jsonschema
import pytest
import yaml

from conftest import Daemon, delete_all

SPEC_PATH = os.path.join(os.path.dirname(__file__), "../../docs/openapi.yaml")
with open(SPEC_PATH) as _f:
    SPEC = yaml.safe_load(_f)

METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
OPERATIONS = [(p, m) for p, item in SPEC["paths"].items() for m in item if m in METHODS]
# Paths that speak JSON-RPC (the MCP server, docs/mcp.md): their errors are JSON-RPC's, not the
# Error schema; test_mcp_operations below and tests/integration/test_mcp.py check them.
JSONRPC_PATHS = {"/mcp"}
CODES = {502: "upstream", 501: "unsupported", 400: "invalid", 401: "unauthorized", 403: "forbidden", 404: "not_found", 409: "conflict",
         413: "too_large", 416: "invalid", 422: "bad_content", 503: "limit", 504: "timeout"}
# Answers whose code is more precise than their status's: the code interpreter's routes on a
# sandbox without one (docs/code-interpreter.md).
CODES_OF = {(t, m, 409): "no_interpreter" for t, m in (
    ("/v1/sandboxes/{id}/code", "post"), ("/v1/sandboxes/{id}/code/contexts", "get"),
    ("/v1/sandboxes/{id}/code/contexts", "post"), ("/v1/sandboxes/{id}/code/contexts/{ctx}", "delete"),
    ("/v1/sandboxes/{id}/code/contexts/{ctx}/restart", "post"))}


# ---- the document ------------------------------------------------------------------------------

def resolve(ref):
    assert ref.startswith("#/"), ref
    node = SPEC
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def inline(node):
    """A copy of node with every local $ref replaced by what it points at (recursively)."""
    if isinstance(node, dict):
        if "$ref" in node:
            target = inline(resolve(node["$ref"]))
            rest = {k: inline(v) for k, v in node.items() if k != "$ref"}
            if not rest:
                return target
            return {"allOf": [target], **rest}
        return {k: inline(v) for k, v in node.items()}
    if isinstance(node, list):
        return [inline(v) for v in node]
    return node


def strict(schema, in_all_of=False):
    """Forbid properties a response schema does not declare (unevaluatedProperties sees through
    allOf, so it goes on the allOf's parent, not its branches)."""
    s = copy.deepcopy(schema)

    def walk(n, branch):
        if isinstance(n, list):
            for x in n:
                walk(x, branch)
            return
        if not isinstance(n, dict):
            return
        for k, v in n.items():
            if k == "allOf":
                walk(v, True)
            elif k in ("properties", "$defs"):
                for sub in v.values():
                    walk(sub, False)
            elif isinstance(v, (dict, list)):
                walk(v, False)
        if not branch and ("properties" in n or "allOf" in n) and "additionalProperties" not in n:
            n.setdefault("unevaluatedProperties", False)

    walk(s, in_all_of)
    return s


FORMATS = jsonschema.FormatChecker(formats=())
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


@FORMATS.checks("date-time")
def _date_time(value):
    return not isinstance(value, str) or bool(RFC3339.match(value))


def validate(instance, schema, what):
    v = jsonschema.Draft202012Validator(strict(inline(schema)), format_checker=FORMATS)
    errors = sorted(v.iter_errors(instance), key=lambda e: list(e.absolute_path))
    assert not errors, "%s: %r does not match the document:\n  %s" % (
        what, instance, "\n  ".join("%s at %s" % (e.message, list(e.absolute_path)) for e in errors))


def operation(template, method):
    return SPEC["paths"][template][method.lower()]


def response_spec(template, method, status):
    r = operation(template, method)["responses"].get(str(status))
    return inline(r) if r is not None else None


def secured(template, method):
    return operation(template, method).get("security", SPEC.get("security")) != []


def documented(template, method, status):
    # 401 is documented for every secured operation by the document's Auth section.
    return response_spec(template, method, status) is not None or (
        status == 401 and secured(template, method))


def schema_of(template, method, status, media="application/json"):
    r = response_spec(template, method, status) or response_spec("/v1/version", "get", 401)
    return r["content"][media]["schema"]


# ---- HTTP --------------------------------------------------------------------------------------

class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


class Resp:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)

    def lines(self):
        return [json.loads(l) for l in self.body.decode().splitlines() if l.strip()]

    @property
    def media(self):
        return self.headers.get("content-type", "").split(";")[0].strip()

    def __repr__(self):
        return "<%d %s %r>" % (self.status, self.media, self.body[:300])


def connect(daemon, tcp=False, timeout=60):
    if tcp:
        return http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=timeout)
    return UnixConnection(daemon.sock, timeout)


def fill(template, ids):
    return re.sub(r"\{(\w+)\}", lambda m: quote(str(ids[m.group(1)]), safe=""), template)


def send(daemon, method, path, query=None, body=None, headers=None, tcp=False, key=None,
         head_only=False, timeout=60):
    """One request on a connection of its own. head_only: status and headers, then hang up (for
    streams that do not end by themselves)."""
    if query:
        path += "?" + urlencode(query, doseq=True)
    h = dict(headers or {})
    if key:
        h["Authorization"] = "Bearer " + key
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        h.setdefault("Content-Type", "application/json")
    c = connect(daemon, tcp, timeout)
    try:
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        data = b"" if head_only else r.read()
        return Resp(r.status, hdrs, data)
    finally:
        c.close()


def check(resp, template, method):
    """resp is a documented answer of the operation, and its body matches the document."""
    what = "%s %s -> %d" % (method, template, resp.status)
    assert documented(template, method, resp.status), "%s is not documented: %r" % (what, resp)
    assert resp.headers.get("x-request-id"), "%s: no X-Request-Id" % what
    spec = response_spec(template, method, resp.status) or response_spec("/v1/version", "get", 401)
    for name in spec.get("headers", {}):
        assert name.lower() in resp.headers, "%s: no %s header" % (what, name)
    content = spec.get("content")
    if not content:
        assert resp.body == b"", "%s: a body where none is documented: %r" % (what, resp)
        return resp
    if resp.status == 206:
        return resp
    assert resp.media in content, "%s: content type %r, documented %s" % (
        what, resp.media, list(content))
    schema = content[resp.media].get("schema", {})
    if resp.media == "application/json":
        validate(resp.json(), schema, what)
    elif resp.media == "application/x-ndjson":
        for i, ev in enumerate(resp.lines()):
            validate(ev, schema, "%s line %d" % (what, i))
    return resp


def api(daemon, method, template, ids=None, **kw):
    """Send a request to the operation and check the answer against the document."""
    resp = send(daemon, method, fill(template, ids or {}), **kw)
    if kw.get("head_only"):
        assert documented(template, method, resp.status), (method, template, resp)
        return resp
    return check(resp, template, method)


def check_error(resp, template, method, status):
    assert resp.status == status, "%s %s: want %d, got %r" % (method, template, status, resp)
    check(resp, template, method)
    assert resp.media == "application/json"
    validate(resp.json(), SPEC["components"]["schemas"]["Error"], "%s %s error" % (method, template))
    assert resp.json()["code"] == CODES_OF.get((template, method, status), CODES[status]), resp
    assert resp.json()["message"], resp


def wait_for(fn, timeout=15.0, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.05)


def new_sandbox(daemon, **body):
    r = send(daemon, "POST", "/v1/sandboxes", body=dict({"timeout": 120}, **body))
    assert r.status == 201, r
    return r.json()["id"]


def kill(daemon, sid):
    r = send(daemon, "DELETE", "/v1/sandboxes/" + sid)
    assert r.status in (204, 404), r


def background(daemon, sid, cmd, **extra):
    r = send(daemon, "POST", "/v1/sandboxes/%s/exec" % sid,
             body=dict({"cmd": cmd, "mode": "background"}, **extra))
    assert r.status == 201, r
    return r.json()["pid"]


def wait_proc(daemon, sid, pid):
    r = send(daemon, "GET", "/v1/sandboxes/%s/processes/%d/wait" % (sid, pid))
    assert r.status == 200, r
    return r.json()


def stopped_sandbox(daemon):
    """A sandbox whose deadline has passed: known, but stopped."""
    sid = new_sandbox(daemon, timeout=1)
    wait_for(lambda: send(daemon, "GET", "/v1/sandboxes/" + sid).json()["state"] == "stopped",
             what="the sandbox to stop")
    return sid


# ---- the document itself ---------------------------------------------------------------------

def test_the_document_is_a_consistent_openapi_3_1():
    assert SPEC["openapi"].startswith("3.1")
    meta = jsonschema.Draft202012Validator.META_SCHEMA
    for name, schema in SPEC["components"]["schemas"].items():
        jsonschema.Draft202012Validator(meta).validate(inline(schema))
    for template, method in OPERATIONS:
        op = operation(template, method)
        assert op["responses"], (template, method)
        params = SPEC["paths"][template].get("parameters", []) + op.get("parameters", [])
        names = {inline(p)["name"] for p in params if inline(p)["in"] == "path"}
        assert names == set(re.findall(r"\{(\w+)\}", template)), (template, method, names)
        for status, r in op["responses"].items():
            r = inline(r)
            for media, c in r.get("content", {}).items():
                jsonschema.Draft202012Validator(meta).validate(c.get("schema", {}))
            if (status.startswith("4") or status.startswith("5")) and template not in JSONRPC_PATHS:
                assert r["content"]["application/json"]["schema"] == \
                    SPEC["components"]["schemas"]["Error"], (template, method, status)


# ---- (a) every documented path and method is routed ----------------------------------------------

def router_miss(resp, method, path):
    """The router's own answers: no such endpoint (404) or no such method (405)."""
    if resp.status == 405:
        return True
    if resp.status != 404:
        return False
    msg = json.loads(resp.body).get("message", "")
    return msg.startswith("no such endpoint") or msg == "%s %s" % (method, path.split("?")[0])


def test_every_documented_operation_is_routed(daemon):
    sid = new_sandbox(daemon)
    try:
        done = background(daemon, sid, "echo hi")
        wait_proc(daemon, sid, done)
        running = background(daemon, sid, "cat", pty=True)
        key = send(daemon, "POST", "/v1/keys", body={"team": "routing"}).json()["id"]
        send(daemon, "PUT", "/v1/sandboxes/%s/files" % sid, query={"path": "/tmp/routed"}, body=b"x")
        send(daemon, "POST", "/v1/volumes", body={"name": "routed"})
        ids = {"id": sid, "key_id": key, "name": "routed", "template": "base", "team": "routing",
               "snapshot": "no-such-snapshot", "port": 8999, "path": "routed",
               "ctx": "00000000-0000-0000-0000-000000000000", "webhook": "no-such-webhook",
               "delivery": "1"}
        bodies = {
            ("/v1/sandboxes", "post"): {"bogus": 1},  # answered by the handler, makes nothing
            ("/v1/sandboxes/{id}/timeout", "post"): {"timeout": 60},
            ("/v1/sandboxes/{id}/exec", "post"): {"cmd": "true"},
            ("/v1/sandboxes/{id}/processes/{pid}/stdin", "post"): b"input\n",
            ("/v1/sandboxes/{id}/processes/{pid}/signal", "post"): {"signal": "CONT"},
            ("/v1/sandboxes/{id}/processes/{pid}/resize", "post"): {"rows": 30, "cols": 90},
            ("/v1/sandboxes/{id}/files", "put"): b"data",
            ("/v1/sandboxes/{id}/files/mkdir", "post"): {"path": "/tmp/routed-dir"},
            ("/v1/sandboxes/{id}/files/move", "post"): {"from": "/tmp/routed", "to": "/tmp/moved"},
            ("/v1/keys", "post"): {"name": "no team"},
            ("/v1/teams/{team}/limits", "put"): {"nope": 1},  # answered by the handler
            ("/v1/volumes", "post"): {"name": "routed-2"},
            ("/v1/webhooks", "post"): {"url": "ftp://no"},  # answered by the handler
            # answered by the handlers, make nothing
            ("/v1/sandboxes/{id}/snapshots", "post"): {"name": "bad name!"},
            ("/v1/sandboxes/{id}/fork", "post"): {"count": 0},
            ("/mcp", "post"): {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        }
        queries = {
            "/v1/sandboxes/{id}/files": {"path": "/tmp/routed"},
            "/v1/sandboxes/{id}/files/stat": {"path": "/tmp"},
            "/v1/sandboxes/{id}/files/list": {"path": "/tmp"},
            "/v1/sandboxes/{id}/files/watch": {"path": "/tmp"},
        }
        # Destructive operations last, the sandbox's own deletion at the very end.
        order = sorted(OPERATIONS, key=lambda o: (o[1] == "delete", o[0] == "/v1/sandboxes/{id}"))
        misses = []
        for template, method in order:
            live = template.endswith(("/stdin", "/stdin/close", "/signal", "/resize"))
            ids["pid"] = running if live else done
            path = fill(template, ids)
            r = send(daemon, method.upper(), path, query=queries.get(template),
                     body=bodies.get((template, method)), head_only=True, timeout=20)
            if r.status in (404, 405):
                r = send(daemon, method.upper(), path, query=queries.get(template),
                         body=bodies.get((template, method)), timeout=20)
                if router_miss(r, method.upper(), path):
                    misses.append("%s %s -> %r" % (method.upper(), template, r))
            assert r.headers.get("x-request-id"), (template, method)
        assert not misses, "documented but not routed:\n" + "\n".join(misses)
    finally:
        kill(daemon, sid)
        send(daemon, "DELETE", "/v1/keys/%s" % ids.get("key_id", "none"))
        for name in ("routed", "routed-2"):
            send(daemon, "DELETE", "/v1/volumes/" + name)


# ---- (b) a real call of every operation validates against its schema -------------------------------

def test_network_log(daemon, sandbox):
    ids = {"id": sandbox.sandbox_id}
    r = api(daemon, "GET", "/v1/sandboxes/{id}/network/log", ids, query={"limit": 10})
    assert r.json() == {"entries": [], "next": "0"}
    r = api(daemon, "GET", "/v1/sandboxes/{id}/network/log", ids,
            query={"follow": "1"}, head_only=True)
    assert r.status == 200 and r.media == "application/x-ndjson"


def test_events(daemon, sandbox):
    r = api(daemon, "GET", "/v1/events", {}, query={"sandbox": sandbox.sandbox_id})
    assert r.json()["events"][0]["type"] == "sandbox.created"
    r = api(daemon, "GET", "/v1/events/stream", {}, query={"after": "0"}, head_only=True)
    assert r.status == 200 and r.media == "text/event-stream"


def test_usage(daemon, sandbox):
    r = api(daemon, "GET", "/v1/usage", {}, query={"group_by": "day"})
    assert r.json()["billed_seconds"] == "allocated"


def test_audit(daemon, sandbox):
    r = api(daemon, "GET", "/v1/audit", {}, query={"limit": 2})
    assert len(r.json()["events"]) == 2
    r = api(daemon, "GET", "/v1/audit", {}, query={"object": sandbox.sandbox_id})
    assert r.json()["events"][0]["action"] == "sandbox.create"


def test_webhooks_operations(daemon, sandbox):
    # Disabled, so that nothing is ever sent to the (public, unreached) URL.
    w = api(daemon, "POST", "/v1/webhooks", {}, body={
        "url": "https://hooks.example.com/in", "events": ["sandbox."], "enabled": False,
        "name": "openapi"}).json()
    assert w["secret"].startswith("whsec_")
    ids = {"webhook": w["id"]}
    assert w["id"] in [x["id"] for x in api(daemon, "GET", "/v1/webhooks", {}).json()["webhooks"]]
    assert api(daemon, "GET", "/v1/webhooks/{webhook}", ids).json()["enabled"] is False
    r = api(daemon, "PATCH", "/v1/webhooks/{webhook}", ids, body={"name": "renamed"})
    assert r.json()["name"] == "renamed" and "secret" not in r.json()
    r = api(daemon, "GET", "/v1/webhooks/{webhook}/deliveries", ids, query={"state": "dead"})
    assert r.json() == {"deliveries": [], "next_cursor": None}
    assert api(daemon, "DELETE", "/v1/webhooks/{webhook}", ids).status == 204


def webhooks_full(daemon):
    made = []
    try:
        for i in range(21):
            r = send(daemon, "POST", "/v1/webhooks", body={
                "url": "https://hooks.example.com/%d" % i, "enabled": False,
                "team": "openapi-wh-cap"})
            if r.status != 201:
                return r
            made.append(r.json()["id"])
        raise AssertionError("21 webhooks for one team")
    finally:
        for i in made:
            send(daemon, "DELETE", "/v1/webhooks/" + i)


def test_diff(daemon, sandbox):
    ids = {"id": sandbox.sandbox_id}
    r = api(daemon, "POST", "/v1/sandboxes/{id}/exec", ids,
            body={"cmd": ["/bin/sh", "-c", "echo x >> /etc/motd && rm /etc/group && mkdir /d && "
                          "mv /etc/passwd /d/pw && printf '\\0' > /d/bin"]})
    assert r.json()["exit_code"] == 0
    r = api(daemon, "GET", "/v1/sandboxes/{id}/diff", ids)
    assert {c["change"] for c in r.json()["changes"]} == {"added", "modified", "deleted", "renamed"}
    for path in ("/etc/motd", "/d/bin", "/etc/group"):
        r = api(daemon, "GET", "/v1/sandboxes/{id}/diff", ids, query={"path": path, "content": "1"})
        assert r.json()["path"] == path


def test_health_and_version(daemon):
    api(daemon, "GET", "/v1/health")
    v = api(daemon, "GET", "/v1/version").json()
    assert v["api"] == "1"
    # Health needs no key, even over TCP.
    r = send(daemon, "GET", "/v1/health", tcp=True)
    assert r.status == 200 and check(r, "/v1/health", "get")


def test_console_operations(daemon):
    """The web console's files (the build's console/, next to warrend) need no key."""
    r = api(daemon, "GET", "/console/", tcp=True)
    assert r.status == 200 and r.media == "text/html", r
    r = api(daemon, "GET", "/console/{path}", {"path": "sandboxes"}, tcp=True)
    assert r.status == 200 and r.media == "text/html", r
    r = api(daemon, "GET", "/console/{path}", {"path": "favicon.svg"}, tcp=True)
    assert r.status == 200 and r.media == "image/svg+xml", r
    assert api(daemon, "GET", "/console/", tcp=True,
               headers={"If-None-Match": r.headers["etag"]}).status == 200  # another file's
    etag = send(daemon, "GET", "/console/").headers["etag"]
    assert api(daemon, "GET", "/console/", headers={"If-None-Match": etag}).status == 304


def test_sandbox_operations(daemon):
    made = []
    try:
        r = api(daemon, "POST", "/v1/sandboxes", body={
            "template": "base", "cpus": 0.5, "memory_mb": 128, "timeout": 120,
            "env": {"A": "b"}, "metadata": {"suite": "openapi"}},
            headers={"Idempotency-Key": "openapi-1"})
        assert r.status == 201
        sb = r.json()
        made.append(sb["id"])
        assert sb["state"] == "running" and sb["cpus"] == 0.5 and sb["memory_mb"] == 128
        r = api(daemon, "POST", "/v1/sandboxes", body={"timeout": 120},
                headers={"Idempotency-Key": "openapi-1"})
        assert r.status == 200 and r.json()["id"] == sb["id"]
        # An empty body is allowed (requestBody is not required).
        r = api(daemon, "POST", "/v1/sandboxes")
        assert r.status == 201
        made.append(r.json()["id"])
        assert r.json()["template"] == "base"

        page = api(daemon, "GET", "/v1/sandboxes", query={"limit": 1}).json()
        assert len(page["sandboxes"]) == 1 and page["next_cursor"]
        page = api(daemon, "GET", "/v1/sandboxes",
                   query={"cursor": page["next_cursor"], "state": "running"}).json()
        assert page["next_cursor"] is None
        page = api(daemon, "GET", "/v1/sandboxes", query={"metadata": "suite=openapi"}).json()
        assert [s["id"] for s in page["sandboxes"]] == [sb["id"]]

        got = api(daemon, "GET", "/v1/sandboxes/{id}", {"id": sb["id"]}).json()
        assert got["metadata"] == {"suite": "openapi"}
        r = api(daemon, "POST", "/v1/sandboxes/{id}/timeout", {"id": sb["id"]}, body={"timeout": 30})
        assert r.status == 200 and r.json()["expires_at"] < got["expires_at"]
        for sid in made:
            assert api(daemon, "DELETE", "/v1/sandboxes/{id}", {"id": sid}).status == 204

        # A stopped sandbox (its deadline passed) is still listed and has a reason.
        sid = stopped_sandbox(daemon)
        made.append(sid)
        got = api(daemon, "GET", "/v1/sandboxes/{id}", {"id": sid}).json()
        assert got["state"] == "stopped" and got["reason"] == "timeout"
        page = api(daemon, "GET", "/v1/sandboxes", query={"state": "stopped"}).json()
        assert sid in [s["id"] for s in page["sandboxes"]]
        page = api(daemon, "GET", "/v1/sandboxes").json()  # default: all but stopped and error
        assert sid not in [s["id"] for s in page["sandboxes"]]
        param = [p for p in operation("/v1/sandboxes", "get")["parameters"] if p["name"] == "state"]
        for state, listed in [("running,stopped", True), ("running", False)]:
            jsonschema.validate(state, param[0]["schema"])
            page = api(daemon, "GET", "/v1/sandboxes", query={"state": state}).json()
            assert (sid in [s["id"] for s in page["sandboxes"]]) == listed, state
        assert api(daemon, "DELETE", "/v1/sandboxes/{id}", {"id": sid}).status == 204
    finally:
        for sid in made:
            kill(daemon, sid)


EXEC = "/v1/sandboxes/{id}/exec"
PROC = "/v1/sandboxes/{id}/processes/{pid}"


def test_services_operations(daemon):
    compose = 'services:\n  a:\n    image: base\n    command: ["sh", "-c", "echo up; sleep 1000"]\n'
    r = api(daemon, "POST", "/v1/sandboxes", body={"timeout": 120, "compose": compose})
    assert r.status == 201
    sid = r.json()["id"]
    try:
        def running():
            got = api(daemon, "GET", "/v1/sandboxes/{id}/services", {"id": sid}).json()["services"]
            return got if got[0]["state"] == "running" else None
        got = wait_for(running, what="the service running")
        assert got[0]["name"] == "a" and got[0]["pid"] > 1 and got[0]["image"] == "base"
        log = wait_for(lambda: api(daemon, "GET", "/v1/sandboxes/{id}/services/{name}/logs",
                                   {"id": sid, "name": "a"}).body, what="the log")
        assert log == b"up\n"
        r = api(daemon, "POST", EXEC, {"id": sid}, body={"cmd": "echo in a", "service": "a"})
        assert r.json()["stdout"] == "in a\n"
        r = api(daemon, "GET", "/v1/sandboxes/{id}/files", {"id": sid},
                query={"path": "/.warren/logs/a.log"})
        assert r.body == b"up\n"
    finally:
        kill(daemon, sid)


def test_exec_operations(daemon, sandbox):
    ids = {"id": sandbox.sandbox_id}
    r = api(daemon, "POST", EXEC, ids, body={"cmd": ["sh", "-c", "echo out; echo err >&2; exit 3"]})
    res = r.json()
    assert r.status == 200 and (res["exit_code"], res["stdout"], res["stderr"]) == (3, "out\n", "err\n")
    res = api(daemon, "POST", EXEC, ids, body={
        "cmd": "cat; echo $V; pwd; id -u", "env": {"V": "v"}, "cwd": "/tmp", "user": "user",
        "timeout": 30, "stdin": base64.b64encode(b"\xffin\n").decode(), "stdin_encoding": "base64",
        "encoding": "base64", "max_output": 4, "pty": False, "mode": "wait"}).json()
    assert base64.b64decode(res["stdout"]) == b"\xffin\n" and res["stdout_truncated"] is True
    res = api(daemon, "POST", EXEC, ids, body={"cmd": "sleep 10", "timeout": 1}).json()
    assert res["timed_out"] is True and res["signal"] == 9 and res["exit_code"] is None
    res = api(daemon, "POST", EXEC, ids, body={"cmd": "stty size", "pty": True, "rows": 33,
                                                "cols": 77}).json()
    assert res["stdout"].strip() == "33 77"

    # Stream: NDJSON (each line an ExecEvent), and SSE.
    r = api(daemon, "POST", EXEC, ids, body={"cmd": "echo a; echo b >&2; exit 4", "mode": "stream"})
    assert r.media == "application/x-ndjson"
    evs = r.lines()
    assert evs[0]["type"] == "start" and evs[0]["pid"] >= 1 and evs[0]["os_pid"] >= 1
    validate(evs[-1]["usage"], SPEC["components"]["schemas"]["CommandUsage"], "exit usage")
    assert {k: v for k, v in evs[-1].items() if k != "usage"} == \
        {"type": "exit", "exit_code": 4, "signal": None, "timed_out": False}
    assert {"type": "stdout", "data": "a\n"} in evs and {"type": "stderr", "data": "b\n"} in evs
    r = api(daemon, "POST", EXEC, ids, body={"cmd": "echo sse", "mode": "stream"},
            headers={"Accept": "text/event-stream"})
    assert r.media == "text/event-stream"
    events = re.findall(r"event: (\w+)\ndata: (.*)\n\n", r.body.decode())
    assert [e for e, _ in events][0] == "start" and events[-1][0] == "exit"
    for name, data in events:
        ev = json.loads(data)
        assert ev["type"] == name
        validate(ev, SPEC["components"]["schemas"]["ExecEvent"], "SSE event")

    # Background, then every process endpoint.
    r = api(daemon, "POST", EXEC, ids, body={
        "cmd": "echo ready; while read l; do echo got:$l; done; echo bye", "mode": "background"})
    assert r.status == 201 and r.json()["running"] is True
    p = dict(ids, pid=r.json()["pid"])
    procs = api(daemon, "GET", "/v1/sandboxes/{id}/processes", ids).json()["processes"]
    assert p["pid"] in [x["pid"] for x in procs]
    assert api(daemon, "GET", PROC, p).json()["cmd"] == ["/bin/sh", "-c",
        "echo ready; while read l; do echo got:$l; done; echo bye"]
    assert api(daemon, "POST", PROC + "/stdin", p, body=b"one\n",
               headers={"Content-Type": "application/octet-stream"}).status == 204
    assert api(daemon, "POST", PROC + "/stdin/close", p).status == 204
    got = api(daemon, "GET", PROC + "/wait", p, query={"timeout": 30}).json()
    assert got["running"] is False and got["exit_code"] == 0 and got["signal"] is None
    evs = api(daemon, "GET", PROC + "/attach", p).lines()
    assert "".join(e.get("data", "") for e in evs) == "ready\ngot:one\nbye\n"
    assert evs[-1]["type"] == "exit"
    evs = api(daemon, "GET", PROC + "/attach", p, query={"encoding": "base64"}).lines()
    assert b"".join(base64.b64decode(e["data"]) for e in evs if e["type"] == "stdout") == \
        b"ready\ngot:one\nbye\n"
    assert api(daemon, "DELETE", PROC, p).status == 204

    # Signals by number and by name; resize of a terminal.
    q = dict(ids, pid=api(daemon, "POST", EXEC, ids, body={
        "cmd": "trap 'echo usr1' USR1; stty size; while :; do sleep 0.05; done",
        "mode": "background", "pty": True, "rows": 10, "cols": 20}).json()["pid"])
    assert b"10 20" in _attach_prefix(daemon, q, want=b"10 20")
    assert api(daemon, "POST", PROC + "/resize", q, body={"rows": 40, "cols": 100}).status == 204
    assert api(daemon, "POST", PROC + "/signal", q, body={"signal": 10}).status == 204
    assert api(daemon, "POST", PROC + "/signal", q, body={"signal": "SIGKILL"}).status == 204
    got = api(daemon, "GET", PROC + "/wait", q).json()
    assert got["signal"] == 9 and got["exit_code"] is None and got["pty"] is True
    assert api(daemon, "DELETE", PROC, q).status == 204


def _attach_prefix(daemon, ids, want=b"\n", timeout=10):
    """The first bytes of a running process's attach stream (its kept output)."""
    c = connect(daemon, timeout=timeout)
    try:
        c.request("GET", fill(PROC + "/attach", ids))
        r = c.getresponse()
        assert r.status == 200
        data = b""
        while want not in data:
            line = r.readline()
            if not line:
                break
            ev = json.loads(line)
            validate(ev, SPEC["components"]["schemas"]["ExecEvent"], "attach line")
            data += ev.get("data", "").encode()
        return data
    finally:
        c.close()


FILES = "/v1/sandboxes/{id}/files"


def test_files_operations(daemon, sandbox):
    ids = {"id": sandbox.sandbox_id}
    r = api(daemon, "PUT", FILES, ids, query={"path": "/tmp/d/f.txt", "mode": "0600"}, body=b"0123456789")
    info = r.json()
    assert r.status == 201 and info["size"] == 10 and info["mode"] == "0600" and info["type"] == "file"
    assert info["path"] == "/tmp/d/f.txt" and info["name"] == "f.txt"
    r = api(daemon, "GET", FILES, ids, query={"path": "/tmp/d/f.txt"})
    assert r.body == b"0123456789" and r.media == "application/octet-stream"
    r = api(daemon, "GET", FILES, ids, query={"path": "/tmp/d/f.txt"}, headers={"Range": "bytes=2-4"})
    assert r.status == 206 and r.body == b"234"
    st = api(daemon, "GET", FILES + "/stat", ids, query={"path": "/tmp/d"}).json()
    assert st["type"] == "dir" and st["link"] is None
    sandbox.commands.run("ln -s /tmp/d/f.txt /tmp/d/l")
    st = api(daemon, "GET", FILES + "/stat", ids, query={"path": "/tmp/d/l"}).json()
    assert st["type"] == "symlink" and st["link"] == "/tmp/d/f.txt"
    ents = api(daemon, "GET", FILES + "/list", ids, query={"path": "/tmp", "depth": 2}).json()["entries"]
    # name: the base name; path: the absolute path (the document said "relative to path").
    assert {("d", "/tmp/d"), ("f.txt", "/tmp/d/f.txt"), ("l", "/tmp/d/l")} <= \
        {(e["name"], e["path"]) for e in ents}
    r = api(daemon, "POST", FILES + "/mkdir", ids, body={"path": "/tmp/m/n", "parents": True,
                                                           "mode": "0700", "user": "root"})
    assert r.status == 201
    assert api(daemon, "POST", FILES + "/mkdir", ids, body={"path": "/tmp/m/n"}).status == 201
    r = api(daemon, "POST", FILES + "/move", ids, body={"from": "/tmp/m", "to": "/tmp/moved"})
    assert r.status == 204
    r = api(daemon, "DELETE", FILES, ids, query={"path": "/tmp/moved", "recursive": "true"})
    assert r.status == 204
    assert send(daemon, "GET", fill(FILES + "/stat", ids), query={"path": "/tmp/moved"}).status == 404

    # Watch: a stream that ends only when the client leaves; each line validated.
    schema = schema_of(FILES + "/watch", "get", 200, "application/x-ndjson")
    c = connect(daemon, timeout=10)
    try:
        c.request("GET", fill(FILES + "/watch", ids) + "?" + urlencode({"path": "/tmp/d"}))
        r = c.getresponse()
        assert r.status == 200 and r.getheader("X-Request-Id")
        assert r.getheader("Content-Type").startswith("application/x-ndjson")
        sandbox.commands.run("echo 1 > /tmp/d/new; chmod 600 /tmp/d/new; rm /tmp/d/new")
        seen = []
        while ("remove", "new") not in seen:
            ev = json.loads(r.readline())
            validate(ev, schema, "watch line")
            seen.append((ev["type"], ev["name"]))
        assert ("create", "new") in seen
    finally:
        c.close()


def test_team_limits_operations(daemon):
    L = "/v1/teams/{team}/limits"
    j = api(daemon, "GET", L, {"team": "openapi-limits"}).json()
    assert j["overrides"] == {} and j["team"] == "openapi-limits"
    j = api(daemon, "PUT", L, {"team": "openapi-limits"},
            body={"creates": {"rate": 2, "burst": 4}, "max_memory_mb": 4096}).json()
    assert j["creates"] == {"rate": 2, "burst": 4} and j["max_memory_mb"] == 4096
    assert api(daemon, "DELETE", L, {"team": "openapi-limits"}).status == 204
    assert api(daemon, "GET", L, {"team": "openapi-limits"}).json()["overrides"] == {}


def test_keys_operations(daemon):
    keys = api(daemon, "GET", "/v1/keys").json()["keys"]
    r = api(daemon, "POST", "/v1/keys", body={"team": "openapi", "name": "k1"})
    k = r.json()
    assert r.status == 201 and k["key"].startswith("wr_") and k["admin"] is False
    try:
        r = api(daemon, "GET", "/v1/keys", tcp=True, key=k["key"])
        assert [x["id"] for x in r.json()["keys"]] == [k["id"]]
        assert "key" not in r.json()["keys"][0]
        r = api(daemon, "GET", "/v1/version", tcp=True, key=k["key"])
        assert r.status == 200
        # X-API-Key is the other documented way.
        r = send(daemon, "GET", "/v1/sandboxes", tcp=True, headers={"X-API-Key": k["key"]})
        assert check(r, "/v1/sandboxes", "get").status == 200
        assert len(api(daemon, "GET", "/v1/keys").json()["keys"]) == len(keys) + 1
        # A team's sandbox: an admin sees it only with `all`.
        r = api(daemon, "POST", "/v1/sandboxes", body={"timeout": 60}, tcp=True, key=k["key"])
        sid = r.json()["id"]
        try:
            mine = api(daemon, "GET", "/v1/sandboxes").json()["sandboxes"]
            every = api(daemon, "GET", "/v1/sandboxes", query={"all": "true"}).json()["sandboxes"]
            assert sid not in [s["id"] for s in mine] and sid in [s["id"] for s in every]
            theirs = api(daemon, "GET", "/v1/sandboxes", query={"all": "true"}, tcp=True,
                         key=k["key"]).json()["sandboxes"]
            assert [s["id"] for s in theirs] == [sid]
        finally:
            kill(daemon, sid)
    finally:
        assert api(daemon, "DELETE", "/v1/keys/{key_id}", {"key_id": k["id"]}).status == 204
    assert send(daemon, "GET", "/v1/version", tcp=True, key=k["key"]).status == 401


def test_image_operations(daemon):
    made, snaps = [], []
    try:
        sid = new_sandbox(daemon)
        made.append(sid)
        templates = api(daemon, "GET", "/v1/templates").json()["templates"]
        base = [t for t in templates if t["name"] == "base"]
        assert base and base[0]["kind"] == "dir", templates
        got = api(daemon, "GET", "/v1/templates/{template}", {"template": "base"}).json()
        assert got["name"] == "base" and got["in_use"] >= 1

        background(daemon, sid, "echo snapped > /root/openapi-file")
        wait_for(lambda: send(daemon, "GET", "/v1/sandboxes/%s/files" % sid,
                              query={"path": "/root/openapi-file"}).status == 200,
                 what="the file")
        r = api(daemon, "POST", "/v1/sandboxes/{id}/snapshots", {"id": sid},
                body={"name": "openapi-snap"})
        snap = r.json()
        snaps.append(snap["id"])
        assert r.status == 201 and snap["sandbox_id"] == sid and snap["name"] == "openapi-snap"
        assert {"freeze_ms", "capture_ms", "capture"} <= set(snap)
        r = api(daemon, "POST", "/v1/sandboxes/{id}/snapshots", {"id": sid})  # no body: no name
        snaps.append(r.json()["id"])
        assert r.status == 201 and r.json()["name"] is None
        listed = api(daemon, "GET", "/v1/snapshots").json()["snapshots"]
        assert {snap["id"], r.json()["id"]} <= {s["id"] for s in listed}
        mine = api(daemon, "GET", "/v1/snapshots", query={"sandbox_id": sid}).json()["snapshots"]
        assert sorted(s["id"] for s in mine) == sorted(snaps)
        for ref in (snap["id"], "openapi-snap"):
            assert api(daemon, "GET", "/v1/snapshots/{snapshot}", {"snapshot": ref}).json()[
                "id"] == snap["id"]

        # A sandbox from the snapshot, by name.
        r = api(daemon, "POST", "/v1/sandboxes", body={"template": "openapi-snap", "timeout": 60})
        made.append(r.json()["id"])
        r = send(daemon, "GET", "/v1/sandboxes/%s/files" % made[-1],
                 query={"path": "/root/openapi-file"})
        assert r.status == 200 and r.body == b"snapped\n", r

        r = api(daemon, "POST", "/v1/sandboxes/{id}/fork", {"id": sid},
                body={"count": 2, "timeout": 60, "metadata": {"fork": "yes"}})
        res = r.json()
        made += [s["id"] for s in res["sandboxes"]]
        assert r.status == 201 and len(res["sandboxes"]) == 2 and res["errors"] == []
        assert all(s["metadata"] == {"fork": "yes"} for s in res["sandboxes"])

        # Pause to disk, then resume: processes_kept says what came back.
        r = api(daemon, "POST", "/v1/sandboxes/{id}/pause", {"id": sid}, body={"mode": "disk"})
        assert r.json()["paused_mode"] == "disk" and r.json()["state"] == "paused"
        r = api(daemon, "POST", "/v1/sandboxes/{id}/resume", {"id": sid}, body={})
        assert r.json()["state"] == "running" and r.json()["processes_kept"] is False
        api(daemon, "POST", "/v1/sandboxes/{id}/pause", {"id": sid}, body={"mode": "memory"})
        r = api(daemon, "POST", "/v1/sandboxes/{id}/resume", {"id": sid}, body={})
        assert r.json()["processes_kept"] is True

        for ref in snaps:
            assert api(daemon, "DELETE", "/v1/snapshots/{snapshot}", {"snapshot": ref}).status == 204
        snaps = []
    finally:
        for ref in snaps:
            send(daemon, "DELETE", "/v1/snapshots/" + ref)
        for sid in made:
            kill(daemon, sid)


BUILD = "/v1/templates/build"


def build_body(dockerfile):
    return dict(body=dockerfile.encode(), headers={"Content-Type": "text/plain"})


def tar_of(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_build_operation(daemon):
    try:
        # The Dockerfile as the body: every event validates against BuildEvent.
        r = api(daemon, "POST", BUILD, query={"name": "openapi-built"},
                **build_body("FROM base\nRUN echo out; echo err >&2\nENV A=1\n"), timeout=300)
        assert r.status == 200 and r.media == "application/x-ndjson"
        evs = r.lines()
        assert [e["type"] for e in evs if e["type"] == "step"] == ["step"] * 3
        assert {"type": "stdout", "data": "out\n"} in evs and {"type": "stderr", "data": "err\n"} in evs
        assert evs[-1]["type"] == "done" and evs[-1]["template"]["name"] == "openapi-built"
        # A context (tar, then gzip) with the Dockerfile elsewhere in it; replace.
        ctx = tar_of({"df/Dockerfile": b"FROM base\nCOPY f /f\n", "f": b"x"})
        r = api(daemon, "POST", BUILD, query={"name": "openapi-built", "replace": "true",
                                              "dockerfile": "df/Dockerfile"},
                body=ctx, headers={"Content-Type": "application/x-tar"}, timeout=300)
        assert r.lines()[-1]["type"] == "done", r
        r = api(daemon, "POST", BUILD, query={"name": "openapi-built", "replace": "true",
                                              "dockerfile": "df/Dockerfile"},
                body=gzip.compress(ctx), headers={"Content-Type": "application/gzip"}, timeout=300)
        assert r.lines()[-1]["type"] == "done", r
        # A step that fails: the error event, with the step, line and exit code.
        r = api(daemon, "POST", BUILD, query={"name": "openapi-failed"},
                **build_body("FROM base\n\nRUN exit 4\n"), timeout=300)
        err = r.lines()[-1]
        assert err["type"] == "error" and (err["step"], err["line"], err["exit_code"]) == (2, 3, 4)
        # COPY without a context: an error event without an exit code.
        r = api(daemon, "POST", BUILD, query={"name": "openapi-failed"},
                **build_body("FROM base\nCOPY a /a\n"), timeout=300)
        err = r.lines()[-1]
        assert err["type"] == "error" and err["line"] == 2 and "exit_code" not in err
    finally:
        send(daemon, "DELETE", "/v1/templates/openapi-built")


def build_twice(daemon):
    """A build under a name that is taken: 409."""
    r = send(daemon, "POST", BUILD, query={"name": "openapi-dup-tpl"}, **build_body("FROM base\n"))
    assert r.status == 200 and r.lines()[-1]["type"] == "done", r
    try:
        return send(daemon, "POST", BUILD, query={"name": "openapi-dup-tpl"},
                    **build_body("FROM base\n"))
    finally:
        assert send(daemon, "DELETE", "/v1/templates/openapi-dup-tpl").status == 204


def test_volumes_operations(daemon):
    r = api(daemon, "POST", "/v1/volumes", body={"name": "openapi-vol"})
    assert r.status == 201 and r.json()["name"] == "openapi-vol"
    try:
        names = [v["name"] for v in api(daemon, "GET", "/v1/volumes").json()["volumes"]]
        assert "openapi-vol" in names
        r = api(daemon, "GET", "/v1/volumes/{name}", {"name": "openapi-vol"})
        assert r.json()["disk_bytes"] >= 0
        r = api(daemon, "POST", "/v1/sandboxes", body={
            "timeout": 60, "volumes": [{"name": "openapi-vol", "path": "/data", "readonly": True}]})
        assert r.json()["volumes"] == [{"name": "openapi-vol", "path": "/data", "readonly": True}]
        kill(daemon, r.json()["id"])
    finally:
        assert api(daemon, "DELETE", "/v1/volumes/{name}", {"name": "openapi-vol"}).status == 204


def volume_in_use(daemon):
    """Deleting a volume that a running sandbox mounts (409)."""
    send(daemon, "POST", "/v1/volumes", body={"name": "busy"})
    sid = send(daemon, "POST", "/v1/sandboxes",
               body={"timeout": 60, "volumes": [{"name": "busy", "path": "/b"}]}).json()["id"]
    try:
        return send(daemon, "DELETE", "/v1/volumes/busy")
    finally:
        kill(daemon, sid)
        send(daemon, "DELETE", "/v1/volumes/busy")


def volume_twice(daemon):
    send(daemon, "POST", "/v1/volumes", body={"name": "twice"})
    try:
        return send(daemon, "POST", "/v1/volumes", body={"name": "twice"})
    finally:
        send(daemon, "DELETE", "/v1/volumes/twice")


# ---- (c) every documented 4xx: the Error schema and an X-Request-Id ----------------------------

def pause_twice(daemon):
    """Pausing a paused sandbox: the second answer (409)."""
    sid = new_sandbox(daemon)
    try:
        assert send(daemon, "POST", "/v1/sandboxes/%s/pause" % sid, body={}).status == 200
        return send(daemon, "POST", "/v1/sandboxes/%s/pause" % sid, body={})
    finally:
        kill(daemon, sid)


def _triggers(daemon, ctx):
    """(template, method, status) -> request kwargs that make the server answer that status."""
    sid, gone = ctx["sid"], "no-such-sandbox"
    run, done = ctx["running"], ctx["done"]
    S, P = "/v1/sandboxes/{id}", "/v1/sandboxes/{id}/processes/{pid}"
    t = {}

    def add(template, method, status, ids=None, **kw):
        t[(template, method, status)] = dict(ids=ids or {}, **kw)

    add("/v1/version", "get", 401, tcp=True)
    add("/v1/devices", "get", 401, tcp=True)
    add("/console/{path}", "get", 400, {"path": ".."})
    add("/console/{path}", "get", 404, {"path": "assets/no-such-AbCdEf12.js"})
    add("/v1/sandboxes", "post", 400, body={"cpus": "many"})
    add("/v1/sandboxes", "post", 401, tcp=True, body={})
    add("/v1/sandboxes", "post", 404, body={"template": "no-such"})
    add("/v1/sandboxes", "get", 400, query={"limit": 0})
    add("/v1/sandboxes", "get", 401, tcp=True, key="wr_" + "0" * 64)
    add(S, "get", 404, {"id": gone})
    add(S, "delete", 404, {"id": gone})
    add(S + "/pause", "post", 400, {"id": sid}, body={"mode": "sideways"})
    add(S + "/pause", "post", 404, {"id": gone}, body={})
    add(S + "/pause", "post", 409, call=lambda: pause_twice(daemon))
    add(S + "/resume", "post", 400, {"id": sid}, body={"timeout": "soon"})
    add(S + "/resume", "post", 404, {"id": gone}, body={})
    add(S + "/resume", "post", 409, {"id": sid}, body={})  # it is running
    add(S + "/timeout", "post", 400, {"id": sid}, body={"timeout": 0})
    add(S + "/timeout", "post", 404, {"id": gone}, body={"timeout": 5})
    add(S + "/disk", "get", 404, {"id": gone})
    add(S + "/metrics", "get", 404, {"id": gone})
    # the sandbox of these tests has loopback only (the test daemons' default is internet off)
    add(S + "/network", "get", 404, {"id": gone})
    add(S + "/network", "put", 400, {"id": sid}, body={"deny_out": ["example.test"]})
    add(S + "/network", "put", 404, {"id": gone}, body={})
    add(S + "/network", "put", 409, {"id": sid}, body={"internet": True})
    add(S + "/network/stats", "get", 404, {"id": gone})
    add(S + "/network/stats", "get", 409, {"id": sid})
    add(S + "/network/log", "get", 400, {"id": sid}, query={"limit": 0})
    add(S + "/network/log", "get", 404, {"id": gone})
    add(S + "/disk", "get", 409, call=lambda: send(
        daemon, "GET", "/v1/sandboxes/%s/disk" % stopped_sandbox(daemon)))
    add(S + "/diff", "get", 400, {"id": sid}, query={"path": "relative", "content": "1"})
    add(S + "/diff", "get", 404, {"id": sid}, query={"against": "no-such-snapshot"})
    add(S + "/diff", "get", 409, call=lambda: send(
        daemon, "GET", "/v1/sandboxes/%s/diff" % stopped_sandbox(daemon)))
    # This test daemon's state directory is on the plain disk (ext4 without project quotas).
    add("/v1/sandboxes", "post", 501, body={"disk_mb": 64})
    add(S + "/exec", "post", 400, {"id": sid}, body={"cmd": []})
    add(S + "/exec", "post", 404, {"id": gone}, body={"cmd": "true"})
    add(S + "/exec", "post", 409, call=lambda: exec_while_deleted(daemon))
    add(S + "/processes", "get", 404, {"id": gone})
    add(P, "get", 404, {"id": sid, "pid": 999999})
    add(P, "delete", 404, {"id": sid, "pid": 999999})
    add(P, "delete", 409, {"id": sid, "pid": run})
    add(P + "/attach", "get", 404, {"id": sid, "pid": 999999})
    add(P + "/wait", "get", 404, {"id": gone, "pid": 1})
    add(P + "/wait", "get", 504, {"id": sid, "pid": run}, query={"timeout": 0})
    add(P + "/resize", "post", 409, {"id": sid, "pid": run}, body={"rows": 30, "cols": 90})
    add(P + "/stdin", "post", 404, {"id": sid, "pid": 999999}, body=b"x")
    add(P + "/stdin", "post", 409, {"id": sid, "pid": done}, body=b"x")
    add(P + "/stdin/close", "post", 404, {"id": sid, "pid": 999999})
    add(P + "/signal", "post", 400, {"id": sid, "pid": run}, body={"signal": "SIGNOPE"})
    add(P + "/signal", "post", 404, {"id": sid, "pid": 999999}, body={"signal": 15})
    add(P + "/resize", "post", 400, {"id": sid, "pid": run}, body={"rows": 0, "cols": 80})
    add(P + "/resize", "post", 404, {"id": sid, "pid": 999999}, body={"rows": 24, "cols": 80})
    add(S + "/ports", "get", 404, {"id": gone})
    add(S + "/services", "get", 404, {"id": gone})
    add(S + "/services", "get", 409, call=lambda: send(
        daemon, "GET", "/v1/sandboxes/%s/services" % stopped_sandbox(daemon)))
    add(S + "/services/{name}/logs", "get", 400, {"id": sid, "name": "Not-A-Name"})
    add(S + "/services/{name}/logs", "get", 404, {"id": sid, "name": "nope"})
    # The code interpreter: this suite's sandboxes (busybox) have none, hence 409 no_interpreter.
    C, CX = S + "/code", S + "/code/contexts/{ctx}"
    cx = "00000000-0000-0000-0000-000000000000"
    add(C, "post", 404, {"id": gone}, body={"code": "1"})
    add(C, "post", 409, {"id": sid}, body={"code": "1"})
    add(C + "/contexts", "get", 404, {"id": gone})
    add(C + "/contexts", "get", 409, {"id": sid})
    add(C + "/contexts", "post", 404, {"id": gone}, body={})
    add(C + "/contexts", "post", 409, {"id": sid}, body={})
    add(CX, "delete", 404, {"id": gone, "ctx": cx})
    add(CX, "delete", 409, {"id": sid, "ctx": cx})
    add(CX + "/restart", "post", 404, {"id": gone, "ctx": cx})
    add(CX + "/restart", "post", 409, {"id": sid, "ctx": cx})
    add(S + "/ports", "get", 409, call=lambda: send(
        daemon, "GET", "/v1/sandboxes/%s/ports" % stopped_sandbox(daemon)))
    WS = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
          "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
    add(S + "/ports/{port}/tcp", "get", 400, {"id": sid, "port": 22})  # not an upgrade
    add(S + "/ports/{port}/tcp", "get", 404, {"id": gone, "port": 22}, headers=WS)
    add(S + "/ports/{port}/tcp", "get", 409, call=lambda: send(
        daemon, "GET", "/v1/sandboxes/%s/ports/22/tcp" % stopped_sandbox(daemon), headers=WS))
    add(S + "/ports/{port}/tcp", "get", 502, {"id": sid, "port": 8999}, headers=WS)
    add(S + "/ports/{port}/{path}", "get", 400, call=lambda: send(
        daemon, "GET", "/v1/sandboxes/%s/ports/08080/x" % sid))
    add(S + "/ports/{port}/{path}", "get", 404, {"id": gone, "port": 8000, "path": "x"})
    add(S + "/ports/{port}/{path}", "get", 409, call=lambda: send(
        daemon, "GET", "/v1/sandboxes/%s/ports/8000/x" % stopped_sandbox(daemon)))
    add(S + "/ports/{port}/{path}", "get", 502, {"id": sid, "port": 8999, "path": "x"})
    add(S + "/terminal", "get", 400, {"id": sid}, query={"rows": 0})
    add(S + "/terminal", "get", 404, {"id": gone})
    F = S + "/files"
    add(F, "get", 400, {"id": sid}, query={"path": "relative"})
    add(F, "get", 404, {"id": sid}, query={"path": "/no/such/file"})
    add(F, "get", 403, {"id": sid}, query={"path": "/tmp/p/x", "user": "user"})
    add(F, "get", 416, {"id": sid}, query={"path": "/etc/motd"}, headers={"Range": "bytes=5000-"})
    add(F, "put", 400, {"id": sid}, query={"path": "/tmp/x", "mode": "rwx"}, body=b"x")
    add(F, "put", 403, {"id": sid}, query={"path": "/root/x", "user": "user"}, body=b"x")
    add(F, "put", 404, {"id": sid}, query={"path": "/tmp/no/x", "parents": "false"}, body=b"x")
    add(F, "delete", 403, {"id": sid}, query={"path": "/etc/motd", "user": "user"})
    add(F, "delete", 404, {"id": sid}, query={"path": "/no/such/file"})
    add(F, "delete", 409, {"id": sid}, query={"path": "/etc"})
    add(F + "/stat", "get", 400, {"id": sid}, query={"path": "etc"})
    add(F + "/stat", "get", 403, {"id": sid}, query={"path": "/tmp/p/x", "user": "user"})
    add(F + "/stat", "get", 404, {"id": sid}, query={"path": "/no/such"})
    add(F + "/list", "get", 400, {"id": sid})
    add(F + "/list", "get", 403, {"id": sid}, query={"path": "/tmp/p", "user": "user"})
    add(F + "/list", "get", 404, {"id": sid}, query={"path": "/no/such"})
    add(F + "/mkdir", "post", 400, {"id": sid}, body={"path": "rel"})
    add(F + "/mkdir", "post", 403, {"id": sid}, body={"path": "/tmp/p/y", "user": "user"})
    add(F + "/mkdir", "post", 404, {"id": gone}, body={"path": "/tmp/x"})
    add(F + "/mkdir", "post", 409, {"id": sid}, body={"path": "/etc/motd"})
    add(F + "/move", "post", 400, {"id": sid}, body={"from": "/tmp/a"})
    add(F + "/move", "post", 403, {"id": sid}, body={"from": "/tmp/p/x", "to": "/tmp/p/z",
                                                     "user": "user"})
    add(F + "/move", "post", 404, {"id": sid}, body={"from": "/no/such", "to": "/tmp/b"})
    add(F + "/watch", "get", 400, {"id": sid}, query={"path": "tmp"})
    add(F + "/watch", "get", 403, {"id": sid}, query={"path": "/tmp/p", "user": "user"})
    add(F + "/watch", "get", 404, {"id": sid}, query={"path": "/no/such"})
    add("/v1/templates", "get", 401, tcp=True)
    add("/v1/templates/prune", "post", 401, tcp=True, body={})
    add("/v1/templates/{template}", "get", 404, {"template": "no-such-template"})
    add("/v1/templates/{template}", "delete", 404, {"template": "no-such-template"})
    add("/v1/templates/{template}", "delete", 409, {"template": "base"})  # a directory template
    add(BUILD, "post", 400, query={"name": "bad"}, **build_body("FROM base\nADD x /x\n"))
    add(BUILD, "post", 404, query={"name": "bad"}, **build_body("FROM no-such-template\n"))
    add(BUILD, "post", 409, call=lambda: build_twice(daemon))
    # Only an admin makes a shared template.
    add(BUILD, "post", 403, tcp=True, key=ctx["team_key"], query={"name": "x", "shared": "true"},
        **build_body("FROM base\n"))
    add(BUILD, "post", 413, query={"name": "big"}, **build_body("#" * ((1 << 20) + 1)))
    add(S + "/snapshots", "post", 400, {"id": sid}, body={"name": "snap-is-reserved"})
    add(S + "/snapshots", "post", 404, {"id": gone}, body={})
    add(S + "/snapshots", "post", 409, call=lambda: snapshot_twice(daemon, sid))
    add("/v1/snapshots", "get", 401, tcp=True)
    add("/v1/snapshots/{snapshot}", "get", 404, {"snapshot": "snap-nosuch"})
    add("/v1/snapshots/{snapshot}", "delete", 404, {"snapshot": "no-such-name"})
    add(S + "/fork", "post", 400, {"id": sid}, body={"count": 101})
    add(S + "/fork", "post", 404, {"id": gone}, body={})
    add(S + "/fork", "post", 409, call=lambda: fork_stopped(daemon))
    add("/v1/keys", "post", 400, body={"team": "bad team!"})
    add("/v1/keys", "post", 403, tcp=True, key=ctx["team_key"], body={"team": "x"})
    add("/v1/audit", "get", 400, query={"limit": 0})
    add("/v1/audit", "get", 401, tcp=True, key="wr_" + "0" * 64)
    add("/v1/audit", "get", 403, tcp=True, key=ctx["team_key"], query={"team": "another"})
    for path in ("/v1/events", "/v1/events/stream"):
        add(path, "get", 400, query={"after": "x"})
        add(path, "get", 401, tcp=True, key="wr_" + "0" * 64)
        add(path, "get", 403, tcp=True, key=ctx["team_key"], query={"team": "another"})
    W = "/v1/webhooks/{webhook}"
    add("/v1/webhooks", "get", 401, tcp=True)
    add("/v1/webhooks", "post", 400, body={"url": "http://169.254.169.254/"})
    add("/v1/webhooks", "post", 401, tcp=True, body={"url": "https://hooks.example.com/"})
    add("/v1/webhooks", "post", 403, tcp=True, key=ctx["team_key"],
        body={"url": "https://hooks.example.com/", "team": "another", "enabled": False})
    add("/v1/webhooks", "post", 409, call=lambda: webhooks_full(daemon))
    for m in ("get", "patch", "delete"):
        add(W, m, 404, {"webhook": "no-such-webhook"}, body={} if m == "patch" else None)
    add(W, "patch", 400, call=lambda: send(daemon, "PATCH", "/v1/webhooks/" + ctx["webhook"],
                                           body={"url": "ftp://x.example.com/"}))
    add(W + "/deliveries", "get", 404, {"webhook": "no-such-webhook"})
    add(W + "/deliveries", "get", 400, {"webhook": ctx["webhook"]}, query={"state": "lost"})
    add(W + "/deliveries/{delivery}/redeliver", "post", 404,
        {"webhook": ctx["webhook"], "delivery": "1"})
    add("/v1/usage", "get", 400, query={"group_by": "week"})
    add("/v1/usage", "get", 401, tcp=True, key="wr_" + "0" * 64)
    add("/v1/usage", "get", 403, tcp=True, key=ctx["team_key"], query={"team": "another"})
    add("/v1/keys/{key_id}", "delete", 404, {"key_id": "no-such-key"})
    L = "/v1/teams/{team}/limits"
    add(L, "get", 403, {"team": "other"}, tcp=True, key=ctx["team_key"])
    add(L, "put", 400, {"team": "openapi-errors"}, body={"requests": {"rate": 1}})
    add(L, "put", 403, {"team": "openapi-errors"}, tcp=True, key=ctx["team_key"], body={})
    add(L, "delete", 403, {"team": "openapi-errors"}, tcp=True, key=ctx["team_key"])
    B = "/v1/teams/{team}/budget"
    add(B, "get", 403, {"team": "other"}, tcp=True, key=ctx["team_key"])
    add(B, "put", 400, {"team": "openapi-errors"}, body={"hard": -1})
    add(B, "put", 403, {"team": "openapi-errors"}, tcp=True, key=ctx["team_key"], body={"hard": 1})
    add(B, "delete", 403, {"team": "openapi-errors"}, tcp=True, key=ctx["team_key"])
    add(S + "/budget", "get", 404, {"id": gone})
    add(S + "/budget", "put", 400, {"id": sid}, body={"unit": "yen", "hard": 1})
    add(S + "/budget", "put", 404, {"id": gone}, body={"hard": 1})
    add(S + "/budget", "delete", 404, {"id": gone})
    add("/v1/volumes", "post", 400, body={"name": "../x"})
    add("/v1/volumes", "post", 409, call=lambda: volume_twice(daemon))
    add("/v1/volumes/{name}", "get", 404, {"name": "no-such-volume"})
    add("/v1/volumes/{name}", "delete", 404, {"name": "no-such-volume"})
    add("/v1/volumes/{name}", "delete", 409, call=lambda: volume_in_use(daemon))
    imp, pull = "/v1/templates/import", "/v1/templates/pull"
    add(imp, "post", 400, body=b"x")  # no name
    add(imp, "post", 409, query={"name": "base"}, body=b"x")  # a directory template's name
    add(imp, "post", 422, query={"name": "openapi-garbage"}, body=b"not an archive" * 64)
    add(pull, "post", 400, body={"name": "x"})
    add(pull, "post", 409, body={"name": "base", "image": "127.0.0.1:1/a/b:1", "insecure": True})
    add(imp, "post", 403, tcp=True, key=ctx["team_key"], query={"name": "x", "shared": "true"},
        body=b"x")
    add(pull, "post", 403, tcp=True, key=ctx["team_key"],
        body={"name": "x", "image": "127.0.0.1:1/a/b:1", "shared": True})
    # The desktop and browser (docs/desktop.md; the tools themselves: test_desktop.py).
    stopped = []

    def one_stopped():
        if not stopped:
            stopped.append(stopped_sandbox(daemon))
        return stopped[0]

    for path, method, bad in [("/desktop", "get", None), ("/desktop/start", "post", {"width": 0}),
                              ("/desktop/screenshot", "get", None), ("/desktop/mouse", "get", None),
                              ("/desktop/mouse", "post", {"action": "fly"}),
                              ("/desktop/keyboard", "post", {}), ("/desktop/windows", "get", None),
                              ("/browser/start", "post", {"x": 1}), ("/cdp", "get", None),
                              ("/cdp/json/version", "get", None)]:
        body = {} if method == "post" else None
        add(S + path, method, 404, {"id": gone}, body=body)
        add(S + path, method, 409, call=lambda path=path, method=method, body=body: send(
            daemon, method.upper(), "/v1/sandboxes/%s%s" % (one_stopped(), path), body=body))
        if bad is not None:
            add(S + path, method, 400, {"id": sid}, body=bad)
    add(S + "/desktop/screenshot", "get", 400, {"id": sid}, query={"cursor": "maybe"})
    add(S + "/cdp", "get", 400, {"id": sid})  # not an upgrade
    return t


def snapshot_twice(daemon, sid):
    """A second snapshot under a name that is taken: 409."""
    r = send(daemon, "POST", "/v1/sandboxes/%s/snapshots" % sid, body={"name": "openapi-dup"})
    assert r.status == 201, r
    try:
        return send(daemon, "POST", "/v1/sandboxes/%s/snapshots" % sid, body={"name": "openapi-dup"})
    finally:
        assert send(daemon, "DELETE", "/v1/snapshots/openapi-dup").status == 204


def fork_stopped(daemon):
    """Forking a stopped sandbox: 409."""
    sid = stopped_sandbox(daemon)
    try:
        return send(daemon, "POST", "/v1/sandboxes/%s/fork" % sid, body={"count": 1})
    finally:
        kill(daemon, sid)


def exec_while_deleted(daemon, attempts=5):
    """exec on a sandbox that is being deleted: 409 (the sandbox is not running). The delete is
    sent first on a connection of its own; if it wins the race entirely (404), try again."""
    for _ in range(attempts):
        sid = new_sandbox(daemon)
        background(daemon, sid, "sleep 600")
        s = socket.socket(socket.AF_UNIX)
        s.connect(daemon.sock)
        try:
            s.sendall(b"DELETE /v1/sandboxes/%s HTTP/1.1\r\nHost: x\r\n\r\n" % sid.encode())
            r = send(daemon, "POST", "/v1/sandboxes/%s/exec" % sid, body={"cmd": "true"})
            s.settimeout(30)
            assert s.recv(100).startswith(b"HTTP/1.1 204")
        finally:
            s.close()
            kill(daemon, sid)
        if r.status != 404:
            return r
    return r


COVERED_ELSEWHERE = {
    # A daemon without the console's directory: test_console.py.
    ("/console/", "get", 404),
    # What the code interpreter's server answers (a code-interpreter-v1 sandbox): test_code.py.
    ("/v1/sandboxes/{id}/code", "post", 400),
    ("/v1/sandboxes/{id}/code", "post", 502),
    ("/v1/sandboxes/{id}/code/contexts", "post", 400),
    ("/v1/sandboxes/{id}/code/contexts", "post", 500),
    # The connection cap of a sandbox's ports (--port-conn-limit): test_ports.py.
    ("/v1/sandboxes/{id}/ports/{port}/tcp", "get", 429),
    ("/v1/sandboxes/{id}/ports/{port}/{path}", "get", 429),
    ("/v1/sandboxes", "post", 503),  # test_capacity_503_with_retry_after
    # The team's buckets and quotas (429 rate, quota): test_ratelimits.py.
    ("/v1/sandboxes", "post", 429),
    # A resume past the sandbox's own budget (429 budget): test_budgets.py.
    ("/v1/sandboxes/{id}/resume", "post", 429),
    ("/v1/teams/{team}/budget", "put", 501),  # a daemon with --metering off
    ("/v1/templates/pull", "post", 502),  # test_template_import_and_pull (its code is `upstream`)
    # A redelivery of one still in flight: test_webhooks.py (a receiver that answers slowly).
    ("/v1/webhooks/{webhook}/deliveries/{delivery}/redeliver", "post", 409),
    # A registry that lacks the image or serves a tampered blob: test_oci.py starts one.
    ("/v1/templates/pull", "post", 404),
    ("/v1/templates/pull", "post", 422),
    # A full state filesystem: test_disk_space.py fills one.
    ("/v1/sandboxes", "post", 507),
    ("/v1/sandboxes/{id}/files", "put", 507),
    ("/v1/sandboxes/{id}/fork", "post", 507),
    ("/v1/sandboxes/{id}/resume", "post", 507),
    ("/v1/sandboxes/{id}/snapshots", "post", 507),
    ("/v1/templates/build", "post", 507),
    ("/v1/templates/import", "post", 507),
    ("/v1/templates/pull", "post", 507),
    # A template's start command that fails: test_start.py makes such templates.
    ("/v1/sandboxes", "post", 502),
    ("/v1/sandboxes/{id}/resume", "post", 502),
    # A tree deeper than the walks go (1024 directories): test_walks.py makes one.
    ("/v1/sandboxes/{id}/disk", "get", 400),
    ("/v1/volumes/{name}", "get", 400),
}


def test_every_documented_error_status(daemon):
    sid = new_sandbox(daemon)
    team = send(daemon, "POST", "/v1/keys", body={"team": "openapi-errors"}).json()
    try:
        running = background(daemon, sid, "sleep 600")
        done = background(daemon, sid, "mkdir -m 700 /tmp/p; touch /tmp/p/x")
        assert wait_proc(daemon, sid, done)["exit_code"] == 0
        hook = send(daemon, "POST", "/v1/webhooks", body={
            "url": "https://hooks.example.com/errors", "enabled": False}).json()
        ctx = dict(sid=sid, running=running, done=done, team_key=team["key"],
                   webhook=hook["id"])
        triggers = _triggers(daemon, ctx)
        wanted = {(p, m, int(s)) for p, m in OPERATIONS if p not in JSONRPC_PATHS
                  for s in operation(p, m)["responses"] if s[0] in "45"}
        missing = wanted - set(triggers) - COVERED_ELSEWHERE
        assert not missing, "documented statuses without a test: %s" % sorted(missing)
        failures = []
        for (template, method, status), kw in sorted(triggers.items()):
            ids, call = kw.pop("ids"), kw.pop("call", None)
            try:
                r = call() if call else send(daemon, method.upper(), fill(template, ids), **kw)
                check_error(r, template, method, status)
                assert documented(template, method, status), "undocumented"
            except AssertionError as e:
                failures.append("%s %s %d: %s" % (method.upper(), template, status, e))
        assert not failures, "\n".join(failures)
    finally:
        kill(daemon, sid)
        send(daemon, "DELETE", "/v1/keys/" + team["id"])


# ---- (d) documented statuses of not-happy paths ----------------------------------------------

def test_unknown_ids_are_404(daemon, sandbox):
    sid = sandbox.sandbox_id
    for method, path in [("GET", "/v1/sandboxes/nope"), ("DELETE", "/v1/sandboxes/nope"),
                         ("POST", "/v1/sandboxes/nope/exec"),
                         ("GET", "/v1/sandboxes/%s/processes/12345" % sid),
                         ("GET", "/v1/sandboxes/%s/processes/0" % sid),
                         ("GET", "/v1/sandboxes/%s/processes/abc" % sid),
                         ("POST", "/v1/sandboxes/%s/processes/12345/signal" % sid)]:
        r = send(daemon, method, path, body={"cmd": "true", "signal": 15} if method == "POST" else None)
        assert r.status == 404 and r.json()["code"] == "not_found", (method, path, r)
        assert r.headers["x-request-id"]


def test_bad_bodies_are_400(daemon, sandbox):
    ids = {"id": sandbox.sandbox_id}
    for template, body in [("/v1/sandboxes", b"{not json"), ("/v1/sandboxes", b"[]"),
                           ("/v1/sandboxes", {"bogus": 1}), ("/v1/sandboxes", {"memory_mb": 1}),
                           ("/v1/sandboxes", {"timeout": 0}), ("/v1/sandboxes", {"env": {"A": 1}}),
                           (EXEC, {"cmd": "true", "mode": "sideways"}), (EXEC, {"cmd": 5}),
                           (EXEC, {"cmd": "true", "cwd": "rel"}), (EXEC, {}),
                           (EXEC, {"cmd": "true", "stdin": "%%%", "stdin_encoding": "base64"}),
                           ("/v1/sandboxes/{id}/timeout", {})]:
        r = send(daemon, "POST", fill(template, ids), body=body)
        check_error(r, template, "post", 400)


def test_tcp_without_a_key_is_401_everywhere(daemon, sandbox):
    ids = {"id": sandbox.sandbox_id, "pid": 1, "key_id": "k", "name": "v", "template": "base",
           "snapshot": "s", "port": 8999, "path": "x", "ctx": "c", "team": "t", "webhook": "w",
           "delivery": "1"}
    for template, method in OPERATIONS:
        if template in JSONRPC_PATHS:
            continue  # test_mcp_operations
        r = send(daemon, method.upper(), fill(template, ids), tcp=True,
                 body=b"{}" if method in ("post", "put") else None)
        if not secured(template, method):
            assert r.status == 200, (template, method, r)
            continue
        check_error(r, template, method, 401)
        r = send(daemon, method.upper(), fill(template, ids), tcp=True, key="wr_bogus",
                 body=b"{}" if method in ("post", "put") else None)
        check_error(r, template, method, 401)


def test_capacity_503_with_retry_after():
    d = Daemon("--max-sandboxes", "1").start()
    try:
        sid = new_sandbox(d)
        r = send(d, "POST", "/v1/sandboxes", body={"timeout": 60})
        check_error(r, "/v1/sandboxes", "post", 503)
        assert int(r.headers["retry-after"]) >= 1
        kill(d, sid)
        sid = new_sandbox(d)
        kill(d, sid)
    finally:
        delete_all(d)
        d.cleanup()


def test_release_a_running_process_is_409_and_wait_timeout_is_504(daemon, sandbox):
    ids = {"id": sandbox.sandbox_id, "pid": background(daemon, sandbox.sandbox_id, "sleep 600")}
    check_error(send(daemon, "DELETE", fill(PROC, ids)), PROC, "delete", 409)
    t = time.monotonic()
    check_error(send(daemon, "GET", fill(PROC + "/wait", ids), query={"timeout": 1}),
                PROC + "/wait", "get", 504)
    assert 0.8 < time.monotonic() - t < 10
    api(daemon, "POST", PROC + "/signal", ids, body={"signal": "KILL"})
    assert api(daemon, "GET", PROC + "/wait", ids).json()["signal"] == 9


# ---- where the server is wrong (strict xfail: each turns into a failure once it is fixed) --------

def test_processes_collection_allows_only_get(daemon, sandbox):
    for method in ("POST", "PUT", "DELETE"):
        r = send(daemon, method, "/v1/sandboxes/%s/processes" % sandbox.sandbox_id,
                 body=b"{}" if method != "DELETE" else None)
        assert r.status == 405 and r.json()["code"] == "method_not_allowed", (method, r)


def test_resize_of_a_process_without_a_terminal_is_a_client_error(daemon, sandbox):
    ids = {"id": sandbox.sandbox_id, "pid": background(daemon, sandbox.sandbox_id, "sleep 600")}
    r = send(daemon, "POST", fill(PROC + "/resize", ids), body={"rows": 30, "cols": 90})
    assert 400 <= r.status < 500, r
    check(r, PROC + "/resize", "post")


def test_no_content_has_no_content_length(daemon):
    key = send(daemon, "POST", "/v1/keys", body={"team": "openapi-204"}).json()
    r = send(daemon, "DELETE", "/v1/keys/" + key["id"])
    assert r.status == 204 and "content-length" not in r.headers, r.headers


def test_template_import_and_pull(daemon):
    """Templates from images (tests/integration/test_oci.py covers them in depth)."""
    from test_oci import oci_archive, tar_bytes, ti, free_port

    imp, pull = "/v1/templates/import", "/v1/templates/pull"
    archive = oci_archive([tar_bytes([ti("hello.txt", data=b"hi\n")])])
    r = api(daemon, "POST", imp, query={"name": "openapi-imp"}, body=archive,
            headers={"Content-Type": "application/x-tar"})
    assert r.status == 201 and r.json()["kind"] == "template" and r.json()["layers"] == 1, r
    check_error(send(daemon, "POST", imp, query={"name": "openapi-imp"}, body=archive), imp,
                "POST", 409)
    check_error(send(daemon, "POST", imp, query={"name": "openapi-bad"}, body=archive[:700]), imp,
                "POST", 422)
    check_error(send(daemon, "POST", imp, body=archive), imp, "POST", 400)
    check_error(send(daemon, "POST", pull, body={"name": "x"}), pull, "POST", 400)
    r = send(daemon, "POST", pull, body={"name": "openapi-pull", "insecure": True,
                                         "image": "127.0.0.1:%d/a/b:1" % free_port()})
    assert r.status == 502 and r.json()["code"] == "upstream", r
    check(r, pull, "POST")
    assert send(daemon, "DELETE", "/v1/templates/openapi-imp").status == 204


def test_mcp_operations(daemon):
    """/mcp's answers match the document: a response, a notification's 202, and its JSON-RPC
    refusals (400, 401, 403)."""
    t = "/mcp"
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    r = api(daemon, "POST", t, body={"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                     "params": {"protocolVersion": "2025-11-25"}})
    assert r.status == 200 and r.headers["mcp-session-id"]
    api(daemon, "POST", t, body={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert api(daemon, "POST", t, body={"jsonrpc": "2.0", "method": "notifications/initialized"}).status == 202
    assert api(daemon, "DELETE", t).status == 204
    for kw, status in ((dict(body=b"{nope"), 400), (dict(body=ping, tcp=True), 401),
                       (dict(body=ping, tcp=True, key="wr_bogus"), 401),
                       (dict(method="DELETE", tcp=True), 401),
                       (dict(body=ping, headers={"Origin": "https://evil.example"}), 403),
                       (dict(method="DELETE", headers={"Origin": "null"}), 403)):
        m = kw.pop("method", "POST")
        r = api(daemon, m, t, **kw)
        assert r.status == status, (kw, r)
        assert r.json()["id"] is None and r.json()["error"]["message"], r
