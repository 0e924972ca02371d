/* SPDX-License-Identifier: Apache-2.0 */
/* A managed sandbox's life: its state, its watching (deadline, pidfd, agent), its end and
 * destroy, delete, lookups and timeouts (see manager.h, core_int.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../runtime/exits.h"
#include "../runtime/layer.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "../net/policy.h"
#include "cdi.h"
#include "core_int.h"
#include "images.h"

/* ---- a managed sandbox's life ---------------------------------------------------------------- */

static const char *live_sb_state_name(enum live_sb_state s)
{
    static const char *const names[] = {"creating", "running", "paused", "on disk", "ending"};
    return names[s];
}

/* The one place a managed sandbox changes state; enum live_sb_state (core_int.h) lists the allowed
 * transitions. Another is a bug of the manager's: it aborts. */
void wr__live_sb_set_state(struct wr_live_sb *sb, enum live_sb_state to)
{
#define B(s) (1u << (s))
    static const unsigned allowed[] = {
        [LIVE_SB_CREATING] =
            B(LIVE_SB_RUNNING) | B(LIVE_SB_PAUSED) | B(LIVE_SB_ON_DISK) | B(LIVE_SB_ENDING),
        [LIVE_SB_RUNNING] = B(LIVE_SB_PAUSED) | B(LIVE_SB_ON_DISK) | B(LIVE_SB_ENDING),
        [LIVE_SB_PAUSED] = B(LIVE_SB_RUNNING) | B(LIVE_SB_ENDING),
        [LIVE_SB_ON_DISK] = B(LIVE_SB_RUNNING) | B(LIVE_SB_ENDING),
        [LIVE_SB_ENDING] = 0,
    };
#undef B
    if (!(allowed[sb->state] & (1u << to))) {
        log_error("sandbox %s: no transition from %s to %s", sb->id, live_sb_state_name(sb->state),
                  live_sb_state_name(to));
#ifdef WR_TESTING
        abort(); /* a test build stops at the bug; a daemon serving other teams goes on */
#endif
    }
    {
        enum live_sb_state from = sb->state;
        sb->state = to;
        wr__ledger_state(sb, from);
    }
}

/* Each open handle (deadline timer, pidfd poll) holds a reference of its own. */
static void live_sb_handle_closed(uv_handle_t *h)
{
    struct wr_live_sb *sb = h->data;
    sb->open_handles--;
    wr_live_sb_unref(sb);
}

void wr_live_sb_ref(struct wr_live_sb *sb)
{
    sb->refs++;
}

void wr_live_sb_unref(struct wr_live_sb *sb)
{
    if (--sb->refs > 0)
        return;
    free(sb->id);
    free(sb->team);
    free(sb->led.template_name);
    free(sb->mask_host);
    if (sb->net != NULL) {
        wr_net_policy_fini(sb->net);
        free(sb->net);
    }
    free(sb);
}

bool wr_live_sb_alive(const struct wr_live_sb *sb)
{
    return wr__live_sb_watched(sb);
}

const char *wr_live_sb_id(const struct wr_live_sb *sb)
{
    return sb->id;
}

struct wr_agent *wr_live_sb_agent(struct wr_live_sb *sb)
{
    return sb->agent;
}

const char *wr_live_sb_ctl_path(const struct wr_live_sb *sb)
{
    return sb->rt != NULL ? wr_sandbox_ctl_path(sb->rt) : NULL;
}

uv_loop_t *wr_live_sb_loop(const struct wr_live_sb *sb)
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
bool wr__uses_store_layers(const char *image_json)
{
    return image_json != NULL && strstr(image_json, "\"sha256:") != NULL;
}

struct wr_live_sb *wr__live_sb_new(struct wr_manager *m, const char *id, const char *team,
                                   uint64_t memory_bytes, uint32_t cpu_millis)
{
    struct wr_live_sb *sb = xcalloc(1, sizeof(*sb));

    sb->m = m;
    sb->id = xstrdup(id);
    sb->team = xstrdup(team);
    sb->memory_bytes = memory_bytes;
    sb->cpu_millis = cpu_millis;
    sb->refs = 1; /* the table's */
    sb->state = LIVE_SB_CREATING;
    sb->net_slot = -1;
    return sb;
}

