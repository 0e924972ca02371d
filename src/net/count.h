/* SPDX-License-Identifier: Apache-2.0 */
/* A count per IPv4 address (what each sandbox has in flight), for the limits of the DNS stub and
 * the egress proxy. Entries at zero are removed, so the table holds only active addresses. */
#pragma once

#include <stdint.h>

#define WR_NET_COUNT_BUCKETS 1024

struct wr_net_count_ent;
struct wr_net_counts {
    struct wr_net_count_ent *b[WR_NET_COUNT_BUCKETS];
};

/* The count of addr (0 if absent). */
uint32_t wr_net_count_get(const struct wr_net_counts *c, uint32_t addr);
/* Add 1 to addr's count and return the new count. */
uint32_t wr_net_count_inc(struct wr_net_counts *c, uint32_t addr);
/* Take 1 from addr's count (which must be positive); the entry goes at zero. */
void wr_net_count_dec(struct wr_net_counts *c, uint32_t addr);
/* Free every entry. */
void wr_net_count_fini(struct wr_net_counts *c);
