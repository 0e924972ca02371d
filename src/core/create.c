/* SPDX-License-Identifier: Apache-2.0 */
/* Creating a sandbox: its start spec, the start on a worker, idempotency and the host's limits
 * (see manager.h). */
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/layer.h"
#include "../runtime/quota.h"
#include "space.h"
#include "../util/log.h"
#include "../util/strv.h"
#include "../util/xalloc.h"
#include "../net/policy.h"
#include "../util/cleanup.h"
#include "cdi.h"
#include "core_int.h"
#include "images.h"
#include "start.h"

/* ---- creating -------------------------------------------------------------------------------- */

char *wr__checkpoint_dir(const char *home)
{
    return xasprintf("%s/checkpoint", home);
}

void wr__start_spec_fini(struct start_spec *ss)
{
    free(ss->id);
    for (size_t i = 0; i < ss->n_layers; i++)
        free(ss->layers[i]);
    free(ss->layers);
    wr_strv_free(ss->env);
    free(ss->cwd);
    free(ss->user);
    free(ss->home);
    free(ss->restore_image);
    wr__mounts_free(ss->mounts, ss->n_mounts);
    for (size_t i = 0; i < ss->n_devices; i++)
        free((char *)ss->devices[i].path);
    free(ss->devices);
    for (size_t i = 0; i < ss->n_binds; i++) {
        free((char *)ss->binds[i].host_path);
        free((char *)ss->binds[i].target);
    }
    free(ss->binds);
    for (size_t i = 0; i < ss->n_symlinks; i++) {
        free((char *)ss->symlinks[i].target);
        free((char *)ss->symlinks[i].link);
    }
    free(ss->symlinks);
    for (size_t i = 0; i < ss->n_inner; i++) {
        free((char *)ss->inner[i].src);
        free((char *)ss->inner[i].dst);
    }
    free(ss->inner);
    memset(ss, 0, sizeof(*ss));
}

uint32_t wr__project_of(int64_t seq)
{
    return 0x80000000u | (uint32_t)(seq & 0x7fffffff);
}

/* ---- the isolation backend ------------------------------------------------------------------- */

/* The backends this daemon allows (--runtimes), as bits 1u << b. */
static unsigned allowed_backends(const struct wr_manager *m)
{
    return m->cfg.runtimes != 0 ? m->cfg.runtimes : (1u << WR_BACKENDS) - 1;
}

/* The names of the backends of bits, joined by sep, in buf. */
static const char *backend_names(unsigned bits, const char *sep, char *buf, size_t len)
{
    size_t off = 0;

    buf[0] = '\0';
    for (int b = 0; b < WR_BACKENDS; b++)
        if (bits & (1u << b)) {
            int n = snprintf(buf + off, len - off, "%s%s", off ? sep : "",
                             wr_backend_name((enum wr_backend)b));
            if (n < 0 || (size_t)n >= len - off)
                break;
            off += (size_t)n;
        }
    return buf;
}

/* The backend of a create that names none and whose template names none: the daemon's
 * (--runtimes' first), else ns, unless the daemon leaves it out (the first it allows then). */
static enum wr_backend default_backend(const struct wr_manager *m)
{
    unsigned bits = allowed_backends(m);

    if (bits & (1u << m->cfg.default_runtime))
        return (enum wr_backend)m->cfg.default_runtime;
    for (int b = 0; b < WR_BACKENDS; b++)
        if (bits & (1u << b))
            return (enum wr_backend)b;
    return WR_BACKEND_NS;
}

const char *wr__default_runtime(const struct wr_manager *m)
{
    return wr_backend_name(default_backend(m));
}

const char *wr_manager_default_runtime(const struct wr_manager *m)
{
    return wr__default_runtime(m);
}

size_t wr_manager_runtimes(const struct wr_manager *m, const char **names, size_t cap)
{
    size_t n = 0;

    for (int b = 0; b < WR_BACKENDS; b++)
        if ((allowed_backends(m) & (1u << b)) &&
            wr_runtime_has_backend(m->cfg.rt, (enum wr_backend)b, NULL)) {
            if (n < cap)
                names[n] = wr_backend_name((enum wr_backend)b);
            n++;
        }
    return n;
}

