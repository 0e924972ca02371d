/* SPDX-License-Identifier: Apache-2.0 */
/* Internals of the API handlers. */
#pragma once

#include <jansson.h>

#include "api.h"

/* Who is calling: the team of the API key, or the admin team on the unix socket. */
struct wr_caller {
    char team[128];
    bool admin;
};

/* The path split on '/' (after /v1): seg[0] = "sandboxes", seg[1] = id, ... */
#define API_MAX_SEGS 8
struct api_route {
    const char *seg[API_MAX_SEGS];
    size_t nseg;
    char buf[8192];
};

/* Authenticate a request by its key (Authorization: Bearer or X-API-Key; none is the admin on
 * the unix socket). Returns 0 with *who filled, or -1 having answered 401. */
int api_authenticate(struct wr_api *api, struct wr_http_req *req, struct wr_caller *who);

/* The E2B-compatible API (e2b.c): true if the request is one of it (then it is answered). */
bool e2b_handle(struct wr_api *api, struct wr_http_req *req);

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

/* A JSON string of bytes from a sandbox or a client (a file name, a path, a link target), which
 * need not be UTF-8: invalid bytes become U+FFFD. Never NULL. */
json_t *api_json_text(const char *s);
/* The same for a message meant for people (an error's): invalid bytes become \xNN. */
json_t *api_json_message(const char *s);
/* Bytes as a JSON string of their base64 (standard, padded). Never NULL. */
json_t *api_json_b64(const uint8_t *p, size_t n);

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

/* What a body callback needs to know about the request it continues. */
struct body_ctx {
    struct wr_api *api;
    char team[128]; /* the caller's team; "" for an admin acting on any team */
    char id[72];
};
/* Read the body (at most max bytes; 413 past it) and continue in cb, whose request data is a
 * struct body_ctx (freed if the client leaves first). */
void read_body_with(struct wr_api *api, struct wr_http_req *req, const char *team, const char *id,
                    size_t max, void (*cb)(struct wr_http_req *, const char *, size_t));
/* In cb: take the body context back (the request's data is then free for the next stage). */
struct body_ctx *take_body_ctx(struct wr_http_req *req);

/* Handlers (h_*.c); each answers the request. */
void api_sandboxes(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                   const struct api_route *rt);
void api_exec(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
              struct wr_msb *sb, const struct api_route *rt);
void api_files(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
               struct wr_msb *sb, const struct api_route *rt);
/* Answer with the whole file at path in the sandbox (200 application/octet-stream with its
 * length), read as user (NULL: the image's user) on a connection of its own; errors as
 * api_error. */
void api_file_download(struct wr_http_req *req, struct wr_msb *sb, const char *path,
                       const char *user);
void api_keys(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
              const struct api_route *rt);
/* h_images.c: /v1/templates, /v1/snapshots, and POST /v1/sandboxes/{id}/snapshots and /fork
 * (body callbacks of read_body_with). */
void api_templates(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                   const struct api_route *rt);
void api_snapshots(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                   const struct api_route *rt);
/* 403: only an admin key makes a shared template (h_images.c). */
void api_forbid_shared(struct wr_http_req *req);
/* JSON of a template of the store as the caller sees it (h_images.c). */
json_t *api_template_json(struct wr_api *api, const struct wr_caller *who,
                          const struct wr_image_rec *r);
/* h_oci.c: POST /v1/templates/import and /v1/templates/pull. */
void api_oci(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
             const struct api_route *rt);
/* h_build.c: POST /v1/templates/build. */
void api_build(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who);
void api_snapshot_body(struct wr_http_req *req, const char *body, size_t len);
void api_fork_body(struct wr_http_req *req, const char *body, size_t len);
void api_volumes(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                 const struct api_route *rt);