static void agent_open(struct wr_live_sb *sb, bool by_path)
{
    const struct wr_manager_config *cfg = &sb->m->cfg;
    struct wr_agent_config ac = {.loop = sb->m->loop,
                                 .fd = by_path ? -1 : wr_sandbox_take_ctl_fd(sb->rt),
                                 .path = wr_sandbox_ctl_path(sb->rt),
                                 .idle_ms =
                                     cfg->agent_idle_ms ? cfg->agent_idle_ms : WR_AGENT_IDLE_MS,
                                 .crowd = cfg->agent_crowd,
                                 .on_ready = agent_ready,
                                 .on_close = agent_closed,
                                 .ctx = sb};
    struct wr_err err;

    if (wr_agent_open(&ac, &sb->agent, &err) < 0) {
        log_warn("sandbox %s: agent: %s", sb->id, err.msg);
        sb->agent = NULL;
    }
}

/* An adoption's agent has listed the sandbox's processes (or failed to): the next one in the
 * queue connects. */
void wr__adopt_done(struct wr_live_sb *sb)
{
    struct wr_manager *m = sb->m;

    if (!sb->adopt_counted)
        return;
    sb->adopt_counted = false;
    m->adopting--;
    while (m->adopting < WR_ADOPT_PARALLEL && m->adopt_queue != NULL) {
        struct wr_live_sb *next = m->adopt_queue;
        m->adopt_queue = next->anext;
        if (m->adopt_queue == NULL)
            m->adopt_tail = &m->adopt_queue;
        next->anext = NULL;
        next->adopt_queued = false;
        next->adopt_counted = true;
        m->adopting++;
        agent_open(next, true);
        if (next->agent == NULL)
            wr__adopt_done(next);
        wr_live_sb_unref(next); /* the queue's */
    }
}

static void adopt_unqueue(struct wr_live_sb *sb)
{
    struct wr_manager *m = sb->m;

    if (!sb->adopt_queued)
        return;
    for (struct wr_live_sb **pp = &m->adopt_queue; *pp != NULL; pp = &(*pp)->anext)
        if (*pp == sb) {
            *pp = sb->anext;
            if (*pp == NULL)
                m->adopt_tail = pp;
            break;
        }
    sb->anext = NULL;
    sb->adopt_queued = false;
    wr_live_sb_unref(sb);
}

bool wr__adopting(const struct wr_manager *m)
{
    return m->adopting > 0 || m->adopt_queue != NULL;
}

/* Open the sandbox's control agent: on its connected socket, or by path (after a restart: then
 * at most WR_ADOPT_PARALLEL at a time, so that tens of thousands of adoptions do not hold as
 * many sockets). */
void wr__live_sb_connect(struct wr_live_sb *sb, bool by_path)
{
    struct wr_manager *m = sb->m;

    if (by_path && sb->adopted && !sb->adopt_queued && !sb->adopt_counted) {
        if (m->adopt_tail == NULL)
            m->adopt_tail = &m->adopt_queue;
        if (m->adopting >= WR_ADOPT_PARALLEL) {
            wr_live_sb_ref(sb);
            sb->adopt_queued = true;
            *m->adopt_tail = sb;
            m->adopt_tail = &sb->anext;
            return;
        }
        sb->adopt_counted = true;
        m->adopting++;
    }
    agent_open(sb, by_path);
    if (sb->agent == NULL)
        wr__adopt_done(sb);
}

/* ---- the ends of warren-init ----------------------------------------------------------------- */

static unsigned pid_bucket(pid_t pid)
{
    return (uint32_t)pid * 2654435761u % NBUCKETS;
}

static void pid_index(struct wr_live_sb *sb)
{
    unsigned b;

    sb->init_pid = wr_sandbox_pid(sb->rt);
    b = pid_bucket(sb->init_pid);
    sb->pnext = sb->m->by_pid[b];
    sb->m->by_pid[b] = sb;
    sb->pid_indexed = true;
}

