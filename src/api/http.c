/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP/1.1 server: listeners, connections, the llhttp glue, requests and responses, and the
 * WebSocket mode of a connection (wslay). docs/design/http.md describes the lifetimes and the flow
 * control; the rules that keep it memory-safe are:
 *  - conn_process() is the only place that calls the handler, delivers request bodies and
 *    finishes requests, and it only runs from libuv callbacks (read, write, idle), never from
 *    inside an API call. API calls made by handlers just record state and conn_kick().
 *  - Connections and requests cut short are freed from the libuv close callbacks. */
#include "http.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <llhttp.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "../util/b64.h"
#include "../util/buf.h"
#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/utf8.h"
#include "../util/xalloc.h"
#include "http_int.h"
#include "peers.h"

#define IN_CAP            (64 * 1024) /* per-connection input buffer, allocated while in use */
#define URL_MAX           (8 * 1024)
#define LOW_WATER         (256 * 1024)
#define DISCARD_MAX       (4 * 1024 * 1024) /* unread body we skip before closing instead */
#define LINGER_MS         2000
#define WS_CLOSE_MS       5000
#define WS_MAX_MSG        (16 * 1024 * 1024)
#define BACKLOG           4096
#define DEFAULT_MAX_HDR   (64 * 1024)
#define DEFAULT_IDLE_MS   60000
#define DEFAULT_HEAD_MS   20000
#define DEFAULT_BODY_MS   30000
#define DEFAULT_CONNS     4096
#define DEFAULT_PER_PEER  1024
#define DEFAULT_UNAUTH    4096 /* at most, and half of max_conns: bounds heads held in memory */
#define CHUNK_EXT_MAX     1024 /* extension bytes on one chunk's size line; beyond: 400 */
#define REJECT_SLACK      64   /* connections past max_conns still answered 503; then: closed */
#define RETRY_AFTER       "1"
#define LIMIT_LOG_MS      10000 /* a cap that is hit is logged at most this often */
#define REQUEST_ID_MAX    64
#define WS_GUID           "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define JSON_CONTENT_TYPE "application/json"

/* Name/value lists for headers and query parameters. */
struct kv {
    char *name, *value;
};

struct kvs {
    struct kv *v;
    size_t n, cap;
};

static void kvs_push(struct kvs *l, char *name, char *value)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 8;
        l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
    }
    l->v[l->n++] = (struct kv){name, value};
}

static void kvs_free(struct kvs *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].name);
        free(l->v[i].value);
    }
    free(l->v);
    *l = (struct kvs){0};
}

/* ---- objects ------------------------------------------------------------------------------- */

enum body_mode { BODY_NONE, BODY_BUFFER, BODY_STREAM, BODY_DISCARD };

struct conn;

struct wr_http_req {
    struct conn *c;
    const char *method;
    struct wr_buf url;
    char *path;
    struct kvs query, headers;
    char id[REQUEST_ID_MAX + 1];
    int64_t content_length;
    bool keep_alive, no_body, is_upgrade;
    bool headers_done, dispatched, body_done, end_delivered, body_paused, closed;
    bool server_answered; /* the server answered it (413, 400): on_close says aborted */
    bool internal;        /* made by the server for an error; the handler never saw it */
    enum body_mode mode;
    size_t body_max, discarded;
    struct wr_buf body;
    void (*read_cb)(struct wr_http_req *req, const char *body, size_t len);
    void (*on_data)(struct wr_http_req *req, const char *p, size_t n);
    void (*on_end)(struct wr_http_req *req);
    void *data;
    void (*on_close)(struct wr_http_req *req, void *data, bool aborted);
    struct wr_buf resp_hdrs;
    bool resp_started, resp_ended, resp_chunked;
    int64_t resp_left; /* fixed-length responses: body bytes still owed */
    void (*on_drain)(struct wr_http_req *req);
    bool drain_armed;
    bool numeric_errors;     /* wr_http_respond_error writes the status as `code` (E2B's shape) */
    bool interactive;        /* wr_http_req_interactive_body: no body timeout */
    bool head_only;          /* a streamed answer to HEAD: its body is not sent */
    bool sent_continue;      /* wr_http_req_continue wrote its 100 */
    struct wr_http_sub *sub; /* a sub-request (c is NULL): the end of this file */
    /* For the server's on_finish: when the request began (uv_hrtime), the status answered, the
     * bytes each way, and the handler's note (wr_http_req_set_note). */
    uint64_t t0;
    int status;
    uint64_t bytes_in, bytes_out;
    void *note;
    void (*note_free)(void *note);
    char err_code[32]; /* the code of an error answer (wr_http_respond_error), else "" */
};

struct wr_ws {
    struct conn *c;
    struct wr_http_req *req;
    wslay_event_context_ptr ctx;
    struct wr_ws_callbacks cbs;
    void *user;
    bool in_recv;
    bool paused;      /* wr_ws_pause: no message is delivered, the socket is not read */
    bool drain_armed; /* wr_ws_send left the queue above LOW_WATER */
    void (*on_drain)(struct wr_ws *ws, void *ctx);
};

/* A sub-request (wr_http_sub_start): the request's connection, in memory. */
/* A sub-request is a connection of its own: its data goes with it. */
struct sub_conn_data {
    void *data;
    void (*data_free)(void *data);
};

struct wr_http_sub {
    struct wr_http_req *req;
    uv_timer_t kick; /* sub_process from the loop */
    char *method;
    bool is_unix;
    /* The request body and how much of it was delivered. */
    uint8_t *in;
    size_t in_len, in_off;
    /* The answer. */
    int status;
    char *content_type;
    struct wr_buf out;
    size_t max_body;
    bool truncated;
    bool fresh_data; /* body bytes came since on_data last ran */
    bool cancelled, finished, in_process;
    struct wr_http_sub_cbs cbs;
    void *ctx;
    char *peer;
    void (*on_finish)(struct wr_http_req *req, const struct wr_http_finish *f, void *hctx);
    void *hctx;
    struct sub_conn_data conn;
};

/* Where a connection is, for its timeout and the caps: just accepted (not yet admitted),
 * sending a request head (from the connection, or from the first byte of a keep-alive request),
 * idle between requests, with a request being handled (or answered by the server itself), or
 * lingering after its last answer. */
enum conn_phase { PH_NEW, PH_HEAD, PH_IDLE, PH_ACTIVE, PH_LINGER };

struct conn_list {
    struct conn *first, *last; /* oldest first */
    uint32_t n;
};

struct conn {
    struct wr_http_server *srv;
    struct conn *prev, *next;   /* srv->conns */
    struct conn *lprev, *lnext; /* srv->heads, idles or lingers, by phase (TCP only) */
    struct conn *kick_next;     /* srv->kicked */
    bool kicked;
    union {
        uv_handle_t h;
        uv_stream_t s;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } io;
    uv_timer_t timer;
    uv_shutdown_t shut;
    int open_handles;
    bool is_unix, reading, read_eof, closing, want_close, parse_dead, lingering, parser_paused;
    bool counted;   /* TCP: in srv->tcp_conns and srv->peers */
    bool owes_body; /* TCP: in srv->body_conns, its request's body still arriving */
    struct wr_peer_key peer;
    enum conn_phase phase;
    /* Loop times (ms): phase entered, last input, WebSocket close started, and the deadline the
     * timer is armed for (0: none). */
    uint64_t phase_at, rx_at, ws_close_at, armed;
    bool body_clock; /* the body timeout is counting (body_waiting) */
    llhttp_t parser;
    const char *parse_base; /* the input llhttp_execute was given */
    bool lf_ws;             /* the input before it ended in a line end and blanks (after_lf) */
    size_t ext_bytes;       /* chunk extension bytes on the current size line */
    char *in;               /* IN_CAP bytes while there is unparsed input, else NULL */
    size_t in_off, in_len;
    struct wr_http_req *cur; /* the one request being parsed or handled */
    struct wr_buf hfield, hvalue;
    size_t hdr_bytes;
    int err_status; /* set by a parser callback that rejects the request */
    const char *err_msg;
    size_t pending; /* bytes handed to uv_write and not yet completed */
    struct wr_ws *ws;
    unsigned idle_ms; /* wr_http_req_idle_timeout; 0: the server's */
    void *data;       /* wr_http_conn_set_data */
    void (*data_free)(void *data);
    char peer_name[64]; /* "tcp:ADDR" or "unix" (wr_http_req_peer) */
};

enum limit_kind { LIM_PEER, LIM_CONNS, LIM_UNAUTH, LIM_BODIES, LIM_FDS, LIM_KINDS };

struct wr_http_server {
    uv_loop_t *loop;
    wr_http_handler_fn handler;
    void *ctx;
    void (*on_finish)(struct wr_http_req *req, const struct wr_http_finish *f, void *ctx);
    size_t max_header_bytes;
    unsigned idle_ms, head_ms, body_ms;
    uint32_t max_conns, max_per_peer, max_unauth, max_body;
    uint32_t tcp_conns;  /* TCP connections open (their fds), turned away ones too */
    uint32_t body_conns; /* TCP connections whose request body is still arriving */
    /* TCP connections in PH_HEAD (unauthenticated), PH_IDLE and PH_LINGER */
    struct conn_list heads, idles, lingers;
    struct wr_peers *peers;
    char *region_hdr; /* "Warren-Region: <name>\r\n", or NULL */
    int spare_fd;     /* given up to accept-and-close when out of fds */
    struct {
        uint64_t at;
        unsigned n;
    } limit_log[LIM_KINDS];
    uv_pipe_t unix_l;
    uv_tcp_t tcp_l;
    bool has_unix, has_tcp, stopping;
    char *unix_path;
    int tcp_port;
    uv_idle_t kick_idle;
    struct conn *conns, *kicked;
    int open_handles;
    void (*done)(void *arg);
    void *done_arg;
    uint64_t id_seed, id_next;
};

struct wreq {
    uv_write_t w;
    struct conn *c;
    size_t n;
    char data[];
};

static llhttp_settings_t parser_settings;

static void conn_process(struct conn *c);
static void conn_close(struct conn *c);
static void conn_update_read(struct conn *c);
static void conn_arm(struct conn *c);
static void conn_set_phase(struct conn *c, enum conn_phase ph);
static void conn_owe_body(struct conn *c, bool owes);
static bool conn_admit_body(struct conn *c);
static void conn_uncount(struct conn *c);
static void conn_fail(struct conn *c, int status, const char *msg);
static void resp_error(struct wr_http_req *r, int status, const char *code, const char *msg);
static void srv_handle_closed(struct wr_http_server *srv);
static void on_kick_idle(uv_idle_t *h);
static void sub_kick(struct wr_http_sub *s);
static void sub_respond(struct wr_http_req *r, int status, const char *ct, const void *p, size_t n,
                        bool end);
static bool sub_read_body(struct wr_http_req *r);

/* ---- helpers ------------------------------------------------------------------------------- */

static const char *reason_phrase(int status)
{
    switch (status) {
    case 101:
        return "Switching Protocols";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 206:
        return "Partial Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 411:
        return "Length Required";
    case 412:
        return "Precondition Failed";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 416:
        return "Range Not Satisfiable";
    case 422:
        return "Unprocessable Content";
    case 426:
        return "Upgrade Required";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    case 507:
        return "Insufficient Storage";
    default:
        return "Status";
    }
}

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Percent-decode s[0..n) into a new string; '+' becomes a space when plus is set. Returns NULL on
 * an invalid escape or an encoded NUL (which would silently cut a C string short). */
