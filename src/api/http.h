/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP/1.1 server on libuv with llhttp: keep-alive, chunked request and response bodies,
 * streamed bodies both ways with backpressure, WebSocket upgrade (wslay). Knows nothing of
 * sandboxes: one handler gets every request.
 *
 * Ownership: a struct wr_http_req belongs to the server. It stays valid from the handler call
 * until the response has ended AND the body (if any) was consumed or the client went away; after
 * the on_close callback the handler must not touch it again. All calls happen on the loop
 * thread. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "../util/buf.h"
#include "../util/err.h"

struct wr_http_server;
struct wr_http_req;
struct wr_ws;

typedef void (*wr_http_handler_fn)(struct wr_http_req *req, void *ctx);

/* What the server's on_finish gets when a request is over. */
struct wr_http_finish {
    int status;         /* the status answered; 0: none was */
    uint64_t bytes_in;  /* request body bytes read */
    uint64_t bytes_out; /* response body bytes queued */
    double duration_s;  /* from the request's first byte to its end */
    bool aborted;       /* the client went away before the answer was complete */
};

/* No cap, for the cap fields below. */
#define WR_HTTP_UNLIMITED UINT32_MAX

/* Every number left 0 takes its default. Timeouts count only the client's silence: a request
 * whose response the server is still producing (a stream, a long poll, a WebSocket) has none. */
struct wr_http_config {
    uv_loop_t *loop;
    const char *unix_path;      /* NULL: no unix listener; the file is replaced, mode 0600 */
    const char *tcp_host;       /* NULL: no TCP listener */
    int tcp_port;               /* 0: an ephemeral port (see wr_http_server_tcp_port) */
    size_t max_header_bytes;    /* request line + headers; default 64 KiB; beyond: 431 */
    unsigned idle_timeout_ms;   /* keep-alive connection idle timeout; default 60 s */
    unsigned header_timeout_ms; /* to send a request line and headers, from the connection or
                                 * the request's first byte; default 20 s; then: close */
    unsigned body_timeout_ms;   /* a request body being read that brings no byte for this long:
                                 * 408 and close; default 30 s */
    /* Caps on TCP connections (the unix socket has none). Past max_conns a new connection
     * closes the oldest idle keep-alive connection, or else the oldest one lingering after its
     * last answer, or else the oldest one still sending its request head, or else is answered
     * 503 (Retry-After) and closed. */
    uint32_t max_conns;            /* default 4096 */
    uint32_t max_conns_per_client; /* from one client (peers.h); beyond: 503; default 1024 */
    uint32_t max_unauthenticated;  /* still sending their request head; beyond: the oldest of
                                    * them is closed; default max_conns / 2, at most 4096 */
    uint32_t max_body_conns;       /* with a request body still arriving; beyond: 503; default
                                    * max_conns / 2 */
    /* Named in a Warren-Region header on every response (NULL or "": none). */
    const char *region;
    wr_http_handler_fn handler;
    void *ctx;
    /* Optional: called once per request the handler saw or the server answered itself (a 400,
     * 413 or 503 of its own), when it is over: its response written out or the client gone
     * (before the handler's on_close). A sub-request is reported by its own on_finish
     * (struct wr_http_sub_req). */
    void (*on_finish)(struct wr_http_req *req, const struct wr_http_finish *f, void *ctx);
};

int wr_http_server_start(const struct wr_http_config *cfg, struct wr_http_server **out,
                         struct wr_err *err);
int wr_http_server_tcp_port(const struct wr_http_server *srv);
/* The connections open now: over TCP, over the unix socket, and (of either) WebSockets. */
void wr_http_server_conns(const struct wr_http_server *srv, uint32_t *tcp, uint32_t *unix_conns,
                          uint32_t *websockets);
/* Stop listening, close every connection (requests see on_close), free the server once all
 * handles are closed, then call done(arg) if given. */
void wr_http_server_stop(struct wr_http_server *srv, void (*done)(void *arg), void *arg);

/* ---- the request ---------------------------------------------------------------------------- */

