/* SPDX-License-Identifier: Apache-2.0 */
/* Exposed ports: the reverse proxy from the daemon's HTTP server to a TCP port inside a
 * sandbox, reached by Host `<port>-<id>.<domain>` or the E2b-Sandbox-Id/-Port headers (E2B's
 * routing, e2b.c hands those here) or by the path `/v1/sandboxes/{id}/ports/{port}/<rest>`
 * (native, API key); raw TCP over a WebSocket at `/v1/sandboxes/{id}/ports/{port}/tcp`; and the
 * list of listening ports. The socket to the sandbox comes from core/ports.h.
 *
 * HTTP: each request is routed on its own. The upstream connection is kept per client connection
 * (wr_http_conn_set_data) and reused while the client asks for the same sandbox and port and the
 * upstream keeps it alive; the upstream's response is parsed with llhttp (response mode) to
 * know where it ends, and its body streams to the client with backpressure both ways. A request
 * with Upgrade is sent as it is; after the upstream's 101 the client's connection is taken over
 * (wr_http_req_hijack) and bytes are relayed raw both ways (a tunnel). */
#include <ctype.h>
#include <errno.h>
#include <llhttp.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../core/ports.h"
#include "../util/buf.h"
#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "e2b_int.h"

#define UP_HIGH      (1u << 20)   /* bytes queued to a side before its source stops */
#define UP_LOW       (256u << 10) /* and below which it starts again */
#define PORT_IDLE_MS 620000       /* E2B's: above a front load balancer's 600 s */
#define READ_SIZE    (64u * 1024)
#define HEAD_MAX     (64u * 1024) /* the upstream's response head */

struct up;
struct preq;

/* ---- connections per sandbox (the 429 cap) ------------------------------------------------- */

struct sbcount {
    struct sbcount *next;
    char *id;
    uint32_t n;
};

#define COUNT_BUCKETS 256
static struct sbcount *counts[COUNT_BUCKETS];

static unsigned count_hash(const char *id)
{
    unsigned h = 5381;

    while (*id)
        h = h * 33 + (unsigned char)*id++;
    return h % COUNT_BUCKETS;
}

static struct sbcount *count_get(const char *id, bool make)
{
    struct sbcount **pp = &counts[count_hash(id)];

    for (; *pp != NULL; pp = &(*pp)->next)
        if (strcmp((*pp)->id, id) == 0)
            return *pp;
    if (!make)
        return NULL;
    *pp = xcalloc(1, sizeof(**pp));
    (*pp)->id = xstrdup(id);
    return *pp;
}

/* Take a place for a connection to sandbox id: false if it has `limit` already. */
static bool count_take(const char *id, uint32_t limit)
{
    struct sbcount *c = count_get(id, true);

    if (c->n >= limit)
        return false;
    c->n++;
    return true;
}

static void count_put(const char *id)
{
    struct sbcount **pp = &counts[count_hash(id)];

    for (; *pp != NULL; pp = &(*pp)->next) {
        struct sbcount *c = *pp;
        if (strcmp(c->id, id) != 0)
            continue;
        if (--c->n == 0) {
            *pp = c->next;
            free(c->id);
            free(c);
        }
        return;
    }
}

static uint32_t conn_limit(const struct wr_api *api)
{
    return api->port_conn_limit ? api->port_conn_limit : WR_API_PORT_CONN_LIMIT;
}

/* ---- the errors ---------------------------------------------------------------------------- */

/* How a route answers errors: E2B's proxy bodies (Host and header routes), the native API's, or
 * the native code-interpreter API's (the native ones, with 409 no_interpreter for a closed port).
 */
enum route_kind { ROUTE_E2B, ROUTE_NATIVE, ROUTE_CODE };

static void e2b_body(struct wr_http_req *req, int status, const char *id, const char *msg,
                     const char *extra_key, json_int_t extra)
{
    json_t *j = json_pack("{s:s,s:s}", "sandboxId", id, "message", msg);

    if (extra_key != NULL)
        json_object_set_new(j, extra_key, json_integer(extra));
    json_object_set_new(j, "code", json_integer(status));
    wr_http_respond_json(req, status, j);
}

/* The sandbox is not there (or not running). */
static void answer_not_found(struct wr_http_req *req, enum route_kind kind, const char *id,
                             const struct wr_err *err)
{
    if (kind == ROUTE_E2B)
        e2b_body(req, 502, id, "The sandbox was not found", NULL, 0);
    else
        api_error(req, err);
}

static void answer_port_closed(struct wr_http_req *req, enum route_kind kind, const char *id,
                               unsigned port)
{
    if (kind == ROUTE_E2B)
        e2b_body(req, 502, id, "The sandbox is running but port is not open", "port", port);
    else if (kind == ROUTE_CODE)
        wr_http_respond_error(req, 409, "no_interpreter",
                              "sandbox %s has no code interpreter: nothing listens on its port %u "
                              "(create it from the code-interpreter-v1 template)",
                              id, port);
    else
        api_fail(req, WR_EUPSTREAM, "port %u of sandbox %s is not open: nothing listens there",
                 port, id);
}

static void answer_limit(struct wr_http_req *req, enum route_kind kind, const char *id,
                         uint32_t limit)
{
    char msg[128];

    snprintf(msg, sizeof(msg),
             "The sandbox has too many concurrent incoming connections (limit: %u)", limit);
    if (kind == ROUTE_E2B) {
        e2b_body(req, 429, id, msg, "connectionLimit", limit);
    } else {
        wr_http_resp_header(req, "Retry-After", "1");
        wr_http_respond_error(req, 429, wr_err_kind_name(WR_ELIMIT), "%s", msg);
    }
}

/* An upstream that broke the exchange before its response started. */
static void answer_bad_gateway(struct wr_http_req *req, enum route_kind kind, const char *id,
                               unsigned port, const char *why)
{
    if (kind == ROUTE_E2B)
        e2b_body(req, 502, id, "The sandbox is running but port is not open", "port", port);
    else
        api_fail(req, WR_EUPSTREAM, "port %u of sandbox %s: %s", port, id, why);
}

/* A port in canonical decimal, 1-65535 ("08080", "0", "65536", "-1", "" are not). */
bool api_port_parse(const char *s, size_t n, unsigned *out)
{
    unsigned v = 0;

    if (n == 0 || n > 5 || s[0] == '0')
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return false;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > 65535)
        return false;
    *out = v;
    return true;
}

/* ---- byte relays --------------------------------------------------------------------------- */

struct wbuf {
    uv_write_t w;
    size_t n;
    char data[];
};

/* One end of a relay: a socket as a libuv stream, with what is queued to it. */
struct side {
    union {
        uv_handle_t h;
        uv_stream_t s;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } io;
    size_t wq;
    bool reading, eof, shut, closing;
    void (*on_written)(struct side *s);
};

