/* SPDX-License-Identifier: Apache-2.0 */
/* Snapshots and forks: a sandbox's writable layer captured into the layer store as one more
 * layer on top of its image (see manager.h). */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../runtime/creds.h"
#include "../runtime/layer.h"
#include "../runtime/runtime.h"
#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "core_int.h"
#include "images.h"
#include "space.h"

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct snap_work {
    uv_work_t w;
    struct wr_manager *m;
    struct wr_live_sb *sb;
    struct wr_sandbox *rt_sb; /* frozen around the capture; NULL if it is frozen or on disk */
    char *home, *tmp;
    char digest[72];
    uint64_t bytes;
    struct wr_image_rec img; /* id, kind, name, team, config_json, source */
    json_t *base_layers;
    struct wr_snapshot_info info;
    struct wr_err err;
    int rc;
    wr_manager_snapshot_cb cb;
    void *ctx;
};

/* A copy of the sandbox's files is the daemon writing for a tenant (runtime/creds.h). */
static int capture_as_tenant(const char *home, const char *dst, const struct wr_fs_info *fs,
                             struct wr_err *err)
{
    struct wr_creds_saved saved;
    int rc;

    if (wr_creds_tenant_begin(&saved, err) < 0)
        return -1;
    rc = wr_layer_capture(home, dst, fs, err);
    wr_creds_tenant_end(&saved);
    /* The directory made under the tenant's fsid belongs to the store (its fs/ has the
     * sandbox's own owner, copied). */
    if (rc == 0 && lchown(dst, 0, 0) < 0) {
        rc = wr_err_sys(err, "chown `%s`", dst);
        (void)wr_layer_remove(dst, NULL);
    }
    return rc;
}

static void snap_run(uv_work_t *w)
{
    struct snap_work *s = w->data;
    const struct wr_fs_info *fs = wr_images_fs(s->m->cfg.images);
    uint64_t t0, t1, t2;
    struct wr_err e2;

    wr_layer_presync(s->home, fs);
    t0 = mono_ns();
    if (s->rt_sb != NULL && wr_sandbox_freeze(s->rt_sb, true, &s->err) < 0) {
        s->rc = -1;
        return;
    }
    t1 = mono_ns();
    s->rc = capture_as_tenant(s->home, s->tmp, fs, &s->err);
    t2 = mono_ns();
    if (s->rt_sb != NULL && wr_sandbox_freeze(s->rt_sb, false, &e2) < 0)
        log_warn("sandbox %s: thaw after a snapshot: %s", wr_sandbox_id(s->rt_sb), e2.msg);
    s->info.freeze_ms = s->rt_sb != NULL ? (double)(mono_ns() - t0) / 1e6 : 0;
    s->info.capture_ms = (double)(t2 - t1) / 1e6;
    if (s->rc == 0)
        s->rc = wr_layer_capture_finish(s->tmp, &s->err);
    if (s->rc == 0)
        s->rc = wr_images_install(s->m->cfg.images, s->tmp, s->digest, &s->bytes, &s->err);
    s->info.total_ms = (double)(mono_ns() - t0) / 1e6;
}

/* Record the snapshot, its name claimed again (it may have been taken meanwhile). */
static int snap_record(struct snap_work *s)
{
    struct wr_images *im = s->m->cfg.images;
    struct wr_images_claim c = {.team = s->img.team, .name = s->img.name, .snapshot = true};
    _cleanup_free_ char *replaces = NULL;

    if (wr_images_claim(im, &c, &replaces, &s->err) < 0) {
        wr_images_forget(im, s->digest, s->bytes);
        return -1;
    }
    return wr_images_record(im, &s->img, s->base_layers, s->digest, s->bytes, &s->err);
}

