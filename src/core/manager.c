/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox manager (see manager.h): its work on the loop's pool, ids, the table of sandboxes
 * and the host's accounting, open and close. The rest of it: lifecycle.c, create.c, pause.c,
 * usage.c, reconcile.c. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/sysinfo.h>
#include <time.h>

#include "../util/log.h"
#include "../util/xalloc.h"
#include "cdi.h"
#include "core_int.h"
#include "images.h"
#include "memory.h"

void wr__queue_work(struct wr_manager *m, uv_work_t *w, uv_work_cb run, uv_after_work_cb done)
{
    m->inflight++;
    uv_queue_work(m->loop, w, run, done);
}

static void manager_free(struct wr_manager *m)
{
    wr__net_free(m);
    wr_cdi_close(m->cdi);
    for (unsigned b = 0; b < TEAM_USE_BUCKETS; b++)
        while (m->teams[b] != NULL) {
            struct wr_team_use *t = m->teams[b];
            m->teams[b] = t->next;
            free(t->team);
            free(t);
        }
    free(m);
}

void wr__work_done(struct wr_manager *m)
{
    if (--m->inflight == 0 && m->closing)
        manager_free(m);
}

const struct wr_manager_config *wr__core_config(const struct wr_manager *m)
{
    return &m->cfg;
}

/* ---- time and ids --------------------------------------------------------------------------- */

int64_t wr__core_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* 20 random characters of [a-z0-9]: about 103 bits. */
void wr__core_new_id(char out[21])
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char rnd[20];

    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        abort(); /* the kernel's CSPRNG cannot fail once initialised */
    for (int i = 0; i < 20; i++)
        out[i] = alphabet[rnd[i] % 36];
    out[20] = '\0';
}

/* ---- the table of sandboxes ----------------------------------------------------------------- */

