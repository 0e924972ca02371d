/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's client for one warren-init control connection, on libuv: a frame reader, a
 * coalescing write queue with accounting, request routing by request id and process event
 * routing by proc id. Every frame is hostile until a proto decoder accepted it; see agent.h for
 * the contract and docs/design/agent.md for lifetimes and flow control. */
#include "agent.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/xalloc.h"

#define AGENT_BUCKETS   64         /* hash buckets for requests and for processes */
#define AGENT_MAX_ITEMS (1u << 20) /* PROC or STAT items one LIST or FILE_LIST may return */
#define AGENT_READ_SIZE (64u * 1024)

/* A process whose events this connection routes. */
struct proc {
    struct proc *next;
    uint32_t id;
    bool detached;  /* events are acknowledged and dropped */
    size_t unacked; /* OUTPUT bytes delivered and not yet acknowledged */
    /* STDIN flow control: bytes sent and not yet acknowledged by warren-init (at most
     * WR_STDIN_WINDOW), and what waits for window credit */
    size_t stdin_inflight;
    struct wr_buf stdin_wait;
    /* a STDIN_CLOSE asked for while stdin still waited: sent when it has gone out */
    bool close_wanted;
    wr_agent_reply_fn close_cb;
    void *close_ctx;
    struct wr_agent_proc_cbs cbs;
    void *ctx;
};

/* A request waiting for replies. */
struct req {
    struct req *next;
    uint32_t id;
    uint16_t type;
    bool opened;    /* FILE_WRITE/FILE_WATCH: the first OK came; FILE_READ: the STAT came */
    uint32_t items; /* LIST and FILE_LIST items so far */
    wr_agent_reply_fn cb;
    void *ctx;
    struct proc *proc; /* SPAWN and ATTACH: registered when the OK comes */
};

enum agent_state {
    AGENT_CONNECTING, /* uv_pipe_connect in progress */
    AGENT_HELLO,      /* HELLO sent, waiting for init's */
    AGENT_READY,
    AGENT_DEAD, /* lost or closed; the handles are closing or closed */
};

/* fds to send with the frame that starts `at` bytes into `out` (a SPAWN's cgroup.procs files):
 * they go with a sendmsg of their own that begins with that frame, once what is before it has
 * been written, so they reach warren-init no later than the frame's first byte. */
struct fdpass {
    struct fdpass *next;
    size_t at;
    int fds[WR_SPAWN_FDS_MAX];
    unsigned n;
};

struct wr_agent {
    uv_pipe_t pipe;
    uv_idle_t idle;   /* deferred work: on_ready for an fd, a write error, dispatch after resume */
    uv_timer_t retry; /* an fdpass's sendmsg found the socket full: try again shortly */
    /* Dormancy (cfg.idle_ms): after that long with nothing in flight the socket is closed
     * (dormant) and the next request connects again by path (waking), HELLO first. The owner
     * sees a ready agent throughout. pipe_open: the pipe handle is initialised and not yet
     * through its close callback. */
    uv_timer_t idle_timer;
    uint64_t last_active;
    bool dormant, waking, wake_wanted, pipe_open, counted;
    unsigned nreqs, nprocs;
    struct fdpass *fdq, **fdq_tail;
    uv_connect_t connect;
    uv_write_t wreq;
    struct wr_agent_config cfg; /* cfg.path is not kept: see path */
    char *path;
    enum agent_state state;
    int handles;       /* libuv handles not yet through their close callback */
    bool connected;    /* the socket may be written */
    bool ready_told;   /* on_ready was called */
    bool close_called; /* wr_agent_close: free once the handles are closed */
    bool reading;
    bool paused;
    bool dispatching;
    bool writing;    /* flight is in a uv_write */
    bool above_high; /* pending reached WR_AGENT_HIGH_WATER; drain not yet reported */
    bool want_dispatch;
    bool has_deferred;
    struct wr_err deferred; /* a loss to report from the idle callback */
    struct wr_reader rd;
    struct wr_buf out;       /* frames not yet handed to libuv */
    struct wr_buf flight;    /* the frames of the uv_write in progress */
    struct wr_buf scratch;   /* wr_agent_begin's buffer when not connected */
    struct wr_buf *building; /* between wr_agent_begin and wr_agent_end */
    uint16_t build_type;
    uint32_t build_id;
    uint32_t next_id;
    struct req *reqs[AGENT_BUCKETS];
    struct proc *procs[AGENT_BUCKETS];
    void (*on_drain)(struct wr_agent *a, void *ctx);
    void *drain_ctx;
    uint8_t *rbuf; /* AGENT_READ_SIZE bytes while connected */
};

static void on_idle(uv_idle_t *h);
static void on_write(uv_write_t *wr, int status);
static void note_activity(struct wr_agent *a);

/* Sockets of this process's agents (all on one loop thread: agent.h). */
static unsigned n_sockets;

static void count_socket(struct wr_agent *a, bool open)
{
    if (a->counted == open)
        return;
    a->counted = open;
    if (open)
        n_sockets++;
    else
        n_sockets--;
}

unsigned wr_agent_sockets(void)
{
    return n_sockets;
}

static void drop_fdq(struct wr_agent *a)
{
    while (a->fdq != NULL) {
        struct fdpass *f = a->fdq;
        a->fdq = f->next;
        for (unsigned i = 0; i < f->n; i++)
            (void)close(f->fds[i]);
        free(f);
    }
    a->fdq_tail = &a->fdq;
}

/* ---- tables ---------------------------------------------------------------------------------- */

static struct req *req_find(const struct wr_agent *a, uint32_t id)
{
    for (struct req *r = a->reqs[id % AGENT_BUCKETS]; r != NULL; r = r->next)
        if (r->id == id)
            return r;
    return NULL;
}

static void req_remove(struct wr_agent *a, struct req *r)
{
    for (struct req **pp = &a->reqs[r->id % AGENT_BUCKETS]; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == r) {
            *pp = r->next;
            r->next = NULL;
            a->nreqs--;
            note_activity(a);
            return;
        }
    }
}

static struct req *req_add(struct wr_agent *a, uint32_t id, uint16_t type)
{
    struct req *r = xcalloc(1, sizeof(*r));

    r->id = id;
    r->type = type;
    r->next = a->reqs[id % AGENT_BUCKETS];
    a->reqs[id % AGENT_BUCKETS] = r;
    a->nreqs++;
    return r;
}

static struct proc *proc_find(const struct wr_agent *a, uint32_t id)
{
    for (struct proc *p = a->procs[id % AGENT_BUCKETS]; p != NULL; p = p->next)
        if (p->id == id)
            return p;
    return NULL;
}

static void proc_remove(struct wr_agent *a, struct proc *p)
{
    for (struct proc **pp = &a->procs[p->id % AGENT_BUCKETS]; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            p->next = NULL;
            a->nprocs--;
            note_activity(a);
            return;
        }
    }
}

static void proc_add(struct wr_agent *a, struct proc *p)
{
    p->next = a->procs[p->id % AGENT_BUCKETS];
    a->procs[p->id % AGENT_BUCKETS] = p;
    a->nprocs++;
}

