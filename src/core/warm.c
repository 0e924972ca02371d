/* SPDX-License-Identifier: Apache-2.0 */
/* Warm sandboxes: complete sandboxes of a template, started ahead of creates, one pool per
 * template (warrend --warm N for base, --warm NAME=N for others). A create that asks for exactly
 * what they are (that template, no env of its own, the default CPU and memory, no volume, no
 * disk limit) takes one and is answered at once, instead of waiting for the namespaces, mounts,
 * cgroups and warren-init (and the template's start command, below). Its id,
 * hostname, home and cgroups were made for the id the create then gets, so nothing is renamed;
 * nothing has run in it but its warren-init (and its template's start command), so it cannot be
 * told from a sandbox made for the request except by the start times. Its deadline starts at
 * the create.
 *
 * A template with a start command (start.h): a warm sandbox of it has a live sandbox of its own
 * (CREATING, in no table, counted nowhere) whose agent is connected and whose start command
 * runs; it is "ready" only once the command's readiness check has answered, and the create
 * that takes it takes that live sandbox too (the start process stays in its process table). A
 * start that fails is logged and tried again after WARM_RETRY_MS.
 *
 * Networking: on a daemon whose creates get the internet by default (--net-default on), a pool's
 * sandboxes each hold a network slot (net.c), joined like a create's but with no policy bound:
 * nothing leaves the slot until the create that takes it binds its own policy (wr__net_bind).
 * Such a pool serves only creates that want a network, and a pool of loopback-only sandboxes
 * only creates that do not. A start command that needs the network at warm time therefore fails
 * its readiness check there; such a template cannot be kept warm.
 *
 * Each warm sandbox has a marker, <warm_dir>/<id>, from before it is made until the record of
 * the create that took it is in the store; it says "ready" once the sandbox can be taken. A daemon
 * killed with warm sandboxes running has no record to adopt them by: the next one finds them by
 * their markers and kills them (wr__warm_open). On a normal stop they are destroyed
 * (wr__warm_close).
 *
 * Refills run one sandbox at a time per pool on the loop's pool, WARM_DELAY_MS after the take that
 * made room: long enough for the new sandbox's first command to start before the refill competes
 * with it, short enough that a sequential loop of creates (bench/run-api.sh) finds the next one
 * ready. Measured with bench/api.c cycle, create -> first output median (p99): 5.4-5.6 ms
 * (11-14) with 4 ms, 6.6 (11-12) with 0, 5.6-6.2 (20-21) with 8, 9.1 (20) with 20, and
 * 10.7-11.1 ms with no warm sandboxes.
 *
 * Loop thread only, except the work callbacks. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../runtime/layer.h"
#include "../runtime/runtime.h"
#include "../store/store.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "core_int.h"
#include "images.h"
#include "start.h"

#define WARM_DELAY_MS 4
#define WARM_RETRY_MS 5000
#define WARM_MAX      64

struct warm_entry {
    char id[21];
    struct wr_sandbox *rt;
    struct wr_live_sb *sb; /* with a start command: its live sandbox; else NULL */
    char *image_json;      /* of the image it was made from, as a create records it */
    int32_t net_slot;      /* the network slot it joined (no policy bound), or -1 */
};

struct warm_pool {
    struct wr_warm *wm;
    char *name; /* the template */
    struct warm_entry v[WARM_MAX];
    size_t n, target;
    bool filling;
    bool net;          /* its sandboxes hold network slots */
    bool not_ns;       /* its template runs on another backend: said once, not filled */
    uv_timer_t *timer; /* the next refill */
};

struct wr_warm {
    struct wr_manager *m;
    struct warm_pool pools[WR_WARM_POOLS_MAX];
    size_t npools;
};

/* The image of a pool's template as a create records it (see wr_manager_create), or NULL. */
static char *warm_image_json(struct wr_manager *m, const char *name, struct wr_err *err)
{
    struct wr_image img = {0};
    json_t *image;
    char *s;

    if (wr_images_resolve(m->cfg.images, "", name, &img, err) < 0)
        return NULL;
    image = json_pack("{sOsO}", "layers", img.layers, "config", img.config);
    s = json_dumps(image, JSON_COMPACT);
    json_decref(image);
    wr_image_fini(&img);
    return s;
}

/* Whether an image (as warm_image_json makes it) leaves its sandboxes on ns: its config names no
 * other runtime. */
/* Whether a create of the template of image_json that names no runtime runs on ns: its
 * config's `runtime`, else the daemon's default. */
