/* SPDX-License-Identifier: Apache-2.0 */
/* Lifecycle events (events.h): the manager's writes, the followers, the hourly prune. */
#include "events.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../util/log.h"
#include "../util/xalloc.h"
#include "core_int.h"

#define PRUNE_MS    (3600 * 1000)
#define PRUNE_BATCH 5000
#define BACKLOG_MAX 100000 /* events a follower's backlog replays at the most */

struct wr_events_sub {
    struct wr_events *ev;
    struct wr_events_sub *next;
    char *team, *sandbox_id, *type;
    wr_events_fn cb;
    void *ctx;
};

struct wr_events {
    struct wr_manager *m;
    struct wr_events_sub *subs;
    uv_timer_t *prune;
};

static bool matches(const struct wr_events_sub *s, const struct wr_event_rec *r)
{
    size_t n = s->type ? strlen(s->type) : 0;

    return (s->team == NULL || strcmp(s->team, r->team) == 0) &&
           (s->sandbox_id == NULL || strcmp(s->sandbox_id, r->sandbox_id) == 0) &&
           (s->type == NULL || strcmp(s->type, r->type) == 0 ||
            (n > 0 && s->type[n - 1] == '.' && strncmp(s->type, r->type, n) == 0));
}

void wr__event(struct wr_manager *m, const char *team, const char *sandbox_id, const char *type,
               json_t *data)
{
    struct wr_event_rec r = {.time_ms = wr__core_now_ms(),
                             .team = (char *)(team ? team : ""),
                             .sandbox_id = (char *)sandbox_id,
                             .type = (char *)type};
    struct wr_events *ev = m->events;
    char *s = data ? json_dumps(data, JSON_COMPACT) : NULL;
    struct wr_err err;

    json_decref(data);
    r.data = s;
    if (ev == NULL || m->closing) {
        free(s);
        return;
    }
    if (wr_store_event_insert(m->cfg.store, &r, &err) < 0) {
        log_warn("sandbox %s: event %s: %s", sandbox_id, type, err.msg);
    } else {
        wr__webhooks_event(m, &r);
        /* A callback may unfollow its own subscription (the stream ended): take next first. */
        for (struct wr_events_sub *sub = ev->subs, *next; sub != NULL; sub = next) {
            next = sub->next;
            if (matches(sub, &r))
                sub->cb(sub->ctx, &r);
        }
    }
    free(s);
}

json_t *wr_events_json(const struct wr_event_rec *r)
{
    char id[24], at[32];
    time_t sec = (time_t)(r->time_ms / 1000);
    struct tm tm;
    size_t n;
    json_t *data = json_loads(r->data ? r->data : "{}", 0, NULL);

    snprintf(id, sizeof(id), "%" PRId64, r->id);
    gmtime_r(&sec, &tm);
    n = strftime(at, sizeof(at), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(at + n, sizeof(at) - n, ".%03uZ", (unsigned)(r->time_ms % 1000));
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:o}", "id", id, "time", at, "type", r->type,
                     "sandbox_id", r->sandbox_id, "team", r->team, "data",
                     json_is_object(data) ? data : (json_decref(data), json_object()));
}

int wr_events_list(struct wr_manager *m, const struct wr_event_filter *f, struct wr_event_rec **out,
                   size_t *n, struct wr_err *err)
{
    return wr_store_event_list(m->cfg.store, f, out, n, err);
}

static void sub_free(struct wr_events_sub *s)
{
    free(s->team);
    free(s->sandbox_id);
    free(s->type);
    free(s);
}

int wr_events_follow(struct wr_manager *m, const struct wr_event_filter *f, wr_events_fn cb,
                     void *ctx, struct wr_events_sub **out, struct wr_err *err)
{
    struct wr_events *ev = m->events;
    struct wr_events_sub *s;
    struct wr_event_filter page = *f;
    size_t replayed = 0;

    if (ev == NULL)
        return wr_err_set(err, WR_EUNSUPPORTED, 0, "this daemon keeps no events");
    page.limit = 1000;
    /* The backlog, a page at a time, before the follower is in the list: nothing is written
     * meanwhile (this is the loop thread), so the live events start right after it. */
    while (replayed < BACKLOG_MAX) {
        struct wr_event_rec *v = NULL;
        size_t n = 0;

        if (wr_store_event_list(m->cfg.store, &page, &v, &n, err) < 0)
            return -1;
        for (size_t i = 0; i < n; i++) {
            cb(ctx, &v[i]);
            page.after = v[i].id;
        }
        for (size_t i = 0; i < n; i++)
            wr_event_rec_fini(&v[i]);
        free(v);
        replayed += n;
        if (n < page.limit)
            break;
    }
    s = xcalloc(1, sizeof(*s));
    s->ev = ev;
    s->team = f->team ? xstrdup(f->team) : NULL;
    s->sandbox_id = f->sandbox_id ? xstrdup(f->sandbox_id) : NULL;
    s->type = f->type ? xstrdup(f->type) : NULL;
    s->cb = cb;
    s->ctx = ctx;
    s->next = ev->subs;
    ev->subs = s;
    *out = s;
    return 0;
}

