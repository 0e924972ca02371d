/* SPDX-License-Identifier: Apache-2.0 */
/* conntrack.h: a filtered flush through ctnetlink. The kernel walks its table once and removes
 * the entries whose original tuple matches the filter (CTA_FILTER with CTA_TUPLE_ORIG, since
 * Linux 5.8 for dumps and 6.x for flushes): no dump to userspace. */
#include "conntrack.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* The kernel's CTA_FILTER flag for the tuple's source address (nf_conntrack_netlink.c). */
#define CT_FILTER_F_IP_SRC (1u << 0)

int wr_conntrack_flush_addr(uint32_t addr, struct wr_err *err)
{
    char buf[8192];
    struct mnl_socket *nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
    struct nlmsghdr *nlh;
    struct nfgenmsg *nfg;
    struct nlattr *tuple, *ip, *filter;
    uint32_t be = htonl(addr), seq = (uint32_t)time(NULL), portid;
    int rc = 0;

    if (nl == NULL || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
        wr_err_sys(err, "conntrack: netlink socket");
        if (nl != NULL)
            mnl_socket_close(nl);
        return -1;
    }
    portid = mnl_socket_get_portid(nl);
    nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    nlh->nlmsg_seq = seq;
    nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
    nfg->nfgen_family = AF_INET;
    nfg->version = 1; /* a flush of this family only (version 0 flushes every family) */
    nfg->res_id = 0;
    tuple = mnl_attr_nest_start(nlh, CTA_TUPLE_ORIG);
    ip = mnl_attr_nest_start(nlh, CTA_TUPLE_IP);
    mnl_attr_put(nlh, CTA_IP_V4_SRC, 4, &be);
    mnl_attr_nest_end(nlh, ip);
    mnl_attr_nest_end(nlh, tuple);
    filter = mnl_attr_nest_start(nlh, CTA_FILTER);
    /* host byte order, unlike the rest of ctnetlink */
    mnl_attr_put_u32(nlh, CTA_FILTER_ORIG_FLAGS, CT_FILTER_F_IP_SRC);
    mnl_attr_put_u32(nlh, CTA_FILTER_REPLY_FLAGS, 0);
    mnl_attr_nest_end(nlh, filter);
    if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
        rc = wr_err_sys(err, "conntrack: send");
        goto out;
    }
    for (;;) {
        struct pollfd p = {.fd = mnl_socket_get_fd(nl), .events = POLLIN};
        ssize_t n;

        if (poll(&p, 1, 10000) <= 0) {
            rc = wr_err_set(err, WR_ESYS, ETIMEDOUT, "conntrack: no answer");
            goto out;
        }
        n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
        if (n < 0) {
            rc = wr_err_sys(err, "conntrack: receive");
            goto out;
        }
        n = mnl_cb_run(buf, (size_t)n, seq, portid, NULL, NULL);
        if (n == MNL_CB_STOP)
            break;
        if (n < 0) {
            /* ENOENT: nothing matched */
            if (errno != ENOENT)
                rc = wr_err_sys(err, "conntrack: flush entries of an address");
            break;
        }
    }
out:
    mnl_socket_close(nl);
    return rc;
}