static void snap_done(uv_work_t *w, int status)
{
    struct snap_work *s = w->data;
    struct wr_manager *m = s->m;
    struct wr_live_sb *sb = s->sb;

    sb->busy = false;
    if (m->closing) {
        wr_err_set(&s->err, WR_ECONFLICT, 0, "the daemon is shutting down");
        s->cb(s->ctx, NULL, NULL, &s->err);
    } else if (wr__run_pending_end(sb)) {
        if (s->rc == 0)
            wr_images_forget(m->cfg.images, s->digest, s->bytes); /* stored for nothing */
        wr_err_set(&s->err, WR_ECONFLICT, 0, "sandbox `%s` ended while being captured", sb->id);
        s->cb(s->ctx, NULL, NULL, &s->err);
    } else if (s->rc < 0 || snap_record(s) < 0) {
        wr_err_wrap(&s->err, "snapshot of sandbox %s", sb->id);
        s->cb(s->ctx, NULL, NULL, &s->err);
    } else {
        log_info("sandbox %s: snapshot %s (%s, frozen %.2f ms, %.2f ms in all%s)", sb->id,
                 s->img.id, s->info.capture, s->info.freeze_ms, s->info.total_ms,
                 s->digest[0] ? "" : "; nothing changed, no layer");
        s->info.layer = s->digest[0] ? s->digest : NULL;
        s->cb(s->ctx, &s->img, &s->info, NULL);
    }
    wr_live_sb_unref(sb);
    wr_image_rec_fini(&s->img);
    json_decref(s->base_layers);
    free(s->home);
    free(s->tmp);
    free(s);
    wr__work_done(m);
}

/* The image a snapshot of rec starts: its layers, and its config with the sandbox's env and its
 * Compose services (config "compose": a sandbox made from the snapshot, a fork's copies too,
 * runs them again). */
static int snapshot_image(const struct wr_sandbox_rec *rec, json_t **layers, char **config,
                          struct wr_err *err)
{
    json_t *img = json_loads(rec->image_json ? rec->image_json : "{}", 0, NULL);
    json_t *cfg = json_object_get(img, "config"), *env = json_loads(rec->env_json, 0, NULL);