static bool runs_on_ns(const struct wr_manager *m, const char *image_json)
{
    json_t *j = json_loads(image_json, 0, NULL);
    json_t *v = json_object_get(json_object_get(j, "config"), "runtime");
    const char *name = v == NULL || json_is_null(v) ? wr__default_runtime(m) : json_string_value(v);
    bool ns = name != NULL && strcmp(name, "ns") == 0;

    json_decref(j);
    return ns;
}

static char *marker_path(const struct wr_manager *m, const char *id)
{
    return xasprintf("%s/%s", m->cfg.warm_dir, id);
}

/* Everything of a warm sandbox goes: its processes, cgroups, run directory, home and marker.
 * Blocking: a worker, or the loop at open and close. */
static void warm_remove(struct wr_manager *m, const char *id, struct wr_sandbox *rt)
{
    _cleanup_free_ char *home = wr_images_home(m->cfg.images, id);
    _cleanup_free_ char *marker = marker_path(m, id);
    struct wr_err err;

    if (wr__sandbox_teardown(m, id, rt, false, home, &err) < 0)
        log_warn("warm sandbox %s: %s", id, err.msg);
    (void)unlink(marker);
}

/* Let go of a warm sandbox's live sandbox (loop): its agent and processes. */
static void let_go_sb(struct wr_live_sb *sb)
{
    struct wr_err why;

    if (sb == NULL)
        return;
    wr_err_set(&why, WR_ECONFLICT, 0, "warm sandbox %s is removed", sb->id);
    wr__start_forget(sb, &why);
    wr_live_sb_unref(sb);
}

/* Give back the network slot of a warm sandbox that is gone (loop). made: its namespace was
 * made. At shutdown the pool is rebuilt from the kernel at the next start instead. */
static void let_go_slot(struct wr_manager *m, int32_t slot, bool made)
{
    if (slot >= 0 && !m->closing)
        wr__net_release_slot(m, slot, made);
}

/* ---- filling -------------------------------------------------------------------------------- */

struct fill_work {
    uv_work_t w;
    struct wr_manager *m;
    struct warm_pool *pool;
    char id[21];
    char *image_json;
    struct start_spec ss;
    struct wr_sandbox *rt;
    struct wr_live_sb *sb; /* while its start command runs */
    struct wr_err err;
    int rc;
};

static void schedule(struct warm_pool *p, uint64_t ms);

