/* SPDX-License-Identifier: Apache-2.0 */
/* Webhooks and their deliveries' rows (see store.h and migration 16), and the E2B events API's
 * pages of the events table. */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

#include "../util/xalloc.h"

#define LIST_MAX     1000
#define LIST_DEFAULT 100

#define WH_COLS "id, team, name, url, events, secret, format, enabled, created_ms, updated_ms"

void wr_webhook_rec_fini(struct wr_webhook_rec *r)
{
    if (r == NULL)
        return;
    free(r->id);
    free(r->team);
    free(r->name);
    free(r->url);
    free(r->events);
    free(r->secret);
    free(r->format);
    memset(r, 0, sizeof(*r));
}

void wr_delivery_rec_fini(struct wr_delivery_rec *r)
{
    if (r == NULL)
        return;
    free(r->uuid);
    free(r->webhook_id);
    free(r->team);
    free(r->type);
    free(r->body);
    free(r->state);
    free(r->last_error);
    free(r->url);
    free(r->secret);
    memset(r, 0, sizeof(*r));
}

static void webhook_row(sqlite3_stmt *st, struct wr_webhook_rec *r)
{
    r->id = wr__col_text(st, 0);
    r->team = wr__col_text(st, 1);
    r->name = wr__col_text(st, 2);
    r->url = wr__col_text(st, 3);
    r->events = wr__col_text(st, 4);
    r->secret = wr__col_text(st, 5);
    r->format = wr__col_text(st, 6);
    r->enabled = sqlite3_column_int(st, 7) != 0;
    r->created_ms = sqlite3_column_int64(st, 8);
    r->updated_ms = sqlite3_column_int64(st, 9);
}

int wr_store_webhook_insert(struct wr_store *s, const struct wr_webhook_rec *r, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(
        s, WR_ST_WH_INSERT,
        "INSERT INTO webhooks (" WH_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)", err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, r->id);
    wr__bind_text(st, 2, r->team);
    wr__bind_text(st, 3, r->name);
    wr__bind_text(st, 4, r->url);
    wr__bind_text(st, 5, r->events);
    wr__bind_text(st, 6, r->secret);
    wr__bind_text(st, 7, r->format);
    wr__bind_int64(st, 8, r->enabled);
    wr__bind_int64(st, 9, r->created_ms);
    return wr__step_done(s->db, st, "insert webhook", err);
}

int wr_store_webhook_get(struct wr_store *s, const char *team, const char *id,
                         struct wr_webhook_rec *out, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(
        s, WR_ST_WH_GET,
        "SELECT " WH_COLS " FROM webhooks WHERE id = ?1 AND (?2 IS NULL OR team = ?2)", err);
    int rc;

    memset(out, 0, sizeof(*out));
    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, id);
    wr__bind_text(st, 2, team);
    rc = sqlite3_step(st);
    if (rc == SQLITE_DONE)
        return wr_err_set(err, WR_ENOTFOUND, 0, "no webhook `%s`", id);
    if (rc != SQLITE_ROW)
        return wr__store_fail(s->db, err, "get webhook");
    webhook_row(st, out);
    return 0;
}

int wr_store_webhook_list(struct wr_store *s, const char *team, struct wr_webhook_rec **out,
                          size_t *n, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_WH_LIST,
                 "SELECT " WH_COLS " FROM webhooks WHERE ?1 IS NULL OR team = ?1"
                 " ORDER BY created_ms, id",
                 err);
    struct wr_webhook_rec *v = NULL;
    size_t cnt = 0, cap = 0;
    int rc;

    *out = NULL;
    *n = 0;
    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, team);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (cnt == cap) {
            cap = cap ? cap * 2 : 8;
            v = xrealloc(v, cap * sizeof(*v));
        }
        webhook_row(st, &v[cnt++]);
    }
    if (rc != SQLITE_DONE) {
        for (size_t i = 0; i < cnt; i++)
            wr_webhook_rec_fini(&v[i]);
        free(v);
        return wr__store_fail(s->db, err, "list webhooks");
    }
    *out = v;
    *n = cnt;
    return 0;
}