static void pid_unindex(struct wr_live_sb *sb)
{
    if (!sb->pid_indexed)
        return;
    for (struct wr_live_sb **pp = &sb->m->by_pid[pid_bucket(sb->init_pid)]; *pp != NULL;
         pp = &(*pp)->pnext)
        if (*pp == sb) {
            *pp = sb->pnext;
            break;
        }
    sb->pnext = NULL;
    sb->pid_indexed = false;
}

/* Why a sandbox's init ended by itself, as its record will say: a limit it reached (its cgroup
 * counts them; on gvisor the sentry ends at the first), or nothing known. */
static void init_exit_reason(struct wr_live_sb *sb, char *buf, size_t size)
{
    struct wr_sandbox_limit_hits h;
    struct wr_err err;

    if (sb->rt != NULL && wr_sandbox_limit_hits(sb->rt, &h, &err) == 0) {
        if (h.oom_kills > 0) {
            snprintf(buf, size, "it reached its memory limit of %" PRIu64 " MiB",
                     sb->memory_bytes >> 20);
            return;
        }
        if (h.pids_refused > 0) {
            snprintf(buf, size,
                     "it reached its limit of %" PRIu32 " tasks (on gvisor, gVisor's "
                     "host threads count)",
                     sb->m->cfg.pids_max);
            return;
        }
    }
    snprintf(buf, size, "the sandbox's init process exited unexpectedly");
}

static void init_exited(struct wr_live_sb *sb)
{
    char reason[160];

    log_warn("sandbox %s: warren-init exited", sb->id);
    if (wr__live_sb_ending(sb))
        return;
    init_exit_reason(sb, reason, sizeof(reason));
    wr__live_sb_end(sb, false, WR_SB_STOPPED, reason, NULL, NULL);
}

static void on_init_gone(uv_timer_t *t)
{
    init_exited(t->data);
}

static void exit_hint(pid_t pid, void *arg)
{
    struct wr_manager *m = arg;

    for (struct wr_live_sb *sb = m->by_pid[pid_bucket(pid)]; sb != NULL; sb = sb->pnext)
        if (sb->init_pid == pid) {
            if (wr__live_sb_watched(sb) && sb->rt != NULL && !wr_sandbox_alive(sb->rt))
                init_exited(sb);
            return;
        }
}

static void on_exits(uv_poll_t *p, int status, int events)
{
    struct wr_manager *m = p->data;
    bool lost = false;
    struct wr_err err;

    if (wr_exits_read(m->cfg.exits, exit_hint, m, &lost, &err) < 0)
        log_warn("%s", err.msg);
    if (!lost)
        return;
    /* The kernel dropped events (a burst beyond the socket's buffer): look at every watched
     * sandbox once, a syscall or three each. Rare, so on the loop. */
    log_warn("process events were lost: checking every sandbox's warren-init");
    for (unsigned b = 0; b < NBUCKETS; b++)
        for (struct wr_live_sb *sb = m->by_pid[b], *next; sb != NULL; sb = next) {
            next = sb->pnext;
            if (wr__live_sb_watched(sb) && sb->rt != NULL && !wr_sandbox_alive(sb->rt))
                uv_timer_start(&sb->deadline, on_init_gone, 0, 0);
        }
}

void wr__exits_start(struct wr_manager *m)
{
    if (m->cfg.exits == NULL)
        return;
    m->exits_poll = xcalloc(1, sizeof(*m->exits_poll));
    if (uv_poll_init(m->loop, m->exits_poll, wr_exits_fd(m->cfg.exits)) < 0) {
        free(m->exits_poll);
        m->exits_poll = NULL;
        m->cfg.exits = NULL;
        log_warn("process events: cannot poll; a pidfd per sandbox");
        return;
    }
    m->exits_poll->data = m;
    uv_poll_start(m->exits_poll, UV_READABLE, on_exits);
}

static void exits_poll_closed(uv_handle_t *h)
{
    free(h);
}

void wr__exits_stop(struct wr_manager *m)
{
    if (m->exits_poll == NULL)
        return;
    uv_close((uv_handle_t *)m->exits_poll, exits_poll_closed);
    m->exits_poll = NULL;
}

void wr__arm_deadline(struct wr_live_sb *sb)
{
    int64_t left = sb->deadline_ms - wr__core_now_ms();
    uv_timer_start(&sb->deadline, on_deadline, left > 0 ? (uint64_t)left : 0, 0);
}