/* The backend called name, if the daemon allows it: 0 with *out, or -1 with WR_EINVAL. */
static int backend_allowed(const struct wr_manager *m, const char *name, enum wr_backend *out,
                           struct wr_err *err)
{
    char names[64];
    struct wr_err perr;

    if (name == NULL || wr_backend_parse(name, out, &perr) < 0)
        return wr_err_set(err, WR_EINVAL, 0, "`runtime` must be %s, not `%s`",
                          backend_names((1u << WR_BACKENDS) - 1, " or ", names, sizeof(names)),
                          name ? name : "(null)");
    if (!(allowed_backends(m) & (1u << *out)))
        return wr_err_set(err, WR_EINVAL, 0,
                          "runtime %s is not allowed on this daemon (--runtimes %s)", name,
                          backend_names(allowed_backends(m), ",", names, sizeof(names)));
    return 0;
}

int wr_manager_runtime_allowed(const struct wr_manager *m, const char *name, struct wr_err *err)
{
    enum wr_backend b;
    return backend_allowed(m, name, &b, err);
}

/* The backend of a create: the one it asks for, else its template's (config "runtime"), else
 * the daemon's default; one that cannot run here is WR_EUNSUPPORTED, saying why. */
static int create_backend(const struct wr_manager *m, const char *asked, json_t *config,
                          const char *tname, enum wr_backend *out, struct wr_err *err)
{
    json_t *v = json_object_get(config, "runtime");
    const char *name = asked;

    if (name == NULL && v != NULL && !json_is_null(v)) {
        name = json_string_value(v);
        if (name == NULL)
            return wr_err_set(err, WR_EINVAL, 0, "template `%s`: its `runtime` is not a string",
                              tname);
    }
    if (name == NULL)
        *out = default_backend(m);
    else if (backend_allowed(m, name, out, err) < 0)
        return asked == NULL ? wr_err_wrap(err, "template `%s`", tname) : -1;
    if (!wr_runtime_has_backend(m->cfg.rt, *out, err))
        return -1;
    return 0;
}

int wr__rec_backend(const struct wr_sandbox_rec *rec, enum wr_backend *out, struct wr_err *err)
{
    struct wr_err perr;

    if (rec->runtime == NULL) {
        *out = WR_BACKEND_NS;
        return 0;
    }
    if (wr_backend_parse(rec->runtime, out, &perr) < 0)
        return wr_err_set(err, WR_EINTERNAL, 0, "sandbox `%s`: unknown runtime `%s`", rec->id,
                          rec->runtime);
    return 0;
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
    if (wr__rec_backend(rec, &ss->backend, err) < 0) {
        json_decref(img);
        json_decref(env);
        return -1;
    }
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
    if (wr__devices_spec(m, rec, ss, err) < 0 || wr__services_spec(rec, ss, err) < 0) {
        wr__start_spec_fini(ss);
        return -1;
    }
    ss->home = wr_images_home(m->cfg.images, rec->id);
    ss->memory_bytes = rec->memory_bytes;
    ss->disk_bytes = rec->disk_bytes;
    ss->project = wr__project_of(rec->seq);
    ss->cpu_millis = rec->cpu_millis;
    ss->pids_max = m->cfg.pids_max;
    ss->net_slot = m->net != NULL ? (int32_t)rec->net_slot : -1;
    return 0;
}

/* Worker: make the writable layer (unless it holds a paused sandbox's files) and start. On
 * failure a new home is removed again. */
int wr__start_sandbox(struct wr_manager *m, const struct start_spec *ss, struct wr_sandbox **out,
                      struct wr_err *err)
{
    struct wr_sandbox_spec spec = {
        .id = ss->id,
        .backend = ss->backend,
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
        .devices = ss->devices,
        .n_devices = ss->n_devices,
        .binds = ss->binds,
        .n_binds = ss->n_binds,
        .symlinks = ss->symlinks,
        .n_symlinks = ss->n_symlinks,
        .inner_binds = ss->inner,
        .n_inner_binds = ss->n_inner,
        .restore_image = ss->restore_image,
    };
    _cleanup_close_ int netns = -1;
    int rc;

