/* SPDX-License-Identifier: Apache-2.0 */
/* Usage samples of running sandboxes and the disk use of their writable layers (see
 * manager.h). */
#include <stdlib.h>
#include <string.h>

#include "../runtime/layer.h"
#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "core_int.h"
#include "images.h"

static void led_mem(struct wr_live_sb *sb, int64_t now, uint64_t mem);

/* ---- usage samples ------------------------------------------------------------------------- */

static void sample_apply(struct wr_live_sb *sb, const struct wr_sandbox_usage *u, int64_t now)
{
    struct wr_usage_sample *s;

    if (sb->led.open) {
        sb->led.cpu_last = u->cpu_ns;
        led_mem(sb, now, u->memory_bytes);
    }
    s = &sb->usage[sb->usage_head];
    *s = (struct wr_usage_sample){now, u->cpu_ns, u->memory_bytes};
    sb->usage_head = (sb->usage_head + 1) % WR_USAGE_SAMPLES;
    if (sb->usage_n < WR_USAGE_SAMPLES)
        sb->usage_n++;
}

static bool sampled(const struct wr_live_sb *sb)
{
    return sb->state == LIVE_SB_RUNNING && !wr__live_sb_ending(sb) && sb->rt != NULL;
}

void wr__sample(struct wr_live_sb *sb)
{
    struct wr_sandbox_usage u;
    struct wr_err err;

    if (sampled(sb) && wr_sandbox_usage(sb->rt, &u, &err) == 0)
        sample_apply(sb, &u, wr__core_now_ms());
}

/* A round of samples: the running sandboxes are listed on the loop (a walk of pointers, each
 * held by a reference), their cgroups read on a worker (at tens of thousands of sandboxes that is
 * seconds of syscalls, which requests must not wait behind), the readings applied on the loop. */
#define SAMPLE_CHUNK 1024 /* sandboxes a worker reads at a time: other work gets its turn */

struct sample_work {
    uv_work_t w;
    struct wr_manager *m;
    size_t n, at; /* sbs[at, at + SAMPLE_CHUNK) are being read */
    struct wr_live_sb **sbs;
    struct wr_sandbox_usage *u;
    bool *ok;
};

static void sample_run(uv_work_t *w)
{
    struct sample_work *sw = w->data;
    struct wr_err err;

    for (size_t i = sw->at; i < sw->n && i < sw->at + SAMPLE_CHUNK; i++)
        sw->ok[i] = wr_sandbox_usage_by_id(sw->m->cfg.rt, sw->sbs[i]->id, &sw->u[i], &err) == 0;
}

static void sample_done(uv_work_t *w, int status)
{
    struct sample_work *sw = w->data;
    struct wr_manager *m = sw->m;
    int64_t now = wr__core_now_ms();
    size_t end = sw->at + SAMPLE_CHUNK < sw->n ? sw->at + SAMPLE_CHUNK : sw->n;

    (void)status;
    for (size_t i = sw->at; i < end; i++) {
        if (sw->ok[i] && sampled(sw->sbs[i]))
            sample_apply(sw->sbs[i], &sw->u[i], now);
        wr_live_sb_unref(sw->sbs[i]);
    }
    sw->at = end;
    if (sw->at < sw->n && !m->closing) {
        uv_queue_work(m->loop, &sw->w, sample_run, sample_done); /* still one of m->inflight */
        return;
    }
    for (size_t i = sw->at; i < sw->n; i++)
        wr_live_sb_unref(sw->sbs[i]);
    free(sw->sbs);
    free(sw->u);
    free(sw->ok);
    free(sw);
    m->sampling = false;
    wr__work_done(m);
}