/* The sandbox runs (to RUNNING) or is paused (to PAUSED): watch its end; unless paused, arm its
 * deadline and connect its agent (a frozen warren-init could not answer the HELLO: resume
 * connects it). */
void wr__live_sb_start_watching(struct wr_live_sb *sb, enum live_sb_state to, int64_t deadline_ms,
                                bool connect_by_path)
{
    struct wr_manager *m = sb->m;

    wr__live_sb_set_state(sb, to);
    sb->deadline_ms = deadline_ms;
    uv_timer_init(m->loop, &sb->deadline);
    sb->deadline.data = sb;
    sb->open_handles++;
    wr_live_sb_ref(sb);
    if (to == LIVE_SB_RUNNING)
        wr__arm_deadline(sb);

    if (m->exits_poll != NULL) {
        /* Its end comes through the host's process events: no fd of its own. One that ended
         * before its pidfd was closed is told now, from the loop. */
        pid_index(sb);
        if (!wr_sandbox_drop_fds(sb->rt))
            uv_timer_start(&sb->deadline, on_init_gone, 0, 0);
    } else if (uv_poll_init(m->loop, &sb->pidfd_poll, wr_sandbox_pidfd(sb->rt)) == 0) {
        sb->pidfd_poll.data = sb;
        sb->open_handles++;
        wr_live_sb_ref(sb);
        uv_poll_start(&sb->pidfd_poll, UV_READABLE, on_pidfd);
        sb->polling = true;
    }
    if (to == LIVE_SB_RUNNING && sb->agent == NULL) /* a start command's run connected it */
        wr__live_sb_connect(sb, connect_by_path);
}

/* Answer a resume that waits for the agent (see resume_cb). */
void wr__resume_answer(struct wr_live_sb *sb, const struct wr_err *err)
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

/* The sandbox goes to `to` (ON_DISK or ENDING): stop everything that refers to it on the loop;
 * its processes hear on_lost. */
void wr__live_sb_stop_watching(struct wr_live_sb *sb, enum live_sb_state to,
                               const struct wr_err *why)
{
    bool watched = wr__live_sb_watched(sb);

    wr__live_sb_set_state(sb, to);
    if (!watched)
        return;
    wr__resume_answer(sb, why);
    wr__procs_lost(sb, why);
    pid_unindex(sb);
    adopt_unqueue(sb);
    wr__adopt_done(sb);
    if (sb->agent != NULL) {
        wr_agent_close(sb->agent);
        sb->agent = NULL;
    }
    uv_timer_stop(&sb->deadline);
    uv_close((uv_handle_t *)&sb->deadline, live_sb_handle_closed);
    if (sb->polling) {
        uv_poll_stop(&sb->pidfd_poll);
        uv_close((uv_handle_t *)&sb->pidfd_poll, live_sb_handle_closed);
        sb->polling = false;
    }
}

/* ---- destroying, on a worker thread ---------------------------------------------------------- */

struct destroy_work {
    uv_work_t w;
    struct wr_live_sb *sb;
    struct wr_sandbox *rt_sb;
    bool forget;                  /* the record goes */
    enum wr_sb_state final_state; /* else: what it says */
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
        if (d->forget) {
            if (wr_store_sandbox_delete(m->cfg.store, d->sb->id, &e2) < 0)
                log_warn("sandbox %s: store: %s", d->sb->id, e2.msg);
        } else if (wr_store_sandbox_set_state(m->cfg.store, d->sb->id, d->final_state, d->reason,
                                              &e2) < 0) {
            log_warn("sandbox %s: store: %s", d->sb->id, e2.msg);
        }
    }
    wr__net_release(m, d->sb);
    wr_cdi_release(m->cdi, d->sb->id);
    wr__table_del(m, d->sb);
    if (d->cb != NULL)
        d->cb(d->ctx, NULL);
    /* Deletes asked for while it ended (a deadline, say) forget the record now. */
    while (d->sb->delete_waiters != NULL) {
        struct wr_delete_waiter *dw = d->sb->delete_waiters;
        struct wr_err *e = NULL;
        d->sb->delete_waiters = dw->next;
        if (!m->closing && !d->forget &&
            wr_store_sandbox_delete(m->cfg.store, d->sb->id, &e2) < 0 && e2.kind != WR_ENOTFOUND)
            e = &e2;
        dw->cb(dw->ctx, e);
        free(dw);
    }
    /* Its processes hold references on it: they go with it (their subscribers heard of the
     * end when it stopped being watched). */
    wr__procs_free(d->sb);
    collect = !m->closing && d->sb->store_layers;
    wr_live_sb_unref(d->sb); /* the table's reference: d->sb may be gone from here */
    if (collect)
        wr_images_gc(m->cfg.images); /* its layers may be referenced by nothing now */
    free(d->reason);
    free(d->home);
    free(d);
    wr__work_done(m);
}