static char *pct_decode(const char *s, size_t n, bool plus)
{
    _cleanup_free_ char *out = xmalloc(n + 1);
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            int hi, lo;
            if (i + 2 >= n)
                return NULL;
            hi = hexval((unsigned char)s[i + 1]);
            lo = hexval((unsigned char)s[i + 2]);
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                return NULL;
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else if (s[i] == '+' && plus) {
            out[o++] = ' ';
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
    return steal_pointer(&out);
}

/* Split the request target into the decoded path and query parameters. Accepts origin-form
 * ("/p?q") and absolute-form ("http://host/p?q", which proxies send and RFC 9112 says servers
 * must accept). Returns -1 with *msg set if the target is malformed. */
static int parse_target(struct wr_http_req *r, const char **msg)
{
    const char *p = wr_buf_str(&r->url);
    size_t plen;

    if (strncasecmp(p, "http://", 7) == 0 || strncasecmp(p, "https://", 8) == 0) {
        p = strstr(p, "://") + 3;
        p += strcspn(p, "/?#");
    }
    if (*p != '/' && *p != '?' && *p != '\0') {
        *msg = "request target must be an absolute path";
        return -1;
    }
    plen = strcspn(p, "?#");
    r->path = plen ? pct_decode(p, plen, false) : xstrdup("/");
    if (r->path == NULL) {
        *msg = "invalid percent-encoding in path";
        return -1;
    }
    if (p[plen] != '?')
        return 0;
    p += plen + 1;
    size_t qlen = strcspn(p, "#");
    const char *end = p + qlen;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *pe = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(pe - p));
        if (pe > p) {
            const char *ne = eq ? eq : pe;
            _cleanup_free_ char *name = pct_decode(p, (size_t)(ne - p), true);
            _cleanup_free_ char *val =
                eq ? pct_decode(eq + 1, (size_t)(pe - eq - 1), true) : xstrdup("");
            if (name == NULL || val == NULL) {
                *msg = "invalid percent-encoding in query";
                return -1;
            }
            kvs_push(&r->query, steal_pointer(&name), steal_pointer(&val));
        }
        p = amp ? amp + 1 : end;
    }
    return 0;
}

static bool request_id_valid(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > REQUEST_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!isalnum(ch) && ch != '_' && ch != '.' && ch != '-')
            return false;
    }
    return true;
}

/* splitmix64 of seed + counter: a bijection, so ids never repeat within a server's life, and
 * they do not reveal how many requests the server has seen. */
static void request_id_generate(struct wr_http_server *srv, char out[REQUEST_ID_MAX + 1])
{
    uint64_t z = srv->id_seed + (++srv->id_next) * 0x9E3779B97F4A7C15ull;

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    snprintf(out, REQUEST_ID_MAX + 1, "%016llx", (unsigned long long)z);
}

static const char *kvs_get(const struct kvs *l, const char *name, bool icase)
{
    for (size_t i = 0; i < l->n; i++)
        if ((icase ? strcasecmp : strcmp)(l->v[i].name, name) == 0)
            return l->v[i].value;
    return NULL;
}

/* True if the comma-separated header value has `token` (case-insensitive). */
static bool header_has_token(const char *value, const char *token)
{
    size_t tl = strlen(token);

    while (value && *value) {
        value += strspn(value, " \t,");
        size_t n = strcspn(value, ",");
        size_t m = n;
        while (m > 0 && (value[m - 1] == ' ' || value[m - 1] == '\t'))
            m--;
        if (m == tl && strncasecmp(value, token, tl) == 0)
            return true;
        value += n;
    }
    return false;
}

/* ---- requests ------------------------------------------------------------------------------ */

static struct wr_http_req *req_new(struct conn *c)
{
    struct wr_http_req *r = xcalloc(1, sizeof(*r));

    r->c = c;
    r->content_length = -1;
    r->resp_left = -1;
    r->t0 = uv_hrtime();
    return r;
}

static void req_free(struct wr_http_req *r)
{
    if (r == NULL)
        return;
    wr_buf_fini(&r->url);
    free(r->path);
    kvs_free(&r->query);
    kvs_free(&r->headers);
    wr_buf_fini(&r->body);
    wr_buf_fini(&r->resp_hdrs);
    if (r->note_free)
        r->note_free(r->note);
    free(r);
}

/* Tell the server's on_finish about a request the handler saw or the server answered. */
static void req_report(struct wr_http_server *srv, struct wr_http_req *r, bool aborted)
{
    struct wr_http_finish f;

    if (srv->on_finish == NULL || (!r->dispatched && r->status == 0))
        return;
    f.status = r->status;
    f.bytes_in = r->bytes_in;
    f.bytes_out = r->bytes_out;
    f.duration_s = (double)(uv_hrtime() - r->t0) / 1e9;
    f.aborted = aborted;
    srv->on_finish(r, &f, srv->ctx);
}

/* The request is over: tell the handler (unless the server made it) and free it. */
static void req_finish(struct conn *c, struct wr_http_req *r, bool aborted)
{
    if (c->cur == r)
        c->cur = NULL;
    req_report(c->srv, r, aborted || !r->resp_ended);
    if (!r->closed) {
        r->closed = true;
        if (r->on_close && !r->internal)
            r->on_close(r, r->data, aborted || r->server_answered);
    }
    req_free(r);
}

/* A request is done once its response has ended and reached the socket, and its body was
 * consumed (or parsing stopped, in which case the connection closes next). */
static bool req_done(const struct conn *c, const struct wr_http_req *r)
{
    return r->dispatched && r->resp_ended && c->pending == 0 && (r->body_done || c->parse_dead);
}

/* ---- the event plumbing -------------------------------------------------------------------- */

/* Ask for conn_process(c) on the next loop iteration. API calls made by a handler use this, so
 * that no handler callback ever runs, and no request is freed, inside the handler's own call. */
static void conn_kick(struct conn *c)
{
    struct wr_http_server *srv = c->srv;

    if (c->kicked || c->closing)
        return;
    c->kicked = true;
    c->kick_next = srv->kicked;
    srv->kicked = c;
    (void)uv_idle_start(&srv->kick_idle, on_kick_idle);
}

static void on_kick_idle(uv_idle_t *h)
{
    struct wr_http_server *srv = h->data;
    struct conn *list = srv->kicked;

    if (srv->spare_fd < 0)
        srv->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC); /* see srv_out_of_fds */
    srv->kicked = NULL;
    /* Close callbacks (the only place a conn is freed) cannot run while this loop runs, so every
     * conn on the detached list stays valid. */
    while (list) {
        struct conn *c = list;
        list = c->kick_next;
        c->kick_next = NULL;
        c->kicked = false;
        conn_process(c);
    }
    if (srv->kicked == NULL)
        (void)uv_idle_stop(&srv->kick_idle);
}

static void conn_unkick(struct conn *c)
{
    struct conn **pp = &c->srv->kicked;

    if (!c->kicked)
        return;
    while (*pp && *pp != c)
        pp = &(*pp)->kick_next;
    if (*pp)
        *pp = c->kick_next;
    c->kicked = false;
}

static void on_write(uv_write_t *w, int status)
{
    struct wreq *wr = (struct wreq *)w;
    struct conn *c = wr->c;

    c->pending -= wr->n;
    free(wr);
    if (c->closing)
        return;
    if (status < 0) {
        log_debug("http: write: %s", uv_strerror(status));
        conn_close(c);
        return;
    }
    struct wr_http_req *r = c->cur;
    if (c->ws && c->ws->drain_armed && c->pending < LOW_WATER) {
        c->ws->drain_armed = false;
        if (c->ws->on_drain)
            c->ws->on_drain(c->ws, c->ws->user);
        if (c->closing)
            return;
    }
    if (r && r->drain_armed && c->pending < LOW_WATER) {
        r->drain_armed = false;
        if (r->on_drain && !r->closed)
            r->on_drain(r);
    }
    conn_process(c);
}

/* Queue up to three pieces as one write (copied). Nothing is written once the connection is
 * closing. */
static void conn_write3(struct conn *c, const void *a, size_t an, const void *b, size_t bn,
                        const void *t, size_t tn)
{
    struct wreq *wr;
    uv_buf_t buf;
    int rc;

    if (c->closing || an + bn + tn == 0)
        return;
    if (c->pending == 0) {
        /* Nothing queued: write now. What the socket takes needs no copy and no change of the
         * poll set (a uv_write costs an epoll_ctl each time); only the rest is queued. Nothing
         * waits for this write's completion: what a finished write unblocks (the request's
         * end, a drain) is checked by conn_process, which the callers kick. */
        uv_buf_t bufs[3] = {uv_buf_init((char *)a, (unsigned)an),
                            uv_buf_init((char *)b, (unsigned)bn),
                            uv_buf_init((char *)t, (unsigned)tn)};
        int w = uv_try_write(&c->io.s, bufs, 3);
        if (w < 0 && w != UV_EAGAIN) {
            log_debug("http: write: %s", uv_strerror(w));
            conn_close(c);
            return;
        }
        size_t done = w > 0 ? (size_t)w : 0;
        if (done >= an + bn + tn)
            return;
        /* Skip what went out. */
        size_t skip = done;
        if (skip >= an) {
            skip -= an;
            a = NULL;
            an = 0;
            if (skip >= bn) {
                skip -= bn;
                b = NULL;
                bn = 0;
                t = (const char *)t + skip;
                tn -= skip;
            } else {
                b = (const char *)b + skip;
                bn -= skip;
            }
        } else {
            a = (const char *)a + skip;
            an -= skip;
        }
    }
    wr = xmalloc(sizeof(*wr) + an + bn + tn);
    wr->c = c;
    wr->n = an + bn + tn;
    if (an)
        memcpy(wr->data, a, an);
    if (bn)
        memcpy(wr->data + an, b, bn);
    if (tn)
        memcpy(wr->data + an + bn, t, tn);
    buf = uv_buf_init(wr->data, (unsigned)wr->n);
    rc = uv_write(&wr->w, &c->io.s, &buf, 1, on_write);
    if (rc < 0) {
        log_debug("http: write: %s", uv_strerror(rc));
        free(wr);
        conn_close(c);
        return;
    }
    c->pending += wr->n;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct conn *c = h->data;

    if (c->in == NULL) {
        c->in = xmalloc(IN_CAP);
        c->in_off = c->in_len = 0;
    }
    if (c->in_off > 0) {
        memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
        c->in_len -= c->in_off;
        c->in_off = 0;
    }
    *buf = uv_buf_init(c->in + c->in_len, (unsigned)(IN_CAP - c->in_len));
}

static void conn_release_input(struct conn *c)
{
    if (c->in && c->in_off == c->in_len) {
        free(c->in);
        c->in = NULL;
        c->in_off = c->in_len = 0;
    }
}

static void conn_on_eof(struct conn *c)
{
    struct wr_http_req *r = c->cur;

    if (r && r->dispatched && !c->ws && r->resp_ended && (r->body_done || c->parse_dead)) {
        /* The response is only being flushed: let it go out, then close. */
        c->want_close = true;
        return;
    }
    /* Idle, half a request, or a request in flight: we cannot tell a half-close from a client
     * that went away, and a handler streaming to a gone client must stop, so this aborts. */
    conn_close(c);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = s->data;

    if (nread < 0) {
        if (nread == UV_ENOBUFS) {
            conn_update_read(c);
            return;
        }
        c->read_eof = true;
        (void)uv_read_stop(s);
        c->reading = false;
        conn_release_input(c);
        conn_on_eof(c);
        return;
    }
    if (nread == 0) {
        conn_release_input(c);
        return;
    }
    if (c->lingering || c->parse_dead) {
        /* Nothing more will be parsed: drop what arrives, so the client's writes keep going
         * and our close does not reset the connection before it read our answer. */
        c->in_len = c->in_off;
        conn_release_input(c);
        return;
    }
    c->in_len += (size_t)nread;
    c->rx_at = uv_now(c->srv->loop);
    conn_process(c);
}

/* Read while there is a use for the bytes: parsing, or discarding while lingering. A paused
 * request body stops reading at once (TCP backpressure), and a full input buffer (pipelined
 * requests behind a busy one) stops it too. */
