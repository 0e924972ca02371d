/* SPDX-License-Identifier: Apache-2.0 */
/* Control connections: frame reassembly, the HELLO handshake, dispatch to processes and files,
 * the per-connection output queue and the two brakes on reading (a long output queue, a full
 * stdin queue of a process this connection feeds). */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../util/log.h"
#include "../util/xalloc.h"
#include "init.h"
#include "service.h"

static struct init_conn *conns;
static unsigned nconns;

bool init_quiesce_pending;

static void on_conn(struct init_fdw *w, uint32_t events);

void init_conn_new(int fd, bool primary)
{
    struct init_conn *c;

    if (nconns >= INIT_MAX_CONNS) {
        log_warn("too many connections; closing a new one");
        (void)close(fd);
        return;
    }
    c = xcalloc(1, sizeof(*c));
    c->w.fd = fd;
    c->w.cb = on_conn;
    c->w.owner = c;
    c->primary = primary;
    wr_reader_init(&c->rd);
    wr_buf_init(&c->out);
    c->next = conns;
    conns = c;
    nconns++;
    init_fdw_set(&c->w, EPOLLIN);
}

static void close_fds(struct init_conn *c)
{
    while (c->nfds > 0)
        (void)close(c->fds[--c->nfds]);
}

int init_conn_take_fds(struct init_conn *c, int *out, unsigned n)
{
    if (n > c->nfds)
        return -1;
    memcpy(out, c->fds, n * sizeof(int));
    memmove(c->fds, c->fds + n, (c->nfds - n) * sizeof(int));
    c->nfds -= n;
    return 0;
}

/* Keep the fds of an SCM_RIGHTS message for the frames they came with. */
static void keep_fds(struct init_conn *c, struct msghdr *mh)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm != NULL; cm = CMSG_NXTHDR(mh, cm)) {
        size_t n;
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (c->nfds < INIT_CONN_FDS_MAX)
                c->fds[c->nfds++] = fd;
            else
                (void)close(fd);
        }
    }
}

void init_conn_close(struct init_conn *c)
{
    if (c->dead)
        return;
    close_fds(c);
    if (c->primary && init_cfg.ephemeral) {
        /* The creator is gone: the sandbox ends with it. */
        (void)kill(-1, SIGKILL);
        _exit(0);
    }
    c->dead = true;
    init_fdw_close(&c->w);
    init_procs_conn_gone(c);
    init_files_conn_gone(c);
    init_fswatch_conn_gone(c);
    init_ports_conn_gone(c);
}

size_t init_conn_queued(const struct init_conn *c)
{
    return c->out.len - c->out_off;
}

void init_conn_errorf(struct init_conn *c, uint32_t id, int errnum, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if (errnum != 0 && (size_t)n < sizeof(msg))
        (void)snprintf(msg + n, sizeof(msg) - (size_t)n, ": %s", strerror(errnum));
    wr_msg_error(&c->out, id, errnum, msg);
}

/* ---- request fields ---------------------------------------------------------------------- */

static bool tag_is_string(uint16_t tag)
{
    switch (tag) {
    case WR_TAG_MESSAGE:
    case WR_TAG_ARGV:
    case WR_TAG_ENV:
    case WR_TAG_CWD:
    case WR_TAG_USER:
    case WR_TAG_PATH:
    case WR_TAG_DEST:
    case WR_TAG_NAME:
    case WR_TAG_LINK:
    case WR_TAG_SERVICE:
    case WR_TAG_ROOT:
    case WR_TAG_DEPEND:
    case WR_TAG_HEALTH_ARGV:
    case WR_TAG_STATE:
        return true;
    default:
        return false;
    }
}

int init_req_parse(const uint8_t *p, size_t n, struct init_req *r, struct wr_err *err)
{
    struct wr_tlv_iter it;
    struct wr_field f;
    int rc;

    memset(r, 0, sizeof(*r));
    wr_tlv_iter_init(&it, p, n);
    while ((rc = wr_tlv_next(&it, &f)) == 1) {
        char **dst = NULL;
        size_t max = WR_MAX_PATH;

        if (f.tag >= 64)
            continue; /* unknown: skipped, per the protocol */
        if (tag_is_string(f.tag)) {
            if (f.tag == WR_TAG_PATH)
                dst = &r->path;
            else if (f.tag == WR_TAG_DEST)
                dst = &r->dest;
            else if (f.tag == WR_TAG_USER)
                dst = &r->user, max = WR_MAX_STR;
            else
                continue;
            free(*dst);
            *dst = NULL;
            if (wr_field_strdup(&f, max, dst) < 0)
                return wr_err_set(err, WR_EINVAL, 0, "field %u: bad string", f.tag);
        } else {
            if (wr_field_u64(&f, &r->num[f.tag]) < 0)
                return wr_err_set(err, WR_EINVAL, 0, "field %u: bad integer", f.tag);
        }
        r->has |= 1ull << f.tag;
    }
    if (rc < 0)
        return wr_err_set(err, WR_EINVAL, 0, "malformed fields");
    return 0;
}

