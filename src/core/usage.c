/* SPDX-License-Identifier: Apache-2.0 */
/* Usage samples of running sandboxes and the disk use of their writable layers (see
 * manager.h). */
#include <stdlib.h>

#include "../runtime/layer.h"
#include "../util/cleanup.h"
#include "../util/xalloc.h"
#include "core_int.h"
#include "images.h"

/* ---- usage samples ------------------------------------------------------------------------- */

void wr__sample(struct wr_live_sb *sb)
{
    struct wr_sandbox_usage u;
    struct wr_err err;
    struct wr_usage_sample *s;

    if (sb->state != LIVE_SB_RUNNING || wr__live_sb_ending(sb) || sb->rt == NULL ||
        wr_sandbox_usage(sb->rt, &u, &err) < 0)
        return;
    s = &sb->usage[sb->usage_head];
    *s = (struct wr_usage_sample){wr__core_now_ms(), u.cpu_ns, u.memory_bytes};
    sb->usage_head = (sb->usage_head + 1) % WR_USAGE_SAMPLES;
    if (sb->usage_n < WR_USAGE_SAMPLES)
        sb->usage_n++;
}

void wr__on_sample(uv_timer_t *t)
{
    struct wr_manager *m = t->data;

    for (unsigned b = 0; b < NBUCKETS; b++)
        for (struct wr_live_sb *sb = m->buckets[b]; sb != NULL; sb = sb->hnext)
            wr__sample(sb);
}

int wr_manager_metrics(struct wr_manager *m, const char *team, const char *id, int64_t from_ms,
                       int64_t to_ms, struct wr_usage *out, size_t max, struct wr_err *err)
{
    struct wr_live_sb *sb = wr__lookup(m, team, id, err);
    size_t n = 0;
    uint64_t prev_cpu = 0;
    int64_t prev_at;
    uint32_t cpus;

    if (sb == NULL) {
        if (err->kind == WR_ECONFLICT) /* stopped: it has no samples any more */
            return 0;
        return -1;
    }
    wr__sample(sb);
    cpus = (sb->cpu_millis + 999) / 1000;
    prev_at = 0;
    for (unsigned i = 0; i < sb->usage_n; i++) {
        const struct wr_usage_sample *s =
            &sb->usage[(sb->usage_head + WR_USAGE_SAMPLES - sb->usage_n + i) % WR_USAGE_SAMPLES];
        double pct = 0;
        if (prev_at != 0 && s->at_ms > prev_at && s->cpu_ns >= prev_cpu)
            pct = (double)(s->cpu_ns - prev_cpu) / 1e6 / (double)(s->at_ms - prev_at) * 100.0 /
                  (sb->cpu_millis ? sb->cpu_millis / 1000.0 : 1.0);
        prev_at = s->at_ms;
        prev_cpu = s->cpu_ns;
        if (i == 0 || (from_ms && s->at_ms < from_ms) || (to_ms && s->at_ms > to_ms) || n >= max)
            continue; /* the first sample only anchors the next one's CPU share */
        out[n++] = (struct wr_usage){s->at_ms, pct, cpus, s->mem_bytes, sb->memory_bytes};
    }
    return (int)n;
}

void wr__sampler_closed(uv_handle_t *h)
{
    free(h);
}

struct disk_use_work {
    uv_work_t w;
    struct wr_manager *m;
    char *upper;
    uint64_t used, limit;
    struct wr_err err;
    int rc;
    wr_manager_disk_cb cb;
    void *ctx;
};

static void disk_use_run(uv_work_t *w)
{
    struct disk_use_work *d = w->data;
    d->rc = wr_layer_usage(d->upper, &d->used, &d->err);
}

static void disk_use_done(uv_work_t *w, int status)
{
    struct disk_use_work *d = w->data;
    struct wr_manager *m = d->m;
    const char *why, *method = wr_images_quota_method(m->cfg.images, &why);

    if (d->rc < 0)
        d->cb(d->ctx, 0, 0, NULL, &d->err);
    else
        d->cb(d->ctx, d->used, d->limit, d->limit ? method : NULL, NULL);
    free(d->upper);
    free(d);
    wr__work_done(m);
}

void wr_manager_disk(struct wr_manager *m, const char *team, const char *id, wr_manager_disk_cb cb,
                     void *ctx)
{
    struct wr_live_sb *sb = wr__lookup(m, team, id, NULL);
    struct wr_sandbox_rec rec;
    struct disk_use_work *d;
    struct wr_err err;

    if (wr_store_sandbox_get(m->cfg.store, team, id, &rec, &err) < 0) {
        cb(ctx, 0, 0, NULL, &err);
        return;
    }
    if (sb == NULL || wr__live_sb_ending(sb)) {
        wr_err_set(&err, WR_ECONFLICT, 0, "sandbox `%s` is %s: its files are gone", id,
                   wr_sb_state_name(rec.state));
        wr_sandbox_rec_fini(&rec);
        cb(ctx, 0, 0, NULL, &err);
        return;
    }
    d = xcalloc(1, sizeof(*d));
    d->m = m;
    d->limit = rec.disk_bytes;
    {
        _cleanup_free_ char *home = wr_images_home(m->cfg.images, id);
        d->upper = xasprintf("%s/upper", home);
    }
    wr_sandbox_rec_fini(&rec);
    d->cb = cb;
    d->ctx = ctx;
    d->w.data = d;
    wr__queue_work(m, &d->w, disk_use_run, disk_use_done);
}
