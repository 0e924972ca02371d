/* SPDX-License-Identifier: Apache-2.0 */
/* Pause and resume, in memory (the cgroup freezer) and to disk (the processes end, the writable
 * layer stays) (see manager.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "space.h"
#include "../runtime/layer.h"
#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "core_int.h"
#include "images.h"
#include "start.h"

/* ---- pause and resume --------------------------------------------------------------------- */

struct freeze_work {
    uv_work_t w;
    struct wr_live_sb *sb;
    struct wr_sandbox *rt_sb;
    bool frozen;
    char *reason;       /* pause: the record's reason ("timeout"), or NULL */
    uint32_t timeout_s; /* resume: the new timeout; 0: the time left */
    struct wr_err err;
    int rc;
    wr_manager_state_cb cb;
    void *ctx;
};

static void freeze_run(uv_work_t *w)
{
    struct freeze_work *f = w->data;
    f->rc = wr_sandbox_freeze(f->rt_sb, f->frozen, &f->err);
}

static void answer(wr_manager_state_cb cb, void *ctx, struct wr_store *store, const char *id)
{
    struct wr_sandbox_rec rec;
    struct wr_err err;

    if (cb == NULL)
        return;
    if (wr_store_sandbox_get(store, NULL, id, &rec, &err) < 0) {
        cb(ctx, NULL, &err);
        return;
    }
    cb(ctx, &rec, NULL);
    wr_sandbox_rec_fini(&rec);
}

/* The freeze or thaw is done, or failed. A delete or death asked for meanwhile goes first. */
static void freeze_done(uv_work_t *w, int status)
{
    struct freeze_work *f = w->data;
    struct wr_live_sb *sb = f->sb;
    struct wr_manager *m = sb->m;
    struct wr_err err;
    bool timeout_pause = f->frozen && f->reason != NULL && strcmp(f->reason, "timeout") == 0;

    sb->busy = false;
    if (m->closing) {
        wr_err_set(&err, WR_ECONFLICT, 0, "the daemon is shutting down");
        if (f->cb != NULL)
            f->cb(f->ctx, NULL, &err);
        wr__live_sb_let_go(sb);
        goto out;
    }
    if (wr__run_pending_end(sb)) {
        wr_err_set(&err, WR_ECONFLICT, 0, "sandbox `%s` ended while being %s", sb->id,
                   f->frozen ? "paused" : "resumed");
        if (f->cb != NULL)
            f->cb(f->ctx, NULL, &err);
        goto out;
    }
    if (f->rc < 0) {
        log_warn("sandbox %s: %s", sb->id, f->err.msg);
        if (f->frozen) {
            /* The runtime thawed it again: it runs on, with its clocks. */
            wr__live_sb_set_state(sb, LIVE_SB_RUNNING);
            wr__procs_resume(sb);
            if (timeout_pause)
                wr__live_sb_end(sb, false, WR_SB_STOPPED, "timeout", NULL, NULL);
            else
                wr__arm_deadline(sb);
        }
        if (f->cb != NULL)
            f->cb(f->ctx, NULL, &f->err);
        goto out;
    }
    if (f->frozen) {
        if (wr_store_sandbox_set_paused(m->cfg.store, sb->id, WR_SB_PAUSED_MEMORY, f->reason,
                                        sb->remaining_ms, &err) < 0)
            log_error("sandbox %s: store: %s", sb->id, err.msg);
        log_info("sandbox %s: paused (%" PRId64 " ms left)", sb->id, sb->remaining_ms);
        answer(f->cb, f->ctx, m->cfg.store, sb->id);
        goto out;
    }
    wr__live_sb_set_state(sb, LIVE_SB_RUNNING);
    sb->deadline_ms =
        wr__core_now_ms() + (f->timeout_s ? (int64_t)f->timeout_s * 1000 : sb->remaining_ms);
    if (wr_store_sandbox_set_resumed(m->cfg.store, sb->id, sb->deadline_ms, &err) < 0)
        log_error("sandbox %s: store: %s", sb->id, err.msg);
    wr__arm_deadline(sb);
    wr__procs_resume(sb);
    log_info("sandbox %s: resumed", sb->id);
    if (sb->agent == NULL) {
        /* Adopted while paused: its agent is connected now, and the answer waits for it, so
         * the caller's next request finds it ready. */
        sb->resume_cb = f->cb;
        sb->resume_ctx = f->ctx;
        wr__live_sb_connect(sb, true);
        if (sb->agent == NULL)
            wr__resume_answer(sb, NULL);
        goto out;
    }
    answer(f->cb, f->ctx, m->cfg.store, sb->id);
out:
    wr_live_sb_unref(sb);
    free(f->reason);
    free(f);
    wr__work_done(m);
}