void init_req_fini(struct init_req *r)
{
    free(r->path);
    free(r->dest);
    free(r->user);
    r->path = r->dest = r->user = NULL;
}

/* ---- frames ------------------------------------------------------------------------------ */

static void hello(struct init_conn *c, const struct wr_frame_hdr *h, const uint8_t *p)
{
    uint64_t version = 0;
    size_t start;

    if (wr_msg_get_u64(p, h->len, WR_TAG_VERSION, &version) < 0 || version != WR_PROTO_VERSION) {
        init_conn_errorf(c, h->id, EPROTONOSUPPORT,
                         "protocol version %llu not supported (init speaks %u)",
                         (unsigned long long)version, WR_PROTO_VERSION);
        c->drain = true;
        return;
    }
    c->hello = true;
    start = wr_msg_begin(&c->out, WR_MSG_HELLO, 0, h->id);
    wr_msg_put_u64(&c->out, WR_TAG_VERSION, WR_PROTO_VERSION);
    wr_msg_put_u64(&c->out, WR_TAG_PID, (uint64_t)getpid());
    (void)wr_msg_end(&c->out, start);
}

static void dispatch(struct init_conn *c, const struct wr_frame_hdr *h, const uint8_t *p)
{
    if (!c->hello && h->type != WR_MSG_HELLO) {
        init_conn_errorf(c, h->id, EPROTO, "expected HELLO first");
        c->drain = true;
        return;
    }
    switch (h->type) {
    case WR_MSG_HELLO:
        hello(c, h, p);
        break;
    case WR_MSG_SPAWN:
        init_spawn(c, h->id, p, h->len);
        break;
    case WR_MSG_STDIN:
    case WR_MSG_STDIN_CLOSE:
    case WR_MSG_SIGNAL:
    case WR_MSG_RESIZE:
    case WR_MSG_ATTACH:
    case WR_MSG_LIST:
    case WR_MSG_RELEASE:
    case WR_MSG_ACK:
        init_proc_request(c, h, p);
        break;
    case WR_MSG_FILE_READ:
    case WR_MSG_FILE_WRITE:
    case WR_MSG_DATA:
    case WR_MSG_DATA_END:
    case WR_MSG_FILE_STAT:
    case WR_MSG_FILE_LIST:
    case WR_MSG_FILE_MKDIR:
    case WR_MSG_FILE_REMOVE:
    case WR_MSG_FILE_RENAME:
    case WR_MSG_FILE_CHMOD:
        init_file_request(c, h, p);
        break;
    case WR_MSG_FILE_WATCH:
    case WR_MSG_CANCEL:
        init_fswatch_request(c, h, p);
        break;
    case WR_MSG_PORT_OPEN:
    case WR_MSG_PORT_LIST:
        init_port_request(c, h, p);
        break;
    case WR_MSG_SERVICE:
    case WR_MSG_SERVICES_START:
    case WR_MSG_SERVICE_LIST:
        init_service_request(c, h, p);
        break;
    case WR_MSG_QUIESCE:
        if (init_cfg.listen_path == NULL) {
            init_conn_errorf(c, h->id, ENOTSUP, "quiesce: init has no socket of its own");
            break;
        }
        wr_msg_ok(&c->out, h->id);
        init_quiesce_pending = true;
        break;
    case WR_MSG_OK:
    case WR_MSG_ERROR:
        break; /* replies flow from init, never to it; tolerate stray ones */
    default:
        init_conn_errorf(c, h->id, ENOSYS, "message type %u not supported", h->type);
        break;
    }
}

static bool reading_paused(const struct init_conn *c)
{
    return c->dead || c->drain || c->holds > 0 || init_conn_queued(c) > INIT_CONN_OUT_HIGH;
}

/* Handle complete frames already received, until paused. */
static void take_frames(struct init_conn *c)
{
    while (!reading_paused(c)) {
        struct wr_frame_hdr h;
        const uint8_t *payload = NULL;
        struct wr_err err = {0};
        int rc = wr_reader_next(&c->rd, &h, &payload, &err);

        if (rc == 0)
            return;
        if (rc < 0) {
            log_warn("connection: %s", err.msg);
            init_conn_close(c);
            return;
        }
        dispatch(c, &h, payload);
    }
}

