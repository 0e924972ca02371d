/* SPDX-License-Identifier: Apache-2.0 */
/* The egress log's sink: buffer, batch writes, the per-sandbox bound, followers, and the kernel's
 * conntrack and NFLOG events turned into entries (see netlog.h). */
#include "netlog.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../runtime/ctevents.h"
#include "../runtime/nflog.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "core_int.h"

#define SB_BUCKETS 1024
/* A sandbox's state (its row count, read once) is forgotten after this long without entries or
 * followers. */
#define IDLE_MS (5 * 60 * 1000)
/* Entries per transaction: a write holds the loop for about 8 ms per 1,000 (test_netlog). */
#define FLUSH_MAX 1024

struct sbstate {
    struct sbstate *hnext;
    char *id;
    int64_t count;   /* its rows in the store; -1 until read */
    int64_t used_ms; /* monotonic: last entry or follower */
    bool touched;    /* in the batch being written */
    struct wr_netlog_sub *subs;
};

/* An address whose slot was released, and whose it was (wr_netlog_released). */
struct tomb {
    struct tomb *next;
    uint32_t addr;
    int64_t until_ms; /* monotonic */
    char *id;
};
#define TOMB_BUCKETS 256
#define TOMB_MS      30000

struct wr_netlog_sub {
    struct wr_netlog *nl;
    struct sbstate *sb;
    struct wr_netlog_sub *prev, *next;
    wr_netlog_follow_fn cb;
    void *ctx;
    int64_t after; /* the last id it got */
    bool dead;     /* unfollowed or ended while callbacks ran: freed after them */
};

struct wr_netlog {
    uv_loop_t *loop;
    struct wr_store *store;
    wr_netlog_lookup_fn lookup;
    void *lookup_arg;
    uint32_t keep;
    struct wr_ctevents *ct;
    struct wr_nflog *nfl;
    uv_poll_t ct_poll, nfl_poll;
    uv_timer_t tick; /* every WR_NETLOG_FLUSH_MS */
    uv_idle_t kick;  /* while WR_NETLOG_BATCH are waiting: a batch per loop iteration */
    bool ct_on, nfl_on, kicked;
    unsigned open_handles;
    unsigned ticks;
    int delivering; /* > 0 while followers' callbacks run */
    struct wr_netlog_rec *pending;
    size_t npending, cap;
    struct sbstate *buckets[SB_BUCKETS];
    struct tomb *tombs[TOMB_BUCKETS];
    struct wr_netlog_stats st;
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- per-sandbox state ------------------------------------------------------------------------
 */

static unsigned hash_id(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h % SB_BUCKETS;
}

static struct sbstate *state_get(struct wr_netlog *nl, const char *id, bool create)
{
    unsigned b = hash_id(id);
    struct sbstate *sb;