const char *wr_http_req_method(const struct wr_http_req *req); /* "GET", ... */
const char *wr_http_req_path(const struct wr_http_req *req);   /* percent-decoded, no query */
/* The first value of query parameter `name`, percent-decoded ('+' is a space); NULL if absent.
 * wr_http_req_query_all fills up to max values and returns how many there were. */
const char *wr_http_req_query(const struct wr_http_req *req, const char *name);
size_t wr_http_req_query_all(const struct wr_http_req *req, const char *name, const char **vals,
                             size_t max);
/* A header's value (case-insensitive name; repeated headers joined with ", "), or NULL. */
const char *wr_http_req_header(const struct wr_http_req *req, const char *name);
const char *wr_http_req_id(const struct wr_http_req *req); /* X-Request-Id */
bool wr_http_req_is_unix(const struct wr_http_req *req);   /* came over the unix socket */
/* Where the request came from: "tcp:ADDR", "unix", or "internal" for a sub-request. */
const char *wr_http_req_peer(const struct wr_http_req *req);
/* A note of the handler's about the request (what on_finish reports on), apart from its data
 * slot: replaced notes are freed with their note_free, and the last one when the request is
 * freed (after on_finish). */
void wr_http_req_set_note(struct wr_http_req *req, void *note, void (*note_free)(void *note));
void *wr_http_req_note(const struct wr_http_req *req);
/* The code of the error the request was answered with (wr_http_respond_error's), or "". */
const char *wr_http_req_error_code(const struct wr_http_req *req);
/* Content-Length of the request body, or -1 if chunked or absent. */
int64_t wr_http_req_content_length(const struct wr_http_req *req);

/* Per-request state for the handler, and a callback when the request is over: the response
 * ended and was flushed, or the client disconnected (aborted = true). After it the request is
 * freed. */
void wr_http_req_set_data(struct wr_http_req *req, void *data,
                          void (*on_close)(struct wr_http_req *req, void *data, bool aborted));
void *wr_http_req_data(const struct wr_http_req *req);

/* ---- request bodies ---------------------------------------------------------------------- */

/* Read the whole body into memory, at most max bytes (beyond: the server answers 413 itself and
 * cb is not called). cb gets the bytes (NUL-terminated for convenience; len excludes the NUL). */
void wr_http_req_read_body(struct wr_http_req *req, size_t max,
                           void (*cb)(struct wr_http_req *req, const char *body, size_t len));

/* Stream the body: on_data for each piece as it arrives (the piece is valid only during the
 * call), on_end once after the last. wr_http_req_pause_body stops reading from the socket (TCP
 * backpressure to the client) until wr_http_req_resume_body. */
void wr_http_req_stream_body(struct wr_http_req *req,
                             void (*on_data)(struct wr_http_req *req, const char *p, size_t n),
                             void (*on_end)(struct wr_http_req *req));
void wr_http_req_pause_body(struct wr_http_req *req);
void wr_http_req_resume_body(struct wr_http_req *req);
/* The body is interactive input (a terminal's stdin): the client may be silent for as long as it
 * likes, so the body timeout does not apply to it. */
void wr_http_req_interactive_body(struct wr_http_req *req);

/* ---- responses --------------------------------------------------------------------------- */

/* Add a response header (before the response starts). */
void wr_http_resp_header(struct wr_http_req *req, const char *name, const char *value);

/* A complete response. Every response carries X-Request-Id (and Warren-Region, when the server
 * has one). */
void wr_http_respond(struct wr_http_req *req, int status, const char *content_type,
                     const void *body, size_t len);
/* JSON response; takes the reference to j. */
void wr_http_respond_json(struct wr_http_req *req, int status, json_t *j);
/* {"code": code, "message": ...} */
void wr_http_respond_error(struct wr_http_req *req, int status, const char *code, const char *fmt,
                           ...) __attribute__((format(printf, 4, 5)));

/* The same with the members of `extra` (a JSON object; the reference is taken; NULL: none) added
 * beside code and message. */