/* Ids count up from 1 and skip ids still pending, so an id is reused only after 2^32 requests
 * (and replies to a cancelled request cannot reach a new one before that). */
static uint32_t alloc_id(struct wr_agent *a)
{
    uint32_t id;

    do {
        id = a->next_id++;
        if (a->next_id == 0)
            a->next_id = 1;
    } while (id == 0 || req_find(a, id) != NULL);
    return id;
}

/* ---- lifetime -------------------------------------------------------------------------------- */

static void agent_free(struct wr_agent *a)
{
    for (size_t i = 0; i < AGENT_BUCKETS; i++) {
        while (a->reqs[i] != NULL) {
            struct req *r = a->reqs[i];
            a->reqs[i] = r->next;
            free(r->proc);
            free(r);
        }
        while (a->procs[i] != NULL) {
            struct proc *p = a->procs[i];
            a->procs[i] = p->next;
            wr_buf_fini(&p->stdin_wait);
            free(p);
        }
    }
    drop_fdq(a);
    wr_reader_fini(&a->rd);
    wr_buf_fini(&a->out);
    wr_buf_fini(&a->flight);
    wr_buf_fini(&a->scratch);
    free(a->path);
    free(a->rbuf);
    free(a);
}

static void on_handle_closed(uv_handle_t *h)
{
    struct wr_agent *a = h->data;

    if (--a->handles == 0 && a->close_called)
        agent_free(a);
}

static void close_handles(struct wr_agent *a)
{
    if (a->pipe_open && !uv_is_closing((uv_handle_t *)&a->pipe))
        uv_close((uv_handle_t *)&a->pipe, on_handle_closed);
    count_socket(a, false);
    if (!uv_is_closing((uv_handle_t *)&a->idle_timer))
        uv_close((uv_handle_t *)&a->idle_timer, on_handle_closed);
    if (!uv_is_closing((uv_handle_t *)&a->idle))
        uv_close((uv_handle_t *)&a->idle, on_handle_closed);
    if (!uv_is_closing((uv_handle_t *)&a->retry))
        uv_close((uv_handle_t *)&a->retry, on_handle_closed);
}

static void fail_req(struct req *r, const struct wr_err *why)
{
    if (r->proc != NULL) {
        if (r->proc->cbs.on_started != NULL)
            r->proc->cbs.on_started(r->proc->ctx, 0, -1, why);
    } else if (r->cb != NULL) {
        r->cb(r->ctx, NULL, NULL, true, why);
    }
}

/* The connection is over: close the socket, give every pending request its error, and tell the
 * owner (unless it closed the agent itself). Processes get nothing more. Callbacks run here may
 * call wr_agent_close: `a` stays allocated until the handles' close callbacks. */
static void lose(struct wr_agent *a, const struct wr_err *why)
{
    struct req *list = NULL;

    if (a->state == AGENT_DEAD)
        return;
    a->state = AGENT_DEAD;
    a->connected = false;
    a->reading = false;
    a->dormant = a->waking = a->wake_wanted = false;
    close_handles(a);
    drop_fdq(a);
    /* Unhook every request first, so callbacks that cancel or send find nothing to touch. */
    for (size_t i = 0; i < AGENT_BUCKETS; i++) {
        while (a->reqs[i] != NULL) {
            struct req *r = a->reqs[i];
            a->reqs[i] = r->next;
            r->next = list;
            list = r;
        }
    }
    a->nreqs = 0;
    while (list != NULL) {
        struct req *r = list;
        list = r->next;
        fail_req(r, why);
        free(r->proc);
        free(r);
    }
    if (a->close_called)
        return;
    if (!a->ready_told) {
        a->ready_told = true;
        if (a->cfg.on_ready != NULL)
            a->cfg.on_ready(a, why, a->cfg.ctx);
    } else if (a->cfg.on_close != NULL) {
        a->cfg.on_close(a, why, a->cfg.ctx);
    }
}

static void proto_fail(struct wr_agent *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void proto_fail(struct wr_agent *a, const char *fmt, ...)
{
    struct wr_err e;
    char msg[400];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    wr_err_set(&e, WR_EPROTO, 0, "agent: warren-init sent %s", msg);
    lose(a, &e);
}

/* A failure found inside a call from the owner: reported from the idle callback, so no
 * callback runs inside the owner's call. */
static void defer_loss(struct wr_agent *a, int uverr, const char *what)
{
    if (a->has_deferred || a->state == AGENT_DEAD)
        return;
    wr_err_set(&a->deferred, WR_ESYS, -uverr, "agent: %s", what);
    a->has_deferred = true;
    a->connected = false;
    (void)uv_idle_start(&a->idle, on_idle);
}

/* ---- writing --------------------------------------------------------------------------------- */

size_t wr_agent_pending(const struct wr_agent *a)
{
    size_t n = a->out.len;

    /* stdin waiting for window credit counts too: it is queued for the sandbox all the same */
    for (size_t i = 0; i < AGENT_BUCKETS; i++)
        for (const struct proc *pr = a->procs[i]; pr != NULL; pr = pr->next)
            n += pr->stdin_wait.len;

    if (a->writing)
        n += uv_stream_get_write_queue_size((const uv_stream_t *)&a->pipe);
    return n;
}

static void flush(struct wr_agent *a);
static void wake(struct wr_agent *a);

static void on_retry(uv_timer_t *t)
{
    flush(t->data);
}

/* Send the frames from the start of `out` up to the next fdpass with the first one's fds, by
 * sendmsg on the socket itself (libuv has nothing in flight: a->writing is false). Returns 1
 * when something went (the rest follows through libuv), 0 when the socket is full (a retry is
 * armed), -1 when the connection is lost. */
static int send_fds(struct wr_agent *a)
{
    struct fdpass *f = a->fdq;
    size_t len = f->next != NULL ? f->next->at : a->out.len;
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(WR_SPAWN_FDS_MAX * sizeof(int))];
    } ctl = {0};
    struct iovec iov = {.iov_base = a->out.data, .iov_len = len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    struct cmsghdr *cm;
    uv_os_fd_t fd;
    ssize_t w;

    if (uv_fileno((uv_handle_t *)&a->pipe, &fd) < 0) {
        defer_loss(a, UV_EBADF, "write");
        return -1;
    }
    mh.msg_control = ctl.buf;
    mh.msg_controllen = CMSG_SPACE(f->n * sizeof(int));
    cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(f->n * sizeof(int));
    memcpy(CMSG_DATA(cm), f->fds, f->n * sizeof(int));
    do
        w = sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        (void)uv_timer_start(&a->retry, on_retry, 1, 0);
        return 0;
    }
    if (w < 0) {
        defer_loss(a, -errno, "write");
        return -1;
    }
    a->fdq = f->next;
    if (a->fdq == NULL)
        a->fdq_tail = &a->fdq;
    for (unsigned i = 0; i < f->n; i++)
        (void)close(f->fds[i]);
    free(f);
    wr_buf_consume(&a->out, (size_t)w);
    for (struct fdpass *g = a->fdq; g != NULL; g = g->next)
        g->at -= (size_t)w;
    return 1;
}