void wr__on_sample(uv_timer_t *t)
{
    struct wr_manager *m = t->data;
    struct sample_work *sw;
    size_t cap = 0;

    m->sample_round++;
    if (m->sampling || m->closing || m->count == 0)
        return; /* the last round is still reading: this one is skipped */
    sw = xcalloc(1, sizeof(*sw));
    sw->m = m;
    for (unsigned b = 0; b < NBUCKETS; b++)
        for (struct wr_live_sb *sb = m->buckets[b]; sb != NULL; sb = sb->hnext) {
            if (!sampled(sb))
                continue;
            /* An idle sandbox (its agent connection closed: no request, no command for
             * --agent-idle) changes little: it is read one round in WR_IDLE_SAMPLE_EVERY, the
             * buckets taking turns. Its ledger counts the same CPU, a round later. */
            if (sb->agent != NULL && wr_agent_is_dormant(sb->agent) &&
                (b + m->sample_round) % WR_IDLE_SAMPLE_EVERY != 0)
                continue;
            if (sw->n == cap) {
                cap = cap ? cap * 2 : 256;
                sw->sbs = xrealloc(sw->sbs, cap * sizeof(*sw->sbs));
            }
            wr_live_sb_ref(sb);
            sw->sbs[sw->n++] = sb;
        }
    sw->u = xcalloc(sw->n + 1, sizeof(*sw->u));
    sw->ok = xcalloc(sw->n + 1, sizeof(*sw->ok));
    sw->w.data = sw;
    m->sampling = true;
    wr__queue_work(m, &sw->w, sample_run, sample_done);
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

/* ---- the usage ledger (docs/usage.md) ------------------------------------------------------ */

#define GIB (1024.0 * 1024.0 * 1024.0)

/* Read its CPU and memory now (false: no processes to read; cpu_last stands). */
static bool led_read(struct wr_live_sb *sb, uint64_t *mem)
{
    struct wr_sandbox_usage u;
    struct wr_err err;

    if (sb->rt == NULL || wr_sandbox_usage(sb->rt, &u, &err) < 0)
        return false;
    sb->led.cpu_last = u.cpu_ns;
    *mem = u.memory_bytes;
    return true;
}

/* Integrate memory up to now with the reading mem. */
static void led_mem(struct wr_live_sb *sb, int64_t now, uint64_t mem)
{
    if (sb->led.running && now > sb->led.mem_at_ms)
        sb->led.mem_gib_s +=
            (double)sb->led.mem_last / GIB * (double)(now - sb->led.mem_at_ms) / 1000.0;
    sb->led.mem_at_ms = now;
    sb->led.mem_last = mem;
    if (mem > sb->led.peak)
        sb->led.peak = mem;
}

/* The first open: the template, and where an earlier daemon's ledger ended. Returns true if the
 * interval goes on from that end (its start and counters set). */
static bool led_load(struct wr_live_sb *sb)
{
    struct wr_sandbox_rec rec;
    struct wr_err err;
    int64_t seq = 0, end_ms = 0;
    uint64_t cpu_end = 0, net_end = 0;
    int rc;

    sb->led.loaded = true;
    if (wr_store_sandbox_get(sb->m->cfg.store, NULL, sb->id, &rec, &err) == 0) {
        sb->led.template_name = xstrdup(rec.template_name ? rec.template_name : "");
        wr_sandbox_rec_fini(&rec);
    } else {
        sb->led.template_name = xstrdup("");
    }
    rc = wr_store_usage_last(sb->m->cfg.store, sb->id, &seq, &end_ms, &cpu_end, &net_end, &err);
    if (rc < 0)
        log_warn("sandbox %s: usage ledger: %s", sb->id, err.msg);
    if (rc <= 0)
        return false;
    sb->led.seq = seq;
    sb->led.start_ms = end_ms;
    sb->led.cpu0 = cpu_end;
    sb->led.net0 = net_end;
    return true;
}

/* Open an interval at now; fresh: read its cgroups (else the last reading is where it starts,
 * as for led_close). */
static void led_open(struct wr_live_sb *sb, bool running, bool fresh, int64_t now)
{
    uint64_t mem = sb->led.mem_last, net, in;
    bool go_on = !sb->led.loaded && led_load(sb);
    bool read = fresh ? led_read(sb, &mem) : true;

    sb->led.open = true;
    sb->led.running = running;
    sb->led.mem_gib_s = 0;
    sb->led.peak = 0;
    wr__net_bytes(sb, &net, &in);
    if (!go_on) {
        sb->led.start_ms = now;
        sb->led.cpu0 = read ? sb->led.cpu_last : 0;
        sb->led.net0 = net;
        sb->led.in0 = in;
    } else {
        /* Going on from the store's last interval, after a restart: this daemon's counters
         * started at 0 after that interval closed, so all they hold is the open one's. */
        sb->led.in0 = 0;
        /* Counters that went back belong to new processes or a new network slot. */
        if (!read || sb->led.cpu_last < sb->led.cpu0)
            sb->led.cpu0 = read ? sb->led.cpu_last : 0;
        if (net < sb->led.net0)
            sb->led.net0 = net;
        if (sb->led.start_ms > now)
            sb->led.start_ms = now;
    }
    if (!read)
        sb->led.cpu_last = sb->led.cpu0;
    sb->led.mem_at_ms = sb->led.start_ms;
    sb->led.mem_last = mem;
    sb->led.peak = mem;
}

/* Close the open interval at now into *iv (its strings are sb's). fresh: read its cgroups now
 * (a change of state); else the sampler's last reading stands (the periodic close, which must
 * not read tens of thousands of cgroups on the loop: what is not counted in this interval is
 * counted in the next). */
static void led_close(struct wr_live_sb *sb, int64_t now, bool fresh, struct wr_usage_interval *iv)
{
    uint64_t mem = sb->led.mem_last, net, in;
    double secs;

    wr__net_bytes(sb, &net, &in);
    if (fresh)
        (void)led_read(sb, &mem); /* no processes: the last reading stands */
    led_mem(sb, now, mem);
    if (now < sb->led.start_ms)
        now = sb->led.start_ms;
    secs = (double)(now - sb->led.start_ms) / 1000.0;
    *iv = (struct wr_usage_interval){
        .sandbox = sb->id,
        .team = sb->team,
        .template_name = sb->led.template_name,
        .seq = ++sb->led.seq,
        .start_ms = sb->led.start_ms,
        .end_ms = now,
        .running = sb->led.running,
        .cpu_millis = sb->cpu_millis,
        .memory_bytes = sb->memory_bytes,
        .peak_memory_bytes = sb->led.running ? sb->led.peak : 0,
        .cpu_end_ns = sb->led.cpu_last,
        .net_out_end = net,
    };
    if (sb->led.running) {
        iv->vcpu_seconds = secs * (double)sb->cpu_millis / 1000.0;
        iv->gib_seconds = secs * (double)sb->memory_bytes / GIB;
        iv->mem_gib_seconds = sb->led.mem_gib_s;
    }
    if (sb->led.cpu_last >= sb->led.cpu0)
        iv->cpu_seconds = (double)(sb->led.cpu_last - sb->led.cpu0) / 1e9;
    if (net >= sb->led.net0)
        iv->net_bytes_out = net - sb->led.net0;
    if (in >= sb->led.in0)
        iv->net_bytes_in = in - sb->led.in0;
    sb->led.open = false;
}

static void on_ledger_more(uv_timer_t *t);

static void led_write(struct wr_manager *m, const struct wr_usage_interval *v, size_t n)
{
    struct wr_err err;

    if (wr_store_usage_insert(m->cfg.store, v, n, &err) < 0)
        log_warn("usage ledger: %zu intervals lost: %s", n, err.msg);
}

void wr__ledger_state(struct wr_live_sb *sb, enum live_sb_state from)
{
    enum live_sb_state to = sb->state;
    bool was = from == LIVE_SB_RUNNING || from == LIVE_SB_PAUSED || from == LIVE_SB_ON_DISK;
    bool will = to == LIVE_SB_RUNNING || to == LIVE_SB_PAUSED || to == LIVE_SB_ON_DISK;
    int64_t now = wr__core_now_ms();

    if (sb->m->cfg.no_ledger)
        return;
    if (was && will && (from == LIVE_SB_RUNNING) == (to == LIVE_SB_RUNNING))
        return;
    if (sb->led.open) {
        struct wr_usage_interval iv;
        led_close(sb, now, true, &iv);
        led_write(sb->m, &iv, 1);
        wr__budget_account(sb, &iv);
    }
    if (will)
        led_open(sb, to == LIVE_SB_RUNNING, true, now);
}

/* Close and reopen the open intervals of the sandboxes of whole buckets from m->ledger_next on,
 * until WR_LEDGER_BATCH or more are done, in one transaction; the next loop turn goes on. */
static void ledger_walk(struct wr_manager *m)
{
    _cleanup_free_ struct wr_usage_interval *v = NULL;
    size_t n = 0, cap = 0;
    int64_t now = wr__core_now_ms();
    unsigned b;

    for (b = m->ledger_next; b < NBUCKETS && n < WR_LEDGER_BATCH; b++)
        for (struct wr_live_sb *sb = m->buckets[b]; sb != NULL; sb = sb->hnext) {
            bool running = sb->led.running;
            if (!sb->led.open)
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : WR_LEDGER_BATCH;
                v = xrealloc(v, cap * sizeof(*v));
            }
            led_close(sb, now, false, &v[n]);
            wr__budget_account(sb, &v[n++]);
            led_open(sb, running, false, now);
        }
    led_write(m, v, n);
    m->ledger_next = b;
    if (b < NBUCKETS)
        uv_timer_start(m->ledger_more, on_ledger_more, 0, 0);
}