static void freeze_start(struct wr_live_sb *sb, bool frozen, const char *reason, uint32_t timeout_s,
                         wr_manager_state_cb cb, void *ctx)
{
    struct freeze_work *f = xcalloc(1, sizeof(*f));

    f->sb = sb;
    f->rt_sb = sb->rt;
    f->frozen = frozen;
    f->reason = reason ? xstrdup(reason) : NULL;
    f->timeout_s = timeout_s;
    f->cb = cb;
    f->ctx = ctx;
    f->w.data = f;
    sb->busy = true;
    wr_live_sb_ref(sb);
    wr__queue_work(sb->m, &f->w, freeze_run, freeze_done);
}

/* From now on nothing is sent to the agent, and no clock of the sandbox runs. */
void wr__pause_start(struct wr_live_sb *sb, const char *reason, int64_t remaining_ms,
                     wr_manager_state_cb cb, void *ctx)
{
    wr__live_sb_set_state(sb, LIVE_SB_PAUSED);
    sb->remaining_ms = remaining_ms > 0 ? remaining_ms : 0;
    uv_timer_stop(&sb->deadline);
    wr__procs_pause(sb);
    freeze_start(sb, true, reason, 0, cb, ctx);
}

/* ---- pause to disk: the processes end, the writable layer stays ---------------------------- */

struct disk_work {
    uv_work_t w;
    struct wr_live_sb *sb;
    struct wr_sandbox *rt_sb;   /* pause: the one to end; resume: the new one */
    struct start_spec ss;       /* resume */
    struct wr_start_cfg *start; /* resume: its template's start command, or NULL */
    char *tname;
    struct wr_err err;
    int rc;
    bool kept; /* gvisor: the processes were checkpointed (pause) or restored (resume) */
    wr_manager_state_cb cb;
    void *ctx;
};

static void disk_pause_run(uv_work_t *w)
{
    struct disk_work *d = w->data;
    struct wr_manager *m = d->sb->m;

    /* gvisor: its processes and memory are saved first (the checkpoint ends them); if that
     * fails they end as on ns, and what was written of the image goes. */
    if (d->rt_sb != NULL && wr_sandbox_backend(d->rt_sb) == WR_BACKEND_GVISOR) {
        _cleanup_free_ char *home = wr_images_home(m->cfg.images, d->sb->id);
        _cleanup_free_ char *image = wr__checkpoint_dir(home);
        struct wr_err e2;
        d->kept = wr_sandbox_checkpoint(d->rt_sb, image, &e2) == 0;
        if (!d->kept) {
            log_warn("sandbox %s: %s; its processes end", d->sb->id, e2.msg);
            (void)wr_layer_remove(image, NULL);
        }
    }
    d->rc = wr__sandbox_teardown(m, d->sb->id, d->rt_sb, false, NULL, &d->err);
    wr_runtime_crash_point(d->sb->m->cfg.rt, "disk-paused");
}

static void disk_pause_done(uv_work_t *w, int status)
{
    struct disk_work *d = w->data;
    struct wr_live_sb *sb = d->sb;
    struct wr_manager *m = sb->m;
    struct wr_err err;

    sb->busy = false;
    if (d->rc < 0)
        log_warn("sandbox %s: pause to disk: %s", sb->id, d->err.msg);
    wr__procs_free(sb);
    wr__account(sb, false);
    if (m->closing) {
        /* The record says paused to disk already: the next start keeps it so. */
        wr_err_set(&err, WR_ECONFLICT, 0, "the daemon is shutting down");
        if (d->cb != NULL)
            d->cb(d->ctx, NULL, &err);
        wr__live_sb_let_go(sb);
    } else if (!wr__run_pending_end(sb)) {
        if (wr_store_sandbox_set_runtime(m->cfg.store, sb->id, 0, 0, &err) < 0)
            log_error("sandbox %s: store: %s", sb->id, err.msg);
        log_info("sandbox %s: paused to disk (%" PRId64 " ms left)", sb->id, sb->remaining_ms);
        answer(d->cb, d->ctx, m->cfg.store, sb->id);
    } else if (d->cb != NULL) {
        wr_err_set(&err, WR_ECONFLICT, 0, "sandbox `%s` ended while being paused", sb->id);
        d->cb(d->ctx, NULL, &err);
    }
    wr_live_sb_unref(sb);
    free(d);
    wr__work_done(m);
}

