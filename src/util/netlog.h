/* SPDX-License-Identifier: Apache-2.0 */
/* One entry of a sandbox's egress log (docs/netlog-section.md): a connection, a DNS question or
 * a denied packet, and what decided it. The daemon's services (the DNS stub and egress proxy in
 * src/net/, the conntrack reader in src/core/netlog.c) report entries through a wr_netlog_fn;
 * the sink (core/netlog.h) buffers them and writes them to the store in batches. Here, in util/,
 * so that every layer can include it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct wr_netlog_entry {
    int64_t time_ms;        /* wall clock, ms since the epoch: when the connection began (or
                             * the question was asked, the packet dropped); 0: now */
    const char *sandbox_id; /* required */
    const char *proto;      /* "tcp", "udp", "icmp", "dns" */
    uint32_t addr;          /* destination, host byte order (0: none, as for a refused name) */
    uint16_t port;          /* destination port (0: none) */
    const char *name;       /* SNI, HTTP Host or DNS question; NULL: none */
    uint64_t bytes_out;     /* sandbox → destination */
    uint64_t bytes_in;      /* destination → sandbox */
    bool allowed;
    /* What decided: "allow_out example.com", "deny_out 0.0.0.0/0", "always-denied 10.0.0.0/8",
     * "default", "kernel", an nft log prefix... NULL is stored as "". */
    const char *rule;
};

/* Report an entry. The callee copies what it keeps: e and its strings need only live for the
 * call. Never blocks and never fails (an entry that does not fit is counted and dropped). */
typedef void (*wr_netlog_fn)(void *arg, const struct wr_netlog_entry *e);

/* Longest name and rule kept (longer ones are cut). */
#define WR_NETLOG_NAME_MAX 253
#define WR_NETLOG_RULE_MAX 128
