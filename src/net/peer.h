/* SPDX-License-Identifier: Apache-2.0 */
/* What the daemon's egress services (the DNS stub, dns.h, and the L7 proxy, proxy.h) need from
 * the daemon: who a source address is, and where to report what they decided. Contracts of
 * /work/wt/notes/net-design.md. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "policy.h"

/* A sandbox as the services see it. The services use policy only inside the call that looked
 * it up (before returning to the loop) and copy sandbox_id, so both need only live until then. */
struct wr_net_peer {
    const char *sandbox_id;
    const struct wr_net_policy *policy;
    uint32_t max_connections; /* the cap on its concurrent proxied connections; 0: none */
};

/* Fill *out for the sandbox whose address is saddr (host order); false if there is none. Called
 * on the services' loop thread. */
typedef bool (*wr_net_lookup_fn)(void *arg, uint32_t saddr, struct wr_net_peer *out);

/* One decision for the egress log. The strings live only during the call. */
struct wr_netlog_entry {
    int64_t time_ms; /* CLOCK_REALTIME */
    const char *sandbox_id;
    const char *proto; /* "tcp", "udp", "dns" */
    uint32_t addr;     /* host order: the address dialled, or a DNS answer's first A (0: none) */
    uint16_t port;
    const char *name; /* SNI, Host or DNS question, or NULL */
    uint64_t bytes_out, bytes_in;
    bool allowed;
    const char *rule; /* "allow_out example.com", "deny_out 0.0.0.0/0", "always-denied ...", ... */
};
typedef void (*wr_netlog_fn)(void *arg, const struct wr_netlog_entry *e);