    for (sb = nl->buckets[b]; sb != NULL; sb = sb->hnext)
        if (strcmp(sb->id, id) == 0)
            return sb;
    if (!create)
        return NULL;
    sb = xcalloc(1, sizeof(*sb));
    sb->id = xstrdup(id);
    sb->count = -1;
    sb->used_ms = mono_ms();
    sb->hnext = nl->buckets[b];
    nl->buckets[b] = sb;
    return sb;
}

static void state_free(struct wr_netlog *nl, struct sbstate *sb)
{
    struct sbstate **pp = &nl->buckets[hash_id(sb->id)];

    while (*pp != sb)
        pp = &(*pp)->hnext;
    *pp = sb->hnext;
    free(sb->id);
    free(sb);
}

static void sub_unlink(struct wr_netlog_sub *sub)
{
    if (sub->prev != NULL)
        sub->prev->next = sub->next;
    else
        sub->sb->subs = sub->next;
    if (sub->next != NULL)
        sub->next->prev = sub->prev;
    free(sub);
}

/* Free the followers of sb marked dead. */
static void reap(struct sbstate *sb)
{
    struct wr_netlog_sub *sub = sb->subs, *next;

    for (; sub != NULL; sub = next) {
        next = sub->next;
        if (sub->dead)
            sub_unlink(sub);
    }
}

/* End sb's followers: each callback gets NULL once. */
static void end_followers(struct wr_netlog *nl, struct sbstate *sb)
{
    nl->delivering++;
    for (struct wr_netlog_sub *sub = sb->subs; sub != NULL; sub = sub->next) {
        if (sub->dead)
            continue;
        sub->dead = true;
        sub->cb(sub->ctx, NULL);
    }
    nl->delivering--;
    reap(sb);
}

/* ---- the buffer and the batch write -----------------------------------------------------------
 */

static void kick_cb(uv_idle_t *t);
static void tombs_sweep(struct wr_netlog *nl, bool all);

static char *copy_cut(const char *s, size_t max)
{
    size_t n;
    char *c;

    if (s == NULL)
        return NULL;
    n = strnlen(s, max);
    c = xmalloc(n + 1);
    memcpy(c, s, n);
    c[n] = '\0';
    return c;
}

void wr_netlog_sink(void *arg, const struct wr_netlog_entry *e)
{
    struct wr_netlog *nl = arg;
    struct wr_netlog_rec *r;

    if (nl == NULL || e == NULL || e->sandbox_id == NULL || e->proto == NULL)
        return;
    if (nl->npending >= WR_NETLOG_PENDING_MAX) {
        /* A burst the store has not caught up with: log the first of each run of drops. */
        if (nl->st.dropped++ % 10000 == 0)
            log_warn("egress log: buffer full (%d entries), dropping", WR_NETLOG_PENDING_MAX);
        return;
    }
    if (nl->npending == nl->cap) {
        nl->cap = nl->cap ? nl->cap * 2 : WR_NETLOG_BATCH;
        nl->pending = xrealloc(nl->pending, nl->cap * sizeof(*nl->pending));
    }
    r = &nl->pending[nl->npending++];
    *r = (struct wr_netlog_rec){
        .sandbox_id = copy_cut(e->sandbox_id, 128),
        .time_ms = e->time_ms ? e->time_ms : wall_ms(),
        .proto = copy_cut(e->proto, 16),
        .addr = e->addr,
        .port = e->port,
        .name = copy_cut(e->name, WR_NETLOG_NAME_MAX),
        .bytes_out = e->bytes_out,
        .bytes_in = e->bytes_in,
        .allowed = e->allowed,
        .rule = copy_cut(e->rule, WR_NETLOG_RULE_MAX),
    };
    if (nl->npending >= WR_NETLOG_BATCH && !nl->kicked) {
        nl->kicked = true;
        uv_idle_start(&nl->kick, kick_cb);
    }
}

void wr_netlog_add(struct wr_manager *m, const struct wr_netlog_entry *e)
{
    if (m != NULL)
        wr_netlog_sink(m->netlog, e);
}

/* Write the oldest FLUSH_MAX buffered entries in one transaction, keep each sandbox's newest
 * `keep`, then hand the stored entries to their followers. */
static void flush_some(struct wr_netlog *nl)
{
    size_t n = nl->npending < FLUSH_MAX ? nl->npending : FLUSH_MAX, stored = 0;
    struct wr_netlog_rec *batch;
    struct wr_err err;

    if (n == 0)
        return;
    batch = xmalloc(n * sizeof(*batch));
    memcpy(batch, nl->pending, n * sizeof(*batch));
    nl->npending -= n;
    memmove(nl->pending, nl->pending + n, nl->npending * sizeof(*batch));
    /* The counts of sandboxes not seen yet, before the batch adds to them. */
    for (size_t i = 0; i < n; i++) {
        struct sbstate *sb = state_get(nl, batch[i].sandbox_id, true);
        if (sb->count < 0 && wr_store_netlog_count(nl->store, sb->id, &sb->count, &err) < 0) {
            log_warn("egress log: %s", err.msg);
            sb->count = 0;
        }
    }
    if (wr_store_netlog_insert(nl->store, batch, n, &stored, &err) < 0) {
        log_warn("egress log: %zu entries lost: %s", n, err.msg);
        nl->st.dropped += n;
        goto out;
    }
    nl->st.stored += stored;
    nl->st.orphaned += n - stored;
    for (size_t i = 0; i < n; i++) {
        struct sbstate *sb = state_get(nl, batch[i].sandbox_id, false);
        if (sb == NULL || batch[i].id == 0)
            continue;
        sb->count++;
        sb->touched = true;
        sb->used_ms = mono_ms();
    }
    for (size_t i = 0; i < n; i++) {
        struct sbstate *sb = state_get(nl, batch[i].sandbox_id, false);
        int64_t deleted = 0;
        if (sb == NULL || !sb->touched)
            continue;
        sb->touched = false;
        if (sb->count > (int64_t)nl->keep) {
            if (wr_store_netlog_trim(nl->store, sb->id, sb->count - nl->keep, &deleted, &err) < 0)
                log_warn("egress log: %s", err.msg);
            sb->count -= deleted;
        }
    }
    nl->delivering++;
    for (size_t i = 0; i < n; i++) {
        struct sbstate *sb;
        if (batch[i].id == 0 || (sb = state_get(nl, batch[i].sandbox_id, false)) == NULL)
            continue;
        for (struct wr_netlog_sub *sub = sb->subs; sub != NULL; sub = sub->next) {
            if (sub->dead || batch[i].id <= sub->after)
                continue;
            sub->after = batch[i].id;
            sub->cb(sub->ctx, &batch[i]);
        }
    }
    nl->delivering--;
    for (size_t i = 0; i < n; i++) {
        struct sbstate *sb = state_get(nl, batch[i].sandbox_id, false);
        if (sb != NULL)
            reap(sb);
    }
out:
    for (size_t i = 0; i < n; i++)
        wr_netlog_rec_fini(&batch[i]);
    free(batch);
}

/* Everything buffered, a transaction per FLUSH_MAX. */
static void flush(struct wr_netlog *nl)
{
    while (nl->npending > 0)
        flush_some(nl);
}

/* A batch per loop iteration, so that the loop serves others between two. */
static void kick_cb(uv_idle_t *t)
{
    struct wr_netlog *nl = t->data;

    flush_some(nl);
    if (nl->npending < WR_NETLOG_BATCH) {
        uv_idle_stop(&nl->kick);
        nl->kicked = false;
    }
}

/* Every second: write, end the followers of sandboxes whose record went, and (every minute)
 * forget idle sandboxes. */
static void tick_cb(uv_timer_t *t)
{
    struct wr_netlog *nl = t->data;
    int64_t now = mono_ms();
    bool sweep = ++nl->ticks % 60 == 0;

    flush(nl);
    if (nl->ticks % 10 == 0)
        tombs_sweep(nl, false);
    for (unsigned b = 0; b < SB_BUCKETS; b++) {
        struct sbstate *sb = nl->buckets[b], *next;
        for (; sb != NULL; sb = next) {
            next = sb->hnext;
            if (sb->subs != NULL) {
                struct wr_sandbox_rec rec = {0};
                struct wr_err err;
                if (wr_store_sandbox_get(nl->store, NULL, sb->id, &rec, &err) < 0) {
                    if (err.kind == WR_ENOTFOUND)
                        end_followers(nl, sb);
                } else {
                    wr_sandbox_rec_fini(&rec);
                }
                sb->used_ms = now;
            }
            if (sb->subs == NULL && sweep && now - sb->used_ms > IDLE_MS)
                state_free(nl, sb);
        }
    }
}

/* ---- the kernel's events ----------------------------------------------------------------------
 */

void wr_netlog_released(struct wr_netlog *nl, uint32_t addr, const char *sandbox_id)
{
    struct tomb **pp, *t;

    if (nl == NULL || sandbox_id == NULL)
        return;
    pp = &nl->tombs[addr % TOMB_BUCKETS];
    for (t = *pp; t != NULL && t->addr != addr; t = t->next)
        ;
    if (t == NULL) {
        t = xcalloc(1, sizeof(*t));
        t->addr = addr;
        t->next = *pp;
        *pp = t;
    }
    free(t->id);
    t->id = xstrdup(sandbox_id);
    t->until_ms = mono_ms() + TOMB_MS;
}

/* Forget the tombstones past their time (all: the log is closing). */
static void tombs_sweep(struct wr_netlog *nl, bool all)
{
    int64_t now = mono_ms();

    for (unsigned b = 0; b < TOMB_BUCKETS; b++) {
        struct tomb **pp = &nl->tombs[b];
        while (*pp != NULL) {
            struct tomb *t = *pp;
            if (all || t->until_ms <= now) {
                *pp = t->next;
                free(t->id);
                free(t);
            } else {
                pp = &t->next;
            }
        }
    }
}

/* The sandbox whose address saddr is: the lookup's, else a released slot's last owner. */
static const char *who(struct wr_netlog *nl, uint32_t saddr)
{
    const char *id = NULL;

    if (nl->lookup != NULL && nl->lookup(nl->lookup_arg, saddr, &id) && id != NULL)
        return id;
    for (struct tomb *t = nl->tombs[saddr % TOMB_BUCKETS]; t != NULL; t = t->next)
        if (t->addr == saddr && t->until_ms > mono_ms())
            return t->id;
    nl->st.unmatched++;
    return NULL;
}

static const char *proto_name(uint8_t p)
{
    switch (p) {
    case IPPROTO_TCP:
        return "tcp";
    case IPPROTO_UDP:
        return "udp";
    case IPPROTO_ICMP:
        return "icmp";
    case IPPROTO_SCTP:
        return "sctp";
    default:
        return "ip";
    }
}

static void on_ct(void *arg, const struct wr_ct_event *ev)
{
    struct wr_netlog *nl = arg;
    const char *id;

    /* Redirected flows are the DNS stub's and the proxy's, which log them with their names. */
    if (ev->type != WR_CT_EV_DESTROY || ev->dnat)
        return;
    if ((id = who(nl, ev->src)) == NULL)
        return;
    wr_netlog_sink(nl, &(struct wr_netlog_entry){
                           .time_ms = ev->start_ms ? ev->start_ms : ev->end_ms,
                           .sandbox_id = id,
                           .proto = proto_name(ev->proto),
                           .addr = ev->dst,
                           .port = ev->dport,
                           .bytes_out = ev->bytes_out,
                           .bytes_in = ev->bytes_in,
                           .allowed = true,
                           .rule = "kernel",
                       });
}

static void on_nflog(void *arg, const struct wr_nflog_pkt *p)
{
    struct wr_netlog *nl = arg;
    char rule[WR_NETLOG_RULE_MAX + 1];
    const char *id;
    size_t n;

    if ((id = who(nl, p->src)) == NULL)
        return;
    /* The prefix as the rule, without the separating space nft prefixes end with. */
    n = strnlen(p->prefix, WR_NETLOG_RULE_MAX);
    while (n > 0 && p->prefix[n - 1] == ' ')
        n--;
    memcpy(rule, p->prefix, n);
    rule[n] = '\0';
    wr_netlog_sink(nl, &(struct wr_netlog_entry){
                           .time_ms = p->time_ms,
                           .sandbox_id = id,
                           .proto = proto_name(p->proto),
                           .addr = p->dst,
                           .port = p->dport,
                           .allowed = false,
                           .rule = rule,
                       });
}

static void ct_ready(uv_poll_t *h, int status, int events)
{
    struct wr_netlog *nl = h->data;
    struct wr_err err;

    if (wr_rt_ctevents_read(nl->ct, on_ct, nl, &err) < 0)
        log_warn("egress log: %s", err.msg);
}

static void nfl_ready(uv_poll_t *h, int status, int events)
{
    struct wr_netlog *nl = h->data;
    struct wr_err err;

    if (wr_rt_nflog_read(nl->nfl, on_nflog, nl, &err) < 0)
        log_warn("egress log: %s", err.msg);
}

/* ---- open and close -----------------------------------------------------------------------------
 */

int wr_netlog_open(uv_loop_t *loop, struct wr_store *store, const struct wr_cidr4 *pool,
                   wr_netlog_lookup_fn lookup, void *arg, struct wr_netlog **out,
                   struct wr_err *err)
{
    struct wr_netlog *nl = xcalloc(1, sizeof(*nl));

