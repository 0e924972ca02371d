/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox manager: lifecycle, deadlines, quotas and reconciliation (see manager.h). */
#include "manager.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "../runtime/layer.h"
#include "../runtime/quota.h"
#include "space.h"
#include "../runtime/runtime.h"
#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "core_int.h"
#include "images.h"

void wr__queue_work(struct wr_manager *m, uv_work_t *w, uv_work_cb run, uv_after_work_cb done)
{
    m->inflight++;
    uv_queue_work(m->loop, w, run, done);
}

void wr__work_done(struct wr_manager *m)
{
    if (--m->inflight == 0 && m->closing)
        free(m);
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

static struct wr_msb *table_get(struct wr_manager *m, const char *id)
{
    for (struct wr_msb *s = m->buckets[bucket_of(id)]; s != NULL; s = s->hnext)
        if (strcmp(s->id, id) == 0)
            return s;
    return NULL;
}

static void table_put(struct wr_manager *m, struct wr_msb *sb)
{
    unsigned b = bucket_of(sb->id);
    sb->hnext = m->buckets[b];
    m->buckets[b] = sb;
    m->count++;
    m->committed += sb->memory_bytes;
}

static void table_del(struct wr_manager *m, struct wr_msb *sb)
{
    for (struct wr_msb **pp = &m->buckets[bucket_of(sb->id)]; *pp != NULL; pp = &(*pp)->hnext)
        if (*pp == sb) {
            *pp = sb->hnext;
            if (!sb->on_disk) {
                m->count--;
                m->committed -= sb->memory_bytes;
            }
            return;
        }
}

/* A sandbox paused to disk holds no memory and no processes: it does not count against the
 * host's limits until it is resumed. */
static void account(struct wr_msb *sb, bool on_disk)
{
    struct wr_manager *m = sb->m;

    if (sb->on_disk == on_disk)
        return;
    sb->on_disk = on_disk;
    if (on_disk) {
        m->count--;
        m->committed -= sb->memory_bytes;
    } else {
        m->count++;
        m->committed += sb->memory_bytes;
    }
}

/* ---- a managed sandbox's life ---------------------------------------------------------------- */

/* Each open handle (deadline timer, pidfd poll) holds a reference of its own. */
static void msb_handle_closed(uv_handle_t *h)
{
    struct wr_msb *sb = h->data;
    sb->open_handles--;
    wr_msb_unref(sb);
}

void wr_msb_ref(struct wr_msb *sb)
{
    sb->refs++;
}

void wr_msb_unref(struct wr_msb *sb)
{
    if (--sb->refs > 0)
        return;
    free(sb->id);
    free(sb->team);
    free(sb);
}

bool wr_msb_alive(const struct wr_msb *sb)
{
    return sb->alive;
}

const char *wr_msb_id(const struct wr_msb *sb)
{
    return sb->id;
}

struct wr_agent *wr_msb_agent(struct wr_msb *sb)
{
    return sb->agent;
}

const char *wr_msb_ctl_path(const struct wr_msb *sb)
{
    return sb->rt != NULL ? wr_sandbox_ctl_path(sb->rt) : NULL;
}

uv_loop_t *wr_msb_loop(const struct wr_msb *sb)
{
    return sb->m->loop;
}

static void on_deadline(uv_timer_t *t);
static void on_agent_lost(uv_timer_t *t);
static void on_pidfd(uv_poll_t *p, int status, int events);
static void agent_ready(struct wr_agent *a, const struct wr_err *err, void *ctx);
static void agent_closed(struct wr_agent *a, const struct wr_err *err, void *ctx);

/* Whether an image_json refers to layers of the store (not only directory templates): only the
 * end of such a sandbox can leave layers to collect. */
static bool uses_store_layers(const char *image_json)
{
    return image_json != NULL && strstr(image_json, "\"sha256:") != NULL;
}

static struct wr_msb *msb_new(struct wr_manager *m, const char *id, const char *team,
                              uint64_t memory_bytes, uint32_t cpu_millis)
{
    struct wr_msb *sb = xcalloc(1, sizeof(*sb));

    sb->m = m;
    sb->id = xstrdup(id);
    sb->team = xstrdup(team);
    sb->memory_bytes = memory_bytes;
    sb->cpu_millis = cpu_millis;
    sb->refs = 1; /* the table's */
    return sb;
}

/* Open the sandbox's control agent: on its connected socket, or by path (after a restart). */
static void msb_connect(struct wr_msb *sb, bool by_path)
{
    struct wr_agent_config ac = {.loop = sb->m->loop,
                                 .fd = -1,
                                 .on_ready = agent_ready,
                                 .on_close = agent_closed,
                                 .ctx = sb};
    struct wr_err err;

    if (by_path)
        ac.path = wr_sandbox_ctl_path(sb->rt);
    else
        ac.fd = dup(wr_sandbox_ctl_fd(sb->rt));
    if (wr_agent_open(&ac, &sb->agent, &err) < 0) {
        log_warn("sandbox %s: agent: %s", sb->id, err.msg);
        sb->agent = NULL;
    }
}

static void arm_deadline(struct wr_msb *sb)
{
    int64_t left = sb->deadline_ms - wr__core_now_ms();
    uv_timer_start(&sb->deadline, on_deadline, left > 0 ? (uint64_t)left : 0, 0);
}

/* The sandbox runs (or is paused): watch its end; unless paused, arm its deadline and connect
 * its agent (a frozen warren-init could not answer the HELLO: resume connects it). */
static void msb_start_watching(struct wr_msb *sb, int64_t deadline_ms, bool connect_by_path)
{
    struct wr_manager *m = sb->m;

    sb->alive = true;
    sb->deadline_ms = deadline_ms;
    uv_timer_init(m->loop, &sb->deadline);
    sb->deadline.data = sb;
    sb->open_handles++;
    wr_msb_ref(sb);
    if (!sb->paused)
        arm_deadline(sb);

    if (uv_poll_init(m->loop, &sb->pidfd_poll, wr_sandbox_pidfd(sb->rt)) == 0) {
        sb->pidfd_poll.data = sb;
        sb->open_handles++;
        wr_msb_ref(sb);
        uv_poll_start(&sb->pidfd_poll, UV_READABLE, on_pidfd);
        sb->polling = true;
    }
    if (!sb->paused)
        msb_connect(sb, connect_by_path);
}

/* Answer a resume that waits for the agent (see resume_cb). */
static void resume_answer(struct wr_msb *sb, const struct wr_err *err)
{
    wr_manager_state_cb cb = sb->resume_cb;
    struct wr_sandbox_rec rec;
    struct wr_err e2;

    if (cb == NULL)
        return;
    sb->resume_cb = NULL;
    if (err != NULL) {
        cb(sb->resume_ctx, NULL, err);
    } else if (wr_store_sandbox_get(sb->m->cfg.store, NULL, sb->id, &rec, &e2) < 0) {
        cb(sb->resume_ctx, NULL, &e2);
    } else {
        cb(sb->resume_ctx, &rec, NULL);
        wr_sandbox_rec_fini(&rec);
    }
}

/* Stop everything that refers to the sandbox on the loop; its processes hear on_lost. */
static void msb_stop_watching(struct wr_msb *sb, const struct wr_err *why)
{
    if (!sb->alive)
        return;
    sb->alive = false;
    resume_answer(sb, why);
    wr__procs_lost(sb, why);
    if (sb->agent != NULL) {
        wr_agent_close(sb->agent);
        sb->agent = NULL;
    }
    uv_timer_stop(&sb->deadline);
    uv_close((uv_handle_t *)&sb->deadline, msb_handle_closed);
    if (sb->polling) {
        uv_poll_stop(&sb->pidfd_poll);
        uv_close((uv_handle_t *)&sb->pidfd_poll, msb_handle_closed);
        sb->polling = false;
    }
}

/* ---- destroying, on a worker thread ---------------------------------------------------------- */

struct destroy_work {
    uv_work_t w;
    struct wr_msb *sb;
    struct wr_sandbox *rt_sb;
    char *final_state; /* NULL: remove the record */
    char *reason;
    bool thaw;
    char *home; /* the writable layer, removed after the processes are gone */
    struct wr_err err;
    int rc;
    void (*cb)(void *ctx, const struct wr_err *err);
    void *ctx;
};

int wr__sandbox_teardown(struct wr_manager *m, const char *id, struct wr_sandbox *rt_sb, bool thaw,
                         const char *home, struct wr_err *err)
{
    struct wr_err e2;
    int rc;

    if (rt_sb != NULL) {
        /* Destroy kills warren-init through its pidfd and waits for it; a task frozen by the v1
         * freezer does not act on SIGKILL until thawed. */
        if (thaw && wr_sandbox_freeze(rt_sb, false, &e2) < 0)
            log_warn("sandbox %s: thaw before destroy: %s", id, e2.msg);
        rc = wr_sandbox_destroy(rt_sb, err);
    } else {
        /* No handle (paused to disk, half-made, a record only): whatever runs in its cgroup. */
        rc = wr_sandbox_reap(m->cfg.rt, id, err);
    }
    if (home != NULL && wr_layer_remove(home, &e2) < 0) {
        log_warn("sandbox %s: remove writable layer: %s", id, e2.msg);
        if (rc == 0 && err != NULL)
            *err = e2;
        rc = -1;
    }
    return rc;
}

static void destroy_run(uv_work_t *w)
{
    struct destroy_work *d = w->data;
    d->rc = wr__sandbox_teardown(d->sb->m, d->sb->id, d->rt_sb, d->thaw, d->home, &d->err);
}

static void destroy_done(uv_work_t *w, int status)
{
    struct destroy_work *d = w->data;
    struct wr_manager *m = d->sb->m;
    struct wr_err e2;
    bool collect;

    if (d->rc < 0)
        log_warn("sandbox %s: teardown: %s", d->sb->id, d->err.msg);
    if (!m->closing) {
        if (d->final_state == NULL) {
            if (wr_store_sandbox_delete(m->cfg.store, d->sb->id, &e2) < 0)
                log_warn("sandbox %s: store: %s", d->sb->id, e2.msg);
        } else if (wr_store_sandbox_set_state(m->cfg.store, d->sb->id, d->final_state, d->reason,
                                              &e2) < 0) {
            log_warn("sandbox %s: store: %s", d->sb->id, e2.msg);
        }
    }
    table_del(m, d->sb);
    if (d->cb != NULL)
        d->cb(d->ctx, NULL);
    /* Deletes asked for while it ended (a deadline, say) forget the record now. */
    while (d->sb->delete_waiters != NULL) {
        struct wr_delete_waiter *dw = d->sb->delete_waiters;
        struct wr_err *e = NULL;
        d->sb->delete_waiters = dw->next;
        if (!m->closing && d->final_state != NULL &&
            wr_store_sandbox_delete(m->cfg.store, d->sb->id, &e2) < 0 && e2.kind != WR_ENOTFOUND)
            e = &e2;
        dw->cb(dw->ctx, e);
        free(dw);
    }
    /* Its processes hold references on it: they go with it (their subscribers heard of the
     * end when it stopped being watched). */
    wr__procs_free(d->sb);
    collect = !m->closing && d->sb->store_layers;
    wr_msb_unref(d->sb); /* the table's reference: d->sb may be gone from here */
    if (collect)
        wr_images_gc(m->cfg.images); /* its layers may be referenced by nothing now */
    free(d->final_state);
    free(d->reason);
    free(d->home);
    free(d);
    wr__work_done(m);
}

/* End a sandbox: stop watching it, destroy it on a worker, then record its end. */
static void msb_end_now(struct wr_msb *sb, const char *final_state, const char *reason,
                        void (*cb)(void *ctx, const struct wr_err *err), void *ctx)
{
    struct destroy_work *d = xcalloc(1, sizeof(*d));
    struct wr_err why;

    sb->ending = true;
    sb->busy = true;
    wr_err_set(&why, WR_ECONFLICT, 0, "sandbox %s ended: %s", sb->id, reason ? reason : "deleted");
    msb_stop_watching(sb, &why);
    d->sb = sb;
    d->rt_sb = sb->rt;
    sb->rt = NULL;
    d->final_state = final_state ? xstrdup(final_state) : NULL;
    d->reason = reason ? xstrdup(reason) : NULL;
    d->cb = cb;
    d->ctx = ctx;
    d->thaw = sb->paused;
    d->home = wr_images_home(sb->m->cfg.images, sb->id);
    d->w.data = d;
    if (!sb->m->closing && final_state != NULL) {
        (void)wr_store_sandbox_set_state(sb->m->cfg.store, sb->id, "stopped", reason, NULL);
        sb->stopped = true;
    }
    wr__queue_work(sb->m, &d->w, destroy_run, destroy_done);
}

/* End a sandbox, or, while a worker freezes or thaws it, once that is done. */
static void msb_end(struct wr_msb *sb, const char *final_state, const char *reason,
                    void (*cb)(void *ctx, const struct wr_err *err), void *ctx)
{
    if (!sb->busy) {
        msb_end_now(sb, final_state, reason, cb, ctx);
        return;
    }
    sb->ending = true;
    sb->pending_end.due = true;
    sb->pending_end.final_state = final_state ? xstrdup(final_state) : NULL;
    sb->pending_end.reason = reason ? xstrdup(reason) : NULL;
    sb->pending_end.cb = cb;
    sb->pending_end.ctx = ctx;
}

/* After a freeze or thaw: run the end that was asked for meanwhile, if any. */
bool wr__run_pending_end(struct wr_msb *sb)
{
    char *final_state = sb->pending_end.final_state, *reason = sb->pending_end.reason;

    if (!sb->pending_end.due)
        return false;
    sb->pending_end.due = false;
    sb->pending_end.final_state = sb->pending_end.reason = NULL;
    msb_end_now(sb, final_state, reason, sb->pending_end.cb, sb->pending_end.ctx);
    free(final_state);
    free(reason);
    return true;
}

static void pause_start(struct wr_msb *sb, const char *reason, int64_t remaining_ms,
                        wr_manager_state_cb cb, void *ctx);

static void on_deadline(uv_timer_t *t)
{
    struct wr_msb *sb = t->data;

    if (sb->ending || sb->paused)
        return;
    if (sb->on_timeout_pause) {
        /* Resumed, it gets its whole timeout again. */
        log_info("sandbox %s: deadline reached: pausing", sb->id);
        pause_start(sb, "timeout", (int64_t)sb->timeout_s * 1000, NULL, NULL);
        return;
    }
    log_info("sandbox %s: deadline reached", sb->id);
    msb_end(sb, "stopped", "timeout", NULL, NULL);
}

static void on_pidfd(uv_poll_t *p, int status, int events)
{
    struct wr_msb *sb = p->data;
    log_warn("sandbox %s: warren-init exited", sb->id);
    if (!sb->ending)
        msb_end(sb, "stopped", "the sandbox's init process exited unexpectedly", NULL, NULL);
}

static void agent_ready(struct wr_agent *a, const struct wr_err *err, void *ctx)
{
    struct wr_msb *sb = ctx;

    if (err != NULL) {
        log_warn("sandbox %s: agent: %s", sb->id, err->msg);
        resume_answer(sb, NULL); /* it runs, though its agent failed: the record says so */
        return;
    }
    if (sb->adopted)
        wr__procs_adopt(sb);
    resume_answer(sb, NULL);
}

/* The agent connection broke while warren-init looked alive. */
static void on_agent_lost(uv_timer_t *t)
{
    struct wr_msb *sb = t->data;

    if (!sb->ending)
        msb_end(sb, "error", "the connection to the sandbox's init process broke", NULL, NULL);
}

static void agent_closed(struct wr_agent *a, const struct wr_err *err, void *ctx)
{
    struct wr_msb *sb = ctx;

    if (sb->agent != a || sb->ending)
        return;
    log_warn("sandbox %s: agent connection closed: %s", sb->id, err ? err->msg : "closed");
    sb->agent = NULL;
    wr_agent_close(a);
    /* When warren-init dies, its socket closes before its pidfd says so (the pid namespace is
     * still being torn down): give the pidfd a moment to report the real reason. Otherwise the
     * connection broke under a live init, a misbehaving (hostile) agent: the sandbox cannot be
     * driven any more and ends in error. */
    uv_timer_start(&sb->deadline, on_agent_lost, 2000, 0);
}

static void sample(struct wr_msb *sb);

/* ---- creating -------------------------------------------------------------------------------- */

static void free_strv(char **v)
{
    for (char **p = v; p && *p; p++)
        free(*p);
    free(v);
}

void wr__start_spec_fini(struct start_spec *ss)
{
    free(ss->id);
    for (size_t i = 0; i < ss->n_layers; i++)
        free(ss->layers[i]);
    free(ss->layers);
    free_strv(ss->env);
    free(ss->cwd);
    free(ss->user);
    free(ss->home);
    wr__mounts_free(ss->mounts, ss->n_mounts);
    memset(ss, 0, sizeof(*ss));
}

/* The project id of a sandbox's project quota: its seq, unique and never reused, with the high
 * bit set to keep apart from projects an administrator numbers by hand. */
static uint32_t project_of(int64_t seq)
{
    return 0x80000000u | (uint32_t)(seq & 0x7fffffff);
}

/* The start spec of a sandbox record: its image's layers and config, its env on top. */
int wr__start_spec_of(struct wr_manager *m, const struct wr_sandbox_rec *rec, struct start_spec *ss,
                      struct wr_err *err)
{
    json_t *img = json_loads(rec->image_json ? rec->image_json : "{}", 0, NULL);
    json_t *cfg = json_object_get(img, "config"), *env = json_object(), *renv, *v;
    const char *k, *str;
    size_t n = 0;

    memset(ss, 0, sizeof(*ss));
    if (!json_is_array(json_object_get(img, "layers"))) {
        json_decref(img);
        json_decref(env);
        return wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` was made before images were recorded",
                          rec->id);
    }
    if (wr_images_layer_paths(m->cfg.images, json_object_get(img, "layers"), &ss->layers,
                              &ss->n_layers, err) < 0) {
        json_decref(img);
        json_decref(env);
        return -1;
    }
    if (json_is_object(json_object_get(cfg, "env")))
        json_object_update(env, json_object_get(cfg, "env"));
    renv = json_loads(rec->env_json ? rec->env_json : "{}", 0, NULL);
    if (json_is_object(renv))
        json_object_update(env, renv);
    json_decref(renv);
    ss->env = xcalloc(json_object_size(env) + 1, sizeof(char *));
    json_object_foreach(env, k, v)
    {
        if (json_is_string(v))
            ss->env[n++] = xasprintf("%s=%s", k, json_string_value(v));
    }
    json_decref(env);
    if ((str = json_string_value(json_object_get(cfg, "cwd"))) != NULL)
        ss->cwd = xstrdup(str);
    if ((str = json_string_value(json_object_get(cfg, "user"))) != NULL)
        ss->user = xstrdup(str);
    ss->allow_setuid = json_is_true(json_object_get(cfg, "setuid"));
    json_decref(img);
    ss->id = xstrdup(rec->id);
    if (wr__mounts_of(m, rec->volumes_json, &ss->mounts, &ss->n_mounts, err) < 0) {
        wr__start_spec_fini(ss);
        return -1;
    }
    wr__volumes_give(m, ss);
    ss->home = wr_images_home(m->cfg.images, rec->id);
    ss->memory_bytes = rec->memory_bytes;
    ss->disk_bytes = rec->disk_bytes;
    ss->project = project_of(rec->seq);
    ss->cpu_millis = rec->cpu_millis;
    ss->pids_max = m->cfg.pids_max;
    return 0;
}

/* Worker: make the writable layer (unless it holds a paused sandbox's files) and start. On
 * failure a new home is removed again. */
int wr__start_sandbox(struct wr_manager *m, const struct start_spec *ss, struct wr_sandbox **out,
                      struct wr_err *err)
{
    struct wr_sandbox_spec spec = {
        .id = ss->id,
        .layers = (const char *const *)ss->layers,
        .n_layers = ss->n_layers,
        .env = (const char *const *)ss->env,
        .cwd = ss->cwd,
        .user = ss->user,
        .upper_dir = ss->home,
        .memory_bytes = ss->memory_bytes,
        .cpu_millis = ss->cpu_millis,
        .pids_max = ss->pids_max,
        .allow_setuid = ss->allow_setuid,
        .mounts = ss->mounts,
        .n_mounts = ss->n_mounts,
    };

    if (!ss->home_exists && wr_layer_home_create(ss->home, wr_images_fs(m->cfg.images), err) < 0)
        return wr_err_wrap(err, "writable layer");
    if (!ss->home_exists && ss->disk_bytes > 0 &&
        wr_quota_limit(ss->home, ss->disk_bytes, ss->project, err) < 0) {
        (void)wr_layer_remove(ss->home, NULL);
        return wr_err_wrap(err, "disk limit");
    }
    if (wr_sandbox_create(m->cfg.rt, &spec, out, err) < 0) {
        if (!ss->home_exists)
            (void)wr_layer_remove(ss->home, NULL);
        return -1;
    }
    if (wr_log_min <= WR_LOG_DEBUG) {
        const struct wr_sandbox_timing *t = wr_sandbox_timing(*out);
        log_debug("sandbox %s: cloned %.3f ms, overlay %.3f, cgroups %.3f, init ready %.3f", ss->id,
                  (double)(t->cloned - t->start) / 1e6, (double)(t->overlay - t->mapped) / 1e6,
                  (double)(t->cgroup - t->overlay) / 1e6, (double)(t->ready - t->cgroup) / 1e6);
    }
    return 0;
}

/* A build's context, read-only at WR_BUILD_CONTEXT (never recorded: a build's sandboxes are
 * not paused or kept). */
static int add_context_mount(struct start_spec *ss, const char *dir, struct wr_err *err)
{
    if (dir == NULL)
        return 0;
    if (ss->n_mounts >= WR_MAX_MOUNTS)
        return wr_err_set(err, WR_EINVAL, 0, "too many mounts");
    ss->mounts = xrealloc(ss->mounts, (ss->n_mounts + 1) * sizeof(*ss->mounts));
    ss->mounts[ss->n_mounts++] = (struct wr_mount_spec){
        .host_dir = xstrdup(dir), .target = xstrdup(WR_BUILD_CONTEXT), .readonly = true};
    return 0;
}

struct create_work {
    uv_work_t w;
    struct wr_manager *m;
    struct wr_msb *sb;
    struct wr_sandbox_rec rec;
    struct start_spec ss;
    struct wr_sandbox *rt_sb;
    struct wr_err err;
    int rc;
    wr_manager_create_cb cb;
    void *ctx;
};

static void create_run(uv_work_t *w)
{
    struct create_work *c = w->data;
    c->rc = wr__start_sandbox(c->m, &c->ss, &c->rt_sb, &c->err);
}

/* Answer the creates that wait with the key of sb's (rec, a record of sb, or err). */
static void answer_create_waiters(struct wr_msb *sb, const struct wr_err *err)
{
    while (sb->create_waiters != NULL) {
        struct wr_create_waiter *cw = sb->create_waiters;
        struct wr_sandbox_rec *rec = NULL;
        struct wr_err e2;
        const struct wr_err *e = err;

        sb->create_waiters = cw->next;
        if (e == NULL) {
            rec = xmalloc(sizeof(*rec));
            if (wr_store_sandbox_get(sb->m->cfg.store, NULL, sb->id, rec, &e2) < 0) {
                free(rec);
                rec = NULL;
                e = &e2;
            }
        }
        cw->cb(cw->ctx, rec, rec != NULL, e, 0);
        free(cw);
    }
}

/* A sandbox whose create failed is gone: deletes asked for meanwhile are done. */
static void answer_pending_deletes(struct wr_msb *sb)
{
    if (sb->pending_end.due) {
        sb->pending_end.due = false;
        if (sb->pending_end.cb != NULL)
            sb->pending_end.cb(sb->pending_end.ctx, NULL);
        free(sb->pending_end.final_state);
        free(sb->pending_end.reason);
        sb->pending_end.final_state = sb->pending_end.reason = NULL;
    }
    while (sb->delete_waiters != NULL) {
        struct wr_delete_waiter *dw = sb->delete_waiters;
        sb->delete_waiters = dw->next;
        dw->cb(dw->ctx, NULL);
        free(dw);
    }
}

/* The create's sandbox is started (c->rc 0, c->rt_sb) or not: record it and answer (the creates
 * that wait with its key too). A delete asked for meanwhile ends it now, through the normal
 * end, and the create fails. Frees c. */
static void create_finish(struct create_work *c)
{
    struct wr_manager *m = c->m;
    struct wr_msb *sb = c->sb;
    struct wr_err e2;
    struct wr_sandbox_rec *out = NULL;

    sb->busy = false;
    if (c->rc == 0 && m->closing) {
        /* The daemon is stopping: a sandbox nobody was told about is not kept. */
        (void)wr__sandbox_teardown(m, c->rec.id, c->rt_sb, false, c->ss.home, NULL);
        c->rc = wr_err_set(&c->err, WR_ECONFLICT, 0, "the daemon is shutting down");
    }
    if (c->rc < 0) {
        (void)wr_store_sandbox_delete(m->cfg.store, c->rec.id, NULL);
        table_del(m, sb);
        c->cb(c->ctx, NULL, false, &c->err, 0);
        answer_create_waiters(sb, &c->err);
        answer_pending_deletes(sb);
        wr_msb_unref(sb);
        goto out;
    }
    sb->rt = c->rt_sb;
    if (sb->pending_end.due) {
        wr_err_set(&e2, WR_ECONFLICT, 0, "sandbox `%s` was deleted while being created", sb->id);
        c->cb(c->ctx, NULL, false, &e2, 0);
        answer_create_waiters(sb, &e2);
        (void)wr__run_pending_end(sb);
        goto out;
    }
    if (wr_store_sandbox_set_runtime(m->cfg.store, c->rec.id, wr_sandbox_pid(c->rt_sb),
                                     wr_sandbox_uid_base(c->rt_sb), &e2) < 0 ||
        wr_store_sandbox_set_state(m->cfg.store, c->rec.id, "running", NULL, &e2) < 0) {
        log_error("sandbox %s: store: %s", c->rec.id, e2.msg);
        c->cb(c->ctx, NULL, false, &e2, 0);
        answer_create_waiters(sb, &e2);
        msb_end(sb, NULL, "store failure", NULL, NULL);
        goto out;
    }
    msb_start_watching(sb, c->rec.deadline_ms, false);
    sample(sb); /* the anchor of the first CPU share */
    out = xmalloc(sizeof(*out));
    if (wr_store_sandbox_get(m->cfg.store, NULL, c->rec.id, out, &e2) < 0) {
        free(out);
        c->cb(c->ctx, NULL, false, &e2, 0);
    } else {
        c->cb(c->ctx, out, false, NULL, 0);
    }
    answer_create_waiters(sb, NULL);
out:
    wr_sandbox_rec_fini(&c->rec);
    wr__start_spec_fini(&c->ss);
    free(c);
}

static void create_done(uv_work_t *w, int status)
{
    struct create_work *c = w->data;
    struct wr_manager *m = c->m;

    create_finish(c);
    wr__work_done(m);
}

/* A warm sandbox fits a create that asks for the default template, limits and nothing of its
 * own to be mounted or set (warm.c). */
static bool warm_fits(const struct wr_manager *m, const struct wr_create_req *req,
                      const struct wr_sandbox_rec *rec, json_t *env)
{
    return m->warm != NULL && req->image_json == NULL && strcmp(rec->template_name, "base") == 0 &&
           req->n_volumes == 0 && req->context_dir == NULL && req->disk_bytes == 0 &&
           json_object_size(env) == 0 && rec->cpu_millis == m->cfg.default_cpu_millis &&
           rec->memory_bytes == m->cfg.default_memory_bytes;
}

/* A create with an idempotency key: 1 if an earlier create with the key answers it (now, or
 * once that one is made: it waits), 0 if it goes ahead (no create had the key, or that one's
 * sandbox ended in error and the key now goes to this one), -1 with err. */
static int idem_lookup(struct wr_manager *m, const struct wr_create_req *req,
                       wr_manager_create_cb cb, void *ctx, struct wr_err *err)
{
    struct wr_sandbox_rec *rec = xcalloc(1, sizeof(*rec));
    struct wr_msb *sb;

    if (wr_store_sandbox_get_idem(m->cfg.store, req->team, req->idem_key, rec, err) < 0) {
        free(rec);
        return err->kind == WR_ENOTFOUND ? 0 : -1;
    }
    if (strcmp(rec->state, "error") == 0) {
        /* It never came up, or broke: a retry wants a sandbox that works. */
        log_info("sandbox %s: in error (%s); its idempotency key goes to a new create", rec->id,
                 rec->reason ? rec->reason : "no reason");
        if (wr_store_sandbox_release_idem(m->cfg.store, rec->id, err) < 0) {
            wr_sandbox_rec_fini(rec);
            free(rec);
            return -1;
        }
        wr_sandbox_rec_fini(rec);
        free(rec);
        return 0;
    }
    sb = table_get(m, rec->id);
    if (strcmp(rec->state, "creating") == 0 && sb != NULL && sb->busy && !sb->alive) {
        /* Still being made (the client lost the first answer): the same answer, once there.
         * (Stripe answers such a repeat 409 and leaves the retrying to the client; a create
         * takes milliseconds, so waiting is kinder.) */
        struct wr_create_waiter *cw = xcalloc(1, sizeof(*cw));
        cw->cb = cb;
        cw->ctx = ctx;
        cw->next = sb->create_waiters;
        sb->create_waiters = cw;
        wr_sandbox_rec_fini(rec);
        free(rec);
        return 1;
    }
    cb(ctx, rec, true, NULL, 0);
    return 1;
}

void wr_manager_create(struct wr_manager *m, const struct wr_create_req *req,
                       wr_manager_create_cb cb, void *ctx)
{
    const char *tname = req->template_name ? req->template_name : "base";
    uint32_t timeout_s = req->timeout_s ? req->timeout_s : m->cfg.default_timeout_s;
    uint64_t memory = req->memory_bytes ? req->memory_bytes : m->cfg.default_memory_bytes;
    struct wr_image img = {0};
    struct create_work *c;
    struct wr_sandbox *warm = NULL;
    json_t *env, *image;
    struct wr_err err;
    char id[21];

    if (timeout_s > m->cfg.max_timeout_s) {
        wr_err_set(&err, WR_EINVAL, 0, "timeout %u s is above the maximum of %u s", timeout_s,
                   m->cfg.max_timeout_s);
        goto fail;
    }
    if (req->image_json != NULL) {
        json_t *j = json_loads(req->image_json, 0, NULL);
        img.layers = json_incref(json_object_get(j, "layers"));
        img.config = json_incref(json_object_get(j, "config"));
        img.name = xstrdup(tname);
        json_decref(j);
        if (!json_is_array(img.layers) || !json_is_object(img.config)) {
            wr_err_set(&err, WR_EINTERNAL, 0, "create: a malformed image");
            goto fail;
        }
    } else if (wr_images_resolve(m->cfg.images, req->team, tname, &img, &err) < 0) {
        goto fail;
    }
    if (req->disk_bytes > 0) {
        const char *why;
        if (wr_images_quota_method(m->cfg.images, &why) == NULL) {
            wr_err_set(&err, WR_EUNSUPPORTED, 0, "a disk limit cannot be enforced on this host: %s",
                       why);
            goto fail;
        }
    }
    if (req->idem_key != NULL) {
        int r = idem_lookup(m, req, cb, ctx, &err);
        if (r < 0)
            goto fail;
        if (r > 0) {
            wr_image_fini(&img);
            return;
        }
    }
    if (m->count >= m->cfg.max_sandboxes) {
        wr_image_fini(&img);
        wr_err_set(&err, WR_ELIMIT, 0, "the host runs its maximum of %u sandboxes",
                   m->cfg.max_sandboxes);
        cb(ctx, NULL, false, &err, 5);
        return;
    }
    if (wr_space_admit(m->cfg.space, "create", 0, &err) < 0) {
        wr_image_fini(&img);
        cb(ctx, NULL, false, &err, 0);
        return;
    }
    if (m->committed + memory > m->cfg.max_memory_bytes) {
        uint64_t have = m->cfg.max_memory_bytes - m->committed;
        wr_image_fini(&img);
        wr_err_set(&err, WR_ELIMIT, 0,
                   "not enough memory to commit: %" PRIu64 " MiB asked, %" PRIu64 " MiB left",
                   memory >> 20, have >> 20);
        cb(ctx, NULL, false, &err, 5);
        return;
    }

    c = xcalloc(1, sizeof(*c));
    c->m = m;
    c->cb = cb;
    c->ctx = ctx;
    wr__core_new_id(id);
    env = req->env_json != NULL ? json_loads(req->env_json, 0, NULL) : NULL;
    if (!json_is_object(env)) {
        json_decref(env);
        env = json_object();
    }
    image = json_pack("{sOsO}", "layers", img.layers, "config", img.config);
    c->rec.id = xstrdup(id);
    c->rec.team = xstrdup(req->team);
    c->rec.template_name = xstrdup(img.name);
    c->rec.state = xstrdup("creating");
    c->rec.cpu_millis = req->cpu_millis ? req->cpu_millis : m->cfg.default_cpu_millis;
    c->rec.memory_bytes = memory;
    c->rec.created_ms = wr__core_now_ms();
    c->rec.deadline_ms = c->rec.created_ms + (int64_t)timeout_s * 1000;
    c->rec.metadata_json = xstrdup(req->metadata_json ? req->metadata_json : "{}");
    c->rec.env_json = json_dumps(env, JSON_COMPACT | JSON_SORT_KEYS);
    c->rec.idem_key = req->idem_key ? xstrdup(req->idem_key) : NULL;
    c->rec.on_timeout = xstrdup(req->on_timeout_pause ? "pause" : "kill");
    c->rec.timeout_s = timeout_s;
    c->rec.image_json = json_dumps(image, JSON_COMPACT);
    c->rec.disk_bytes = req->disk_bytes;
    if (warm_fits(m, req, &c->rec, env) &&
        (warm = wr__warm_take(m, c->rec.image_json, id)) != NULL) {
        free(c->rec.id);
        c->rec.id = xstrdup(id);
    }
    json_decref(env);
    json_decref(image);
    wr_image_fini(&img);

    /* Volumes are resolved and recorded on the loop, in the same turn as the insert: a volume
     * delete (also on the loop) either finds this sandbox using it or ran before and made this
     * fail. */
    if (wr__volumes_resolve(m, req->team, req->volumes, req->n_volumes, &c->rec.volumes_json,
                            &err) < 0 ||
        wr__start_spec_of(m, &c->rec, &c->ss, &err) < 0 ||
        add_context_mount(&c->ss, req->context_dir, &err) < 0 ||
        wr_store_sandbox_insert(m->cfg.store, &c->rec, &err) < 0) {
        if (warm != NULL)
            wr__warm_drop(m, id, warm);
        wr_sandbox_rec_fini(&c->rec);
        wr__start_spec_fini(&c->ss);
        free(c);
        cb(ctx, NULL, false, &err, 0);
        return;
    }
    wr_runtime_crash_point(m->cfg.rt, "recorded");
    c->ss.project = project_of(c->rec.seq); /* known once inserted */
    c->sb = msb_new(m, id, req->team, c->rec.memory_bytes, c->rec.cpu_millis);
    c->sb->store_layers = uses_store_layers(c->rec.image_json);
    c->sb->on_timeout_pause = req->on_timeout_pause;
    c->sb->timeout_s = timeout_s;
    c->sb->busy = true;
    table_put(m, c->sb);
    if (warm != NULL) {
        /* Started already: recorded and answered in this turn of the loop. */
        wr__warm_recorded(m, id);
        c->rt_sb = warm;
        c->rc = 0;
        create_finish(c);
        return;
    }
    c->w.data = c;
    wr__queue_work(m, &c->w, create_run, create_done);
    return;
fail:
    wr_image_fini(&img);
    cb(ctx, NULL, false, &err, 0);
}

/* ---- the rest of the API -------------------------------------------------------------------- */

/* The sandbox `id` of team (NULL: any) in memory, in any state; or NULL with WR_ENOTFOUND, or
 * WR_ECONFLICT naming the state of one that is only a record (stopped, error). */
struct wr_msb *wr__lookup(struct wr_manager *m, const char *team, const char *id,
                          struct wr_err *err)
{
    struct wr_msb *sb = table_get(m, id);
    struct wr_sandbox_rec rec;

    if (sb == NULL || (team != NULL && strcmp(sb->team, team) != 0)) {
        /* A stopped sandbox is still known (with its reason) until deleted. */
        if (sb == NULL && wr_store_sandbox_get(m->cfg.store, team, id, &rec, NULL) == 0) {
            wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` is %s%s%s", id, rec.state,
                       rec.reason ? ": " : "", rec.reason ? rec.reason : "");
            wr_sandbox_rec_fini(&rec);
            return NULL;
        }
        wr_err_set(err, WR_ENOTFOUND, 0, "sandbox `%s` not found", id);
        return NULL;
    }
    return sb;
}

