/* SPDX-License-Identifier: Apache-2.0 */
/* The MCP server (docs/mcp.md): `/mcp` over Streamable HTTP, revision 2025-11-25 (2025-06-18
 * and 2025-03-26 are accepted too), stateless JSON answers: POST carries one JSON-RPC message
 * (a request is answered application/json, a notification or a response 202), GET is 405 (no
 * server-to-client stream), DELETE 204 (there is no session to end; the Mcp-Session-Id given at
 * initialize is only echoed). Methods: initialize, ping, tools/list, tools/call.
 *
 * Auth is the native API's: the key as `Authorization: Bearer` or `X-API-Key`, none on the unix
 * socket (the admin team); else 401 with `WWW-Authenticate: Bearer realm="warren"` and a
 * JSON-RPC error body. A request with an `Origin` header must name one of the daemon's
 * --mcp-origin values (403 otherwise, `null` included): browsers send it, other clients do not.
 *
 * Tools run as sub-requests of the native API (wr_http_sub_start into wr_api_handle), carrying
 * the caller's own credential: the same handler, checks and team as the REST call. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "../core/keys.h"
#include "../util/cleanup.h"
#include "../util/json_cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "mcp_int.h"

#define MCP_BODY_MAX  (48u << 20) /* a message: a file written inline, base64 */
#define LATEST        "2025-11-25"
#define RPC_PARSE     (-32700)
#define RPC_INVALID   (-32600)
#define RPC_NO_METHOD (-32601)
#define RPC_PARAMS    (-32602)
#define RPC_INTERNAL  (-32603)
#define RPC_AUTH      (-32001) /* server-defined: no valid credential */
#define RPC_FORBIDDEN (-32002) /* server-defined: the Origin is not allowed */

static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", NULL};

static bool version_ok(const char *v)
{
    for (const char *const *p = versions; *p != NULL; p++)
        if (strcmp(*p, v) == 0)
            return true;
    return false;
}

/* ---- JSON-RPC answers ---------------------------------------------------------------------- */

static void rpc_send(struct wr_http_req *req, int status, json_t *msg)
{
    wr_http_respond_json(req, status, msg);
}

static void rpc_error(struct wr_http_req *req, int status, json_t *id, int code, const char *fmt,
                      ...) __attribute__((format(printf, 5, 6)));
static void rpc_error(struct wr_http_req *req, int status, json_t *id, int code, const char *fmt,
                      ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    rpc_send(req, status,
             json_pack("{s:s,s:O,s:{s:i,s:o}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                       "error", "code", code, "message", api_json_message(msg)));
}

static void rpc_result(struct wr_http_req *req, json_t *id, json_t *result)
{
    rpc_send(req, 200, json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id, "result", result));
}

/* ---- escaping ------------------------------------------------------------------------------ */

void mcp_esc(struct wr_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";

    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~", *p) != NULL) {
            wr_buf_append(b, p, 1);
        } else {
            char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
            wr_buf_append(b, e, 3);
        }
    }
}

/* ---- calls --------------------------------------------------------------------------------- */

/* The calls in progress, for notifications/cancelled (the loop's; one server per process). */
static struct mcp_call *calls;

static void calls_del(struct mcp_call *mc)
{
    if (mc->lprev != NULL)
        mc->lprev->lnext = mc->lnext;
    else if (calls == mc)
        calls = mc->lnext;
    if (mc->lnext != NULL)
        mc->lnext->lprev = mc->lprev;
    mc->lprev = mc->lnext = NULL;
}

static bool same_str(const char *a, const char *b)
{
    return a == NULL ? b == NULL : b != NULL && strcmp(a, b) == 0;
}

/* notifications/cancelled: the call of this session and credential with that id is given up
 * as if its client had left (its connection is closed; a command it runs is killed). */
