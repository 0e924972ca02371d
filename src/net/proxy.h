/* SPDX-License-Identifier: Apache-2.0 */
/* The L7 egress proxy (E2B's tcpfirewall). The kernel redirects TCP 80 and 443 of a sandbox
 * whose policy has names here (net-design.md: pre_nat). Per connection it finds the original
 * destination (SO_ORIGINAL_DST) and the sandbox (wr_net_lookup_fn, by source address), then
 * reads the first bytes (within peek_timeout_ms and WR_TLS_PEEK_MAX bytes):
 *   - port 443: the ClientHello's SNI (tls.h); port 80: the request's Host (httphost.h);
 *   - a name the policy allows: the proxy resolves it itself (wr_dns_resolve), takes the first
 *     address outside the always-denied blocks and the extra deny list (an allowed name that
 *     resolves only into them is refused: DNS rebinding), dials it at the original port, sends
 *     the bytes read and splices both ways;
 *   - a name the policy does not allow: closed (port 80 gets a 403 first);
 *   - no name (no SNI, an IP literal, not TLS/HTTP, or nothing sent before the timeout): the
 *     original destination, if wr_net_policy_addr_allowed and not in the deny lists.
 * The proxy never dials an address in the deny lists. A sandbox has at most its
 * peer.max_connections connections here at once. Each connection is reported to wr_netlog_fn
 * when it ends, with the bytes each way and the rule that decided. TLS is never terminated, so
 * domain fronting (an allowed SNI, another Host inside) and ECH are out of its sight; on port 80
 * only the first request head is read, so later requests of a kept-alive connection go to the
 * same server unread (the same limit, in clear text). */
#pragma once

#include <stdint.h>
#include <uv.h>

#include "../util/err.h"
#include "../util/inet.h"
#include "dns.h"
#include "peer.h"

struct wr_proxy_config {
    uint32_t bind_addr;          /* host order; 0: 0.0.0.0 */
    uint16_t port;               /* 0: ephemeral (wr_proxy_port) */
    const struct wr_cidr4 *deny; /* the operator's extra deny list; copied */
    size_t n_deny;
    wr_net_lookup_fn lookup; /* required */
    void *lookup_arg;
    wr_netlog_fn log; /* may be NULL */
    void *log_arg;
    struct wr_dns *dns;          /* the resolver (required); stop the proxy before it */
    unsigned peek_timeout_ms;    /* 0: 10000 */
    unsigned connect_timeout_ms; /* 0: 10000 */
    unsigned max_total;          /* connections at once, all sandboxes; 0: 65536 */
};

struct wr_proxy;

/* Listen on TCP. The config is copied. -1 with WR_EINVAL (no lookup or dns) or WR_ESYS. */
int wr_proxy_start(uv_loop_t *loop, const struct wr_proxy_config *cfg, struct wr_proxy **out,
                   struct wr_err *err);

uint16_t wr_proxy_port(const struct wr_proxy *px);

/* Close the listener and every connection (each is logged), free everything once the loop has
 * run the close callbacks. px may be NULL. */
void wr_proxy_stop(struct wr_proxy *px);

struct wr_proxy_stats {
    uint64_t accepted, refused, spliced, timeouts;
    unsigned active;
};
void wr_proxy_get_stats(const struct wr_proxy *px, struct wr_proxy_stats *out);
