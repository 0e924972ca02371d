/* SPDX-License-Identifier: Apache-2.0 */
/* The native API's routes (the table below: grep it for a path), the router that authenticates
 * a call and finds what its path names, and the helpers every handler uses. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../core/keys.h"
#include "../util/b64.h"
#include "../util/buf.h"
#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/parse.h"
#include "../util/utf8.h"
#include "../util/xalloc.h"
#include "api_int.h"

struct api_pending {
    struct wr_http_req *req; /* NULL once the client left */
};

static void pending_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct api_pending *p = data;
    p->req = NULL;
}

struct api_pending *api_pending_new(struct wr_http_req *req)
{
    struct api_pending *p = xcalloc(1, sizeof(*p));

    p->req = req;
    wr_http_req_set_data(req, p, pending_closed);
    return p;
}

struct wr_http_req *api_pending_end(struct api_pending *p)
{
    struct wr_http_req *req = p->req;

    if (req != NULL)
        wr_http_req_set_data(req, NULL, NULL);
    free(p);
    return req;
}

void api_pending_deleted(void *ctx, const struct wr_err *err)
{
    struct wr_http_req *req = api_pending_end(ctx);

    if (req == NULL)
        return;
    if (err != NULL)
        api_error(req, err);
    else
        wr_http_respond(req, 204, NULL, NULL, 0);
}

int api_error_status(const struct wr_err *err, const char **code)
{
    enum wr_err_kind kind = wr_err_class(err);

    *code = wr_err_kind_name(kind);
    return wr_err_kind_status(kind);
}

void api_error(struct wr_http_req *req, const struct wr_err *err)
{
    const char *code;
    int status = api_error_status(err, &code);

    wr_http_respond_error(req, status, code, "%s", err->msg);
}

void api_fail(struct wr_http_req *req, enum wr_err_kind kind, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    wr_http_respond_error(req, wr_err_kind_status(kind), wr_err_kind_name(kind), "%s", msg);
}

json_t *api_json_text(const char *s)
{
    _cleanup_free_ char *t = wr_utf8_fix(s ? s : "", WR_UTF8_REPLACE);
    return json_string(t);
}

json_t *api_json_b64(const uint8_t *p, size_t n)
{
    _cleanup_free_ char *enc = xmalloc(WR_B64_ENCODED_LEN(n) + 1);
    size_t len = wr_b64_encode(p, n, enc);

    return json_stringn(enc, len);
}

json_t *api_json_message(const char *s)
{
    _cleanup_free_ char *t = wr_utf8_fix(s ? s : "", WR_UTF8_ESCAPE);
    return json_string(t);
}

void api_time(int64_t ms, char out[32])
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    size_t n;

    if (ms < 0)
        s = 0, ms = 0;
    gmtime_r(&s, &tm);
    n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%03uZ", (unsigned)(ms % 1000));
}