static void cancel_call(struct wr_http_req *req, json_t *params, const char *auth_value)
{
    const char *session = wr_http_req_header(req, "Mcp-Session-Id");
    json_t *id = json_object_get(params, "requestId");

    if (session == NULL || id == NULL)
        return;
    for (struct mcp_call *mc = calls; mc != NULL; mc = mc->lnext)
        if (mc->req != NULL && same_str(mc->session, session) &&
            same_str(mc->auth_value, auth_value) && mc->is_unix == wr_http_req_is_unix(req) &&
            json_equal(mc->id, id)) {
            log_debug("mcp: req=%s: call %s cancelled by its client", mc->req_id, mc->tool->name);
            wr_http_req_abort(mc->req);
            return;
        }
}

static void call_timer_closed(uv_handle_t *h)
{
    struct mcp_call *mc = h->data;

    json_decref(mc->id);
    json_decref(mc->args);
    json_decref(mc->acc);
    free(mc->auth_name);
    free(mc->auth_value);
    free(mc->base_url);
    free(mc->session);
    free(mc->sandbox_id);
    wr_buf_fini(&mc->out[0]);
    wr_buf_fini(&mc->out[1]);
    free(mc);
}

static void call_free(struct mcp_call *mc)
{
    calls_del(mc);
    if (mc->sub != NULL)
        wr_http_sub_cancel(mc->sub);
    mc->sub = NULL;
    uv_timer_stop(&mc->timer);
    uv_close((uv_handle_t *)&mc->timer, call_timer_closed);
}

static void call_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct mcp_call *mc = data;

    mc->req = NULL;
    if (mc->on_abandon != NULL)
        mc->on_abandon(mc);
    call_free(mc);
}

static struct wr_http_req *call_take_req(struct mcp_call *mc)
{
    struct wr_http_req *req = mc->req;

    if (req != NULL)
        wr_http_req_set_data(req, NULL, NULL);
    mc->req = NULL;
    return req;
}

void mcp_done(struct mcp_call *mc, json_t *structured, json_t *content, bool is_error)
{
    struct wr_http_req *req = call_take_req(mc);
    _cleanup_free_ char *text = NULL;
    json_t *result;

    if (content == NULL)
        content = json_array();
    if (structured == NULL) {
        /* A tool could not build its answer from what the API said. */
        structured = json_pack("{s:s}", "error", "the API's answer was not understood");
        is_error = true;
    }
    text = json_dumps(structured, JSON_COMPACT);
    json_array_append_new(content,
                          json_pack("{s:s,s:s}", "type", "text", "text", text ? text : "{}"));
    result = json_pack("{s:o,s:o,s:b}", "content", content, "structuredContent", structured,
                       "isError", is_error);
    if (req != NULL)
        rpc_result(req, mc->id, result);
    else
        json_decref(result);
    call_free(mc);
}

void mcp_fail(struct mcp_call *mc, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    mcp_done(mc, json_pack("{s:o}", "error", api_json_message(msg)), NULL, true);
}

json_t *mcp_resp_json(const struct wr_http_sub_resp *r)
{
    if (r->len == 0)
        return NULL;
    return json_loadb(r->body, r->len, 0, NULL);
}

bool mcp_api_failed(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    _cleanup_json_ json_t *j = NULL;
    const char *code, *msg;
    char raw[1024];
    json_t *o;

    if (r->status >= 200 && r->status < 300)
        return false;
    j = mcp_resp_json(r);
    code = json_string_value(json_object_get(j, "code"));
    msg = json_string_value(json_object_get(j, "message"));
    /* Not the API's {"code","message"}: its text (a sandbox server's, say), cut short. */
    snprintf(raw, sizeof(raw), "%s", r->len ? r->body : "the API gave no reason");
    o = json_object();
    json_object_set_new(o, "error", msg ? json_string(msg) : api_json_message(raw));
    json_object_set_new(o, "code", json_string(code ? code : "error"));
    json_object_set_new(o, "status", json_integer(r->status));
    mcp_done(mc, o, NULL, true);
    return true;
}

static void sub_data(struct wr_http_sub *sub, const struct wr_http_sub_resp *r, void *ctx)
{
    struct mcp_call *mc = ctx;

    if (mc->on_data != NULL)
        mc->on_data(mc, r);
}

