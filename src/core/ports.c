/* SPDX-License-Identifier: Apache-2.0 */
/* A sandbox's TCP ports from the daemon: connect to the slot address, or ask warren-init (on a
 * connection of its own) to connect on the sandbox's loopback and pass the socket back; and the
 * list of listening sockets. See ports.h. Everything is nonblocking on the loop: raw sockets
 * watched with uv_poll, a timer bounding each step. */
#include "ports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include "../util/log.h"
#include "../util/xalloc.h"
#include "core_int.h"

#define SLOT_CONNECT_MS 3000  /* the slot address's connect, before falling back to init */
#define INIT_ANSWER_MS  10000 /* warren-init's answer to PORT_OPEN or PORT_LIST */
#define REQ_ID          2     /* the request's id on its connection (HELLO is 1) */

enum step { STEP_BEGIN, STEP_SLOT, STEP_INIT, STEP_DONE };

struct wr_port_req {
    struct wr_live_sb *sb; /* referenced */
    uint16_t type;         /* WR_MSG_PORT_OPEN or WR_MSG_PORT_LIST */
    uint16_t port;
    wr_port_open_cb open_cb;
    wr_ports_list_cb list_cb;
    void *arg;
    enum step step;
    int fd;      /* the socket of the current step */
    int got_fd;  /* the socket init passed */
    int slot_fd; /* the slot way's socket, given up on: closed with the request (its poll
                  * handle may still be closing) */
    bool polling[2], cancelled;
    int handles;       /* polls and timer, until their close callbacks */
    uv_poll_t poll[2]; /* one per way (slot, init): a closing handle is never reused */
    uv_timer_t timer;
    struct wr_reader rd;
    bool hello; /* init's HELLO came */
};

static void req_free(struct wr_port_req *r)
{
    if (r->fd >= 0)
        (void)close(r->fd);
    if (r->got_fd >= 0)
        (void)close(r->got_fd);
    if (r->slot_fd >= 0)
        (void)close(r->slot_fd);
    wr_reader_fini(&r->rd);
    wr_live_sb_unref(r->sb);
    free(r);
}

static void on_closed(uv_handle_t *h)
{
    struct wr_port_req *r = h->data;

    if (--r->handles == 0)
        req_free(r);
}

/* Stop watching the current socket (it stays open). */
static void unwatch(struct wr_port_req *r)
{
    for (int i = 0; i < 2; i++) {
        if (r->polling[i]) {
            r->polling[i] = false;
            uv_close((uv_handle_t *)&r->poll[i], on_closed);
        }
    }
    (void)uv_timer_stop(&r->timer);
}

/* The end: call back (unless cancelled) and release everything. */
static void finish(struct wr_port_req *r, int fd, const struct wr_port_listen *items, size_t n,
                   const struct wr_err *err)
{
    bool told = r->cancelled;

    r->step = STEP_DONE;
    unwatch(r);
    uv_close((uv_handle_t *)&r->timer, on_closed);
    if (!told) {
        if (r->type == WR_MSG_PORT_OPEN)
            r->open_cb(r->arg, fd, err);
        else
            r->list_cb(r->arg, items, n, err);
    } else if (fd >= 0) {
        (void)close(fd);
    }
}

