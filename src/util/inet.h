/* SPDX-License-Identifier: Apache-2.0 */
/* IPv4 addresses and CIDR blocks, as the network policy, the slot pool and the nftables table
 * share them. Addresses are kept in host byte order (ntohl of s_addr) so that ranges compare as
 * integers; convert at the socket and netlink boundaries. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* An IPv4 block: addr with the host bits cleared, len 0..32. */
struct wr_cidr4 {
    uint32_t addr;
    uint8_t len;
};

/* Text form of an address: "198.18.0.1" (at least WR_INET4_STRLEN bytes). */
#define WR_INET4_STRLEN 16
/* Text form of a block: "198.18.0.0/15". */
#define WR_CIDR4_STRLEN 20

/* A dotted-quad IPv4 address, exactly four decimal parts 0..255 with no leading zeros (inet_pton's
 * rules: "010.0.0.1", "1.2.3" and "1.2.3.4 " are refused). false if s is not one. */
bool wr_inet4_parse(const char *s, uint32_t *addr);
/* "a.b.c.d/len" or a bare address (len 32). The host bits must be zero unless lenient, in which
 * case they are cleared ("10.1.2.3/8" → 10.0.0.0/8). -1 with a WR_EINVAL err naming s. */
int wr_cidr4_parse(const char *s, bool lenient, struct wr_cidr4 *out, struct wr_err *err);

void wr_inet4_format(uint32_t addr, char out[WR_INET4_STRLEN]);
/* "a.b.c.d/len", or "a.b.c.d" for a /32 when bare_host. */
void wr_cidr4_format(const struct wr_cidr4 *c, bool bare_host, char out[WR_CIDR4_STRLEN]);

/* The mask of a prefix length (0 → 0, 32 → 0xffffffff). */
static inline uint32_t wr_cidr4_mask(uint8_t len)
{
    return len == 0 ? 0 : ~(uint32_t)0 << (32 - len);
}

static inline bool wr_cidr4_contains(const struct wr_cidr4 *c, uint32_t addr)
{
    return (addr & wr_cidr4_mask(c->len)) == c->addr;
}

/* The first and last address of the block. */
static inline uint32_t wr_cidr4_last(const struct wr_cidr4 *c)
{
    return c->addr | ~wr_cidr4_mask(c->len);
}

/* true if the two blocks share an address. */
bool wr_cidr4_overlap(const struct wr_cidr4 *a, const struct wr_cidr4 *b);

/* true if addr is in one of the n blocks. */
bool wr_cidr4_in(const struct wr_cidr4 *set, size_t n, uint32_t addr);

/* The blocks no sandbox may reach whatever its policy says, besides the host's own addresses and
 * the operator's --net-deny: "this" network, loopback, RFC 1918, CGNAT, link-local (the metadata
 * address among them), the IETF protocol block, the documentation nets, multicast and the
 * reserved block. Not the benchmarking block 198.18.0.0/15: it is the tests' "internet". */
extern const struct wr_cidr4 wr_inet4_always_denied[];
extern const size_t wr_inet4_n_always_denied;
