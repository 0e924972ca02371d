/* SPDX-License-Identifier: Apache-2.0 */
/* Processes started through the API: each keeps its recent output for replay, fans its events
 * out to subscribers (exec responses, attach streams, terminals) and turns a slow subscriber
 * into backpressure on the process, by holding back the window credit warren-init waits for.
 * A process with no subscriber runs on: its output is acknowledged and kept for replay. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/runtime.h"
#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/strv.h"
#include "../util/xalloc.h"
#include "../store/store.h"
#include "core_int.h"
#include "start.h"

struct out_chunk {
    struct out_chunk *next;
    int stream;
    size_t n;
    uint8_t data[];
};

struct wr_proc {
    struct wr_live_sb *sb;
    uint32_t id;
    int64_t os_pid;
    char **argv;
    char *tag; /* e.g. "start" (a template's start command), or NULL */
    bool pty;
    bool running;
    bool timed_out;
    struct wr_exit ex;
    struct out_chunk *rhead, *rtail;
    size_t rbytes;
    struct wr_proc_sub *subs;
    size_t held; /* output bytes not yet acknowledged because a subscriber is congested */
    uint64_t timeout_ms;
    uv_timer_t timer;
    bool timer_on;
    bool timer_paused;      /* the sandbox is paused: the timeout's clock stopped with it */
    uint64_t timer_left_ms; /* ... with this much left */
    /* spawn in flight */
    void (*start_cb)(void *ctx, struct wr_proc *p, const struct wr_err *err);
    void *start_ctx;
    uint64_t start_t0;     /* uv_hrtime() of the spawn's request */
    char *cg_name;         /* its own cgroup under the sandbox's (wr_cmd_limits), or NULL */
    struct cg_job *cg_job; /* making or ending that cgroup on a worker */
    bool ending;           /* its EXIT came; the cgroup's figures are being read */
};

/* Work on a command's cgroup, on a worker thread: make it (then spawn), or read what it used
 * and remove it (then deliver the exit). Owns copies of what it needs; p is NULL once the
 * process is gone (the sandbox ended meanwhile). */
struct cg_job {
    uv_work_t w;
    struct wr_manager *m;
    struct wr_proc *p;
    char *sb_id, *name;
    bool make;
    struct wr_cmd_limits lim;
    struct wr_spawn sp; /* make: the spawn to send once the cgroup is there */
    int fds[WR_CMD_CGROUP_FDS];
    size_t nfds;
    struct wr_exit ex; /* end: the EXIT as warren-init sent it */
    uint64_t cpu_ns, peak;
    int rc;
    struct wr_err err;
    struct wr_err fail; /* a spawn that failed: answered once its cgroup is gone */
};

static void timer_closed(uv_handle_t *h)
{
    struct wr_proc *p = h->data;
    for (char **a = p->argv; a && *a; a++)
        free(*a);
    free(p->argv);
    free(p->tag);
    free(p->cg_name);
    free(p);
}

static void cg_job_free(struct cg_job *j)
{
    for (size_t i = 0; i < j->nfds; i++)
        (void)close(j->fds[i]);
    wr_spawn_fini(&j->sp);
    free(j->sb_id);
    free(j->name);
    free(j);
}

static void proc_free(struct wr_proc *p)
{
    struct out_chunk *c = p->rhead;

    while (c != NULL) {
        struct out_chunk *next = c->next;
        free(c);
        c = next;
    }
    p->rhead = p->rtail = NULL;
    if (p->cg_job != NULL) {
        p->cg_job->p = NULL; /* the job goes on without it (an end job removes the cgroup) */
        p->cg_job = NULL;
    }
    if (p->timer_on) {
        uv_timer_stop(&p->timer);
        p->timer_on = false;
    }
    wr_live_sb_unref(p->sb);
    uv_close((uv_handle_t *)&p->timer, timer_closed);
}

static void table_add(struct wr_live_sb *sb, struct wr_proc *p)
{
    if (sb->nprocs == sb->capprocs) {
        sb->capprocs = sb->capprocs ? 2 * sb->capprocs : 8;
        sb->procs = xrealloc(sb->procs, sb->capprocs * sizeof(*sb->procs));
    }
    sb->procs[sb->nprocs++] = p;
}

