/* SPDX-License-Identifier: Apache-2.0 */
/* Internals of the API handlers. */
#pragma once

#include <jansson.h>

#include "api.h"

/* Who is calling: the team of the API key, or the admin team on the unix socket. */
struct wr_caller {
    char team[128];
    char key_id[64]; /* the key's public id; "unix" for the admin on the unix socket */
    bool admin;
};

/* ---- observability (observe.c) ------------------------------------------------------------- */

/* What the API knows of a request for its access line, metrics and audit record (the request's
 * note, http.h): set as the router learns it, reported by api_on_finish. */
struct api_note {
    const char *api;    /* "native", "e2b", "mcp", "ports" (static) */
    const char *route;  /* the route pattern, "/v1/sandboxes/{id}/exec" (static), or "unmatched" */
    const char *action; /* an audited request's action (static), else NULL */
    const char *object_kind; /* "sandbox", "key", ... (static) */
    char object_id[128];
    char team[128];
    char key_id[64];
};
/* The request's note, made (native, unmatched) on first use. */
struct api_note *api_note(struct wr_http_req *req);
/* The caller, once authenticated. */
void api_note_caller(struct wr_http_req *req, const struct wr_caller *who);
/* The object an audited request made (a create's new id). */
void api_note_object(struct wr_http_req *req, const char *id);

/* Authenticate a request by its key (Authorization: Bearer or X-API-Key; none is the admin on
 * the unix socket). Returns 0 with *who filled, or -1 having answered 401. */
int api_authenticate(struct wr_api *api, struct wr_http_req *req, struct wr_caller *who);

/* ---- the node role (h_node.c) ---------------------------------------------------------------- */

/* Whether key is the node token (a node daemon's; compared in constant time). */
bool api_node_token_matches(const struct wr_api *api, const char *key);
/* The caller a gateway names with the node token: the team of its Warren-Team header (an
 * admin with Warren-Admin: 1). Returns 0 with *who filled, or -1 having answered 400. */
int api_node_caller(struct wr_api *api, struct wr_http_req *req, struct wr_caller *who);
/* /healthz and /node/...: true if the request is one (then it is answered). */
bool api_node_handle(struct wr_api *api, struct wr_http_req *req);

/* Moves between nodes through the object store (h_node_move.c, over core/move.h), for who (the
 * node token's caller, or an admin): POST /node/sandboxes/{id}/export (body {}: 200
 * {"manifest", "layers", "bytes"}), POST /node/sandboxes/import (body {"manifest": KEY}: 200
 * with the sandbox, paused to disk), POST /node/images/export (body {"image": REF}: as the
 * sandbox's) and POST /node/images/import (body {"manifest": KEY}: 200 with the image). */
void api_node_export(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                     const char *id);
void api_node_import(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who);
void api_node_image_export(struct wr_api *api, struct wr_http_req *req,
                           const struct wr_caller *who);
void api_node_image_import(struct wr_api *api, struct wr_http_req *req,
                           const struct wr_caller *who);

/* The E2B-compatible API (e2b.c): true if the request is one of it (then it is answered). */
bool e2b_handle(struct wr_api *api, struct wr_http_req *req);

/* Exposed ports (ports.c). The native path /v1/sandboxes/{id}/ports/{port}[/...]: true if
 * the request is one (then it is answered: proxied, or raw TCP at .../tcp). */
bool api_ports_handle(struct wr_api *api, struct wr_http_req *req);
/* The web console (console.c): true if the request is for /console or below (then it is
 * answered: a file of api->console_dir, the app's index.html, or an error). Needs no key. */
bool api_console_handle(struct wr_api *api, struct wr_http_req *req);
/* The MCP server (mcp.c): true if the request is for /mcp (then it is answered). */
bool api_mcp_handle(struct wr_api *api, struct wr_http_req *req);
/* A request routed by E2B's Host or headers to a port of sandbox id (not envd's): proxied,
 * with E2B's proxy answers for errors (and its traffic token for private ports). */
void api_port_e2b(struct wr_api *api, struct wr_http_req *req, const char *id, unsigned port);
/* Proxy req (HTTP, or a WebSocket upgrade: a tunnel after the 101) to port of sb as a native
 * route would, with `target` as the upstream's request-target and `host` as its Host (NULL: the
 * client's). sb is referenced by the proxy as long as it needs it. */
void api_port_proxy(struct wr_api *api, struct wr_http_req *req, struct wr_live_sb *sb,
                    unsigned port, const char *target, const char *host);