static void fail(struct wr_port_req *r, enum wr_err_kind kind, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail(struct wr_port_req *r, enum wr_err_kind kind, int errnum, const char *fmt, ...)
{
    struct wr_err err;
    va_list ap;

    va_start(ap, fmt);
    (void)wr_err_vset(&err, kind, errnum, fmt, ap);
    va_end(ap);
    finish(r, -1, NULL, 0, &err);
}

static void on_poll(uv_poll_t *p, int status, int events);
static void on_timer(uv_timer_t *t);

static int watch(struct wr_port_req *r, int events, unsigned ms)
{
    int i = r->step == STEP_SLOT ? 0 : 1;
    int rc = uv_poll_init(r->sb->m->loop, &r->poll[i], r->fd);

    if (rc < 0)
        return rc;
    r->poll[i].data = r;
    r->polling[i] = true;
    r->handles++;
    rc = uv_poll_start(&r->poll[i], events, on_poll);
    if (rc < 0)
        return rc;
    (void)uv_timer_start(&r->timer, on_timer, ms, 0);
    return 0;
}

/* ---- through warren-init ------------------------------------------------------------------- */

/* Running, or being created with its processes up: the start command's readiness check
 * (start.c) dials a sandbox before it is handed out. */
static bool reachable(const struct wr_live_sb *sb)
{
    return sb->rt != NULL && (wr_live_sb_alive(sb) || sb->state == LIVE_SB_CREATING);
}

static void init_start(struct wr_port_req *r)
{
    const char *path = wr_live_sb_ctl_path(r->sb);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct wr_buf b;
    size_t start;
    ssize_t w;
    int rc;

    r->step = STEP_INIT;
    if (!reachable(r->sb) || path == NULL) {
        fail(r, WR_ECONFLICT, 0, "sandbox %s is not running", r->sb->id);
        return;
    }
    if (strlen(path) >= sizeof(sa.sun_path)) {
        fail(r, WR_EINTERNAL, 0, "control socket path %s is too long", path);
        return;
    }
    memcpy(sa.sun_path, path, strlen(path));
    r->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (r->fd < 0) {
        fail(r, WR_ESYS, errno, "socket");
        return;
    }
    if (connect(r->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        fail(r, errno == EAGAIN ? WR_ELIMIT : WR_EUPSTREAM, errno,
             "connect to the control socket of sandbox %s", r->sb->id);
        return;
    }
    /* HELLO and the request together: init takes them in order, and a fresh socket's buffer
     * holds both. */
    wr_buf_init(&b);
    start = wr_msg_begin(&b, WR_MSG_HELLO, 0, 1);
    wr_msg_put_u64(&b, WR_TAG_VERSION, WR_PROTO_VERSION);
    (void)wr_msg_end(&b, start);
    start = wr_msg_begin(&b, r->type, 0, REQ_ID);
    if (r->type == WR_MSG_PORT_OPEN)
        wr_msg_put_u64(&b, WR_TAG_PORT, r->port);
    (void)wr_msg_end(&b, start);
    do
        w = send(r->fd, b.data, b.len, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (w < 0 && errno == EINTR);
    rc = w == (ssize_t)b.len ? 0 : -1;
    wr_buf_fini(&b);
    if (rc < 0) {
        fail(r, WR_EUPSTREAM, w < 0 ? errno : 0, "write to the control socket of sandbox %s",
             r->sb->id);
        return;
    }
    if ((rc = watch(r, UV_READABLE, INIT_ANSWER_MS)) < 0)
        fail(r, WR_ESYS, -rc, "uv_poll");
}

/* A frame from init. Returns true when the request is over. */
static bool init_frame(struct wr_port_req *r, const struct wr_frame_hdr *h, const uint8_t *p)
{
    struct wr_err e;

    if (!r->hello) {
        if (h->type != WR_MSG_HELLO) {
            fail(r, WR_EPROTO, 0, "sandbox %s: warren-init answered type %u to HELLO", r->sb->id,
                 h->type);
            return true;
        }
        r->hello = true;
        return false;
    }
    if (h->id != REQ_ID || (h->type != WR_MSG_OK && h->type != WR_MSG_ERROR)) {
        fail(r, WR_EPROTO, 0, "sandbox %s: unexpected frame type %u", r->sb->id, h->type);
        return true;
    }
    if (h->type == WR_MSG_ERROR) {
        char msg[256];
        int errnum = 0;
        if (wr_error_decode(p, h->len, &errnum, msg, sizeof(msg), &e) < 0) {
            fail(r, WR_EPROTO, 0, "sandbox %s: %s", r->sb->id, e.msg);
        } else if (errnum == ECONNREFUSED) {
            struct wr_err err;
            (void)wr_err_set(&err, WR_EUPSTREAM, 0, "port %u of sandbox %s is not open",
                             (unsigned)r->port, r->sb->id);
            err.sys_errno = ECONNREFUSED;
            finish(r, -1, NULL, 0, &err);
        } else {
            fail(r, WR_EUPSTREAM, 0, "sandbox %s: %s", r->sb->id, msg);
        }
        return true;
    }
    if (r->type == WR_MSG_PORT_OPEN) {
        int fd = r->got_fd;
        if (fd < 0) {
            fail(r, WR_EPROTO, 0, "sandbox %s: PORT_OPEN answered without a socket", r->sb->id);
            return true;
        }
        r->got_fd = -1;
        finish(r, fd, NULL, 0, NULL);
        return true;
    }
    struct wr_port_listen *items = NULL;
    size_t n = 0;
    if (wr_port_list_decode(p, h->len, &items, &n, &e) < 0) {
        fail(r, WR_EPROTO, 0, "sandbox %s: %s", r->sb->id, e.msg);
        return true;
    }
    finish(r, -1, items, n, NULL);
    free(items);
    return true;
}

/* A passed socket must be a TCP stream socket: anything else (code in the sandbox owns its
 * PID 1) is refused. */
static bool tcp_socket(int fd)
{
    int type = 0, proto = 0, domain = 0;
    socklen_t l1 = sizeof(type), l2 = sizeof(proto), l3 = sizeof(domain);

    return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l1) == 0 && type == SOCK_STREAM &&
           getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l2) == 0 && proto == IPPROTO_TCP &&
           getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l3) == 0 &&
           (domain == AF_INET || domain == AF_INET6);
}

