/* SPDX-License-Identifier: Apache-2.0 */
#include "count.h"

#include <stdlib.h>

#include "../util/xalloc.h"

struct wr_net_count_ent {
    struct wr_net_count_ent *next;
    uint32_t addr, n;
};

static unsigned bucket(uint32_t addr)
{
    return (addr * 2654435761u) >> 22; /* 10 bits */
}

uint32_t wr_net_count_get(const struct wr_net_counts *c, uint32_t addr)
{
    for (struct wr_net_count_ent *e = c->b[bucket(addr)]; e != NULL; e = e->next)
        if (e->addr == addr)
            return e->n;
    return 0;
}

uint32_t wr_net_count_inc(struct wr_net_counts *c, uint32_t addr)
{
    struct wr_net_count_ent **h = &c->b[bucket(addr)], *e;

    for (e = *h; e != NULL; e = e->next)
        if (e->addr == addr)
            return ++e->n;
    e = xmalloc(sizeof(*e));
    *e = (struct wr_net_count_ent){*h, addr, 1};
    *h = e;
    return 1;
}

void wr_net_count_dec(struct wr_net_counts *c, uint32_t addr)
{
    for (struct wr_net_count_ent **p = &c->b[bucket(addr)]; *p != NULL; p = &(*p)->next)
        if ((*p)->addr == addr) {
            if (--(*p)->n == 0) {
                struct wr_net_count_ent *e = *p;
                *p = e->next;
                free(e);
            }
            return;
        }
}

void wr_net_count_fini(struct wr_net_counts *c)
{
    for (unsigned i = 0; i < WR_NET_COUNT_BUCKETS; i++)
        while (c->b[i] != NULL) {
            struct wr_net_count_ent *e = c->b[i];
            c->b[i] = e->next;
            free(e);
        }
}
