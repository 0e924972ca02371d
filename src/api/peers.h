/* SPDX-License-Identifier: Apache-2.0 */
/* How many connections each client address holds: the HTTP server's per-client cap. A client is
 * an IPv4 address or an IPv6 /64 (one host's share of a network; an IPv6 host can take any
 * address of its /64). IPv4-mapped IPv6 addresses count as the IPv4 address. */
#pragma once

#include <stdint.h>
#include <sys/socket.h>

struct wr_peer_key {
    uint8_t b[16];
};

struct wr_peers;

struct wr_peers *wr_peers_new(void);
void wr_peers_free(struct wr_peers *t);

/* The client key of a socket address (AF_INET or AF_INET6; any other family gives one key for
 * all). */
void wr_peer_key_of(const struct sockaddr *sa, struct wr_peer_key *out);

/* Count one more connection for key; returns the count including it. */
uint32_t wr_peers_add(struct wr_peers *t, const struct wr_peer_key *key);
/* Count one connection less (the key must have been added). */
void wr_peers_del(struct wr_peers *t, const struct wr_peer_key *key);
/* The number of keys with a connection (for tests). */
uint32_t wr_peers_size(const struct wr_peers *t);
