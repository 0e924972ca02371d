/* SPDX-License-Identifier: Apache-2.0 */
/* The E2B-compatible API (docs/e2b.md): the control plane of E2B's REST API and envd, the API of
 * the agent E2B runs in each sandbox, in the Connect protocol with the JSON codec. The existing
 * E2B and Novita SDKs reach it on the daemon's own port, unchanged. Internals shared by the
 * e2b_*.c files and connectrpc.c; everything here runs on the loop thread. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api_int.h"

/* The envd version advertised: the highest whose features are served (octet-stream uploads
 * are 0.5.7; file metadata, 0.6.2, is not). */
#define E2B_ENVD_VERSION "0.5.7"
#define E2B_ENVD_PORT    49983
#define E2B_TOKEN_HEX    64

/* ---- the Connect protocol (connectrpc.c) --------------------------------------------------- */

/* The largest Connect request accepted (a SendInput carries base64 stdin). */
#define CONNECT_MAX_REQUEST (4u << 20)

/* The HTTP status of a Connect error code ("not_found" -> 404, ...); 500 if unknown. */
int connect_http_status(const char *code);

/* Unary answers: 200 application/json with msg (reference taken), or the error's status with
 * {"code": code, "message": ...}. */
void connect_unary_ok(struct wr_http_req *req, json_t *msg);
void connect_unary_error(struct wr_http_req *req, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void connect_unary_err(struct wr_http_req *req, const struct wr_err *err);

/* Server streams: start the 200 application/connect+json response (chunked), send a message
 * envelope (reference taken), end with the end-stream envelope ({} or {"error": ...}). An error
 * before the stream started starts it first: Connect clients read errors of streams from the
 * end-stream frame only. connect_stream_write returns the bytes queued (backpressure). */
void connect_stream_start(struct wr_http_req *req);
size_t connect_stream_msg(struct wr_http_req *req, json_t *msg);
void connect_stream_end(struct wr_http_req *req, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void connect_stream_end_err(struct wr_http_req *req, const struct wr_err *err);

/* Decode a request body: bare JSON (unary, Content-Type application/json) or exactly one
 * uncompressed envelope of JSON (streaming, application/connect+json). The message must be a
 * JSON object. On failure answers the Connect error (unary or in an end-stream frame) and
 * returns NULL. */
json_t *connect_decode(struct wr_http_req *req, bool streaming, const char *body, size_t len);
/* The one message of a server-streaming request body: exactly one uncompressed envelope
 * (flags 0, a 4-byte big-endian length, then the payload) filling body[0..len). Returns 0 with
 * *payload and *n (pointing into body), or -1 with the Connect *code and *msg (static strings). */
int connect_unwrap(const char *body, size_t len, const char **payload, size_t *n, const char **code,
                   const char **msg);

/* ---- shared by the E2B handlers (e2b.c) ---------------------------------------------------- */

/* /events/...: E2B's lifecycle events and webhooks (e2b_events.c); seg: the path's segments
 * (seg[0] "events"). */
void e2b_events(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                char **seg, size_t nseg);

struct e2b_proc_meta; /* e2b_process.c */
struct e2b_watcher;   /* e2b_fs.c */

struct wr_e2b {
    uint8_t secret[32];           /* envd access tokens derive from it */
    struct e2b_proc_meta *procs;  /* the config and tag of processes started through envd */
    struct e2b_watcher *watchers; /* CreateWatcher's watches */
    uint64_t watcher_seq;
};

/* A request to envd, once routed and authenticated. */
struct e2b_envd {
    struct wr_api *api;
    struct wr_live_sb *sb; /* referenced for the handler's call; take another ref to keep it */
    const char *user;      /* from Authorization: Basic, or NULL: the template's user */
};

/* The sandbox's envd access token (hex HMAC-SHA256 of the id under the daemon's secret). */
void e2b_token(const struct wr_api *api, const char *sandbox_id, char out[E2B_TOKEN_HEX + 1]);
/* The sandbox's traffic access token, E2B's `trafficAccessToken` (hex HMAC-SHA256 of
 * "sandbox-traffic-" + id under the daemon's secret): requests to the ports of a sandbox with
 * private ports carry it in the e2b-traffic-access-token header. */
void wr_e2b_traffic_token(const struct wr_api *api, const char *sandbox_id,
                          char out[E2B_TOKEN_HEX + 1]);
/* An absolute path for `path` as seen by `user` (relative paths and ~ resolve against the
 * user's home); NULL for an empty or too long path. The caller frees it. */
char *e2b_abs_path(const char *user, const char *path);
/* A JSON string member, or NULL (also when it is not a string). Accepts camelCase and
 * snake_case names: pass both (snake may be NULL). */
const char *e2b_str(json_t *obj, const char *camel, const char *snake);

/* The period of keepalive messages on a stream: Keepalive-Ping-Interval (seconds, 1 to 3600),
 * else envd's 50 s. */
uint64_t e2b_keepalive_ms(struct wr_http_req *req);

/* A method of a Connect service and its handler (msg is borrowed; the sandbox was checked to be
 * alive; ev->user is valid during the call only). */
struct e2b_method {
    const char *name; /* "Start" */
    bool streaming;   /* a server stream (application/connect+json) rather than a unary call */
    void (*handler)(struct e2b_envd *ev, struct wr_http_req *req, json_t *msg);
};
/* A Connect service: its name and its methods, a table ending with a NULL name. */
struct e2b_service {
    const char *name; /* "process.Process": its calls are POST /process.Process/<method> */
    const struct e2b_method *methods;
};
/* Read and decode a call of svc (POST, a known method, at most CONNECT_MAX_REQUEST bytes) and
 * hand it to the method's handler; otherwise answer the Connect error. */
void e2b_rpc(struct e2b_envd *ev, struct wr_http_req *req, const struct e2b_service *svc,
             const char *method);

/* Control plane: answers any request whose path is one of E2B's REST API (/sandboxes...,
 * /v2/sandboxes..., /snapshots, /templates/...). The caller was authenticated (X-API-KEY). */
void e2b_control(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who);

/* envd: the process and filesystem services (e2b_process.c, e2b_fs.c), /files, /health. */
extern const struct e2b_service e2b_process_service;
extern const struct e2b_service e2b_fs_service;
void e2b_files(struct e2b_envd *ev, struct wr_http_req *req);
/* Free the state of the process and filesystem services (at the daemon's stop). */
void e2b_process_close(struct wr_e2b *e);
void e2b_fs_close(struct wr_e2b *e);