struct wr_msb *wr_manager_find(struct wr_manager *m, const char *team, const char *id,
                               struct wr_err *err)
{
    struct wr_msb *sb = wr__lookup(m, team, id, err);

    if (sb == NULL)
        return NULL;
    if (!sb->alive || sb->ending) {
        wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` is not running", id);
        return NULL;
    }
    if (sb->paused) {
        wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` is paused", id);
        return NULL;
    }
    return sb;
}

/* The delete of a sandbox that is only a record (stopped, error): what may be left of it on the
 * host goes first (an earlier daemon may have let a half-made one run on), then the record. */
struct forget_work {
    uv_work_t w;
    struct wr_manager *m;
    char *id;
    char *home;
    struct wr_err err;
    int rc;
    void (*cb)(void *ctx, const struct wr_err *err);
    void *ctx;
};

static void forget_run(uv_work_t *w)
{
    struct forget_work *f = w->data;
    f->rc = wr__sandbox_teardown(f->m, f->id, NULL, false, f->home, &f->err);
}

static void forget_done(uv_work_t *w, int status)
{
    struct forget_work *f = w->data;
    struct wr_manager *m = f->m;
    struct wr_err err;

    if (f->rc < 0)
        log_warn("sandbox %s: teardown: %s", f->id, f->err.msg);
    /* Another delete of it may have finished first: gone is gone. */
    if (!m->closing && wr_store_sandbox_delete(m->cfg.store, f->id, &err) < 0 &&
        err.kind != WR_ENOTFOUND)
        f->cb(f->ctx, &err);
    else
        f->cb(f->ctx, NULL);
    free(f->id);
    free(f->home);
    free(f);
    wr__work_done(m);
}