    if (ss->net_pooled) {
        /* The child waiting in its slot (its resolver given when it was cloned). */
        spec.netns_fd = WR_NETNS_POOLED;
        spec.pooled_slot = (uint32_t)ss->net_slot;
    } else if (ss->net_slot >= 0) {
        netns =
            wr__net_open_fd(m, ss->net_slot, ss->net_make, ss->backend == WR_BACKEND_GVISOR, err);
        if (netns < 0)
            return wr_err_wrap(err, "network slot");
        spec.netns_fd = netns;
        spec.resolver = wr__net_resolver(m, ss->net_slot);
    }
    if (!ss->home_exists && wr_layer_home_create(ss->home, wr_images_fs(m->cfg.images), err) < 0)
        return wr_err_wrap(err, "writable layer");
    if (!ss->home_exists && ss->disk_bytes > 0 &&
        wr_quota_limit(ss->home, ss->disk_bytes, ss->project, err) < 0) {
        (void)wr_layer_remove(ss->home, NULL);
        return wr_err_wrap(err, "disk limit");
    }
    rc = wr_sandbox_create(m->cfg.rt, &spec, out, err);
    if (rc < 0) {
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
    struct wr_live_sb *sb;
    struct wr_sandbox_rec rec;
    struct start_spec ss;
    struct wr_sandbox *rt_sb;
    struct wr_err err;
    int rc;
    wr_manager_create_cb cb;
    void *ctx;
    struct wr_start_cfg *start; /* the template's start command (start.c), or NULL */
    bool slot_noted;            /* wr__net_slot_made was called (before the start command) */
    bool warm;                  /* a warm sandbox was taken */
    uint64_t t0;                /* uv_hrtime() of the request */
};

static void create_run(uv_work_t *w)
{
    struct create_work *c = w->data;
    c->rc = wr__start_sandbox(c->m, &c->ss, &c->rt_sb, &c->err);
}

/* Answer the creates that wait with the key of sb's (rec, a record of sb, or err). */
static void answer_create_waiters(struct wr_live_sb *sb, const struct wr_err *err)
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
static void answer_pending_deletes(struct wr_live_sb *sb)
{
    if (sb->pending_end.due) {
        sb->pending_end.due = false;
        if (sb->pending_end.cb != NULL)
            sb->pending_end.cb(sb->pending_end.ctx, NULL);
        free(sb->pending_end.reason);
        sb->pending_end.reason = NULL;
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
    struct wr_live_sb *sb = c->sb;
    struct wr_err e2;
    struct wr_sandbox_rec *out = NULL;

    sb->busy = false;
    if (c->rc == 0 && m->closing) {
        /* The daemon is stopping: a sandbox nobody was told about is not kept. */
        (void)wr__sandbox_teardown(m, c->rec.id, c->rt_sb, false, c->ss.home, NULL);
        c->rc = wr_err_set(&c->err, WR_ECONFLICT, 0, "the daemon is shutting down");
    }
    if (c->ss.net_slot >= 0 && !c->slot_noted && (c->rc == 0 || !c->ss.net_make))
        wr__net_slot_made(m, c->ss.net_slot);
    wr__metric_create(c->warm, c->rc < 0 ? &c->err : NULL, c->t0);
    if (c->rc < 0) {
        wr__event(
            m, c->rec.team, c->rec.id, "sandbox.failed",
            json_pack("{s:s,s:s}", "code", wr_err_kind_name(c->err.kind), "message", c->err.msg));
        (void)wr_store_sandbox_delete(m->cfg.store, c->rec.id, NULL);
        wr__net_release(m, sb);
        wr_cdi_release(m->cdi, sb->id);
        wr__table_del(m, sb);
        c->cb(c->ctx, NULL, false, &c->err, 0);
        answer_create_waiters(sb, &c->err);
        answer_pending_deletes(sb);
        wr_live_sb_unref(sb);
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
        wr_store_sandbox_set_state(m->cfg.store, c->rec.id, WR_SB_RUNNING, NULL, &e2) < 0) {
        log_error("sandbox %s: store: %s", c->rec.id, e2.msg);
        c->cb(c->ctx, NULL, false, &e2, 0);
        answer_create_waiters(sb, &e2);
        wr__live_sb_end(sb, true, WR_SB_STOPPED, "store failure", NULL, NULL);
        goto out;
    }
    sb->relist = c->ss.restore_image != NULL; /* listed once its agent is ready */
    wr__live_sb_start_watching(sb, LIVE_SB_RUNNING, c->rec.deadline_ms, false);
    wr__sample(sb); /* the anchor of the first CPU share */
    wr__event(m, c->rec.team, c->rec.id, "sandbox.created",
              json_pack("{s:s,s:b}", "template", c->rec.template_name, "warm", c->warm));
    wr__event(m, c->rec.team, c->rec.id, "sandbox.started", json_pack("{s:s}", "cause", "create"));
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
    wr__start_cfg_free(c->start);
    free(c);
}

/* ---- the template's start command, before the create answers ------------------------------- */

struct start_fail_work {
    uv_work_t w;
    struct create_work *c;
};

static void start_fail_run(uv_work_t *w)
{
    struct start_fail_work *f = w->data;
    struct create_work *c = f->c;
    struct wr_err err;

    if (wr__sandbox_teardown(c->m, c->rec.id, c->rt_sb, false, c->ss.home, &err) < 0)
        log_warn("sandbox %s: %s", c->rec.id, err.msg);
}

static void start_fail_done(uv_work_t *w, int status)
{
    struct start_fail_work *f = w->data;
    struct create_work *c = f->c;
    struct wr_manager *m = c->m;

    free(f);
    c->sb->rt = NULL;
    c->rt_sb = NULL;
    c->rc = -1;
    create_finish(c);
    wr__work_done(m);
}

/* The start command is ready (the create goes on as if the sandbox had just started), or not:
 * everything of the sandbox goes (processes, cgroups, home, slot, record) and the create fails
 * with why. */
static void create_started(void *ctx, const struct wr_err *err)
{
    struct create_work *c = ctx;
    struct start_fail_work *f;

    if (err == NULL) {
        create_finish(c);
        return;
    }
    c->err = *err;
    wr__start_forget(c->sb, err);
    f = xcalloc(1, sizeof(*f));
    f->c = c;
    f->w.data = f;
    wr__queue_work(c->m, &f->w, start_fail_run, start_fail_done);
}

static void create_done(uv_work_t *w, int status)
{
    struct create_work *c = w->data;
    struct wr_manager *m = c->m;

    if (c->rc == 0 && c->start != NULL && !m->closing && !c->sb->pending_end.due) {
        struct wr_start_cfg *start = c->start;
        if (c->ss.net_slot >= 0) {
            wr__net_slot_made(m, c->ss.net_slot);
            c->slot_noted = true;
        }
        c->start = NULL;
        c->sb->rt = c->rt_sb;
        wr__start_run(c->sb, start, c->rec.template_name, create_started, c);
    } else {
        create_finish(c);
    }
    wr__work_done(m);
}

/* A warm sandbox fits a create that asks for the default template, limits and nothing of its
 * own to be mounted or set (warm.c); warm sandboxes run on ns. */
static bool warm_fits(const struct wr_manager *m, const struct wr_create_req *req,
                      const struct wr_sandbox_rec *rec, json_t *env, enum wr_backend backend)
{
    return m->warm != NULL && backend == WR_BACKEND_NS && req->image_json == NULL &&
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
    struct wr_live_sb *sb;

    if (wr_store_sandbox_get_idem(m->cfg.store, req->team, req->idem_key, rec, err) < 0) {
        free(rec);
        return err->kind == WR_ENOTFOUND ? 0 : -1;
    }
    if (rec->state == WR_SB_ERROR) {
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
    sb = wr__table_get(m, rec->id);
    if (rec->state == WR_SB_CREATING && sb != NULL && sb->state == LIVE_SB_CREATING) {
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

static void start_cfg_freep(struct wr_start_cfg **p)
{
    wr__start_cfg_free(*p);
}

void wr_manager_create(struct wr_manager *m, const struct wr_create_req *req,
                       wr_manager_create_cb cb, void *ctx)
{
    uint64_t t0 = uv_hrtime();
    const char *tname = req->template_name ? req->template_name : "base";
    uint32_t timeout_s = req->timeout_s ? req->timeout_s : m->cfg.default_timeout_s;
    uint64_t memory = req->memory_bytes ? req->memory_bytes : m->cfg.default_memory_bytes;
    struct wr_image img = {0};
    struct create_work *c;
    struct wr_sandbox *warm = NULL;
    struct wr_live_sb *warm_sb = NULL;
    _cleanup_(start_cfg_freep) struct wr_start_cfg *start = NULL;
    json_t *env, *image;
    struct wr_err err;
    char id[21];
    struct wr_net_policy pol = {0};
    bool want_net = false, make_slot = false, pooled = false, fits;
    enum wr_backend backend;
    int32_t slot = -1;

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
    if (create_backend(m, req->runtime, img.config, img.name, &backend, &err) < 0)
        goto fail;
    if (req->compose_json != NULL && backend == WR_BACKEND_GVISOR) {
        wr_err_set(&err, WR_EUNSUPPORTED, 0,
                   "Compose services on the gvisor runtime are not supported yet (use the ns "
                   "runtime)");
        goto fail;
    }
    if (req->n_devices > 0 && backend == WR_BACKEND_GVISOR) {
        wr_err_set(&err, WR_EUNSUPPORTED, 0,
                   "devices on the gvisor runtime: gVisor passes no host device through (use "
                   "the ns runtime)");
        goto fail;
    }
    /* A build's step runs its command alone: the start command is for the template's sandboxes. */
    if (strncmp(tname, WR_BUILD_TEMPLATE_PREFIX, strlen(WR_BUILD_TEMPLATE_PREFIX)) != 0 &&
        wr__start_cfg_parse(img.config, img.name, &start, &err) < 0)
        goto fail;
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
    if (wr__memory_admit(m, memory, "create", &err) < 0) {
        wr_image_fini(&img);
        cb(ctx, NULL, false, &err, 5);
        return;
    }

    if (wr__net_request(m, req->net, true, &pol, &want_net, &err) < 0)
        goto fail;
    c = xcalloc(1, sizeof(*c));
    c->m = m;
    c->t0 = t0;
    c->cb = cb;
    c->ctx = ctx;
    c->start = start;
    start = NULL;
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
    c->rec.state = WR_SB_CREATING;
    c->rec.cpu_millis = req->cpu_millis ? req->cpu_millis : m->cfg.default_cpu_millis;
    c->rec.memory_bytes = memory;
    c->rec.created_ms = wr__core_now_ms();
    c->rec.deadline_ms = c->rec.created_ms + (int64_t)timeout_s * 1000;
    c->rec.metadata_json = xstrdup(req->metadata_json ? req->metadata_json : "{}");
    c->rec.env_json = json_dumps(env, JSON_COMPACT | JSON_SORT_KEYS);
    c->rec.idem_key = req->idem_key ? xstrdup(req->idem_key) : NULL;
    c->rec.on_timeout = req->on_timeout;
    c->rec.timeout_s = timeout_s;
    c->rec.image_json = json_dumps(image, JSON_COMPACT);
    c->rec.disk_bytes = req->disk_bytes;
    c->rec.runtime = xstrdup(wr_backend_name(backend));
    if (req->compose_json != NULL)
        c->rec.compose_json = xstrdup(req->compose_json);
    else if (json_is_object(json_object_get(img.config, "compose"))) /* a snapshot of a stack */
        c->rec.compose_json = json_dumps(json_object_get(img.config, "compose"), JSON_COMPACT);
    wr__start_cfg_add_services(&c->start, c->rec.compose_json);
    if (req->n_devices > 0) {
        /* Its devices are its own from now: a later failure gives them back. */
        struct wr_cdi_edits edits;
        json_t *names = json_array();
        if (wr_cdi_take(m->cdi, id, req->devices, req->n_devices, &edits, &err) < 0) {
            json_decref(names);
            json_decref(env);
            json_decref(image);
            wr_image_fini(&img);
            wr_net_policy_fini(&pol);
            wr_sandbox_rec_fini(&c->rec);
            wr__start_cfg_free(c->start);
            free(c);
            cb(ctx, NULL, false, &err, err.kind == WR_ELIMIT ? 5 : 0);
            return;
        }
        wr_cdi_edits_fini(&edits);
        for (size_t i = 0; i < req->n_devices; i++)
            json_array_append_new(names, json_string(req->devices[i]));
        c->rec.devices_json = json_dumps(names, JSON_COMPACT);
        json_decref(names);
    }
    /* A warm sandbox comes with its network slot, if it wants one; else a slot is taken now;
     * a sandbox with devices is made afresh. */
    fits = req->n_devices == 0 && req->compose_json == NULL &&
           warm_fits(m, req, &c->rec, env, backend);
    json_decref(env);
    json_decref(image);
    wr_image_fini(&img);
    if (fits && (warm = wr__warm_take(m, c->rec.template_name, c->rec.image_json, want_net, id,
                                      &warm_sb, &slot)) != NULL) {
        free(c->rec.id);
        c->rec.id = xstrdup(id);
    } else if (want_net &&
               wr__net_take(m, backend == WR_BACKEND_NS, &slot, &make_slot, &pooled, &err) < 0) {
        wr_cdi_release(m->cdi, id);
        wr_net_policy_fini(&pol);
        wr_sandbox_rec_fini(&c->rec);
        wr__start_cfg_free(c->start);
        free(c);
        cb(ctx, NULL, false, &err, 5);
        return;
    }
    c->rec.net_slot = slot;
    if (slot >= 0)
        c->rec.net_json =
            wr__net_json(m, &pol, slot, req->net == NULL || req->net->ports_public != 0,
                         req->net ? req->net->mask_host : NULL);

    /* Volumes are resolved and recorded on the loop, in the same turn as the insert: a volume
     * delete (also on the loop) either finds this sandbox using it or ran before and made this
     * fail. */
    if (wr__volumes_resolve(m, req->team, req->volumes, req->n_volumes, &c->rec.volumes_json,
                            &err) < 0 ||
        wr__start_spec_of(m, &c->rec, &c->ss, &err) < 0 ||
        add_context_mount(&c->ss, req->context_dir, &err) < 0 ||
        wr_store_sandbox_insert(m->cfg.store, &c->rec, &err) < 0) {
        if (warm != NULL)
            wr__warm_drop(m, id, warm, warm_sb, slot); /* and its slot, once it is gone */
        else
            wr__net_release_slot(m, slot, !make_slot);
        wr_cdi_release(m->cdi, id);
        wr_net_policy_fini(&pol);
        wr_sandbox_rec_fini(&c->rec);
        wr__start_spec_fini(&c->ss);
        wr__start_cfg_free(c->start);
        free(c);
        cb(ctx, NULL, false, &err, 0);
        return;
    }
    wr_runtime_crash_point(m->cfg.rt, "recorded");
    c->ss.project = wr__project_of(c->rec.seq); /* known once inserted */
    if (req->restore_image != NULL) {
        c->ss.restore_image = xstrdup(req->restore_image);
        wr__start_cfg_free(c->start); /* its processes go on: the start command ran already */
        c->start = NULL;
    }
    if (warm_sb != NULL) {
        /* A warm sandbox that ran its template's start command comes with its live sandbox
         * (its agent connected, the start process in its table): it is the create's now. */
        c->sb = warm_sb;
        wr__live_sb_set_team(c->sb, req->team);
    } else {
        c->sb = wr__live_sb_new(m, id, req->team, c->rec.memory_bytes, c->rec.cpu_millis);
    }
    c->sb->backend = backend;
    c->sb->store_layers = wr__uses_store_layers(c->rec.image_json);
    c->sb->on_timeout = req->on_timeout;
    c->sb->timeout_s = timeout_s;
    c->sb->busy = true;
    wr__table_put(m, c->sb);
    c->ss.net_make = make_slot;
    c->ss.net_pooled = pooled;
    if (slot >= 0 &&
        wr__net_bind(m, c->sb, slot, &pol, req->net == NULL || req->net->ports_public != 0,
                     req->net ? req->net->mask_host : NULL, &c->err) < 0) {
        if (warm != NULL) {
            /* A warm sandbox is running: it is torn down like one the pool discards (its marker
             * with it); create_finish releases its slot and its record. */
            if (warm_sb != NULL)
                wr__start_forget(c->sb, &c->err);
            wr__warm_drop(m, id, warm, NULL, -1);
        }
        c->rc = -1;
        create_finish(c);
        return;
    }
    if (warm != NULL) {
        /* Started already: recorded and answered in this turn of the loop. */
        wr__warm_recorded(m, id);
        c->warm = true;
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
    wr_net_policy_fini(&pol);
    wr__metric_create(false, &err, 0);
    cb(ctx, NULL, false, &err, 0);
}