static void table_remove(struct wr_live_sb *sb, struct wr_proc *p)
{
    for (size_t i = 0; i < sb->nprocs; i++)
        if (sb->procs[i] == p) {
            memmove(&sb->procs[i], &sb->procs[i + 1], (sb->nprocs - i - 1) * sizeof(p));
            sb->nprocs--;
            return;
        }
}

struct wr_proc *wr_live_sb_proc(struct wr_live_sb *sb, uint32_t id)
{
    for (size_t i = 0; i < sb->nprocs; i++)
        if (sb->procs[i]->id == id)
            return sb->procs[i];
    return NULL;
}

void wr_live_sb_procs_foreach(struct wr_live_sb *sb, void (*fn)(struct wr_proc *p, void *ctx),
                              void *ctx)
{
    for (size_t i = 0; i < sb->nprocs; i++)
        fn(sb->procs[i], ctx);
}

/* ---- events from the agent ------------------------------------------------------------------- */

static bool any_congested(const struct wr_proc *p)
{
    for (const struct wr_proc_sub *s = p->subs; s != NULL; s = s->next)
        if (s->congested)
            return true;
    return false;
}

static void release_held(struct wr_proc *p)
{
    if (p->held > 0 && !any_congested(p) && p->sb->agent != NULL) {
        wr_agent_ack(p->sb->agent, p->id, p->held);
        p->held = 0;
    }
}

static void on_timeout(uv_timer_t *t)
{
    struct wr_proc *p = t->data;
    p->timer_on = false;
    if (p->running && wr__live_sb_paused(p->sb)) {
        p->timer_paused = true; /* kill it at the thaw */
        p->timer_left_ms = 0;
        return;
    }
    if (!p->running || p->sb->agent == NULL)
        return;
    p->timed_out = true;
    wr_proc_signal(p, SIGKILL, NULL, NULL);
}

static void spawn_fail(struct wr_proc *p, const struct wr_err *err);

static void on_started(void *ctx, uint32_t proc_id, int64_t pid, const struct wr_err *err)
{
    struct wr_proc *p = ctx;

    if (err != NULL) {
        struct wr_err e2 = *err;
        /* A command or working directory that cannot be found or run is the caller's mistake,
         * whichever API asked: 400 `invalid`, Connect `invalid_argument`. */
        if (e2.sys_errno == ENOENT || e2.sys_errno == EACCES || e2.sys_errno == ENOEXEC ||
            e2.sys_errno == ENOTDIR)
            e2.kind = WR_EINVAL;
        wr__metric_exec(&e2, p->start_t0);
        spawn_fail(p, &e2);
        return;
    }
    p->id = proc_id;
    p->os_pid = pid;
    p->running = true;
    table_add(p->sb, p);
    if (p->timeout_ms > 0 && wr__live_sb_paused(p->sb)) {
        /* The answer was on its way when the sandbox froze: the clock starts at the thaw. */
        p->timer_paused = true;
        p->timer_left_ms = p->timeout_ms;
    } else if (p->timeout_ms > 0) {
        uv_timer_start(&p->timer, on_timeout, p->timeout_ms, 0);
        p->timer_on = true;
    }
    wr__metric_exec(NULL, p->start_t0);
    if (p->start_cb != NULL)
        p->start_cb(p->start_ctx, p, NULL);
    p->start_cb = NULL;
}

static void on_output(void *ctx, uint32_t proc_id, int stream, const uint8_t *data, size_t n)
{
    struct wr_proc *p = ctx;
    struct out_chunk *c = xmalloc(sizeof(*c) + n);
    bool congested = false;

    c->next = NULL;
    c->stream = stream;
    c->n = n;
    memcpy(c->data, data, n);
    if (p->rtail != NULL)
        p->rtail->next = c;
    else
        p->rhead = c;
    p->rtail = c;
    p->rbytes += n;
    while (p->rbytes > WR_PROC_REPLAY && p->rhead != p->rtail) {
        struct out_chunk *old = p->rhead;
        p->rhead = old->next;
        p->rbytes -= old->n;
        free(old);
    }
    for (struct wr_proc_sub *s = p->subs, *next; s != NULL; s = next) {
        next = s->next;
        if (s->on_output(s, stream, data, n))
            s->congested = true;
    }
    congested = any_congested(p);
    if (congested) {
        p->held += n;
    } else if (p->sb->agent != NULL) {
        wr_agent_ack(p->sb->agent, proc_id, n + p->held);
        p->held = 0;
    }
}