static void conn_update_read(struct conn *c)
{
    bool want;

    if (c->closing || c->read_eof)
        want = false;
    else if (c->ws)
        want = !c->ws->paused && !(c->in && c->in_off == 0 && c->in_len == IN_CAP);
    else if (c->lingering || c->parse_dead)
        want = true;
    else if (c->in && c->in_off == 0 && c->in_len == IN_CAP)
        want = false;
    else if (c->cur && c->cur->mode == BODY_STREAM && c->cur->body_paused && !c->cur->body_done)
        want = false;
    else
        want = true;
    if (want && !c->reading) {
        int rc = uv_read_start(&c->io.s, on_alloc, on_read);
        if (rc < 0) {
            log_debug("http: read start: %s", uv_strerror(rc));
            conn_close(c);
            return;
        }
        c->reading = true;
    } else if (!want && c->reading) {
        (void)uv_read_stop(&c->io.s);
        c->reading = false;
    }
    conn_arm(c);
}

/* ---- timeouts ------------------------------------------------------------------------------ */

/* True while the server reads a request body that the client owes: not while the handler has
 * not asked for it, has paused it (backpressure: the stall is ours), or called it interactive. */
static bool body_waiting(const struct conn *c)
{
    const struct wr_http_req *r = c->cur;

    if (c->phase != PH_ACTIVE || c->ws || !c->reading || c->parse_dead || r == NULL)
        return false;
    if (!r->dispatched || r->no_body || r->body_done || r->interactive || r->mode == BODY_NONE)
        return false;
    return !(r->mode == BODY_STREAM && r->body_paused);
}

/* Start or stop the body clock as body_waiting says. */
static void body_clock_update(struct conn *c, uint64_t now)
{
    bool waiting = body_waiting(c);

    if (waiting && !c->body_clock)
        c->rx_at = now; /* the client owes bytes from now on */
    c->body_clock = waiting;
}

/* When the connection times out, in loop time; 0 if it cannot. Only the client's silence
 * counts: a request whose response is being produced has no deadline. */
static uint64_t conn_deadline(const struct conn *c)
{
    const struct wr_http_server *srv = c->srv;

    if (c->ws)
        return c->ws_close_at ? c->ws_close_at + WS_CLOSE_MS : 0;
    switch (c->phase) {
    case PH_NEW:
        return 0;
    case PH_HEAD:
        return c->phase_at + srv->head_ms;
    case PH_IDLE:
        return c->phase_at + (c->idle_ms ? c->idle_ms : srv->idle_ms);
    case PH_ACTIVE:
        return c->body_clock ? c->rx_at + srv->body_ms : 0;
    case PH_LINGER:
        return c->phase_at + LINGER_MS;
    }
    return 0;
}

static void on_timer(uv_timer_t *t);

/* Arm the timer for the connection's deadline. The timer is only moved earlier: one that fires
 * before the deadline (input arrived meanwhile) re-arms itself, so a read costs no timer call. */
static void conn_arm(struct conn *c)
{
    uint64_t now = uv_now(c->srv->loop);
    uint64_t d;

    if (c->closing)
        return;
    body_clock_update(c, now);
    d = conn_deadline(c);
    if (d == 0 || (c->armed != 0 && c->armed <= d))
        return;
    c->armed = d;
    (void)uv_timer_start(&c->timer, on_timer, d > now ? d - now : 0, 0);
}

/* A deadline passed. A request whose body stalled is answered 408 if its response has not
 * started; everything else (a head not sent in time, an idle keep-alive connection, a linger or
 * a WebSocket close handshake that ran out) just closes. */
static void conn_timed_out(struct conn *c)
{
    struct wr_http_req *r = c->cur;

    if (!c->lingering && !c->ws && c->phase == PH_ACTIVE && r && !r->resp_started) {
        log_debug("http: req=%s: request body stalled for %u ms", r->id, c->srv->body_ms);
        conn_fail(c, 408, "the request body stalled: nothing arrived for too long");
        return;
    }
    conn_close(c);
}

static void on_timer(uv_timer_t *t)
{
    struct conn *c = t->data;
    uint64_t now = uv_now(c->srv->loop);
    uint64_t d;

    c->armed = 0;
    body_clock_update(c, now);
    d = conn_deadline(c);
    if (d == 0)
        return;
    if (now < d) {
        conn_arm(c);
        return;
    }
    conn_timed_out(c);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    (void)req;
    (void)status;
}

/* Close after the last response without resetting the connection: send FIN, keep reading and
 * dropping what the client still sends (an unread upload behind a 413), and close on its EOF or
 * after LINGER_MS. Closing with unread input would send RST, which can destroy the response
 * before the client reads it. */
static void conn_linger(struct conn *c)
{
    if (c->closing || c->lingering)
        return;
    c->lingering = true;
    c->in_off = c->in_len;
    conn_release_input(c);
    if (c->read_eof || uv_shutdown(&c->shut, &c->io.s, on_shutdown) < 0) {
        conn_close(c);
        return;
    }
    conn_set_phase(c, PH_LINGER);
    conn_update_read(c);
}

/* ---- WebSocket ----------------------------------------------------------------------------- */

static ssize_t ws_recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags,
                          void *ud)
{
    struct wr_ws *ws = ud;
    struct conn *c = ws->c;
    size_t avail = c->in ? c->in_len - c->in_off : 0;
    size_t n = avail < len ? avail : len;

    if (n == 0 || ws->paused) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    memcpy(buf, c->in + c->in_off, n);
    c->in_off += n;
    return (ssize_t)n;
}