static void sub_done(struct wr_http_sub *sub, const struct wr_http_sub_resp *r, void *ctx)
{
    struct mcp_call *mc = ctx;
    mcp_cont_fn cont = mc->cont;

    mc->sub = NULL;
    mc->cont = NULL;
    mc->on_data = NULL;
    cont(mc, r);
}

void mcp_sub_raw(struct mcp_call *mc, const char *method, const char *target, const void *body,
                 size_t len, const char *content_type, size_t max_body, mcp_cont_fn cont)
{
    static const struct wr_http_sub_cbs cbs = {.on_data = sub_data, .on_done = sub_done};
    const char *h[7];
    size_t n = 0;

    mc->cont = cont;
    /* A stopping daemon starts nothing: the call waits for its connection to close. */
    if (mc->api->stopping)
        return;
    if (mc->auth_name != NULL) {
        h[n++] = mc->auth_name;
        h[n++] = mc->auth_value;
    }
    if (content_type != NULL) {
        h[n++] = "Content-Type";
        h[n++] = content_type;
    }
    h[n] = NULL;
    struct wr_http_sub_req sr = {
        .method = method,
        .target = target,
        .headers = h,
        .body = body,
        .len = len,
        .max_body = max_body,
        .is_unix = mc->is_unix,
        .id = mc->req_id,
        .peer = mc->req ? wr_http_req_peer(mc->req) : NULL,
        .on_finish = wr_api_on_finish,
    };
    mc->sub = wr_http_sub_start(mc->api->loop, &sr, wr_api_handle, mc->api, &cbs, mc);
}

void mcp_sub_json(struct mcp_call *mc, const char *method, const char *target, json_t *body,
                  mcp_cont_fn cont)
{
    _cleanup_free_ char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;

    json_decref(body);
    mcp_sub_raw(mc, method, target, s, s ? strlen(s) : 0, s ? "application/json" : NULL, 0, cont);
}

static void detached_done(struct wr_http_sub *sub, const struct wr_http_sub_resp *r, void *ctx)
{
    if (r->status >= 300)
        log_debug("mcp: req=%s: a request left behind answered %d", (const char *)ctx, r->status);
}

void mcp_sub_detached(struct mcp_call *mc, const char *method, const char *target, json_t *body)
{
    static const struct wr_http_sub_cbs cbs = {.on_done = detached_done};
    _cleanup_free_ char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
    const char *h[7];
    size_t n = 0;

    json_decref(body);
    if (mc->api->stopping)
        return;
    if (mc->auth_name != NULL) {
        h[n++] = mc->auth_name;
        h[n++] = mc->auth_value;
    }
    if (s != NULL) {
        h[n++] = "Content-Type";
        h[n++] = "application/json";
    }
    h[n] = NULL;
    struct wr_http_sub_req sr = {
        .method = method,
        .target = target,
        .headers = h,
        .body = s,
        .len = s ? strlen(s) : 0,
        .is_unix = mc->is_unix,
        .id = mc->req_id,
        .peer = mc->req ? wr_http_req_peer(mc->req) : NULL,
        .on_finish = wr_api_on_finish,
    };
    (void)wr_http_sub_start(mc->api->loop, &sr, wr_api_handle, mc->api, &cbs, "-");
}

void mcp_sub_consume(struct mcp_call *mc, size_t n)
{
    if (mc->sub != NULL)
        wr_http_sub_consume(mc->sub, n);
}

void mcp_sub_cancel(struct mcp_call *mc)
{
    if (mc->sub != NULL)
        wr_http_sub_cancel(mc->sub);
    mc->sub = NULL;
    mc->cont = NULL;
    mc->on_data = NULL;
}

void mcp_sub_peek(struct mcp_call *mc, struct wr_http_sub_resp *out)
{
    if (mc->sub != NULL)
        wr_http_sub_peek(mc->sub, out);
    else
        *out = (struct wr_http_sub_resp){.content_type = "", .body = ""};
}

static void on_call_timer(uv_timer_t *t)
{
    struct mcp_call *mc = t->data;
    void (*fn)(struct mcp_call *) = mc->on_timer;

    mc->on_timer = NULL;
    if (fn != NULL)
        fn(mc);
}