static void side_on_write(uv_write_t *w, int status)
{
    struct wbuf *b = (struct wbuf *)w;
    struct side *s = w->data;

    s->wq -= b->n;
    free(b);
    if (s->on_written && !s->closing)
        s->on_written(s);
}

/* Queue bytes (copied). Returns -1 if the stream refused them. */
static int side_write(struct side *s, const void *a, size_t an, const void *t, size_t tn)
{
    struct wbuf *b;
    uv_buf_t buf;

    if (s->closing || an + tn == 0)
        return s->closing ? -1 : 0;
    if (s->wq == 0) {
        /* Nothing queued: write now. What the socket takes needs no copy, no callback and no
         * change of the poll set (uv_write's would cost an epoll_ctl each time). */
        uv_buf_t bufs[2] = {uv_buf_init((char *)a, (unsigned)an),
                            uv_buf_init((char *)t, (unsigned)tn)};
        int w = uv_try_write(&s->io.s, bufs, tn ? 2 : 1);
        if (w < 0 && w != UV_EAGAIN)
            return -1;
        if (w > 0) {
            size_t done = (size_t)w;
            if (done >= an + tn)
                return 0;
            if (done >= an) {
                t = (const char *)t + (done - an);
                tn -= done - an;
                a = t;
                an = tn;
                t = NULL;
                tn = 0;
            } else {
                a = (const char *)a + done;
                an -= done;
            }
        }
    }
    b = xmalloc(sizeof(*b) + an + tn);
    b->n = an + tn;
    memcpy(b->data, a, an);
    if (tn)
        memcpy(b->data + an, t, tn);
    b->w.data = s;
    buf = uv_buf_init(b->data, (unsigned)b->n);
    if (uv_write(&b->w, &s->io.s, &buf, 1, side_on_write) < 0) {
        free(b);
        return -1;
    }
    s->wq += b->n;
    return 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    static char rbuf[READ_SIZE]; /* the loop thread's; every reader consumes it at once */

    *buf = uv_buf_init(rbuf, sizeof(rbuf));
}

static int side_open(uv_loop_t *loop, struct side *s, int fd, bool is_unix)
{
    int rc = is_unix ? uv_pipe_init(loop, &s->io.pipe, 0) : uv_tcp_init(loop, &s->io.tcp);

    if (rc < 0)
        return rc;
    rc = is_unix ? uv_pipe_open(&s->io.pipe, fd) : uv_tcp_open(&s->io.tcp, fd);
    if (rc == 0 && !is_unix)
        (void)uv_tcp_nodelay(&s->io.tcp, 1);
    return rc;
}

/* ---- the upstream -------------------------------------------------------------------------- */

enum up_mode { UP_HTTP, UP_TUNNEL, UP_WS };

struct pconn;
struct tunnel;
struct wsb;

/* A connection to a port of a sandbox. */
struct up {
    struct side side; /* first: the side's callbacks find the up */
    enum up_mode mode;
    struct wr_live_sb *sb; /* referenced: a parked connection is reused only for it */
    char *sb_id;
    uint16_t port;
    bool counted;
    bool reusable;      /* the last response left it usable for another request */
    struct preq *pr;    /* UP_HTTP: the request it serves; NULL when parked */
    struct pconn *pc;   /* parked in this client connection */
    struct tunnel *tn;  /* UP_TUNNEL */
    struct wsb *wb;     /* UP_WS */
    uv_timer_t idle;    /* PORT_IDLE_MS without a byte either way: closed */
    uint64_t active_at; /* loop time of the last byte */
    int handles;
    llhttp_t parser;
};

struct pconn {
    struct up *up; /* parked, idle, between requests */
};

static void up_close(struct up *u);

static void up_freed(uv_handle_t *h)
{
    struct up *u = h->data;

    if (--u->handles > 0)
        return;
    if (u->counted)
        count_put(u->sb_id);
    wr_live_sb_unref(u->sb);
    free(u->sb_id);
    free(u);
}

static void up_touch(struct up *u)
{
    u->active_at = uv_now(u->idle.loop);
}

static void on_idle_check(uv_timer_t *t);

/* A new upstream on fd (taken), counted against the sandbox's cap (already taken). */
static struct up *up_new(struct wr_api *api, struct wr_live_sb *sb, uint16_t port, int fd)
{
    struct up *u = xcalloc(1, sizeof(*u));

    u->sb = sb;
    wr_live_sb_ref(sb);
    u->sb_id = xstrdup(wr_live_sb_id(sb));
    u->port = port;
    (void)uv_timer_init(api->loop, &u->idle);
    u->idle.data = u;
    u->handles = 1;
    if (side_open(api->loop, &u->side, fd, false) < 0) {
        (void)close(fd);
        uv_close((uv_handle_t *)&u->idle, up_freed);
        return NULL;
    }
    u->side.io.h.data = u;
    u->handles++;
    u->counted = true; /* the caller's place under the cap is the connection's from here */
    up_touch(u);
    (void)uv_timer_start(&u->idle, on_idle_check, PORT_IDLE_MS, PORT_IDLE_MS / 4);
    return u;
}

static void up_close(struct up *u)
{
    if (u == NULL || u->side.closing)
        return;
    u->side.closing = true;
    if (u->pc != NULL && u->pc->up == u)
        u->pc->up = NULL;
    u->pc = NULL;
    uv_close(&u->side.io.h, up_freed);
    uv_close((uv_handle_t *)&u->idle, up_freed);
}

static void up_read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

/* Start (on) or stop reading a side, with cb: nothing once it is closing or at its end. */
static void side_read(struct side *sd, bool on, uv_read_cb cb)
{
    if (sd->closing || sd->eof || sd->reading == on)
        return;
    if (on && uv_read_start(&sd->io.s, on_alloc, cb) < 0)
        return;
    if (!on)
        (void)uv_read_stop(&sd->io.s);
    sd->reading = on;
}

static void up_read(struct up *u, bool on)
{
    side_read(&u->side, on, up_read_cb);
}

/* ---- HTTP requests ------------------------------------------------------------------------- */

struct preq {
    struct wr_api *api;
    struct wr_http_req *req; /* NULL once the client went */
    struct pconn *pc;
    enum route_kind kind;
    struct wr_live_sb *sb; /* referenced */
    char id[72];
    uint16_t port;
    const char *host; /* the Host sent upstream in place of the client's (NULL: the client's) */
    struct wr_port_req *opening;
    struct up *up;
    struct wr_buf head; /* the request head for the upstream */
    bool is_head, upgrade, has_body, chunked;
    bool body_started, body_done, body_paused;
    bool reused, retried;
    bool got_bytes;     /* the upstream sent something for this request */
    bool resp_started;  /* the client's response started */
    bool resp_done;     /* the upstream's response is complete */
    bool informational; /* parsing a 1xx other than 101 */
    bool draining;      /* the client's response waits for room (upstream not read) */
    int status;
    /* The client's response head waits for the first read's body (so that a short answer goes
     * out in one write): its framing, type and the body so far. */
    bool start_pending;
    int64_t clen;
    char *ct;
    struct wr_buf early;
    /* the upstream's response head: "name\0value\0" pairs */
    struct wr_buf hdrs, hfield, hvalue;
    bool in_value;
    size_t head_bytes;
};