/* A port in canonical decimal, 1-65535 (no sign, no leading zero). */
bool api_port_parse(const char *s, size_t n, unsigned *out);
/* The port of the code-interpreter server inside a sandbox (src/interp/warren-interp; E2B's). */
#define WR_API_INTERP_PORT 49999
/* The native code-interpreter routes (h_code.c): req (its body not read) proxied, streamed both
 * ways, to the server on WR_API_INTERP_PORT of sb (referenced by the callee) at path `target`;
 * nothing listening there answers 409 no_interpreter, the other failures as the ports route. */
void api_port_code(struct wr_api *api, struct wr_http_req *req, struct wr_live_sb *sb,
                   const char *target);

/* An answer that may outlive its client: the work it waits for goes on if the client leaves
 * (the request's data slot holds it). api_pending_end frees it and returns the request still
 * waiting for its answer, or NULL if the client left. */
struct api_pending;
struct api_pending *api_pending_new(struct wr_http_req *req);
struct wr_http_req *api_pending_end(struct api_pending *p);
/* A delete's callback (ctx: an api_pending): 204, or the error. */
void api_pending_deleted(void *ctx, const struct wr_err *err);

/* Answer err with its class's HTTP status and code (util/err.h: an errno of the sandbox's own
 * keeps its meaning, ENOENT is 404 `not_found`, ENOSPC 507 `no_space`). */
void api_error(struct wr_http_req *req, const struct wr_err *err);
/* The HTTP status and the JSON error code api_error answers err with. */
int api_error_status(const struct wr_err *err, const char **code);
/* Answer an error of `kind` made here, with the table's status and code (util/err.h) and the
 * formatted message. */