static void cg_queue_end(struct wr_proc *p, const struct wr_exit *ex);

static void deliver_exit(struct wr_proc *p, const struct wr_exit *ex)
{
    p->running = false;
    p->ex = *ex;
    p->timer_paused = false;
    if (p->timer_on) {
        uv_timer_stop(&p->timer);
        p->timer_on = false;
    }
    for (struct wr_proc_sub *s = p->subs, *next; s != NULL; s = next) {
        next = s->next;
        s->on_exit(s, ex, p->timed_out);
    }
}

static void on_exit_ev(void *ctx, uint32_t proc_id, const struct wr_exit *ex)
{
    struct wr_proc *p = ctx;

    if (p->cg_name != NULL && !p->ending) {
        /* Its figures are its cgroup's: read them, and remove it, before anyone hears. */
        p->ending = true;
        cg_queue_end(p, ex);
        return;
    }
    if (p->ending && p->cg_job != NULL)
        return; /* an EXIT again (an ATTACH): the first one is being finished */
    deliver_exit(p, ex);
}

static const struct wr_agent_proc_cbs proc_cbs = {
    .on_started = on_started,
    .on_output = on_output,
    .on_exit = on_exit_ev,
};

static struct wr_proc *proc_new(struct wr_live_sb *sb)
{
    struct wr_proc *p = xcalloc(1, sizeof(*p));

    p->sb = sb;
    wr_live_sb_ref(sb);
    uv_timer_init(wr_live_sb_loop(sb), &p->timer);
    p->timer.data = p;
    return p;
}

void wr_live_sb_limits(const struct wr_live_sb *sb, uint32_t *cpu_millis, uint64_t *memory_bytes)
{
    *cpu_millis = sb->cpu_millis;
    *memory_bytes = sb->memory_bytes;
}

/* ---- a command's own cgroup (wr_cmd_limits) ------------------------------------------------ */

static void cg_run(uv_work_t *w)
{
    struct cg_job *j = container_of(w, struct cg_job, w);
    struct wr_runtime *rt = j->m->cfg.rt;

    if (j->make)
        j->rc = wr_sandbox_cmd_cgroup_create(rt, j->sb_id, j->name, j->lim.memory_bytes,
                                             j->lim.cpu_millis, j->fds, &j->nfds, &j->err);
    else
        j->rc = wr_sandbox_cmd_cgroup_end(rt, j->sb_id, j->name, &j->cpu_ns, &j->peak, &j->err);
}

static struct cg_job *cg_job_new(struct wr_proc *p, bool make)
{
    struct cg_job *j = xcalloc(1, sizeof(*j));

    j->m = p->sb->m;
    j->p = p;
    j->make = make;
    j->sb_id = xstrdup(p->sb->id);
    j->name = xstrdup(p->cg_name);
    p->cg_job = j;
    return j;
}

/* Remove a cgroup no process will use (a spawn that failed), on a worker. */
static void cg_drop_done(uv_work_t *w, int status)
{
    struct cg_job *j = container_of(w, struct cg_job, w);
    struct wr_manager *m = j->m;

    if (j->rc < 0 && j->err.sys_errno != ENOENT)
        log_warn("sandbox %s: command cgroup %s: %s", j->sb_id, j->name, j->err.msg);
    cg_job_free(j);
    wr__work_done(m);
}

static void cg_drop(struct wr_manager *m, const char *sb_id, const char *name)
{
    struct cg_job *j = xcalloc(1, sizeof(*j));

    j->m = m;
    j->sb_id = xstrdup(sb_id);
    j->name = xstrdup(name);
    wr__queue_work(m, &j->w, cg_run, cg_drop_done);
}