static void preq_free(struct preq *pr)
{
    wr_port_req_cancel(pr->opening);
    wr_live_sb_unref(pr->sb);
    wr_buf_fini(&pr->head);
    wr_buf_fini(&pr->hdrs);
    wr_buf_fini(&pr->hfield);
    wr_buf_fini(&pr->hvalue);
    wr_buf_fini(&pr->early);
    free(pr->ct);
    free(pr);
}

/* The exchange failed: answer the client if its response has not started, else cut it. */
static void preq_fail(struct preq *pr, bool port_closed, const char *why)
{
    struct wr_http_req *req = pr->req;

    if (pr->up != NULL) {
        pr->up->pr = NULL;
        up_close(pr->up);
        pr->up = NULL;
    }
    if (req == NULL)
        return;
    if (pr->resp_started) {
        wr_http_req_abort(req);
        return;
    }
    pr->resp_started = true;
    if (port_closed)
        answer_port_closed(req, pr->kind, pr->id, pr->port);
    else
        answer_bad_gateway(req, pr->kind, pr->id, pr->port, why);
}

static void pconn_free(void *data)
{
    struct pconn *pc = data;

    if (pc->up != NULL) {
        pc->up->pc = NULL;
        up_close(pc->up);
    }
    free(pc);
}

/* The client's request is over (answered and flushed, or the client went). */
static void preq_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct preq *pr = data;
    struct up *u = pr->up;

    pr->req = NULL;
    if (u != NULL) {
        u->pr = NULL;
        pr->up = NULL;
        if (!aborted && pr->resp_done && u->reusable && pr->body_done && u->mode == UP_HTTP &&
            pr->pc != NULL && pr->pc->up == NULL && !u->side.closing) {
            /* Parked: the next request of this client for the same port takes it. */
            pr->pc->up = u;
            u->pc = pr->pc;
            up_read(u, true); /* an upstream that closes (or talks) while parked is dropped */
        } else {
            up_close(u);
        }
    }
    if (pr->opening != NULL) {
        /* The client left before the port was open: drop the open and its place. */
        wr_port_req_cancel(pr->opening);
        pr->opening = NULL;
        count_put(pr->id);
    }
    preq_free(pr);
}

/* ---- the upstream's response --------------------------------------------------------------- */

static struct preq *parser_req(llhttp_t *p)
{
    return ((struct up *)p->data)->pr;
}

static int r_field(llhttp_t *p, const char *at, size_t n)
{
    struct preq *pr = parser_req(p);

    if (pr == NULL)
        return HPE_USER;
    pr->head_bytes += n;
    if (pr->head_bytes > HEAD_MAX)
        return HPE_USER;
    wr_buf_append(&pr->hfield, at, n);
    return 0;
}

static int r_value(llhttp_t *p, const char *at, size_t n)
{
    struct preq *pr = parser_req(p);

    if (pr == NULL)
        return HPE_USER;
    pr->head_bytes += n;
    if (pr->head_bytes > HEAD_MAX)
        return HPE_USER;
    wr_buf_append(&pr->hvalue, at, n);
    return 0;
}

static int r_value_done(llhttp_t *p)
{
    struct preq *pr = parser_req(p);

    if (pr == NULL)
        return HPE_USER;
    wr_buf_append(&pr->hdrs, wr_buf_str(&pr->hfield), pr->hfield.len);
    wr_buf_append(&pr->hdrs, "", 1);
    wr_buf_append(&pr->hdrs, wr_buf_str(&pr->hvalue), pr->hvalue.len);
    wr_buf_append(&pr->hdrs, "", 1);
    wr_buf_fini(&pr->hfield);
    wr_buf_fini(&pr->hvalue);
    return 0;
}

static bool hop_by_hop(const char *name)
{
    static const char *const hop[] = {
        "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding",
        "TE",         "Trailer",    "Upgrade",          "Content-Length"};

    for (size_t i = 0; i < WR_ARRAY_SIZE(hop); i++)
        if (strcasecmp(name, hop[i]) == 0)
            return true;
    return false;
}

static void tunnel_start(struct preq *pr, const char *rest, size_t nrest);

static int r_headers_done(llhttp_t *p)
{
    struct up *u = p->data;
    struct preq *pr = u->pr;
    const char *ct = NULL;
    int64_t clen;

    if (pr == NULL || pr->req == NULL)
        return HPE_USER;
    pr->status = p->status_code;
    if (pr->status >= 100 && pr->status < 200 && pr->status != 101) {
        /* 100 Continue and the like: not passed on; the final response follows. */
        pr->informational = true;
        wr_buf_fini(&pr->hdrs);
        return 0;
    }
    if (pr->status == 101) {
        if (!pr->upgrade)
            return HPE_USER;
        return HPE_PAUSED; /* the read callback takes it over from here */
    }
    for (size_t off = 0; off < pr->hdrs.len;) {
        const char *name = (const char *)pr->hdrs.data + off;
        const char *val = name + strlen(name) + 1;
        off = (size_t)(val + strlen(val) + 1 - (const char *)pr->hdrs.data);
        if (strcasecmp(name, "Content-Type") == 0 && ct == NULL)
            ct = val;
        else if (!hop_by_hop(name))
            wr_http_resp_header(pr->req, name, val);
    }
    if (pr->is_head || pr->status == 204 || pr->status == 304)
        clen = (p->flags & F_CONTENT_LENGTH) && !(p->flags & F_CHUNKED) ? (int64_t)p->content_length
                                                                        : 0;
    else if ((p->flags & F_CONTENT_LENGTH) && !(p->flags & F_CHUNKED))
        clen = (int64_t)p->content_length;
    else
        clen = -1; /* chunked, or to the connection's end: chunked to the client */
    if (pr->is_head && !(p->flags & F_CONTENT_LENGTH))
        clen = -1;
    pr->resp_started = true;
    if ((pr->status == 204 || pr->status == 304) && ct == NULL)
        ct = "";
    if (pr->is_head) {
        wr_http_resp_start(pr->req, pr->status, ct ? ct : "", clen);
        return 1; /* a HEAD answer has no body, whatever it says */
    }
    pr->start_pending = true;
    pr->clen = clen;
    pr->ct = xstrdup(ct ? ct : "");
    return 0;
}

static void client_drained(struct wr_http_req *req);