/* Hand the queued frames to libuv, one uv_write at a time: frames queued meanwhile are
 * coalesced into the next write, up to a frame that carries fds (send_fds sends it). */
static void flush(struct wr_agent *a)
{
    struct wr_buf t;
    uv_buf_t b;
    size_t upto;
    int rc;

    if (a->dormant && a->out.len > 0 && a->building == NULL) {
        wake(a);
        return;
    }
    if (!a->connected || a->writing || a->building != NULL || a->out.len == 0)
        return;
    if (a->fdq != NULL && a->fdq->at == 0 && (send_fds(a) <= 0 || a->out.len == 0))
        return;
    upto = a->fdq != NULL ? a->fdq->at : a->out.len;
    if (upto == a->out.len) {
        t = a->flight;
        a->flight = a->out;
        a->out = t;
        a->out.len = 0;
    } else {
        a->flight.len = 0;
        wr_buf_append(&a->flight, a->out.data, upto);
        wr_buf_consume(&a->out, upto);
        for (struct fdpass *g = a->fdq; g != NULL; g = g->next)
            g->at -= upto;
    }
    b = uv_buf_init((char *)a->flight.data, (unsigned)a->flight.len);
    rc = uv_write(&a->wreq, (uv_stream_t *)&a->pipe, &b, 1, on_write);
    if (rc < 0) {
        a->flight.len = 0;
        defer_loss(a, rc, "write");
        return;
    }
    a->writing = true;
}

static void queued(struct wr_agent *a)
{
    flush(a);
    if (wr_agent_pending(a) >= WR_AGENT_HIGH_WATER)
        a->above_high = true;
}

static void on_write(uv_write_t *wr, int status)
{
    struct wr_agent *a = wr->data;

    a->writing = false;
    a->flight.len = 0;
    if (a->flight.cap > WR_AGENT_HIGH_WATER)
        wr_buf_fini(&a->flight); /* do not keep a burst's memory */
    if (a->state == AGENT_DEAD)
        return; /* UV_ECANCELED from uv_close, or lost meanwhile */
    if (status < 0) {
        struct wr_err e;
        wr_err_set(&e, WR_ESYS, -status, "agent: write");
        lose(a, &e);
        return;
    }
    flush(a);
    note_activity(a);
    if (a->above_high && wr_agent_pending(a) < WR_AGENT_LOW_WATER) {
        a->above_high = false;
        if (a->on_drain != NULL)
            a->on_drain(a, a->drain_ctx);
    }
}

void wr_agent_on_drain(struct wr_agent *a, void (*cb)(struct wr_agent *a, void *ctx), void *ctx)
{
    a->on_drain = cb;
    a->drain_ctx = ctx;
}

/* Frames may be queued: the connection is up (or dormant, or waking: they go after HELLO). */
static bool can_send(const struct wr_agent *a)
{
    return ((a->state == AGENT_READY && (a->connected || a->dormant)) || a->waking) &&
           a->building == NULL;
}

static void send_ack(struct wr_agent *a, uint32_t proc_id, size_t bytes)
{
    size_t start;

    if (!can_send(a))
        return;
    start = wr_msg_begin(&a->out, WR_MSG_ACK, 0, proc_id);
    wr_msg_put_u64(&a->out, WR_TAG_BYTES, bytes);
    (void)wr_msg_end(&a->out, start);
    queued(a);
}

static void send_raw(struct wr_agent *a, uint16_t type, uint32_t id, const uint8_t *p, size_t n)
{
    while (n > 0) {
        size_t k = n < WR_CHUNK_SIZE ? n : WR_CHUNK_SIZE;
        wr_frame_raw(&a->out, type, 0, id, p, k);
        p += k;
        n -= k;
    }
    queued(a);
}

/* ---- reading --------------------------------------------------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct wr_agent *a = h->data;

    if (a->rbuf == NULL)
        a->rbuf = xmalloc(AGENT_READ_SIZE);
    *buf = uv_buf_init((char *)a->rbuf, AGENT_READ_SIZE);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void start_reading(struct wr_agent *a)
{
    int rc;

    if (!a->connected || a->reading || a->paused || a->state == AGENT_DEAD)
        return;
    rc = uv_read_start((uv_stream_t *)&a->pipe, on_alloc, on_read);
    if (rc < 0) {
        defer_loss(a, rc, "read");
        return;
    }
    a->reading = true;
}

static void stop_reading(struct wr_agent *a)
{
    if (!a->reading)
        return;
    (void)uv_read_stop((uv_stream_t *)&a->pipe);
    a->reading = false;
}

/* Decode an ERROR into *e. The message was written by the sandbox: control bytes are replaced
 * so it cannot forge log lines, and it is only ever an argument, never a format. */
static int decode_error(const struct wr_frame_hdr *h, const uint8_t *p, struct wr_err *e,
                        struct wr_err *perr)
{
    char msg[400];
    int errnum;

