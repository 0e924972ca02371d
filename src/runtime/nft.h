/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's one nftables table, `inet <table>`, programmed through libnftnl + libmnl netlink
 * batches (one NFNL_MSG_BATCH_BEGIN … END transaction per call; no libnftables, no `nft`
 * process, no dump of the ruleset and no cache). Layout (net-design.md, with the per-sandbox
 * part as set elements, see below):
 *
 *   set slots  { type ifname }                    every ready slot (host-end names)
 *   set owned  { type ifname . ipv4_addr }        host end . sandbox address of in-use slots
 *   set l7     { type ifname }                    slots whose policy has names
 *   set open   { type ifname }                    slots whose default is accept
 *   set deny4  { type ipv4_addr; flags interval } always denied (wr_nft_config.deny)
 *   set a<L>, d<L> { type ifname . ipv4_addr }    allow_out / deny_out blocks of length L,
 *                                                 made the first time a length is used
 *   set cap<N> { type ifname }, cc<N> (dynamic)   slots capped at N connections
 *   map okc, noc, inc { type ifname : counter }   each slot's counters ok<i>, no<i>, in<i>
 *   pre_raw  (prerouting, raw): from a slot: source not owned -> drop; IPv6 -> drop
 *   pre_nat  (prerouting, dstnat): from a slot: tcp/udp 53 -> redirect :dns_port;
 *                                  from an l7 slot: tcp 80/443 -> redirect :proxy_port
 *   input    from a slot: established/related, dns_port, proxy_port accept, else drop;
 *            tcp/udp to dns_port or proxy_port from elsewhere: drop
 *   forward  to a slot: established/related: count in (by oifname), accept, else drop;
 *            from a slot: jump sb_egress;
 *            [forwarding was off before Warren: other new connections dropped]
 *   sb_egress  to a slot: drop; established/related: count ok, accept; daddr @deny4: count
 *              no, reject; l7 slot udp 443: drop; jump sb_caps (ct state new, iifname @cap<N>,
 *              add @cc<N> { iifname ct count over N }: reject); jump sb_allow (iifname . daddr
 *              & mask(L) @a<L>: accept, one rule per L); jump sb_deny (same with @d<L>:
 *              reject); iifname @open: accept; else reject. Counting is `counter name iifname
 *              map @okc|@noc`.
 *   post_nat (postrouting, srcnat): saddr in the pool, not out to a slot -> masquerade
 *
 * Why no chain per sandbox (net-design.md's sb_<i> reached by a verdict map): every
 * transaction that adds a rule or a jump makes the kernel validate all chains reachable from
 * the base chains (loop detection), which measured 24 ms per policy update with 10,000
 * sandboxes' chains. Here an update only adds and deletes set elements and named counters
 * (no validation), and the fixed rules grow only with the prefix lengths and caps in use (at
 * most 33 + 33 + the distinct caps). Per-packet work is flat in the number of sandboxes
 * (hash lookups); per new connection it grows with the prefix lengths in use. One owner
 * thread (the handle is not locked). The calling thread's network namespace is the one
 * programmed (the handle's socket is opened in it). */
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
    uint32_t log_group; /* refused new connections are logged to this NFLOG group (prefix
                           "warren always-denied ", "warren deny_out " or "warren default "), at
                           most 100/s for each of the three over all sandboxes; 0: none */
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
 * of it (only for a slot about to be destroyed: a slot outside @slots escapes every rule).
 * Adding one that is in, or removing one that is not, is no error. */
int wr_nft_slot_add(struct wr_nft *t, uint32_t slot, struct wr_err *err);
int wr_nft_slot_remove(struct wr_nft *t, uint32_t slot, struct wr_err *err);

/* Add or replace one sandbox's entries in one transaction: its @owned, @okc/@noc elements and
 * counters, and its slot in @slots if it was not (when first set), and the difference between its
 * old and new policy in @a<L>,
 * @d<L>, @cap<N>, @open and @l7. Blocks are taken with their host bits cleared; repeats are
 * ignored. Established connections stay up; new ones follow the new policy. WR_EINVAL for a
 * slot outside the pool. */
int wr_nft_set(struct wr_nft *t, const struct wr_nft_sandbox *sb, struct wr_err *err);

/* Remove a sandbox's entries (its counters too); the slot stays in @slots, so its traffic is
 * dropped. A slot with nothing set is no error. */
int wr_nft_unset(struct wr_nft *t, uint32_t slot, struct wr_err *err);

/* What the slot's sandbox sent that was accepted (its outgoing packets of established and
 * allowed connections; not what went to the DNS stub or the proxy), what was refused, and what
 * it received through the host's forwarding (the other side of those connections; not the
 * answers of the DNS stub or the proxy), since the sandbox was set on the slot. WR_ENOTFOUND if
 * nothing is set there. */
struct wr_nft_counters {
    uint64_t accepted_packets, accepted_bytes;
    uint64_t dropped_packets, dropped_bytes;
    uint64_t received_packets, received_bytes;
};
int wr_nft_counters(struct wr_nft *t, uint32_t slot, struct wr_nft_counters *c, struct wr_err *err);

/* Free the handle and leave the table in the kernel (sandboxes outlive the daemon). */
void wr_nft_close(struct wr_nft *t);
/* Remove the table from the kernel, then free the handle. Returns 0 or -1 with err (the handle
 * is freed either way). */
int wr_nft_destroy(struct wr_nft *t, struct wr_err *err);
