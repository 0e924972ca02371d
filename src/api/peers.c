/* SPDX-License-Identifier: Apache-2.0 */
/* A chained hash table of client keys and their connection counts. Entries go when their count
 * reaches zero, so the table holds at most as many keys as there are connections. The hash is
 * keyed with a random seed: a client choosing its addresses cannot aim them at one chain. */
#include "peers.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "../util/xalloc.h"

#define MIN_BUCKETS 64

struct peer {
    struct peer *next;
    struct wr_peer_key key;
    uint32_t n;
};

struct wr_peers {
    struct peer **b;
    size_t nb, n;
    uint64_t seed;
};

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static size_t slot(const struct wr_peers *t, const struct wr_peer_key *k)
{
    uint64_t lo, hi;

    memcpy(&lo, k->b, 8);
    memcpy(&hi, k->b + 8, 8);
    return (size_t)(mix(mix(lo ^ t->seed) ^ hi) & (t->nb - 1));
}

struct wr_peers *wr_peers_new(void)
{
    struct wr_peers *t = xcalloc(1, sizeof(*t));

    t->nb = MIN_BUCKETS;
    t->b = xcalloc(t->nb, sizeof(*t->b));
    if (getrandom(&t->seed, sizeof(t->seed), 0) != sizeof(t->seed))
        t->seed = (uint64_t)(uintptr_t)t * 0x9E3779B97F4A7C15ull;
    return t;
}

void wr_peers_free(struct wr_peers *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->nb; i++) {
        while (t->b[i]) {
            struct peer *p = t->b[i];
            t->b[i] = p->next;
            free(p);
        }
    }
    free(t->b);
    free(t);
}

void wr_peer_key_of(const struct sockaddr *sa, struct wr_peer_key *out)
{
    static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    memset(out, 0, sizeof(*out));
    if (sa->sa_family == AF_INET) {
        memcpy(out->b, v4mapped, 12);
        memcpy(out->b + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const uint8_t *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        if (memcmp(a, v4mapped, 12) == 0)
            memcpy(out->b, a, 16);
        else
            memcpy(out->b, a, 8); /* the /64 */
    }
}

static void grow(struct wr_peers *t, size_t nb)
{
    struct peer **old = t->b;
    size_t onb = t->nb;

    t->b = xcalloc(nb, sizeof(*t->b));
    t->nb = nb;
    for (size_t i = 0; i < onb; i++) {
        while (old[i]) {
            struct peer *p = old[i];
            old[i] = p->next;
            size_t s = slot(t, &p->key);
            p->next = t->b[s];
            t->b[s] = p;
        }
    }
    free(old);
}

uint32_t wr_peers_add(struct wr_peers *t, const struct wr_peer_key *key)
{
    struct peer *p;
    size_t s = slot(t, key);

    for (p = t->b[s]; p; p = p->next)
        if (memcmp(&p->key, key, sizeof(*key)) == 0)
            return ++p->n;
    p = xcalloc(1, sizeof(*p));
    p->key = *key;
    p->n = 1;
    p->next = t->b[s];
    t->b[s] = p;
    if (++t->n > 2 * t->nb)
        grow(t, t->nb * 4);
    return 1;
}

void wr_peers_del(struct wr_peers *t, const struct wr_peer_key *key)
{
    struct peer **pp = &t->b[slot(t, key)];

    while (*pp && memcmp(&(*pp)->key, key, sizeof(*key)) != 0)
        pp = &(*pp)->next;
    if (*pp == NULL || --(*pp)->n > 0)
        return;
    struct peer *p = *pp;
    *pp = p->next;
    free(p);
    t->n--;
}

uint32_t wr_peers_size(const struct wr_peers *t)
{
    return (uint32_t)t->n;
}
