/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for src/api/http: a real server on a libuv loop in a second thread, and real clients
 * over unix and TCP sockets in the main thread. Responses are parsed with llhttp in response mode;
 * WebSocket frames are built and read by hand (the test is the peer). */
#include <errno.h>
#include <fcntl.h>
#include <llhttp.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../../src/api/http.h"
#include "../../src/api/peers.h"
#include "../../src/util/cleanup.h"
#include "../../src/util/xalloc.h"
#include "tap.h"

#define MIB          (1024 * 1024)
#define DL_SIZE      (64 * MIB)
#define UP_SIZE      (64 * MIB)
#define BUF_MAX      (1 * MIB)
#define MAX_HDR      (16 * 1024)
#define IDLE_MS      1000
#define HEAD_MS      3000
#define N_CONCURRENT 1000
#define HIGH_WATER   MIB

/* The second server, TCP only, with small timeouts and caps (test_limits and after). */
#define L_HEAD_MS    800
#define L_IDLE_MS    1500
#define L_BODY_MS    1000
#define L_MAX_CONNS  8
#define L_PER_CLIENT 4
#define L_UNAUTH     4    /* not below the bursts of connections the tests open */
#define L_SINK_PAUSE 2000 /* /slowsink holds its body back longer than L_BODY_MS */

/* ---- shared state (written on the loop thread, read by the test thread) -------------------- */

static int g_max_pending, g_drains, g_dl_closed, g_dl_aborted, g_forever_aborted, g_hang_aborted;
static int g_ws_closed, g_ws_messages, g_upload_violations, g_upload_closed, g_gate_max;
static int g_dl_pending_zero_ok = 1;

#define LOAD(v)     __atomic_load_n(&(v), __ATOMIC_SEQ_CST)
#define STORE(v, x) __atomic_store_n(&(v), (x), __ATOMIC_SEQ_CST)
#define INC(v)      __atomic_add_fetch(&(v), 1, __ATOMIC_SEQ_CST)

static uint32_t fnv(uint32_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 16777619u;
    return h;
}

static uint8_t pattern(uint64_t off)
{
    return (uint8_t)(off % 251);
}

/* ---- the server's handler ------------------------------------------------------------------ */