void wr_manager_delete(struct wr_manager *m, const char *team, const char *id,
                       void (*cb)(void *ctx, const struct wr_err *err), void *ctx)
{
    struct wr_msb *sb = table_get(m, id);
    struct wr_sandbox_rec rec;
    struct forget_work *f;
    struct wr_err err;

    if (sb != NULL && (team == NULL || strcmp(sb->team, team) == 0)) {
        if (sb->ending) {
            /* It is ending already (its deadline, its init's death, another delete): forget
             * it once it is gone. */
            struct wr_delete_waiter *dw = xcalloc(1, sizeof(*dw));
            dw->cb = cb;
            dw->ctx = ctx;
            dw->next = sb->delete_waiters;
            sb->delete_waiters = dw;
            return;
        }
        /* One being created, paused or resumed ends once that work is done. */
        msb_end(sb, NULL, "deleted", cb, ctx);
        return;
    }
    /* Not in memory: a stopped sandbox's record, or nothing. */
    if (wr_store_sandbox_get(m->cfg.store, team, id, &rec, &err) < 0) {
        cb(ctx, &err);
        return;
    }
    f = xcalloc(1, sizeof(*f));
    f->m = m;
    f->id = xstrdup(rec.id);
    f->home = wr_images_home(m->cfg.images, rec.id);
    f->cb = cb;
    f->ctx = ctx;
    f->w.data = f;
    wr_sandbox_rec_fini(&rec);
    wr__queue_work(m, &f->w, forget_run, forget_done);
}