static void init_readable(struct wr_port_req *r)
{
    uint8_t buf[4096];
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(4 * sizeof(int))];
    } ctl;
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof(ctl.b)};
    ssize_t n;

    n = recvmsg(r->fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); n >= 0 && cm != NULL; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (r->got_fd < 0 && r->type == WR_MSG_PORT_OPEN && tcp_socket(fd))
                r->got_fd = fd;
            else
                (void)close(fd);
        }
    }
    if (n <= 0) {
        fail(r, WR_EUPSTREAM, n < 0 ? errno : 0,
             "sandbox %s: warren-init closed the connection before answering", r->sb->id);
        return;
    }
    wr_reader_feed(&r->rd, buf, (size_t)n);
    for (;;) {
        struct wr_frame_hdr h;
        const uint8_t *p;
        struct wr_err e;
        int rc = wr_reader_next(&r->rd, &h, &p, &e);
        if (rc == 0)
            return;
        if (rc < 0) {
            fail(r, WR_EPROTO, 0, "sandbox %s: %s", r->sb->id, e.msg);
            return;
        }
        if (init_frame(r, &h, p))
            return;
    }
}

/* ---- through the slot address -------------------------------------------------------------- */

/* Start a connect to the slot address; false if it cannot even start (go to init). */
static bool slot_start(struct wr_port_req *r)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(r->port)};
    int one = 1;

    r->step = STEP_SLOT;
    sa.sin_addr.s_addr = htonl(r->sb->net_addr);
    r->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (r->fd < 0)
        return false;
    (void)setsockopt(r->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(r->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EINPROGRESS)
        return watch(r, UV_WRITABLE, SLOT_CONNECT_MS) == 0;
    return false;
}

/* The slot way did not work: close its socket and ask init. */
static void slot_fallback(struct wr_port_req *r)
{
    unwatch(r);
    r->slot_fd = r->fd;
    r->fd = -1;
    init_start(r);
}