/* Stop watching the sandbox (its processes are about to end: their subscribers hear it now),
 * then end its processes on a worker, keeping its home. */
static void disk_pause_start(struct wr_live_sb *sb, const char *reason, wr_manager_state_cb cb,
                             void *ctx)
{
    struct disk_work *d = xcalloc(1, sizeof(*d));
    struct wr_err why;

    sb->remaining_ms = sb->deadline_ms - wr__core_now_ms();
    if (sb->remaining_ms < 0)
        sb->remaining_ms = 0;
    wr_err_set(&why, WR_ECONFLICT, 0, "sandbox %s was paused to disk: its processes ended", sb->id);
    wr__live_sb_stop_watching(sb, LIVE_SB_ON_DISK, &why);
    /* Recorded before its processes end: a daemon killed meanwhile leaves a sandbox paused to
     * disk with its files (the next start ends what still runs), never one that reads as
     * running with its init gone, which the next start would end, files and all. */
    if (wr_store_sandbox_set_paused(sb->m->cfg.store, sb->id, WR_SB_PAUSED_DISK, reason,
                                    sb->remaining_ms, &why) < 0)
        log_error("sandbox %s: store: %s", sb->id, why.msg);
    d->sb = sb;
    d->rt_sb = sb->rt;
    sb->rt = NULL;
    d->cb = cb;
    d->ctx = ctx;
    d->w.data = d;
    sb->busy = true;
    wr_live_sb_ref(sb);
    wr__queue_work(sb->m, &d->w, disk_pause_run, disk_pause_done);
}

static void disk_resume_run(uv_work_t *w)
{
    struct disk_work *d = w->data;

    d->rc = wr__start_sandbox(d->sb->m, &d->ss, &d->rt_sb, &d->err);
    /* The image is spent once its processes run again (a later pause writes a new one); on a
     * failure it stays, for the next resume to try. */
    d->kept = d->rc == 0 && d->ss.restore_image != NULL;
    if (d->kept)
        (void)wr_layer_remove(d->ss.restore_image, NULL);
}

struct resume_start {
    struct wr_live_sb *sb; /* referenced */
    wr_manager_state_cb cb;
    void *ctx;
};

/* The start command after a resume from disk is ready, or not: the sandbox runs on either way
 * (its files are the caller's), and the resume answers with the start command's error. */
static void resume_started(void *arg, const struct wr_err *err)
{
    struct resume_start *rs = arg;
    struct wr_live_sb *sb = rs->sb;
    struct wr_manager *m = sb->m;
    struct wr_err e2;

    sb->busy = false;
    if (m->closing) {
        wr_err_set(&e2, WR_ECONFLICT, 0, "the daemon is shutting down");
        if (rs->cb != NULL)
            rs->cb(rs->ctx, NULL, &e2);
        wr__live_sb_let_go(sb);
    } else if (wr__run_pending_end(sb)) {
        wr_err_set(&e2, WR_ECONFLICT, 0, "sandbox `%s` ended while being resumed", sb->id);
        if (rs->cb != NULL)
            rs->cb(rs->ctx, NULL, &e2);
    } else if (err != NULL) {
        if (rs->cb != NULL)
            rs->cb(rs->ctx, NULL, err);
    } else {
        answer(rs->cb, rs->ctx, m->cfg.store, sb->id);
    }
    wr_live_sb_unref(sb);
    free(rs);
}