static void on_ledger_more(uv_timer_t *t)
{
    ledger_walk(t->data);
}

static void on_ledger(uv_timer_t *t)
{
    struct wr_manager *m = t->data;

    m->ledger_next = 0;
    ledger_walk(m);
}

/* ---- storage by kind, sampled ---------------------------------------------------------------- */

struct storage_dir {
    char *team, *kind, *path;
};

struct storage_work {
    uv_work_t w;
    struct wr_manager *m;
    struct storage_dir *dirs;
    size_t n;
    uint64_t *bytes;
};

static void storage_run(uv_work_t *w)
{
    struct storage_work *sw = w->data;
    struct wr_err err;

    for (size_t i = 0; i < sw->n; i++)
        if (wr_layer_usage(sw->dirs[i].path, &sw->bytes[i], &err) < 0)
            sw->bytes[i] = 0;
}

static void storage_add(struct wr_usage_storage **v, size_t *n, size_t *cap, int64_t now,
                        const char *team, const char *kind, uint64_t bytes)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*v)[i].team, team) == 0 && strcmp((*v)[i].kind, kind) == 0) {
            (*v)[i].bytes += bytes;
            return;
        }
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        *v = xrealloc(*v, *cap * sizeof(**v));
    }
    (*v)[(*n)++] = (struct wr_usage_storage){now, xstrdup(team), xstrdup(kind), bytes};
}

