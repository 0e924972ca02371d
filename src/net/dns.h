/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's DNS stub for sandboxes. The kernel redirects every port-53 packet and connection
 * of a slot to it (net-design.md), so whatever server a sandbox names, it asks this one. It
 * finds the sandbox by source address (wr_net_lookup_fn) and applies its policy:
 *   - unknown source: REFUSED;
 *   - a policy with names: only names wr_net_policy_name_allowed accepts are forwarded, every
 *     other question is REFUSED (no exfiltration through <data>.evil.test);
 *   - deny-all without names: REFUSED;
 *   - otherwise forwarded.
 * Forwarded questions are asked again (built afresh, libldns) of the upstreams over UDP with a
 * fresh random id per attempt, from connected sockets (only the upstream's address and port are
 * heard) whose source ports the kernel picks at random and which are replaced every 64
 * questions; over TCP when the answer is truncated; the next upstream after a timeout or an
 * ICMP refusal. In the answer to the sandbox, A records in the always-denied blocks or the extra
 * deny list, and every AAAA record, are removed. Every question is reported to wr_netlog_fn.
 * wr_dns_resolve offers the same upstream path to the egress proxy (rather than c-ares: one set
 * of upstreams, retries, limits and counters, and no second resolver to drive from the loop).
 * All on one libuv loop. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "../util/err.h"
#include "../util/inet.h"
#include "peer.h"

/* An upstream server (host order). */
struct wr_dns_upstream {
    uint32_t addr;
    uint16_t port;
};

#define WR_DNS_MAX_UPSTREAMS 8

struct wr_dns_config {
    uint32_t bind_addr; /* host order; 0: 0.0.0.0 */
    uint16_t port;      /* UDP and TCP; 0: an ephemeral port free for both (wr_dns_port) */
    const struct wr_dns_upstream *upstreams; /* at most WR_DNS_MAX_UPSTREAMS; copied */
    size_t n_upstreams;                      /* 0: the nameservers of /etc/resolv.conf */
    const struct wr_cidr4 *deny;             /* the operator's extra deny list; copied */
    size_t n_deny;
    wr_net_lookup_fn lookup; /* required */
    void *lookup_arg;
    wr_netlog_fn log; /* may be NULL */
    void *log_arg;
    unsigned timeout_ms;       /* per upstream attempt; 0: 2000 */
    unsigned attempts;         /* upstream attempts per question; 0: 2 per upstream, at least 2 */
    unsigned max_inflight;     /* questions waiting for an upstream; 0: 4096 */
    unsigned max_inflight_per; /* of them, from one sandbox; 0: 256 */
    unsigned max_tcp;          /* TCP clients at once; 0: 512 */
};

struct wr_dns;
struct wr_dns_req;

/* Start the stub on loop: bind UDP and TCP, start listening. The config is copied. -1 with
 * WR_EINVAL (no lookup, too many upstreams, none found in /etc/resolv.conf) or WR_ESYS. */
int wr_dns_start(uv_loop_t *loop, const struct wr_dns_config *cfg, struct wr_dns **out,
                 struct wr_err *err);

/* The port the stub listens on (UDP and TCP). */
uint16_t wr_dns_port(const struct wr_dns *dns);

/* Stop: close the sockets, drop the questions in flight (resolve callbacks get
 * WR_DNS_CANCELED), free everything once the loop has run the close callbacks. dns may be NULL. */
void wr_dns_stop(struct wr_dns *dns);

/* The IPv4 nameservers of a resolv.conf (port 53), at most max. 0 with *n set (maybe 0), -1
 * with WR_ESYS if the file cannot be read. */
int wr_dns_resolv_conf(const char *path, struct wr_dns_upstream *out, size_t max, size_t *n,
                       struct wr_err *err);

enum wr_dns_status {
    WR_DNS_OK,       /* addrs holds the answer's A records (maybe none: no such record) */
    WR_DNS_NXDOMAIN, /* no such name */
    WR_DNS_FAIL,     /* the upstreams failed (timeout, SERVFAIL, REFUSED, a bad answer) */
    WR_DNS_LIMIT,    /* too many questions in flight */
    WR_DNS_CANCELED, /* wr_dns_stop */
};

/* addrs: host order, in the answer's order, every A record of the answer (the caller checks them
 * against its deny lists); valid during the call. */
typedef void (*wr_dns_resolve_cb)(void *arg, enum wr_dns_status status, const uint32_t *addrs,
                                  size_t n);

/* Ask the upstreams for name's A records; cb runs later on the loop, exactly once, unless the
 * request is cancelled first. Returns the request, or NULL if name is not a valid host name (cb
 * is then never called). */
struct wr_dns_req *wr_dns_resolve(struct wr_dns *dns, const char *name, wr_dns_resolve_cb cb,
                                  void *arg);

/* Cancel a request whose callback has not run: it never runs. */
void wr_dns_cancel(struct wr_dns_req *req);

/* Counters, for tests and metrics. */
struct wr_dns_stats {
    uint64_t queries, refused, forwarded, failed, truncated_retries, stripped;
    unsigned inflight;
};
void wr_dns_get_stats(const struct wr_dns *dns, struct wr_dns_stats *out);
