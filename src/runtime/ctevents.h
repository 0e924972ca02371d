/* SPDX-License-Identifier: Apache-2.0 */
/* Conntrack events (ctnetlink, through libnetfilter_conntrack): the connections that the
 * sandboxes of an address pool open, as the kernel tracks them, with their byte and packet counts
 * when they end. The socket's BPF filter (nfct_filter) passes only flows whose original source is
 * in the pool, so the daemon never reads the host's other flows. The fd is non-blocking: poll it
 * for reading and call wr_rt_ctevents_read. Runs in the caller's network namespace. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "../util/err.h"
#include "../util/inet.h"

/* Which events to subscribe to (a bit mask). */
#define WR_CT_EV_NEW     1u
#define WR_CT_EV_DESTROY 2u

struct wr_ct_event {
    unsigned type;         /* WR_CT_EV_NEW or WR_CT_EV_DESTROY */
    uint8_t proto;         /* IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMP, ... */
    uint32_t src, dst;     /* original direction, host byte order */
    uint16_t sport, dport; /* 0 for protocols without ports (ICMP) */
    /* The destination was rewritten (a redirect to the daemon's DNS stub or egress proxy): the
     * reply comes from another address or port than the one the sandbox asked for. */
    bool dnat;
    /* DESTROY with accounting on: original direction (out) and reply (in), IP headers
     * included. */
    uint64_t bytes_out, bytes_in, packets_out, packets_in;
    /* Wall clock, ms since the epoch, from the kernel's conntrack timestamps (DESTROY); 0 if
     * the entry has none (it began before timestamps were switched on). */
    int64_t start_ms, end_ms;
    uint32_t id; /* the kernel's conntrack id */
};

typedef void (*wr_ct_event_fn)(void *arg, const struct wr_ct_event *ev);

struct wr_ctevents;

/* Subscribe to `events` (WR_CT_EV_*) for the IPv4 flows whose original source is in pool. Sets
 * net.netfilter.nf_conntrack_acct=1 and nf_conntrack_timestamp=1 in the caller's netns (only
 * connections tracked after that have counts and times), raises the socket's receive buffer.
 * *out is the subscription (close it). WR_ESYS if netlink or the sysctls refuse (not root). */
int wr_rt_ctevents_open(const struct wr_cidr4 *pool, unsigned events, struct wr_ctevents **out,
                        struct wr_err *err);
/* The non-blocking fd to poll for reading. */
int wr_rt_ctevents_fd(const struct wr_ctevents *c);
/* Read every event queued, calling cb for each whose source is in the pool. Returns the number
 * of events passed to cb, or -1 with err (WR_ESYS) if the socket fails. When the kernel dropped
 * events because the socket's buffer was full (ENOBUFS), they are counted (wr_rt_ctevents_lost)
 * and reading goes on. */
int wr_rt_ctevents_read(struct wr_ctevents *c, wr_ct_event_fn cb, void *arg, struct wr_err *err);
/* How many times events were lost to a full buffer since open. */
uint64_t wr_rt_ctevents_lost(const struct wr_ctevents *c);
/* Unsubscribe and free. NULL-safe. */
void wr_rt_ctevents_close(struct wr_ctevents *c);