static void disk_resume_done(uv_work_t *w, int status)
{
    struct disk_work *d = w->data;
    struct wr_live_sb *sb = d->sb;
    struct wr_manager *m = sb->m;
    struct wr_err err;

    sb->busy = false;
    if (d->rc == 0 && (m->closing || sb->pending_end.due)) {
        (void)wr_sandbox_destroy(d->rt_sb, NULL);
        d->rc =
            wr_err_set(&d->err, WR_ECONFLICT, 0, "sandbox `%s` ended while being resumed", sb->id);
    }
    if (d->rc < 0) {
        if (d->cb != NULL)
            d->cb(d->ctx, NULL, &d->err);
        if (m->closing)
            wr__live_sb_let_go(sb);
        else
            (void)wr__run_pending_end(sb);
        goto out;
    }
    sb->rt = d->rt_sb;
    wr__account(sb, true);
    sb->deadline_ms = wr__core_now_ms() + sb->remaining_ms;
    if (wr_store_sandbox_set_runtime(m->cfg.store, sb->id, wr_sandbox_pid(sb->rt),
                                     wr_sandbox_uid_base(sb->rt), &err) < 0 ||
        wr_store_sandbox_set_resumed(m->cfg.store, sb->id, sb->deadline_ms, &err) < 0)
        log_error("sandbox %s: store: %s", sb->id, err.msg);
    sb->relist = d->kept;
    if (d->kept) {
        /* Its processes go on: the answer waits until they are listed (agent_ready). */
        sb->resume_cb = d->cb;
        sb->resume_ctx = d->ctx;
        d->cb = NULL;
    }
    wr__live_sb_start_watching(sb, LIVE_SB_RUNNING, sb->deadline_ms, false);
    log_info("sandbox %s: resumed from disk %s", sb->id,
             d->kept ? "with its processes (gvisor checkpoint)" : "with a fresh init");
    wr__event(m, sb->team, sb->id, "sandbox.started", json_pack("{s:s}", "cause", "resume"));
    if (d->start != NULL) {
        /* Its template's start command runs again; the resume answers once it is ready. */
        struct resume_start *rs = xcalloc(1, sizeof(*rs));
        rs->sb = sb;
        wr_live_sb_ref(sb);
        rs->cb = d->cb;
        rs->ctx = d->ctx;
        sb->busy = true;
        wr__start_run(sb, d->start, d->tname, resume_started, rs);
        d->start = NULL;
        goto out;
    }
    answer(d->cb, d->ctx, m->cfg.store, sb->id);
out:
    wr__start_cfg_free(d->start);
    free(d->tname);
    wr__start_spec_fini(&d->ss);
    wr_live_sb_unref(sb);
    free(d);
    wr__work_done(m);
}

/* Start the sandbox again on its kept files. The host's limits apply as to a create. */
static void disk_resume_start(struct wr_live_sb *sb, uint32_t timeout_s, wr_manager_state_cb cb,
                              void *ctx)
{
    struct wr_manager *m = sb->m;
    struct disk_work *d;
    struct wr_sandbox_rec rec;
    struct wr_err err;

    if (m->count >= m->cfg.max_sandboxes) {
        wr_err_set(&err, WR_ELIMIT, 0, "the host has no room to resume sandbox `%s`", sb->id);
        cb(ctx, NULL, &err);
        return;
    }
    if (wr__memory_admit(m, sb->memory_bytes, "resume", &err) < 0) {
        cb(ctx, NULL, &err);
        return;
    }
    if (wr_space_admit(m->cfg.space, "resume", 0, &err) < 0) {
        cb(ctx, NULL, &err);
        return;
    }
    if (wr_store_sandbox_get(m->cfg.store, NULL, sb->id, &rec, &err) < 0) {
        cb(ctx, NULL, &err);
        return;
    }
    d = xcalloc(1, sizeof(*d));
    if (wr__start_cfg_of_image(rec.image_json, rec.template_name, &d->start, &err) < 0 ||
        wr__start_spec_of(m, &rec, &d->ss, &err) < 0) {
        wr__start_cfg_free(d->start);
        wr_sandbox_rec_fini(&rec);
        free(d);
        cb(ctx, NULL, &err);
        return;
    }
    wr__start_cfg_add_services(&d->start, rec.compose_json); /* a fresh init starts them again */
    d->tname = xstrdup(rec.template_name ? rec.template_name : "");
    wr_sandbox_rec_fini(&rec);
    d->ss.home_exists = true;
    if (wr_manager_sandbox_checkpointed(m, sb->id)) {
        d->ss.restore_image = wr__checkpoint_dir(d->ss.home);
        /* Its processes go on: the template's start command already ran. */
        wr__start_cfg_free(d->start);
        d->start = NULL;
    }
    if (timeout_s != 0)
        sb->remaining_ms = (int64_t)timeout_s * 1000;
    d->sb = sb;
    d->cb = cb;
    d->ctx = ctx;
    d->w.data = d;
    sb->busy = true;
    wr_live_sb_ref(sb);
    wr__queue_work(m, &d->w, disk_resume_run, disk_resume_done);
}