/* End a sandbox: stop watching it, destroy it on a worker, then record its end (forget: the
 * record goes, else it says final_state). */
static void live_sb_end_now(struct wr_live_sb *sb, bool forget, enum wr_sb_state final_state,
                            const char *reason, void (*cb)(void *ctx, const struct wr_err *err),
                            void *ctx)
{
    struct destroy_work *d = xcalloc(1, sizeof(*d));
    struct wr_err why;

    d->thaw = sb->state == LIVE_SB_PAUSED;
    sb->busy = true;
    wr__metric_exit(reason);
    if (reason == NULL || strcmp(reason, "deleted") == 0)
        wr__event(sb->m, sb->team, sb->id, "sandbox.killed", NULL);
    else if (strcmp(reason, "timeout") == 0)
        wr__event(sb->m, sb->team, sb->id, "sandbox.timed_out", NULL);
    else
        wr__event(sb->m, sb->team, sb->id, "sandbox.stopped", json_pack("{s:s}", "reason", reason));
    wr_err_set(&why, WR_ECONFLICT, 0, "sandbox %s ended: %s", sb->id, reason ? reason : "deleted");
    wr__live_sb_stop_watching(sb, LIVE_SB_ENDING, &why);
    d->sb = sb;
    d->rt_sb = sb->rt;
    sb->rt = NULL;
    d->forget = forget;
    d->final_state = final_state;
    d->reason = reason ? xstrdup(reason) : NULL;
    d->cb = cb;
    d->ctx = ctx;
    d->home = wr_images_home(sb->m->cfg.images, sb->id);
    d->w.data = d;
    if (!sb->m->closing && !forget) {
        (void)wr_store_sandbox_set_state(sb->m->cfg.store, sb->id, WR_SB_STOPPED, reason, NULL);
        sb->stopped = true;
    }
    wr__queue_work(sb->m, &d->w, destroy_run, destroy_done);
}

/* End a sandbox, or, while a worker works on it, once that is done. */
void wr__live_sb_end(struct wr_live_sb *sb, bool forget, enum wr_sb_state final_state,
                     const char *reason, void (*cb)(void *ctx, const struct wr_err *err), void *ctx)
{
    if (!sb->busy) {
        live_sb_end_now(sb, forget, final_state, reason, cb, ctx);
        return;
    }
    sb->pending_end.due = true;
    sb->pending_end.forget = forget;
    sb->pending_end.final_state = final_state;
    sb->pending_end.reason = reason ? xstrdup(reason) : NULL;
    sb->pending_end.cb = cb;
    sb->pending_end.ctx = ctx;
}

/* After a freeze or thaw: run the end that was asked for meanwhile, if any. */
bool wr__run_pending_end(struct wr_live_sb *sb)
{
    char *reason = sb->pending_end.reason;

    if (!sb->pending_end.due)
        return false;
    sb->pending_end.due = false;
    sb->pending_end.reason = NULL;
    live_sb_end_now(sb, sb->pending_end.forget, sb->pending_end.final_state, reason,
                    sb->pending_end.cb, sb->pending_end.ctx);
    free(reason);
    return true;
}

static void on_deadline(uv_timer_t *t)
{
    struct wr_live_sb *sb = t->data;

    if (wr__live_sb_ending(sb) || sb->state != LIVE_SB_RUNNING)
        return;
    if (sb->on_timeout == WR_SB_TIMEOUT_PAUSE) {
        /* Resumed, it gets its whole timeout again. */
        log_info("sandbox %s: deadline reached: pausing", sb->id);
        wr__pause_start(sb, "timeout", (int64_t)sb->timeout_s * 1000, NULL, NULL);
        return;
    }
    log_info("sandbox %s: deadline reached", sb->id);
    wr__live_sb_end(sb, false, WR_SB_STOPPED, "timeout", NULL, NULL);
}