/* Start the client's response held back by r_headers_done, with the body read so far. */
static void resp_flush_start(struct preq *pr)
{
    if (!pr->start_pending || pr->req == NULL)
        return;
    pr->start_pending = false;
    wr_http_resp_start(pr->req, pr->status, pr->ct, pr->clen);
    if (pr->early.len > 0)
        (void)wr_http_resp_write(pr->req, pr->early.data, pr->early.len);
    wr_buf_fini(&pr->early);
}

static int r_body(llhttp_t *p, const char *at, size_t n)
{
    struct up *u = p->data;
    struct preq *pr = u->pr;

    if (pr == NULL || pr->req == NULL || pr->informational)
        return pr == NULL || pr->req == NULL ? HPE_USER : 0;
    if (pr->start_pending) {
        wr_buf_append(&pr->early, at, n);
        if (pr->early.len >= READ_SIZE)
            resp_flush_start(pr);
        return 0;
    }
    if (wr_http_resp_write(pr->req, at, n) >= UP_HIGH && !pr->draining) {
        pr->draining = true;
        wr_http_resp_on_drain(pr->req, client_drained);
        up_read(u, false);
    }
    return 0;
}

static int r_done(llhttp_t *p)
{
    struct up *u = p->data;
    struct preq *pr = u->pr;

    if (pr == NULL)
        return HPE_USER;
    if (pr->informational) {
        pr->informational = false;
        pr->head_bytes = 0;
        return 0;
    }
    pr->resp_done = true;
    u->reusable = llhttp_should_keep_alive(p) && pr->body_done;
    if (pr->req != NULL && pr->start_pending &&
        (pr->clen < 0 || (uint64_t)pr->clen == pr->early.len)) {
        /* The whole answer came in one read: head and body in one write. */
        pr->start_pending = false;
        wr_http_respond(pr->req, pr->status, pr->ct, pr->early.data, pr->early.len);
        wr_buf_fini(&pr->early);
        return HPE_PAUSED;
    }
    resp_flush_start(pr);
    if (pr->req != NULL)
        wr_http_resp_end(pr->req);
    return HPE_PAUSED; /* what follows is not this request's */
}

static llhttp_settings_t resp_settings;

static void settings_init(void)
{
    static bool done;

    if (done)
        return;
    llhttp_settings_init(&resp_settings);
    resp_settings.on_header_field = r_field;
    resp_settings.on_header_value = r_value;
    resp_settings.on_header_value_complete = r_value_done;
    resp_settings.on_headers_complete = r_headers_done;
    resp_settings.on_body = r_body;
    resp_settings.on_message_complete = r_done;
    done = true;
}

static void client_drained(struct wr_http_req *req)
{
    struct preq *pr = wr_http_req_data(req);

    if (pr == NULL || pr->up == NULL)
        return;
    pr->draining = false;
    if (!pr->resp_done)
        up_read(pr->up, true);
}

static void send_head(struct preq *pr);

/* A reused connection that the upstream had closed, before any byte of the answer: once, a
 * fresh one (only for a request whose body has not started, so it can be sent again). */
static bool retry_fresh(struct preq *pr);

static void up_http_read(struct up *u, ssize_t n, const char *p)
{
    struct preq *pr = u->pr;
    llhttp_errno_t e;

    if (pr == NULL) {
        /* Parked and the upstream closed or spoke out of turn: not reusable. */
        up_close(u);
        return;
    }
    if (n < 0) {
        if (!pr->got_bytes && retry_fresh(pr))
            return;
        /* A body that ends with the connection completes here (llhttp_finish calls
         * on_message_complete, whose HPE_PAUSED it returns). */
        e = n == UV_EOF ? llhttp_finish(&u->parser) : HPE_USER;
        if ((e == HPE_OK || e == HPE_PAUSED) && pr->resp_done) {
            u->side.eof = true;
            u->reusable = false;
            return;
        }
        preq_fail(pr, false,
                  n == UV_EOF ? "the server closed the connection mid-answer"
                              : uv_strerror((int)n));
        return;
    }
    pr->got_bytes = true;
    if (pr->resp_done) {
        up_close(u); /* bytes after the answer */
        pr->up = NULL;
        u->pr = NULL;
        return;
    }
    e = llhttp_execute(&u->parser, p, (size_t)n);
    if (pr->up != u || u->side.closing)
        return;
    if (e == HPE_OK) {
        resp_flush_start(pr); /* the answer goes on in later reads: stream it */
        return;
    }
    if (e == HPE_PAUSED && pr->status == 101 && pr->upgrade) {
        const char *stop = llhttp_get_error_pos(&u->parser);
        tunnel_start(pr, stop, (size_t)(p + n - stop));
        return;
    }
    if (e == HPE_PAUSED && pr->resp_done) {
        /* Still read: bytes after the answer, or the upstream's close while it is parked, mean
         * it is not reused. */
        const char *stop = llhttp_get_error_pos(&u->parser);
        if (stop != p + n)
            u->reusable = false;
        return;
    }
    preq_fail(pr, false, "the server's answer is not valid HTTP/1.1");
}

static void up_read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void up_written(struct side *s);

/* The request body's pieces go to the upstream as they come. */
static void body_data(struct wr_http_req *req, const char *p, size_t n)
{
    struct preq *pr = wr_http_req_data(req);
    char hex[24];

    if (pr == NULL || pr->up == NULL || n == 0)
        return;
    up_touch(pr->up);
    if (pr->chunked) {
        int hl = snprintf(hex, sizeof(hex), "%zx\r\n", n);
        (void)side_write(&pr->up->side, hex, (size_t)hl, NULL, 0);
        (void)side_write(&pr->up->side, p, n, "\r\n", 2);
    } else {
        (void)side_write(&pr->up->side, p, n, NULL, 0);
    }
    if (pr->up->side.wq >= UP_HIGH && !pr->body_paused) {
        pr->body_paused = true;
        wr_http_req_pause_body(req);
    }
}

static void body_end(struct wr_http_req *req)
{
    struct preq *pr = wr_http_req_data(req);

    if (pr == NULL)
        return;
    pr->body_done = true;
    if (pr->up != NULL && pr->chunked)
        (void)side_write(&pr->up->side, "0\r\n\r\n", 5, NULL, 0);
}

static void up_written(struct side *s)
{
    struct up *u = (struct up *)s;
    struct preq *pr = u->pr;

    up_touch(u);
    if (u->mode == UP_HTTP && pr != NULL && pr->body_paused && s->wq < UP_LOW && pr->req) {
        pr->body_paused = false;
        wr_http_req_resume_body(pr->req);
    }
}

static void tunnel_up_written(struct up *u);
static void wsb_up_written(struct up *u);
static void tunnel_up_read(struct up *u, ssize_t n, const char *p);
static void wsb_up_read(struct up *u, ssize_t n, const char *p);

