/* SPDX-License-Identifier: Apache-2.0 */
/* Conntrack NEW/DESTROY events for a pool's flows (see ctevents.h). */
#include "ctevents.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libnetfilter_conntrack/libnetfilter_conntrack.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/xalloc.h"

/* The kernel queues events here while the daemon's loop is busy: at ~200 bytes an event, 8 MiB
 * holds some 40,000 of them. */
#define CT_RCVBUF (8 << 20)

struct wr_ctevents {
    struct nfct_handle *h;
    struct wr_cidr4 pool;
    uint64_t lost;
    /* The read in progress: nfct_catch's callback passes them on. */
    wr_ct_event_fn cb;
    void *arg;
    int count;
};

/* Write "1" to /proc/sys/net/netfilter/<name> of the caller's netns. */
static int sysctl_on(const char *name, struct wr_err *err)
{
    char path[128];
    _cleanup_close_ int fd = -1;

    snprintf(path, sizeof(path), "/proc/sys/net/netfilter/%s", name);
    fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return wr_err_sys(err, "open %s", path);
    if (write(fd, "1", 1) != 1)
        return wr_err_sys(err, "write %s", path);
    return 0;
}

static uint64_t attr_u64(const struct nf_conntrack *ct, enum nf_conntrack_attr a)
{
    return nfct_attr_is_set(ct, a) > 0 ? nfct_get_attr_u64(ct, a) : 0;
}

static int on_event(enum nf_conntrack_msg_type type, struct nf_conntrack *ct, void *data)
{
    struct wr_ctevents *c = data;
    struct wr_ct_event ev = {0};
    uint32_t rsrc;
    uint16_t rsport;

    if (nfct_get_attr_u8(ct, ATTR_L3PROTO) != AF_INET)
        return NFCT_CB_CONTINUE;
    ev.type = type == NFCT_T_DESTROY ? WR_CT_EV_DESTROY : WR_CT_EV_NEW;
    ev.proto = nfct_get_attr_u8(ct, ATTR_L4PROTO);
    ev.src = ntohl(nfct_get_attr_u32(ct, ATTR_ORIG_IPV4_SRC));
    ev.dst = ntohl(nfct_get_attr_u32(ct, ATTR_ORIG_IPV4_DST));
    /* The kernel filter already passed only the pool; this keeps the contract if it could not
     * be attached exactly. */
    if (!wr_cidr4_contains(&c->pool, ev.src))
        return NFCT_CB_CONTINUE;
    rsrc = ntohl(nfct_get_attr_u32(ct, ATTR_REPL_IPV4_SRC));
    if (ev.proto == IPPROTO_TCP || ev.proto == IPPROTO_UDP || ev.proto == IPPROTO_SCTP ||
        ev.proto == IPPROTO_UDPLITE) {
        ev.sport = ntohs(nfct_get_attr_u16(ct, ATTR_ORIG_PORT_SRC));
        ev.dport = ntohs(nfct_get_attr_u16(ct, ATTR_ORIG_PORT_DST));
        rsport = ntohs(nfct_get_attr_u16(ct, ATTR_REPL_PORT_SRC));
        ev.dnat = rsrc != ev.dst || rsport != ev.dport;
    } else {
        ev.dnat = rsrc != ev.dst;
    }
    ev.bytes_out = attr_u64(ct, ATTR_ORIG_COUNTER_BYTES);
    ev.bytes_in = attr_u64(ct, ATTR_REPL_COUNTER_BYTES);
    ev.packets_out = attr_u64(ct, ATTR_ORIG_COUNTER_PACKETS);
    ev.packets_in = attr_u64(ct, ATTR_REPL_COUNTER_PACKETS);
    /* nf_conntrack_timestamp: ns of the wall clock. */
    ev.start_ms = (int64_t)(attr_u64(ct, ATTR_TIMESTAMP_START) / 1000000);
    ev.end_ms = (int64_t)(attr_u64(ct, ATTR_TIMESTAMP_STOP) / 1000000);
    ev.id = nfct_attr_is_set(ct, ATTR_ID) > 0 ? nfct_get_attr_u32(ct, ATTR_ID) : 0;
    c->cb(c->arg, &ev);
    c->count++;
    return NFCT_CB_CONTINUE;
}

/* The BPF filter: IPv4 flows from the pool. IPv6 flows are refused by a source filter that
 * matches only the unspecified address (without one, the library's program lets every IPv6
 * flow through). */
