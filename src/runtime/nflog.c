/* SPDX-License-Identifier: Apache-2.0 */
/* NFLOG group reader over nfnetlink_log (see nflog.h). */
#include "nflog.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "../util/xalloc.h"

#define NFLOG_COPY_RANGE 128
#define NFLOG_RCVBUF     (4 << 20)
/* The kernel's batching: a message at most every 20 hundredths of a second. */
#define NFLOG_TIMEOUT_CS 20

struct wr_nflog {
    struct mnl_socket *nl;
    uint16_t group;
    uint64_t lost;
    wr_nflog_fn cb;
    void *arg;
    int count;
    char buf[1 << 16];
};

static struct nlmsghdr *config_msg(char *buf, uint16_t group, uint32_t seq)
{
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    struct nfgenmsg *g;

    nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    nlh->nlmsg_seq = seq;
    g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
    g->nfgen_family = AF_UNSPEC;
    g->version = NFNETLINK_V0;
    g->res_id = htons(group);
    return nlh;
}

/* Send one config message and wait for its ack. */
static int config_send(struct wr_nflog *l, struct nlmsghdr *nlh, struct wr_err *err)
{
    char buf[8192];
    unsigned portid = mnl_socket_get_portid(l->nl);
    uint32_t seq = nlh->nlmsg_seq;
    ssize_t n;

    if (mnl_socket_sendto(l->nl, nlh, nlh->nlmsg_len) < 0)
        return wr_err_sys(err, "nflog: send config");
    /* The answer is the ack (an error message with error 0) or the error. */
    n = mnl_socket_recvfrom(l->nl, buf, sizeof(buf));
    /* The kernel answers EPERM when another socket holds the group (and to a caller without
     * CAP_NET_ADMIN, which the daemon is not). */
    if (n < 0 || mnl_cb_run(buf, (size_t)n, seq, portid, NULL, NULL) < 0)
        return wr_err_set(err, errno == EPERM || errno == EBUSY ? WR_ECONFLICT : WR_ESYS, errno,
                          "nflog: bind group %u", l->group);
    return 0;
}

int wr_rt_nflog_open(uint16_t group, struct wr_nflog **out, struct wr_err *err)
{
    char buf[8192];
    struct wr_nflog *l = xcalloc(1, sizeof(*l));
    struct nfulnl_msg_config_cmd cmd = {.command = NFULNL_CFG_CMD_BIND};
    struct nfulnl_msg_config_mode mode = {.copy_range = htonl(NFLOG_COPY_RANGE),
                                          .copy_mode = NFULNL_COPY_PACKET};
    struct nlmsghdr *nlh;
    int size = NFLOG_RCVBUF, fd, fl;

    l->group = group;
    l->nl = mnl_socket_open(NETLINK_NETFILTER);
    if (l->nl == NULL) {
        free(l);
        return wr_err_sys(err, "nflog: netlink socket");
    }
    if (mnl_socket_bind(l->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
        wr_err_sys(err, "nflog: bind netlink socket");
        goto fail;
    }
    fd = mnl_socket_get_fd(l->nl);
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        wr_err_sys(err, "nflog: fcntl");
        goto fail;
    }
    nlh = config_msg(buf, group, 1);
    mnl_attr_put(nlh, NFULA_CFG_CMD, sizeof(cmd), &cmd);
    if (config_send(l, nlh, err) < 0)
        goto fail;
    nlh = config_msg(buf, group, 2);
    mnl_attr_put(nlh, NFULA_CFG_MODE, sizeof(mode), &mode);
    mnl_attr_put_u32(nlh, NFULA_CFG_TIMEOUT, htonl(NFLOG_TIMEOUT_CS));
    if (config_send(l, nlh, err) < 0)
        goto fail;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0 &&
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)) < 0) {
        wr_err_sys(err, "nflog: SO_RCVBUF");
        goto fail;
    }
    fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        wr_err_sys(err, "nflog: fcntl");
        goto fail;
    }
    *out = l;
    return 0;
fail:
    mnl_socket_close(l->nl);
    free(l);
    return -1;
}

int wr_rt_nflog_fd(const struct wr_nflog *l)
{
    return mnl_socket_get_fd(l->nl);
}

struct pkt_attrs {
    const struct nlattr *a[NFULA_MAX + 1];
};