static void cg_fail_done(uv_work_t *w, int status)
{
    struct cg_job *j = container_of(w, struct cg_job, w);
    struct wr_manager *m = j->m;
    struct wr_proc *p = j->p;

    if (j->rc < 0 && j->err.sys_errno != ENOENT)
        log_warn("sandbox %s: command cgroup %s: %s", j->sb_id, j->name, j->err.msg);
    if (p != NULL) {
        p->cg_job = NULL;
        p->start_cb(p->start_ctx, NULL, &j->fail);
        proc_free(p);
    }
    cg_job_free(j);
    wr__work_done(m);
}

/* Answer a spawn that failed, after its cgroup (if it has one) is removed: whoever hears the
 * error finds nothing of the command left. */
static void spawn_fail(struct wr_proc *p, const struct wr_err *err)
{
    struct cg_job *j;

    if (p->cg_name == NULL) {
        p->start_cb(p->start_ctx, NULL, err);
        proc_free(p);
        return;
    }
    j = cg_job_new(p, false);
    j->fail = *err;
    wr__queue_work(p->sb->m, &j->w, cg_run, cg_fail_done);
}

static void cg_end_done(uv_work_t *w, int status)
{
    struct cg_job *j = container_of(w, struct cg_job, w);
    struct wr_manager *m = j->m;
    struct wr_proc *p = j->p;

    if (p != NULL) {
        p->cg_job = NULL;
        if (j->rc == 0) {
            j->ex.cpu_ns = j->cpu_ns;
            j->ex.maxrss_bytes = j->peak;
            j->ex.has_usage = j->ex.from_cgroup = true;
        } else {
            log_warn("sandbox %s: command cgroup %s: %s", j->sb_id, j->name, j->err.msg);
        }
        deliver_exit(p, &j->ex);
    }
    cg_job_free(j);
    wr__work_done(m);
}

static void cg_queue_end(struct wr_proc *p, const struct wr_exit *ex)
{
    struct cg_job *j = cg_job_new(p, false);

    j->ex = *ex;
    wr__queue_work(p->sb->m, &j->w, cg_run, cg_end_done);
}

static void cg_made(uv_work_t *w, int status)
{
    struct cg_job *j = container_of(w, struct cg_job, w);
    struct wr_manager *m = j->m;
    struct wr_proc *p = j->p;
    struct wr_err err;

    if (p == NULL) { /* cannot happen before the spawn; kept safe */
        cg_drop(m, j->sb_id, j->name);
        goto out;
    }
    p->cg_job = NULL;
    if (j->rc < 0) {
        p->start_cb(p->start_ctx, NULL, &j->err);
        proc_free(p);
        goto out;
    }
    if (wr__live_sb_paused(p->sb) || p->sb->agent == NULL || !wr_agent_is_ready(p->sb->agent)) {
        wr_err_set(&err, WR_ECONFLICT, 0, "sandbox %s is %s", p->sb->id,
                   wr__live_sb_paused(p->sb) ? "paused" : "not running");
        goto fail;
    }
    j->sp.nfds = (uint32_t)j->nfds;
    j->sp.cgroup = xstrdup(j->name);
    j->nfds = 0; /* the agent takes them over */
    if (wr_agent_spawn_fds(p->sb->agent, &j->sp, j->fds, &proc_cbs, p, &err) < 0)
        goto fail;
    goto out;
fail:
    spawn_fail(p, &err);
out:
    cg_job_free(j);
    wr__work_done(m);
}

static void spawn_copy(struct wr_spawn *dst, const struct wr_spawn *src)
{
    *dst = *src;
    dst->argv = wr_strv_dup(src->argv);
    dst->env = src->env != NULL ? wr_strv_dup(src->env) : NULL;
    dst->cwd = src->cwd != NULL ? xstrdup(src->cwd) : NULL;
    dst->user = src->user != NULL ? xstrdup(src->user) : NULL;
    dst->nfds = 0;
    dst->cgroup = NULL;
}

void wr_live_sb_spawn(struct wr_live_sb *sb, const struct wr_spawn *sp, uint64_t timeout_ms,
                      void (*cb)(void *ctx, struct wr_proc *proc, const struct wr_err *err),
                      void *ctx)
{
    wr_live_sb_spawn_limited(sb, sp, timeout_ms, NULL, cb, ctx);
}

