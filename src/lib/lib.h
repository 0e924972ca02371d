/* SPDX-License-Identifier: Apache-2.0 */
/* libwarren's inside: the client handle, the JSON round trip every call makes, and the bridge
 * from the project's error type (struct wr_err) to the public one (warren_error). Nothing here
 * is exported (libwarren.map lets out warren_* only). */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "../../include/warren.h"
#include "../util/buf.h"
#include "../util/err.h"
#include "http.h"

struct warren {
    struct wl_http *http; /* the connection (made again by the transport when closed) */
    char *url, *key;      /* key NULL: none; kept for the extra connections exec makes */
    char *request_id;     /* NULL: none */
};

/* Fill out (if not NULL) from e, with the daemon's HTTP status (0: none) and API error code
 * (NULL: none). Returns -1. */
int wl_fail(warren_error *out, const struct wr_err *e, int status, const char *api_code);

/* wl_fail for an error the library finds itself (no answer): kind, errno, message. */
int wl_failf(warren_error *out, enum wr_err_kind kind, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A non-2xx answer as out: the kind of its code or status, the status, the code, and the line
 * wl_http_error makes of it ("sandbox x not found (not_found)"). Returns -1. */
int wl_fail_resp(warren_error *out, const struct wl_http_resp *resp);

/* Clear out (if not NULL) to "no error". */
void wl_ok(warren_error *out);

/* Check a sandbox id (^[A-Za-z0-9_-]{1,64}$) or a snapshot's id or name ([A-Za-z0-9._-], 1 to
 * 128), which become path segments. Returns 0, or -1 with out (WARREN_EINVAL). */
int wl_check_id(const char *id, warren_error *out);
int wl_check_name(const char *what, const char *name, warren_error *out);

/* One JSON round trip on w's connection: body (NULL: none) as application/json, extra headers
 * ("Name: value", NULL-terminated, or NULL). On a 2xx answer *res (if res is not NULL) gets the
 * parsed body, NULL when it was empty. Returns the status, or -1 with out. */
int wl_api(warren *w, const char *method, const char *target, json_t *body,
           const char *const *extra, json_t **res, warren_error *out);

/* obj[K] = V for each "K=V" of kv (NULL-terminated; NULL is none). Returns 0, or -1 with out
 * (WARREN_EINVAL naming `what`). */
int wl_kv_object(const char *what, const char *const *kv, json_t *obj, warren_error *out);

/* "/v1/sandboxes/ID/<rest>?path=<escaped path>" (the caller frees it). */
char *wl_files_target(const char *id, const char *rest, const char *path);

/* Request a fresh connection to w's daemon with w's key and request id (for a second thread).
 * Returns 0 with *out (wl_http_close), or -1 with out. */
int wl_http_again(const warren *w, struct wl_http **c, warren_error *out);

/* The POST /v1/sandboxes body of o (sandbox.c). Returns 0 with *body (the caller's, also on
 * failure), or -1 with out. */
int wl_create_body(const warren_create_opts *o, json_t **body, warren_error *out);

/* The POST .../exec body of o in `mode` ("stream" or "background") (exec.c). As
 * wl_create_body. */
int wl_exec_body(const warren_exec_opts *o, const char *mode, json_t **body, warren_error *out);
