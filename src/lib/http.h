/* SPDX-License-Identifier: Apache-2.0 */
/* libwarren's transport, also used by the `warren` command (src/cli/client.h): a small
 * blocking HTTP/1.1 client for talking to warrend: unix:// or http:// (no TLS), request
 * bodies from memory, streamed from an fd, or sent chunk by chunk as they come; responses parsed
 * by llhttp with the body handed to a callback as it arrives. One struct wl_http is one
 * connection, reused while the server keeps it alive; it is not thread-safe (use one per
 * thread). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/buf.h"
#include "../util/err.h"

/* Append s percent-encoded for a query component (RFC 3986 unreserved characters pass). */
void wl_buf_add_escaped(struct wr_buf *b, const char *s);

struct wl_http;

enum wl_body_kind {
    WL_BODY_NONE,   /* no body (Content-Length: 0 for POST/PUT) */
    WL_BODY_MEM,    /* body/body_len */
    WL_BODY_FD,     /* read body_fd to EOF in 64 KiB pieces; body_fd_len >= 0 sends
                     * Content-Length (and that many bytes), -1 sends it chunked */
    WL_BODY_STREAM, /* chunked; the caller sends chunks (wl_http_begin/_chunk/_end) */
};

/* Called with each piece of a 2xx response body as it arrives. Returns 0, or -1 with err filled
 * to abandon the response (the connection is then closed). */
typedef int (*wl_http_body_fn)(const char *data, size_t len, void *ctx, struct wr_err *err);

struct wl_http_resp;

struct wl_http_req {
    const char *method;       /* "GET", "POST", ... */
    const char *target;       /* "/v1/...", query already percent-encoded */
    const char *content_type; /* NULL: no Content-Type header */
    const char *accept;       /* NULL: "application/json" */
    const char *const *extra; /* NULL-terminated "Name: value" headers, or NULL */
    enum wl_body_kind body_kind;
    const void *body;
    size_t body_len;
    int body_fd;
    int64_t body_fd_len;
    wl_http_body_fn on_body; /* NULL: the body is collected into resp->body */
    /* Called once the status and headers are in, before any body; NULL: none. Returns 0, or -1
     * with err to abandon the response. */
    int (*on_headers)(const struct wl_http_resp *resp, void *ctx, struct wr_err *err);
    void *ctx; /* for on_body and on_headers */
};

struct wl_http_header {
    char *name, *value;
};

struct wl_http_resp {
    int status;
    struct wl_http_header *headers;
    size_t n_headers;
    /* The collected body, NUL-terminated: all of it when req->on_body is NULL, else only the
     * body of a non-2xx answer (capped at 64 KiB). */
    char *body;
    size_t body_len;
};

/* Open a connection to `url` ("unix:///path" or "http://host[:port]", port default 80) and
 * remember `key` (NULL: none) to send as "Authorization: Bearer" with every request. Returns 0
 * with *out owned by the caller (wl_http_close), or -1 with err (WR_EINVAL for a bad URL,
 * WR_EUNSUPPORTED for https, WR_ESYS when the connect fails). */
int wl_http_open(const char *url, const char *key, struct wl_http **out, struct wr_err *err);

/* Check that url is one wl_http_open accepts, without connecting. Returns 0 or -1 with err. */
int wl_http_check_url(const char *url, struct wr_err *err);

/* Drop the connection now (the next request makes a new one): abandons a request half sent,
 * so the server never takes its body as complete. */
void wl_http_abort(struct wl_http *c);

/* Close the connection and free it; NULL is fine. */
void wl_http_close(struct wl_http *c);

/* Send a request with X-Request-Id `id` on every following request (NULL: let the server make
 * one). The string must outlive the connection. */
void wl_http_set_request_id(struct wl_http *c, const char *id);

/* One round trip: send req (its whole body for MEM and FD; STREAM is not allowed here), then
 * read the response into resp (wl_http_resp_fini it). Returns 0 when a response arrived,
 * whatever its status, or -1 with err when the transport or the parse failed or on_body
 * refused. A reused keep-alive connection that the server had closed is retried once on a fresh
 * one when nothing was answered and the body can be sent again (not FD). */
int wl_http_request(struct wl_http *c, const struct wl_http_req *req, struct wl_http_resp *resp,
                    struct wr_err *err);

/* The streaming form: wl_http_begin sends the head of a WL_BODY_STREAM request, then each
 * wl_http_chunk sends one chunk (len 0 is skipped), wl_http_end the last chunk, and
 * wl_http_response reads the answer (as wl_http_request). After a failed send the server may
 * already have answered (say, 404): wl_http_response still tries to read that answer. Each
 * returns 0, or -1 with err. */
int wl_http_begin(struct wl_http *c, const struct wl_http_req *req, struct wr_err *err);
int wl_http_chunk(struct wl_http *c, const void *data, size_t len, struct wr_err *err);
int wl_http_end(struct wl_http *c, struct wr_err *err);
int wl_http_response(struct wl_http *c, const struct wl_http_req *req, struct wl_http_resp *resp,
                     struct wr_err *err);

/* The first value of header `name` (case-insensitive), or NULL. */
const char *wl_http_resp_header(const struct wl_http_resp *resp, const char *name);

/* Free what resp holds and zero it; a zeroed resp is fine. */
void wl_http_resp_fini(struct wl_http_resp *resp);

/* Upgrade to a WebSocket: GET target with Upgrade: websocket and the Sec-WebSocket-Key key64 on
 * the connection (made again if closed). On the server's 101 the socket is handed over: *fd
 * (the caller owns it; the wl_http has none after) and `rest` the bytes that came after the
 * head. Returns 0, or -1 with err (the error answer's message and status). */
int wl_http_upgrade(struct wl_http *c, const char *target, const char *key64, int *fd,
                    struct wr_buf *rest, struct wr_err *err);

/* The error kind of an API error code (the names of src/util/err.h's kinds: "not_found" ->
 * WR_ENOTFOUND), else of the HTTP status (401 -> WR_EUNAUTHORIZED, 503 -> WR_ELIMIT, ...), else
 * WR_EINTERNAL. code may be NULL. */
enum wr_err_kind wl_http_kind_of(const char *code, int status);

/* Turn a non-2xx response into one readable line in err: the {"code","message"} body when there
 * is one ("sandbox x not found (not_found)"), else the status and the body's first line; a
 * Retry-After is mentioned. The kind is wl_http_kind_of(code, status). Always
 * returns -1. */
int wl_http_error(const struct wl_http_resp *resp, struct wr_err *err);