static void storage_done(uv_work_t *w, int status)
{
    struct storage_work *sw = w->data;
    struct wr_manager *m = sw->m;
    struct wr_usage_storage *img = NULL, *v = NULL;
    size_t nimg = 0, n = 0, cap = 0;
    int64_t now = wr__core_now_ms();
    struct wr_err err;

    (void)status;
    if (wr_store_storage_images(m->cfg.store, &img, &nimg, &err) < 0)
        log_warn("usage: storage sample: %s", err.msg);
    for (size_t i = 0; i < nimg; i++)
        storage_add(&v, &n, &cap, now, img[i].team, img[i].kind, img[i].bytes);
    for (size_t i = 0; i < sw->n; i++)
        storage_add(&v, &n, &cap, now, sw->dirs[i].team, sw->dirs[i].kind, sw->bytes[i]);
    if (wr_store_storage_insert(m->cfg.store, v, n, &err) < 0)
        log_warn("usage: storage sample: %s", err.msg);
    for (size_t i = 0; i < nimg; i++)
        wr_usage_storage_fini(&img[i]);
    free(img);
    for (size_t i = 0; i < n; i++)
        wr_usage_storage_fini(&v[i]);
    free(v);
    for (size_t i = 0; i < sw->n; i++) {
        free(sw->dirs[i].team);
        free(sw->dirs[i].kind);
        free(sw->dirs[i].path);
    }
    free(sw->dirs);
    free(sw->bytes);
    free(sw);
    m->storage_busy = false;
    wr__work_done(m);
}