    if (!json_is_array(json_object_get(img, "layers")) || !json_is_object(cfg)) {
        json_decref(img);
        json_decref(env);
        return wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` was made before images were recorded",
                          rec->id);
    }
    if (json_is_object(env)) {
        if (!json_is_object(json_object_get(cfg, "env")))
            json_object_set_new(cfg, "env", json_object());
        json_object_update(json_object_get(cfg, "env"), env);
    }
    if (rec->compose_json != NULL)
        json_object_set_new(cfg, "compose", json_loads(rec->compose_json, 0, NULL));
    *layers = json_incref(json_object_get(img, "layers"));
    *config = json_dumps(cfg, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(img);
    json_decref(env);
    return 0;
}

/* wr_manager_snapshot without its event (a fork's snapshot is part of the fork's). */
static void snapshot_start(struct wr_manager *m, const char *team, const char *id, const char *name,
                           wr_manager_snapshot_cb cb, void *ctx)
{
    struct wr_sandbox_rec rec;
    struct snap_work *s;
    _cleanup_free_ char *replaces = NULL;
    struct wr_err err;
    struct wr_live_sb *sb = wr__lookup(m, team, id, &err);
    struct wr_images_claim c = {.team = sb ? sb->team : NULL, .name = name, .snapshot = true};

    if (sb == NULL || wr__check_settled(sb, &err) < 0 ||
        wr_images_claim(m->cfg.images, &c, &replaces, &err) < 0 ||
        wr_space_admit(m->cfg.space, "snapshot", 0, &err) < 0)
        goto fail;
    if (wr_store_sandbox_get(m->cfg.store, NULL, sb->id, &rec, &err) < 0)
        goto fail;
    s = xcalloc(1, sizeof(*s));
    if (snapshot_image(&rec, &s->base_layers, &s->img.config_json, &err) < 0) {
        wr_sandbox_rec_fini(&rec);
        free(s);
        goto fail;
    }
    wr_sandbox_rec_fini(&rec);
    s->m = m;
    s->sb = sb;
    s->rt_sb =
        wr__live_sb_paused(sb) ? NULL : sb->rt; /* paused: frozen or without processes already */
    s->home = wr_images_home(m->cfg.images, sb->id);
    s->tmp = wr_images_tmp(m->cfg.images);
    s->img.id = wr_images_new_id("snap-");
    s->img.kind = xstrdup("snapshot");
    s->img.name = name ? xstrdup(name) : NULL;
    s->img.team = xstrdup(sb->team);
    s->img.source = xstrdup(sb->id);
    s->info.capture = wr_images_capture_name(m->cfg.images);
    s->cb = cb;
    s->ctx = ctx;
    s->w.data = s;
    sb->busy = true;
    wr_live_sb_ref(sb);
    wr__queue_work(m, &s->w, snap_run, snap_done);
    return;
fail:
    cb(ctx, NULL, NULL, &err);
}

void wr_manager_snapshot(struct wr_manager *m, const char *team, const char *id, const char *name,
                         wr_manager_snapshot_cb cb, void *ctx)
{
    wr__events_wrap_snapshot(m, id, &cb, &ctx);
    snapshot_start(m, team, id, name, cb, ctx);
}

/* ---- fork ---------------------------------------------------------------------------------- */

struct fork_op {
    struct wr_manager *m;
    char *team, *parent;
    uint32_t count, timeout_s, cpu_millis;
    uint64_t memory_bytes, disk_bytes;
    enum wr_sb_on_timeout on_timeout;
    char *metadata_json;
    char *template_name; /* the parent's, shown as the copies' template */
    char *runtime;       /* the parent's: the copies run on its backend */
    char *net_json;      /* the parent's network: the copies get its policy (NULL: loopback) */
    char *snap_id;
    struct wr_snapshot_info info;
    /* gvisor, the parent running: its processes are checkpointed (a pause to disk), its files
     * captured, it resumes, and the copies restore the same checkpoint (fork_gv_*) */
    struct wr_live_sb *psb; /* referenced */
    char *image;            /* the copies' hard links of the parent's checkpoint */
    char *image_json;       /* the snapshot's image, for the copies */
    struct wr_err snap_err;
    bool snap_failed;
    uint64_t t0;
    struct wr_sandbox_rec *recs;
    struct wr_err *errs;
    size_t nrecs, nerrs, pending;
    wr_manager_fork_cb cb;
    void *ctx;
};

static void fork_free(struct fork_op *f)
{
    for (size_t i = 0; i < f->nrecs; i++)
        wr_sandbox_rec_fini(&f->recs[i]);
    free(f->recs);
    free(f->errs);
    free(f->team);
    free(f->parent);
    free(f->metadata_json);
    free(f->template_name);
    free(f->runtime);
    free(f->net_json);
    free(f->snap_id);
    if (f->image != NULL)
        (void)wr_layer_remove(f->image, NULL);
    free(f->image);
    free(f->image_json);
    if (f->psb != NULL)
        wr_live_sb_unref(f->psb);
    free(f);
}

static void fork_child_done(void *ctx, struct wr_sandbox_rec *rec, bool existed,
                            const struct wr_err *err, unsigned retry_after_s)
{
    struct fork_op *f = ctx;
    struct wr_err e2;

    if (rec != NULL) {
        f->recs[f->nrecs++] = *rec;
        free(rec);
    } else if (err != NULL) {
        f->errs[f->nerrs++] = *err;
    }
    if (--f->pending > 0)
        return;
    /* The copies hold the layer through their own records: the snapshot itself goes. */
    if (wr_images_delete(f->m->cfg.images, NULL, "snapshot", f->snap_id, &e2) < 0)
        log_warn("fork of %s: drop snapshot %s: %s", f->parent, f->snap_id, e2.msg);
    log_info("sandbox %s: forked into %zu (%zu failed), frozen %.2f ms%s", f->parent, f->nrecs,
             f->nerrs, f->info.freeze_ms,
             f->info.processes_kept ? ", processes kept (gvisor checkpoint)" : "");
    f->cb(f->ctx, f->recs, f->nrecs, f->errs, f->nerrs, &f->info, NULL);
    fork_free(f);
}

/* The copies start from the snapshot's image but show the parent's template: the snapshot
 * itself is dropped once they exist. */
static char *fork_image_json(const struct wr_image_rec *snap)
{
    json_t *image = json_pack("{s:o,s:o}", "layers", json_loads(snap->layers_json, 0, NULL),
                              "config", json_loads(snap->config_json, 0, NULL));
    char *image_json = image ? json_dumps(image, JSON_COMPACT) : NULL;

    json_decref(image);
    return image_json;
}

static void fork_copies(struct fork_op *f);

static void fork_snapshot_done(void *ctx, const struct wr_image_rec *snap,
                               const struct wr_snapshot_info *info, const struct wr_err *err)
{
    struct fork_op *f = ctx;

    if (err != NULL) {
        f->cb(f->ctx, NULL, 0, NULL, 0, NULL, err);
        fork_free(f);
        return;
    }
    f->info = *info;
    f->snap_id = xstrdup(snap->id);
    f->image_json = fork_image_json(snap);
    fork_copies(f);
}

/* The count creates from the snapshot (f->snap_id, f->image_json), restoring f->image if set. */
static void fork_copies(struct fork_op *f)
{
    const char *image_json = f->image_json;
    struct wr__net_req_buf net;

    if (wr__net_req_of_json(f->net_json, &net) < 0)
        log_warn("fork of %s: its network record is unreadable; the copies get loopback only",
                 f->parent);
    /* One more than the copies, dropped after the loop: a create that fails at once calls back
     * before it returns, and the last callback frees f. */
    f->pending = (size_t)f->count + 1;
    for (uint32_t i = 0; i < f->count; i++) {
        struct wr_create_req req = {
            .team = f->team,
            .template_name = image_json ? f->template_name : f->snap_id,
            .image_json = image_json,
            .cpu_millis = f->cpu_millis,
            .memory_bytes = f->memory_bytes,
            .disk_bytes = f->disk_bytes,
            .timeout_s = f->timeout_s,
            .metadata_json = f->metadata_json,
            .on_timeout = f->on_timeout,
            .runtime = f->runtime,
            .restore_image = f->image,
            .net = &net.req,
        };
        wr_manager_create(f->m, &req, fork_child_done, f);
    }
    wr__net_req_buf_fini(&net);
    fork_child_done(f, NULL, false, NULL, 0);
}

/* ---- fork keeping memory (gvisor) -------------------------------------------------------------
 */

/* dst: a directory of hard links to the files of src (a checkpoint: flat, written once, never
 * changed), so the parent's resume may remove its own. */
static int link_image(const char *src, const char *dst, struct wr_err *err)
{
    _cleanup_closedir_ DIR *d = opendir(src);

    if (d == NULL)
        return wr_err_sys(err, "open `%s`", src);
    if (mkdir(dst, 0700) < 0)
        return wr_err_sys(err, "mkdir `%s`", dst);
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        _cleanup_free_ char *to = xasprintf("%s/%s", dst, de->d_name);
        if (linkat(dirfd(d), de->d_name, AT_FDCWD, to, 0) < 0)
            return wr_err_sys(err, "link `%s/%s`", src, de->d_name);
    }
    return 0;
}

/* The parent is running again (or failed to): the copies restore the checkpoint, or the fork
 * answers the snapshot's error. */
static void fork_gv_resumed(void *ctx, const struct wr_sandbox_rec *rec, const struct wr_err *err)
{
    struct fork_op *f = ctx;

    f->info.freeze_ms = (double)(mono_ns() - f->t0) / 1e6;
    if (err != NULL)
        log_warn("fork of %s: the parent did not resume: %s", f->parent, err->msg);
    if (f->snap_failed) {
        f->cb(f->ctx, NULL, 0, NULL, 0, NULL, &f->snap_err);
        fork_free(f);
        return;
    }
    fork_copies(f);
}

static void fork_gv_snapped(void *ctx, const struct wr_image_rec *snap,
                            const struct wr_snapshot_info *info, const struct wr_err *err)
{
    struct fork_op *f = ctx;

    if (err != NULL) {
        f->snap_failed = true;
        f->snap_err = *err;
    } else {
        bool kept = f->info.processes_kept;
        f->info = *info;
        f->info.processes_kept = kept;
        f->snap_id = xstrdup(snap->id);
        f->image_json = fork_image_json(snap);
    }
    wr__resume_from_disk(f->psb, fork_gv_resumed, f);
}

/* The parent is on disk, its processes checkpointed (unless that failed: then they ended, and
 * the copies start afresh): link the checkpoint for the copies, capture its files. */
static void fork_gv_paused(void *ctx, const struct wr_sandbox_rec *rec, const struct wr_err *err)
{
    struct fork_op *f = ctx;
    struct wr_err e2;

    if (err != NULL) {
        f->cb(f->ctx, NULL, 0, NULL, 0, NULL, err);
        fork_free(f);
        return;
    }
    if (wr_manager_sandbox_checkpointed(f->m, f->parent)) {
        _cleanup_free_ char *home = wr_images_home(f->m->cfg.images, f->parent);
        _cleanup_free_ char *ckpt = wr__checkpoint_dir(home);
        f->image = wr_images_tmp(f->m->cfg.images);
        if (link_image(ckpt, f->image, &e2) < 0) {
            log_warn("fork of %s: %s; the copies start afresh", f->parent, e2.msg);
            (void)wr_layer_remove(f->image, NULL);
            free(f->image);
            f->image = NULL;
        }
    }
    f->info.processes_kept = f->image != NULL;
    snapshot_start(f->m, f->team, f->parent, NULL, fork_gv_snapped, f);
}

/* A running gvisor parent: its copies keep its memory. False: fork its files as on ns (paused,
 * busy or gone: the snapshot's own checks answer). */
static bool fork_gv_start(struct fork_op *f, const struct wr_fork_req *req)
{
    struct wr_live_sb *sb = wr__lookup(f->m, req->team, req->id, NULL);

    if (sb == NULL || sb->state != LIVE_SB_RUNNING || wr__live_sb_paused(sb) ||
        wr__check_settled(sb, NULL) < 0)
        return false;
    f->psb = sb;
    wr_live_sb_ref(sb);
    f->t0 = mono_ns();
    wr__pause_to_disk(sb, "fork", fork_gv_paused, f);
    return true;
}

void wr_manager_fork(struct wr_manager *m, const struct wr_fork_req *req, wr_manager_fork_cb cb,
                     void *ctx)
{
    struct wr_sandbox_rec rec;
    struct fork_op *f;
    struct wr_err err;

    wr__events_wrap_fork(m, req->id, &cb, &ctx);
    if (req->count < 1 || req->count > WR_FORK_MAX) {
        wr_err_set(&err, WR_EINVAL, 0, "count must be 1 to %d", WR_FORK_MAX);
        cb(ctx, NULL, 0, NULL, 0, NULL, &err);
        return;
    }
    if (req->timeout_s > m->cfg.max_timeout_s) {
        wr_err_set(&err, WR_EINVAL, 0, "timeout must be 1 to %u seconds", m->cfg.max_timeout_s);
        cb(ctx, NULL, 0, NULL, 0, NULL, &err);
        return;
    }
    if (wr_store_sandbox_get(m->cfg.store, req->team, req->id, &rec, &err) < 0) {
        cb(ctx, NULL, 0, NULL, 0, NULL, &err);
        return;
    }
    if (wr_space_admit(m->cfg.space, "fork", 0, &err) < 0) {
        wr_sandbox_rec_fini(&rec);
        cb(ctx, NULL, 0, NULL, 0, NULL, &err);
        return;
    }
    f = xcalloc(1, sizeof(*f));
    f->m = m;
    f->team = xstrdup(rec.team);
    f->parent = xstrdup(rec.id);
    f->count = req->count;
    f->timeout_s = req->timeout_s ? req->timeout_s : rec.timeout_s;
    f->cpu_millis = rec.cpu_millis;
    f->memory_bytes = rec.memory_bytes;
    f->disk_bytes = rec.disk_bytes;
    f->on_timeout = rec.on_timeout;
    f->metadata_json = xstrdup(req->metadata_json ? req->metadata_json : rec.metadata_json);
    f->template_name = xstrdup(rec.template_name);
    f->runtime = xstrdup(rec.runtime ? rec.runtime : "ns");
    f->net_json = rec.net_json ? xstrdup(rec.net_json) : NULL;
    f->recs = xcalloc(req->count, sizeof(*f->recs));
    f->errs = xcalloc(req->count, sizeof(*f->errs));
    f->cb = cb;
    f->ctx = ctx;
    wr_sandbox_rec_fini(&rec);
    if (strcmp(f->runtime, "gvisor") == 0 && fork_gv_start(f, req))
        return;
    snapshot_start(m, req->team, req->id, NULL, fork_snapshot_done, f);
}