static void on_pidfd(uv_poll_t *p, int status, int events)
{
    init_exited(p->data);
}

static void agent_ready(struct wr_agent *a, const struct wr_err *err, void *ctx)
{
    struct wr_live_sb *sb = ctx;

    if (err != NULL) {
        log_warn("sandbox %s: agent: %s", sb->id, err->msg);
        wr__adopt_done(sb);
        wr__resume_answer(sb, NULL); /* it runs, though its agent failed: the record says so */
        return;
    }
    if (sb->relist) {
        /* Restored (gvisor): the resume answers once its processes are listed. */
        sb->relist = false;
        wr__procs_adopt(sb);
        return;
    }
    if (sb->adopted)
        wr__procs_adopt(sb);
    wr__resume_answer(sb, NULL);
}

/* The agent connection broke while warren-init looked alive. */
static void on_agent_lost(uv_timer_t *t)
{
    struct wr_live_sb *sb = t->data;

    if (!wr__live_sb_ending(sb))
        wr__live_sb_end(sb, false, WR_SB_ERROR,
                        "the connection to the sandbox's init process broke", NULL, NULL);
}

static void agent_closed(struct wr_agent *a, const struct wr_err *err, void *ctx)
{
    struct wr_live_sb *sb = ctx;

    if (sb->agent != a || wr__live_sb_ending(sb))
        return;
    if (sb->state == LIVE_SB_CREATING) {
        /* Opened for a start command (start.c), before the sandbox is watched: the run sees
         * the agent gone and fails. */
        log_warn("sandbox %s: agent connection closed: %s", sb->id, err ? err->msg : "closed");
        sb->agent = NULL;
        wr_agent_close(a);
        return;
    }
    log_warn("sandbox %s: agent connection closed: %s", sb->id, err ? err->msg : "closed");
    sb->agent = NULL;
    wr_agent_close(a);
    /* When warren-init dies, its socket closes before its pidfd says so (the pid namespace is
     * still being torn down): give the pidfd a moment to report the real reason. Otherwise the
     * connection broke under a live init, a misbehaving (hostile) agent: the sandbox cannot be
     * driven any more and ends in error. */
    uv_timer_start(&sb->deadline, on_agent_lost, 2000, 0);
}

/* Why a sandbox cannot change state now, or 0. */
int wr__check_settled(const struct wr_live_sb *sb, struct wr_err *err)
{
    /* A sandbox that reads as stopped says so, also while its teardown finishes. */
    if (sb->state == LIVE_SB_ENDING && sb->stopped)
        return wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` is stopped", sb->id);
    if (wr__live_sb_ending(sb))
        return wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` is being deleted", sb->id);
    if (sb->state == LIVE_SB_CREATING)
        return wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` is being created", sb->id);
    if (sb->busy)
        return wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` is being paused or resumed", sb->id);
    return 0;
}

/* Let go of a sandbox without killing it (the daemon stops; sandboxes outlive it). */
void wr__live_sb_let_go(struct wr_live_sb *sb)
{
    struct wr_err why;

    wr_err_set(&why, WR_ECONFLICT, 0, "the daemon is shutting down");
    wr__live_sb_stop_watching(sb, LIVE_SB_ENDING, &why);
    wr__procs_free(sb);
    if (sb->rt != NULL)
        wr_sandbox_release(sb->rt);
    sb->rt = NULL;
    if (sb->pending_end.due) {
        sb->pending_end.due = false;
        if (sb->pending_end.cb != NULL)
            sb->pending_end.cb(sb->pending_end.ctx, &why);
        free(sb->pending_end.reason);
    }
    while (sb->delete_waiters != NULL) {
        struct wr_delete_waiter *dw = sb->delete_waiters;
        sb->delete_waiters = dw->next;
        dw->cb(dw->ctx, &why);
        free(dw);
    }
    wr_live_sb_unref(sb);
}