int wr_manager_get(struct wr_manager *m, const char *team, const char *id,
                   struct wr_sandbox_rec *rec, struct wr_err *err)
{
    return wr_store_sandbox_get(m->cfg.store, team, id, rec, err);
}

int wr_manager_set_timeout(struct wr_manager *m, const char *team, const char *id,
                           uint32_t timeout_s, struct wr_sandbox_rec *rec, struct wr_err *err)
{
    struct wr_msb *sb;
    int64_t deadline;

    if (timeout_s == 0 || timeout_s > m->cfg.max_timeout_s)
        return wr_err_set(err, WR_EINVAL, 0, "timeout must be 1 to %u seconds",
                          m->cfg.max_timeout_s);
    sb = wr__lookup(m, team, id, err);
    if (sb != NULL && sb->paused && !sb->busy && !sb->ending) {
        /* The clock is stopped: set the time it will have when resumed. */
        if (wr_store_sandbox_get(m->cfg.store, NULL, id, rec, err) < 0)
            return -1;
        if (wr_store_sandbox_set_paused(m->cfg.store, id,
                                        rec->paused_mode ? rec->paused_mode : "memory", rec->reason,
                                        (int64_t)timeout_s * 1000, err) < 0) {
            wr_sandbox_rec_fini(rec);
            return -1;
        }
        wr_sandbox_rec_fini(rec);
        sb->remaining_ms = (int64_t)timeout_s * 1000;
        return wr_store_sandbox_get(m->cfg.store, team, id, rec, err);
    }
    sb = wr_manager_find(m, team, id, err);
    if (sb == NULL)
        return -1;
    deadline = wr__core_now_ms() + (int64_t)timeout_s * 1000;
    if (wr_store_sandbox_set_deadline(m->cfg.store, id, deadline, err) < 0)
        return -1;
    sb->deadline_ms = deadline;
    uv_timer_start(&sb->deadline, on_deadline, (uint64_t)timeout_s * 1000, 0);
    return wr_store_sandbox_get(m->cfg.store, team, id, rec, err);
}

