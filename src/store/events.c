/* SPDX-License-Identifier: Apache-2.0 */
/* Lifecycle events' rows (see store.h and migration 14). */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

#include "../util/xalloc.h"

#define EVENT_LIST_MAX     1000
#define EVENT_LIST_DEFAULT 100

void wr_event_rec_fini(struct wr_event_rec *r)
{
    if (r == NULL)
        return;
    free(r->team);
    free(r->sandbox_id);
    free(r->type);
    free(r->data);
    memset(r, 0, sizeof(*r));
}

int wr_store_event_insert(struct wr_store *s, struct wr_event_rec *r, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(
        s, WR_ST_EVENT_INSERT,
        "INSERT INTO events (time_ms, team, sandbox_id, type, data) VALUES (?1, ?2, ?3, ?4, ?5)",
        err);

    if (st == NULL)
        return -1;
    wr__bind_int64(st, 1, r->time_ms);
    wr__bind_text(st, 2, r->team);
    wr__bind_text(st, 3, r->sandbox_id);
    wr__bind_text(st, 4, r->type);
    wr__bind_text(st, 5, r->data ? r->data : "{}");
    if (wr__step_done(s->db, st, "insert event", err) < 0)
        return -1;
    r->id = sqlite3_last_insert_rowid(s->db);
    return 0;
}

int wr__event_rows(struct wr_store *s, sqlite3_stmt *st, struct wr_event_rec **out, size_t *n,
                   const char *what, struct wr_err *err)
{
    struct wr_event_rec *v = NULL;
    size_t cnt = 0, cap = 0;
    int rc;

    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct wr_event_rec *r;
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            v = xrealloc(v, cap * sizeof(*v));
        }
        r = &v[cnt++];
        r->id = sqlite3_column_int64(st, 0);
        r->time_ms = sqlite3_column_int64(st, 1);
        r->team = wr__col_text(st, 2);
        r->sandbox_id = wr__col_text(st, 3);
        r->type = wr__col_text(st, 4);
        r->data = wr__col_text(st, 5);
    }
    if (rc != SQLITE_DONE) {
        for (size_t i = 0; i < cnt; i++)
            wr_event_rec_fini(&v[i]);
        free(v);
        return wr__store_fail(s->db, err, "%s", what);
    }
    *out = v;
    *n = cnt;
    return 0;
}

int wr_store_event_list(struct wr_store *s, const struct wr_event_filter *f,
                        struct wr_event_rec **out, size_t *n, struct wr_err *err)
{
    /* A type ending in '.' is a prefix ("sandbox." for every sandbox event). */
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_EVENT_LIST,
                 "SELECT id, time_ms, team, sandbox_id, type, data FROM events"
                 " WHERE (?1 IS NULL OR team = ?1) AND (?2 IS NULL OR sandbox_id = ?2)"
                 " AND (?3 IS NULL OR type = ?3 OR (substr(?3, -1) = '.'"
                 " AND substr(type, 1, length(?3)) = ?3)) AND id > ?4 ORDER BY id LIMIT ?5",
                 err);
    size_t limit = f->limit ? f->limit : EVENT_LIST_DEFAULT;

    *out = NULL;
    *n = 0;
    if (st == NULL)
        return -1;
    if (limit > EVENT_LIST_MAX)
        limit = EVENT_LIST_MAX;
    wr__bind_text(st, 1, f->team);
    wr__bind_text(st, 2, f->sandbox_id);
    wr__bind_text(st, 3, f->type);
    wr__bind_int64(st, 4, f->after);
    wr__bind_int64(st, 5, (int64_t)limit);
    return wr__event_rows(s, st, out, n, "list events", err);
}

int wr_store_event_prune(struct wr_store *s, int64_t before_ms, int64_t max, int64_t *deleted,
                         struct wr_err *err)
{
    /* Appended in time order: the old ones are the first ids (as the audit trail's prune). */
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_EVENT_PRUNE,
                 "DELETE FROM events WHERE id IN (SELECT id FROM (SELECT id, time_ms FROM events"
                 " ORDER BY id LIMIT ?2) WHERE time_ms < ?1)",
                 err);

    *deleted = 0;
    if (st == NULL)
        return -1;
    wr__bind_int64(st, 1, before_ms);
    wr__bind_int64(st, 2, max);
    if (wr__step_done(s->db, st, "prune events", err) < 0)
        return -1;
    *deleted = sqlite3_changes(s->db);
    return 0;
}