void wr_events_unfollow(struct wr_events_sub *sub)
{
    struct wr_events_sub **p;

    if (sub == NULL)
        return;
    for (p = &sub->ev->subs; *p != NULL && *p != sub; p = &(*p)->next)
        ;
    if (*p == sub)
        *p = sub->next;
    sub_free(sub);
}

static void on_prune(uv_timer_t *t)
{
    struct wr_events *ev = t->data;
    int64_t before = wr__core_now_ms() - (int64_t)WR_EVENTS_RETENTION_DAYS * 86400 * 1000, n = 0;
    struct wr_err err;

    /* Batches of the oldest rows by id; the rest, if any, at the next tick. */
    if (wr_store_event_prune(ev->m->cfg.store, before, PRUNE_BATCH, &n, &err) < 0)
        log_warn("events: prune: %s", err.msg);
    else if (n > 0)
        log_info("events: pruned %lld older than %d days", (long long)n, WR_EVENTS_RETENTION_DAYS);
}

void wr__events_open(struct wr_manager *m)
{
    struct wr_events *ev = xcalloc(1, sizeof(*ev));

    ev->m = m;
    ev->prune = xmalloc(sizeof(*ev->prune));
    uv_timer_init(m->loop, ev->prune);
    ev->prune->data = ev;
    uv_timer_start(ev->prune, on_prune, 1000, PRUNE_MS);
    uv_unref((uv_handle_t *)ev->prune);
    m->events = ev;
}

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

void wr__events_close(struct wr_manager *m)
{
    struct wr_events *ev = m->events;

    if (ev == NULL)
        return;
    m->events = NULL;
    while (ev->subs != NULL) {
        struct wr_events_sub *s = ev->subs;
        ev->subs = s->next;
        s->cb(s->ctx, NULL);
        sub_free(s);
    }
    uv_timer_stop(ev->prune);
    uv_close((uv_handle_t *)ev->prune, timer_closed);
    free(ev);
}

/* ---- the events of the manager's calls, on their success ------------------------------------- */

struct state_wrap {
    struct wr_manager *m;
    const char *type;
    wr_manager_state_cb cb;
    void *ctx;
};

static void state_done(void *ctx, const struct wr_sandbox_rec *rec, const struct wr_err *err)
{
    struct state_wrap *w = ctx;

    if (err == NULL && rec != NULL)
        wr__event(w->m, rec->team, rec->id, w->type,
                  json_pack("{s:s?,s:s*}", "paused_mode", wr_sb_paused_mode_name(rec->paused_mode),
                            "reason", rec->state == WR_SB_PAUSED ? rec->reason : NULL));
    w->cb(w->ctx, rec, err);
    free(w);
}

void wr__events_wrap_state(struct wr_manager *m, const char *type, wr_manager_state_cb *cb,
                           void **ctx)
{
    struct state_wrap *w = xmalloc(sizeof(*w));

    *w = (struct state_wrap){m, type, *cb, *ctx};
    *cb = state_done;
    *ctx = w;
}

struct snapshot_wrap {
    struct wr_manager *m;
    char *sandbox_id;
    wr_manager_snapshot_cb cb;
    void *ctx;
};

static void snapshot_done(void *ctx, const struct wr_image_rec *snap,
                          const struct wr_snapshot_info *info, const struct wr_err *err)
{
    struct snapshot_wrap *w = ctx;

    if (err == NULL && snap != NULL)
        wr__event(w->m, snap->team, w->sandbox_id, "sandbox.snapshotted",
                  json_pack("{s:s,s:s?}", "snapshot_id", snap->id, "name", snap->name));
    w->cb(w->ctx, snap, info, err);
    free(w->sandbox_id);
    free(w);
}

void wr__events_wrap_snapshot(struct wr_manager *m, const char *sandbox_id,
                              wr_manager_snapshot_cb *cb, void **ctx)
{
    struct snapshot_wrap *w = xmalloc(sizeof(*w));

    *w = (struct snapshot_wrap){m, xstrdup(sandbox_id), *cb, *ctx};
    *cb = snapshot_done;
    *ctx = w;
}

struct fork_wrap {
    struct wr_manager *m;
    char *sandbox_id;
    wr_manager_fork_cb cb;
    void *ctx;
};

static void fork_done(void *ctx, struct wr_sandbox_rec *recs, size_t n, const struct wr_err *errs,
                      size_t nerrs, const struct wr_snapshot_info *info, const struct wr_err *err)
{
    struct fork_wrap *w = ctx;

    if (err == NULL && n > 0) {
        json_t *ids = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(ids, json_string(recs[i].id));
        wr__event(w->m, recs[0].team, w->sandbox_id, "sandbox.forked",
                  json_pack("{s:o,s:I}", "children", ids, "failed", (json_int_t)nerrs));
    }
    w->cb(w->ctx, recs, n, errs, nerrs, info, err);
    free(w->sandbox_id);
    free(w);
}

void wr__events_wrap_fork(struct wr_manager *m, const char *sandbox_id, wr_manager_fork_cb *cb,
                          void **ctx)
{
    struct fork_wrap *w = xmalloc(sizeof(*w));

    *w = (struct fork_wrap){m, xstrdup(sandbox_id), *cb, *ctx};
    *cb = fork_done;
    *ctx = w;
}