    nl->loop = loop;
    nl->store = store;
    nl->lookup = lookup;
    nl->lookup_arg = arg;
    nl->keep = WR_NETLOG_KEEP_DEFAULT;
    if (pool != NULL) {
        if (wr_rt_ctevents_open(pool, WR_CT_EV_DESTROY, &nl->ct, err) < 0) {
            free(nl);
            return wr_err_wrap(err, "egress log");
        }
        uv_poll_init(loop, &nl->ct_poll, wr_rt_ctevents_fd(nl->ct));
        nl->ct_poll.data = nl;
        uv_poll_start(&nl->ct_poll, UV_READABLE, ct_ready);
        nl->ct_on = true;
        nl->open_handles++;
    }
    uv_timer_init(loop, &nl->tick);
    uv_idle_init(loop, &nl->kick);
    nl->tick.data = nl->kick.data = nl;
    nl->open_handles += 2;
    uv_timer_start(&nl->tick, tick_cb, WR_NETLOG_FLUSH_MS, WR_NETLOG_FLUSH_MS);
    *out = nl;
    return 0;
}

int wr_netlog_listen_nflog(struct wr_netlog *nl, uint16_t group, struct wr_err *err)
{
    if (nl->nfl_on)
        return wr_err_set(err, WR_ECONFLICT, 0, "egress log: nflog already read");
    if (wr_rt_nflog_open(group, &nl->nfl, err) < 0)
        return wr_err_wrap(err, "egress log");
    uv_poll_init(nl->loop, &nl->nfl_poll, wr_rt_nflog_fd(nl->nfl));
    nl->nfl_poll.data = nl;
    uv_poll_start(&nl->nfl_poll, UV_READABLE, nfl_ready);
    nl->nfl_on = true;
    nl->open_handles++;
    return 0;
}

void wr_netlog_set_keep(struct wr_netlog *nl, uint32_t keep)
{
    nl->keep = keep ? keep : WR_NETLOG_KEEP_DEFAULT;
}

void wr_netlog_get_stats(const struct wr_netlog *nl, struct wr_netlog_stats *st)
{
    *st = nl->st;
    st->pending = nl->npending;
    st->kernel_lost =
        (nl->ct ? wr_rt_ctevents_lost(nl->ct) : 0) + (nl->nfl ? wr_rt_nflog_lost(nl->nfl) : 0);
}

static void handle_closed(uv_handle_t *h)
{
    struct wr_netlog *nl = h->data;

    if (--nl->open_handles > 0)
        return;
    wr_rt_ctevents_close(nl->ct);
    wr_rt_nflog_close(nl->nfl);
    free(nl);
}

void wr_netlog_close(struct wr_netlog *nl)
{
    if (nl == NULL)
        return;
    /* What the kernel queued, then everything buffered, goes to the store. */
    if (nl->ct_on)
        ct_ready(&nl->ct_poll, 0, UV_READABLE);
    if (nl->nfl_on)
        nfl_ready(&nl->nfl_poll, 0, UV_READABLE);
    flush(nl);
    for (unsigned b = 0; b < SB_BUCKETS; b++) {
        while (nl->buckets[b] != NULL) {
            struct sbstate *sb = nl->buckets[b];
            end_followers(nl, sb);
            state_free(nl, sb);
        }
    }
    free(nl->pending);
    nl->pending = NULL;
    tombs_sweep(nl, true);
    if (nl->ct_on)
        uv_close((uv_handle_t *)&nl->ct_poll, handle_closed);
    if (nl->nfl_on)
        uv_close((uv_handle_t *)&nl->nfl_poll, handle_closed);
    uv_close((uv_handle_t *)&nl->tick, handle_closed);
    uv_close((uv_handle_t *)&nl->kick, handle_closed);
}

void wr_manager_set_netlog(struct wr_manager *m, struct wr_netlog *nl)
{
    m->netlog = nl;
}

void wr_netlog_manager_fn(void *m, const struct wr_netlog_entry *e)
{
    wr_netlog_add(m, e);
}

bool wr_netlog_manager_lookup(void *arg, uint32_t saddr, const char **sandbox_id)
{
    struct wr_live_sb *sb;

    if (!wr__net_lookup(arg, saddr, &sb))
        return false;
    *sandbox_id = sb->id;
    return true;
}

void wr_manager_netlog_released(struct wr_manager *m, uint32_t addr, const char *sandbox_id)
{
    wr_netlog_released(m->netlog, addr, sandbox_id);
}

/* ---- reading ------------------------------------------------------------------------------------
 */

int wr_netlog_query(struct wr_manager *m, const char *team, const char *id, int64_t after,
                    size_t limit, struct wr_netlog_rec **out, size_t *n, struct wr_err *err)
{
    struct wr_sandbox_rec rec = {0};

    *out = NULL;
    *n = 0;
    if (wr_manager_get(m, team, id, &rec, err) < 0)
        return -1;
    wr_sandbox_rec_fini(&rec);
    if (m->netlog != NULL)
        flush(m->netlog);
    return wr_store_netlog_list(m->cfg.store, id, after, limit, out, n, err);
}

int wr_netlog_follow(struct wr_manager *m, const char *team, const char *id, int64_t after,
                     wr_netlog_follow_fn cb, void *ctx, struct wr_netlog_sub **out,
                     struct wr_err *err)
{
    struct wr_netlog *nl = m->netlog;
    struct wr_sandbox_rec rec = {0};
    struct wr_netlog_sub *sub;
    struct sbstate *sb;