    if (wr_error_decode(p, h->len, &errnum, msg, sizeof(msg), perr) < 0)
        return -1;
    for (char *c = msg; *c != '\0'; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    /* EPROTO: the request did not decode (docs/design/protocol.md), the daemon's mistake or
     * the caller's input; other errnos as util/err.h classifies them. */
    wr_err_set(e, errnum == EPROTO ? WR_EINVAL : wr_err_kind_of_errno(errnum), 0, "warren-init: %s",
               msg[0] != '\0' ? msg : strerror(errnum));
    e->sys_errno = errnum;
    return 0;
}

static int check_tlv(const uint8_t *p, size_t n)
{
    struct wr_tlv_iter it;
    struct wr_field f;
    int rc;

    wr_tlv_iter_init(&it, p, n);
    while ((rc = wr_tlv_next(&it, &f)) == 1)
        ;
    return rc;
}

/* Where a reply of `type` stands in request r's conversation: 1 final, 0 intermediate, -1 not
 * allowed (a protocol violation). Updates r's progress. */
static int classify(struct req *r, uint16_t type)
{
    if (type == WR_MSG_ERROR)
        return 1;
    switch (r->type) {
    case WR_MSG_LIST:
    case WR_MSG_FILE_LIST:
        if (type == WR_MSG_OK)
            return 1;
        if (type != (r->type == WR_MSG_LIST ? WR_MSG_PROC : WR_MSG_STAT) ||
            ++r->items > AGENT_MAX_ITEMS)
            return -1;
        return 0;
    case WR_MSG_SERVICE_LIST:
        if (type == WR_MSG_OK)
            return 1;
        if (type != WR_MSG_SERVICE_INFO || ++r->items > WR_SERVICES_MAX)
            return -1;
        return 0;
    case WR_MSG_FILE_STAT:
        return type == WR_MSG_STAT ? 1 : -1;
    case WR_MSG_FILE_READ:
        if (type == WR_MSG_STAT && !r->opened) {
            r->opened = true;
            return 0;
        }
        if (type == WR_MSG_DATA && r->opened)
            return 0;
        return type == WR_MSG_OK && r->opened ? 1 : -1;
    case WR_MSG_FILE_WRITE:
    case WR_MSG_FILE_WATCH:
        if (type == WR_MSG_WATCH_EVENT && r->type == WR_MSG_FILE_WATCH && r->opened)
            return 0;
        if (type != WR_MSG_OK)
            return -1;
        if (!r->opened) {
            r->opened = true;
            return 0;
        }
        return 1;
    default:
        return type == WR_MSG_OK ? 1 : -1;
    }
}

/* Decode a reply's payload with the typed decoder, so the owner only sees frames that decode.
 * Returns 0, or -1 with *e set. */
static int check_reply(const struct wr_frame_hdr *h, const uint8_t *p, struct wr_err *e)
{
    switch (h->type) {
    case WR_MSG_PROC: {
        struct wr_proc_info pi;
        if (wr_proc_info_decode(p, h->len, &pi, e) < 0)
            return -1;
        wr_proc_info_fini(&pi);
        return 0;
    }
    case WR_MSG_STAT: {
        struct wr_stat st;
        if (wr_stat_decode(p, h->len, &st, e) < 0)
            return -1;
        wr_stat_fini(&st);
        return 0;
    }
    case WR_MSG_WATCH_EVENT: {
        struct wr_watch_event ev;
        if (wr_watch_event_decode(p, h->len, &ev, e) < 0)
            return -1;
        wr_watch_event_fini(&ev);
        return 0;
    }
    case WR_MSG_SERVICE_INFO: {
        struct wr_service_info si;
        if (wr_service_info_decode(p, h->len, &si, e) < 0)
            return -1;
        wr_service_info_fini(&si);
        return 0;
    }
    case WR_MSG_OK:
        if (check_tlv(p, h->len) < 0)
            return wr_err_set(e, WR_EPROTO, 0, "ok: field runs past the payload");
        return 0;
    default:
        return 0; /* DATA: raw bytes */
    }
}

/* SPAWN's or ATTACH's answer (an ERROR already decoded into *e): register the process, then
 * tell the owner. */
static void on_started_reply(struct wr_agent *a, struct req *r, const struct wr_frame_hdr *h,
                             const uint8_t *p, const struct wr_err *e)
{
    struct proc *pr = r->proc;
    int64_t pid = -1;

    if (h->type == WR_MSG_ERROR) {
        req_remove(a, r);
        free(r);
        if (pr->cbs.on_started != NULL)
            pr->cbs.on_started(pr->ctx, 0, -1, e);
        wr_buf_fini(&pr->stdin_wait);
        free(pr);
        return;
    }
    if (r->type == WR_MSG_SPAWN) {
        uint64_t id, v;
        if (wr_msg_get_u64(p, h->len, WR_TAG_PROC_ID, &id) < 0 || id == 0 || id > UINT32_MAX ||
            wr_msg_get_u64(p, h->len, WR_TAG_PID, &v) < 0 || v > INT32_MAX)
            return proto_fail(a, "a SPAWN reply without a valid PROC_ID and PID (id %u)", h->id);
        if (proc_find(a, (uint32_t)id) != NULL)
            return proto_fail(a, "proc id %u twice", (unsigned)id);
        pr->id = (uint32_t)id;
        pid = (int64_t)v;
    } else {
        /* ATTACH on a process this connection already routes: the new callbacks take over. */
        struct proc *old = proc_find(a, pr->id);
        if (old != NULL) {
            proc_remove(a, old);
            free(old);
        }
    }
    req_remove(a, r);
    r->proc = NULL;
    free(r);
    pr->unacked = 0; /* a SPAWN starts, an ATTACH resets, the window */
    proc_add(a, pr);
    if (pr->cbs.on_started != NULL)
        pr->cbs.on_started(pr->ctx, pr->id, pid, NULL);
}

static void on_reply(struct wr_agent *a, const struct wr_frame_hdr *h, const uint8_t *p)
{
    struct req *r = req_find(a, h->id);
    struct wr_err e;
    int kind;

    if (r == NULL)
        return; /* cancelled, finished, or never asked: nothing to route */
    kind = classify(r, h->type);
    if (kind < 0)
        return proto_fail(a, "reply type %u to a request of type %u (id %u)", h->type, r->type,
                          h->id);
    if (h->type == WR_MSG_ERROR) {
        struct wr_err perr;
        if (decode_error(h, p, &e, &perr) < 0)
            return proto_fail(a, "a bad ERROR (id %u): %s", h->id, perr.msg);
    } else if (check_reply(h, p, &e) < 0) {
        return proto_fail(a, "a bad reply (id %u): %s", h->id, e.msg);
    }
    if (r->proc != NULL)
        return on_started_reply(a, r, h, p, &e);
    if (kind == 0) {
        /* r may be cancelled inside the callback: not touched afterwards. */
        if (r->cb != NULL)
            r->cb(r->ctx, h, p, false, NULL);
        return;
    }
    req_remove(a, r);
    if (r->cb != NULL) {
        if (h->type == WR_MSG_ERROR)
            r->cb(r->ctx, NULL, NULL, true, &e);
        else
            r->cb(r->ctx, h, p, true, NULL);
    }
    free(r);
}

static void on_output(struct wr_agent *a, const struct wr_frame_hdr *h, const uint8_t *p)
{
    struct proc *pr = proc_find(a, h->id);

    if (pr == NULL)
        return;
    if (h->flags != WR_FLAG_STDOUT && h->flags != WR_FLAG_STDERR)
        return proto_fail(a, "OUTPUT with stream flags %#x (proc %u)", h->flags, h->id);
    /* The window bounds what a hostile init can make the daemon hold per process. */
    if (h->len > WR_OUTPUT_WINDOW - pr->unacked)
        return proto_fail(a, "OUTPUT beyond the window (proc %u: %zu + %u bytes unacknowledged)",
                          h->id, pr->unacked, h->len);
    pr->unacked += h->len;
    if (pr->detached || pr->cbs.on_output == NULL) {
        pr->unacked -= h->len;
        send_ack(a, pr->id, h->len);
        return;
    }
    if (h->len > 0)
        pr->cbs.on_output(pr->ctx, pr->id, h->flags, p, h->len);
}

static void on_exit_frame(struct wr_agent *a, const struct wr_frame_hdr *h, const uint8_t *p)
{
    struct proc *pr = proc_find(a, h->id);
    struct wr_exit ex;
    struct wr_err e;

    if (pr == NULL)
        return;
    if (wr_exit_decode(p, h->len, &ex, &e) < 0)
        return proto_fail(a, "a bad EXIT (proc %u): %s", h->id, e.msg);
    proc_remove(a, pr);
    if (!pr->detached && pr->cbs.on_exit != NULL)
        pr->cbs.on_exit(pr->ctx, pr->id, &ex);
    wr_buf_fini(&pr->stdin_wait);
    free(pr);
}

static void stdin_flush(struct wr_agent *a, struct proc *pr);

/* warren-init wrote (or dropped) stdin bytes: credit back, send what waits. */
static void on_stdin_ack(struct wr_agent *a, const struct wr_frame_hdr *h, const uint8_t *p)
{
    struct proc *pr = proc_find(a, h->id);
    uint64_t n;

    if (pr == NULL)
        return;
    if (wr_msg_get_u64(p, h->len, WR_TAG_BYTES, &n) < 0)
        return proto_fail(a, "a bad STDIN_ACK (proc %u)", h->id);
    /* More than this connection sent: bytes an earlier connection sent (a process listed after
     * an adoption or a gvisor restore); the credit is this connection's only. */
    if (n > pr->stdin_inflight)
        n = pr->stdin_inflight;
    pr->stdin_inflight -= (size_t)n;
    stdin_flush(a, pr);
}

/* The first frame on a connection made by path: init's HELLO. */
static void on_hello(struct wr_agent *a, const struct wr_frame_hdr *h, const uint8_t *p)
{
    uint64_t version;
    struct wr_err e;

    if (h->type == WR_MSG_ERROR) {
        if (decode_error(h, p, &e, &e) < 0)
            return proto_fail(a, "a bad ERROR to HELLO: %s", e.msg);
        wr_err_wrap(&e, "agent: hello");
        return lose(a, &e);
    }
    if (h->type != WR_MSG_HELLO)
        return proto_fail(a, "type %u before HELLO", h->type);
    if (wr_msg_get_u64(p, h->len, WR_TAG_VERSION, &version) < 0)
        return proto_fail(a, "a HELLO without a valid VERSION");
    if (version != WR_PROTO_VERSION) {
        struct wr_buf b;
        uv_buf_t ub;

        /* Best effort, as the protocol asks: the connection is closed right after. */
        wr_buf_init(&b);
        wr_msg_error(&b, h->id, EPROTONOSUPPORT, "protocol version not supported");
        ub = uv_buf_init((char *)b.data, (unsigned)b.len);
        if (!a->writing && a->out.len == 0)
            (void)uv_try_write((uv_stream_t *)&a->pipe, &ub, 1);
        wr_buf_fini(&b);
        wr_err_set(&e, WR_EUNSUPPORTED, 0, "agent: warren-init speaks protocol %llu, not %u",
                   (unsigned long long)version, WR_PROTO_VERSION);
        return lose(a, &e);
    }
    a->state = AGENT_READY;
    note_activity(a);
    if (a->waking) { /* a dormant agent woken by a request: the owner saw it ready all along */
        a->waking = false;
        return;
    }
    a->ready_told = true;
    if (a->cfg.on_ready != NULL)
        a->cfg.on_ready(a, NULL, a->cfg.ctx);
}

static void on_frame(struct wr_agent *a, const struct wr_frame_hdr *h, const uint8_t *p)
{
    if (a->state == AGENT_HELLO)
        return on_hello(a, h, p);
    switch (h->type) {
    case WR_MSG_OK:
    case WR_MSG_ERROR:
    case WR_MSG_PROC:
    case WR_MSG_STAT:
    case WR_MSG_DATA:
    case WR_MSG_WATCH_EVENT:
    case WR_MSG_SERVICE_INFO:
        on_reply(a, h, p);
        break;
    case WR_MSG_OUTPUT:
        on_output(a, h, p);
        break;
    case WR_MSG_EXIT:
        on_exit_frame(a, h, p);
        break;
    case WR_MSG_STDIN_ACK:
        on_stdin_ack(a, h, p);
        break;
    default:
        break; /* not something init sends to a client: no state to touch, dropped */
    }
}

/* Route every complete frame received, until paused, lost or closed (callbacks may do any). */
static void dispatch(struct wr_agent *a)
{
    a->dispatching = true;
    while (a->state != AGENT_DEAD && !a->paused) {
        struct wr_frame_hdr h;
        const uint8_t *p = NULL;
        struct wr_err e;
        int rc = wr_reader_next(&a->rd, &h, &p, &e);

        if (rc == 0)
            break;
        if (rc < 0) {
            proto_fail(a, "a bad frame: %s", e.msg);
            break;
        }
        on_frame(a, &h, p);
    }
    a->dispatching = false;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct wr_agent *a = s->data;
    struct wr_err e;

    if (a->state == AGENT_DEAD || n == 0)
        return;
    if (n > 0) {
        wr_reader_feed(&a->rd, buf->base, (size_t)n);
        dispatch(a);
        if (a->paused)
            stop_reading(a);
        return;
    }
    if (n == UV_EOF) {
        wr_err_set(&e, WR_ESYS, 0, "agent: warren-init closed the connection");
        e.sys_errno = ECONNRESET;
    } else {
        wr_err_set(&e, WR_ESYS, (int)-n, "agent: read");
    }
    lose(a, &e);
}

static void on_idle(uv_idle_t *h)
{
    struct wr_agent *a = h->data;

    (void)uv_idle_stop(h);
    if (a->state == AGENT_DEAD)
        return;
    if (a->has_deferred) {
        struct wr_err e = a->deferred;
        a->has_deferred = false;
        lose(a, &e);
        return;
    }
    if (a->state == AGENT_READY && !a->ready_told) {
        a->ready_told = true;
        if (a->cfg.on_ready != NULL)
            a->cfg.on_ready(a, NULL, a->cfg.ctx);
        if (a->state == AGENT_DEAD)
            return;
        note_activity(a);
    }
    if (a->want_dispatch) {
        a->want_dispatch = false;
        dispatch(a);
    }
    start_reading(a);
}

/* Out of fds or memory for now: a request that woke a dormant agent fails, the sandbox is
 * fine. Anything else (nobody listens) is the connection lost. */
static bool transient(int uverr)
{
    return uverr == UV_EMFILE || uverr == UV_ENFILE || uverr == UV_ENOMEM || uverr == UV_EAGAIN ||
           uverr == UV_ENOBUFS;
}

static void on_pipe_dormant(uv_handle_t *h);

/* The socket goes; the agent stays ready and connects again on the next request. */
static void go_dormant(struct wr_agent *a)
{
    stop_reading(a);
    a->connected = false;
    a->dormant = true;
    uv_close((uv_handle_t *)&a->pipe, on_pipe_dormant);
    count_socket(a, false);
    /* What a connection needs in memory goes with it: tens of thousands wait like this. */
    wr_reader_fini(&a->rd);
    wr_reader_init(&a->rd);
    wr_buf_fini(&a->out);
    wr_buf_fini(&a->flight);
    wr_buf_fini(&a->scratch);
    free(a->rbuf);
    a->rbuf = NULL;
}

/* A wake that could not connect for want of resources: its requests fail, and the agent sleeps
 * again. */
static void wake_failed(struct wr_agent *a, const struct wr_err *why)
{
    a->waking = false;
    a->state = AGENT_READY;
    drop_fdq(a);
    a->out.len = 0;
    for (size_t i = 0; i < AGENT_BUCKETS; i++) {
        while (a->reqs[i] != NULL) {
            struct req *r = a->reqs[i];
            a->reqs[i] = r->next;
            a->nreqs--;
            fail_req(r, why);
            free(r->proc);
            free(r);
            if (a->state == AGENT_DEAD) /* the owner closed it from the callback */
                return;
        }
    }
    go_dormant(a);
}

static void on_connect(uv_connect_t *req, int status)
{
    struct wr_agent *a = req->data;
    struct wr_buf hello;
    struct wr_err e;
    size_t start;

    if (a->state == AGENT_DEAD)
        return; /* closed meanwhile: UV_ECANCELED */
    if (status < 0) {
        wr_err_set(&e, WR_ESYS, -status, "agent: connect `%s`", a->path);
        if (a->waking && transient(status))
            return wake_failed(a, &e);
        return lose(a, &e);
    }
    a->connected = true;
    a->state = AGENT_HELLO;
    /* HELLO goes first, before what was queued while the agent woke (fds move with it). */
    wr_buf_init(&hello);
    start = wr_msg_begin(&hello, WR_MSG_HELLO, 0, 0);
    wr_msg_put_u64(&hello, WR_TAG_VERSION, WR_PROTO_VERSION);
    (void)wr_msg_end(&hello, start);
    for (struct fdpass *g = a->fdq; g != NULL; g = g->next)
        g->at += hello.len;
    wr_buf_append(&hello, a->out.data, a->out.len);
    wr_buf_fini(&a->out);
    a->out = hello;
    queued(a);
    start_reading(a);
}

static void start_connect(struct wr_agent *a)
{
    (void)uv_pipe_init(a->cfg.loop, &a->pipe, 0);
    a->pipe.data = a;
    a->pipe_open = true;
    a->handles++;
    count_socket(a, true);
    a->state = AGENT_CONNECTING;
    uv_pipe_connect(&a->connect, &a->pipe, a->path, on_connect);
}

static void wake(struct wr_agent *a)
{
    a->dormant = false;
    a->waking = true;
    if (a->pipe_open) /* the dormant socket is still closing: on_pipe_dormant connects */
        a->wake_wanted = true;
    else
        start_connect(a);
}

static void on_pipe_dormant(uv_handle_t *h)
{
    struct wr_agent *a = h->data;

    a->pipe_open = false;
    if (a->state != AGENT_DEAD && a->wake_wanted) {
        a->wake_wanted = false;
        start_connect(a);
    }
    on_handle_closed(h);
}

/* Nothing in flight, nothing routed, nothing queued: the socket can go. */
static bool quiet(const struct wr_agent *a)
{
    return a->state == AGENT_READY && a->connected && !a->waking && a->nreqs == 0 &&
           a->nprocs == 0 && !a->writing && a->out.len == 0 && a->fdq == NULL &&
           a->building == NULL && !a->paused && !a->dispatching && !a->has_deferred &&
           !a->want_dispatch && a->rd.in.len == a->rd.off;
}

static void on_idle_timer(uv_timer_t *t)
{
    struct wr_agent *a = t->data;
    uint64_t quiet_for = uv_now(a->cfg.loop) - a->last_active;

    if (!quiet(a))
        return; /* armed again by the activity that ends it */
    if (quiet_for < a->cfg.idle_ms && (a->cfg.crowd == 0 || n_sockets <= a->cfg.crowd)) {
        (void)uv_timer_start(&a->idle_timer, on_idle_timer, a->cfg.idle_ms - quiet_for, 0);
        return;
    }
    go_dormant(a);
}

static void note_activity(struct wr_agent *a)
{
    if (a->cfg.idle_ms == 0 || a->path == NULL || a->state == AGENT_DEAD)
        return;
    a->last_active = uv_now(a->cfg.loop);
    if (!uv_is_active((uv_handle_t *)&a->idle_timer))
        (void)uv_timer_start(&a->idle_timer, on_idle_timer,
                             a->cfg.crowd != 0 && n_sockets > a->cfg.crowd ? 0 : a->cfg.idle_ms, 0);
}

/* ---- public ---------------------------------------------------------------------------------- */

int wr_agent_open(const struct wr_agent_config *cfg, struct wr_agent **out, struct wr_err *err)
{
    struct wr_agent *a;
    int rc;

    if (cfg->loop == NULL)
        return wr_err_set(err, WR_EINVAL, 0, "agent: no loop");
    if (cfg->path == NULL && cfg->fd < 0)
        return wr_err_set(err, WR_EINVAL, 0, "agent: neither a socket nor a path");
    if (cfg->path == NULL && cfg->idle_ms != 0)
        return wr_err_set(err, WR_EINVAL, 0, "agent: dormancy needs a path to connect again");
    if (cfg->path != NULL && strlen(cfg->path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return wr_err_set(err, WR_EINVAL, 0, "agent: socket path `%s` too long", cfg->path);

    a = xcalloc(1, sizeof(*a));
    a->cfg = *cfg;
    a->cfg.path = NULL;
    a->next_id = 1;
    wr_reader_init(&a->rd);
    wr_buf_init(&a->out);
    wr_buf_init(&a->flight);
    wr_buf_init(&a->scratch);
    (void)uv_idle_init(cfg->loop, &a->idle);
    (void)uv_timer_init(cfg->loop, &a->retry);
    (void)uv_timer_init(cfg->loop, &a->idle_timer);
    a->idle.data = a->connect.data = a->wreq.data = a->retry.data = a->idle_timer.data = a;
    a->handles = 3;
    a->fdq_tail = &a->fdq;
    if (cfg->path != NULL)
        a->path = xstrdup(cfg->path);

    if (cfg->fd < 0) {
        start_connect(a);
    } else {
        (void)uv_pipe_init(cfg->loop, &a->pipe, 0);
        a->pipe.data = a;
        a->pipe_open = true;
        a->handles++;
        count_socket(a, true);
        rc = uv_pipe_open(&a->pipe, cfg->fd);
        if (rc < 0) {
            (void)close(cfg->fd);
            a->state = AGENT_DEAD;
            a->close_called = true; /* freed by the close callbacks */
            close_handles(a);
            return wr_err_set(err, WR_ESYS, -rc, "agent: open fd %d", cfg->fd);
        }
        a->connected = true;
        a->state = AGENT_READY;
        start_reading(a);
        (void)uv_idle_start(&a->idle, on_idle); /* on_ready, outside this call */
    }
    *out = a;
    return 0;
}

void wr_agent_close(struct wr_agent *a)
{
    struct wr_err e;

    if (a == NULL || a->close_called)
        return;
    a->close_called = true;
    wr_err_set(&e, WR_ESYS, 0, "agent: closed");
    e.sys_errno = ECANCELED;
    lose(a, &e);
    if (a->handles == 0)
        agent_free(a);
}

bool wr_agent_is_ready(const struct wr_agent *a)
{
    return a->state == AGENT_READY || a->waking;
}

bool wr_agent_is_dormant(const struct wr_agent *a)
{
    return a->dormant;
}

void wr_agent_doze(struct wr_agent *a)
{
    if (a->cfg.idle_ms == 0 || a->path == NULL || a->state == AGENT_DEAD)
        return;
    a->last_active = uv_now(a->cfg.loop) - a->cfg.idle_ms;
    (void)uv_timer_start(&a->idle_timer, on_idle_timer, 0, 0);
}

int wr_agent_spawn(struct wr_agent *a, const struct wr_spawn *sp,
                   const struct wr_agent_proc_cbs *cbs, void *ctx, struct wr_err *err)
{
    return wr_agent_spawn_fds(a, sp, NULL, cbs, ctx, err);
}

int wr_agent_spawn_fds(struct wr_agent *a, const struct wr_spawn *sp, const int *fds,
                       const struct wr_agent_proc_cbs *cbs, void *ctx, struct wr_err *err)
{
    unsigned nfds = fds != NULL ? sp->nfds : 0;
    struct fdpass *f = NULL;
    uint32_t id;
    size_t len;
    struct req *r;

    if (nfds > WR_SPAWN_FDS_MAX || (fds == NULL && sp->nfds != 0)) {
        wr_err_set(err, WR_EINVAL, 0, "agent: spawn: %u fds", sp->nfds);
        goto fail;
    }
    if (!can_send(a)) {
        wr_err_set(err, WR_ECONFLICT, ENOTCONN, "agent: spawn");
        goto fail;
    }
    id = alloc_id(a);
    len = a->out.len;
    wr_spawn_encode(&a->out, id, sp);
    if (a->out.len == len) {
        wr_err_set(err, WR_ETOOBIG, 0, "agent: spawn: argv and env exceed %u bytes",
                   WR_FRAME_MAX_PAYLOAD);
        goto fail;
    }
    if (nfds > 0) {
        f = xcalloc(1, sizeof(*f));
        f->at = len;
        f->n = nfds;
        memcpy(f->fds, fds, nfds * sizeof(int));
        *a->fdq_tail = f;
        a->fdq_tail = &f->next;
    }
    r = req_add(a, id, WR_MSG_SPAWN);
    r->proc = xcalloc(1, sizeof(*r->proc));
    r->proc->cbs = *cbs;
    r->proc->ctx = ctx;
    queued(a);
    return 0;
fail:
    for (unsigned i = 0; i < nfds; i++)
        (void)close(fds[i]);
    return -1;
}

int wr_agent_attach(struct wr_agent *a, uint32_t proc_id, const struct wr_agent_proc_cbs *cbs,
                    void *ctx, struct wr_err *err)
{
    uint32_t id;
    size_t start;
    struct req *r;

    if (!can_send(a))
        return wr_err_set(err, WR_ECONFLICT, ENOTCONN, "agent: attach");
    id = alloc_id(a);
    start = wr_msg_begin(&a->out, WR_MSG_ATTACH, 0, id);
    wr_msg_put_u64(&a->out, WR_TAG_PROC_ID, proc_id);
    (void)wr_msg_end(&a->out, start);
    r = req_add(a, id, WR_MSG_ATTACH);
    r->proc = xcalloc(1, sizeof(*r->proc));
    r->proc->id = proc_id;
    r->proc->cbs = *cbs;
    r->proc->ctx = ctx;
    queued(a);
    return 0;
}

void wr_agent_detach(struct wr_agent *a, uint32_t proc_id)
{
    struct proc *pr = proc_find(a, proc_id);

    if (pr == NULL || pr->detached)
        return;
    pr->detached = true;
    /* Credit the owner will now never return. */
    if (pr->unacked > 0) {
        send_ack(a, pr->id, pr->unacked);
        pr->unacked = 0;
    }
}

void wr_agent_ack(struct wr_agent *a, uint32_t proc_id, size_t bytes)
{
    struct proc *pr = proc_find(a, proc_id);

    if (pr == NULL || pr->detached)
        return;
    if (bytes > pr->unacked)
        bytes = pr->unacked;
    if (bytes == 0)
        return;
    pr->unacked -= bytes;
    send_ack(a, proc_id, bytes);
}

static uint32_t send_stdin_close(struct wr_agent *a, uint32_t proc_id, wr_agent_reply_fn cb,
                                 void *ctx, struct wr_err *err)
{
    size_t start;
    struct wr_buf *b = wr_agent_begin(a, WR_MSG_STDIN_CLOSE, &start);

    wr_msg_put_u64(b, WR_TAG_PROC_ID, proc_id);
    return wr_agent_end(a, start, cb, ctx, err);
}

/* Send what the window allows of a process's waiting stdin, and a deferred STDIN_CLOSE once
 * nothing waits any more. */
static void stdin_flush(struct wr_agent *a, struct proc *pr)
{
    struct wr_err err;

    while (pr->stdin_wait.len > 0 && pr->stdin_inflight < WR_STDIN_WINDOW && can_send(a)) {
        size_t n = WR_STDIN_WINDOW - pr->stdin_inflight;
        if (n > pr->stdin_wait.len)
            n = pr->stdin_wait.len;
        if (n > WR_CHUNK_SIZE)
            n = WR_CHUNK_SIZE;
        send_raw(a, WR_MSG_STDIN, pr->id, pr->stdin_wait.data, n);
        pr->stdin_inflight += n;
        wr_buf_consume(&pr->stdin_wait, n);
    }
    if (pr->close_wanted && pr->stdin_wait.len == 0 && can_send(a)) {
        pr->close_wanted = false;
        if (send_stdin_close(a, pr->id, pr->close_cb, pr->close_ctx, &err) == 0 &&
            pr->close_cb != NULL)
            pr->close_cb(pr->close_ctx, NULL, NULL, true, &err);
    }
}

int wr_agent_stdin_close(struct wr_agent *a, uint32_t proc_id, wr_agent_reply_fn cb, void *ctx,
                         struct wr_err *err)
{
    struct proc *pr = proc_find(a, proc_id);

    if (!can_send(a))
        return wr_err_set(err, WR_ECONFLICT, 0, "agent: not connected");
    if (pr != NULL && (pr->stdin_wait.len > 0 || pr->close_wanted)) {
        pr->close_wanted = true;
        pr->close_cb = cb;
        pr->close_ctx = ctx;
        return 0;
    }
    return send_stdin_close(a, proc_id, cb, ctx, err) == 0 ? -1 : 0;
}

void wr_agent_stdin(struct wr_agent *a, uint32_t proc_id, const void *p, size_t n)
{
    struct proc *pr = proc_find(a, proc_id);

    if (!can_send(a))
        return;
    if (pr == NULL) {
        /* Not ours to account for (no events registered): send as is. */
        send_raw(a, WR_MSG_STDIN, proc_id, p, n);
        return;
    }
    wr_buf_append(&pr->stdin_wait, p, n);
    stdin_flush(a, pr);
}

struct wr_buf *wr_agent_begin(struct wr_agent *a, uint16_t type, size_t *start)
{
    if (!can_send(a)) {
        /* Built and thrown away: wr_agent_end reports "not connected". */
        a->scratch.len = 0;
        a->building = &a->scratch;
        *start = wr_msg_begin(&a->scratch, type, 0, 0);
        return &a->scratch;
    }
    a->building = &a->out;
    a->build_type = type;
    a->build_id = alloc_id(a);
    *start = wr_msg_begin(&a->out, type, 0, a->build_id);
    return &a->out;
}

uint32_t wr_agent_end(struct wr_agent *a, size_t start, wr_agent_reply_fn cb, void *ctx,
                      struct wr_err *err)
{
    struct wr_buf *b = a->building;
    struct req *r;

    a->building = NULL;
    if (b == NULL) {
        wr_err_set(err, WR_EINTERNAL, 0, "agent: wr_agent_end without wr_agent_begin");
        return 0;
    }
    if (b == &a->scratch || !wr_agent_is_ready(a)) {
        if (b == &a->out)
            a->out.len = start;
        a->scratch.len = 0;
        wr_err_set(err, WR_ECONFLICT, ENOTCONN, "agent");
        return 0;
    }
    if (wr_msg_end(b, start) < 0) {
        wr_err_set(err, WR_ETOOBIG, 0, "agent: request larger than %u bytes", WR_FRAME_MAX_PAYLOAD);
        return 0;
    }
    r = req_add(a, a->build_id, a->build_type);
    r->cb = cb;
    r->ctx = ctx;
    queued(a);
    return r->id;
}

void wr_agent_data(struct wr_agent *a, uint32_t req_id, const void *p, size_t n)
{
    if (can_send(a) && req_find(a, req_id) != NULL)
        send_raw(a, WR_MSG_DATA, req_id, p, n);
}

void wr_agent_data_end(struct wr_agent *a, uint32_t req_id)
{
    size_t start;

    if (!can_send(a) || req_find(a, req_id) == NULL)
        return;
    start = wr_msg_begin(&a->out, WR_MSG_DATA_END, 0, req_id);
    (void)wr_msg_end(&a->out, start);
    queued(a);
}

void wr_agent_pause(struct wr_agent *a)
{
    if (a->state == AGENT_DEAD)
        return;
    a->paused = true;
    stop_reading(a);
}

void wr_agent_resume(struct wr_agent *a)
{
    if (a->state == AGENT_DEAD || !a->paused)
        return;
    a->paused = false;
    if (a->dispatching) {
        start_reading(a); /* the dispatch loop on the stack goes on with the buffered frames */
        return;
    }
    /* Frames already buffered are routed from the idle callback, not inside this call. */
    a->want_dispatch = true;
    (void)uv_idle_start(&a->idle, on_idle);
}

/* ---- services -------------------------------------------------------------------------------- */

/* A services request in flight: the owner's callback, and the SERVICE_INFO items so far. */
struct svc_call {
    void (*done)(void *ctx, const struct wr_err *err);
    void (*listed)(void *ctx, const struct wr_service_info *infos, size_t n,
                   const struct wr_err *err);
    void *ctx;
    bool already_ok; /* SERVICES_START: EALREADY is success */
    struct wr_service_info infos[WR_SERVICES_MAX];
    size_t n;
};

/* Every reply of a services request; the final one (or the connection's loss) ends it. */
static void on_svc_reply(void *ctx, const struct wr_frame_hdr *h, const uint8_t *p, bool final,
                         const struct wr_err *err)
{
    struct svc_call *sc = ctx;
    struct wr_err e;

    if (!final) {
        /* classify() allowed at most WR_SERVICES_MAX; check_reply() decoded it already */
        if (h->type == WR_MSG_SERVICE_INFO && sc->n < WR_SERVICES_MAX &&
            wr_service_info_decode(p, h->len, &sc->infos[sc->n], &e) == 0)
            sc->n++;
        return;
    }
    if (err != NULL && sc->already_ok && err->sys_errno == EALREADY)
        err = NULL;
    if (sc->listed != NULL)
        sc->listed(sc->ctx, err == NULL ? sc->infos : NULL, err == NULL ? sc->n : 0, err);
    else if (sc->done != NULL)
        sc->done(sc->ctx, err);
    for (size_t i = 0; i < sc->n; i++)
        wr_service_info_fini(&sc->infos[i]);
    free(sc);
}

int wr_agent_service_define(struct wr_agent *a, const struct wr_service *s, const int *fds,
                            void (*cb)(void *ctx, const struct wr_err *err), void *ctx,
                            struct wr_err *err)
{
    unsigned nfds = fds != NULL ? s->sp.nfds : 0;
    struct svc_call *sc;
    struct fdpass *f;
    uint32_t id;
    size_t len;
    struct req *r;

    if (nfds > WR_SPAWN_FDS_MAX || (fds == NULL && s->sp.nfds != 0)) {
        wr_err_set(err, WR_EINVAL, 0, "agent: service: %u fds", s->sp.nfds);
        goto fail;
    }
    if (!can_send(a)) {
        wr_err_set(err, WR_ECONFLICT, ENOTCONN, "agent: service");
        goto fail;
    }
    id = alloc_id(a);
    len = a->out.len;
    wr_service_encode(&a->out, id, s);
    if (a->out.len == len) {
        wr_err_set(err, WR_ETOOBIG, 0, "agent: service %s: larger than %u bytes", s->name,
                   WR_FRAME_MAX_PAYLOAD);
        goto fail;
    }
    if (nfds > 0) {
        f = xcalloc(1, sizeof(*f));
        f->at = len;
        f->n = nfds;
        memcpy(f->fds, fds, nfds * sizeof(int));
        *a->fdq_tail = f;
        a->fdq_tail = &f->next;
    }
    sc = xcalloc(1, sizeof(*sc));
    sc->done = cb;
    sc->ctx = ctx;
    r = req_add(a, id, WR_MSG_SERVICE);
    r->cb = on_svc_reply;
    r->ctx = sc;
    queued(a);
    return 0;
fail:
    for (unsigned i = 0; i < nfds; i++)
        (void)close(fds[i]);
    return -1;
}

/* A services request without fields (SERVICES_START, SERVICE_LIST) for sc. */
static int svc_request(struct wr_agent *a, uint16_t type, struct svc_call *sc, struct wr_err *err)
{
    size_t start;

    (void)wr_agent_begin(a, type, &start);
    if (wr_agent_end(a, start, on_svc_reply, sc, err) == 0) {
        free(sc);
        return -1;
    }
    return 0;
}

int wr_agent_services_start(struct wr_agent *a, void (*cb)(void *ctx, const struct wr_err *err),
                            void *ctx, struct wr_err *err)
{
    struct svc_call *sc = xcalloc(1, sizeof(*sc));

    sc->done = cb;
    sc->ctx = ctx;
    sc->already_ok = true;
    return svc_request(a, WR_MSG_SERVICES_START, sc, err);
}

int wr_agent_service_list(struct wr_agent *a,
                          void (*cb)(void *ctx, const struct wr_service_info *infos, size_t n,
                                     const struct wr_err *err),
                          void *ctx, struct wr_err *err)
{
    struct svc_call *sc = xcalloc(1, sizeof(*sc));

    sc->listed = cb;
    sc->ctx = ctx;
    return svc_request(a, WR_MSG_SERVICE_LIST, sc, err);
}