int wr_store_webhook_update(struct wr_store *s, const struct wr_webhook_rec *r, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_WH_UPDATE,
                 "UPDATE webhooks SET name = ?3, url = ?4, events = ?5, secret = ?6, enabled = ?7,"
                 " updated_ms = ?8 WHERE id = ?1 AND team = ?2",
                 err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, r->id);
    wr__bind_text(st, 2, r->team);
    wr__bind_text(st, 3, r->name);
    wr__bind_text(st, 4, r->url);
    wr__bind_text(st, 5, r->events);
    wr__bind_text(st, 6, r->secret);
    wr__bind_int64(st, 7, r->enabled);
    wr__bind_int64(st, 8, r->updated_ms);
    if (wr__step_done(s->db, st, "update webhook", err) < 0)
        return -1;
    if (sqlite3_changes(s->db) == 0)
        return wr_err_set(err, WR_ENOTFOUND, 0, "no webhook `%s`", r->id);
    return 0;
}

int wr_store_webhook_delete(struct wr_store *s, const char *team, const char *id,
                            struct wr_err *err)
{
    /* Its deliveries go with it (ON DELETE CASCADE). */
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_WH_DELETE,
                 "DELETE FROM webhooks WHERE id = ?1 AND (?2 IS NULL OR team = ?2)", err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, id);
    wr__bind_text(st, 2, team);
    if (wr__step_done(s->db, st, "delete webhook", err) < 0)
        return -1;
    if (sqlite3_changes(s->db) == 0)
        return wr_err_set(err, WR_ENOTFOUND, 0, "no webhook `%s`", id);
    return 0;
}

int wr_store_delivery_insert(struct wr_store *s, struct wr_delivery_rec *r, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_WD_INSERT,
                 "INSERT INTO webhook_deliveries (uuid, webhook_id, team, event_id, type, body,"
                 " state, created_ms, next_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7, ?8)",
                 err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, r->uuid);
    wr__bind_text(st, 2, r->webhook_id);
    wr__bind_text(st, 3, r->team);
    wr__bind_int64(st, 4, r->event_id);
    wr__bind_text(st, 5, r->type);
    wr__bind_text(st, 6, r->body);
    wr__bind_int64(st, 7, r->created_ms);
    wr__bind_int64(st, 8, r->next_ms);
    if (wr__step_done(s->db, st, "insert webhook delivery", err) < 0)
        return -1;
    r->id = sqlite3_last_insert_rowid(s->db);
    return 0;
}

#define WD_COLS                                                                                    \
    "d.id, d.uuid, d.webhook_id, d.team, d.event_id, d.type, d.body, d.state, d.attempts,"         \
    " d.created_ms, d.next_ms, d.last_ms, d.last_status, d.last_error"

static void delivery_row(sqlite3_stmt *st, struct wr_delivery_rec *r)
{
    memset(r, 0, sizeof(*r));
    r->id = sqlite3_column_int64(st, 0);
    r->uuid = wr__col_text(st, 1);
    r->webhook_id = wr__col_text(st, 2);
    r->team = wr__col_text(st, 3);
    r->event_id = sqlite3_column_int64(st, 4);
    r->type = wr__col_text(st, 5);
    r->body = wr__col_text(st, 6);
    r->state = wr__col_text(st, 7);
    r->attempts = sqlite3_column_int64(st, 8);
    r->created_ms = sqlite3_column_int64(st, 9);
    r->next_ms = sqlite3_column_int64(st, 10);
    r->last_ms = sqlite3_column_int64(st, 11);
    r->last_status = sqlite3_column_int64(st, 12);
    r->last_error = wr__col_text(st, 13);
}

static void free_deliveries(struct wr_delivery_rec *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        wr_delivery_rec_fini(&v[i]);
    free(v);
}

/* The earliest due delivery of webhook_id into *r (r->id 0 if none). */
static int due_of(struct wr_store *s, const char *webhook_id, int64_t now,
                  struct wr_delivery_rec *r, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_WD_DUE_HOOK,
                 "SELECT " WD_COLS ", w.url, w.secret FROM webhook_deliveries d"
                 " JOIN webhooks w ON w.id = d.webhook_id WHERE d.webhook_id = ?1"
                 " AND d.state = 'pending' AND d.next_ms <= ?2 ORDER BY d.next_ms, d.id LIMIT 1",
                 err);
    int rc;

    memset(r, 0, sizeof(*r));
    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, webhook_id);
    wr__bind_int64(st, 2, now);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        delivery_row(st, r);
        r->url = wr__col_text(st, 14);
        r->secret = wr__col_text(st, 15);
    } else if (rc != SQLITE_DONE) {
        return wr__store_fail(s->db, err, "due webhook delivery");
    }
    return 0;
}