static void slot_writable(struct wr_port_req *r)
{
    int soerr = 0, fd;
    socklen_t len = sizeof(soerr);

    if (getsockopt(r->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
        soerr = errno;
    if (soerr != 0) {
        /* Refused (a server bound to 127.0.0.1), unreachable: init connects on loopback. */
        slot_fallback(r);
        return;
    }
    fd = r->fd;
    r->fd = -1;
    finish(r, fd, NULL, 0, NULL);
}

/* ---- the request --------------------------------------------------------------------------- */

static void on_poll(uv_poll_t *p, int status, int events)
{
    struct wr_port_req *r = p->data;

    if (r->step == STEP_SLOT)
        slot_writable(r);
    else if (r->step == STEP_INIT)
        init_readable(r);
}

static void on_timer(uv_timer_t *t)
{
    struct wr_port_req *r = t->data;

    if (r->step == STEP_SLOT)
        slot_fallback(r);
    else if (r->step == STEP_INIT)
        fail(r, WR_ETIMEOUT, 0, "sandbox %s: warren-init did not answer in %u ms", r->sb->id,
             INIT_ANSWER_MS);
}

static struct wr_port_req *req_start(struct wr_live_sb *sb, uint16_t type, uint16_t port,
                                     struct wr_err *err)
{
    struct wr_port_req *r;

    if (!reachable(sb) || wr__live_sb_paused(sb)) {
        wr_err_set(err, WR_ECONFLICT, 0, "sandbox %s is not running", sb->id);
        return NULL;
    }
    r = xcalloc(1, sizeof(*r));
    r->sb = sb;
    wr_live_sb_ref(sb);
    r->type = type;
    r->port = port;
    r->fd = r->got_fd = r->slot_fd = -1;
    wr_reader_init(&r->rd);
    (void)uv_timer_init(sb->m->loop, &r->timer);
    r->timer.data = r;
    r->handles = 1;
    return r;
}

/* Begin on the loop's next turn, so the callback never runs inside the caller's call. */
static void on_begin(uv_timer_t *t)
{
    struct wr_port_req *r = t->data;

    if (r->cancelled) {
        finish(r, -1, NULL, 0, NULL);
        return;
    }
    if (r->type == WR_MSG_PORT_OPEN && r->sb->net_addr != 0 && slot_start(r))
        return;
    unwatch(r);
    r->slot_fd = r->fd; /* a slot way that could not start, if any */
    r->fd = -1;
    init_start(r);
}

struct wr_port_req *wr_live_sb_port_open(struct wr_live_sb *sb, uint16_t port, wr_port_open_cb cb,
                                         void *arg, struct wr_err *err)
{
    struct wr_port_req *r;

    if (port == 0) {
        wr_err_set(err, WR_EINVAL, 0, "port 0 is not a port");
        return NULL;
    }
    /* A socket inside gVisor cannot be handed to the host: a gvisor sandbox's ports are
     * reached through its network slot, which one made without a network has not. */
    if (sb->backend == WR_BACKEND_GVISOR && sb->net_addr == 0) {
        wr_err_set(err, WR_EUNSUPPORTED, 0,
                   "sandbox %s: the ports of a sandbox on the gvisor runtime are reached through "
                   "its network (create it with `network: {\"enabled\": true}`)",
                   sb->id);
        return NULL;
    }
    if ((r = req_start(sb, WR_MSG_PORT_OPEN, port, err)) == NULL)
        return NULL;
    r->open_cb = cb;
    r->arg = arg;
    (void)uv_timer_start(&r->timer, on_begin, 0, 0);
    return r;
}

struct wr_port_req *wr_live_sb_ports_list(struct wr_live_sb *sb, wr_ports_list_cb cb, void *arg,
                                          struct wr_err *err)
{
    struct wr_port_req *r = req_start(sb, WR_MSG_PORT_LIST, 0, err);

    if (r == NULL)
        return NULL;
    r->list_cb = cb;
    r->arg = arg;
    (void)uv_timer_start(&r->timer, on_begin, 0, 0);
    return r;
}

struct wr_port_req *wr_manager_port_open(struct wr_manager *m, const char *team, const char *id,
                                         uint16_t port, wr_port_open_cb cb, void *arg,
                                         struct wr_err *err)
{
    struct wr_live_sb *sb = wr_manager_find(m, team, id, err);

    return sb ? wr_live_sb_port_open(sb, port, cb, arg, err) : NULL;
}

struct wr_port_req *wr_manager_ports_list(struct wr_manager *m, const char *team, const char *id,
                                          wr_ports_list_cb cb, void *arg, struct wr_err *err)
{
    struct wr_live_sb *sb = wr_manager_find(m, team, id, err);

    return sb ? wr_live_sb_ports_list(sb, cb, arg, err) : NULL;
}

void wr_port_req_cancel(struct wr_port_req *r)
{
    if (r == NULL || r->cancelled || r->step == STEP_DONE)
        return;
    r->cancelled = true;
    if (r->step != STEP_BEGIN) /* else on_begin sees it */
        finish(r, -1, NULL, 0, NULL);
}

/* ---- the proxy's view of a sandbox --------------------------------------------------------- */

const char *wr_live_sb_team(const struct wr_live_sb *sb)
{
    return sb->team;
}

bool wr_live_sb_ports_private(const struct wr_live_sb *sb)
{
    return sb->ports_private;
}

const char *wr_live_sb_mask_host(const struct wr_live_sb *sb)
{
    return sb->mask_host;
}

uint32_t wr_live_sb_net_addr(const struct wr_live_sb *sb)
{
    return sb->net_addr;
}