static ssize_t ws_send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                          void *ud)
{
    struct wr_ws *ws = ud;

    if (ws->c->closing) {
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    /* Everything is accepted into the write queue; wr_ws_send reports it for backpressure. */
    conn_write3(ws->c, data, len, NULL, 0, NULL, 0);
    return (ssize_t)len;
}

static void ws_msg_cb(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
                      void *ud)
{
    struct wr_ws *ws = ud;

    if (ws->c->closing)
        return;
    if ((arg->opcode == WSLAY_TEXT_FRAME || arg->opcode == WSLAY_BINARY_FRAME) &&
        ws->cbs.on_message)
        ws->cbs.on_message(ws, arg->opcode, arg->msg, arg->msg_length, ws->user);
}

static void ws_process(struct conn *c)
{
    struct wr_ws *ws = c->ws;
    int rc = 0;

    if (ws->paused) {
        /* Input stays in c->in until wr_ws_resume. */
    } else if (wslay_event_want_read(ws->ctx)) {
        ws->in_recv = true;
        rc = wslay_event_recv(ws->ctx);
        ws->in_recv = false;
    } else if (c->in) {
        c->in_off = c->in_len;
    }
    if (c->closing)
        return;
    if (rc == 0)
        rc = wslay_event_send(ws->ctx);
    if (rc < 0) {
        log_debug("http: websocket: wslay error %d", rc);
        conn_close(c);
        return;
    }
    /* Both close frames exchanged (or the library gave up on the stream): close once flushed. */
    if (!wslay_event_want_read(ws->ctx) && !wslay_event_want_write(ws->ctx) && c->pending == 0)
        conn_close(c);
}

/* ---- llhttp callbacks ---------------------------------------------------------------------- */

static int parse_fail(llhttp_t *p, int status, const char *msg)
{
    struct conn *c = p->data;

    c->err_status = status;
    c->err_msg = msg;
    return HPE_USER;
}

static int hdr_count(llhttp_t *p, size_t n)
{
    struct conn *c = p->data;

    c->hdr_bytes += n;
    if (c->hdr_bytes > c->srv->max_header_bytes)
        return parse_fail(p, 431, "request line and headers are too large");
    return 0;
}

static int on_message_begin(llhttp_t *p)
{
    struct conn *c = p->data;

    if (c->cur == NULL)
        c->cur = req_new(c);
    if (c->phase == PH_IDLE)
        conn_set_phase(c, PH_HEAD); /* the head deadline runs from its first byte */
    c->hdr_bytes = 0;
    wr_buf_fini(&c->hfield);
    wr_buf_fini(&c->hvalue);
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
    struct conn *c = p->data;

    if (c->cur->url.len + n > URL_MAX)
        return parse_fail(p, 414, "request target is too long");
    wr_buf_append(&c->cur->url, at, n);
    return hdr_count(p, n);
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    struct conn *c = p->data;

    wr_buf_append(&c->hfield, at, n);
    return hdr_count(p, n);
}

/* True if only blanks stand between the last line end of the input and `at` (a pointer into the
 * input llhttp_execute was given), looking back into earlier input through c->lf_ws. */
static bool after_lf(const struct conn *c, const char *at)
{
    const char *q = at;

    while (q > c->parse_base && (q[-1] == ' ' || q[-1] == '\t'))
        q--;
    return q > c->parse_base ? q[-1] == '\n' : c->lf_ws;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    struct conn *c = p->data;

    /* A value piece that starts a line is a continuation line (obs-fold, RFC 9112 5.2): llhttp
     * joins it to the value (skipping the line end if the value was empty), a proxy may not.
     * A value's first piece follows its colon, a piece split off by a read follows the end of
     * the read before. */
    if (n > 0 && after_lf(c, at))
        return parse_fail(p, 400, "a header line starts with whitespace (obs-fold)");
    wr_buf_append(&c->hvalue, at, n);
    return hdr_count(p, n);
}

static int on_header_value_complete(llhttp_t *p)
{
    struct conn *c = p->data;
    struct kvs *h = &c->cur->headers;
    const char *name = wr_buf_str(&c->hfield);
    const char *val = wr_buf_str(&c->hvalue);
    size_t vl = c->hvalue.len;

    while (vl > 0 && (val[vl - 1] == ' ' || val[vl - 1] == '\t'))
        vl--;
    if (c->hfield.len == 0)
        return parse_fail(p, 400, "a header has an empty name");
    /* Trailer fields are not merged into the headers (RFC 9110 6.5.1): the handler read those
     * before the body, and a proxy may pass trailers it would have stripped as headers. */
    if (c->cur->headers_done)
        goto out;
    /* Repeated headers are joined with ", " (RFC 9110 5.3). */
    for (size_t i = 0; i < h->n; i++) {
        if (strcasecmp(h->v[i].name, name) == 0) {
            if (strcasecmp(name, "Host") == 0)
                return parse_fail(p, 400, "more than one Host header");
            char *joined = xasprintf("%s, %.*s", h->v[i].value, (int)vl, val);
            free(h->v[i].value);
            h->v[i].value = joined;
            goto out;
        }
    }
    kvs_push(h, xstrdup(name), xstrndup(val, vl));
out:
    wr_buf_fini(&c->hfield);
    wr_buf_fini(&c->hvalue);
    return hdr_count(p, 4); /* ": " and CRLF */
}

/* Chunk extensions are parsed and dropped; only their size is bounded (llhttp has no bound). */
static int on_chunk_extension(llhttp_t *p, const char *at, size_t n)
{
    struct conn *c = p->data;

    c->ext_bytes += n + 1; /* and its ';' or '=' */
    if (c->ext_bytes > CHUNK_EXT_MAX)
        return parse_fail(p, 400, "chunk extensions are too long");
    return 0;
}

static int on_chunk_header(llhttp_t *p)
{
    struct conn *c = p->data;

    c->ext_bytes = 0;
    return 0;
}

/* What llhttp lets through and a proxy in front could frame differently: a version other than
 * HTTP/1.0 and 1.1, and a transfer coding other than chunked alone (llhttp takes "gzip, chunked"
 * and Transfer-Encoding in HTTP/1.0, RFC 9112 6.1). Returns 0 or a parse_fail. */
static int check_framing(llhttp_t *p, const struct wr_http_req *r)
{
    const char *te;
    size_t n;

    if (p->http_major != 1 || p->http_minor > 1)
        return parse_fail(p, 505, "only HTTP/1.0 and HTTP/1.1 are served");
    if (!(p->flags & F_TRANSFER_ENCODING))
        return 0;
    if (p->http_minor == 0)
        return parse_fail(p, 400, "Transfer-Encoding in an HTTP/1.0 request");
    te = kvs_get(&r->headers, "Transfer-Encoding", true);
    te = te ? te + strspn(te, " \t") : "";
    n = strcspn(te, " \t");
    if (n != 7 || strncasecmp(te, "chunked", 7) != 0 || te[n + strspn(te + n, " \t")] != '\0')
        return parse_fail(p, 501, "the only transfer coding served is chunked");
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    struct conn *c = p->data;
    struct wr_http_req *r = c->cur;
    const char *msg = NULL;
    const char *rid;

    r->method = llhttp_method_name((llhttp_method_t)p->method);
    if ((p->flags & F_CONTENT_LENGTH) && !(p->flags & F_CHUNKED))
        r->content_length = (int64_t)p->content_length;
    r->no_body = !((p->flags & F_CHUNKED) || p->content_length > 0);
    r->keep_alive = llhttp_should_keep_alive(p);
    r->is_upgrade =
        ((p->flags & F_UPGRADE) && (p->flags & F_CONNECTION_UPGRADE)) || p->method == HTTP_CONNECT;
    rid = kvs_get(&r->headers, "X-Request-Id", true);
    if (rid && request_id_valid(rid))
        snprintf(r->id, sizeof(r->id), "%s", rid);
    else
        request_id_generate(c->srv, r->id);
    if (check_framing(p, r) != 0)
        return -1;
    if (parse_target(r, &msg) < 0) {
        c->err_status = 400;
        c->err_msg = msg;
        return -1;
    }
    r->headers_done = true;
    /* Stop here: the handler runs outside llhttp, and the body is parsed only once the handler
     * chose what to do with it. */
    return HPE_PAUSED;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    struct conn *c = p->data;
    struct wr_http_req *r = c->cur;

    r->bytes_in += n;
    switch (r->mode) {
    case BODY_BUFFER:
        if (r->body.len + n > r->body_max)
            return parse_fail(p, 413, "request body is too large");
        wr_buf_append(&r->body, at, n);
        return 0;
    case BODY_STREAM:
        if (r->on_data && !r->closed)
            r->on_data(r, at, n);
        if (c->closing)
            return HPE_USER;
        return r->mode == BODY_STREAM && r->body_paused ? HPE_PAUSED : 0;
    case BODY_DISCARD:
        r->discarded += n;
        if (r->discarded > DISCARD_MAX) {
            /* Cheaper to close than to read the rest. */
            c->parse_dead = true;
            return HPE_USER;
        }
        return 0;
    case BODY_NONE:
        break;
    }
    return HPE_PAUSED;
}

static int on_message_complete(llhttp_t *p)
{
    struct conn *c = p->data;

    if (c->cur)
        c->cur->body_done = true;
    conn_owe_body(c, false);
    /* Pipelined requests wait until this one is finished. */
    return HPE_PAUSED;
}

/* The server answers a request itself (a parse error, 413) and closes the connection after. */
static void conn_fail(struct conn *c, int status, const char *msg)
{
    struct wr_http_req *r = c->cur;
    /* As docs/openapi.yaml says: 413 is `too_large`, like the handlers' own 413s. */
    enum wr_err_kind kind = status == 400                    ? WR_EINVAL
                            : status == 408                  ? WR_ETIMEOUT
                            : status == 413                  ? WR_ETOOBIG
                            : status == 501 || status == 505 ? WR_EUNSUPPORTED
                                                             : WR_ELIMIT;
    const char *code = wr_err_kind_name(kind);

    c->parse_dead = true;
    c->want_close = true;
    if (r == NULL) {
        r = req_new(c);
        c->cur = r;
    }
    if (r->id[0] == '\0')
        request_id_generate(c->srv, r->id);
    if (!r->dispatched)
        r->dispatched = r->headers_done = r->internal = true; /* no handler to tell */
    conn_set_phase(c, PH_ACTIVE);
    if (r->resp_started) {
        /* The handler's response is under way and cannot be replaced. */
        conn_close(c);
        return;
    }
    r->server_answered = true;
    if (status == 503)
        wr_http_resp_header(r, "Retry-After", RETRY_AFTER);
    resp_error(r, status, code, msg);
}

/* Feed buffered input to llhttp until it pauses, needs more, or fails. */
static void conn_parse(struct conn *c)
{
    static const char nothing[1];
    const char *start = c->in ? c->in + c->in_off : nothing;
    size_t n = c->in ? c->in_len - c->in_off : 0;
    llhttp_errno_t e;

    if (c->parser_paused) {
        llhttp_resume(&c->parser);
        c->parser_paused = false;
    }
    c->err_status = 0;
    c->parse_base = start;
    e = llhttp_execute(&c->parser, start, n);
    if (c->closing)
        return;
    switch (e) {
    case HPE_OK:
        c->lf_ws = after_lf(c, start + n);
        c->in_off = c->in_len;
        return;
    case HPE_PAUSED: {
        const char *stop = llhttp_get_error_pos(&c->parser);
        c->lf_ws = after_lf(c, stop);
        c->in_off += (size_t)(stop - start);
        c->parser_paused = true;
        return;
    }
    case HPE_PAUSED_UPGRADE:
        /* The bytes after an upgrade request belong to another protocol; only
         * wr_http_ws_accept takes them, and without it the connection closes. */
        c->in_off += (size_t)(llhttp_get_error_pos(&c->parser) - start);
        c->parse_dead = true;
        return;
    default:
        break;
    }
    if (c->parse_dead && c->err_status == 0) {
        /* on_body gave up discarding. */
        c->want_close = true;
        return;
    }
    if (c->err_status)
        conn_fail(c, c->err_status, c->err_msg);
    else
        conn_fail(c, 400, llhttp_get_error_reason(&c->parser));
}

/* Whether llhttp may consume more input now. */
static bool parse_allowed(const struct conn *c)
{
    const struct wr_http_req *r = c->cur;

    if (c->parse_dead || c->lingering || (c->want_close && (!r || r->body_done)))
        return false;
    if (r == NULL || !r->headers_done)
        return true;
    if (!r->dispatched || r->body_done)
        return false;
    if (r->no_body)
        return true;
    switch (r->mode) {
    case BODY_NONE:
        return false;
    case BODY_STREAM:
        return !r->body_paused;
    case BODY_BUFFER:
    case BODY_DISCARD:
        return true;
    }
    return false;
}

/* Everything that calls back into the handler happens here, one step at a time, re-checking the
 * state after each callback. Runs only from libuv callbacks. */
static void conn_process(struct conn *c)
{
    while (!c->closing) {
        struct wr_http_req *r = c->cur;

        if (c->ws) {
            ws_process(c);
            break;
        }
        if (r && r->headers_done && !r->dispatched) {
            if (!conn_admit_body(c))
                continue;
            r->dispatched = true;
            conn_set_phase(c, PH_ACTIVE);
            c->srv->handler(r, c->srv->ctx);
            continue;
        }
        if (r && r->dispatched && r->body_done && !r->end_delivered && !r->closed &&
            (r->mode == BODY_BUFFER || r->mode == BODY_STREAM)) {
            r->end_delivered = true;
            if (r->mode == BODY_BUFFER && r->read_cb)
                r->read_cb(r, wr_buf_str(&r->body), r->body.len);
            else if (r->mode == BODY_STREAM && r->on_end)
                r->on_end(r);
            continue;
        }
        if (r && req_done(c, r)) {
            bool close_after = c->want_close || c->parse_dead || r->is_upgrade;
            req_finish(c, r, false);
            if (close_after) {
                conn_linger(c);
                break;
            }
            conn_set_phase(c, PH_IDLE);
            continue;
        }
        if (!parse_allowed(c))
            break;
        /* A request without a body completes without further input, but llhttp only says so
         * when it runs; so does one whose body was paused at its last byte (llhttp still owes
         * on_message_complete after a resume). */
        bool empty = c->in == NULL || c->in_off == c->in_len;
        bool bodyless = r && r->headers_done && r->no_body && !r->body_done;
        bool resumed = c->parser_paused && r && r->headers_done && !r->body_done;
        if (empty && !bodyless && !resumed)
            break;
        conn_parse(c);
        if (empty && c->cur == r && !r->body_done)
            break;
    }
    if (!c->closing) {
        conn_release_input(c);
        conn_update_read(c);
    }
}

/* ---- connections --------------------------------------------------------------------------- */

static void conn_free(struct conn *c)
{
    struct wr_http_server *srv = c->srv;
    struct wr_http_req *r = c->cur;

    conn_unkick(c);
    if (c->ws) {
        struct wr_ws *ws = c->ws;
        bool clean = wslay_event_get_close_received(ws->ctx) && wslay_event_get_close_sent(ws->ctx);
        if (ws->cbs.on_close)
            ws->cbs.on_close(ws, ws->user);
        wslay_event_context_free(ws->ctx);
        free(ws);
        c->ws = NULL;
        if (r)
            req_finish(c, r, !clean);
    } else if (r) {
        req_finish(c, r, !req_done(c, r));
    }
    if (c->data_free)
        c->data_free(c->data);
    free(c->in);
    wr_buf_fini(&c->hfield);
    wr_buf_fini(&c->hvalue);
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    free(c);
    srv_handle_closed(srv);
}

static void on_conn_handle_closed(uv_handle_t *h)
{
    struct conn *c = h->data;

    if (--c->open_handles == 0)
        conn_free(c);
}

/* Close the connection now; a request still in flight sees on_close(aborted) from the close
 * callback. Safe to call repeatedly and from anywhere on the loop thread. */
static void conn_close(struct conn *c)
{
    if (c->closing)
        return;
    conn_uncount(c); /* uv_close closes the fd at once */
    c->closing = true;
    conn_unkick(c);
    if (c->reading)
        (void)uv_read_stop(&c->io.s);
    c->reading = false;
    uv_close(&c->io.h, on_conn_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_conn_handle_closed);
}

/* ---- caps ------------------------------------------------------------------------------- */

/* Log a cap that was hit, at most once per LIMIT_LOG_MS, with the count since the last line. */
static void srv_note_limit(struct wr_http_server *srv, enum limit_kind k, const char *what)
{
    uint64_t now = uv_now(srv->loop);

    srv->limit_log[k].n++;
    if (srv->limit_log[k].at != 0 && now - srv->limit_log[k].at < LIMIT_LOG_MS)
        return;
    log_warn("http: %s (%u times since the last report)", what, srv->limit_log[k].n);
    srv->limit_log[k].at = now;
    srv->limit_log[k].n = 0;
}

static struct conn_list *phase_list(struct conn *c)
{
    if (!c->counted)
        return NULL;
    switch (c->phase) {
    case PH_HEAD:
        return &c->srv->heads;
    case PH_IDLE:
        return &c->srv->idles;
    case PH_LINGER:
        return &c->srv->lingers;
    case PH_NEW:
    case PH_ACTIVE:
        break;
    }
    return NULL;
}

static void list_del(struct conn_list *l, struct conn *c)
{
    if (c->lprev)
        c->lprev->lnext = c->lnext;
    else
        l->first = c->lnext;
    if (c->lnext)
        c->lnext->lprev = c->lprev;
    else
        l->last = c->lprev;
    c->lprev = c->lnext = NULL;
    l->n--;
}

static void list_add(struct conn_list *l, struct conn *c)
{
    c->lprev = l->last;
    c->lnext = NULL;
    if (l->last)
        l->last->lnext = c;
    else
        l->first = c;
    l->last = c;
    l->n++;
}

/* Free one connection slot: close the oldest idle keep-alive connection, or else the oldest one
 * lingering after its answer, or else the oldest one still sending its head. Returns false if
 * there is none. */
static bool srv_shed(struct wr_http_server *srv)
{
    struct conn *victim = srv->idles.first     ? srv->idles.first
                          : srv->lingers.first ? srv->lingers.first
                                               : srv->heads.first;

    if (victim == NULL)
        return false;
    conn_close(victim);
    return true;
}

static void conn_set_phase(struct conn *c, enum conn_phase ph)
{
    struct wr_http_server *srv = c->srv;
    struct conn_list *l;

    if (c->closing)
        return;
    if ((l = phase_list(c)) != NULL)
        list_del(l, c);
    c->phase = ph;
    c->phase_at = uv_now(srv->loop);
    if ((l = phase_list(c)) != NULL)
        list_add(l, c);
    if (ph == PH_HEAD && srv->heads.n > srv->max_unauth) {
        srv_note_limit(srv, LIM_UNAUTH,
                       "too many connections sending their request head: "
                       "closed the oldest");
        conn_close(srv->heads.first);
    }
    conn_arm(c);
}

/* The client owes a request body on c, or no longer does. */
static void conn_owe_body(struct conn *c, bool owes)
{
    if (!c->counted || c->owes_body == owes)
        return;
    c->owes_body = owes;
    if (owes)
        c->srv->body_conns++;
    else
        c->srv->body_conns--;
}

static void conn_uncount(struct conn *c)
{
    struct conn_list *l = phase_list(c);

    if (!c->counted)
        return;
    conn_owe_body(c, false);
    if (l)
        list_del(l, c);
    wr_peers_del(c->srv->peers, &c->peer);
    c->srv->tcp_conns--;
    c->counted = false;
}

/* A request whose body is to come takes one of max_body places, or is answered 503 by the
 * server: requests sending bodies slowly cannot take every connection. Returns false if it was
 * answered. */
static bool conn_admit_body(struct conn *c)
{
    struct wr_http_server *srv = c->srv;

    if (c->cur->no_body || !c->counted)
        return true;
    if (srv->body_conns >= srv->max_body) {
        srv_note_limit(srv, LIM_BODIES, "too many requests sending a body: answered 503");
        conn_fail(c, 503, "too many requests are sending a body: retry later");
        return false;
    }
    conn_owe_body(c, true);
    return true;
}

/* Answer a new connection 503 and close it (lingering, so that the client reads the answer);
 * past REJECT_SLACK such connections, close it without one. Returns -1. */
static int conn_turn_away(struct conn *c, enum limit_kind k, const char *why)
{
    struct wr_http_server *srv = c->srv;

    srv_note_limit(srv, k, why);
    if (srv->tcp_conns > (uint64_t)srv->max_conns + REJECT_SLACK) {
        conn_close(c);
        return -1;
    }
    conn_fail(c, 503, why);
    conn_update_read(c); /* reads and drops the request while the answer goes out */
    return -1;
}

/* "tcp:ADDR" of a peer (IPv4-mapped IPv6 as IPv4). */
static void peer_name(const struct sockaddr *sa, char *out, size_t n)
{
    char a[INET6_ADDRSTRLEN] = "?";

    if (sa->sa_family == AF_INET) {
        (void)inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, a, sizeof(a));
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *ip = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(ip))
            (void)inet_ntop(AF_INET, &ip->s6_addr[12], a, sizeof(a));
        else
            (void)inet_ntop(AF_INET6, ip, a, sizeof(a));
    }
    snprintf(out, n, "tcp:%s", a);
}