static unsigned bucket_of(const char *id)
{
    uint32_t h = 2166136261u;
    for (const char *p = id; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    return h % NBUCKETS;
}

struct wr_live_sb *wr__table_get(struct wr_manager *m, const char *id)
{
    for (struct wr_live_sb *s = m->buckets[bucket_of(id)]; s != NULL; s = s->hnext)
        if (strcmp(s->id, id) == 0)
            return s;
    return NULL;
}

/* The team's entry in m->teams (made on first use; kept while the daemon runs: one per team). */
static struct wr_team_use *team_use(struct wr_manager *m, const char *team)
{
    unsigned b = bucket_of(team) % TEAM_USE_BUCKETS;
    struct wr_team_use *t;

    for (t = m->teams[b]; t != NULL; t = t->next)
        if (strcmp(t->team, team) == 0)
            return t;
    t = xcalloc(1, sizeof(*t));
    t->team = xstrdup(team);
    t->next = m->teams[b];
    m->teams[b] = t;
    return t;
}

/* Count sandbox sb in (or out of) the host's and its team's totals. */
static void count(struct wr_live_sb *sb, bool in)
{
    struct wr_manager *m = sb->m;
    struct wr_team_use *t = sb->team != NULL ? team_use(m, sb->team) : NULL;

    sb->counted = in;
    if (in) {
        m->count++;
        m->committed += sb->memory_bytes;
        if (t != NULL) {
            t->sandboxes++;
            t->memory_bytes += sb->memory_bytes;
        }
    } else {
        m->count--;
        m->committed -= sb->memory_bytes;
        if (t != NULL) {
            t->sandboxes--;
            t->memory_bytes -= sb->memory_bytes;
        }
    }
}

void wr__live_sb_set_team(struct wr_live_sb *sb, const char *team)
{
    bool counted = sb->counted;

    if (counted)
        count(sb, false);
    free(sb->team);
    sb->team = xstrdup(team);
    if (counted)
        count(sb, true);
}

void wr__table_put(struct wr_manager *m, struct wr_live_sb *sb)
{
    unsigned b = bucket_of(sb->id);
    sb->hnext = m->buckets[b];
    m->buckets[b] = sb;
    count(sb, true);
}

void wr__table_del(struct wr_manager *m, struct wr_live_sb *sb)
{
    for (struct wr_live_sb **pp = &m->buckets[bucket_of(sb->id)]; *pp != NULL; pp = &(*pp)->hnext)
        if (*pp == sb) {
            *pp = sb->hnext;
            if (sb->counted)
                count(sb, false);
            return;
        }
}

/* A sandbox paused to disk holds no memory and no processes: it does not count against the
 * host's limits until it is resumed. */
void wr__account(struct wr_live_sb *sb, bool counted)
{
    if (sb->counted != counted)
        count(sb, counted);
}

void wr_manager_team_usage(const struct wr_manager *m, const char *team, uint32_t *sandboxes,
                           uint64_t *memory_bytes)
{
    unsigned b = bucket_of(team) % TEAM_USE_BUCKETS;

    *sandboxes = 0;
    *memory_bytes = 0;
    for (const struct wr_team_use *t = m->teams[b]; t != NULL; t = t->next)
        if (strcmp(t->team, team) == 0) {
            *sandboxes = t->sandboxes;
            *memory_bytes = t->memory_bytes;
            return;
        }
}

uint64_t wr_manager_default_memory(const struct wr_manager *m)
{
    return m->cfg.default_memory_bytes;
}

const char *wr_manager_cgroup_version(const struct wr_manager *m)
{
    return wr_runtime_cgroup_version(m->cfg.rt);
}

int wr_manager_open(const struct wr_manager_config *cfg, struct wr_manager **out,
                    struct wr_err *err)
{
    struct wr_manager *m = xcalloc(1, sizeof(*m));
    struct wr_sandbox_filter f = {.states = WR_SB_LIVE};
    struct wr_sandbox_rec *recs = NULL;
    struct sysinfo si;
    size_t n = 0;
    uint64_t t_start, t_reconciled;

    m->cfg = *cfg;
    m->loop = cfg->loop;
    if (m->cfg.default_timeout_s == 0)
        m->cfg.default_timeout_s = 300;
    if (m->cfg.max_timeout_s == 0)
        m->cfg.max_timeout_s = 86400;
    if (m->cfg.max_sandboxes == 0)
        m->cfg.max_sandboxes = WR_UID_SLOTS;
    if (m->cfg.default_cpu_millis == 0)
        m->cfg.default_cpu_millis = 1000;
    if (m->cfg.default_memory_bytes == 0)
        m->cfg.default_memory_bytes = 512ull << 20;
    if (m->cfg.pids_max == 0)
        m->cfg.pids_max = 4096;
    if (m->cfg.memory_overcommit <= 0)
        m->cfg.memory_overcommit = WR_MEMORY_OVERCOMMIT;
    if (m->cfg.max_memory_bytes == 0 && sysinfo(&si) == 0)
        m->cfg.max_memory_bytes =
            (uint64_t)((double)si.totalram * si.mem_unit * m->cfg.memory_overcommit);
    if (m->cfg.memory_reserve_bytes == 0 && sysinfo(&si) == 0) {
        uint64_t r = (uint64_t)si.totalram * si.mem_unit / 100 * WR_MEMORY_RESERVE_PCT;
        m->cfg.memory_reserve_bytes = r < WR_MEMORY_RESERVE_MIN   ? WR_MEMORY_RESERVE_MIN
                                      : r > WR_MEMORY_RESERVE_MAX ? WR_MEMORY_RESERVE_MAX
                                                                  : r;
    }
    log_info("memory: sandboxes' limits committed up to %" PRIu64 " MiB, %" PRIu64
             " MiB of the host's kept available",
             m->cfg.max_memory_bytes >> 20, m->cfg.memory_reserve_bytes >> 20);
    if (m->cfg.default_timeout_s > m->cfg.max_timeout_s)
        m->cfg.default_timeout_s = m->cfg.max_timeout_s;

    if (wr_cdi_open(cfg->cdi_spec_dirs, &m->cdi, err) < 0) {
        free(m);
        return -1;
    }
    if (wr__net_init(m, err) < 0) {
        wr_cdi_close(m->cdi);
        free(m);
        return -1;
    }
    m->adopt_tail = &m->adopt_queue;
    wr__exits_start(m); /* before any sandbox is watched: no end can go unseen */
    wr__metrics_open(m);
    wr__events_open(m);
    wr__webhooks_open(m);
    t_start = uv_hrtime();
    if (wr_store_sandbox_list(cfg->store, &f, &recs, &n, err) < 0) {
        manager_free(m);
        return wr_err_wrap(err, "reconcile");
    }
    for (size_t i = 0; i < n; i++) {
        wr__reconcile_one(m, &recs[i]);
        wr_sandbox_rec_fini(&recs[i]);
    }
    free(recs);
    t_reconciled = uv_hrtime();
    if (wr__net_start(m, err) < 0) {
        /* Sandboxes are adopted (their agents connect): nothing to undo but the daemon. */
        return -1;
    }
    wr__volumes_sweep(m);
    wr__warm_open(m);
    /* Run directories that no record or warm marker names (their teardown failed once). */
    {
        struct wr_err e2;
        if (wr_runtime_sweep(m->cfg.rt, &e2) < 0)
            log_warn("sweep: %s", e2.msg);
    }
    m->sampler = xcalloc(1, sizeof(*m->sampler));
    uv_timer_init(m->loop, m->sampler);
    m->sampler->data = m;
    uv_timer_start(m->sampler, wr__on_sample, WR_USAGE_PERIOD_MS, WR_USAGE_PERIOD_MS);
    uv_unref((uv_handle_t *)m->sampler);
    wr__ledger_start(m);
    /* Serve only once the adopted sandboxes' agents have answered and listed their processes
     * (or given up): a request right after the daemon says it is ready must find them
     * connected, and their commands known. */
    for (uint64_t t0 = uv_now(m->loop); wr__adopting(m) && uv_now(m->loop) - t0 < 60000;) {
        uv_run(m->loop, UV_RUN_ONCE);
        uv_update_time(m->loop);
    }
    if (wr__adopting(m))
        log_warn("adoption: still connecting to sandboxes after 60 s; serving meanwhile");
    else if (m->count > 0)
        log_info("adoption: %" PRIu64
                 " sandboxes: records taken back in %.1f ms, network, sweep and "
                 "agents in %.1f ms more",
                 m->count, (double)(t_reconciled - t_start) / 1e6,
                 (double)(uv_hrtime() - t_reconciled) / 1e6);
    *out = m;
    return 0;
}

void wr_manager_close(struct wr_manager *m)
{
    if (m == NULL)
        return;
    m->closing = true;
    wr__metrics_close(m);
    wr__events_close(m);
    wr__webhooks_close(m);
    wr__warm_close(m);
    if (m->sampler != NULL) {
        uv_timer_stop(m->sampler);
        uv_close((uv_handle_t *)m->sampler, wr__sampler_closed);
        m->sampler = NULL;
    }
    wr__ledger_stop(m);
    wr__budget_close(m);
    wr__exits_stop(m);
    for (unsigned b = 0; b < NBUCKETS; b++) {
        struct wr_live_sb *sb = m->buckets[b];
        while (sb != NULL) {
            struct wr_live_sb *next = sb->hnext;
            /* One that a worker creates, freezes, thaws or destroys is let go by the work's
             * done callback, which sees m->closing. */
            if (!sb->busy)
                wr__live_sb_let_go(sb);
            sb = next;
        }
        m->buckets[b] = NULL;
    }
    wr__net_close(m);
    if (m->inflight == 0)
        manager_free(m);
}

void wr_manager_capacity(const struct wr_manager *m, struct wr_manager_capacity *out)
{
    out->sandboxes = m->count;
    out->sandboxes_max = m->cfg.max_sandboxes;
    out->memory_committed = m->committed;
    out->memory_max = m->cfg.max_memory_bytes;
}