static int attr_cb(const struct nlattr *attr, void *data)
{
    struct pkt_attrs *pa = data;
    int type = mnl_attr_get_type(attr);

    if (mnl_attr_type_valid(attr, NFULA_MAX) > 0)
        pa->a[type] = attr;
    return MNL_CB_OK;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool wr_rt_nflog_parse_ip(const uint8_t *ip, size_t len, struct wr_nflog_pkt *p)
{
    size_t ihl;

    if (len < 20 || ip[0] >> 4 != 4)
        return false;
    ihl = (size_t)(ip[0] & 0x0f) * 4;
    if (ihl < 20 || ihl > len)
        return false;
    p->proto = ip[9];
    p->src = (uint32_t)ip[12] << 24 | (uint32_t)ip[13] << 16 | (uint32_t)ip[14] << 8 | ip[15];
    p->dst = (uint32_t)ip[16] << 24 | (uint32_t)ip[17] << 16 | (uint32_t)ip[18] << 8 | ip[19];
    p->sport = p->dport = 0;
    /* Ports only in a first fragment. */
    if ((p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP || p->proto == IPPROTO_SCTP ||
         p->proto == IPPROTO_UDPLITE) &&
        (((uint16_t)(ip[6] & 0x1f) << 8) | ip[7]) == 0 && len >= ihl + 4) {
        p->sport = (uint16_t)(ip[ihl] << 8 | ip[ihl + 1]);
        p->dport = (uint16_t)(ip[ihl + 2] << 8 | ip[ihl + 3]);
    }
    return true;
}

static int msg_cb(const struct nlmsghdr *nlh, void *data)
{
    struct wr_nflog *l = data;
    struct pkt_attrs pa = {0};
    struct wr_nflog_pkt p = {0};
    const uint8_t *ip;
    size_t len;
    char prefix[256] = "";

    if (nlh->nlmsg_type != ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET))
        return MNL_CB_OK;
    if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), attr_cb, &pa) < 0)
        return MNL_CB_OK;
    if (pa.a[NFULA_PAYLOAD] == NULL)
        return MNL_CB_OK;
    ip = mnl_attr_get_payload(pa.a[NFULA_PAYLOAD]);
    len = mnl_attr_get_payload_len(pa.a[NFULA_PAYLOAD]);
    if (!wr_rt_nflog_parse_ip(ip, len, &p))
        return MNL_CB_OK;
    if (pa.a[NFULA_PREFIX] != NULL) {
        size_t n = mnl_attr_get_payload_len(pa.a[NFULA_PREFIX]);
        if (n >= sizeof(prefix))
            n = sizeof(prefix) - 1;
        memcpy(prefix, mnl_attr_get_payload(pa.a[NFULA_PREFIX]), n);
        prefix[n] = '\0';
    }
    p.prefix = prefix;
    if (pa.a[NFULA_TIMESTAMP] != NULL && mnl_attr_get_payload_len(pa.a[NFULA_TIMESTAMP]) >=
                                             sizeof(struct nfulnl_msg_packet_timestamp)) {
        struct nfulnl_msg_packet_timestamp ts;
        memcpy(&ts, mnl_attr_get_payload(pa.a[NFULA_TIMESTAMP]), sizeof(ts));
        p.time_ms = (int64_t)be64toh(ts.sec) * 1000 + (int64_t)be64toh(ts.usec) / 1000;
    } else {
        p.time_ms = now_ms();
    }
    l->cb(l->arg, &p);
    l->count++;
    return MNL_CB_OK;
}

int wr_rt_nflog_read(struct wr_nflog *l, wr_nflog_fn cb, void *arg, struct wr_err *err)
{
    ssize_t n;

    l->cb = cb;
    l->arg = arg;
    l->count = 0;
    for (;;) {
        n = mnl_socket_recvfrom(l->nl, l->buf, sizeof(l->buf));
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            if (errno == ENOBUFS) {
                l->lost++;
                continue;
            }
            if (errno == EINTR)
                continue;
            return wr_err_sys(err, "read nflog group %u", l->group);
        }
        /* Packets carry seq 0 and portid 0: run without checking them. */
        (void)mnl_cb_run(l->buf, (size_t)n, 0, 0, msg_cb, l);
    }
    return l->count;
}

uint64_t wr_rt_nflog_lost(const struct wr_nflog *l)
{
    return l->lost;
}

void wr_rt_nflog_close(struct wr_nflog *l)
{
    char buf[8192];
    struct nfulnl_msg_config_cmd cmd = {.command = NFULNL_CFG_CMD_UNBIND};
    struct nlmsghdr *nlh;

    if (l == NULL)
        return;
    /* Closing the socket unbinds too; say it, so the group is free at once. */
    nlh = config_msg(buf, l->group, 3);
    nlh->nlmsg_flags = NLM_F_REQUEST;
    mnl_attr_put(nlh, NFULA_CFG_CMD, sizeof(cmd), &cmd);
    (void)mnl_socket_sendto(l->nl, nlh, nlh->nlmsg_len);
    mnl_socket_close(l->nl);
    free(l);
}