/* Count a new TCP connection against the caps. Returns 0, or -1 if it was turned away. */
static int conn_admit(struct conn *c)
{
    struct wr_http_server *srv = c->srv;
    struct sockaddr_storage ss = {0};
    int len = sizeof(ss);

    if (uv_tcp_getpeername(&c->io.tcp, (struct sockaddr *)&ss, &len) < 0)
        ss.ss_family = AF_UNSPEC;
    peer_name((struct sockaddr *)&ss, c->peer_name, sizeof(c->peer_name));
    wr_peer_key_of((struct sockaddr *)&ss, &c->peer);
    c->counted = true;
    srv->tcp_conns++;
    if (wr_peers_add(srv->peers, &c->peer) > srv->max_per_peer)
        return conn_turn_away(c, LIM_PEER, "too many connections from this client");
    if (srv->tcp_conns > srv->max_conns && !srv_shed(srv))
        return conn_turn_away(c, LIM_CONNS, "the server is at its connection limit");
    if (srv->tcp_conns > srv->max_conns)
        srv_note_limit(srv, LIM_CONNS,
                       "at the connection limit: closed the oldest idle, answered or "
                       "unfinished connection");
    return 0;
}

/* accept failed for want of file descriptors. libuv then closes its own spare fd, accepts and
 * closes what is pending, and takes the spare back; without that spare (another thread took the
 * fd it freed) it calls here, and its accept loop goes on calling accept, which fails with
 * EMFILE even with nothing pending, until it sees EAGAIN: that needs a free fd. So close a spare
 * of ours (or, without one, the oldest idle connection, or any TCP connection), accept and close
 * what is pending, and leave the fd free: the spare is taken back on the next loop iteration
 * (on_kick_idle). */
static void srv_out_of_fds(struct wr_http_server *srv, uv_stream_t *listener)
{
    uv_os_fd_t lfd;
    int fd;

    srv_note_limit(srv, LIM_FDS, "out of file descriptors: closing new connections");
    if (uv_fileno((uv_handle_t *)listener, &lfd) < 0)
        return;
    if (srv->spare_fd < 0 && !srv_shed(srv)) {
        struct conn *any = srv->conns;
        while (any && (any->closing || any->is_unix))
            any = any->next;
        if (any)
            conn_close(any);
    }
    if (srv->spare_fd >= 0)
        (void)close(srv->spare_fd);
    srv->spare_fd = -1;
    while ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0 || errno == EINTR)
        if (fd >= 0)
            (void)close(fd);
    (void)uv_idle_start(&srv->kick_idle, on_kick_idle);
}

static void on_connection(uv_stream_t *server, int status)
{
    struct wr_http_server *srv = server->data;
    struct conn *c;
    int rc;

    if (status == UV_EMFILE || status == UV_ENFILE) {
        srv_out_of_fds(srv, server);
        return;
    }
    if (status < 0) {
        log_warn("http: accept: %s", uv_strerror(status));
        return;
    }
    c = xcalloc(1, sizeof(*c));
    c->srv = srv;
    c->is_unix = server == (uv_stream_t *)&srv->unix_l;
    snprintf(c->peer_name, sizeof(c->peer_name), "%s", c->is_unix ? "unix" : "tcp:?");
    if (c->is_unix)
        rc = uv_pipe_init(srv->loop, &c->io.pipe, 0);
    else
        rc = uv_tcp_init(srv->loop, &c->io.tcp);
    if (rc < 0) {
        log_warn("http: accept: %s", uv_strerror(rc));
        free(c);
        return;
    }
    (void)uv_timer_init(srv->loop, &c->timer);
    c->io.h.data = c;
    c->timer.data = c;
    c->open_handles = 2;
    srv->open_handles++;
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    llhttp_init(&c->parser, HTTP_REQUEST, &parser_settings);
    c->parser.data = c;
    rc = uv_accept(server, &c->io.s);
    if (rc < 0) {
        log_warn("http: accept: %s", uv_strerror(rc));
        conn_close(c);
        return;
    }
    if (!c->is_unix) {
        (void)uv_tcp_nodelay(&c->io.tcp, 1);
        if (conn_admit(c) < 0)
            return;
    }
    conn_set_phase(c, PH_HEAD);
    conn_update_read(c);
}

/* ---- the server ---------------------------------------------------------------------------- */

static void srv_handle_closed(struct wr_http_server *srv)
{
    if (--srv->open_handles > 0 || !srv->stopping)
        return;
    void (*done)(void *) = srv->done;
    void *arg = srv->done_arg;
    free(srv->unix_path);
    wr_peers_free(srv->peers);
    free(srv->region_hdr);
    if (srv->spare_fd >= 0)
        (void)close(srv->spare_fd);
    free(srv);
    if (done)
        done(arg);
}

static void on_srv_handle_closed(uv_handle_t *h)
{
    srv_handle_closed(h->data);
}

static void settings_init(void)
{
    static bool done;

    if (done)
        return;
    llhttp_settings_init(&parser_settings);
    parser_settings.on_message_begin = on_message_begin;
    parser_settings.on_url = on_url;
    parser_settings.on_header_field = on_header_field;
    parser_settings.on_header_value = on_header_value;
    parser_settings.on_header_value_complete = on_header_value_complete;
    parser_settings.on_headers_complete = on_headers_complete;
    parser_settings.on_chunk_extension_name = on_chunk_extension;
    parser_settings.on_chunk_extension_value = on_chunk_extension;
    parser_settings.on_chunk_header = on_chunk_header;
    parser_settings.on_body = on_body;
    parser_settings.on_message_complete = on_message_complete;
    done = true;
}

static int listen_unix(struct wr_http_server *srv, const char *path, struct wr_err *err)
{
    int rc;

    if (unlink(path) < 0 && errno != ENOENT)
        return wr_err_sys(err, "remove old socket `%s`", path);
    rc = uv_pipe_init(srv->loop, &srv->unix_l, 0);
    if (rc < 0)
        return wr_err_set(err, WR_ESYS, -rc, "unix socket");
    srv->unix_l.data = srv;
    srv->has_unix = true;
    srv->open_handles++;
    rc = uv_pipe_bind(&srv->unix_l, path);
    if (rc < 0)
        return wr_err_set(err, WR_ESYS, -rc, "bind `%s`", path);
    srv->unix_path = xstrdup(path);
    /* Between bind and chmod the mode follows the umask; the directory is what keeps others out
     * (docs/design/http.md). */
    if (chmod(path, 0600) < 0)
        return wr_err_sys(err, "chmod `%s`", path);
    rc = uv_listen((uv_stream_t *)&srv->unix_l, BACKLOG, on_connection);
    if (rc < 0)
        return wr_err_set(err, WR_ESYS, -rc, "listen `%s`", path);
    return 0;
}

static int listen_tcp(struct wr_http_server *srv, const char *host, int port, struct wr_err *err)
{
    struct sockaddr_storage ss;
    struct sockaddr_storage bound;
    int len = sizeof(bound);
    int rc;

    if (strcmp(host, "localhost") == 0)
        host = "127.0.0.1";
    if (port < 0 || port > 65535)
        return wr_err_set(err, WR_EINVAL, 0, "tcp port %d out of range", port);
    if (strchr(host, ':'))
        rc = uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss);
    else
        rc = uv_ip4_addr(host, port, (struct sockaddr_in *)&ss);
    if (rc < 0)
        return wr_err_set(err, WR_EINVAL, 0, "tcp host `%s` is not an IP address", host);
    rc = uv_tcp_init(srv->loop, &srv->tcp_l);
    if (rc < 0)
        return wr_err_set(err, WR_ESYS, -rc, "tcp socket");
    srv->tcp_l.data = srv;
    srv->has_tcp = true;
    srv->open_handles++;
    rc = uv_tcp_bind(&srv->tcp_l, (const struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&srv->tcp_l, BACKLOG, on_connection);
    if (rc < 0)
        return wr_err_set(err, WR_ESYS, -rc, "listen on %s:%d", host, port);
    rc = uv_tcp_getsockname(&srv->tcp_l, (struct sockaddr *)&bound, &len);
    if (rc < 0)
        return wr_err_set(err, WR_ESYS, -rc, "getsockname");
    if (bound.ss_family == AF_INET6)
        srv->tcp_port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
    else
        srv->tcp_port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
    return 0;
}

/* Start listening as cfg says. Returns 0 and the server in *out, or -1 with err set (nothing is
 * left listening; the half-built server is torn down through the loop). */