json_t *api_parse_object(struct wr_http_req *req, const char *body, size_t len)
{
    json_error_t je;
    json_t *j;

    if (len == 0)
        return json_object();
    j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (j == NULL) {
        api_fail(req, WR_EINVAL, "malformed JSON at line %d column %d: %s", je.line, je.column,
                 je.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        api_fail(req, WR_EINVAL, "the body must be a JSON object");
        return NULL;
    }
    return j;
}

int api_only_keys(struct wr_http_req *req, json_t *obj, const char *const *allowed)
{
    const char *k;
    json_t *v;

    json_object_foreach(obj, k, v)
    {
        bool ok = false;
        for (const char *const *a = allowed; *a != NULL; a++)
            if (strcmp(k, *a) == 0)
                ok = true;
        if (!ok) {
            api_fail(req, WR_EINVAL, "unknown field `%s`", k);
            return -1;
        }
    }
    return 0;
}

/* Split "/v1/a/b/c" into segments after "v1". Returns false if it is not a /v1 path or has too
 * many segments. Empty segments (//) are not allowed. */
static bool split_route(const char *path, struct api_call *c)
{
    size_t n = strlen(path);
    char *p, *save = NULL;

    if (n >= sizeof(c->buf) || strncmp(path, "/v1/", 4) != 0)
        return false;
    memcpy(c->buf, path + 4, n - 3);
    c->nseg = 0;
    if (c->buf[0] == '\0' || strstr(c->buf, "//") != NULL)
        return false;
    for (p = strtok_r(c->buf, "/", &save); p != NULL; p = strtok_r(NULL, "/", &save)) {
        if (c->nseg == API_MAX_SEGS)
            return false;
        c->seg[c->nseg++] = p;
    }
    return c->nseg > 0;
}

/* The key from Authorization: Bearer or X-API-Key. */
static const char *presented_key(struct wr_http_req *req)
{
    const char *h = wr_http_req_header(req, "Authorization");

    if (h != NULL && strncasecmp(h, "Bearer ", 7) == 0) {
        h += 7;
        while (*h == ' ')
            h++;
        return h;
    }
    return wr_http_req_header(req, "X-API-Key");
}

/* Who key (NULL: none presented) is. Returns 0 with *who filled, or -1 having answered 401. */
static int authenticate_key(struct wr_api *api, struct wr_http_req *req, const char *key,
                            struct wr_caller *who)
{
    struct wr_key_info ki;
    struct wr_err err;

    if (key == NULL && wr_http_req_is_unix(req)) {
        snprintf(who->team, sizeof(who->team), "admin");
        snprintf(who->key_id, sizeof(who->key_id), "unix");
        who->admin = true;
        api_note_caller(req, who);
        return 0;
    }
    if (key == NULL) {
        api_fail(req, WR_EUNAUTHORIZED, "an API key is required (Authorization: Bearer <key>)");
        return -1;
    }
    if (api_node_token_matches(api, key))
        return api_node_caller(api, req, who);
    if (wr_keys_lookup(api->mgr, key, &ki, &err) < 0) {
        if (err.kind == WR_ENOTFOUND)
            api_fail(req, WR_EUNAUTHORIZED, "the API key is not valid");
        else
            api_error(req, &err);
        return -1;
    }
    snprintf(who->team, sizeof(who->team), "%s", ki.team);
    snprintf(who->key_id, sizeof(who->key_id), "%s", ki.id ? ki.id : "");
    who->admin = ki.admin;
    wr_key_info_fini(&ki);
    api_note_caller(req, who);
    return 0;
}

int api_authenticate(struct wr_api *api, struct wr_http_req *req, struct wr_caller *who)
{
    return authenticate_key(api, req, presented_key(req), who);
}

/* A browser's WebSocket cannot carry an Authorization header, so the console names its key
 * in the subprotocols it offers: `Sec-WebSocket-Protocol: warren, warren.key.<key>`
 * (docs/console.md), and the 101 picks `warren`. A key is made of token characters, as a
 * subprotocol must be. */
#define WS_PROTOCOL   "warren"
#define WS_KEY_PREFIX "warren.key."

/* The key of the offered subprotocols into buf. Returns 1 (found, and `warren` offered too), 0
 * (none there), or -1 having answered 400 or 401. */
static int ws_protocol_key(struct wr_http_req *req, char *buf, size_t size)
{
    const char *h = wr_http_req_header(req, "Sec-WebSocket-Protocol");
    bool offered = false, found = false;

    while (h != NULL && *h != '\0') {
        size_t n;
        h += strspn(h, " \t,");
        n = strcspn(h, " \t,");
        if (n == strlen(WS_PROTOCOL) && strncmp(h, WS_PROTOCOL, n) == 0)
            offered = true;
        else if (n > strlen(WS_KEY_PREFIX) &&
                 strncmp(h, WS_KEY_PREFIX, strlen(WS_KEY_PREFIX)) == 0) {
            n -= strlen(WS_KEY_PREFIX);
            if (found || n >= size) {
                api_fail(req, WR_EUNAUTHORIZED, "the API key is not valid");
                return -1;
            }
            memcpy(buf, h + strlen(WS_KEY_PREFIX), n);
            buf[n] = '\0';
            found = true;
            n += strlen(WS_KEY_PREFIX);
        }
        h += n;
    }
    if (found && !offered) {
        api_fail(req, WR_EINVAL,
                 "a WebSocket that names its key as a subprotocol must offer `" WS_PROTOCOL
                 "` too");
        return -1;
    }
    return found ? 1 : 0;
}

/* Authenticate a request of route r (NULL: its method has none): by its headers, or, for a
 * WebSocket of a route with API_WS_KEY and no key in its headers, by its subprotocols. */
static int authenticate_route(struct wr_api *api, struct wr_http_req *req,
                              const struct api_route *r, struct wr_caller *who)
{
    char key[256];
    int found;

    if (r == NULL || !(r->flags & API_WS_KEY) || presented_key(req) != NULL ||
        !wr_http_req_is_upgrade(req))
        return api_authenticate(api, req, who);
    found = ws_protocol_key(req, key, sizeof(key));
    if (found < 0)
        return -1;
    if (found == 0)
        return api_authenticate(api, req, who);
    if (authenticate_key(api, req, key, who) < 0)
        return -1;
    wr_http_resp_header(req, "Sec-WebSocket-Protocol", WS_PROTOCOL);
    return 0;
}

/* ---- the routes ------------------------------------------------------------------------------ */

/* The largest bodies read for the routes. */
#define CONTROL_BODY_MAX (4u << 10)  /* a small JSON object: a timeout, a pause, a signal, a key */
#define CREATE_BODY_MAX  (64u << 10) /* a network policy */
/* A sandbox's create: env, metadata, volumes, and a Compose file with its context
 * (WR_COMPOSE_CONTEXT_MAX_BYTES of files, JSON-escaped). */
#define SANDBOX_BODY_MAX (24u << 20)
#define PULL_BODY_MAX    (64u << 10) /* a pull: an image reference and registry credentials */
#define PATHS_BODY_MAX   (3u * WR_MAX_PATH) /* a mkdir or move: two paths and a user */
#define EXEC_BODY_MAX    (16u << 20)        /* an exec: argv, env and its stdin inline */

static void health(struct api_call *c)
{
    wr_http_respond_json(c->req, 200, json_pack("{s:s}", "status", "ok"));
}

static void version(struct api_call *c)
{
    const char *names[8];
    size_t n = wr_manager_runtimes(c->api->mgr, names, 8);
    json_t *runtimes = json_array();

    for (size_t i = 0; i < n && i < 8; i++)
        json_array_append_new(runtimes, json_string(names[i]));
    wr_http_respond_json(c->req, 200,
                         json_pack("{s:s,s:s,s:s,s:o,s:s,s:s?,s:s,s:b}", "version", c->api->version,
                                   "api", "1", "runtime", wr_manager_default_runtime(c->api->mgr),
                                   "runtimes", runtimes, "cgroup",
                                   wr_manager_cgroup_version(c->api->mgr), "domain", c->api->domain,
                                   "team", c->who.team, "admin", c->who.admin));
}

/* The host's devices (CDI specs, docs/devices.md) and whether each is in use: which sandbox
 * holds one is not said (it may be another team's). */
static void devices(struct api_call *c)
{
    wr_http_respond_json(c->req, 200,
                         json_pack("{s:o}", "devices", wr_manager_devices(c->api->mgr)));
}

/* Every route of the native API (docs/openapi.yaml), in the order a 405 names the methods of a
 * path. */
static const struct api_route routes[] = {
    {"GET", "health", health, 0, API_PUBLIC},
    {"GET", "version", version, 0, 0},
    {"GET", "devices", devices, 0, 0},

    {"GET", "sandboxes", api_sandboxes_list, 0, 0},
    {"POST", "sandboxes", api_sandbox_create, SANDBOX_BODY_MAX, 0},
    {"GET", "sandboxes/*", api_sandbox_get, 0, 0},
    {"DELETE", "sandboxes/*", api_sandbox_delete, 0, 0},
    {"POST", "sandboxes/*/timeout", api_sandbox_timeout, CONTROL_BODY_MAX, 0},
    {"GET", "sandboxes/*/network", api_sandbox_network_get, 0, 0},
    {"PUT", "sandboxes/*/network", api_sandbox_network_put, CREATE_BODY_MAX, 0},
    {"GET", "sandboxes/*/network/stats", api_sandbox_network_stats, 0, 0},
    {"POST", "sandboxes/*/pause", api_sandbox_pause, CONTROL_BODY_MAX, 0},
    {"POST", "sandboxes/*/resume", api_sandbox_resume, CONTROL_BODY_MAX, 0},
    {"GET", "sandboxes/*/budget", api_sandbox_budget_get, 0, 0},
    {"PUT", "sandboxes/*/budget", api_sandbox_budget_put, CONTROL_BODY_MAX, 0},
    {"DELETE", "sandboxes/*/budget", api_sandbox_budget_delete, 0, 0},
    {"GET", "sandboxes/*/metrics", api_sandbox_metrics, 0, 0},
    {"GET", "sandboxes/*/disk", api_sandbox_disk, 0, 0},
    {"GET", "sandboxes/*/diff", api_sandbox_diff, 0, 0},
    {"GET", "sandboxes/*/network/log", api_sandbox_netlog, 0, 0},
    {"POST", "sandboxes/*/snapshots", api_sandbox_snapshot, CONTROL_BODY_MAX, 0},
    {"POST", "sandboxes/*/fork", api_sandbox_fork, CONTROL_BODY_MAX, 0},

    {"POST", "sandboxes/*/exec", api_exec_start, EXEC_BODY_MAX, API_LIVE},
    {"GET", "sandboxes/*/terminal", api_terminal, 0, API_LIVE | API_WS_KEY},
    {"GET", "sandboxes/*/processes", api_procs_list, 0, API_LIVE},
    {"GET", "sandboxes/*/processes/*", api_proc_get, 0, API_LIVE | API_PROC},
    {"DELETE", "sandboxes/*/processes/*", api_proc_release, 0, API_LIVE | API_PROC},
    {"GET", "sandboxes/*/processes/*/attach", api_proc_attach, 0, API_LIVE | API_PROC},
    {"GET", "sandboxes/*/processes/*/wait", api_proc_wait, 0, API_LIVE | API_PROC},
    {"POST", "sandboxes/*/processes/*/stdin", api_proc_stdin, 0, API_LIVE | API_PROC | API_STREAM},
    {"POST", "sandboxes/*/processes/*/stdin/close", api_proc_stdin_close, 0, API_LIVE | API_PROC},
    {"POST", "sandboxes/*/processes/*/signal", api_proc_signal, CONTROL_BODY_MAX,
     API_LIVE | API_PROC},
    {"POST", "sandboxes/*/processes/*/resize", api_proc_resize, CONTROL_BODY_MAX,
     API_LIVE | API_PROC},

    {"GET", "sandboxes/*/files", api_file_read, 0, API_LIVE},
    {"PUT", "sandboxes/*/files", api_file_write, 0, API_LIVE | API_STREAM},
    {"DELETE", "sandboxes/*/files", api_file_remove, 0, API_LIVE},
    {"GET", "sandboxes/*/files/stat", api_file_stat, 0, API_LIVE},
    {"GET", "sandboxes/*/files/list", api_file_list, 0, API_LIVE},
    {"GET", "sandboxes/*/files/watch", api_file_watch, 0, API_LIVE},
    {"POST", "sandboxes/*/files/mkdir", api_file_mkdir, PATHS_BODY_MAX, API_LIVE},
    {"POST", "sandboxes/*/files/move", api_file_move, PATHS_BODY_MAX, API_LIVE},

    {"GET", "sandboxes/*/ports", api_ports_list, 0, API_LIVE},
    {"GET", "sandboxes/*/services", api_services_list, 0, API_LIVE},
    {"GET", "sandboxes/*/services/*/logs", api_service_logs, 0, API_LIVE},

    {"POST", "sandboxes/*/code", api_code_execute, 0, API_LIVE | API_STREAM},
    {"GET", "sandboxes/*/code/contexts", api_code_contexts_list, 0, API_LIVE},
    {"POST", "sandboxes/*/code/contexts", api_code_context_create, 0, API_LIVE | API_STREAM},
    {"DELETE", "sandboxes/*/code/contexts/*", api_code_context_delete, 0, API_LIVE},
    {"POST", "sandboxes/*/code/contexts/*/restart", api_code_context_restart, 0,
     API_LIVE | API_STREAM},

    {"GET", "keys", api_keys_list, 0, 0},
    {"POST", "keys", api_key_create, CONTROL_BODY_MAX, 0},
    {"DELETE", "keys/*", api_key_delete, 0, 0},

    {"GET", "teams/*/limits", api_team_limits_get, 0, 0},
    {"PUT", "teams/*/limits", api_team_limits_put, CONTROL_BODY_MAX, 0},
    {"DELETE", "teams/*/limits", api_team_limits_delete, 0, 0},
    {"GET", "teams/*/budget", api_team_budget_get, 0, 0},
    {"PUT", "teams/*/budget", api_team_budget_put, CONTROL_BODY_MAX, 0},
    {"DELETE", "teams/*/budget", api_team_budget_delete, 0, 0},

    {"GET", "templates", api_templates_list, 0, 0},
    {"POST", "templates/build", api_template_build, 0, API_STREAM},
    {"POST", "templates/prune", api_template_prune, 0, 0},
    {"POST", "templates/import", api_template_import, 0, API_STREAM},
    {"POST", "templates/pull", api_template_pull, PULL_BODY_MAX, 0},
    {"GET", "templates/*", api_template_get, 0, 0},
    {"DELETE", "templates/*", api_template_delete, 0, 0},

    {"GET", "snapshots", api_snapshots_list, 0, 0},
    {"GET", "snapshots/*", api_snapshot_get, 0, 0},
    {"DELETE", "snapshots/*", api_snapshot_delete, 0, 0},

    {"GET", "volumes", api_volumes_list, 0, 0},
    {"POST", "volumes", api_volume_create, CONTROL_BODY_MAX, 0},
    {"GET", "volumes/*", api_volume_get, 0, 0},
    {"DELETE", "volumes/*", api_volume_delete, 0, 0},
    {"GET", "sandboxes/*/desktop", api_desktop_get, 0, API_LIVE},
    {"POST", "sandboxes/*/desktop/start", api_desktop_start, CONTROL_BODY_MAX, API_LIVE},
    {"GET", "sandboxes/*/desktop/screenshot", api_desktop_screenshot, 0, API_LIVE},
    {"GET", "sandboxes/*/desktop/mouse", api_desktop_mouse_get, 0, API_LIVE},
    {"POST", "sandboxes/*/desktop/mouse", api_desktop_mouse, CONTROL_BODY_MAX, API_LIVE},
    {"POST", "sandboxes/*/desktop/keyboard", api_desktop_keyboard, API_DESKTOP_BODY_MAX, API_LIVE},
    {"GET", "sandboxes/*/desktop/windows", api_desktop_windows, 0, API_LIVE},
    {"POST", "sandboxes/*/browser/start", api_browser_start, CONTROL_BODY_MAX, API_LIVE},
    {"GET", "sandboxes/*/cdp", api_cdp, 0, API_LIVE},
    {"GET", "sandboxes/*/cdp/json/version", api_cdp_version, 0, API_LIVE},

    {"GET", "warm-pools", api_warm_pools, 0, 0},

    {"GET", "audit", api_audit_list, 0, 0},

    {"GET", "events", api_events_list, 0, 0},
    {"GET", "events/stream", api_events_stream, 0, 0},
    {"GET", "usage", api_usage, 0, 0},

    {"GET", "webhooks", api_webhooks_list, 0, 0},
    {"POST", "webhooks", api_webhook_create, CONTROL_BODY_MAX, 0},
    {"GET", "webhooks/*", api_webhook_get, 0, 0},
    {"PATCH", "webhooks/*", api_webhook_update, CONTROL_BODY_MAX, 0},
    {"DELETE", "webhooks/*", api_webhook_delete, 0, 0},
    {"GET", "webhooks/*/deliveries", api_webhook_deliveries, 0, 0},
    {"POST", "webhooks/*/deliveries/*/redeliver", api_webhook_redeliver, 0, 0},
};

/* ---- the audit trail's routes (observe.c) ---------------------------------------------------- */

/* The state-changing routes and their audit actions: every route whose method is not GET, and
 * the GET routes listed here (a terminal starts a shell). A route that changes state and is not
 * listed is audited as "request". The object is the path's seg[1] (a create's id comes from its
 * handler, api_note_object). */
static const struct {
    const char *method, *pattern, *action;
} audit_actions[] = {
    {"POST", "sandboxes", "sandbox.create"},
    {"DELETE", "sandboxes/*", "sandbox.delete"},
    {"POST", "sandboxes/*/timeout", "sandbox.timeout.set"},
    {"PUT", "sandboxes/*/network", "sandbox.network.set"},
    {"POST", "sandboxes/*/pause", "sandbox.pause"},
    {"POST", "sandboxes/*/resume", "sandbox.resume"},
    {"PUT", "sandboxes/*/budget", "sandbox.budget.set"},
    {"DELETE", "sandboxes/*/budget", "sandbox.budget.delete"},
    {"PUT", "teams/*/budget", "team.budget.set"},
    {"DELETE", "teams/*/budget", "team.budget.delete"},
    {"POST", "sandboxes/*/snapshots", "sandbox.snapshot"},
    {"POST", "sandboxes/*/fork", "sandbox.fork"},
    {"POST", "sandboxes/*/exec", "exec.start"},
    {"GET", "sandboxes/*/terminal", "terminal.open"},
    {"DELETE", "sandboxes/*/processes/*", "process.release"},
    {"POST", "sandboxes/*/processes/*/stdin", "process.stdin"},
    {"POST", "sandboxes/*/processes/*/stdin/close", "process.stdin.close"},
    {"POST", "sandboxes/*/processes/*/signal", "process.signal"},
    {"POST", "sandboxes/*/processes/*/resize", "process.resize"},
    {"PUT", "sandboxes/*/files", "file.write"},
    {"DELETE", "sandboxes/*/files", "file.delete"},
    {"POST", "sandboxes/*/files/mkdir", "file.mkdir"},
    {"POST", "sandboxes/*/files/move", "file.move"},
    {"POST", "sandboxes/*/code", "code.run"},
    {"POST", "sandboxes/*/code/contexts", "code.context.create"},
    {"DELETE", "sandboxes/*/code/contexts/*", "code.context.delete"},
    {"POST", "sandboxes/*/code/contexts/*/restart", "code.context.restart"},
    {"POST", "sandboxes/*/desktop/start", "desktop.start"},
    {"POST", "sandboxes/*/desktop/mouse", "desktop.mouse"},
    {"POST", "sandboxes/*/desktop/keyboard", "desktop.keyboard"},
    {"POST", "sandboxes/*/browser/start", "browser.start"},
    {"POST", "keys", "key.create"},
    {"DELETE", "keys/*", "key.delete"},
    {"POST", "templates/build", "template.build"},
    {"POST", "templates/prune", "template.prune"},
    {"POST", "templates/import", "template.import"},
    {"POST", "templates/pull", "template.pull"},
    {"DELETE", "templates/*", "template.delete"},
    {"DELETE", "snapshots/*", "snapshot.delete"},
    {"POST", "volumes", "volume.create"},
    {"DELETE", "volumes/*", "volume.delete"},
    {"POST", "webhooks", "webhook.create"},
    {"PATCH", "webhooks/*", "webhook.update"},
    {"DELETE", "webhooks/*", "webhook.delete"},
    {"POST", "webhooks/*/deliveries/*/redeliver", "webhook.redeliver"},
};

/* The route's pattern as a label: "/v1/sandboxes/{id}/processes/{pid}" (made once). */
static const char *route_label(const struct api_route *r)
{
    static char *labels[WR_ARRAY_SIZE(routes)];
    size_t i = (size_t)(r - routes);
    struct wr_buf b = {0};

    if (labels[i] != NULL)
        return labels[i];
    wr_buf_puts(&b, "/v1/");
    for (const char *p = r->pattern; *p; p++) {
        if (*p != '*')
            wr_buf_append(&b, p, 1);
        else if (p - r->pattern >= 10 && strncmp(p - 10, "processes/", 10) == 0)
            wr_buf_puts(&b, "{pid}");
        else if (p - r->pattern >= 9 && strncmp(p - 9, "contexts/", 9) == 0)
            wr_buf_puts(&b, "{context}");
        else if (p - r->pattern >= 9 && strncmp(p - 9, "services/", 9) == 0)
            wr_buf_puts(&b, "{name}");
        else
            wr_buf_puts(&b, "{id}");
    }
    labels[i] = wr_buf_steal_str(&b);
    return labels[i];
}

/* Note the route of a request, and (audited: r is the request's own route) for a state-changing
 * one its action and object. */
static void note_route(struct api_call *c, const struct api_route *r, bool audited)
{
    static const char *const kinds[][2] = {{"sandboxes", "sandbox"},  {"keys", "key"},
                                           {"templates", "template"}, {"snapshots", "snapshot"},
                                           {"volumes", "volume"},     {"webhooks", "webhook"}};
    struct api_note *n = api_note(c->req);
    const char *action = NULL;

    n->route = route_label(r);
    if (!audited)
        return;
    for (size_t i = 0; i < WR_ARRAY_SIZE(audit_actions) && action == NULL; i++)
        if (strcmp(audit_actions[i].method, r->method) == 0 &&
            strcmp(audit_actions[i].pattern, r->pattern) == 0)
            action = audit_actions[i].action;
    if (action == NULL && strcmp(r->method, "GET") != 0)
        action = "request";
    if (action == NULL)
        return;
    n->action = action;
    /* The object's kind: the first segment, singular. */
    n->object_kind = "other";
    for (size_t i = 0; i < WR_ARRAY_SIZE(kinds); i++)
        if (strcmp(c->seg[0], kinds[i][0]) == 0)
            n->object_kind = kinds[i][1];
    if (c->nseg > 1 && strcmp(c->seg[1], "build") != 0 && strcmp(c->seg[1], "prune") != 0 &&
        strcmp(c->seg[1], "import") != 0 && strcmp(c->seg[1], "pull") != 0)
        api_note_object(c->req, c->seg[1]);
}

/* Whether the path's segments fit pattern. */
static bool pattern_match(const char *pattern, const struct api_call *c)
{
    const char *p = pattern;

    for (size_t i = 0; i < c->nseg; i++) {
        size_t n = strcspn(p, "/");
        if (n == 0)
            return false;
        if (!(n == 1 && *p == '*') && (strlen(c->seg[i]) != n || strncmp(c->seg[i], p, n) != 0))
            return false;
        p += n;
        if (*p == '/')
            p++;
    }
    return *p == '\0';
}

static void call_free(struct api_call *c)
{
    if (c->sb != NULL)
        wr_live_sb_unref(c->sb);
    free(c);
}

static void call_closed(struct wr_http_req *req, void *data, bool aborted)
{
    call_free(data);
}

/* The sandbox and process of the path for a route with API_LIVE or API_PROC. Returns 0, or -1
 * having answered 404 (or the error of a sandbox that is not running). */
static int resolve(struct api_call *c, unsigned flags)
{
    struct wr_err err;
    uint64_t pid = 0;

    if (flags & API_LIVE) {
        c->sb = wr_manager_find(c->api->mgr, c->team, c->seg[1], &err);
        if (c->sb == NULL) {
            api_error(c->req, &err);
            return -1;
        }
        wr_live_sb_ref(c->sb);
    }
    if (flags & API_PROC) {
        if (wr_parse_uint(c->seg[3], UINT32_MAX, &pid, &err) < 0 || pid == 0 ||
            (c->proc = wr_live_sb_proc(c->sb, (uint32_t)pid)) == NULL) {
            api_fail(c->req, WR_ENOTFOUND, "process `%s` not found", c->seg[3]);
            return -1;
        }
        c->pid = (uint32_t)pid;
    }
    return 0;
}

static void call_body(struct wr_http_req *req, const char *body, size_t len)
{
    struct api_call *c = wr_http_req_data(req);

    wr_http_req_set_data(req, NULL, NULL);
    c->body = body;
    c->len = len;
    /* The process may have gone while the body came. */
    if (c->route->flags & API_PROC) {
        c->proc = wr_live_sb_alive(c->sb) ? wr_live_sb_proc(c->sb, c->pid) : NULL;
        if (c->proc == NULL) {
            api_fail(req, WR_ENOTFOUND, "process %u not found", c->pid);
            call_free(c);
            return;
        }
    }
    wr_log_ctx_set(wr_http_req_id(req), c->who.team,
                   strcmp(c->seg[0], "sandboxes") == 0 && c->nseg > 1 ? c->seg[1] : NULL);
    c->route->handler(c);
    wr_log_ctx_clear();
    call_free(c);
}

/* 405 "use GET or DELETE": the methods of the routes of c's path. */
static void method_not_allowed(const struct api_call *c)
{
    const char *m[WR_ARRAY_SIZE(routes)];
    char msg[64] = "use";
    size_t n = 0;

    for (size_t i = 0; i < WR_ARRAY_SIZE(routes); i++)
        if (pattern_match(routes[i].pattern, c))
            m[n++] = routes[i].method;
    for (size_t i = 0; i < n; i++) {
        const char *sep = i == 0 ? " " : i + 1 == n ? " or " : ", ";
        size_t used = strlen(msg);
        snprintf(msg + used, sizeof(msg) - used, "%s%s", sep, m[i]);
    }
    api_fail(c->req, WR_EMETHOD, "%s", msg);
}

void wr_api_handle(struct wr_http_req *req, void *ctx)
{
    struct wr_api *api = ctx;
    const char *method = wr_http_req_method(req);
    const char *path = wr_http_req_path(req);
    const struct api_route *hit = NULL;
    unsigned needs = 0;
    bool found = false, public = true;
    struct api_call *c;
    struct api_note *n = api_note(req);

    wr_log_ctx_set(wr_http_req_id(req), NULL, NULL);
    /* /healthz, and a node's /node/ routes (h_node.c). */
    if (api_node_handle(api, req)) {
        n->api = "node";
        n->route = "/node";
        wr_log_ctx_clear();
        return;
    }
    /* The E2B-compatible API (e2b.c) shares the port: its paths are not under /v1. Its
     * requests other than GET are audited as one action, their path the object. */
    if (e2b_handle(api, req)) {
        n->api = "e2b";
        n->route = "/e2b";
        if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
            n->action = "e2b.request";
            n->object_kind = "e2b";
            api_note_object(req, path);
        }
        wr_log_ctx_clear();
        return;
    }
    /* The web console's static files (console.c): public, under /console/. */
    if (api_console_handle(api, req)) {
        wr_log_ctx_clear();
        return;
    }
    /* Exposed ports: the proxied path has any depth, so it is not a route of the table. */
    if (api_ports_handle(api, req)) {
        n->api = "ports";
        n->route = "/v1/sandboxes/{id}/ports/{port}";
        wr_log_ctx_clear();
        return;
    }
    /* The MCP server (mcp.c): JSON-RPC on /mcp. */
    if (api_mcp_handle(api, req)) {
        n->api = "mcp";
        n->route = "/mcp";
        wr_log_ctx_clear();
        return;
    }
    c = xcalloc(1, sizeof(*c));
    c->api = api;
    c->req = req;
    if (!split_route(path, c)) {
        api_fail(req, WR_ENOTFOUND, "no such endpoint: %s %s", method, path);
        free(c);
        wr_log_ctx_clear();
        return;
    }
    for (size_t i = 0; i < WR_ARRAY_SIZE(routes); i++) {
        const struct api_route *r = &routes[i];
        if (!pattern_match(r->pattern, c))
            continue;
        found = true;
        needs |= r->flags & (API_LIVE | API_PROC);
        public = public && (r->flags & API_PUBLIC);
        if (hit == NULL && strcmp(r->method, method) == 0)
            hit = r;
    }
    /* The route label (and audit action) of the request, or of its path's first route. */
    for (size_t i = 0; i < WR_ARRAY_SIZE(routes); i++)
        if (hit == &routes[i] || (hit == NULL && pattern_match(routes[i].pattern, c))) {
            note_route(c, &routes[i], hit != NULL);
            break;
        }
    if (!found || !public) {
        if (authenticate_route(api, req, hit, &c->who) < 0)
            goto out;
        c->team = c->who.admin ? NULL : c->who.team;
        wr_log_ctx_set(wr_http_req_id(req), c->who.team,
                       strcmp(c->seg[0], "sandboxes") == 0 && c->nseg > 1 ? c->seg[1] : NULL);
        /* The order of checks (docs/operations.md): the key, then the team's request rate,
         * then the route and the request, the team's quotas, the host's capacity. */
        if (api_limits_request(api, req, &c->who, false) < 0)
            goto out;
    }
    if (!found) {
        api_fail(req, WR_ENOTFOUND, "no such endpoint: %s %s", method, path);
        goto out;
    }
    if (resolve(c, needs) < 0)
        goto out;
    if (hit == NULL) {
        method_not_allowed(c);
        goto out;
    }
    c->route = hit;
    if (hit->body_max > 0 && !(hit->flags & API_STREAM)) {
        wr_http_req_set_data(req, c, call_closed);
        wr_http_req_read_body(req, hit->body_max, call_body);
        wr_log_ctx_clear();
        return;
    }
    hit->handler(c);
out:
    wr_log_ctx_clear();
    call_free(c);
}