/* ---- the rest of the API -------------------------------------------------------------------- */

/* The sandbox `id` of team (NULL: any) in memory, in any state; or NULL with WR_ENOTFOUND, or
 * WR_ECONFLICT naming the state of one that is only a record (stopped, error). */
struct wr_live_sb *wr__lookup(struct wr_manager *m, const char *team, const char *id,
                              struct wr_err *err)
{
    struct wr_live_sb *sb = wr__table_get(m, id);
    struct wr_sandbox_rec rec;

    if (sb == NULL || (team != NULL && strcmp(sb->team, team) != 0)) {
        /* A stopped sandbox is still known (with its reason) until deleted. */
        if (sb == NULL && wr_store_sandbox_get(m->cfg.store, team, id, &rec, NULL) == 0) {
            wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` is %s%s%s", id,
                       wr_sb_state_name(rec.state), rec.reason ? ": " : "",
                       rec.reason ? rec.reason : "");
            wr_sandbox_rec_fini(&rec);
            return NULL;
        }
        wr_err_set(err, WR_ENOTFOUND, 0, "sandbox `%s` not found", id);
        return NULL;
    }
    return sb;
}

struct wr_live_sb *wr_manager_find(struct wr_manager *m, const char *team, const char *id,
                                   struct wr_err *err)
{
    struct wr_live_sb *sb = wr__lookup(m, team, id, err);

    if (sb == NULL)
        return NULL;
    if (!wr__live_sb_watched(sb) || wr__live_sb_ending(sb)) {
        wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` is not running", id);
        return NULL;
    }
    if (sb->state == LIVE_SB_PAUSED) {
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
    struct wr_live_sb *sb = wr__table_get(m, id);
    struct wr_sandbox_rec rec;
    struct forget_work *f;
    struct wr_err err;

    if (sb != NULL && (team == NULL || strcmp(sb->team, team) == 0)) {
        if (wr__live_sb_ending(sb)) {
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
        wr__live_sb_end(sb, true, WR_SB_STOPPED, "deleted", cb, ctx);
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

int wr_manager_list(struct wr_manager *m, const struct wr_sandbox_filter *f,
                    struct wr_sandbox_rec **out, size_t *n, struct wr_err *err)
{
    return wr_store_sandbox_list(m->cfg.store, f, out, n, err);
}

int wr_manager_set_timeout(struct wr_manager *m, const char *team, const char *id,
                           uint32_t timeout_s, struct wr_sandbox_rec *rec, struct wr_err *err)
{
    struct wr_live_sb *sb;
    int64_t deadline;

    if (timeout_s == 0 || timeout_s > m->cfg.max_timeout_s)
        return wr_err_set(err, WR_EINVAL, 0, "timeout must be 1 to %u seconds",
                          m->cfg.max_timeout_s);
    sb = wr__lookup(m, team, id, err);
    if (sb != NULL && wr__live_sb_paused(sb) && !sb->busy && !wr__live_sb_ending(sb)) {
        /* The clock is stopped: set the time it will have when resumed. */
        if (wr_store_sandbox_get(m->cfg.store, NULL, id, rec, err) < 0)
            return -1;
        if (wr_store_sandbox_set_paused(m->cfg.store, id,
                                        rec->paused_mode != WR_SB_PAUSED_NONE ? rec->paused_mode
                                                                              : WR_SB_PAUSED_MEMORY,
                                        rec->reason, (int64_t)timeout_s * 1000, err) < 0) {
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
    struct wr_live_sb *sb;
    int64_t want = (int64_t)timeout_s * 1000;

    if (timeout_s > m->cfg.max_timeout_s)
        return wr_err_set(err, WR_EINVAL, 0, "timeout must be 1 to %u seconds",
                          m->cfg.max_timeout_s);
    sb = wr__lookup(m, team, id, err);
    if (sb == NULL)
        return -1;
    if (timeout_s == 0 ||
        (wr__live_sb_paused(sb) ? sb->remaining_ms : sb->deadline_ms - wr__core_now_ms()) >= want)
        return wr_store_sandbox_get(m->cfg.store, team, id, rec, err);
    return wr_manager_set_timeout(m, team, id, timeout_s, rec, err);
}