void wr_manager_pause(struct wr_manager *m, const char *team, const char *id,
                      enum wr_sb_paused_mode mode, wr_manager_state_cb cb, void *ctx)
{
    struct wr_err err;
    struct wr_live_sb *sb = wr__lookup(m, team, id, &err);

    wr__events_wrap_state(m, "sandbox.paused", &cb, &ctx);

    if (sb == NULL) {
        cb(ctx, NULL, &err);
        return;
    }
    if (wr__check_settled(sb, &err) < 0) {
        cb(ctx, NULL, &err);
        return;
    }
    if (wr__live_sb_paused(sb)) {
        wr_err_set(&err, WR_ECONFLICT, 0, "sandbox `%s` is already paused", id);
        cb(ctx, NULL, &err);
        return;
    }
    wr__metric_pause(mode == WR_SB_PAUSED_DISK);
    if (mode == WR_SB_PAUSED_DISK)
        disk_pause_start(sb, NULL, cb, ctx);
    else
        wr__pause_start(sb, NULL, sb->deadline_ms - wr__core_now_ms(), cb, ctx);
}

int wr__pause_budget(struct wr_live_sb *sb, wr_manager_state_cb cb, void *ctx)
{
    if (sb->state != LIVE_SB_RUNNING || wr__live_sb_ending(sb))
        return -1;
    if (wr__check_settled(sb, NULL) < 0)
        return 0;
    wr__events_wrap_state(sb->m, "sandbox.paused", &cb, &ctx);
    wr__metric_pause(true);
    disk_pause_start(sb, "budget", cb, ctx);
    return 1;
}

void wr_manager_resume(struct wr_manager *m, const char *team, const char *id, uint32_t timeout_s,
                       wr_manager_state_cb cb, void *ctx)
{
    struct wr_err err;
    struct wr_live_sb *sb = wr__lookup(m, team, id, &err);

    wr__events_wrap_state(m, "sandbox.resumed", &cb, &ctx);

    if (sb == NULL) {
        cb(ctx, NULL, &err);
        return;
    }
    if (timeout_s > m->cfg.max_timeout_s) {
        wr_err_set(&err, WR_EINVAL, 0, "timeout must be 1 to %u seconds", m->cfg.max_timeout_s);
        cb(ctx, NULL, &err);
        return;
    }
    if (wr__check_settled(sb, &err) < 0) {
        cb(ctx, NULL, &err);
        return;
    }
    if (!wr__live_sb_paused(sb)) {
        wr_err_set(&err, WR_ECONFLICT, 0, "sandbox `%s` is not paused", id);
        cb(ctx, NULL, &err);
        return;
    }
    if (wr__budget_over(sb)) {
        wr_err_set(&err, WR_ELIMIT, 0,
                   "sandbox `%s` is past its own budget: raise or remove it to resume", id);
        cb(ctx, NULL, &err);
        return;
    }
    wr__metric_resume(sb->state == LIVE_SB_ON_DISK);
    if (sb->state == LIVE_SB_ON_DISK)
        disk_resume_start(sb, timeout_s, cb, ctx);
    else
        freeze_start(sb, false, NULL, timeout_s, cb, ctx);
}

bool wr_manager_sandbox_checkpointed(struct wr_manager *m, const char *id)
{
    _cleanup_free_ char *home = wr_images_home(m->cfg.images, id);
    _cleanup_free_ char *image = wr__checkpoint_dir(home);
    _cleanup_free_ char *img = xasprintf("%s/checkpoint.img", image);

    return access(img, F_OK) == 0;
}

void wr__pause_to_disk(struct wr_live_sb *sb, const char *reason, wr_manager_state_cb cb, void *ctx)
{
    disk_pause_start(sb, reason, cb, ctx);
}

void wr__resume_from_disk(struct wr_live_sb *sb, wr_manager_state_cb cb, void *ctx)
{
    disk_resume_start(sb, 0, cb, ctx);
}