void wr_live_sb_spawn_limited(struct wr_live_sb *sb, const struct wr_spawn *sp, uint64_t timeout_ms,
                              const struct wr_cmd_limits *lim,
                              void (*cb)(void *ctx, struct wr_proc *proc, const struct wr_err *err),
                              void *ctx)
{
    static uint64_t seq;
    struct wr_proc *p;
    struct wr_err err;

    if (wr__live_sb_paused(sb)) {
        wr_err_set(&err, WR_ECONFLICT, 0, "sandbox %s is paused", sb->id);
        cb(ctx, NULL, &err);
        return;
    }
    if (sb->agent == NULL || !wr_agent_is_ready(sb->agent)) {
        wr_err_set(&err, WR_ECONFLICT, 0, "sandbox %s: its agent is not connected", sb->id);
        cb(ctx, NULL, &err);
        return;
    }
    if (lim != NULL && lim->cgroup && sb->backend == WR_BACKEND_GVISOR) {
        wr_err_set(&err, WR_EUNSUPPORTED, 0,
                   "a command's own cgroup (`cpus`, `memory_mb`, `usage: cgroup`) on the gvisor "
                   "runtime is not supported yet");
        cb(ctx, NULL, &err);
        return;
    }
    if (lim != NULL && lim->cgroup &&
        ((sb->cpu_millis != 0 && lim->cpu_millis > sb->cpu_millis) ||
         (sb->memory_bytes != 0 && lim->memory_bytes > sb->memory_bytes))) {
        wr_err_set(&err, WR_EINVAL, 0, "a command's limits cannot exceed its sandbox's");
        cb(ctx, NULL, &err);
        return;
    }
    p = proc_new(sb);
    p->argv = wr_strv_dup(sp->argv);
    p->pty = sp->pty;
    p->timeout_ms = timeout_ms;
    p->start_cb = cb;
    p->start_ctx = ctx;
    p->start_t0 = uv_hrtime();
    if (lim != NULL && lim->cgroup) {
        /* Unique in the sandbox across daemons (a restarted one adopts running commands). */
        struct cg_job *j;
        p->cg_name = xasprintf("cmd-%" PRIx64 "-%" PRIu64, uv_hrtime(), ++seq);
        j = cg_job_new(p, true);
        j->lim = *lim;
        spawn_copy(&j->sp, sp);
        wr__queue_work(sb->m, &j->w, cg_run, cg_made);
        return;
    }
    if (wr_agent_spawn(sb->agent, sp, &proc_cbs, p, &err) < 0) {
        proc_free(p);
        cb(ctx, NULL, &err);
    }
}

/* ---- subscribers -------------------------------------------------------------------------- */

void wr_proc_subscribe(struct wr_proc *p, struct wr_proc_sub *sub, bool replay)
{
    sub->proc = p;
    sub->congested = false;
    sub->next = p->subs;
    p->subs = sub;
    if (replay)
        for (struct out_chunk *c = p->rhead; c != NULL && sub->proc == p; c = c->next)
            if (sub->on_output(sub, c->stream, c->data, c->n))
                sub->congested = true;
    if (sub->proc == p && !p->running && p->start_cb == NULL)
        sub->on_exit(sub, &p->ex, p->timed_out);
}

void wr_proc_unsubscribe(struct wr_proc_sub *sub)
{
    struct wr_proc *p = sub->proc;

    if (p == NULL)
        return;
    for (struct wr_proc_sub **pp = &p->subs; *pp != NULL; pp = &(*pp)->next)
        if (*pp == sub) {
            *pp = sub->next;
            break;
        }
    sub->proc = NULL;
    sub->next = NULL;
    release_held(p);
}

void wr_proc_sub_drained(struct wr_proc_sub *sub)
{
    sub->congested = false;
    if (sub->proc != NULL)
        release_held(sub->proc);
}

/* ---- accessors and requests --------------------------------------------------------------- */

uint32_t wr_proc_id(const struct wr_proc *p)
{
    return p->id;
}

int64_t wr_proc_os_pid(const struct wr_proc *p)
{
    return p->os_pid;
}