/* Sample the storage: the images' sizes from the store, and (on a worker) the disk use of the
 * volumes and of the sandboxes paused to disk. */
static void on_storage(uv_timer_t *t)
{
    struct wr_manager *m = t->data;
    struct wr_volume_rec *vols = NULL;
    size_t nvols = 0, cap = 0;
    struct storage_work *sw;
    struct wr_err err;

    if (m->storage_busy || m->closing)
        return;
    sw = xcalloc(1, sizeof(*sw));
    sw->m = m;
    if (wr_store_volume_list(m->cfg.store, NULL, &vols, &nvols, &err) < 0)
        log_warn("usage: storage sample: %s", err.msg);
    cap = nvols + 16;
    sw->dirs = xcalloc(cap, sizeof(*sw->dirs));
    for (size_t i = 0; i < nvols; i++) {
        sw->dirs[sw->n++] =
            (struct storage_dir){xstrdup(vols[i].team), xstrdup("volume"),
                                 xasprintf("%s/%s/data", m->cfg.volumes_dir, vols[i].id)};
        wr_volume_rec_fini(&vols[i]);
    }
    free(vols);
    for (unsigned b = 0; b < NBUCKETS; b++)
        for (struct wr_live_sb *sb = m->buckets[b]; sb != NULL; sb = sb->hnext) {
            if (sb->state != LIVE_SB_ON_DISK)
                continue;
            if (sw->n == cap) {
                cap *= 2;
                sw->dirs = xrealloc(sw->dirs, cap * sizeof(*sw->dirs));
            }
            sw->dirs[sw->n++] = (struct storage_dir){xstrdup(sb->team), xstrdup("paused"),
                                                     wr_images_home(m->cfg.images, sb->id)};
        }
    sw->bytes = xcalloc(sw->n + 1, sizeof(*sw->bytes));
    sw->w.data = sw;
    m->storage_busy = true;
    wr__queue_work(m, &sw->w, storage_run, storage_done);
}

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

static uv_timer_t *timer_new(struct wr_manager *m)
{
    uv_timer_t *t = xcalloc(1, sizeof(*t));

    uv_timer_init(m->loop, t);
    t->data = m;
    uv_unref((uv_handle_t *)t);
    return t;
}

void wr__ledger_start(struct wr_manager *m)
{
    uint64_t every = m->cfg.usage_interval_ms ? m->cfg.usage_interval_ms : WR_LEDGER_INTERVAL_MS;
    uint64_t storage = m->cfg.storage_period_ms ? m->cfg.storage_period_ms : WR_STORAGE_PERIOD_MS;

    if (m->cfg.no_ledger)
        return;
    m->ledger = timer_new(m);
    m->ledger_more = timer_new(m);
    m->storage = timer_new(m);
    uv_timer_start(m->ledger, on_ledger, every, every);
    uv_timer_start(m->storage, on_storage, storage < 1000 ? storage : 1000, storage);
}

void wr__ledger_stop(struct wr_manager *m)
{
    uv_timer_t **ts[] = {&m->ledger, &m->ledger_more, &m->storage};

    for (size_t i = 0; i < sizeof(ts) / sizeof(ts[0]); i++)
        if (*ts[i] != NULL) {
            uv_timer_stop(*ts[i]);
            uv_close((uv_handle_t *)*ts[i], timer_closed);
            *ts[i] = NULL;
        }
}

int wr_manager_usage(struct wr_manager *m, const char *team, int64_t from_ms, int64_t to_ms,
                     enum wr_usage_group g, struct wr_usage_sum **out, size_t *n,
                     struct wr_err *err)
{
    if (m->cfg.no_ledger)
        return wr_err_set(err, WR_EUNSUPPORTED, 0,
                          "this daemon keeps no usage ledger (it runs with --metering off)");
    return wr_store_usage_sum(m->cfg.store, team, from_ms, to_ms, g, out, n, err);
}

int wr_manager_storage(struct wr_manager *m, const char *team, int64_t from_ms, int64_t to_ms,
                       struct wr_usage_storage **out, size_t *n, struct wr_err *err)
{
    return wr_store_storage_list(m->cfg.store, team, from_ms, to_ms, out, n, err);
}