static int send_all_raw(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static void h_echo(struct wr_http_req *req)
{
    const char *vals[8];
    size_t nb = wr_http_req_query_all(req, "b", vals, 8);
    json_t *b = json_array();

    for (size_t i = 0; i < nb && i < 8; i++)
        json_array_append_new(b, json_string(vals[i]));
    wr_http_resp_header(req, "X-Echo", "yes");
    wr_http_resp_header(req, "Bad\r\nHeader", "x");
    wr_http_respond_json(req, 200,
                         json_pack("{s:s, s:s, s:s?, s:o, s:s?, s:s?, s:s, s:I, s:b, s:s?}",
                                   "method", wr_http_req_method(req), "path", wr_http_req_path(req),
                                   "a", wr_http_req_query(req, "a"), "b", b, "x",
                                   wr_http_req_header(req, "X-Test"), "multi",
                                   wr_http_req_header(req, "X-Multi"), "id", wr_http_req_id(req),
                                   "clen", (json_int_t)wr_http_req_content_length(req), "unix",
                                   wr_http_req_is_unix(req), "n", wr_http_req_query(req, "n")));
}

/* A request body streamed with pause/resume: paused 500 ms on the first piece (the client
 * measures how much it can push meanwhile), then briefly every 8th piece. */
struct upload {
    uv_timer_t t;
    struct wr_http_req *req;
    uint64_t bytes, pieces, pauses;
    uint32_t sum;
    bool paused;
    bool hold; /* /slowsink: pause on the first piece */
};

static void up_free(uv_handle_t *h)
{
    free(h->data);
}

static void up_resume(uv_timer_t *t)
{
    struct upload *u = t->data;
    u->paused = false;
    wr_http_req_resume_body(u->req);
}

static void up_data(struct wr_http_req *req, const char *p, size_t n)
{
    struct upload *u = wr_http_req_data(req);

    if (u->paused)
        INC(g_upload_violations);
    u->bytes += n;
    u->sum = fnv(u->sum, p, n);
    u->pieces++;
    if (u->pieces == 1 || u->pieces % 8 == 0) {
        u->paused = true;
        u->pauses++;
        wr_http_req_pause_body(req);
        uv_timer_start(&u->t, up_resume, u->pieces == 1 ? 500 : 1, 0);
    }
}

static void up_end(struct wr_http_req *req)
{
    struct upload *u = wr_http_req_data(req);

    wr_http_respond_json(req, 200,
                         json_pack("{s:I, s:I, s:I}", "bytes", (json_int_t)u->bytes, "sum",
                                   (json_int_t)u->sum, "pauses", (json_int_t)u->pauses));
}

static void up_close(struct wr_http_req *req, void *data, bool aborted)
{
    struct upload *u = data;

    uv_timer_stop(&u->t);
    uv_close((uv_handle_t *)&u->t, up_free);
    INC(g_upload_closed);
}

static void h_upload(struct wr_http_req *req)
{
    struct upload *u = xcalloc(1, sizeof(*u));

    u->req = req;
    u->sum = 2166136261u;
    uv_timer_init(uv_default_loop(), &u->t);
    u->t.data = u;
    wr_http_req_set_data(req, u, up_close);
    wr_http_req_stream_body(req, up_data, up_end);
}

static void buf_done(struct wr_http_req *req, const char *body, size_t len)
{
    wr_http_respond_json(req, 200,
                         json_pack("{s:I, s:I, s:b}", "len", (json_int_t)len, "sum",
                                   (json_int_t)fnv(2166136261u, body, len), "nul",
                                   body[len] == '\0'));
}

/* A streamed chunked response produced only while the write queue is below HIGH_WATER. */
struct dl {
    uint64_t left, off;
    bool forever;
};

static void dl_pump(struct wr_http_req *req)
{
    struct dl *d = wr_http_req_data(req);
    static char block[64 * 1024];

    while (d->left > 0) {
        size_t n = d->left < sizeof(block) ? (size_t)d->left : sizeof(block);
        for (size_t i = 0; i < n; i++)
            block[i] = (char)pattern(d->off + i);
        size_t pend = wr_http_resp_write(req, block, n);
        if (!d->forever && (int)pend > LOAD(g_max_pending))
            STORE(g_max_pending, (int)pend);
        d->off += n;
        if (!d->forever)
            d->left -= n;
        if (pend > HIGH_WATER)
            return;
    }
    wr_http_resp_end(req);
}

static void dl_drain(struct wr_http_req *req)
{
    struct dl *d = wr_http_req_data(req);

    if (!d->forever) {
        INC(g_drains);
        if (wr_http_resp_pending(req) >= 256 * 1024)
            STORE(g_dl_pending_zero_ok, 0);
    }
    dl_pump(req);
}

static void dl_close(struct wr_http_req *req, void *data, bool aborted)
{
    struct dl *d = data;

    if (d->forever) {
        if (aborted)
            INC(g_forever_aborted);
    } else {
        INC(g_dl_closed);
        if (aborted)
            INC(g_dl_aborted);
    }
    free(d);
}

static void h_download(struct wr_http_req *req, bool forever)
{
    struct dl *d = xcalloc(1, sizeof(*d));

    d->left = forever ? 1 : DL_SIZE;
    d->forever = forever;
    wr_http_req_set_data(req, d, dl_close);
    wr_http_resp_on_drain(req, dl_drain);
    wr_http_resp_start(req, 200, "application/octet-stream", -1);
    dl_pump(req);
}

static void hang_close(struct wr_http_req *req, void *data, bool aborted)
{
    if (aborted)
        INC(g_hang_aborted);
}

/* /gate answers nobody until N_CONCURRENT requests are in flight at once. */
static struct wr_http_req *gate[N_CONCURRENT];
static int gate_n;

static void gate_close(struct wr_http_req *req, void *data, bool aborted)
{
    gate[(intptr_t)data] = NULL;
}

static void h_gate(struct wr_http_req *req)
{
    if (gate_n >= N_CONCURRENT) {
        wr_http_respond_error(req, 503, "limit", "gate full");
        return;
    }
    gate[gate_n] = req;
    wr_http_req_set_data(req, (void *)(intptr_t)gate_n, gate_close);
    gate_n++;
    if (gate_n > LOAD(g_gate_max))
        STORE(g_gate_max, gate_n);
    if (gate_n == N_CONCURRENT)
        for (int i = 0; i < N_CONCURRENT; i++)
            if (gate[i])
                wr_http_respond(gate[i], 200, "text/plain", "gate", 4);
}

/* /late answers after 1.5 s, longer than the limits server's head and body timeouts. */
struct late {
    uv_timer_t t; /* first: the handle is the allocation */
    struct wr_http_req *req;
};

static void handle_free(uv_handle_t *h)
{
    free(h);
}

static void late_fire(uv_timer_t *t)
{
    struct late *l = (struct late *)t;

    if (l->req) {
        wr_http_req_set_data(l->req, NULL, NULL);
        wr_http_respond(l->req, 200, "text/plain", "late", 4);
    }
    uv_close((uv_handle_t *)t, handle_free);
}

static void late_close(struct wr_http_req *req, void *data, bool aborted)
{
    ((struct late *)data)->req = NULL;
}

static void h_late(struct wr_http_req *req)
{
    struct late *l = xcalloc(1, sizeof(*l));

    uv_timer_init(uv_default_loop(), &l->t);
    l->req = req;
    wr_http_req_set_data(req, l, late_close);
    uv_timer_start(&l->t, late_fire, 1500, 0);
}

/* /ticker streams 8 chunks 250 ms apart: a slow producer, not a slow client. */
struct ticker {
    uv_timer_t t; /* first: the handle is the allocation */
    struct wr_http_req *req;
    int left;
};

static void tick(uv_timer_t *t)
{
    struct ticker *k = (struct ticker *)t;

    if (k->req == NULL) {
        uv_close((uv_handle_t *)t, handle_free);
        return;
    }
    wr_http_resp_write(k->req, "tick\n", 5);
    if (--k->left > 0)
        return;
    wr_http_req_set_data(k->req, NULL, NULL); /* the timer goes first */
    wr_http_resp_end(k->req);
    uv_timer_stop(t);
    uv_close((uv_handle_t *)t, handle_free);
    k->req = NULL;
}

static void ticker_close(struct wr_http_req *req, void *data, bool aborted)
{
    ((struct ticker *)data)->req = NULL;
}

static void h_ticker(struct wr_http_req *req)
{
    struct ticker *k = xcalloc(1, sizeof(*k));

    k->req = req;
    k->left = 8;
    uv_timer_init(uv_default_loop(), &k->t);
    wr_http_req_set_data(req, k, ticker_close);
    wr_http_resp_start(req, 200, "text/plain", -1);
    uv_timer_start(&k->t, tick, 250, 250);
}

/* /slowsink and /interactive stream a body and answer its size: /slowsink pauses it for
 * L_SINK_PAUSE on the first piece (server-side backpressure), /interactive declares it
 * interactive (the client pauses). */
static void sink_data(struct wr_http_req *req, const char *p, size_t n)
{
    struct upload *u = wr_http_req_data(req);

    u->bytes += n;
    if (u->hold) {
        u->hold = false;
        u->paused = true;
        wr_http_req_pause_body(req);
        uv_timer_start(&u->t, up_resume, L_SINK_PAUSE, 0);
    }
}

static void sink_end(struct wr_http_req *req)
{
    struct upload *u = wr_http_req_data(req);
    char n[32];
    int l = snprintf(n, sizeof(n), "%llu", (unsigned long long)u->bytes);

    wr_http_respond(req, 200, "text/plain", n, (size_t)l);
}

static void h_sink(struct wr_http_req *req, bool interactive)
{
    struct upload *u = xcalloc(1, sizeof(*u));

    u->req = req;
    u->hold = !interactive;
    uv_timer_init(uv_default_loop(), &u->t);
    u->t.data = u;
    wr_http_req_set_data(req, u, up_close);
    if (interactive)
        wr_http_req_interactive_body(req);
    wr_http_req_stream_body(req, sink_data, sink_end);
}

/* /trailer reads the body, then answers the X-Test header as it stands. */
static void trailer_done(struct wr_http_req *req, const char *body, size_t len)
{
    const char *v = wr_http_req_header(req, "X-Test");

    wr_http_respond(req, 200, "text/plain", v ? v : "(none)", v ? strlen(v) : 6);
}

static void ws_msg(struct wr_ws *ws, int opcode, const uint8_t *p, size_t n, void *ctx)
{
    INC(g_ws_messages);
    if (n == 8 && memcmp(p, "close-me", 8) == 0) {
        wr_ws_close(ws, 1001, "going away");
        return;
    }
    (void)wr_ws_send(ws, opcode, p, n);
}

static void ws_gone(struct wr_ws *ws, void *ctx)
{
    INC(g_ws_closed);
}

/* The hooks a proxy uses (src/api/ports.c). /streamhead answers with a streamed head of a
 * 1234-byte body (to HEAD, nothing of the body goes out). /continue sends 100 Continue, then
 * reads the body. /abort starts a chunked answer and cuts the connection 50 ms later.
 * /conndata keeps a counter per connection in its data and answers it. */
static int g_conndata_freed;

static void conndata_free(void *data)
{
    free(data);
    INC(g_conndata_freed);
}

static void continue_done(struct wr_http_req *req, const char *body, size_t len)
{
    char b[32];
    int n = snprintf(b, sizeof(b), "%zu", len);
    wr_http_respond(req, 200, "text/plain", b, (size_t)n);
}

static void abort_fire(uv_timer_t *t)
{
    struct late *l = (struct late *)t;

    if (l->req) {
        wr_http_req_set_data(l->req, NULL, NULL);
        wr_http_req_abort(l->req);
    }
    uv_close((uv_handle_t *)t, handle_free);
}

static void h_proxyish(struct wr_http_req *req, const char *path)
{
    if (strcmp(path, "/streamhead") == 0) {
        wr_http_resp_start(req, 200, "text/plain", 1234);
        (void)wr_http_resp_write(req, "x", 1);
        wr_http_resp_end(req);
    } else if (strcmp(path, "/continue") == 0) {
        wr_http_req_continue(req);
        wr_http_req_continue(req); /* once only */
        wr_http_req_read_body(req, BUF_MAX, continue_done);
    } else if (strcmp(path, "/abort") == 0) {
        struct late *l = xcalloc(1, sizeof(*l));
        wr_http_resp_start(req, 200, "text/plain", -1);
        (void)wr_http_resp_write(req, "hello", 5);
        uv_timer_init(uv_default_loop(), &l->t);
        l->req = req;
        wr_http_req_set_data(req, l, late_close);
        uv_timer_start(&l->t, abort_fire, 50, 0);
    } else {
        int *n = wr_http_conn_data(req);
        char b[16];
        if (n == NULL) {
            n = xcalloc(1, sizeof(*n));
            wr_http_conn_set_data(req, n, conndata_free);
        }
        int len = snprintf(b, sizeof(b), "%d", ++*n);
        wr_http_respond(req, 200, "text/plain", b, (size_t)len);
    }
}

/* /hijack takes the connection over and answers on the raw socket: a 101, then what the
 * server had already read past the head, then EOF. */
static void h_hijack(struct wr_http_req *req)
{
    struct wr_buf rest = {0}, out = {0};
    struct wr_err err;
    bool is_unix = false;
    int fd = -1;

    if (wr_http_req_hijack(req, &fd, &is_unix, &rest, &err) < 0) {
        wr_http_respond_error(req, 500, "internal", "%s", err.msg);
        return;
    }
    wr_buf_printf(&out,
                  "HTTP/1.1 101 Switching Protocols\r\nX-Unix: %d\r\n\r\nrest=", is_unix ? 1 : 0);
    wr_buf_append(&out, rest.data, rest.len);
    int fl = fcntl(fd, F_GETFL);
    (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    (void)send_all_raw(fd, out.data, out.len);
    (void)close(fd);
    wr_buf_fini(&rest);
    wr_buf_fini(&out);
}

static void handler(struct wr_http_req *req, void *ctx)
{
    const char *path = wr_http_req_path(req);

    if (strcmp(path, "/echo") == 0 || strcmp(path, "/a b/c") == 0) {
        h_echo(req);
    } else if (strcmp(path, "/hello") == 0) {
        wr_http_respond(req, 200, "text/plain", "hello", 5);
    } else if (strcmp(path, "/upload") == 0) {
        h_upload(req);
    } else if (strcmp(path, "/buffer") == 0) {
        wr_http_req_read_body(req, BUF_MAX, buf_done);
    } else if (strcmp(path, "/discard") == 0) {
        wr_http_respond(req, 200, "text/plain", "ignored", 7);
    } else if (strcmp(path, "/download") == 0) {
        h_download(req, false);
    } else if (strcmp(path, "/forever") == 0) {
        h_download(req, true);
    } else if (strcmp(path, "/hang") == 0) {
        wr_http_req_set_data(req, NULL, hang_close);
    } else if (strcmp(path, "/gate") == 0) {
        h_gate(req);
    } else if (strcmp(path, "/late") == 0) {
        h_late(req);
    } else if (strcmp(path, "/ticker") == 0) {
        h_ticker(req);
    } else if (strcmp(path, "/slowsink") == 0 || strcmp(path, "/interactive") == 0) {
        h_sink(req, path[1] == 'i');
    } else if (strcmp(path, "/trailer") == 0) {
        wr_http_req_read_body(req, BUF_MAX, trailer_done);
    } else if (strcmp(path, "/streamhead") == 0 || strcmp(path, "/continue") == 0 ||
               strcmp(path, "/abort") == 0 || strcmp(path, "/conndata") == 0) {
        h_proxyish(req, path);
    } else if (strcmp(path, "/hijack") == 0) {
        h_hijack(req);
    } else if (strcmp(path, "/ws") == 0) {
        struct wr_ws_callbacks cbs = {.on_message = ws_msg, .on_close = ws_gone};
        (void)wr_http_ws_accept(req, &cbs, NULL);
    } else {
        wr_http_respond_error(req, 404, "not_found", "no route %s", path);
    }
}

/* ---- the loop thread ----------------------------------------------------------------------- */

static struct wr_http_server *srv, *lsrv;
static uv_async_t stop_async;
static pthread_t loop_thread;
static char sock_dir[32], sock_path[64];
static int tcp_port, ltcp_port, g_stopped;

static void *loop_main(void *arg)
{
    uv_run(uv_default_loop(), UV_RUN_DEFAULT);
    return NULL;
}

static void on_stopped(void *arg)
{
    STORE(g_stopped, 1);
}

static void on_stop_async(uv_async_t *a)
{
    wr_http_server_stop(lsrv, NULL, NULL);
    wr_http_server_stop(srv, on_stopped, NULL);
    uv_close((uv_handle_t *)a, NULL);
}

static int server_up(void)
{
    struct wr_err err = {0};
    struct wr_http_config cfg = {
        .loop = uv_default_loop(),
        .unix_path = sock_path,
        .tcp_host = "127.0.0.1",
        .tcp_port = 0,
        .max_header_bytes = MAX_HDR,
        .idle_timeout_ms = IDLE_MS,
        .header_timeout_ms = HEAD_MS,
        .handler = handler,
    };
    struct wr_http_config lcfg = {
        .loop = uv_default_loop(),
        .tcp_host = "127.0.0.1",
        .idle_timeout_ms = L_IDLE_MS,
        .header_timeout_ms = L_HEAD_MS,
        .body_timeout_ms = L_BODY_MS,
        .max_conns = L_MAX_CONNS,
        .max_conns_per_client = L_PER_CLIENT,
        .max_unauthenticated = L_UNAUTH,
        .handler = handler,
    };

    snprintf(sock_dir, sizeof(sock_dir), "/tmp/test_http.XXXXXX");
    if (mkdtemp(sock_dir) == NULL)
        return -1;
    snprintf(sock_path, sizeof(sock_path), "%s/api.sock", sock_dir);
    /* A stale file where the socket goes must be replaced. */
    close(open(sock_path, O_CREAT | O_WRONLY, 0644));
    if (wr_http_server_start(&cfg, &srv, &err) < 0) {
        printf("# server start: %s\n", err.msg);
        return -1;
    }
    tcp_port = wr_http_server_tcp_port(srv);
    if (wr_http_server_start(&lcfg, &lsrv, &err) < 0) {
        printf("# limits server start: %s\n", err.msg);
        return -1;
    }
    ltcp_port = wr_http_server_tcp_port(lsrv);
    uv_async_init(uv_default_loop(), &stop_async, on_stop_async);
    return pthread_create(&loop_thread, NULL, loop_main, NULL) == 0 ? 0 : -1;
}

/* ---- the client side ----------------------------------------------------------------------- */

static int connect_unix(void)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct timeval tv = {.tv_sec = 20};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    return fd;
}

static int connect_tcp(bool nonblock)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)tcp_port)};
    struct timeval tv = {.tv_sec = 20};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    return fd;
}

/* A blocking TCP connection to the limits server from 127.0.0.<from> (every 127/8 address is
 * this host: distinct sources are distinct clients). */
static int connect_from(int from)
{
    struct sockaddr_in src = {.sin_family = AF_INET};
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)ltcp_port)};
    struct timeval tv = {.tv_sec = 10};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    src.sin_addr.s_addr = htonl(INADDR_LOOPBACK + (uint32_t)from - 1);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0 ||
        connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    return fd;
}