int wr_store_delivery_due(struct wr_store *s, int64_t now, size_t max, struct wr_delivery_rec **out,
                          size_t *n, struct wr_err *err)
{
    struct wr_delivery_rec *v;
    char **hooks;
    size_t nh = 0, cnt = 0;
    int rc = SQLITE_DONE;

    *out = NULL;
    *n = 0;
    hooks = xcalloc(max ? max : 1, sizeof(*hooks));
    {
        _cleanup_stmt_ sqlite3_stmt *st =
            wr__stmt(s, WR_ST_WD_DUE,
                     "SELECT DISTINCT d.webhook_id FROM webhook_deliveries d JOIN webhooks w"
                     " ON w.id = d.webhook_id WHERE d.state = 'pending' AND d.next_ms <= ?1"
                     " AND w.enabled LIMIT ?2",
                     err);
        if (st == NULL) {
            free(hooks);
            return -1;
        }
        wr__bind_int64(st, 1, now);
        wr__bind_int64(st, 2, (int64_t)max);
        while (nh < max && (rc = sqlite3_step(st)) == SQLITE_ROW)
            hooks[nh++] = wr__col_text(st, 0);
        if (nh < max && rc != SQLITE_DONE) {
            wr__store_fail(s->db, err, "due webhooks");
            for (size_t i = 0; i < nh; i++)
                free(hooks[i]);
            free(hooks);
            return -1;
        }
    }
    v = xcalloc(nh ? nh : 1, sizeof(*v));
    for (size_t i = 0; i < nh; i++) {
        if (due_of(s, hooks[i], now, &v[cnt], err) < 0) {
            for (size_t k = 0; k < nh; k++)
                free(hooks[k]);
            free(hooks);
            free_deliveries(v, cnt);
            return -1;
        }
        if (v[cnt].id != 0)
            cnt++;
    }
    for (size_t i = 0; i < nh; i++)
        free(hooks[i]);
    free(hooks);
    *out = v;
    *n = cnt;
    return 0;
}

int wr_store_delivery_lease(struct wr_store *s, int64_t id, int64_t until_ms, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(
        s, WR_ST_WD_LEASE, "UPDATE webhook_deliveries SET next_ms = ?2 WHERE id = ?1", err);

    if (st == NULL)
        return -1;
    wr__bind_int64(st, 1, id);
    wr__bind_int64(st, 2, until_ms);
    return wr__step_done(s->db, st, "lease webhook delivery", err);
}

int wr_store_delivery_next(struct wr_store *s, int64_t *at_ms, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_WD_NEXT,
                 "SELECT min(d.next_ms) FROM webhook_deliveries d JOIN webhooks w"
                 " ON w.id = d.webhook_id WHERE d.state = 'pending' AND w.enabled",
                 err);
    int rc;

    *at_ms = -1;
    if (st == NULL)
        return -1;
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW)
        return wr__store_fail(s->db, err, "next webhook delivery");
    if (sqlite3_column_type(st, 0) != SQLITE_NULL)
        *at_ms = sqlite3_column_int64(st, 0);
    return 0;
}

int wr_store_delivery_result(struct wr_store *s, const struct wr_delivery_rec *r,
                             struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_WD_RESULT,
                 "UPDATE webhook_deliveries SET state = ?2, attempts = ?3, next_ms = ?4,"
                 " last_ms = ?5, last_status = ?6, last_error = ?7 WHERE id = ?1",
                 err);

    if (st == NULL)
        return -1;
    wr__bind_int64(st, 1, r->id);
    wr__bind_text(st, 2, r->state);
    wr__bind_int64(st, 3, r->attempts);
    wr__bind_int64(st, 4, r->next_ms);
    wr__bind_int64(st, 5, r->last_ms);
    wr__bind_int64(st, 6, r->last_status);
    wr__bind_text(st, 7, r->last_error ? r->last_error : "");
    return wr__step_done(s->db, st, "webhook delivery result", err);
}

int wr_store_delivery_list(struct wr_store *s, const struct wr_delivery_filter *f,
                           struct wr_delivery_rec **out, size_t *n, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_WD_LIST,
                 "SELECT " WD_COLS " FROM webhook_deliveries d WHERE (?1 IS NULL OR d.team = ?1)"
                 " AND (?2 IS NULL OR d.webhook_id = ?2) AND (?3 IS NULL OR d.state = ?3)"
                 " AND d.id > ?4 ORDER BY d.id LIMIT ?5",
                 err);
    struct wr_delivery_rec *v = NULL;
    size_t cnt = 0, cap = 0, limit = f->limit ? f->limit : LIST_DEFAULT;
    int rc;

    *out = NULL;
    *n = 0;
    if (st == NULL)
        return -1;
    if (limit > LIST_MAX)
        limit = LIST_MAX;
    wr__bind_text(st, 1, f->team);
    wr__bind_text(st, 2, f->webhook_id);
    wr__bind_text(st, 3, f->state);
    wr__bind_int64(st, 4, f->after);
    wr__bind_int64(st, 5, (int64_t)limit);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            v = xrealloc(v, cap * sizeof(*v));
        }
        delivery_row(st, &v[cnt++]);
    }
    if (rc != SQLITE_DONE) {
        free_deliveries(v, cnt);
        return wr__store_fail(s->db, err, "list webhook deliveries");
    }
    *out = v;
    *n = cnt;
    return 0;
}