static void up_written_any(struct side *s)
{
    struct up *u = (struct up *)s;

    if (u->mode == UP_HTTP)
        up_written(s);
    else if (u->mode == UP_TUNNEL)
        tunnel_up_written(u);
    else
        wsb_up_written(u);
}

static void up_read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct up *u = s->data;

    if (n == 0 || u->side.closing)
        return;
    if (n < 0) {
        u->side.eof = true;
        u->side.reading = false;
        (void)uv_read_stop(s);
    } else {
        up_touch(u);
    }
    if (u->mode == UP_HTTP)
        up_http_read(u, n, buf->base);
    else if (u->mode == UP_TUNNEL)
        tunnel_up_read(u, n, buf->base);
    else
        wsb_up_read(u, n, buf->base);
}

static void send_head(struct preq *pr)
{
    struct up *u = pr->up;

    u->pr = pr;
    u->mode = UP_HTTP;
    u->reusable = false;
    u->side.on_written = up_written_any;
    llhttp_init(&u->parser, HTTP_RESPONSE, &resp_settings);
    u->parser.data = u;
    if (side_write(&u->side, pr->head.data, pr->head.len, NULL, 0) < 0) {
        preq_fail(pr, false, "write to the sandbox's port");
        return;
    }
    up_touch(u);
    up_read(u, true);
    if (pr->has_body && !pr->body_started && pr->req != NULL) {
        pr->body_started = true;
        /* The sandbox's server paces the body (and may take its time): the upstream's idle
         * timer bounds a silent client, not the server's body timeout. */
        wr_http_req_interactive_body(pr->req);
        wr_http_req_continue(pr->req);
        wr_http_req_stream_body(pr->req, body_data, body_end);
    }
}

static void on_open(void *arg, int fd, const struct wr_err *err);

/* Open a new upstream connection for pr (its place under the cap is taken here). */
static void open_up(struct preq *pr)
{
    struct wr_err err;
    uint32_t limit = conn_limit(pr->api);

    if (!count_take(pr->id, limit)) {
        pr->resp_started = true;
        answer_limit(pr->req, pr->kind, pr->id, limit);
        return;
    }
    pr->opening = wr_live_sb_port_open(pr->sb, pr->port, on_open, pr, &err);
    if (pr->opening == NULL) {
        count_put(pr->id);
        pr->resp_started = true;
        answer_not_found(pr->req, pr->kind, pr->id, &err);
    }
}

static bool retry_fresh(struct preq *pr)
{
    if (!pr->reused || pr->retried || pr->body_started || pr->req == NULL)
        return false;
    pr->retried = true;
    pr->reused = false;
    pr->up->pr = NULL;
    up_close(pr->up);
    pr->up = NULL;
    open_up(pr);
    return true;
}

static void on_open(void *arg, int fd, const struct wr_err *err)
{
    struct preq *pr = arg;

    pr->opening = NULL; /* the client is still there: preq_closed cancels the open */
    if (fd < 0) {
        count_put(pr->id);
        pr->resp_started = true;
        if (err->kind == WR_EUPSTREAM && err->sys_errno == ECONNREFUSED)
            answer_port_closed(pr->req, pr->kind, pr->id, pr->port);
        else if (err->kind == WR_ENOTFOUND || err->kind == WR_ECONFLICT)
            answer_not_found(pr->req, pr->kind, pr->id, err);
        else
            answer_bad_gateway(pr->req, pr->kind, pr->id, pr->port, err->msg);
        return;
    }
    pr->up = up_new(pr->api, pr->sb, pr->port, fd);
    if (pr->up == NULL) {
        count_put(pr->id);
        preq_fail(pr, false, "the sandbox's socket");
        return;
    }
    send_head(pr);
}

/* ---- tunnels (after a 101) ----------------------------------------------------------------- */

struct tunnel {
    struct side client;
    struct up *up;
    int handles;
    bool client_gone;
};

static void tunnel_end(struct tunnel *t);

static void tunnel_freed(uv_handle_t *h)
{
    struct tunnel *t = h->data;

    free(t);
}

static void tunnel_end(struct tunnel *t)
{
    if (t->client.closing)
        return;
    t->client.closing = true;
    uv_close(&t->client.io.h, tunnel_freed);
    if (t->up != NULL) {
        t->up->tn = NULL;
        up_close(t->up);
        t->up = NULL;
    }
}

static void tunnel_client_read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void tunnel_client_read(struct tunnel *t, bool on)
{
    side_read(&t->client, on, tunnel_client_read_cb);
}

/* Both ways ended (EOF read and passed on as a shutdown): the tunnel is done once flushed. */
static void tunnel_check_done(struct tunnel *t)
{
    if (t->up != NULL && t->client.eof && t->up->side.eof && t->client.wq == 0 &&
        t->up->side.wq == 0)
        tunnel_end(t);
}

static void on_shutdown(uv_shutdown_t *r, int status)
{
    free(r);
}

static void side_shutdown(struct side *s)
{
    uv_shutdown_t *r;

    if (s->shut || s->closing)
        return;
    s->shut = true;
    r = xmalloc(sizeof(*r));
    if (uv_shutdown(r, &s->io.s, on_shutdown) < 0)
        free(r);
}

static void tunnel_client_read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct tunnel *t = s->data;

    if (n == 0 || t->client.closing)
        return;
    if (n < 0) {
        if (n != UV_EOF || t->up == NULL) {
            tunnel_end(t);
            return;
        }
        t->client.eof = true;
        t->client.reading = false;
        (void)uv_read_stop(s);
        side_shutdown(&t->up->side);
        tunnel_check_done(t);
        return;
    }
    if (t->up == NULL) {
        tunnel_end(t);
        return;
    }
    up_touch(t->up);
    if (side_write(&t->up->side, buf->base, (size_t)n, NULL, 0) < 0) {
        tunnel_end(t);
        return;
    }
    if (t->up->side.wq >= UP_HIGH)
        tunnel_client_read(t, false);
}

static void tunnel_client_written(struct side *s)
{
    struct tunnel *t = (struct tunnel *)s;

    if (t->up == NULL)
        return;
    up_touch(t->up);
    if (s->wq < UP_LOW)
        up_read(t->up, true);
    tunnel_check_done(t);
}

static void tunnel_up_read(struct up *u, ssize_t n, const char *p)
{
    struct tunnel *t = u->tn;

    if (t == NULL) {
        up_close(u);
        return;
    }
    if (n < 0) {
        if (n != UV_EOF) {
            tunnel_end(t);
            return;
        }
        side_shutdown(&t->client);
        tunnel_check_done(t);
        return;
    }
    if (side_write(&t->client, p, (size_t)n, NULL, 0) < 0) {
        tunnel_end(t);
        return;
    }
    if (t->client.wq >= UP_HIGH)
        up_read(u, false);
}

