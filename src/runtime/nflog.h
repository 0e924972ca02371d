/* SPDX-License-Identifier: Apache-2.0 */
/* Packets the kernel's ruleset logged to an NFLOG group (nftables `log group G prefix "..."`),
 * read through nfnetlink_log with libmnl: the egress log's record of what the kernel denied. The
 * fd is non-blocking: poll it for reading and call wr_rt_nflog_read. Runs in the caller's network
 * namespace; one socket per group per namespace (the kernel refuses a second). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"

struct wr_nflog_pkt {
    uint32_t src, dst;     /* host byte order */
    uint8_t proto;         /* IPPROTO_* of the IPv4 header */
    uint16_t sport, dport; /* TCP, UDP, SCTP, UDP-Lite; else 0 */
    const char *prefix;    /* the rule's log prefix ("" if none); valid during the callback */
    int64_t time_ms;       /* wall clock: the kernel's timestamp of the packet, or now */
};

typedef void (*wr_nflog_fn)(void *arg, const struct wr_nflog_pkt *p);

struct wr_nflog;

/* Bind NFLOG group `group` (0..65535), copying the first 128 bytes of each packet (enough for
 * the IPv4 and transport headers), the kernel batching for at most 0.2 s. *out is the
 * subscription (close it). WR_ECONFLICT if another socket holds the group (or the caller lacks
 * CAP_NET_ADMIN: the kernel answers both with EPERM); WR_ESYS otherwise. */
int wr_rt_nflog_open(uint16_t group, struct wr_nflog **out, struct wr_err *err);
/* The non-blocking fd to poll for reading. */
int wr_rt_nflog_fd(const struct wr_nflog *l);
/* Read every queued packet's record, calling cb for each IPv4 one. Returns how many, or -1 with
 * err (WR_ESYS) if the socket fails. Records lost to a full buffer (ENOBUFS) are counted
 * (wr_rt_nflog_lost) and reading goes on. */
int wr_rt_nflog_read(struct wr_nflog *l, wr_nflog_fn cb, void *arg, struct wr_err *err);
uint64_t wr_rt_nflog_lost(const struct wr_nflog *l);
/* The addresses, protocol and ports of a logged packet's first len bytes (its IPv4 header, a
 * sandbox's bytes): false if they are not an IPv4 header. Ports are read from a first fragment
 * whose transport header's first 4 bytes are there, else left 0. prefix and time_ms are not
 * touched. */
bool wr_rt_nflog_parse_ip(const uint8_t *ip, size_t len, struct wr_nflog_pkt *p);
/* Unbind and free. NULL-safe. */
void wr_rt_nflog_close(struct wr_nflog *l);