static void on_conn(struct init_fdw *w, uint32_t events)
{
    struct init_conn *c = w->owner;
    static uint8_t buf[64 * 1024];

    if (c->dead)
        return;
    if (events & EPOLLIN && !reading_paused(c)) {
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(INIT_CONN_FDS_MAX * sizeof(int))];
        } ctl;
        struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = ctl.buf,
                            .msg_controllen = sizeof(ctl)};
        ssize_t r = recvmsg(w->fd, &mh, MSG_CMSG_CLOEXEC);
        if (r > 0)
            keep_fds(c, &mh);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
            init_conn_close(c);
            return;
        }
        if (r > 0) {
            wr_reader_feed(&c->rd, buf, (size_t)r);
            take_frames(c);
        }
    } else if (events & (EPOLLHUP | EPOLLERR) && !(events & EPOLLOUT)) {
        init_conn_close(c);
    }
    /* EPOLLOUT: the pump writes. */
}

/* Write what is queued. Returns false if the socket is full (or the connection died). */
static bool flush(struct init_conn *c)
{
    while (init_conn_queued(c) > 0) {
        ssize_t w = send(c->w.fd, c->out.data + c->out_off, init_conn_queued(c),
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return false;
            init_conn_close(c);
            return false;
        }
        c->out_off += (size_t)w;
    }
    /* Compact: all written (cheap) or a large written prefix. */
    if (c->out_off == c->out.len || c->out_off > (1u << 20)) {
        wr_buf_consume(&c->out, c->out_off);
        c->out_off = 0;
    }
    return true;
}

void init_conn_send_fd(struct init_conn *c, uint32_t id, int fd)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl = {0};
    struct wr_buf b;
    struct iovec iov;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    struct cmsghdr *cm;
    ssize_t w;

    if (c->dead)
        return;
    /* The fd travels with the OK's bytes, so what is queued goes first; on a connection of its
     * own that is a HELLO answer, which a fresh socket's buffer takes at once. */
    if (!flush(c) || init_conn_queued(c) > 0) {
        init_conn_close(c);
        return;
    }
    wr_buf_init(&b);
    wr_msg_ok(&b, id);
    iov.iov_base = b.data;
    iov.iov_len = b.len;
    mh.msg_control = ctl.buf;
    mh.msg_controllen = sizeof(ctl.buf);
    cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    do
        w = sendmsg(c->w.fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (w < 0 && errno == EINTR);
    if (w != (ssize_t)b.len) {
        log_warn("port_open: sendmsg: %s", w < 0 ? strerror(errno) : "short write");
        wr_buf_fini(&b);
        init_conn_close(c);
        return;
    }
    wr_buf_fini(&b);
    c->drain = true;
}

static void pump_one(struct init_conn *c)
{
    /* Bounded rounds so one busy connection cannot starve the rest; the loop comes back. */
    for (int round = 0; round < 16 && !c->dead; round++) {
        bool more = false;

        take_frames(c);
        if (c->dead)
            return;
        if (!c->drain)
            more = init_files_produce(c);
        if (!flush(c))
            break;
        if (c->out_off > 0) {
            wr_buf_consume(&c->out, c->out_off);
            c->out_off = 0;
        }
        if (c->drain) {
            init_conn_close(c);
            return;
        }
        if (!more)
            break;
        if (round == 15)
            init_loop_again();
    }
    if (c->dead)
        return;
    init_fswatch_pump(c);
    uint32_t ev = 0;
    if (!reading_paused(c))
        ev |= EPOLLIN;
    if (init_conn_queued(c) > 0)
        ev |= EPOLLOUT;
    if (ev == 0 && c->drain)
        ev = EPOLLOUT;
    init_fdw_set(&c->w, ev);
}

void init_conns_pump(void)
{
    struct init_conn **pp = &conns;

    for (struct init_conn *c = conns; c != NULL; c = c->next)
        pump_one(c);
    while (*pp != NULL) {
        struct init_conn *c = *pp;
        if (!c->dead) {
            pp = &c->next;
            continue;
        }
        *pp = c->next;
        nconns--;
        init_fswatch_pump(c); /* every watch ended when c closed: this frees them */
        wr_reader_fini(&c->rd);
        wr_buf_fini(&c->out);
        free(c);
    }
}

void init_conns_close_all(void)
{
    for (struct init_conn *c = conns; c != NULL; c = c->next)
        init_conn_close(c);
    init_conns_pump(); /* frees them */
}
