/* SPDX-License-Identifier: Apache-2.0 */
/* Warm sandboxes: complete sandboxes of the default template, started ahead of creates
 * (warrend --warm N). A create that asks for exactly what they are (template "base", no env of
 * its own, the default CPU and memory, no volume, no disk limit) takes one and is answered at
 * once, instead of waiting for the namespaces, mounts, cgroups and warren-init. Its id,
 * hostname, home and cgroups were made for the id the create then gets, so nothing is renamed;
 * nothing has run in it but its warren-init, so it cannot be told from a sandbox made for the
 * request except by warren-init's start time. Its deadline starts at the create.
 *
 * Each warm sandbox has a marker, <warm_dir>/<id>, from before it is made until the record of
 * the create that took it is in the store; it says "ready" once the sandbox can be taken. A daemon
 * killed with warm sandboxes running has no record to adopt them by: the next one finds them by
 * their markers and kills them (wr__warm_open). On a normal stop they are destroyed
 * (wr__warm_close).
 *
 * Refills run one sandbox at a time on the loop's pool, WARM_DELAY_MS after the take that made
 * room: long enough for the new sandbox's first command to start before the refill competes
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

#define WARM_TEMPLATE "base"
#define WARM_DELAY_MS 4
#define WARM_RETRY_MS 5000
#define WARM_MAX      64

struct warm_entry {
    char id[21];
    struct wr_sandbox *rt;
    char *image_json; /* of the image it was made from, as a create records it */
};

struct wr_warm {
    struct wr_manager *m;
    struct warm_entry v[WARM_MAX];
    size_t n, target;
    bool filling;
    uv_timer_t *timer; /* the next refill */
};