int wr_manager_extend_timeout(struct wr_manager *m, const char *team, const char *id,
                              uint32_t timeout_s, struct wr_sandbox_rec *rec, struct wr_err *err)
{
    struct wr_msb *sb;
    int64_t want = (int64_t)timeout_s * 1000;

    if (timeout_s > m->cfg.max_timeout_s)
        return wr_err_set(err, WR_EINVAL, 0, "timeout must be 1 to %u seconds",
                          m->cfg.max_timeout_s);
    sb = wr__lookup(m, team, id, err);
    if (sb == NULL)
        return -1;
    if (timeout_s == 0 ||
        (sb->paused ? sb->remaining_ms : sb->deadline_ms - wr__core_now_ms()) >= want)
        return wr_store_sandbox_get(m->cfg.store, team, id, rec, err);
    return wr_manager_set_timeout(m, team, id, timeout_s, rec, err);
}

/* ---- pause and resume --------------------------------------------------------------------- */

struct freeze_work {
    uv_work_t w;
    struct wr_msb *sb;
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

/* Let go of a sandbox without killing it (the daemon stops; sandboxes outlive it). */
static void msb_let_go(struct wr_msb *sb)
{
    struct wr_err why;

    wr_err_set(&why, WR_ECONFLICT, 0, "the daemon is shutting down");
    msb_stop_watching(sb, &why);
    wr__procs_free(sb);
    if (sb->rt != NULL)
        wr_sandbox_release(sb->rt);
    sb->rt = NULL;
    if (sb->pending_end.due) {
        sb->pending_end.due = false;
        if (sb->pending_end.cb != NULL)
            sb->pending_end.cb(sb->pending_end.ctx, &why);
        free(sb->pending_end.final_state);
        free(sb->pending_end.reason);
    }
    while (sb->delete_waiters != NULL) {
        struct wr_delete_waiter *dw = sb->delete_waiters;
        sb->delete_waiters = dw->next;
        dw->cb(dw->ctx, &why);
        free(dw);
    }
    wr_msb_unref(sb);
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
    struct wr_msb *sb = f->sb;
    struct wr_manager *m = sb->m;
    struct wr_err err;
    bool timeout_pause = f->frozen && f->reason != NULL && strcmp(f->reason, "timeout") == 0;

    sb->busy = false;
    if (m->closing) {
        wr_err_set(&err, WR_ECONFLICT, 0, "the daemon is shutting down");
        if (f->cb != NULL)
            f->cb(f->ctx, NULL, &err);
        msb_let_go(sb);
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
            sb->paused = false;
            wr__procs_resume(sb);
            if (timeout_pause)
                msb_end(sb, "stopped", "timeout", NULL, NULL);
            else
                arm_deadline(sb);
        }
        if (f->cb != NULL)
            f->cb(f->ctx, NULL, &f->err);
        goto out;
    }
    if (f->frozen) {
        if (wr_store_sandbox_set_paused(m->cfg.store, sb->id, "memory", f->reason, sb->remaining_ms,
                                        &err) < 0)
            log_error("sandbox %s: store: %s", sb->id, err.msg);
        log_info("sandbox %s: paused (%" PRId64 " ms left)", sb->id, sb->remaining_ms);
        answer(f->cb, f->ctx, m->cfg.store, sb->id);
        goto out;
    }
    sb->paused = false;
    sb->deadline_ms =
        wr__core_now_ms() + (f->timeout_s ? (int64_t)f->timeout_s * 1000 : sb->remaining_ms);
    if (wr_store_sandbox_set_resumed(m->cfg.store, sb->id, sb->deadline_ms, &err) < 0)
        log_error("sandbox %s: store: %s", sb->id, err.msg);
    arm_deadline(sb);
    wr__procs_resume(sb);
    log_info("sandbox %s: resumed", sb->id);
    if (sb->agent == NULL) {
        /* Adopted while paused: its agent is connected now, and the answer waits for it, so
         * the caller's next request finds it ready. */
        sb->resume_cb = f->cb;
        sb->resume_ctx = f->ctx;
        msb_connect(sb, true);
        if (sb->agent == NULL)
            resume_answer(sb, NULL);
        goto out;
    }
    answer(f->cb, f->ctx, m->cfg.store, sb->id);
out:
    wr_msb_unref(sb);
    free(f->reason);
    free(f);
    wr__work_done(m);
}