static void tunnel_up_written(struct up *u)
{
    struct tunnel *t = u->tn;

    if (t == NULL)
        return;
    if (u->side.wq < UP_LOW)
        tunnel_client_read(t, true);
    tunnel_check_done(t);
}

/* The upstream answered 101: take the client's connection over, send it the 101 head and
 * what came after it, and relay both ways. */
static void tunnel_start(struct preq *pr, const char *rest, size_t nrest)
{
    struct wr_buf head = {0}, early = {0};
    struct up *u = pr->up;
    struct tunnel *t;
    struct wr_err err;
    bool is_unix = false;
    int fd = -1;

    if (wr_http_req_hijack(pr->req, &fd, &is_unix, &early, &err) < 0) {
        preq_fail(pr, false, err.msg);
        wr_buf_fini(&early);
        return;
    }
    /* The server forgot the request: it is ours to free. */
    pr->req = NULL;
    pr->up = NULL;
    u->pr = NULL;
    t = xcalloc(1, sizeof(*t));
    if (side_open(u->idle.loop, &t->client, fd, is_unix) < 0) {
        (void)close(fd);
        free(t);
        up_close(u);
        wr_buf_fini(&early);
        preq_free(pr);
        return;
    }
    t->client.io.h.data = t;
    t->client.on_written = tunnel_client_written;
    t->up = u;
    u->tn = t;
    u->mode = UP_TUNNEL;
    wr_buf_printf(&head, "HTTP/1.1 101 Switching Protocols\r\n");
    for (size_t off = 0; off < pr->hdrs.len;) {
        const char *name = (const char *)pr->hdrs.data + off;
        const char *val = name + strlen(name) + 1;
        off = (size_t)(val + strlen(val) + 1 - (const char *)pr->hdrs.data);
        wr_buf_printf(&head, "%s: %s\r\n", name, val);
    }
    wr_buf_puts(&head, "\r\n");
    (void)side_write(&t->client, head.data, head.len, rest, nrest);
    if (early.len > 0)
        (void)side_write(&u->side, early.data, early.len, NULL, 0);
    wr_buf_fini(&head);
    wr_buf_fini(&early);
    preq_free(pr);
    tunnel_client_read(t, true);
    up_read(u, true);
}

/* ---- raw TCP over a WebSocket -------------------------------------------------------------- */

struct wsb {
    struct wr_ws *ws; /* NULL once it closed */
    struct up *up;    /* NULL once closed */
    bool ws_paused, up_eof;
};

static void wsb_maybe_free(struct wsb *b)
{
    if (b->ws == NULL && b->up == NULL)
        free(b);
}

static void wsb_up_read(struct up *u, ssize_t n, const char *p)
{
    struct wsb *b = u->wb;

    if (b == NULL || b->ws == NULL) {
        up_close(u);
        return;
    }
    if (n < 0) {
        /* The server's end: the WebSocket closes once what came before is sent. */
        b->up_eof = true;
        wr_ws_close(b->ws, 1000, n == UV_EOF ? "eof" : uv_strerror((int)n));
        return;
    }
    if (wr_ws_send(b->ws, 2, p, (size_t)n) >= UP_HIGH)
        up_read(u, false);
}

static void wsb_up_written(struct up *u)
{
    struct wsb *b = u->wb;

    if (b != NULL && b->ws != NULL && b->ws_paused && u->side.wq < UP_LOW) {
        b->ws_paused = false;
        wr_ws_resume(b->ws);
    }
}

static void wsb_drained(struct wr_ws *ws, void *ctx)
{
    struct wsb *b = ctx;

    if (b->up != NULL && !b->up_eof)
        up_read(b->up, true);
}

static void wsb_message(struct wr_ws *ws, int opcode, const uint8_t *p, size_t n, void *ctx)
{
    struct wsb *b = ctx;

    if (b->up == NULL)
        return;
    if (n == 0) {
        /* An empty message is the client's end of input (a half-close). */
        side_shutdown(&b->up->side);
        return;
    }
    up_touch(b->up);
    if (side_write(&b->up->side, p, n, NULL, 0) < 0) {
        wr_ws_close(ws, 1011, "the sandbox's port closed");
        return;
    }
    if (b->up->side.wq >= UP_HIGH && !b->ws_paused) {
        b->ws_paused = true;
        wr_ws_pause(ws);
    }
}

static void wsb_closed(struct wr_ws *ws, void *ctx)
{
    struct wsb *b = ctx;

    b->ws = NULL;
    if (b->up != NULL) {
        b->up->wb = NULL;
        up_close(b->up);
        b->up = NULL;
    }
    wsb_maybe_free(b);
}

/* The /tcp request: open the port, then accept the WebSocket. */
struct tcpreq {
    struct wr_api *api;
    struct wr_http_req *req; /* NULL once the client went */
    struct wr_live_sb *sb;
    struct wr_port_req *opening;
    char id[72];
    uint16_t port;
};

static void tcpreq_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct tcpreq *t = data;

    t->req = NULL;
    if (t->opening != NULL) {
        wr_port_req_cancel(t->opening);
        t->opening = NULL;
        count_put(t->id);
    }
    wr_live_sb_unref(t->sb);
    free(t);
}

static void tcp_opened(void *arg, int fd, const struct wr_err *err)
{
    struct tcpreq *t = arg;
    struct wr_http_req *req = t->req;
    struct wr_ws_callbacks cbs = {.on_message = wsb_message, .on_close = wsb_closed};
    struct wsb *b;
    struct up *u;

    t->opening = NULL;
    wr_http_req_set_data(req, NULL, NULL);
    if (fd < 0) {
        count_put(t->id);
        if (err->kind == WR_EUPSTREAM && err->sys_errno == ECONNREFUSED)
            answer_port_closed(req, ROUTE_NATIVE, t->id, t->port);
        else
            api_error(req, err);
        goto out;
    }
    u = up_new(t->api, t->sb, t->port, fd);
    if (u == NULL) {
        count_put(t->id);
        api_fail(req, WR_ESYS, "the sandbox's socket");
        goto out;
    }
    b = xcalloc(1, sizeof(*b));
    b->up = u;
    u->wb = b;
    u->mode = UP_WS;
    u->side.on_written = up_written_any;
    b->ws = wr_http_ws_accept(req, &cbs, b);
    if (b->ws == NULL) {
        b->up = NULL;
        u->wb = NULL;
        up_close(u);
        free(b);
        goto out;
    }
    wr_ws_on_drain(b->ws, wsb_drained);
    up_read(u, true);
out:
    wr_live_sb_unref(t->sb);
    free(t);
}