char *const *wr_proc_argv(const struct wr_proc *p)
{
    return p->argv;
}

const char *wr_proc_tag(const struct wr_proc *p)
{
    return p->tag;
}

void wr__proc_set_tag(struct wr_proc *p, const char *tag)
{
    free(p->tag);
    p->tag = tag ? xstrdup(tag) : NULL;
}

size_t wr__proc_tail(const struct wr_proc *p, char *out, size_t cap)
{
    size_t skip = p->rbytes > cap ? p->rbytes - cap : 0, n = 0;

    for (const struct out_chunk *c = p->rhead; c != NULL; c = c->next) {
        size_t from = 0;
        if (skip >= c->n) {
            skip -= c->n;
            continue;
        }
        from = skip;
        skip = 0;
        memcpy(out + n, c->data + from, c->n - from);
        n += c->n - from;
    }
    return n;
}

bool wr_proc_pty(const struct wr_proc *p)
{
    return p->pty;
}

bool wr_proc_running(const struct wr_proc *p)
{
    return p->running;
}

const struct wr_exit *wr_proc_exit(const struct wr_proc *p)
{
    return p->running ? NULL : &p->ex;
}

size_t wr_live_sb_pending(struct wr_live_sb *sb)
{
    return sb->agent != NULL ? wr_agent_pending(sb->agent) : 0;
}

void wr_proc_stdin(struct wr_proc *p, const void *data, size_t n)
{
    if (p->running && p->sb->agent != NULL)
        wr_agent_stdin(p->sb->agent, p->id, data, n);
}

struct req_ctx {
    void (*cb)(void *ctx, const struct wr_err *err);
    void *ctx;
};

static void req_reply(void *ctx, const struct wr_frame_hdr *h, const uint8_t *pl, bool final,
                      const struct wr_err *err)
{
    struct req_ctx *r = ctx;

    if (!final)
        return;
    if (r->cb != NULL)
        r->cb(r->ctx, err);
    free(r);
}

static void simple_req(struct wr_proc *p, uint16_t type, uint16_t tag1, uint64_t v1, uint16_t tag2,
                       uint64_t v2, void (*cb)(void *ctx, const struct wr_err *err), void *ctx)
{
    struct req_ctx *r;
    struct wr_err err;
    struct wr_buf *b;
    size_t start;

    /* A frozen warren-init would answer only after the thaw: refuse rather than hang. */
    if (wr__live_sb_paused(p->sb) || p->sb->agent == NULL || !wr_agent_is_ready(p->sb->agent)) {
        wr_err_set(&err, WR_ECONFLICT, 0, "sandbox %s is %s", p->sb->id,
                   wr__live_sb_paused(p->sb) ? "paused" : "not running");
        if (cb != NULL)
            cb(ctx, &err);
        return;
    }
    r = xcalloc(1, sizeof(*r));
    r->cb = cb;
    r->ctx = ctx;
    b = wr_agent_begin(p->sb->agent, type, &start);
    wr_msg_put_u64(b, WR_TAG_PROC_ID, p->id);
    if (tag1)
        wr_msg_put_u64(b, tag1, v1);
    if (tag2)
        wr_msg_put_u64(b, tag2, v2);
    if (wr_agent_end(p->sb->agent, start, req_reply, r, &err) == 0) {
        free(r);
        if (cb != NULL)
            cb(ctx, &err);
    }
}

void wr_proc_stdin_close(struct wr_proc *p, void (*cb)(void *ctx, const struct wr_err *err),
                         void *ctx)
{
    struct req_ctx *r;
    struct wr_err err;

    if (p->sb->agent == NULL || !wr_agent_is_ready(p->sb->agent)) {
        wr_err_set(&err, WR_ECONFLICT, 0, "sandbox %s is not running", p->sb->id);
        if (cb != NULL)
            cb(ctx, &err);
        return;
    }
    /* After the stdin written so far: the agent holds the close until that has gone out. */
    r = xcalloc(1, sizeof(*r));
    r->cb = cb;
    r->ctx = ctx;
    if (wr_agent_stdin_close(p->sb->agent, p->id, req_reply, r, &err) < 0) {
        free(r);
        if (cb != NULL)
            cb(ctx, &err);
    }
}