void mcp_timer(struct mcp_call *mc, uint64_t ms, void (*on_timer)(struct mcp_call *mc))
{
    mc->on_timer = on_timer;
    uv_timer_start(&mc->timer, on_call_timer, ms, 0);
}

void mcp_timer_stop(struct mcp_call *mc)
{
    mc->on_timer = NULL;
    uv_timer_stop(&mc->timer);
}

/* ---- methods ------------------------------------------------------------------------------- */

struct rpc {
    struct wr_api *api;
    struct wr_http_req *req;
    json_t *id; /* borrowed from the message */
    json_t *params;
    const char *auth_name, *auth_value;
};

static void m_initialize(struct rpc *r)
{
    const char *asked = json_string_value(json_object_get(r->params, "protocolVersion"));
    const char *v = asked != NULL && version_ok(asked) ? asked : LATEST;
    unsigned char raw[16];
    char sid[33];

    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
        abort();
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(sid + 2 * i, 3, "%02x", raw[i]);
    wr_http_resp_header(r->req, "Mcp-Session-Id", sid);
    rpc_result(r->req, r->id,
               json_pack("{s:s,s:{s:{s:b}},s:{s:s,s:s,s:s},s:s}", "protocolVersion", v,
                         "capabilities", "tools", "listChanged", false, "serverInfo", "name",
                         "warren", "title", "Warren sandboxes", "version", r->api->version,
                         "instructions",
                         "Warren runs commands in isolated Linux sandboxes. Create one with "
                         "sandbox_create (or let run_code make one), use the sandbox_id it "
                         "returns with the other tools, and sandbox_kill it when done."));
}

static void m_ping(struct rpc *r)
{
    rpc_result(r->req, r->id, json_object());
}

static json_t *tool_json(const struct mcp_tool *t)
{
    json_t *schema = json_loads(t->input_schema, 0, NULL);

    if (schema == NULL) {
        log_error("mcp: tool %s: its input schema is not JSON", t->name);
        schema = json_pack("{s:s}", "type", "object");
    }
    return json_pack("{s:s,s:s,s:s,s:o,s:{s:s,s:b,s:b,s:b,s:b}}", "name", t->name, "title",
                     t->title, "description", t->description, "inputSchema", schema, "annotations",
                     "title", t->title, "readOnlyHint", t->read_only, "destructiveHint",
                     t->destructive, "idempotentHint", t->idempotent, "openWorldHint",
                     t->open_world);
}

static void m_tools_list(struct rpc *r)
{
    json_t *tools = json_array();

    for (size_t i = 0; i < mcp_ntools; i++)
        json_array_append_new(tools, tool_json(&mcp_tools[i]));
    rpc_result(r->req, r->id, json_pack("{s:o}", "tools", tools));
}

static void m_tools_call(struct rpc *r)
{
    const char *name = json_string_value(json_object_get(r->params, "name"));
    json_t *args = json_object_get(r->params, "arguments");
    const struct mcp_tool *t = NULL;
    struct mcp_call *mc;
    const char *host;
    char msg[512];

    if (name == NULL) {
        rpc_error(r->req, 200, r->id, RPC_PARAMS, "tools/call needs params.name, a string");
        return;
    }
    for (size_t i = 0; i < mcp_ntools; i++)
        if (strcmp(mcp_tools[i].name, name) == 0)
            t = &mcp_tools[i];
    if (t == NULL) {
        rpc_error(r->req, 200, r->id, RPC_PARAMS, "unknown tool: %s", name);
        return;
    }
    if (args != NULL && !json_is_null(args) && !json_is_object(args)) {
        rpc_error(r->req, 200, r->id, RPC_PARAMS, "params.arguments must be an object");
        return;
    }
    mc = xcalloc(1, sizeof(*mc));
    mc->api = r->api;
    mc->req = r->req;
    mc->id = json_incref(r->id);
    mc->tool = t;
    mc->args = json_is_object(args) ? json_deep_copy(args) : json_object();
    mc->is_unix = wr_http_req_is_unix(r->req);
    if (r->auth_name != NULL) {
        mc->auth_name = xstrdup(r->auth_name);
        mc->auth_value = xstrdup(r->auth_value);
    }
    host = wr_http_req_header(r->req, "Host");
    mc->base_url =
        xasprintf("http://%s", host && *host && !strpbrk(host, "/ \t") ? host : "localhost");
    snprintf(mc->req_id, sizeof(mc->req_id), "%s", wr_http_req_id(r->req));
    if (wr_http_req_header(r->req, "Mcp-Session-Id") != NULL)
        mc->session = xstrdup(wr_http_req_header(r->req, "Mcp-Session-Id"));
    mc->lnext = calls;
    if (calls != NULL)
        calls->lprev = mc;
    calls = mc;
    uv_timer_init(r->api->loop, &mc->timer);
    mc->timer.data = mc;
    wr_http_req_set_data(r->req, mc, call_closed);
    /* Input validation failures are the tool's errors, so the model can correct itself. */
    if (mcp_check_args(t->input_schema, mc->args, msg, sizeof(msg)) < 0) {
        mcp_fail(mc, "invalid arguments for %s: %s", t->name, msg);
        return;
    }
    t->run(mc);
}