static void freeze_start(struct wr_msb *sb, bool frozen, const char *reason, uint32_t timeout_s,
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
    wr_msb_ref(sb);
    wr__queue_work(sb->m, &f->w, freeze_run, freeze_done);
}

/* From now on nothing is sent to the agent, and no clock of the sandbox runs. */
static void pause_start(struct wr_msb *sb, const char *reason, int64_t remaining_ms,
                        wr_manager_state_cb cb, void *ctx)
{
    sb->paused = true;
    sb->remaining_ms = remaining_ms > 0 ? remaining_ms : 0;
    uv_timer_stop(&sb->deadline);
    wr__procs_pause(sb);
    freeze_start(sb, true, reason, 0, cb, ctx);
}

/* ---- pause to disk: the processes end, the writable layer stays ---------------------------- */

struct disk_work {
    uv_work_t w;
    struct wr_msb *sb;
    struct wr_sandbox *rt_sb; /* pause: the one to end; resume: the new one */
    struct start_spec ss;     /* resume */
    struct wr_err err;
    int rc;
    wr_manager_state_cb cb;
    void *ctx;
};

static void disk_pause_run(uv_work_t *w)
{
    struct disk_work *d = w->data;
    d->rc = wr__sandbox_teardown(d->sb->m, d->sb->id, d->rt_sb, false, NULL, &d->err);
    wr_runtime_crash_point(d->sb->m->cfg.rt, "disk-paused");
}

static void disk_pause_done(uv_work_t *w, int status)
{
    struct disk_work *d = w->data;
    struct wr_msb *sb = d->sb;
    struct wr_manager *m = sb->m;
    struct wr_err err;

    sb->busy = false;
    if (d->rc < 0)
        log_warn("sandbox %s: pause to disk: %s", sb->id, d->err.msg);
    wr__procs_free(sb);
    account(sb, true);
    if (m->closing) {
        /* The record says paused to disk already: the next start keeps it so. */
        wr_err_set(&err, WR_ECONFLICT, 0, "the daemon is shutting down");
        if (d->cb != NULL)
            d->cb(d->ctx, NULL, &err);
        msb_let_go(sb);
    } else if (!wr__run_pending_end(sb)) {
        if (wr_store_sandbox_set_runtime(m->cfg.store, sb->id, 0, 0, &err) < 0)
            log_error("sandbox %s: store: %s", sb->id, err.msg);
        log_info("sandbox %s: paused to disk (%" PRId64 " ms left)", sb->id, sb->remaining_ms);
        answer(d->cb, d->ctx, m->cfg.store, sb->id);
    } else if (d->cb != NULL) {
        wr_err_set(&err, WR_ECONFLICT, 0, "sandbox `%s` ended while being paused", sb->id);
        d->cb(d->ctx, NULL, &err);
    }
    wr_msb_unref(sb);
    free(d);
    wr__work_done(m);
}

/* Stop watching the sandbox (its processes are about to end: their subscribers hear it now),
 * then end its processes on a worker, keeping its home. */
static void disk_pause_start(struct wr_msb *sb, wr_manager_state_cb cb, void *ctx)
{
    struct disk_work *d = xcalloc(1, sizeof(*d));
    struct wr_err why;

    sb->paused = true;
    sb->remaining_ms = sb->deadline_ms - wr__core_now_ms();
    if (sb->remaining_ms < 0)
        sb->remaining_ms = 0;
    wr_err_set(&why, WR_ECONFLICT, 0, "sandbox %s was paused to disk: its processes ended", sb->id);
    msb_stop_watching(sb, &why);
    /* Recorded before its processes end: a daemon killed meanwhile leaves a sandbox paused to
     * disk with its files (the next start ends what still runs), never one that reads as
     * running with its init gone, which the next start would end, files and all. */
    if (wr_store_sandbox_set_paused(sb->m->cfg.store, sb->id, "disk", NULL, sb->remaining_ms,
                                    &why) < 0)
        log_error("sandbox %s: store: %s", sb->id, why.msg);
    d->sb = sb;
    d->rt_sb = sb->rt;
    sb->rt = NULL;
    d->cb = cb;
    d->ctx = ctx;
    d->w.data = d;
    sb->busy = true;
    wr_msb_ref(sb);
    wr__queue_work(sb->m, &d->w, disk_pause_run, disk_pause_done);
}

static void disk_resume_run(uv_work_t *w)
{
    struct disk_work *d = w->data;
    d->rc = wr__start_sandbox(d->sb->m, &d->ss, &d->rt_sb, &d->err);
}