static void fill_run(uv_work_t *w)
{
    struct fill_work *f = w->data;
    _cleanup_free_ char *marker = marker_path(f->m, f->id);
    int fd = open(marker, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

    if (fd < 0) {
        f->rc = wr_err_sys(&f->err, "create `%s`", marker);
        return;
    }
    close(fd);
    f->rc = wr__start_sandbox(f->m, &f->ss, &f->rt, &f->err);
    if (f->rc < 0)
        (void)unlink(marker);
}

static void fill_free(struct fill_work *f)
{
    free(f->image_json);
    wr__start_spec_fini(&f->ss);
    free(f);
}

/* f's sandbox is up (and ready, if its template has a start command): into the pool. */
static void fill_add(struct fill_work *f)
{
    struct warm_pool *p = f->pool;
    struct warm_entry *e = &p->v[p->n++];
    _cleanup_free_ char *marker = marker_path(f->m, f->id);
    struct wr_err err;

    if (wr_write_fileat(AT_FDCWD, marker, "ready\n", false, &err) < 0)
        log_warn("warm sandbox %s: %s", f->id, err.msg);
    memcpy(e->id, f->id, sizeof(e->id));
    e->rt = f->rt;
    e->sb = f->sb;
    e->image_json = f->image_json;
    e->net_slot = f->ss.net_slot;
    f->image_json = NULL;
    log_debug("warm sandbox %s of `%s` ready (%zu of %zu)", e->id, p->name, p->n, p->target);
    if (p->n < p->target)
        schedule(p, WARM_DELAY_MS);
}

static void fill_started(void *ctx, const struct wr_err *err)
{
    struct fill_work *f = ctx;
    struct wr_manager *m = f->m;

    if (m->closing || m->warm == NULL) {
        let_go_sb(f->sb);
        warm_remove(m, f->id, f->rt);
    } else if (err != NULL) {
        f->pool->filling = false;
        log_warn("warm sandbox of `%s`: %s; retrying in %d s", f->pool->name, err->msg,
                 WARM_RETRY_MS / 1000);
        wr__warm_drop(m, f->id, f->rt, f->sb, f->ss.net_slot);
        schedule(f->pool, WARM_RETRY_MS);
    } else {
        f->pool->filling = false;
        fill_add(f);
    }
    fill_free(f);
}

static void fill_done(uv_work_t *w, int status)
{
    struct fill_work *f = w->data;
    struct wr_manager *m = f->m;
    struct wr_start_cfg *start = NULL;
    struct wr_err err;

    if (f->rc == 0 || !f->ss.net_make)
        wr__net_slot_made(m, f->ss.net_slot);
    if (m->closing || m->warm == NULL) {
        if (f->rc == 0)
            warm_remove(m, f->id, f->rt);
        let_go_slot(m, f->ss.net_slot, true);
    } else if (f->rc < 0) {
        let_go_slot(m, f->ss.net_slot, !f->ss.net_make);
        f->pool->filling = false;
        log_warn("warm sandbox of `%s`: %s; retrying in %d s", f->pool->name, f->err.msg,
                 WARM_RETRY_MS / 1000);
        schedule(f->pool, WARM_RETRY_MS);
    } else if (wr__start_cfg_of_image(f->image_json, f->pool->name, &start, &err) < 0) {
        f->pool->filling = false;
        log_warn("warm sandbox of `%s`: %s; retrying in %d s", f->pool->name, err.msg,
                 WARM_RETRY_MS / 1000);
        wr__warm_drop(m, f->id, f->rt, NULL, f->ss.net_slot);
        schedule(f->pool, WARM_RETRY_MS);
    } else if (start != NULL) {
        /* Its start command runs before it can be taken; the pool stays "filling" meanwhile. */
        f->sb = wr__live_sb_new(m, f->id, "", f->ss.memory_bytes, f->ss.cpu_millis);
        f->sb->rt = f->rt;
        f->sb->busy = true;
        wr__start_run(f->sb, start, f->pool->name, fill_started, f);
        wr__work_done(m);
        return;
    } else {
        f->pool->filling = false;
        fill_add(f);
    }
    fill_free(f);
    wr__work_done(m);
}

/* Start one more warm sandbox, unless enough are there or one is on its way. */
static void fill(struct warm_pool *p)
{
    struct wr_manager *m = p->wm->m;
    struct wr_sandbox_rec rec = {.net_slot = -1};
    struct fill_work *f;
    struct wr_err err;
    int32_t slot = -1;
    bool make = false, pooled = false;

    if (m->closing || p->filling || p->n >= p->target)
        return;
    f = xcalloc(1, sizeof(*f));
    f->m = m;
    f->pool = p;
    wr__core_new_id(f->id);
    f->image_json = warm_image_json(m, p->name, &err);
    if (f->image_json == NULL) {
        log_warn("warm sandbox: template `%s`: %s; retrying in %d s", p->name, err.msg,
                 WARM_RETRY_MS / 1000);
        free(f);
        schedule(p, WARM_RETRY_MS);
        return;
    }
    if (!runs_on_ns(m, f->image_json) ||
        (m->cfg.runtimes != 0 && !(m->cfg.runtimes & (1u << WR_BACKEND_NS)))) {
        /* Warm sandboxes are ns ones; a create of this template would never take one. */
        if (!p->not_ns)
            log_warn("warm sandboxes: template `%s` runs on another runtime than ns here; none "
                     "is kept",
                     p->name);
        p->not_ns = true;
        free(f->image_json);
        free(f);
        schedule(p, WARM_RETRY_MS);
        return;
    }
    p->not_ns = false;
    /* What wr_manager_create records for a create with no env, volume or limit of its own. */
    rec.id = f->id;
    rec.image_json = f->image_json;
    rec.env_json = (char *)"{}";
    rec.memory_bytes = m->cfg.default_memory_bytes;
    rec.cpu_millis = m->cfg.default_cpu_millis;
    if (p->net && wr__net_take(m, true, &slot, &make, &pooled, &err) < 0)
        goto retry;
    rec.net_slot = slot;
    if (wr__start_spec_of(m, &rec, &f->ss, &err) < 0) {
        wr__net_release_slot(m, slot, !make);
        goto retry;
    }
    f->ss.net_make = make;
    f->ss.net_pooled = pooled;
    p->filling = true;
    f->w.data = f;
    wr__queue_work(m, &f->w, fill_run, fill_done);
    return;
retry:
    log_warn("warm sandbox of `%s`: %s; retrying in %d s", p->name, err.msg, WARM_RETRY_MS / 1000);
    free(f->image_json);
    free(f);
    schedule(p, WARM_RETRY_MS);
}

static void on_timer(uv_timer_t *t)
{
    fill(t->data);
}

static void schedule(struct warm_pool *p, uint64_t ms)
{
    if (!p->wm->m->closing && !uv_is_active((uv_handle_t *)p->timer))
        uv_timer_start(p->timer, on_timer, ms, 0);
}

/* ---- taking --------------------------------------------------------------------------------- */

struct discard_work {
    uv_work_t w;
    struct wr_manager *m;
    char id[21];
    struct wr_sandbox *rt;
    int32_t net_slot;
};

static void discard_run(uv_work_t *w)
{
    struct discard_work *d = w->data;
    warm_remove(d->m, d->id, d->rt);
}

static void discard_done(uv_work_t *w, int status)
{
    struct discard_work *d = w->data;
    struct wr_manager *m = d->m;

    let_go_slot(m, d->net_slot, true); /* once nothing of the sandbox is left in it */
    free(d);
    wr__work_done(m);
}

void wr__warm_drop(struct wr_manager *m, const char *id, struct wr_sandbox *rt,
                   struct wr_live_sb *sb, int32_t net_slot)
{
    struct discard_work *d = xcalloc(1, sizeof(*d));

    let_go_sb(sb);
    d->m = m;
    memcpy(d->id, id, sizeof(d->id));
    d->rt = rt;
    d->net_slot = net_slot;
    d->w.data = d;
    wr__queue_work(m, &d->w, discard_run, discard_done);
}

/* A warm sandbox that cannot be used (its template changed, its warren-init or its start
 * command died). */
static void discard(struct wr_manager *m, struct warm_entry *e)
{
    wr__warm_drop(m, e->id, e->rt, e->sb, e->net_slot);
    free(e->image_json);
}

static struct warm_pool *pool_of(struct wr_warm *wm, const char *name)
{
    for (size_t i = 0; wm != NULL && i < wm->npools; i++)
        if (strcmp(wm->pools[i].name, name) == 0)
            return &wm->pools[i];
    return NULL;
}

/* Whether a warm sandbox's start command (if it has one) still runs, its agent connected. */
static bool start_alive(struct wr_live_sb *sb)
{
    if (sb == NULL)
        return true;
    if (sb->agent == NULL || !wr_agent_is_ready(sb->agent))
        return false;
    for (size_t i = 0; i < sb->nprocs; i++) {
        const char *tag = wr_proc_tag(sb->procs[i]);
        if (tag != NULL && strcmp(tag, WR_START_TAG) == 0 && wr_proc_running(sb->procs[i]))
            return true;
    }
    return false;
}

struct wr_sandbox *wr__warm_take(struct wr_manager *m, const char *tname, const char *image_json,
                                 bool want_net, char id[21], struct wr_live_sb **sb,
                                 int32_t *net_slot)
{
    struct warm_pool *p = pool_of(m->warm, tname);

    *sb = NULL;
    *net_slot = -1;
    if (p != NULL && p->net != want_net)
        return NULL;
    if (p != NULL && p->n > 0 && strcmp(p->v[p->n - 1].image_json, image_json) != 0) {
        /* A team's own template of that name, or the template changed since the warm ones were
         * made; in the second case none of them fits any more. */
        struct wr_err err;
        char *now = warm_image_json(m, p->name, &err);
        bool stale = now == NULL || strcmp(now, p->v[p->n - 1].image_json) != 0;

        free(now);
        if (!stale)
            return NULL;
        log_info("warm sandboxes: template `%s` changed; replacing them", p->name);
        while (p->n > 0)
            discard(m, &p->v[--p->n]);
        schedule(p, WARM_DELAY_MS);
        return NULL;
    }
    while (p != NULL && p->n > 0) {
        struct warm_entry e = p->v[--p->n];
        struct pollfd pfd = {.fd = wr_sandbox_pidfd(e.rt), .events = POLLIN};

        schedule(p, WARM_DELAY_MS);
        if (poll(&pfd, 1, 0) != 0) { /* its warren-init has exited */
            log_warn("warm sandbox %s: warren-init is gone", e.id);
            discard(m, &e);
            continue;
        }
        if (!start_alive(e.sb)) {
            log_warn("warm sandbox %s: its start command is no longer running", e.id);
            discard(m, &e);
            continue;
        }
        memcpy(id, e.id, sizeof(e.id));
        free(e.image_json);
        *sb = e.sb;
        *net_slot = e.net_slot;
        return e.rt;
    }
    return NULL;
}

void wr__warm_recorded(struct wr_manager *m, const char *id)
{
    _cleanup_free_ char *marker = marker_path(m, id);

    if (unlink(marker) < 0 && errno != ENOENT)
        log_warn("warm sandbox %s: unlink `%s`: %s", id, marker, strerror(errno));
}

size_t wr_manager_warm_pools(const struct wr_manager *m, struct wr_warm_pool_info *out, size_t cap)
{
    const struct wr_warm *wm = m->warm;

    for (size_t i = 0; wm != NULL && i < wm->npools && i < cap; i++)
        out[i] = (struct wr_warm_pool_info){.template_name = wm->pools[i].name,
                                            .target = (uint32_t)wm->pools[i].target,
                                            .ready = (uint32_t)wm->pools[i].n};
    return wm != NULL ? wm->npools : 0;
}

/* ---- open and close ------------------------------------------------------------------------- */

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

static void add_pool(struct wr_warm *wm, const char *name, uint32_t target)
{
    struct warm_pool *p;

    if (target == 0 || wm->npools >= WR_WARM_POOLS_MAX || pool_of(wm, name) != NULL)
        return;
    p = &wm->pools[wm->npools++];
    p->wm = wm;
    p->name = xstrdup(name);
    p->target = target < WARM_MAX ? target : WARM_MAX;
    p->net = wm->m->net != NULL && wm->m->cfg.net.default_internet;
    p->timer = xcalloc(1, sizeof(*p->timer));
    uv_timer_init(wm->m->loop, p->timer);
    p->timer->data = p;
    uv_unref((uv_handle_t *)p->timer);
}

void wr__warm_open(struct wr_manager *m)
{
    struct wr_warm *wm;
    struct wr_err err;
    bool base_named = false;

    if (m->cfg.warm_dir == NULL)
        return;
    if (wr_mkdir_p(m->cfg.warm_dir, 0700, &err) < 0) {
        log_warn("warm sandboxes: %s", err.msg);
        return;
    }
    /* Markers a killed daemon left: a sandbox whose record is in the store was taken (the
     * daemon died before it dropped the marker) and was adopted or ended like any other; the
     * others were warm, and nobody can use them. */
    {
        _cleanup_closedir_ DIR *d = opendir(m->cfg.warm_dir);
        for (struct dirent *de; d != NULL && (de = readdir(d)) != NULL;) {
            struct wr_sandbox_rec rec;

            if (de->d_name[0] == '.')
                continue;
            if (wr_store_sandbox_get(m->cfg.store, NULL, de->d_name, &rec, &err) == 0) {
                wr_sandbox_rec_fini(&rec);
                wr__warm_recorded(m, de->d_name);
                continue;
            }
            if (err.kind != WR_ENOTFOUND) { /* cannot tell: leave it for the next start */
                log_warn("warm sandbox %s: %s", de->d_name, err.msg);
                continue;
            }
            log_info("warm sandbox %s: left by an earlier daemon; removing it", de->d_name);
            warm_remove(m, de->d_name, NULL);
        }
    }
    wm = xcalloc(1, sizeof(*wm));
    wm->m = m;
    for (size_t i = 0; i < m->cfg.n_warm_pools; i++)
        base_named |= strcmp(m->cfg.warm_pools[i].template_name, "base") == 0;
    if (!base_named)
        add_pool(wm, "base", m->cfg.warm);
    for (size_t i = 0; i < m->cfg.n_warm_pools; i++)
        add_pool(wm, m->cfg.warm_pools[i].template_name, m->cfg.warm_pools[i].target);
    if (wm->npools == 0) {
        free(wm);
        return;
    }
    m->warm = wm;
    for (size_t i = 0; i < wm->npools; i++)
        fill(&wm->pools[i]);
}

void wr__warm_close(struct wr_manager *m)
{
    struct wr_warm *wm = m->warm;

    if (wm == NULL)
        return;
    m->warm = NULL; /* a fill still running removes its sandbox when done (m->closing) */
    for (size_t i = 0; i < wm->npools; i++) {
        struct warm_pool *p = &wm->pools[i];
        uv_timer_stop(p->timer);
        uv_close((uv_handle_t *)p->timer, timer_closed);
        for (size_t j = 0; j < p->n; j++) {
            let_go_sb(p->v[j].sb);
            warm_remove(m, p->v[j].id, p->v[j].rt);
            free(p->v[j].image_json);
        }
        free(p->name);
    }
    free(wm);
}