static const struct {
    const char *name;
    void (*fn)(struct rpc *r);
} methods[] = {
    {"initialize", m_initialize},
    {"ping", m_ping},
    {"tools/list", m_tools_list},
    {"tools/call", m_tools_call},
};

/* ---- the endpoint -------------------------------------------------------------------------- */

static bool origin_allowed(const struct wr_api *api, const char *origin)
{
    if (origin == NULL)
        return true;
    for (size_t i = 0; i < api->n_mcp_origins; i++)
        if (strcasecmp(api->mcp_origins[i], origin) == 0)
            return true;
    return false;
}

/* The credential header of the request, as the router reads it. */
static const char *presented_key(struct wr_http_req *req, const char **hname, const char **hval)
{
    const char *h = wr_http_req_header(req, "Authorization");

    if (h != NULL && strncasecmp(h, "Bearer ", 7) == 0) {
        *hname = "Authorization";
        *hval = h;
        h += 7;
        while (*h == ' ')
            h++;
        return h;
    }
    h = wr_http_req_header(req, "X-API-Key");
    if (h != NULL) {
        *hname = "X-API-Key";
        *hval = h;
    }
    return h;
}

static void unauthorized(struct wr_http_req *req, const char *msg)
{
    wr_http_resp_header(req, "WWW-Authenticate", "Bearer realm=\"warren\"");
    rpc_error(req, 401, NULL, RPC_AUTH, "%s", msg);
}

static void on_body(struct wr_http_req *req, const char *body, size_t len)
{
    struct wr_api *api = wr_http_req_data(req);
    const char *hname = NULL, *hval = NULL;
    _cleanup_json_ json_t *msg = NULL;
    const char *method, *jv;
    json_t *id, *params;
    json_error_t je;

    wr_http_req_set_data(req, NULL, NULL);
    (void)presented_key(req, &hname, &hval);
    msg = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (msg == NULL) {
        rpc_error(req, 400, NULL, RPC_PARSE, "parse error at line %d column %d: %s", je.line,
                  je.column, je.text);
        return;
    }
    if (!json_is_object(msg)) {
        rpc_error(req, 400, NULL, RPC_INVALID, "a message is one JSON-RPC object (no batches)");
        return;
    }
    jv = json_string_value(json_object_get(msg, "jsonrpc"));
    id = json_object_get(msg, "id");
    method = json_string_value(json_object_get(msg, "method"));
    if (jv == NULL || strcmp(jv, "2.0") != 0 ||
        (id != NULL && !json_is_string(id) && !json_is_integer(id))) {
        rpc_error(req, 400, id && (json_is_string(id) || json_is_integer(id)) ? id : NULL,
                  RPC_INVALID, "not a JSON-RPC 2.0 message");
        return;
    }
    if (method == NULL && json_object_get(msg, "method") != NULL) {
        rpc_error(req, 400, id, RPC_INVALID, "`method` must be a string");
        return;
    }
    /* Notifications (initialized, cancelled, ...) and responses: accepted, nothing to say. */
    if (method != NULL && id == NULL && strcmp(method, "notifications/cancelled") == 0)
        cancel_call(req, json_object_get(msg, "params"), hval);
    if (method == NULL || id == NULL) {
        wr_http_respond(req, 202, NULL, NULL, 0);
        return;
    }
    params = json_object_get(msg, "params");
    if (params != NULL && !json_is_object(params)) {
        rpc_error(req, 200, id, RPC_INVALID, "`params` must be an object");
        return;
    }
    struct rpc r = {
        .api = api, .req = req, .id = id, .params = params, .auth_name = hname, .auth_value = hval};
    for (size_t i = 0; i < WR_ARRAY_SIZE(methods); i++)
        if (strcmp(methods[i].name, method) == 0) {
            methods[i].fn(&r);
            return;
        }
    rpc_error(req, 200, id, RPC_NO_METHOD, "method not found: %s", method);
}

