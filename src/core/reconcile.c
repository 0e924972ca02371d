/* SPDX-License-Identifier: Apache-2.0 */
/* Taking back the sandboxes of the store after a restart (see docs/architecture.md). */
#include <inttypes.h>
#include <string.h>

#include "../util/cleanup.h"
#include "../util/log.h"
#include "core_int.h"
#include "images.h"

/* ---- open, reconcile, close ----------------------------------------------------------------- */

/* How long a restarted daemon waits for the warren-init of a create it did not finish to
 * answer (the child got "go", so it is one or becomes one in a few milliseconds). */
#define HALF_MADE_HELLO_MS 5000

/* A sandbox of the store that cannot be taken back: what is left of it on the host goes, by
 * the teardown of every end (rt_sb: a handle on it, or NULL), and its record says why (forget:
 * the record goes too). */
static void reconcile_end(struct wr_manager *m, const struct wr_sandbox_rec *r,
                          struct wr_sandbox *rt_sb, bool forget, enum wr_sb_state state,
                          const char *reason)
{
    _cleanup_free_ char *home = wr_images_home(m->cfg.images, r->id);
    struct wr_err err;

    log_warn("sandbox %s: %s", r->id, reason);
    if (wr__sandbox_teardown(m, r->id, rt_sb, true, home, &err) < 0)
        log_warn("sandbox %s: teardown: %s", r->id, err.msg);
    if (forget) {
        (void)wr_store_sandbox_delete(m->cfg.store, r->id, NULL);
    } else {
        (void)wr_store_sandbox_set_state(m->cfg.store, r->id, state, reason, NULL);
        /* Its slot, found ready by wr__net_init, stays so. */
        if (r->net_slot >= 0)
            (void)wr_store_sandbox_set_net(m->cfg.store, r->id, r->net_json, -1, NULL);
    }
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
        wr_store_sandbox_set_state(m->cfg.store, r->id, WR_SB_RUNNING, NULL, &err) < 0) {
        log_info("sandbox %s: half made: %s", r->id, err.msg);
        reconcile_end(m, r, rt_sb, false, WR_SB_ERROR,
                      "the daemon restarted while the sandbox was being created");
        return NULL;
    }
    log_info("sandbox %s: the daemon restarted while it was being created; its warren-init "
             "answers: running",
             r->id);
    r->init_pid = wr_sandbox_pid(rt_sb);
    r->state = WR_SB_RUNNING;
    return rt_sb;
}

/* A sandbox taken back runs on the backend its record names. */
static void set_backend(struct wr_live_sb *sb, const struct wr_sandbox_rec *r)
{
    struct wr_err err;

    if (wr__rec_backend(r, &sb->backend, &err) < 0)
        log_warn("%s", err.msg);
}

/* Take back one sandbox found in the store. */
void wr__reconcile_one(struct wr_manager *m, struct wr_sandbox_rec *r)
{
    enum live_sb_state to = LIVE_SB_RUNNING;
    struct wr_sandbox *rt_sb = NULL;
    struct wr_live_sb *sb;
    struct wr_err err;

    if (strncmp(r->template_name, WR_BUILD_TEMPLATE_PREFIX, strlen(WR_BUILD_TEMPLATE_PREFIX)) ==
        0) {
        /* Only its build, gone with the daemon that ran it, had a use for it. */
        reconcile_end(m, r, NULL, true, WR_SB_STOPPED,
                      "the daemon restarted during the build that made it");
        return;
    }
    if (r->state == WR_SB_PAUSED && r->paused_mode == WR_SB_PAUSED_DISK) {
        /* Its files wait in its home; resume starts it. A resume the daemon died in may have
         * started a warren-init on them already: it goes (nobody heard of it), the files
         * stay. */
        if (wr__sandbox_teardown(m, r->id, NULL, false, NULL, &err) < 0)
            log_warn("sandbox %s: a resume cut short: %s", r->id, err.msg);
        if (r->init_pid != 0)
            (void)wr_store_sandbox_set_runtime(m->cfg.store, r->id, 0, 0, NULL);
        sb = wr__live_sb_new(m, r->id, r->team, r->memory_bytes, r->cpu_millis);
        set_backend(sb, r);
        sb->store_layers = wr__uses_store_layers(r->image_json);
        wr__live_sb_set_state(sb, LIVE_SB_ON_DISK);
        sb->remaining_ms = r->remaining_ms > 0 ? r->remaining_ms : 0;
        sb->on_timeout = r->on_timeout;
        sb->timeout_s = r->timeout_s;
        wr__table_put(m, sb);
        (void)wr__net_adopt(m, sb, r);
        wr__devices_adopt(m, r);
        wr__account(sb, false);
        log_info("sandbox %s: paused to disk", r->id);
        return;
    }
    if (r->state == WR_SB_CREATING) {
        if ((rt_sb = take_back_half_made(m, r)) == NULL)
            return;
    } else if (r->init_pid <= 0 || wr_sandbox_adopt(m->cfg.rt, r->id, (pid_t)r->init_pid,
                                                    (uid_t)r->uid_base, &rt_sb, &err) < 0) {
        reconcile_end(m, r, NULL, false, WR_SB_STOPPED,
                      "the sandbox ended while the daemon was down");
        return;
    }
    sb = wr__live_sb_new(m, r->id, r->team, r->memory_bytes, r->cpu_millis);
    set_backend(sb, r);
    sb->store_layers = wr__uses_store_layers(r->image_json);
    sb->rt = rt_sb;
    sb->adopted = true;
    sb->on_timeout = r->on_timeout;
    sb->timeout_s = r->timeout_s;
    /* Make the freezer agree with the record: a daemon that died between a freeze (or thaw) and
     * its record left them apart. Freezing a frozen cgroup, or thawing a thawed one, is a
     * no-op. */
    if (r->state == WR_SB_PAUSED) {
        to = LIVE_SB_PAUSED;
        sb->remaining_ms = r->remaining_ms > 0 ? r->remaining_ms : 0;
        if (wr_sandbox_freeze(rt_sb, true, &err) < 0) {
            log_warn("sandbox %s: keep it paused: %s; it runs", r->id, err.msg);
            to = LIVE_SB_RUNNING;
            r->deadline_ms = wr__core_now_ms() + sb->remaining_ms;
            (void)wr_store_sandbox_set_resumed(m->cfg.store, r->id, r->deadline_ms, NULL);
        }
    } else if (wr_sandbox_freeze(rt_sb, false, &err) < 0) {
        log_warn("sandbox %s: thaw: %s", r->id, err.msg);
    }
    wr__table_put(m, sb);
    (void)wr__net_adopt(m, sb, r);
    wr__devices_adopt(m, r);
    log_info("sandbox %s: adopted%s (init pid %" PRId64 ")", r->id,
             to == LIVE_SB_PAUSED ? ", paused" : "", r->init_pid);
    /* A deadline that passed while the daemon was down fires at once; a paused sandbox's clock
     * stays stopped, and its agent is connected when it is resumed. */
    wr__live_sb_start_watching(sb, to, r->deadline_ms, true);
}