static int attach_filter(struct wr_ctevents *c, struct wr_err *err)
{
    struct nfct_filter *f = nfct_filter_create();
    struct nfct_filter_ipv4 v4 = {.addr = c->pool.addr, .mask = wr_cidr4_mask(c->pool.len)};
    struct nfct_filter_ipv6 v6 = {.addr = {0}, .mask = {~0u, ~0u, ~0u, ~0u}};
    int rc;

    if (f == NULL)
        return wr_err_sys(err, "conntrack filter");
    nfct_filter_add_attr(f, NFCT_FILTER_SRC_IPV4, &v4);
    nfct_filter_set_logic(f, NFCT_FILTER_SRC_IPV4, NFCT_FILTER_LOGIC_POSITIVE);
    nfct_filter_add_attr(f, NFCT_FILTER_SRC_IPV6, &v6);
    nfct_filter_set_logic(f, NFCT_FILTER_SRC_IPV6, NFCT_FILTER_LOGIC_POSITIVE);
    rc = nfct_filter_attach(nfct_fd(c->h), f);
    nfct_filter_destroy(f);
    if (rc < 0)
        return wr_err_sys(err, "attach conntrack filter");
    return 0;
}

int wr_rt_ctevents_open(const struct wr_cidr4 *pool, unsigned events, struct wr_ctevents **out,
                        struct wr_err *err)
{
    unsigned groups = 0;
    struct wr_ctevents *c;
    int fd, size = CT_RCVBUF, fl;

    if ((events & (WR_CT_EV_NEW | WR_CT_EV_DESTROY)) == 0 || pool->len > 32)
        return wr_err_set(err, WR_EINVAL, 0, "conntrack events: bad arguments");
    if (events & WR_CT_EV_NEW)
        groups |= NF_NETLINK_CONNTRACK_NEW;
    if (events & WR_CT_EV_DESTROY)
        groups |= NF_NETLINK_CONNTRACK_DESTROY;
    c = xcalloc(1, sizeof(*c));
    c->pool = *pool;
    c->pool.addr &= wr_cidr4_mask(pool->len);
    c->h = nfct_open(CONNTRACK, groups);
    if (c->h == NULL) {
        free(c);
        return wr_err_sys(err, "open ctnetlink");
    }
    /* Opening ctnetlink has loaded conntrack, so its sysctls exist now. */
    if (sysctl_on("nf_conntrack_acct", err) < 0 || sysctl_on("nf_conntrack_timestamp", err) < 0 ||
        attach_filter(c, err) < 0)
        goto fail;
    fd = nfct_fd(c->h);
    /* FORCE: above net.core.rmem_max, as root may. */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0 &&
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)) < 0) {
        wr_err_sys(err, "conntrack events: SO_RCVBUF");
        goto fail;
    }
    fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        wr_err_sys(err, "conntrack events: fcntl");
        goto fail;
    }
    if (nfct_callback_register(c->h, NFCT_T_NEW | NFCT_T_DESTROY, on_event, c) < 0) {
        wr_err_sys(err, "conntrack events: callback");
        goto fail;
    }
    *out = c;
    return 0;
fail:
    wr_err_wrap(err, "conntrack events");
    nfct_close(c->h);
    free(c);
    return -1;
}

int wr_rt_ctevents_fd(const struct wr_ctevents *c)
{
    return nfct_fd(c->h);
}

int wr_rt_ctevents_read(struct wr_ctevents *c, wr_ct_event_fn cb, void *arg, struct wr_err *err)
{
    c->cb = cb;
    c->arg = arg;
    c->count = 0;
    for (;;) {
        /* Reads and dispatches until the socket is empty (EAGAIN) or fails; our callback never
         * stops it, so a return of 0 or more means there is nothing more to read. */
        if (nfct_catch(c->h) >= 0)
            break;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            break;
        if (errno == ENOBUFS) {
            c->lost++;
            continue;
        }
        if (errno == EINTR)
            continue;
        return wr_err_sys(err, "read conntrack events");
    }
    return c->count;
}

uint64_t wr_rt_ctevents_lost(const struct wr_ctevents *c)
{
    return c->lost;
}

void wr_rt_ctevents_close(struct wr_ctevents *c)
{
    if (c == NULL)
        return;
    nfct_close(c->h);
    free(c);
}