    if (wr_manager_get(m, team, id, &rec, err) < 0)
        return -1;
    wr_sandbox_rec_fini(&rec);
    if (nl == NULL)
        return wr_err_set(err, WR_EUNSUPPORTED, 0, "this daemon keeps no egress log");
    flush(nl);
    /* The backlog, a page at a time. Nothing is written meanwhile: it all runs in this call. */
    for (;;) {
        struct wr_netlog_rec *v = NULL;
        size_t k = 0;
        if (wr_store_netlog_list(m->cfg.store, id, after, 1000, &v, &k, err) < 0)
            return -1;
        for (size_t i = 0; i < k; i++) {
            cb(ctx, &v[i]);
            after = v[i].id;
            wr_netlog_rec_fini(&v[i]);
        }
        free(v);
        if (k < 1000)
            break;
    }
    sb = state_get(nl, id, true);
    sub = xcalloc(1, sizeof(*sub));
    sub->nl = nl;
    sub->sb = sb;
    sub->cb = cb;
    sub->ctx = ctx;
    sub->after = after;
    sub->next = sb->subs;
    if (sb->subs != NULL)
        sb->subs->prev = sub;
    sb->subs = sub;
    *out = sub;
    return 0;
}

void wr_netlog_unfollow(struct wr_netlog_sub *sub)
{
    if (sub == NULL || sub->dead)
        return;
    if (sub->nl->delivering > 0)
        sub->dead = true;
    else
        sub_unlink(sub);
}