bool api_mcp_handle(struct wr_api *api, struct wr_http_req *req)
{
    const char *path = wr_http_req_path(req);
    const char *method = wr_http_req_method(req);
    const char *pv = wr_http_req_header(req, "MCP-Protocol-Version");
    const char *origin = wr_http_req_header(req, "Origin");
    const char *hname = NULL, *hval = NULL, *key;
    struct wr_key_info ki;
    struct wr_err err;

    if (strcmp(path, "/mcp") != 0 && strcmp(path, "/mcp/") != 0)
        return false;
    if (!origin_allowed(api, origin)) {
        rpc_error(req, 403, NULL, RPC_FORBIDDEN, "origin %s is not allowed (warrend --mcp-origin)",
                  origin);
        return true;
    }
    /* A browser page of an allowed origin: CORS, its preflight included (before any key). */
    if (origin != NULL) {
        wr_http_resp_header(req, "Access-Control-Allow-Origin", origin);
        wr_http_resp_header(req, "Vary", "Origin");
        wr_http_resp_header(req, "Access-Control-Expose-Headers",
                            "Mcp-Session-Id, WWW-Authenticate");
    }
    if (strcmp(method, "OPTIONS") == 0 && origin != NULL) {
        wr_http_resp_header(req, "Access-Control-Allow-Methods", "POST, DELETE");
        wr_http_resp_header(req, "Access-Control-Allow-Headers",
                            "Authorization, X-API-Key, Content-Type, Accept, Mcp-Session-Id, "
                            "MCP-Protocol-Version, Last-Event-ID");
        wr_http_resp_header(req, "Access-Control-Max-Age", "600");
        wr_http_respond(req, 204, NULL, NULL, 0);
        return true;
    }
    if (strcmp(method, "POST") != 0 && strcmp(method, "DELETE") != 0) {
        wr_http_resp_header(req, "Allow", "POST, DELETE");
        rpc_error(req, 405, NULL, RPC_INVALID,
                  "use POST (this server opens no server-to-client stream) or DELETE");
        return true;
    }
    key = presented_key(req, &hname, &hval);
    if (key == NULL && !wr_http_req_is_unix(req)) {
        unauthorized(req, "an API key is required (Authorization: Bearer <key>)");
        return true;
    }
    if (key != NULL) {
        if (wr_keys_lookup(api->mgr, key, &ki, &err) < 0) {
            if (err.kind == WR_ENOTFOUND)
                unauthorized(req, "the API key is not valid");
            else
                rpc_error(req, 500, NULL, RPC_INTERNAL, "%s", err.msg);
            return true;
        }
        wr_key_info_fini(&ki);
    }
    if (strcmp(method, "DELETE") == 0) {
        wr_http_respond(req, 204, NULL, NULL, 0);
        return true;
    }
    if (pv != NULL && !version_ok(pv)) {
        rpc_error(req, 400, NULL, RPC_INVALID, "unsupported MCP-Protocol-Version %s", pv);
        return true;
    }
    wr_http_req_set_data(req, api, NULL);
    wr_http_req_read_body(req, MCP_BODY_MAX, on_body);
    return true;
}