void wr_http_respond_error_with(struct wr_http_req *req, int status, const char *code,
                                json_t *extra, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* From now on wr_http_respond_error answers {"code": <status int>, "message": ...} for this
 * request (the shape of the E2B API), whatever code string it is given. */
void wr_http_req_numeric_errors(struct wr_http_req *req);

/* A streamed response: with content_length >= 0 a fixed length, else chunked. */
void wr_http_resp_start(struct wr_http_req *req, int status, const char *content_type,
                        int64_t content_length);
/* Queue bytes (copied). Returns the number of bytes queued but not yet written to the socket,
 * for backpressure: stop producing above ~1 MiB and wait for on_drain. */
size_t wr_http_resp_write(struct wr_http_req *req, const void *p, size_t n);
/* Called once when the queued bytes fall below the low-water mark (256 KiB) after a write
 * that left them above it. */
void wr_http_resp_on_drain(struct wr_http_req *req, void (*on_drain)(struct wr_http_req *req));
size_t wr_http_resp_pending(const struct wr_http_req *req);
/* End the streamed response (the final chunk for chunked). */
void wr_http_resp_end(struct wr_http_req *req);
/* True once the response has started (headers queued). */
bool wr_http_resp_started(const struct wr_http_req *req);

/* ---- WebSocket --------------------------------------------------------------------------- */

struct wr_ws_callbacks {
    /* A whole message (fragments joined). opcode: 1 text, 2 binary. */
    void (*on_message)(struct wr_ws *ws, int opcode, const uint8_t *p, size_t n, void *ctx);
    /* The connection is gone (close handshake or transport loss). After it ws is freed. */
    void (*on_close)(struct wr_ws *ws, void *ctx);
};

/* Answer the upgrade (validates Sec-WebSocket-Key/Version; otherwise responds 400 and returns
 * NULL). From here the request is owned by the WebSocket. */
struct wr_ws *wr_http_ws_accept(struct wr_http_req *req, const struct wr_ws_callbacks *cbs,
                                void *ctx);
/* Send one message (copied). Returns bytes queued but not yet written (backpressure). */
size_t wr_ws_send(struct wr_ws *ws, int opcode, const void *p, size_t n);
/* Start the close handshake with a status code. */
void wr_ws_close(struct wr_ws *ws, uint16_t code, const char *reason);
/* Backpressure from the receiver: while paused no on_message comes (at most the messages
 * already in wslay's buffer) and the socket is not read, so the client's sends block. */
void wr_ws_pause(struct wr_ws *ws);
void wr_ws_resume(struct wr_ws *ws);
/* Called when the bytes queued fall below the low-water mark (256 KiB) after a wr_ws_send
 * that left them at or above it. */
void wr_ws_on_drain(struct wr_ws *ws, void (*on_drain)(struct wr_ws *ws, void *ctx));
/* Bytes queued and not yet written (as wr_ws_send returns). */
size_t wr_ws_pending(const struct wr_ws *ws);

/* ---- proxies ----------------------------------------------------------------------------- */

/* The request-target as the client sent it (not decoded; with the query). */
const char *wr_http_req_target(const struct wr_http_req *req);
/* The request's headers in the order they came (repeats joined with ", "): i < count. */
size_t wr_http_req_header_count(const struct wr_http_req *req);
void wr_http_req_header_at(const struct wr_http_req *req, size_t i, const char **name,
                           const char **value);
/* The request asks to switch protocols (Upgrade with Connection: upgrade, or CONNECT). */
bool wr_http_req_is_upgrade(const struct wr_http_req *req);
/* A request with Expect: 100-continue gets its interim "100 Continue" now (once; nothing for
 * others, or once the response or the body started): a proxy that streams the body says so
 * before asking for it. */
void wr_http_req_continue(struct wr_http_req *req);
/* Close the client's connection now, whatever was sent: how a proxy tells the client that a
 * response it started will not complete. on_close(aborted) follows from the loop. */
void wr_http_req_abort(struct wr_http_req *req);
/* The idle timeout of this connection once this request is over (ms; 0: the server's). */
void wr_http_req_idle_timeout(struct wr_http_req *req, unsigned ms);
/* State of the handler's for the request's connection, kept across its requests:
 * data_free(data) is called when the connection goes (after the on_close of its last request)
 * or is taken over. */
void wr_http_conn_set_data(struct wr_http_req *req, void *data, void (*data_free)(void *data));
void *wr_http_conn_data(const struct wr_http_req *req);
/* Take the connection over, after the request head and before any response or body call: *fd
 * gets a dup of the client's socket (nonblocking, close-on-exec; the caller owns it), *is_unix
 * whether it came over the unix socket, and `rest` the bytes already read past the head (the
 * body's start, or the first bytes of an upgraded protocol). The server then forgets the
 * request (no on_close) and the connection. Returns 0, or -1 with err (WR_ECONFLICT: a
 * response, body read or WebSocket has started). */
int wr_http_req_hijack(struct wr_http_req *req, int *fd, bool *is_unix, struct wr_buf *rest,
                       struct wr_err *err);

/* ---- sub-requests -------------------------------------------------------------------------- */

/* A request made inside the daemon (the MCP server's tools, src/api/mcp.c): it goes to a
 * handler as if a client had sent it, and its answer is collected in memory. Every request and
 * response call above works on it: the body comes from memory (read or streamed, with pause and
 * resume), the response (complete or streamed) is buffered; a WebSocket upgrade answers 400 and
 * a hijack fails (WR_ECONFLICT). The handler's calls never call back into it synchronously:
 * bodies, progress and the end are delivered from the loop. */
struct wr_http_sub;

struct wr_http_sub_req {
    const char *method;         /* "GET", ... */
    const char *target;         /* path and query, percent-encoded as on the wire */
    const char *const *headers; /* NULL-terminated name, value, name, value, ...; or NULL */
    const void *body;           /* copied; NULL/0: none */
    size_t len;
    size_t max_body;  /* response body bytes kept (beyond: dropped, `truncated`); 0: 16 MiB */
    bool is_unix;     /* wr_http_req_is_unix answers this */
    const char *id;   /* X-Request-Id (NULL: one is made) */
    const char *peer; /* wr_http_req_peer answers this (copied; NULL: "internal") */
    /* Optional: called with hctx once the sub-request is over, as a server's on_finish. */
    void (*on_finish)(struct wr_http_req *req, const struct wr_http_finish *f, void *hctx);
};

/* The answer so far (in on_data) or the whole answer (in on_done). body is NUL-terminated. */
struct wr_http_sub_resp {
    int status;               /* 0 until the response started */
    const char *content_type; /* "" when none */
    const char *body;
    size_t len;
    bool truncated; /* more came than max_body */
    bool ended;     /* the response is complete (always true in on_done) */
};

struct wr_http_sub_cbs {
    /* Called from the loop after more of the body came (optional). */
    void (*on_data)(struct wr_http_sub *sub, const struct wr_http_sub_resp *resp, void *ctx);
    /* Called once when the response has ended; sub is freed after it returns. */
    void (*on_done)(struct wr_http_sub *sub, const struct wr_http_sub_resp *resp, void *ctx);
};

/* Make the request and hand it to handler(req, hctx) now. Returns the sub-request, owned by the
 * server until on_done returns or wr_http_sub_cancel. A bad target answers 400 itself (on_done
 * still comes). */
struct wr_http_sub *wr_http_sub_start(uv_loop_t *loop, const struct wr_http_sub_req *sr,
                                      wr_http_handler_fn handler, void *hctx,
                                      const struct wr_http_sub_cbs *cbs, void *ctx);
/* What it has answered so far (valid until the next loop iteration or call on it). */
void wr_http_sub_peek(const struct wr_http_sub *sub, struct wr_http_sub_resp *out);
/* Drop the first n bytes of the answer kept so far (a caller that reads a stream as it comes
 * keeps only what it has not read yet; max_body counts what is kept). */
void wr_http_sub_consume(struct wr_http_sub *sub, size_t n);
/* Give up on it, as a client that hangs up: the handler's on_close says aborted (from the loop),
 * on_done never comes, and sub must not be used again. Safe inside on_data. */
void wr_http_sub_cancel(struct wr_http_sub *sub);