static void tcp_start(struct wr_api *api, struct wr_http_req *req, struct wr_live_sb *sb,
                      const char *id, uint16_t port)
{
    struct tcpreq *t;
    struct wr_err err;
    uint32_t limit = conn_limit(api);

    if (!wr_http_req_is_upgrade(req) ||
        strcasecmp(wr_http_req_header(req, "Upgrade") ? wr_http_req_header(req, "Upgrade") : "",
                   "websocket") != 0) {
        api_fail(req, WR_EINVAL, "raw TCP needs a WebSocket upgrade (GET with Upgrade: websocket)");
        return;
    }
    if (!count_take(id, limit)) {
        answer_limit(req, ROUTE_NATIVE, id, limit);
        return;
    }
    t = xcalloc(1, sizeof(*t));
    t->api = api;
    t->req = req;
    t->sb = sb;
    wr_live_sb_ref(sb);
    snprintf(t->id, sizeof(t->id), "%s", id);
    t->port = port;
    t->opening = wr_live_sb_port_open(sb, port, tcp_opened, t, &err);
    if (t->opening == NULL) {
        count_put(id);
        wr_live_sb_unref(sb);
        free(t);
        api_error(req, &err);
        return;
    }
    wr_http_req_set_data(req, t, tcpreq_closed);
}

/* ---- routing a request to a port ----------------------------------------------------------- */

/* Request headers not passed upstream: hop-by-hop ones, the framing (rebuilt), Host (set
 * apart), and, on the native path, the caller's API key. */
static bool header_dropped(const char *name, bool native, const char *connection)
{
    static const char *const drop[] = {"Connection",       "Keep-Alive",
                                       "Proxy-Connection", "TE",
                                       "Trailer",          "Transfer-Encoding",
                                       "Content-Length",   "Host",
                                       "Expect",           "Upgrade"};

    for (size_t i = 0; i < WR_ARRAY_SIZE(drop); i++)
        if (strcasecmp(name, drop[i]) == 0)
            return true;
    if (native && (strcasecmp(name, "Authorization") == 0 || strcasecmp(name, "X-API-Key") == 0))
        return true;
    /* Names listed in Connection are hop-by-hop too (RFC 9110 7.6.1). */
    for (const char *c = connection; c != NULL && *c;) {
        size_t n;
        c += strspn(c, " \t,");
        n = strcspn(c, " \t,");
        if (n > 0 && strlen(name) == n && strncasecmp(name, c, n) == 0 &&
            strncasecmp(c, "upgrade", n) != 0)
            return true;
        c += n;
    }
    return false;
}

/* The Host sent upstream: the sandbox's maskRequestHost with ${PORT} replaced, or the client's. */
static void put_host(struct wr_buf *b, struct wr_http_req *req, struct wr_live_sb *sb,
                     unsigned port, const char *over)
{
    const char *mask = wr_live_sb_mask_host(sb);
    const char *host = wr_http_req_header(req, "Host");

    if (over != NULL) {
        wr_buf_printf(b, "Host: %s\r\n", over);
        return;
    }
    if (mask == NULL) {
        if (host != NULL)
            wr_buf_printf(b, "Host: %s\r\n", host);
        else
            wr_buf_printf(b, "Host: 127.0.0.1:%u\r\n", port);
        return;
    }
    wr_buf_puts(b, "Host: ");
    for (const char *p = mask; *p;) {
        if (strncmp(p, "${PORT}", 7) == 0) {
            wr_buf_printf(b, "%u", port);
            p += 7;
        } else if (*p != '\r' && *p != '\n') {
            wr_buf_append(b, p++, 1);
        } else {
            p++;
        }
    }
    wr_buf_puts(b, "\r\n");
}

static void build_head(struct preq *pr, const char *target)
{
    struct wr_http_req *req = pr->req;
    struct wr_buf *b = &pr->head;
    const char *connection = wr_http_req_header(req, "Connection");
    size_t n = wr_http_req_header_count(req);

    wr_buf_printf(b, "%s %s HTTP/1.1\r\n", wr_http_req_method(req), target);
    put_host(b, req, pr->sb, pr->port, pr->host);
    for (size_t i = 0; i < n; i++) {
        const char *name, *value;
        wr_http_req_header_at(req, i, &name, &value);
        if (header_dropped(name, pr->kind != ROUTE_E2B, connection))
            continue;
        if (strpbrk(value, "\r\n") != NULL)
            continue;
        wr_buf_printf(b, "%s: %s\r\n", name, value);
    }
    if (pr->kind == ROUTE_CODE)
        wr_buf_puts(b, "X-Warren-Errors: json\r\n"); /* warren-interp answers errors as ours */
    if (pr->upgrade) {
        const char *up = wr_http_req_header(req, "Upgrade");
        wr_buf_printf(b, "Connection: Upgrade\r\nUpgrade: %s\r\n", up ? up : "");
    } else {
        wr_buf_puts(b, "Connection: keep-alive\r\n");
    }
    if (pr->chunked)
        wr_buf_puts(b, "Transfer-Encoding: chunked\r\n");
    else if (pr->has_body)
        wr_buf_printf(b, "Content-Length: %lld\r\n", (long long)wr_http_req_content_length(req));
    wr_buf_puts(b, "\r\n");
}

/* Proxy req to port of sb (found by the caller; referenced here), the upstream path being
 * `target` (with its query). */
static void proxy_start(struct wr_api *api, struct wr_http_req *req, struct wr_live_sb *sb,
                        enum route_kind kind, const char *id, unsigned port, const char *target,
                        const char *host)
{
    struct pconn *pc = wr_http_conn_data(req);
    struct preq *pr = xcalloc(1, sizeof(*pr));
    int64_t clen = wr_http_req_content_length(req);

    settings_init();
    if (pc == NULL) {
        pc = xcalloc(1, sizeof(*pc));
        wr_http_conn_set_data(req, pc, pconn_free);
    }
    wr_http_req_idle_timeout(req, PORT_IDLE_MS);
    pr->api = api;
    pr->req = req;
    pr->pc = pc;
    pr->kind = kind;
    pr->sb = sb;
    wr_live_sb_ref(sb);
    snprintf(pr->id, sizeof(pr->id), "%s", id);
    pr->port = (uint16_t)port;
    pr->host = host;
    pr->is_head = strcmp(wr_http_req_method(req), "HEAD") == 0;
    pr->upgrade = wr_http_req_is_upgrade(req) && wr_http_req_header(req, "Upgrade") != NULL;
    pr->chunked = clen < 0 && wr_http_req_header(req, "Transfer-Encoding") != NULL;
    pr->has_body = !pr->upgrade && (clen > 0 || pr->chunked);
    pr->body_done = !pr->has_body;
    build_head(pr, target);
    wr_http_req_set_data(req, pr, preq_closed);
    if (pc->up != NULL && pc->up->sb == sb && pc->up->port == port && wr_live_sb_alive(sb) &&
        !pc->up->side.closing && !pc->up->side.eof) {
        pr->up = pc->up;
        pc->up = NULL;
        pr->up->pc = NULL;
        pr->reused = true;
        send_head(pr);
        return;
    }
    if (pc->up != NULL)
        up_close(pc->up); /* another sandbox or port: a connection of its own */
    open_up(pr);
}

