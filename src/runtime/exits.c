/* SPDX-License-Identifier: Apache-2.0 */
/* The process events connector as a source of exits (see exits.h). */
#include "exits.h"

#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "../util/xalloc.h"

/* Room for bursts: a create-and-delete storm, or thousands of commands ending at once, each
 * a 76-byte message (in a buffer the kernel accounts at about 768 bytes each). */
#define EXITS_RCVBUF (16 << 20)

struct wr_exits {
    struct mnl_socket *nl;
    char buf[1 << 16];
};

/* PROC_CN_MCAST_LISTEN: from now on the kernel sends every process event to the group. */
static int listen_op(struct wr_exits *x, struct wr_err *err)
{
    char buf[NLMSG_SPACE(sizeof(struct cn_msg) + sizeof(enum proc_cn_mcast_op))];
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    struct cn_msg *cn;
    enum proc_cn_mcast_op op = PROC_CN_MCAST_LISTEN;

    nlh->nlmsg_type = NLMSG_DONE;
    nlh->nlmsg_pid = mnl_socket_get_portid(x->nl);
    cn = mnl_nlmsg_put_extra_header(nlh, sizeof(*cn) + sizeof(op));
    cn->id = (struct cb_id){.idx = CN_IDX_PROC, .val = CN_VAL_PROC};
    cn->len = sizeof(op);
    memcpy(cn->data, &op, sizeof(op));
    if (mnl_socket_sendto(x->nl, nlh, nlh->nlmsg_len) < 0)
        return wr_err_set(err, errno == EPERM ? WR_EUNSUPPORTED : WR_ESYS, errno,
                          "process events: listen");
    return 0;
}

int wr_exits_open(struct wr_exits **out, struct wr_err *err)
{
    struct wr_exits *x = xcalloc(1, sizeof(*x));
    int size = EXITS_RCVBUF, fd, fl;

    x->nl = mnl_socket_open2(NETLINK_CONNECTOR, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (x->nl == NULL) {
        wr_err_set(err, errno == EPROTONOSUPPORT ? WR_EUNSUPPORTED : WR_ESYS, errno,
                   "process events: netlink connector socket");
        free(x);
        return -1;
    }
    /* Joining the group needs CAP_NET_ADMIN; a kernel without CONFIG_PROC_EVENTS has no such
     * group and refuses the bind or never answers: either way the daemon falls back. */
    if (mnl_socket_bind(x->nl, CN_IDX_PROC, MNL_SOCKET_AUTOPID) < 0) {
        wr_err_set(err, errno == EPERM || errno == ENOENT ? WR_EUNSUPPORTED : WR_ESYS, errno,
                   "process events: join the connector's group");
        goto fail;
    }
    fd = mnl_socket_get_fd(x->nl);
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0 &&
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)) < 0) {
        wr_err_sys(err, "process events: SO_RCVBUF");
        goto fail;
    }
    fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        wr_err_sys(err, "process events: fcntl");
        goto fail;
    }
    if (listen_op(x, err) < 0)
        goto fail;
    *out = x;
    return 0;
fail:
    mnl_socket_close(x->nl);
    free(x);
    return -1;
}

void wr_exits_close(struct wr_exits *x)
{
    if (x == NULL)
        return;
    mnl_socket_close(x->nl);
    free(x);
}

int wr_exits_fd(const struct wr_exits *x)
{
    return mnl_socket_get_fd(x->nl);
}

int wr_exits_read(struct wr_exits *x, void (*fn)(pid_t pid, void *arg), void *arg, bool *lost,
                  struct wr_err *err)
{
    int seen = 0;

    for (;;) {
        ssize_t n = mnl_socket_recvfrom(x->nl, x->buf, sizeof(x->buf));
        const struct nlmsghdr *nlh = (const struct nlmsghdr *)x->buf;
        int left;

        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return seen;
            if (errno == ENOBUFS) { /* events were dropped; the socket goes on */
                *lost = true;
                continue;
            }
            if (errno == EINTR)
                continue;
            return wr_err_sys(err, "process events: read");
        }
        for (left = (int)n; mnl_nlmsg_ok(nlh, left); nlh = mnl_nlmsg_next(nlh, &left)) {
            const struct cn_msg *cn = mnl_nlmsg_get_payload(nlh);
            struct proc_event ev;

            if (nlh->nlmsg_type != NLMSG_DONE ||
                mnl_nlmsg_get_payload_len(nlh) < sizeof(*cn) + sizeof(ev) ||
                cn->id.idx != CN_IDX_PROC || cn->id.val != CN_VAL_PROC || cn->len < sizeof(ev))
                continue;
            /* The event sits 36 bytes into the datagram (a netlink and a connector header):
             * not aligned for its 64-bit timestamp, so it is copied out. */
            memcpy(&ev, cn->data, sizeof(ev));
            if (ev.what != PROC_EVENT_EXIT ||
                ev.event_data.exit.process_pid != ev.event_data.exit.process_tgid)
                continue;
            fn(ev.event_data.exit.process_tgid, arg);
            seen++;
        }
    }
}