int wr_http_server_start(const struct wr_http_config *cfg, struct wr_http_server **out,
                         struct wr_err *err)
{
    struct wr_http_server *srv;

    if (cfg->loop == NULL || cfg->handler == NULL)
        return wr_err_set(err, WR_EINVAL, 0, "http server needs a loop and a handler");
    if (cfg->unix_path == NULL && cfg->tcp_host == NULL)
        return wr_err_set(err, WR_EINVAL, 0, "http server needs a unix path or a tcp host");
    settings_init();
    srv = xcalloc(1, sizeof(*srv));
    srv->loop = cfg->loop;
    srv->handler = cfg->handler;
    srv->ctx = cfg->ctx;
    srv->on_finish = cfg->on_finish;
    if (cfg->region != NULL && *cfg->region != '\0' && strpbrk(cfg->region, "\r\n") == NULL)
        srv->region_hdr = xasprintf("Warren-Region: %s\r\n", cfg->region);
    srv->max_header_bytes = cfg->max_header_bytes ? cfg->max_header_bytes : DEFAULT_MAX_HDR;
    srv->idle_ms = cfg->idle_timeout_ms ? cfg->idle_timeout_ms : DEFAULT_IDLE_MS;
    srv->head_ms = cfg->header_timeout_ms ? cfg->header_timeout_ms : DEFAULT_HEAD_MS;
    srv->body_ms = cfg->body_timeout_ms ? cfg->body_timeout_ms : DEFAULT_BODY_MS;
    srv->max_conns = cfg->max_conns ? cfg->max_conns : DEFAULT_CONNS;
    srv->max_per_peer = cfg->max_conns_per_client ? cfg->max_conns_per_client : DEFAULT_PER_PEER;
    srv->max_unauth = cfg->max_unauthenticated;
    if (srv->max_unauth == 0)
        srv->max_unauth = srv->max_conns / 2 < DEFAULT_UNAUTH ? srv->max_conns / 2 : DEFAULT_UNAUTH;
    srv->max_body = cfg->max_body_conns ? cfg->max_body_conns : srv->max_conns / 2;
    srv->max_unauth = srv->max_unauth ? srv->max_unauth : 1; /* max_conns 1 */
    srv->max_body = srv->max_body ? srv->max_body : 1;
    srv->peers = wr_peers_new();
    srv->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (getrandom(&srv->id_seed, sizeof(srv->id_seed), 0) != sizeof(srv->id_seed))
        srv->id_seed = (uint64_t)uv_hrtime() ^ ((uint64_t)getpid() << 32);
    (void)uv_idle_init(srv->loop, &srv->kick_idle);
    srv->kick_idle.data = srv;
    srv->open_handles++;

    if ((cfg->unix_path && listen_unix(srv, cfg->unix_path, err) < 0) ||
        (cfg->tcp_host && listen_tcp(srv, cfg->tcp_host, cfg->tcp_port, err) < 0)) {
        wr_http_server_stop(srv, NULL, NULL);
        return -1;
    }
    *out = srv;
    return 0;
}

void wr_http_server_conns(const struct wr_http_server *srv, uint32_t *tcp, uint32_t *unix_conns,
                          uint32_t *websockets)
{
    *tcp = *unix_conns = *websockets = 0;
    for (const struct conn *c = srv->conns; c != NULL; c = c->next) {
        if (c->closing)
            continue;
        if (c->is_unix)
            (*unix_conns)++;
        else
            (*tcp)++;
        if (c->ws != NULL)
            (*websockets)++;
    }
}

/* The bound TCP port (useful with port 0), or -1 without a TCP listener. */
int wr_http_server_tcp_port(const struct wr_http_server *srv)
{
    return srv->has_tcp ? srv->tcp_port : -1;
}

/* Close the listeners and every connection (in-flight requests get on_close(aborted)); the server
 * is freed when the last handle's close callback ran, and done(arg) is called then. */
void wr_http_server_stop(struct wr_http_server *srv, void (*done)(void *arg), void *arg)
{
    if (srv == NULL || srv->stopping)
        return;
    srv->stopping = true;
    srv->done = done;
    srv->done_arg = arg;
    if (srv->has_unix) {
        uv_close((uv_handle_t *)&srv->unix_l, on_srv_handle_closed);
        if (srv->unix_path)
            (void)unlink(srv->unix_path);
    }
    if (srv->has_tcp)
        uv_close((uv_handle_t *)&srv->tcp_l, on_srv_handle_closed);
    uv_close((uv_handle_t *)&srv->kick_idle, on_srv_handle_closed);
    for (struct conn *c = srv->conns; c; c = c->next)
        conn_close(c);
}

/* ---- request accessors --------------------------------------------------------------------- */

const char *wr_http_req_method(const struct wr_http_req *req)
{
    return req->method ? req->method : "";
}

const char *wr_http_req_path(const struct wr_http_req *req)
{
    return req->path ? req->path : "";
}

const char *wr_http_req_query(const struct wr_http_req *req, const char *name)
{
    return kvs_get(&req->query, name, false);
}

size_t wr_http_req_query_all(const struct wr_http_req *req, const char *name, const char **vals,
                             size_t max)
{
    size_t n = 0;

    for (size_t i = 0; i < req->query.n; i++) {
        if (strcmp(req->query.v[i].name, name) != 0)
            continue;
        if (n < max)
            vals[n] = req->query.v[i].value;
        n++;
    }
    return n;
}

const char *wr_http_req_header(const struct wr_http_req *req, const char *name)
{
    return kvs_get(&req->headers, name, true);
}

const char *wr_http_req_id(const struct wr_http_req *req)
{
    return req->id;
}

bool wr_http_req_is_unix(const struct wr_http_req *req)
{
    return req->sub ? req->sub->is_unix : req->c->is_unix;
}

const char *wr_http_req_peer(const struct wr_http_req *req)
{
    return req->sub ? (req->sub->peer ? req->sub->peer : "internal") : req->c->peer_name;
}

void wr_http_req_set_note(struct wr_http_req *req, void *note, void (*note_free)(void *note))
{
    if (req->note_free)
        req->note_free(req->note);
    req->note = note;
    req->note_free = note_free;
}

void *wr_http_req_note(const struct wr_http_req *req)
{
    return req->note;
}

const char *wr_http_req_error_code(const struct wr_http_req *req)
{
    return req->err_code;
}

int64_t wr_http_req_content_length(const struct wr_http_req *req)
{
    return req->content_length;
}

void wr_http_req_set_data(struct wr_http_req *req, void *data,
                          void (*on_close)(struct wr_http_req *req, void *data, bool aborted))
{
    req->data = data;
    req->on_close = on_close;
}

void *wr_http_req_data(const struct wr_http_req *req)
{
    return req->data;
}

/* ---- request bodies ------------------------------------------------------------------------ */

/* Buffer the body (at most max bytes) and call cb with it from the loop. A declared
 * Content-Length above max is refused at once, without reading. */
void wr_http_req_read_body(struct wr_http_req *req, size_t max,
                           void (*cb)(struct wr_http_req *req, const char *body, size_t len))
{
    struct conn *c = req->c;

    if (req->mode != BODY_NONE || req->resp_started || req->closed || (c && c->closing))
        return;
    req->mode = BODY_BUFFER;
    req->body_max = max;
    req->read_cb = cb;
    if (req->sub != NULL) {
        (void)sub_read_body(req);
        return;
    }
    if (req->content_length > 0 && (uint64_t)req->content_length > max) {
        conn_fail(c, 413, "request body is too large");
        return;
    }
    conn_kick(c);
}

/* Stream the body through on_data/on_end, called from the loop. */
void wr_http_req_stream_body(struct wr_http_req *req,
                             void (*on_data)(struct wr_http_req *req, const char *p, size_t n),
                             void (*on_end)(struct wr_http_req *req))
{
    if (req->mode != BODY_NONE || req->resp_ended || req->closed || (req->c && req->c->closing))
        return;
    req->mode = BODY_STREAM;
    req->on_data = on_data;
    req->on_end = on_end;
    if (req->sub != NULL) {
        (void)sub_read_body(req);
        return;
    }
    conn_kick(req->c);
}

/* Stop reading the socket now; on_data is not called again until resume. */
void wr_http_req_pause_body(struct wr_http_req *req)
{
    if (req->closed || req->body_paused)
        return;
    req->body_paused = true;
    if (req->sub == NULL && !req->c->closing)
        conn_update_read(req->c);
}

void wr_http_req_resume_body(struct wr_http_req *req)
{
    if (req->closed || !req->body_paused)
        return;
    req->body_paused = false;
    if (req->sub != NULL)
        sub_kick(req->sub);
    else
        conn_kick(req->c);
}

void wr_http_req_interactive_body(struct wr_http_req *req)
{
    req->interactive = true;
    if (req->sub == NULL)
        conn_arm(req->c);
}

/* ---- responses ----------------------------------------------------------------------------- */

static bool header_name_ok(const char *s)
{
    if (*s == '\0')
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("!#$%&'*+-.^_`|~", *s))
            return false;
    return true;
}

/* Add a response header; framing headers are the server's and are ignored, as is anything with
 * a CR or LF in it (header injection). */
void wr_http_resp_header(struct wr_http_req *req, const char *name, const char *value)
{
    if (req->resp_started || req->closed || !header_name_ok(name) || strpbrk(value, "\r\n"))
        return;
    if (strcasecmp(name, "Content-Length") == 0 || strcasecmp(name, "Transfer-Encoding") == 0 ||
        strcasecmp(name, "Connection") == 0 || strcasecmp(name, "X-Request-Id") == 0 ||
        strcasecmp(name, "Warren-Region") == 0)
        return;
    wr_buf_printf(&req->resp_hdrs, "%s: %s\r\n", name, value);
}

/* Decide keep-alive and build the status line and headers. clen < 0 means chunked. */
static void resp_head(struct wr_http_req *r, struct wr_buf *h, int status, const char *ct,
                      int64_t clen)
{
    struct conn *c = r->c;
    bool keep =
        r->keep_alive && !r->is_upgrade && !c->want_close && !c->parse_dead && !c->srv->stopping;

    if (!keep)
        c->want_close = true;
    if (status < 100 || status > 999)
        status = 500;
    r->status = status;
    wr_buf_printf(h, "HTTP/1.1 %d %s\r\n", status, reason_phrase(status));
    wr_buf_printf(h, "X-Request-Id: %s\r\n", r->id);
    if (c->srv->region_hdr != NULL)
        wr_buf_puts(h, c->srv->region_hdr);
    if (status == 204 || status == 304) {
        /* RFC 9110 8.6, 15.3.5: no body, so no Content-Length and no type. */
    } else if (clen == 0 && (ct == NULL || *ct == '\0')) {
        wr_buf_puts(h, "Content-Length: 0\r\n");
    } else {
        wr_buf_printf(h, "Content-Type: %s\r\n",
                      ct && *ct && !strpbrk(ct, "\r\n") ? ct : "application/octet-stream");
        if (clen >= 0)
            wr_buf_printf(h, "Content-Length: %lld\r\n", (long long)clen);
        else
            wr_buf_puts(h, "Transfer-Encoding: chunked\r\n");
    }
    wr_buf_puts(h, keep ? "Connection: keep-alive\r\n" : "Connection: close\r\n");
    wr_buf_append(h, r->resp_hdrs.data, r->resp_hdrs.len);
    wr_buf_puts(h, "\r\n");
    r->resp_started = true;
}

/* The response is complete (queued): an unread body is skipped from here on. */
static void resp_ended(struct wr_http_req *r)
{
    r->resp_ended = true;
    if (!r->body_done && r->mode != BODY_DISCARD) {
        r->mode = BODY_DISCARD;
        r->body_paused = false;
    }
    if (r->sub != NULL)
        sub_kick(r->sub);
    else
        conn_kick(r->c);
}

