/* SPDX-License-Identifier: Apache-2.0 */
/* The audit trail (audit.h). */
#include "audit.h"

#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "../util/log.h"
#include "../util/cleanup.h"
#include "../util/metrics.h"
#include "../util/xalloc.h"

/* A prune deletes this many rows per statement, so the write lock is never held long. */
#define PRUNE_BATCH 5000

struct wr_audit {
    uv_loop_t *loop;
    struct wr_store *store;
    char *db_path;
    uint32_t retention_days;
    uv_timer_t *timer;       /* the prune */
    uv_timer_t *flush_timer; /* the queued records */
    struct wr_audit_rec queue[WR_AUDIT_BATCH];
    size_t nqueue;
    uv_work_t work;
    bool running, closing;
    struct wr_store *prune_store; /* the worker's connection, opened by its first run */
    int64_t pruned;               /* rows the last run deleted */
    struct wr_err prune_err;
    int prune_rc;
    struct wr_metric *m_writes, *m_errors, *m_pruned;
};

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void audit_free(struct wr_audit *a)
{
    wr_store_close(a->prune_store);
    free(a->db_path);
    free(a);
}

static void prune_run(uv_work_t *w)
{
    struct wr_audit *a = w->data;
    int64_t before = now_ms() - (int64_t)a->retention_days * 86400 * 1000, n = 0;

    a->pruned = 0;
    a->prune_rc = 0;
    if (a->prune_store == NULL &&
        wr_store_open_more(a->db_path, &a->prune_store, &a->prune_err) < 0) {
        a->prune_store = NULL;
        a->prune_rc = -1;
        return;
    }
    do {
        if (wr_store_audit_prune(a->prune_store, before, PRUNE_BATCH, &n, &a->prune_err) < 0) {
            a->prune_rc = -1;
            return;
        }
        a->pruned += n;
    } while (n == PRUNE_BATCH);
}

static void prune_done(uv_work_t *w, int status)
{
    struct wr_audit *a = w->data;

    a->running = false;
    if (a->prune_rc < 0)
        log_warn("audit: prune: %s", a->prune_err.msg);
    else if (a->pruned > 0)
        log_info("audit: pruned %lld records older than %u days", (long long)a->pruned,
                 a->retention_days);
    wr_metric_add(a->m_pruned, NULL, (double)a->pruned);
    if (a->closing)
        audit_free(a);
}

void wr_audit_prune_now(struct wr_audit *a)
{
    if (a->running || a->closing)
        return;
    a->running = true;
    a->work.data = a;
    uv_queue_work(a->loop, &a->work, prune_run, prune_done);
}

static void on_timer(uv_timer_t *t)
{
    wr_audit_prune_now(t->data);
}

int wr_audit_open(uv_loop_t *loop, struct wr_store *store, const char *db_path,
                  uint32_t retention_days, struct wr_audit **out, struct wr_err *err)
{
    struct wr_audit *a;

    if (retention_days == 0)
        return wr_err_set(err, WR_EINVAL, 0, "the audit retention must be at least one day");
    a = xcalloc(1, sizeof(*a));
    a->loop = loop;
    a->store = store;
    a->db_path = xstrdup(db_path);
    a->retention_days = retention_days;
    a->m_writes = wr_metric_counter("warrend_audit_records_total",
                                    "Audit records written (state-changing API requests).", NULL);
    a->m_errors = wr_metric_counter("warrend_audit_write_errors_total",
                                    "Audit records that could not be written.", NULL);
    a->m_pruned = wr_metric_counter("warrend_audit_pruned_total",
                                    "Audit records deleted past the retention.", NULL);
    a->timer = xmalloc(sizeof(*a->timer));
    uv_timer_init(loop, a->timer);
    a->timer->data = a;
    uv_timer_start(a->timer, on_timer, 1000, WR_AUDIT_PRUNE_MS);
    uv_unref((uv_handle_t *)a->timer);
    a->flush_timer = xmalloc(sizeof(*a->flush_timer));
    uv_timer_init(loop, a->flush_timer);
    a->flush_timer->data = a;
    uv_unref((uv_handle_t *)a->flush_timer);
    *out = a;
    return 0;
}

static void flush(struct wr_audit *a)
{
    struct wr_err err;

    if (a->nqueue == 0)
        return;
    uv_timer_stop(a->flush_timer);
    if (wr_store_audit_insert_n(a->store, a->queue, a->nqueue, &err) < 0) {
        log_error("audit: %zu records lost: %s", a->nqueue, err.msg);
        wr_metric_add(a->m_errors, NULL, (double)a->nqueue);
    } else {
        wr_metric_add(a->m_writes, NULL, (double)a->nqueue);
    }
    for (size_t i = 0; i < a->nqueue; i++)
        wr_audit_rec_fini(&a->queue[i]);
    a->nqueue = 0;
}

static void on_flush_timer(uv_timer_t *t)
{
    flush(t->data);
}

static char *dup_or_empty(const char *s)
{
    return xstrdup(s ? s : "");
}

void wr_audit_append(struct wr_audit *a, const struct wr_audit_rec *r)
{
    struct wr_audit_rec *q = &a->queue[a->nqueue++];

    *q = (struct wr_audit_rec){
        .time_ms = r->time_ms ? r->time_ms : now_ms(),
        .request_id = dup_or_empty(r->request_id),
        .team = dup_or_empty(r->team),
        .key_id = dup_or_empty(r->key_id),
        .peer = dup_or_empty(r->peer),
        .action = dup_or_empty(r->action),
        .object_kind = dup_or_empty(r->object_kind),
        .object_id = dup_or_empty(r->object_id),
        .method = dup_or_empty(r->method),
        .route = dup_or_empty(r->route),
        .status = r->status,
        .code = dup_or_empty(r->code),
    };
    if (a->nqueue == WR_AUDIT_BATCH)
        flush(a);
    else if (a->nqueue == 1)
        uv_timer_start(a->flush_timer, on_flush_timer, WR_AUDIT_FLUSH_MS, 0);
}

int wr_audit_list(struct wr_audit *a, const struct wr_audit_filter *f, struct wr_audit_rec **out,
                  size_t *n, struct wr_err *err)
{
    flush(a);
    return wr_store_audit_list(a->store, f, out, n, err);
}

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

void wr_audit_close(struct wr_audit *a)
{
    if (a == NULL)
        return;
    flush(a);
    a->closing = true;
    uv_timer_stop(a->timer);
    uv_close((uv_handle_t *)a->timer, timer_closed);
    uv_close((uv_handle_t *)a->flush_timer, timer_closed);
    if (!a->running)
        audit_free(a);
}