void wr_proc_signal(struct wr_proc *p, int sig, void (*cb)(void *ctx, const struct wr_err *err),
                    void *ctx)
{
    simple_req(p, WR_MSG_SIGNAL, WR_TAG_SIGNAL, (uint64_t)sig, 0, 0, cb, ctx);
}

void wr_proc_resize(struct wr_proc *p, uint16_t rows, uint16_t cols,
                    void (*cb)(void *ctx, const struct wr_err *err), void *ctx)
{
    simple_req(p, WR_MSG_RESIZE, WR_TAG_ROWS, rows, WR_TAG_COLS, cols, cb, ctx);
}

int wr_proc_release(struct wr_proc *p, struct wr_err *err)
{
    struct wr_buf *b;
    size_t start;

    if (p->running)
        return wr_err_set(err, WR_ECONFLICT, 0, "process %u is still running", p->id);
    if (p->sb->agent != NULL && wr_agent_is_ready(p->sb->agent)) {
        wr_agent_detach(p->sb->agent, p->id);
        b = wr_agent_begin(p->sb->agent, WR_MSG_RELEASE, &start);
        wr_msg_put_u64(b, WR_TAG_PROC_ID, p->id);
        (void)wr_agent_end(p->sb->agent, start, NULL, NULL, NULL);
    }
    for (struct wr_proc_sub *s = p->subs, *next; s != NULL; s = next) {
        next = s->next;
        s->proc = NULL;
    }
    table_remove(p->sb, p);
    proc_free(p);
    return 0;
}

/* ---- the sandbox's end, and adoption after a restart ---------------------------------------- */

void wr__procs_lost(struct wr_live_sb *sb, const struct wr_err *why)
{
    for (size_t i = 0; i < sb->nprocs; i++) {
        struct wr_proc *p = sb->procs[i];
        if (p->timer_on) {
            uv_timer_stop(&p->timer);
            p->timer_on = false;
        }
        for (struct wr_proc_sub *s = p->subs, *next; s != NULL; s = next) {
            next = s->next;
            s->proc = NULL;
            s->next = NULL;
            if (s->on_lost != NULL)
                s->on_lost(s, why);
        }
        p->subs = NULL;
        if (p->running) {
            p->running = false;
            p->ex.exit_code = -1;
            p->ex.signal = SIGKILL;
        }
    }
}

void wr__procs_pause(struct wr_live_sb *sb)
{
    for (size_t i = 0; i < sb->nprocs; i++) {
        struct wr_proc *p = sb->procs[i];
        if (!p->timer_on)
            continue;
        p->timer_left_ms = uv_timer_get_due_in(&p->timer);
        uv_timer_stop(&p->timer);
        p->timer_on = false;
        p->timer_paused = true;
    }
}

void wr__procs_resume(struct wr_live_sb *sb)
{
    for (size_t i = 0; i < sb->nprocs; i++) {
        struct wr_proc *p = sb->procs[i];
        if (!p->timer_paused)
            continue;
        p->timer_paused = false;
        if (p->running) {
            uv_timer_start(&p->timer, on_timeout, p->timer_left_ms, 0);
            p->timer_on = true;
        }
    }
}

void wr__procs_free(struct wr_live_sb *sb)
{
    for (size_t i = 0; i < sb->nprocs; i++)
        proc_free(sb->procs[i]);
    free(sb->procs);
    sb->procs = NULL;
    sb->nprocs = sb->capprocs = 0;
}

static void adopt_attached(void *ctx, uint32_t proc_id, int64_t pid, const struct wr_err *err)
{
    struct wr_proc *p = ctx;
    if (err != NULL)
        log_warn("sandbox %s: attach to process %u: %s", p->sb->id, proc_id, err->msg);
}

static const struct wr_agent_proc_cbs adopt_cbs = {
    .on_started = adopt_attached,
    .on_output = on_output,
    .on_exit = on_exit_ev,
};

/* A LIST after a restart: the sandbox, and its template's start command (to tag its process
 * again: the tag is the daemon's, not warren-init's), or NULL. */
struct adopt_ctx {
    struct wr_live_sb *sb;
    char *start_cmd;
};