static bool resp_can_start(const struct wr_http_req *r)
{
    return !r->resp_started && !r->closed && r->dispatched && (r->sub || !r->c->closing);
}

void wr_http_respond(struct wr_http_req *req, int status, const char *content_type,
                     const void *body, size_t len)
{
    struct wr_buf h = {0};

    if (!resp_can_start(req))
        return;
    if (req->sub != NULL) {
        sub_respond(req, status, content_type, body, len, true);
        resp_ended(req);
        return;
    }
    resp_head(req, &h, status, content_type, (int64_t)len);
    req->bytes_out += len;
    conn_write3(req->c, h.data, h.len, body, len, NULL, 0);
    wr_buf_fini(&h);
    resp_ended(req);
}

void wr_http_respond_json(struct wr_http_req *req, int status, json_t *j)
{
    _cleanup_free_ char *s = NULL;

    if (j)
        s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (s == NULL) {
        static const char fallback[] = "{\"code\":\"internal\",\"message\":\"unencodable json\"}";
        wr_http_respond(req, 500, JSON_CONTENT_TYPE, fallback, sizeof(fallback) - 1);
        return;
    }
    wr_http_respond(req, status, JSON_CONTENT_TYPE, s, strlen(s));
}

/* msg may carry a client's or a sandbox's bytes (a path, a header), or end in a sequence cut by
 * a buffer: it is made UTF-8 (invalid bytes as \xNN), so the error always encodes. */
static void resp_error_with(struct wr_http_req *r, int status, const char *code, const char *raw,
                            json_t *extra)
{
    _cleanup_free_ char *msg = wr_utf8_fix(raw, WR_UTF8_ESCAPE);
    json_t *j;

    if (!r->resp_started)
        snprintf(r->err_code, sizeof(r->err_code), "%s", code ? code : "");
    if (r->numeric_errors)
        j = json_pack("{s:i, s:s}", "code", status, "message", msg);
    else
        j = json_pack("{s:s, s:s}", "code", code, "message", msg);
    if (j != NULL && extra != NULL)
        (void)json_object_update_missing(j, extra);
    json_decref(extra);
    wr_http_respond_json(r, status, j);
}

static void resp_error(struct wr_http_req *r, int status, const char *code, const char *raw)
{
    resp_error_with(r, status, code, raw, NULL);
}

void wr_http_respond_error_with(struct wr_http_req *req, int status, const char *code,
                                json_t *extra, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    resp_error_with(req, status, code, msg, extra);
}

void wr_http_req_numeric_errors(struct wr_http_req *req)
{
    req->numeric_errors = true;
}

void wr_http_respond_error(struct wr_http_req *req, int status, const char *code, const char *fmt,
                           ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    resp_error(req, status, code, msg);
}

void wr_http_resp_start(struct wr_http_req *req, int status, const char *content_type,
                        int64_t content_length)
{
    struct wr_buf h = {0};

    if (!resp_can_start(req))
        return;
    if (req->sub != NULL) {
        sub_respond(req, status, content_type, NULL, 0, false);
        req->resp_started = true;
        req->head_only = strcmp(wr_http_req_method(req), "HEAD") == 0;
        return;
    }
    resp_head(req, &h, status, content_type, content_length);
    req->resp_chunked = content_length < 0;
    req->resp_left = content_length;
    req->head_only = strcmp(wr_http_req_method(req), "HEAD") == 0;
    conn_write3(req->c, h.data, h.len, NULL, 0, NULL, 0);
    wr_buf_fini(&h);
}

/* Queue body bytes of a streamed response. Bytes beyond a fixed Content-Length are dropped. */
size_t wr_http_resp_write(struct wr_http_req *req, const void *p, size_t n)
{
    struct conn *c = req->c;

    if (req->sub != NULL) {
        if (req->resp_started && !req->resp_ended && !req->closed && !req->head_only)
            sub_respond(req, 0, NULL, p, n, false);
        return 0;
    }
    if (!req->resp_started || req->resp_ended || req->closed || c->closing)
        return req->closed ? 0 : c->pending;
    if (n == 0 || req->head_only)
        return c->pending;
    req->bytes_out += n;
    if (req->resp_chunked) {
        char head[32];
        int hl = snprintf(head, sizeof(head), "%zx\r\n", n);
        conn_write3(c, head, (size_t)hl, p, n, "\r\n", 2);
    } else {
        if ((uint64_t)n > (uint64_t)req->resp_left) {
            log_warn("http: req=%s: response body longer than its Content-Length", req->id);
            n = (size_t)req->resp_left;
        }
        req->resp_left -= (int64_t)n;
        conn_write3(c, p, n, NULL, 0, NULL, 0);
    }
    if (c->pending >= LOW_WATER)
        req->drain_armed = true;
    return c->pending;
}

void wr_http_resp_on_drain(struct wr_http_req *req, void (*on_drain)(struct wr_http_req *req))
{
    req->on_drain = on_drain;
}

size_t wr_http_resp_pending(const struct wr_http_req *req)
{
    return req->sub || req->closed || req->c->closing ? 0 : req->c->pending;
}

void wr_http_resp_end(struct wr_http_req *req)
{
    if (!req->resp_started || req->resp_ended || req->closed)
        return;
    if (req->sub != NULL) {
        /* Buffered: nothing to frame. */
    } else if (req->head_only) {
        /* The head announced the body; a HEAD answer has none. */
    } else if (req->resp_chunked) {
        conn_write3(req->c, "0\r\n\r\n", 5, NULL, 0, NULL, 0);
    } else if (req->resp_left > 0) {
        /* Short body: the client can only learn that from the connection closing. */
        log_warn("http: req=%s: response ended %lld bytes short", req->id,
                 (long long)req->resp_left);
        req->c->want_close = true;
    }
    resp_ended(req);
}

bool wr_http_resp_started(const struct wr_http_req *req)
{
    return req->resp_started;
}

/* ---- WebSocket API ------------------------------------------------------------------------- */

static bool ws_key_valid(const char *key)
{
    unsigned char raw[32];

    /* 16 random bytes in base64: 22 characters and "==". */
    if (key == NULL || strlen(key) != 24 || strcmp(key + 22, "==") != 0)
        return false;
    return wr_b64_decode(key, 24, WR_B64_STRICT, raw) == 16;
}

static void ws_accept_value(const char *key, char out[64])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    char buf[128];
    int n = snprintf(buf, sizeof(buf), "%s" WS_GUID, key);

    (void)EVP_Digest(buf, (size_t)n, md, &mdlen, EVP_sha1(), NULL);
    (void)wr_b64_encode(md, mdlen, out);
}

struct wr_ws *wr_http_ws_accept(struct wr_http_req *req, const struct wr_ws_callbacks *cbs,
                                void *ctx)
{
    struct conn *c = req->c;
    const char *key = wr_http_req_header(req, "Sec-WebSocket-Key");
    const char *ver = wr_http_req_header(req, "Sec-WebSocket-Version");
    struct wslay_event_callbacks wcb = {
        .recv_callback = ws_recv_cb,
        .send_callback = ws_send_cb,
        .on_msg_recv_callback = ws_msg_cb,
    };
    struct wr_buf h = {0};
    char accept[64];
    struct wr_ws *ws;

    if (req->sub != NULL) {
        wr_http_respond_error(req, 400, wr_err_kind_name(WR_EINVAL),
                              "not a websocket upgrade request");
        return NULL;
    }
    if (!resp_can_start(req) || c->ws)
        return NULL;
    if (strcmp(wr_http_req_method(req), "GET") != 0 || !req->no_body ||
        !header_has_token(wr_http_req_header(req, "Upgrade"), "websocket") ||
        !header_has_token(wr_http_req_header(req, "Connection"), "upgrade")) {
        wr_http_respond_error(req, 400, wr_err_kind_name(WR_EINVAL),
                              "not a websocket upgrade request");
        return NULL;
    }
    if (ver == NULL || strcmp(ver, "13") != 0) {
        wr_http_resp_header(req, "Sec-WebSocket-Version", "13");
        wr_http_respond_error(req, 400, wr_err_kind_name(WR_EINVAL),
                              "unsupported Sec-WebSocket-Version");
        return NULL;
    }
    if (!ws_key_valid(key)) {
        wr_http_respond_error(req, 400, wr_err_kind_name(WR_EINVAL), "invalid Sec-WebSocket-Key");
        return NULL;
    }
    ws = xcalloc(1, sizeof(*ws));
    if (wslay_event_context_server_init(&ws->ctx, &wcb, ws) != 0) {
        free(ws);
        wr_http_respond_error(req, 500, wr_err_kind_name(WR_EINTERNAL), "websocket context");
        return NULL;
    }
    wslay_event_config_set_max_recv_msg_length(ws->ctx, WS_MAX_MSG);
    ws->c = c;
    ws->req = req;
    ws->cbs = *cbs;
    ws->user = ctx;

    ws_accept_value(key, accept);
    /* 101 has no body, so no Content-Type or framing headers (RFC 9110 15.2). */
    wr_buf_puts(&h, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                    "Connection: Upgrade\r\n");
    wr_buf_printf(&h, "Sec-WebSocket-Accept: %s\r\nX-Request-Id: %s\r\n", accept, req->id);
    if (c->srv->region_hdr != NULL)
        wr_buf_puts(&h, c->srv->region_hdr);
    wr_buf_append(&h, req->resp_hdrs.data, req->resp_hdrs.len);
    wr_buf_puts(&h, "\r\n");
    conn_write3(c, h.data, h.len, NULL, 0, NULL, 0);
    wr_buf_fini(&h);
    req->resp_started = req->resp_ended = true;
    req->status = 101;
    c->ws = ws;
    c->parse_dead = false;
    conn_arm(c);
    conn_kick(c);
    return ws;
}

size_t wr_ws_send(struct wr_ws *ws, int opcode, const void *p, size_t n)
{
    struct conn *c = ws->c;
    struct wslay_event_msg m = {.opcode = (uint8_t)opcode, .msg = p, .msg_length = n};

    if (c->closing)
        return 0;
    if (wslay_event_queue_msg(ws->ctx, &m) != 0)
        return c->pending + wslay_event_get_queued_msg_length(ws->ctx);
    /* Inside wslay_event_recv (an on_message callback) the read path sends afterwards. */
    if (!ws->in_recv && wslay_event_send(ws->ctx) < 0)
        conn_close(c);
    return c->pending + wslay_event_get_queued_msg_length(ws->ctx);
}

void wr_ws_close(struct wr_ws *ws, uint16_t code, const char *reason)
{
    struct conn *c = ws->c;
    size_t rl = reason ? strlen(reason) : 0;

    if (c->closing)
        return;
    if (rl > 123)
        rl = 123;
    (void)wslay_event_queue_close(ws->ctx, code, (const uint8_t *)reason, rl);
    if (c->ws_close_at == 0)
        c->ws_close_at = uv_now(c->srv->loop);
    conn_arm(c);
    conn_kick(c);
}

void wr_ws_pause(struct wr_ws *ws)
{
    if (ws->paused || ws->c->closing)
        return;
    ws->paused = true;
    conn_update_read(ws->c);
}

void wr_ws_resume(struct wr_ws *ws)
{
    if (!ws->paused || ws->c->closing)
        return;
    ws->paused = false;
    conn_kick(ws->c);
}

void wr_ws_on_drain(struct wr_ws *ws, void (*on_drain)(struct wr_ws *ws, void *ctx))
{
    ws->on_drain = on_drain;
}

size_t wr_ws_pending(const struct wr_ws *ws)
{
    return ws->c->closing ? 0 : ws->c->pending + wslay_event_get_queued_msg_length(ws->ctx);
}

/* ---- taking the connection over ------------------------------------------------------------ */

const char *wr_http_req_target(const struct wr_http_req *req)
{
    return wr_buf_str((struct wr_buf *)&req->url);
}

