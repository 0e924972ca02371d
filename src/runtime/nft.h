/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's one nftables table, `inet <table>`, programmed through libnftnl + libmnl netlink
 * batches (one NFNL_MSG_BATCH_BEGIN … END transaction per call; no libnftables, no `nft`
 * process, no dump of the ruleset and no cache). Layout (net-design.md):
 *
 *   set slots  { type ifname }                   every ready slot (host-end names)
 *   set owned  { type ifname . ipv4_addr }       host end . sandbox address of in-use slots
 *   map egress { type ifname : verdict }         in-use slot -> jump sb_<i>
 *   set l7     { type ifname }                   slots whose policy has names
 *   set deny4  { type ipv4_addr; flags interval } always denied (wr_nft_config.deny)
 *   pre_raw  (prerouting, raw):  from a slot: source not owned -> drop; IPv6 -> drop
 *   pre_nat  (prerouting, dstnat): from a slot: tcp/udp 53 -> redirect :dns_port;
 *                                  from an l7 slot: tcp 80/443 -> redirect :proxy_port
 *   input    from a slot: established/related, dns_port, proxy_port accept, else drop;
 *            tcp/udp to dns_port or proxy_port from elsewhere: drop
 *   forward  to a slot: established/related accept, else drop; from a slot: jump sb_egress;
 *            [forwarding was off before Warren: new connections of others dropped]
 *   sb_egress  to a slot: drop; iifname vmap @egress; drop
 *   sb_<i>     established/related accept; daddr @deny4 reject; [l7: udp 443 drop];
 *              [ct state new, ct count over N: reject]; allow CIDRs accept; deny CIDRs
 *              reject; accept or reject. Named counters ok<i> / no<i> count what it accepted
 *              and refused.
 *   post_nat (postrouting, srcnat): saddr in the pool, not out to a slot -> masquerade
 *
 * Per-packet work is flat in the number of sandboxes (set and map lookups, and the sandbox's
 * own chain), and so is every update: a call touches the sandbox's own chain, counters and set
 * elements only. One owner thread (the handle is not locked). The calling thread's network
 * namespace is the one programmed (the handle's socket is opened in it). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"
#include "../util/inet.h"

struct wr_nft;

struct wr_nft_config {
    const char *table;           /* `inet <table>`; [a-z0-9_]{1,32} */
    struct wr_cidr4 pool;        /* the slots' pool (netslot.h) */
    uint16_t dns_port;           /* port-53 traffic of slots goes here; 0: not redirected */
    uint16_t proxy_port;         /* l7 slots' TCP 80/443 goes here; 0: not redirected */
    const struct wr_cidr4 *deny; /* always denied (wr_inet4_always_denied, --net-deny, LANs) */
    size_t n_deny;
    /* where <state_dir>/forward-was-off is kept: written the first time this host's
     * net.ipv4.ip_forward is found 0 and turned on, so that later starts (ip_forward then 1)
     * still keep the host from routing for others. NULL: not recorded. */
    const char *state_dir;
    uint32_t log_group; /* refused new connections are logged to this NFLOG group, at most
                           20/s per sandbox; 0: not logged */
};

/* The compiled per-sandbox entry (net-design.md). */
struct wr_nft_sandbox {
    uint32_t slot; /* index in the pool */
    const struct wr_cidr4 *allow;
    size_t n_allow;
    const struct wr_cidr4 *deny;
    size_t n_deny;
    bool accept_rest;         /* what neither list matched: accept (internet) or reject */
    bool l7;                  /* TCP 80/443 to the proxy, UDP 443 dropped */
    uint32_t max_connections; /* 0: no cap */
};

/* Open the table: set net.ipv4.ip_forward=1 (recording forward-was-off as described above),
 * raise the host's neighbour gc thresholds if they are low, and build the whole table in ONE
 * transaction (the old table of this name, if any, deleted in the same one), with the ready
 * slots ready_slots[0..n_ready-1] in @slots and the sandboxes sbs[0..n-1] set as by
 * wr_nft_set: so a restart opens or closes nobody's network. Returns 0 and *out, or -1 with err
 * (the kernel's table is then as it was). */
int wr_nft_open(const struct wr_nft_config *cfg, const struct wr_nft_sandbox *sbs, size_t n,
                const uint32_t *ready_slots, size_t n_ready, struct wr_nft **out,
                struct wr_err *err);

/* A ready slot into @slots (its traffic is then dropped unless a sandbox is set on it), or out
 * of it. Adding one that is in, or removing one that is not, is no error. */
int wr_nft_slot_add(struct wr_nft *t, uint32_t slot, struct wr_err *err);
int wr_nft_slot_remove(struct wr_nft *t, uint32_t slot, struct wr_err *err);

/* Add or replace one sandbox's entries in one transaction: its @owned element, @l7 element
 * (added or removed), chain sb_<slot> (made, or flushed and refilled) and @egress element.
 * Established connections stay up; new ones follow the new policy. WR_EINVAL for a slot
 * outside the pool. */
int wr_nft_set(struct wr_nft *t, const struct wr_nft_sandbox *sb, struct wr_err *err);

/* Remove a sandbox's entries (its chain and counters too); the slot stays in @slots, so its
 * traffic is dropped. A slot with nothing set is no error. */
int wr_nft_unset(struct wr_nft *t, uint32_t slot, struct wr_err *err);

/* What sb_<slot> accepted (outgoing packets of established and allowed connections) and
 * refused, since the sandbox was set on the slot. WR_ENOTFOUND if nothing is set there. */
struct wr_nft_counters {
    uint64_t accepted_packets, accepted_bytes;
    uint64_t dropped_packets, dropped_bytes;
};
int wr_nft_counters(struct wr_nft *t, uint32_t slot, struct wr_nft_counters *c, struct wr_err *err);

/* Free the handle and leave the table in the kernel (sandboxes outlive the daemon). */
void wr_nft_close(struct wr_nft *t);
/* Remove the table from the kernel, then free the handle. Returns 0 or -1 with err (the handle
 * is freed either way). */
int wr_nft_destroy(struct wr_nft *t, struct wr_err *err);