void api_fail(struct wr_http_req *req, enum wr_err_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* JSON of a sandbox record. */
json_t *api_sandbox_json(const struct wr_sandbox_rec *r);
/* RFC 3339 UTC with milliseconds. */
void api_time(int64_t ms, char out[32]);
/* JSON of a process. */
json_t *api_proc_json(struct wr_proc *p);
/* The `usage` object of an ended command ({cpu_seconds, memory_peak_bytes, wall_seconds,
 * source}; camel: E2B's lowerCamelCase keys), or NULL when its exit carried none. */
json_t *api_usage_json(const struct wr_exit *ex, bool camel);

/* A JSON string of bytes from a sandbox or a client (a file name, a path, a link target), which
 * need not be UTF-8: invalid bytes become U+FFFD. Never NULL. */
json_t *api_json_text(const char *s);
/* The same for a message meant for people (an error's): invalid bytes become \xNN. */
json_t *api_json_message(const char *s);
/* Bytes as a JSON string of their base64 (standard, padded). Never NULL. */
json_t *api_json_b64(const uint8_t *p, size_t n);

/* ---- limits (limits.c) ------------------------------------------------------------------- */

/* Take one request token of team's bucket (an admin is exempt: no check, no fields) and put the
 * team's RateLimit-Policy and RateLimit fields on the answer (e2b: also E2B's legacy
 * RateLimit-Limit, -Remaining and -Reset of the request bucket). Returns 0, or -1 having
 * answered 429 `limit` reason `rate` with Retry-After. */
int api_limits_request(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                       bool e2b);
/* Take n tokens of policy pol for who's team (an admin: none). Returns 0, or -1 having answered
 * 429 `limit` reason `rate` with Retry-After (n above the burst: never possible, said so). */
int api_limits_take(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                    enum wr_api_policy pol, uint64_t n);
/* Charge n tokens of pol after the fact (bytes already moved: the bucket may go below empty,
 * and the team's next take waits for it). */
void api_limits_charge(struct wr_api *api, const struct wr_caller *who, enum wr_api_policy pol,
                       uint64_t n);
/* The team quotas for a create of n sandboxes of memory_bytes each (an admin: none). Returns 0,
 * or -1 having answered 429 `limit` reason `quota` with Retry-After. */
int api_limits_quota(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                     uint32_t n, uint64_t memory_bytes);
/* body's `size` (absent or null: nothing), a preset of api->sizes: fills *cpu_millis and
 * *memory_bytes where they are 0 (a cpus or memory_mb of the request wins). Returns 0, or -1
 * having answered 400 (not a string, or no such preset: the message names them). */
int api_apply_size(struct wr_api *api, struct wr_http_req *req, json_t *body, uint32_t *cpu_millis,
                   uint64_t *memory_bytes);
/* Answer a host's limit (err WR_ELIMIT from the manager) as 503 `limit` reason `capacity` with
 * Retry-After retry_s (at least 1). */
void api_limits_capacity(struct wr_http_req *req, const struct wr_err *err, unsigned retry_s);
/* Answer 429 reason "budget" with Retry-After retry_s and msg (h_budget.c's). */
void api_limits_budget(struct wr_http_req *req, unsigned retry_s, const char *msg);

/* ---- budgets (h_budget.c) ----------------------------------------------------------------- */

struct wr_budget;
/* The Warren-Budget header on a response to team, when the team is past a cap of its budget:
 * `soft; used=U; limit=L; unit=U` (hard past the hard cap). */
void api_budget_header(struct wr_api *api, struct wr_http_req *req, const char *team);
/* A create of team past its budget's hard cap: answered 429 reason budget, -1; else 0. */
int api_budget_create(struct wr_api *api, struct wr_http_req *req, const char *team);
/* The sandbox's budget as the API shows it (its state and spend), or JSON null. */
json_t *api_sandbox_budget_json(struct wr_api *api, const char *id);
/* The `budget` member of a create's body into *out (*set: there is one); -1 answered 400. */
int api_sandbox_budget_parse(struct wr_api *api, struct wr_http_req *req, json_t *body,
                             struct wr_budget *out, bool *set);

/* ---- spawn requests (spawn_req.c) ---------------------------------------------------------- */

/* The three doors to a command. Each leaves *sp owning its strings, also on failure, so the
 * caller always frees it with wr_spawn_fini. -1 is a bad request: err is WR_EINVAL with a
 * message naming the field, for the caller to answer in its own protocol. */

/* Fill *sp from the native exec body j (an object of known keys): cmd, env, cwd, user, pty, rows,
 * cols. A bad rows or cols is refused, as a terminal's is. */
int api_spawn_from_exec(json_t *j, struct wr_spawn *sp, struct wr_err *err);
/* Fill *sp from an E2B process.Start request j for the envd user `user` (NULL: the template's),
 * whose relative or empty cwd is resolved against the user's home. A bad pty size keeps the
 * default, as envd does. */
int api_spawn_from_e2b(json_t *j, const char *user, struct wr_spawn *sp, struct wr_err *err);
/* Fill *sp from a terminal's query: cmd (default: the user's login shell), user, cwd, rows,
 * cols; always a pty. */
int api_spawn_from_terminal(struct wr_http_req *req, struct wr_spawn *sp, struct wr_err *err);

/* Append p to out as valid UTF-8 (invalid bytes become U+FFFD). An incomplete sequence at the
 * end is kept in carry (at most 3 bytes) for the next piece, unless final. */
struct wr_buf;
void api_utf8_append(struct wr_buf *out, uint8_t carry[4], size_t *ncarry, const uint8_t *p,
                     size_t n, bool final);

/* body[key], if present and not null, must be an object of at most 256 strings (keys 1 to 256
 * bytes, values at most 64 KiB; env keys without '='): *out is its compact JSON (free it), or
 * NULL if absent. Returns 0, or -1 having answered 400. */
int api_string_map(struct wr_http_req *req, json_t *body, const char *key, char **out);

/* body[key], if present and not null, must be an integer number of seconds, 1 to UINT32_MAX:
 * into *out (left alone when absent). Returns 0, or -1 having answered 400. */
int api_opt_seconds(struct wr_http_req *req, json_t *body, const char *key, uint32_t *out);

/* body[key]: [{"name", "path", "readonly"?}] into v (at most WR_MAX_VOLUMES, pointing into
 * body); absent or null: none. Paths and names are checked by the manager. Returns 0, or -1
 * having answered 400. */
int api_volume_list(struct wr_http_req *req, json_t *body, const char *key,
                    struct wr_volume_mount *v, size_t *n);

/* Parse a JSON object body; on failure answers 400 and returns NULL. */
json_t *api_parse_object(struct wr_http_req *req, const char *body, size_t len);
/* Reject keys of obj not in the NULL-terminated list (400). Returns 0 or -1 (answered). */
int api_only_keys(struct wr_http_req *req, json_t *obj, const char *const *allowed);
/* A Compose service's name as Compose allows it: [a-z0-9][a-z0-9_.-]{0,62}. */
bool api_service_name_ok(const char *name);

/* ---- routes (router.c) ----------------------------------------------------------------------- */

/* ---- network.c: a sandbox's network ------------------------------------------------------- */

/* A wr_net_req and the arrays it points into (the strings are the parsed body's). */
struct api_net_req {
    struct wr_net_req r;
    const char **allow, **deny;
};
void api_net_req_fini(struct api_net_req *r);
/* The native `network` object (create: `enabled` allowed). -1 after answering 400. */
int api_net_parse_native(struct wr_http_req *req, json_t *net, bool create,
                         struct api_net_req *out);
/* E2B's `allow_internet_access` and `network` of a create (or of PUT /sandboxes/{id}/network:
 * create false) body. -1 after answering 400. */
int api_net_parse_e2b(struct wr_http_req *req, json_t *body, bool create, struct api_net_req *out);
/* The record's `network` object as the native API answers it. */
json_t *api_network_json(const struct wr_sandbox_rec *r);

/* A call of a route of the native API, as the router hands it to the route's handler. It is the
 * router's: valid while the handler runs; a handler that answers later copies what it needs. */
#define API_MAX_SEGS 8
struct api_call {
    struct wr_api *api;
    struct wr_http_req *req;
    const struct api_route *route;
    struct wr_caller who;
    const char *team;              /* who.team, or NULL for an admin (acting on any team) */
    const char *seg[API_MAX_SEGS]; /* the path after /v1/ split on '/': for
                                    * /v1/sandboxes/{id}/exec, seg[1] is the id */
    size_t nseg;
    struct wr_live_sb *sb; /* API_LIVE: the running sandbox seg[1] (referenced during the call) */
    struct wr_proc *proc;  /* API_PROC: the process seg[3] of sb */
    uint32_t pid;          /* API_PROC: its pid */
    const char *body;      /* a route with a body limit, not API_STREAM: the whole body */
    size_t len;
    char buf[8192]; /* the path that seg points into */
};

/* What the router does for a route before its handler runs. The routes of one pattern share
 * them; a missing sandbox or process is a 404 before a wrong method is a 405. */
enum api_route_flags {
    API_PUBLIC = 1 << 0, /* no key is needed */
    API_LIVE = 1 << 1,   /* seg[1] names a running sandbox of the caller's team: c->sb */
    API_PROC = 1 << 2,   /* and seg[3] a process of it: c->proc (looked up again after the body) */
    API_STREAM = 1 << 3, /* the handler reads or streams the body itself */
    /* A WebSocket the handler accepts itself may name its key in the subprotocols it offers
     * (router.c: browsers cannot set headers on a WebSocket); never a proxied one's. */
    API_WS_KEY = 1 << 4,
};

/* A route: method and pattern ('/'-separated segments after /v1/, `*` matching any one), the
 * handler, and the largest body the router reads for it (0: none; API_STREAM: the handler reads
 * it). Over the limit, the server answers 413 and the handler does not run. */
struct api_route {
    const char *method;
    const char *pattern;
    void (*handler)(struct api_call *c);
    size_t body_max;
    unsigned flags;
};

/* Handlers of the routes (h_*.c): each answers c->req. */

/* h_webhooks.c */
void api_webhooks_list(struct api_call *c);
void api_webhook_create(struct api_call *c);
void api_webhook_get(struct api_call *c);
void api_webhook_update(struct api_call *c);
void api_webhook_delete(struct api_call *c);
void api_webhook_deliveries(struct api_call *c);
void api_webhook_redeliver(struct api_call *c);

/* h_netlog.c */
void api_sandbox_netlog(struct api_call *c);

/* h_audit.c: GET /v1/audit, the audit trail of the caller's team (an admin's: any team's). */
void api_audit_list(struct api_call *c);
void api_events_list(struct api_call *c);
void api_events_stream(struct api_call *c);
/* h_usage.c */
void api_usage(struct api_call *c);

/* h_sandboxes.c */
void api_sandboxes_list(struct api_call *c);
void api_sandbox_create(struct api_call *c);
void api_sandbox_get(struct api_call *c);
void api_sandbox_delete(struct api_call *c);
void api_sandbox_timeout(struct api_call *c);
void api_sandbox_pause(struct api_call *c);
void api_sandbox_resume(struct api_call *c);
void api_sandbox_metrics(struct api_call *c);
void api_services_list(struct api_call *c);
void api_service_logs(struct api_call *c);
void api_sandbox_disk(struct api_call *c);
void api_sandbox_network_get(struct api_call *c);
void api_sandbox_network_put(struct api_call *c);
void api_sandbox_network_stats(struct api_call *c);

/* h_diff.c */
void api_sandbox_diff(struct api_call *c);

/* h_exec.c */
void api_exec_start(struct api_call *c);
void api_terminal(struct api_call *c);
void api_procs_list(struct api_call *c);
void api_proc_get(struct api_call *c);
void api_proc_release(struct api_call *c);
void api_proc_attach(struct api_call *c);
void api_proc_wait(struct api_call *c);
void api_proc_stdin(struct api_call *c);
void api_proc_stdin_close(struct api_call *c);
void api_proc_signal(struct api_call *c);
void api_proc_resize(struct api_call *c);

/* h_files.c */
void api_file_read(struct api_call *c);
void api_file_write(struct api_call *c);
void api_file_remove(struct api_call *c);
void api_file_stat(struct api_call *c);
void api_file_list(struct api_call *c);
void api_file_watch(struct api_call *c);
void api_file_mkdir(struct api_call *c);
void api_file_move(struct api_call *c);
/* Answer with the whole file at path in the sandbox (200 application/octet-stream with its
 * length), read as user (NULL: the image's user) on a connection of its own; errors as
 * api_error. */
void api_file_download(struct wr_http_req *req, struct wr_live_sb *sb, const char *path,
                       const char *user);

/* h_budget.c: GET, PUT, DELETE /v1/teams/{team}/budget and /v1/sandboxes/{id}/budget
 * (docs/usage.md "Budgets") */
void api_team_budget_get(struct api_call *c);
void api_team_budget_put(struct api_call *c);
void api_team_budget_delete(struct api_call *c);
void api_sandbox_budget_get(struct api_call *c);
void api_sandbox_budget_put(struct api_call *c);
void api_sandbox_budget_delete(struct api_call *c);

/* limits.c: GET, PUT, DELETE /v1/teams/{team}/limits (docs/operations.md "Limits") */
void api_team_limits_get(struct api_call *c);
void api_team_limits_put(struct api_call *c);
void api_team_limits_delete(struct api_call *c);

/* h_keys.c */
void api_keys_list(struct api_call *c);
void api_key_create(struct api_call *c);
void api_key_delete(struct api_call *c);

/* h_images.c: templates, snapshots, and a sandbox's snapshot and fork */
void api_templates_list(struct api_call *c);
void api_template_get(struct api_call *c);
void api_template_delete(struct api_call *c);
void api_template_prune(struct api_call *c);
void api_snapshots_list(struct api_call *c);
void api_snapshot_get(struct api_call *c);
void api_snapshot_delete(struct api_call *c);
void api_sandbox_snapshot(struct api_call *c);
void api_sandbox_fork(struct api_call *c);
/* 403: only an admin key makes a shared template (h_images.c). */
void api_forbid_shared(struct wr_http_req *req);

/* h_warm.c: GET /v1/warm-pools */
void api_warm_pools(struct api_call *c);
/* JSON of a template of the store as the caller sees it (h_images.c). */
json_t *api_template_json(struct wr_api *api, const struct wr_caller *who,
                          const struct wr_image_rec *r);

/* h_oci.c and h_build.c */
void api_template_import(struct api_call *c);
void api_template_pull(struct api_call *c);
void api_template_build(struct api_call *c);

/* ports.c: GET /v1/sandboxes/{id}/ports */
void api_ports_list(struct api_call *c);

/* h_code.c: the code interpreter (docs/code-interpreter.md) */
void api_code_execute(struct api_call *c);
void api_code_contexts_list(struct api_call *c);
void api_code_context_create(struct api_call *c);
void api_code_context_delete(struct api_call *c);
void api_code_context_restart(struct api_call *c);

/* desktop.c: the desktop and browser of a sandbox (docs/desktop.md). The keyboard's body: text
 * to type (WR_DESKTOP_MAX_TEXT bytes), JSON-escaped. */
#define API_DESKTOP_BODY_MAX (128u << 10)
void api_desktop_get(struct api_call *c);
void api_desktop_start(struct api_call *c);
void api_desktop_screenshot(struct api_call *c);
void api_desktop_mouse_get(struct api_call *c);
void api_desktop_mouse(struct api_call *c);
void api_desktop_keyboard(struct api_call *c);
void api_desktop_windows(struct api_call *c);
void api_browser_start(struct api_call *c);
void api_cdp(struct api_call *c);
void api_cdp_version(struct api_call *c);

/* h_volumes.c */
void api_volumes_list(struct api_call *c);
void api_volume_create(struct api_call *c);
void api_volume_get(struct api_call *c);
void api_volume_delete(struct api_call *c);