size_t wr_http_req_header_count(const struct wr_http_req *req)
{
    return req->headers.n;
}

void wr_http_req_header_at(const struct wr_http_req *req, size_t i, const char **name,
                           const char **value)
{
    *name = req->headers.v[i].name;
    *value = req->headers.v[i].value;
}

bool wr_http_req_is_upgrade(const struct wr_http_req *req)
{
    return req->is_upgrade;
}

void wr_http_req_continue(struct wr_http_req *req)
{
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    const char *e = wr_http_req_header(req, "Expect");

    if (e == NULL || strcasecmp(e, "100-continue") != 0 || req->resp_started || req->closed ||
        req->sent_continue || req->body_done || req->sub)
        return;
    req->sent_continue = true;
    conn_write3(req->c, cont, sizeof(cont) - 1, NULL, 0, NULL, 0);
}

void wr_http_req_abort(struct wr_http_req *req)
{
    if (req->sub != NULL)
        wr_http_sub_cancel(req->sub);
    else if (!req->closed)
        conn_close(req->c);
}

void wr_http_req_idle_timeout(struct wr_http_req *req, unsigned ms)
{
    if (req->sub == NULL)
        req->c->idle_ms = ms;
}

void wr_http_conn_set_data(struct wr_http_req *req, void *data, void (*data_free)(void *data))
{
    if (req->sub != NULL) {
        req->sub->conn = (struct sub_conn_data){data, data_free};
        return;
    }
    req->c->data = data;
    req->c->data_free = data_free;
}

void *wr_http_conn_data(const struct wr_http_req *req)
{
    return req->sub ? req->sub->conn.data : req->c->data;
}

int wr_http_req_hijack(struct wr_http_req *req, int *fd, bool *is_unix, struct wr_buf *rest,
                       struct wr_err *err)
{
    struct conn *c = req->c;
    uv_os_fd_t ofd;
    int nfd;

    if (req->sub != NULL)
        return wr_err_set(err, WR_ECONFLICT, 0, "a sub-request has no connection to take over");
    if (req->closed || c->closing || req->resp_started || c->ws || req->mode != BODY_NONE)
        return wr_err_set(err, WR_ECONFLICT, 0, "the connection cannot be taken over now");
    if (uv_fileno(&c->io.h, &ofd) < 0)
        return wr_err_set(err, WR_EINTERNAL, 0, "the connection has no fd");
    nfd = fcntl(ofd, F_DUPFD_CLOEXEC, 3);
    if (nfd < 0)
        return wr_err_sys(err, "dup");
    if (c->in && c->in_len > c->in_off)
        wr_buf_append(rest, c->in + c->in_off, c->in_len - c->in_off);
    c->in_off = c->in_len;
    *fd = nfd;
    *is_unix = c->is_unix;
    /* The server forgets the request (no on_close) and closes its handle; the socket lives on
     * in nfd, so nothing reaches the client. */
    req->on_close = NULL;
    req->data = NULL;
    if (c->data_free) {
        c->data_free(c->data);
        c->data_free = NULL;
        c->data = NULL;
    }
    conn_close(c);
    return 0;
}

/* ---- for tests/fuzz/fuzz_http.c (http_int.h) --------------------------------------------- */

char *wr__http_pct_decode(const char *s, size_t n, bool plus)
{
    return pct_decode(s, n, plus);
}

int wr__http_parse_target(const char *target, char **path, char ***query, const char **msg)
{
    struct wr_http_req r = {0};
    char **q;

    wr_buf_puts(&r.url, target);
    if (parse_target(&r, msg) < 0) {
        wr_buf_fini(&r.url);
        free(r.path);
        kvs_free(&r.query);
        return -1;
    }
    q = xcalloc(2 * r.query.n + 1, sizeof(*q));
    for (size_t i = 0; i < r.query.n; i++) {
        q[2 * i] = r.query.v[i].name;
        q[2 * i + 1] = r.query.v[i].value;
    }
    free(r.query.v);
    wr_buf_fini(&r.url);
    *path = r.path;
    *query = q;
    return 0;
}

void wr__http_target_free(char *path, char **query)
{
    for (size_t i = 0; query != NULL && query[i] != NULL; i++)
        free(query[i]);
    free(query);
    free(path);
}

/* ---- sub-requests -------------------------------------------------------------------------- */

#define SUB_BODY_MAX   (16u << 20)
#define SUB_BODY_PIECE (64u << 10) /* a streamed request body comes in pieces of this size */

static void sub_process(uv_timer_t *t);

static void sub_kick(struct wr_http_sub *s)
{
    if (!s->finished)
        (void)uv_timer_start(&s->kick, sub_process, 0, 0);
}

static void sub_respond(struct wr_http_req *r, int status, const char *ct, const void *p, size_t n,
                        bool end)
{
    struct wr_http_sub *s = r->sub;

    if (status != 0) {
        s->status = status;
        r->status = status;
        free(s->content_type);
        s->content_type = xstrdup(ct != NULL && strpbrk(ct, "\r\n") == NULL ? ct : "");
    }
    if (n > 0) {
        size_t room = s->max_body > s->out.len ? s->max_body - s->out.len : 0;
        if (n > room) {
            s->truncated = true;
            n = room;
        }
        wr_buf_append(&s->out, p, n);
        s->fresh_data = true;
    }
    if (!end)
        sub_kick(s);
}

/* Deliver the buffered body from the loop (sub_process). */
static bool sub_read_body(struct wr_http_req *r)
{
    if (r->mode == BODY_BUFFER && r->sub->in_len > r->body_max) {
        r->body_done = true;
        r->server_answered = true;
        resp_error(r, 413, wr_err_kind_name(WR_ETOOBIG), "request body is too large");
        return false;
    }
    sub_kick(r->sub);
    return true;
}

static void sub_resp(const struct wr_http_sub *s, struct wr_http_sub_resp *out)
{
    *out = (struct wr_http_sub_resp){
        .status = s->status,
        .content_type = s->content_type ? s->content_type : "",
        .body = wr_buf_str(&s->out),
        .len = s->out.len,
        .truncated = s->truncated,
        .ended = s->req->resp_ended,
    };
}

static void sub_handle_closed(uv_handle_t *h)
{
    struct wr_http_sub *s = h->data;

    if (s->conn.data_free)
        s->conn.data_free(s->conn.data);
    req_free(s->req);
    free(s->method);
    free(s->in);
    free(s->content_type);
    free(s->peer);
    wr_buf_fini(&s->out);
    free(s);
}

/* The request is over: the handler's on_close, then (not cancelled) on_done, then free. */
static void sub_finish(struct wr_http_sub *s, bool aborted)
{
    struct wr_http_req *r = s->req;
    struct wr_http_sub_resp resp;

    s->finished = true;
    uv_timer_stop(&s->kick);
    if (s->on_finish != NULL) {
        struct wr_http_finish f = {
            .status = r->status,
            .bytes_in = s->in_len,
            .bytes_out = s->out.len,
            .duration_s = (double)(uv_hrtime() - r->t0) / 1e9,
            .aborted = aborted || !r->resp_ended,
        };
        s->on_finish(r, &f, s->hctx);
    }
    if (!r->closed) {
        r->closed = true;
        if (r->on_close)
            r->on_close(r, r->data, aborted || r->server_answered);
    }
    if (!aborted && s->cbs.on_done) {
        sub_resp(s, &resp);
        s->cbs.on_done(s, &resp, s->ctx);
    }
    uv_close((uv_handle_t *)&s->kick, sub_handle_closed);
}

static void sub_process(uv_timer_t *t)
{
    struct wr_http_sub *s = t->data;
    struct wr_http_req *r = s->req;
    struct wr_http_sub_resp resp;

    if (s->finished || s->in_process)
        return;
    s->in_process = true;
    for (;;) {
        if (s->cancelled) {
            sub_finish(s, true);
            return;
        }
        if (!r->body_done && !r->resp_ended && r->mode == BODY_BUFFER) {
            r->body_done = r->end_delivered = true;
            if (r->read_cb)
                r->read_cb(r, (const char *)(s->in ? s->in : (const uint8_t *)""), s->in_len);
            continue;
        }
        if (!r->body_done && !r->resp_ended && r->mode == BODY_STREAM && !r->body_paused) {
            size_t n = s->in_len - s->in_off;
            if (n > SUB_BODY_PIECE)
                n = SUB_BODY_PIECE;
            if (n > 0) {
                s->in_off += n;
                if (r->on_data)
                    r->on_data(r, (const char *)s->in + s->in_off - n, n);
                continue;
            }
            r->body_done = r->end_delivered = true;
            if (r->on_end)
                r->on_end(r);
            continue;
        }
        if (s->fresh_data && s->cbs.on_data && !r->resp_ended) {
            s->fresh_data = false;
            sub_resp(s, &resp);
            s->cbs.on_data(s, &resp, s->ctx);
            continue;
        }
        if (r->resp_ended && (r->body_done || r->mode == BODY_NONE || r->mode == BODY_DISCARD)) {
            sub_finish(s, false);
            return;
        }
        break;
    }
    s->in_process = false;
}

struct wr_http_sub *wr_http_sub_start(uv_loop_t *loop, const struct wr_http_sub_req *sr,
                                      wr_http_handler_fn handler, void *hctx,
                                      const struct wr_http_sub_cbs *cbs, void *ctx)
{
    struct wr_http_sub *s = xcalloc(1, sizeof(*s));
    struct wr_http_req *r = xcalloc(1, sizeof(*r));
    const char *msg = NULL;
    static uint64_t seq;

    s->req = r;
    s->method = xstrdup(sr->method);
    s->is_unix = sr->is_unix;
    s->max_body = sr->max_body ? sr->max_body : SUB_BODY_MAX;
    s->cbs = *cbs;
    s->ctx = ctx;
    s->peer = sr->peer ? xstrdup(sr->peer) : NULL;
    s->on_finish = sr->on_finish;
    s->hctx = hctx;
    r->t0 = uv_hrtime();
    if (sr->len > 0) {
        s->in = xmalloc(sr->len);
        memcpy(s->in, sr->body, sr->len);
        s->in_len = sr->len;
    }
    uv_timer_init(loop, &s->kick);
    s->kick.data = s;
    r->sub = s;
    r->method = s->method;
    r->content_length = (int64_t)sr->len;
    r->no_body = sr->len == 0;
    r->resp_left = -1;
    r->keep_alive = true;
    r->headers_done = r->dispatched = true;
    if (sr->id != NULL && request_id_valid(sr->id) && strlen(sr->id) + 6 <= REQUEST_ID_MAX)
        snprintf(r->id, sizeof(r->id), "%s.%llu", sr->id, (unsigned long long)(++seq % 10000));
    else
        snprintf(r->id, sizeof(r->id), "sub.%llu", (unsigned long long)++seq);
    for (const char *const *h = sr->headers; h != NULL && h[0] != NULL && h[1] != NULL; h += 2)
        kvs_push(&r->headers, xstrdup(h[0]), xstrdup(h[1]));
    wr_buf_puts(&r->url, sr->target);
    if (parse_target(r, &msg) < 0) {
        resp_error(r, 400, wr_err_kind_name(WR_EINVAL), msg);
        return s;
    }
    handler(r, hctx);
    /* A handler that answered without reading the body is done with it. */
    sub_kick(s);
    return s;
}

void wr_http_sub_peek(const struct wr_http_sub *s, struct wr_http_sub_resp *out)
{
    sub_resp(s, out);
}

void wr_http_sub_consume(struct wr_http_sub *s, size_t n)
{
    wr_buf_consume(&s->out, n);
}

void wr_http_sub_cancel(struct wr_http_sub *s)
{
    if (s == NULL || s->finished || s->cancelled)
        return;
    s->cancelled = true;
    s->fresh_data = false;
    (void)uv_timer_start(&s->kick, sub_process, 0, 0);
}