/* The image of the warm template as a create records it (see wr_manager_create), or NULL. */
static char *warm_image_json(struct wr_manager *m, struct wr_err *err)
{
    struct wr_image img = {0};
    json_t *image;
    char *s;

    if (wr_images_resolve(m->cfg.images, "", WARM_TEMPLATE, &img, err) < 0)
        return NULL;
    image = json_pack("{sOsO}", "layers", img.layers, "config", img.config);
    s = json_dumps(image, JSON_COMPACT);
    json_decref(image);
    wr_image_fini(&img);
    return s;
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

/* ---- filling -------------------------------------------------------------------------------- */

struct fill_work {
    uv_work_t w;
    struct wr_manager *m;
    char id[21];
    char *image_json;
    struct start_spec ss;
    struct wr_sandbox *rt;
    struct wr_err err;
    int rc;
};

static void schedule(struct wr_warm *wm, uint64_t ms);

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

static void fill_done(uv_work_t *w, int status)
{
    struct fill_work *f = w->data;
    struct wr_manager *m = f->m;
    struct wr_warm *wm = m->warm;

    if (m->closing || wm == NULL) {
        if (f->rc == 0)
            warm_remove(m, f->id, f->rt);
    } else {
        wm->filling = false;
        if (f->rc < 0) {
            log_warn("warm sandbox: %s; retrying in %d s", f->err.msg, WARM_RETRY_MS / 1000);
            schedule(wm, WARM_RETRY_MS);
        } else {
            struct warm_entry *e = &wm->v[wm->n++];
            _cleanup_free_ char *marker = marker_path(m, f->id);
            struct wr_err err;

            if (wr_write_fileat(AT_FDCWD, marker, "ready\n", false, &err) < 0)
                log_warn("warm sandbox %s: %s", f->id, err.msg);
            memcpy(e->id, f->id, sizeof(e->id));
            e->rt = f->rt;
            e->image_json = f->image_json;
            f->image_json = NULL;
            log_debug("warm sandbox %s ready (%zu of %zu)", e->id, wm->n, wm->target);
            if (wm->n < wm->target)
                schedule(wm, WARM_DELAY_MS);
        }
    }
    free(f->image_json);
    wr__start_spec_fini(&f->ss);
    free(f);
    wr__work_done(m);
}

/* Start one more warm sandbox, unless enough are there or one is on its way. */
static void fill(struct wr_warm *wm)
{
    struct wr_manager *m = wm->m;
    struct wr_sandbox_rec rec = {.net_slot = -1};
    struct fill_work *f;
    struct wr_err err;

    if (m->closing || wm->filling || wm->n >= wm->target)
        return;
    f = xcalloc(1, sizeof(*f));
    f->m = m;
    wr__core_new_id(f->id);
    f->image_json = warm_image_json(m, &err);
    if (f->image_json == NULL) {
        log_warn("warm sandbox: template `%s`: %s; retrying in %d s", WARM_TEMPLATE, err.msg,
                 WARM_RETRY_MS / 1000);
        free(f);
        schedule(wm, WARM_RETRY_MS);
        return;
    }
    /* What wr_manager_create records for a create with no env, volume or limit of its own. */
    rec.id = f->id;
    rec.image_json = f->image_json;
    rec.env_json = (char *)"{}";
    rec.memory_bytes = m->cfg.default_memory_bytes;
    rec.cpu_millis = m->cfg.default_cpu_millis;
    if (wr__start_spec_of(m, &rec, &f->ss, &err) < 0) {
        log_warn("warm sandbox: %s; retrying in %d s", err.msg, WARM_RETRY_MS / 1000);
        free(f->image_json);
        free(f);
        schedule(wm, WARM_RETRY_MS);
        return;
    }
    wm->filling = true;
    f->w.data = f;
    wr__queue_work(m, &f->w, fill_run, fill_done);
}

static void on_timer(uv_timer_t *t)
{
    fill(t->data);
}

static void schedule(struct wr_warm *wm, uint64_t ms)
{
    if (!wm->m->closing && !uv_is_active((uv_handle_t *)wm->timer))
        uv_timer_start(wm->timer, on_timer, ms, 0);
}

/* ---- taking --------------------------------------------------------------------------------- */

struct discard_work {
    uv_work_t w;
    struct wr_manager *m;
    char id[21];
    struct wr_sandbox *rt;
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

    free(d);
    wr__work_done(m);
}

void wr__warm_drop(struct wr_manager *m, const char *id, struct wr_sandbox *rt)
{
    struct discard_work *d = xcalloc(1, sizeof(*d));

    d->m = m;
    memcpy(d->id, id, sizeof(d->id));
    d->rt = rt;
    d->w.data = d;
    wr__queue_work(m, &d->w, discard_run, discard_done);
}

/* A warm sandbox that cannot be used (its template changed, or its warren-init died). */
static void discard(struct wr_manager *m, struct warm_entry *e)
{
    wr__warm_drop(m, e->id, e->rt);
    free(e->image_json);
}

struct wr_sandbox *wr__warm_take(struct wr_manager *m, const char *image_json, char id[21])
{
    struct wr_warm *wm = m->warm;

    if (wm != NULL && wm->n > 0 && strcmp(wm->v[wm->n - 1].image_json, image_json) != 0) {
        /* A team's own template of that name, or the template changed since the warm ones were
         * made; in the second case none of them fits any more. */
        struct wr_err err;
        char *now = warm_image_json(m, &err);
        bool stale = now == NULL || strcmp(now, wm->v[wm->n - 1].image_json) != 0;

        free(now);
        if (!stale)
            return NULL;
        log_info("warm sandboxes: template `%s` changed; replacing them", WARM_TEMPLATE);
        while (wm->n > 0)
            discard(m, &wm->v[--wm->n]);
        schedule(wm, WARM_DELAY_MS);
        return NULL;
    }
    while (wm != NULL && wm->n > 0) {
        struct warm_entry e = wm->v[--wm->n];
        struct pollfd p = {.fd = wr_sandbox_pidfd(e.rt), .events = POLLIN};

        schedule(wm, WARM_DELAY_MS);
        if (poll(&p, 1, 0) != 0) { /* its warren-init has exited */
            log_warn("warm sandbox %s: warren-init is gone", e.id);
            discard(m, &e);
            continue;
        }
        memcpy(id, e.id, sizeof(e.id));
        free(e.image_json);
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

/* ---- open and close ------------------------------------------------------------------------- */

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

void wr__warm_open(struct wr_manager *m)
{
    struct wr_warm *wm;
    struct wr_err err;

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
    if (m->cfg.warm == 0)
        return;
    wm = xcalloc(1, sizeof(*wm));
    wm->m = m;
    wm->target = m->cfg.warm < WARM_MAX ? m->cfg.warm : WARM_MAX;
    wm->timer = xcalloc(1, sizeof(*wm->timer));
    uv_timer_init(m->loop, wm->timer);
    wm->timer->data = wm;
    uv_unref((uv_handle_t *)wm->timer);
    m->warm = wm;
    fill(wm);
}

void wr__warm_close(struct wr_manager *m)
{
    struct wr_warm *wm = m->warm;

    if (wm == NULL)
        return;
    m->warm = NULL; /* a fill still running removes its sandbox when done (m->closing) */
    uv_timer_stop(wm->timer);
    uv_close((uv_handle_t *)wm->timer, timer_closed);
    for (size_t i = 0; i < wm->n; i++) {
        warm_remove(m, wm->v[i].id, wm->v[i].rt);
        free(wm->v[i].image_json);
    }
    free(wm);
}