/* ---- the E2B routes (e2b.c) ---------------------------------------------------------------- */

void api_port_e2b(struct wr_api *api, struct wr_http_req *req, const char *id, unsigned port)
{
    struct wr_live_sb *sb;
    struct wr_err err;

    sb = wr_manager_find(api->mgr, NULL, id, &err);
    if (sb == NULL) {
        answer_not_found(req, ROUTE_E2B, id, &err);
        return;
    }
    if (wr_live_sb_ports_private(sb)) {
        const char *tok = wr_http_req_header(req, "e2b-traffic-access-token");
        char want[E2B_TOKEN_HEX + 1];
        if (tok == NULL) {
            e2b_body(req, 403, id,
                     "Sandbox is secured with traffic access token. Token header "
                     "'e2b-traffic-access-token' is missing",
                     NULL, 0);
            return;
        }
        wr_e2b_traffic_token(api, id, want);
        if (strlen(tok) != E2B_TOKEN_HEX || CRYPTO_memcmp(tok, want, E2B_TOKEN_HEX) != 0) {
            e2b_body(req, 403, id,
                     "Sandbox is secured with traffic access token. Provided token in header "
                     "'e2b-traffic-access-token' is invalid",
                     NULL, 0);
            return;
        }
    }
    proxy_start(api, req, sb, ROUTE_E2B, id, port, wr_http_req_target(req), NULL);
}

/* ---- the native routes --------------------------------------------------------------------- */

void api_port_code(struct wr_api *api, struct wr_http_req *req, struct wr_live_sb *sb,
                   const char *target)
{
    proxy_start(api, req, sb, ROUTE_CODE, wr_live_sb_id(sb), WR_API_INTERP_PORT, target, NULL);
}

/* The raw target with its first `skip` path segments removed ("/" if nothing is left; the
 * query kept). */
static char *strip_segments(const char *target, int skip)
{
    const char *p = target;

    for (int i = 0; i < skip && *p == '/'; i++) {
        p++;
        p += strcspn(p, "/?");
    }
    if (*p == '\0')
        return xstrdup("/");
    if (*p == '?')
        return xasprintf("/%s", p);
    return xstrdup(p);
}

static void list_done(void *arg, const struct wr_port_listen *items, size_t n,
                      const struct wr_err *err)
{
    struct api_pending *p = arg;
    struct wr_http_req *req = api_pending_end(p);
    json_t *arr;

    if (req == NULL)
        return;
    if (err != NULL) {
        api_error(req, err);
        return;
    }
    arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_pack("{s:i,s:s,s:s}", "port", (int)items[i].port, "address",
                                             items[i].addr, "protocol", "tcp"));
    wr_http_respond_json(req, 200, json_pack("{s:o}", "ports", arr));
}

void api_ports_list(struct api_call *c)
{
    struct api_pending *p = api_pending_new(c->req);
    struct wr_err err;

    /* The request is short and bounded (10 s): it finishes even if the client leaves. */
    if (wr_live_sb_ports_list(c->sb, list_done, p, &err) == NULL) {
        api_pending_end(p);
        api_error(c->req, &err);
    }
}

bool api_ports_handle(struct wr_api *api, struct wr_http_req *req)
{
    const char *path = wr_http_req_path(req);
    const char *p, *id, *idend, *portp;
    struct wr_caller who;
    struct wr_live_sb *sb;
    struct wr_err err;
    char idbuf[72];
    unsigned port;
    size_t portn;

    /* /v1/sandboxes/{id}/ports/{port}[/rest] */
    if (strncmp(path, "/v1/sandboxes/", 14) != 0)
        return false;
    id = path + 14;
    idend = strchr(id, '/');
    if (idend == NULL || strncmp(idend, "/ports/", 7) != 0)
        return false;
    portp = idend + 7;
    portn = strcspn(portp, "/");
    p = portp + portn;
    if (api_authenticate(api, req, &who) < 0)
        return true;
    if ((size_t)(idend - id) >= sizeof(idbuf) || idend == id) {
        api_fail(req, WR_ENOTFOUND, "sandbox not found");
        return true;
    }
    memcpy(idbuf, id, (size_t)(idend - id));
    idbuf[idend - id] = '\0';
    if (!api_port_parse(portp, portn, &port)) {
        api_fail(req, WR_EINVAL, "port %.*s: a port is 1 to 65535 in decimal", (int)portn, portp);
        return true;
    }
    {
        /* The prefix taken off the target for the server is the one the route read: written
         * as it is, not percent-encoded (an encoded '/' would move the cut). */
        _cleanup_free_ char *prefix =
            xasprintf("/v1/sandboxes/%s/ports/%.*s", idbuf, (int)portn, portp);
        const char *raw = wr_http_req_target(req);
        size_t pl = strlen(prefix);
        if (strncmp(raw, prefix, pl) != 0 || strchr("/?", raw[pl]) == NULL) {
            api_fail(req, WR_EINVAL,
                     "the sandbox id and port of the path must not be "
                     "percent-encoded");
            return true;
        }
    }
    sb = wr_manager_find(api->mgr, who.admin ? NULL : who.team, idbuf, &err);
    if (sb == NULL) {
        api_error(req, &err);
        return true;
    }
    if (strcmp(p, "/tcp") == 0) {
        tcp_start(api, req, sb, idbuf, (uint16_t)port);
        return true;
    }
    _cleanup_free_ char *target = strip_segments(wr_http_req_target(req), 5);
    proxy_start(api, req, sb, ROUTE_NATIVE, idbuf, port, target, NULL);
    return true;
}

void api_port_proxy(struct wr_api *api, struct wr_http_req *req, struct wr_live_sb *sb,
                    unsigned port, const char *target, const char *host)
{
    proxy_start(api, req, sb, ROUTE_NATIVE, wr_live_sb_id(sb), port, target, host);
}

/* ---- parked connections -------------------------------------------------------------------- */

static void on_idle_check(uv_timer_t *t)
{
    struct up *u = t->data;

    if (uv_now(t->loop) - u->active_at < PORT_IDLE_MS)
        return;
    /* Silent both ways for too long: close it, and whatever it serves. */
    if (u->mode == UP_TUNNEL && u->tn != NULL) {
        tunnel_end(u->tn);
    } else if (u->mode == UP_WS && u->wb != NULL && u->wb->ws != NULL) {
        wr_ws_close(u->wb->ws, 1001, "idle");
    } else if (u->mode == UP_HTTP && u->pr != NULL) {
        preq_fail(u->pr, false, "the sandbox's server was silent for too long");
    } else {
        up_close(u);
    }
}