int wr_store_delivery_redeliver(struct wr_store *s, const char *team, const char *webhook_id,
                                int64_t id, int64_t now, struct wr_err *err)
{
    struct wr_delivery_filter f = {
        .team = team, .webhook_id = webhook_id, .after = id - 1, .limit = 1};
    struct wr_delivery_rec *v = NULL;
    size_t n = 0;
    bool pending;

    if (wr_store_delivery_list(s, &f, &v, &n, err) < 0)
        return -1;
    if (n == 0 || v[0].id != id) {
        free_deliveries(v, n);
        return wr_err_set(err, WR_ENOTFOUND, 0, "no delivery %lld of webhook `%s`", (long long)id,
                          webhook_id);
    }
    pending = strcmp(v[0].state, "pending") == 0;
    free_deliveries(v, n);
    if (pending)
        return wr_err_set(err, WR_ECONFLICT, 0, "delivery %lld is still pending", (long long)id);
    {
        _cleanup_stmt_ sqlite3_stmt *st =
            wr__stmt(s, WR_ST_WD_REDELIVER,
                     "UPDATE webhook_deliveries SET state = 'pending', attempts = 0, next_ms = ?2"
                     " WHERE id = ?1",
                     err);
        if (st == NULL)
            return -1;
        wr__bind_int64(st, 1, id);
        wr__bind_int64(st, 2, now);
        return wr__step_done(s->db, st, "redeliver", err);
    }
}

int wr_store_delivery_prune(struct wr_store *s, int64_t before_ms, int64_t max, int64_t *deleted,
                            struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_WD_PRUNE,
                 "DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM webhook_deliveries"
                 " WHERE state != 'pending' AND created_ms < ?1 ORDER BY id LIMIT ?2)",
                 err);

    *deleted = 0;
    if (st == NULL)
        return -1;
    wr__bind_int64(st, 1, before_ms);
    wr__bind_int64(st, 2, max);
    if (wr__step_done(s->db, st, "prune webhook deliveries", err) < 0)
        return -1;
    *deleted = sqlite3_changes(s->db);
    return 0;
}

int wr_store_event_page(struct wr_store *s, const char *team, const char *sandbox_id,
                        const char *types, bool asc, int64_t offset, size_t limit,
                        struct wr_event_rec **out, size_t *n, struct wr_err *err)
{
#define PAGE_SQL(order)                                                                            \
    "SELECT id, time_ms, team, sandbox_id, type, data FROM events WHERE (?1 IS NULL OR team = ?1)" \
    " AND (?2 IS NULL OR sandbox_id = ?2) AND type IN (SELECT value FROM json_each(?3))"           \
    " ORDER BY id " order " LIMIT ?5 OFFSET ?4"
    _cleanup_stmt_ sqlite3_stmt *st =
        asc ? wr__stmt(s, WR_ST_EVENT_PAGE_ASC, PAGE_SQL("ASC"), err)
            : wr__stmt(s, WR_ST_EVENT_PAGE_DESC, PAGE_SQL("DESC"), err);
#undef PAGE_SQL

    *out = NULL;
    *n = 0;
    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, team);
    wr__bind_text(st, 2, sandbox_id);
    wr__bind_text(st, 3, types);
    wr__bind_int64(st, 4, offset);
    wr__bind_int64(st, 5, (int64_t)limit);
    return wr__event_rows(s, st, out, n, "page events", err);
}

int wr_store_event_first_data(struct wr_store *s, const char *sandbox_id, const char *type,
                              char **data, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(
        s, WR_ST_EVENT_FIRST,
        "SELECT data FROM events WHERE sandbox_id = ?1 AND type = ?2 ORDER BY id LIMIT 1", err);
    int rc;

    *data = NULL;
    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, sandbox_id);
    wr__bind_text(st, 2, type);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *data = wr__col_text(st, 0);
    else if (rc != SQLITE_DONE)
        return wr__store_fail(s->db, err, "first event");
    return 0;
}