static int send_all(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static int send_str(int fd, const char *s)
{
    return send_all(fd, s, strlen(s));
}

struct resp {
    int status;
    int nh;
    char hn[32][64], hv[32][256];
    char *body;
    size_t blen, bcap;
    bool complete, upgrade;
    /* for big bodies: verify the pattern instead of keeping the bytes */
    bool check_pattern;
    uint64_t total;
    bool pattern_ok;
    bool in_value;
};

struct client {
    int fd;
    llhttp_t p;
    llhttp_settings_t s;
    char buf[64 * 1024];
    size_t off, len;
    struct resp *r;
    size_t read_size;
    unsigned read_delay_us;
    bool check_pattern;
};

static int c_hfield(llhttp_t *p, const char *at, size_t n)
{
    struct resp *r = ((struct client *)p->data)->r;
    if (r->in_value || r->nh == 0) {
        if (r->nh == 32)
            return 0;
        r->nh++;
        r->hn[r->nh - 1][0] = r->hv[r->nh - 1][0] = '\0';
        r->in_value = false;
    }
    strncat(r->hn[r->nh - 1], at, n < 63 - strlen(r->hn[r->nh - 1]) ? n : 0);
    return 0;
}

static int c_hvalue(llhttp_t *p, const char *at, size_t n)
{
    struct resp *r = ((struct client *)p->data)->r;
    size_t have = strlen(r->hv[r->nh - 1]);
    r->in_value = true;
    if (have + n < 255)
        strncat(r->hv[r->nh - 1], at, n);
    return 0;
}

static int c_hdone(llhttp_t *p)
{
    struct resp *r = ((struct client *)p->data)->r;
    r->status = p->status_code;
    return 0;
}

static int c_body(llhttp_t *p, const char *at, size_t n)
{
    struct resp *r = ((struct client *)p->data)->r;
    if (r->check_pattern) {
        for (size_t i = 0; i < n; i++)
            if ((uint8_t)at[i] != pattern(r->total + i))
                r->pattern_ok = false;
        r->total += n;
        return 0;
    }
    if (r->blen + n + 1 > r->bcap) {
        r->bcap = (r->blen + n + 1) * 2;
        r->body = xrealloc(r->body, r->bcap);
    }
    memcpy(r->body + r->blen, at, n);
    r->blen += n;
    r->body[r->blen] = '\0';
    r->total += n;
    return 0;
}

static int c_done(llhttp_t *p)
{
    struct resp *r = ((struct client *)p->data)->r;
    r->complete = true;
    return HPE_PAUSED;
}

static struct client *client_new(int fd)
{
    struct client *c = xcalloc(1, sizeof(*c));
    c->fd = fd;
    llhttp_settings_init(&c->s);
    c->s.on_header_field = c_hfield;
    c->s.on_header_value = c_hvalue;
    c->s.on_headers_complete = c_hdone;
    c->s.on_body = c_body;
    c->s.on_message_complete = c_done;
    llhttp_init(&c->p, HTTP_RESPONSE, &c->s);
    c->p.data = c;
    c->read_size = sizeof(c->buf);
    return c;
}

static void client_free(struct client *c)
{
    if (c == NULL)
        return;
    if (c->fd >= 0)
        close(c->fd);
    free(c);
}

static void resp_reset(struct resp *r)
{
    free(r->body);
    memset(r, 0, sizeof(*r));
    r->pattern_ok = true;
}

static const char *hdr(const struct resp *r, const char *name)
{
    for (int i = 0; i < r->nh; i++)
        if (strcasecmp(r->hn[i], name) == 0)
            return r->hv[i];
    return NULL;
}

/* Read one response. Returns 0 when complete, -1 on error or EOF before the end. */
static int read_resp(struct client *c, struct resp *r)
{
    resp_reset(r);
    r->check_pattern = c->check_pattern;
    c->r = r;
    llhttp_resume(&c->p);
    for (;;) {
        if (c->off < c->len) {
            const char *start = c->buf + c->off;
            llhttp_errno_t e = llhttp_execute(&c->p, start, c->len - c->off);
            if (e == HPE_OK) {
                c->off = c->len;
            } else if (e == HPE_PAUSED || e == HPE_PAUSED_UPGRADE) {
                c->off += (size_t)(llhttp_get_error_pos(&c->p) - start);
                if (e == HPE_PAUSED_UPGRADE)
                    r->upgrade = true;
                return r->complete ? 0 : -1;
            } else {
                printf("# client parse error: %s\n", llhttp_get_error_reason(&c->p));
                return -1;
            }
        }
        if (c->read_delay_us)
            usleep(c->read_delay_us);
        ssize_t n = recv(c->fd, c->buf, c->read_size, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0 && llhttp_finish(&c->p) == HPE_OK && r->complete)
                return 0;
            return -1;
        }
        c->off = 0;
        c->len = (size_t)n;
    }
}

/* True if the server closed the connection (EOF with nothing else). */
static bool at_eof(struct client *c)
{
    char b;
    if (c->off < c->len)
        return false;
    return recv(c->fd, &b, 1, 0) == 0;
}

static json_t *body_json(const struct resp *r)
{
    return r->body ? json_loads(r->body, 0, NULL) : NULL;
}

static bool is_hex16(const char *s)
{
    if (s == NULL || strlen(s) != 16)
        return false;
    for (int i = 0; i < 16; i++)
        if (!strchr("0123456789abcdef", s[i]))
            return false;
    return true;
}

/* ---- tests --------------------------------------------------------------------------------- */

static void test_socket_mode(void)
{
    struct stat st;
    ok(stat(sock_path, &st) == 0 && S_ISSOCK(st.st_mode) && (st.st_mode & 0777) == 0600,
       "unix socket replaced the stale file, mode 0600");
    ok(tcp_port > 0, "ephemeral tcp port reported (%d)", tcp_port);
}