static void disk_resume_done(uv_work_t *w, int status)
{
    struct disk_work *d = w->data;
    struct wr_msb *sb = d->sb;
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
            msb_let_go(sb);
        else
            (void)wr__run_pending_end(sb);
        goto out;
    }
    sb->rt = d->rt_sb;
    sb->paused = false;
    account(sb, false);
    sb->deadline_ms = wr__core_now_ms() + sb->remaining_ms;
    if (wr_store_sandbox_set_runtime(m->cfg.store, sb->id, wr_sandbox_pid(sb->rt),
                                     wr_sandbox_uid_base(sb->rt), &err) < 0 ||
        wr_store_sandbox_set_resumed(m->cfg.store, sb->id, sb->deadline_ms, &err) < 0)
        log_error("sandbox %s: store: %s", sb->id, err.msg);
    msb_start_watching(sb, sb->deadline_ms, false);
    log_info("sandbox %s: resumed from disk with a fresh init", sb->id);
    answer(d->cb, d->ctx, m->cfg.store, sb->id);
out:
    wr__start_spec_fini(&d->ss);
    wr_msb_unref(sb);
    free(d);
    wr__work_done(m);
}

/* Start the sandbox again on its kept files. The host's limits apply as to a create. */
static void disk_resume_start(struct wr_msb *sb, uint32_t timeout_s, wr_manager_state_cb cb,
                              void *ctx)
{
    struct wr_manager *m = sb->m;
    struct disk_work *d;
    struct wr_sandbox_rec rec;
    struct wr_err err;

    if (m->count >= m->cfg.max_sandboxes ||
        m->committed + sb->memory_bytes > m->cfg.max_memory_bytes) {
        wr_err_set(&err, WR_ELIMIT, 0, "the host has no room to resume sandbox `%s`", sb->id);
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
    if (wr__start_spec_of(m, &rec, &d->ss, &err) < 0) {
        wr_sandbox_rec_fini(&rec);
        free(d);
        cb(ctx, NULL, &err);
        return;
    }
    wr_sandbox_rec_fini(&rec);
    d->ss.home_exists = true;
    if (timeout_s != 0)
        sb->remaining_ms = (int64_t)timeout_s * 1000;
    d->sb = sb;
    d->cb = cb;
    d->ctx = ctx;
    d->w.data = d;
    sb->busy = true;
    wr_msb_ref(sb);
    wr__queue_work(m, &d->w, disk_resume_run, disk_resume_done);
}

/* Why a sandbox cannot change state now, or 0. */
int wr__check_settled(const struct wr_msb *sb, struct wr_err *err)
{
    /* A sandbox that reads as stopped says so, also while its teardown finishes. */
    if (sb->ending && sb->stopped)
        return wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` is stopped", sb->id);
    if (sb->ending)
        return wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` is being deleted", sb->id);
    if (!sb->alive && !sb->on_disk)
        return wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` is being created", sb->id);
    if (sb->busy)
        return wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` is being paused or resumed", sb->id);
    return 0;
}

void wr_manager_pause(struct wr_manager *m, const char *team, const char *id,
                      enum wr_pause_mode mode, wr_manager_state_cb cb, void *ctx)
{
    struct wr_err err;
    struct wr_msb *sb = wr__lookup(m, team, id, &err);

    if (sb == NULL) {
        cb(ctx, NULL, &err);
        return;
    }
    if (wr__check_settled(sb, &err) < 0) {
        cb(ctx, NULL, &err);
        return;
    }
    if (sb->paused) {
        wr_err_set(&err, WR_ECONFLICT, 0, "sandbox `%s` is already paused", id);
        cb(ctx, NULL, &err);
        return;
    }
    if (mode == WR_PAUSE_DISK)
        disk_pause_start(sb, cb, ctx);
    else
        pause_start(sb, NULL, sb->deadline_ms - wr__core_now_ms(), cb, ctx);
}

void wr_manager_resume(struct wr_manager *m, const char *team, const char *id, uint32_t timeout_s,
                       wr_manager_state_cb cb, void *ctx)
{
    struct wr_err err;
    struct wr_msb *sb = wr__lookup(m, team, id, &err);

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
    if (!sb->paused) {
        wr_err_set(&err, WR_ECONFLICT, 0, "sandbox `%s` is not paused", id);
        cb(ctx, NULL, &err);
        return;
    }
    if (sb->on_disk)
        disk_resume_start(sb, timeout_s, cb, ctx);
    else
        freeze_start(sb, false, NULL, timeout_s, cb, ctx);
}

/* ---- usage samples ------------------------------------------------------------------------- */

static void sample(struct wr_msb *sb)
{
    struct wr_sandbox_usage u;
    struct wr_err err;
    struct wr_usage_sample *s;

    if (!sb->alive || sb->paused || sb->ending || sb->rt == NULL ||
        wr_sandbox_usage(sb->rt, &u, &err) < 0)
        return;
    s = &sb->usage[sb->usage_head];
    *s = (struct wr_usage_sample){wr__core_now_ms(), u.cpu_ns, u.memory_bytes};
    sb->usage_head = (sb->usage_head + 1) % WR_USAGE_SAMPLES;
    if (sb->usage_n < WR_USAGE_SAMPLES)
        sb->usage_n++;
}

static void on_sample(uv_timer_t *t)
{
    struct wr_manager *m = t->data;

    for (unsigned b = 0; b < NBUCKETS; b++)
        for (struct wr_msb *sb = m->buckets[b]; sb != NULL; sb = sb->hnext)
            sample(sb);
}

int wr_manager_metrics(struct wr_manager *m, const char *team, const char *id, int64_t from_ms,
                       int64_t to_ms, struct wr_usage *out, size_t max, struct wr_err *err)
{
    struct wr_msb *sb = wr__lookup(m, team, id, err);
    size_t n = 0;
    uint64_t prev_cpu = 0;
    int64_t prev_at;
    uint32_t cpus;

    if (sb == NULL) {
        if (err->kind == WR_ECONFLICT) /* stopped: it has no samples any more */
            return 0;
        return -1;
    }
    sample(sb);
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

static void sampler_closed(uv_handle_t *h)
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
    struct wr_msb *sb = wr__lookup(m, team, id, NULL);
    struct wr_sandbox_rec rec;
    struct disk_use_work *d;
    struct wr_err err;

    if (wr_store_sandbox_get(m->cfg.store, team, id, &rec, &err) < 0) {
        cb(ctx, 0, 0, NULL, &err);
        return;
    }
    if (sb == NULL || sb->ending) {
        wr_err_set(&err, WR_ECONFLICT, 0, "sandbox `%s` is %s: its files are gone", id, rec.state);
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

uint64_t wr_manager_count(const struct wr_manager *m)
{
    return m->count;
}

uint64_t wr_manager_committed_memory(const struct wr_manager *m)
{
    return m->committed;
}

const char *wr_manager_cgroup_version(const struct wr_manager *m)
{
    return wr_runtime_cgroup_version(m->cfg.rt);
}

/* ---- open, reconcile, close ----------------------------------------------------------------- */

/* How long a restarted daemon waits for the warren-init of a create it did not finish to
 * answer (the child got "go", so it is one or becomes one in a few milliseconds). */
#define HALF_MADE_HELLO_MS 5000

/* A sandbox of the store that cannot be taken back: what is left of it on the host goes, by
 * the teardown of every end (rt_sb: a handle on it, or NULL), and its record says why (state
 * NULL: the record goes too). */
static void reconcile_end(struct wr_manager *m, const struct wr_sandbox_rec *r,
                          struct wr_sandbox *rt_sb, const char *state, const char *reason)
{
    _cleanup_free_ char *home = wr_images_home(m->cfg.images, r->id);
    struct wr_err err;

    log_warn("sandbox %s: %s", r->id, reason);
    if (wr__sandbox_teardown(m, r->id, rt_sb, true, home, &err) < 0)
        log_warn("sandbox %s: teardown: %s", r->id, err.msg);
    if (state == NULL)
        (void)wr_store_sandbox_delete(m->cfg.store, r->id, NULL);
    else
        (void)wr_store_sandbox_set_state(m->cfg.store, r->id, state, reason, NULL);
}

/* The sandbox of a create that the previous daemon did not finish: its record says creating
 * and names no process. Once the child got "go" it became warren-init by itself: found in its
 * cgroup and answering, it is the create's sandbox, running from now on with the create's
 * deadline (a retry with the create's idempotency key gets it). Anything less (no child yet,
 * one still waiting for "go", one that failed) is torn down. */
static struct wr_sandbox *take_back_half_made(struct wr_manager *m, struct wr_sandbox_rec *r)
{
    struct wr_sandbox *rt_sb = NULL;
    struct wr_err err;

    if (wr_sandbox_adopt(m->cfg.rt, r->id, 0, 0, &rt_sb, &err) < 0 ||
        wr_sandbox_hello(rt_sb, HALF_MADE_HELLO_MS, &err) < 0 ||
        wr_store_sandbox_set_runtime(m->cfg.store, r->id, wr_sandbox_pid(rt_sb),
                                     wr_sandbox_uid_base(rt_sb), &err) < 0 ||
        wr_store_sandbox_set_state(m->cfg.store, r->id, "running", NULL, &err) < 0) {
        log_info("sandbox %s: half made: %s", r->id, err.msg);
        reconcile_end(m, r, rt_sb, "error",
                      "the daemon restarted while the sandbox was being created");
        return NULL;
    }
    log_info("sandbox %s: the daemon restarted while it was being created; its warren-init "
             "answers: running",
             r->id);
    r->init_pid = wr_sandbox_pid(rt_sb);
    free(r->state);
    r->state = xstrdup("running");
    return rt_sb;
}

/* Take back one sandbox found in the store. */
static void reconcile_one(struct wr_manager *m, struct wr_sandbox_rec *r)
{
    struct wr_sandbox *rt_sb = NULL;
    struct wr_msb *sb;
    struct wr_err err;

    if (strncmp(r->template_name, WR_BUILD_TEMPLATE_PREFIX, strlen(WR_BUILD_TEMPLATE_PREFIX)) ==
        0) {
        /* Only its build, gone with the daemon that ran it, had a use for it. */
        reconcile_end(m, r, NULL, NULL, "the daemon restarted during the build that made it");
        return;
    }
    if (strcmp(r->state, "paused") == 0 && r->paused_mode != NULL &&
        strcmp(r->paused_mode, "disk") == 0) {
        /* Its files wait in its home; resume starts it. A resume the daemon died in may have
         * started a warren-init on them already: it goes (nobody heard of it), the files
         * stay. */
        if (wr__sandbox_teardown(m, r->id, NULL, false, NULL, &err) < 0)
            log_warn("sandbox %s: a resume cut short: %s", r->id, err.msg);
        if (r->init_pid != 0)
            (void)wr_store_sandbox_set_runtime(m->cfg.store, r->id, 0, 0, NULL);
        sb = msb_new(m, r->id, r->team, r->memory_bytes, r->cpu_millis);
        sb->store_layers = uses_store_layers(r->image_json);
        sb->paused = true;
        sb->remaining_ms = r->remaining_ms > 0 ? r->remaining_ms : 0;
        sb->on_timeout_pause = r->on_timeout != NULL && strcmp(r->on_timeout, "pause") == 0;
        sb->timeout_s = r->timeout_s;
        table_put(m, sb);
        account(sb, true);
        log_info("sandbox %s: paused to disk", r->id);
        return;
    }
    if (strcmp(r->state, "creating") == 0) {
        if ((rt_sb = take_back_half_made(m, r)) == NULL)
            return;
    } else if (r->init_pid <= 0 || wr_sandbox_adopt(m->cfg.rt, r->id, (pid_t)r->init_pid,
                                                    (uid_t)r->uid_base, &rt_sb, &err) < 0) {
        reconcile_end(m, r, NULL, "stopped", "the sandbox ended while the daemon was down");
        return;
    }
    sb = msb_new(m, r->id, r->team, r->memory_bytes, r->cpu_millis);
    sb->store_layers = uses_store_layers(r->image_json);
    sb->rt = rt_sb;
    sb->adopted = true;
    sb->on_timeout_pause = r->on_timeout != NULL && strcmp(r->on_timeout, "pause") == 0;
    sb->timeout_s = r->timeout_s;
    /* Make the freezer agree with the record: a daemon that died between a freeze (or thaw) and
     * its record left them apart. Freezing a frozen cgroup, or thawing a thawed one, is a
     * no-op. */
    if (strcmp(r->state, "paused") == 0) {
        sb->paused = true;
        sb->remaining_ms = r->remaining_ms > 0 ? r->remaining_ms : 0;
        if (wr_sandbox_freeze(rt_sb, true, &err) < 0) {
            log_warn("sandbox %s: keep it paused: %s; it runs", r->id, err.msg);
            sb->paused = false;
            r->deadline_ms = wr__core_now_ms() + sb->remaining_ms;
            (void)wr_store_sandbox_set_resumed(m->cfg.store, r->id, r->deadline_ms, NULL);
        }
    } else if (wr_sandbox_freeze(rt_sb, false, &err) < 0) {
        log_warn("sandbox %s: thaw: %s", r->id, err.msg);
    }
    table_put(m, sb);
    log_info("sandbox %s: adopted%s (init pid %" PRId64 ")", r->id, sb->paused ? ", paused" : "",
             r->init_pid);
    /* A deadline that passed while the daemon was down fires at once; a paused sandbox's clock
     * stays stopped, and its agent is connected when it is resumed. */
    msb_start_watching(sb, r->deadline_ms, true);
}

int wr_manager_open(const struct wr_manager_config *cfg, struct wr_manager **out,
                    struct wr_err *err)
{
    static const char *const live[] = {"creating", "running", "paused", NULL};
    struct wr_manager *m = xcalloc(1, sizeof(*m));
    struct wr_sandbox_filter f = {.states = live};
    struct wr_sandbox_rec *recs = NULL;
    struct sysinfo si;
    size_t n = 0;

    m->cfg = *cfg;
    m->loop = cfg->loop;
    if (m->cfg.default_timeout_s == 0)
        m->cfg.default_timeout_s = 300;
    if (m->cfg.max_timeout_s == 0)
        m->cfg.max_timeout_s = 86400;
    if (m->cfg.max_sandboxes == 0)
        m->cfg.max_sandboxes = 1000;
    if (m->cfg.default_cpu_millis == 0)
        m->cfg.default_cpu_millis = 1000;
    if (m->cfg.default_memory_bytes == 0)
        m->cfg.default_memory_bytes = 512ull << 20;
    if (m->cfg.pids_max == 0)
        m->cfg.pids_max = 4096;
    if (m->cfg.max_memory_bytes == 0 && sysinfo(&si) == 0)
        m->cfg.max_memory_bytes = (uint64_t)si.totalram * si.mem_unit;
    if (m->cfg.default_timeout_s > m->cfg.max_timeout_s)
        m->cfg.default_timeout_s = m->cfg.max_timeout_s;

    if (wr_store_sandbox_list(cfg->store, &f, &recs, &n, err) < 0) {
        free(m);
        return wr_err_wrap(err, "reconcile");
    }
    for (size_t i = 0; i < n; i++) {
        reconcile_one(m, &recs[i]);
        wr_sandbox_rec_fini(&recs[i]);
    }
    free(recs);
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
    uv_timer_start(m->sampler, on_sample, WR_USAGE_PERIOD_MS, WR_USAGE_PERIOD_MS);
    uv_unref((uv_handle_t *)m->sampler);
    /* Serve only once the adopted sandboxes' agents have answered (or given up): a request
     * right after the daemon says it is ready must find them connected. */
    for (uint64_t t0 = uv_now(m->loop); uv_now(m->loop) - t0 < 5000;) {
        bool pending = false;
        for (unsigned b = 0; b < NBUCKETS && !pending; b++)
            for (struct wr_msb *sb = m->buckets[b]; sb != NULL && !pending; sb = sb->hnext)
                pending = sb->alive && sb->agent != NULL && !wr_agent_is_ready(sb->agent);
        if (!pending)
            break;
        uv_run(m->loop, UV_RUN_ONCE);
        uv_update_time(m->loop);
    }
    *out = m;
    return 0;
}

void wr_manager_close(struct wr_manager *m)
{
    if (m == NULL)
        return;
    m->closing = true;
    wr__warm_close(m);
    if (m->sampler != NULL) {
        uv_timer_stop(m->sampler);
        uv_close((uv_handle_t *)m->sampler, sampler_closed);
        m->sampler = NULL;
    }
    for (unsigned b = 0; b < NBUCKETS; b++) {
        struct wr_msb *sb = m->buckets[b];
        while (sb != NULL) {
            struct wr_msb *next = sb->hnext;
            /* One that a worker creates, freezes, thaws or destroys is let go by the work's
             * done callback, which sees m->closing. */
            if (!sb->busy)
                msb_let_go(sb);
            sb = next;
        }
        m->buckets[b] = NULL;
    }
    if (m->inflight == 0)
        free(m);
}