static void adopt_list_reply(void *ctx, const struct wr_frame_hdr *h, const uint8_t *pl, bool final,
                             const struct wr_err *err)
{
    struct adopt_ctx *ac = ctx;
    struct wr_live_sb *sb = ac->sb;
    struct wr_proc_info pi;
    struct wr_err derr;
    struct wr_proc *p;

    if (final) {
        if (err != NULL)
            log_warn("sandbox %s: list processes: %s", sb->id, err->msg);
        /* Adopted: the socket can go until a request comes (unless a process is routed). */
        wr__adopt_done(sb);
        wr__resume_answer(sb, NULL); /* a restore's resume waits for the list */
        if (sb->agent != NULL)
            wr_agent_doze(sb->agent);
        wr_live_sb_unref(sb);
        free(ac->start_cmd);
        free(ac);
        return;
    }
    if (h->type != WR_MSG_PROC || wr_proc_info_decode(pl, h->len, &pi, &derr) < 0)
        return;
    if (wr_live_sb_proc(sb, pi.proc_id) == NULL && wr__live_sb_watched(sb)) {
        p = proc_new(sb);
        p->id = pi.proc_id;
        p->os_pid = pi.pid;
        p->argv = wr_strv_dup(pi.argv);
        p->pty = pi.pty;
        p->running = pi.running;
        p->ex.exit_code = pi.exit_code;
        p->ex.signal = pi.signal;
        if (pi.cgroup != NULL)
            p->cg_name = xstrdup(pi.cgroup); /* its EXIT (on ATTACH) reads and removes it */
        if (ac->start_cmd != NULL && pi.argv != NULL && pi.argv[0] && pi.argv[1] && pi.argv[2] &&
            !pi.argv[3] && strcmp(pi.argv[0], "/bin/sh") == 0 && strcmp(pi.argv[1], "-c") == 0 &&
            strcmp(pi.argv[2], ac->start_cmd) == 0 && !wr__procs_tagged(sb, WR_START_TAG)) {
            p->tag = xstrdup(WR_START_TAG);
        }
        table_add(sb, p);
        /* Attach to ended processes too: warren-init still holds the output they wrote while
         * no daemon read it, and sends it before their EXIT. */
        if (wr_agent_attach(sb->agent, p->id, &adopt_cbs, p, &derr) < 0)
            log_warn("sandbox %s: attach %u: %s", sb->id, p->id, derr.msg);
    }
    wr_proc_info_fini(&pi);
}

void wr__procs_adopt(struct wr_live_sb *sb)
{
    struct adopt_ctx *ac;
    struct wr_sandbox_rec rec;
    struct wr_start_cfg *start = NULL;
    struct wr_buf *b;
    struct wr_err err;
    size_t at;

    if (sb->agent == NULL) {
        wr__adopt_done(sb);
        wr__resume_answer(sb, NULL);
        return;
    }
    ac = xcalloc(1, sizeof(*ac));
    ac->sb = sb;
    if (wr_store_sandbox_get(sb->m->cfg.store, NULL, sb->id, &rec, &err) == 0) {
        if (wr__start_cfg_of_image(rec.image_json, rec.template_name, &start, &err) == 0 &&
            start != NULL) {
            ac->start_cmd = start->cmd;
            start->cmd = NULL;
        }
        wr__start_cfg_free(start);
        wr_sandbox_rec_fini(&rec);
    }
    wr_live_sb_ref(sb);
    b = wr_agent_begin(sb->agent, WR_MSG_LIST, &at);
    (void)b;
    if (wr_agent_end(sb->agent, at, adopt_list_reply, ac, &err) == 0) {
        log_warn("sandbox %s: list processes: %s", sb->id, err.msg);
        wr__adopt_done(sb);
        wr__resume_answer(sb, NULL);
        wr_live_sb_unref(sb);
        free(ac->start_cmd);
        free(ac);
    }
}

bool wr__procs_tagged(const struct wr_live_sb *sb, const char *tag)
{
    for (size_t i = 0; i < sb->nprocs; i++)
        if (sb->procs[i]->tag != NULL && strcmp(sb->procs[i]->tag, tag) == 0)
            return true;
    return false;
}