static void test_simple_get(void)
{
    struct client *c = client_new(connect_unix());
    struct resp r = {0};
    json_t *j;

    send_str(c->fd, "GET /a%20b/c?a=x%2By+z&b=1&b=two%26&b=&flag HTTP/1.1\r\nHost: t\r\n"
                    "X-Test: hello  \r\nx-multi: one\r\nX-Multi: two\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 200, "simple get: 200");
    j = body_json(&r);
    is_str(json_string_value(json_object_get(j, "method")), "GET", "simple get: method");
    is_str(json_string_value(json_object_get(j, "path")), "/a b/c", "simple get: path decoded");
    is_str(json_string_value(json_object_get(j, "a")), "x+y z",
           "simple get: query decoded, + is space");
    json_t *b = json_object_get(j, "b");
    ok(json_array_size(b) == 3 && strcmp(json_string_value(json_array_get(b, 0)), "1") == 0 &&
           strcmp(json_string_value(json_array_get(b, 1)), "two&") == 0 &&
           strcmp(json_string_value(json_array_get(b, 2)), "") == 0,
       "simple get: repeated query params via query_all");
    is_str(json_string_value(json_object_get(j, "x")), "hello", "simple get: header value trimmed");
    is_str(json_string_value(json_object_get(j, "multi")), "one, two",
           "simple get: repeated headers joined");
    ok(json_integer_value(json_object_get(j, "clen")) == -1, "simple get: no content length");
    ok(json_is_true(json_object_get(j, "unix")), "simple get: came over unix");
    is_str(hdr(&r, "Content-Type"), "application/json", "simple get: content type");
    ok(hdr(&r, "Content-Length") != NULL, "simple get: content length header");
    is_str(hdr(&r, "Connection"), "keep-alive", "simple get: keep-alive");
    is_str(hdr(&r, "X-Echo"), "yes", "simple get: handler header");
    ok(hdr(&r, "Bad") == NULL, "simple get: header with CRLF dropped");
    ok(is_hex16(hdr(&r, "X-Request-Id")), "simple get: generated request id");
    is_str(json_string_value(json_object_get(j, "id")), hdr(&r, "X-Request-Id"),
           "simple get: handler saw the same id");
    json_decref(j);

    send_str(c->fd, "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 404, "404 on the same connection");
    j = body_json(&r);
    is_str(json_string_value(json_object_get(j, "code")), "not_found", "404: error body");
    json_decref(j);
    resp_reset(&r);
    client_free(c);
}

static void test_keepalive(void)
{
    struct client *c = client_new(connect_tcp(false));
    struct resp r = {0};
    int good = 0;

    for (int i = 0; i < 100; i++) {
        char req[128];
        snprintf(req, sizeof(req), "GET /echo?n=%d HTTP/1.1\r\nHost: t\r\n\r\n", i);
        if (send_str(c->fd, req) < 0 || read_resp(c, &r) < 0)
            break;
        json_t *j = body_json(&r);
        const char *n = json_string_value(json_object_get(j, "n"));
        if (r.status == 200 && n && atoi(n) == i && json_is_false(json_object_get(j, "unix")) &&
            strcmp(hdr(&r, "Connection"), "keep-alive") == 0)
            good++;
        json_decref(j);
    }
    is_int(good, 100, "keep-alive: 100 sequential requests on one tcp connection");

    /* HTTP/1.0 keeps the connection only when asked. */
    send_str(c->fd, "GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 200 && strcmp(hdr(&r, "Connection"), "keep-alive") == 0,
       "keep-alive: HTTP/1.0 with keep-alive header");
    send_str(c->fd, "GET /hello HTTP/1.1\r\nConnection: close\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 200 && strcmp(hdr(&r, "Connection"), "close") == 0,
       "keep-alive: Connection: close answered with close");
    ok(at_eof(c), "keep-alive: server closed after Connection: close");
    client_free(c);

    c = client_new(connect_unix());
    send_str(c->fd, "GET /hello HTTP/1.0\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 200 && strcmp(hdr(&r, "Connection"), "close") == 0 &&
           at_eof(c),
       "keep-alive: plain HTTP/1.0 closes");
    client_free(c);
    resp_reset(&r);
}

static void test_pipelining(void)
{
    struct client *c = client_new(connect_unix());
    struct resp r = {0};
    int good = 0;

    /* Includes a request with a body the handler ignores, and one with a body it reads. */
    send_str(c->fd, "GET /echo?n=1 HTTP/1.1\r\nHost: t\r\n\r\n"
                    "POST /discard HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"
                    "POST /buffer HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
                    "GET /echo?n=4 HTTP/1.1\r\nHost: t\r\n\r\n");
    if (read_resp(c, &r) == 0 && r.status == 200 && strstr(r.body, "\"n\":\"1\""))
        good++;
    if (read_resp(c, &r) == 0 && r.status == 200 && strcmp(r.body, "ignored") == 0)
        good++;
    if (read_resp(c, &r) == 0 && r.status == 200 && strstr(r.body, "\"len\":3"))
        good++;
    if (read_resp(c, &r) == 0 && r.status == 200 && strstr(r.body, "\"n\":\"4\""))
        good++;
    is_int(good, 4, "pipelining: four requests answered in order");

    /* An ignored body bigger than a read is discarded before the next request. */
    size_t big = 300 * 1024;
    char *body = xmalloc(big);
    memset(body, 'x', big);
    char head[128];
    snprintf(head, sizeof(head), "POST /discard HTTP/1.1\r\nContent-Length: %zu\r\n\r\n", big);
    send_str(c->fd, head);
    send_all(c->fd, body, big);
    free(body);
    ok(read_resp(c, &r) == 0 && r.status == 200, "discard: answered without reading the body");
    send_str(c->fd, "GET /hello HTTP/1.1\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 200 && strcmp(r.body, "hello") == 0,
       "discard: next keep-alive request parsed after the skipped body");
    resp_reset(&r);
    client_free(c);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A body with a Content-Length that arrives whole in one read: /upload pauses on its only piece,
 * which holds the last byte, and resumes 500 ms later. llhttp owes on_message_complete then,
 * with no input left to parse (a hang before: on_end never came). */
static void test_upload_paused_at_its_last_byte(void)
{
    struct client *c = client_new(connect_unix());
    struct resp r = {0};

    send_str(c->fd, "POST /upload HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
    ok(read_resp(c, &r) == 0 && r.status == 200, "a body paused at its last byte ends (200)");
    ok(r.body != NULL && strstr(r.body, "\"bytes\":5") != NULL, "and all 5 bytes arrived: %s",
       r.body ? r.body : "(none)");
    free(r.body);
    client_free(c);
}

/* Send a chunked body; while the server has paused on the first piece, count how much the
 * socket accepts: with reading really stopped only the kernel buffers fill. */
static void test_upload_stream(void)
{
    struct client *c = client_new(connect_unix());
    struct resp r = {0};
    static char chunk[64 * 1024 + 32];
    uint64_t sent = 0, during_pause = 0;
    uint32_t sum = 2166136261u;
    int fl;
    double t0;
    bool failed = false;

    send_str(c->fd, "POST /upload HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
    fl = fcntl(c->fd, F_GETFL);
    fcntl(c->fd, F_SETFL, fl | O_NONBLOCK);
    t0 = now_s();
    /* Non-blocking for 250 ms of the server's 500 ms pause. Chunk frames are built whole and
     * partial sends finish blocking, so the framing stays intact. */
    while (sent < UP_SIZE && !failed) {
        size_t n = UP_SIZE - sent < 60 * 1024 ? (size_t)(UP_SIZE - sent) : 60 * 1024;
        int hl = snprintf(chunk, 32, "%zx\r\n", n);
        for (size_t i = 0; i < n; i++)
            chunk[hl + i] = (char)pattern(sent + i);
        memcpy(chunk + hl + n, "\r\n", 2);
        size_t total = (size_t)hl + n + 2;
        bool nonblock = now_s() - t0 < 0.25;
        if (!nonblock && (fl & O_NONBLOCK) == 0) {
            fcntl(c->fd, F_SETFL, fl);
            fl |= O_NONBLOCK; /* mark "already switched" */
            during_pause = sent;
        }
        size_t off = 0;
        while (off < total) {
            ssize_t w = send(c->fd, chunk + off, total - off, MSG_NOSIGNAL);
            if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                if (off == 0 && now_s() - t0 < 0.25) {
                    usleep(1000);
                    continue;
                }
                struct pollfd pfd = {.fd = c->fd, .events = POLLOUT};
                poll(&pfd, 1, 1000);
                continue;
            }
            if (w <= 0) {
                failed = true;
                break;
            }
            off += (size_t)w;
        }
        sum = fnv(sum, chunk + hl, n);
        sent += n;
    }
    if ((fl & O_NONBLOCK) == 0)
        during_pause = sent;
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) & ~O_NONBLOCK);
    send_str(c->fd, "0\r\n\r\n");
    ok(!failed, "upload: 64 MiB chunked body sent");
    ok(during_pause < 8 * MIB, "upload: paused body stops reading (%llu KiB accepted in 250 ms)",
       (unsigned long long)(during_pause / 1024));
    ok(read_resp(c, &r) == 0 && r.status == 200, "upload: answered after on_end");
    json_t *j = body_json(&r);
    ok(json_integer_value(json_object_get(j, "bytes")) == UP_SIZE, "upload: every byte delivered");
    ok((uint32_t)json_integer_value(json_object_get(j, "sum")) == sum, "upload: bytes in order");
    ok(json_integer_value(json_object_get(j, "pauses")) > 10,
       "upload: paused and resumed %lld times",
       (long long)json_integer_value(json_object_get(j, "pauses")));
    is_int(LOAD(g_upload_violations), 0, "upload: no on_data while paused");
    json_decref(j);
    resp_reset(&r);
    client_free(c);
}

static void test_buffered_body(void)
{
    struct client *c = client_new(connect_unix());
    struct resp r = {0};
    json_t *j;

    send_str(c->fd, "POST /buffer HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 200, "buffer: chunked body read");
    j = body_json(&r);
    ok(json_integer_value(json_object_get(j, "len")) == 7 &&
           (uint32_t)json_integer_value(json_object_get(j, "sum")) ==
               fnv(2166136261u, "abcdefg", 7) &&
           json_is_true(json_object_get(j, "nul")),
       "buffer: chunks joined and NUL-terminated");
    json_decref(j);

    send_str(c->fd, "POST /buffer HTTP/1.1\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 200 && strstr(r.body, "\"len\":0"),
       "buffer: request without a body gives an empty body");

    /* Declared too large: refused before reading. */
    send_str(c->fd, "POST /buffer HTTP/1.1\r\nContent-Length: 2097152\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 413, "413: declared length over the limit");
    j = body_json(&r);
    is_str(json_string_value(json_object_get(j, "code")), "too_large", "413: JSON error body");
    json_decref(j);
    is_str(hdr(&r, "Connection"), "close", "413: connection closes");
    ok(is_hex16(hdr(&r, "X-Request-Id")), "413: carries a request id");
    client_free(c);

    /* Chunked, so only discovered while reading: the client is still sending when 413 comes. */
    c = client_new(connect_unix());
    send_str(c->fd, "POST /buffer HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
    static char chunk[32 * 1024 + 16];
    memset(chunk, 'y', sizeof(chunk));
    int hl = snprintf(chunk, 16, "%x\r\n", 32 * 1024);
    chunk[hl + 32 * 1024] = '\r';
    chunk[hl + 32 * 1024 + 1] = '\n';
    for (int i = 0; i < 64; i++)
        if (send_all(c->fd, chunk, (size_t)hl + 32 * 1024 + 2) < 0)
            break;
    ok(read_resp(c, &r) == 0 && r.status == 413, "413: chunked body over the limit");
    ok(at_eof(c), "413: connection closed after");
    resp_reset(&r);
    client_free(c);
}

static void test_bad_requests(void)
{
    struct client *c;
    struct resp r = {0};
    json_t *j;

    c = client_new(connect_unix());
    send_str(c->fd, "GARBAGE\x01 / HTTP/1.1\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 400, "400: garbage request line");
    j = body_json(&r);
    is_str(json_string_value(json_object_get(j, "code")), "invalid", "400: code invalid");
    ok(json_string_value(json_object_get(j, "message")) != NULL, "400: has a message");
    json_decref(j);
    ok(is_hex16(hdr(&r, "X-Request-Id")), "400: carries a request id");
    is_str(hdr(&r, "Connection"), "close", "400: Connection: close");
    ok(at_eof(c), "400: connection closed");
    client_free(c);

    const char *bad_paths[] = {"/a%zz", "/a%00b", "/a%2", "/x?q=%0"};
    for (size_t i = 0; i < WR_ARRAY_SIZE(bad_paths); i++) {
        char req[128];
        c = client_new(connect_unix());
        snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nX-Request-Id: bad-%zu\r\n\r\n", bad_paths[i],
                 i);
        send_str(c->fd, req);
        snprintf(req, sizeof(req), "bad-%zu", i);
        ok(read_resp(c, &r) == 0 && r.status == 400 && strcmp(hdr(&r, "X-Request-Id"), req) == 0,
           "400: invalid escape in %s, client's request id kept", bad_paths[i]);
        client_free(c);
    }

    c = client_new(connect_unix());
    char *big = xmalloc(MAX_HDR + 1024);
    memset(big, 'h', MAX_HDR + 1000);
    big[MAX_HDR + 1000] = '\0';
    send_str(c->fd, "GET /hello HTTP/1.1\r\nX-Big: ");
    send_str(c->fd, big);
    send_str(c->fd, "\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 431, "431: huge header");
    j = body_json(&r);
    ok(json_string_value(json_object_get(j, "code")) != NULL, "431: JSON error body");
    json_decref(j);
    ok(at_eof(c), "431: connection closed");
    client_free(c);

    c = client_new(connect_unix());
    send_str(c->fd, "GET /hello HTTP/1.1\r\n");
    for (int i = 0; i < 1000; i++)
        send_str(c->fd, "X-Many: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    send_str(c->fd, "\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 431, "431: many small headers");
    client_free(c);

    c = client_new(connect_unix());
    memset(big, 'u', 9000);
    big[0] = '/';
    big[9000] = '\0';
    send_str(c->fd, "GET ");
    send_str(c->fd, big);
    send_str(c->fd, " HTTP/1.1\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 414, "414: 9000-byte URL");
    client_free(c);
    free(big);

    c = client_new(connect_unix());
    send_str(c->fd,
             "POST /buffer HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 400, "400: Content-Length with chunked (smuggling)");
    client_free(c);

    /* A connection that sends nothing is closed after the head timeout; one idle after a
     * request, after the keep-alive timeout. */
    c = client_new(connect_unix());
    double t0 = now_s();
    ok(at_eof(c) && now_s() - t0 >= HEAD_MS / 1000.0 - 0.05 && now_s() - t0 < HEAD_MS / 1000.0 + 5,
       "silent connection closed after the head timeout (%.2f s)", now_s() - t0);
    client_free(c);
    c = client_new(connect_unix());
    send_str(c->fd, "GET /hello HTTP/1.1\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 200, "keep-alive: answered");
    t0 = now_s();
    ok(at_eof(c) && now_s() - t0 >= IDLE_MS / 1000.0 - 0.05 && now_s() - t0 < IDLE_MS / 1000.0 + 5,
       "idle keep-alive connection closed after the idle timeout (%.2f s)", now_s() - t0);
    client_free(c);
    resp_reset(&r);
}

/* Send req (n bytes, in two writes split at `split` if non-zero) on a new unix connection and
 * expect the server's own error `status`, then the connection closing. */
static void expect_rejected(const char *name, const char *req, size_t n, size_t split, int status)
{
    struct client *c = client_new(connect_unix());
    struct resp r = {0};
    bool got;

    if (split) {
        send_all(c->fd, req, split);
        usleep(50000); /* so that the server reads the rest separately */
        send_all(c->fd, req + split, n - split);
    } else {
        send_all(c->fd, req, n);
    }
    got = read_resp(c, &r) == 0;
    ok(got && r.status == status && hdr(&r, "Connection") &&
           strcmp(hdr(&r, "Connection"), "close") == 0 && at_eof(c),
       "strict: %s: %d and close (got %d)", name, status, got ? r.status : -1);
    resp_reset(&r);
    client_free(c);
}

#define REJECT(name, lit, status) expect_rejected(name, lit, sizeof(lit) - 1, 0, status)

/* Framing that llhttp's lax parser accepts and a proxy in front may read differently (request
 * smuggling): each gets the server's 400 (or 501/505) and a close. */
static void test_strict_framing(void)
{
    REJECT("chunk data not followed by CRLF",
           "POST /buffer HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
           "5\r\nhelloXX3\r\nabc\r\n0\r\n\r\n",
           400);
    REJECT("chunk data followed by a bare CR",
           "POST /buffer HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
           "5\r\nhello\rX0\r\n\r\n",
           400);
    REJECT("whitespace before the colon", "GET /echo HTTP/1.1\r\nHost : x\r\n\r\n", 400);
    REJECT("tab before the colon", "GET /echo HTTP/1.1\r\nHost\t: x\r\n\r\n", 400);
    REJECT("space in a header name", "GET /echo HTTP/1.1\r\nHost: t\r\nX Y: z\r\n\r\n", 400);
    REJECT("obs-fold", "GET /echo HTTP/1.1\r\nHost: t\r\nX-Test: a\r\n b\r\n\r\n", 400);
    REJECT("obs-fold with a tab", "GET /echo HTTP/1.1\r\nHost: t\r\nX-Test: a\r\n\tb\r\n\r\n", 400);
    REJECT("obs-fold of an empty value", "GET /echo HTTP/1.1\r\nX-Test:\r\n b\r\n\r\n", 400);
    static const char fold[] = "GET /echo HTTP/1.1\r\nHost: t\r\nX-Test: a\r\n b\r\n\r\n";
    expect_rejected("obs-fold in a second read", fold, sizeof(fold) - 1, strstr(fold, " b") - fold,
                    400);
    REJECT("obs-fold in a trailer",
           "POST /buffer HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\n 2\r\n\r\n",
           400);
    REJECT("two Content-Length",
           "POST /buffer HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400);
    REJECT("a Content-Length list", "POST /buffer HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\nabc",
           400);
    REJECT("Transfer-Encoding and Content-Length",
           "POST /buffer HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"
           "0\r\n\r\n",
           400);
    REJECT("a coding before chunked",
           "POST /buffer HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501);
    REJECT("chunked not last", "POST /buffer HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
           400);
    REJECT("Transfer-Encoding in HTTP/1.0",
           "POST /buffer HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400);
    REJECT("bare LF line ends", "GET /hello HTTP/1.1\nHost: t\n\n", 400);
    REJECT("bare LF after a header", "GET /hello HTTP/1.1\r\nHost: t\nX: y\r\n\r\n", 400);
    REJECT("bare CR in a header", "GET /hello HTTP/1.1\r\nHost: t\rX: y\r\n\r\n", 400);
    REJECT("bare LF in a chunk size line",
           "POST /buffer HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", 400);
    REJECT("an empty header name", "GET /hello HTTP/1.1\r\n: x\r\n\r\n", 400);
    REJECT("two Host headers", "GET /hello HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400);
    REJECT("HTTP/2.0 over HTTP/1 framing", "GET /hello HTTP/2.0\r\nHost: t\r\n\r\n", 505);
    REJECT("HTTP/0.9", "GET /hello\r\n\r\n", 505);
    REJECT("raw non-ASCII in the target", "GET /caf\xc3\xa9 HTTP/1.1\r\n\r\n", 400);

    /* A 16 MiB chunk extension: refused after CHUNK_EXT_MAX bytes, not buffered or skipped. */
    size_t ext = 16 * MIB;
    static const char head[] = "POST /buffer HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;";
    static const char tail[] = "\r\nhello\r\n0\r\n\r\n";
    char *big = xmalloc(sizeof(head) + ext + sizeof(tail));
    memcpy(big, head, sizeof(head) - 1);
    memset(big + sizeof(head) - 1, 'e', ext);
    memcpy(big + sizeof(head) - 1 + ext, tail, sizeof(tail));
    expect_rejected("16 MiB chunk extension", big, sizeof(head) - 1 + ext + sizeof(tail) - 1, 0,
                    400);
    big[sizeof(head) - 1 + 1000] = '\0';
    strcat(big + sizeof(head) - 1 + 1000, tail);
    struct client *c = client_new(connect_unix());
    struct resp r = {0};
    send_str(c->fd, big);
    ok(read_resp(c, &r) == 0 && r.status == 200 && strstr(r.body, "\"len\":5"),
       "strict: a 1000-byte chunk extension is still accepted");
    free(big);
    resp_reset(&r);
    client_free(c);
}

/* What must keep working: chunked bodies with extensions and trailers, pipelined behind each
 * other; trailers stay out of the headers; a header value split across reads. */
static void test_strict_valid(void)
{
    struct client *c = client_new(connect_unix());
    struct resp r = {0};

    send_str(c->fd, "POST /buffer HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "3;name=value\r\nabc\r\n4;q=\"x y\"\r\ndefg\r\n0\r\nX-Trailer: t\r\n\r\n"
                    "POST /trailer HTTP/1.1\r\nHost: t\r\nX-Test: head\r\n"
                    "Transfer-Encoding:  Chunked \r\n\r\n1\r\na\r\n0\r\nX-Test: trailer\r\n\r\n"
                    "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 200 && strstr(r.body, "\"len\":7"),
       "valid: chunked body with extensions and a trailer");
    ok(read_resp(c, &r) == 0 && r.status == 200 && strcmp(r.body, "head") == 0,
       "valid: pipelined; a trailer is not merged into the headers");
    ok(read_resp(c, &r) == 0 && r.status == 200 && strcmp(r.body, "hello") == 0,
       "valid: third pipelined request");
    send_str(c->fd, "GET /echo HTTP/1.1\r\nHost: t\r\nX-Test: hel");
    usleep(50000);
    send_str(c->fd, "lo\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 200 && strstr(r.body, "\"x\":\"hello\""),
       "valid: a header value split across reads is not a fold");
    send_str(c->fd, "GET /echo HTTP/1.1\r\nHost: t\r\nX-Test: a\r\n");
    usleep(50000);
    send_str(c->fd, "X-Multi: b\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 200 && strstr(r.body, "\"multi\":\"b\""),
       "valid: a header line in a second read");
    resp_reset(&r);
    client_free(c);
}

static void test_request_ids(void)
{
    struct client *c = client_new(connect_unix());
    struct resp r = {0};
    char first[32] = "";

    send_str(c->fd, "GET /echo HTTP/1.1\r\nX-Request-Id: abc-123_X.y\r\n\r\n");
    ok(read_resp(c, &r) == 0 && strcmp(hdr(&r, "X-Request-Id"), "abc-123_X.y") == 0 &&
           strstr(r.body, "\"id\":\"abc-123_X.y\""),
       "request id: client's valid id kept");
    send_str(c->fd, "GET /echo HTTP/1.1\r\nX-Request-Id: bad id!\r\n\r\n");
    ok(read_resp(c, &r) == 0 && is_hex16(hdr(&r, "X-Request-Id")),
       "request id: invalid id replaced");
    snprintf(first, sizeof(first), "%s", hdr(&r, "X-Request-Id"));
    send_str(c->fd, "GET /echo HTTP/1.1\r\nX-Request-Id: "
                    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n");
    ok(read_resp(c, &r) == 0 && is_hex16(hdr(&r, "X-Request-Id")) &&
           strcmp(first, hdr(&r, "X-Request-Id")) != 0,
       "request id: 65 chars replaced; generated ids differ");
    resp_reset(&r);
    client_free(c);
}

static void test_download(void)
{
    struct client *c = client_new(connect_unix());
    struct resp r = {0};

    STORE(g_max_pending, 0);
    /* Read slowly: small reads with a pause, so the server's queue hits its high water. */
    c->read_size = 16 * 1024;
    c->read_delay_us = 100;
    c->check_pattern = true;
    send_str(c->fd, "GET /download HTTP/1.1\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 200, "download: complete");
    c->check_pattern = false;
    c->read_delay_us = 0;
    c->read_size = sizeof(c->buf);
    is_str(hdr(&r, "Transfer-Encoding"), "chunked", "download: chunked");
    ok(r.total == DL_SIZE, "download: 64 MiB received (%llu)", (unsigned long long)r.total);
    ok(r.pattern_ok, "download: bytes in order");
    ok(LOAD(g_max_pending) <= HIGH_WATER + 128 * 1024 && LOAD(g_max_pending) > 256 * 1024,
       "download: server's pending bytes bounded (max %d KiB)", LOAD(g_max_pending) / 1024);
    ok(LOAD(g_drains) >= 10, "download: drain callback drove the producer (%d)", LOAD(g_drains));
    ok(LOAD(g_dl_pending_zero_ok), "download: drain came below the low-water mark");
    for (int i = 0; i < 200 && LOAD(g_dl_closed) == 0; i++)
        usleep(10000);
    ok(LOAD(g_dl_closed) == 1 && LOAD(g_dl_aborted) == 0, "download: on_close(aborted=false)");
    send_str(c->fd, "GET /hello HTTP/1.1\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 200, "download: connection reusable after");
    resp_reset(&r);
    client_free(c);
}

static void test_disconnects(void)
{
    struct client *c = client_new(connect_unix());
    char buf[64 * 1024];
    size_t got = 0;

    send_str(c->fd, "GET /forever HTTP/1.1\r\n\r\n");
    while (got < MIB) {
        ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    ok(got >= MIB, "disconnect: endless stream flowing");
    client_free(c);
    for (int i = 0; i < 300 && LOAD(g_forever_aborted) == 0; i++)
        usleep(10000);
    is_int(LOAD(g_forever_aborted), 1, "disconnect mid-stream: on_close(aborted=true)");

    c = client_new(connect_tcp(false));
    send_str(c->fd, "GET /hang HTTP/1.1\r\n\r\n");
    usleep(100000);
    client_free(c);
    for (int i = 0; i < 300 && LOAD(g_hang_aborted) == 0; i++)
        usleep(10000);
    is_int(LOAD(g_hang_aborted), 1, "disconnect before the response: on_close(aborted=true)");

    /* Half an upload, then gone. */
    int before = LOAD(g_upload_closed);
    c = client_new(connect_unix());
    send_str(c->fd, "POST /upload HTTP/1.1\r\nContent-Length: 1000000\r\n\r\nabc");
    usleep(100000);
    client_free(c);
    for (int i = 0; i < 300 && LOAD(g_upload_closed) == before; i++)
        usleep(10000);
    is_int(LOAD(g_upload_closed), before + 1, "disconnect mid-upload: on_close");
}

/* A masked client frame (RFC 6455 5.3), key 0x37fa213d. */
static size_t ws_frame(uint8_t *out, bool fin, int opcode, const void *p, size_t n)
{
    static const uint8_t key[4] = {0x37, 0xfa, 0x21, 0x3d};
    size_t o = 0;

    out[o++] = (uint8_t)((fin ? 0x80 : 0) | opcode);
    if (n < 126) {
        out[o++] = (uint8_t)(0x80 | n);
    } else {
        out[o++] = 0x80 | 126;
        out[o++] = (uint8_t)(n >> 8);
        out[o++] = (uint8_t)n;
    }
    memcpy(out + o, key, 4);
    o += 4;
    for (size_t i = 0; i < n; i++)
        out[o + i] = ((const uint8_t *)p)[i] ^ key[i % 4];
    return o + n;
}

static int recv_exact(struct client *c, void *p, size_t n)
{
    uint8_t *b = p;
    while (n > 0) {
        if (c->off < c->len) {
            size_t k = c->len - c->off < n ? c->len - c->off : n;
            memcpy(b, c->buf + c->off, k);
            c->off += k;
            b += k;
            n -= k;
            continue;
        }
        ssize_t r = recv(c->fd, c->buf, sizeof(c->buf), 0);
        if (r <= 0)
            return -1;
        c->off = 0;
        c->len = (size_t)r;
    }
    return 0;
}

/* Read one server frame (never masked). Returns the opcode or -1. */
static int ws_read(struct client *c, uint8_t *payload, size_t *n, bool *masked)
{
    uint8_t h[2], ext[8];
    size_t len;

    if (recv_exact(c, h, 2) < 0)
        return -1;
    *masked = h[1] & 0x80;
    len = h[1] & 0x7f;
    if (len == 126) {
        if (recv_exact(c, ext, 2) < 0)
            return -1;
        len = (size_t)ext[0] << 8 | ext[1];
    } else if (len == 127) {
        return -1;
    }
    if (recv_exact(c, payload, len) < 0)
        return -1;
    *n = len;
    return h[0] & 0x0f;
}

static void test_websocket(void)
{
    struct client *c = client_new(connect_unix());
    struct resp r = {0};
    uint8_t frame[512], payload[512];
    size_t n, fl;
    bool masked;
    int op;
    char req[1024];

    /* The first frame rides in the same write as the upgrade request. */
    n = (size_t)snprintf(req, sizeof(req),
                         "GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n"
                         "Connection: keep-alive, Upgrade\r\n"
                         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                         "Sec-WebSocket-Version: 13\r\n\r\n");
    fl = ws_frame(frame, true, 1, "hello", 5);
    memcpy(req + n, frame, fl);
    send_all(c->fd, req, n + fl);
    ok(read_resp(c, &r) == 0 && r.status == 101, "websocket: 101");
    is_str(hdr(&r, "Sec-WebSocket-Accept"),
           "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", "websocket: accept key (RFC 6455 example)");
    ok(hdr(&r, "X-Request-Id") != NULL, "websocket: 101 carries a request id");

    op = ws_read(c, payload, &n, &masked);
    ok(op == 1 && n == 5 && memcmp(payload, "hello", 5) == 0 && !masked,
       "websocket: text echoed (frame sent with the upgrade)");

    /* A fragmented binary message with a ping between the fragments. */
    fl = ws_frame(frame, false, 2, "\x01\x02\x03", 3);
    fl += ws_frame(frame + fl, true, 9, "pp", 2);
    fl += ws_frame(frame + fl, true, 0, "\x04\x05", 2);
    send_all(c->fd, frame, fl);
    op = ws_read(c, payload, &n, &masked);
    ok(op == 10 && n == 2 && memcmp(payload, "pp", 2) == 0, "websocket: ping answered with pong");
    op = ws_read(c, payload, &n, &masked);
    ok(op == 2 && n == 5 && memcmp(payload, "\x01\x02\x03\x04\x05", 5) == 0,
       "websocket: fragments joined into one message");

    static uint8_t bigmsg[300], bigframe[400];
    for (size_t i = 0; i < sizeof(bigmsg); i++)
        bigmsg[i] = (uint8_t)i;
    fl = ws_frame(bigframe, true, 2, bigmsg, sizeof(bigmsg));
    send_all(c->fd, bigframe, fl);
    op = ws_read(c, payload, &n, &masked);
    ok(op == 2 && n == sizeof(bigmsg) && memcmp(payload, bigmsg, n) == 0,
       "websocket: 16-bit length frame echoed");

    fl = ws_frame(frame, true, 8,
                  "\x03\xe8"
                  "bye",
                  5);
    send_all(c->fd, frame, fl);
    op = ws_read(c, payload, &n, &masked);
    ok(op == 8 && n >= 2 && payload[0] == 0x03 && payload[1] == 0xe8,
       "websocket: close answered with close 1000");
    ok(at_eof(c), "websocket: server closed after the handshake");
    client_free(c);
    for (int i = 0; i < 300 && LOAD(g_ws_closed) == 0; i++)
        usleep(10000);
    is_int(LOAD(g_ws_closed), 1, "websocket: on_close once");
    is_int(LOAD(g_ws_messages), 3, "websocket: three messages reached on_message");

    c = client_new(connect_unix());
    send_str(c->fd, "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    "Sec-WebSocket-Key: short\r\nSec-WebSocket-Version: 13\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 400, "websocket: bad key gets 400");
    client_free(c);
    c = client_new(connect_unix());
    send_str(c->fd,
             "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 400 && hdr(&r, "Sec-WebSocket-Version"),
       "websocket: wrong version gets 400 with the supported version");
    client_free(c);

    /* The server starts the close handshake; the client answers it. */
    c = client_new(connect_unix());
    send_str(c->fd,
             "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 101, "websocket: upgrade for a server close");
    fl = ws_frame(frame, true, 1, "close-me", 8);
    send_all(c->fd, frame, fl);
    op = ws_read(c, payload, &n, &masked);
    ok(op == 8 && n >= 2 && payload[0] == 0x03 && payload[1] == 0xe9 &&
           memcmp(payload + 2, "going away", n - 2) == 0,
       "websocket: wr_ws_close sends close 1001 with the reason");
    fl = ws_frame(frame, true, 8, "\x03\xe9", 2);
    send_all(c->fd, frame, fl);
    ok(at_eof(c), "websocket: server closes once the peer answered");
    client_free(c);
    for (int i = 0; i < 300 && LOAD(g_ws_closed) < 2; i++)
        usleep(10000);
    is_int(LOAD(g_ws_closed), 2, "websocket: on_close after a server-initiated close");

    /* Peer vanishes without a close frame. */
    c = client_new(connect_unix());
    send_str(c->fd,
             "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 101, "websocket: second upgrade");
    client_free(c);
    for (int i = 0; i < 300 && LOAD(g_ws_closed) < 3; i++)
        usleep(10000);
    is_int(LOAD(g_ws_closed), 3, "websocket: transport loss fires on_close");
    resp_reset(&r);
}

/* Read until EOF (at most max - 1 bytes), NUL-terminated. */
static size_t read_to_eof(int fd, char *buf, size_t max)
{
    size_t n = 0;
    for (;;) {
        ssize_t r = recv(fd, buf + n, max - 1 - n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || n + (size_t)r >= max - 1) {
            if (r > 0)
                n += (size_t)r;
            break;
        }
        n += (size_t)r;
    }
    buf[n] = '\0';
    return n;
}

static void test_hijack(void)
{
    static const char head[] = "GET /hijack HTTP/1.1\r\nHost: t\r\nUpgrade: raw\r\n"
                               "Connection: upgrade\r\n\r\n";
    char req[512], got[1024];
    struct client *c;
    struct resp r = {0};
    int n;

    /* The upgrade request and the first bytes of the new protocol in one write. */
    c = client_new(connect_unix());
    n = snprintf(req, sizeof(req), "%sEARLY-BYTES", head);
    send_all(c->fd, req, (size_t)n);
    read_to_eof(c->fd, got, sizeof(got));
    is_str(got, "HTTP/1.1 101 Switching Protocols\r\nX-Unix: 1\r\n\r\nrest=EARLY-BYTES",
           "hijack: the taker gets the socket and the bytes read past the head");
    client_free(c);

    /* After a keep-alive request on the same connection, over TCP. */
    c = client_new(connect_tcp(false));
    send_str(c->fd, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 200, "hijack: a first request is answered");
    send_str(c->fd, head);
    read_to_eof(c->fd, got, sizeof(got));
    is_str(got, "HTTP/1.1 101 Switching Protocols\r\nX-Unix: 0\r\n\r\nrest=",
           "hijack: the second request of a keep-alive connection, nothing read past its head");
    client_free(c);
    free(r.body);
}

static void test_proxy_hooks(void)
{
    struct client *c = client_new(connect_unix());
    struct resp r = {0};
    char got[4096];
    size_t n = 0;

    /* A streamed answer to HEAD: the head with the body's length, no body. */
    send_str(c->fd, "HEAD /streamhead HTTP/1.1\r\nHost: t\r\n\r\n");
    while (n < sizeof(got) - 1 && !strstr(got, "\r\n\r\n")) {
        ssize_t k = recv(c->fd, got + n, sizeof(got) - 1 - n, 0);
        if (k <= 0)
            break;
        n += (size_t)k;
        got[n] = '\0';
    }
    ok(strstr(got, "Content-Length: 1234\r\n") != NULL, "proxy hooks: HEAD keeps the length");
    ok(strstr(got, "\r\n\r\n") != NULL && strstr(got, "\r\n\r\n")[4] == '\0',
       "proxy hooks: HEAD: nothing after the head");
    send_str(c->fd, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 200 && r.blen == 5,
       "proxy hooks: the next answer on the connection is intact (no stray body bytes)");
    client_free(c);

    /* 100 Continue before the body is sent, once. */
    c = client_new(connect_unix());
    send_str(c->fd, "POST /continue HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n"
                    "Expect: 100-continue\r\n\r\n");
    n = 0;
    while (n < 25) {
        ssize_t k = recv(c->fd, got + n, 25 - n, 0);
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    got[n] = '\0';
    is_str(got, "HTTP/1.1 100 Continue\r\n\r\n", "proxy hooks: 100 Continue first");
    send_str(c->fd, "abcd");
    ok(read_resp(c, &r) == 0 && r.status == 200 && r.body && strcmp(r.body, "4") == 0,
       "proxy hooks: then the answer, the body read");
    client_free(c);

    /* An answer cut: the connection ends without the last chunk. */
    c = client_new(connect_unix());
    send_str(c->fd, "GET /abort HTTP/1.1\r\nHost: t\r\n\r\n");
    n = read_to_eof(c->fd, got, sizeof(got));
    ok(strstr(got, "HTTP/1.1 200") != NULL && strstr(got, "5\r\nhello\r\n") != NULL,
       "proxy hooks: abort: what was sent arrived");
    ok(strstr(got, "0\r\n\r\n") == NULL, "proxy hooks: abort: no last chunk, then EOF");
    client_free(c);

    /* Per-connection data: kept across requests, freed with the connection. */
    STORE(g_conndata_freed, 0);
    c = client_new(connect_unix());
    send_str(c->fd, "GET /conndata HTTP/1.1\r\nHost: t\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.body && strcmp(r.body, "1") == 0, "proxy hooks: conn data 1");
    send_str(c->fd, "GET /conndata HTTP/1.1\r\nHost: t\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.body && strcmp(r.body, "2") == 0,
       "proxy hooks: conn data kept across requests");
    client_free(c);
    for (int i = 0; i < 200 && LOAD(g_conndata_freed) == 0; i++)
        usleep(10000);
    is_int(LOAD(g_conndata_freed), 1, "proxy hooks: conn data freed with the connection");
    resp_reset(&r);
}

static void test_concurrent(void)
{
    static int fds[N_CONCURRENT];
    static char got[N_CONCURRENT][512];
    static size_t glen[N_CONCURRENT];
    static bool sent[N_CONCURRENT], done_[N_CONCURRENT];
    static struct pollfd pfd[N_CONCURRENT];
    const char *req = "GET /gate HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    int left = N_CONCURRENT, good = 0;
    int nconnect_failed = 0, nsend_failed = 0, nended = 0, last_errno = 0;
    double t0 = now_s();

    for (int i = 0; i < N_CONCURRENT; i++) {
        fds[i] = connect_tcp(true);
        if (fds[i] < 0)
            nconnect_failed++, last_errno = errno;
    }
    while (left > 0 && now_s() - t0 < 30) {
        int np = 0;
        int map[N_CONCURRENT];
        for (int i = 0; i < N_CONCURRENT; i++) {
            if (done_[i] || fds[i] < 0)
                continue;
            pfd[np] = (struct pollfd){.fd = fds[i], .events = sent[i] ? POLLIN : POLLOUT};
            map[np++] = i;
        }
        if (np == 0 || poll(pfd, (nfds_t)np, 1000) <= 0)
            continue;
        for (int k = 0; k < np; k++) {
            int i = map[k];
            if (!pfd[k].revents)
                continue;
            if (!sent[i]) {
                if (send(fds[i], req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req))
                    sent[i] = true;
                else
                    done_[i] = true, left--, nsend_failed++, last_errno = errno;
                continue;
            }
            ssize_t n = recv(fds[i], got[i] + glen[i], sizeof(got[i]) - 1 - glen[i], 0);
            if (n > 0) {
                glen[i] += (size_t)n;
            } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                done_[i] = true;
                left--;
                if (LOAD(g_gate_max) < N_CONCURRENT)
                    nended++, last_errno = n == 0 ? 0 : errno;
            }
        }
    }
    for (int i = 0; i < N_CONCURRENT; i++) {
        got[i][glen[i]] = '\0';
        if (strncmp(got[i], "HTTP/1.1 200 ", 13) == 0 && strstr(got[i], "\r\n\r\ngate"))
            good++;
        if (fds[i] >= 0)
            close(fds[i]);
    }
    if (LOAD(g_gate_max) != N_CONCURRENT)
        printf("# concurrency: %d connects failed, %d sends failed, %d ended early (errno %d)\n",
               nconnect_failed, nsend_failed, nended, last_errno);
    is_int(LOAD(g_gate_max), N_CONCURRENT, "concurrency: 1000 requests in flight at once");
    is_int(good, N_CONCURRENT, "concurrency: 1000 connections each answered");
}

/* ---- the limits server: timeouts ---------------------------------------------------------- */

/* Seconds until the server closes c (reading and dropping anything it sends), or -1 after 10 s. */
static double secs_to_eof(struct client *c, double t0)
{
    char b[4096];

    for (;;) {
        ssize_t n = recv(c->fd, b, sizeof(b), 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return now_s() - t0;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

static void test_timeouts(void)
{
    struct client *c;
    struct resp r = {0};
    double t0, t;

    /* A head trickled a byte every 200 ms: the deadline is not moved by input. */
    c = client_new(connect_from(20));
    t0 = now_s();
    send_str(c->fd, "GET /hello HTTP/1.1\r\nX-Slow: ");
    for (int i = 0; i < 20 && send_str(c->fd, "a") == 0; i++)
        usleep(200000);
    t = secs_to_eof(c, t0);
    ok(t >= L_HEAD_MS / 1000.0 - 0.05 && t < L_HEAD_MS / 1000.0 + 3,
       "timeout: a trickled head is cut at the head deadline (%.2f s)", t);
    client_free(c);

    /* A body that stalls: 408, then close. */
    c = client_new(connect_from(20));
    send_str(c->fd, "POST /buffer HTTP/1.1\r\nContent-Length: 100\r\n\r\n0123456789");
    t0 = now_s();
    ok(read_resp(c, &r) == 0 && r.status == 408, "timeout: stalled body answered 408");
    t = now_s() - t0;
    ok(t >= L_BODY_MS / 1000.0 - 0.05 && t < L_BODY_MS / 1000.0 + 3,
       "timeout: after the body timeout (%.2f s)", t);
    json_t *j = body_json(&r);
    is_str(json_string_value(json_object_get(j, "code")), "timeout", "timeout: 408 code");
    json_decref(j);
    ok(at_eof(c), "timeout: connection closed after the 408");
    client_free(c);

    /* A chunked body that stops after its first chunk. */
    c = client_new(connect_from(20));
    send_str(c->fd, "POST /buffer HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 408, "timeout: stalled chunked body answered 408");
    client_free(c);

    /* A slow body that keeps coming (a byte every 150 ms for 2.25 s) is not cut. */
    c = client_new(connect_from(20));
    send_str(c->fd, "POST /buffer HTTP/1.1\r\nContent-Length: 15\r\n\r\n");
    for (int i = 0; i < 15; i++) {
        usleep(150000);
        send_str(c->fd, "x");
    }
    ok(read_resp(c, &r) == 0 && r.status == 200 && strstr(r.body, "\"len\":15"),
       "timeout: a body that makes progress is not cut");
    client_free(c);

    /* The server holding a body back (backpressure) for longer than the body timeout. */
    c = client_new(connect_from(20));
    send_str(c->fd, "POST /slowsink HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "5\r\nfirst\r\n6\r\nsecond\r\n0\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 200 && strcmp(r.body, "11") == 0,
       "timeout: a body paused by the server does not time out");
    client_free(c);

    /* An interactive body: the client pauses for longer than the body timeout. */
    c = client_new(connect_from(20));
    send_str(c->fd, "POST /interactive HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
    usleep((L_BODY_MS + 500) * 1000);
    send_str(c->fd, "2\r\nde\r\n0\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 200 && strcmp(r.body, "5") == 0,
       "timeout: an interactive body may pause");
    client_free(c);

    /* Slow producers: a late answer and a slow stream outlast every timeout. */
    c = client_new(connect_from(20));
    send_str(c->fd, "GET /late HTTP/1.1\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 200 && strcmp(r.body, "late") == 0,
       "timeout: a response that takes 1.5 s is waited for");
    send_str(c->fd, "GET /ticker HTTP/1.1\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 200 && r.blen == 40,
       "timeout: a 2 s stream of small chunks is not cut");
    client_free(c);

    /* A WebSocket quiet for longer than every timeout. */
    c = client_new(connect_from(20));
    send_str(c->fd,
             "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n");
    ok(read_resp(c, &r) == 0 && r.status == 101, "timeout: websocket upgraded");
    usleep((L_IDLE_MS + 300) * 1000); /* longer than every timeout */
    uint8_t frame[64], payload[64];
    size_t n, fl = ws_frame(frame, true, 1, "still", 5);
    bool masked;
    send_all(c->fd, frame, fl);
    ok(ws_read(c, payload, &n, &masked) == 1 && n == 5 && memcmp(payload, "still", 5) == 0,
       "timeout: a websocket quiet for longer than every timeout still works");
    client_free(c);
    resp_reset(&r);
}

/* ---- the limits server: caps ------------------------------------------------------------- */

/* A keep-alive connection from 127.0.0.<from> that has had one request answered. */
static struct client *idle_conn(int from)
{
    struct client *c = client_new(connect_from(from));
    struct resp r = {0};

    if (c->fd < 0 || send_str(c->fd, "GET /hello HTTP/1.1\r\n\r\n") < 0 || read_resp(c, &r) < 0 ||
        r.status != 200) {
        resp_reset(&r);
        client_free(c);
        return NULL;
    }
    resp_reset(&r);
    return c;
}

/* req on a new connection from `from` is turned away: 503, Retry-After, close. */
static bool turned_away_req(int from, const char *req)
{
    struct client *c = client_new(connect_from(from));
    struct resp r = {0};
    bool yes;

    send_str(c->fd, req);
    yes = read_resp(c, &r) == 0 && r.status == 503 && hdr(&r, "Retry-After") &&
          strcmp(hdr(&r, "Retry-After"), "1") == 0 && at_eof(c);
    resp_reset(&r);
    client_free(c);
    return yes;
}

static bool turned_away(int from)
{
    return turned_away_req(from, "GET /hello HTTP/1.1\r\n\r\n");
}

/* A connection from `from` with a /ticker stream under way (its head read): busy for 2 s. */
static struct client *busy_conn(int from)
{
    struct client *c = client_new(connect_from(from));
    size_t got = 0;

    if (c->fd < 0 || send_str(c->fd, "GET /ticker HTTP/1.1\r\n\r\n") < 0)
        goto fail;
    while (got < sizeof(c->buf) - 1) {
        ssize_t n = recv(c->fd, c->buf + got, sizeof(c->buf) - 1 - got, 0);
        if (n <= 0)
            goto fail;
        got += (size_t)n;
        c->buf[got] = '\0';
        if (strstr(c->buf, "\r\n\r\n")) {
            c->len = got; /* read_resp parses it from here */
            return c;
        }
    }
fail:
    client_free(c);
    return NULL;
}

static bool answers(int from)
{
    struct client *c = idle_conn(from);

    client_free(c);
    return c != NULL;
}

static void test_caps(void)
{
    struct client *held[L_MAX_CONNS + 1] = {0};
    int got = 0;

    /* Per client: L_PER_CLIENT connections from 127.0.0.30, then 503; others still served. */
    for (int i = 0; i < L_PER_CLIENT; i++)
        got += (held[i] = idle_conn(30)) != NULL;
    is_int(got, L_PER_CLIENT, "caps: connections up to the per-client cap served");
    ok(turned_away(30), "caps: one more from the same client: 503 with Retry-After, closed");
    ok(answers(31), "caps: another client is served meanwhile");
    client_free(held[0]);
    held[0] = NULL;
    usleep(100000);
    ok(answers(30), "caps: a closed connection gives its slot back");
    for (int i = 0; i < L_PER_CLIENT; i++)
        client_free(held[i]), held[i] = NULL;

    /* Unauthenticated: L_UNAUTH connections that have not sent a head, then a new one closes
     * the oldest. */
    for (int i = 0; i < L_UNAUTH; i++)
        held[i] = client_new(connect_from(40 + i));
    usleep(100000);
    struct client *fresh = client_new(connect_from(40 + L_UNAUTH));
    ok(at_eof(held[0]), "caps: past the unauthenticated cap the oldest is closed");
    struct resp r = {0};
    send_str(fresh->fd, "GET /hello HTTP/1.1\r\n\r\n");
    ok(read_resp(fresh, &r) == 0 && r.status == 200, "caps: and the new one is served");
    client_free(fresh);
    for (int i = 0; i < L_UNAUTH; i++)
        client_free(held[i]), held[i] = NULL;
    usleep(100000);

    /* Global: L_MAX_CONNS connections from distinct clients, one idle and the others busy with
     * a response under way: a new connection closes the idle one. Then all busy: 503. */
    got = 0;
    held[0] = idle_conn(50);
    for (int i = 1; i < L_MAX_CONNS; i++)
        got += (held[i] = busy_conn(50 + i)) != NULL;
    is_int(got, L_MAX_CONNS - 1, "caps: busy connections up to the cap");
    struct client *extra = busy_conn(60);
    ok(held[0] && at_eof(held[0]), "caps: at the connection cap the idle connection is closed");
    ok(extra != NULL, "caps: and the new connection is served");
    ok(turned_away(61), "caps: all connections busy: 503");
    int streams = 0;
    for (int i = 1; i < L_MAX_CONNS; i++)
        streams += held[i] && read_resp(held[i], &r) == 0 && r.status == 200 && r.blen == 40;
    streams += extra && read_resp(extra, &r) == 0 && r.status == 200 && r.blen == 40;
    is_int(streams, L_MAX_CONNS, "caps: the busy responses were not disturbed");
    client_free(extra);
    for (int i = 0; i < L_MAX_CONNS; i++)
        client_free(held[i]), held[i] = NULL;
    usleep(100000);
    got = 0;
    /* The closes reach the loop in their own time: a slot still taken is waited for (2 s). */
    for (int i = 0; i < L_MAX_CONNS; i++) {
        for (int tries = 0; tries < 40 && !(held[i] = idle_conn(70 + i)); tries++)
            usleep(50000);
        got += held[i] != NULL;
    }
    is_int(got, L_MAX_CONNS, "caps: every slot came back");
    for (int i = 0; i < L_MAX_CONNS; i++)
        client_free(held[i]), held[i] = NULL;
    usleep(100000);

    /* Bodies: half the connections may be sending a request body; one more gets 503. The
     * held bodies are interactive (no timeout); until the server has read all their heads a
     * new body may still get in, and completes at once. */
    for (int i = 0; i < L_MAX_CONNS / 2; i++) {
        held[i] = client_new(connect_from(80 + i));
        send_str(held[i]->fd, "POST /interactive HTTP/1.1\r\nContent-Length: 100\r\n\r\nabc");
    }
    bool refused = false;
    for (int i = 0; i < 100 && !refused; i++) {
        usleep(50000);
        refused = turned_away_req(90, "POST /buffer HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
    }
    ok(refused, "caps: past the connections sending a body: 503");
    ok(answers(91), "caps: a request without a body is served meanwhile");
    for (int i = 0; i < L_MAX_CONNS / 2; i++)
        client_free(held[i]), held[i] = NULL;
    usleep(100000);
    ok(answers(92), "caps: the slots of bodies come back");
    resp_reset(&r);
}

static void test_peer_keys(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    struct sockaddr_in6 b = {.sin6_family = AF_INET6}, m = {.sin6_family = AF_INET6};
    struct wr_peer_key ka, kb, kb2, km;
    struct wr_peers *t = wr_peers_new();

    inet_pton(AF_INET, "192.0.2.7", &a.sin_addr);
    inet_pton(AF_INET6, "::ffff:192.0.2.7", &m.sin6_addr);
    wr_peer_key_of((struct sockaddr *)&a, &ka);
    wr_peer_key_of((struct sockaddr *)&m, &km);
    ok(memcmp(&ka, &km, sizeof(ka)) == 0, "peers: a v4-mapped address is its IPv4 client");
    inet_pton(AF_INET6, "2001:db8:1:2::1", &b.sin6_addr);
    wr_peer_key_of((struct sockaddr *)&b, &kb);
    inet_pton(AF_INET6, "2001:db8:1:2:ffff::9", &b.sin6_addr);
    wr_peer_key_of((struct sockaddr *)&b, &kb2);
    ok(memcmp(&kb, &kb2, sizeof(kb)) == 0, "peers: one IPv6 /64 is one client");
    inet_pton(AF_INET6, "2001:db8:1:3::1", &b.sin6_addr);
    wr_peer_key_of((struct sockaddr *)&b, &kb2);
    ok(memcmp(&kb, &kb2, sizeof(kb)) != 0, "peers: another /64 is another client");
    /* Counts, across growth of the table. */
    bool counts = wr_peers_add(t, &ka) == 1 && wr_peers_add(t, &ka) == 2;
    for (uint32_t i = 0; i < 5000; i++) {
        struct wr_peer_key k = {0};
        memcpy(k.b, &i, sizeof(i));
        counts = counts && wr_peers_add(t, &k) == 1;
    }
    counts = counts && wr_peers_add(t, &ka) == 3 && wr_peers_size(t) == 5001;
    for (uint32_t i = 0; i < 5000; i++) {
        struct wr_peer_key k = {0};
        memcpy(k.b, &i, sizeof(i));
        wr_peers_del(t, &k);
    }
    wr_peers_del(t, &ka);
    counts = counts && wr_peers_size(t) == 1 && wr_peers_add(t, &ka) == 3;
    ok(counts, "peers: counts per client, entries gone at zero");
    wr_peers_free(t);
}

/* Out of file descriptors with libuv's own spare gone (another thread took the fd it freed):
 * libuv's accept loop calls back at once, for ever, unless the callback frees fds. */
static void test_out_of_fds(void)
{
    struct client *probe = client_new(connect_unix());
    struct resp r = {0};
    int clients[3], fillers[256], nfill = 0, fd;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)ltcp_port)};
    struct timeval tv = {.tv_sec = 5};
    struct rlimit old, low;
    char b;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(probe->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    /* Answered once before the fds run out: a connection still in the listen backlog then would
     * be accepted into no fd (on a loaded machine the loop may not have accepted it yet). */
    send_str(probe->fd, "GET /hello HTTP/1.1\r\n\r\n");
    ok(read_resp(probe, &r) == 0 && r.status == 200, "out of fds: the probe is served first");
    resp_reset(&r);
    for (int i = 0; i < 3; i++)
        clients[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    /* The loop thread is idle: nothing else touches the field now. */
    if (uv_default_loop()->emfile_fd >= 0) {
        close(uv_default_loop()->emfile_fd);
        uv_default_loop()->emfile_fd = -1;
    }
    /* A limit just above the fds in use, then take the rest. */
    fd = open("/dev/null", O_RDONLY);
    getrlimit(RLIMIT_NOFILE, &old);
    low = old;
    low.rlim_cur = (rlim_t)fd + 64;
    close(fd);
    setrlimit(RLIMIT_NOFILE, &low);
    while (nfill < (int)WR_ARRAY_SIZE(fillers) && (fd = open("/dev/null", O_RDONLY)) >= 0)
        fillers[nfill++] = fd;
    ok(errno == EMFILE, "out of fds: the process has none left (%d taken)", nfill);
    /* Asked now, before the probe has been idle for the main server's 1 s (the connects below
     * may take longer than that on a loaded machine). */
    send_str(probe->fd, "GET /hello HTTP/1.1\r\n\r\n");
    ok(read_resp(probe, &r) == 0 && r.status == 200, "out of fds: the loop still serves");
    int closed = 0;
    for (int i = 0; i < 3; i++) {
        setsockopt(clients[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        if (connect(clients[i], (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
            recv(clients[i], &b, 1, 0) <= 0 && errno != EAGAIN)
            closed++;
    }
    is_int(closed, 3, "out of fds: new connections are closed at once");
    while (nfill > 0)
        close(fillers[--nfill]);
    for (int i = 0; i < 3; i++)
        close(clients[i]);
    setrlimit(RLIMIT_NOFILE, &old);
    /* Soon, not at once: the connections closed for want of fds may still be releasing their
     * slots (failed 1 run in about 40 on an idle host when asked at once). */
    bool served = false;
    for (int i = 0; i < 20 && !(served = answers(93)); i++)
        usleep(50000);
    ok(served, "out of fds: served again once fds are free");
    resp_reset(&r);
    client_free(probe);
}

static void test_stop(void)
{
    /* A request in flight when the server stops sees on_close(aborted). */
    struct client *c = client_new(connect_unix());
    int before = LOAD(g_hang_aborted);

    send_str(c->fd, "GET /hang HTTP/1.1\r\n\r\n");
    usleep(100000);
    uv_async_send(&stop_async);
    pthread_join(loop_thread, NULL);
    is_int(LOAD(g_stopped), 1, "stop: done callback ran");
    is_int(LOAD(g_hang_aborted), before + 1, "stop: in-flight request aborted");
    ok(at_eof(c), "stop: client connection closed");
    ok(access(sock_path, F_OK) != 0, "stop: unix socket removed");
    ok(uv_loop_close(uv_default_loop()) == 0, "stop: every handle closed");
    client_free(c);
    rmdir(sock_dir);
}

int main(void)
{
    struct rlimit rl;

    signal(SIGPIPE, SIG_IGN);
    /* The concurrency test holds both ends of N_CONCURRENT connections in this process. Root
     * raises the hard limit too: a CI host's may be as low as the 1,024 a server runs out at. */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4 * N_CONCURRENT) {
        rl.rlim_cur = 4 * N_CONCURRENT;
        if (rl.rlim_max < rl.rlim_cur)
            rl.rlim_max = rl.rlim_cur;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0) {
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        printf("# RLIMIT_NOFILE %llu\n", (unsigned long long)rl.rlim_cur);
    if (server_up() < 0) {
        ok(0, "server starts");
        return done();
    }
    test_socket_mode();
    test_simple_get();
    test_keepalive();
    test_pipelining();
    test_request_ids();
    test_buffered_body();
    test_bad_requests();
    test_strict_framing();
    test_strict_valid();
    test_upload_stream();
    test_upload_paused_at_its_last_byte();
    test_download();
    test_disconnects();
    test_websocket();
    test_hijack();
    test_proxy_hooks();
    test_concurrent();
    test_timeouts();
    test_caps();
    test_peer_keys();
    test_out_of_fds();
    test_stop();
    return done();
}
